//! One row's path and settings, and its transfers: the namespaces, the delay line and what the
//! row sets up (kept between a transfer and its rerun once a fix is applied), and a transfer
//! read three times while it runs (at 2 s, a quarter second later, and at 5 s).
use std::time::Duration;

use anyhow::{Context, Result};
use tcpwin_lab::{
    apps::App,
    harness::{SendOpts, Transfer},
    netns::Pair,
    sysctl::GlobalSysctl,
};
use tcpwin_model::rows::EndpointReport;

use super::specs::{Path, Recv, Spec};
use crate::{
    gather::{scope::Scope, snapshot},
    host::netns,
};

pub(super) const PORT: u16 = 5403;
/// Seconds per transfer; the verdict is taken over [2 s, 5 s], the sender's own rate over the
/// last two thirds.
const SECS: f64 = 6.0;
/// When the readings are taken: the first, the one `ss` takes after it without `-i`, the end of
/// the interval.
const JUDGE_FROM: Duration = Duration::from_secs(2);
pub(super) const SNAPSHOT_AFTER: Duration = Duration::from_millis(250);
const JUDGE_UNTIL: Duration = Duration::from_secs(5);

/// A row's path and what it sets up, ready for transfers.
pub(super) struct Setup {
    pub pair: Pair,
    pub rtt_ms: u64,
    pub rate_bps: Option<u64>,
    pub queue_ms: Option<u32>,
    /// the lab's own endpoints' socket options (the row's, or a fix's)
    pub rcvbuf: Option<u32>,
    pub window_clamp: Option<u32>,
    /// TCP_WINDOW_CLAMP on the receiver's listener, before any handshake
    pub listen_clamp: Option<u32>,
    /// the program and its options (the row's, or a fix's)
    pub app: Option<App>,
    /// global sysctls changed for the row (or by a fix), restored on drop, the last changed
    /// first (a fix's guard saved the row's value; the row's guard the machine's)
    pub globals: Vec<GlobalSysctl>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        while let Some(g) = self.globals.pop() {
            drop(g);
        }
    }
}

/// Creates the row's path (`n` keeps namespace names apart) and sets it up with congestion
/// control `cc`.
pub(super) fn setup(s: &Spec, cc: &str, n: usize) -> Result<Setup> {
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
            let p = Pair::create_wan_lossy(
                &prefix,
                s.mtu,
                Duration::from_millis(rtt_ms),
                Some(rate_bps),
                queue,
                s.loss_ppm,
            )
            .context("the lab's WAN path (namespaces, veth, delay line)")?;
            (p, rtt_ms, Some(rate_bps), queue_ms)
        }
    };
    pair.set_receiver_gro(s.gro)?;
    for ns in [&pair.a, &pair.b] {
        Pair::sysctl(ns, "net.ipv4.tcp_congestion_control", cc)?;
    }
    if let Some(m) = s.wmem_max {
        Pair::sysctl(&pair.a, "net.ipv4.tcp_wmem", &format!("4096 16384 {m}"))?;
    }
    if s.sender_wscale_off {
        Pair::sysctl(&pair.a, "net.ipv4.tcp_window_scaling", "0")?;
    }
    let mut st = Setup {
        pair,
        rtt_ms,
        rate_bps,
        queue_ms,
        rcvbuf: None,
        window_clamp: None,
        listen_clamp: None,
        app: s.app,
        globals: Vec::new(),
    };
    let pair = &st.pair;
    match s.recv {
        Recv::Auto | Recv::SlowReader { .. } => {}
        Recv::WscaleOff => Pair::sysctl(&pair.b, "net.ipv4.tcp_window_scaling", "0")?,
        Recv::SoRcvbuf { req, rmem_max } => {
            st.rcvbuf = Some(req);
            st.globals.push(GlobalSysctl::set(
                "net.core.rmem_max",
                &rmem_max.to_string(),
            )?);
        }
        Recv::RmemMax(m) => {
            Pair::sysctl(&pair.b, "net.ipv4.tcp_rmem", &format!("4096 131072 {m}"))?
        }
        Recv::Pinned(b) => pair.pin_receiver_buffer(b as u32)?,
        Recv::Clamped { buf, clamp } => {
            pair.pin_receiver_buffer(buf as u32)?;
            st.window_clamp = Some(clamp);
        }
        Recv::ClampBeforeHandshake(c) => st.listen_clamp = Some(c),
        Recv::RouteWindow(w) => {
            tcpwin_lab::netns::ip(&[
                "-n",
                &pair.b,
                "route",
                "add",
                &format!("{}/32", pair.ip_a),
                "dev",
                pair.dev_b,
                "window",
                &w.to_string(),
            ])
            .context("the receiver's route with a window metric")?;
        }
    }
    Ok(st)
}

/// A transfer, read three times while it runs, with what the sender measured itself.
pub(super) struct Run {
    /// at 2 s, 250 ms later, at 5 s
    pub readings: [Vec<snapshot::Seen>; 3],
    pub throughput_bps: Option<u64>,
    /// the lab's own sender's report (null with a real program)
    pub sender: Option<EndpointReport>,
}

/// Both ends' sockets of `port` in the pair's namespaces, read together.
fn sample(it: &mut snapshot::Source, pair: &Pair, hz: Option<u32>) -> Result<Vec<snapshot::Seen>> {
    let filter = Scope {
        port: Some(PORT),
        ..Scope::default()
    };
    let mut targets = netns::resolve(Some(&pair.a))?;
    targets.extend(netns::resolve(Some(&pair.b))?);
    snapshot::read(it, &targets, &filter, hz)
}

/// One transfer through the row's path with congestion control `cc`.
pub(super) fn transfer(
    exe: &std::path::Path,
    it: &mut snapshot::Source,
    s: &Spec,
    st: &Setup,
    cc: &str,
) -> Result<Run> {
    let hz = crate::host::kconfig::hz();
    let pair = &st.pair;
    let watch = |it: &mut snapshot::Source| -> Result<[Vec<snapshot::Seen>; 3]> {
        std::thread::sleep(JUDGE_FROM);
        let first = sample(it, pair, hz)?;
        std::thread::sleep(SNAPSHOT_AFTER);
        let soon = sample(it, pair, hz)?;
        std::thread::sleep(JUDGE_UNTIL - JUDGE_FROM - SNAPSHOT_AFTER);
        let last = sample(it, pair, hz)?;
        Ok([first, soon, last])
    };
    match st.app {
        None => {
            let t = Transfer {
                exe: exe.to_path_buf(),
                pair,
                port: PORT,
                bytes: 0,
                conns: 1,
                ipv6: false,
                rcvbuf: st.rcvbuf,
                timeout: Duration::from_secs(60),
                send: SendOpts {
                    secs: Some(SECS),
                    cc: Some(cc.into()),
                    window_clamp: st.window_clamp,
                    read_bps: match s.recv {
                        Recv::SlowReader { bps } => Some(bps),
                        _ => None,
                    },
                    listen_clamp: st.listen_clamp,
                },
            };
            let (_, tx, readings) = t.run_watched(true, || watch(it))?;
            let sender = tx.first().context("the sender reported nothing")?.clone();
            Ok(Run {
                readings: readings?,
                throughput_bps: sender.steady_bps,
                sender: Some(sender),
            })
        }
        Some(app) => {
            let running = app.start(pair, PORT, SECS, cc)?;
            let readings = watch(it);
            let rate = running.finish(Duration::from_secs(30))?;
            Ok(Run {
                readings: readings?,
                throughput_bps: rate,
                sender: None,
            })
        }
    }
}
