//! Types shared by the kernel side (`tcpwin-ebpf`) and userspace (`tcpwin-trace`).
//!
//! Every struct here is `repr(C)` and has one layout whatever backend produced it. The kernel side
//! never knows a struct offset at build time: userspace resolves them from the running kernel's BTF
//! and writes an [`Offsets`] into the programs' `.rodata` before load.
#![cfg_attr(not(test), no_std)]

/// The receive-window formulas of the kernel, once, for both sides (const: usable in BPF code).
pub mod formula {
    /// What `tcp_measure_rcv_mss` (6.6+) measures from a data packet, in 256ths:
    /// `(skb->len << 8) / skb->truesize`. `None` for a truesize of 0 (nothing to divide by).
    /// The kernel stores the result in a u8 (0 becomes 1); values of 256 and more mean the driver
    /// under-reports truesize, and are returned unwrapped so they can be flagged.
    pub const fn ratio(len: u32, truesize: u32) -> Option<u64> {
        if truesize == 0 {
            None
        } else {
            Some(((len as u64) << 8) / truesize as u64)
        }
    }

    /// `tcp_win_from_space` since 6.6: the window a buffer of `space` bytes allows at `ratio`.
    pub const fn win_from_space(space: u64, ratio: u8) -> u64 {
        (space * ratio as u64) >> 8
    }

    /// The inverse: the buffer (`sk_rcvbuf`) needed for a window of `win` bytes at `ratio`,
    /// rounded up (`tcp_space_from_win`). `None` for a ratio of 0.
    pub const fn space_from_win(win: u64, ratio: u8) -> Option<u64> {
        if ratio == 0 {
            None
        } else {
            Some((win << 8).div_ceil(ratio as u64))
        }
    }

    /// `tcp_adv_win_scale` as a ratio in 256ths (the pre-6.6 `tcp_win_from_space`): for n > 0 the
    /// window is `space - space >> n`, for n <= 0 it is `space >> -n`.
    pub const fn adv_win_scale_ratio(n: i32) -> u32 {
        if n > 0 {
            let n = if n > 31 { 31 } else { n };
            256 - (256 >> n)
        } else {
            let m = if n < -31 { 31 } else { -n };
            256 >> m
        }
    }

    /// The largest window a connection can ever advertise with receive scale `wscale`
    /// (`65535 << wscale`; 65535 when scaling was not negotiated).
    pub const fn max_scaled_window(wscale: u8) -> u64 {
        65535u64 << if wscale > 14 { 14 } else { wscale }
    }

    /// The receive window scale the handshake chooses (`tcp_select_initial_window`, scaling on):
    /// from the largest of the socket's space and the host's caps (`tcp_rmem[2]`,
    /// `net.core.rmem_max`), held to the window clamp the handshake starts with (an SO_RCVBUF
    /// socket's buffer at the initial ratio, a route's `window` metric; 0: none), as
    /// `ilog2(space) - 15` between 0 and 14. Fixed for the connection's life.
    pub const fn handshake_wscale(space: u64, tcp_rmem_max: u64, rmem_max: u64, clamp: u64) -> u8 {
        let mut s = space;
        if tcp_rmem_max > s {
            s = tcp_rmem_max;
        }
        if rmem_max > s {
            s = rmem_max;
        }
        // u32 arithmetic in the kernel: at most U32_MAX
        if s > u32::MAX as u64 {
            s = u32::MAX as u64;
        }
        if clamp > 0 && clamp < s {
            s = clamp;
        }
        if s == 0 {
            return 0;
        }
        let log = 63 - s.leading_zeros() as i64;
        let w = log - 15;
        if w < 0 {
            0
        } else if w > 14 {
            14
        } else {
            w as u8
        }
    }

    /// The smallest receive scale that can express a window of `w` bytes.
    pub const fn wscale_for(w: u64) -> u8 {
        let mut s = 0u8;
        while s < 14 && max_scaled_window(s) < w {
            s += 1;
        }
        s
    }

    /// `sk_rcvbuf` after `setsockopt(SO_RCVBUF, val)` (`__sock_set_rcvbuf`): the request capped
    /// by `net.core.rmem_max`, doubled for overhead, at least `SOCK_MIN_RCVBUF` (2048 + 2 x the
    /// skb overhead; the kernel's value is passed in).
    pub const fn so_rcvbuf(val: u64, rmem_max: u64, min_rcvbuf: u64) -> u64 {
        let capped = if val < rmem_max { val } else { rmem_max };
        let doubled = capped * 2;
        if doubled > min_rcvbuf {
            doubled
        } else {
            min_rcvbuf
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn measured_cells() {
            // KERNEL-NOTES: 1448/2280 -> 162, 7240/8072 -> 229, 8948/9780 -> 234
            assert_eq!(ratio(1448, 2280), Some(162));
            assert_eq!(ratio(7240, 8072), Some(229));
            assert_eq!(ratio(8948, 9780), Some(234));
            assert_eq!(ratio(1, 0), None);
            assert_eq!(win_from_space(1 << 20, 162), 663_552);
            assert_eq!(space_from_win(663_552, 162), Some(1 << 20));
            assert_eq!(space_from_win(2_250_000, 162), Some(3_555_556));
            assert_eq!(max_scaled_window(0), 65535);
            assert_eq!(max_scaled_window(7), 65535 << 7);
            assert_eq!(so_rcvbuf(4 << 20, 425_984, 4608), 851_968);
            assert_eq!(so_rcvbuf(1, 425_984, 4608), 4608);
            // measured here (KERNEL-NOTES): iperf3 -w 1004300 locks a buffer of 2008600 whose
            // initial window (ratio 128) is 1004300: scale 4, a window of at most 1048560;
            // -w 1100K: scale 5
            assert_eq!(handshake_wscale(1_004_300, 33554432, 4194304, 1_004_300), 4);
            assert_eq!(handshake_wscale(1_126_400, 33554432, 4194304, 1_126_400), 5);
            // autotuned: the host's largest cap decides (tcp_rmem[2] 32 MiB: 10)
            assert_eq!(handshake_wscale(65536, 33554432, 4194304, 0), 10);
            // a route's window 65536: scale 1, at most 131070
            assert_eq!(handshake_wscale(65536, 33554432, 4194304, 65536), 1);
            assert_eq!(wscale_for(65535), 0);
            assert_eq!(wscale_for(1_048_561), 5);
            assert_eq!(wscale_for(u64::MAX), 14);
        }

        #[test]
        fn estab_keys_round_trip() {
            for (ns, ok, passive) in [(4026531840u32, true, false), (7, false, true)] {
                assert_eq!(
                    super::super::estab_parts(super::super::estab_key(ns, ok, passive)),
                    (ns, ok, passive)
                );
            }
        }

        #[test]
        fn adv_win_scale_equivalents() {
            // n=1 gives half the buffer, n=2 three quarters
            assert_eq!(adv_win_scale_ratio(1), 128);
            assert_eq!(adv_win_scale_ratio(2), 192);
            assert_eq!(adv_win_scale_ratio(0), 256);
            assert_eq!(adv_win_scale_ratio(-1), 128);
            assert_eq!(adv_win_scale_ratio(-2), 64);
            assert_eq!(adv_win_scale_ratio(31), 256);
            assert_eq!(adv_win_scale_ratio(-31), 0);
        }
    }
}

/// Offset value for a kernel member the running kernel does not have (never read).
pub const ABSENT: u32 = u32::MAX;

/// Byte offsets of the kernel members the programs read, resolved at load time from
/// `/sys/kernel/btf/vmlinux`. `ABSENT` marks a member the running kernel lacks.
///
/// `skc_*` are relative to `struct sock_common`, which starts both `struct sock` and
/// `struct request_sock`; `sk_*`, `icsk_*` and `tp_*` are relative to the socket (`struct sock` is the
/// first member of `struct tcp_sock`); `skb_*` to `struct sk_buff`; `shinfo_*` to
/// `struct skb_shared_info` (found at `skb->head + skb->end`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offsets {
    pub skc_family: u32,
    pub skc_state: u32,
    pub skc_num: u32,
    pub skc_dport: u32,
    pub skc_rcv_saddr: u32,
    pub skc_daddr: u32,
    pub skc_v6_rcv_saddr: u32,
    pub skc_v6_daddr: u32,
    pub skc_net: u32,
    pub skc_cookie: u32,
    /// `inet_sock.inet_sport` (network order): the local port, kept after the bound port
    /// (`skc_num`) is released
    pub inet_sport: u32,
    /// `struct net` -> `ns.inum`
    pub net_ns_inum: u32,
    pub sk_rcvbuf: u32,
    pub sk_userlocks: u32,
    pub sk_socket: u32,
    /// `struct socket_alloc`: `vfs_inode` minus `socket` (the socket inode lives beside the socket)
    pub socket_to_inode: u32,
    pub inode_i_ino: u32,
    pub icsk_rcv_mss: u32,
    pub tp_scaling_ratio: u32,
    pub tp_window_clamp: u32,
    pub tp_rcv_ssthresh: u32,
    pub tp_rcv_wnd: u32,
    pub tp_advmss: u32,
    pub tp_rcvq_space: u32,
    /// bit offset (from the socket start) and width of `rx_opt.rcv_wscale`
    pub tp_rcv_wscale_bit: u32,
    pub tp_rcv_wscale_bits: u32,
    /// bit offset of `rx_opt.wscale_ok` (1 bit)
    pub tp_wscale_ok_bit: u32,
    pub skb_len: u32,
    pub skb_truesize: u32,
    pub skb_data: u32,
    pub skb_head: u32,
    pub skb_end: u32,
    pub skb_iif: u32,
    pub shinfo_gso_size: u32,
    pub shinfo_gso_segs: u32,
    /// `TCP_SKB_CB(skb)->seq / end_seq / tcp_flags` (offsets from the sk_buff, inside `cb`): the
    /// payload length without touching packet data
    pub skb_tcb_seq: u32,
    pub skb_tcb_end_seq: u32,
    pub skb_tcb_flags: u32,
    // read by the socket iterator only (`tcpwin-trace ss`)
    pub tp_rcv_nxt: u32,
    pub tp_copied_seq: u32,
    /// `sk_backlog.rmem_alloc`: bytes queued for reading
    pub sk_rmem_alloc: u32,
    /// `rcv_rtt_est.rtt_us` (µs << 3)
    pub tp_rcv_rtt_us: u32,
    /// `srtt_us` (µs << 3)
    pub tp_srtt_us: u32,
    pub tp_bytes_received: u32,
    pub tp_bytes_acked: u32,
    pub tp_snd_wnd: u32,
    pub sk_sndbuf: u32,
    pub sk_wmem_queued: u32,
    pub tp_chrono_start: u32,
    /// `chrono_stat[3]` (jiffies: busy, rwnd-limited, sndbuf-limited)
    pub tp_chrono_stat: u32,
    /// bit offset and width of `rx_opt.snd_wscale`, bit offset of `chrono_type` (2 bits)
    pub tp_snd_wscale_bit: u32,
    pub tp_snd_wscale_bits: u32,
    pub tp_chrono_type_bit: u32,
    /// `rtt_min.s[0].v`: the windowed minimum RTT (`tcp_min_rtt()`, `tcpi_min_rtt`), µs
    pub tp_rtt_min: u32,
    /// the sender's congestion window (segments), segments in flight, and its MSS
    pub tp_snd_cwnd: u32,
    pub tp_packets_out: u32,
    pub tp_mss_cache: u32,
    /// what tells congestion from an application that does not write, and an idle socket from
    /// one moving data (the socket iterator's): `mdev_us` (RTT variance, µs << 2),
    /// `total_retrans`, `lost_out`, `snd_ssthresh`, `lsndtime` and `icsk_ack.lrcvtime` (jiffies
    /// of the last data sent / received), `rcv_ooopack`, `write_seq` and `snd_nxt` (unsent
    /// bytes), `app_limited`, `sk_pacing_rate` (bytes/s)
    pub tp_mdev_us: u32,
    pub tp_total_retrans: u32,
    pub tp_lost_out: u32,
    pub tp_snd_ssthresh: u32,
    pub tp_lsndtime: u32,
    pub icsk_lrcvtime: u32,
    pub tp_rcv_ooopack: u32,
    pub tp_write_seq: u32,
    pub tp_snd_nxt: u32,
    pub tp_app_limited: u32,
    pub sk_pacing_rate: u32,
    /// the application's wake-up thresholds: `sk_rcvlowat` (SO_RCVLOWAT) and `notsent_lowat`
    /// (TCP_NOTSENT_LOWAT; 0: the namespace's `net.ipv4.tcp_notsent_lowat`)
    pub sk_rcvlowat: u32,
    pub tp_notsent_lowat: u32,
    /// `task_struct.tgid`: a forked child's process id (`--pid` follows forks)
    pub task_tgid: u32,
}

impl Offsets {
    /// Everything absent: the value compiled into the object before userspace overrides it.
    pub const fn absent() -> Self {
        Offsets {
            skc_family: ABSENT,
            skc_state: ABSENT,
            skc_num: ABSENT,
            skc_dport: ABSENT,
            skc_rcv_saddr: ABSENT,
            skc_daddr: ABSENT,
            skc_v6_rcv_saddr: ABSENT,
            skc_v6_daddr: ABSENT,
            skc_net: ABSENT,
            skc_cookie: ABSENT,
            inet_sport: ABSENT,
            net_ns_inum: ABSENT,
            sk_rcvbuf: ABSENT,
            sk_userlocks: ABSENT,
            sk_socket: ABSENT,
            socket_to_inode: ABSENT,
            inode_i_ino: ABSENT,
            icsk_rcv_mss: ABSENT,
            tp_scaling_ratio: ABSENT,
            tp_window_clamp: ABSENT,
            tp_rcv_ssthresh: ABSENT,
            tp_rcv_wnd: ABSENT,
            tp_advmss: ABSENT,
            tp_rcvq_space: ABSENT,
            tp_rcv_wscale_bit: ABSENT,
            tp_rcv_wscale_bits: ABSENT,
            tp_wscale_ok_bit: ABSENT,
            skb_len: ABSENT,
            skb_truesize: ABSENT,
            skb_data: ABSENT,
            skb_head: ABSENT,
            skb_end: ABSENT,
            skb_iif: ABSENT,
            shinfo_gso_size: ABSENT,
            shinfo_gso_segs: ABSENT,
            skb_tcb_seq: ABSENT,
            skb_tcb_end_seq: ABSENT,
            skb_tcb_flags: ABSENT,
            tp_rcv_nxt: ABSENT,
            tp_copied_seq: ABSENT,
            sk_rmem_alloc: ABSENT,
            tp_rcv_rtt_us: ABSENT,
            tp_srtt_us: ABSENT,
            tp_bytes_received: ABSENT,
            tp_bytes_acked: ABSENT,
            tp_snd_wnd: ABSENT,
            sk_sndbuf: ABSENT,
            sk_wmem_queued: ABSENT,
            tp_chrono_start: ABSENT,
            tp_chrono_stat: ABSENT,
            tp_snd_wscale_bit: ABSENT,
            tp_snd_wscale_bits: ABSENT,
            tp_chrono_type_bit: ABSENT,
            tp_rtt_min: ABSENT,
            tp_snd_cwnd: ABSENT,
            tp_packets_out: ABSENT,
            tp_mss_cache: ABSENT,
            tp_mdev_us: ABSENT,
            tp_total_retrans: ABSENT,
            tp_lost_out: ABSENT,
            tp_snd_ssthresh: ABSENT,
            tp_lsndtime: ABSENT,
            icsk_lrcvtime: ABSENT,
            tp_rcv_ooopack: ABSENT,
            tp_write_seq: ABSENT,
            tp_snd_nxt: ABSENT,
            tp_app_limited: ABSENT,
            sk_pacing_rate: ABSENT,
            sk_rcvlowat: ABSENT,
            tp_notsent_lowat: ABSENT,
            task_tgid: ABSENT,
        }
    }
}

/// Run-time settings written into `.rodata` next to [`Offsets`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// tgid whose sockets are traced (with `filter_pid` = 1)
    pub target_tgid: u32,
    /// 1: only sockets owned by `target_tgid` (see the owner maps)
    pub filter_pid: u8,
    /// 1: read a socket's cookie from the socket (`skc_cookie`: 0 until something asked for it)
    /// instead of calling `bpf_get_socket_cookie`, which kernels before 5.12 refuse in tracing
    /// programs (the loader sets it when the verifier says so)
    pub cookie_by_read: u8,
    /// 0 = any; else either end's port must match
    pub port: u16,
    /// 0 = any; else the inode of the one network namespace traced (`--netns NAME`, the
    /// caller's by default, a `--pid`'s own)
    pub netns: u32,
    /// `--addr`: 0 = any; 4 = either end's IPv4 address (a dual-stack socket's IPv4-mapped one
    /// included) masked by `addr_mask[0]` is `addr[0]`; 6 = either end's IPv6 address masked
    /// word by word is `addr`. Words as the kernel keeps addresses (network byte order in memory).
    pub addr_family: u8,
    pub _pad: [u8; 3],
    pub addr: [u32; 4],
    pub addr_mask: [u32; 4],
}

impl Config {
    /// Whether the trace follows one process (and so its forks): `--pid`, not a workload's
    /// processes (`u32::MAX`: a container or cgroup, followed by cgroup id).
    pub const fn follows_a_process(&self) -> bool {
        self.filter_pid != 0 && self.target_tgid != u32::MAX
    }

    /// The filters a session asks: sockets of a process (`--pid`), of a port (`--port`), of a
    /// network namespace (its inode; None: every namespace).
    pub const fn filter(pid: Option<u32>, port: Option<u16>, netns: Option<u32>) -> Config {
        Config {
            target_tgid: match pid {
                Some(p) => p,
                None => 0,
            },
            filter_pid: pid.is_some() as u8,
            cookie_by_read: 0,
            port: match port {
                Some(p) => p,
                None => 0,
            },
            netns: match netns {
                Some(n) => n,
                None => 0,
            },
            addr_family: 0,
            _pad: [0; 3],
            addr: [0; 4],
            addr_mask: [0; 4],
        }
    }

    /// With the address filter (`--addr`): `octets` of an IPv4 (the first 4) or IPv6 network,
    /// its first `len` bits compared.
    pub fn with_addr(self, ipv4: bool, octets: [u8; 16], len: u8) -> Config {
        // the network's first `len` bits set, from the first byte on (an IPv4 one in the first 4)
        let bits: u32 = if ipv4 { 32 } else { 128 };
        let mask =
            (u128::MAX.checked_shl(bits - len as u32).unwrap_or(0) << (128 - bits)).to_be_bytes();
        let word = |b: [u8; 16], w: usize| {
            u32::from_ne_bytes([b[w * 4], b[w * 4 + 1], b[w * 4 + 2], b[w * 4 + 3]])
        };
        let addr_mask: [u32; 4] = core::array::from_fn(|w| word(mask, w));
        let addr: [u32; 4] = core::array::from_fn(|w| word(octets, w) & addr_mask[w]);
        Config {
            addr_family: if ipv4 { 4 } else { 6 },
            addr,
            addr_mask,
            ..self
        }
    }
}

/// Event kinds.
pub mod kind {
    /// the connection reached ESTABLISHED: the initial window
    pub const INIT: u8 = 1;
    /// `scaling_ratio` changed
    pub const RATIO: u8 = 2;
    /// `sk_rcvbuf`, `window_clamp`, `rcv_ssthresh` or `rcvq_space` changed
    pub const SPACE: u8 = 3;
    /// a socket that existed before the trace started, first observed
    pub const SEEN: u8 = 4;
    /// the socket is destroyed: its final values
    pub const CLOSE: u8 = 5;
}

/// `Event::flags` bits.
pub mod flag {
    /// `scaling_ratio` exists on this kernel (else the ratio fields mean nothing)
    pub const RATIO_PRESENT: u8 = 1 << 0;
    /// `SO_RCVBUF` locked the buffer (`sk_userlocks & SOCK_RCVBUF_LOCK`)
    pub const RCVBUF_LOCKED: u8 = 1 << 1;
    /// window scaling was negotiated (`rx_opt.wscale_ok`)
    pub const WSCALE_OK: u8 = 1 << 2;
    /// `skb_*`, `gso_*` and `ifindex` describe a packet
    pub const SKB: u8 = 1 << 3;
    /// `init_space` / `init_mss` come from `tcp_select_initial_window`
    pub const INIT_PARAMS: u8 = 1 << 4;
    /// `prev_*` fields hold the previously reported values
    pub const PREV: u8 = 1 << 5;
    /// `pid` / `comm` are known
    pub const PID: u8 = 1 << 6;
    /// `cookie` is known
    pub const COOKIE: u8 = 1 << 7;
}

/// Hooks, used as counter indices and in `Event::hook`.
pub mod hook {
    pub const TP_TCP_PROBE: u8 = 0;
    pub const TP_RCV_SPACE_ADJUST: u8 = 1;
    pub const TP_RCVBUF_GROW: u8 = 2;
    pub const TP_SET_STATE: u8 = 3;
    pub const TP_DESTROY_SOCK: u8 = 4;
    pub const FN_MEASURE_RCV_MSS: u8 = 5;
    pub const FN_EVENT_DATA_RECV: u8 = 6;
    pub const FN_RCV_SPACE_ADJUST_ENTRY: u8 = 7;
    pub const FN_RCV_SPACE_ADJUST_EXIT: u8 = 8;
    pub const FN_SELECT_INITIAL_WINDOW: u8 = 9;
    pub const FN_OPENREQ_INIT_RWIN: u8 = 10;
    /// `--pid` only: a process the trace follows forked
    pub const TP_PROCESS_FORK: u8 = 11;
    pub const COUNT: usize = 12;
    /// not a kernel hook: a change the tracer's once-a-second socket iterator read found that no
    /// hook had reported (made after the socket's last hooked packet); no counter
    pub const ITER_CATCH_UP: u8 = 200;
    pub const ITER_CATCH_UP_NAME: &str = "iter/tcp";
    /// `--ebpf-log` lines of the socket iterator (`iter/tcp`, program `tcp_sockets`)
    pub const ITER: u8 = ITER_CATCH_UP;
    /// `--ebpf-log` lines of a kernel read whose hook is unknown (a read that faulted deep in
    /// a shared helper)
    pub const UNKNOWN: u8 = 255;

    /// The hook's name for a log line or a counter.
    pub fn name(id: u8) -> &'static str {
        match id {
            ITER => ITER_CATCH_UP_NAME,
            i if (i as usize) < COUNT => NAMES[i as usize],
            _ => "?",
        }
    }

    pub const NAMES: [&str; COUNT] = [
        "tcp:tcp_probe",
        "tcp:tcp_rcv_space_adjust",
        "tcp:tcp_rcvbuf_grow",
        "sock:inet_sock_set_state",
        "tcp:tcp_destroy_sock",
        "tcp_measure_rcv_mss",
        "tcp_event_data_recv",
        "tcp_rcv_space_adjust(entry)",
        "tcp_rcv_space_adjust(exit)",
        "tcp_select_initial_window",
        "tcp_openreq_init_rwin",
        "sched:sched_process_fork",
    ];
}

/// Indices of the per-CPU counter array. Hook hits come first (`hook::*`).
pub mod counter {
    use super::hook;
    /// an event was due (a tracked value changed, or init/seen/close)
    pub const EVENTS_DUE: u32 = hook::COUNT as u32;
    /// handed to the ring buffer
    pub const EVENTS_SENT: u32 = EVENTS_DUE + 1;
    /// ring buffer full: the event was lost (userspace reports it)
    pub const EVENTS_DROPPED: u32 = EVENTS_DUE + 2;
    /// hook hits on sockets the filters rejected
    pub const FILTERED: u32 = EVENTS_DUE + 3;
    /// per-socket state could not be stored
    pub const STATE_FULL: u32 = EVENTS_DUE + 4;
    /// packet ratio histogram slots that could not be stored
    pub const HIST_FULL: u32 = EVENTS_DUE + 5;
    /// hits that cannot move a receive window (a pure ACK at `tcp:tcp_probe`, the entry of
    /// `tcp_rcv_space_adjust`) on a socket already checked within [`super::RECHECK_JIFFIES`]
    pub const RECHECK_SKIPPED: u32 = EVENTS_DUE + 6;
    /// `--ebpf-log` lines the programs wrote (or tried to: a full log ring loses them; userspace
    /// counts the lines it printed against this)
    pub const LOG_DUE: u32 = EVENTS_DUE + 7;
    pub const COUNT: u32 = EVENTS_DUE + 8;
}

/// How often hooks that cannot move a receive window re-check a socket (see
/// `counter::RECHECK_SKIPPED`): they still find sockets, owners and changes nothing else reports.
/// In jiffies, the one clock tracing programs may read without a clock read (`bpf_jiffies64`
/// is inlined): 100 ms at Debian's HZ=250, 25 ms at HZ=1000, 250 ms at HZ=100.
pub const RECHECK_JIFFIES: u64 = 25;
/// Slots of the direct-mapped table of recently checked sockets (a power of two).
pub const RECHECK_SLOTS: u32 = 4096;

/// Sockets the tracer tracks at once (an LRU map: the least recently seen is evicted beyond it,
/// counted as `state_full`).
pub const MAX_TRACKED_SOCKETS: u32 = 65536;
/// Socket inodes a traced process may own (`--pid`).
pub const MAX_OWNED_INODES: u32 = 65536;
/// Listening ports a traced process may own (`--pid`: its listeners' children are its sockets).
pub const MAX_OWNED_PORTS: u32 = 4096;
/// Cgroups a traced workload's processes run in (`--container`, `--cgroup`): a process started
/// in one of them after the last /proc refresh is the workload's when it connects or listens.
pub const MAX_OWNED_CGROUPS: u32 = 1024;
/// Processes a `--pid` trace follows: the PID's process tree from /proc, and each process one of
/// them forks, marked in the kernel at the fork.
pub const MAX_OWNED_TGIDS: u32 = 16384;
/// Handshakes waiting for the initial window their `tcp_select_initial_window` chose.
pub const MAX_PENDING_INITS: u32 = 4096;
/// Network namespaces the exporter's in-kernel counters keep apart (per wscale/side key, and
/// per namespace for closed-connection sums).
pub const MAX_COUNTED_NAMESPACES: u32 = 4096;

/// A socket checked recently by a hook that cannot move its window.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    pub sk: u64,
    pub at_jiffies: u64,
}

/// One event on the ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Event {
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC)
    pub ts_ns: u64,
    /// socket cookie, as `getsockopt(SO_COOKIE)` and `ss -e` (`sk:`) show it
    pub cookie: u64,
    pub netns: u32,
    pub pid: u32,
    pub comm: [u8; 16],
    /// IPv4 addresses use the first 4 bytes (network order)
    pub laddr: [u8; 16],
    pub raddr: [u8; 16],
    pub lport: u16,
    pub rport: u16,
    pub kind: u8,
    /// AF_INET (2) or AF_INET6 (10)
    pub family: u8,
    pub hook: u8,
    pub flags: u8,
    pub scaling_ratio: u8,
    pub prev_scaling_ratio: u8,
    pub rcv_wscale: u8,
    /// TCP state (`TCP_ESTABLISHED` = 1, ...)
    pub state: u8,
    pub window_clamp: u32,
    pub prev_window_clamp: u32,
    pub rcv_ssthresh: u32,
    pub prev_rcv_ssthresh: u32,
    pub rcv_wnd: u32,
    pub sk_rcvbuf: u32,
    pub prev_sk_rcvbuf: u32,
    pub rcvq_space: u32,
    pub prev_rcvq_space: u32,
    pub rcv_mss: u32,
    pub advmss: u32,
    /// payload length the ratio rule uses (TCP header already pulled)
    pub skb_len: u32,
    pub skb_truesize: u32,
    pub ifindex: u32,
    pub gso_size: u16,
    pub gso_segs: u16,
    /// `tcp_select_initial_window(__space, mss)` (with `flag::INIT_PARAMS`)
    pub init_space: u32,
    pub init_mss: u32,
    /// 1 when `gso_size`/`gso_segs` were read from the cause packet (with `flag::SKB`); 0 when
    /// the tracer skipped its shared info (see `SkbShape` in tcpwin-ebpf's read.rs)
    pub gso_read: u8,
    pub _pad: [u8; 7],
}

/// One TCP socket as the `iter/tcp` program writes it (`tcpwin-trace ss`): raw kernel values;
/// userspace turns them into facts. Written only for full TCP sockets outside LISTEN.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockRecord {
    pub cookie: u64,
    /// socket inode (0: no file)
    pub inode: u64,
    pub bytes_received: u64,
    pub bytes_acked: u64,
    /// `bpf_jiffies64()` at the read (the running chrono's end)
    pub jiffies: u64,
    /// `sk_pacing_rate`, bytes/s
    pub pacing_rate: u64,
    pub laddr: [u8; 16],
    pub raddr: [u8; 16],
    pub netns: u32,
    pub lport: u16,
    pub rport: u16,
    pub family: u8,
    pub state: u8,
    /// `flag::RATIO_PRESENT`, `flag::RCVBUF_LOCKED`, `flag::WSCALE_OK` (which other fields the
    /// running kernel lacks, userspace knows from the offsets it resolved)
    pub flags: u8,
    pub scaling_ratio: u8,
    pub rcv_wscale: u8,
    pub snd_wscale: u8,
    pub chrono_type: u8,
    /// `sk_userlocks`: `SOCK_SNDBUF_LOCK` (1), `SOCK_RCVBUF_LOCK` (2)
    pub userlocks: u8,
    pub window_clamp: u32,
    pub rcv_ssthresh: u32,
    pub rcv_wnd: u32,
    pub sk_rcvbuf: u32,
    pub rcv_mss: u32,
    pub advmss: u32,
    pub rcv_nxt: u32,
    pub copied_seq: u32,
    pub rmem_alloc: u32,
    /// raw `rcv_rtt_est.rtt_us` and `srtt_us` (µs << 3)
    pub rcv_rtt_us8: u32,
    pub srtt_us8: u32,
    pub snd_wnd: u32,
    pub sk_sndbuf: u32,
    pub wmem_queued: u32,
    pub chrono_start: u32,
    pub chrono_stat: [u32; 3],
    /// `tcp_min_rtt()`, µs (0: no sample yet)
    pub min_rtt_us: u32,
    /// congestion window and segments in flight, in `mss_cache` units
    pub snd_cwnd: u32,
    pub packets_out: u32,
    pub mss_cache: u32,
    /// `rcvq_space.space`: what the tracer reports beside the window fields
    pub rcvq_space: u32,
    /// `mdev_us` (µs << 2: `tcpi_rttvar` is it >> 2)
    pub mdev_us4: u32,
    pub total_retrans: u32,
    pub lost_out: u32,
    pub snd_ssthresh: u32,
    /// `tcp_jiffies32` of the last data sent and received
    pub lsndtime: u32,
    pub lrcvtime: u32,
    /// segments received out of order (5.4+)
    pub rcv_ooopack: u32,
    /// `write_seq - snd_nxt` is what the application wrote and TCP has not sent
    pub write_seq: u32,
    pub snd_nxt: u32,
    /// `app_limited`: nonzero while the sender has had less data than the network could take
    pub app_limited: u32,
    /// `sk_rcvlowat` (SO_RCVLOWAT: the bytes a reader waits for; 1 unless set)
    pub rcvlowat: u32,
    /// `notsent_lowat` (TCP_NOTSENT_LOWAT; 0: the namespace's sysctl)
    pub notsent_lowat: u32,
    pub _pad: u32,
}

/// An ingress interface of the per-packet histogram; `IF_SLOTS` maps it to a slot of `PKT_HIST`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IfKey {
    pub netns: u32,
    pub ifindex: u32,
}

/// Ratios at or above 256 mean the driver under-reports truesize; they are kept up to this cap.
pub const HIST_RATIO_MAX: u32 = 1023;
/// Buckets per interface in `PKT_HIST` (ratio 0..=HIST_RATIO_MAX).
pub const HIST_BUCKETS: u32 = HIST_RATIO_MAX + 1;
/// Interfaces the per-packet histogram keeps apart; packets of more are counted in `HIST_FULL`.
pub const HIST_IFACES: u32 = 16;

/// A listener (or port) owned by the traced PID, in its network namespace.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PortKey {
    pub netns: u32,
    pub port: u16,
    pub _pad: u16,
}

/// A connection's 4-tuple, to carry `tcp_select_initial_window` arguments to the socket.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TupleKey {
    pub netns: u32,
    pub lport: u16,
    pub rport: u16,
    pub laddr: [u8; 16],
    pub raddr: [u8; 16],
}

/// What `tcp_select_initial_window` was given and chose.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InitParams {
    pub space: u32,
    pub mss: u32,
    pub rcv_wnd: u32,
    pub window_clamp: u32,
}

/// TCP states (include/net/tcp_states.h).
pub mod tcp_state {
    pub const ESTABLISHED: u8 = 1;
    pub const SYN_SENT: u8 = 2;
    pub const SYN_RECV: u8 = 3;
    pub const CLOSE: u8 = 7;
    pub const LISTEN: u8 = 10;

    /// ESTABLISHED and the closing states that still receive or hold data; not LISTEN, SYN_*,
    /// TIME_WAIT or CLOSE, where the window fields are not (or no longer) meaningful.
    pub const fn carries_data(state: u8) -> bool {
        matches!(state, 1 | 4 | 5 | 8 | 9 | 11)
    }
}

/// Address families as `Event::family` carries them.
pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;

/// `SOCK_RCVBUF_LOCK` in `sk_userlocks` (`SO_RCVBUF`: receive autotuning off).
pub const SOCK_RCVBUF_LOCK: u8 = 2;
/// `SOCK_SNDBUF_LOCK` in `sk_userlocks` (`SO_SNDBUF`: send buffer autotuning off).
pub const SOCK_SNDBUF_LOCK: u8 = 1;

/// The key of `ESTAB_COUNTS`: the namespace, window scaling negotiated, the passive side.
pub const fn estab_key(netns: u32, wscale_ok: bool, passive: bool) -> u64 {
    ((netns as u64) << 2) | ((wscale_ok as u64) << 1) | passive as u64
}

/// Per namespace, summed over the connections that closed (`CLOSED_SUMS`): the `tcp_info`
/// chrono times they had at close (running chrono included), in jiffies, and how many closed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClosedSums {
    /// busy, rwnd-limited, sndbuf-limited (the order of `tcp_chrono` - 1)
    pub chrono_jiffies: [u64; 3],
    pub closed: u64,
}

/// The parts of an `ESTAB_COUNTS` key: (netns, wscale_ok, passive).
pub const fn estab_parts(key: u64) -> (u32, bool, bool) {
    ((key >> 2) as u32, key & 2 != 0, key & 1 != 0)
}

/// Names of the maps and globals in the object, shared so a rename breaks the build, not the run.
pub mod names {
    pub const EVENTS: &str = "EVENTS";
    pub const COUNTERS: &str = "COUNTERS";
    pub const PKT_HIST: &str = "PKT_HIST";
    pub const IF_SLOTS: &str = "IF_SLOTS";
    pub const OWNED_INODES: &str = "OWNED_INODES";
    pub const OWNED_PORTS: &str = "OWNED_PORTS";
    pub const OWNED_CGROUPS: &str = "OWNED_CGROUPS";
    pub const OWNED_TGIDS: &str = "OWNED_TGIDS";
    pub const OFFSETS: &str = "OFFSETS";
    pub const CONFIG: &str = "CONFIG";
    pub const INIT_HOOKED: &str = "INIT_HOOKED";
    /// the `iter/tcp` program
    pub const ITER_TCP: &str = "tcp_sockets";
    /// the exporter's handshake counter and its map
    pub const COUNT_STATES: &str = "count_states";
    pub const ESTAB_COUNTS: &str = "ESTAB_COUNTS";
    pub const CLOSED_SUMS: &str = "CLOSED_SUMS";
    /// the exporter's per-packet hook (`--packet-histogram`)
    pub const COUNT_PACKET: &str = "count_packet";
    /// aya-log's ring buffer and level (`--ebpf-log`): `aya_log_ebpf`'s own symbols
    pub const AYA_LOGS: &str = "AYA_LOGS";
    pub const AYA_LOG_LEVEL: &str = "AYA_LOG_LEVEL";
}

/// The ABI both sides compile: a field added, removed or resized on one side breaks the build
/// here, not a decode at run time (the eBPF side writes these bytes, userspace reads them).
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<Offsets>() == 284);
    assert!(size_of::<Config>() == 48);
    assert!(size_of::<Checked>() == 16);
    assert!(size_of::<Event>() == 160);
    assert!(size_of::<SockRecord>() == 240);
    assert!(size_of::<IfKey>() == 8);
    assert!(size_of::<PortKey>() == 8);
    assert!(size_of::<TupleKey>() == 40);
    assert!(size_of::<InitParams>() == 16);
    assert!(size_of::<ClosedSums>() == 32);
};

#[cfg(feature = "user")]
mod user {
    use super::*;
    // SAFETY (each): repr(C) structs of integers and integer arrays only, with explicit padding
    // fields, so every bit pattern is a valid value and there are no pointers or niches; the
    // sizes are asserted above.
    unsafe impl aya::Pod for Offsets {}
    // SAFETY: as above.
    unsafe impl aya::Pod for Config {}
    // SAFETY: as above.
    unsafe impl aya::Pod for Event {}
    // SAFETY: as above.
    unsafe impl aya::Pod for IfKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for PortKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for SockRecord {}
    // SAFETY: as above.
    unsafe impl aya::Pod for ClosedSums {}
}

#[cfg(test)]
mod config_tests {
    use super::*;

    #[test]
    fn the_address_filter_is_kept_as_the_kernel_keeps_addresses() {
        let v4 = |a: [u8; 4], len| {
            let mut o = [0u8; 16];
            o[..4].copy_from_slice(&a);
            Config::default().with_addr(true, o, len)
        };
        let c = v4([10, 1, 2, 3], 8);
        assert_eq!(c.addr_family, 4);
        assert_eq!(c.addr[0], u32::from_ne_bytes([10, 0, 0, 0]));
        assert_eq!(c.addr_mask[0], u32::from_ne_bytes([255, 0, 0, 0]));
        assert_eq!(c.addr_mask[1..], [0; 3]);
        let c = v4([192, 168, 7, 255], 21);
        assert_eq!(c.addr_mask[0], u32::from_ne_bytes([255, 255, 248, 0]));
        assert_eq!(c.addr[0], u32::from_ne_bytes([192, 168, 0, 0]));
        assert_eq!(v4([1, 2, 3, 4], 32).addr_mask[0], u32::MAX);
        assert_eq!(v4([1, 2, 3, 4], 0).addr_mask[0], 0);
        // 2001:db8::/33: two words whole, the third's first bit
        let mut o = [0u8; 16];
        o[..5].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0xff]);
        o[15] = 1;
        let c = Config::default().with_addr(false, o, 33);
        assert_eq!(c.addr_family, 6);
        assert_eq!(
            c.addr_mask,
            [u32::MAX, u32::from_ne_bytes([0x80, 0, 0, 0]), 0, 0]
        );
        assert_eq!(
            c.addr,
            [
                u32::from_ne_bytes([0x20, 0x01, 0x0d, 0xb8]),
                u32::from_ne_bytes([0x80, 0, 0, 0]),
                0,
                0
            ]
        );
        assert_eq!(Config::default().addr_family, 0);
    }
}
