//! The sending host: its own send buffer, its congestion window, and the peer's window as a
//! sender alone sees it.
use super::{
    end::End,
    sizing::{ceiling_bps, fmt_rate, fmt_rtt, sysctl_fix, Sizing},
    Limit, Verdict,
};

/// A sender the kernel counted sndbuf-limited for more than this share of its busy time is
/// bound by its own send buffer.
const SNDBUF_LIMITED_SHARE: f64 = 0.5;
/// Data queued to send at this share of the send buffer or more: the application is blocked on
/// its buffer.
const SNDBUF_FULL: f64 = 0.5;
/// A full send buffer with at least this share of it in flight: the buffer, not pacing or the
/// path, holds the data back.
const SNDBUF_SENT: f64 = 0.5;

/// The sender's congestion window holds it: in flight within two segments of cwnd, and cwnd
/// below the peer's window (a cwnd at or above the peer's window never gets to hold anything:
/// reno's cwnd stays near 10 segments behind a window of 8.75, iperf3 -w 8K).
pub(super) fn cwnd_bound(s: End) -> Option<u64> {
    let mss = s.now.mss_cache? as u64;
    let cwnd = s.now.snd_cwnd? as u64 * mss;
    if s.now.snd_wnd.is_some_and(|w| cwnd >= w as u64) {
        return None;
    }
    let inflight = s.now.inflight_bytes()?;
    (inflight + 2 * mss >= cwnd).then_some(inflight)
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
    v.limit = Limit::Sndbuf;
    v.window_limited = Some(false);
    v.setting = Some(why);
    let need = 2 * sizing.window();
    let cur = s.now.sk_sndbuf.unwrap_or(0) as u64;
    v.suggested = Some(if s.now.sndbuf_locked == Some(true) {
        format!(
            "{}: the application's SO_SNDBUF request >= {} (or none: the kernel autotunes it)",
            sizing.words(),
            need.div_ceil(2).max(cur / 2 + 1)
        )
    } else {
        let max = s.host.tcp_wmem.map(|t| t[2]).unwrap_or(0);
        let t = s.host.tcp_wmem.unwrap_or([4096, 16384, 4194304]);
        if need > max {
            format!(
                "{}: {}",
                sizing.words(),
                sysctl_fix(
                    s.host,
                    "net.ipv4.tcp_wmem",
                    format!("'{} {} {need}'", t[0], t[1]),
                    false
                )
            )
        } else {
            format!(
                "{}: tcp_wmem max {max} already allows it; the application's writes are what hold it",
                sizing.words()
            )
        }
    });
    true
}

/// Why the sender's own buffer binds, or None: data queued up to the send buffer and mostly in
/// flight while the peer's window would take more (a congestion window that held the flow would
/// leave the buffer's data unsent; one trimmed to what the buffer lets out does not bind); an
/// application's SO_SNDBUF the rate follows over the RTT (a reading may catch the buffer drained
/// between two writes: nginx `sndbuf=32k`); or the kernel's sndbuf-limited time.
fn sndbuf_bound(s: End, rate: Option<u64>, rtt: u32) -> Option<String> {
    let f = s.now;
    let sndbuf = f.sk_sndbuf? as u64;
    let share = s.chrono_share(|f| f.sndbuf_limited_us);
    let locked = if f.sndbuf_locked == Some(true) {
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
    let queued = f.wmem_queued? as u64;
    let peer_window = f.snd_wnd? as u64;
    let full = queued as f64 >= SNDBUF_FULL * sndbuf as f64;
    // the windows would take at least twice what the buffer holds
    let room = peer_window >= 2 * sndbuf;
    // most of what is queued is in flight: nothing waits to be sent (a sender paced or held by
    // the path or its congestion window keeps most of a full buffer unsent)
    let all_sent = f
        .inflight_bytes()
        .is_some_and(|i| i as f64 >= SNDBUF_SENT * queued as f64);
    let moving = rate.is_some_and(|r| r > 0);
    // the kernel lets up to twice sk_sndbuf be queued (wmem_queued counts overhead): a locked
    // buffer's ceiling over the RTT, which the rate follows
    let follows_locked = f.sndbuf_locked == Some(true)
        && rate.is_some_and(|r| r as f64 >= SNDBUF_FULL * ceiling_bps(2 * sndbuf, rtt) as f64);
    (room && moving && ((full && all_sent) || follows_locked)).then(|| {
        format!(
            "the send buffer (sk_sndbuf {sndbuf}, {locked}) is full ({queued} B queued) while the peer's window ({peer_window} B) and the congestion window allow more: {} at most over {}{}",
            fmt_rate(ceiling_bps(sndbuf, rtt)),
            fmt_rtt(rtt),
            share
                .map(|x| format!("; sndbuf-limited time {:.0} %", x * 100.0))
                .unwrap_or_default()
        )
    })
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
