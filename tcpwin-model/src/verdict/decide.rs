//! The judge on top of the families: one connection's verdict, asked in order (an application
//! not reading, nothing moving, the sender's buffer, whether the window binds, then which cap
//! makes it what it is, or what holds the flow instead). It imports every family; none imports it.
use super::{
    apps,
    caps::{self, potential_caps},
    ceilings,
    end::End,
    fix::{pod_form, Fix, FixEnd},
    limit::{Class, Limit},
    path, scale, selfcheck, sender,
    sizing::{ceiling_bps, fmt_rtt, payload_rate, Sizing},
    types::{Basis, Input, Side, Verdict, WINDOW_LIMITED_SHARE},
};
use crate::facts::{SockFacts, IDLE_AFTER_US};

/// A flow at this share of window / RTT runs its window full.
const FULL_WINDOW_SHARE: f64 = 0.9;
/// Without a queue on the path, a sender rwnd-limited this share of its busy time or more is
/// window-bound (the kernel's chrono as support, never alone behind a queue): bbr paces and shows
/// 30-40 % where the window binds, `iperf3 -w 8K` on veth 29-40 %, a flow the window does not
/// bind ~0.
const RWND_SUPPORT_SHARE: f64 = 0.2;
/// A rate past this share of what a window lets through over the RTT was not held by it. An
/// advertised window moves between ACKs, and a rate over an interval follows its average, not
/// the value two readings caught (nginx taking an upload into a locked 64 KiB buffer advertised
/// 54 KB at both readings and 70 KB between them: 25.1 Mbit/s, 1.18x what 54 KB lets through).
const ADVERTISED_OVERRUN: f64 = 1.3;
/// Without a queue, a sender rwnd-limited this share of its busy time or more is window-bound
/// whatever its congestion window reads at that moment.
const RWND_MOST_SHARE: f64 = 0.5;
/// Busy time under this (µs) between two readings is one snapshot's: too short for the kernel's
/// rwnd-limited count of a paced sender to say how often the window stops it.
const SHORT_INTERVAL_BUSY_US: u64 = 1_000_000;

/// Decides one socket's verdict: with its peer, the connection's.
pub fn verdict(i: &Input) -> Verdict {
    let mut me = End {
        now: i.now,
        before: i.before,
        host: i.host,
    };
    let mut peer = i.peer;
    // an interval that moved nothing while the socket's own clocks say data moved within the
    // last second (a sender in bursts, nginx `limit_rate`, caught between two in a quarter
    // second) says nothing about the flow: it is judged over the connection's life
    let recent = |f: &SockFacts| {
        [f.since_data_sent_us, f.since_data_recv_us]
            .into_iter()
            .flatten()
            .any(|us| us < IDLE_AFTER_US)
    };
    // (a receiver read alone has no rate over its life: its quiet interval is judged as such,
    // see `idle`)
    let receiver_alone =
        peer.is_none() && i.now.bytes_received.unwrap_or(0) > i.now.bytes_acked.unwrap_or(0);
    // (so is a peer's interval that moved nothing while this end's did: its readings, taken
    // milliseconds after this end's by its own exporter, fell in the sender's pause)
    let paused = |e: &End| e.dt_s().is_some() && e.moved() == (0, 0) && recent(e.now);
    let peer_paused = peer
        .as_ref()
        .is_some_and(|p| paused(p) && me.moved() != (0, 0));
    if (paused(&me) && !receiver_alone) || peer_paused {
        me.before = None;
        if let Some(p) = peer.as_mut() {
            p.before = None;
        }
    }
    let basis = if me.dt_s().is_some() {
        Basis::Interval
    } else {
        Basis::Life
    };
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
    owners(&mut v, sender, receiver);
    in_pods(&mut v, [sender, receiver]);
    v.ceilings = ceilings::ceilings(&v, sender, receiver);
    v.next = Some(ceilings::next_words(&v)).filter(|n| !n.is_empty());
    refuse_contradictions(&mut v, sender, receiver, i);
    v
}

/// Each fix says the end whose setting it changes, where its family did not: the sender's for a
/// limit of the sending host, the receiver's for the rest (its caps, its application); and an
/// end read on another host (a peer's exporter) has its fixes run there.
fn owners(v: &mut Verdict, sender: Option<End>, receiver: Option<End>) {
    let end_of = |l: Limit| match l.class() {
        Class::Sender => FixEnd::Sender,
        _ => FixEnd::Receiver,
    };
    let remote = |e: FixEnd| {
        match e {
            FixEnd::Sender => sender,
            FixEnd::Receiver => receiver,
        }
        .and_then(|x| x.host.remote)
    };
    let own = |f: &mut Fix, l: Limit| {
        let end = *f.end.get_or_insert(end_of(l));
        if f.on_peer.is_none() {
            f.on_peer = remote(end);
        }
    };
    each_fix(v, own);
}

/// Every fix the verdict prints, with the limit it lifts: the verdict's own, then its factors'.
fn each_fix(v: &mut Verdict, mut f: impl FnMut(&mut Fix, Limit)) {
    let factors = v.factors.iter_mut().map(|x| (x.fix.as_mut(), x.limit));
    for (fix, limit) in std::iter::once((v.fix.as_mut(), v.limit)).chain(factors) {
        if let Some(fix) = fix {
            f(fix, limit);
        }
    }
}

/// Fixes whose commands run in a Kubernetes pod's namespace (an end read there, its owner in a
/// pod) also say the pod spec's form of them.
fn in_pods(v: &mut Verdict, ends: [Option<End>; 2]) {
    let pods: Vec<&str> = ends
        .iter()
        .flatten()
        .filter(|e| e.now.workload.as_ref().is_some_and(|w| w.pod_uid.is_some()))
        .filter_map(|e| e.host.run_in.as_deref())
        .collect();
    if pods.is_empty() {
        return;
    }
    each_fix(v, |f, _| {
        let mine: Vec<String> = f
            .commands
            .iter()
            .filter(|c| pods.iter().any(|p| c.starts_with(&format!("{p} "))))
            .cloned()
            .collect();
        f.pod = pod_form(&mine);
    });
}

/// The judge's own check over the verdict it gives: a fix whose why or facts disagree with it is
/// dropped (the limit stays: the facts that named it stand) and the contradiction said.
pub(super) fn refuse_contradictions(
    v: &mut Verdict,
    sender: Option<End>,
    receiver: Option<End>,
    i: &Input,
) {
    let found = selfcheck::contradictions(
        v,
        &selfcheck::Reading {
            receiver: receiver.map(|r| (r.now, r.host)),
            sender: sender.map(|s| (s.now, s.host)),
            host: i.host,
        },
    );
    if found.is_empty() {
        return;
    }
    let rules: Vec<&str> = found.iter().map(|c| c.rule).collect();
    v.fix = None;
    for f in &mut v.factors {
        f.fix = None;
    }
    v.suggested = Some(format!(
        "no fix printed: the judge's own check found its why, fix and facts disagree ({}); report it with `tcpwin-trace ss -e --json`",
        rules.join(", ")
    ));
    v.refused = found.iter().map(|c| c.to_string()).collect();
}

/// The connection's judgement, into `v` (whose side, basis and peer are set): an application
/// not reading, nothing moving, the sender's buffer, whether the window binds, and then which cap
/// makes it what it is, or what holds the flow instead (the path's queue, the sending
/// application, the congestion window).
fn judge_connection(v: &mut Verdict, sender: Option<End>, receiver: Option<End>, i: &Input) {
    let rate = match (sender, receiver) {
        (Some(s), _) => s.send_rate(),
        (None, Some(r)) => r.recv_rate(),
        _ => None,
    };
    v.rate_bps = rate;
    // the RTTs: the sender's (from ACKs) when it is visible, else the receiver's own estimate,
    // against the best base RTT it has (taken first: every verdict of a moving connection ranks
    // its ceilings at the base RTT, the application's own included)
    let rtts = path::rtts(v, sender, receiver, i.min_rcv_rtt_us);
    // 1. an application not reading stalls the connection at any rate
    if apps::zero_window(v, sender, receiver) {
        reader_caps(v, receiver, sender, i.target_bps);
        return;
    }
    // 2. nothing moves: idle, whatever a window would allow
    if idle(v, sender, receiver) {
        return;
    }
    let Some((rtt, base)) = rtts else {
        return;
    };
    if let Some(s) = sender {
        v.rwnd_limited_share = s.chrono_share(|f| f.rwnd_limited_us);
    }
    if let Some(r) = receiver {
        v.unread = r.now.unread.map(u64::from);
    }
    // the window that could bind: the receiver's largest, or the one the sender sees
    let cap_window = receiver.and_then(scale::receiver_window);
    let Some(window) = window_that_could_bind(v, sender, cap_window, (rtt, base)) else {
        return;
    };
    let sizing = sizing(v, sender, receiver, base, i.target_bps);
    let Some(rate) = rate else {
        // one reading of a receiver alone: no rate to hold against the window
        no_rate(v, receiver, window, i.target_bps);
        return;
    };
    let queued = path::queued(&path::QueueEvidence {
        sender,
        receiver,
        rate,
        window,
        rtt,
        base,
    });
    // 1b. a backlog the application does not drain keeps the advertised window small
    if receiver.is_some_and(|r| apps::backlog_binds(v, r, window, Some(rate), (base, rtt))) {
        reader_caps(v, receiver, sender, i.target_bps);
        return;
    }
    let f = Flow {
        sender,
        receiver,
        rate,
        rtt,
        base,
        queued,
        window: advertised_window(v, sender, receiver, cap_window, window, rate, (rtt, base)),
        target: i.target_bps,
    };
    // 2b. the sending end holds the flow: its buffer, or its peer's reader
    if sending_end_holds(v, f, &sizing) {
        return;
    }
    // 3. does the window bind?
    let binds_at = if queued { base } else { rtt };
    let binds = window_binds(v, f, binds_at);
    v.window_limited = Some(binds);
    if !binds {
        path::window_unbound(
            v,
            path::Unbound {
                sender,
                receiver,
                rate,
                window: f.window,
                rtt,
                base,
                queued,
                binds_at,
                target: i.target_bps,
            },
        );
        return;
    }
    // 4. the window binds: which cap makes it what it is
    match receiver {
        Some(r) if cap_window.is_some() => caps::caps(v, r, sender, Some(f.window), i.target_bps),
        _ => {
            let s = sender.expect("a window without a receiver comes from the sender");
            if s.now.wscale_ok == Some(false) && f.window <= 65535 {
                sender::wscale_off(v, s, f.window, binds_at, &sizing);
            } else {
                sender::peer_window(v, s, f.window, binds_at, &sizing);
            }
        }
    }
}

/// A moving connection as the later steps judge it: its ends, its rate, the RTT and the base
/// RTT, whether the path queues, the window that could bind and the rate asked (`--target`).
#[derive(Clone, Copy)]
struct Flow<'a> {
    sender: Option<End<'a>>,
    receiver: Option<End<'a>>,
    rate: u64,
    rtt: u32,
    base: u32,
    queued: bool,
    window: u64,
    target: Option<u64>,
}

/// The window that could bind (the receiver's largest, `cap_window`, or the one the sender
/// sees) into `v` with its ceilings; None (and why, into `v`) where this source did not read it.
fn window_that_could_bind(
    v: &mut Verdict,
    sender: Option<End>,
    cap_window: Option<u64>,
    (rtt, base): (u32, u32),
) -> Option<u64> {
    let Some(window) = cap_window.or_else(|| sender.and_then(|s| s.now.snd_wnd.map(u64::from)))
    else {
        v.setting = Some(match sender {
            Some(_) => "snd_wnd not read by this source".into(),
            None => "window_clamp or wscale_ok not read by this source".into(),
        });
        return None;
    };
    v.window = Some(window);
    v.ceiling_bps = (window > 0).then(|| ceiling_bps(window, rtt));
    v.base_ceiling_bps = (window > 0).then(|| ceiling_bps(window, base));
    Some(window)
}

/// What a fix is sized for (the target, or each 100 Mbit/s, at the base RTT), with the target
/// and the BDP into `v`.
fn sizing(
    v: &mut Verdict,
    sender: Option<End>,
    receiver: Option<End>,
    base: u32,
    target: Option<u64>,
) -> Sizing {
    let sizing = Sizing {
        base_us: base,
        target,
    };
    v.target_bps = target;
    // the target as the payload a link at that rate carries, in this connection's segments
    let mss = sender
        .and_then(|s| s.now.mss_cache)
        .or_else(|| receiver.and_then(|r| r.now.advmss));
    v.target_payload_bps = target.map(|t| payload_rate(t, mss));
    v.bdp_bytes = Some(sizing.bdp());
    sizing
}

/// A receiver read alone that advertised less than its largest window at its readings with
/// little unread (no backlog of the reader's: that is asked before), the rate filling what it
/// advertised and not what the largest allows (nor more than the advertised one lets through:
/// then it was not the window the sender had): that is the window the sender had (the sender's
/// rwnd-limited time would say so, were it read), into `v` with its ceilings. Else `window`.
fn advertised_window(
    v: &mut Verdict,
    sender: Option<End>,
    receiver: Option<End>,
    cap_window: Option<u64>,
    window: u64,
    rate: u64,
    (rtt, base): (u32, u32),
) -> u64 {
    let fills = |w: u64, share: f64| rate as f64 >= share * ceiling_bps(w, rtt) as f64;
    match receiver
        .filter(|_| sender.is_none() && cap_window.is_some())
        .filter(|r| apps::little_unread(*r, window))
        .and_then(|r| scale::advertised_below(r, window))
    {
        Some(a)
            if fills(a, WINDOW_LIMITED_SHARE)
                && !fills(a, ADVERTISED_OVERRUN)
                && !fills(window, WINDOW_LIMITED_SHARE) =>
        {
            v.window = Some(a);
            v.ceiling_bps = Some(ceiling_bps(a, rtt));
            v.base_ceiling_bps = Some(ceiling_bps(a, base));
            a
        }
        _ => window,
    }
}

/// The sending end holds the flow, the verdict into `v`: its own buffer (not behind a queue:
/// Little's law fills any buffer there; but a queue of a quarter of the base RTT behind a full
/// buffer is the buffer's bursts), or a peer window that was mostly closed: the peer's reader (a
/// queue would hold a full window as long, but drain it at window / RTT: Little's law); with the
/// receiver in view too, when neither of its readings caught the backlog (a reader in bursts
/// just drained it: `curl --limit-rate`).
fn sending_end_holds(v: &mut Verdict, f: Flow, sizing: &Sizing) -> bool {
    let Some(s) = f.sender else {
        return false;
    };
    if sender::paced(v, s, f.rate, sizing) {
        return true;
    }
    if (!f.queued || sender::queue_of_the_buffer(s, f.rtt, f.base))
        && sender::sndbuf_binds(v, s, Some(f.rate), f.rtt, sizing)
    {
        return true;
    }
    if apps::peer_stalls(
        v,
        s,
        f.rate,
        f.window,
        (f.base, f.rtt),
        f.queued,
        f.receiver,
    ) {
        reader_caps(v, f.receiver, f.sender, f.target);
        return true;
    }
    false
}

/// Whether the window binds the flow, its ceiling taken at `binds_at` (the base RTT behind a
/// queue).
fn window_binds(v: &Verdict, f: Flow, binds_at: u32) -> bool {
    let (rate, window, sender) = (f.rate, f.window, f.sender);
    // on a path without a queue, a sender the kernel saw stopped by the peer's window a good
    // part of its busy time is window-bound even when it uses less of window / RTT (at RTTs of
    // µs the ACK clock leaves the window partly unused: iperf3 -w 8K on veth)
    // (most of its busy time: the window, even where the later reading caught a congestion
    // window cut by a recovery; the kernel's chrono counts a cwnd-bound sender busy, never
    // rwnd-limited, so the congestion window held it for less than the window did)
    // (or the window full at both readings, data waiting and the congestion window with room:
    // the kernel's own window test failing, which its rwnd-limited count misses under a pacer)
    let rwnd_stopped = !f.queued
        && (v.rwnd_limited_share.is_some_and(|x| {
            x >= RWND_MOST_SHARE
                || (x >= RWND_SUPPORT_SHARE && sender.is_some_and(|s| !sender::cwnd_held(s)))
        }) || sender.is_some_and(sender::window_full));
    // a window that allows the rate asked (`--target`) at the base RTT is not the limit, however
    // full it runs: lifting it would not raise the rate towards the target
    let allows_target = v
        .target_payload_bps
        .is_some_and(|t| ceiling_bps(window, f.base) >= t);
    // behind a queue a flow at window / RTT is ambiguous (a bottleneck at its rate, or a window
    // whose bursts queue): with `--target` it is not, a window too small for the target at the
    // base RTT that the flow runs full over the RTT it sees (or that stops the sender most of its
    // busy time, or a good part of it while the flow uses most of window / RTT: bbr paces, and
    // shows 27-35 % rwnd-limited where a slow reader's window holds it) holds it
    let stopped = |share: f64| v.rwnd_limited_share.is_some_and(|x| x >= share);
    // the kernel's count over one snapshot's quarter second holds a cycle or two of bbr's pacer:
    // there the connection's life counts as well (a reader at 20 Mbit/s behind bbr: 7-13 % of a
    // quarter second rwnd-limited, 25-27 % of the interval, 34-35 % of its life)
    let stopped_over_life = |share: f64| {
        sender.is_some_and(|s| {
            s.busy_between().is_some_and(|d| d < SHORT_INTERVAL_BUSY_US)
                && s.life_share(|f| f.rwnd_limited_us)
                    .is_some_and(|x| x >= share)
        })
    };
    let short_of_target = f.queued
        && f.target.is_some()
        && (rate as f64 >= FULL_WINDOW_SHARE * ceiling_bps(window, f.rtt) as f64
            || stopped(0.5)
            || ((stopped(RWND_SUPPORT_SHARE) || stopped_over_life(RWND_SUPPORT_SHARE))
                && rate as f64 >= WINDOW_LIMITED_SHARE * ceiling_bps(window, f.rtt) as f64
                && sender.is_some_and(|s| !sender::cwnd_held(s))));
    // the receiver alone (no account of who waited): its reader took the whole window in a round
    // trip, the flow at half of it or more (wget: its window grew to tcp_rmem max in the interval)
    let filled = v.rwnd_limited_share.is_none()
        && f.receiver.is_some_and(|r| r.reader_filled_window())
        && rate as f64 >= 0.5 * ceiling_bps(window, f.rtt) as f64;
    window > 0
        && !allows_target
        && (rate as f64 >= WINDOW_LIMITED_SHARE * ceiling_bps(window, binds_at) as f64
            || rwnd_stopped
            || short_of_target
            || filled)
}

/// Nothing moves: no data over the interval (or over the life so far), or the socket's own
/// clocks say nothing was sent or received for a second with nothing waiting. The verdict
/// into `v`, true when it is that: no window is judged, and there is no fix.
fn idle(v: &mut Verdict, sender: Option<End>, receiver: Option<End>) -> bool {
    let ends: Vec<End> = [sender, receiver].into_iter().flatten().collect();
    let quiet_now = !ends.is_empty() && ends.iter().all(|e| e.now.idle_now() == Some(true));
    if v.side != Side::Idle && !quiet_now {
        return false;
    }
    // a receiver alone that received nothing in the interval, with data within the last second,
    // nothing unread and its window open: the sender sends in bursts, or not at all for now; the
    // window is not what holds it
    if let (None, Some(r)) = (sender, receiver) {
        let recent = matches!(r.now.since_data_recv_us, Some(us) if us < IDLE_AFTER_US);
        // data unread over the quiet interval (data within the last second), or under a window
        // closed at its start and read since (the closed window says the sender waited on it,
        // however long ago the data came): the reader held the sender (`curl --limit-rate`)
        let unread = |f: &SockFacts| f.unread.filter(|u| *u > 0);
        let zero = r.before.is_some_and(|b| b.rcv_wnd == Some(0));
        let waited = match (unread(r.now), r.before.and_then(unread), zero) {
            (Some(n), Some(_), _) if recent => Some(n),
            (None, Some(n), true) => Some(n),
            _ => None,
        };
        if let Some(n) = waited.filter(|_| v.basis == Basis::Interval) {
            v.limit = Limit::AppNotReading;
            v.unread = Some(n.into());
            v.setting = Some(format!(
                "nothing arrived in the interval while {n} B received waited unread: the receiving application did not read them{}",
                apps::lowat_words(r.now)
            ));
            v.suggested = Some(apps::READ_FASTER.into());
            return true;
        }
        let open = r.now.rcv_wnd.is_some_and(|w| w > 0) && r.now.unread == Some(0);
        if !quiet_now && recent && open && v.basis == Basis::Interval {
            v.limit = Limit::NotWindowLimited;
            v.setting = Some(format!(
                "nothing arrived in the interval, the last data {} ago, with the window open ({} B) and nothing unread: the sender sends in bursts or has paused; what holds it is the sender's to tell: run `tcpwin-trace ss` on the sending host",
                fmt_rtt(r.now.since_data_recv_us.unwrap_or(0)),
                r.now.rcv_wnd.unwrap_or(0)
            ));
            v.suggested = Some(
                "look elsewhere: the sending application, congestion or loss on the path".into(),
            );
            return true;
        }
    }
    v.limit = Limit::Idle;
    v.setting = Some(if quiet_now {
        let since = ends
            .iter()
            .filter_map(|e| Some(e.now.since_data_recv_us?.min(e.now.since_data_sent_us?)));
        let since = fmt_rtt(since.min().unwrap_or(0));
        format!("no data sent or received for {since} and none waits")
    } else if v.basis == Basis::Interval {
        "no data moved in the interval and none waits".into()
    } else {
        "no data moved over the connection's life yet".into()
    });
    true
}

/// One reading of a receiver alone (no interval): no rate, so no limit can be named; the caps
/// its window would meet are factors, with their gain, and the verdict says how to get one.
fn no_rate(v: &mut Verdict, receiver: Option<End>, window: u64, target: Option<u64>) {
    v.limit = Limit::Unknown;
    v.setting = Some(
        "one reading of a receiver has no rate to hold against its window: read it twice (`ss -i 1000`; `ss` alone takes a second reading of sockets moving data)".into(),
    );
    if let Some(r) = receiver {
        potential_caps(
            v,
            r,
            None,
            window,
            target,
            "a potential gain, not the limit: it binds only if the window does",
        );
    }
}

/// A reader that falls behind: the receiver's caps as factors. The sockets cannot tell a
/// reader slower on average than the path (a larger buffer only delays its stall) from one late
/// in bursts (off the CPU, reading in batches), which a small buffer stalls at every burst and
/// a larger one carries through: both are said.
fn reader_caps(v: &mut Verdict, receiver: Option<End>, sender: Option<End>, target: Option<u64>) {
    let Some((r, window)) =
        receiver.and_then(|r| scale::receiver_window(r).filter(|w| *w > 0).map(|w| (r, w)))
    else {
        return;
    };
    potential_caps(
        v,
        r,
        sender,
        window,
        target,
        "binds too: a reader late in bursts (off the CPU, reading in batches) gains from it now, one slower on average only once it keeps up",
    );
}
