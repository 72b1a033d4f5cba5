//! `iter/tcp`: one fixed record per full TCP socket outside LISTEN (`tcpwin-trace ss`). The
//! kernel holds the socket lock while this runs; nothing runs per packet.
use aya_ebpf::{
    helpers::{bpf_jiffies64, bpf_ktime_get_ns, generated::bpf_seq_write},
    macros::map,
    maps::Array,
};
use tcpwin_common::{flag, hook, tcp_state, SockRecord, SOCK_RCVBUF_LOCK};

use crate::{
    log::{self, klog},
    read::{self, bits, off, Direct, Mem},
};

/// `struct bpf_iter_meta`: the seq_file, the session id, the object's number in this walk.
#[repr(C)]
struct IterMeta {
    seq: u64,
    session_id: u64,
    seq_num: u64,
}

/// `struct bpf_iter__tcp`: `meta`, `sk_common`, `uid`.
#[repr(C)]
pub struct IterTcpCtx {
    meta: u64,
    sk_common: u64,
}

/// The walk (`bpf_iter_meta.session_id`) whose absent members were last logged: once per walk,
/// on its first full socket (`--ebpf-log info` only; never touched else).
#[map(name = "ITER_LOGGED")]
static ITER_LOGGED: Array<u64> = Array::with_max_entries(1, 0);

#[inline(always)]
fn first_of_walk(session: u64) -> bool {
    let Some(p) = ITER_LOGGED.get_ptr_mut(0) else {
        return false;
    };
    // SAFETY: a map value pointer from get_ptr_mut; walks do not overlap (one reader at a time).
    unsafe {
        if *p == session + 1 {
            return false;
        }
        *p = session + 1;
    }
    true
}

/// Writes the socket's record into the iterator's seq_file. A function of its own (a BPF-to-BPF
/// call), as [`crate::track::flush_init`] is: the two frames are siblings under the entry's,
/// not one frame over the 512 bytes the verifier allows.
#[inline(never)]
pub fn tcp_socket(ctx: &IterTcpCtx, sk: u64) {
    let state: u8 = Direct::at(sk, off!(skc_state));
    if state == tcp_state::LISTEN {
        klog!(
            Debug,
            hook::ITER,
            "{} iterator skipped listener port {}: no receive window of its own",
            Direct::at::<u16>(sk, off!(skc_num))
        );
        return;
    }
    let mut r = SockRecord {
        cookie: crate::cookie(sk),
        inode: read::inode(sk),
        bytes_received: Direct::at(sk, off!(tp_bytes_received)),
        bytes_acked: Direct::at(sk, off!(tp_bytes_acked)),
        // SAFETY: bpf_jiffies64 takes no arguments and only reads the clock.
        jiffies: unsafe { bpf_jiffies64() },
        state,
        ..SockRecord::default()
    };
    (r.family, r.netns, r.lport, r.rport) =
        read::identity_into::<Direct>(sk, &mut r.laddr, &mut r.raddr);
    let snap = read::snapshot::<Direct>(sk);
    let d = read::details::<Direct>(sk);
    let (wscale, wscale_ok) = read::wscale::<Direct>(sk);
    let mut f = 0;
    if off!(tp_scaling_ratio) != tcpwin_common::ABSENT {
        f |= flag::RATIO_PRESENT;
    }
    if d.userlocks & SOCK_RCVBUF_LOCK != 0 {
        f |= flag::RCVBUF_LOCKED;
    }
    if wscale_ok {
        f |= flag::WSCALE_OK;
    }
    r.flags = f;
    r.scaling_ratio = snap.scaling_ratio;
    r.rcv_wscale = wscale;
    r.snd_wscale = bits::<Direct>(sk, off!(tp_snd_wscale_bit), off!(tp_snd_wscale_bits)) as u8;
    r.chrono_type = bits::<Direct>(sk, off!(tp_chrono_type_bit), 2) as u8;
    r.window_clamp = snap.window_clamp;
    r.rcv_ssthresh = snap.rcv_ssthresh;
    r.rcv_wnd = d.rcv_wnd;
    r.sk_rcvbuf = snap.sk_rcvbuf;
    r.rcvq_space = snap.rcvq_space;
    r.rcv_mss = d.rcv_mss;
    r.advmss = d.advmss;
    r.rcv_nxt = Direct::at(sk, off!(tp_rcv_nxt));
    r.copied_seq = Direct::at(sk, off!(tp_copied_seq));
    r.rmem_alloc = Direct::at(sk, off!(sk_rmem_alloc));
    r.rcv_rtt_us8 = Direct::at(sk, off!(tp_rcv_rtt_us));
    r.srtt_us8 = Direct::at(sk, off!(tp_srtt_us));
    r.snd_wnd = Direct::at(sk, off!(tp_snd_wnd));
    r.sk_sndbuf = Direct::at(sk, off!(sk_sndbuf));
    r.wmem_queued = Direct::at(sk, off!(sk_wmem_queued));
    r.chrono_start = Direct::at(sk, off!(tp_chrono_start));
    r.chrono_stat = Direct::at(sk, off!(tp_chrono_stat));
    r.userlocks = d.userlocks;
    r.min_rtt_us = Direct::at(sk, off!(tp_rtt_min));
    r.snd_cwnd = Direct::at(sk, off!(tp_snd_cwnd));
    r.packets_out = Direct::at(sk, off!(tp_packets_out));
    r.mss_cache = Direct::at(sk, off!(tp_mss_cache));
    r.pacing_rate = Direct::at(sk, off!(sk_pacing_rate));
    r.max_pacing_rate = Direct::at(sk, off!(sk_max_pacing_rate));
    r.socket_flags = read::socket_flags(sk) as u32;
    r.mdev_us4 = Direct::at(sk, off!(tp_mdev_us));
    r.total_retrans = Direct::at(sk, off!(tp_total_retrans));
    r.lost_out = Direct::at(sk, off!(tp_lost_out));
    r.snd_ssthresh = Direct::at(sk, off!(tp_snd_ssthresh));
    r.lsndtime = Direct::at(sk, off!(tp_lsndtime));
    r.lrcvtime = Direct::at(sk, off!(icsk_lrcvtime));
    r.rcv_ooopack = Direct::at(sk, off!(tp_rcv_ooopack));
    r.write_seq = Direct::at(sk, off!(tp_write_seq));
    r.snd_nxt = Direct::at(sk, off!(tp_snd_nxt));
    r.app_limited = Direct::at(sk, off!(tp_app_limited));
    r.rcvlowat = Direct::at(sk, off!(sk_rcvlowat));
    r.notsent_lowat = Direct::at(sk, off!(tp_notsent_lowat));
    // `rcvq_space.time` is `tcp_clock_us()`, the monotonic clock bpf_ktime_get_ns reads
    let read_us: u64 = Direct::at(sk, off!(tp_rcvq_time));
    // SAFETY: bpf_ktime_get_ns takes no arguments and only reads the clock.
    let now_us = unsafe { bpf_ktime_get_ns() } / 1000;
    r.since_read_us = now_us.saturating_sub(read_us).min(u32::MAX as u64) as u32;
    // SAFETY: `meta` is the iterator context's `struct bpf_iter_meta *` (the verifier checks it).
    let meta = unsafe { &*(ctx.meta as *const IterMeta) };
    if log::on(log::Level::Info) && first_of_walk(meta.session_id) {
        read::absent_members(hook::ITER, r.cookie);
    }
    // SAFETY: `seq` is the iterator's seq_file (bpf_iter_meta.seq, offset 0); the helper copies
    // size_of::<SockRecord>() bytes from `r`, a local.
    let rc = unsafe {
        bpf_seq_write(
            meta.seq as *mut _,
            &r as *const SockRecord as *const _,
            core::mem::size_of::<SockRecord>() as u32,
        )
    };
    // -EOVERFLOW: the read buffer is full; the kernel runs this socket again for the next read
    if log::on(log::Level::Warn) && rc < 0 && rc != -75 {
        klog!(
            Warn,
            hook::ITER,
            "{} iterator record of socket {:x} not written (error {}): missing from this reading",
            r.cookie,
            rc
        );
    }
}

/// The entry point's body: `sk_common` is NULL once, at the end.
#[inline(always)]
pub fn run(ctx: *const IterTcpCtx) -> i32 {
    // SAFETY: the iterator's context is a `struct bpf_iter__tcp`; the verifier checks the loads.
    let ctx = unsafe { &*ctx };
    if ctx.sk_common == 0 {
        return 0;
    }
    let sk = crate::tcp_sk(ctx.sk_common);
    if sk != 0 {
        // the tracer's own walk: an `init` that waited a second leaves now (`ss`'s iterator
        // has no socket state: nothing waits there)
        crate::track::flush_init(sk);
        tcp_socket(ctx, sk);
    } else {
        // request and TIME_WAIT sockets: not full TCP sockets, no receive window to show
        klog!(
            Debug,
            hook::ITER,
            "{} iterator skipped a request or TIME_WAIT socket: no receive window"
        );
    }
    0
}
