//! Same packets: two observers attached at the same time on the same hooks, each program's
//! cost read from `bpf_stats` over the identical hits. Per-hit figures from separate runs swing
//! 2-4x on a VM (the host disturbs a run, every program in it slows at once); side by side in
//! one run, the disturbance is shared and the ratio is what differs. Each pair runs in both
//! attach orders (the first program on a hook may pay for a cold cache the second finds warm).
//!
//! Pairs (`--same-packets`):
//! - the tracer built without any log code (`--nolog-obj`) vs. the tracer with it, log off:
//!   what the log code costs while off;
//! - log off vs. `--ebpf-log warn` (the checks on, no line due on a healthy run);
//! - with `--pid` of a process that owns no socket (every hit is an ownership miss, logged at
//!   debug once a second per socket and CPU): log off vs. `--ebpf-log debug`, the cost of a hit
//!   that logs, or checks whether to;
//! - the tracer vs. bpftrace reading the same fields from the same tracepoints.
use std::{
    collections::{BTreeMap, HashSet},
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use tcpwin_lab::rows::{BenchRow, SamePacketsRow as SameRow};
use tcpwin_lab::{
    harness::{check_stop, Tracer, Transfer},
    pair::Pair,
};

use crate::{
    measure::{bpf_stats, median, program_ids, stats_delta},
    observers::start_bpftrace,
    pin_this_thread, Env, PORT,
};

/// One observer of a pair.
#[derive(Clone, Debug)]
pub enum Side {
    /// tcpwin-trace with these arguments (and `--obj` when set)
    Tracer {
        label: &'static str,
        args: Vec<String>,
        obj: Option<PathBuf>,
    },
    Bpftrace,
}

impl Side {
    fn label(&self) -> &'static str {
        match self {
            Side::Tracer { label, .. } => label,
            Side::Bpftrace => "bpftrace",
        }
    }
}

enum Running {
    Tracer(Tracer),
    Bpftrace(Child, mpsc::Receiver<String>),
}

/// Starts `side`; returns it with the ids of the programs it loaded.
fn start(side: &Side, env: &Env) -> Result<(Running, HashSet<u64>)> {
    let before = program_ids();
    let r = match side {
        Side::Tracer { args, obj, .. } => {
            let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
            let obj_s;
            if let Some(o) = obj {
                obj_s = o.to_string_lossy().to_string();
                all.extend(["--obj", &obj_s]);
            }
            Running::Tracer(Tracer::start(
                &env.tracer,
                &all,
                Stdio::piped(),
                Duration::from_secs(60),
            )?)
        }
        Side::Bpftrace => {
            let (c, out) = start_bpftrace(false)?;
            Running::Bpftrace(c, out)
        }
    };
    // bpftrace says "Attaching" before its programs are all in: wait for them to appear
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut ids: HashSet<u64> = HashSet::new();
    while ids.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        ids = program_ids().difference(&before).copied().collect();
    }
    std::thread::sleep(Duration::from_millis(300));
    ids = program_ids().difference(&before).copied().collect();
    Ok((r, ids))
}

fn stop(r: Running) {
    match r {
        Running::Tracer(t) => {
            let _ = t.stop(Duration::from_secs(30));
        }
        Running::Bpftrace(mut c, out) => {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let _ = c.wait();
            // its output (the changes it counted) is not this table's
            let _ = out.recv_timeout(Duration::from_secs(5));
        }
    }
}

/// The hook a program serves, from its (15-character) kernel name.
fn hook_of(prog: &str) -> Option<&'static str> {
    [
        ("rcv_spac", "tcp:tcp_rcv_space_adjust"),
        ("tcp_probe", "tcp:tcp_probe"),
        ("rcvbuf", "tcp:tcp_rcvbuf_grow"),
        ("sock_set", "sock:inet_sock_set_state"),
        ("destroy", "tcp:tcp_destroy_sock"),
    ]
    .iter()
    .find(|(k, _)| prog.contains(k))
    .map(|(_, h)| *h)
}

/// Per hook: the programs' `bytes_xlated`.
type Code = BTreeMap<&'static str, u64>;

/// Per hook: (ns, hits) of one side's programs over a run.
type PerHook = BTreeMap<&'static str, (u64, u64)>;

fn per_hook(stats: &crate::measure::ProgStats) -> PerHook {
    let mut m = PerHook::new();
    for (name, (ns, n)) in stats {
        if let Some(h) = hook_of(name) {
            let e = m.entry(h).or_default();
            e.0 += ns;
            e.1 += n;
        }
    }
    m
}

/// One run on one hook: (a ns/hit, b ns/hit, a hits, b hits).
type Hit = (f64, f64, u64, u64);
/// Per hook, one attach order's runs.
type ByHook = BTreeMap<&'static str, Vec<Hit>>;

/// Per hook: the `bytes_xlated` of the programs `ids`.
fn xlated(ids: &HashSet<u64>) -> BTreeMap<&'static str, u64> {
    let mut m = BTreeMap::new();
    for p in tcpwin_lab::harness::bpf_programs().unwrap_or_default() {
        if !p["id"].as_u64().is_some_and(|id| ids.contains(&id)) {
            continue;
        }
        if let Some(h) = p["name"].as_str().and_then(hook_of) {
            *m.entry(h).or_default() += p["bytes_xlated"].as_u64().unwrap_or(0);
        }
    }
    m
}

/// Runs each pair `runs` times in each order over `bytes` bulk transfers.
pub fn run(
    pair: &Pair,
    env: &Env,
    pairs: &[(Side, Side)],
    runs: usize,
    bytes: u64,
    json: bool,
) -> Result<Vec<SameRow>> {
    let mut rows = Vec::new();
    for (a, b) in pairs {
        let mut by: [ByHook; 2] = Default::default();
        let mut code = (BTreeMap::new(), BTreeMap::new());
        for i in 0..runs {
            for (order, first_a) in [(0usize, true), (1, false)] {
                check_stop()?;
                let (ha, hb, xa, xb) = one(pair, env, a, b, first_a, bytes).with_context(|| {
                    format!("same packets {} + {} run {i}", a.label(), b.label())
                })?;
                code = (xa, xb);
                for (hook, (ns_a, n_a)) in &ha {
                    let Some((ns_b, n_b)) = hb.get(hook) else {
                        continue;
                    };
                    if *n_a == 0 || *n_b == 0 {
                        continue;
                    }
                    by[order].entry(hook).or_default().push((
                        *ns_a as f64 / *n_a as f64,
                        *ns_b as f64 / *n_b as f64,
                        *n_a,
                        *n_b,
                    ));
                }
                if !json {
                    let txt: Vec<String> = ha
                        .iter()
                        .filter_map(|(h, (ns, n))| {
                            let (nsb, nb) = hb.get(h)?;
                            (*n > 1000 && *nb > 0)
                                .then(|| format!("{h} {} / {} ns", ns / n, nsb / nb))
                        })
                        .collect();
                    eprintln!(
                        "bench: same packets run {} {} {} + {}: {}",
                        i + 1,
                        if first_a { "a first" } else { "b first" },
                        a.label(),
                        b.label(),
                        txt.join(", ")
                    );
                }
            }
        }
        let hooks: HashSet<&'static str> = by.iter().flat_map(|m| m.keys().copied()).collect();
        let mut hooks: Vec<_> = hooks.into_iter().collect();
        hooks.sort();
        for hook in hooks {
            let get = |o: usize| by[o].get(hook).cloned().unwrap_or_default();
            let med = |v: &[Hit], f: fn(&Hit) -> f64| median(v.iter().map(f).collect());
            let (o0, o1) = (get(0), get(1));
            if o0.is_empty() || o1.is_empty() {
                continue;
            }
            let all: Vec<_> = o0.iter().chain(&o1).cloned().collect();
            // only hooks with real traffic: a handful of hits says nothing per hit
            if med(&all, |r| r.2 as f64) < 1000.0 {
                continue;
            }
            rows.push(SameRow {
                a: a.label().into(),
                b: b.label().into(),
                hook: hook.into(),
                a_ns_per_hit: [med(&o0, |r| r.0), med(&o1, |r| r.0)],
                b_ns_per_hit: [med(&o0, |r| r.1), med(&o1, |r| r.1)],
                ratio: [med(&o0, |r| r.1 / r.0), med(&o1, |r| r.1 / r.0)],
                ratio_both: (med(&o0, |r| r.1 / r.0) * med(&o1, |r| r.1 / r.0)).sqrt(),
                b_minus_a_ns: (med(&o0, |r| r.1 - r.0) + med(&o1, |r| r.1 - r.0)) / 2.0,
                a_hits: med(&all, |r| r.2 as f64) as u64,
                b_hits: med(&all, |r| r.3 as f64) as u64,
                a_xlated_bytes: code.0.get(hook).copied().unwrap_or(0),
                b_xlated_bytes: code.1.get(hook).copied().unwrap_or(0),
            });
        }
    }
    Ok(rows)
}

/// One transfer with both sides attached (`first_a`: a attaches first).
fn one(
    pair: &Pair,
    env: &Env,
    a: &Side,
    b: &Side,
    first_a: bool,
    bytes: u64,
) -> Result<(PerHook, PerHook, Code, Code)> {
    let (first, second) = if first_a { (a, b) } else { (b, a) };
    let (r1, ids1) = start(first, env)?;
    let (r2, ids2) = match start(second, env) {
        Ok(r) => r,
        Err(e) => {
            stop(r1);
            return Err(e);
        }
    };
    let (s1, s2) = (bpf_stats(&ids1), bpf_stats(&ids2));
    let (x1, x2) = (xlated(&ids1), xlated(&ids2));
    pin_this_thread(Some(1));
    let t = Transfer {
        exe: env.tracer.clone(),
        pair,
        port: PORT,
        bytes,
        conns: 1,
        ipv6: false,
        rcvbuf: None,
        timeout: Duration::from_secs(300),
        send: Default::default(),
    };
    let done = t.run_both(true);
    pin_this_thread(None);
    let (d1, d2) = (
        stats_delta(&s1, &bpf_stats(&ids1)),
        stats_delta(&s2, &bpf_stats(&ids2)),
    );
    stop(r2);
    stop(r1);
    done?;
    let (h1, h2) = (per_hook(&d1), per_hook(&d2));
    Ok(if first_a {
        (h1, h2, x1, x2)
    } else {
        (h2, h1, x2, x1)
    })
}

/// The pairs of `--same-packets`: `idle` is the pid of a process that owns no socket.
pub fn pairs(nolog: Option<PathBuf>, idle: u32, with_bpftrace: bool) -> Vec<(Side, Side)> {
    let port = PORT.to_string();
    let tracer = |label, extra: &[&str], obj: Option<PathBuf>| Side::Tracer {
        label,
        args: [
            "--netns",
            "all",
            "--port",
            &port,
            "-q",
            "--json",
            "--no-verdicts",
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .collect(),
        obj,
    };
    let pid = idle.to_string();
    let mut v = Vec::new();
    if let Some(o) = nolog {
        v.push((
            tracer("no-log-code", &[], Some(o)),
            tracer("log-off", &[], None),
        ));
    }
    v.push((
        tracer("log-off", &[], None),
        tracer("log-warn", &["--ebpf-log", "warn"], None),
    ));
    v.push((
        tracer("pid-miss-log-off", &["--pid", &pid], None),
        tracer(
            "pid-miss-log-debug",
            &["--pid", &pid, "--ebpf-log", "debug"],
            None,
        ),
    ));
    if with_bpftrace {
        v.push((tracer("tracer", &[], None), Side::Bpftrace));
    }
    v
}

/// A process that owns no socket, for the `--pid` pairs.
pub fn idle_process() -> Result<Child> {
    Command::new("sleep")
        .arg("3600")
        .spawn()
        .context("starting sleep (the --pid target that owns no socket)")
}

/// The table.
pub fn report(rows: &[SameRow], json: bool) {
    if json {
        for r in rows {
            let row = BenchRow::SamePackets(r.clone());
            println!("{}", serde_json::to_string(&row).unwrap_or_default());
        }
        return;
    }
    println!("\nsame packets: two observers attached together, ns per hit of each (a / b), medians per attach order");
    println!(
        "{:<18} {:<20} {:<26} {:>17} {:>17} {:>10} {:>10} {:>17}",
        "a", "b", "hook", "a first", "b first", "b/a", "b-a ns", "code bytes a / b"
    );
    for r in rows {
        println!(
            "{:<18} {:<20} {:<26} {:>7.0} / {:>7.0} {:>7.0} / {:>7.0} {:>10.3} {:>+10.0} {:>7} / {:>7}",
            r.a,
            r.b,
            r.hook,
            r.a_ns_per_hit[0],
            r.b_ns_per_hit[0],
            r.a_ns_per_hit[1],
            r.b_ns_per_hit[1],
            r.ratio_both,
            r.b_minus_a_ns,
            r.a_xlated_bytes,
            r.b_xlated_bytes
        );
    }
    println!("(b/a: geometric mean of the two orders' median ratios; b-a: the mean of their median differences)");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_map_to_their_hooks_whoever_loaded_them() {
        // tcpwin-trace's names and bpftrace's (kernel names: 15 characters)
        assert_eq!(hook_of("tcp_probe"), Some("tcp:tcp_probe"));
        assert_eq!(hook_of("tp_tcp_rcv_spac"), Some("tcp:tcp_rcv_space_adjust"));
        assert_eq!(hook_of("tcp_rcv_space_a"), Some("tcp:tcp_rcv_space_adjust"));
        assert_eq!(hook_of("tp_tcp_rcvbuf_g"), Some("tcp:tcp_rcvbuf_grow"));
        assert_eq!(hook_of("inet_sock_set_s"), Some("sock:inet_sock_set_state"));
        assert_eq!(hook_of("tcp_sockets"), None);
    }
}
