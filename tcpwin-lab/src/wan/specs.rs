//! The lab's scenarios: each row a path, the receiver's (or sender's) setting, the traffic (the
//! lab's own endpoints or a real program), and the limit it is built to show.
use crate::programs::{App, ClampWhen, Client};
use anyhow::{bail, Result};
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

/// One row: its scenario, path and the limit it is built to show; every other setting is BASE's
/// until a builder below changes it. A row that shows the window is not the limit accepts
/// `path-queue` too (see `Spec::also`).
const fn row(scenario: &'static str, path: Path, expected: Limit) -> Spec {
    let also = match expected {
        Limit::NotWindowLimited => Some(Limit::PathQueue),
        _ => None,
    };
    Spec {
        scenario,
        path,
        expected,
        also,
        ..BASE
    }
}

/// The settings a row changes from BASE, one builder each (see the fields of `Spec`).
impl Spec {
    const fn recv(self, recv: Recv) -> Spec {
        Spec { recv, ..self }
    }
    const fn app(self, app: Option<App>) -> Spec {
        Spec { app, ..self }
    }
    const fn gro_off(self) -> Spec {
        Spec { gro: false, ..self }
    }
    const fn also(self, also: Limit) -> Spec {
        Spec {
            also: Some(also),
            ..self
        }
    }
    const fn quick(self, cc: &'static str) -> Spec {
        Spec {
            quick: Some(cc),
            ..self
        }
    }
    const fn bbr(self, expected: Limit, also: Option<Limit>) -> Spec {
        Spec {
            bbr: Some((expected, also)),
            ..self
        }
    }
    const fn loss_ppm(self, loss_ppm: u32) -> Spec {
        Spec { loss_ppm, ..self }
    }
    const fn wmem_max(self, max: u64) -> Spec {
        Spec {
            wmem_max: Some(max),
            ..self
        }
    }
    const fn sender_wscale_off(self) -> Spec {
        Spec {
            sender_wscale_off: true,
            ..self
        }
    }
    const fn shows_gro(self) -> Spec {
        Spec {
            shows_gro: true,
            ..self
        }
    }
    const fn then(self, then: Limit) -> Spec {
        Spec {
            then: Some(then),
            ..self
        }
    }
}

/// 002's table: the window from 64 KB up, until the bottleneck takes over (ceilings within 10 %
/// of the bottleneck are left out: either verdict would be fair there)
const fn sweep(req: u32, expected: Limit) -> Spec {
    let rmem_max = RMEM_MAX_BIG;
    row("window-sweep", wan(40, 200), expected).recv(Recv::SoRcvbuf { req, rmem_max })
}

/// 003's SO_RCVBUF request of 4 MB, capped by rmem_max 425984 (GRO off, as the article), or not
const fn so_rcvbuf_4m(path: Path, rmem_max: u64, expected: Limit) -> Spec {
    let req = 4 << 20;
    row("rmem-max", path, expected)
        .gro_off()
        .recv(Recv::SoRcvbuf { req, rmem_max })
}

/// A Python client reading from nginx, with its socket options.
const fn python(rcvbuf: Option<u32>, clamp: Option<u32>, clamp_when: ClampWhen) -> Option<App> {
    let client = Client::Python {
        rcvbuf,
        clamp,
        clamp_when,
    };
    nginx(None, None, None, client)
}

const CURL: Option<App> = nginx(None, None, None, Client::Curl);
const IPERF3: Option<App> = iperf3(None, false, 1);

/// Every row, by scenario. Rates are scaled to what the delay line holds on this machine kind
/// (see `crate::pair::WAN_MAX_RATE`); the articles' RTTs are kept.
#[rustfmt::skip]
const ROWS: &[Spec] = {
    use ClampWhen::*;
    use Limit::*;
    &[
    // 002: 64 KB without window scaling
    row("wscale-off", wan(20, 100), WscaleOff).recv(Recv::WscaleOff).quick("reno"),
    row("wscale-off", wan(100, 100), WscaleOff).recv(Recv::WscaleOff),
    sweep(32 << 10, RcvbufLocked),
    sweep(128 << 10, RcvbufLocked),
    sweep(256 << 10, RcvbufLocked),
    sweep(2 << 20, NotWindowLimited),
    sweep(8 << 20, NotWindowLimited),
    // 003: SO_RCVBUF 4 MB capped by rmem_max 425984, then rmem_max raised
    so_rcvbuf_4m(wan(18, 1000), RMEM_MAX_003, RcvbufLocked),
    so_rcvbuf_4m(wan(18, 1000), RMEM_MAX_BIG, NotWindowLimited),
    // 003's cap on a path the delay line holds beside a busy core: the same capped request
    // (window ~524 KB) at 40 ms, a third of 300 Mbit/s
    so_rcvbuf_4m(wan(40, 300), RMEM_MAX_003, RcvbufLocked).quick("bbr"),
    row("autotune-max", wan(18, 300), AutotuneMax).recv(Recv::RmemMax(512 << 10)),
    // two caps: tcp_rmem max 512 KB and no GRO (ratio ~160); the operator's setting is the
    // primary limit (doubling it doubles the rate), the ratio a factor (+43 % with GRO)
    row("autotune-max", wan(20, 300), AutotuneMax).gro_off().recv(Recv::RmemMax(512 << 10)).quick("reno"),
    // one pinned buffer, the ratio decides the window: GRO off (158-162: 129 Mbit/s at
    // 40 ms) cannot carry the path's 150 Mbit/s, GRO alone does (193 as this path delivers
    // frames, two merged: 790 528 B, 158 Mbit/s); GRO on behind 100 Mbit/s the window no
    // longer binds
    row("gro", wan(40, 150), LowRatio).gro_off().recv(Recv::Pinned(1 << 20)),
    row("gro", wan(40, 100), NotWindowLimited).recv(Recv::Pinned(1 << 20)).shows_gro(),
    row("not-window-limited", wan(20, 40), NotWindowLimited).quick("bbr"),
    row("window-clamp", wan(20, 300), WindowClamp).recv(Recv::Clamped { buf: 4 << 20, clamp: 200_000 }).quick("reno"),
    row("app-not-reading", wan(20, 300), AppNotReading).recv(Recv::SlowReader { bps: 20 * M }).quick("bbr"),
    // behind a bottleneck with a deep queue the window is not what binds, even when it is
    // small: base RTT 2 ms, 20 Mbit/s, 250 ms of queue; scaling off (64 KB / 2 ms would be
    // 262 Mbit/s): turning scaling on changes nothing
    row("queue", deep(2, 20, 250), PathQueue).recv(Recv::WscaleOff).app(IPERF3).quick("reno"),
    // the fix for autotune-max applied behind a deep queue: a bigger window only fills it
    row("queue", deep(18, 100, 100), PathQueue).recv(Recv::RmemMax(16 << 20)).app(IPERF3).also(NotWindowLimited),
    // iperf3 -w 8K on a fast veth: both ends' buffers set (SO_SNDBUF and SO_RCVBUF); the
    // receiver's locked buffer binds, at both ends
    row("iperf3", Path::Veth, RcvbufLocked).app(iperf3(Some(8 << 10), false, 1)),
    // iperf3 -R: the server sends; the receiving client's tcp_rmem max binds
    row("iperf3", wan(18, 300), AutotuneMax).recv(Recv::RmemMax(512 << 10)).app(iperf3(None, true, 1)),
    // iperf3 -P 4: four streams, each held by tcp_rmem max 128 KB (4 x 46 Mbit/s < 300)
    row("iperf3", wan(20, 300), AutotuneMax).recv(Recv::RmemMax(128 << 10)).app(iperf3(None, false, 4)),
    // nginx with `listen ... sndbuf=32k`: its 64 KB send buffer holds the flow
    row("nginx", wan(20, 300), Sndbuf).app(nginx(Some(32 << 10), None, None, Client::Curl)).quick("bbr"),
    // curl --limit-rate 1M: the reader, not the window
    row("nginx", wan(20, 300), AppNotReading).app(nginx(None, Some(8 * M), None, Client::Curl)),
    row("nginx", wan(20, 100), NotWindowLimited).app(CURL),
    // the window scale the handshake chose: iperf3 -w 1004300 locks a buffer whose window
    // at the initial ratio (1004300) gives scale 4: the window stops at 1048560
    row("scale", wan(20, 500), ScaleCap).gro_off().app(iperf3(Some(1_004_300), false, 1)),
    // a route's `window 65536` on the receiver's route to the sender: scale 1, 131070
    row("scale", wan(20, 300), ScaleCap).recv(Recv::RouteWindow(65536)).quick("reno"),
    // an application's choice before the handshake: TCP_WINDOW_CLAMP 131072 on the
    // listener gives the handshake scale 2 (ilog2(131072) - 15); autotuning then rewrites the
    // clamp, and the window stops at 262140 (105 Mbit/s over 20 ms) while this host's caps
    // give new connections a larger scale: the why must not blame the caps
    row("app-before-handshake", wan(20, 300), ScaleCap).recv(Recv::ClampBeforeHandshake(131_072)).quick("reno"),
    // iperf3 -w 64K behind 500 Mbit/s at 20 ms: the locked buffer
    row("iperf3", wan(20, 500), RcvbufLocked).gro_off().app(iperf3(Some(64 << 10), false, 1)),
    // the sender's send buffer capped by tcp_wmem max 256 KiB (its autotuning's cap)
    row("sndbuf", wan(20, 300), Sndbuf).wmem_max(256 << 10),
    // a long fat path with every default: 100 ms at 500 Mbit/s needs 6.25 MB in flight;
    // the sender's send buffer autotunes up to tcp_wmem[2] 4 MiB and stops it first
    row("sndbuf", wan(100, 500), Sndbuf),
    // 1 % of the frames lost on the path: reno's congestion window holds the flow; bbr does
    // not back off on loss and fills the path
    row("loss", wan(20, 300), Congestion).app(IPERF3).loss_ppm(10_000).bbr(NotWindowLimited, Some(PathQueue)).quick("reno"),
    // nginx `limit_rate 2m`: the server sends slowly (curl reads as fast as it can)
    row("app-limited", wan(20, 300), AppLimited).app(nginx(None, None, Some(16 * M), Client::Curl)).quick("bbr"),
    // two limits at once, one at each end. The receiver's tcp_rmem max 256 KiB (a window
    // of ~190 KB: ~75 Mbit/s over 20 ms) binds first; once it is lifted, the sender's
    // tcp_wmem max 512 KiB (~195 Mbit/s) binds: two fixes, one per end
    row("two-limits", wan(20, 300), AutotuneMax).recv(Recv::RmemMax(256 << 10)).wmem_max(512 << 10).then(Sndbuf),
    // the other order: the sender's tcp_wmem max 128 KiB (~50 Mbit/s) first, then the
    // receiver's tcp_rmem max 512 KiB (~140 Mbit/s)
    row("two-limits", wan(20, 300), Sndbuf).recv(Recv::RmemMax(512 << 10)).wmem_max(128 << 10).then(AutotuneMax),
    // 200 Mbit/s behind a deep queue, nothing set: the queue, whatever the buffers look like
    row("queue", deep(20, 200, 100), PathQueue).app(IPERF3).also(NotWindowLimited),
    // What users run, beside the lab's own endpoints for each family a real program
    // produces: nginx as shipped (sendfile) serving curl, wget and a Python client that sets
    // its socket options; uploads to nginx; iperf3 with cubic set per socket.
    //
    // a long fat path with every default, nginx -> curl: the send buffer autotunes to
    // tcp_wmem[2] (4 MiB: ~240 Mbit/s over 100 ms) and binds, with cwnd twice what is in
    // flight and Send-Q at the buffer (the kernel's sndbuf-limited time 0-1 % with reno)
    row("sndbuf", wan(100, 500), Sndbuf).app(CURL),
    // the same behind a bottleneck that can queue 200 ms: the flow, at under half the path's
    // rate, keeps no queue there but its buffer's bursts (3-23 ms), and the buffer still
    // binds; its writer waited at every reading (a larger tcp_wmem: 203 -> 380 Mbit/s)
    row("sndbuf", deep(100, 500, 200), Sndbuf).app(CURL),
    // the same, losing 1 %: reno's congestion window holds the flow; bbr does not back off
    // on loss, and the send buffer binds
    row("loss", wan(100, 500), Congestion).app(CURL).loss_ppm(10_000).bbr(Sndbuf, None),
    // an upload: curl -T to nginx whose listener asks `rcvbuf=64k` (the server receives):
    // its locked 128 KiB buffer holds the window near 90 KB, ~35 Mbit/s over 20 ms
    row("upload", wan(20, 300), RcvbufLocked).app(Some(App::Upload { rcvbuf: Some(64 << 10), h2: false })),
    // an upload to nginx as shipped: nothing binds the window (nginx takes the body into
    // its buffer in bursts, so autotuning grows slowly: at 2 s the window is ~120 KB, which
    // a 20 Mbit/s path at 20 ms does not fill)
    row("upload", wan(20, 20), NotWindowLimited).app(Some(App::Upload { rcvbuf: None, h2: false })),
    // curl --limit-rate 2M (16 Mbit/s) reading from nginx: the reader
    row("nginx", wan(20, 300), AppNotReading).app(nginx(None, Some(16 * M), None, Client::Curl)),
    // the sender's host has window scaling off, the receiver's on: 64 KB over 20 ms; the
    // setting is the sending host's, and so is the fix
    row("wscale-off", wan(20, 100), WscaleOff).app(CURL).sender_wscale_off(),
    // nginx -> wget: nothing set, then the receiver's tcp_rmem max 512 KiB
    row("wget", wan(20, 100), NotWindowLimited).app(nginx(None, None, None, Client::Wget)),
    row("wget", wan(18, 300), AutotuneMax).recv(Recv::RmemMax(512 << 10)).app(nginx(None, None, None, Client::Wget)),
    // one pinned buffer and GRO off behind nginx -> curl: the ratio decides the window
    row("gro", wan(40, 150), LowRatio).gro_off().recv(Recv::Pinned(1 << 20)).app(CURL),
    // iperf3 -C cubic (per socket) losing 1 %: cubic backs off, whatever the namespace's
    row("loss", wan(20, 300), Congestion).app(Some(App::Iperf3 { window: None, reverse: false, streams: 1, congestion: Some("cubic"), fq_rate: None, bitrate: None })).loss_ppm(10_000),
    // a Python client asking SO_RCVBUF 256 KiB before connect: its locked buffer
    row("python", wan(40, 200), RcvbufLocked).app(python(Some(256 << 10), None, BeforeConnect)),
    // TCP_WINDOW_CLAMP 131072 before connect: the handshake's scale 2 stops the window at
    // 262140 (105 Mbit/s over 20 ms) once autotuning rewrites the clamp
    row("python", wan(20, 300), ScaleCap).app(python(None, Some(131_072), BeforeConnect)),
    // SO_RCVBUF 4 MiB, then TCP_WINDOW_CLAMP 200000 right after connect: this kernel (6.12+)
    // rewrites the clamp from the buffer when the first data packets change the ratio, so the
    // application's clamp is gone and nothing holds the window
    row("python", wan(20, 100), NotWindowLimited).app(python(Some(4 << 20), Some(200_000), AfterConnect)),
    // the same clamp set once 256 KiB arrived (the ratio measured): it holds, 80 Mbit/s
    // over 20 ms
    row("python", wan(20, 300), WindowClamp).app(python(Some(4 << 20), Some(200_000), AfterData)),
    // Senders that hold themselves, a family the judge was not built on (the held-out
    // family: its accuracy is reported before and after each change to the judge).
    //
    // `ssh host cat /dev/zero` over 100 ms: OpenSSH's own channel window (2 MiB a round
    // trip, ~160 Mbit/s) binds above TCP; a larger tcp_wmem moves nothing
    row("own-pace", wan(100, 500), AppLimited).app(Some(App::Ssh)),
    // iperf3 --fq-rate 100M: the sender caps its own pacing rate (SO_MAX_PACING_RATE) on a
    // path that carries 500 Mbit/s
    row("own-pace", wan(20, 500), Pacing).app(paced_iperf3(Some(100 * M), None)).quick("reno"),
    // iperf3 -b 100M: the application paces its own writes (a token bucket above TCP) on a
    // path that carries 500 Mbit/s
    row("own-pace", wan(20, 500), AppLimited).app(paced_iperf3(None, Some(100 * M))),
    // A second held-out family: Python's http.server, a writer that copies its file through
    // 64 KiB write()s (nginx hands the kernel its file with sendfile), to curl.
    //
    // a long fat path with every default: the send buffer autotunes to tcp_wmem[2] (4 MiB) and
    // binds, as behind nginx
    row("py-serve", wan(100, 500), Sndbuf).app(Some(App::PyServe { limit_rate: None })),
    // curl --limit-rate 2M reading from it: the reader
    row("py-serve", wan(20, 300), AppNotReading).app(Some(App::PyServe { limit_rate: Some(16 * M) })),
    // A third held-out family: an application window above TCP's. curl uploading to nginx
    // over HTTP/2 (cleartext), nginx passing the body unbuffered to an upstream on its own
    // loopback: the stream window is nginx's 64 KiB (http2_body_preread_size), opened as the
    // upstream takes it, 64 KiB a round trip (26 Mbit/s over 20 ms) of a path that carries
    // 300 Mbit/s: the sender's socket runs dry with both TCP windows open, and larger TCP
    // buffers move nothing. (A body nginx buffers itself gets a 2 GiB window: measured at
    // 287 Mbit/s, the path's rate, so the row proxies it.)
    row("h2-upload", wan(20, 300), AppLimited).app(Some(App::Upload { rcvbuf: None, h2: true })),
    // A fourth held-out family: nginx serving its file over TLS (OpenSSL's SSL_write in 16 KiB
    // records where plain nginx hands the kernel the file with sendfile) to curl -k. A long fat
    // path with every default: the send buffer autotunes to tcp_wmem[2] (4 MiB) and binds, as
    // behind plain nginx
    row("https", wan(100, 500), Sndbuf).app(Some(App::Https { limit_rate: None })),
    // curl --limit-rate 2M reading from it: the reader
    row("https", wan(20, 300), AppNotReading).app(Some(App::Https { limit_rate: Some(16 * M) })),
    ]
};

/// The rows of `scenario` (or `all`), the gate's alone when `quick`.
pub(super) fn rows(scenario: &str, quick: bool) -> Result<Vec<Spec>> {
    let mut names: Vec<&str> = ROWS.iter().map(|s| s.scenario).collect();
    names.dedup();
    if scenario != "all" && !names.contains(&scenario) {
        bail!(
            "--scenario {scenario}: no such scenario (one of: {}, all)",
            names.join(", ")
        );
    }
    Ok(ROWS
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

    /// What the row sets, in words: the receiver's setting, then the sender's and the path's.
    pub(super) fn condition(&self) -> String {
        let s = self;
        s.recv.describe()
            + &s.wmem_max
                .map(|m| format!(", sender tcp_wmem max {m}"))
                .unwrap_or_default()
            + if s.sender_wscale_off {
                ", the sender's tcp_window_scaling=0"
            } else {
                ""
            }
            + &(if s.loss_ppm > 0 {
                format!(", {:.1} % lost", s.loss_ppm as f64 / 1e4)
            } else {
                String::new()
            })
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
