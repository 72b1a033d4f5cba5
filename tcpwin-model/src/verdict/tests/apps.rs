//! A receiver that does not read: zero windows, backlogs, readers in bursts.
use super::*;

/// nginx to `curl --limit-rate 1M`: the receive queue full, a zero window, bytes flat for the
/// interval: a stall, not idle; at both ends.
#[test]
fn a_zero_window_stall_is_the_application_not_idle() {
    let h = host();
    let stalled = |ts: f64| {
        let mut f = rcv(ts, 50_000_000);
        f.rcvbuf_locked = Some(false);
        f.rcv_wnd = Some(0);
        f.unread = Some(2_247_776);
        f
    };
    let v = judge(&stalled(1.0), &stalled(2.0), &h, None);
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    assert_eq!(v.side, Side::Idle);
    // the sender sees the zero window
    let zero = |ts: f64| {
        let mut f = snd(ts, 50_000_000, 1_000_000, 0);
        f.snd_wnd = Some(0);
        f.packets_out = Some(0);
        f
    };
    let v = judge(&zero(1.0), &zero(2.0), &h, None);
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    assert!(v
        .setting
        .as_ref()
        .unwrap()
        .contains("peer advertises a zero window"));
    // no arithmetic on a zero window
    assert_eq!(v.ceiling_bps, None);
    let text = format!("{v:?}");
    assert!(
        !text.contains("0 kbit/s") && !text.contains(">= 0 B"),
        "{text}"
    );
    let (vs, vr) = both(
        (&zero(1.0), &zero(2.0)),
        (&stalled(1.0), &stalled(2.0)),
        &h,
        None,
    );
    assert_eq!(
        (vs.limit, vr.limit),
        (Limit::AppNotReading, Limit::AppNotReading)
    );
    // a connection never accept()ed, its window closed: one snapshot says it
    let v = verdict(&Input {
        now: &stalled(2.0),
        before: None,
        host: &h,
        target_bps: None,
        peer: None,
        min_rcv_rtt_us: None,
    });
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
}

/// A loopback transfer to a reader that sleeps between reads, caught at a zero window with data
/// unread, having moved data over the interval: `app-not-reading`, and its ceilings ranked as
/// any moving connection's (they were empty: the zero window returned before the RTTs were
/// read, in 2 of 3 readings of a 414 Mbit/s transfer).
#[test]
fn a_reader_at_a_zero_window_still_ranks_its_ceilings() {
    let h = host();
    let at = |ts: f64, rx: u64| {
        let mut f = rcv(ts, rx);
        f.rcvbuf_locked = Some(false);
        f.rcv_wnd = Some(0);
        f.unread = Some(2_247_776);
        f
    };
    // 414 Mbit/s over the second
    let v = judge(&at(1.0, 0), &at(2.0, 51_750_000), &h, None);
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    assert!(!v.ceilings.is_empty(), "{v:?}");
    assert!(v.ceilings.iter().any(|c| c.kind == Kind::ReceiveBuffer));
    assert!(v.base_rtt_us.is_some());
}

/// A slow reader with bbr: the advertised window small because of the backlog, at both ends of
/// the interval, while the clamp is large.
#[test]
fn a_reader_behind_keeps_the_advertised_window_small() {
    let slow = |ts: f64, rx: u64, unread: u32| {
        let mut f = rcv(ts, rx);
        f.rcvbuf_locked = Some(false);
        f.sk_rcvbuf = Some(1_000_000);
        f.window_clamp = Some(795_953);
        f.rcv_wnd = Some(120_000);
        f.unread = Some(unread);
        f
    };
    let v = judge(
        &slow(1.0, 0, 600_000),
        &slow(2.0, 20_000_000 / 8, 640_000),
        &host(),
        None,
    );
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    assert!(
        !v.setting.as_ref().unwrap().contains("SO_RCVLOWAT"),
        "{v:?}"
    );
    // the application's own wake-up threshold, where it set one, is named beside the backlog
    let lowat = |ts: f64, rx: u64, unread: u32| {
        let mut f = slow(ts, rx, unread);
        f.rcvlowat = Some(262_144);
        f
    };
    let v = judge(
        &lowat(1.0, 0, 600_000),
        &lowat(2.0, 20_000_000 / 8, 640_000),
        &host(),
        None,
    );
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    assert!(
        v.setting
            .as_ref()
            .unwrap()
            .contains("SO_RCVLOWAT 262144: its reads wait for 262144 B queued"),
        "{v:?}"
    );
}

/// The lab's slow reader with reno: the advertised window 63 KB of a 115 KB clamp, 75 KB unread,
/// the sender at what 63 KB allows (rwnd-limited 100 %), its RTT inflated by the receiver's late
/// window updates: the application, not a path queue.
#[test]
fn a_reader_behind_with_reno_is_the_application() {
    let f = |ts: f64, rx: u64, unread: u32| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(false);
        n.scaling_ratio = Some(193);
        n.sk_rcvbuf = Some(152_737);
        n.window_clamp = Some(115_149);
        n.rcv_wnd = Some(63_488);
        n.unread = Some(unread);
        n.rcv_rtt_us = Some(20 * MS);
        n.min_rtt_us = Some(20 * MS);
        n
    };
    let s = |ts: f64, acked: u64| {
        let busy = (ts * 1e6) as u64;
        let mut n = snd(ts, acked, busy, busy);
        n.snd_wnd = Some(63_488);
        n.srtt_us = Some(25_300);
        n.min_rtt_us = Some(20_100);
        n.sk_sndbuf = Some(200_000);
        n.wmem_queued = Some(190_000);
        n.snd_cwnd = Some(200);
        n.packets_out = Some(43);
        n
    };
    let (vs, vr) = both(
        (&s(1.0, 0), &s(2.0, 20_000_000 / 8)),
        (&f(1.0, 0, 68_928), &f(2.0, 20_000_000 / 8, 75_712)),
        &host(),
        None,
    );
    assert_eq!(
        (vs.limit, vr.limit),
        (Limit::AppNotReading, Limit::AppNotReading),
        "{vr:?}"
    );
}

/// A reader behind on a buffer its application locked at 16 KiB (the kernel doubles it), veth
/// (µs RTT): the backlog names the reader, and the locked buffer is named with it, with its fix
/// (a reader late in bursts, e.g. off the CPU beside a busy process, gains from it now); an
/// unlocked buffer that is not at a cap is not named.
#[test]
fn a_reader_behind_a_small_locked_buffer_names_the_lock_too() {
    let f = |ts: f64, rx: u64, unread: u32, locked: bool| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(locked);
        n.sk_rcvbuf = Some(32_768);
        n.window_clamp = Some(win_from_space(32_768, 162) as u32);
        n.rcv_ssthresh = Some(20_000);
        n.rcv_wnd = Some(2_896);
        n.unread = Some(unread);
        n.rcv_rtt_us = Some(60);
        n.srtt_us = Some(60);
        n.min_rtt_us = Some(40);
        n
    };
    let v = judge(
        &f(1.0, 0, 15_000, true),
        &f(2.0, 60_000_000 / 8, 17_376, true),
        &host(),
        None,
    );
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    let lock = v.factors.iter().find(|x| x.limit == Limit::RcvbufLocked);
    let lock = lock.unwrap_or_else(|| panic!("{v:?}"));
    assert!(lock.suggested.contains("late in bursts"), "{lock:?}");
    assert!(lock.fix.is_some(), "{lock:?}");
    // the zero window of one instant says the same
    let mut z = f(2.0, 60_000_000 / 8, 20_000, true);
    z.rcv_wnd = Some(0);
    let v = judge(&f(1.0, 0, 15_000, true), &z, &host(), None);
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    assert!(
        v.factors.iter().any(|x| x.limit == Limit::RcvbufLocked),
        "{v:?}"
    );
    // autotuning free and not at tcp_rmem[2]: no buffer to name (the ratio still is one)
    let v = judge(
        &f(1.0, 0, 15_000, false),
        &f(2.0, 60_000_000 / 8, 17_376, false),
        &host(),
        None,
    );
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    let named: Vec<Limit> = v.factors.iter().map(|x| x.limit).collect();
    assert_eq!(named, [Limit::LowRatio], "{v:?}");
}

/// curl --limit-rate with bbr, caught between two bursts of reading: the window open again, a
/// little unread, the RTT inflated; the sender held by the advertised window 87 % of the time at
/// a quarter of what the window allows: the reader, not a path queue.
#[test]
fn a_burst_reader_between_bursts_is_the_application() {
    let f = |ts: f64, rx: u64, unread: u32| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(false);
        n.scaling_ratio = Some(193);
        n.sk_rcvbuf = Some(313_000);
        n.window_clamp = Some(236_311);
        n.rcv_wnd = Some(200_000);
        n.unread = Some(unread);
        n
    };
    let s = |ts: f64, acked: u64| {
        let busy = (ts * 1e6) as u64;
        let mut n = snd(ts, acked, busy, busy * 87 / 100);
        n.snd_wnd = Some(200_000);
        n.srtt_us = Some(56_900);
        n.min_rtt_us = Some(20_100);
        n.sk_sndbuf = Some(4 << 20);
        n.wmem_queued = Some(2_391_264);
        n.packets_out = Some(20);
        n
    };
    let (vs, vr) = both(
        (&s(1.0, 0), &s(2.0, 8_000_000 / 8)),
        (&f(1.0, 0, 30_000), &f(2.0, 8_000_000 / 8, 4_000)),
        &host(),
        None,
    );
    assert_eq!(
        (vs.limit, vr.limit),
        (Limit::AppNotReading, Limit::AppNotReading),
        "{vr:?}"
    );
}
