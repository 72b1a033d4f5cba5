//! Event kinds: the kernel's `tcpwin_common::kind` numbers as an enum.
use serde::{Deserialize, Serialize};
use tcpwin_common::kind;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// the connection reached ESTABLISHED: the initial window
    Init,
    /// `scaling_ratio` changed
    Ratio,
    /// `sk_rcvbuf`, `window_clamp`, `rcv_ssthresh` or `rcvq_space` changed
    Space,
    /// a socket from before the trace, first observed
    Seen,
    /// the socket was destroyed: its final values
    Close,
}

impl EventKind {
    pub fn from_raw(k: u8) -> Option<Self> {
        Some(match k {
            kind::INIT => EventKind::Init,
            kind::RATIO => EventKind::Ratio,
            kind::SPACE => EventKind::Space,
            kind::SEEN => EventKind::Seen,
            kind::CLOSE => EventKind::Close,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            EventKind::Init => "init",
            EventKind::Ratio => "ratio",
            EventKind::Space => "space",
            EventKind::Seen => "seen",
            EventKind::Close => "close",
        }
    }

    /// Kinds that carry the previously reported values.
    pub fn has_prev(self) -> bool {
        matches!(self, EventKind::Ratio | EventKind::Space | EventKind::Close)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_serde() {
        for k in 1..=5u8 {
            let e = EventKind::from_raw(k).unwrap();
            assert_eq!(serde_json::to_value(e).unwrap(), e.name());
        }
        assert_eq!(EventKind::from_raw(99), None);
    }
}
