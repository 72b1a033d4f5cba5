//! tcpwin-trace kernel side: one thin entry point per hook and backend, each calling `track`.
//!
//! Backends (userspace picks one, see tcpwin-userspace/src/attach.rs):
//! - function hooks: fentry/fexit, or kprobe/kretprobe, on `tcp_measure_rcv_mss` (or
//!   `tcp_event_data_recv` where it is inlined), `tcp_rcv_space_adjust`, `tcp_select_initial_window`;
//! - tracepoints: `tcp:tcp_probe`, `tcp:tcp_rcv_space_adjust`, `tcp:tcp_rcvbuf_grow`.
//!
//! `sock:inet_sock_set_state` and `tcp:tcp_destroy_sock` (tp_btf) serve every backend; with
//! `--pid`, `sched:sched_process_fork` follows the process's children.
#![no_std]
#![no_main]

mod emit;
mod fleet;
mod iter;
mod log;
mod read;
mod track;

use aya_ebpf::{
    helpers::{bpf_get_socket_cookie, bpf_probe_read_kernel, bpf_skc_to_tcp_sock},
    macros::{btf_tracepoint, fentry, fexit, kprobe, kretprobe, map},
    maps::PerCpuArray,
    programs::{BtfTracePointContext, FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use read::{Direct, Probe};
use tcpwin_common::{hook, tcp_state, InitParams};
use track::{observe, Ctx, Pkt};

#[inline(always)]
fn cookie(sk: u64) -> u64 {
    if track::cookie_by_read() {
        return read::raw_cookie(sk);
    }
    // SAFETY: the helper takes any socket pointer the hook was given.
    unsafe { bpf_get_socket_cookie(sk as *mut _) }
}

/// The tcp_sock-typed view of a BTF-typed `struct sock *` (0 if it is not a full TCP socket):
/// through it the verifier accepts plain loads of tcp_sock members ([`read::Direct`]).
#[inline(always)]
fn tcp_sk(sk: u64) -> u64 {
    // SAFETY: the helper checks the socket's type and returns NULL for non-TCP sockets.
    unsafe { bpf_skc_to_tcp_sock(sk as *mut _) as u64 }
}

// ---------------------------------------------------------------- shared tracepoints

/// `--pid` only (userspace attaches it then): a process the trace follows forked; the child is
/// followed too, from the fork, before it can open a connection.
#[btf_tracepoint(function = "sched_process_fork")]
pub fn follow_fork(ctx: BtfTracePointContext) -> i32 {
    track::forked(ctx.arg(1));
    0
}

#[btf_tracepoint(function = "inet_sock_set_state")]
pub fn inet_sock_set_state(ctx: BtfTracePointContext) -> i32 {
    let new_state: i32 = ctx.arg(2);
    let new_state = new_state as u8;
    // Closing states move no window (the close event at tcp_destroy_sock has the final values):
    // most of a short connection's ten state changes stop here, before any helper or map.
    if !matches!(
        new_state,
        tcp_state::SYN_SENT | tcp_state::LISTEN | tcp_state::ESTABLISHED
    ) {
        return 0;
    }
    emit::count(hook::TP_SET_STATE as u32);
    let raw: u64 = ctx.arg(0);
    // SCTP and others use this tracepoint too: only a TCP socket is a tcp_sock (and through the
    // typed pointer every read below is a plain load)
    let sk = tcp_sk(raw);
    if sk == 0 {
        return 0;
    }
    if new_state == tcp_state::ESTABLISHED {
        track::established(sk, hook::TP_SET_STATE, || cookie(raw));
    } else {
        // connect() and listen(): process context, the current task owns the socket
        track::process_context(sk, new_state);
    }
    0
}

#[btf_tracepoint(function = "tcp_destroy_sock")]
pub fn tcp_destroy_sock(ctx: BtfTracePointContext) -> i32 {
    let sk = tcp_sk(ctx.arg(0));
    if sk == 0 {
        emit::count(hook::TP_DESTROY_SOCK as u32);
        return 0;
    }
    track::destroyed(sk, hook::TP_DESTROY_SOCK);
    0
}

// ---------------------------------------------------------------- tracepoint backend

/// Entry of `tcp_rcv_established`, before the packet is processed.
#[btf_tracepoint(function = "tcp_probe")]
pub fn tcp_probe(ctx: BtfTracePointContext) -> i32 {
    let sk: u64 = ctx.arg(0);
    let skb: u64 = ctx.arg(1);
    observe::<Direct>(
        tcp_sk(sk),
        hook::TP_TCP_PROBE,
        Ctx::Any,
        || cookie(sk),
        Pkt::Before(skb),
    );
    0
}

/// Entry of `tcp_rcv_space_adjust`, once per `recvmsg` (process context). What the function
/// changes is seen by the next hook (the next packet), so this one serves to find the socket's
/// user and sockets nothing else saw: it checks a socket at most every `RECHECK_JIFFIES`.
#[btf_tracepoint(function = "tcp_rcv_space_adjust")]
pub fn tp_tcp_rcv_space_adjust(ctx: BtfTracePointContext) -> i32 {
    let raw: u64 = ctx.arg(0);
    let sk = tcp_sk(raw);
    // (a socket the filters rule out is counted in `observe`, before any map)
    if sk != 0
        && !track::ruled_out::<Direct>(sk, read::lport::<Direct>(sk))
        && track::recently_checked::<Direct>(sk)
    {
        emit::count(hook::TP_RCV_SPACE_ADJUST as u32);
        return 0;
    }
    observe::<Direct>(
        sk,
        hook::TP_RCV_SPACE_ADJUST,
        Ctx::User,
        || cookie(raw),
        Pkt::None,
    );
    0
}

#[btf_tracepoint(function = "tcp_rcvbuf_grow")]
pub fn tp_tcp_rcvbuf_grow(ctx: BtfTracePointContext) -> i32 {
    let sk: u64 = ctx.arg(0);
    observe::<Direct>(
        tcp_sk(sk),
        hook::TP_RCVBUF_GROW,
        Ctx::Any,
        || cookie(sk),
        Pkt::None,
    );
    0
}

/// Does nothing: `cargo xtask bench` attaches it alone to measure what any program on this hook
/// costs (trampoline, bpf_stats clock reads), the floor under the tracer's per-hit figure.
#[btf_tracepoint(function = "tcp_probe")]
pub fn calib_tcp_probe(_ctx: BtfTracePointContext) -> i32 {
    0
}

/// Empty too: with the other `calib_*` programs, the floor a short connection pays for the
/// tracer's hooks merely existing (`cargo xtask bench`, churn table).
#[btf_tracepoint(function = "inet_sock_set_state")]
pub fn calib_set_state(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[btf_tracepoint(function = "tcp_destroy_sock")]
pub fn calib_destroy(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[btf_tracepoint(function = "tcp_rcv_space_adjust")]
pub fn calib_space_adj(_ctx: BtfTracePointContext) -> i32 {
    0
}

// ---------------------------------------------------------------- exporter counters

/// The exporter's state hook: handshakes by window scaling and side, and the chrono times of
/// connections as they close (a snapshot cannot see connections that came and went between
/// scrapes). Nothing else of the tracer runs.
#[btf_tracepoint(function = "inet_sock_set_state")]
pub fn count_states(ctx: BtfTracePointContext) -> i32 {
    let raw: u64 = ctx.arg(0);
    let old_state: i32 = ctx.arg(1);
    let new_state: i32 = ctx.arg(2);
    fleet::state_change(tcp_sk(raw), old_state as u8, new_state as u8);
    0
}

/// `--packet-histogram`: every data packet's ratio, per interface (one map update per packet).
#[btf_tracepoint(function = "tcp_probe")]
pub fn count_packet(ctx: BtfTracePointContext) -> i32 {
    let sk: u64 = ctx.arg(0);
    let skb: u64 = ctx.arg(1);
    fleet::packet(tcp_sk(sk), skb);
    0
}

// ---------------------------------------------------------------- socket iterator (`ss`)

/// `iter/tcp`: every TCP socket of the iterator's network namespace (aya-ebpf 0.2 has no macro
/// for iterators: the section name is the program type).
#[unsafe(no_mangle)]
#[unsafe(link_section = "iter/tcp")]
pub fn tcp_sockets(ctx: *const iter::IterTcpCtx) -> i32 {
    iter::run(ctx)
}

// ---------------------------------------------------------------- fentry / fexit backend

/// After `tcp_measure_rcv_mss(sk, skb)`: the ratio is updated, this packet is the cause.
#[fexit(function = "tcp_measure_rcv_mss")]
pub fn fexit_tcp_measure_rcv_mss(ctx: FExitContext) -> i32 {
    let sk: u64 = ctx.arg(0);
    let skb: u64 = ctx.arg(1);
    observe::<Direct>(
        tcp_sk(sk),
        hook::FN_MEASURE_RCV_MSS,
        Ctx::Any,
        || cookie(sk),
        Pkt::After(skb),
    );
    0
}

/// Fallback where `tcp_measure_rcv_mss` is inlined into `tcp_event_data_recv`.
#[fexit(function = "tcp_event_data_recv")]
pub fn fexit_tcp_event_data_recv(ctx: FExitContext) -> i32 {
    let sk: u64 = ctx.arg(0);
    let skb: u64 = ctx.arg(1);
    observe::<Direct>(
        tcp_sk(sk),
        hook::FN_EVENT_DATA_RECV,
        Ctx::Any,
        || cookie(sk),
        Pkt::After(skb),
    );
    0
}

#[fentry(function = "tcp_rcv_space_adjust")]
pub fn fentry_tcp_rcv_space_adjust(ctx: FEntryContext) -> i32 {
    let sk: u64 = ctx.arg(0);
    observe::<Direct>(
        tcp_sk(sk),
        hook::FN_RCV_SPACE_ADJUST_ENTRY,
        Ctx::User,
        || cookie(sk),
        Pkt::None,
    );
    0
}

#[fexit(function = "tcp_rcv_space_adjust")]
pub fn fexit_tcp_rcv_space_adjust(ctx: FExitContext) -> i32 {
    let sk: u64 = ctx.arg(0);
    observe::<Direct>(
        tcp_sk(sk),
        hook::FN_RCV_SPACE_ADJUST_EXIT,
        Ctx::Any,
        || cookie(sk),
        Pkt::None,
    );
    0
}

/// The request socket whose initial window is being chosen on this CPU (passive side).
#[map(name = "OPENREQ")]
static OPENREQ: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn set_openreq(req: u64) {
    if let Some(p) = OPENREQ.get_ptr_mut(0) {
        // SAFETY: a per-CPU array slot from get_ptr_mut: no other writer on this CPU.
        unsafe { *p = req };
    }
}

/// The connection `tcp_select_initial_window` works for: the socket itself when connecting, the
/// request socket stashed by `tcp_openreq_init_rwin` when `sk` is a listener.
#[inline(always)]
fn initial_window_conn(sk: u64) -> u64 {
    let state: u8 = read::at(sk, read::off!(skc_state));
    if state != tcp_state::LISTEN {
        return sk;
    }
    let req = OPENREQ.get(0).copied().unwrap_or(0);
    set_openreq(0);
    req
}

#[inline(always)]
fn select_initial_window_done(sk: u64, space: u32, mss: u32, rcv_wnd: u64, clamp: u64) {
    emit::count(hook::FN_SELECT_INITIAL_WINDOW as u32);
    let conn = initial_window_conn(sk);
    if conn == 0 {
        return;
    }
    let params = InitParams {
        space,
        mss,
        // SAFETY: bpf_probe_read_kernel checks the address (an out-parameter of the traced call).
        rcv_wnd: unsafe { bpf_probe_read_kernel(rcv_wnd as *const u32).unwrap_or(0) },
        // SAFETY: bpf_probe_read_kernel checks the address (an out-parameter of the traced call).
        window_clamp: unsafe { bpf_probe_read_kernel(clamp as *const u32).unwrap_or(0) },
    };
    track::initial_window(conn, params);
}

#[fentry(function = "tcp_openreq_init_rwin")]
pub fn fentry_tcp_openreq_init_rwin(ctx: FEntryContext) -> i32 {
    emit::count(hook::FN_OPENREQ_INIT_RWIN as u32);
    set_openreq(ctx.arg(0));
    0
}

/// `tcp_select_initial_window(sk, __space, mss, *rcv_wnd, *window_clamp, wscale_ok,
/// *rcv_wscale, init_rcv_wnd)`: the outputs are read through the pointers at exit.
#[fexit(function = "tcp_select_initial_window")]
pub fn fexit_tcp_select_initial_window(ctx: FExitContext) -> i32 {
    let space: i32 = ctx.arg(1);
    let mss: u32 = ctx.arg(2);
    select_initial_window_done(ctx.arg(0), space as u32, mss, ctx.arg(3), ctx.arg(4));
    0
}

// ---------------------------------------------------------------- kprobe / kretprobe backend

/// Arguments saved at kprobe entry for the kretprobe (one call in flight per CPU: these functions
/// run with the socket locked and do not sleep).
#[derive(Clone, Copy, Default)]
pub struct Saved {
    a0: u64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
}

/// Index per function: 0 measure_rcv_mss / event_data_recv, 1 rcv_space_adjust, 2 initial window.
#[map(name = "KSAVED")]
static KSAVED: PerCpuArray<Saved> = PerCpuArray::with_max_entries(3, 0);

#[inline(always)]
fn save(slot: u32, ctx: &ProbeContext) {
    if let Some(p) = KSAVED.get_ptr_mut(slot) {
        // SAFETY: a per-CPU array slot from get_ptr_mut: no other writer on this CPU.
        unsafe {
            *p = Saved {
                a0: ctx.arg(0).unwrap_or(0),
                a1: ctx.arg(1).unwrap_or(0),
                a2: ctx.arg(2).unwrap_or(0),
                a3: ctx.arg(3).unwrap_or(0),
                a4: ctx.arg(4).unwrap_or(0),
            }
        };
    }
}

#[inline(always)]
fn take(slot: u32) -> Saved {
    match KSAVED.get_ptr_mut(slot) {
        // SAFETY: a per-CPU array slot from get_ptr_mut: no other writer on this CPU.
        Some(p) => unsafe { core::mem::take(&mut *p) },
        None => Saved::default(),
    }
}

#[kprobe]
pub fn kprobe_tcp_measure_rcv_mss(ctx: ProbeContext) -> u32 {
    save(0, &ctx);
    0
}

/// Serves both `tcp_measure_rcv_mss` and the `tcp_event_data_recv` fallback (same arguments).
#[kretprobe]
pub fn kretprobe_tcp_measure_rcv_mss(_ctx: RetProbeContext) -> u32 {
    let s = take(0);
    observe::<Probe>(
        s.a0,
        hook::FN_MEASURE_RCV_MSS,
        Ctx::Any,
        || 0,
        Pkt::After(s.a1),
    );
    0
}

#[kprobe]
pub fn kprobe_tcp_rcv_space_adjust(ctx: ProbeContext) -> u32 {
    let sk: u64 = ctx.arg(0).unwrap_or(0);
    save(1, &ctx);
    observe::<Probe>(
        sk,
        hook::FN_RCV_SPACE_ADJUST_ENTRY,
        Ctx::User,
        || 0,
        Pkt::None,
    );
    0
}

#[kretprobe]
pub fn kretprobe_tcp_rcv_space_adjust(_ctx: RetProbeContext) -> u32 {
    let s = take(1);
    observe::<Probe>(
        s.a0,
        hook::FN_RCV_SPACE_ADJUST_EXIT,
        Ctx::Any,
        || 0,
        Pkt::None,
    );
    0
}

#[kprobe]
pub fn kprobe_tcp_openreq_init_rwin(ctx: ProbeContext) -> u32 {
    emit::count(hook::FN_OPENREQ_INIT_RWIN as u32);
    set_openreq(ctx.arg(0).unwrap_or(0));
    0
}

#[kprobe]
pub fn kprobe_tcp_select_initial_window(ctx: ProbeContext) -> u32 {
    save(2, &ctx);
    0
}

#[kretprobe]
pub fn kretprobe_tcp_select_initial_window(_ctx: RetProbeContext) -> u32 {
    let s = take(2);
    select_initial_window_done(s.a0, s.a1 as u32, s.a2 as u32, s.a3, s.a4);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
