//! The receiver's caps: scaling, clamps, the buffer and autotuning, the ratio, memory
//! pressure, the kernel's known behaviour, and fixes safe to paste.
use super::*;

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
    // the window is the BDP and a quarter: 2 812 500 at ratio 162 needs 4 444 445 of buffer, a
    // request of 2 222 223 (its handshake scale, ilog2 - 15 = 6, lets the window reach it)
    let fix = v.fix.clone().unwrap();
    assert_eq!(fix.commands, vec!["sysctl -w net.core.rmem_max=2222223"]);
    let app = fix.app.as_ref().unwrap();
    assert_eq!((app.option.as_str(), app.bytes), ("SO_RCVBUF", 2_222_223));
    assert!(app.how.contains(&"iperf3 -w 2222223".to_string()));
    assert!(fix.new_connections);
    // what the kernel then allows: twice the request at 162, less a segment's reserve, within
    // 65535 << 6
    assert_eq!(fix.window, Some(win_from_space(4_444_446, 162) - 1448));
    assert!(fix.window.unwrap() >= 2_812_500 - 1448);
    assert!(fix.ceiling_bps.unwrap() >= 1_000_000_000);
    assert_eq!(fix.sized_for_bps, Some(1_000_000_000));
    assert!(v
        .suggested
        .unwrap()
        .contains("sysctl -w net.core.rmem_max=2222223"));
    assert!(v.setting.unwrap().contains("rmem_max=425984"));
}

/// The rmem-max lab row: SO_RCVBUF 4 MiB asked, rmem_max 425984 gave 851 968, whose handshake
/// scale is 3 (ilog2(425984) - 15): the window stops at 524 280, within a tenth of the buffer's
/// 532 480 at ratio 160. The buffer is what binds (its scale came from it), and its fix asks a
/// request big enough for the scale the window needs.
#[test]
fn a_scale_the_buffer_chose_is_the_buffers_limit() {
    let f = |ts: f64, rx: u64| {
        let mut n = rcv(ts, rx);
        n.scaling_ratio = Some(160);
        n.rcv_wscale = Some(3);
        n.window_clamp = Some(524_280);
        n
    };
    // 524 280 / 18 ms = 233 Mbit/s: at its ceiling
    let v = judge(
        &f(1.0, 0),
        &f(2.0, 225_000_000 / 8),
        &host(),
        Some(1_000_000_000),
    );
    assert_eq!(v.limit, Limit::RcvbufLocked, "{v:?}");
    let fix = v.fix.unwrap();
    let app = fix.app.unwrap();
    // 1 Gbit/s at 18 ms, and a quarter: 2 812 500 at 160 is 4 500 000 of buffer
    assert_eq!(app.bytes, 2_250_000);
    assert_eq!(fix.commands, vec!["sysctl -w net.core.rmem_max=2250000"]);
    // the same socket with a scale far below its buffer (a route's window): the scale binds
    let v = judge(
        &{
            let mut n = f(1.0, 0);
            n.rcv_wscale = Some(1);
            n.window_clamp = Some(131_070);
            n
        },
        &{
            let mut n = f(2.0, 57_000_000 / 8);
            n.rcv_wscale = Some(1);
            n.window_clamp = Some(131_070);
            n
        },
        &host(),
        Some(1_000_000_000),
    );
    assert_eq!(v.limit, Limit::ScaleCap, "{v:?}");
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
    // read alone, its own host on: the fix is the peer's, to run on the peer
    let f = v.fix.as_ref().expect("the peer's fix");
    assert_eq!(f.commands, ["sysctl -w net.ipv4.tcp_window_scaling=1"]);
    assert_eq!(f.on_peer, Some("10.0.0.1".parse().unwrap()));
    assert_eq!(f.end, Some(FixEnd::Sender));
    assert!(v.refused.is_empty(), "{:?}", v.refused);
    h.tcp_window_scaling = Some(false);
    let v = judge(&rcv(1.0, 0), &n, &h, None);
    assert!(v.setting.unwrap().contains("tcp_window_scaling=0"));
    assert!(v
        .suggested
        .unwrap()
        .contains("sysctl -w net.ipv4.tcp_window_scaling=1"));
    let f = v.fix.unwrap();
    assert_eq!((f.end, f.on_peer), (Some(FixEnd::Receiver), None));
}

/// The sending host has window scaling off, the receiving host on (the nginx host): each
/// way of reading names the fix on the host that owns the setting. Both ends read here: the
/// sender's namespace's command; the sender read alone: its own sysctl; a middlebox (both on):
/// no command.
#[test]
fn the_fix_for_scaling_refused_is_the_refusing_hosts() {
    let rx_host = host();
    let tx_host = HostLimits {
        tcp_window_scaling: Some(false),
        run_in: Some("ip netns exec sender".into()),
        ..host()
    };
    let off = |mut f: SockFacts| {
        f.wscale_ok = Some(false);
        f.rcv_wscale = Some(0);
        f.snd_wscale = Some(0);
        f
    };
    let mut r1 = off(rcv(2.0, 2_600_000));
    r1.window_clamp = Some(65535);
    r1.rcvbuf_locked = Some(false);
    let r0 = SockFacts {
        bytes_received: Some(0),
        ..r1.clone()
    };
    let mut s1 = off(snd(2.0, 2_600_000, 1_000_000, 990_000));
    s1.snd_wnd = Some(65535);
    s1.packets_out = Some(45);
    let s0 = SockFacts {
        bytes_acked: Some(0),
        busy_us: Some(0),
        rwnd_limited_us: Some(0),
        ..s1.clone()
    };
    let at = |me: (&SockFacts, &SockFacts, &HostLimits),
              peer: Option<(&SockFacts, &SockFacts, &HostLimits)>| {
        verdict(&Input {
            now: me.1,
            before: Some(me.0),
            host: me.2,
            target_bps: None,
            peer: peer.map(|p| End {
                now: p.1,
                before: Some(p.0),
                host: p.2,
            }),
            min_rcv_rtt_us: None,
        })
    };
    // both ends here
    let (vr, vs) = (
        at((&r0, &r1, &rx_host), Some((&s0, &s1, &tx_host))),
        at((&s0, &s1, &tx_host), Some((&r0, &r1, &rx_host))),
    );
    for v in [&vr, &vs] {
        assert_eq!(v.limit, Limit::WscaleOff, "{v:?}");
        let f = v.fix.as_ref().expect("a fix");
        assert_eq!(
            f.commands,
            ["ip netns exec sender sysctl -w net.ipv4.tcp_window_scaling=1"]
        );
        assert_eq!((f.end, f.on_peer), (Some(FixEnd::Sender), None));
        assert!(
            v.setting.as_ref().unwrap().contains("sending host"),
            "{v:?}"
        );
        assert!(v.refused.is_empty(), "{:?}", v.refused);
    }
    // the sender alone: its own setting
    let v = at((&s0, &s1, &tx_host), None);
    assert_eq!(v.limit, Limit::WscaleOff, "{v:?}");
    let f = v.fix.as_ref().unwrap();
    assert_eq!(
        f.commands,
        ["ip netns exec sender sysctl -w net.ipv4.tcp_window_scaling=1"]
    );
    assert_eq!((f.end, f.on_peer), (Some(FixEnd::Sender), None));
    // the sender alone with scaling on: the peer's
    let v = at((&s0, &s1, &rx_host), None);
    assert_eq!(v.limit, Limit::WscaleOff, "{v:?}");
    let f = v.fix.as_ref().unwrap();
    assert_eq!(f.commands, ["sysctl -w net.ipv4.tcp_window_scaling=1"]);
    assert_eq!(f.on_peer, Some("10.0.0.1".parse().unwrap()));
    // both on, both read: a middlebox, no command
    let vr = at((&r0, &r1, &rx_host), Some((&s0, &s1, &rx_host)));
    assert_eq!(vr.limit, Limit::WscaleOff, "{vr:?}");
    assert!(vr.fix.is_none(), "{vr:?}");
    assert!(vr.setting.unwrap().contains("middlebox"));
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
    // without --target sized for 1 Gbit/s at the base RTT (said), not "twice the ceiling":
    // 2 250 000 B of BDP and a quarter, 2 812 500 B, at ratio 229 is 3 144 105 B of buffer
    let s = v.suggested.unwrap();
    assert!(s.contains("for 1.00 Gbit/s at 18.0 ms base RTT"), "{s}");
    assert_eq!(
        v.fix.unwrap().commands,
        vec!["sysctl -w net.ipv4.tcp_rmem='4096 131072 3144105'"]
    );
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
    // read alone, the receiver cannot tell a queue (its window is not full) from a sender that
    // pauses: the window is not the limit, and the sender's side decides
    assert_eq!(v.limit, Limit::NotWindowLimited, "{v:?}");
    assert!(!v.suggested.unwrap().contains("tcp_rmem"));
    assert!(v
        .setting
        .unwrap()
        .contains("run `tcpwin-trace ss` on the sending host"));
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
    let v = judge(
        &f(1.0, 0),
        &f(2.0, 112_000_000 / 8),
        &gro_off(h.clone()),
        None,
    );
    assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
    let gro = v
        .factors
        .iter()
        .find(|x| x.limit == Limit::LowRatio)
        .expect("the ratio as a factor");
    // the gain promised is GRO's floor: two segments merged
    assert!((gro.window_gain.unwrap() - 193.0 / 160.0).abs() < 1e-9);
    assert!(v
        .suggested
        .unwrap()
        .contains("sysctl -w net.ipv4.tcp_rmem='4096 131072"));
    // when GRO alone reaches the target, GRO is the fix to lead with, on the interface the
    // connection's packets use, in its namespace (for new connections: a connection measures its
    // ratio on its first packets)
    let v = judge(
        &f(1.0, 0),
        &f(2.0, 112_000_000 / 8),
        &gro_off(h.clone()),
        Some(150_000_000),
    );
    assert_eq!(v.limit, Limit::LowRatio, "{v:?}");
    assert_eq!(v.factors[0].limit, Limit::AutotuneMax);
    let fix = v.fix.unwrap();
    assert_eq!(fix.commands, vec!["ethtool -K eth0 gro on"]);
    assert!(fix.new_connections);
    // where GRO is on already it is never advised: the buffer leads, the ratio has no command
    let mut on = gro_off(h);
    on.ifaces[0].gro = Some(true);
    let v = judge(&f(1.0, 0), &f(2.0, 112_000_000 / 8), &on, Some(150_000_000));
    assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
    let gro = v
        .factors
        .iter()
        .find(|x| x.limit == Limit::LowRatio)
        .unwrap();
    assert!(
        gro.fix.is_none() && gro.suggested.contains("GRO is on on eth0"),
        "{gro:?}"
    );
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
    // outside a pod no pod spec is said; in one (its owner's cgroup names a pod), the same
    // setting in the pod spec's terms, which a restart keeps
    assert_eq!(v.fix.as_ref().unwrap().pod, None);
    n.workload = crate::workload::from_cgroup(
        "0::/kubepods/burstable/pod5d1c2b3a-4e5f-6789-abcd-ef0123456789/f2557d61c3a14e1f8e6b0a9d7c5b3e1f2a4c6e8b0d1f3a5c7e9b1d3f5a7c9e1b\n",
    )
    .map(Box::new);
    assert!(n.workload.as_ref().unwrap().pod_uid.is_some());
    let v = judge(&rcv(1.0, 0), &n, &h, Some(1_000_000_000));
    let pod = v.fix.as_ref().unwrap().pod.clone().unwrap();
    assert!(
        pod.contains("securityContext.sysctls: [{name: net.ipv4.tcp_rmem, value: \"4096 131072 "),
        "{pod}"
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
    // 663552 B / 36 ms = 147 Mbit/s ceiling; the path's 160 Mbit/s (153 Mbit/s of payload)
    // needs 720 000 B: GRO's window at its floor ratio (193: 790 528, less a segment) reaches it
    let f = |ts: f64, rx: u64| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(false);
        n.sk_rcvbuf = Some(1 << 20);
        n.window_clamp = Some(win_from_space(1 << 20, 162) as u32);
        n.rcv_rtt_us = Some(36 * MS);
        n.min_rtt_us = Some(36 * MS);
        n
    };
    let v = judge(
        &f(1.0, 0),
        &f(2.0, 140_000_000 / 8),
        &gro_off(h.clone()),
        Some(160_000_000),
    );
    assert_eq!(v.limit, Limit::LowRatio, "{v:?}");
    assert_eq!(
        v.fix.unwrap().window,
        Some(win_from_space(1 << 20, 193) - 1448)
    );
    // 200 Mbit/s needs 900 000 B: GRO at its floor does not promise it (at 229 it would), so
    // the buffer leads and GRO stays a factor
    let v = judge(
        &f(1.0, 0),
        &f(2.0, 140_000_000 / 8),
        &gro_off(h),
        Some(200_000_000),
    );
    assert_eq!(v.limit, Limit::AutotuneMax, "{v:?}");
    assert!(
        v.factors.iter().any(|x| x.limit == Limit::LowRatio),
        "{v:?}"
    );
}

#[test]
fn window_clamp_below_the_buffer() {
    let mut n = rcv(2.0, 50_000_000 / 8);
    n.rcvbuf_locked = Some(false);
    n.window_clamp = Some(100_000);
    let v = judge(&rcv(1.0, 0), &n, &host(), Some(200_000_000));
    assert_eq!(v.limit, Limit::WindowClamp, "{v:?}");
    // the fix asks a clamp of 200 Mbit/s x 18 ms and a quarter (562 500); the window is then that
    // clamp, within the buffer's 539 136 at ratio 162
    let fix = v.fix.unwrap();
    assert_eq!(fix.app.unwrap().bytes, 562_500);
    assert_eq!(fix.window, Some(539_136 - 1448));
    let v = judge(&rcv(1.0, 0), &n, &host(), Some(100_000_000));
    let fix = v.fix.unwrap();
    assert_eq!(fix.app.unwrap().bytes, 281_250);
    assert_eq!(
        fix.window,
        Some(281_250),
        "the clamp asked, under the buffer's window"
    );
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

/// `iperf3 -w 1004300` (SO_RCVBUF before connect) on a 20 ms path, GRO off (ratio 160): the
/// handshake chose scale 4, so the window stops at 1 048 560 = 65535 << 4 whatever the buffer
/// (1 255 375 at ratio 160). The fix is sized with the kernel's arithmetic: for 500 Mbit/s
/// (1 250 000 B, and a quarter: 1 562 500) a buffer of 2 500 000 at 160, a request of 1 250 000,
/// whose handshake scale (5) lets the window reach it.
#[test]
fn a_window_held_by_the_handshakes_scale() {
    let f = |ts: f64, rx: u64| {
        let mut n = rcv(ts, rx);
        n.scaling_ratio = Some(160);
        n.sk_rcvbuf = Some(2_008_600);
        n.rcv_wscale = Some(4);
        n.window_clamp = Some(win_from_space(2_008_600, 160) as u32);
        n.rcv_rtt_us = Some(20 * MS);
        n.min_rtt_us = Some(20 * MS);
        n
    };
    let h = HostLimits {
        rmem_max: Some(4_194_304),
        ..host()
    };
    // 1 048 560 / 20 ms = 419 Mbit/s: at its ceiling
    let v = judge(&f(1.0, 0), &f(2.0, 400_000_000 / 8), &h, Some(500_000_000));
    assert_eq!(v.limit, Limit::ScaleCap, "{v:?}");
    assert_eq!(v.window, Some(1_048_560));
    assert!(v.setting.as_ref().unwrap().contains("65535 << 4"), "{v:?}");
    let fix = v.fix.unwrap();
    assert_eq!(fix.app.as_ref().unwrap().bytes, 1_250_000);
    assert!(fix.commands.is_empty(), "rmem_max 4 MiB takes the request");
    assert!(fix.new_connections);
    // the window the kernel then allows: 2 500 000 at 160 less a segment, within 65535 << 5
    assert_eq!(
        fix.window,
        Some((win_from_space(2_500_000, 160) - 1448).min(65535 << 5))
    );
    assert!(fix.ceiling_bps.unwrap() >= 500_000_000);
    // GRO off on the interface: turning it on would not widen a window the scale holds, so it
    // does not lead (it stays a factor)
    let v = judge(
        &f(1.0, 0),
        &f(2.0, 400_000_000 / 8),
        &gro_off(h),
        Some(500_000_000),
    );
    assert_eq!(v.limit, Limit::ScaleCap, "{v:?}");
    assert!(
        v.factors.iter().any(|x| x.limit == Limit::LowRatio),
        "{v:?}"
    );
}

/// A route's `window 65536` on the receiver (`ip route ... window 65536`): the handshake's scale
/// is 1, the window stops at 131070; the fix changes the route without the metric, in the
/// socket's namespace, for new connections.
#[test]
fn a_routes_window_metric_names_the_route() {
    let f = |ts: f64, rx: u64| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(false);
        n.scaling_ratio = Some(229);
        n.sk_rcvbuf = Some(1 << 20);
        n.rcv_wscale = Some(1);
        n.window_clamp = Some(win_from_space(1 << 20, 229) as u32);
        n.rcv_rtt_us = Some(20 * MS);
        n.min_rtt_us = Some(20 * MS);
        n
    };
    let mut h = gro_off(HostLimits {
        run_in: Some("ip netns exec lab-b".into()),
        ..host()
    });
    h.routes.push(crate::facts::Route {
        dst: "10.0.0.1".parse().unwrap(),
        len: 32,
        dev: Some("eth0".into()),
        via: None,
        src: None,
        metric: None,
        window: Some(65536),
    });
    // 131070 / 20 ms = 52 Mbit/s, 48 measured
    let v = judge(&f(1.0, 0), &f(2.0, 48_000_000 / 8), &h, Some(300_000_000));
    assert_eq!(v.limit, Limit::ScaleCap, "{v:?}");
    assert!(
        v.setting
            .as_ref()
            .unwrap()
            .contains("the route 10.0.0.1/32 dev eth0 carries `window 65536`"),
        "{v:?}"
    );
    let fix = v.fix.unwrap();
    assert_eq!(
        fix.commands,
        vec!["ip netns exec lab-b ip route change 10.0.0.1/32 dev eth0"]
    );
    assert!(fix.new_connections && fix.window.unwrap() > 131070);
}

/// A receiver whose handshake chose window scale 2 while this host's caps give new connections
/// scale 10 (tcp_rmem[2] 32 MiB): the caps did not choose it. Its buffer is not locked and the
/// route to the peer carries no `window`; what is left is a clamp set before connect()/listen()
/// (autotuning has rewritten the clamp since) or caps smaller when it opened. The why says
/// that and what the reading rules out; the fix is the test that tells them apart and the
/// application's change, never a sysctl, and never a bare "re-open" that gets scale 2 again.
#[test]
fn a_scale_the_caps_did_not_choose_is_not_blamed_on_them() {
    let f = |ts: f64, rx: u64| {
        let mut n = rcv(ts, rx);
        n.rcvbuf_locked = Some(false);
        n.scaling_ratio = Some(229);
        n.sk_rcvbuf = Some(4 << 20);
        n.rcv_wscale = Some(2);
        n.window_clamp = Some(win_from_space(4 << 20, 229) as u32);
        n.rcv_rtt_us = Some(20 * MS);
        n.min_rtt_us = Some(20 * MS);
        n.comm = Some("python3".into());
        n
    };
    let h = gro_off(host());
    // 262140 / 20 ms = 105 Mbit/s, 100 measured
    let v = judge(&f(1.0, 0), &f(2.0, 100_000_000 / 8), &h, Some(300_000_000));
    assert_eq!(v.limit, Limit::ScaleCap, "{v:?}");
    assert_eq!(v.window, Some(65535 << 2));
    let why = v.setting.as_deref().unwrap();
    assert!(
        !why.contains("when the connection opened (tcp_rmem[2], rmem_max) gave it"),
        "{why}"
    );
    assert!(why.contains("give new connections 10"), "{why}");
    assert!(why.contains("TCP_WINDOW_CLAMP"), "{why}");
    assert!(
        why.contains("ruled out by this reading: no `window` metric on the route 10.0.0.0/24 dev eth0 now, SO_RCVBUF not set"),
        "{why}"
    );
    let fix = v.fix.as_ref().unwrap();
    assert!(fix.commands.is_empty(), "no host setting chose it: {fix:?}");
    assert_eq!(fix.app.as_ref().unwrap().option, "TCP_WINDOW_CLAMP");
    assert!(fix.app.as_ref().unwrap().bytes >= 750_000, "{fix:?}");
    assert!(fix.new_connections);
    // the clamp asked (~940 KB) gives the handshake scale 4; autotuning then rewrites the clamp,
    // and the window reaches what scale 4 expresses (the lab measured 1048560 after the fix)
    assert_eq!(fix.window, Some(65535 << 4), "{fix:?}");
    let text = v.suggested.as_deref().unwrap();
    assert!(
        text.contains("10 means the caps were smaller when this one opened"),
        "{text}"
    );
    assert!(
        text.contains("2 again means a clamp set before connect()/listen()"),
        "{text}"
    );
}

/// The judge's own check at work: a verdict whose fix contradicts its facts loses the fix (the
/// limit stays), says why in `refused`, and the words say no fix is printed.
#[test]
fn a_contradicting_fix_is_dropped_and_said() {
    let f = rcv(1.0, 0);
    let h = host();
    let mut v = Verdict {
        limit: Limit::RcvbufLocked,
        window: Some(500_000),
        setting: Some("SO_RCVBUF set by the application".into()),
        fix: Some(crate::verdict::Fix {
            commands: vec!["sysctl -w net.core.rmem_max=100000".into()],
            window: Some(400_000),
            ..Default::default()
        }),
        ..Verdict::unknown(Side::Receiving)
    };
    let me = End {
        now: &f,
        before: None,
        host: &h,
    };
    let i = Input {
        now: &f,
        before: None,
        host: &h,
        target_bps: None,
        peer: None,
        min_rcv_rtt_us: None,
    };
    super::super::decide::refuse_contradictions(&mut v, None, Some(me), &i);
    assert_eq!(v.limit, Limit::RcvbufLocked);
    assert!(v.fix.is_none());
    let rules: Vec<&str> = v
        .refused
        .iter()
        .map(|r| r.split(':').next().unwrap())
        .collect();
    assert_eq!(rules, ["lifts", "never-lowers", "app-choice"], "{v:?}");
    assert!(v.suggested.unwrap().starts_with("no fix printed"));
}
