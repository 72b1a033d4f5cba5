//! A tracing session: load with the running kernel's offsets, attach, keep the PID's sockets
//! fresh, read the ring buffer (tokio), stop on Ctrl-C / SIGTERM / --duration / PID exit, detach
//! cleanly and print the summary.
use std::{
    borrow::Cow,
    collections::HashSet,
    io::{BufWriter, Write},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use aya::{
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf},
    Ebpf, EbpfLoader, Endianness,
};
use tcpwin_common::{counter, hook, names, Config, IfKey, PortKey, HIST_BUCKETS};
use tokio::{
    io::unix::AsyncFd,
    signal::unix::{signal, SignalKind},
};

use crate::{
    attach::{self, Attached},
    btf::{Layout, Resolver},
    cli::TraceArgs,
    hist::{Hist, Scale},
    ifname::IfNames,
    output::{self, Summary},
    owner,
    record::{self, Record},
    sockets::Sockets,
};

#[repr(C, align(32))]
pub struct Aligned<B: ?Sized>(pub B);

/// The kernel side, built by `cargo xtask build-ebpf` (see build.rs).
pub static EMBEDDED: &Aligned<[u8]> = &Aligned(*include_bytes!(env!("TCPWIN_EBPF_OBJ_PATH")));

/// Refuses early, with the fix, when the process cannot load tracing programs.
pub fn check_privileges() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    const CAP_SYS_ADMIN: u64 = 21;
    const CAP_PERFMON: u64 = 38;
    const CAP_BPF: u64 = 39;
    let has = |c: u64| cap_eff & (1 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    bail!("tcpwin-trace loads kernel tracing programs: run it as root (sudo), or give it CAP_BPF and CAP_PERFMON (setcap cap_bpf,cap_perfmon,cap_sys_ptrace+ep)")
}

/// `tcp_adv_win_scale` as a ratio in 256ths (pre-6.6 `tcp_win_from_space`): for n > 0 the
/// window is space - space>>n, for n <= 0 it is space>>-n.
pub fn adv_win_scale_ratio(n: i32) -> u32 {
    if n > 0 {
        256 - (256 >> n.min(31))
    } else {
        256 >> (-n).min(31)
    }
}

fn legacy_note() -> String {
    let scale = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_adv_win_scale")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    match scale {
        Some(n) => format!(
            "tcp_sock.scaling_ratio is absent (kernel before 6.6): the window comes from tcp_adv_win_scale={n}, \
             equivalent to a fixed ratio of {}/256; scaling_ratio is reported as null",
            adv_win_scale_ratio(n)
        ),
        None => "tcp_sock.scaling_ratio is absent (kernel before 6.6): scaling_ratio is reported as null".into(),
    }
}

fn load(args: &TraceArgs, layout: &Layout, btf: &aya::Btf) -> Result<Ebpf> {
    let config = Config {
        target_tgid: args.pid.unwrap_or(0),
        filter_pid: args.pid.is_some() as u8,
        _pad: 0,
        port: args.port.unwrap_or(0),
    };
    let bytes: Cow<[u8]> = match &args.obj {
        Some(p) => {
            Cow::Owned(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?)
        }
        None => Cow::Borrowed(&EMBEDDED.0),
    };
    let _ = raise_memlock();
    EbpfLoader::new()
        .btf(Some(btf))
        .override_global(names::OFFSETS, &layout.offsets, true)
        .override_global(names::CONFIG, &config, true)
        .map_max_entries(names::EVENTS, args.ringbuf_kib * 1024)
        .load(&bytes)
        .map_err(|e| {
            let text = format!("{e:#}");
            if text.contains("Operation not permitted") {
                anyhow::anyhow!("creating BPF maps was refused ({text}): run as root (sudo)")
            } else {
                anyhow::anyhow!("loading the eBPF object failed: {text}")
            }
        })
}

/// Harmless where it fails (5.11+ charges BPF memory to the cgroup instead).
fn raise_memlock() -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: valid rlimit struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Keeps the kernel's owner maps equal to what /proc says the PID owns.
struct OwnerSync {
    pid: u32,
    inodes: HashSet<u64>,
    ports: HashSet<PortKey>,
}

impl OwnerSync {
    fn sync(&mut self, bpf: &mut Ebpf) -> Result<()> {
        let own = owner::scan(self.pid)?;
        {
            let mut m: BpfHashMap<_, u64, u8> = BpfHashMap::try_from(
                bpf.map_mut(names::OWNED_INODES)
                    .context("OWNED_INODES map")?,
            )?;
            for ino in own.inodes.difference(&self.inodes) {
                m.insert(ino, 1, 0)?;
            }
            for ino in self.inodes.difference(&own.inodes) {
                let _ = m.remove(ino);
            }
        }
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
            for p in ports.difference(&self.ports) {
                m.insert(p, self.pid, 0)?;
            }
        }
        // Ports are kept after the listener closes: its accepted children may still be traced.
        self.ports.extend(ports);
        self.inodes = own.inodes;
        Ok(())
    }
}

struct Out {
    json: bool,
    quiet: bool,
    pid: Option<u32>,
    t0_ns: u64,
    w: BufWriter<std::io::Stdout>,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[derive(Default)]
struct Stats {
    received: u64,
    decode_errors: u64,
}

fn drain(
    ring: &mut RingBuf<MapData>,
    out: &mut Out,
    socks: &mut Sockets,
    stats: &mut Stats,
) -> Result<()> {
    while let Some(item) = ring.next() {
        stats.received += 1;
        match record::decode(&item) {
            Ok(mut r) => {
                socks.update(&mut r);
                emit(out, &r)?;
            }
            Err(e) => {
                stats.decode_errors += 1;
                eprintln!("tcpwin-trace: undecodable event: {e}");
            }
        }
    }
    out.w.flush()?;
    Ok(())
}

fn emit(out: &mut Out, r: &Record) -> Result<()> {
    if out.quiet {
        return Ok(());
    }
    if out.json {
        writeln!(out.w, "{}", r.to_json(out.pid))?;
    } else {
        writeln!(out.w, "{}", output::text_line(r, out.t0_ns, out.pid))?;
    }
    Ok(())
}

fn announce(attached: &Attached, layout: &Layout, args: &TraceArgs) {
    let target = match (args.pid, args.port) {
        (Some(p), Some(port)) => format!("sockets of pid {p} with port {port}"),
        (Some(p), None) => format!("sockets of pid {p} (listeners' children included)"),
        (None, Some(port)) => format!("TCP sockets with port {port}"),
        (None, None) => "every TCP socket on the host".into(),
    };
    eprintln!(
        "tcpwin-trace: backend {} (hooks {})",
        attached.backend,
        attached.hook_list()
    );
    for (b, why) in &attached.rejected {
        eprintln!("tcpwin-trace: backend {b} not used: {why}");
    }
    for n in &attached.notes {
        eprintln!("tcpwin-trace: note: {n}");
    }
    if !layout.has_scaling_ratio() {
        eprintln!("tcpwin-trace: {}", legacy_note());
    }
    for (field, why) in &layout.absent {
        if field != "tcp_sock.scaling_ratio" {
            eprintln!("tcpwin-trace: {field} {why}: reported as absent");
        }
    }
    let stop = match args.duration {
        Some(d) => format!("for {d} s"),
        None => "until Ctrl-C".into(),
    };
    eprintln!("tcpwin-trace: tracing {target} {stop}");
}

fn read_counters(bpf: &Ebpf) -> Result<Vec<u64>> {
    let arr: PerCpuArray<_, u64> =
        PerCpuArray::try_from(bpf.map(names::COUNTERS).context("COUNTERS map")?)?;
    (0..counter::COUNT)
        .map(|i| Ok(arr.get(&i, 0)?.iter().sum()))
        .collect()
}

fn read_packet_hist(bpf: &Ebpf) -> Result<Vec<(String, Hist)>> {
    let slots: BpfHashMap<_, IfKey, u32> =
        BpfHashMap::try_from(bpf.map(names::IF_SLOTS).context("IF_SLOTS map")?)?;
    let hist: PerCpuArray<_, u64> =
        PerCpuArray::try_from(bpf.map(names::PKT_HIST).context("PKT_HIST map")?)?;
    let mut names = IfNames::default();
    let mut v = Vec::new();
    for item in slots.iter() {
        let (k, slot) = item?;
        let mut h = Hist::new(Scale::Linear(8));
        for ratio in 0..HIST_BUCKETS {
            let n: u64 = hist.get(&(slot * HIST_BUCKETS + ratio), 0)?.iter().sum();
            if n > 0 {
                h.record_n(ratio as u64, n);
            }
        }
        if h.count() > 0 {
            v.push((names.name(k.netns, k.ifindex), h));
        }
    }
    v.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(v)
}

pub async fn run(args: TraceArgs) -> Result<()> {
    args.validate()?;
    check_privileges()?;
    let layout = Resolver::from_file(&args.btf)?.layout()?;
    let btf = aya::Btf::parse_file(&args.btf, Endianness::default())
        .with_context(|| format!("aya cannot parse BTF from {}", args.btf.display()))?;
    let mut bpf = load(&args, &layout, &btf)?;
    let attached = attach::attach(&mut bpf, &btf, args.backend)?;
    if attached
        .hooks
        .iter()
        .any(|h| h.target == "tcp_select_initial_window")
    {
        let mut m: aya::maps::Array<_, u32> = aya::maps::Array::try_from(
            bpf.map_mut(names::INIT_HOOKED).context("INIT_HOOKED map")?,
        )?;
        m.set(0, 1, 0)
            .context("enabling the initial-window matching")?;
    }

    // Before saying "tracing": a signal from then on must reach the clean shutdown path.
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut owner = args.pid.map(|pid| OwnerSync {
        pid,
        inodes: HashSet::new(),
        ports: HashSet::new(),
    });
    if let Some(o) = owner.as_mut() {
        o.sync(&mut bpf)?;
    }
    announce(&attached, &layout, &args);

    let ring = RingBuf::try_from(bpf.take_map(names::EVENTS).context("EVENTS map")?)?;
    // SAFETY: the ring buffer owns its fd and keeps it open for as long as the AsyncFd lives.
    let mut ring = unsafe { AsyncFd::register_with_interest(ring, tokio::io::Interest::READABLE) }
        .map_err(|e| anyhow::anyhow!("polling the ring buffer: {}", e.into_parts().1))?;
    let mut out = Out {
        json: args.json,
        quiet: args.quiet,
        pid: args.pid,
        t0_ns: monotonic_ns(),
        w: BufWriter::new(std::io::stdout()),
    };
    let mut socks = Sockets::default();
    let mut stats = Stats::default();
    let started = Instant::now();
    let deadline = args.duration.map(|d| started + Duration::from_secs_f64(d));
    let mut refresh = tokio::time::interval(Duration::from_millis(100));
    let sleep = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep);
    let stop_reason = loop {
        tokio::select! {
            guard = ring.readable_mut() => {
                let mut guard = guard?;
                drain(guard.get_inner_mut(), &mut out, &mut socks, &mut stats)?;
                guard.clear_ready();
            }
            _ = sigint.recv() => break "SIGINT".to_string(),
            _ = sigterm.recv() => break "SIGTERM".to_string(),
            _ = &mut sleep => break "duration".to_string(),
            _ = refresh.tick() => {
                // the kernel side wakes us only when the ring fills up (see emit.rs)
                drain(ring.get_mut(), &mut out, &mut socks, &mut stats)?;
                if let Some(o) = owner.as_mut() {
                    if !std::path::Path::new(&format!("/proc/{}", o.pid)).exists() {
                        eprintln!("tcpwin-trace: process {} exited; stopping", o.pid);
                        break format!("process {} exited", o.pid);
                    }
                    if let Err(e) = o.sync(&mut bpf) {
                        eprintln!("tcpwin-trace: process {} is gone ({e:#}); stopping", o.pid);
                        break format!("process {} exited", o.pid);
                    }
                }
            }
        }
    };
    // Detach first, then drain what is already in the ring buffer, then count.
    let missed_runs = attach::recursion_misses(&bpf, &attached.hooks);
    attach::release(&mut bpf, &attached.hooks);
    drain(ring.get_mut(), &mut out, &mut socks, &mut stats)?;

    let c = read_counters(&bpf)?;
    let finals = socks.finish();
    let packet_ratio = read_packet_hist(&bpf)?;
    // data packets: what the in-kernel histogram counted (no per-packet counter on the hot path)
    let packets: u64 = packet_ratio.iter().map(|(_, h)| h.count()).sum();
    let summary = Summary {
        backend: attached.backend,
        hooks: attached.hook_list(),
        duration_s: started.elapsed().as_secs_f64(),
        stop_reason,
        hook_hits: hook::NAMES.iter().zip(&c).map(|(n, v)| (*n, *v)).collect(),
        counters: vec![
            ("due", c[counter::EVENTS_DUE as usize]),
            ("sent", c[counter::EVENTS_SENT as usize]),
            ("dropped", c[counter::EVENTS_DROPPED as usize]),
            ("filtered_hits", c[counter::FILTERED as usize]),
            ("state_full", c[counter::STATE_FULL as usize]),
            ("packets", packets),
            ("hist_full", c[counter::HIST_FULL as usize]),
            ("recheck_skipped", c[counter::RECHECK_SKIPPED as usize]),
            ("hook_runs_missed", missed_runs),
        ],
        received: stats.received,
        decode_errors: stats.decode_errors,
        sockets: finals.sockets,
        packet_ratio,
        scaling_ratio: finals.scaling_ratio,
        window_clamp: finals.window_clamp,
        rcv_ssthresh: finals.rcv_ssthresh,
        scaling_ratio_present: layout.has_scaling_ratio(),
        lost: c[counter::EVENTS_DROPPED as usize]
            + c[counter::EVENTS_SENT as usize].saturating_sub(stats.received),
    };
    if args.json {
        writeln!(out.w, "{}", summary.to_json())?;
    } else {
        summary.render(&mut out.w)?;
    }
    out.w.flush()?;
    if missed_runs > 0 {
        eprintln!(
            "tcpwin-trace: the kernel skipped {missed_runs} hook runs (a hook fired on a CPU where the same program was running, e.g. a softirq interrupting it): a change there is reported at the socket's next hook, an init or close there is missed"
        );
    }
    if summary.lost > 0 {
        eprintln!(
            "tcpwin-trace: {} events lost (ring buffer full); see the summary",
            summary.lost
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adv_win_scale_equivalents() {
        // the kernel's old tcp_win_from_space: n=1 gives half the buffer, n=2 three quarters
        assert_eq!(adv_win_scale_ratio(1), 128);
        assert_eq!(adv_win_scale_ratio(2), 192);
        assert_eq!(adv_win_scale_ratio(0), 256);
        assert_eq!(adv_win_scale_ratio(-1), 128);
        assert_eq!(adv_win_scale_ratio(-2), 64);
        assert_eq!(adv_win_scale_ratio(31), 256);
        assert_eq!(adv_win_scale_ratio(-31), 0);
    }
}
