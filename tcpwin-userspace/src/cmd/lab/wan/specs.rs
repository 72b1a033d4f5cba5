//! The lab's scenarios: each row a path, the receiver's (or sender's) setting, the traffic (the
//! lab's own endpoints or a real program), and the limit it is built to show.
use anyhow::{bail, Result};
use tcpwin_lab::programs::{App, ClampWhen, Client};
use tcpwin_model::verdict::Limit;

/// What the receiver's side is set to in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Recv {
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
    /// autotuning, and the receiver's route to the sender carrying `window N`
    RouteWindow(u32),
    /// autotuning, and TCP_WINDOW_CLAMP set by the application on its listener before any
    /// handshake: the scale is chosen within it, the clamp rewritten by autotuning afterwards
    ClampBeforeHandshake(u32),
}

impl Recv {
    pub(super) fn describe(self) -> String {
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
            Recv::RouteWindow(w) => format!("autotuning, route window {w}"),
            Recv::ClampBeforeHandshake(c) => {
                format!("autotuning, TCP_WINDOW_CLAMP {c} on the listener before the handshake")
            }
        }
    }
}

/// The path of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Path {
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
pub(super) struct Spec {
    pub(super) scenario: &'static str,
    pub(super) path: Path,
    pub(super) mtu: u32,
    pub(super) gro: bool,
    pub(super) recv: Recv,
    /// None: the lab's own endpoints (with the receiver's socket options of `recv`)
    pub(super) app: Option<App>,
    pub(super) expected: Limit,
    /// a second verdict that says the same to the user, where the path decides between them
    /// (the window not the limit: `not-window-limited` without a queue, `path-queue` when reno
    /// fills the bottleneck's queue)
    pub(super) also: Option<Limit>,
    /// the row the gate runs for its limit family (`--quick`), with the congestion control named
    /// here: each family once, at rates the delay line holds beside a busy core, in a setup whose
    /// verdict has margin (the limit's ceiling a third to a half of the path's rate, or under)
    pub(super) quick: Option<&'static str>,
    /// what the congestion control changes: bbr's expected verdicts where they differ from
    /// reno's (e.g. on a lossy path, where bbr does not back off)
    pub(super) bbr: Option<(Limit, Option<Limit>)>,
    /// frames lost at random towards the receiver, per million
    pub(super) loss_ppm: u32,
    /// the sender's tcp_wmem max (its send buffer's autotuning cap), when set
    pub(super) wmem_max: Option<u64>,
    /// `net.ipv4.tcp_window_scaling=0` in the sender's namespace: the peer of the receiver
    /// refuses scaling, the receiver's host allows it
    pub(super) sender_wscale_off: bool,
    /// the row shows what receiver GRO does: it is run again while the receiver's veth merged
    /// nothing (see `WanRow::gro_merged`)
    pub(super) shows_gro: bool,
    /// two limits at once: the limit that binds once the first one's fix is applied (the fix
    /// loop then runs a second round, with the fix the transfer names after the first)
    pub(super) then: Option<Limit>,
}

pub(super) const M: u64 = 1_000_000;
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
pub(super) const BASE: Spec = Spec {
    scenario: "",
    path: wan(20, 100),
    mtu: 1500,
    gro: true,
    recv: Recv::Auto,
    app: None,
    expected: Limit::NotWindowLimited,
    also: Some(Limit::PathQueue),
    quick: None,
    bbr: None,
    loss_ppm: 0,
    wmem_max: None,
    sender_wscale_off: false,
    shows_gro: false,
    then: None,
};

const fn iperf3(window: Option<u32>, reverse: bool, streams: u8) -> Option<App> {
    Some(App::Iperf3 {
        window,
        reverse,
        streams,
        congestion: None,
        fq_rate: None,
        bitrate: None,
    })
}

/// iperf3 pacing itself: `--fq-rate` (SO_MAX_PACING_RATE) or `-b` (its own token bucket), bit/s.
const fn paced_iperf3(fq_rate: Option<u64>, bitrate: Option<u64>) -> Option<App> {
    Some(App::Iperf3 {
        window: None,
        reverse: false,
        streams: 1,
        congestion: None,
        fq_rate,
        bitrate,
    })
}

/// nginx (sendfile) serving `client`; `limit_rate` the client's, `server_rate` nginx's own.
const fn nginx(
    sndbuf: Option<u32>,
    limit_rate: Option<u64>,
    server_rate: Option<u64>,
    client: Client,
) -> Option<App> {
    Some(App::Nginx {
        sndbuf,
        limit_rate,
        server_rate,
        client,
    })
}

/// Every row, by scenario. Rates are scaled to what the delay line holds on this machine kind
/// (see `tcpwin_lab::pair::WAN_MAX_RATE`); the articles' RTTs are kept.
pub(super) fn rows(scenario: &str, quick: bool) -> Result<Vec<Spec>> {
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
    // 003's SO_RCVBUF request of 4 MB, capped by rmem_max 425984 (GRO off, as the article)
    let capped_003 = |path: Path, quick: Option<&'static str>| Spec {
        scenario: "rmem-max",
        path,
        gro: false,
        recv: Recv::SoRcvbuf {
            req: 4 << 20,
            rmem_max: RMEM_MAX_003,
        },
        expected: RcvbufLocked,
        also: None,
        quick,
        ..BASE
    };
    let all = [
        // 002: 64 KB without window scaling
        Spec {
            scenario: "wscale-off",
            recv: Recv::WscaleOff,
            expected: WscaleOff,
            also: None,
            quick: Some("reno"),
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
        capped_003(wan(18, 1000), None),
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
        // 003's cap on a path the delay line holds beside a busy core: the same capped request
        // (window ~524 KB) at 40 ms, a third of 300 Mbit/s
        capped_003(wan(40, 300), Some("bbr")),
        Spec {
            scenario: "autotune-max",
            path: wan(18, 300),
            recv: Recv::RmemMax(512 << 10),
            expected: AutotuneMax,
            also: None,
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
            quick: Some("reno"),
            ..BASE
        },
        // one pinned buffer, the ratio decides the window: GRO off (158-162: 129 Mbit/s at
        // 40 ms) cannot carry the path's 150 Mbit/s, GRO alone does (193 as this path delivers
        // frames, two merged: 790 528 B, 158 Mbit/s); GRO on behind 100 Mbit/s the window no
        // longer binds
        Spec {
            scenario: "gro",
            path: wan(40, 150),
            gro: false,
            recv: Recv::Pinned(1 << 20),
            expected: LowRatio,
            also: None,
            ..BASE
        },
        Spec {
            scenario: "gro",
            path: wan(40, 100),
            recv: Recv::Pinned(1 << 20),
            expected: NotWindowLimited,
            shows_gro: true,
            ..BASE
        },
        Spec {
            scenario: "not-window-limited",
            path: wan(20, 40),
            expected: NotWindowLimited,
            quick: Some("bbr"),
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
            quick: Some("reno"),
            ..BASE
        },
        Spec {
            scenario: "app-not-reading",
            path: wan(20, 300),
            recv: Recv::SlowReader { bps: 20 * M },
            expected: AppNotReading,
            also: None,
            quick: Some("bbr"),
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
            quick: Some("reno"),
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
            app: nginx(Some(32 << 10), None, None, Client::Curl),
            expected: Sndbuf,
            also: None,
            quick: Some("bbr"),
            ..BASE
        },
        // curl --limit-rate 1M: the reader, not the window
        Spec {
            scenario: "nginx",
            path: wan(20, 300),
            app: nginx(None, Some(8 * M), None, Client::Curl),
            expected: AppNotReading,
            also: None,
            ..BASE
        },
        Spec {
            scenario: "nginx",
            path: wan(20, 100),
            app: nginx(None, None, None, Client::Curl),
            expected: NotWindowLimited,
            ..BASE
        },
        // the window scale the handshake chose: iperf3 -w 1004300 locks a buffer whose window
        // at the initial ratio (1004300) gives scale 4: the window stops at 1048560
        Spec {
            scenario: "scale",
            path: wan(20, 500),
            gro: false,
            app: iperf3(Some(1_004_300), false, 1),
            expected: ScaleCap,
            also: None,
            ..BASE
        },
        // a route's `window 65536` on the receiver's route to the sender: scale 1, 131070
        Spec {
            scenario: "scale",
            path: wan(20, 300),
            recv: Recv::RouteWindow(65536),
            expected: ScaleCap,
            also: None,
            quick: Some("reno"),
            ..BASE
        },
        // an application's choice before the handshake: TCP_WINDOW_CLAMP 131072 on the
        // listener gives the handshake scale 2 (ilog2(131072) - 15); autotuning then rewrites the
        // clamp, and the window stops at 262140 (105 Mbit/s over 20 ms) while this host's caps
        // give new connections a larger scale: the why must not blame the caps
        Spec {
            scenario: "app-before-handshake",
            path: wan(20, 300),
            recv: Recv::ClampBeforeHandshake(131_072),
            expected: ScaleCap,
            also: None,
            quick: Some("reno"),
            ..BASE
        },
        // iperf3 -w 64K behind 500 Mbit/s at 20 ms: the locked buffer
        Spec {
            scenario: "iperf3",
            path: wan(20, 500),
            gro: false,
            app: iperf3(Some(64 << 10), false, 1),
            expected: RcvbufLocked,
            also: None,
            ..BASE
        },
        // the sender's send buffer capped by tcp_wmem max 256 KiB (its autotuning's cap)
        Spec {
            scenario: "sndbuf",
            path: wan(20, 300),
            wmem_max: Some(256 << 10),
            expected: Sndbuf,
            also: None,
            ..BASE
        },
        // a long fat path with every default: 100 ms at 500 Mbit/s needs 6.25 MB in flight;
        // the sender's send buffer autotunes up to tcp_wmem[2] 4 MiB and stops it first
        Spec {
            scenario: "sndbuf",
            path: wan(100, 500),
            expected: Sndbuf,
            also: None,
            ..BASE
        },
        // 1 % of the frames lost on the path: reno's congestion window holds the flow; bbr does
        // not back off on loss and fills the path
        Spec {
            scenario: "loss",
            path: wan(20, 300),
            app: iperf3(None, false, 1),
            loss_ppm: 10_000,
            expected: Congestion,
            also: None,
            bbr: Some((NotWindowLimited, Some(PathQueue))),
            quick: Some("reno"),
            ..BASE
        },
        // nginx `limit_rate 2m`: the server sends slowly (curl reads as fast as it can)
        Spec {
            scenario: "app-limited",
            path: wan(20, 300),
            app: nginx(None, None, Some(16 * M), Client::Curl),
            expected: AppLimited,
            also: None,
            quick: Some("bbr"),
            ..BASE
        },
        // two limits at once, one at each end. The receiver's tcp_rmem max 256 KiB (a window
        // of ~190 KB: ~75 Mbit/s over 20 ms) binds first; once it is lifted, the sender's
        // tcp_wmem max 512 KiB (~195 Mbit/s) binds: two fixes, one per end
        Spec {
            scenario: "two-limits",
            path: wan(20, 300),
            recv: Recv::RmemMax(256 << 10),
            wmem_max: Some(512 << 10),
            expected: AutotuneMax,
            also: None,
            then: Some(Sndbuf),
            ..BASE
        },
        // the other order: the sender's tcp_wmem max 128 KiB (~50 Mbit/s) first, then the
        // receiver's tcp_rmem max 512 KiB (~140 Mbit/s)
        Spec {
            scenario: "two-limits",
            path: wan(20, 300),
            recv: Recv::RmemMax(512 << 10),
            wmem_max: Some(128 << 10),
            expected: Sndbuf,
            also: None,
            then: Some(AutotuneMax),
            ..BASE
        },
        // 200 Mbit/s behind a deep queue, nothing set: the queue, whatever the buffers look like
        Spec {
            scenario: "queue",
            path: deep(20, 200, 100),
            app: iperf3(None, false, 1),
            expected: PathQueue,
            also: Some(NotWindowLimited),
            ..BASE
        },
        // What users run, beside the lab's own endpoints for each family a real program
        // produces: nginx as shipped (sendfile) serving curl, wget and a Python client that sets
        // its socket options; uploads to nginx; iperf3 with cubic set per socket.
        //
        // a long fat path with every default, nginx -> curl: the send buffer autotunes to
        // tcp_wmem[2] (4 MiB: ~240 Mbit/s over 100 ms) and binds, with cwnd twice what is in
        // flight and Send-Q at the buffer (the kernel's sndbuf-limited time 0-1 % with reno)
        Spec {
            scenario: "sndbuf",
            path: wan(100, 500),
            app: nginx(None, None, None, Client::Curl),
            expected: Sndbuf,
            also: None,
            ..BASE
        },
        // the same behind a bottleneck that can queue 200 ms: the flow, at under half the path's
        // rate, keeps no queue there but its buffer's bursts (3-23 ms), and the buffer still
        // binds; its writer waited at every reading (a larger tcp_wmem: 203 -> 380 Mbit/s)
        Spec {
            scenario: "sndbuf",
            path: deep(100, 500, 200),
            app: nginx(None, None, None, Client::Curl),
            expected: Sndbuf,
            also: None,
            ..BASE
        },
        // the same, losing 1 %: reno's congestion window holds the flow; bbr does not back off
        // on loss, and the send buffer binds
        Spec {
            scenario: "loss",
            path: wan(100, 500),
            app: nginx(None, None, None, Client::Curl),
            loss_ppm: 10_000,
            expected: Congestion,
            also: None,
            bbr: Some((Sndbuf, None)),
            ..BASE
        },
        // an upload: curl -T to nginx whose listener asks `rcvbuf=64k` (the server receives):
        // its locked 128 KiB buffer holds the window near 90 KB, ~35 Mbit/s over 20 ms
        Spec {
            scenario: "upload",
            path: wan(20, 300),
            app: Some(App::Upload {
                rcvbuf: Some(64 << 10),
            }),
            expected: RcvbufLocked,
            also: None,
            ..BASE
        },
        // an upload to nginx as shipped: nothing binds the window (nginx takes the body into
        // its buffer in bursts, so autotuning grows slowly: at 2 s the window is ~120 KB, which
        // a 20 Mbit/s path at 20 ms does not fill)
        Spec {
            scenario: "upload",
            path: wan(20, 20),
            app: Some(App::Upload { rcvbuf: None }),
            expected: NotWindowLimited,
            ..BASE
        },
        // curl --limit-rate 2M (16 Mbit/s) reading from nginx: the reader
        Spec {
            scenario: "nginx",
            path: wan(20, 300),
            app: nginx(None, Some(16 * M), None, Client::Curl),
            expected: AppNotReading,
            also: None,
            ..BASE
        },
        // the sender's host has window scaling off, the receiver's on: 64 KB over 20 ms; the
        // setting is the sending host's, and so is the fix
        Spec {
            scenario: "wscale-off",
            path: wan(20, 100),
            app: nginx(None, None, None, Client::Curl),
            sender_wscale_off: true,
            expected: WscaleOff,
            also: None,
            ..BASE
        },
        // nginx -> wget: nothing set, then the receiver's tcp_rmem max 512 KiB
        Spec {
            scenario: "wget",
            path: wan(20, 100),
            app: nginx(None, None, None, Client::Wget),
            expected: NotWindowLimited,
            ..BASE
        },
        Spec {
            scenario: "wget",
            path: wan(18, 300),
            recv: Recv::RmemMax(512 << 10),
            app: nginx(None, None, None, Client::Wget),
            expected: AutotuneMax,
            also: None,
            ..BASE
        },
        // one pinned buffer and GRO off behind nginx -> curl: the ratio decides the window
        Spec {
            scenario: "gro",
            path: wan(40, 150),
            gro: false,
            recv: Recv::Pinned(1 << 20),
            app: nginx(None, None, None, Client::Curl),
            expected: LowRatio,
            also: None,
            ..BASE
        },
        // iperf3 -C cubic (per socket) losing 1 %: cubic backs off, whatever the namespace's
        Spec {
            scenario: "loss",
            path: wan(20, 300),
            app: Some(App::Iperf3 {
                window: None,
                reverse: false,
                streams: 1,
                congestion: Some("cubic"),
                fq_rate: None,
                bitrate: None,
            }),
            loss_ppm: 10_000,
            expected: Congestion,
            also: None,
            ..BASE
        },
        // a Python client asking SO_RCVBUF 256 KiB before connect: its locked buffer
        Spec {
            scenario: "python",
            path: wan(40, 200),
            app: nginx(
                None,
                None,
                None,
                Client::Python {
                    rcvbuf: Some(256 << 10),
                    clamp: None,
                    clamp_when: ClampWhen::BeforeConnect,
                },
            ),
            expected: RcvbufLocked,
            also: None,
            ..BASE
        },
        // TCP_WINDOW_CLAMP 131072 before connect: the handshake's scale 2 stops the window at
        // 262140 (105 Mbit/s over 20 ms) once autotuning rewrites the clamp
        Spec {
            scenario: "python",
            path: wan(20, 300),
            app: nginx(
                None,
                None,
                None,
                Client::Python {
                    rcvbuf: None,
                    clamp: Some(131_072),
                    clamp_when: ClampWhen::BeforeConnect,
                },
            ),
            expected: ScaleCap,
            also: None,
            ..BASE
        },
        // SO_RCVBUF 4 MiB, then TCP_WINDOW_CLAMP 200000 right after connect: this kernel (6.12+)
        // rewrites the clamp from the buffer when the first data packets change the ratio, so the
        // application's clamp is gone and nothing holds the window
        Spec {
            scenario: "python",
            path: wan(20, 100),
            app: nginx(
                None,
                None,
                None,
                Client::Python {
                    rcvbuf: Some(4 << 20),
                    clamp: Some(200_000),
                    clamp_when: ClampWhen::AfterConnect,
                },
            ),
            expected: NotWindowLimited,
            ..BASE
        },
        // the same clamp set once 256 KiB arrived (the ratio measured): it holds, 80 Mbit/s
        // over 20 ms
        Spec {
            scenario: "python",
            path: wan(20, 300),
            app: nginx(
                None,
                None,
                None,
                Client::Python {
                    rcvbuf: Some(4 << 20),
                    clamp: Some(200_000),
                    clamp_when: ClampWhen::AfterData,
                },
            ),
            expected: WindowClamp,
            also: None,
            ..BASE
        },
        // Senders that hold themselves, a family the judge was not built on (the held-out
        // family: its accuracy is reported before and after each change to the judge).
        //
        // `ssh host cat /dev/zero` over 100 ms: OpenSSH's own channel window (2 MiB a round
        // trip, ~160 Mbit/s) binds above TCP; a larger tcp_wmem moves nothing
        Spec {
            scenario: "own-pace",
            path: wan(100, 500),
            app: Some(App::Ssh),
            expected: AppLimited,
            also: None,
            ..BASE
        },
        // iperf3 --fq-rate 100M: the sender caps its own pacing rate (SO_MAX_PACING_RATE) on a
        // path that carries 500 Mbit/s
        Spec {
            scenario: "own-pace",
            path: wan(20, 500),
            app: paced_iperf3(Some(100 * M), None),
            expected: Pacing,
            also: None,
            quick: Some("reno"),
            ..BASE
        },
        // iperf3 -b 100M: the application paces its own writes (a token bucket above TCP) on a
        // path that carries 500 Mbit/s
        Spec {
            scenario: "own-pace",
            path: wan(20, 500),
            app: paced_iperf3(None, Some(100 * M)),
            expected: AppLimited,
            also: None,
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
        .filter(|s| (scenario == "all" || s.scenario == scenario) && (!quick || s.quick.is_some()))
        .copied()
        .collect())
}

impl Spec {
    /// The verdicts this row accepts with congestion control `cc`, both ends read together.
    pub(super) fn expected_with(&self, cc: &str) -> (Limit, Option<Limit>) {
        match (cc, self.bbr) {
            ("bbr", Some(e)) => e,
            _ => (self.expected, self.also),
        }
    }

    /// The path's own rate with nothing set, what a repaired transfer should reach: the same
    /// path, the namespace's defaults, the lab's own endpoints.
    pub(super) fn baseline(&self) -> Spec {
        Spec {
            scenario: "baseline",
            recv: Recv::Auto,
            app: None,
            wmem_max: None,
            gro: true,
            expected: Limit::NotWindowLimited,
            also: Some(Limit::PathQueue),
            bbr: None,
            then: None,
            ..*self
        }
    }
}
