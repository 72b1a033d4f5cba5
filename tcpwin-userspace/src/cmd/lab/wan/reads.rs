//! A transfer read four ways, as users read it: one snapshot (what `ss` does without `-i`: a
//! second reading of the sockets moving data a quarter second later) or an interval (`ss -i`),
//! both ends' namespaces together (one host, `--netns all`) or each end's alone (two hosts);
//! and what each way is expected to name: an end alone can only tell what it sees.
use tcpwin_model::{
    judge::Judge,
    rows::{Read, ReadVerdict, View},
    verdict::{Class, Limit, Verdict},
};

use crate::gather::snapshot::Seen;

/// The transfer's two ends in a reading: (receiving, sending) socket indexes, by the joined
/// judgement of `before` -> `after`: the busiest sender of the port and its peer (a real
/// program's control connection moves almost nothing).
pub(super) fn ends(
    before: &[Seen],
    after: &[Seen],
    target: Option<u64>,
) -> Option<(usize, Option<usize>)> {
    let verdicts = judged(before, after, target);
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
    let receiver = verdicts[sender]
        .peer
        .as_ref()
        .and_then(|p| after.iter().position(|s| &s.facts.id == p));
    Some(match receiver {
        Some(r) => (r, Some(sender)),
        None => (sender, None),
    })
}

/// Every socket of `after` judged over the interval since `before`.
pub(super) fn judged(before: &[Seen], after: &[Seen], target: Option<u64>) -> Vec<Verdict> {
    let mut judge = Judge::new(target);
    judge.judge(before.iter().map(|s| (&s.facts, &*s.host)));
    judge.judge(after.iter().map(|s| (&s.facts, &*s.host)))
}

/// The readings of one namespace only (an end read alone, as on its own host).
fn only(readings: &[Seen], ns: &str) -> Vec<Seen> {
    readings
        .iter()
        .filter(|s| s.line_ns == ns)
        .map(|s| Seen {
            line_ns: s.line_ns.clone(),
            facts: s.facts.clone(),
            host: s.host.clone(),
        })
        .collect()
}

/// The verdict of the socket with `cookie` in a judgement of `before` -> `after`.
fn verdict_of(
    before: &[Seen],
    after: &[Seen],
    target: Option<u64>,
    cookie: Option<u64>,
) -> Option<Limit> {
    let i = after.iter().position(|s| s.facts.id.cookie == cookie)?;
    Some(judged(before, after, target)[i].limit)
}

/// What an end read alone may name where both ends together name `expected`: a receiver cannot
/// see the sender's buffer, application or congestion window (the window is not the limit, it
/// says, and the sender's side decides); a sender sees a receiver's cap as the peer's window.
pub(super) fn accepted(expected: (Limit, Option<Limit>), view: View, end: &str) -> Vec<Limit> {
    let both: Vec<Limit> = [Some(expected.0), expected.1]
        .into_iter()
        .flatten()
        .collect();
    if view == View::Both {
        return both;
    }
    let sender_side = |l: Limit| matches!(l, Limit::Sndbuf | Limit::Congestion | Limit::AppLimited);
    match end {
        "receiver" if both.iter().any(|l| sender_side(*l)) => vec![Limit::NotWindowLimited],
        "sender" if both.iter().any(|l| l.class() == Class::ReceiverCap) => vec![Limit::PeerWindow],
        "sender" if both.contains(&Limit::AppNotReading) => {
            vec![Limit::AppNotReading, Limit::PeerWindow]
        }
        _ => both,
    }
}

/// The transfer read four ways: each end's verdict in each.
pub(super) fn reads(
    readings: &[Vec<Seen>; 3],
    (rx, tx): (usize, Option<usize>),
    expected: (Limit, Option<Limit>),
    target: Option<u64>,
) -> Vec<ReadVerdict> {
    let [first, soon, last] = readings;
    let mut out = Vec::new();
    let ends: Vec<(&str, usize)> = [("receiver", Some(rx)), ("sender", tx)]
        .into_iter()
        .filter_map(|(e, i)| Some((e, i?)))
        .collect();
    for (read, after) in [(Read::Snapshot, soon), (Read::Interval, last)] {
        for (end, i) in &ends {
            let cookie = last[*i].facts.id.cookie;
            let ns = &last[*i].line_ns;
            for view in [View::Both, View::Alone] {
                let got = match view {
                    View::Both => verdict_of(first, after, target, cookie),
                    View::Alone => verdict_of(&only(first, ns), &only(after, ns), target, cookie),
                };
                out.push(ReadVerdict {
                    read,
                    view,
                    end: end.to_string(),
                    verdict: got,
                    accepted: got.is_some_and(|g| accepted(expected, view, end).contains(&g)),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_alone_names_what_it_can_see() {
        use Limit::*;
        let e = (Sndbuf, None);
        assert_eq!(accepted(e, View::Both, "receiver"), vec![Sndbuf]);
        assert_eq!(accepted(e, View::Alone, "receiver"), vec![NotWindowLimited]);
        assert_eq!(accepted(e, View::Alone, "sender"), vec![Sndbuf]);
        let e = (AutotuneMax, None);
        assert_eq!(accepted(e, View::Alone, "sender"), vec![PeerWindow]);
        assert_eq!(accepted(e, View::Alone, "receiver"), vec![AutotuneMax]);
        let e = (NotWindowLimited, Some(PathQueue));
        assert_eq!(
            accepted(e, View::Alone, "sender"),
            vec![NotWindowLimited, PathQueue]
        );
    }
}
