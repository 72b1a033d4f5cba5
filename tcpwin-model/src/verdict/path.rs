//! The path: which RTT a connection is judged against (the sender's from ACKs, or a receiver's
//! own estimate, each against the best base RTT known), whether the path holds a queue, and the
//! verdicts where the window does not bind (`path-queue`, `not-window-limited`).
use super::{
    caps::potential_caps,
    end::End,
    limit::Limit,
    sender::{self, cwnd_bound},
    sizing::{ceiling_bps, fmt_rate, fmt_rtt, QUEUE_MIN_US},
    types::{Verdict, WINDOW_LIMITED_SHARE},
};

/// A queue at the bottleneck: the RTT above the base RTT by `QUEUE_MIN_US` at least, and by this
/// share of the base (an eighth: 5 ms on a 40 ms path; RTT noise here is well under 1 ms).
const QUEUE_MIN_SHARE: u32 = 8;

/// The RTT now and the path's base RTT the connection is judged against, with their source into
/// `v`; None (and why, into `v`) without an RTT sample.
pub(super) fn rtts(
    v: &mut Verdict,
    sender: Option<End>,
    receiver: Option<End>,
    min_rcv_rtt_us: Option<u32>,
) -> Option<(u32, u32)> {
    let (rtt, base, source) = match (sender, receiver) {
        (Some(s), _) if s.now.srtt_us.is_some_and(|r| r > 0) => {
            let rtt = s.now.srtt_us.unwrap_or(0);
            let base = s.now.min_rtt_us.filter(|m| *m > 0).unwrap_or(rtt).min(rtt);
            (rtt, base, "the sender's srtt and min_rtt")
        }
        (_, Some(r)) => {
            let Some(rtt) = r.now.receiver_rtt_us() else {
                v.setting = Some("no RTT sample yet".into());
                return None;
            };
            let handshake = r.now.min_rtt_us.filter(|m| *m > 0);
            let seen = min_rcv_rtt_us.filter(|m| *m > 0);
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
            return None;
        }
    };
    v.rtt_us = Some(rtt);
    v.base_rtt_us = Some(base);
    v.rtt_source = Some(source.into());
    v.queue_us = Some(rtt.saturating_sub(base));
    Some((rtt, base))
}

/// A flow at this share of the rate asked (`--target`) or more runs at the path's rate: losses
/// that leave it there do not hold it (bbr at 1 % loss: 92-94 % of 300 Mbit/s; reno a few %).
const AT_TARGET_SHARE: f64 = 0.9;

/// A queue up to this share of the base RTT beside losses that hold the congestion window is
/// not what holds the flow: the losses are.
const LOSSES_BEFORE_QUEUE: u32 = 4;

/// A rate past this many times what the window lets through over the RTT: that RTT was not the
/// interval's.
const RTT_NOT_THE_INTERVALS: f64 = 1.3;

/// What tells a queue at the bottleneck from an RTT stretched some other way.
pub(super) struct QueueEvidence<'a> {
    pub sender: Option<End<'a>>,
    pub receiver: Option<End<'a>>,
    pub rate: u64,
    pub window: u64,
    pub rtt: u32,
    pub base: u32,
}

/// A queue at the bottleneck holds the RTT well above the base, steadily: the standing queue a
/// millisecond and an eighth of the base at least, the rate no more than the window lets through
/// over the RTT, the receiver's own estimate (which crosses the same queue) not at the base
/// (where curl --limit-rate's stalls leave it; a queue puts it 0.6-1.3 of the sender's excess
/// up), a sender's RTT variance under half the excess (stalls swing it) unless the receiver's
/// stands half as high (bbr's probing: +-3.1 ms); a receiver alone only with its window full
/// (its RTT spans a pausing sender's gaps: `nginx limit_rate` read 112 ms on a 21 ms path).
pub(super) fn queued(q: &QueueEvidence) -> bool {
    let over = sender::standing(q.sender, q.rtt, q.base);
    if over < QUEUE_MIN_US.max(q.base / QUEUE_MIN_SHARE) {
        return false;
    }
    // a window holds at most itself in flight (Little's law): a rate well over what it lets
    // through over this RTT says the RTT is not the interval's (a receiver's estimate that caught
    // one late segment: 1.1 ms on a 4 µs veth, at 7.7 Gbit/s through a 12 KB window)
    if q.window > 0 && q.rate as f64 > RTT_NOT_THE_INTERVALS * ceiling_bps(q.window, q.rtt) as f64 {
        return false;
    }
    let rx = q.receiver.and_then(|r| r.now.rcv_rtt_us.filter(|x| *x > 0));
    let rx = rx.map(|x| x.saturating_sub(q.base));
    let var = q.sender.and_then(|s| s.now.rttvar_us);
    if var.is_some_and(|var| var > over / 2) && rx.is_none_or(|x| x < over / 2)
        || q.sender.is_some() && rx.is_some_and(|x| x < over / 10)
    {
        return false;
    }
    q.sender.is_some()
        || q.receiver.is_none()
        || q.window > 0
            && q.rate as f64 >= WINDOW_LIMITED_SHARE * ceiling_bps(q.window, q.rtt) as f64
}

/// What the window-does-not-bind verdict is computed from.
pub(super) struct Unbound<'a> {
    pub sender: Option<End<'a>>,
    pub receiver: Option<End<'a>>,
    pub rate: u64,
    pub window: u64,
    pub rtt: u32,
    pub base: u32,
    pub queued: bool,
    /// the RTT the window's ceiling is taken at (the base when the path queues)
    pub binds_at: u32,
    pub target: Option<u64>,
}

/// The window does not bind: the path's queue holds the flow (`path-queue`), the sending
/// application (`app-limited`), losses through the congestion window (`congestion`), or nothing
/// the window does that one end can tell apart (`not-window-limited`, saying why); the receiver's
/// caps that would bind once the path allows more as factors.
pub(super) fn window_unbound(v: &mut Verdict, u: Unbound) {
    let (rate, window, rtt, base) = (u.rate, u.window, u.rtt, u.base);
    let fills_window =
        window > 0 && rate as f64 >= WINDOW_LIMITED_SHARE * ceiling_bps(window, rtt) as f64;
    let allows = fmt_rate(ceiling_bps(window, u.binds_at));
    // losses through a full congestion window; with `--target` they hold the flow only while it
    // runs short of the rate asked
    let losses = u.sender.and_then(|s| sender::congestion(s, rate));
    let near_target = v
        .target_payload_bps
        .is_some_and(|t| rate as f64 >= AT_TARGET_SHARE * t as f64);
    // what the sender says holds it, and the share of the window's ceiling it used
    let held = |v: &mut Verdict, limit: Limit, why: String, suggested: &str| {
        v.limit = limit;
        v.setting = Some(format!(
            "{why}; the transfer used {} of the {allows} its window allows",
            fmt_rate(rate)
        ));
        v.suggested = Some(suggested.into());
    };
    // losses that hold a full congestion window, with the RTT over the base by a quarter of the
    // base or less: a flow cut by its losses to a few segments has no standing queue of its own
    // (iperf3 -C cubic at 1 % loss on a 20 ms path: 7 Mbit/s, 9-12 segments in flight, its RTT
    // 3 ms over the base for a moment); a deeper queue is the path's whatever the losses
    // nor, with `--target`, a queue longer than the most the flow holds in flight takes to drain
    // at the rate asked: the flow's own data cannot have made it (the same flow, 5.3 ms over the
    // base with 8 segments of congestion window: 0.3 ms at 300 Mbit/s)
    let queue = rtt.saturating_sub(base);
    let not_its_own = u.sender.zip(v.target_payload_bps).is_some_and(|(s, t)| {
        let most = s.now.inflight_bytes().max(s.now.cwnd_bytes()).unwrap_or(0);
        t > 0 && most > 0 && f64::from(queue) > most as f64 * 8.0 * 1e6 / t as f64
    });
    let losses_first =
        losses.is_some() && !near_target && (queue <= base / LOSSES_BEFORE_QUEUE || not_its_own);
    // a sender with nothing more to send: its application's, whatever short queue its bursts
    // leave at the bottleneck (nginx `limit_rate`: 2-4 ms over a 20 ms path); at the rate asked
    // the path's (the lab's sender at 951 Mbit/s of 1 Gbit/s ran dry a moment)
    let app = u.sender.and_then(|s| sender::app_limited(s, rate));
    if let Some(why) = app.filter(|_| !near_target) {
        held(
            v,
            Limit::AppLimited,
            why,
            "nothing in TCP: the sending application's own pace or window (a rate limit, its disk, its CPU, what it is asked for; a window above TCP: OpenSSH's channel window, lifted by HPN-SSH or parallel streams, HTTP/2's SETTINGS_INITIAL_WINDOW_SIZE)",
        );
    } else if u.queued && !losses_first {
        v.limit = Limit::PathQueue;
        v.setting = Some(format!(
            "the path's bottleneck holds the flow at {} with a queue of {} standing through the interval (RTT {} at its end, over a base of {}): the window of {window} B {}, and would allow {} without the queue",
            fmt_rate(rate),
            fmt_rtt(sender::standing(u.sender, rtt, base)),
            fmt_rtt(rtt),
            fmt_rtt(base),
            if fills_window { "fills the queue" } else { "is not what holds it" },
            fmt_rate(ceiling_bps(window, base)),
        ));
        v.suggested = Some(
            "no window change: a larger window only lengthens the queue. The bottleneck's rate is what the flow gets; an AQM there (fq_codel, cake) or a pacing sender (bbr) shortens the queue"
                .into(),
        );
    } else if let Some(losses) = losses.as_ref().filter(|_| !near_target) {
        // the congestion control is the sender's namespace's setting: run it there
        let cc = match u.sender.and_then(|s| s.host.run_in.as_deref()) {
            Some(p) => format!("{p} sysctl -w net.ipv4.tcp_congestion_control=bbr"),
            None => "sysctl -w net.ipv4.tcp_congestion_control=bbr".into(),
        };
        held(
            v,
            Limit::Congestion,
            format!("losses hold the congestion window: {losses}"),
            &format!("no window change: the losses on the path (a lossy link, a policer, a full queue upstream); a congestion control that does not back off on every loss (bbr, in the sending socket's namespace: `{cc}`; an application can choose it per socket, TCP_CONGESTION) keeps a lossy path fuller"),
        );
    } else {
        v.limit = Limit::NotWindowLimited;
        v.setting = Some(match (u.sender, u.sender.and_then(cwnd_bound)) {
            // bbr on a lossy link: in recovery its congestion window conserves packets, full,
            // and the flow still runs at the rate asked
            (Some(_), _) if losses.is_some() => format!(
                "the transfer used {} of the {allows} its window allows, within a tenth of the {} asked (--target): the path's rate, with losses ({}) that cost little",
                fmt_rate(rate),
                fmt_rate(u.target.unwrap_or(0)),
                losses.as_deref().unwrap_or_default(),
            ),
            (Some(s), Some(c)) => format!(
                "the transfer used {} of the {allows} its window allows: the sender's congestion window ({c} B in flight) holds it, {}",
                fmt_rate(rate),
                sender::few_losses(s),
            ),
            (Some(_), None) => format!(
                "the transfer used {} of the {allows} its window allows: the path's rate, as far as the sender shows",
                fmt_rate(rate),
            ),
            (None, _) => format!(
                "the transfer used {} of the {allows} its window allows{}: what holds it is the sender's to tell (its application, its congestion window, the path); run `tcpwin-trace ss` on the sending host",
                fmt_rate(rate),
                u.receiver
                    .and_then(|r| r.grew(|f| f.ooo_packets))
                    .filter(|n| *n > 0)
                    .map(|n| format!(" ({n} segments arrived out of order: losses upstream)"))
                    .unwrap_or_default(),
            ),
        });
        v.suggested =
            Some("look elsewhere: the sending application, congestion or loss on the path".into());
    }
    // the window caps as contributing facts (a window too small *and* irrelevant)
    if let Some(r) = u.receiver {
        potential_caps(
            v,
            r,
            u.sender,
            window,
            u.target,
            "not the limit now: it binds only once the path allows more",
        );
    }
}
