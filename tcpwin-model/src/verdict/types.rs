//! The verdict's shared types, at the bottom of the judge's floors: what a verdict says
//! (`Verdict`, `Side`, `Basis`, `Factor`) and what it is computed from (`Input`). Every family
//! of limits builds on these; none of them imports the judge that calls it.
use serde::{Deserialize, Serialize};

use super::{end::End, fix::Fix, limit::Limit};
use crate::{
    facts::{HostLimits, SockFacts},
    id::SocketId,
};

/// A flow at this share of its window / RTT ceiling or more is window-limited.
pub const WINDOW_LIMITED_SHARE: f64 = 0.7;
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Receiving,
    Sending,
    #[default]
    Idle,
}

impl Side {
    /// The one direction rule every view draws: which way data flows from the local end,
    /// `local <- remote` receiving, `local -> remote` sending, `<>` idle or not known.
    pub fn arrow(side: Option<Side>) -> &'static str {
        match side {
            Some(Side::Receiving) => "<-",
            Some(Side::Sending) => "->",
            _ => "<>",
        }
    }

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// the interval since the socket was last read (rates from the deltas)
    Interval,
    /// one reading: what the socket's counters hold over its life
    #[default]
    Life,
}

/// A limit that also holds the window down, besides the primary one: its setting, the change
/// and what that change would give.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    pub limit: Limit,
    pub setting: String,
    pub suggested: String,
    /// the fix as data (commands, the application's option, what it gives)
    #[serde(default)]
    pub fix: Option<Fix>,
    /// the window after the change / the window now (e.g. 1.43 for GRO at ratio 160)
    pub window_gain: Option<f64>,
}

/// One connection's verdict as one end sees it (over an interval, or over its life).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// the payload rate the target carries in the connection's full segments (a link's rate
    /// counts the headers: 300 Mbit/s carries 286.9 Mbit/s of 1448 B segments): what a
    /// ceiling is held against
    #[serde(default)]
    pub target_payload_bps: Option<u64>,
    pub bdp_bytes: Option<u64>,
    /// share of busy time the kernel counted rwnd-limited (sending end)
    pub rwnd_limited_share: Option<f64>,
    /// received and not read by the application (receiving end), bytes
    pub unread: Option<u64>,
    /// the setting (or state) that makes the limit what it is
    pub setting: Option<String>,
    /// the change that lifts it, in words
    pub suggested: Option<String>,
    /// the change as data: commands that run as printed, the application's socket option, the
    /// window and rate it gives (null where nothing on this host lifts it)
    #[serde(default)]
    pub fix: Option<Fix>,
    /// other limits holding the window down, each with its fix and gain
    pub factors: Vec<Factor>,
    /// what the judge's own check refused (a why, fix and facts that disagree): the fix it
    /// could not stand behind is dropped; empty when every rule held
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
    /// every ceiling the connection meets as a rate at the base RTT, lowest first (empty when
    /// nothing moves or no base RTT is known)
    #[serde(default)]
    pub ceilings: Vec<Ceiling>,
    /// what binds once the fix is applied, and with `--target` every other ceiling below it and
    /// which end can lift it
    #[serde(default)]
    pub next: Option<String>,
}

impl Verdict {
    /// A verdict with nothing known yet.
    pub fn unknown(side: Side) -> Verdict {
        Verdict {
            side,
            ..Verdict::default()
        }
    }
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

/// What a ceiling is (see `ceilings`: how each is computed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    WindowScale,
    WindowClamp,
    ReceiveBuffer,
    PeerWindow,
    SendBuffer,
    CongestionWindow,
    Path,
}

impl Kind {
    pub fn id(self) -> &'static str {
        match self {
            Kind::WindowScale => "window-scale",
            Kind::WindowClamp => "window-clamp",
            Kind::ReceiveBuffer => "receive-buffer",
            Kind::PeerWindow => "peer-window",
            Kind::SendBuffer => "send-buffer",
            Kind::CongestionWindow => "congestion-window",
            Kind::Path => "path",
        }
    }

    /// In words, as a fix names what binds next.
    pub fn words(self) -> &'static str {
        match self {
            Kind::WindowScale => "the receiver's window scale",
            Kind::WindowClamp => "the receiver's window clamp",
            Kind::ReceiveBuffer => "the receiver's buffer",
            Kind::PeerWindow => "the peer's window",
            Kind::SendBuffer => "the sender's send buffer",
            Kind::CongestionWindow => "the sender's congestion window",
            Kind::Path => "the path",
        }
    }

    /// Which end's settings make it: `receiver`, `sender`, or `path`.
    pub fn end(self) -> &'static str {
        match self {
            Kind::WindowScale | Kind::WindowClamp | Kind::ReceiveBuffer | Kind::PeerWindow => {
                "receiver"
            }
            Kind::SendBuffer | Kind::CongestionWindow => "sender",
            Kind::Path => "path",
        }
    }

    /// The ceiling a limit is.
    pub fn of(limit: Limit) -> Option<Kind> {
        Some(match limit {
            Limit::WscaleOff | Limit::ScaleCap => Kind::WindowScale,
            Limit::WindowClamp => Kind::WindowClamp,
            Limit::RcvbufLocked | Limit::AutotuneMax | Limit::LowRatio | Limit::MemoryPressure => {
                Kind::ReceiveBuffer
            }
            Limit::PeerWindow => Kind::PeerWindow,
            Limit::Sndbuf => Kind::SendBuffer,
            Limit::Congestion => Kind::CongestionWindow,
            Limit::PathQueue => Kind::Path,
            _ => return None,
        })
    }
}

/// One ceiling: the bytes its setting lets into flight and that rate at the base RTT.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceiling {
    pub kind: Kind,
    /// `receiver`, `sender` or `path`: whose settings make it
    pub end: String,
    pub bytes: u64,
    pub rate_bps: u64,
    /// the setting it comes from, in words
    pub from: String,
}
