//! The tracer's verdicts: once a second the traced sockets are read through the tracer's own
//! socket iterator (inside their namespaces) and judged over the last interval; a verdict line
//! leaves when a socket's binding limit changes, and a final one when it closes or the trace
//! ends. The same reading finds the changes no hook reported (see `Sockets::catch_up`).
use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use tcpwin_common::Offsets;
use tcpwin_model::{
    facts::SockFacts,
    judge::{Changes, Judge},
    schema::{SampleLine, VerdictLine},
    verdict::{Basis, Limit},
};

use super::snapshot;
use crate::{
    host::netns::{self, Netns},
    kernel::tracer::Tracer,
};

/// What one reading of the traced sockets gave.
pub struct Tick {
    /// verdicts whose limit changed
    pub verdicts: Vec<VerdictLine>,
    /// every socket read, with its verdict over the interval (none on its first reading)
    pub samples: Vec<SampleLine>,
    /// the facts read (for the changes no hook reported)
    pub read: Vec<SockFacts>,
}

pub struct TracedVerdicts {
    hz: Option<u32>,
    offsets: Offsets,
    namespaces: HashMap<u64, Netns>,
    judge: Judge,
    changes: Changes,
    /// `--peer`: the other ends, asked at each reading and judged with ours
    peers: Option<super::peer::Peers>,
    /// `--port`, narrowing what the peers are asked for
    port: Option<u16>,
    /// with deferred `init`s: when the last reading began (each reading flushes those that
    /// began before the one before it: they waited a second)
    inits_cut_ns: Option<u64>,
}

impl TracedVerdicts {
    /// `target_bps`: the rate the verdicts' fixes are sized for (`--target`).
    pub fn new(hz: Option<u32>, offsets: Offsets, target_bps: Option<u64>) -> TracedVerdicts {
        TracedVerdicts {
            hz,
            offsets,
            namespaces: HashMap::new(),
            judge: Judge::new(target_bps),
            changes: Changes::default(),
            peers: None,
            port: None,
            inits_cut_ns: None,
        }
    }

    /// Judges each connection with its other end as `peers` read it (`--peer`), asked for the
    /// sockets of `port` (`--port`) towards this host.
    pub fn with_peers(mut self, peers: Option<super::peer::Peers>, port: Option<u16>) -> Self {
        self.peers = peers;
        self.port = port;
        self
    }

    /// Defers the tracer's `init`s to each socket's first other record: this reading, once a
    /// second, reports those that waited (see [`TracedVerdicts::tick`]).
    pub fn with_deferred_inits(mut self, tracer: &mut Tracer) -> Result<Self> {
        crate::kernel::maps::defer_inits(&mut tracer.bpf, true)?;
        self.inits_cut_ns = Some(0);
        Ok(self)
    }

    /// Before the hooks are detached: `init`s leave at ESTABLISHED again, and every one that
    /// waits is reported (a socket closing meanwhile still carries its own).
    pub fn stop_deferring(&mut self, tracer: &mut Tracer) -> Result<()> {
        if self.inits_cut_ns.is_none() {
            return Ok(());
        }
        crate::kernel::maps::defer_inits(&mut tracer.bpf, false)?;
        self.flush_inits(tracer, &[], true)
    }

    /// The walks from now report the deferred `init`s that began before the last reading (or,
    /// `all`, every one), and the namespaces where some wait that the reading of `live` does not
    /// walk are walked for them. Before a reading.
    fn flush_inits(&mut self, tracer: &mut Tracer, live: &[(u64, u32)], all: bool) -> Result<()> {
        let Some(cut) = self.inits_cut_ns else {
            return Ok(());
        };
        let now = crate::host::monotonic_ns();
        crate::kernel::maps::flush_inits_before(&mut tracer.bpf, if all { u64::MAX } else { cut })?;
        self.inits_cut_ns = Some(now);
        for (ns, _) in crate::kernel::maps::inits_waiting(&tracer.bpf)? {
            if live.iter().any(|(_, l)| *l == ns) {
                continue;
            }
            // a namespace gone since: its sockets went with it (counted as lost at the end)
            let Some(target) = self.namespace(ns as u64) else {
                continue;
            };
            let _inside = netns::enter(&target)?;
            tracer.read_sockets()?;
        }
        Ok(())
    }

    /// The deferred `init`s that never reached the trace (after the last reading).
    pub fn inits_lost(&self, tracer: &Tracer) -> u64 {
        if self.inits_cut_ns.is_none() {
            return 0;
        }
        crate::kernel::maps::inits_waiting(&tracer.bpf)
            .map(|w| w.iter().map(|(_, n)| n).sum())
            .unwrap_or(0)
    }

    /// The namespace with this inode (named, or one a process lives in), looked up again when
    /// unknown: a namespace created during the trace.
    fn namespace(&mut self, inode: u64) -> Option<Netns> {
        if !self.namespaces.contains_key(&inode) {
            if let Ok(all) = netns::resolve(Some("all")) {
                self.namespaces = all.into_iter().map(|n| (n.inode, n)).collect();
            }
        }
        self.namespaces.get(&inode).cloned()
    }

    /// Reads the live traced sockets `(cookie, netns)` through the tracer's iterator, inside
    /// their namespaces.
    pub fn read(
        &mut self,
        tracer: &mut Tracer,
        live: &[(u64, u32)],
    ) -> Result<Vec<snapshot::Seen>> {
        self.flush_inits(tracer, live, false)?;
        self.read_live(tracer, live)
    }

    /// The last reading: [`TracedVerdicts::read`], with every deferred `init` still waiting
    /// reported.
    pub fn read_last(
        &mut self,
        tracer: &mut Tracer,
        live: &[(u64, u32)],
    ) -> Result<Vec<snapshot::Seen>> {
        self.flush_inits(tracer, live, true)?;
        self.read_live(tracer, live)
    }

    fn read_live(
        &mut self,
        tracer: &mut Tracer,
        live: &[(u64, u32)],
    ) -> Result<Vec<snapshot::Seen>> {
        let mut by_ns: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for (c, ns) in live {
            by_ns.entry(*ns).or_default().push(*c);
        }
        let mut seen = Vec::new();
        for (ns, cookies) in by_ns {
            // a namespace gone since: its sockets are closing, their close reports them
            let Some(target) = self.namespace(ns as u64) else {
                continue;
            };
            let keep = |f: &SockFacts| f.id.cookie.is_some_and(|c| cookies.contains(&c));
            let (offsets, hz) = (self.offsets, self.hz);
            let mut facts = |each: &mut dyn FnMut(SockFacts)| -> Result<()> {
                let ts = crate::host::monotonic_ns();
                snapshot::record_facts(tracer.read_sockets()?, &offsets, hz, ts, each);
                Ok(())
            };
            if let Ok(s) = snapshot::read_with(&mut facts, &[target], &keep) {
                seen.extend(s);
            }
        }
        Ok(seen)
    }

    /// Judges the live traced sockets `(cookie, netns)`: the verdicts that changed, a sample of
    /// every socket read (a recording's time series), and the facts read.
    pub fn tick(&mut self, tracer: &mut Tracer, live: &[(u64, u32)]) -> Result<Tick> {
        let mut seen = self.read(tracer, live)?;
        // the peers' ends of the same connections: judged with ours, reported as ours only
        let ours = seen.len();
        if let Some(p) = self.peers.as_mut() {
            let theirs = p.read(&seen, self.port);
            seen.extend(theirs);
            for n in p.news() {
                eprintln!("tcpwin-trace: {n}");
            }
        }
        let mut verdicts = self.judge.judge(seen.iter().map(|s| (&s.facts, &*s.host)));
        verdicts.truncate(ours);
        seen.truncate(ours);
        let mut out = Vec::new();
        let mut samples = Vec::with_capacity(seen.len());
        for (s, v) in seen.iter().zip(verdicts) {
            // a socket's first reading has no interval yet: nothing to judge over
            if v.basis == Basis::Life {
                samples.push(SampleLine::new(&s.facts, None));
                continue;
            }
            samples.push(SampleLine::new(&s.facts, Some(&v)));
            out.extend(self.changes.observe(&s.facts, v));
        }
        Ok(Tick {
            verdicts: out,
            samples,
            read: seen.into_iter().map(|s| s.facts).collect(),
        })
    }

    /// The socket closed at `at_ns`: its last verdict, as final.
    pub fn close(&mut self, cookie: u64, at_ns: u64) -> Option<VerdictLine> {
        self.changes.close(cookie, at_ns)
    }

    /// Which way data flows on a socket, by its last verdict.
    pub fn side(&self, cookie: u64) -> Option<tcpwin_model::verdict::Side> {
        self.changes.side(cookie)
    }

    /// The trace ends: the last verdict of every socket still open, as final; and the count of
    /// sockets by final verdict.
    pub fn finish(&mut self) -> (Vec<VerdictLine>, BTreeMap<Limit, u64>) {
        let lines = self.changes.finish(crate::host::monotonic_ns());
        (lines, std::mem::take(&mut self.changes.finals))
    }
}
