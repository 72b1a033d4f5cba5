//! Which limit binds a connection's window: pure functions over [`SockFacts`] and [`HostLimits`].
//!
//! One connection, one truth: when both ends are visible (same host, or any namespaces asked),
//! they are judged together — the sender's RTTs and delivered rate, the receiver's window and
//! caps — and both get the same verdict.
//!
//! The order of the questions:
//! 1. **Is an application not reading?** A zero window with unread data (at the receiver), or a
//!    zero window seen by the sender, stalls the connection at any rate: `app-not-reading`, never
//!    `idle`. So is a backlog that keeps the advertised window under three quarters of its size
//!    over the interval (half, in one snapshot), and a reader caught between its bursts.
//! 2. **Does the sender's own buffer bind?** Direct evidence first: data queued up to the send
//!    buffer while the peer's window and the congestion window allow more; the kernel's
//!    sndbuf-limited time supports it (it stays at 0 for some write patterns).
//! 3. **Does the window bind?** Little's law makes rate ≈ window / RTT true of every flow whose
//!    in-flight data fills its window, window-limited or not: behind a bottleneck queue the RTT
//!    grows until it holds. So when the RTT is well above the base RTT (the path's minimum,
//!    `min_rtt`), the window binds only if the rate is near window / **base** RTT; a flow at
//!    window / RTT but far under window / base RTT is held by the path's queue (`path-queue`):
//!    a larger window only lengthens the queue. Without a queue, rate ≥ 70 % of window / RTT is
//!    window-limited. The rate decides, for every congestion control alike (BBR paces and shows
//!    ~40 % rwnd-limited time where cubic shows ~99 % for the same window).
//! 4. **Which cap makes the window what it is** (receiver's side): scaling not negotiated,
//!    memory pressure, a clamp, a locked buffer, autotuning at its maximum (or off), the scaling
//!    ratio — a primary limit and the others as contributing factors, each with its fix and the
//!    window it would give.
//!
//! Fixes are sized from the base RTT and `--target` (or per 100 Mbit/s when no target is
//! given; per 1, 10 or 100 Gbit/s on short paths), never lower a setting, say which settings are global (`net.core.rmem_max`) and which
//! belong to the socket's namespace, and run in that namespace (`ip netns exec NAME`).
use serde::{Deserialize, Serialize};
use tcpwin_common::formula::{max_scaled_window, space_from_win, win_from_space};

use crate::{
    facts::{HostLimits, SockFacts},
    id::SocketId,
};

/// A flow at this share of its window / RTT ceiling or more is window-limited.
pub const WINDOW_LIMITED_SHARE: f64 = 0.7;
/// Ratios under this (70 % of the buffer) are called low: one segment per packet gives 158-162 at
/// MTU 1500 and page-sized buffers (XDP) 85-89, while any aggregation lifts it (two segments
/// merged: 193; GRO on a NIC or veth: 229; MTU 9000: 232-234; all measured on this machine kind).
pub const LOW_RATIO: u8 = 180;
/// The ratio receiver GRO gives at MTU 1500 (veth and NICs, measured on this machine kind).
pub const GRO_RATIO: u8 = 229;
/// A clamp below this share of what the buffer allows was set by a user or a route.
const CLAMP_SLACK: f64 = 0.95;
/// A buffer at this share of `tcp_rmem[2]` has reached autotuning's maximum.
const AT_MAX: f64 = 0.95;
/// A sender the kernel counted sndbuf-limited for more than this share of its busy time is
/// bound by its own send buffer.
const SNDBUF_LIMITED_SHARE: f64 = 0.5;
/// Data queued to send at this share of the send buffer or more: the application is blocked on
/// its buffer.
const SNDBUF_FULL: f64 = 0.5;
/// Without a queue on the path, a sender rwnd-limited this share of its busy time or more is
/// window-bound (the kernel's chrono as support, never alone behind a queue).
const RWND_SUPPORT_SHARE: f64 = 0.3;
/// A full send buffer with at least this share of it in flight: the buffer, not pacing or the
/// path, holds the data back.
const SNDBUF_SENT: f64 = 0.5;
/// A queue at the bottleneck: the RTT above the base RTT by this much (µs) at least, and by this
/// share of the base (an eighth: 5 ms on a 40 ms path; RTT noise here is well under 1 ms).
const QUEUE_MIN_US: u32 = 1000;
const QUEUE_MIN_SHARE: u32 = 8;
/// Unread data at this share of the window, with the advertised window under half of it, at both
/// ends of an interval: the application's backlog, not the buffer, sets the window.
const BACKLOG_SHARE: f64 = 0.25;
/// The rate the fixes are sized per, without `--target`: 100 Mbit/s, or on short paths the
/// first power of ten whose window at the base RTT is at least `PER_RATE_MIN_WINDOW` (a window
/// of 38 B "per 100 Mbit/s" on a 3 µs path says nothing), at most 100 Gbit/s.
const PER_RATE_BPS: u64 = 100_000_000;
const PER_RATE_MIN_WINDOW: u64 = 16 << 10;
const PER_RATE_MAX_BPS: u64 = 100_000_000_000;

/// The unit the fixes are sized per on a path of base RTT `base_us`.
fn per_rate(base_us: u32) -> u64 {
    let mut r = PER_RATE_BPS;
    while r < PER_RATE_MAX_BPS && bdp(r, base_us) < PER_RATE_MIN_WINDOW {
        r *= 10;
    }
    r
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    WscaleOff,
    RcvbufLocked,
    AutotuneMax,
    WindowClamp,
    LowRatio,
    AppNotReading,
    MemoryPressure,
    /// the window is not what binds: the path's bottleneck queue holds the flow
    PathQueue,
    NotWindowLimited,
    PeerWindow,
    Sndbuf,
    /// no data moved in the interval, and nothing waits
    Idle,
    /// a fact the decision needs is absent (e.g. no RTT sample yet)
    Unknown,
}

impl Limit {
    pub const ALL: [Limit; 13] = [
        Limit::WscaleOff,
        Limit::RcvbufLocked,
        Limit::AutotuneMax,
        Limit::WindowClamp,
        Limit::LowRatio,
        Limit::AppNotReading,
        Limit::MemoryPressure,
        Limit::PathQueue,
        Limit::NotWindowLimited,
        Limit::PeerWindow,
        Limit::Sndbuf,
        Limit::Idle,
        Limit::Unknown,
    ];

    /// The id used in text, JSON and metric labels.
    pub fn id(self) -> &'static str {
        match self {
            Limit::WscaleOff => "wscale-off",
            Limit::RcvbufLocked => "rcvbuf-locked",
            Limit::AutotuneMax => "autotune-max",
            Limit::WindowClamp => "window-clamp",
            Limit::LowRatio => "low-ratio",
            Limit::AppNotReading => "app-not-reading",
            Limit::MemoryPressure => "memory-pressure",
            Limit::PathQueue => "path-queue",
            Limit::NotWindowLimited => "not-window-limited",
            Limit::PeerWindow => "peer-window",
            Limit::Sndbuf => "sndbuf",
            Limit::Idle => "idle",
            Limit::Unknown => "unknown",
        }
    }

    /// A limit of the receive window (the receiver's caps, or its application).
    pub fn is_window(self) -> bool {
        matches!(
            self,
            Limit::WscaleOff
                | Limit::RcvbufLocked
                | Limit::AutotuneMax
                | Limit::WindowClamp
                | Limit::LowRatio
                | Limit::MemoryPressure
                | Limit::PeerWindow
        )
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Receiving,
    Sending,
    Idle,
}

impl Side {
    /// As serialized.
    pub fn id(self) -> &'static str {
        match self {
            Side::Receiving => "receiving",
            Side::Sending => "sending",
            Side::Idle => "idle",
        }
    }
}

/// What a verdict was judged over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// the interval since the socket was last read (rates from the deltas)
    Interval,
    /// one reading: what the socket's counters hold over its life
    Life,
}

/// A limit that also holds the window down, besides the primary one: its setting, the change
/// and what that change would give.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    pub limit: Limit,
    pub setting: String,
    pub suggested: String,
    /// the window after the change / the window now (e.g. 1.43 for GRO at ratio 160)
    pub window_gain: Option<f64>,
}

/// One connection's verdict as one end sees it (over an interval, or over its life).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub limit: Limit,
    /// this socket's side of the data
    pub side: Side,
    pub basis: Basis,
    /// the connection's other end, when it was read and judged with this one (same verdict)
    pub peer: Option<SocketId>,
    /// rate >= 70 % of the window's ceiling at the RTT that holds (the base RTT when the path
    /// queues); null when the rate is unknown
    pub window_limited: Option<bool>,
    /// achieved rate, bit/s (over the interval; over its life: bytes / busy time)
    pub rate_bps: Option<u64>,
    /// the RTT now (the sender's srtt, or a receiver's own estimate)
    pub rtt_us: Option<u32>,
    /// the path's base RTT (minimum RTT), and where it came from
    pub base_rtt_us: Option<u32>,
    pub rtt_source: Option<String>,
    /// RTT above the base: the bottleneck's queue, µs
    pub queue_us: Option<u32>,
    /// the largest window the receiver can advertise now (or the peer's, seen by a sender)
    pub window: Option<u64>,
    /// window / RTT, bit/s (null for a zero window)
    pub ceiling_bps: Option<u64>,
    /// window / base RTT, bit/s: what the window allows without the queue
    pub base_ceiling_bps: Option<u64>,
    /// the rate the fix is sized for (`--target`), and its BDP at the base RTT
    pub target_bps: Option<u64>,
    pub bdp_bytes: Option<u64>,
    /// share of busy time the kernel counted rwnd-limited (sending end)
    pub rwnd_limited_share: Option<f64>,
    /// received and not read by the application (receiving end), bytes
    pub unread: Option<u64>,
    /// the setting (or state) that makes the limit what it is
    pub setting: Option<String>,
    /// the change that lifts it
    pub suggested: Option<String>,
    /// other limits holding the window down, each with its fix and gain
    pub factors: Vec<Factor>,
}

impl Verdict {
    /// A verdict with nothing known yet.
    pub fn unknown(side: Side) -> Verdict {
        Verdict {
            limit: Limit::Unknown,
            side,
            basis: Basis::Life,
            peer: None,
            window_limited: None,
            rate_bps: None,
            rtt_us: None,
            base_rtt_us: None,
            rtt_source: None,
            queue_us: None,
            window: None,
            ceiling_bps: None,
            base_ceiling_bps: None,
            target_bps: None,
            bdp_bytes: None,
            rwnd_limited_share: None,
            unread: None,
            setting: None,
            suggested: None,
            factors: Vec::new(),
        }
    }
}

/// One end of a connection, read now and (maybe) one interval earlier, with its namespace's
/// limits.
#[derive(Clone, Copy)]
pub struct End<'a> {
    pub now: &'a SockFacts,
    pub before: Option<&'a SockFacts>,
    pub host: &'a HostLimits,
}

/// What a verdict is computed from.
pub struct Input<'a> {
    pub now: &'a SockFacts,
    /// the same socket one interval earlier (rates from deltas); None: one snapshot
    pub before: Option<&'a SockFacts>,
    pub host: &'a HostLimits,
    /// the rate a suggestion is sized for (e.g. the path's bottleneck); None: per 100 Mbit/s (more
    /// on short paths, see `per_rate`)
    pub target_bps: Option<u64>,
    /// the connection's other end, read in the same reading
    pub peer: Option<End<'a>>,
    /// the lowest receiver RTT estimate seen on this socket so far, µs
    pub min_rcv_rtt_us: Option<u32>,
}

fn delta(now: Option<u64>, before: Option<u64>) -> Option<u64> {
    Some(now?.saturating_sub(before?))
}

fn ceiling_bps(window: u64, rtt_us: u32) -> u64 {
    (window as f64 * 8.0 * 1e6 / rtt_us.max(1) as f64) as u64
}

fn bdp(rate_bps: u64, rtt_us: u32) -> u64 {
    (rate_bps as f64 * rtt_us as f64 / 8e6).ceil() as u64
}

/// Human rates: 1 Gbit/s, 26.2 Mbit/s.
pub fn fmt_rate(bps: u64) -> String {
    let b = bps as f64;
    if b >= 1e9 {
        format!("{:.2} Gbit/s", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} Mbit/s", b / 1e6)
    } else {
        format!("{:.0} kbit/s", b / 1e3)
    }
}

/// Durations as people read them: 48 us, 18.2 ms.
pub fn fmt_rtt(us: u32) -> String {
    if us < 1000 {
        format!("{us} us")
    } else {
        format!("{:.1} ms", us as f64 / 1000.0)
    }
}

impl End<'_> {
    /// Seconds since the earlier reading.
    fn dt_s(&self) -> Option<f64> {
        self.before
            .map(|b| self.now.ts_ns.saturating_sub(b.ts_ns) as f64 / 1e9)
            .filter(|d| *d > 0.0)
    }

    /// Bytes received and acknowledged: over the interval, or over the life.
    fn moved(&self) -> (u64, u64) {
        let (n, b) = (self.now, self.before);
        let (rx, tx) = match b {
            Some(b) => (
                delta(n.bytes_received, b.bytes_received),
                delta(n.bytes_acked, b.bytes_acked),
            ),
            None => (n.bytes_received, n.bytes_acked),
        };
        (rx.unwrap_or(0), tx.unwrap_or(0))
    }

    /// The sending rate: over the interval, or bytes over busy time (the chrono: time with data
    /// in flight) for one snapshot.
    fn send_rate(&self) -> Option<u64> {
        let (_, tx) = self.moved();
        match self.dt_s() {
            Some(dt) => Some((tx as f64 * 8.0 / dt) as u64),
            None => {
                let busy = self.now.busy_us.filter(|b| *b > 0)?;
                Some((tx as f64 * 8.0 * 1e6 / busy as f64) as u64)
            }
        }
    }

    fn recv_rate(&self) -> Option<u64> {
        let (rx, _) = self.moved();
        Some((rx as f64 * 8.0 / self.dt_s()?) as u64)
    }

    fn chrono_share(&self, f: impl Fn(&SockFacts) -> Option<u64>) -> Option<f64> {
        let (busy, part) = match self.before {
            Some(b) => (delta(self.now.busy_us, b.busy_us), delta(f(self.now), f(b))),
            None => (self.now.busy_us, f(self.now)),
        };
        let busy = busy.filter(|b| *b > 0)?;
        Some(part? as f64 / busy as f64)
    }

    /// A zero window with data waiting: this end's application does not read.
    fn zero_window_with_unread(&self) -> bool {
        self.now.rcv_wnd == Some(0) && self.now.unread.unwrap_or(0) > 0
    }

    /// The peer advertises (almost) nothing while this end has data to send.
    fn peer_zero_window(&self) -> bool {
        let mss = self.now.mss_cache.unwrap_or(1).max(1);
        self.now.snd_wnd.is_some_and(|w| w < mss)
            && self.now.wmem_queued.unwrap_or(0) > 0
            && self.now.state == crate::facts::ESTABLISHED
    }

    fn tuple(&self) -> SocketId {
        self.now.id.clone()
    }
}

/// A sysctl change as a command, run in the socket's namespace (global settings say so). The
/// callers only ask for values above the current one: a fix never lowers a setting.
fn sysctl_fix(host: &HostLimits, key: &str, value: String, global: bool) -> String {
    let cmd = format!("sysctl -w {key}={value}");
    match (&host.run_in, global) {
        (_, true) => format!("{cmd} (global: every namespace)"),
        (Some(prefix), false) => format!("{prefix} {cmd}"),
        (None, false) => cmd,
    }
}

/// The window a rate needs at the base RTT, and how it is said.
struct Sizing {
    base_us: u32,
    target: Option<u64>,
}

impl Sizing {
    /// The rate sized for: the target, or 100 Mbit/s as a unit.
    fn rate(&self) -> u64 {
        self.target.unwrap_or_else(|| per_rate(self.base_us))
    }
    fn window(&self) -> u64 {
        bdp(self.rate(), self.base_us)
    }
    /// "for 1.00 Gbit/s x 18.0 ms base RTT" or "per 100 Mbit/s at 18.0 ms base RTT"
    fn words(&self) -> String {
        match self.target {
            Some(t) => format!(
                "for {} at {} base RTT (window {} B)",
                fmt_rate(t),
                fmt_rtt(self.base_us),
                self.window()
            ),
            None => format!(
                "per {} at {} base RTT (window {} B; --target RATE sizes it for your rate)",
                fmt_rate(self.rate()),
                fmt_rtt(self.base_us),
                self.window()
            ),
        }
    }
}

/// Decides one socket's verdict: with its peer, the connection's.
pub fn verdict(i: &Input) -> Verdict {
    let me = End {
        now: i.now,
        before: i.before,
        host: i.host,
    };
    let basis = if me.dt_s().is_some() {
        Basis::Interval
    } else {
        Basis::Life
    };
    let peer = i.peer;
    let (rx, tx) = me.moved();
    // which end sends: with the peer visible both ends decide alike (the end whose acknowledged
    // bytes grew more; on a tie the lower address:port)
    let side = match &peer {
        Some(p) => {
            let (_, ptx) = p.moved();
            match (tx, ptx) {
                (0, 0) => Side::Idle,
                (a, b) if a > b => Side::Sending,
                (a, b) if a < b => Side::Receiving,
                _ if me.tuple().tuple() < p.tuple().tuple() => Side::Sending,
                _ => Side::Receiving,
            }
        }
        None => match (rx, tx) {
            (0, 0) => Side::Idle,
            (r, t) if r >= t => Side::Receiving,
            _ => Side::Sending,
        },
    };
    let (sender, receiver) = match side {
        Side::Sending => (Some(me), peer),
        Side::Receiving => (peer, Some(me)),
        Side::Idle => {
            // which end would receive: the one holding unread data, else this one
            if me.now.unread.unwrap_or(0) > 0 || peer.is_none() {
                (peer, Some(me))
            } else {
                (Some(me), peer)
            }
        }
    };
    let mut v = Verdict {
        side,
        basis,
        peer: peer.map(|p| p.tuple()),
        ..Verdict::unknown(side)
    };
    judge_connection(&mut v, sender, receiver, i);
    v
}

/// The connection's judgement, into `v` (whose side, basis and peer are set).
fn judge_connection(v: &mut Verdict, sender: Option<End>, receiver: Option<End>, i: &Input) {
    let rate = match (sender, receiver) {
        (Some(s), _) => s.send_rate(),
        (None, Some(r)) => r.recv_rate(),
        _ => None,
    };
    v.rate_bps = rate;
    // 1. an application not reading stalls the connection at any rate (either end may show it:
    // the receiver its unread data, the sender the zero window it is offered)
    let ends = [sender, receiver];
    if let Some(r) = ends.iter().flatten().find(|e| e.zero_window_with_unread()) {
        let unread = r.now.unread.unwrap_or(0) as u64;
        v.limit = Limit::AppNotReading;
        v.unread = Some(unread);
        v.window = Some(0);
        v.setting = Some(format!(
            "zero window: {unread} bytes received and not read by the receiving application"
        ));
        v.suggested = Some(
            "the receiving application must read (or read faster): a larger buffer only delays the stall"
                .into(),
        );
        return;
    }
    if let Some(s) = ends.iter().flatten().find(|e| e.peer_zero_window()) {
        v.limit = Limit::AppNotReading;
        v.window = Some(s.now.snd_wnd.unwrap_or(0) as u64);
        v.setting = Some(format!(
            "the peer advertises a zero window with {} bytes queued to send: its application is not reading",
            s.now.wmem_queued.unwrap_or(0)
        ));
        v.suggested = Some(
            "the receiving application must read (run `tcpwin-trace ss` on the receiving host): nothing to change on the sending end"
                .into(),
        );
        return;
    }
    if v.side == Side::Idle {
        if v.basis == Basis::Interval {
            v.limit = Limit::Idle;
            v.setting = Some("no data moved in the interval and none waits".into());
            return;
        }
        // no interval and no data yet: the cap the window would meet
        if let Some(r) = receiver {
            caps(v, r, None, i.target_bps);
        }
        return;
    }

    // the RTTs: the sender's (from ACKs) when it is visible, else the receiver's own estimate,
    // against the best base RTT it has
    let (rtt, base, source) = match (sender, receiver) {
        (Some(s), _) if s.now.srtt_us.is_some_and(|r| r > 0) => {
            let rtt = s.now.srtt_us.unwrap_or(0);
            let base = s.now.min_rtt_us.filter(|m| *m > 0).unwrap_or(rtt).min(rtt);
            (rtt, base, "the sender's srtt and min_rtt")
        }
        (_, Some(r)) => {
            let Some(rtt) = r.now.receiver_rtt_us() else {
                v.setting = Some("no RTT sample yet".into());
                return;
            };
            let handshake = r.now.min_rtt_us.filter(|m| *m > 0);
            let seen = i.min_rcv_rtt_us.filter(|m| *m > 0);
            let (base, source) = match (handshake, seen) {
                (Some(h), Some(s)) if s < h => {
                    (s, "the receiver's rcv_rtt, base: its lowest rcv_rtt")
                }
                (Some(h), _) => (h, "the receiver's rcv_rtt, base: the handshake's min_rtt"),
                (None, Some(s)) => (s, "the receiver's rcv_rtt, base: its lowest rcv_rtt"),
                (None, None) => (rtt, "the receiver's rcv_rtt (no base RTT yet)"),
            };
            (rtt, base.min(rtt), source)
        }
        _ => {
            v.setting = Some("no RTT sample yet".into());
            return;
        }
    };
    v.rtt_us = Some(rtt);
    v.base_rtt_us = Some(base);
    v.rtt_source = Some(source.into());
    let queue = rtt.saturating_sub(base);
    v.queue_us = Some(queue);
    let queued = queue >= QUEUE_MIN_US.max(base / QUEUE_MIN_SHARE);
    if let Some(s) = sender {
        v.rwnd_limited_share = s.chrono_share(|f| f.rwnd_limited_us);
    }
    if let Some(r) = receiver {
        v.unread = r.now.unread.map(u64::from);
    }

    // the window that could bind: the receiver's largest, or the one the sender sees
    let cap_window = receiver.and_then(receiver_window);
    let window = match (cap_window, sender) {
        (Some(w), _) => w,
        (None, Some(s)) => match s.now.snd_wnd {
            Some(w) => w as u64,
            None => {
                v.setting = Some("snd_wnd not read by this source".into());
                return;
            }
        },
        (None, None) => {
            v.setting = Some("window_clamp or wscale_ok not read by this source".into());
            return;
        }
    };
    v.window = Some(window);
    v.ceiling_bps = (window > 0).then(|| ceiling_bps(window, rtt));
    v.base_ceiling_bps = (window > 0).then(|| ceiling_bps(window, base));
    let sizing = Sizing {
        base_us: base,
        target: i.target_bps,
    };
    v.target_bps = i.target_bps;
    v.bdp_bytes = Some(sizing.window());

    // 1b. a backlog the application does not drain keeps the advertised window small, and the
    // flow runs at what that window allows
    if let Some(r) = receiver {
        if backlog(r, window, rate, (base, rtt), v.rwnd_limited_share) {
            let unread = r.now.unread.unwrap_or(0);
            v.limit = Limit::AppNotReading;
            v.setting = Some(format!(
                "{unread} bytes received and not read by the application keep the advertised window at {} of {window} B",
                r.now.rcv_wnd.unwrap_or(0)
            ));
            v.suggested = Some(
                "the application must read faster: a larger buffer only delays the stall".into(),
            );
            return;
        }
    }

    // 2. the sender's own buffer
    if let Some(s) = sender {
        if let Some(why) = sndbuf_bound(s, rate, rtt) {
            v.limit = Limit::Sndbuf;
            v.window_limited = Some(false);
            v.setting = Some(why);
            let need = 2 * sizing.window();
            let cur = s.now.sk_sndbuf.unwrap_or(0) as u64;
            v.suggested = Some(if s.now.sndbuf_locked == Some(true) {
                format!(
                    "{}: the application's SO_SNDBUF request >= {} (or none: the kernel autotunes it)",
                    sizing.words(),
                    need.div_ceil(2).max(cur / 2 + 1)
                )
            } else {
                let max = s.host.tcp_wmem.map(|t| t[2]).unwrap_or(0);
                let t = s.host.tcp_wmem.unwrap_or([4096, 16384, 4194304]);
                if need > max {
                    format!(
                        "{}: {}",
                        sizing.words(),
                        sysctl_fix(
                            s.host,
                            "net.ipv4.tcp_wmem",
                            format!("'{} {} {need}'", t[0], t[1]),
                            false
                        )
                    )
                } else {
                    format!(
                        "{}: tcp_wmem max {max} already allows it; the application's writes are what hold it",
                        sizing.words()
                    )
                }
            });
            return;
        }
    }

    let Some(rate) = rate else {
        // one snapshot of a receiver alone: no rate to hold against the window; the cap it meets
        if let Some(r) = receiver {
            caps(v, r, None, i.target_bps);
            if v.limit == Limit::Unknown {
                v.setting = Some(
                    "one snapshot has no rate to hold against the window: repeat with -i MS".into(),
                );
            }
        }
        return;
    };

    // 3. does the window bind?
    let binds_at = if queued { base } else { rtt };
    // on a path without a queue, a sender the kernel saw stopped by the peer's window a good
    // part of its busy time is window-bound even when it uses less of window / RTT (at RTTs of
    // µs the ACK clock leaves the window partly unused: iperf3 -w 8K on veth)
    let rwnd_stopped = !queued
        && v.rwnd_limited_share
            .is_some_and(|x| x >= RWND_SUPPORT_SHARE)
        && sender.is_some_and(|s| cwnd_bound(s).is_none());
    let binds = window > 0
        && (rate as f64 >= WINDOW_LIMITED_SHARE * ceiling_bps(window, binds_at) as f64
            || rwnd_stopped);
    let fills_window =
        window > 0 && rate as f64 >= WINDOW_LIMITED_SHARE * ceiling_bps(window, rtt) as f64;
    v.window_limited = Some(binds);
    if !binds {
        if queued {
            v.limit = Limit::PathQueue;
            v.setting = Some(format!(
                "the path's bottleneck holds the flow at {} with a queue of {} (RTT {} over a base of {}): the window of {window} B {}, and would allow {} without the queue",
                fmt_rate(rate),
                fmt_rtt(queue),
                fmt_rtt(rtt),
                fmt_rtt(base),
                if fills_window { "fills the queue" } else { "is not what holds it" },
                fmt_rate(ceiling_bps(window, base)),
            ));
            v.suggested = Some(
                "no window change: a larger window only lengthens the queue. The bottleneck's rate is what the flow gets; an AQM there (fq_codel, cake) or a pacing sender (bbr) shortens the queue"
                    .into(),
            );
        } else {
            v.limit = Limit::NotWindowLimited;
            let cwnd_limited = sender.and_then(cwnd_bound);
            v.setting = Some(match cwnd_limited {
                Some(c) => format!(
                    "the transfer used {} of the {} its window allows: the sender's congestion window ({c} B in flight) holds it",
                    fmt_rate(rate),
                    fmt_rate(ceiling_bps(window, binds_at))
                ),
                None => format!(
                    "the transfer used {} of the {} its window allows",
                    fmt_rate(rate),
                    fmt_rate(ceiling_bps(window, binds_at))
                ),
            });
            v.suggested = Some(
                "look elsewhere: the sending application, congestion or loss on the path".into(),
            );
        }
        // the window caps as contributing facts (a window too small *and* irrelevant)
        if let Some(r) = receiver {
            let mut probe = v.clone();
            caps(&mut probe, r, Some(window), i.target_bps);
            if probe.limit.is_window() && probe.limit != Limit::PeerWindow {
                v.factors.push(Factor {
                    limit: probe.limit,
                    setting: probe.setting.unwrap_or_default(),
                    suggested: "not the limit now: it binds only once the path allows more".into(),
                    window_gain: None,
                });
            }
        }
        return;
    }

    // 4. the window binds: which cap makes it what it is
    match receiver {
        Some(r) if cap_window.is_some() => caps(v, r, Some(window), i.target_bps),
        _ => {
            let s = sender.expect("a window without a receiver comes from the sender");
            v.limit = Limit::PeerWindow;
            v.setting = Some(format!(
                "the peer's advertised window {window} B (peer wscale {}) bounds the rate at {} over {}",
                s.now
                    .snd_wscale
                    .map(|w| w.to_string())
                    .unwrap_or_else(|| "?".into()),
                fmt_rate(ceiling_bps(window, binds_at)),
                fmt_rtt(binds_at)
            ));
            v.suggested = Some(format!(
                "{}: the receiver must advertise more; run `tcpwin-trace ss` on the peer for the setting that caps it",
                sizing.words()
            ));
        }
    }
}

/// The largest window the receiver can advertise: its clamp, within what the negotiated scale
/// can express. None when the source does not read them.
fn receiver_window(r: End) -> Option<u64> {
    let (clamp, wscale_ok) = (r.now.window_clamp?, r.now.wscale_ok?);
    let shift = if wscale_ok {
        r.now.rcv_wscale.unwrap_or(0)
    } else {
        0
    };
    Some((clamp as u64).min(max_scaled_window(shift)))
}

/// The application's backlog sets the window that binds, the flow not at what the full window
/// allows over the base RTT (then the cap binds, and a backlog is the reader catching up), and
/// either: unread data at a quarter of the window or more at both ends of the interval with the
/// advertised window shrunk under three quarters of it; or the sender held by the advertised
/// window most of its busy time, yet far under what the window allows even over the RTT it sees
/// (the advertised window spent much of the time well under the window: closed by the reader),
/// while data waits unread (a reader that reads in bursts, as `curl --limit-rate` does, is caught
/// between bursts too). One snapshot: half the window unread and under half advertised.
fn backlog(
    r: End,
    window: u64,
    rate: Option<u64>,
    (base, rtt): (u32, u32),
    rwnd_share: Option<f64>,
) -> bool {
    let unread = |f: &SockFacts| f.unread.unwrap_or(0) as f64;
    let Some(adv) = r.now.rcv_wnd.map(u64::from) else {
        return false;
    };
    if window == 0 {
        return false;
    }
    let w = window as f64;
    let below_cap =
        rate.is_none_or(|x| (x as f64) < WINDOW_LIMITED_SHARE * ceiling_bps(window, base) as f64);
    let mss = r.now.rcv_mss.unwrap_or(1).max(1) as f64;
    match r.before {
        Some(b) => {
            let persistent = unread(r.now) >= BACKLOG_SHARE * w
                && unread(b) >= BACKLOG_SHARE * w
                && (adv as f64) < 0.75 * w;
            let under_window = rate.is_some_and(|x| {
                (x as f64) < WINDOW_LIMITED_SHARE * ceiling_bps(window, rtt) as f64
            });
            // at RTTs of µs "far under window / RTT" says nothing (the ACK clock and srtt's
            // granularity): only on paths whose base RTT is a millisecond or more
            let held = base >= QUEUE_MIN_US
                && rwnd_share.is_some_and(|x| x >= 0.5)
                && under_window
                && (unread(r.now) >= mss || unread(b) >= mss);
            below_cap && (persistent || held)
        }
        None => unread(r.now) >= 0.5 * w && (adv as f64) < 0.5 * w,
    }
}

/// The sender's congestion window holds it: in flight within two segments of cwnd, and cwnd
/// below the peer's window (a cwnd at or above the peer's window never gets to hold anything:
/// reno's cwnd stays near 10 segments behind a window of 8.75, iperf3 -w 8K).
fn cwnd_bound(s: End) -> Option<u64> {
    let mss = s.now.mss_cache? as u64;
    let cwnd = s.now.snd_cwnd? as u64 * mss;
    if s.now.snd_wnd.is_some_and(|w| cwnd >= w as u64) {
        return None;
    }
    let inflight = s.now.inflight_bytes()?;
    (inflight + 2 * mss >= cwnd).then_some(inflight)
}

/// Why the sender's own buffer binds, or None: data queued up to the send buffer while the
/// peer's window and the congestion window would take more; or the kernel's sndbuf-limited time.
fn sndbuf_bound(s: End, rate: Option<u64>, rtt: u32) -> Option<String> {
    let f = s.now;
    let sndbuf = f.sk_sndbuf? as u64;
    let share = s.chrono_share(|f| f.sndbuf_limited_us);
    let locked = if f.sndbuf_locked == Some(true) {
        "set by the application (SO_SNDBUF)"
    } else {
        "autotuned"
    };
    if share.is_some_and(|x| x > SNDBUF_LIMITED_SHARE) {
        return Some(format!(
            "the send buffer (sk_sndbuf {sndbuf}, {locked}): the kernel counted {:.0} % of busy time sndbuf-limited",
            share.unwrap_or(0.0) * 100.0
        ));
    }
    let queued = f.wmem_queued? as u64;
    let peer_window = f.snd_wnd? as u64;
    let full = queued as f64 >= SNDBUF_FULL * sndbuf as f64;
    // the windows would take at least twice what the buffer holds
    let room = peer_window >= 2 * sndbuf;
    let not_cwnd = cwnd_bound(s).is_none();
    // most of what is queued is in flight: nothing waits to be sent (a sender paced or held by
    // the path keeps most of a full buffer unsent)
    let all_sent = f
        .inflight_bytes()
        .is_some_and(|i| i as f64 >= SNDBUF_SENT * queued as f64);
    let moving = rate.is_some_and(|r| r > 0);
    (full && room && not_cwnd && all_sent && moving).then(|| {
        format!(
            "the send buffer (sk_sndbuf {sndbuf}, {locked}) is full ({queued} B queued) while the peer's window ({peer_window} B) and the congestion window allow more: {} at most over {}{}",
            fmt_rate(ceiling_bps(sndbuf, rtt)),
            fmt_rtt(rtt),
            share
                .map(|x| format!("; sndbuf-limited time {:.0} %", x * 100.0))
                .unwrap_or_default()
        )
    })
}

/// The receiver's caps: the primary limit into `v`, the others as factors. `window`: the
/// window judged (None: one snapshot, the cap it would meet).
fn caps(v: &mut Verdict, r: End, window: Option<u64>, target: Option<u64>) {
    let f = r.now;
    let h = r.host;
    let Some(w) = window.or_else(|| receiver_window(r)) else {
        v.setting = Some("window_clamp or wscale_ok not read by this source".into());
        return;
    };
    v.window.get_or_insert(w);
    let clamp = f.window_clamp.unwrap_or(0);
    let wscale_ok = f.wscale_ok.unwrap_or(true);
    let shift = if wscale_ok {
        f.rcv_wscale.unwrap_or(0)
    } else {
        0
    };
    let base = v.base_rtt_us.or_else(|| f.receiver_rtt_us());
    let sizing = base.map(|b| Sizing { base_us: b, target });
    let need = sizing.as_ref().map(|s| s.window());
    let words = sizing
        .as_ref()
        .map(|s| s.words())
        .unwrap_or_else(|| "once an RTT sample exists".into());
    let ratio = f.scaling_ratio;
    let buffer_for = |win: u64| ratio.and_then(|r| space_from_win(win, r));
    // the window after a change of the buffer to `buf`, as a gain
    let rcvbuf = f.sk_rcvbuf.map(u64::from);
    let mut found: Vec<(Limit, String, String, Option<f64>)> = Vec::new();

    if !wscale_ok {
        let setting = match h.tcp_window_scaling {
            Some(false) => "window scaling off on this host (net.ipv4.tcp_window_scaling=0): the window stays <= 65535 for the connection's life".to_string(),
            Some(true) => "the peer did not offer window scaling in its SYN: the window stays <= 65535 for the connection's life".into(),
            None => "window scaling not negotiated: the window stays <= 65535 for the connection's life".into(),
        };
        let fix = match h.tcp_window_scaling {
            Some(false) => format!(
                "{}, on new connections; {words}",
                sysctl_fix(h, "net.ipv4.tcp_window_scaling", "1".into(), false)
            ),
            _ => format!("window scaling on the peer (net.ipv4.tcp_window_scaling=1 there) and on every middlebox between; {words}"),
        };
        let gain = need.map(|n| n.max(w) as f64 / w.max(1) as f64);
        found.push((Limit::WscaleOff, setting, fix, gain));
    }
    if h.memory_pressure == Some(true)
        && f.rcv_ssthresh
            .zip(f.advmss)
            .is_some_and(|(s, a)| s <= 4 * a)
    {
        found.push((
            Limit::MemoryPressure,
            "TCP memory pressure (net.ipv4.tcp_mem) clamps rcv_ssthresh to 4 x advmss".into(),
            "raise net.ipv4.tcp_mem (global), or reduce the host's TCP memory use".into(),
            None,
        ));
    }
    let buffer_window = rcvbuf.zip(ratio).map(|(b, r)| win_from_space(b, r));
    if let Some(bw) = buffer_window {
        if (clamp as f64) < CLAMP_SLACK * bw as f64 && (clamp as u64) < max_scaled_window(shift) {
            found.push((
                Limit::WindowClamp,
                format!(
                    "window_clamp={clamp} below the {bw} the buffer allows (TCP_WINDOW_CLAMP by the application, or a route `window` metric)"
                ),
                match need {
                    Some(n) if n > clamp as u64 => format!("{words}: the clamp must be >= {n}: raise or remove it"),
                    _ => format!("raise or remove the clamp ({words})"),
                },
                need.map(|n| n.min(bw).max(w) as f64 / w.max(1) as f64),
            ));
        }
    }
    let at_max = h
        .tcp_rmem
        .map(|t| t[2])
        .zip(rcvbuf)
        .is_some_and(|(m, b)| b as f64 >= AT_MAX * m as f64);
    let autotune_off = h.tcp_moderate_rcvbuf == Some(false);
    // a buffer fix: with a target the command sized for it (only when it raises the setting),
    // without one the buffer each 100 Mbit/s needs and the command to write it in
    let r = ratio.unwrap_or(0);
    let base_s = base.unwrap_or(0);
    let unit = per_rate(base_s);
    let sized = |current: u64, cmd: &dyn Fn(&str) -> String| -> String {
        let nb = need.and_then(buffer_for);
        let allows = ratio
            .filter(|_| base_s > 0)
            .map(|r| fmt_rate(ceiling_bps(win_from_space(current, r), base_s)));
        match (target, nb) {
            (Some(_), Some(nb)) if nb > current => {
                format!("{words}: at ratio {r} the buffer must be {nb}: {}", cmd(&nb.to_string()))
            }
            (Some(_), Some(_)) => format!("{words}: the buffer ({current}) already allows it"),
            (None, Some(nb)) => format!(
                "{words}: at ratio {r} each {} needs {nb} B of buffer ({current} allows {} at the base RTT): {} with BYTES >= rate / {} x {nb}",
                fmt_rate(unit),
                allows.unwrap_or_else(|| "?".into()),
                cmd("BYTES"),
                fmt_rate(unit),
            ),
            _ => words.clone(),
        }
    };
    if f.rcvbuf_locked == Some(true) {
        let b = rcvbuf.unwrap_or(0);
        let capped = h.rmem_max.is_some_and(|m| b == 2 * m);
        let setting = if capped {
            format!(
                "SO_RCVBUF capped by net.core.rmem_max={} (sk_rcvbuf {b} = 2 x rmem_max); autotuning is off for the socket",
                h.rmem_max.unwrap_or(0)
            )
        } else {
            format!(
                "SO_RCVBUF set by the application (sk_rcvbuf {b}); autotuning is off for the socket"
            )
        };
        // the kernel doubles an SO_RCVBUF request: ask half the buffer
        let rmem_max = h.rmem_max.unwrap_or(0);
        let fix = sized(b, &|bytes: &str| {
            let half = bytes
                .parse::<u64>()
                .map(|n| n.div_ceil(2).to_string())
                .unwrap_or_else(|_| format!("{bytes}/2"));
            let raise = half.parse::<u64>().map_or(true, |h| h > rmem_max);
            if capped && raise {
                format!(
                    "{} and an SO_RCVBUF request >= {half} (or none: autotuning)",
                    sysctl_fix(h, "net.core.rmem_max", half.clone(), true)
                )
            } else {
                format!("an SO_RCVBUF request >= {half} in the application (or none: autotuning)")
            }
        });
        let gain = need
            .and_then(buffer_for)
            .map(|nb| (nb.max(b) as f64) / b.max(1) as f64);
        found.push((Limit::RcvbufLocked, setting, fix, gain));
    } else if at_max || autotune_off {
        let t = h.tcp_rmem.unwrap_or([4096, 131072, 6291456]);
        let (setting, current) = if autotune_off {
            (
                format!(
                    "autotuning off (net.ipv4.tcp_moderate_rcvbuf=0): the buffer stays at tcp_rmem[1]={}",
                    t[1]
                ),
                t[1],
            )
        } else {
            (
                format!(
                    "autotuning reached net.ipv4.tcp_rmem max={} of the socket's namespace (net.core.rmem_max does not cap autotuning)",
                    t[2]
                ),
                t[2],
            )
        };
        let fix = sized(current, &|bytes: &str| {
            if autotune_off {
                format!(
                    "{}, or {}",
                    sysctl_fix(h, "net.ipv4.tcp_moderate_rcvbuf", "1".into(), false),
                    sysctl_fix(
                        h,
                        "net.ipv4.tcp_rmem",
                        format!(
                            "'{} {bytes} {}'",
                            t[0],
                            t[2].max(bytes.parse().unwrap_or(0))
                        ),
                        false
                    )
                )
            } else {
                sysctl_fix(
                    h,
                    "net.ipv4.tcp_rmem",
                    format!("'{} {} {bytes}'", t[0], t[1]),
                    false,
                )
            }
        });
        let gain = need
            .and_then(buffer_for)
            .map(|nb| nb.max(current) as f64 / current.max(1) as f64);
        found.push((Limit::AutotuneMax, setting, fix, gain));
    }
    if let Some(r) = ratio.filter(|r| *r < LOW_RATIO) {
        let gain = GRO_RATIO as f64 / r as f64;
        found.push((
            Limit::LowRatio,
            format!(
                "scaling_ratio={r}: the window is {:.0} % of the buffer (little payload per truesize: GRO off, a small MTU or XDP on the ingress interface)",
                r as f64 * 100.0 / 256.0
            ),
            format!(
                "receiver GRO on (ethtool -K IFACE gro on) or a larger MTU: ratio ~{GRO_RATIO} at MTU 1500, window x{gain:.2} on the same buffer"
            ),
            Some(gain),
        ));
    }

    // what this kernel version gets wrong, where it bears on this socket
    let known = h
        .kernel
        .as_deref()
        .and_then(crate::kernel_notes::Version::parse)
        .map(crate::kernel_notes::notes)
        .unwrap_or_default();
    let locked = f.rcvbuf_locked == Some(true);
    for n in known {
        let applies = match n.id {
            "autotune-regression-6.16" => !locked && base.is_some_and(|b| b >= 10_000),
            "so-rcvbuf-freezes-clamp" => locked,
            "rcvbuf-low-rtt" => !locked && base.is_some_and(|b| b < 1000),
            _ => false,
        };
        if applies {
            found.push((
                if locked {
                    Limit::RcvbufLocked
                } else {
                    Limit::AutotuneMax
                },
                format!("kernel {}: {}", h.kernel.as_deref().unwrap_or("?"), n.text),
                "a kernel without this behaviour (see the note)".into(),
                None,
            ));
        }
    }
    // the primary: the first found, except that a low ratio leads when fixing it alone reaches
    // the target (the cheapest fix: no memory), and a buffer setting (the operator's choice and
    // the bigger lever) otherwise
    let ratio_alone = found
        .iter()
        .position(|x| x.0 == Limit::LowRatio)
        .filter(|_| {
            let g = GRO_RATIO as f64 / ratio.unwrap_or(GRO_RATIO) as f64;
            target.is_some() && need.is_some_and(|n| (w as f64) * g >= n as f64)
        });
    let primary = match (ratio_alone, found.first()) {
        (Some(i), _)
            if !matches!(
                found[0].0,
                Limit::WscaleOff | Limit::MemoryPressure | Limit::WindowClamp
            ) =>
        {
            i
        }
        (_, Some(_)) => 0,
        (_, None) => {
            // autotuning still has room: the window grows with the transfer
            v.limit = Limit::NotWindowLimited;
            v.setting = Some(format!(
                "autotuning can still grow the buffer (sk_rcvbuf {} of tcp_rmem max {})",
                rcvbuf.unwrap_or(0),
                h.tcp_rmem
                    .map(|t| t[2].to_string())
                    .unwrap_or_else(|| "?".into())
            ));
            return;
        }
    };
    let (limit, setting, suggested, _) = found.remove(primary);
    v.limit = limit;
    v.setting = Some(setting);
    v.suggested = Some(suggested);
    v.factors.extend(
        found
            .into_iter()
            .map(|(limit, setting, suggested, window_gain)| Factor {
                limit,
                setting,
                suggested,
                window_gain,
            }),
    );
}

#[cfg(test)]
mod tests;
