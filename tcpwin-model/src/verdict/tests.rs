//! The judge's decisions, facts in, verdict out: one test per kind of verdict, and one per
//! defect seen on real programs (nginx, curl, iperf3) behind real queues.
use super::*;
use crate::facts::ESTABLISHED;

const MS: u32 = 1000;

fn host() -> HostLimits {
    HostLimits {
        rmem_max: Some(425_984),
        wmem_max: Some(425_984),
        tcp_rmem: Some([4096, 131072, 33554432]),
        tcp_wmem: Some([4096, 16384, 4194304]),
        tcp_window_scaling: Some(true),
        tcp_moderate_rcvbuf: Some(true),
        memory_pressure: Some(false),
        ..Default::default()
    }
}

fn id(l: u16, r: u16) -> SocketId {
    SocketId {
        cookie: Some(l as u64),
        netns: Some(1),
        laddr: Some("10.0.0.2".parse().unwrap()),
        lport: l,
        raddr: Some("10.0.0.1".parse().unwrap()),
        rport: r,
    }
}

/// A receiver at `ts` seconds that got `rx` bytes so far (SO_RCVBUF 4 MB capped by rmem_max
/// 425984: the 003 story).
fn rcv(ts: f64, rx: u64) -> SockFacts {
    SockFacts {
        ts_ns: (ts * 1e9) as u64,
        id: id(5201, 40000),
        state: ESTABLISHED,
        scaling_ratio: Some(162),
        window_clamp: Some(win_from_space(851_968, 162) as u32),
        rcv_ssthresh: Some(500_000),
        rcv_wnd: Some(500_000),
        sk_rcvbuf: Some(851_968),
        rcvbuf_locked: Some(true),
        wscale_ok: Some(true),
        rcv_wscale: Some(7),
        snd_wscale: Some(7),
        rcv_mss: Some(1448),
        advmss: Some(1448),
        unread: Some(0),
        rcv_rtt_us: Some(18 * MS),
        srtt_us: Some(18 * MS),
        min_rtt_us: Some(18 * MS),
        bytes_received: Some(rx),
        bytes_acked: Some(1),
        ..Default::default()
    }
}

/// The sender of the same connection: `acked` bytes so far, its chrono times (µs).
fn snd(ts: f64, acked: u64, busy: u64, rwnd: u64) -> SockFacts {
    SockFacts {
        ts_ns: (ts * 1e9) as u64,
        id: id(40000, 5201),
        state: ESTABLISHED,
        bytes_received: Some(0),
        bytes_acked: Some(acked),
        snd_wnd: Some(524_280),
        snd_wscale: Some(7),
        srtt_us: Some(18 * MS),
        min_rtt_us: Some(18 * MS),
        busy_us: Some(busy),
        rwnd_limited_us: Some(rwnd),
        sndbuf_limited_us: Some(0),
        sk_sndbuf: Some(4 << 20),
        sndbuf_locked: Some(false),
        wmem_queued: Some(1 << 20),
        snd_cwnd: Some(2000),
        packets_out: Some(362),
        mss_cache: Some(1448),
        ..Default::default()
    }
}

fn judge(before: &SockFacts, now: &SockFacts, h: &HostLimits, target: Option<u64>) -> Verdict {
    verdict(&Input {
        now,
        before: Some(before),
        host: h,
        target_bps: target,
        peer: None,
        min_rcv_rtt_us: None,
    })
}

/// Both ends judged, each with the other as its peer.
fn both(
    s: (&SockFacts, &SockFacts),
    r: (&SockFacts, &SockFacts),
    h: &HostLimits,
    target: Option<u64>,
) -> (Verdict, Verdict) {
    let se = End {
        now: s.1,
        before: Some(s.0),
        host: h,
    };
    let re = End {
        now: r.1,
        before: Some(r.0),
        host: h,
    };
    let at = |me: End, peer: End| {
        verdict(&Input {
            now: me.now,
            before: me.before,
            host: me.host,
            target_bps: target,
            peer: Some(peer),
            min_rcv_rtt_us: None,
        })
    };
    (at(se, re), at(re, se))
}

#[test]
fn rcvbuf_capped_by_rmem_max() {
    let h = host();
    // 539 136 B window / 18 ms = 240 Mbit/s ceiling; 210 Mbit/s measured
    let v = judge(
        &rcv(1.0, 0),
        &rcv(2.0, 210_000_000 / 8),
        &h,
        Some(1_000_000_000),
    );
    assert_eq!(v.limit, Limit::RcvbufLocked, "{v:?}");
    assert_eq!(v.window_limited, Some(true));
    assert_eq!(v.bdp_bytes, Some(2_250_000));
    let s = v.suggested.unwrap();
    // 2 250 000 at ratio 162: 3 555 556 of buffer, half of it asked
    assert!(s.contains("3555556") && s.contains(">= 1777778"), "{s}");
    assert!(s.contains("net.core.rmem_max=1777778 (global"), "{s}");
    assert!(v.setting.unwrap().contains("rmem_max=425984"));
}

#[test]
fn wscale_off_says_which_side() {
    let mut h = host();
    let mut n = rcv(2.0, 2_600_000);
    n.wscale_ok = Some(false);
    n.rcv_wscale = Some(0);
    n.window_clamp = Some(65535);
    n.rcvbuf_locked = Some(false);
    let v = judge(&rcv(1.0, 0), &n, &h, None);
    assert_eq!(v.limit, Limit::WscaleOff, "{v:?}");
    assert_eq!(v.window, Some(65535));
    // 65535 B / 18 ms = 29.1 Mbit/s
    assert_eq!(v.ceiling_bps, Some(29_126_666));
    assert!(v.setting.as_ref().unwrap().contains("peer did not offer"));
    h.tcp_window_scaling = Some(false);
    let v = judge(&rcv(1.0, 0), &n, &h, None);
    assert!(v.setting.unwrap().contains("tcp_window_scaling=0"));
    assert!(v
        .suggested
        .unwrap()
        .contains("sysctl -w net.ipv4.tcp_window_scaling=1"));
}

/// A queue at the bottleneck is not the window: base RTT 2 ms, tbf 20 Mbit/s with a deep queue,
/// scaling off at the receiver; srtt 26 ms, 19.3 Mbit/s = 65535 / 26 ms (Little's law), while
/// 65535 / 2 ms would be 262 Mbit/s. Enabling scaling changes nothing.
#[test]
fn a_bottleneck_queue_is_not_blamed_on_the_window() {
    let h = HostLimits {
        tcp_window_scaling: Some(false),
        ..host()
    };
    let off = |mut f: SockFacts| {
        f.wscale_ok = Some(false);
        f.rcv_wscale = Some(0);
        f.window_clamp = Some(65535);
        f.rcvbuf_locked = Some(false);
        f.rcv_rtt_us = Some(26 * MS);
        f.min_rtt_us = Some(2 * MS);
        f
    };
    // the receiver alone: its own RTT estimate against its handshake's min_rtt
    let v = judge(&off(rcv(1.0, 0)), &off(rcv(2.0, 19_300_000 / 8)), &h, None);
    assert_eq!(v.limit, Limit::PathQueue, "{v:?}");
    assert_eq!(v.queue_us, Some(24 * MS));
    assert_eq!(v.window_limited, Some(false));
    assert!(v.suggested.as_ref().unwrap().contains("no window change"));
    // the window being too small, and irrelevant, is said as a contributing fact
    assert_eq!(v.factors[0].limit, Limit::WscaleOff, "{v:?}");
    // the sender alone: srtt against min_rtt, the same verdict
    let s = |ts: f64, acked| {
        let busy = (ts * 1e6) as u64;
        let mut f = snd(ts, acked, busy, busy * 999 / 1000);
        f.snd_wnd = Some(65535);
        f.srtt_us = Some(26 * MS);
        f.min_rtt_us = Some(2 * MS);
        f
    };
    let v = judge(&s(1.0, 0), &s(2.0, 19_300_000 / 8), &h, None);
    assert_eq!(v.limit, Limit::PathQueue, "{v:?}");
    // rwnd-limited 99.9 % does not decide it
    assert!(v.rwnd_limited_share.unwrap() > 0.99);
    // both ends, a few segments unread at the readings (a reader is never caught at zero): the
    // flow fills its window, so the queue, not the reader
    let mut r2 = off(rcv(2.0, 19_300_000 / 8));
    r2.unread = Some(4344);
    let (vs, vr) = both(
        (&s(1.0, 0), &s(2.0, 19_300_000 / 8)),
        (&off(rcv(1.0, 0)), &r2),
        &h,
        None,
    );
    assert_eq!(
        (vs.limit, vr.limit),
        (Limit::PathQueue, Limit::PathQueue),
        "{vr:?}"
    );
}

/// tcp_rmem max 262144 behind 100 Mbit/s: window-limited at 18 ms; once raised, the queue grows
/// to 39 ms and the rate stays: the tool must not ask for more again.
#[test]
fn a_fix_applied_does_not_lead_to_the_same_advice() {
    let h = HostLimits {
        tcp_rmem: Some([4096, 131072, 262144]),
        ..host()
    };
    let auto = |mut f: SockFacts, buf: u32, rtt: u32| {
        f.rcvbuf_locked = Some(false);
        f.scaling_ratio = Some(229);
        f.sk_rcvbuf = Some(buf);
        f.window_clamp = Some(win_from_space(buf as u64, 229) as u32);
        f.rcv_wnd = f.window_clamp;
        f.rcv_rtt_us = Some(rtt);
        f.min_rtt_us = Some(18_000);
        f
    };
    // 234 496 B / 18.7 ms = 100 Mbit/s ceiling, 90 Mbit/s measured
    let v = judge(
        &auto(rcv(1.0, 0), 262_144, 18_700),
        &auto(rcv(2.0, 90_000_000 / 8), 262_144, 18_700),
        &h,
        None,
    );
    assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
    // sized per 100 Mbit/s at the base RTT, not "twice the ceiling"
    let s = v.suggested.unwrap();
    assert!(s.contains("per 100.0 Mbit/s at 18.0 ms base RTT"), "{s}");
    // after the fix: buffer 1 MB, the path's 100 Mbit/s, RTT 39 ms
    let h2 = HostLimits {
        tcp_rmem: Some([4096, 131072, 1 << 20]),
        ..host()
    };
    let v = judge(
        &auto(rcv(1.0, 0), 1 << 20, 39_000),
        &auto(rcv(2.0, 95_500_000 / 8), 1 << 20, 39_000),
        &h2,
        None,
    );
    assert_eq!(v.limit, Limit::PathQueue, "{v:?}");
    assert!(!v.suggested.unwrap().contains("tcp_rmem"));
}

/// `iperf3 -w 8K` on a fast veth: the sender's srtt 48 us, the receiver's rcv_rtt 5 us. Judged
/// alone they disagreed; judged together both ends say the receiver's locked buffer binds.
#[test]
fn the_two_ends_of_one_connection_agree() {
    let h = host();
    let r = |ts: f64, rx: u64| {
        let mut f = rcv(ts, rx);
        f.sk_rcvbuf = Some(16_384);
        f.rcvbuf_locked = Some(true);
        f.scaling_ratio = Some(229);
        f.window_clamp = Some(win_from_space(16_384, 229) as u32);
        f.rcv_wnd = f.window_clamp;
        f.rcv_rtt_us = Some(5);
        f.min_rtt_us = Some(30);
        f.srtt_us = Some(30);
        f
    };
    let s = |ts: f64, acked: u64| {
        let mut f = snd(ts, acked, (ts * 1e6) as u64, (ts * 0.95e6) as u64);
        f.snd_wnd = Some(14_656);
        f.srtt_us = Some(48);
        f.min_rtt_us = Some(30);
        f
    };
    // 14 656 B / 48 us = 2.44 Gbit/s; 2.2 Gbit/s moved
    let moved = 2_200_000_000 / 8;
    // the same at a lower rate: the ACK clock leaves the window partly used, the kernel saw the
    // sender stopped by it 38 % of the time: still the window
    let (vs2, _) = both(
        (&s(1.0, 0), &{
            let mut x = s(2.0, 1_300_000_000 / 8);
            x.rwnd_limited_us = Some(950_000 + 380_000);
            x
        }),
        (&r(1.0, 0), &r(2.0, 1_300_000_000 / 8)),
        &h,
        None,
    );
    assert_eq!(vs2.limit, Limit::RcvbufLocked, "{vs2:?}");
    // reno, the sender stopped by the window half its time, two segments caught unread at a
    // reading, the rate at 40 % of a window / RTT measured in µs: still the locked buffer, not the
    // application
    let (vs3, vr3) = both(
        (&s(1.0, 0), &{
            let mut x = s(2.0, 3_350_000_000 / 8);
            x.srtt_us = Some(12);
            x.min_rtt_us = Some(10);
            x.rwnd_limited_us = Some(950_000 + 520_000);
            // reno's cwnd just above the window, in flight within two segments of it: the
            // window holds the sender, not the cwnd
            x.snd_cwnd = Some(11);
            x.packets_out = Some(10);
            x
        }),
        (&r(1.0, 0), &{
            let mut x = r(2.0, 3_350_000_000 / 8);
            x.unread = Some(2896);
            x
        }),
        &h,
        None,
    );
    assert_eq!(
        (vs3.limit, vr3.limit),
        (Limit::RcvbufLocked, Limit::RcvbufLocked),
        "{vr3:?}"
    );
    let (vs, vr) = both(
        (&s(1.0, 0), &s(2.0, moved)),
        (&r(1.0, 0), &r(2.0, moved)),
        &h,
        None,
    );
    assert_eq!(vs.limit, Limit::RcvbufLocked, "{vs:?}");
    assert_eq!(vr.limit, vs.limit, "{vr:?}");
    // on a 30 µs path the fix is sized per a rate whose window means something (16 KiB at
    // least), not "per 100 Mbit/s" (a 375 B window)
    let fix = vr.suggested.clone().unwrap();
    assert!(
        fix.contains("per 10.00 Gbit/s at 30 us base RTT (window 37500 B"),
        "{fix}"
    );
    assert_eq!(per_rate(18_000), 100_000_000);
    assert_eq!(per_rate(1_000), 1_000_000_000);
    assert_eq!(per_rate(3), 100_000_000_000);
    assert_eq!((vs.side, vr.side), (Side::Sending, Side::Receiving));
    assert_eq!(vs.rtt_us, vr.rtt_us, "one RTT for the connection");
    assert_eq!(vs.peer, Some(r(2.0, 0).id));
    assert!(vr.rtt_source.as_ref().unwrap().contains("sender"));
}

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

#[test]
fn a_queue_seen_once_while_the_flow_runs_at_its_ceiling_is_not_blamed() {
    // autotuning at its cap, 170 of 175 Mbit/s, caught with 198 KB unread once
    let h = HostLimits {
        tcp_rmem: Some([4096, 131072, 524288]),
        ..host()
    };
    let f = |ts: f64, rx: u64, unread: u32, rcv_wnd: u32| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(false);
        n.scaling_ratio = Some(193);
        n.sk_rcvbuf = Some(524288);
        n.window_clamp = Some(395264);
        n.unread = Some(unread);
        n.rcv_wnd = Some(rcv_wnd);
        n
    };
    let v = judge(
        &f(1.0, 0, 0, 395264),
        &f(2.0, 170_000_000 / 8, 198_120, 190_000),
        &h,
        None,
    );
    assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
}

/// tcp_rmem max 512 KB, GRO off (ratio 160), 20 ms: the operator's setting is the primary limit
/// (doubling it doubles the rate), the ratio a contributing factor (+43 % with GRO).
#[test]
fn two_caps_the_setting_first_the_ratio_beside_it() {
    let h = HostLimits {
        tcp_rmem: Some([4096, 131072, 524288]),
        ..host()
    };
    let f = |ts: f64, rx: u64| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(false);
        n.scaling_ratio = Some(160);
        n.sk_rcvbuf = Some(524288);
        n.window_clamp = Some(win_from_space(524288, 160) as u32);
        n.rcv_wnd = n.window_clamp;
        n.rcv_rtt_us = Some(20 * MS);
        n.min_rtt_us = Some(20 * MS);
        n
    };
    let v = judge(&f(1.0, 0), &f(2.0, 112_000_000 / 8), &h, None);
    assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
    let gro = v
        .factors
        .iter()
        .find(|x| x.limit == Limit::LowRatio)
        .expect("the ratio as a factor");
    assert!((gro.window_gain.unwrap() - 229.0 / 160.0).abs() < 1e-9);
    assert!(v
        .suggested
        .unwrap()
        .contains("sysctl -w net.ipv4.tcp_rmem='4096 131072"));
    // when GRO alone reaches the target, GRO is the fix to lead with
    let v = judge(&f(1.0, 0), &f(2.0, 112_000_000 / 8), &h, Some(150_000_000));
    assert_eq!(v.limit, Limit::LowRatio, "{v:?}");
    assert_eq!(v.factors[0].limit, Limit::AutotuneMax);
}

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
    // the same sender held by its congestion window instead: not the buffer
    let mut c = s(2.0, 46_000_000 / 8);
    c.packets_out = Some(99);
    assert_ne!(judge(&s(1.0, 0), &c, &host(), None).limit, Limit::Sndbuf);
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

#[test]
fn autotune_max_does_not_blame_rmem_max() {
    let h = HostLimits {
        tcp_rmem: Some([4096, 131072, 1 << 20]),
        ..host()
    };
    // 937984 B / 18 ms = 417 Mbit/s ceiling
    let mut n = rcv(2.0, 400_000_000 / 8);
    n.rcvbuf_locked = Some(false);
    n.scaling_ratio = Some(229);
    n.sk_rcvbuf = Some(1 << 20);
    n.window_clamp = Some(win_from_space(1 << 20, 229) as u32);
    let v = judge(&rcv(1.0, 0), &n, &h, Some(1_000_000_000));
    assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
    let (set, sug) = (v.setting.unwrap(), v.suggested.unwrap());
    assert!(set.contains("tcp_rmem max=1048576"), "{set}");
    assert!(sug.contains("net.ipv4.tcp_rmem='4096 131072 "), "{sug}");
    assert!(!sug.contains("rmem_max="), "{sug}");
}

/// A fix for another namespace runs there; a global one says so; none lowers a setting.
#[test]
fn fixes_are_safe_to_paste() {
    let h = HostLimits {
        tcp_rmem: Some([4096, 131072, 1 << 20]),
        rmem_max: Some(4_194_304),
        run_in: Some("ip netns exec lab-b".into()),
        ..host()
    };
    let mut n = rcv(2.0, 400_000_000 / 8);
    n.rcvbuf_locked = Some(false);
    n.scaling_ratio = Some(229);
    n.sk_rcvbuf = Some(1 << 20);
    n.window_clamp = Some(win_from_space(1 << 20, 229) as u32);
    let v = judge(&rcv(1.0, 0), &n, &h, Some(1_000_000_000));
    assert!(
        v.suggested
            .as_ref()
            .unwrap()
            .contains("ip netns exec lab-b sysctl -w net.ipv4.tcp_rmem="),
        "{v:?}"
    );
    // a locked buffer capped by a large rmem_max: rmem_max is never suggested lower
    let mut n = rcv(2.0, 210_000_000 / 8);
    n.sk_rcvbuf = Some(8_388_608);
    n.window_clamp = Some(win_from_space(8_388_608, 162) as u32);
    let v = judge(&rcv(1.0, 0), &n, &h, Some(100_000_000));
    let s = v.suggested.unwrap_or_default();
    assert!(
        !s.contains("rmem_max=") || s.contains("rmem_max=4194304"),
        "{s}"
    );
}

#[test]
fn low_ratio_on_a_pinned_buffer_when_gro_alone_reaches_the_target() {
    let h = HostLimits {
        tcp_moderate_rcvbuf: Some(false),
        tcp_rmem: Some([4096, 1 << 20, 1 << 20]),
        ..host()
    };
    // 663552 B / 36 ms = 147 Mbit/s ceiling; the path's 200 Mbit/s needs 900 000 B: GRO's
    // 937 984 reaches it
    let f = |ts: f64, rx: u64| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(false);
        n.sk_rcvbuf = Some(1 << 20);
        n.window_clamp = Some(win_from_space(1 << 20, 162) as u32);
        n.rcv_rtt_us = Some(36 * MS);
        n.min_rtt_us = Some(36 * MS);
        n
    };
    let v = judge(&f(1.0, 0), &f(2.0, 140_000_000 / 8), &h, Some(200_000_000));
    assert_eq!(v.limit, Limit::LowRatio, "{v:?}");
}

#[test]
fn window_clamp_below_the_buffer() {
    let mut n = rcv(2.0, 50_000_000 / 8);
    n.rcvbuf_locked = Some(false);
    n.window_clamp = Some(100_000);
    let v = judge(&rcv(1.0, 0), &n, &host(), None);
    assert_eq!(v.limit, Limit::WindowClamp, "{v:?}");
}

#[test]
fn memory_pressure() {
    let mut n = rcv(2.0, 200_000_000 / 8);
    n.rcvbuf_locked = Some(false);
    n.rcv_ssthresh = Some(4 * 1448);
    let h = HostLimits {
        memory_pressure: Some(true),
        ..host()
    };
    // the window at 4 x advmss: 5792 B / 18 ms = 2.6 Mbit/s
    n.window_clamp = Some(5792);
    n.bytes_received = Some(2_400_000 / 8);
    assert_eq!(
        judge(&rcv(1.0, 0), &n, &h, None).limit,
        Limit::MemoryPressure
    );
}

#[test]
fn a_slow_flow_is_not_window_limited_and_idle_is_idle() {
    // 40 Mbit/s through a bottleneck with a 240 Mbit/s ceiling, no queue
    let v = judge(&rcv(1.0, 0), &rcv(2.0, 40_000_000 / 8), &host(), None);
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
    assert_eq!(v.window_limited, Some(false));
    let v = judge(&rcv(1.0, 5), &rcv(2.0, 5), &host(), None);
    assert_eq!(v.limit, Limit::Idle);
}

#[test]
fn absent_facts_give_unknown() {
    let mut n = rcv(2.0, 1_000_000);
    n.rcv_rtt_us = None;
    n.srtt_us = None;
    let v = judge(&rcv(1.0, 0), &n, &host(), None);
    assert_eq!(v.limit, Limit::Unknown);
    let ids: std::collections::BTreeSet<&str> = Limit::ALL.iter().map(|l| l.id()).collect();
    assert_eq!(ids.len(), Limit::ALL.len());
    for l in Limit::ALL {
        assert_eq!(serde_json::to_value(l).unwrap(), l.id());
    }
}

/// On 6.16-6.17 a long-RTT flow held by a window that autotuning should have grown is the
/// kernel's known regression; on 6.18 the same socket is still growing.
#[test]
fn the_kernel_version_is_cited_where_it_bears() {
    let f = |ts: f64, rx: u64| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(false);
        n.scaling_ratio = Some(229);
        n.sk_rcvbuf = Some(2 << 20);
        n.window_clamp = Some(win_from_space(2 << 20, 229) as u32);
        n.rcv_rtt_us = Some(40 * MS);
        n.min_rtt_us = Some(40 * MS);
        n
    };
    // 1 876 000 B / 40 ms = 375 Mbit/s; 360 measured: window-bound, tcp_rmem max 32 MB
    let at = |kernel: &str| {
        let h = HostLimits {
            kernel: Some(kernel.into()),
            ..host()
        };
        judge(&f(1.0, 0), &f(2.0, 360_000_000 / 8), &h, None)
    };
    let v = at("6.17.2");
    assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
    assert!(
        v.setting.as_ref().unwrap().contains("could not double"),
        "{v:?}"
    );
    let v = at("6.18.44");
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
    assert!(v.setting.unwrap().contains("can still grow"));
}
