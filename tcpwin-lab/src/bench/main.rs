//! `tcpwin-bench` (run by `cargo xtask bench`): what tracing costs, measured on bulk transfers
//! between two namespaces over veth, in paired runs (untraced, then each traced mode,
//! alternating), with both ends pinned to one CPU. Prints ratios and medians, never asserts.
//!
//! Modes: `default` (tcpwin-trace, change-only events), `bpftrace` (Debian's bpftrace reading
//! the same fields from the same tracepoints), `ss-poll` (`ss -tinm` every 100 ms). The tool has
//! no per-packet raw mode: per-packet facts are aggregated in the kernel by design.
//!
//! - `observers`: what watches a traced run; `stats`: what a run cost; `report`: the tables.
use std::{
    collections::HashMap,
    path::PathBuf,
    process::Command,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use clap::Parser;
use tcpwin_lab::{
    harness::{check_stop, require_root, Transfer},
    pair::Pair,
};
use tcpwin_model::schema::parse_trace;

mod measure;
mod observers;
mod output;
mod same;
mod sockets;

use measure::{
    bpf_stats, cpu_seconds, peak_rss_bytes, proc_cpu_seconds, program_ids, stats_delta, BpfStats,
    ProgStats,
};
use observers::{load_empty, start_observer, Observer};
use output::{report, report_churn};

const PORT: u16 = 5402;

#[derive(Parser, Debug)]
#[command(
    name = "tcpwin-bench",
    version,
    about = "What tracing costs: paired veth transfers, untraced vs each observer; prints ratios (run it with `cargo xtask bench`)"
)]
struct BenchArgs {
    /// Paired runs per mode
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Bytes per transfer
    #[arg(long, default_value_t = 2 << 30)]
    pub bytes: u64,
    /// One JSON object per mode
    #[arg(long)]
    pub json: bool,
    /// Skip the bpftrace and ss peers
    #[arg(long)]
    pub no_peers: bool,
    /// Attach the empty program alongside the tracer in `default` runs: a floor measured in the
    /// same runs (the floor moves between runs on a VM), at the price of one more program per hit
    #[arg(long)]
    pub floor_alongside: bool,
    /// Short connections per batch of a churn run (sequential, 1 KiB each, untraced/default
    /// pairs; batches repeat until the run has lasted 3 s); 0 skips the churn table
    #[arg(long, default_value_t = 5000)]
    pub churn: u32,
    /// Socket counts for the `ss` table (tcpwin-trace ss vs ss -tin, and the exporter's
    /// scrape, at each count); 0 skips it
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000")]
    pub ss_sockets: Vec<usize>,
    /// (internal) hold N loopback sockets in the namespace --hold-netns until stdin closes: the
    /// `ss` table's sockets, spread over processes (a process may hold 20,000 here)
    #[arg(long, hide = true, value_name = "N")]
    pub hold_sockets: Option<usize>,
    #[arg(long, hide = true, value_name = "NAME")]
    pub hold_netns: Option<String>,
    /// The tracer to measure (default: tcpwin-trace beside this binary)
    #[arg(long, value_name = "PATH")]
    pub tracer: Option<PathBuf>,
    /// The tracer's eBPF object, for the empty calibration program (default: what
    /// `cargo xtask build-ebpf` built)
    #[arg(long, value_name = "PATH")]
    pub obj: Option<PathBuf>,
    /// Runs per attach order of the same-packets table (two observers attached together on
    /// the same hooks, each one's cost over the identical hits); 0 skips it
    #[arg(long, default_value_t = 3)]
    pub same_runs: usize,
    /// Bytes per transfer of the same-packets table
    #[arg(long, default_value_t = 1 << 30)]
    pub same_bytes: u64,
    /// The tracer's object built without log code (`--features nolog`; `cargo xtask bench`
    /// builds it): the same-packets table compares it with the tracer's, log off
    #[arg(long, value_name = "PATH")]
    pub nolog_obj: Option<PathBuf>,
}

/// Where the tracer and its object are.
struct Env {
    tracer: PathBuf,
    obj: PathBuf,
    /// the process `other-pid` runs follow (started for the churn table)
    idle_pid: Option<u32>,
}

impl Env {
    fn new(args: &BenchArgs) -> Result<Env> {
        let tracer = match &args.tracer {
            Some(p) => p.clone(),
            None => std::env::current_exe()
                .context("locating tcpwin-bench")?
                .with_file_name("tcpwin-trace"),
        };
        let obj = args.obj.clone().unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../tcpwin-ebpf/target/bpfel-unknown-none/release/tcpwin")
        });
        if !tracer.exists() {
            bail!(
                "the tracer {} is missing: build it with `cargo xtask build` or pass --tracer",
                tracer.display()
            );
        }
        if !obj.exists() {
            bail!(
                "the eBPF object {} is missing: build it with `cargo xtask build-ebpf` or pass --obj",
                obj.display()
            );
        }
        Ok(Env {
            tracer,
            obj,
            idle_pid: None,
        })
    }
}

/// What one run moves through the namespace pair.
#[derive(Clone, Copy)]
enum Work {
    /// one connection, this many bytes
    Bulk(u64),
    /// this many short connections (1 KiB each), one after the other
    Churn(u32),
}

const CHURN_BYTES: u64 = 1024;
/// A churn run lasts at least this long (see `one_run`).
const CHURN_SECS: Duration = Duration::from_secs(3);

/// The empty program's name in the object and in bpftool's listing (kernel names are cut at 15
/// characters).
const FLOOR_PROG: &str = "calib_tcp_probe";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Mode {
    Untraced,
    /// an empty tp_btf program on tcp:tcp_probe: the floor any program on the hook pays
    Empty,
    /// empty programs on all four hooks of the tracer: the floor of a short connection
    EmptyAll,
    Default,
    /// the tracer with a port filter that rules the bench's connections out (`--port` another)
    Filtered,
    /// the tracer following an idle process (`--pid` of a process that owns no socket): every
    /// connection is asked whose it is, and is not the trace's
    OtherPid,
    Bpftrace,
    /// bpftrace's tcplife: one line per closed connection (see `observers::TCPLIFE_SCRIPT`)
    Tcplife,
    SsPoll,
    /// `tcpwin-trace exporter` (its state hook; nobody scrapes during the run)
    Exporter,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::Empty => "empty-tp",
            Mode::EmptyAll => "empty-all",
            Mode::Default => "default",
            Mode::Filtered => "filtered",
            Mode::OtherPid => "other-pid",
            Mode::Bpftrace => "bpftrace",
            Mode::Tcplife => "tcplife",
            Mode::SsPoll => "ss-poll",
            Mode::Exporter => "exporter",
        }
    }
}

#[derive(Default, Debug, Clone)]
struct Sample {
    throughput_bps: f64,
    cpu_per_gb: f64,
    bpf_ns: u64,
    bpf_hits: u64,
    per_prog: ProgStats,
    transfer_cpu_s: f64,
    /// gigabytes (1e9 bytes) transferred
    gb: f64,
    /// connections made
    conns: u32,
    wall_s: f64,
    drops: Option<u64>,
    events_per_sec: Option<f64>,
    changes_seen: Option<u64>,
    /// the tracer's records: each fact it handed the trace (a merged `init` and the record it
    /// rode with count two)
    records_seen: Option<u64>,
    tracer_cpu_share: Option<f64>,
    tracer_rss: Option<u64>,
}

/// Pins the calling thread (and so the processes it spawns) to one CPU, or back to all.
fn pin_this_thread(cpu: Option<usize>) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let n = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
        match cpu {
            Some(c) => libc::CPU_SET(c.min(n - 1), &mut set),
            None => (0..n).for_each(|c| libc::CPU_SET(c, &mut set)),
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn one_run(
    pair: &Pair,
    env: &Env,
    mode: Mode,
    work: Work,
    floor_alongside: bool,
) -> Result<Sample> {
    // the observer's programs are the ones that appear when it starts
    let ids_before = program_ids();
    let _floor = match mode {
        Mode::Default if floor_alongside => Some(load_empty(&env.obj)?),
        _ => None,
    };
    let obs = start_observer(mode, pair, env)?;
    let ids = new_programs(mode, &ids_before);
    let obs_pid = match &obs {
        Observer::Tracer(t) => Some(t.child.id()),
        Observer::Bpftrace(c, _) => Some(c.id()),
        Observer::Empty(_) => Some(std::process::id()),
        Observer::Exporter(c) => Some(c.id()),
        _ => None,
    };
    let (bpf0, obs_cpu0) = match obs_pid {
        Some(p) => (bpf_stats(&ids), proc_cpu_seconds(p)),
        None => (ProgStats::new(), 0.0),
    };
    // Sender and receiver (spawned from this thread) share one CPU; the observer does not.
    pin_this_thread(Some(1));
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let (bytes, batch) = match work {
        Work::Bulk(b) => (b, 1),
        Work::Churn(n) => (CHURN_BYTES, n),
    };
    let t = Transfer {
        exe: env.tracer.clone(),
        pair,
        port: PORT,
        bytes,
        conns: batch,
        ipv6: false,
        rcvbuf: None,
        timeout: Duration::from_secs(300),
        send: Default::default(),
    };
    // a churn run goes on in batches for at least CHURN_SECS: the tracer reads every socket
    // once a second (its verdicts), and that reading slows the hooks beside it; a run of half
    // a second held it or not by chance (6.6 against 8.8 us per connection, same build), a run
    // of whole seconds holds about as many readings as it lasts
    let mut conns = 0;
    let done = loop {
        let r = t.run_both(matches!(work, Work::Bulk(_)));
        conns += batch;
        if r.is_err() || matches!(work, Work::Bulk(_)) || t0.elapsed() >= CHURN_SECS {
            break r;
        }
    };
    pin_this_thread(None);
    let (_, tx) = done?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let mut s = Sample {
        throughput_bps: tx.first().and_then(|r| r.throughput_bps).unwrap_or(0) as f64,
        cpu_per_gb: cpu / (bytes as f64 * conns as f64 / 1e9),
        transfer_cpu_s: cpu,
        gb: bytes as f64 * conns as f64 / 1e9,
        conns,
        wall_s: wall,
        ..Sample::default()
    };
    if let Some(p) = obs_pid {
        s.per_prog = stats_delta(&bpf0, &bpf_stats(&ids));
        // the same-run floor is reported per program, not counted as the observer's cost
        let own = || {
            s.per_prog.iter().filter(|(k, _)| {
                matches!(mode, Mode::Empty | Mode::EmptyAll) || k.as_str() != FLOOR_PROG
            })
        };
        s.bpf_ns = own().map(|(_, v)| v.0).sum();
        s.bpf_hits = own().map(|(_, v)| v.1).sum();
        s.tracer_cpu_share = Some((proc_cpu_seconds(p) - obs_cpu0) / wall);
        s.tracer_rss = peak_rss_bytes(p);
    }
    stop_observer(obs, mode, wall, &mut s)?;
    Ok(s)
}

/// The observer's programs: those that appeared since `before` (none for a mode that loads
/// none), once they stop appearing.
fn new_programs(
    mode: Mode,
    before: &std::collections::HashSet<u64>,
) -> std::collections::HashSet<u64> {
    let mut ids: std::collections::HashSet<u64> = Default::default();
    if matches!(
        mode,
        Mode::Default
            | Mode::Filtered
            | Mode::OtherPid
            | Mode::Bpftrace
            | Mode::Tcplife
            | Mode::Empty
            | Mode::EmptyAll
            | Mode::Exporter
    ) {
        // bpftrace says "Attaching" before its programs are all in: wait for them to appear
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            ids = program_ids().difference(before).copied().collect();
            if !ids.is_empty() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(300));
        ids = program_ids().difference(before).copied().collect();
    }
    ids
}

/// Stops the observer and adds what it says of the run to `s` (events, lines, CPU).
fn stop_observer(obs: Observer, mode: Mode, wall: f64, s: &mut Sample) -> Result<()> {
    match obs {
        Observer::None => {}
        Observer::Exporter(mut c) => {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
        Observer::Empty(bpf) => {
            s.tracer_cpu_share = None;
            s.tracer_rss = None;
            drop(bpf);
        }
        Observer::Tracer(t) => {
            let (_, out, _) = t.stop(Duration::from_secs(30))?;
            let sum = parse_trace(&out).context("the tracer's output")?.summary;
            let received = sum.events_received;
            s.drops = Some(sum.counters.dropped);
            s.events_per_sec = Some(received as f64 / wall);
            s.changes_seen = Some(received);
            s.records_seen = Some(sum.counters.records);
        }
        Observer::Bpftrace(mut c, out) => {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let _ = c.wait();
            let out = out
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_default();
            // the fields' changes bpftrace counted, or tcplife's lines (a closed connection each)
            s.changes_seen = Some(if mode == Mode::Tcplife {
                out.lines()
                    .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
                    .count() as u64
            } else {
                out.lines()
                    .find_map(|l| l.strip_prefix("@changes: "))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0)
            });
        }
        Observer::Ss { stop, handle } => {
            stop.store(true, Ordering::SeqCst);
            let (changes, cpu) = handle.join().unwrap_or((0, 0.0));
            s.changes_seen = Some(changes);
            s.tracer_cpu_share = Some(cpu / wall);
        }
    }
    Ok(())
}

fn run(args: BenchArgs) -> Result<()> {
    require_root("the benchmark")?;
    let mut env = Env::new(&args)?;
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let pair = Pair::create(&format!("tcpwin-bench-{}", std::process::id()), 1500)?;
    // thousands of short connections per run: the client's TIME_WAIT ports must be reusable, or
    // connect() ends up searching for a free port and the churn table measures that instead
    Pair::sysctl(&pair.a, "net.ipv4.tcp_tw_reuse", "1")?;
    Pair::sysctl(&pair.a, "net.ipv4.ip_local_port_range", "1024 65535")?;
    let _stats = BpfStats::enable()?;
    // Ctrl-C ends the bench between runs, with the namespaces removed and the sysctl restored
    tcpwin_common::stop::install_stop_handler();
    let mut modes = vec![Mode::Empty, Mode::Default];
    with_bpftrace(&args, &mut modes, Mode::Bpftrace);
    if !args.no_peers {
        modes.push(Mode::SsPoll);
    }
    let mut samples: HashMap<Mode, Vec<Sample>> = HashMap::new();
    for i in 0..args.runs {
        for &m in &modes {
            for mode in [Mode::Untraced, m] {
                check_stop()?;
                let s = one_run(
                    &pair,
                    &env,
                    mode,
                    Work::Bulk(args.bytes),
                    args.floor_alongside,
                )
                .with_context(|| format!("run {i} mode {}", mode.name()))?;
                if !args.json {
                    let per: Vec<String> = s
                        .per_prog
                        .iter()
                        .filter(|(_, (_, n))| *n > 1000)
                        .map(|(k, (ns, n))| format!("{k} {}", ns / n))
                        .collect();
                    eprintln!(
                        "bench: run {} {:<9} {:>7.2} Gbit/s  {:.2} CPU-s/GB  {}",
                        i + 1,
                        mode.name(),
                        s.throughput_bps / 1e9,
                        s.cpu_per_gb,
                        per.join(" ")
                    );
                }
                samples.entry(mode).or_default().push(s);
            }
        }
    }
    report(&samples, &modes, args.json);
    if args.same_runs > 0 {
        let mut idle = same::idle_process()?;
        let with_bpftrace = modes.contains(&Mode::Bpftrace);
        let pairs = same::pairs(args.nolog_obj.clone(), idle.id(), with_bpftrace);
        let rows = same::run(
            &pair,
            &env,
            &pairs,
            args.same_runs,
            args.same_bytes,
            args.json,
        );
        let _ = idle.kill();
        let _ = idle.wait();
        same::report(&rows?, args.json);
    }
    let counts: Vec<usize> = args.ss_sockets.iter().copied().filter(|n| *n > 0).collect();
    if !counts.is_empty() {
        sockets::run(&pair, &env, &counts, args.runs, args.json)?;
    }
    if args.churn > 0 {
        let mut idle = same::idle_process()?;
        env.idle_pid = Some(idle.id());
        let r = churn_table(&pair, &env, &args);
        let _ = idle.kill();
        let _ = idle.wait();
        r?;
    }
    Ok(())
}

/// `mode`, one of bpftrace's, into `modes` where the peers are asked for and bpftrace is
/// installed; its row said to be skipped where it is not.
fn with_bpftrace(args: &BenchArgs, modes: &mut Vec<Mode>, mode: Mode) {
    if args.no_peers {
        return;
    }
    if Command::new("bpftrace").arg("--version").output().is_ok() {
        modes.push(mode);
    } else {
        eprintln!(
            "bench: bpftrace not installed: the {} row is skipped (apt-get install bpftrace)",
            mode.name()
        );
    }
}

/// The churn table: each observer's cost per short connection, beside an untraced run.
fn churn_table(pair: &Pair, env: &Env, args: &BenchArgs) -> Result<()> {
    let mut churn: HashMap<Mode, Vec<Sample>> = HashMap::new();
    let mut churn_modes = vec![
        Mode::EmptyAll,
        Mode::Default,
        Mode::Filtered,
        Mode::OtherPid,
        Mode::Exporter,
    ];
    // bpftrace's tcplife beside them: what a tool that reports each connection once costs
    with_bpftrace(args, &mut churn_modes, Mode::Tcplife);
    for i in 0..args.runs {
        for mode in churn_modes.iter().flat_map(|m| [Mode::Untraced, *m]) {
            check_stop()?;
            let s = one_run(pair, env, mode, Work::Churn(args.churn), false)
                .with_context(|| format!("churn run {i} mode {}", mode.name()))?;
            if !args.json {
                eprintln!(
                    "bench: churn run {} {:<9} {:>7.0} conn/s  {:.1} CPU-us/conn",
                    i + 1,
                    mode.name(),
                    s.conns as f64 / s.wall_s,
                    s.transfer_cpu_s * 1e6 / s.conns as f64
                );
            }
            churn.entry(mode).or_default().push(s);
        }
    }
    report_churn(&churn, &churn_modes, args.churn, args.json);
    Ok(())
}

fn main() {
    let args = BenchArgs::parse();
    if let (Some(n), Some(ns)) = (args.hold_sockets, args.hold_netns.as_deref()) {
        if let Err(e) = sockets::hold(ns, n) {
            eprintln!("tcpwin-bench: holding {n} sockets in {ns}: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = run(args).map_err(tcpwin_lab::harness::interruption_alone) {
        eprintln!("tcpwin-bench: error: {e:#}");
        std::process::exit(1);
    }
}
