//! Where the kernel members the programs read sit in the running kernel: byte offsets resolved at
//! load time from `/sys/kernel/btf/vmlinux`, written into the programs' `.rodata`.

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
    /// who waited, besides the kernel's chrono: `sk_max_pacing_rate` (bytes/s: the cap an
    /// application set with SO_MAX_PACING_RATE, ~0 when none) and `socket.flags` (`SOCK_NOSPACE`:
    /// the writer found the send buffer full and waits for room)
    pub sk_max_pacing_rate: u32,
    pub socket_flags: u32,
    /// the application's wake-up thresholds: `sk_rcvlowat` (SO_RCVLOWAT) and `notsent_lowat`
    /// (TCP_NOTSENT_LOWAT; 0: the namespace's `net.ipv4.tcp_notsent_lowat`)
    pub sk_rcvlowat: u32,
    pub tp_notsent_lowat: u32,
    /// `rcvq_space.time` (u64, µs of `tcp_clock_us()`): when the receive-buffer autotuning last
    /// measured what the application read, stamped by a read at most one receiver RTT after the
    /// previous one (`tcp_rcv_space_adjust`): how long ago the reader last took data
    pub tp_rcvq_time: u32,
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
            sk_max_pacing_rate: ABSENT,
            socket_flags: ABSENT,
            sk_rcvlowat: ABSENT,
            tp_notsent_lowat: ABSENT,
            tp_rcvq_time: ABSENT,
            task_tgid: ABSENT,
        }
    }
}
