//! Which of `ss`'s judged sockets to show, in the spirit of `ss`'s own filters: a state, the
//! sockets whose window binds, the active ones, source and destination ports. Pure: applied after
//! judging (both ends of a connection are judged together, then filtered).
use crate::{facts::state_name, schema::SsLine, verdict::Limit};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    /// a state as `ss` names it, lower case (`established`, `fin-wait-1`, ...)
    pub state: Option<String>,
    /// only sockets whose window is what binds them (a window cap, the peer's window, or a
    /// window closed by an application that does not read)
    pub limited: bool,
    /// only sockets that moved data (or have data waiting) over the interval
    pub active: bool,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
}

/// The states `--state` accepts.
pub const STATES: [&str; 9] = [
    "established",
    "syn-sent",
    "syn-recv",
    "fin-wait-1",
    "fin-wait-2",
    "time-wait",
    "close-wait",
    "last-ack",
    "closing",
];

impl Selection {
    pub fn keeps(&self, l: &SsLine) -> bool {
        let f = &l.facts;
        let v = &l.verdict;
        let state_ok = self.state.as_deref().is_none_or(|s| {
            state_name(f.state).eq_ignore_ascii_case(if s == "established" { "estab" } else { s })
        });
        let limited_ok = !self.limited || v.limit.window_bound();
        let active_ok = !self.active || !matches!(v.limit, Limit::Idle | Limit::Unknown);
        state_ok
            && limited_ok
            && active_ok
            && self.sport.is_none_or(|p| f.id.lport == p)
            && self.dport.is_none_or(|p| f.id.rport == p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        facts::SockFacts,
        id::SocketId,
        verdict::{Side, Verdict},
    };

    fn line(state: u8, lport: u16, rport: u16, limit: Limit) -> SsLine {
        SsLine {
            source: "iterator".into(),
            netns_name: "-".into(),
            state_name: state_name(state).into(),
            facts: SockFacts {
                id: SocketId {
                    lport,
                    rport,
                    ..Default::default()
                },
                state,
                ..Default::default()
            },
            verdict: Verdict {
                limit,
                ..Verdict::unknown(Side::Receiving)
            },
        }
    }

    #[test]
    fn filters_as_ss_users_expect() {
        let all = [
            line(1, 5201, 40000, Limit::AutotuneMax),
            line(1, 22, 50000, Limit::Idle),
            line(8, 80, 41000, Limit::NotWindowLimited),
            line(1, 40001, 443, Limit::AppNotReading),
        ];
        let kept = |s: Selection| -> Vec<u16> {
            all.iter()
                .filter(|l| s.keeps(l))
                .map(|l| l.facts.id.lport)
                .collect()
        };
        assert_eq!(kept(Selection::default()).len(), 4);
        assert_eq!(
            kept(Selection {
                limited: true,
                ..Default::default()
            }),
            vec![5201, 40001]
        );
        assert_eq!(
            kept(Selection {
                active: true,
                ..Default::default()
            }),
            vec![5201, 80, 40001]
        );
        assert_eq!(
            kept(Selection {
                state: Some("close-wait".into()),
                ..Default::default()
            }),
            vec![80]
        );
        assert_eq!(
            kept(Selection {
                state: Some("established".into()),
                dport: Some(443),
                ..Default::default()
            }),
            vec![40001]
        );
        assert_eq!(
            kept(Selection {
                sport: Some(22),
                ..Default::default()
            }),
            vec![22]
        );
        // every state accepted is one `ss` prints
        for s in STATES {
            assert!((1..=11).any(|n| {
                let name = state_name(n).to_ascii_lowercase();
                name == s || (s == "established" && name == "estab")
            }));
        }
    }
}
