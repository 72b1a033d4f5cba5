//! A transfer read four ways, as users read it: one snapshot (what `ss` does without `-i`: a
//! second reading of the sockets moving data a quarter second later) or an interval (`ss -i`),
//! both ends' namespaces together (one host, `--netns all`) or each end's alone (two hosts);
//! and what each way is expected to name: an end alone can only tell what it sees.
use crate::rows::{Read, ReadVerdict, View};
use tcpwin_model::{
    judge::Judge,
    verdict::{Class, Limit, Verdict},
};

use super::run::PeerReading;
use tcpwin_model::facts::Seen;

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

/// Where the transfer was over at a reading: its sender's FIN acknowledged (`FIN-WAIT-2`,
/// `TIME-WAIT`, closed), as the sending end was read itself or as its exporter answered the
/// receiver. A sender whose last byte and FIN were acknowledged has nothing queued and reads
/// `app-limited`, whatever held it before; a sender that closed with data still queued
/// (`FIN-WAIT-1`: a server that wrote a file and closed) still moves it, and a receiver that got
/// the FIN may still hold a backlog: neither is over. `rx`, `tx`: the ends' indexes in the last
/// reading. Said as the reading and how the sender was read.
pub(super) fn ended(
    readings: &[Vec<Seen>; 3],
    peers: Option<&[PeerReading; 3]>,
    (rx, tx): (usize, Option<usize>),
) -> Option<String> {
    let last = &readings[2];
    let over = |f: &tcpwin_model::facts::SockFacts| matches!(f.state, 5..=7);
    let said = |k: usize, how: &str, f: &tcpwin_model::facts::SockFacts| {
        format!(
            "at reading {} of 3 the sender, {how}, was {}: the transfer was over",
            k + 1,
            tcpwin_model::facts::state_name(f.state)
        )
    };
    for (k, reading) in readings.iter().enumerate() {
        let own = tx.and_then(|t| {
            reading
                .iter()
                .find(|r| r.facts.id.cookie == last[t].facts.id.cookie)
        });
        if let Some(o) = own.filter(|o| over(&o.facts)) {
            return Some(said(k, "read on its host", &o.facts));
        }
        // the receiver's peer: the sending end as its exporter answered
        let theirs = peers
            .into_iter()
            .flat_map(|p| p[k].iter().flat_map(|(_, v)| v))
            .find(|p| p.facts.id.tuple() == last[rx].facts.id.peer_tuple());
        if let Some(p) = theirs.filter(|p| over(&p.facts)) {
            return Some(said(k, "as its exporter answered the receiver", &p.facts));
        }
    }
    None
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
        .cloned()
        .collect()
}

/// The receiving socket `rx` of `after` judged alone over the interval since `before`, as on its
/// own host (its namespace's readings only).
pub(super) fn alone(
    before: &[Seen],
    after: &[Seen],
    rx: usize,
    target: Option<u64>,
) -> Option<Verdict> {
    let (ns, cookie) = (&after[rx].line_ns, after[rx].facts.id.cookie);
    verdict_of(&only(before, ns), &only(after, ns), target, cookie)
}

/// The verdict of the socket with `cookie` in a judgement of `before` -> `after`.
fn verdict_of(
    before: &[Seen],
    after: &[Seen],
    target: Option<u64>,
    cookie: Option<u64>,
) -> Option<Verdict> {
    let i = after.iter().position(|s| s.facts.id.cookie == cookie)?;
    Some(judged(before, after, target).swap_remove(i))
}

/// What an end read alone may name where both ends together name `expected`: a receiver cannot
/// see the sender's buffer, application or congestion window (the window is not the limit, it
/// says, and the sender's side decides), nor a queue its window does not fill; a sender sees a
/// receiver's cap as the peer's window, and window scaling not negotiated as it is. On a µs path
/// (`us_path`: veth, no delay line) a receiver alone cannot tell a small window from a slow
/// sender either: window / RTT there is many times what any window-bound flow reaches (the ACK
/// turnaround, not the RTT, paces it), and only the sender's rwnd-limited time tells; it says
/// `not-window-limited` and sends the user to the sending host, which names the peer's window.
/// A slow reader read alone is named from its backlog, snapshot or interval.
pub(super) fn accepted(
    expected: (Limit, Option<Limit>),
    view: View,
    end: &str,
    us_path: bool,
) -> Vec<Limit> {
    let both: Vec<Limit> = [Some(expected.0), expected.1]
        .into_iter()
        .flatten()
        .collect();
    if view == View::Both {
        return both;
    }
    let sender_side = |l: Limit| {
        matches!(
            l,
            Limit::Sndbuf | Limit::Congestion | Limit::AppLimited | Limit::Pacing
        )
    };
    let receiver_cap = both.iter().any(|l| l.class() == Class::ReceiverCap);
    let or_not_window = || [both.clone(), vec![Limit::NotWindowLimited]].concat();
    match end {
        "receiver" if both.iter().any(|l| sender_side(*l)) => vec![Limit::NotWindowLimited],
        "receiver"
            if both.contains(&Limit::PathQueue) && !both.contains(&Limit::NotWindowLimited) =>
        {
            or_not_window()
        }
        "receiver" if us_path && receiver_cap => or_not_window(),
        // scaling not negotiated is known to the sender too (its own handshake): it says so,
        // with the fix on the host that refused it
        "sender" if both.contains(&Limit::WscaleOff) => vec![Limit::WscaleOff],
        "sender" if receiver_cap => vec![Limit::PeerWindow],
        "sender" if both.contains(&Limit::AppNotReading) => {
            vec![Limit::AppNotReading, Limit::PeerWindow]
        }
        _ => both,
    }
}

/// The peer's window truly held a sender between two of its readings, by the kernel's account
/// and the path's rate, whatever the row shows over the transfer: the sender counted
/// rwnd-limited 90 % of its busy time or more, and the window it was offered at the later
/// reading lets through less than the path's rate over the base RTT (wget at 2 s, its
/// receiver's autotuning not yet started: 53 KB, 21 of 100 Mbit/s, for that quarter second; it
/// grows past the path's need a second later). A sender alone that names the peer's window
/// there says what held it.
fn peer_window_held(
    before: &tcpwin_model::facts::SockFacts,
    after: &tcpwin_model::facts::SockFacts,
    path_bps: Option<u64>,
) -> bool {
    let d = |f: fn(&tcpwin_model::facts::SockFacts) -> Option<u64>| {
        Some(f(after)?.saturating_sub(f(before)?))
    };
    let (Some(busy), Some(rwnd)) = (d(|f| f.busy_us), d(|f| f.rwnd_limited_us)) else {
        return false;
    };
    let (Some(wnd), Some(base), Some(path)) = (after.snd_wnd, after.min_rtt_us, path_bps) else {
        return false;
    };
    busy > 0
        && rwnd as f64 >= 0.9 * busy as f64
        && (wnd as f64 * 8.0 * 1e6 / base.max(1) as f64) < path as f64
}

/// A recorded row's ways of reading judged again by this build's judge, from the readings the
/// row kept (each end's three, with its namespace's limits, and its peer's as the peer's
/// exporter answered): None where the row kept fewer than three readings of its receiver.
pub(super) fn rejudge(row: &crate::rows::WanRow) -> Option<Vec<ReadVerdict>> {
    let seen = |e: &crate::rows::RecordedEnd, ns: &str, k: usize| Seen {
        line_ns: ns.to_string(),
        facts: e.readings[k].clone(),
        host: std::sync::Arc::new(e.host.clone()),
    };
    let complete = |e: &&crate::rows::RecordedEnd| e.readings.len() == 3;
    let rx = row
        .recorded
        .iter()
        .filter(complete)
        .find(|e| e.end == "receiver")?;
    let tx = row
        .recorded
        .iter()
        .filter(complete)
        .find(|e| e.end == "sender");
    let ends: Vec<&crate::rows::RecordedEnd> = [Some(rx), tx].into_iter().flatten().collect();
    let readings: [Vec<Seen>; 3] =
        std::array::from_fn(|k| ends.iter().map(|e| seen(e, &e.end, k)).collect());
    // the peer's answers, keyed by the end that asked (its namespace stands as its name here)
    let other = |end: &str| {
        if end == "receiver" {
            "sender"
        } else {
            "receiver"
        }
    };
    let peers: Option<[PeerReading; 3]> = (!row.peer_recorded.is_empty()
        && row.peer_recorded.iter().all(|p| p.readings.len() == 3))
    .then(|| {
        std::array::from_fn(|k| {
            row.peer_recorded
                .iter()
                .map(|p| (p.end.clone(), vec![seen(p, other(&p.end), k)]))
                .collect()
        })
    });
    Some(reads(
        &readings,
        peers.as_ref(),
        (0, tx.map(|_| 1)),
        (row.expected, row.also_expected),
        row.rate_limit_bps,
        row.rate_limit_bps.is_none(),
    ))
}

/// The transfer read four ways (five with each end's peer over the network): each end's
/// verdict in each. The fifth is held to what the both-ends reading is held to: the two ends
/// are judged as one connection there too, from readings taken milliseconds apart instead of
/// together (on a row at the edge between two verdicts the scenario accepts, such as
/// `not-window-limited` and `path-queue` under 1 % loss, two readings of the same transfer
/// fall on either side, as the both-ends reading itself does between runs).
pub(super) fn reads(
    readings: &[Vec<Seen>; 3],
    peers: Option<&[PeerReading; 3]>,
    (rx, tx): (usize, Option<usize>),
    expected: (Limit, Option<Limit>),
    target: Option<u64>,
    us_path: bool,
) -> Vec<ReadVerdict> {
    let [first, soon, last] = readings;
    let mut out = Vec::new();
    let ends: Vec<(&str, usize)> = [("receiver", Some(rx)), ("sender", tx)]
        .into_iter()
        .filter_map(|(e, i)| Some((e, i?)))
        .collect();
    // an end's own readings with its peer's from the peer's exporter, at reading k
    let with_peer = |k: usize, r: &[Seen], ns: &str| -> Option<Vec<Seen>> {
        let theirs = peers?[k].iter().find(|(n, _)| n == ns)?;
        Some(
            only(r, ns)
                .into_iter()
                .chain(theirs.1.iter().cloned())
                .collect(),
        )
    };
    for (read, k, after) in [(Read::Snapshot, 1, soon), (Read::Interval, 2, last)] {
        for (end, i) in &ends {
            let cookie = last[*i].facts.id.cookie;
            let ns = &last[*i].line_ns;
            let views: &[View] = if peers.is_some() {
                &[View::Both, View::Alone, View::Peer]
            } else {
                &[View::Both, View::Alone]
            };
            for &view in views {
                let got = match view {
                    View::Both => verdict_of(first, after, target, cookie),
                    View::Alone => verdict_of(&only(first, ns), &only(after, ns), target, cookie),
                    View::Peer => with_peer(0, first, ns)
                        .zip(with_peer(k, after, ns))
                        .and_then(|(b, a)| verdict_of(&b, &a, target, cookie)),
                };
                let limit = got.as_ref().map(|v| v.limit);
                let rule = if view == View::Peer { View::Both } else { view };
                let peer_held = view == View::Alone
                    && *end == "sender"
                    && peer_window_held(&first[*i].facts, &after[*i].facts, target);
                out.push(ReadVerdict {
                    read,
                    view,
                    end: end.to_string(),
                    verdict: limit,
                    accepted: limit.is_some_and(|g| {
                        accepted(expected, rule, end, us_path).contains(&g)
                            || (peer_held
                                && g == Limit::PeerWindow
                                && expected.0.class() == Class::Path)
                    }),
                    refused: got.map(|v| v.refused).unwrap_or_default(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// wget's sender at 2 s (run 2 of the proof at 8a74fd4, reno): 260 of 260 ms rwnd-limited,
    /// offered 53248 B over a 20.1 ms base on a 100 Mbit/s path (21 Mbit/s): held by the peer's
    /// window. Offered 5 MB, or rwnd-limited a tenth of the time, or no path rate: not.
    #[test]
    fn a_sender_held_by_its_peers_window_in_a_reading() {
        use tcpwin_model::facts::SockFacts;
        let before = SockFacts {
            busy_us: Some(1_944_000),
            rwnd_limited_us: Some(1_884_000),
            ..SockFacts::default()
        };
        let after = SockFacts {
            busy_us: Some(2_204_000),
            rwnd_limited_us: Some(2_144_000),
            snd_wnd: Some(53_248),
            min_rtt_us: Some(20_100),
            ..SockFacts::default()
        };
        let path = Some(100_000_000);
        assert!(peer_window_held(&before, &after, path));
        let wide = SockFacts {
            snd_wnd: Some(5_181_440),
            ..after.clone()
        };
        assert!(!peer_window_held(&before, &wide, path));
        let seldom = SockFacts {
            rwnd_limited_us: Some(1_910_000),
            ..after.clone()
        };
        assert!(!peer_window_held(&before, &seldom, path));
        assert!(!peer_window_held(&before, &after, None));
    }

    #[test]
    fn an_end_alone_names_what_it_can_see() {
        use Limit::*;
        let e = (Sndbuf, None);
        assert_eq!(accepted(e, View::Both, "receiver", false), vec![Sndbuf]);
        assert_eq!(
            accepted(e, View::Alone, "receiver", false),
            vec![NotWindowLimited]
        );
        assert_eq!(accepted(e, View::Alone, "sender", false), vec![Sndbuf]);
        let e = (AutotuneMax, None);
        assert_eq!(accepted(e, View::Alone, "sender", false), vec![PeerWindow]);
        assert_eq!(
            accepted(e, View::Alone, "receiver", false),
            vec![AutotuneMax]
        );
        // scaling not negotiated: the sender's own handshake says so
        let e = (WscaleOff, None);
        assert_eq!(accepted(e, View::Alone, "sender", false), vec![WscaleOff]);
        let e = (NotWindowLimited, Some(PathQueue));
        assert_eq!(
            accepted(e, View::Alone, "sender", false),
            vec![NotWindowLimited, PathQueue]
        );
        // a queue the receiver's window does not fill, alone: the window is not the limit
        let e = (PathQueue, None);
        assert_eq!(
            accepted(e, View::Alone, "receiver", false),
            vec![PathQueue, NotWindowLimited]
        );
        assert_eq!(accepted(e, View::Alone, "sender", false), vec![PathQueue]);
        // a µs path: a receiver alone cannot tell its small window from a slow sender
        let e = (RcvbufLocked, None);
        assert_eq!(
            accepted(e, View::Alone, "receiver", true),
            vec![RcvbufLocked, NotWindowLimited]
        );
        assert_eq!(
            accepted(e, View::Alone, "receiver", false),
            vec![RcvbufLocked]
        );
        assert_eq!(
            accepted(e, View::Both, "receiver", true),
            vec![RcvbufLocked]
        );
        // a slow reader, read alone: its backlog at both readings tells, snapshot or interval
        let e = (AppNotReading, None);
        assert_eq!(
            accepted(e, View::Alone, "receiver", false),
            vec![AppNotReading]
        );
        assert_eq!(
            accepted(e, View::Alone, "sender", false),
            vec![AppNotReading, PeerWindow]
        );
    }

    /// The miss of the proof at dc5525f (own endpoints, sndbuf, reno, run 4): the receiver's
    /// peer exporter read the sender 5 ms after its last byte and FIN were acknowledged
    /// (`FIN-WAIT-2`): that reading is of a transfer that was over. A sender that closed with data
    /// still queued (`FIN-WAIT-1`) and a receiver that got the FIN (`CLOSE-WAIT`) are not over.
    #[test]
    fn a_reading_after_the_senders_fin_was_acknowledged_is_of_a_transfer_over() {
        use std::net::{IpAddr, Ipv4Addr};
        use tcpwin_model::{facts::SockFacts, id::SocketId};
        let (a, b) = (
            Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
            Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2))),
        );
        let end = |ns: &str, cookie, (laddr, lport, raddr, rport), state| Seen {
            line_ns: ns.into(),
            facts: SockFacts {
                id: SocketId {
                    cookie: Some(cookie),
                    laddr,
                    lport,
                    raddr,
                    rport,
                    ..Default::default()
                },
                state,
                ..Default::default()
            },
            host: Default::default(),
        };
        let rx = |state| end("b", 1, (b, 5403, a, 40000), state);
        let tx = |state| end("a", 2, (a, 40000, b, 5403), state);
        let both = |r, t| vec![rx(r), tx(t)];
        let running: [Vec<Seen>; 3] = std::array::from_fn(|_| both(1, 1));
        assert_eq!(ended(&running, None, (0, Some(1))), None);
        // the sender read on its host after its FIN was acknowledged
        let mut over = running.clone();
        over[2] = both(8, 5);
        let why = ended(&over, None, (0, Some(1))).expect("over");
        assert!(
            why.contains("reading 3 of 3") && why.contains("FIN-WAIT-2"),
            "{why}"
        );
        // still sending what it queued before it closed; a receiver holding the FIN
        over[2] = both(8, 4);
        assert_eq!(ended(&over, None, (0, Some(1))), None);
        // the sender as its exporter answered the receiver (its id as the receiver's reversed)
        let peer = |state| -> PeerReading {
            vec![
                (
                    "b".into(),
                    vec![end("peer:a", 9, (a, 40000, b, 5403), state)],
                ),
                ("a".into(), vec![end("peer:b", 8, (b, 5403, a, 40000), 1)]),
            ]
        };
        let peers: [PeerReading; 3] = [peer(1), peer(1), peer(5)];
        let why = ended(&running, Some(&peers), (0, Some(1))).expect("over");
        assert!(why.contains("exporter answered the receiver"), "{why}");
        let peers: [PeerReading; 3] = [peer(1), peer(1), peer(4)];
        assert_eq!(ended(&running, Some(&peers), (0, Some(1))), None);
        // the receiver read alone (no sender found): its peer still tells
        let alone: [Vec<Seen>; 3] = std::array::from_fn(|_| vec![rx(1)]);
        let peers: [PeerReading; 3] = [peer(1), peer(6), peer(6)];
        let why = ended(&alone, Some(&peers), (0, None)).expect("over");
        assert!(
            why.contains("reading 2 of 3") && why.contains("TIME-WAIT"),
            "{why}"
        );
    }
}
