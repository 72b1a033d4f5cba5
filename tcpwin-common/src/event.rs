//! What the programs write for userspace: the ring buffer's events (their kinds, flags and
//! hooks), the per-CPU counters' indices, and the `iter/tcp` program's socket records.

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

/// `Event::flags2` bits.
pub mod flag2 {
    /// the record also carries its socket's `init`, deferred from ESTABLISHED to the socket's
    /// first other record (its first ratio or space change, its close, or the once-a-second
    /// socket walk once it waited a second): `prev_*` hold the window fields it had then,
    /// `init_ts_ns`, `init_rcv_wnd`, `init_rcv_mss` and `init_hook` the rest, `init_space` /
    /// `init_mss` its `tcp_select_initial_window` (with `flag::INIT_PARAMS`). A record of kind
    /// `INIT` with this bit carries nothing else.
    pub const INIT_MERGED: u8 = 1 << 0;
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
    /// sockets whose `init` was deferred to their first other record (`flag2::INIT_MERGED`)
    pub const INIT_DEFERRED: u32 = EVENTS_DUE + 8;
    /// deferred `init`s that left with a record (or were lost with it: `EVENTS_DROPPED`)
    pub const INIT_RESOLVED: u32 = EVENTS_DUE + 9;
    pub const COUNT: u32 = EVENTS_DUE + 10;
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
    /// `flag2::*`
    pub flags2: u8,
    /// with `flag2::INIT_MERGED`: the hook that saw ESTABLISHED
    pub init_hook: u8,
    pub _pad: [u8; 5],
    /// with `flag2::INIT_MERGED`: when the socket reached ESTABLISHED (`bpf_ktime_get_ns()`),
    /// and its `rcv_wnd` and `rcv_mss` then
    pub init_ts_ns: u64,
    pub init_rcv_wnd: u32,
    pub init_rcv_mss: u32,
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
    /// `sk_max_pacing_rate`, bytes/s (SO_MAX_PACING_RATE; `u64::MAX`: none set)
    pub max_pacing_rate: u64,
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
    /// `sk_socket->flags` (low 32 bits; `SOCK_NOSPACE`: the writer waits for room in the send
    /// buffer); 0 for a socket without a file
    pub socket_flags: u32,
    /// µs since `rcvq_space.time` (the reader's last measured read), saturating; 0 where the
    /// member is absent (userspace knows from the offsets)
    pub since_read_us: u32,
    pub _pad: u32,
}
