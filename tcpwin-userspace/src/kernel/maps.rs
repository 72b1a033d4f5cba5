//! The object's maps as userspace reads and writes them: counters, the per-packet histogram, the
//! owner maps of `--pid`, the initial-window switch.
use std::collections::HashSet;

use anyhow::{Context, Result};
use aya::{
    maps::{Array, HashMap as BpfHashMap, PerCpuArray, PerCpuHashMap},
    Ebpf,
};
use tcpwin_common::{counter, init_defer, names, IfKey, PortKey, HIST_BUCKETS, MAX_OWNED_TGIDS};
use tcpwin_model::{
    hist::{Hist, Scale},
    metrics::Counts,
};

use crate::host::{
    ifname::IfNames,
    owner::{self, Owners},
};

/// Per-CPU counters summed, indexed by `tcpwin_common::counter` (hook hits first).
pub fn read_counters(bpf: &Ebpf) -> Result<Vec<u64>> {
    let arr: PerCpuArray<_, u64> =
        PerCpuArray::try_from(bpf.map(names::COUNTERS).context("COUNTERS map")?)?;
    (0..counter::COUNT)
        .map(|i| Ok(arr.get(&i, 0)?.iter().sum()))
        .collect()
}

/// The per-packet ratio histogram, per ingress interface (by name).
pub fn read_packet_hist(bpf: &Ebpf) -> Result<Vec<(String, Hist)>> {
    Ok(read_packet_counts(bpf, None)?
        .into_iter()
        .map(|(name, counts)| {
            let mut h = Hist::new(Scale::Linear(8));
            for (ratio, n) in counts {
                h.record_n(ratio, n);
            }
            (name, h)
        })
        .collect())
}

/// The per-packet histogram as exact counts: per interface (of the namespaces `netns`, or all),
/// the (ratio, packets) pairs with packets, by interface name.
pub fn read_packet_counts(bpf: &Ebpf, netns: Option<&[u32]>) -> Result<Vec<(String, Counts)>> {
    let slots: BpfHashMap<_, IfKey, u32> =
        BpfHashMap::try_from(bpf.map(names::IF_SLOTS).context("IF_SLOTS map")?)?;
    let hist: PerCpuArray<_, u64> =
        PerCpuArray::try_from(bpf.map(names::PKT_HIST).context("PKT_HIST map")?)?;
    let mut names = IfNames::default();
    let mut v = Vec::new();
    for item in slots.iter() {
        let (k, slot) = item?;
        if netns.is_some_and(|w| !w.contains(&k.netns)) {
            continue;
        }
        let mut counts = Vec::new();
        for ratio in 0..HIST_BUCKETS {
            let n: u64 = hist.get(&(slot * HIST_BUCKETS + ratio), 0)?.iter().sum();
            if n > 0 {
                counts.push((ratio as u64, n));
            }
        }
        if !counts.is_empty() {
            v.push((names.name(k.netns, k.ifindex), counts));
        }
    }
    v.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(v)
}

/// Tells the programs that an initial-window hook is attached (so `established` looks up what
/// it stashed; without one the lookup is skipped).
pub fn enable_init_matching(bpf: &mut Ebpf) -> Result<()> {
    let mut m: Array<_, u32> =
        Array::try_from(bpf.map_mut(names::INIT_HOOKED).context("INIT_HOOKED map")?)?;
    m.set(0, 1, 0)
        .context("enabling the initial-window matching")
}

/// Turns deferred `init`s on (or off): a socket's `init` leaves with its first other record, or
/// with a socket walk once it began before [`flush_inits_before`]'s time.
pub fn defer_inits(bpf: &mut Ebpf, on: bool) -> Result<()> {
    init_defer_set(bpf, init_defer::ON, on as u64)
}

/// The socket walks from now report every deferred `init` that began at or before `ns`
/// (`CLOCK_MONOTONIC`, as the programs read it).
pub fn flush_inits_before(bpf: &mut Ebpf, ns: u64) -> Result<()> {
    init_defer_set(bpf, init_defer::FLUSH_BEFORE_NS, ns)
}

fn init_defer_set(bpf: &mut Ebpf, slot: u32, v: u64) -> Result<()> {
    let mut m: Array<_, u64> =
        Array::try_from(bpf.map_mut(names::INIT_DEFER).context("INIT_DEFER map")?)?;
    m.set(slot, v, 0).context("setting the deferred inits")
}

/// Per namespace, the deferred `init`s that still wait (deferred less gone, over every CPU).
pub fn inits_waiting(bpf: &Ebpf) -> Result<Vec<(u32, u64)>> {
    let m: PerCpuHashMap<_, u32, [u64; 2]> =
        PerCpuHashMap::try_from(bpf.map(names::INITS_WAITING).context("INITS_WAITING map")?)?;
    let mut v = Vec::new();
    for item in m.iter() {
        let (ns, per_cpu) = item?;
        let (d, g) = per_cpu
            .iter()
            .fold((0u64, 0u64), |(d, g), c| (d + c[0], g + c[1]));
        if d > g {
            v.push((ns, d - g));
        }
    }
    Ok(v)
}

/// Keeps the kernel's owner maps equal to what /proc says the PID owns.
pub struct OwnerSync {
    pub owners: Owners,
    inodes: HashSet<u64>,
    ports: HashSet<PortKey>,
    cgroups: HashSet<u64>,
    processes: HashSet<u64>,
    /// the process table's overflow was said
    said_full: bool,
}

impl OwnerSync {
    pub fn new(owners: Owners) -> Self {
        OwnerSync {
            owners,
            inodes: HashSet::new(),
            ports: HashSet::new(),
            cgroups: HashSet::new(),
            processes: HashSet::new(),
            said_full: false,
        }
    }

    pub fn sync(&mut self, bpf: &mut Ebpf) -> Result<()> {
        let own = self.owners.scan()?;
        presence(bpf, names::OWNED_INODES, &own.inodes, &self.inodes)?;
        let ports: HashSet<PortKey> = own
            .listen_ports
            .iter()
            .map(|&port| PortKey {
                netns: own.netns,
                port,
                _pad: 0,
            })
            .collect();
        {
            let mut m: BpfHashMap<_, PortKey, u32> =
                BpfHashMap::try_from(bpf.map_mut(names::OWNED_PORTS).context("OWNED_PORTS map")?)?;
            // the value names the process the listener belongs to (0: a workload's)
            let tag = match self.owners {
                Owners::Pid(p) => p,
                Owners::Workload(_) => 0,
            };
            for p in ports.difference(&self.ports) {
                m.insert(p, tag, 0)?;
            }
        }
        // Ports are kept after the listener closes: its accepted children may still be traced.
        self.ports.extend(ports);
        self.inodes = own.inodes;
        presence(bpf, names::OWNED_CGROUPS, &own.cgroups, &self.cgroups)?;
        self.cgroups = own.cgroups;
        if let Owners::Pid(_) = self.owners {
            self.sync_processes(bpf, own.processes)?;
        }
        Ok(())
    }

    /// The processes a `--pid` trace follows: its tree as /proc shows it now, and the children
    /// the kernel followed at their fork since (they are not in `self.processes`). A process is
    /// let go once it has ended (a child reparented away from the tree is still the trace's): the
    /// map holds no process id a later, unrelated process could be given.
    fn sync_processes(&mut self, bpf: &mut Ebpf, mut tree: HashSet<u64>) -> Result<()> {
        let mut m: BpfHashMap<_, u64, u8> =
            BpfHashMap::try_from(bpf.map_mut(names::OWNED_TGIDS).context("OWNED_TGIDS map")?)?;
        let ended: Vec<u64> = m
            .keys()
            .filter_map(Result::ok)
            .filter(|p| u32::try_from(*p).map_or(true, owner::has_ended))
            .collect();
        for p in &ended {
            let _ = m.remove(p);
        }
        // a process the map has no room for is still found by its sockets at each look; it is
        // tried again at the next one
        let refused: Vec<u64> = tree
            .difference(&self.processes)
            .filter(|p| m.insert(*p, 1, 0).is_err())
            .copied()
            .collect();
        if !refused.is_empty() && !self.said_full {
            self.said_full = true;
            eprintln!(
                "tcpwin-trace: more processes to follow than the kernel's table holds ({MAX_OWNED_TGIDS}): {} of them are found by their sockets every 100 ms instead of at connect()",
                refused.len()
            );
        }
        for p in &refused {
            tree.remove(p);
        }
        self.processes = tree;
        Ok(())
    }
}

/// A presence map (`u64` keys, value 1) moved from `before` to `now`: new keys in, gone ones out.
fn presence(bpf: &mut Ebpf, name: &str, now: &HashSet<u64>, before: &HashSet<u64>) -> Result<()> {
    if now == before {
        return Ok(());
    }
    let mut m: BpfHashMap<_, u64, u8> =
        BpfHashMap::try_from(bpf.map_mut(name).with_context(|| format!("{name} map"))?)?;
    for k in now.difference(before) {
        m.insert(k, 1, 0)?;
    }
    for k in before.difference(now) {
        let _ = m.remove(k);
    }
    Ok(())
}
