//! `ss` over many sockets: `tcpwin-trace ss` against iproute2's `ss -tin`, the whole command's
//! wall time and peak RSS, medians of a few runs, on idle loopback connections the bench opens
//! in the sender's namespace.
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use tcpwin_lab::pair::Pair;
use tcpwin_lab::rows::{BenchRow, ExporterBenchRow, SsBenchRow};

use crate::{
    measure::{median, peak_rss_bytes, proc_cpu_seconds},
    observers::start_exporter,
    output::print_row,
    Env,
};

/// Sockets one holder process opens at most (a process may hold 20,000 descriptors here).
const PER_HOLDER: usize = 18_000;

/// `n` sockets (n/2 loopback connections, each process its own listener) held in namespace `ns`
/// by processes of this binary (`--hold-sockets`); closed when dropped.
struct Held(Vec<std::process::Child>);

impl Drop for Held {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // killed, its sockets closed with it (its stdin closing would end it too, when the
            // bench itself dies)
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Opens `n` sockets in `ns`, spread over holder processes; returns once all are open.
fn open_sockets(ns: &str, n: usize) -> Result<Held> {
    let exe = std::env::current_exe().context("the bench's own path")?;
    let mut held = Held(Vec::new());
    let mut left = n;
    while left > 0 {
        // pairs: an even share
        let k = left.min(PER_HOLDER) & !1;
        let k = if k == 0 { 2 } else { k };
        left = left.saturating_sub(k);
        held.0.push(
            Command::new(&exe)
                .args(["--hold-sockets", &k.to_string(), "--hold-netns", ns])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .context("starting a socket holder")?,
        );
    }
    for c in &mut held.0 {
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(c.stdout.as_mut().expect("piped")),
            &mut line,
        )?;
        if line.trim() != "ready" {
            bail!("a socket holder did not open its sockets (it said {line:?})");
        }
    }
    Ok(held)
}

/// The holder's side (`tcpwin-bench --hold-sockets N --hold-netns NS`): `n` sockets open in
/// `ns`, `ready` said, held until stdin closes.
pub fn hold(ns: &str, n: usize) -> Result<()> {
    tcpwin_common::netns::enter_named(ns)?;
    let lim = libc::rlimit {
        rlim_cur: (n + 256) as u64,
        rlim_max: (n + 256) as u64,
    };
    // SAFETY: a valid rlimit; root may raise the hard limit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        bail!(
            "RLIMIT_NOFILE {}: {}",
            n + 256,
            std::io::Error::last_os_error()
        );
    }
    let l = TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n / 2 {
        v.push(TcpStream::connect(addr)?);
        v.push(l.accept()?.0);
    }
    println!("ready");
    std::io::stdout().flush()?;
    // until the bench closes stdin (or dies)
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(v);
    Ok(())
}

/// Runs `cmd` to the end: (wall ms, peak RSS KiB, stdout lines). The peak is the process's
/// own `VmHWM`, sampled every millisecond until it exits (getrusage's ru_maxrss would include
/// the bench's memory the child had before its exec).
fn measured(cmd: &mut Command) -> Result<(f64, u64, usize)> {
    let t0 = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("{cmd:?}"))?;
    let pid = child.id();
    let out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut { out }, &mut s);
        s
    });
    let mut peak = 0u64;
    let status = loop {
        if let Some(kib) = peak_rss_bytes(pid) {
            peak = peak.max(kib / 1024);
        }
        if let Some(s) = child.try_wait()? {
            break s;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    let lines = reader.join().unwrap_or_default().lines().count();
    Ok((ms, peak, lines))
}

/// What the exporter costs over the sockets of one namespace.
struct ExporterCost {
    /// CPU share while nobody scrapes
    idle_cpu: f64,
    /// one GET /metrics, client side: median and max
    scrape_ms: f64,
    scrape_ms_max: f64,
    scrapes: usize,
    /// resident after the scrapes (VmRSS) and the peak while scraping (VmHWM, reset after
    /// the start)
    rss_mib: f64,
    peak_rss_mib: f64,
}

/// A process's resident memory now and at its peak (VmRSS, VmHWM), KiB.
fn rss_kib(pid: u32) -> (Option<u64>, Option<u64>) {
    match procfs::process::Process::new(pid as i32).and_then(|p| p.status()) {
        Ok(s) => (s.vmrss, s.vmhwm),
        Err(_) => (None, None),
    }
}

fn exporter(env: &Env, ns: &str, runs: usize) -> Result<ExporterCost> {
    let (child, port) = start_exporter(env, &["--netns", ns])?;
    let pid = child.id();
    // idle: started, nobody scrapes
    std::thread::sleep(Duration::from_secs(1));
    // the peak from here on is the scrapes' (5 = reset VmHWM, Linux 4.0+)
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").context("resetting VmHWM")?;
    let c0 = proc_cpu_seconds(pid);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let idle_cpu = (proc_cpu_seconds(pid) - c0) / t0.elapsed().as_secs_f64();
    let get = || -> Result<f64> {
        let t = Instant::now();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        let mut r = String::new();
        s.read_to_string(&mut r)?;
        if !r.starts_with("HTTP/1.1 200") {
            bail!("the exporter answered {}", r.lines().next().unwrap_or(""));
        }
        Ok(t.elapsed().as_secs_f64() * 1e3)
    };
    // the first scrape has no previous one to take rates from: not counted
    get()?;
    let scrapes = (runs * 4).max(5);
    let mut ms = Vec::new();
    for _ in 0..scrapes {
        ms.push(get()?);
        std::thread::sleep(Duration::from_millis(200));
    }
    let max = ms.iter().cloned().fold(0.0, f64::max);
    let (rss, peak) = rss_kib(pid);
    Ok(ExporterCost {
        idle_cpu,
        scrape_ms: median(ms),
        scrape_ms_max: max,
        scrapes,
        rss_mib: rss.unwrap_or(0) as f64 / 1024.0,
        peak_rss_mib: peak.unwrap_or(0) as f64 / 1024.0,
    })
}

/// `tcpwin-trace ss` against `ss -tin` (both text, neither naming processes) in namespace `ns`
/// holding at least `n` sockets, with the pinned iterator (`cached`) or without: medians of
/// `runs` (wall ms, peak RSS MiB) of each, and one snapshot's time once loaded.
fn ss_row(env: &Env, ns: &str, n: usize, runs: usize, cached: bool) -> Result<SsBenchRow> {
    let cache = if cached { "on" } else { "off" };
    let tool = |extra: &[&str]| {
        let mut c = Command::new(&env.tracer);
        c.args(["ss", "--netns", ns])
            .args(extra)
            .env("TCPWIN_TRACE_CACHE", cache);
        c
    };
    // the first command pins the iterator: not counted
    measured(&mut tool(&[]))?;
    let (mut t, mut s, mut snapshot) = (
        (Vec::new(), Vec::new()),
        (Vec::new(), Vec::new()),
        Vec::new(),
    );
    for _ in 0..runs.max(1) {
        // one snapshot after the start, against six: the start (BTF, loading) drops out
        let (one, _, _) = measured(&mut tool(&["-i", "10", "-c", "1"]))?;
        let (six, _, _) = measured(&mut tool(&["-i", "10", "-c", "6"]))?;
        snapshot.push(((six - one) / 5.0).max(0.0));
        let (ms, rss, lines) = measured(&mut tool(&[]))?;
        if lines < n {
            bail!("tcpwin-trace ss listed {lines} sockets of {n}");
        }
        t.0.push(ms);
        t.1.push(rss as f64 / 1024.0);
        let (ms, rss, _) = measured(Command::new("ss").args(["-tin", "-N", ns]))?;
        s.0.push(ms);
        s.1.push(rss as f64 / 1024.0);
    }
    Ok(SsBenchRow {
        sockets: n as u64,
        cached,
        tool_ms: median(t.0),
        tool_rss_mib: median(t.1),
        tool_snapshot_ms: median(snapshot),
        ss_ms: median(s.0),
        ss_rss_mib: median(s.1),
        runs,
    })
}

pub fn run(pair: &Pair, env: &Env, counts: &[usize], runs: usize, json_out: bool) -> Result<()> {
    // idle: the namespace's few sockets; then each count in turn
    let mut rows = Vec::new();
    for cached in [true, false] {
        rows.push(ss_row(env, &pair.a, 0, runs, cached)?);
    }
    let mut exporters = Vec::new();
    for &n in counts {
        let socks = open_sockets(&pair.a, n)?;
        // idle as a busy server's idle connections are: nothing sent or received for over a
        // second (a socket that moved data within the last second is read twice, 250 ms apart)
        std::thread::sleep(Duration::from_millis(1500));
        for cached in [true, false] {
            rows.push(ss_row(env, &pair.a, n, runs, cached)?);
        }
        exporters.push((n, exporter(env, &pair.a, runs)?));
        drop(socks);
    }
    if json_out {
        for r in rows {
            print_row(&BenchRow::Ss(r));
        }
        for (n, exp) in exporters {
            print_row(&BenchRow::Exporter(ExporterBenchRow {
                sockets: n as u64,
                idle_cpu_share: exp.idle_cpu,
                scrape_ms: exp.scrape_ms,
                scrape_ms_max: exp.scrape_ms_max,
                rss_mib: exp.rss_mib,
                peak_rss_mib: exp.peak_rss_mib,
                scrapes: exp.scrapes,
            }));
        }
    } else {
        println!(
            "\nss: tcpwin-trace ss against ss -tin, whole commands (median of {runs}), peak RSS"
        );
        println!(
            "{:>8} {:<10} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7} {:>12}",
            "sockets",
            "iterator",
            "tool ms",
            "ss ms",
            "ratio",
            "tool MiB",
            "ss MiB",
            "ratio",
            "snapshot ms"
        );
        for r in &rows {
            println!(
                "{:>8} {:<10} {:>9.1} {:>9.1} {:>7.2} {:>10.1} {:>10.1} {:>7.2} {:>12.1}",
                r.sockets,
                if r.cached { "pinned" } else { "loaded" },
                r.tool_ms,
                r.ss_ms,
                r.tool_ms / r.ss_ms,
                r.tool_rss_mib,
                r.ss_rss_mib,
                r.tool_rss_mib / r.ss_rss_mib,
                r.tool_snapshot_ms
            );
        }
        // memory against the count: each count's peak over the smallest count's (pinned)
        let pinned: Vec<&SsBenchRow> = rows.iter().filter(|r| r.cached && r.sockets > 0).collect();
        if let Some(first) = pinned.first() {
            let over: Vec<String> = pinned
                .iter()
                .map(|r| format!("{}: x{:.2}", r.sockets, r.tool_rss_mib / first.tool_rss_mib))
                .collect();
            println!(
                "peak RSS against {} sockets' (pinned): {}",
                first.sockets,
                over.join(", ")
            );
        }
        println!("(idle = the bench namespace's own sockets; pinned: the iterator a previous command left; loaded: TCPWIN_TRACE_CACHE=off, each run loads it)");
        for (n, exp) in &exporters {
            println!(
                "exporter over {n} sockets: scrape {:.1} ms median ({:.1} max of {}; target <= 50), RSS {:.1} MiB after the scrapes (target <= 30; {:.1} MiB peak while scraping), idle CPU {:.3} % (5 s unscraped)",
                exp.scrape_ms, exp.scrape_ms_max, exp.scrapes, exp.rss_mib, exp.peak_rss_mib, exp.idle_cpu * 100.0
            );
        }
    }
    Ok(())
}
