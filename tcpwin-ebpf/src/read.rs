//! The one place that reads kernel memory: every member at the offset userspace resolved from BTF.
//! A member marked `ABSENT` is never read; its value is the type's default.
use aya_ebpf::helpers::generated::bpf_probe_read_kernel;
use tcpwin_common::{formula, hook, Offsets, TupleKey, ABSENT};

use crate::log::{self, klog};

/// Written by userspace (`EbpfLoader::override_global`) before load; the verifier sees constants.
#[unsafe(no_mangle)]
pub(crate) static OFFSETS: Offsets = Offsets::absent();

/// One offset, read through a volatile load so the compiler cannot fold the placeholder value.
macro_rules! off {
    ($field:ident) => {
        // SAFETY: a read of our own .rodata global; volatile so the placeholder is not folded.
        unsafe { core::ptr::read_volatile(core::ptr::addr_of!($crate::read::OFFSETS.$field)) }
    };
}
pub(crate) use off;

/// Reads a `T` at `base + off`; absent members and failed reads give zero.
///
/// Branch-free on purpose: the helper zeroes the destination when the read faults, so the result
/// is not inspected (one branch per read would multiply the verifier's states). The `ABSENT`
/// test is on a `.rodata` constant, which the verifier resolves at load time.
#[inline(always)]
pub fn at<T: Copy + Default>(base: u64, off: u32) -> T {
    let mut v = T::default();
    if off == ABSENT {
        return v;
    }
    // SAFETY: the helper checks the source address and zeroes `v` on a fault; `v` is a local of size_of::<T>().
    let rc = unsafe {
        bpf_probe_read_kernel(
            &mut v as *mut T as *mut _,
            core::mem::size_of::<T>() as u32,
            (base + off as u64) as *const _,
        )
    };
    // the fault first: a read that succeeds does not even load the level
    if rc < 0 && log::on(log::Level::Warn) {
        klog!(
            Warn,
            hook::UNKNOWN,
            "{} kernel read of {} bytes at offset {} faulted (error {}): read as 0",
            core::mem::size_of::<T>() as u32,
            off,
            rc
        );
    }
    v
}

/// How the hot path reads kernel memory.
pub trait Mem {
    fn at<T: Copy + Default>(base: u64, off: u32) -> T;
}

/// `bpf_probe_read_kernel`: works on any address (kprobes, untyped pointers).
pub struct Probe;

impl Mem for Probe {
    #[inline(always)]
    fn at<T: Copy + Default>(base: u64, off: u32) -> T {
        at(base, off)
    }
}

/// A plain load through a BTF-typed pointer (tp_btf / fentry arguments, `bpf_skc_to_tcp_sock`):
/// the verifier checks the offset against the struct's BTF, the JIT turns a fault into zero. One
/// instruction instead of a helper call: the per-packet hook's reads use it.
pub struct Direct;

impl Mem for Direct {
    #[inline(always)]
    fn at<T: Copy + Default>(base: u64, off: u32) -> T {
        if off == ABSENT {
            return T::default();
        }
        // SAFETY: only used on BTF-typed pointers: the verifier checks the offset, the JIT turns a fault into 0.
        unsafe { core::ptr::read_volatile((base + off as u64) as *const T) }
    }
}

/// Reads a bitfield of `bits` bits starting `bit` bits after `base`. One within a byte is a
/// byte load (the verifier accepts a plain load of a whole byte of bitfields); one straddling
/// bytes is read with the helper.
#[inline(always)]
pub fn bits<M: Mem>(base: u64, bit: u32, width: u32) -> u32 {
    if bit == ABSENT || width == 0 || width > 8 {
        return 0;
    }
    let mask = (1u32 << width) - 1;
    if bit % 8 + width <= 8 {
        let byte: u8 = M::at(base, bit / 8);
        return (byte as u32 >> (bit % 8)) & mask;
    }
    let word: u32 = at(base, bit / 8);
    (word >> (bit % 8)) & mask
}

/// The values whose change is reported (read on every hook hit: keep it small).
#[derive(Clone, Copy, Default)]
pub struct Snapshot {
    pub scaling_ratio: u8,
    pub window_clamp: u32,
    pub rcv_ssthresh: u32,
    pub sk_rcvbuf: u32,
    pub rcvq_space: u32,
}

#[inline(always)]
pub fn snapshot<M: Mem>(sk: u64) -> Snapshot {
    let rcvbuf: i32 = M::at(sk, off!(sk_rcvbuf));
    Snapshot {
        scaling_ratio: M::at(sk, off!(tp_scaling_ratio)),
        window_clamp: M::at(sk, off!(tp_window_clamp)),
        rcv_ssthresh: M::at(sk, off!(tp_rcv_ssthresh)),
        sk_rcvbuf: rcvbuf as u32,
        rcvq_space: M::at(sk, off!(tp_rcvq_space)),
    }
}

/// The rest of what an event shows (read only when reporting).
#[derive(Clone, Copy, Default)]
pub struct Details {
    pub userlocks: u8,
    pub state: u8,
    pub rcv_wnd: u32,
    pub rcv_mss: u32,
    pub advmss: u32,
}

#[inline(always)]
pub fn details<M: Mem>(sk: u64) -> Details {
    Details {
        userlocks: M::at(sk, off!(sk_userlocks)),
        state: M::at(sk, off!(skc_state)),
        rcv_wnd: M::at(sk, off!(tp_rcv_wnd)),
        rcv_mss: rcv_mss::<M>(sk),
        advmss: M::at::<u16>(sk, off!(tp_advmss)) as u32,
    }
}

pub const AF_INET6: u16 = 10;

/// `sock_net(sk)->ns.inum` (with [`Direct`], `skc_net` is a typed `struct net *`).
#[inline(always)]
pub fn netns<M: Mem>(sk: u64) -> u32 {
    let net: u64 = M::at(sk, off!(skc_net));
    M::at(net, off!(net_ns_inum))
}

/// Local and remote address written in place (IPv4 in the first 4 bytes); returns the family.
#[inline(always)]
fn addrs<M: Mem>(sk: u64, laddr: &mut [u8; 16], raddr: &mut [u8; 16]) -> u16 {
    let family: u16 = M::at(sk, off!(skc_family));
    if family == AF_INET6 {
        *laddr = M::at(sk, off!(skc_v6_rcv_saddr));
        *raddr = M::at(sk, off!(skc_v6_daddr));
    } else {
        *laddr = [0; 16];
        *raddr = [0; 16];
        let l: u32 = M::at(sk, off!(skc_rcv_saddr));
        let r: u32 = M::at(sk, off!(skc_daddr));
        laddr[..4].copy_from_slice(&l.to_ne_bytes());
        raddr[..4].copy_from_slice(&r.to_ne_bytes());
    }
    family
}

/// A connection's identity. `sk` may also be a `request_sock` (read it with [`Probe`]): both
/// start with `sock_common`.
#[inline(always)]
pub fn tuple<M: Mem>(sk: u64) -> TupleKey {
    let (lport, rport) = ports::<M>(sk);
    let mut t = TupleKey {
        netns: netns::<M>(sk),
        lport,
        rport,
        ..TupleKey::default()
    };
    addrs::<M>(sk, &mut t.laddr, &mut t.raddr);
    t
}

/// Local and remote port, read as `M` reads.
#[inline(always)]
pub fn ports<M: Mem>(sk: u64) -> (u16, u16) {
    (lport::<M>(sk), rport::<M>(sk))
}

/// The bound local port (0 once released, as at `tcp_destroy_sock`: see [`close_lport`]).
#[inline(always)]
pub fn lport<M: Mem>(sk: u64) -> u16 {
    M::at(sk, off!(skc_num))
}

#[inline(always)]
pub fn rport<M: Mem>(sk: u64) -> u16 {
    u16::from_be(M::at(sk, off!(skc_dport)))
}

/// The local port of a socket whose bound port is released (`tcp_destroy_sock`): `inet_sport`
/// keeps it; None where this kernel's BTF does not say where it is.
#[inline(always)]
pub fn close_lport<M: Mem>(sk: u64) -> Option<u16> {
    if off!(inet_sport) == ABSENT {
        return None;
    }
    Some(u16::from_be(M::at(sk, off!(inet_sport))))
}

/// The inode number of the socket's file (what `/proc/PID/fd` shows as `socket:[N]`), 0 when the
/// socket has no file yet (accepted by the kernel, not yet by the process) or any more.
#[inline(always)]
pub fn inode(sk: u64) -> u64 {
    let sock: u64 = at(sk, off!(sk_socket));
    if sock == 0 {
        return 0;
    }
    at(sock + off!(socket_to_inode) as u64, off!(inode_i_ino))
}

/// `sk->sk_socket->flags` (`SOCK_NOSPACE` and the others), 0 when the socket has no file.
#[inline(always)]
pub fn socket_flags(sk: u64) -> u64 {
    let sock: u64 = at(sk, off!(sk_socket));
    if sock == 0 {
        return 0;
    }
    at(sock, off!(socket_flags))
}

/// The cookie the kernel assigned, 0 if none yet (programs that may call
/// `bpf_get_socket_cookie` use that instead: it assigns one).
#[inline(always)]
pub fn raw_cookie(sk: u64) -> u64 {
    at(sk, off!(skc_cookie))
}

/// `inet_csk(sk)->icsk_ack.rcv_mss`: the segment size `tcp_measure_rcv_mss` compares against.
#[inline(always)]
pub fn rcv_mss<M: Mem>(sk: u64) -> u32 {
    M::at::<u16>(sk, off!(icsk_rcv_mss)) as u32
}

#[inline(always)]
pub fn wscale<M: Mem>(sk: u64) -> (u8, bool) {
    let w = bits::<M>(sk, off!(tp_rcv_wscale_bit), off!(tp_rcv_wscale_bits));
    let ok = bits::<M>(sk, off!(tp_wscale_ok_bit), 1);
    (w as u8, ok != 0)
}

/// The shape of a packet, as `tcp_measure_rcv_mss` sees it.
#[derive(Clone, Copy, Default)]
pub struct SkbShape {
    /// payload bytes (TCP header excluded)
    pub len: u32,
    pub truesize: u32,
    pub ifindex: u32,
    pub gso_size: u16,
    pub gso_segs: u16,
    /// 1 once `gso_size`/`gso_segs` were read (the shared info is a cache line of its own)
    pub gso_read: u8,
}

impl SkbShape {
    /// What `tcp_measure_rcv_mss` would set from this packet (0 for a truesize of 0).
    #[inline(always)]
    pub fn ratio(&self) -> u64 {
        match formula::ratio(self.len, self.truesize) {
            Some(r) => r,
            None => 0,
        }
    }
}

/// Reads a packet's length, truesize and ingress interface. `header_pulled`: false at
/// `tcp:tcp_probe` (skb->data still points at the TCP header, whose length is subtracted), true
/// inside `tcp_measure_rcv_mss` / `tcp_event_data_recv`. The GSO fields are read separately
/// ([`skb_gso`]), only for a packet that could change the ratio.
#[inline(always)]
pub fn skb_shape<M: Mem>(skb: u64, header_pulled: bool) -> SkbShape {
    let mut len: u32 = M::at(skb, off!(skb_len));
    if !header_pulled {
        if off!(skb_tcb_end_seq) != ABSENT {
            // TCP_SKB_CB: end_seq = seq + SYN + FIN + payload (tcp_v4_fill_cb / tcp_v6_fill_cb)
            let seq: u32 = M::at(skb, off!(skb_tcb_seq));
            let end: u32 = M::at(skb, off!(skb_tcb_end_seq));
            let flags: u8 = M::at(skb, off!(skb_tcb_flags));
            len = end
                .wrapping_sub(seq)
                .saturating_sub((flags & 1) as u32 + ((flags >> 1) & 1) as u32);
        } else {
            // `data` points at bytes, not a struct: no plain load through it
            let data: u64 = M::at(skb, off!(skb_data));
            let doff_byte: u8 = at(data, 12);
            let hdr = ((doff_byte >> 4) as u32) * 4;
            len = len.saturating_sub(hdr);
        }
    }
    if len == 0 {
        // a pure ACK (half the hits of a bulk sender): nothing to measure, no more cache lines
        return SkbShape::default();
    }
    SkbShape {
        len,
        truesize: M::at(skb, off!(skb_truesize)),
        ifindex: M::at::<i32>(skb, off!(skb_iif)) as u32,
        gso_size: 0,
        gso_segs: 0,
        gso_read: 0,
    }
}

/// `skb_shinfo(skb)->gso_size / gso_segs` (the shared info sits at `skb->head + skb->end`;
/// `head` is a byte pointer, so the shared info itself is read with the helper: once, when the two
/// fields are adjacent as they have always been).
#[inline(always)]
pub fn skb_gso<M: Mem>(skb: u64, shape: &mut SkbShape) {
    let head: u64 = M::at(skb, off!(skb_head));
    let end: u32 = M::at(skb, off!(skb_end));
    let shinfo = head + end as u64;
    shape.gso_read = 1;
    let (size, segs) = (off!(shinfo_gso_size), off!(shinfo_gso_segs));
    if size != ABSENT && segs == size + 2 {
        let both: u32 = at(shinfo, size);
        shape.gso_size = both as u16;
        shape.gso_segs = (both >> 16) as u16;
    } else {
        shape.gso_size = at(shinfo, size);
        shape.gso_segs = at(shinfo, segs);
    }
}

/// Writes the connection's addresses in place; returns (family, netns, local port, remote port).
#[inline(always)]
pub fn identity_into<M: Mem>(
    sk: u64,
    laddr: &mut [u8; 16],
    raddr: &mut [u8; 16],
) -> (u8, u32, u16, u16) {
    (
        addrs::<M>(sk, laddr, raddr) as u8,
        netns::<M>(sk),
        lport::<M>(sk),
        rport::<M>(sk),
    )
}

/// Writes the connection's identity straight into an event (no copy on the stack).
#[inline(always)]
pub fn tuple_into<M: Mem>(sk: u64, ev: &mut tcpwin_common::Event) {
    (ev.family, ev.netns, ev.lport, ev.rport) =
        identity_into::<M>(sk, &mut ev.laddr, &mut ev.raddr);
}

/// Names the members of the kernel that this kernel's BTF does not have (resolved absent by
/// userspace): they read as zero and are reported as absent. Called where a socket is first
/// reported (its `init` or `seen` event) and on the iterator's first record.
#[inline(always)]
pub fn absent_members(hook: u8, cookie: u64) {
    if off!(tp_scaling_ratio) == ABSENT {
        klog!(
            Info,
            hook,
            "{} tcp_sock.scaling_ratio is absent from this kernel's BTF (it came in 6.6): socket {:x} reports no ratio",
            cookie
        );
    }
    if off!(tp_window_clamp) == ABSENT {
        klog!(
            Info,
            hook,
            "{} tcp_sock.window_clamp is absent from this kernel's BTF: socket {:x} reports it as 0",
            cookie
        );
    }
    if off!(tp_rcv_ssthresh) == ABSENT {
        klog!(
            Info,
            hook,
            "{} tcp_sock.rcv_ssthresh is absent from this kernel's BTF: socket {:x} reports it as 0",
            cookie
        );
    }
    if off!(tp_rcvq_space) == ABSENT {
        klog!(
            Info,
            hook,
            "{} tcp_sock.rcvq_space is absent from this kernel's BTF: socket {:x} reports it as 0",
            cookie
        );
    }
}
