//! The lab's paths and scenarios: sender, path and receiver namespaces, the path delaying every
//! frame rtt/2 each way and limiting the rate towards the receiver (at the sender's own egress,
//! where TCP small queues keep the queue short, or inside the path with a deep queue, as a home
//! router or a cable modem holds one); or a plain veth pair (a fast path, RTTs in µs).
//!
//! `--path` measures the path itself. `--scenario` sets up a slow transfer — the articles' (64 KB
//! without window scaling, an SO_RCVBUF capped by rmem_max, autotuning at tcp_rmem's max, GRO's
//! ratio), and the ones real programs show (iperf3 `-w`/`-R`/`-P`, nginx `sndbuf=`, curl
//! `--limit-rate`, a bottleneck with a deep queue) — with each congestion control, reads both
//! ends of the connection together, and sets the tool's verdict beside the one the scenario is
//! built to show. `--repeat N` runs each N times and prints the accuracy table; any mismatch
//! makes the lab exit non-zero.
use std::{collections::BTreeMap, time::Duration};

use anyhow::{bail, Context, Result};
use tcpwin_lab::{
    apps::App,
    harness::{check_stop, SendOpts, Transfer},
    netns::Pair,
    sysctl::GlobalSysctl,
};
use tcpwin_model::{
    judge::Judge,
    rows::WanRow,
    units::PathSpec,
    verdict::{Limit, Verdict},
};

use crate::{
    gather::{scope::Scope, snapshot},
    host::{kconfig, netns},
    kernel::{btf::VMLINUX, iter::SocketIter},
};

const PORT: u16 = 5403;
/// Seconds per transfer; the verdict is taken over [2 s, 5 s], the sender's own rate over the
/// last two thirds.
const SECS: f64 = 6.0;
/// When the verdict's interval starts and how long it lasts.
const JUDGE_FROM: Duration = Duration::from_secs(2);
const JUDGE_OVER: Duration = Duration::from_secs(3);
/// The congestion controls every scenario runs with: the namespace default (only these two may
/// be set per namespace here), so real programs use it too.
pub const CCS: [&str; 2] = ["bbr", "reno"];

/// What the receiver's side is set to in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recv {
    /// the namespace's defaults: autotuning
    Auto,
    /// `net.ipv4.tcp_window_scaling=0` in the receiver's namespace
    WscaleOff,
    /// the receiver asks SO_RCVBUF `req`, with net.core.rmem_max set to `rmem_max`
    SoRcvbuf { req: u32, rmem_max: u64 },
    /// autotuning up to `tcp_rmem[2]` = this
    RmemMax(u64),
    /// autotuning off, the buffer pinned at this (`tcp_moderate_rcvbuf=0`, tcp_rmem)
    Pinned(u64),
    /// pinned at `buf`, and TCP_WINDOW_CLAMP `clamp` set by the application
    Clamped { buf: u64, clamp: u32 },
    /// autotuning, the application reading `bps` only
    SlowReader { bps: u64 },
}

impl Recv {
    fn describe(self) -> String {
        match self {
            Recv::Auto => "autotuning".into(),
            Recv::WscaleOff => "tcp_window_scaling=0".into(),
            Recv::SoRcvbuf { req, rmem_max } => {
                format!("SO_RCVBUF {req}, rmem_max {rmem_max}")
            }
            Recv::RmemMax(m) => format!("autotuning, tcp_rmem max {m}"),
            Recv::Pinned(b) => format!("pinned {b} (tcp_moderate_rcvbuf=0)"),
            Recv::Clamped { buf, clamp } => format!("pinned {buf}, TCP_WINDOW_CLAMP {clamp}"),
            Recv::SlowReader { bps } => format!("application reads {} Mbit/s", bps / M),
        }
    }
}

/// The path of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// veth between two namespaces: RTTs of tens of µs
    Veth,
    /// the delay line, `rate` at the sender's egress (no queue) or inside the path with a queue
    /// of `queue_ms` at that rate
    Wan {
        rtt_ms: u64,
        rate_bps: u64,
        queue_ms: Option<u32>,
    },
}

#[derive(Clone, Copy, Debug)]
struct Spec {
    scenario: &'static str,
    path: Path,
    mtu: u32,
    gro: bool,
    recv: Recv,
    /// None: the lab's own endpoints (with the receiver's socket options of `recv`)
    app: Option<App>,
    expected: Limit,
    /// a second verdict that says the same to the user, where the path decides between them
    /// (the window not the limit: `not-window-limited` without a queue, `path-queue` when reno
    /// fills the bottleneck's queue)
    also: Option<Limit>,
    /// one of the rows CI runs (`--quick`): the main contrasts
    quick: bool,
}

const M: u64 = 1_000_000;
const RMEM_MAX_003: u64 = 425_984;
const RMEM_MAX_BIG: u64 = 16 << 20;

const fn wan(rtt_ms: u64, rate_mbit: u64) -> Path {
    Path::Wan {
        rtt_ms,
        rate_bps: rate_mbit * M,
        queue_ms: None,
    }
}

const fn deep(rtt_ms: u64, rate_mbit: u64, queue_ms: u32) -> Path {
    Path::Wan {
        rtt_ms,
        rate_bps: rate_mbit * M,
        queue_ms: Some(queue_ms),
    }
}

/// The defaults a row changes.
const BASE: Spec = Spec {
    scenario: "",
    path: wan(20, 100),
    mtu: 1500,
    gro: true,
    recv: Recv::Auto,
    app: None,
    expected: Limit::NotWindowLimited,
    also: Some(Limit::PathQueue),
    quick: false,
};

const fn iperf3(window: Option<u32>, reverse: bool, streams: u8) -> Option<App> {
    Some(App::Iperf3 {
        window,
        reverse,
        streams,
    })
}

/// Every row, by scenario. Rates are scaled to what the delay line holds on this machine kind
/// (see `tcpwin_lab::netns::WAN_MAX_RATE`); the articles' RTTs are kept.
fn rows(scenario: &str, quick: bool) -> Result<Vec<Spec>> {
    use Limit::*;
    let sweep = |req: u32, expected: Limit| Spec {
        scenario: "window-sweep",
        path: wan(40, 200),
        recv: Recv::SoRcvbuf {
            req,
            rmem_max: RMEM_MAX_BIG,
        },
        expected,
        also: (expected == NotWindowLimited).then_some(PathQueue),
        ..BASE
    };
    let all = [
        // 002: 64 KB without window scaling
        Spec {
            scenario: "wscale-off",
            recv: Recv::WscaleOff,
            expected: WscaleOff,
            also: None,
            quick: true,
            ..BASE
        },
        Spec {
            scenario: "wscale-off",
            path: wan(100, 100),
            recv: Recv::WscaleOff,
            expected: WscaleOff,
            also: None,
            ..BASE
        },
        // 002's table: the window from 64 KB up, until the bottleneck takes over (ceilings
        // within 10 % of the bottleneck are left out: either verdict would be fair there)
        sweep(32 << 10, RcvbufLocked),
        sweep(128 << 10, RcvbufLocked),
        sweep(256 << 10, RcvbufLocked),
        sweep(2 << 20, NotWindowLimited),
        sweep(8 << 20, NotWindowLimited),
        // 003: SO_RCVBUF 4 MB capped by rmem_max 425984, then rmem_max raised
        Spec {
            scenario: "rmem-max",
            path: wan(18, 1000),
            gro: false,
            recv: Recv::SoRcvbuf {
                req: 4 << 20,
                rmem_max: RMEM_MAX_003,
            },
            expected: RcvbufLocked,
            also: None,
            quick: true,
            ..BASE
        },
        Spec {
            scenario: "rmem-max",
            path: wan(18, 1000),
            gro: false,
            recv: Recv::SoRcvbuf {
                req: 4 << 20,
                rmem_max: RMEM_MAX_BIG,
            },
            expected: NotWindowLimited,
            ..BASE
        },
        Spec {
            scenario: "autotune-max",
            path: wan(18, 300),
            recv: Recv::RmemMax(512 << 10),
            expected: AutotuneMax,
            also: None,
            quick: true,
            ..BASE
        },
        // two caps: tcp_rmem max 512 KB and no GRO (ratio ~160); the operator's setting is the
        // primary limit (doubling it doubles the rate), the ratio a factor (+43 % with GRO)
        Spec {
            scenario: "autotune-max",
            path: wan(20, 300),
            gro: false,
            recv: Recv::RmemMax(512 << 10),
            expected: AutotuneMax,
            also: None,
            quick: true,
            ..BASE
        },
        // one pinned buffer, the ratio decides the window: GRO off (162) cannot carry the
        // path's 180 Mbit/s at 40 ms, GRO alone would (229: 937 984 B); GRO on behind 100 Mbit/s
        // the window no longer binds
        Spec {
            scenario: "gro",
            path: wan(40, 180),
            gro: false,
            recv: Recv::Pinned(1 << 20),
            expected: LowRatio,
            also: None,
            quick: true,
            ..BASE
        },
        Spec {
            scenario: "gro",
            path: wan(40, 100),
            recv: Recv::Pinned(1 << 20),
            expected: NotWindowLimited,
            quick: true,
            ..BASE
        },
        Spec {
            scenario: "not-window-limited",
            path: wan(20, 40),
            expected: NotWindowLimited,
            quick: true,
            ..BASE
        },
        Spec {
            scenario: "window-clamp",
            path: wan(20, 300),
            recv: Recv::Clamped {
                buf: 4 << 20,
                clamp: 200_000,
            },
            expected: WindowClamp,
            also: None,
            quick: true,
            ..BASE
        },
        Spec {
            scenario: "app-not-reading",
            path: wan(20, 300),
            recv: Recv::SlowReader { bps: 20 * M },
            expected: AppNotReading,
            also: None,
            quick: true,
            ..BASE
        },
        // behind a bottleneck with a deep queue the window is not what binds, even when it is
        // small: base RTT 2 ms, 20 Mbit/s, 250 ms of queue; scaling off (64 KB / 2 ms would be
        // 262 Mbit/s): turning scaling on changes nothing
        Spec {
            scenario: "queue",
            path: deep(2, 20, 250),
            recv: Recv::WscaleOff,
            app: iperf3(None, false, 1),
            expected: PathQueue,
            also: None,
            quick: true,
            ..BASE
        },
        // the fix for autotune-max applied behind a deep queue: a bigger window only fills it
        Spec {
            scenario: "queue",
            path: deep(18, 100, 100),
            recv: Recv::RmemMax(16 << 20),
            app: iperf3(None, false, 1),
            expected: PathQueue,
            also: Some(NotWindowLimited),
            ..BASE
        },
        // iperf3 -w 8K on a fast veth: both ends' buffers set (SO_SNDBUF and SO_RCVBUF); the
        // receiver's locked buffer binds, at both ends
        Spec {
            scenario: "iperf3",
            path: Path::Veth,
            app: iperf3(Some(8 << 10), false, 1),
            expected: RcvbufLocked,
            also: None,
            quick: true,
            ..BASE
        },
        // iperf3 -R: the server sends; the receiving client's tcp_rmem max binds
        Spec {
            scenario: "iperf3",
            path: wan(18, 300),
            recv: Recv::RmemMax(512 << 10),
            app: iperf3(None, true, 1),
            expected: AutotuneMax,
            also: None,
            ..BASE
        },
        // iperf3 -P 4: four streams, each held by tcp_rmem max 128 KB (4 x 46 Mbit/s < 300)
        Spec {
            scenario: "iperf3",
            path: wan(20, 300),
            recv: Recv::RmemMax(128 << 10),
            app: iperf3(None, false, 4),
            expected: AutotuneMax,
            also: None,
            ..BASE
        },
        // nginx with `listen ... sndbuf=32k`: its 64 KB send buffer holds the flow
        Spec {
            scenario: "nginx",
            path: wan(20, 300),
            app: Some(App::NginxCurl {
                sndbuf: Some(32 << 10),
                limit_rate: None,
            }),
            expected: Sndbuf,
            also: None,
            quick: true,
            ..BASE
        },
        // curl --limit-rate 1M: the reader, not the window
        Spec {
            scenario: "nginx",
            path: wan(20, 300),
            app: Some(App::NginxCurl {
                sndbuf: None,
                limit_rate: Some(8 * M),
            }),
            expected: AppNotReading,
            also: None,
            quick: true,
            ..BASE
        },
        Spec {
            scenario: "nginx",
            path: wan(20, 100),
            app: Some(App::NginxCurl {
                sndbuf: None,
                limit_rate: None,
            }),
            expected: NotWindowLimited,
            ..BASE
        },
    ];
    let names: Vec<&str> = {
        let mut v: Vec<&str> = all.iter().map(|s| s.scenario).collect();
        v.dedup();
        v
    };
    if scenario != "all" && !names.contains(&scenario) {
        bail!(
            "--scenario {scenario}: no such scenario (one of: {}, all)",
            names.join(", ")
        );
    }
    Ok(all
        .iter()
        .filter(|s| (scenario == "all" || s.scenario == scenario) && (!quick || s.quick))
        .copied()
        .collect())
}

/// Both ends' sockets of `port` in the pair's namespaces, read together.
fn sample(
    it: &mut snapshot::Source,
    pair: &Pair,
    port: u16,
    hz: Option<u32>,
) -> Result<Vec<snapshot::Seen>> {
    let filter = Scope {
        port: Some(port),
        ..Scope::default()
    };
    let mut targets = netns::resolve(Some(&pair.a))?;
    targets.extend(netns::resolve(Some(&pair.b))?);
    snapshot::read(it, &targets, &filter, hz)
}

/// One end judged: its verdict and its index in the reading.
type Judged = (Verdict, usize);

/// The transfer's connection judged over the interval between two readings: (receiving end,
/// sending end), each with its facts. The busiest sender of the port is the transfer (a real
/// program's control connection moves almost nothing).
fn judge(
    before: &[snapshot::Seen],
    after: &[snapshot::Seen],
    target: Option<u64>,
) -> Option<(Judged, Option<Judged>)> {
    let mut judge = Judge::new(target);
    judge.judge(before.iter().map(|s| (&s.facts, &*s.host)));
    let verdicts = judge.judge(after.iter().map(|s| (&s.facts, &*s.host)));
    let acked = |i: usize| {
        let f = &after[i].facts;
        let b = before
            .iter()
            .find(|s| s.facts.id.cookie == f.id.cookie)
            .and_then(|s| s.facts.bytes_acked)
            .unwrap_or(0);
        f.bytes_acked.unwrap_or(0).saturating_sub(b)
    };
    let sender = (0..after.len()).max_by_key(|i| acked(*i))?;
    let sv = verdicts[sender].clone();
    let receiver = sv
        .peer
        .as_ref()
        .and_then(|p| after.iter().position(|s| &s.facts.id == p));
    match receiver {
        Some(r) => Some(((verdicts[r].clone(), r), Some((sv, sender)))),
        // the other end was not read (or not paired): the sender alone
        None => Some(((sv.clone(), sender), None)),
    }
}

/// Runs one row on a path of its own, with congestion control `cc`.
fn run_row(
    exe: &std::path::Path,
    it: &mut snapshot::Source,
    s: &Spec,
    cc: &str,
    n: usize,
    run: u32,
) -> Result<WanRow> {
    if let Some(app) = s.app {
        app.require()?;
    }
    let prefix = format!("tcpwin-wan-{}-{n}", std::process::id());
    let (pair, rtt_ms, rate_bps, queue_ms) = match s.path {
        Path::Veth => (
            Pair::create(&prefix, s.mtu).context("the lab's veth pair")?,
            0,
            None,
            None,
        ),
        Path::Wan {
            rtt_ms,
            rate_bps,
            queue_ms,
        } => {
            let queue = queue_ms.map(|q| rate_bps * q as u64 / 8 / 1000);
            let p = Pair::create_wan_with(
                &prefix,
                s.mtu,
                Duration::from_millis(rtt_ms),
                Some(rate_bps),
                queue,
            )
            .context("the lab's WAN path (namespaces, veth, delay line)")?;
            (p, rtt_ms, Some(rate_bps), queue_ms)
        }
    };
    pair.set_receiver_gro(s.gro)?;
    for ns in [&pair.a, &pair.b] {
        Pair::sysctl(ns, "net.ipv4.tcp_congestion_control", cc)?;
    }
    let mut rcvbuf = None;
    let mut _global = None;
    match s.recv {
        Recv::Auto | Recv::SlowReader { .. } => {}
        Recv::WscaleOff => Pair::sysctl(&pair.b, "net.ipv4.tcp_window_scaling", "0")?,
        Recv::SoRcvbuf { req, rmem_max } => {
            rcvbuf = Some(req);
            _global = Some(GlobalSysctl::set(
                "net.core.rmem_max",
                &rmem_max.to_string(),
            )?);
        }
        Recv::RmemMax(m) => {
            Pair::sysctl(&pair.b, "net.ipv4.tcp_rmem", &format!("4096 131072 {m}"))?
        }
        Recv::Pinned(b) => pair.pin_receiver_buffer(b as u32)?,
        Recv::Clamped { buf, .. } => pair.pin_receiver_buffer(buf as u32)?,
    }
    let hz = kconfig::hz();
    let watch = |it: &mut snapshot::Source| -> Result<_> {
        std::thread::sleep(JUDGE_FROM);
        let first = sample(it, &pair, PORT, hz)?;
        std::thread::sleep(JUDGE_OVER);
        let second = sample(it, &pair, PORT, hz)?;
        Ok((first, second))
    };
    let (readings, throughput, sender_report) = match s.app {
        None => {
            let t = Transfer {
                exe: exe.to_path_buf(),
                pair: &pair,
                port: PORT,
                bytes: 0,
                conns: 1,
                ipv6: false,
                rcvbuf,
                timeout: Duration::from_secs(60),
                send: SendOpts {
                    secs: Some(SECS),
                    cc: Some(cc.into()),
                    window_clamp: match s.recv {
                        Recv::Clamped { clamp, .. } => Some(clamp),
                        _ => None,
                    },
                    read_bps: match s.recv {
                        Recv::SlowReader { bps } => Some(bps),
                        _ => None,
                    },
                },
            };
            let (_, tx, readings) = t.run_watched(true, || watch(it))?;
            let sender = tx.first().context("the sender reported nothing")?.clone();
            (readings?, sender.steady_bps, Some(sender))
        }
        Some(app) => {
            let running = app.start(&pair, PORT, SECS, cc)?;
            let readings = watch(it);
            let rate = running.finish(Duration::from_secs(30))?;
            (readings?, rate, None)
        }
    };
    let (first, second) = readings;
    let (rx, tx) = judge(&first, &second, rate_bps).with_context(|| {
        format!(
            "no connection on port {PORT} was read in {} / {}",
            pair.a, pair.b
        )
    })?;
    let (v, ri) = rx;
    let facts = &second[ri].facts;
    let totals = pair.path.as_ref().map(|p| p.totals()).unwrap_or_default();
    let app_rate = match (s.recv, s.app) {
        (Recv::SlowReader { bps }, None) => bps,
        (
            _,
            Some(App::NginxCurl {
                limit_rate: Some(r),
                ..
            }),
        ) => r,
        _ => u64::MAX,
    };
    Ok(WanRow {
        scenario: s.scenario.into(),
        condition: s.recv.describe(),
        app: s
            .app
            .map(|a| a.describe())
            .unwrap_or_else(|| "own endpoints".into()),
        run,
        queue_ms,
        rtt_ms: rtt_ms as f64,
        min_rtt_ms: sender_report
            .as_ref()
            .map(|r| r.min_rtt_us as f64 / 1000.0)
            .or(v.base_rtt_us.map(|b| b as f64 / 1000.0)),
        rate_limit_bps: rate_bps,
        mtu: s.mtu,
        gro: s.gro,
        cc: cc.into(),
        window: v.window,
        ceiling_bps: v.ceiling_bps,
        // the slowest of the window (at the base RTT), the bottleneck and the reading
        // application
        predicted_bps: [
            v.base_ceiling_bps.or(v.ceiling_bps),
            rate_bps,
            Some(app_rate),
        ]
        .into_iter()
        .flatten()
        .min()
        .filter(|c| *c != u64::MAX),
        throughput_bps: throughput,
        rwnd_limited_share: sender_report
            .as_ref()
            .and_then(|r| r.busy_us.filter(|b| *b > 0).zip(r.rwnd_limited_us))
            .map(|(b, r)| r as f64 / b as f64)
            .or(tx.as_ref().and_then(|(t, _)| t.rwnd_limited_share)),
        snd_wnd: sender_report.as_ref().and_then(|r| r.steady_snd_wnd),
        verdict: Some(v.limit),
        sender_verdict: tx.as_ref().map(|(t, _)| t.limit),
        expected: s.expected,
        also_expected: s.also,
        rtt_us: v.rtt_us,
        base_rtt_us: v.base_rtt_us,
        queue_us: v.queue_us,
        setting: v.setting.clone(),
        suggested: v.suggested.clone(),
        scaling_ratio: facts.scaling_ratio,
        window_clamp: facts.window_clamp,
        sk_rcvbuf: facts.sk_rcvbuf,
        path_late: totals.late,
        path_max_late_us: totals.max_late_us,
        path_drops: totals.own_drops(),
        path_rx_late: totals.rx_late,
        path_max_rx_wait_us: totals.max_rx_wait_us,
        path_forwarded: totals.forwarded,
        path_added_rtt_us: totals.added_rtt_us,
        // veth has no delay line: nothing to be late
        path_on_time: pair.path.as_ref().is_none_or(|p| totals.on_time(p.rtt)),
        attempt: 1,
    })
}

/// Attempts at a row whose path was late (its delay line fell behind: the RTT, the verdict's
/// base, was not the path's) before it is reported unjudged.
const ATTEMPTS: u32 = 3;

/// What the scenarios ask for: which, the quick subset, how many runs, which congestion
/// controls.
pub struct Plan<'a> {
    pub scenario: &'a str,
    pub quick: bool,
    pub repeat: u32,
    pub ccs: Vec<String>,
}

/// `--scenario`: every row asked, with every congestion control, `repeat` times; each row is
/// handed to `each` as it completes.
pub fn scenarios(
    exe: &std::path::Path,
    plan: &Plan,
    each: &mut dyn FnMut(&WanRow) -> Result<()>,
) -> Result<Vec<WanRow>> {
    let specs = rows(plan.scenario, plan.quick)?;
    let mut it = snapshot::Source::Iterator(Box::new(SocketIter::load(
        std::path::Path::new(VMLINUX),
        None,
    )?));
    let mut out = Vec::new();
    let mut n = 0;
    for run in 1..=plan.repeat {
        for s in &specs {
            for cc in &plan.ccs {
                check_stop()?;
                eprintln!(
                    "lab: run {run}/{}: {} {}, {}, {}: {} ({cc})",
                    plan.repeat,
                    s.scenario,
                    match s.path {
                        Path::Veth => "veth".to_string(),
                        Path::Wan {
                            rtt_ms,
                            rate_bps,
                            queue_ms,
                        } => format!(
                            "rtt {rtt_ms} ms, {} Mbit/s{}",
                            rate_bps / M,
                            queue_ms
                                .map(|q| format!(", {q} ms queue"))
                                .unwrap_or_default()
                        ),
                    },
                    format_args!("MTU {} GRO {}", s.mtu, if s.gro { "on" } else { "off" }),
                    s.app
                        .map(|a| a.describe())
                        .unwrap_or_else(|| "own endpoints".into()),
                    s.recv.describe()
                );
                let mut attempt = 1;
                let row = loop {
                    let mut row = run_row(exe, &mut it, s, cc, n, run)
                        .with_context(|| format!("row {s:?} with {cc}"))?;
                    n += 1;
                    row.attempt = attempt;
                    if row.path_on_time || attempt == ATTEMPTS {
                        break row;
                    }
                    eprintln!(
                        "lab: the path was late (the delay line added {} us to a round trip on average; {} of {} frames more than 1 ms late): running the row again",
                        row.path_added_rtt_us,
                        row.path_late + row.path_rx_late,
                        row.path_forwarded
                    );
                    attempt += 1;
                    check_stop()?;
                };
                each(&row)?;
                out.push(row);
            }
        }
    }
    Ok(out)
}

/// One line of the accuracy table: a scenario's row with one congestion control, one end.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AccuracyKey {
    pub scenario: String,
    pub setup: String,
    pub cc: String,
    pub end: &'static str,
    pub expected: Limit,
    pub also: Option<Limit>,
}

/// One key's runs: how many named the scenario's limit, of how many judged, the verdicts got,
/// and each run's measured / predicted throughput (a property of the path and this machine,
/// stated as a spread, never a pass or fail); rows not judged because their path was late.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub ok: u32,
    pub n: u32,
    pub got: BTreeMap<Limit, u32>,
    pub throughput_ratios: Vec<f64>,
    pub unjudged: u32,
}

impl Tally {
    /// The median and the worst (farthest from 1) of measured / predicted.
    pub fn spread(&self) -> Option<(f64, f64)> {
        let mut v = self.throughput_ratios.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let median = v[v.len() / 2];
        let worst = v
            .iter()
            .copied()
            .max_by(|a, b| (a - 1.0).abs().total_cmp(&(b - 1.0).abs()))?;
        Some((median, worst))
    }
}

pub type Accuracy = BTreeMap<AccuracyKey, Tally>;

/// Expected against got, per scenario row x congestion control x end; rows whose path was late
/// are counted apart, not judged.
pub fn accuracy(rows: &[WanRow]) -> Accuracy {
    let mut t: Accuracy = BTreeMap::new();
    for r in rows {
        for (end, got) in [("receiver", r.verdict), ("sender", r.sender_verdict)] {
            let key = AccuracyKey {
                scenario: r.scenario.clone(),
                setup: format!("{}; {}", r.app, r.condition),
                cc: r.cc.clone(),
                end,
                expected: r.expected,
                also: r.also_expected,
            };
            let e = t.entry(key).or_default();
            if !r.path_on_time {
                e.unjudged += 1;
                continue;
            }
            e.n += 1;
            if r.accepts(got) {
                e.ok += 1;
            }
            *e.got.entry(got.unwrap_or(Limit::Unknown)).or_default() += 1;
            if let (Some(m), Some(p)) = (r.throughput_bps, r.predicted_bps.filter(|p| *p > 0)) {
                e.throughput_ratios.push(m as f64 / p as f64);
            }
        }
    }
    t
}

/// The lab's outcome: an error naming how many verdicts differ from their scenario's (the lab
/// exits 1), or Ok.
pub fn outcome(t: &Accuracy) -> Result<()> {
    let missed: u32 = t.values().map(|x| x.n - x.ok).sum();
    let all: u32 = t.values().map(|x| x.n).sum();
    if missed > 0 {
        bail!(
            "{missed} of {all} verdicts differ from the limit their scenario sets up (marked (!))"
        );
    }
    Ok(())
}

/// `--path`: the path alone, measured with ample windows.
pub fn path(exe: &std::path::Path, p: PathSpec) -> Result<WanRow> {
    // without a rate the path is as fast as the delay line holds
    let rate = p.rate_bps.unwrap_or(tcpwin_lab::netns::WAN_MAX_RATE);
    let s = Spec {
        scenario: "path",
        path: Path::Wan {
            rtt_ms: p.rtt.as_millis() as u64,
            rate_bps: rate,
            queue_ms: None,
        },
        ..BASE
    };
    let mut it = snapshot::Source::Iterator(Box::new(SocketIter::load(
        std::path::Path::new(VMLINUX),
        None,
    )?));
    run_row(exe, &mut it, &s, "reno", 0, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_names() {
        let all = rows("all", false).unwrap();
        assert_eq!(all.len(), 24);
        assert_eq!(rows("all", true).unwrap().len(), 13);
        assert_eq!(rows("gro", false).unwrap().len(), 2);
        let e = rows("nope", false).unwrap_err().to_string();
        assert!(e.contains("wscale-off") && e.contains("all"), "{e}");
        // every limit a verdict can name on a connection judged from both ends has a scenario
        // (taken from Limit::ALL, so a new limit needs one); not: memory pressure (host-wide),
        // peer-window (a sender alone), idle and unknown
        for l in Limit::ALL.iter().copied().filter(|l| {
            !matches!(
                l,
                Limit::MemoryPressure | Limit::PeerWindow | Limit::Idle | Limit::Unknown
            )
        }) {
            assert!(all.iter().any(|s| s.expected == l), "no scenario shows {l}");
        }
    }

    fn row(expected: Limit, got: Limit, cc: &str) -> WanRow {
        WanRow {
            scenario: "s".into(),
            condition: "c".into(),
            app: "a".into(),
            run: 1,
            queue_ms: None,
            rtt_ms: 20.0,
            min_rtt_ms: None,
            rate_limit_bps: None,
            mtu: 1500,
            gro: true,
            cc: cc.into(),
            window: None,
            ceiling_bps: None,
            predicted_bps: None,
            throughput_bps: None,
            rwnd_limited_share: None,
            snd_wnd: None,
            verdict: Some(got),
            sender_verdict: Some(expected),
            expected,
            also_expected: None,
            rtt_us: None,
            base_rtt_us: None,
            queue_us: None,
            setting: None,
            suggested: None,
            scaling_ratio: None,
            window_clamp: None,
            sk_rcvbuf: None,
            path_late: 0,
            path_max_late_us: 0,
            path_drops: 0,
            path_rx_late: 0,
            path_max_rx_wait_us: 0,
            path_forwarded: 0,
            path_added_rtt_us: 0,
            path_on_time: true,
            attempt: 1,
        }
    }

    #[test]
    fn accuracy_counts_per_congestion_control_and_end() {
        let rows = vec![
            row(Limit::Sndbuf, Limit::Sndbuf, "bbr"),
            row(Limit::Sndbuf, Limit::NotWindowLimited, "bbr"),
            row(Limit::Sndbuf, Limit::Sndbuf, "reno"),
        ];
        let t = accuracy(&rows);
        let bbr_rx = t
            .iter()
            .find(|(k, _)| k.cc == "bbr" && k.end == "receiver")
            .unwrap()
            .1;
        assert_eq!((bbr_rx.ok, bbr_rx.n), (1, 2));
        let bbr_tx = t
            .iter()
            .find(|(k, _)| k.cc == "bbr" && k.end == "sender")
            .unwrap()
            .1;
        assert_eq!((bbr_tx.ok, bbr_tx.n), (2, 2));
        assert_eq!(t.len(), 4);
        // one mismatch: the lab fails, saying how many
        let e = outcome(&t).unwrap_err().to_string();
        assert!(e.starts_with("1 of 6 verdicts differ"), "{e}");
        assert!(outcome(&accuracy(&rows[2..])).is_ok());
    }

    /// A row measured on a late path is not judged (not a match, not a miss), and the
    /// throughput is a spread: median and the run farthest from the prediction.
    #[test]
    fn late_paths_are_not_judged_and_throughput_is_a_spread() {
        let mut late = row(Limit::Sndbuf, Limit::NotWindowLimited, "bbr");
        late.path_on_time = false;
        let ratio = |m: u64| {
            let mut r = row(Limit::Sndbuf, Limit::Sndbuf, "bbr");
            r.predicted_bps = Some(100);
            r.throughput_bps = Some(m);
            r
        };
        let t = accuracy(&[late, ratio(90), ratio(100), ratio(70)]);
        assert!(outcome(&t).is_ok());
        let rx = t.iter().find(|(k, _)| k.end == "receiver").unwrap().1;
        assert_eq!((rx.ok, rx.n, rx.unjudged), (3, 3, 1));
        assert_eq!(rx.spread(), Some((0.9, 0.7)));
        assert_eq!(Tally::default().spread(), None);
    }
}
