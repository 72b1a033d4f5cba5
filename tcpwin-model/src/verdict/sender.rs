//! The sending host: its own send buffer, its congestion window, and the peer's window as a
//! sender alone sees it.
use super::{
    end::End,
    fix::{AppFix, Fix, FixEnd},
    limit::Limit,
    sizing::{at_max, ceiling_bps, fmt_rate, fmt_rtt, Sizing},
    types::Verdict,
};
use crate::facts::SockFacts;

/// Counted sndbuf-limited over this share of its busy time: the sender's own buffer binds.
const SNDBUF_LIMITED_SHARE: f64 = 0.5;
/// Segments an interval must deliver for its own share of retransmissions to be read.
const RETRANS_MIN_SEGMENTS: u64 = 1000;
/// Queued at this share of the send buffer or more: the application is blocked on it.
const SNDBUF_FULL: f64 = 0.5;
/// Counted rwnd-limited under this share of its busy time: the peer's window does not hold it.
const RWND_SELDOM: f64 = 0.1;
/// A full send buffer this share in flight or more: the buffer, not a pacer or the path, holds it.
const SNDBUF_SENT: f64 = 0.5;
/// A rate at this share of what a full buffer let into flight over the RTT follows the buffer.
const FOLLOWS_INFLIGHT: f64 = 0.8;
/// A writer blocked on a full send buffer is woken when a third of it is free (the kernel's
/// sk_stream_write_space: free space at least half of what is queued), so while it keeps the
/// buffer filled, at least this share of what the full buffer let into flight is out at every
/// moment, and the rate over the RTT is at least this share of the full buffer's.
const WRITER_WAKES: f64 = 2.0 / 3.0;

/// The sender's congestion window holds it: in flight within two segments of cwnd, and cwnd
/// below the peer's window (a cwnd at or above the peer's window never gets to hold anything:
/// reno's cwnd stays near 10 segments behind a window of 8.75, iperf3 -w 8K).
pub(super) fn cwnd_bound(s: End) -> Option<u64> {
    let mss = s.now.mss_cache? as u64;
    let cwnd = s.now.cwnd_bytes()?;
    if s.now.snd_wnd.is_some_and(|w| cwnd >= w as u64) {
        return None;
    }
    let inflight = s.now.inflight_bytes()?;
    (inflight + 2 * mss >= cwnd).then_some(inflight)
}

/// The congestion window held the sender over the interval: full at the later reading and, when
/// there is an earlier one, at that one too (a window cut by a recovery just before the later
/// reading held it for a moment, not for the interval).
pub(super) fn cwnd_held(s: End) -> bool {
    cwnd_bound(s).is_some() && s.before.is_none_or(|b| cwnd_bound(s.at(b)).is_some())
}

/// In flight at this share of the peer's window or more: the window is full (a segment of it may
/// be acknowledged at the moment of the reading).
const WINDOW_FULL: f64 = 0.8;

/// The peer's window stops the sender at both readings: data waits unsent, the congestion window
/// has room, and what is in flight fills the window the peer advertised. The kernel's own test
/// (`tcp_snd_wnd_test`) read from its outcome: on a path of microseconds bbr's pacer and the
/// small-queue limit hold the sender most of its busy time, so its rwnd-limited count stays low
/// (18 % for iperf3 -w 8K on a veth) while every reading finds the window full.
pub(super) fn window_full(s: End) -> bool {
    let full = |now: &SockFacts| {
        let (Some(wnd), Some(inflight), Some(unsent)) =
            (now.snd_wnd, now.inflight_bytes(), now.unsent)
        else {
            return false;
        };
        let room = cwnd_bound(s.at(now)).is_none();
        wnd > 0 && unsent > 0 && room && inflight as f64 >= WINDOW_FULL * wnd as f64
    };
    full(s.now) && s.before.is_some_and(full)
}

/// Retransmitted segments at this share of those delivered or more, with the congestion window
/// full, are losses holding the flow (reno at a 1 % lossy link: ~1 %; at a bottleneck that
/// drops when its queue fills, a few per ten thousand).
const RETRANS_SHARE: f64 = 0.002;
/// A sender busy (data in flight) less than this share of the interval, with nothing waiting to
/// be sent, writes slower than the path takes.
const APP_BUSY_SHARE: f64 = 0.5;
/// A sender busy less than this share of the interval, whatever a reading caught waiting, was
/// idle most of it: its application.
const IDLE_MOST_SHARE: f64 = 0.25;

/// The sending application does not write fast enough: nothing waits unsent, the congestion
/// window has room, and the kernel says the sender had less data than the path would take
/// (`delivery_rate_app_limited`) or it was busy well under the interval. Read at the later
/// reading, or at the earlier one when the later caught a burst just written (a sender that
/// writes in bursts, nginx `limit_rate`, has data unsent for a moment after each write; a
/// sender with more to send always has). Why, or None.
pub(super) fn app_limited(s: End, rate: u64) -> Option<String> {
    if rate == 0 {
        return None;
    }
    let busy = s.busy_share();
    // a sender with data queued or in flight under a quarter of the interval (the kernel's busy
    // time) had nothing to send the rest: no window, queue or loss holds a sender that sits idle,
    // whatever a reading caught just written (nginx `limit_rate` writes a burst and sleeps: both
    // readings caught 1.6-1.8 MB unsent, busy 11 % of the interval)
    if let Some(b) = busy.filter(|b| *b < IDLE_MOST_SHARE) {
        return Some(format!(
            "the sending application does not write fast enough: data to send or in flight {:.0} % of the time, nothing the rest (it writes in bursts and waits)",
            b * 100.0
        ));
    }
    let (inflight, cwnd, flagged) =
        writer_idle(s.now, busy).or_else(|| writer_idle(s.before?, busy))?;
    // what the application hands over per round trip: on a long path a window of its own above
    // TCP (OpenSSH's channel window, HTTP/2's flow control, a proxy's buffer) is that much
    let per_rtt = s
        .now
        .srtt_us
        .filter(|r| *r >= super::sizing::QUEUE_MIN_US)
        .map(|r| rate as u128 * r as u128 / 8_000_000)
        .map(|b| format!(
            "; it hands TCP about {b} B a round trip: where the application has a window of its own above TCP (OpenSSH's channel window, HTTP/2's stream windows, a proxy's buffer), that window is what binds, and no TCP setting lifts it"
        ))
        .unwrap_or_default();
    Some(format!(
        "the sending application does not write fast enough: nothing waits to be sent, the congestion window has room ({inflight} B in flight of {cwnd} B){}{}{}{per_rtt}",
        if flagged { ", and the kernel marks its deliveries app-limited" } else { "" },
        busy.map(|b| format!(", data in flight {:.0} % of the time", b * 100.0))
            .unwrap_or_default(),
        // the writer's own threshold: woken to write only under it, and it did not refill
        s.now
            .notsent_lowat
            .filter(|n| *n > 0)
            .map(|n| format!(
                "; it set TCP_NOTSENT_LOWAT {n} (woken to write with under {n} B unsent) and still left nothing to send"
            ))
            .unwrap_or_default()
    ))
}

/// One reading of a sender with nothing to send: nothing unsent, its buffer not full, the
/// congestion window with room, and the kernel's app-limited mark, nothing in flight, or busy
/// (`busy`: over the interval) under [`APP_BUSY_SHARE`]. (in flight, cwnd, marked), or None.
fn writer_idle(f: &SockFacts, busy: Option<f64>) -> Option<(u64, u64, bool)> {
    let mss = f.mss_cache? as u64;
    let (flagged, unsent) = (f.app_limited == Some(true), f.unsent? as u64);
    // unsent under the kernel's app-limited mark waits for the pacer (OpenSSH, bbr: 7.7 KB of a
    // 6.2 MB window with 2 MB in flight), not for the writer: it counts against the window
    if unsent >= mss && !flagged {
        return None;
    }
    // an application blocked on a full send buffer writes as fast as the buffer lets it (where
    // the reading says whether it waits, that says it)
    if f.writer_waiting != Some(false) && f.wmem_queued? as f64 >= SNDBUF_FULL * f.sk_sndbuf? as f64
    {
        return None;
    }
    let cwnd = f.cwnd_bytes()?;
    let inflight = f.inflight_bytes()?;
    if inflight + unsent.max(mss) + mss >= cwnd {
        return None;
    }
    // nothing in flight and nothing to send: no window, queue or loss holds it at this moment
    let empty = f.packets_out == Some(0);
    // (a writer caught dry for a moment, unmarked, is not enough: a sender at the path's rate
    // starved of the CPU between two writes; OpenSSH, dry once a round trip, is marked)
    if !flagged && !empty && !busy.is_some_and(|b| b < APP_BUSY_SHARE) {
        return None;
    }
    Some((inflight, cwnd, flagged))
}

/// A sender in loss recovery: data waiting unsent, most of its congestion window in flight,
/// segments retransmitted since the earlier reading, and the peer's window far from full (PRR
/// sends as ACKs come back, so a reading may catch the window a few segments short: cubic at 1 %
/// loss, 9 of 12 segments in flight with 237 KB unsent), or the window cut since the earlier
/// reading. What is in flight, or None.
fn recovering(s: End) -> Option<u64> {
    let f = s.now;
    let mss = f.mss_cache? as u64;
    let cwnd = f.cwnd_bytes()?;
    let inflight = f.inflight_bytes()?;
    let waiting = f.unsent? as u64 >= mss;
    let retransmitting = s.grew(|f| f.total_retrans).is_some_and(|r| r > 0);
    let window_room = f
        .snd_wnd
        .is_some_and(|w| w as u64 >= cwnd.saturating_mul(2));
    // or the window was cut since the earlier reading, with segments retransmitted between:
    // PRR lets the cut window out as ACKs return, so a reading may find a third of it not yet
    // sent (cubic, 19 segments cut to 12, 8 in flight). Asked only once no window or buffer
    // binds, and a flow near the rate asked is not held by its losses (bbr on a lossy link)
    let cut = s
        .before
        .and_then(|b| b.snd_cwnd)
        .zip(f.snd_cwnd)
        .is_some_and(|(was, is)| is < was);
    (waiting
        && retransmitting
        && window_room
        && (cut || inflight as f64 >= RECOVERY_INFLIGHT * cwnd as f64))
        .then_some(inflight)
}

/// In loss recovery, this share of the congestion window in flight or more: the window holds.
const RECOVERY_INFLIGHT: f64 = 0.7;

/// What a congestion window held without losses to blame saw of them: `without losses`, or the
/// segments retransmitted (over the interval, or the life) and their share of those delivered,
/// under [`RETRANS_SHARE`].
pub(super) fn few_losses(s: End) -> String {
    let mss = s.now.mss_cache.unwrap_or(0).max(1) as u64;
    let (_, acked) = s.moved();
    match s.grew(|f| f.total_retrans).filter(|r| *r > 0) {
        None => "without losses".into(),
        Some(r) => {
            format!(
            "with {r} segments retransmitted{} ({:.3} % of those delivered: too few to hold it)",
            if s.before.is_some() { " in the interval" } else { " over the connection's life" },
            r as f64 * 100.0 / (acked / mss).max(1) as f64,
        )
        }
    }
}

/// Losses hold the congestion window down and the window holds the flow: retransmissions at
/// [`RETRANS_SHARE`] of what was delivered or more, and the congestion window full. The losses
/// (`N segments retransmitted ..., cwnd N segments full ...`), or None.
pub(super) fn congestion(s: End, rate: u64) -> Option<String> {
    let f = s.now;
    let mss = f.mss_cache? as u64;
    let inflight = cwnd_bound(s).or_else(|| recovering(s))?;
    let retrans = s.grew(|f| f.total_retrans)? as u64;
    let (_, acked) = s.moved();
    let delivered = (acked / mss.max(1)).max(1);
    // an interval too short to hold a share of losses (one snapshot's quarter second at a few
    // Mbit/s: ~150 segments, 1.5 losses at 1 %) is judged over the connection's life
    let (retrans, delivered, over) = if delivered >= RETRANS_MIN_SEGMENTS {
        (retrans, delivered, "")
    } else {
        let life = (f.bytes_acked? / mss.max(1)).max(1);
        (f.total_retrans? as u64, life, " over the connection's life")
    };
    let share = retrans as f64 / delivered as f64;
    if share < RETRANS_SHARE || rate == 0 {
        return None;
    }
    Some(format!(
        "{retrans} segments retransmitted{over} ({:.2} % of those delivered), cwnd {} segments full ({inflight} B in flight){}",
        share * 100.0,
        f.snd_cwnd.unwrap_or(0),
        f.snd_ssthresh
            .filter(|t| *t < 0x7fff_ffff)
            .map(|t| format!(", ssthresh {t}"))
            .unwrap_or_default()
    ))
}

/// The queue that stands over the interval: the RTT over the base at the lower of the sender's
/// two readings (a buffer sent a third at a time queues in bursts: 117 then 127 ms over 100 ms).
pub(super) fn standing(sender: Option<End>, rtt: u32, base: u32) -> u32 {
    let before = sender.and_then(|s| s.before?.srtt_us).filter(|r| *r > 0);
    before.map_or(rtt, |b| b.min(rtt)).saturating_sub(base)
}

/// A queue up to this share of the base RTT behind a full send buffer is the buffer's.
const QUEUE_OF_THE_BUFFER: u32 = 4;
/// A congestion window at this many times what is in flight or more has room.
const CWND_ROOM: f64 = 1.5;

/// The RTT above the base is the send buffer's bursts, not a bottleneck's: the queue that stands
/// over the interval within a quarter of the base, the buffer that cannot grow full (half of
/// sk_sndbuf queued or more, most of it in flight) and the congestion window well above what is
/// in flight (a bottleneck the flow fills holds it to what it lets through). nginx `sendfile`,
/// 100 ms, 500 Mbit/s: cwnd 6025 segments, 2900 in flight; a larger tcp_wmem[2] raised the rate.
pub(super) fn queue_of_the_buffer(s: End, rtt: u32, base: u32) -> bool {
    let f = s.now;
    let (Some(sndbuf), Some(queued), Some(inflight), Some(cwnd), Some(mss)) = (
        f.sk_sndbuf,
        f.wmem_queued,
        f.inflight_bytes(),
        f.snd_cwnd,
        f.mss_cache,
    ) else {
        return false;
    };
    let fixed = cannot_grow(s, sndbuf as u64);
    let full = full_and_sent(queued as u64, inflight, sndbuf as u64);
    let room = cwnd as f64 * mss as f64 >= CWND_ROOM * inflight as f64;
    standing(Some(s), rtt, base) <= base / QUEUE_OF_THE_BUFFER && fixed && full && room
}

/// The send buffer cannot grow: an application's SO_SNDBUF, or autotuned up to `tcp_wmem[2]`.
fn cannot_grow(s: End, sndbuf: u64) -> bool {
    s.now.sndbuf_locked == Some(true) || at_max(sndbuf, s.host.tcp_wmem)
}

/// Data queued at [`SNDBUF_FULL`] of `sndbuf` or more, with [`SNDBUF_SENT`] of it in flight or
/// more: the buffer is full, and not held back unsent.
fn full_and_sent(queued: u64, inflight: u64, sndbuf: u64) -> bool {
    queued as f64 >= SNDBUF_FULL * sndbuf as f64 && inflight as f64 >= SNDBUF_SENT * queued as f64
}

/// The sender's own buffer binds: the verdict into `v` with its fix sized by `sizing`, true
/// when it is that.
pub(super) fn sndbuf_binds(
    v: &mut Verdict,
    s: End,
    rate: Option<u64>,
    rtt: u32,
    sizing: &Sizing,
) -> bool {
    let Some(why) = sndbuf_bound(s, rate, rtt) else {
        return false;
    };
    // a buffer that lets out the rate asked (`--target`) at the base RTT is not the limit (behind
    // a queue the RTT inflates until any buffer looks full): what it lets into flight is sk_sndbuf
    // at most (an SO_SNDBUF request already doubled)
    let allows = |t: u64| {
        s.now
            .sk_sndbuf
            .is_some_and(|b| ceiling_bps(b as u64, sizing.base_us) >= t)
    };
    if v.target_payload_bps.is_some_and(allows) {
        return false;
    }
    // the buffer holds what is in flight and what waits: twice the window the rate needs
    let need = 2 * sizing.window();
    let f = s.now;
    let cur = f.sk_sndbuf.unwrap_or(0) as u64;
    let here = |cmd: String| match &s.host.run_in {
        Some(p) => format!("{p} {cmd}"),
        None => cmd,
    };
    let fix = if f.sndbuf_locked == Some(true) {
        let req = need.div_ceil(2).max(cur / 2 + 1);
        let mut commands = Vec::new();
        if s.host.wmem_max.is_some_and(|m| req > m) {
            commands.push(format!("sysctl -w net.core.wmem_max={req}"));
        }
        Fix {
            commands,
            app: Some(AppFix::new("SO_SNDBUF", req, f.comm.clone())),
            new_connections: false,
            ..Fix::default()
        }
    } else {
        let t = s.host.tcp_wmem.unwrap_or([4096, 16384, 4194304]);
        if need <= t[2] {
            // autotuning may already grow the buffer that far: a bigger maximum lifts nothing
            return false;
        }
        Fix {
            commands: vec![here(format!(
                "sysctl -w net.ipv4.tcp_wmem='{} {} {need}'",
                t[0], t[1]
            ))],
            ..Fix::default()
        }
    };
    v.limit = Limit::Sndbuf;
    v.window_limited = Some(false);
    v.setting = Some(why);
    v.suggested = Some(format!("{}: {}", sizing.words(), fix.words()));
    v.fix = Some(Fix {
        sized_for_bps: Some(sizing.rate()),
        sized_for: Some(sizing.why()),
        ceiling_bps: Some(ceiling_bps(need / 2, sizing.base_us)),
        ..fix
    });
    true
}

/// Why the sender's own buffer binds, or None. It binds only where its writer waited on it
/// ([`End::writer_waited`]: the kernel's sndbuf-limited count, the writer found waiting for room,
/// data queued up to `sk_sndbuf`; where no reading says, the facts below stand in) and the peer's
/// window had room, and then where one of these holds:
/// - the kernel counted most of the busy time sndbuf-limited;
/// - the buffer is full with most of it in flight: nothing waits unsent, so no pacer, path or
///   congestion window holds the data back (lab: `sndbuf`, 100 ms, 500 Mbit/s);
/// - the buffer cannot grow (SO_SNDBUF, or autotuned up to `tcp_wmem[2]`) and the rate follows
///   it over the RTT: at [`FOLLOWS_INFLIGHT`] of `sk_sndbuf`, or at [`WRITER_WAKES`] of what was in
///   flight when it was full at the earlier reading, a window the peer did not fill. A reading may
///   catch such a buffer between two writes or half of it waiting for bbr's pacer, which paces
///   at the rate the buffer set (lab: `two-limits` tcp_wmem[2] 128-256 KiB, nginx `sndbuf=32k`).
fn sndbuf_bound(s: End, rate: Option<u64>, rtt: u32) -> Option<String> {
    let f = s.now;
    let sndbuf = f.sk_sndbuf? as u64;
    // OpenSSH over 100 ms: 2 MB queued of 4 MiB, 0 % sndbuf-limited, its channel window binds
    let waited = s.writer_waited();
    if waited == Some(false) {
        return None;
    }
    let share = s.chrono_share(|f| f.sndbuf_limited_us);
    let mut locked = if f.sndbuf_locked == Some(true) {
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
    // the kernel's account first: held by the peer's window longer than by its own buffer, no
    // room (iperf3 -w 8K on a veth: rwnd-limited 41 %, sndbuf-limited 15 %)
    let rwnd = s.chrono_share(|f| f.rwnd_limited_us);
    if rwnd.zip(share).is_some_and(|(r, b)| r > b) {
        return None;
    }
    let queued = f.wmem_queued? as u64;
    let peer_window = f.snd_wnd? as u64;
    let inflight = f.inflight_bytes().unwrap_or(0);
    // the peer's window would take twice the buffer or twice what is in flight (sk_sndbuf counts
    // memory: 512 KiB holds ~370 KB of payload), or the kernel counted it holding the sender
    // under a tenth of the busy time with what is in flight well under it
    let room = peer_window >= sndbuf.saturating_mul(2)
        || (inflight > 0 && peer_window >= inflight.saturating_mul(2))
        || (rwnd.is_some_and(|x| x < RWND_SELDOM)
            && inflight > 0
            && (inflight as f64) < 0.8 * peer_window as f64);
    let rate = rate.filter(|r| *r > 0)?;
    let at_rate_of = |share: f64, bytes: u64| rate as f64 >= share * ceiling_bps(bytes, rtt) as f64;
    let full = full_and_sent(queued, inflight, sndbuf);
    // full at the earlier reading with what was in flight then short of the peer's window (which
    // would have set the rate: iperf3 -w 64K, 78 KB in flight of an 80 KB window)
    let full_before = s.before.and_then(|b| {
        let (queued, inflight) = (b.wmem_queued? as u64, b.inflight_bytes()?);
        let window_held = b.snd_wnd.map(u64::from).is_some_and(|w| {
            inflight + 2 * u64::from(b.mss_cache.unwrap_or(0)) >= w
                || at_rate_of(FOLLOWS_INFLIGHT, w)
        });
        (full_and_sent(queued, inflight, sndbuf) && !window_held).then_some((queued, inflight))
    });
    let follows = cannot_grow(s, sndbuf)
        && (at_rate_of(FOLLOWS_INFLIGHT, sndbuf)
            || full_before.is_some_and(|(_, out)| at_rate_of(WRITER_WAKES, out)));
    if !room || !(full || follows) {
        return None;
    }
    let state = if full {
        format!("is full ({queued} B queued, {inflight} B of it in flight)")
    } else {
        locked = if f.sndbuf_locked == Some(true) {
            locked
        } else {
            "autotuned up to tcp_wmem[2]"
        };
        format!(
            "cannot grow{}, and the rate ({}) is what it lets out over the RTT{}; at this reading {queued} B queued, {inflight} B of it in flight ({})",
            if waited == Some(true) { " and holds the writer" } else { "" },
            fmt_rate(rate),
            full_before
                .map(|(was, out)| format!(
                    " (full at the earlier reading: {was} B queued, {out} B in flight)"
                ))
                .unwrap_or_default(),
            if f.unsent.unwrap_or(0) >= f.mss_cache.unwrap_or(u32::MAX) {
                "the rest waiting for the pacer"
            } else {
                "the writer between two writes"
            }
        )
    };
    Some(format!(
        "the send buffer (sk_sndbuf {sndbuf}, {locked}) {state} while the peer's window ({peer_window} B) and the congestion window allow more: {} at most over {}{}",
        fmt_rate(ceiling_bps(sndbuf, rtt)),
        fmt_rtt(rtt),
        share
            .map(|x| format!("; sndbuf-limited time {:.0} %", x * 100.0))
            .unwrap_or_default()
    ))
}

/// A flow at this share of the pacing cap its application set, or more, is held by that cap.
const AT_PACING_CAP: f64 = 0.85;

/// The sender paces itself: its application capped the pacing rate (`SO_MAX_PACING_RATE`, kept
/// in `sk_max_pacing_rate`) and the flow runs at that cap: the kernel's pacer waited, not a
/// window or the path (`iperf3 --fq-rate 100M` on a path that carries 1 Gbit/s). Not where the
/// cap lets out the rate asked (`--target`). The verdict into `v`, true when it is that.
pub(super) fn paced(v: &mut Verdict, s: End, rate: u64, sizing: &Sizing) -> bool {
    let Some(cap) = s.now.pacing_cap_bps.filter(|c| *c > 0) else {
        return false;
    };
    if (rate as f64) < AT_PACING_CAP * cap as f64 || v.target_payload_bps.is_some_and(|t| cap >= t)
    {
        return false;
    }
    let want = sizing.rate().max(cap.saturating_mul(2));
    v.limit = Limit::Pacing;
    v.window_limited = Some(false);
    v.setting = Some(format!(
        "the sending application caps its pacing rate at {} (SO_MAX_PACING_RATE{}), and the flow runs at {}: the kernel's pacer holds it, whatever the windows and the path allow",
        fmt_rate(cap),
        s.now.comm.as_deref().map(|c| format!(", set by {c}")).unwrap_or_default(),
        fmt_rate(rate)
    ));
    let fix = Fix {
        app: Some(AppFix::new(
            "SO_MAX_PACING_RATE",
            want / 8,
            s.now.comm.clone(),
        )),
        sized_for_bps: Some(sizing.rate()),
        sized_for: Some(sizing.why()),
        ..Fix::default()
    };
    v.suggested = Some(format!(
        "nothing in TCP's settings: the application must raise or drop its pacing cap ({})",
        fix.words()
    ));
    v.fix = Some(fix);
    true
}

/// Window scaling not negotiated binds a sender read alone (the peer's window can never pass
/// 65535): the verdict into `v`, with the fix on the end that refused it: this host's own
/// sysctl when it is off here, else the peer's (its command, to run on that host).
pub(super) fn wscale_off(v: &mut Verdict, s: End, window: u64, binds_at: u32, sizing: &Sizing) {
    const ON: &str = "sysctl -w net.ipv4.tcp_window_scaling=1";
    v.limit = Limit::WscaleOff;
    let (setting, fix) = if s.host.tcp_window_scaling == Some(false) {
        (
            "window scaling off on this (the sending) host: net.ipv4.tcp_window_scaling=0 here"
                .to_string(),
            Some(Fix {
                commands: vec![match &s.host.run_in {
                    Some(p) => format!("{p} {ON}"),
                    None => ON.to_string(),
                }],
                end: Some(FixEnd::Sender),
                ..Fix::default()
            }),
        )
    } else {
        (
            "the peer did not take window scaling (its net.ipv4.tcp_window_scaling=0, or a middlebox stripped the option)".to_string(),
            s.now.id.raddr.map(|addr| Fix {
                commands: vec![ON.to_string()],
                end: Some(FixEnd::Receiver),
                on_peer: Some(addr),
                ..Fix::default()
            }),
        )
    };
    v.setting = Some(format!(
        "{setting}: the peer's window stays <= 65535 ({window} B now) for the connection's life, {} at most over {}",
        fmt_rate(ceiling_bps(window, binds_at)),
        fmt_rtt(binds_at)
    ));
    let fix = fix.map(|f| Fix {
        new_connections: true,
        sized_for_bps: Some(sizing.rate()),
        sized_for: Some(sizing.why()),
        ..f
    });
    v.suggested = Some(match &fix {
        Some(f) => format!("{}: {}", sizing.words(), f.words()),
        None => sizing.words(),
    });
    v.fix = fix;
}

/// The peer's window binds a sender read alone: the verdict into `v`.
pub(super) fn peer_window(v: &mut Verdict, s: End, window: u64, binds_at: u32, sizing: &Sizing) {
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
