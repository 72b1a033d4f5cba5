//! The lab's long, narrow path: sender, path and receiver namespaces, the path delaying every
//! frame rtt/2 each way and limiting the rate towards the receiver. `--path` measures the path
//! itself; `--scenario` reproduces the articles' slow transfers (64 KB without window scaling,
//! an SO_RCVBUF capped by rmem_max, autotuning at tcp_rmem's max, GRO's ratio) and sets the
//! tool's verdicts beside what the sender measured itself.
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tcpwin_lab::{
    harness::{check_stop, SendOpts, Transfer},
    netns::Pair,
    sysctl::GlobalSysctl,
};
use tcpwin_model::{
    facts::{HostLimits, SockFacts},
    judge::Judge,
    schema::{EndpointReport, WanRow},
    units::PathSpec,
    verdict::{Limit, Verdict},
};

use crate::{
    cli::SocketFilter,
    gather::snapshot,
    host::{kconfig, netns},
    kernel::{btf::VMLINUX, iter::SocketIter},
};

const PORT: u16 = 5403;
/// Seconds per transfer; the verdict is taken over [2 s, 5 s], the sender's own rate over the
/// last two thirds.
const SECS: f64 = 6.0;
const CC: &str = "cubic";

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

#[derive(Clone, Copy, Debug)]
struct Spec {
    scenario: &'static str,
    rtt_ms: u64,
    rate_bps: u64,
    mtu: u32,
    gro: bool,
    recv: Recv,
    expected: Limit,
    /// one of the rows CI runs (`--quick`): the main contrasts
    quick: bool,
}

#[allow(clippy::too_many_arguments)]
const fn spec(
    scenario: &'static str,
    rtt_ms: u64,
    rate_bps: u64,
    mtu: u32,
    gro: bool,
    recv: Recv,
    expected: Limit,
    quick: bool,
) -> Spec {
    Spec {
        scenario,
        rtt_ms,
        rate_bps,
        mtu,
        gro,
        recv,
        expected,
        quick,
    }
}

const M: u64 = 1_000_000;
const RMEM_MAX_003: u64 = 425_984;
const RMEM_MAX_BIG: u64 = 16 << 20;

/// Every row, by scenario. Rates are scaled to what the delay line holds on this machine kind
/// (see `tcpwin_lab::netns::WAN_MAX_RATE`); the articles' RTTs are kept.
fn rows(scenario: &str, quick: bool) -> Result<Vec<Spec>> {
    use Limit::*;
    let all = [
        spec(
            "wscale-off",
            20,
            100 * M,
            1500,
            true,
            Recv::WscaleOff,
            WscaleOff,
            true,
        ),
        spec(
            "wscale-off",
            100,
            100 * M,
            1500,
            true,
            Recv::WscaleOff,
            WscaleOff,
            false,
        ),
        // 002's table: the window from 64 KB up, until the bottleneck takes over (ceilings
        // within 10 % of the bottleneck are left out: either verdict would be fair there)
        spec(
            "window-sweep",
            40,
            200 * M,
            1500,
            true,
            Recv::SoRcvbuf {
                req: 32 << 10,
                rmem_max: RMEM_MAX_BIG,
            },
            RcvbufLocked,
            false,
        ),
        spec(
            "window-sweep",
            40,
            200 * M,
            1500,
            true,
            Recv::SoRcvbuf {
                req: 128 << 10,
                rmem_max: RMEM_MAX_BIG,
            },
            RcvbufLocked,
            false,
        ),
        spec(
            "window-sweep",
            40,
            200 * M,
            1500,
            true,
            Recv::SoRcvbuf {
                req: 256 << 10,
                rmem_max: RMEM_MAX_BIG,
            },
            RcvbufLocked,
            false,
        ),
        spec(
            "window-sweep",
            40,
            200 * M,
            1500,
            true,
            Recv::SoRcvbuf {
                req: 2 << 20,
                rmem_max: RMEM_MAX_BIG,
            },
            NotWindowLimited,
            false,
        ),
        spec(
            "window-sweep",
            40,
            200 * M,
            1500,
            true,
            Recv::SoRcvbuf {
                req: 8 << 20,
                rmem_max: RMEM_MAX_BIG,
            },
            NotWindowLimited,
            false,
        ),
        // 003: SO_RCVBUF 4 MB capped by rmem_max 425984, then rmem_max raised
        spec(
            "rmem-max",
            18,
            1000 * M,
            1500,
            false,
            Recv::SoRcvbuf {
                req: 4 << 20,
                rmem_max: RMEM_MAX_003,
            },
            RcvbufLocked,
            true,
        ),
        spec(
            "rmem-max",
            18,
            1000 * M,
            1500,
            false,
            Recv::SoRcvbuf {
                req: 4 << 20,
                rmem_max: RMEM_MAX_BIG,
            },
            NotWindowLimited,
            false,
        ),
        spec(
            "autotune-max",
            18,
            300 * M,
            1500,
            true,
            Recv::RmemMax(512 << 10),
            AutotuneMax,
            true,
        ),
        // one pinned buffer: the ratio decides the window (162 GRO off, 229 on, MTU 9000)
        spec(
            "gro",
            36,
            300 * M,
            1500,
            false,
            Recv::Pinned(1 << 20),
            LowRatio,
            true,
        ),
        spec(
            "gro",
            36,
            300 * M,
            1500,
            true,
            Recv::Pinned(1 << 20),
            AutotuneMax,
            true,
        ),
        spec(
            "gro",
            36,
            300 * M,
            9000,
            false,
            Recv::Pinned(1 << 20),
            AutotuneMax,
            false,
        ),
        spec(
            "not-window-limited",
            20,
            40 * M,
            1500,
            true,
            Recv::Auto,
            NotWindowLimited,
            true,
        ),
        spec(
            "window-clamp",
            20,
            300 * M,
            1500,
            true,
            Recv::Clamped {
                buf: 4 << 20,
                clamp: 200_000,
            },
            WindowClamp,
            true,
        ),
        spec(
            "app-not-reading",
            20,
            300 * M,
            1500,
            true,
            Recv::SlowReader { bps: 20 * M },
            AppNotReading,
            true,
        ),
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

/// The sockets of `port` in one namespace, with its limits.
fn sample(
    it: &mut snapshot::Source,
    ns: &str,
    port: u16,
    hz: Option<u32>,
) -> Result<Vec<snapshot::Seen>> {
    let filter = SocketFilter {
        pid: None,
        port: Some(port),
    };
    snapshot::read(it, &netns::resolve(Some(ns))?, &filter, hz)
}

/// The verdict over the interval between two samples of the transfer's socket (the busiest of
/// the port's), and its facts.
fn judge(
    before: &[snapshot::Seen],
    after: &[snapshot::Seen],
    target: u64,
) -> Option<(Verdict, SockFacts, HostLimits)> {
    let now = after
        .iter()
        .max_by_key(|s| s.facts.bytes_received.max(s.facts.bytes_acked))?;
    let mut judge = Judge::new(Some(target));
    judge.judge(before.iter().map(|s| (&s.facts, &s.host)));
    let v = judge.judge([(&now.facts, &now.host)]).remove(0);
    Some((v, now.facts.clone(), now.host.clone()))
}

/// Runs one row on a path of its own.
fn run_row(exe: &std::path::Path, it: &mut snapshot::Source, s: &Spec, n: usize) -> Result<WanRow> {
    let rtt = Duration::from_millis(s.rtt_ms);
    let prefix = format!("tcpwin-wan-{}-{n}", std::process::id());
    let pair = Pair::create_wan(&prefix, s.mtu, rtt, Some(s.rate_bps))
        .context("the lab's WAN path (namespaces, veth, tbf, delay line)")?;
    pair.set_receiver_gro(s.gro)?;
    let mut rcvbuf = None;
    let mut _global = None;
    match s.recv {
        Recv::Auto => {}
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
        Recv::SlowReader { .. } => {}
    }
    let hz = kconfig::hz();
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
            cc: Some(CC.into()),
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
    let (_, tx, samples) = t.run_watched(true, || -> Result<_> {
        std::thread::sleep(Duration::from_secs(2));
        let b1 = sample(it, &pair.b, PORT, hz)?;
        let a1 = sample(it, &pair.a, PORT, hz)?;
        std::thread::sleep(Duration::from_secs(3));
        let b2 = sample(it, &pair.b, PORT, hz)?;
        let a2 = sample(it, &pair.a, PORT, hz)?;
        Ok((b1, b2, a1, a2))
    })?;
    let (b1, b2, a1, a2) = samples?;
    let sender: &EndpointReport = tx.first().context("the sender reported nothing")?;
    let rx = judge(&b1, &b2, s.rate_bps);
    let txv = judge(&a1, &a2, s.rate_bps).map(|(v, _, _)| v.limit);
    let totals = pair.path.as_ref().map(|p| p.totals()).unwrap_or_default();
    let (v, facts) = match &rx {
        Some((v, f, _)) => (Some(v), Some(f)),
        None => (None, None),
    };
    Ok(WanRow {
        scenario: s.scenario.into(),
        condition: s.recv.describe(),
        rtt_ms: s.rtt_ms as f64,
        min_rtt_ms: Some(sender.min_rtt_us as f64 / 1000.0),
        rate_limit_bps: Some(s.rate_bps),
        mtu: s.mtu,
        gro: s.gro,
        cc: CC.into(),
        window: v.and_then(|v| v.window),
        ceiling_bps: v.and_then(|v| v.ceiling_bps),
        // the slowest of the window, the bottleneck and the reading application
        predicted_bps: v.and_then(|v| v.ceiling_bps).map(|c| {
            let app = match s.recv {
                Recv::SlowReader { bps } => bps,
                _ => u64::MAX,
            };
            c.min(s.rate_bps).min(app)
        }),
        throughput_bps: sender.steady_bps,
        rwnd_limited_share: sender
            .busy_us
            .filter(|b| *b > 0)
            .zip(sender.rwnd_limited_us)
            .map(|(b, r)| r as f64 / b as f64),
        snd_wnd: sender.steady_snd_wnd,
        verdict: v.map(|v| v.limit),
        sender_verdict: txv,
        expected: s.expected,
        setting: v.and_then(|v| v.setting.clone()),
        suggested: v.and_then(|v| v.suggested.clone()),
        scaling_ratio: facts.and_then(|f| f.scaling_ratio),
        window_clamp: facts.and_then(|f| f.window_clamp),
        sk_rcvbuf: facts.and_then(|f| f.sk_rcvbuf),
        path_late: totals.late,
        path_max_late_us: totals.max_late_us,
        path_drops: totals.own_drops(),
    })
}

/// `--scenario`: every row asked, one after the other.
pub fn scenarios(exe: &std::path::Path, scenario: &str, quick: bool) -> Result<Vec<WanRow>> {
    let specs = rows(scenario, quick)?;
    let mut it = snapshot::Source::Iterator(Box::new(SocketIter::load(
        std::path::Path::new(VMLINUX),
        None,
    )?));
    let mut out = Vec::new();
    for (n, s) in specs.iter().enumerate() {
        check_stop()?;
        eprintln!(
            "lab: {} rtt {} ms, {} Mbit/s, MTU {}, GRO {}: {}",
            s.scenario,
            s.rtt_ms,
            s.rate_bps / M,
            s.mtu,
            if s.gro { "on" } else { "off" },
            s.recv.describe()
        );
        out.push(run_row(exe, &mut it, s, n).with_context(|| format!("row {s:?}"))?);
    }
    Ok(out)
}

/// `--path`: the path alone, measured with ample windows.
pub fn path(exe: &std::path::Path, p: PathSpec) -> Result<WanRow> {
    // without a rate the path is as fast as the delay line holds
    let rate = p.rate_bps.unwrap_or(tcpwin_lab::netns::WAN_MAX_RATE);
    let s = Spec {
        scenario: "path",
        rtt_ms: p.rtt.as_millis() as u64,
        rate_bps: rate,
        mtu: 1500,
        gro: true,
        recv: Recv::Auto,
        expected: Limit::NotWindowLimited,
        quick: true,
    };
    let mut it = snapshot::Source::Iterator(Box::new(SocketIter::load(
        std::path::Path::new(VMLINUX),
        None,
    )?));
    run_row(exe, &mut it, &s, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_names() {
        assert_eq!(rows("all", false).unwrap().len(), 16);
        assert_eq!(rows("all", true).unwrap().len(), 8);
        assert_eq!(rows("gro", false).unwrap().len(), 3);
        let e = rows("nope", false).unwrap_err().to_string();
        assert!(e.contains("wscale-off") && e.contains("all"), "{e}");
    }
}
