//! The sending end: its buffer, its chrono, the peer's window, one snapshot over its life.
use super::*;

/// nginx `listen ... sndbuf=32k` at 20 ms with reno: 46 Mbit/s, the kernel's sndbuf-limited
/// chrono at 0 for this sendfile pattern; the full, locked send buffer is the evidence.
#[test]
fn a_small_send_buffer_is_found_without_the_chrono() {
    let s = |ts: f64, acked: u64| {
        let mut f = snd(ts, acked, 1_000_000 * ts as u64, 0);
        f.sk_sndbuf = Some(65_536);
        f.sndbuf_locked = Some(true);
        f.wmem_queued = Some(60_000);
        f.snd_wnd = Some(3_000_000);
        f.snd_cwnd = Some(100);
        f.packets_out = Some(40);
        f.srtt_us = Some(20 * MS);
        f.min_rtt_us = Some(20 * MS);
        f
    };
    let v = judge(&s(1.0, 0), &s(2.0, 46_000_000 / 8), &host(), None);
    assert_eq!(v.limit, Limit::Sndbuf, "{v:?}");
    assert!(v.setting.as_ref().unwrap().contains("SO_SNDBUF"));
    assert!(v.suggested.unwrap().contains("SO_SNDBUF request"));
    // a reading that caught the locked buffer drained between two writes: the rate still
    // follows what the buffer allows over the RTT
    let mut d = s(2.0, 46_000_000 / 8);
    d.wmem_queued = Some(8_000);
    d.packets_out = Some(5);
    assert_eq!(judge(&s(1.0, 0), &d, &host(), None).limit, Limit::Sndbuf);
    // the same sender held by its congestion window instead (20 segments, the buffer's data
    // waiting unsent, and a rate far under what the buffer allows): not the buffer
    let c = |ts: f64, acked: u64| {
        let mut f = s(ts, acked);
        f.sndbuf_locked = Some(false);
        f.snd_cwnd = Some(20);
        f.packets_out = Some(20);
        f
    };
    assert_ne!(
        judge(&c(1.0, 0), &c(2.0, 10_000_000 / 8), &host(), None).limit,
        Limit::Sndbuf
    );
}

/// The lab's sender at tcp_wmem[2] 128 KiB on a 20 ms path with bbr, a second apart: full at
/// the earlier reading with most of it in flight (116 KB queued, 103 KB out), and at the later
/// one 123 KB queued of which 54 KB wait for the pacer (bbr paces at the rate it measured,
/// which the buffer set); the kernel counted 43 % of the interval sndbuf-limited. The rate
/// (40.5 Mbit/s) is what the earlier reading let into flight over the RTT: the buffer, not
/// the path (it was judged `not-window-limited`).
#[test]
fn a_send_buffer_at_its_maximum_half_waiting_for_the_pacer_binds() {
    let s = |ts: f64, acked: u64, busy: u64, limited: u64, queued: u32, out: u32, cwnd: u32| {
        let mut f = snd(ts, acked, busy, 0);
        f.sk_sndbuf = Some(131_072);
        f.wmem_queued = Some(queued);
        f.packets_out = Some(out);
        f.snd_cwnd = Some(cwnd);
        f.unsent = Some(queued.saturating_sub(out * 1448 + 15_000));
        f.sndbuf_limited_us = Some(limited);
        f.snd_wnd = Some(593_920);
        f.srtt_us = Some(20_974);
        f.rttvar_us = Some(884);
        f.min_rtt_us = Some(20_088);
        f
    };
    let h = HostLimits {
        tcp_wmem: Some([4096, 16384, 131_072]),
        ..host()
    };
    let before = s(1.0, 2_716_729, 588_000, 192_000, 116_120, 71, 236);
    let now = s(1.996, 7_764_297, 1_584_000, 616_000, 122_928, 41, 192);
    let v = judge(&before, &now, &h, None);
    assert_eq!(v.limit, Limit::Sndbuf, "{v:?}");
    assert!(
        v.setting
            .as_ref()
            .unwrap()
            .contains("waiting for the pacer"),
        "{v:?}"
    );
    // the same later reading after an earlier one the path held (little of the buffer in
    // flight), at 30 Mbit/s where the buffer lets out 50 over the RTT: the writer waited on it
    // a fifth of the interval, but the rate is not what it lets out
    let held = s(1.0, 2_716_729, 588_000, 192_000, 116_120, 20, 236);
    let now = s(1.996, 6_451_729, 1_584_000, 392_000, 122_928, 41, 192);
    assert_ne!(judge(&held, &now, &h, None).limit, Limit::Sndbuf);
}

/// nginx after its fix (`sndbuf=943642`: sk_sndbuf 1 887 284) behind 300 Mbit/s with bbr, read
/// in one snapshot while the RTT stood at 60 ms over a 20 ms path: the rate follows what the
/// buffer lets out over that RTT, but the buffer lets out the 300 Mbit/s asked at the base RTT:
/// not the limit (a bigger one would not raise the rate towards the target).
#[test]
fn a_buffer_that_allows_the_target_is_not_named() {
    let s = |ts: f64, acked: u64| {
        let mut f = snd(ts, acked, 1_000_000 * ts as u64, 0);
        f.sk_sndbuf = Some(1_887_284);
        f.sndbuf_locked = Some(true);
        f.wmem_queued = Some(1_800_000);
        f.snd_wnd = Some(8_000_000);
        f.snd_cwnd = Some(2000);
        f.packets_out = Some(1400);
        f.srtt_us = Some(60 * MS);
        f.rttvar_us = Some(30 * MS);
        f.min_rtt_us = Some(20 * MS);
        f
    };
    let v = judge(
        &s(1.0, 0),
        &s(1.25, 280_000_000 / 8 / 4),
        &host(),
        Some(300_000_000),
    );
    assert_ne!(v.limit, Limit::Sndbuf, "{v:?}");
    // without a target the same reading sizes for 1 Gbit/s, which that buffer does not let out
    let v = judge(&s(1.0, 0), &s(1.25, 280_000_000 / 8 / 4), &host(), None);
    assert_eq!(v.limit, Limit::Sndbuf, "{v:?}");
}

/// A bbr sender behind a 200 Mbit/s bottleneck with an 8 MB window and a full 4 MB send buffer:
/// pacing holds most of the buffer unsent; the buffer is not the limit.
#[test]
fn a_full_buffer_waiting_to_be_sent_is_not_the_buffer() {
    let s = |ts: f64, acked: u64| {
        let mut f = snd(ts, acked, (ts * 1e6) as u64, 0);
        f.sk_sndbuf = Some(4 << 20);
        f.wmem_queued = Some(4 << 20);
        f.snd_wnd = Some(12 << 20);
        f.snd_cwnd = Some(1400);
        f.packets_out = Some(690);
        f.srtt_us = Some(42 * MS);
        f.min_rtt_us = Some(40 * MS);
        f
    };
    let v = judge(&s(1.0, 0), &s(2.0, 191_000_000 / 8), &host(), None);
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
}

#[test]
fn the_sndbuf_chrono_supports_it_too() {
    let mut n = snd(2.0, 10_000_000, 1_000_000, 0);
    n.sndbuf_limited_us = Some(900_000);
    assert_eq!(
        judge(&snd(1.0, 0, 0, 0), &n, &host(), None).limit,
        Limit::Sndbuf
    );
}

/// The peer's window judged by rates: cubic shows ~99 % rwnd-limited, bbr ~40 % for the same
/// window; the verdict is the same.
#[test]
fn peer_window_alike_for_every_congestion_control() {
    for rwnd_share in [990_000, 420_000] {
        // 524280 B / 18 ms = 233 Mbit/s; 205 Mbit/s measured
        let v = judge(
            &snd(1.0, 0, 0, 0),
            &snd(2.0, 205_000_000 / 8, 1_000_000, rwnd_share),
            &host(),
            None,
        );
        assert_eq!(
            (v.limit, v.side),
            (Limit::PeerWindow, Side::Sending),
            "{v:?}"
        );
    }
    let v = judge(
        &snd(1.0, 0, 0, 0),
        &snd(2.0, 40_000_000 / 8, 1_000_000, 0),
        &host(),
        None,
    );
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
}

/// One snapshot of a sender answers (as `ss -ti` does): bytes over busy time.
#[test]
fn one_snapshot_judges_the_sender_over_its_life() {
    // 2 GB acknowledged over 80 s busy: 200 Mbit/s at a 233 Mbit/s ceiling
    let n = snd(100.0, 2_000_000_000, 80_000_000, 78_400_000);
    let v = verdict(&Input {
        now: &n,
        before: None,
        host: &host(),
        target_bps: None,
        peer: None,
        min_rcv_rtt_us: None,
    });
    assert_eq!(v.basis, Basis::Life);
    assert_eq!(v.limit, Limit::PeerWindow, "{v:?}");
    assert_eq!(v.rate_bps, Some(200_000_000));
}

/// The lab's sndbuf row (tcp_wmem[2] 256 KiB at the sender, 20 ms, 300 Mbit/s, reno), one
/// snapshot of the sender alone, as recorded in the five-run proof (run 4): at the first reading
/// the buffer at its maximum was full (200 312 B queued of 262 144, 137 segments in flight, none
/// waiting); a quarter second later the writer had not refilled it (65 992 B queued, all in
/// flight, the kernel's app-limited mark set, 0 ms more sndbuf-limited). It was judged
/// `app-limited`; the interval's rate (77 Mbit/s) is what the full buffer let into flight over
/// the RTT, so the buffer set it and the later reading caught the writer between two writes.
#[test]
fn a_writer_caught_between_two_writes_is_still_its_buffer() {
    let s = |ts: f64, acked: u64, busy: u64, queued: u32, out: u32| {
        let mut f = snd(ts, acked, busy, 0);
        f.sk_sndbuf = Some(262_144);
        f.wmem_queued = Some(queued);
        f.packets_out = Some(out);
        f.unsent = Some(0);
        f.snd_cwnd = Some(634);
        f.snd_wnd = Some(1_105_920);
        f.sndbuf_limited_us = Some(224_000);
        f.srtt_us = Some(20_800);
        f.min_rtt_us = Some(20_213);
        f
    };
    let h = HostLimits {
        tcp_wmem: Some([4096, 16384, 262_144]),
        ..host()
    };
    let before = s(2.0, 18_218_257, 1_956_000, 200_312, 137);
    let mut now = s(2.257_65, 20_709_377, 2_216_000, 65_992, 45);
    now.app_limited = Some(true);
    let v = judge(&before, &now, &h, Some(300_000_000));
    assert_eq!(v.limit, Limit::Sndbuf, "{v:?}");
    assert!(v.refused.is_empty(), "{:?}", v.refused);
    let why = v.setting.as_deref().unwrap();
    assert!(why.contains("200312 B queued"), "{why}");
    assert!(why.contains("tcp_wmem[2]"), "{why}");
    // its fix raises tcp_wmem[2] past 256 KiB
    let cmd = &v.fix.as_ref().unwrap().commands[0];
    assert!(cmd.contains("net.ipv4.tcp_wmem='4096 16384 "), "{cmd}");
    // a writer that really is slow: the same readings at a rate far under what the full
    // buffer let into flight (a burst written just before the first reading) stays app-limited
    let slow = s(2.257_65, 18_218_257 + 300_000, 2_216_000, 65_992, 45);
    let mut slow = slow;
    slow.app_limited = Some(true);
    assert_eq!(
        judge(&before, &slow, &h, Some(300_000_000)).limit,
        Limit::AppLimited
    );
}

/// A sender on veth to a receiver locked at 32 KiB (SO_RCVBUF 16K), read over a second while
/// the receiver's full buffer dropped segments (21 retransmitted over the life): the kernel
/// counted it stopped by the peer's window 55 % of its busy time, and the later reading caught
/// its congestion window at 10 segments, just after a recovery. The window stopped it for most
/// of the interval; a congestion window that holds it for a moment does not outrank that.
#[test]
fn a_window_that_stopped_the_sender_most_of_the_interval_outranks_a_cwnd_just_cut() {
    let s = |ts: f64, acked: u64, busy: u64, rwnd: u64, cwnd: u32| {
        let mut f = snd(ts, acked, busy, rwnd);
        f.snd_wnd = Some(27_512);
        f.snd_wscale = Some(0);
        f.srtt_us = Some(19);
        f.min_rtt_us = Some(6);
        f.rttvar_us = Some(10);
        f.sk_sndbuf = Some(1_299_456);
        f.wmem_queued = Some(16_200);
        f.snd_cwnd = Some(cwnd);
        f.packets_out = Some(11);
        f.total_retrans = Some(21);
        f.snd_ssthresh = Some(142);
        f.unsent = Some(0);
        f
    };
    let limit = |before: &SockFacts, now: &SockFacts| {
        let v = judge(before, now, &host(), None);
        assert_eq!(v.side, Side::Sending, "{v:?}");
        v.limit
    };
    // the gate's reading: 5.33 Gbit/s over the second, 55 % of it rwnd-limited
    let before = s(1.0, 968_607_545 - 666_000_000, 504_000, 250_000, 40);
    let most = s(2.0, 968_607_545, 1_504_000, 804_000, 10);
    assert_eq!(limit(&before, &most), Limit::PeerWindow);
    // a third of it rwnd-limited, the congestion window full only at the later reading: the
    // window still (the congestion window held it for a moment)
    let third = s(2.0, 968_607_545, 1_504_000, 583_000, 10);
    assert_eq!(limit(&before, &third), Limit::PeerWindow);
    // the congestion window full at both readings, a third rwnd-limited: not the peer's window
    let mut held = s(1.0, 968_607_545 - 666_000_000, 504_000, 250_000, 10);
    assert_ne!(limit(&held, &third), Limit::PeerWindow);
    // its why names the congestion window, and the few segments the interval retransmitted
    // (3 of ~460,000) rather than saying there were none
    held.total_retrans = Some(18);
    let v = judge(&held, &third, &host(), None);
    let why = v.setting.unwrap_or_default();
    assert!(why.contains("congestion window"), "{why}");
    assert!(
        why.contains("with 3 segments retransmitted in the interval"),
        "{why}"
    );
}

/// OpenSSH (`ssh host cat big`) over 100 ms: 2 MB queued of a 4 MiB buffer autotuned to
/// tcp_wmem[2], most of it in flight, at 112 Mbit/s; its own channel window binds above TCP. The
/// kernel counted 0 % sndbuf-limited and neither reading found the writer waiting for room
/// (`SOCK_NOSPACE`): the buffer is not what held it (a larger tcp_wmem moved nothing). The same
/// readings with the writer found waiting are the buffer's, as before the fact was read.
#[test]
fn a_send_buffer_its_writer_never_waited_on_does_not_bind() {
    let s = |ts: f64, acked: u64, waiting: bool| {
        let mut f = snd(ts, acked, 1_000_000 * ts as u64, 0);
        f.sk_sndbuf = Some(4 << 20);
        f.wmem_queued = Some(2_900_000);
        f.packets_out = Some(1400);
        f.snd_cwnd = Some(4000);
        f.unsent = Some(0);
        f.snd_wnd = Some(12 << 20);
        f.srtt_us = Some(101 * MS);
        f.min_rtt_us = Some(100 * MS);
        f.writer_waiting = Some(waiting);
        f
    };
    let h = HostLimits {
        tcp_wmem: Some([4096, 16384, 4 << 20]),
        ..host()
    };
    let rate = 112_000_000 / 8;
    let v = judge(&s(1.0, 0, false), &s(2.0, rate, false), &h, None);
    assert_ne!(v.limit, Limit::Sndbuf, "{v:?}");
    assert!(
        v.fix.is_none(),
        "no buffer fix for a writer that never waited: {v:?}"
    );
    let v = judge(&s(1.0, 0, false), &s(2.0, rate, true), &h, None);
    assert_eq!(v.limit, Limit::Sndbuf, "{v:?}");
    // the kernel's own count stands for the flag: a writer counted sndbuf-limited waited
    let mut counted = s(2.0, rate, false);
    counted.sndbuf_limited_us = Some(300_000);
    assert_eq!(
        judge(&s(1.0, 0, false), &counted, &h, None).limit,
        Limit::Sndbuf
    );
}

/// iperf3 --fq-rate 100M on a 20 ms path that carries 500 Mbit/s: the application capped its
/// pacing rate (SO_MAX_PACING_RATE) and the flow runs at the cap: `pacing`, its fix in the
/// application, never a window or a TCP setting; with `--target` under the cap it is not the
/// limit, nor is a cap the flow runs far under.
#[test]
fn a_sender_at_its_own_pacing_cap_is_pacing() {
    let s = |ts: f64, acked: u64, cap: Option<u64>| {
        let mut f = snd(ts, acked, 1_000_000 * ts as u64, 0);
        f.pacing_cap_bps = cap;
        f.wmem_queued = Some(400_000);
        f.packets_out = Some(180);
        f.unsent = Some(100_000);
        f.snd_wnd = Some(6 << 20);
        f.srtt_us = Some(20 * MS);
        f.min_rtt_us = Some(20 * MS);
        f.comm = Some("iperf3".into());
        f
    };
    let cap = Some(100_000_000);
    let rate = 96_000_000 / 8;
    let v = judge(&s(1.0, 0, cap), &s(2.0, rate, cap), &host(), None);
    assert_eq!(v.limit, Limit::Pacing, "{v:?}");
    assert_eq!(v.window_limited, Some(false));
    let why = v.setting.as_deref().unwrap();
    assert!(
        why.contains("100.0 Mbit/s") && why.contains("iperf3"),
        "{why}"
    );
    let fix = v.fix.as_ref().unwrap();
    assert!(fix.commands.is_empty(), "nothing to run in TCP: {fix:?}");
    let app = fix.app.as_ref().unwrap();
    assert_eq!(app.option, "SO_MAX_PACING_RATE");
    assert!(app.bytes * 8 > 100_000_000, "the cap is raised: {app:?}");
    // a rate asked that the cap lets out: not the limit
    let v = judge(
        &s(1.0, 0, cap),
        &s(2.0, rate, cap),
        &host(),
        Some(50_000_000),
    );
    assert_ne!(v.limit, Limit::Pacing, "{v:?}");
    // no cap, or one the flow runs far under: not pacing
    for c in [None, Some(1_000_000_000)] {
        let v = judge(&s(1.0, 0, c), &s(2.0, rate, c), &host(), None);
        assert_ne!(v.limit, Limit::Pacing, "{c:?}: {v:?}");
    }
}
