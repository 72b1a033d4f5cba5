//! `tcpwin-trace bench` (run by `cargo xtask bench`): what tracing costs, measured on bulk
//! transfers between two namespaces over veth, in paired runs (untraced, then each traced mode,
//! alternating), with both ends pinned to one CPU. Prints ratios and medians, never asserts.
//!
//! Modes: `default` (tcpwin-trace, change-only events), `bpftrace` (Debian's bpftrace reading
//! the same fields from the same tracepoints), `ss-poll` (`ss -tinm` every 100 ms). The tool has
//! no per-packet raw mode: per-packet facts are aggregated in the kernel by design.
use std::{
    collections::HashMap,
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use crate::{
    lab::{check_stop, install_stop_handler, Tracer, Transfer},
    netns::Pair,
    session,
};

const PORT: u16 = 5402;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
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
    /// Short connections per churn run (sequential, 1 KiB each, untraced/default pairs); 0 skips
    /// the churn table
    #[arg(long, default_value_t = 5000)]
    pub churn: u32,
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

/// The empty program's name in bpftool's listing (kernel names are cut at 15 characters).
const FLOOR_PROG: &str = "calib_tcp_probe";

/// Total CPU time of the machine (user+nice+system+irq+softirq), seconds.
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<f64> = s
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy = [0, 1, 2, 5, 6, 7]
        .iter()
        .map(|&i| f.get(i).copied().unwrap_or(0.0))
        .sum::<f64>();
    // SAFETY: sysconf has no preconditions.
    busy / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn proc_cpu_seconds(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = after
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // fields after "(comm)": state=0 ... utime=11 stime=12
    let (u, st) = (
        f.get(11).copied().unwrap_or(0.0),
        f.get(12).copied().unwrap_or(0.0),
    );
    // SAFETY: sysconf has no preconditions.
    (u + st) / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn peak_rss_bytes(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|k| k * 1024)
}

/// IDs of every loaded BPF program (bpftool's listing).
fn program_ids() -> std::collections::HashSet<u64> {
    let Ok(out) = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output()
    else {
        return Default::default();
    };
    let progs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    progs.iter().filter_map(|p| p["id"].as_u64()).collect()
}

/// Per program name: (run_time_ns, run_cnt) of the given programs.
type ProgStats = std::collections::BTreeMap<String, (u64, u64)>;

fn bpf_stats(ids: &std::collections::HashSet<u64>) -> ProgStats {
    let mut m = ProgStats::new();
    let Ok(out) = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output()
    else {
        return m;
    };
    let progs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    for p in progs
        .iter()
        .filter(|p| p["id"].as_u64().is_some_and(|id| ids.contains(&id)))
    {
        let e = m
            .entry(p["name"].as_str().unwrap_or("?").to_string())
            .or_default();
        e.0 += p["run_time_ns"].as_u64().unwrap_or(0);
        e.1 += p["run_cnt"].as_u64().unwrap_or(0);
    }
    m
}

/// `after - before`, per program.
fn stats_delta(before: &ProgStats, after: &ProgStats) -> ProgStats {
    after
        .iter()
        .map(|(k, (ns, n))| {
            let (ns0, n0) = before.get(k).copied().unwrap_or_default();
            (k.clone(), (ns.saturating_sub(ns0), n.saturating_sub(n0)))
        })
        .collect()
}

/// Turns `kernel.bpf_stats_enabled` on and restores it when dropped.
struct BpfStats(String);

impl BpfStats {
    fn enable() -> Result<BpfStats> {
        let path = "/proc/sys/kernel/bpf_stats_enabled";
        let old = std::fs::read_to_string(path).context("kernel.bpf_stats_enabled")?;
        std::fs::write(path, "1")?;
        Ok(BpfStats(old.trim().to_string()))
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write("/proc/sys/kernel/bpf_stats_enabled", &self.0);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Mode {
    Untraced,
    /// an empty tp_btf program on tcp:tcp_probe: the floor any program on the hook pays
    Empty,
    Default,
    Bpftrace,
    SsPoll,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::Empty => "empty-tp",
            Mode::Default => "default",
            Mode::Bpftrace => "bpftrace",
            Mode::SsPoll => "ss-poll",
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
    tracer_cpu_share: Option<f64>,
    tracer_rss: Option<u64>,
}

/// A running observer for one traced run.
enum Observer {
    None,
    /// held for its attached program; dropping it detaches
    Empty(Box<aya::Ebpf>),
    Tracer(Tracer),
    Bpftrace(Child),
    Ss {
        stop: Arc<AtomicBool>,
        handle: std::thread::JoinHandle<(u64, f64)>,
    },
}

const BPFTRACE_SCRIPT: &str = r#"
tracepoint:tcp:tcp_probe /args->sport == PORT || args->dport == PORT/ {
  $tp = (struct tcp_sock *)args->skaddr;
  $v = ((uint64)$tp->scaling_ratio << 56) | ((uint64)$tp->window_clamp << 24) ^ (uint64)$tp->rcv_ssthresh;
  if (@last[args->sock_cookie] != $v) { @changes = count(); @last[args->sock_cookie] = $v; }
}
tracepoint:tcp:tcp_rcv_space_adjust /args->sport == PORT || args->dport == PORT/ {
  $tp = (struct tcp_sock *)args->skaddr;
  $v = ((uint64)$tp->scaling_ratio << 56) | ((uint64)$tp->window_clamp << 24) ^ (uint64)$tp->rcv_ssthresh;
  if (@last[args->sock_cookie] != $v) { @changes = count(); @last[args->sock_cookie] = $v; }
}
END { clear(@last); }
"#;

fn ensure_tracefs() {
    if !std::path::Path::new("/sys/kernel/tracing/events").exists() {
        let _ = Command::new("mount")
            .args(["-t", "tracefs", "tracefs", "/sys/kernel/tracing"])
            .status();
    }
}

fn start_bpftrace() -> Result<Child> {
    ensure_tracefs();
    let script = BPFTRACE_SCRIPT.replace("PORT", &PORT.to_string());
    let mut child = Command::new("bpftrace")
        .args(["-e", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("bpftrace (apt-get install bpftrace)")?;
    // wait for "Attaching N probes..."
    let so = child.stdout.take().expect("piped");
    let mut r = BufReader::new(so);
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            bail!("bpftrace exited before attaching");
        }
        if line.contains("Attaching") {
            break;
        }
    }
    // keep the rest of stdout for the changes count
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut r, &mut s);
        let _ = tx.send(s);
    });
    BPFTRACE_OUT.with(|c| *c.borrow_mut() = Some(rx));
    Ok(child)
}

thread_local! {
    static BPFTRACE_OUT: std::cell::RefCell<Option<std::sync::mpsc::Receiver<String>>> =
        const { std::cell::RefCell::new(None) };
}

/// Polls `ss -tinm` in the receiver's namespace every 100 ms; returns (changes of rcv_ssthresh
/// seen, CPU seconds the polling cost).
fn start_ss(ns: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u64, f64)> {
    std::thread::spawn(move || {
        let mut last: HashMap<String, String> = HashMap::new();
        let (mut changes, mut cpu) = (0u64, 0.0f64);
        while !stop.load(Ordering::SeqCst) {
            let t0 = Instant::now();
            let Ok(child) = Pair::exec(&ns, "ss")
                .args(["-tinmH", "state", "established"])
                .stdout(Stdio::piped())
                .spawn()
            else {
                break;
            };
            let pid = child.id() as i32;
            let out = child.wait_with_output_rusage(pid);
            cpu += out.1;
            let text = out.0;
            let mut key = String::new();
            for l in text.lines() {
                if !l.starts_with(char::is_whitespace) {
                    key = l
                        .split_whitespace()
                        .skip(2)
                        .take(2)
                        .collect::<Vec<_>>()
                        .join(" ");
                    continue;
                }
                if let Some(v) = l
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("rcv_ssthresh:"))
                {
                    if last.get(&key).map(String::as_str) != Some(v) {
                        changes += 1;
                        last.insert(key.clone(), v.to_string());
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100).saturating_sub(t0.elapsed()));
        }
        (changes, cpu)
    })
}

trait RusageWait {
    fn wait_with_output_rusage(self, pid: i32) -> (String, f64);
}

impl RusageWait for Child {
    /// Reads stdout, then reaps the child with wait4 to learn its CPU time.
    fn wait_with_output_rusage(mut self, pid: i32) -> (String, f64) {
        let mut s = String::new();
        if let Some(mut so) = self.stdout.take() {
            let _ = std::io::Read::read_to_string(&mut so, &mut s);
        }
        let mut status = 0;
        // SAFETY: zeroed rusage is valid; wait4 on our own child.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (s, secs(ru.ru_utime) + secs(ru.ru_stime))
    }
}

/// Loads the object and attaches only its empty `calib_tcp_probe` program.
fn load_empty() -> Result<aya::Ebpf> {
    let btf = aya::Btf::from_sys_fs().context("kernel BTF")?;
    let mut bpf = aya::EbpfLoader::new()
        .btf(Some(&btf))
        .load(&session::EMBEDDED.0)
        .context("loading the eBPF object")?;
    let p: &mut aya::programs::BtfTracePoint = bpf
        .program_mut("calib_tcp_probe")
        .context("calib_tcp_probe missing from the object")?
        .try_into()?;
    p.load("tcp_probe", &btf)?;
    p.attach()?;
    Ok(bpf)
}

fn start_observer(mode: Mode, pair: &Pair) -> Result<Observer> {
    let exe = std::env::current_exe()?;
    Ok(match mode {
        Mode::Untraced => Observer::None,
        Mode::Empty => Observer::Empty(Box::new(load_empty()?)),
        Mode::Default => Observer::Tracer(Tracer::start(
            &exe,
            &["--port", &PORT.to_string(), "-q", "--json"],
            Stdio::piped(),
            Duration::from_secs(60),
        )?),
        Mode::Bpftrace => Observer::Bpftrace(start_bpftrace()?),
        Mode::SsPoll => {
            let stop = Arc::new(AtomicBool::new(false));
            let handle = start_ss(pair.b.clone(), stop.clone());
            Observer::Ss { stop, handle }
        }
    })
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

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn one_run(pair: &Pair, mode: Mode, work: Work, floor_alongside: bool) -> Result<Sample> {
    let exe = std::env::current_exe()?;
    // the observer's programs are the ones that appear when it starts
    let ids_before = program_ids();
    let _floor = match mode {
        Mode::Default if floor_alongside => Some(load_empty()?),
        _ => None,
    };
    let obs = start_observer(mode, pair)?;
    let mut ids: std::collections::HashSet<u64> = Default::default();
    if matches!(mode, Mode::Default | Mode::Bpftrace | Mode::Empty) {
        // bpftrace says "Attaching" before its programs are all in: wait for them to appear
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            ids = program_ids().difference(&ids_before).copied().collect();
            if !ids.is_empty() || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(300));
        ids = program_ids().difference(&ids_before).copied().collect();
    }
    let obs_pid = match &obs {
        Observer::Tracer(t) => Some(t.child.id()),
        Observer::Bpftrace(c) => Some(c.id()),
        Observer::Empty(_) => Some(std::process::id()),
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
    let (bytes, conns) = match work {
        Work::Bulk(b) => (b, 1),
        Work::Churn(n) => (CHURN_BYTES, n),
    };
    let t = Transfer {
        exe: exe.clone(),
        pair,
        port: PORT,
        bytes,
        conns,
        ipv6: false,
        rcvbuf: None,
        timeout: Duration::from_secs(300),
    };
    let done = t.run_both(matches!(work, Work::Bulk(_)));
    pin_this_thread(None);
    let (_, tx) = done?;
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let mut s = Sample {
        throughput_bps: tx
            .first()
            .and_then(|v| v["throughput_bps"].as_f64())
            .unwrap_or(0.0),
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
            s.per_prog
                .iter()
                .filter(|(k, _)| mode == Mode::Empty || k.as_str() != FLOOR_PROG)
        };
        s.bpf_ns = own().map(|(_, v)| v.0).sum();
        s.bpf_hits = own().map(|(_, v)| v.1).sum();
        s.tracer_cpu_share = Some((proc_cpu_seconds(p) - obs_cpu0) / wall);
        s.tracer_rss = peak_rss_bytes(p);
    }
    match obs {
        Observer::None => {}
        Observer::Empty(bpf) => {
            s.tracer_cpu_share = None;
            s.tracer_rss = None;
            drop(bpf);
        }
        Observer::Tracer(t) => {
            let (_, out, _) = t.stop(Duration::from_secs(30))?;
            let sum = out
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["event"] == "summary")
                .context("tracer summary")?;
            let received = sum["events_received"].as_u64().unwrap_or(0);
            s.drops = sum["counters"]["dropped"].as_u64();
            s.events_per_sec = Some(received as f64 / wall);
            s.changes_seen = Some(received);
        }
        Observer::Bpftrace(mut c) => {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let _ = c.wait();
            let out = BPFTRACE_OUT
                .with(|o| o.borrow_mut().take())
                .and_then(|rx| rx.recv_timeout(Duration::from_secs(10)).ok())
                .unwrap_or_default();
            s.changes_seen = Some(
                out.lines()
                    .find_map(|l| l.strip_prefix("@changes: "))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0),
            );
        }
        Observer::Ss { stop, handle } => {
            stop.store(true, Ordering::SeqCst);
            let (changes, cpu) = handle.join().unwrap_or((0, 0.0));
            s.changes_seen = Some(changes);
            s.tracer_cpu_share = Some(cpu / wall);
        }
    }
    Ok(s)
}

pub fn run(args: BenchArgs) -> Result<()> {
    session::check_privileges()?;
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
    install_stop_handler();
    let mut modes = vec![Mode::Empty, Mode::Default];
    if !args.no_peers {
        if Command::new("bpftrace").arg("--version").output().is_ok() {
            modes.push(Mode::Bpftrace);
        } else {
            eprintln!(
                "bench: bpftrace not installed: its row is skipped (apt-get install bpftrace)"
            );
        }
        modes.push(Mode::SsPoll);
    }
    let mut samples: HashMap<Mode, Vec<Sample>> = HashMap::new();
    for i in 0..args.runs {
        for &m in &modes {
            for mode in [Mode::Untraced, m] {
                check_stop()?;
                let s = one_run(&pair, mode, Work::Bulk(args.bytes), args.floor_alongside)
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
    if args.churn > 0 {
        let mut churn: HashMap<Mode, Vec<Sample>> = HashMap::new();
        for i in 0..args.runs {
            for mode in [Mode::Untraced, Mode::Default] {
                check_stop()?;
                let s = one_run(&pair, mode, Work::Churn(args.churn), false)
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
        report_churn(&churn, args.churn, args.json);
    }
    Ok(())
}

/// Per program: total hits, median per-run ns per hit and, where the floor ran alongside (and
/// `with_floor`), median per-run ns above it.
type PerProgram = std::collections::BTreeMap<String, (u64, f64, Option<f64>)>;

fn per_program(v: &[Sample], with_floor: bool) -> PerProgram {
    let mut progs: std::collections::BTreeMap<String, (u64, Vec<f64>, Vec<f64>)> =
        Default::default();
    for smp in v {
        let floor = smp
            .per_prog
            .get(FLOOR_PROG)
            .filter(|(_, n)| *n > 0 && with_floor)
            .map(|(ns, n)| *ns as f64 / *n as f64);
        for (k, (ns, n)) in smp.per_prog.iter().filter(|(_, (_, n))| *n > 0) {
            let e = progs.entry(k.clone()).or_default();
            let per = *ns as f64 / *n as f64;
            e.0 += n;
            e.1.push(per);
            if let Some(f) = floor {
                e.2.push(per - f);
            }
        }
    }
    progs
        .into_iter()
        .map(|(k, (n, per, above))| {
            let above = (!above.is_empty()).then(|| median(above));
            (k, (n, median(per), above))
        })
        .collect()
}

fn progs_json(progs: &PerProgram) -> serde_json::Map<String, Value> {
    progs
        .iter()
        .map(|(k, (n, per, above))| {
            (
                k.clone(),
                json!({"hits": n, "ns_per_hit": per, "ns_above_floor": above}),
            )
        })
        .collect()
}

fn progs_line(progs: &PerProgram) -> String {
    progs
        .iter()
        .map(|(k, (n, per, _))| format!("{k} {per:.0} ns x {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn median_of(v: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
    v.iter().map(f).collect::<Option<Vec<_>>>().map(median)
}

/// The churn table: what tracing costs per connection (state changes, teardown, a few packets).
fn report_churn(samples: &HashMap<Mode, Vec<Sample>>, conns: u32, json_out: bool) {
    let base = &samples[&Mode::Untraced];
    let v = &samples[&Mode::Default];
    let rate = |s: &Sample| s.conns as f64 / s.wall_s;
    let cpu = |s: &Sample| s.transfer_cpu_s / s.conns as f64;
    let (base_rate, base_cpu) = (
        median(base.iter().map(rate).collect()),
        median(base.iter().map(cpu).collect()),
    );
    let rate_ratio = median(v.iter().map(|s| rate(s) / base_rate).collect());
    let cpu_ratio = median(v.iter().map(|s| cpu(s) / base_cpu).collect());
    let bpf_us = median_of(v, |s| Some(s.bpf_ns as f64 / 1e3 / s.conns as f64));
    let bpf_share = median_of(v, |s| Some(s.bpf_ns as f64 / 1e9 / s.transfer_cpu_s));
    let events = median_of(v, |s| Some(s.changes_seen? as f64 / s.conns as f64));
    let drops = v.iter().map(|s| s.drops).sum::<Option<u64>>();
    let tcpu = median_of(v, |s| s.tracer_cpu_share);
    let progs = per_program(v, false);
    if json_out {
        println!(
            "{}",
            json!({"workload": "churn", "mode": "default", "conns": conns,
                "conns_per_sec_ratio": rate_ratio, "cpu_per_conn_ratio": cpu_ratio,
                "bpf_us_per_conn": bpf_us, "bpf_cpu_share": bpf_share, "drops": drops,
                "events_per_conn": events, "tracer_cpu_share": tcpu, "runs": v.len(),
                "bpf_programs": progs_json(&progs)})
        );
        return;
    }
    let o = |x: Option<f64>, f: &dyn Fn(f64) -> String| x.map(f).unwrap_or_else(|| "-".into());
    println!(
        "\nshort connections ({conns} x {CHURN_BYTES} B, sequential; untraced: {base_rate:.0} conn/s, {:.1} CPU-us/conn)",
        base_cpu * 1e6
    );
    println!(
        "default   conn/s ratio {rate_ratio:.3}  CPU/conn ratio {cpu_ratio:.3}  BPF {} us/conn ({})  events/conn {}  drops {}  tracer CPU {}",
        o(bpf_us, &|x| format!("{x:.2}")),
        o(bpf_share, &|x| format!("{:.2}%", x * 100.0)),
        o(events, &|x| format!("{x:.1}")),
        drops.map(|d| d.to_string()).unwrap_or_else(|| "-".into()),
        o(tcpu, &|x| format!("{:.2}%", x * 100.0)),
    );
    println!("          per program: {}", progs_line(&progs));
}

fn report(samples: &HashMap<Mode, Vec<Sample>>, modes: &[Mode], json_out: bool) {
    let base = &samples[&Mode::Untraced];
    let base_tp = median(base.iter().map(|s| s.throughput_bps).collect());
    let base_cpu = median(base.iter().map(|s| s.cpu_per_gb).collect());
    let range = |v: Vec<f64>| {
        let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        (median(v), min, max)
    };
    if !json_out {
        println!(
            "\n{:<9} {:>22} {:>22} {:>10} {:>10} {:>9} {:>9} {:>6} {:>8} {:>11} {:>10}",
            "mode",
            "throughput ratio",
            "CPU/GB ratio",
            "BPF ns/hit",
            "BPF ms/GB",
            "BPF share",
            "events/s",
            "drops",
            "changes",
            "tracer CPU",
            "tracer RSS"
        );
    }
    let raw = json!({"mode": "raw", "bpf_ns_per_hit": null, "bpf_ms_per_gb": null, "bpf_cpu_share": null, "throughput_ratio": null,
        "cpu_per_gb_ratio": null, "drops": null, "events_per_sec": null, "changes_seen": null,
        "tracer_cpu_share": null, "tracer_rss_bytes": null,
        "note": "no per-packet raw mode: per-packet facts are aggregated in the kernel"});
    for &m in modes {
        let v = &samples[&m];
        let tp = range(v.iter().map(|s| s.throughput_bps / base_tp).collect());
        let cpu = range(v.iter().map(|s| s.cpu_per_gb / base_cpu).collect());
        // Medians of per-run figures: a run disturbed by the host (every program slower at once)
        // would dominate pooled sums.
        let ns_per_hit = median_of(v, |s| {
            (s.bpf_hits > 0).then(|| s.bpf_ns as f64 / s.bpf_hits as f64)
        });
        let ms_per_gb = median_of(v, |s| {
            (s.bpf_hits > 0).then(|| s.bpf_ns as f64 / 1e6 / s.gb)
        });
        let bpf_share = median_of(v, |s| {
            (s.bpf_hits > 0).then(|| s.bpf_ns as f64 / 1e9 / s.transfer_cpu_s)
        });
        let drops = v.iter().map(|s| s.drops).sum::<Option<u64>>();
        let eps = median_of(v, |s| s.events_per_sec);
        let changes = median_of(v, |s| s.changes_seen.map(|c| c as f64)).map(|c| c as u64);
        let tcpu = median_of(v, |s| s.tracer_cpu_share);
        let rss = v.iter().filter_map(|s| s.tracer_rss).max();
        let progs = per_program(v, m == Mode::Default);
        if json_out {
            println!(
                "{}",
                json!({"workload": "bulk", "mode": m.name(), "bpf_ns_per_hit": ns_per_hit, "bpf_ms_per_gb": ms_per_gb, "bpf_cpu_share": bpf_share,
                    "throughput_ratio": tp.0, "throughput_ratio_min": tp.1, "throughput_ratio_max": tp.2,
                    "cpu_per_gb_ratio": cpu.0, "cpu_per_gb_ratio_min": cpu.1, "cpu_per_gb_ratio_max": cpu.2,
                    "drops": drops, "events_per_sec": eps, "changes_seen": changes,
                    "tracer_cpu_share": tcpu, "tracer_rss_bytes": rss, "runs": v.len(),
                    "bpf_programs": progs_json(&progs)})
            );
        } else {
            let o = |x: Option<String>| x.unwrap_or_else(|| "-".into());
            println!(
                "{:<9} {:>22} {:>22} {:>10} {:>10} {:>9} {:>9} {:>6} {:>8} {:>11} {:>10}",
                m.name(),
                format!("{:.3} ({:.3}-{:.3})", tp.0, tp.1, tp.2),
                format!("{:.3} ({:.3}-{:.3})", cpu.0, cpu.1, cpu.2),
                o(ns_per_hit.map(|v| format!("{v:.0}"))),
                o(ms_per_gb.map(|v| format!("{v:.2}"))),
                o(bpf_share.map(|v| format!("{:.2}%", v * 100.0))),
                o(eps.map(|v| format!("{v:.0}"))),
                o(drops.map(|v| v.to_string())),
                o(changes.map(|v| v.to_string())),
                o(tcpu.map(|v| format!("{:.2}%", v * 100.0))),
                o(rss.map(|v| format!("{:.1} MiB", v as f64 / 1048576.0))),
            );
            if !progs.is_empty() {
                println!("          per program: {}", progs_line(&progs));
            }
            let above: Vec<String> = progs
                .iter()
                .filter(|(k, _)| k.as_str() != FLOOR_PROG)
                .filter_map(|(k, (_, _, a))| a.map(|a| format!("{k} {a:+.0}")))
                .collect();
            if !above.is_empty() {
                println!(
                    "          ns above the same-run floor: {}",
                    above.join(", ")
                );
            }
        }
    }
    // median per-run ns per hit of one program (the one on the floor's hook: tcp_probe)
    let per_hit = |m: Mode, prog: &str| -> Option<f64> {
        median_of(samples.get(&m)?, |s| {
            s.per_prog
                .get(prog)
                .filter(|(_, n)| *n > 0)
                .map(|(ns, n)| *ns as f64 / *n as f64)
        })
    };
    if json_out {
        println!("{raw}");
    } else {
        if let (Some(e), Some(d)) = (
            per_hit(Mode::Empty, FLOOR_PROG),
            per_hit(Mode::Default, "tcp_probe"),
        ) {
            println!(
                "empty-tp: an empty program on tcp:tcp_probe costs {e:.0} ns per hit here (trampoline + bpf_stats); the tracer's tcp_probe {d:.0} ns, {:.0} ns above it (the floor moves between runs: --floor-alongside measures it in the same runs)",
                d - e
            );
        }
        println!("raw       (none: per-packet facts are aggregated in the kernel, never streamed)");
        println!(
            "untraced: median {:.2} Gbit/s, {:.2} CPU-s/GB over {} runs",
            base_tp / 1e9,
            base_cpu,
            base.len()
        );
    }
}
