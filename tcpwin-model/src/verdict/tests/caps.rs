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
