//! The limits a verdict can name, as one table: the enum, its ids (text, JSON, the exporter's
//! `limit` label), what kind of limit each is, and the list every consumer iterates (`ss
//! --limited`, the exporter's zero-fill, the alert pack's regex, docs/verdicts.md, the lab's
//! scenarios) are generated from it, so none can drift. A new limit is one row here and one
//! file of the family that decides it.
use serde::{Deserialize, Serialize};

/// What kind of limit a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// a setting of the receiving host caps its window (the alert pack fires on these)
    ReceiverCap,
    /// the peer's window, as a sender alone sees it
    PeerWindow,
    /// an application: the receiver not reading, the sender not writing
    Application,
    /// the sending host: its buffer, its congestion window
    Sender,
    /// the path: a queue, or nothing the window does
    Path,
    /// nothing to judge, or not enough known
    Nothing,
}

macro_rules! limits {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $class:ident; )*) => {
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Limit {
            $( $(#[$doc])* $variant, )*
        }

        impl Limit {
            /// Every limit, in the table's order.
            pub const ALL: &'static [Limit] = &[$(Limit::$variant),*];

            /// The id used in text, JSON and metric labels.
            pub fn id(self) -> &'static str {
                match self {
                    $(Limit::$variant => $id,)*
                }
            }

            pub fn class(self) -> Class {
                match self {
                    $(Limit::$variant => Class::$class,)*
                }
            }
        }
    };
}

limits! {
    /// window scaling not negotiated: 64 KB at most
    WscaleOff = "wscale-off", ReceiverCap;
    /// an SO_RCVBUF request (autotuning off), perhaps capped by rmem_max
    RcvbufLocked = "rcvbuf-locked", ReceiverCap;
    /// autotuning at tcp_rmem[2] (or off)
    AutotuneMax = "autotune-max", ReceiverCap;
    /// TCP_WINDOW_CLAMP or a route's window metric
    WindowClamp = "window-clamp", ReceiverCap;
    /// the window scale the handshake chose: the window stays <= 65535 << rcv_wscale
    ScaleCap = "scale-cap", ReceiverCap;
    /// little payload per truesize: the window a small share of the buffer
    LowRatio = "low-ratio", ReceiverCap;
    /// TCP memory pressure clamps rcv_ssthresh
    MemoryPressure = "memory-pressure", ReceiverCap;
    /// the receiving application does not read: its backlog or a zero window
    AppNotReading = "app-not-reading", Application;
    /// the window is not what binds: the path's bottleneck queue holds the flow
    PathQueue = "path-queue", Path;
    /// the window is not what binds, and nothing else could be told apart
    NotWindowLimited = "not-window-limited", Path;
    /// the peer's advertised window, seen by a sender alone
    PeerWindow = "peer-window", PeerWindow;
    /// the sender's own send buffer
    Sndbuf = "sndbuf", Sender;
    /// the sender's congestion window, held down by losses on the path
    Congestion = "congestion", Sender;
    /// the sender paces itself: its application capped the pacing rate (SO_MAX_PACING_RATE)
    Pacing = "pacing", Sender;
    /// the sending application does not write fast enough
    AppLimited = "app-limited", Application;
    /// no data moved in the interval, and nothing waits
    Idle = "idle", Nothing;
    /// a fact the decision needs is absent (e.g. no RTT sample yet); a verdict with nothing
    /// known yet
    #[default]
    Unknown = "unknown", Nothing;
}

impl Limit {
    /// A limit of the receive window: a receiver's cap, or the peer's window a sender sees.
    pub fn is_window(self) -> bool {
        matches!(self.class(), Class::ReceiverCap | Class::PeerWindow)
    }

    /// A setting of the receiving host caps the window (what the alert pack fires on).
    pub fn is_receiver_cap(self) -> bool {
        self.class() == Class::ReceiverCap
    }

    /// What `ss --limited` shows: a window that binds, or one an application closed by not
    /// reading.
    pub fn window_bound(self) -> bool {
        self.is_window() || self == Limit::AppNotReading
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_serialize_as_written() {
        let ids: std::collections::BTreeSet<&str> = Limit::ALL.iter().map(|l| l.id()).collect();
        assert_eq!(ids.len(), Limit::ALL.len());
        for l in Limit::ALL {
            assert_eq!(serde_json::to_value(l).unwrap(), l.id());
        }
        let caps: Vec<&str> = Limit::ALL
            .iter()
            .filter(|l| l.is_receiver_cap())
            .map(|l| l.id())
            .collect();
        assert_eq!(
            caps.join("|"),
            "wscale-off|rcvbuf-locked|autotune-max|window-clamp|scale-cap|low-ratio|memory-pressure"
        );
        assert!(Limit::PeerWindow.is_window() && !Limit::PeerWindow.is_receiver_cap());
        assert!(Limit::AppNotReading.window_bound() && !Limit::Sndbuf.window_bound());
    }
}
