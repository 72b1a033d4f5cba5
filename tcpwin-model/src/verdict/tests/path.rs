//! The path: queues not blamed on the window, both ends agreeing, slow flows, absent facts.
use super::*;

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
    // the path is the lowest ceiling, by the judge's own test of a queue
    assert_eq!(vr.ceilings[0].kind, Kind::Path, "{:?}", vr.ceilings);
    assert_eq!(vr.ceilings[0].rate_bps, vr.rate_bps.unwrap());
    // the same RTT swinging (variance over half the RTT's excess: stalls, not a queue; the
    // receiver's own estimate at the base, where a stalling reader keeps it) is no queue to the
    // judge, nor a ceiling of the path
    let swings = |ts: f64, acked| {
        let mut f = s(ts, acked);
        f.rttvar_us = Some(20 * MS);
        f
    };
    let at_base = |mut f: SockFacts| {
        f.rcv_rtt_us = Some(2 * MS);
        f
    };
    let (vs, _) = both(
        (&swings(1.0, 0), &swings(2.0, 19_300_000 / 8)),
        (&at_base(off(rcv(1.0, 0))), &at_base(r2.clone())),
        &h,
        None,
    );
    assert_ne!(vs.limit, Limit::PathQueue, "{vs:?}");
    assert!(
        vs.ceilings.iter().all(|c| c.kind != Kind::Path),
        "{:?}",
        vs.ceilings
    );
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
    // least), not "per 100 Mbit/s" (a 375 B window); the window is its BDP and a quarter
    let fix = vr.suggested.clone().unwrap();
    assert!(
        fix.contains("for 10.00 Gbit/s at 30 us base RTT (window 46875 B"),
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
