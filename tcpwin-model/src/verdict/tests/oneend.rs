//! One end read alone, and the limits beside the window: what a single snapshot may say, stalls
//! and bursts that are not queues, a send buffer behind a queue, losses and a sender that does
//! not write; and the borders between them.
use super::*;

/// A receiver read once (no interval) knows no rate: never a window limit; the caps it would
/// meet are factors with their gain, and the verdict says how to get one.
#[test]
fn a_receiver_snapshot_without_a_rate_never_names_a_window_limit() {
    let mut n = rcv(2.0, 50_000_000);
    n.scaling_ratio = Some(160);
    n.since_data_recv_us = Some(0);
    n.since_data_sent_us = Some(0);
    let v = verdict(&Input {
        now: &n,
        before: None,
        host: &host(),
        target_bps: None,
        peer: None,
        min_rcv_rtt_us: None,
    });
    assert_eq!(v.limit, Limit::Unknown, "{v:?}");
    assert_eq!(v.window_limited, None);
    assert!(
        v.setting.as_ref().unwrap().contains("read it twice"),
        "{v:?}"
    );
    let ids: Vec<Limit> = v.factors.iter().map(|f| f.limit).collect();
    assert!(
        ids.contains(&Limit::RcvbufLocked) && ids.contains(&Limit::LowRatio),
        "{v:?}"
    );
    assert!(v.factors[0]
        .suggested
        .starts_with("a potential gain, not the limit"));
}

/// An idle control connection (iperf3's, a scrape's keep-alive): nothing sent or received for
/// seconds, nothing waiting; idle in one snapshot too, with no fix.
#[test]
fn an_idle_control_connection_is_idle_in_one_snapshot() {
    for receiving in [true, false] {
        let mut n = if receiving {
            rcv(2.0, 300)
        } else {
            snd(2.0, 300, 1000, 0)
        };
        n.since_data_recv_us = Some(5_000_000);
        n.since_data_sent_us = Some(5_000_000);
        n.packets_out = Some(0);
        n.unsent = Some(0);
        n.unread = Some(0);
        let v = verdict(&Input {
            now: &n,
            before: None,
            host: &host(),
            target_bps: None,
            peer: None,
            min_rcv_rtt_us: None,
        });
        assert_eq!(v.limit, Limit::Idle, "{v:?}");
        assert_eq!(v.suggested, None);
        assert!(v
            .setting
            .unwrap()
            .contains("no data sent or received for 5000.0 ms"));
    }
}

/// nginx `limit_rate`, the sender read twice a quarter second apart between two bursts: nothing
/// moved in the interval, but data was sent 300 ms ago: not idle, judged over the connection's
/// life (the application's pace). A second later with nothing sent: idle.
#[test]
fn a_quarter_second_between_bursts_is_not_idle() {
    let s = |ts: f64, since_sent: u64| {
        let mut f = snd(ts, 4_000_000, 1_000_000, 0);
        f.snd_wnd = Some(4 << 20);
        f.snd_cwnd = Some(200);
        f.packets_out = Some(0);
        f.unsent = Some(0);
        f.app_limited = Some(true);
        f.since_data_sent_us = Some(since_sent);
        f.since_data_recv_us = Some(5_000_000);
        f.srtt_us = Some(21 * MS);
        f.min_rtt_us = Some(21 * MS);
        f
    };
    let v = judge(&s(2.0, 50_000), &s(2.25, 300_000), &host(), None);
    assert_eq!(v.limit, Limit::AppLimited, "{v:?}");
    assert_eq!(v.basis, Basis::Life, "{v:?}");
    let v = judge(&s(2.0, 50_000), &s(3.25, 1_300_000), &host(), None);
    assert_eq!(v.limit, Limit::Idle, "{v:?}");
    // its receiver alone: nothing arrived in the quarter second, data 300 ms ago, the window
    // open and nothing unread: not the window (the sender's side tells), not idle
    let r = |ts: f64, since: u64| {
        let mut f = rcv(ts, 4_000_000);
        f.since_data_recv_us = Some(since);
        f.since_data_sent_us = Some(5_000_000);
        f
    };
    let v = judge(&r(2.0, 50_000), &r(2.25, 300_000), &host(), None);
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
    assert!(v
        .setting
        .unwrap()
        .contains("nothing arrived in the interval"));
    let v = judge(&r(2.0, 50_000), &r(3.25, 1_300_000), &host(), None);
    assert_eq!(v.limit, Limit::Idle, "{v:?}");
    // the same quarter second with data received and waiting unread at both readings (`curl
    // --limit-rate 2M` with reno, between two reads): the data waited on the reader, not idle
    let u = |ts: f64, since: u64| {
        let mut f = r(ts, since);
        f.unread = Some(180_000);
        f
    };
    let v = judge(&u(2.0, 50_000), &u(2.25, 300_000), &host(), None);
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    assert!(v
        .setting
        .unwrap()
        .contains("180000 B received waited unread"));
}

/// `curl --limit-rate` with reno, the sender alone: zero-window stalls inflate srtt (47 ms on a
/// 21 ms path) with a large variance (17 ms): not a queue; held by the peer's window most of its
/// busy time yet far under what the window allows: the peer's reader.
#[test]
fn stalls_are_not_queues() {
    let s = |ts: f64, acked| {
        let busy = (ts * 1e6) as u64;
        let mut f = snd(ts, acked, busy, busy * 9 / 10);
        f.snd_wnd = Some(2_000_000);
        f.srtt_us = Some(47 * MS);
        f.rttvar_us = Some(17 * MS);
        f.min_rtt_us = Some(21 * MS);
        f.packets_out = Some(10);
        f
    };
    let v = judge(&s(1.0, 0), &s(2.0, 16_000_000 / 8), &host(), None);
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
    assert!(v
        .setting
        .unwrap()
        .contains("closed by the peer's application"));
    // the same RTT held steadily (a standing queue): the queue
    let mut q = s(2.0, 16_000_000 / 8);
    q.rttvar_us = Some(2 * MS);
    q.snd_wnd = Some(100_000);
    let v = judge(&s(1.0, 0), &q, &host(), None);
    assert_eq!(v.limit, Limit::PathQueue, "{v:?}");
    // a steady RTT over a window the flow drains at a tenth of window / RTT: a queue would
    // drain the full window at window / RTT, so the peer's window was mostly closed
    let mut st = s(2.0, 16_000_000 / 8);
    st.rttvar_us = Some(2 * MS);
    let v = judge(&s(1.0, 0), &st, &host(), None);
    assert_eq!(v.limit, Limit::AppNotReading, "{v:?}");
}

/// nginx `limit_rate 2m`, the receiver alone: its RTT estimate spans the sender's pauses (112 ms
/// on a 21 ms path) while its window is far from full: not a queue; the sender's side decides.
#[test]
fn a_receivers_rtt_over_bursts_is_not_a_queue() {
    let r = |ts: f64, rx| {
        let mut f = rcv(ts, rx);
        f.rcvbuf_locked = Some(false);
        f.sk_rcvbuf = Some(6 << 20);
        f.window_clamp = Some(win_from_space(6 << 20, 229) as u32);
        f.scaling_ratio = Some(229);
        f.rcv_rtt_us = Some(112 * MS);
        f.min_rtt_us = Some(21 * MS);
        f
    };
    let v = judge(&r(1.0, 0), &r(2.0, 16_000_000 / 8), &host(), None);
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
    assert!(v.setting.unwrap().contains("on the sending host"));
}

/// 200 Mbit/s behind a deep queue with reno, nothing set: the queue stretched the RTT until the
/// send buffer looked full (Little's law); at the base RTT the buffer would carry far more, so
/// a bigger one cannot help: the queue, not `sndbuf`.
#[test]
fn a_send_buffer_behind_a_queue_is_not_named() {
    let s = |ts: f64, acked| {
        let busy = (ts * 1e6) as u64;
        let mut f = snd(ts, acked, busy, 0);
        f.sk_sndbuf = Some(4 << 20);
        f.wmem_queued = Some(4 << 20);
        f.snd_wnd = Some(32 << 20);
        f.snd_cwnd = Some(3000);
        f.packets_out = Some(2800);
        f.srtt_us = Some(170 * MS);
        f.rttvar_us = Some(3 * MS);
        f.min_rtt_us = Some(20 * MS);
        f
    };
    let v = judge(&s(1.0, 0), &s(2.0, 191_000_000 / 8), &host(), None);
    assert_eq!(v.limit, Limit::PathQueue, "{v:?}");
}

/// 1 % loss on a 20 ms path with reno: cwnd 12 and full, a retransmission per hundred
/// segments: losses hold the congestion window. With a few retransmissions a flow at its
/// window's ceiling is still the window's.
#[test]
fn losses_hold_the_congestion_window() {
    let s = |ts: f64, acked: u64, retrans: u32| {
        let busy = (ts * 1e6) as u64;
        let mut f = snd(ts, acked, busy, 0);
        f.snd_wnd = Some(4 << 20);
        f.snd_cwnd = Some(12);
        f.packets_out = Some(12);
        f.snd_ssthresh = Some(6);
        f.total_retrans = Some(retrans);
        f.unsent = Some(1 << 20);
        f.srtt_us = Some(21 * MS);
        f.rttvar_us = Some(2 * MS);
        f.min_rtt_us = Some(20 * MS);
        f
    };
    // 7.6 Mbit/s: 656 segments delivered in the second, 7 retransmitted (too few segments for
    // the interval's own share: the connection's life, the same here)
    let v = judge(&s(1.0, 0, 0), &s(2.0, 7_600_000 / 8, 7), &host(), None);
    assert_eq!(v.limit, Limit::Congestion, "{v:?}");
    assert!(v
        .setting
        .as_ref()
        .unwrap()
        .contains("7 segments retransmitted"));
    assert!(v.setting.unwrap().contains("ssthresh 6"));
    // the congestion control is per namespace: a container's sender is told to set it there
    let ns = HostLimits {
        run_in: Some("ip netns exec netns-3c09".into()),
        ..host()
    };
    let v = judge(&s(1.0, 0, 0), &s(2.0, 7_600_000 / 8, 7), &ns, None);
    assert!(
        v.suggested
            .as_ref()
            .unwrap()
            .contains("`ip netns exec netns-3c09 sysctl -w net.ipv4.tcp_congestion_control=bbr`"),
        "{v:?}"
    );
    // the same sender without losses: its cwnd holds it, but nothing says why
    let v = judge(&s(1.0, 0, 0), &s(2.0, 7_600_000 / 8, 0), &host(), None);
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
    // an interval long enough for its own share (1726 segments) without losses, after losses
    // earlier in the connection's life: not congestion now
    let v = judge(
        &s(1.0, 10_000_000, 100),
        &s(2.0, 10_000_000 + 20_000_000 / 8, 100),
        &host(),
        None,
    );
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
    // at the peer's window's ceiling with a few retransmissions: the window
    let w = |ts: f64, acked: u64, retrans: u32| {
        let mut f = s(ts, acked, retrans);
        f.snd_wnd = Some(65_535);
        f.snd_cwnd = Some(100);
        f.packets_out = Some(45);
        f
    };
    let v = judge(&w(1.0, 0, 100), &w(2.0, 24_000_000 / 8, 101), &host(), None);
    assert_eq!(v.limit, Limit::PeerWindow, "{v:?}");
}

/// bbr behind 300 Mbit/s at 1 % loss (a lab run on CI): in recovery its congestion window
/// conserves packets and runs full, with a retransmission per hundred segments, and the flow
/// still gets 281 Mbit/s. With `--target 300M` that is the path's rate, the losses beside it;
/// without a target, or short of it, the losses are what the sender shows holding it.
#[test]
fn losses_at_the_rate_asked_do_not_hold_the_flow() {
    let s = |ts: f64, acked: u64, retrans: u32| {
        let busy = (ts * 1e6) as u64;
        let mut f = snd(ts, acked, busy, 0);
        f.snd_wnd = Some(12_980_169);
        f.snd_cwnd = Some(1182);
        f.packets_out = Some(1182);
        f.snd_ssthresh = Some(686);
        f.total_retrans = Some(retrans);
        f.unsent = Some(1 << 20);
        f.srtt_us = Some(20_400);
        f.rttvar_us = Some(1_500);
        f.min_rtt_us = Some(20 * MS);
        f
    };
    let (before, now) = (s(1.0, 0, 0), s(2.0, 281_000_000 / 8, 257));
    let v = judge(&before, &now, &host(), Some(300_000_000));
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
    let why = v.setting.unwrap();
    assert!(
        why.contains("257 segments retransmitted") && why.contains("cost little"),
        "{why}"
    );
    assert_eq!(judge(&before, &now, &host(), None).limit, Limit::Congestion);
    assert_eq!(
        judge(&before, &now, &host(), Some(1_000_000_000)).limit,
        Limit::Congestion
    );
}

/// nginx `limit_rate 2m`, the sender: nothing waits unsent, the congestion window has room, the
/// kernel marks its deliveries app-limited: the application. Behind a window it fills, the
/// window is named (lifting it would raise the rate); far under it, the application.
#[test]
fn a_sender_that_does_not_write_is_app_limited() {
    let s = |ts: f64, acked: u64, wnd: u32| {
        let busy = (ts * 0.3e6) as u64;
        let mut f = snd(ts, acked, busy, 0);
        f.snd_wnd = Some(wnd);
        f.snd_cwnd = Some(200);
        f.packets_out = Some(20);
        f.unsent = Some(0);
        f.app_limited = Some(true);
        f.srtt_us = Some(21 * MS);
        f.min_rtt_us = Some(21 * MS);
        f
    };
    let v = judge(
        &s(1.0, 0, 4 << 20),
        &s(2.0, 16_000_000 / 8, 4 << 20),
        &host(),
        None,
    );
    assert_eq!(v.limit, Limit::AppLimited, "{v:?}");
    assert!(v
        .setting
        .as_ref()
        .unwrap()
        .contains("does not write fast enough"));
    assert!(v.setting.unwrap().contains("in flight 30 % of the time"));
    // the writer's TCP_NOTSENT_LOWAT, where it set one, is named with what it did under it
    let lowat = |ts: f64, acked: u64| {
        let mut f = s(ts, acked, 4 << 20);
        f.notsent_lowat = Some(16_384);
        f
    };
    let v = judge(&lowat(1.0, 0), &lowat(2.0, 16_000_000 / 8), &host(), None);
    assert_eq!(v.limit, Limit::AppLimited, "{v:?}");
    assert!(
        v.setting
            .as_ref()
            .unwrap()
            .contains("TCP_NOTSENT_LOWAT 16384 (woken to write with under 16384 B unsent)"),
        "{v:?}"
    );
    // its bursts leave a short steady queue at the bottleneck (23.5 ms over 20.2): still the
    // application, not the queue (a queue holds only a sender with more to send)
    let q = |ts: f64, acked: u64| {
        let mut f = s(ts, acked, 4 << 20);
        f.srtt_us = Some(23_500);
        f.rttvar_us = Some(500);
        f.min_rtt_us = Some(20_200);
        f
    };
    let v = judge(&q(1.0, 0), &q(2.0, 16_000_000 / 8), &host(), None);
    assert_eq!(v.limit, Limit::AppLimited, "{v:?}");
    // behind a 40 KB window it fills (15.6 Mbit/s at 21 ms): the window
    let v = judge(
        &s(1.0, 0, 41_000),
        &s(2.0, 15_000_000 / 8, 41_000),
        &host(),
        None,
    );
    assert_eq!(v.limit, Limit::PeerWindow, "{v:?}");
    // the later reading caught a burst just written (data unsent, not marked app-limited), the
    // earlier one the writer idle: still the application (nginx `limit_rate`, bbr)
    let mut burst = s(2.0, 12_000_000 / 8, 4 << 20);
    burst.unsent = Some(30_000);
    burst.app_limited = Some(false);
    let v = judge(&s(1.0, 0, 4 << 20), &burst, &host(), None);
    assert_eq!(v.limit, Limit::AppLimited, "{v:?}");
    // a bulk sender has data unsent at both readings, and the kernel never marks it
    // app-limited (it never has under a segment waiting): never the application
    let mut bulk0 = s(1.0, 0, 4 << 20);
    bulk0.unsent = Some(30_000);
    bulk0.app_limited = Some(false);
    let v = judge(&bulk0, &burst, &host(), None);
    assert_ne!(v.limit, Limit::AppLimited, "{v:?}");
}

/// The sender of a reader at 20 Mbit/s (reno), alone, read as the reader had just freed some
/// buffer: the peer's window 90 KB, the RTT 27 ms over a 20 ms base (the bursts the window's
/// openings send queue at the bottleneck), 20 Mbit/s, stopped by the peer's window 98 % of its
/// busy time. Without a target that is a 20 Mbit/s bottleneck's queue as much as a window; with
/// `--target 300mbit` the window, 36 Mbit/s at the base RTT, is what holds it.
#[test]
fn a_window_short_of_the_target_behind_its_own_queue_binds() {
    let s = |ts: f64, acked: u64| {
        let busy = (ts * 1e6) as u64;
        let mut f = snd(ts, acked, busy, busy * 98 / 100);
        f.snd_wnd = Some(90_000);
        f.srtt_us = Some(27 * MS);
        f.rttvar_us = Some(MS);
        f.min_rtt_us = Some(20 * MS);
        f.packets_out = Some(48);
        f.snd_cwnd = Some(200);
        f
    };
    let v = judge(
        &s(1.0, 0),
        &s(2.0, 20_000_000 / 8),
        &host(),
        Some(300_000_000),
    );
    assert_eq!(v.limit, Limit::PeerWindow, "{v:?}");
    let v = judge(&s(1.0, 0), &s(2.0, 20_000_000 / 8), &host(), None);
    assert_ne!(v.limit, Limit::PeerWindow, "{v:?}");
    // a target the window allows at the base RTT: the queue, not the window
    let v = judge(
        &s(1.0, 0),
        &s(2.0, 20_000_000 / 8),
        &host(),
        Some(20_000_000),
    );
    assert_eq!(v.limit, Limit::PathQueue, "{v:?}");
}
