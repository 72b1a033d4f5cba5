//! The facts verdicts read: one socket's window machinery and the host limits of its namespace.
//! Filled from an iterator snapshot, sock_diag, a trace event or a recording; a fact the source
//! did not give is `None` (absent is never 0).
use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use tcpwin_common::{flag, Offsets, SockRecord, ABSENT, AF_INET6, SOCK_NOSPACE, SOCK_SNDBUF_LOCK};

pub use crate::id::endpoint;
use crate::id::SocketId;

/// One TCP socket at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SockFacts {
    /// CLOCK_MONOTONIC ns of the reading
    pub ts_ns: u64,
    #[serde(flatten)]
    pub id: SocketId,
    /// TCP state (`TCP_ESTABLISHED` = 1, ...)
    pub state: u8,
    /// socket inode (to find the owner)
    pub inode: Option<u64>,
    pub pid: Option<u32>,
    pub comm: Option<String>,
    /// the owner's workload (container, pod, unit) from its cgroup, where owners are read
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Box<crate::workload::Workload>>,
    /// null before 6.6
    pub scaling_ratio: Option<u8>,
    pub window_clamp: Option<u32>,
    pub rcv_ssthresh: Option<u32>,
    /// the window last advertised
    pub rcv_wnd: Option<u32>,
    pub sk_rcvbuf: Option<u32>,
    /// `rcvq_space.space`: the receive-queue space autotuning measured (per RTT)
    pub rcvq_space: Option<u32>,
    /// `SO_RCVBUF` set: autotuning off
    pub rcvbuf_locked: Option<bool>,
    /// `SO_SNDBUF` set: the send buffer's autotuning off
    pub sndbuf_locked: Option<bool>,
    /// window scaling negotiated with the peer
    pub wscale_ok: Option<bool>,
    pub rcv_wscale: Option<u8>,
    pub snd_wscale: Option<u8>,
    pub rcv_mss: Option<u32>,
    pub advmss: Option<u32>,
    /// received, not yet read by the application (`rcv_nxt - copied_seq`)
    pub unread: Option<u32>,
    pub rmem_alloc: Option<u32>,
    /// the receiver's RTT estimate, µs (0: no sample yet)
    pub rcv_rtt_us: Option<u32>,
    /// smoothed RTT, µs
    pub srtt_us: Option<u32>,
    /// the windowed minimum RTT (`tcpi_min_rtt`), µs: the path's base RTT as this end measured
    /// it (a pure receiver's comes from the handshake); 0: no sample
    pub min_rtt_us: Option<u32>,
    /// congestion window and segments in flight (units of `mss_cache`)
    pub snd_cwnd: Option<u32>,
    pub packets_out: Option<u32>,
    pub mss_cache: Option<u32>,
    pub bytes_received: Option<u64>,
    pub bytes_acked: Option<u64>,
    /// the peer's advertised window, bytes (scaled)
    pub snd_wnd: Option<u32>,
    pub sk_sndbuf: Option<u32>,
    pub wmem_queued: Option<u32>,
    /// chrono times as `tcp_info` reports them, µs
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    /// the RTT's variance (`tcpi_rttvar`), µs: stalls and bursts raise it, a standing queue
    /// does not
    #[serde(default)]
    pub rttvar_us: Option<u32>,
    /// segments retransmitted over the connection's life, and now counted lost
    #[serde(default)]
    pub total_retrans: Option<u32>,
    #[serde(default)]
    pub lost_out: Option<u32>,
    /// the congestion control's slow-start threshold, segments
    #[serde(default)]
    pub snd_ssthresh: Option<u32>,
    /// `sk_pacing_rate`, bit/s
    #[serde(default)]
    pub pacing_rate_bps: Option<u64>,
    /// the cap on it the application set (`SO_MAX_PACING_RATE`: `sk_max_pacing_rate`), bit/s;
    /// null where none is set or the source did not read it
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_cap_bps: Option<u64>,
    /// the writer found the send buffer full and waits for room (`SOCK_NOSPACE` on its socket):
    /// who waited, where the kernel's sndbuf-limited count is blind (it counts only while the
    /// congestion window has room and nothing waits unsent)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_waiting: Option<bool>,
    /// time since the last data sent and since the last data received, µs (`tcpi_last_data_*`)
    #[serde(default)]
    pub since_data_sent_us: Option<u64>,
    #[serde(default)]
    pub since_data_recv_us: Option<u64>,
    /// time since the reader's last read that the receive-buffer autotuning measured (µs, from
    /// `rcvq_space.time`; a read at most one receiver RTT after the one before stamps it): data
    /// that arrived well before it waited that much for the reader
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_read_us: Option<u64>,
    /// segments received out of order over the life (`tcpi_rcv_ooopack`): losses upstream
    #[serde(default)]
    pub ooo_packets: Option<u32>,
    /// written by the application and not sent yet, bytes (`tcpi_notsent_bytes`)
    #[serde(default)]
    pub unsent: Option<u32>,
    /// the sender had less data than the network would take (`tcpi_delivery_rate_app_limited`)
    #[serde(default)]
    pub app_limited: Option<bool>,
    /// the application's wake-up thresholds: SO_RCVLOWAT, the bytes a read waits for (1 unless
    /// set), and TCP_NOTSENT_LOWAT, the unsent bytes under which a writer is woken (0: not set
    /// on the socket, the namespace's `net.ipv4.tcp_notsent_lowat` applies)
    #[serde(default)]
    pub rcvlowat: Option<u32>,
    #[serde(default)]
    pub notsent_lowat: Option<u32>,
}

/// A socket that neither sent nor received data for this long (µs), with nothing waiting, is idle.
pub const IDLE_AFTER_US: u64 = 1_000_000;

impl SockFacts {
    /// How long the last data that arrived waited, at least, before the reader took it: the
    /// time since it arrived less the time since the read the autotuning last stamped (the
    /// last read is at or after that stamp), less 10 ms for the arrival's clock (jiffies). None
    /// where either clock is unread.
    pub fn read_late_us(&self) -> Option<u64> {
        let (arrived, read) = (self.since_data_recv_us?, self.since_read_us?);
        Some(arrived.saturating_sub(read).saturating_sub(10_000))
    }

    /// No data sent or received for [`IDLE_AFTER_US`], nothing unread, in flight or unsent: the
    /// socket is idle now, whatever it moved over its life (a control connection). None when the
    /// source does not say when data last moved.
    pub fn idle_now(&self) -> Option<bool> {
        let quiet =
            self.since_data_recv_us? >= IDLE_AFTER_US && self.since_data_sent_us? >= IDLE_AFTER_US;
        let waiting = self.unread.unwrap_or(0) > 0
            || self.packets_out.unwrap_or(0) > 0
            || self.unsent.unwrap_or(0) > 0;
        Some(quiet && !waiting)
    }

    /// Bytes in flight (segments out x MSS), when both are known.
    pub fn inflight_bytes(&self) -> Option<u64> {
        Some(self.packets_out? as u64 * self.mss_cache? as u64)
    }

    /// The congestion window in bytes (segments x MSS), when both are known.
    pub fn cwnd_bytes(&self) -> Option<u64> {
        Some(self.snd_cwnd? as u64 * self.mss_cache? as u64)
    }

    /// The RTT a receiver's window is judged against: its own estimate when it has one, else the
    /// smoothed RTT (a pure receiver's srtt stays at the handshake sample).
    pub fn receiver_rtt_us(&self) -> Option<u32> {
        match self.rcv_rtt_us {
            Some(r) if r > 0 => Some(r),
            _ => self.srtt_us.filter(|s| *s > 0),
        }
    }
}

/// The pacing cap an application set, bit/s, from `sk_max_pacing_rate` (bytes/s): None where it
/// was not read or none is set (the kernel's "none" is all ones: `~0UL`, or `~0U` where it is
/// 32 bits wide in `tcp_info`).
pub fn pacing_cap(read: bool, bytes_per_s: u64) -> Option<u64> {
    (read && bytes_per_s != u64::MAX && bytes_per_s != u32::MAX as u64)
        .then(|| bytes_per_s.saturating_mul(8))
}

/// `TCP_ESTABLISHED`
pub const ESTABLISHED: u8 = 1;

/// A TCP state as `ss` names it.
pub fn state_name(state: u8) -> &'static str {
    match state {
        1 => "ESTAB",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "UNCONN",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        _ => "UNKNOWN",
    }
}

/// `tcp_get_info_chrono_stats`: busy, rwnd-limited and sndbuf-limited times in µs, the running
/// chrono included (`chrono_type` 1..=3 is the one running since `chrono_start`).
pub fn chrono_us(r: &SockRecord, hz: u32) -> [u64; 3] {
    let mut out = [0u64; 3];
    for (i, slot) in out.iter_mut().enumerate() {
        let mut j = r.chrono_stat[i] as u64;
        if r.chrono_type as usize == i + 1 {
            j += (r.jiffies as u32).wrapping_sub(r.chrono_start) as u64;
        }
        *slot = j * (1_000_000 / hz.max(1) as u64);
    }
    // busy_time is the sum of the three states
    [out[0] + out[1] + out[2], out[1], out[2]]
}

impl SockFacts {
    /// The facts of an iterator record. `o`: the offsets the record was read with (a member the
    /// kernel lacks gives `None`); `hz`: the kernel's tick rate, for the chrono times (None:
    /// unknown, so are they).
    pub fn from_record(r: &SockRecord, o: &Offsets, hz: Option<u32>, ts_ns: u64) -> SockFacts {
        fn has(off: u32) -> bool {
            off != ABSENT
        }
        fn opt<T>(off: u32, v: T) -> Option<T> {
            has(off).then_some(v)
        }
        let addr = |b: &[u8; 16]| -> IpAddr {
            if r.family == AF_INET6 {
                IpAddr::from(*b)
            } else {
                IpAddr::from([b[0], b[1], b[2], b[3]])
            }
        };
        let chrono = hz
            .filter(|_| has(o.tp_chrono_stat) && has(o.tp_chrono_type_bit))
            .map(|hz| chrono_us(r, hz));
        let wscale_known = has(o.tp_wscale_ok_bit);
        // jiffies since a `tcp_jiffies32` stamp, in µs
        let since = |off: u32, stamp: u32| {
            hz.filter(|_| has(off)).map(|hz| {
                (r.jiffies as u32).wrapping_sub(stamp) as u64 * (1_000_000 / hz.max(1) as u64)
            })
        };
        SockFacts {
            ts_ns,
            id: SocketId {
                cookie: Some(r.cookie),
                netns: Some(r.netns),
                laddr: Some(addr(&r.laddr)),
                lport: r.lport,
                raddr: Some(addr(&r.raddr)),
                rport: r.rport,
            },
            state: r.state,
            inode: (r.inode != 0).then_some(r.inode),
            pid: None,
            comm: None,
            workload: None,
            scaling_ratio: (r.flags & flag::RATIO_PRESENT != 0).then_some(r.scaling_ratio),
            window_clamp: opt(o.tp_window_clamp, r.window_clamp),
            rcv_ssthresh: opt(o.tp_rcv_ssthresh, r.rcv_ssthresh),
            rcv_wnd: opt(o.tp_rcv_wnd, r.rcv_wnd),
            sk_rcvbuf: opt(o.sk_rcvbuf, r.sk_rcvbuf),
            rcvq_space: opt(o.tp_rcvq_space, r.rcvq_space),
            rcvbuf_locked: opt(o.sk_userlocks, r.flags & flag::RCVBUF_LOCKED != 0),
            sndbuf_locked: opt(o.sk_userlocks, r.userlocks & SOCK_SNDBUF_LOCK != 0),
            wscale_ok: wscale_known.then_some(r.flags & flag::WSCALE_OK != 0),
            rcv_wscale: opt(o.tp_rcv_wscale_bit, r.rcv_wscale),
            snd_wscale: opt(o.tp_snd_wscale_bit, r.snd_wscale),
            rcv_mss: opt(o.icsk_rcv_mss, r.rcv_mss),
            advmss: opt(o.tp_advmss, r.advmss),
            unread: (has(o.tp_rcv_nxt) && has(o.tp_copied_seq))
                .then(|| r.rcv_nxt.wrapping_sub(r.copied_seq)),
            rmem_alloc: opt(o.sk_rmem_alloc, r.rmem_alloc),
            rcv_rtt_us: opt(o.tp_rcv_rtt_us, r.rcv_rtt_us8 >> 3),
            srtt_us: opt(o.tp_srtt_us, r.srtt_us8 >> 3),
            min_rtt_us: opt(o.tp_rtt_min, r.min_rtt_us),
            snd_cwnd: opt(o.tp_snd_cwnd, r.snd_cwnd),
            packets_out: opt(o.tp_packets_out, r.packets_out),
            mss_cache: opt(o.tp_mss_cache, r.mss_cache),
            bytes_received: opt(o.tp_bytes_received, r.bytes_received),
            bytes_acked: opt(o.tp_bytes_acked, r.bytes_acked),
            snd_wnd: opt(o.tp_snd_wnd, r.snd_wnd),
            sk_sndbuf: opt(o.sk_sndbuf, r.sk_sndbuf),
            wmem_queued: opt(o.sk_wmem_queued, r.wmem_queued),
            busy_us: chrono.map(|c| c[0]),
            rwnd_limited_us: chrono.map(|c| c[1]),
            sndbuf_limited_us: chrono.map(|c| c[2]),
            rttvar_us: opt(o.tp_mdev_us, r.mdev_us4 >> 2),
            total_retrans: opt(o.tp_total_retrans, r.total_retrans),
            lost_out: opt(o.tp_lost_out, r.lost_out),
            snd_ssthresh: opt(o.tp_snd_ssthresh, r.snd_ssthresh),
            pacing_rate_bps: opt(o.sk_pacing_rate, r.pacing_rate.saturating_mul(8)),
            pacing_cap_bps: pacing_cap(has(o.sk_max_pacing_rate), r.max_pacing_rate),
            writer_waiting: (has(o.sk_socket) && has(o.socket_flags) && r.inode != 0)
                .then_some(r.socket_flags & SOCK_NOSPACE != 0),
            since_data_sent_us: since(o.tp_lsndtime, r.lsndtime),
            since_data_recv_us: since(o.icsk_lrcvtime, r.lrcvtime),
            since_read_us: has(o.tp_rcvq_time).then_some(r.since_read_us as u64),
            ooo_packets: opt(o.tp_rcv_ooopack, r.rcv_ooopack),
            unsent: (has(o.tp_write_seq) && has(o.tp_snd_nxt))
                .then(|| r.write_seq.wrapping_sub(r.snd_nxt)),
            app_limited: opt(o.tp_app_limited, r.app_limited != 0),
            rcvlowat: opt(o.sk_rcvlowat, r.rcvlowat),
            notsent_lowat: opt(o.tp_notsent_lowat, r.notsent_lowat),
        }
    }
}

/// The sysctls and state of the host (and of the socket's namespace) that cap a window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostLimits {
    /// `net.core.rmem_max` (global): caps an `SO_RCVBUF` request
    pub rmem_max: Option<u64>,
    pub wmem_max: Option<u64>,
    /// `net.ipv4.tcp_rmem` of the namespace: min, default, max (autotuning's cap)
    pub tcp_rmem: Option<[u64; 3]>,
    pub tcp_wmem: Option<[u64; 3]>,
    pub tcp_window_scaling: Option<bool>,
    pub tcp_moderate_rcvbuf: Option<bool>,
    pub tcp_adv_win_scale: Option<i32>,
    /// TCP memory pressure (`tcp_mem` crossed)
    pub memory_pressure: Option<bool>,
    /// the running kernel (`uname -r`): the verdicts cite what this version gets wrong
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// how to run a command in the namespace these settings belong to, when it is not the
    /// caller's (`ip netns exec NAME`, `nsenter -t PID -n`): a fix for a per-namespace setting
    /// runs there
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_in: Option<String>,
    /// the namespace's unicast routes of the main table (a `window` metric clamps the windows of
    /// the connections it carries; the route to a peer names the interface its packets use)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
    /// the namespace's interfaces (GRO, MTU: what the ratio depends on)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ifaces: Vec<Iface>,
    /// the address of the host these were read on, when it is not the one judging (a peer's
    /// exporter answered with them: `--peer`); a fix of this end's settings runs there
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<IpAddr>,
}

/// A route, as `ip route` writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    pub dst: IpAddr,
    pub len: u8,
    pub dev: Option<String>,
    pub via: Option<IpAddr>,
    pub src: Option<IpAddr>,
    /// the route's priority (`metric` in `ip route`)
    pub metric: Option<u32>,
    /// the `window` metric (RTAX_WINDOW): a clamp on every connection through the route
    pub window: Option<u32>,
}

impl Route {
    fn contains(&self, a: IpAddr) -> bool {
        let bits = |x: IpAddr| -> (u128, u8) {
            match x.to_canonical() {
                IpAddr::V4(v4) => (u32::from(v4) as u128, 32),
                IpAddr::V6(v6) => (u128::from(v6), 128),
            }
        };
        let ((d, w1), (x, w2)) = (bits(self.dst), bits(a));
        if w1 != w2 || self.len > w1 {
            return false;
        }
        let shift = (w1 - self.len) as u32;
        shift >= 128 || (d >> shift) == (x >> shift)
    }

    /// `DST/LEN [via GW] [dev DEV] [src SRC] [metric N]`: what identifies the route to `ip route
    /// change`.
    pub fn spec(&self) -> String {
        let mut s = format!("{}/{}", self.dst, self.len);
        if let Some(g) = self.via {
            s.push_str(&format!(" via {g}"));
        }
        if let Some(d) = &self.dev {
            s.push_str(&format!(" dev {d}"));
        }
        if let Some(a) = self.src {
            s.push_str(&format!(" src {a}"));
        }
        if let Some(m) = self.metric {
            s.push_str(&format!(" metric {m}"));
        }
        s
    }
}

impl HostLimits {
    /// The route a connection to `peer` leaves by: the longest prefix that holds it.
    pub fn route_to(&self, peer: IpAddr) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| r.contains(peer))
            .max_by_key(|r| (r.len, std::cmp::Reverse(r.metric.unwrap_or(0))))
    }

    /// The interface a connection to `peer` uses (by its route).
    pub fn iface_to(&self, peer: IpAddr) -> Option<&Iface> {
        let dev = self.route_to(peer)?.dev.as_ref()?;
        self.ifaces.iter().find(|i| &i.name == dev)
    }
}

impl HostLimits {
    /// Parses `"4096 131072 33554432"`.
    pub fn triple(s: &str) -> Option<[u64; 3]> {
        let v: Vec<u64> = s
            .split_whitespace()
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        v.try_into().ok()
    }
}

/// One socket read, with the limits of its namespace.
#[derive(Clone, Debug)]
pub struct Seen {
    /// the namespace's name
    pub line_ns: String,
    pub facts: SockFacts,
    /// shared by the namespace's sockets (one copy per namespace, not per socket)
    pub host: std::sync::Arc<HostLimits>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrono_like_tcp_info() {
        // HZ 250: 4000 µs per jiffy; rwnd-limited running for 10 jiffies more
        let r = SockRecord {
            chrono_stat: [100, 50, 0],
            chrono_type: 2,
            chrono_start: 1000,
            jiffies: (1u64 << 32) + 1010,
            ..Default::default()
        };
        assert_eq!(chrono_us(&r, 250), [640_000, 240_000, 0]);
    }

    #[test]
    fn record_fields_the_kernel_lacks_are_absent() {
        let mut o = Offsets::absent();
        o.tp_window_clamp = 1676;
        o.tp_wscale_ok_bit = 1;
        let r = SockRecord {
            window_clamp: 663552,
            rcv_nxt: 5,
            copied_seq: u32::MAX,
            family: AF_INET6,
            laddr: std::net::Ipv6Addr::LOCALHOST.octets(),
            ..Default::default()
        };
        let f = SockFacts::from_record(&r, &o, Some(250), 7);
        assert_eq!(f.window_clamp, Some(663552));
        assert_eq!(f.wscale_ok, Some(false));
        assert_eq!(f.scaling_ratio, None);
        assert_eq!(f.unread, None);
        assert_eq!(f.busy_us, None);
        assert_eq!(f.id.laddr.unwrap().to_string(), "::1");
        o.tp_rcv_nxt = 1;
        o.tp_copied_seq = 2;
        // sequence numbers wrap
        assert_eq!(SockFacts::from_record(&r, &o, None, 7).unread, Some(6));
    }

    #[test]
    fn the_route_to_a_peer_is_the_longest_prefix() {
        let r = |dst: &str, len: u8, window: Option<u32>| Route {
            dst: dst.parse().unwrap(),
            len,
            dev: Some("veth-b".into()),
            via: None,
            src: None,
            metric: None,
            window,
        };
        let h = HostLimits {
            routes: vec![
                r("0.0.0.0", 0, None),
                r("10.248.0.0", 24, None),
                r("10.248.0.1", 32, Some(65536)),
            ],
            ..Default::default()
        };
        let to = |a: &str| h.route_to(a.parse().unwrap()).unwrap();
        assert_eq!(to("10.248.0.1").window, Some(65536));
        assert_eq!(to("::ffff:10.248.0.1").window, Some(65536));
        assert_eq!(to("10.248.0.7").len, 24);
        assert_eq!(to("192.0.2.1").len, 0);
        assert_eq!(to("10.248.0.1").spec(), "10.248.0.1/32 dev veth-b");
        assert!(h.route_to("fd00::1".parse().unwrap()).is_none());
    }

    #[test]
    fn receiver_rtt_prefers_its_own_estimate() {
        let mut f = SockFacts {
            rcv_rtt_us: Some(0),
            srtt_us: Some(50),
            ..Default::default()
        };
        assert_eq!(f.receiver_rtt_us(), Some(50));
        f.rcv_rtt_us = Some(18_000);
        assert_eq!(f.receiver_rtt_us(), Some(18_000));
        f.srtt_us = None;
        f.rcv_rtt_us = None;
        assert_eq!(f.receiver_rtt_us(), None);
        assert_eq!(
            HostLimits::triple("4096 131072 33554432"),
            Some([4096, 131072, 33554432])
        );
        assert_eq!(HostLimits::triple("1 2"), None);
    }
}

/// One network interface as netlink reports it (absent: not reported).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Iface {
    pub name: String,
    /// the kernel's index (what a route's `dev` refers to)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    pub mtu: Option<u32>,
    pub gro: Option<bool>,
    pub lro: Option<bool>,
    pub tso: Option<bool>,
    pub gso: Option<bool>,
    /// an XDP program is attached (driver, generic or offloaded)
    pub xdp: Option<bool>,
}

#[cfg(test)]
mod pacing_tests {
    use super::pacing_cap;

    /// The kernel's "no cap" is all ones (`~0UL` in the socket, `~0ULL` in `tcp_info`, `~0U`
    /// where a kernel keeps it in 32 bits): none, not a cap of 147 Ebit/s.
    #[test]
    fn no_cap_is_none_and_a_cap_is_bits() {
        assert_eq!(pacing_cap(true, u64::MAX), None);
        assert_eq!(pacing_cap(true, u32::MAX as u64), None);
        assert_eq!(pacing_cap(false, 12_500_000), None);
        assert_eq!(pacing_cap(true, 12_500_000), Some(100_000_000));
    }
}
