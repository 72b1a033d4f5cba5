//! The judge's decisions, facts in, verdict out: one test per kind of verdict, and one per
//! defect seen on real programs (nginx, curl, iperf3) behind real queues.
use super::sizing::per_rate;
use super::*;
use crate::facts::ESTABLISHED;
use crate::facts::{HostLimits, SockFacts};
use crate::id::SocketId;
use tcpwin_common::formula::win_from_space;

pub(super) const MS: u32 = 1000;

pub(super) fn host() -> HostLimits {
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

/// The host with the route to the peer (10.0.0.0/24 on eth0) and eth0's GRO off.
pub(super) fn gro_off(h: HostLimits) -> HostLimits {
    HostLimits {
        routes: vec![crate::facts::Route {
            dst: "10.0.0.0".parse().unwrap(),
            len: 24,
            dev: Some("eth0".into()),
            via: None,
            src: None,
            metric: None,
            window: None,
        }],
        ifaces: vec![crate::facts::Iface {
            name: "eth0".into(),
            index: Some(2),
            mtu: Some(1500),
            gro: Some(false),
            ..Default::default()
        }],
        ..h
    }
}

pub(super) fn id(l: u16, r: u16) -> SocketId {
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
pub(super) fn rcv(ts: f64, rx: u64) -> SockFacts {
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
pub(super) fn snd(ts: f64, acked: u64, busy: u64, rwnd: u64) -> SockFacts {
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

pub(super) fn judge(
    before: &SockFacts,
    now: &SockFacts,
    h: &HostLimits,
    target: Option<u64>,
) -> Verdict {
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
pub(super) fn both(
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

mod apps;
mod caps;
mod ceilings;
mod oneend;
mod path;
mod recorded;
mod sender;
