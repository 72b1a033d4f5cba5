//! The applications: a receiver that does not read (a zero window with data unread, a backlog
//! that keeps the advertised window small, a reader caught between its bursts).
use super::{
    end::End,
    limit::Limit,
    sizing::{ceiling_bps, fmt_rate, fmt_rtt},
    types::{Verdict, WINDOW_LIMITED_SHARE},
};
use crate::facts::SockFacts;

/// What a reader slower than the path (or not reading) is told.
pub(super) const READ_FASTER: &str =
    "the receiving application must read (or read faster): a larger buffer only delays the stall";

/// Unread data at this share of the window, with the advertised window under half of it, at both
/// ends of an interval: the application's backlog, not the buffer, sets the window.
const BACKLOG_SHARE: f64 = 0.25;
/// A flow under this share of what the window lets through over the RTT, with half the window
/// unread at one of two readings, was held by its reader.
const DRAINED_RATE_SHARE: f64 = 0.25;

/// An application not reading stalls the connection at any rate (either end may show it: the
/// receiver its unread data, the sender the zero window it is offered): the verdict into `v`,
/// true when it is that.
pub(super) fn zero_window(v: &mut Verdict, sender: Option<End>, receiver: Option<End>) -> bool {
    let ends = [sender, receiver];
    let stalled = |e: &&End| e.now.rcv_wnd == Some(0) && e.now.unread.unwrap_or(0) > 0;
    if let Some(r) = ends.iter().flatten().find(stalled) {
        let unread = r.now.unread.unwrap_or(0) as u64;
        v.limit = Limit::AppNotReading;
        v.unread = Some(unread);
        v.window = Some(0);
        v.setting = Some(format!(
            "zero window: {unread} bytes received and not read by the receiving application{}",
            lowat_words(r.now)
        ));
        v.suggested = Some(READ_FASTER.into());
        return true;
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
        return true;
    }
    false
}

/// The reader's own threshold, where it set one: SO_RCVLOWAT makes a read (and its wake-up)
/// wait for that many bytes queued, so data sits unread until then.
pub(super) fn lowat_words(f: &SockFacts) -> String {
    match f.rcvlowat.filter(|v| *v > 1) {
        Some(n) => {
            format!(" (the application set SO_RCVLOWAT {n}: its reads wait for {n} B queued)")
        }
        None => String::new(),
    }
}

/// The last data waited two RTTs or more for a read (`rcvq_space.time` stamps reads): in bursts.
fn read_late(f: &SockFacts) -> Option<u64> {
    let rtt = f.rcv_rtt_us.unwrap_or(0).max(f.min_rtt_us.unwrap_or(0)) as u64;
    f.read_late_us().filter(|w| *w > 2 * rtt)
}

/// Unread data under [`BACKLOG_SHARE`] of `window` at one of the receiver's readings at least
/// (and at the later one with a single reading): no backlog of the reader's, which would hold
/// data unread at both, makes its advertised window small (nginx takes an upload into a locked
/// 64 KiB buffer in bursts: none unread at one reading, 52 KB at the next).
pub(super) fn little_unread(r: End, window: u64) -> bool {
    [Some(r.now), r.before]
        .into_iter()
        .flatten()
        .any(|f| (f.unread.unwrap_or(0) as f64) < BACKLOG_SHARE * window as f64)
}

/// A backlog the application does not drain keeps the advertised window small, and the flow
/// runs at what that window allows: the verdict into `v`, true when it is that.
pub(super) fn backlog_binds(
    v: &mut Verdict,
    r: End,
    window: u64,
    rate: Option<u64>,
    (base, rtt): (u32, u32),
) -> bool {
    if !backlog(r, window, rate, (base, rtt), v.rwnd_limited_share) {
        return false;
    }
    let unread = r.now.unread.unwrap_or(0);
    let late = read_late(r.now).or(r.before.and_then(read_late));
    v.limit = Limit::AppNotReading;
    v.setting = Some(match late.filter(|_| unread == 0) {
        Some(w) => format!("the last data waited {} or more for the application to read it, nothing unread now: it reads in bursts, slower than the path delivers{}", fmt_rtt(w), lowat_words(r.now)),
        None => format!("{unread} bytes received and not read by the application keep the advertised window at {} of {window} B{}", r.now.rcv_wnd.unwrap_or(0), lowat_words(r.now)),
    });
    v.suggested = Some(READ_FASTER.into());
    true
}

/// A sender held by the peer's window most of its busy time, yet sending at under half what the
/// window allows at the base RTT (on a path of a millisecond or more): the peer's window was
/// mostly far smaller, closed by its reader (`curl --limit-rate`). Where the RTT looks queued, at
/// under half what the window allows even over that RTT: a queue drains a full window at
/// window / RTT (Little's law), zero-window stalls do not (and swing the RTT). `window`: the one
/// the sender sees now, or with the receiver in view (`receiver`) its largest, whose readings
/// then caught the reader just after it drained (a window that size held as long, with nothing
/// unread, would have let the rate through). The verdict into `v`, true when it is that.
pub(super) fn peer_stalls(
    v: &mut Verdict,
    s: End,
    rate: u64,
    window: u64,
    (base, rtt): (u32, u32),
    queued: bool,
    receiver: Option<End>,
) -> bool {
    let held =
        v.rwnd_limited_share.is_some_and(|x| x >= 0.5) && super::sender::cwnd_bound(s).is_none();
    let over = if queued { rtt } else { base };
    let grown: (End, fn(&SockFacts) -> Option<u32>) =
        receiver.map_or((s, |f| f.snd_wnd), |r| (r, |f| f.window_clamp));
    if base < super::sizing::QUEUE_MIN_US
        || !held
        || window == 0
        || rate as f64 >= 0.5 * ceiling_bps(window, over) as f64
        || autotuning_grew(grown, rate, over)
    {
        return false;
    }
    let seen = receiver.is_some();
    let [whose, which, this, win, far] = if seen {
        ["receiver's", "receiving", "the", "that window", ""]
    } else {
        [
            "peer's",
            "peer's",
            "this",
            "the window it advertises now",
            "far smaller, ",
        ]
    };
    v.limit = Limit::AppNotReading;
    v.window = Some(window);
    v.setting = Some(format!(
        "the {whose} window held {this} sender {:.0} % of its busy time, yet it sent {} where {win} ({window} B) allows {}: the window was mostly {far}closed by the {which} application, reading slower than the path delivers{}",
        v.rwnd_limited_share.unwrap_or(0.0) * 100.0,
        fmt_rate(rate),
        fmt_rate(ceiling_bps(window, base)),
        if seen { " (these readings caught it just after it drained its buffer)" } else { "" },
    ));
    v.suggested = Some(if seen {
        READ_FASTER.into()
    } else {
        "the receiving application must read faster (run `tcpwin-trace ss` on the receiving host): nothing to change on the sending end".into()
    });
    true
}

/// The receiver's autotuning grew its window between the readings: its clamp (the sender alone:
/// the window advertised) at least doubled, the earlier one letting through half the rate or more
/// over `over`. The window held the sender while small; the reader did not close it (wget: 107 KB
/// for two seconds, nothing unread, then 4.2 MB a quarter second later; its sender saw 57 KB).
fn autotuning_grew((e, w): (End, fn(&SockFacts) -> Option<u32>), rate: u64, over: u32) -> bool {
    let (Some(before), Some(now)) = (e.before.and_then(w), w(e.now)) else {
        return false;
    };
    let (before, now) = (u64::from(before), u64::from(now));
    before > 0
        && before.saturating_mul(2) <= now
        && rate as f64 >= 0.5 * ceiling_bps(before, over) as f64
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
            let most = unread(r.now).max(unread(b));
            // the flow under `k` of what the window allows over the RTT, on a path of a
            // millisecond or more (at µs RTTs every flow is far under it: the ACK clock paces it)
            let ms_path = base >= super::sizing::QUEUE_MIN_US;
            let under =
                |k: f64| rate.is_some_and(|x| (x as f64) < k * ceiling_bps(window, rtt) as f64);
            // the window the last ACK advertised is stale once data arrived after it: a reader
            // that just took a chunk (curl --limit-rate: 162 KB unread under a 233 KB window
            // advertised before they came) shows it open; a flow at under half what the window
            // allows over the RTT with that backlog at both readings was held by its reader
            let far_under = ms_path && under(0.5);
            let persistent = unread(r.now) >= BACKLOG_SHARE * w
                && unread(b) >= BACKLOG_SHARE * w
                && ((adv as f64) < 0.75 * w || far_under);
            // held by the advertised window, data unread at both readings, advertised under half
            // at one (nginx taking an upload into a locked 64 KiB buffer in bursts: 36 KB unread
            // at one reading of two, or 55-60 % at both and 80 % open: the buffer's)
            let held = ms_path
                && rwnd_share.is_some_and(|x| x >= 0.5)
                && under(WINDOW_LIMITED_SHARE)
                && (unread(r.now) >= mss && unread(b) >= mss)
                && (adv.min(b.rcv_wnd.map_or(adv, u64::from)) as f64) < 0.5 * w;
            // a reader that drained between the readings (half the window unread at one, or data
            // read late), the flow under a quarter of what the window allows over the RTT, far
            // under what a window or path would hold it to (`curl --limit-rate 1M`: 325 KB unread,
            // then none, at 7 % of window / RTT; or none at either, the last data read 153 ms late)
            let drained = ms_path
                && under(DRAINED_RATE_SHARE)
                && (most >= 0.5 * w || read_late(r.now).or(read_late(b)).is_some());
            // a window over 64 KiB three quarters unread at a reading, the flow under half of it:
            // the reader's (that upload: 94 % unread at a reading, the flow at 61 %: the buffer's)
            let full = w > 65536.0 && most >= 0.75 * w && far_under;
            below_cap && (persistent || held || drained || full)
        }
        None => unread(r.now) >= 0.5 * w && (adv as f64) < 0.5 * w,
    }
}
