//! Per-socket last-reported state (bounded LRU), socket filters (port, PID ownership), change
//! detection and the per-CPU packet-shape histogram. Every hook ends up in `observe`.
use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_jiffies64,
        bpf_ktime_get_ns,
    },
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap},
};
use tcpwin_common::{
    counter, flag, flag2, hook, init_defer, kind, tcp_state, Checked, Config, Event, IfKey,
    InitParams, PortKey, TupleKey, HIST_BUCKETS, HIST_IFACES, HIST_RATIO_MAX,
    MAX_COUNTED_NAMESPACES, MAX_OWNED_CGROUPS, MAX_OWNED_INODES, MAX_OWNED_PORTS, MAX_OWNED_TGIDS,
    MAX_PENDING_INITS, MAX_TRACKED_SOCKETS, RECHECK_SLOTS, SOCK_RCVBUF_LOCK,
};

use crate::{
    emit::{count, reserve, submit},
    log::{self, klog},
    read::{self, off, Direct, Mem, Probe, SkbShape, Snapshot},
};

#[unsafe(no_mangle)]
static CONFIG: Config = Config {
    target_tgid: 0,
    filter_pid: 0,
    cookie_by_read: 0,
    port: 0,
    netns: 0,
    addr_family: 0,
    _pad: [0; 3],
    addr: [0; 4],
    addr_mask: [0; 4],
};

macro_rules! setting {
    ($field:ident) => {
        // SAFETY: a read of our own .rodata global; volatile so the placeholder is not folded.
        unsafe { core::ptr::read_volatile(core::ptr::addr_of!(CONFIG.$field)) }
    };
}

/// Whether cookies are read from the socket, not asked of `bpf_get_socket_cookie` (a `.rodata`
/// constant: the verifier of a kernel that refuses the helper never sees the call).
#[inline(always)]
pub fn cookie_by_read() -> bool {
    setting!(cookie_by_read) != 0
}

/// What was last reported for a socket, plus the last data packet it received.
#[derive(Clone, Copy, Default)]
pub struct SockState {
    pub cookie: u64,
    pub netns: u32,
    pub window_clamp: u32,
    pub rcv_ssthresh: u32,
    pub sk_rcvbuf: u32,
    pub rcvq_space: u32,
    pub scaling_ratio: u8,
    pub owned: u8,
    pub has_pid: u8,
    pub has_skb: u8,
    pub pid: u32,
    pub comm: [u8; 16],
    pub skb: SkbShape,
    /// the last `gso_size` read from a packet of this socket (0: none yet, or not GSO)
    pub gso_seen: u16,
    /// the histogram slot (+1; 0 = none yet) of the interface packets last came in on
    pub hist_ifindex: u32,
    pub hist_slot: u32,
    /// 1 while the socket's `init` waits for its first other record (see [`established`]):
    /// the window fields above are still those of ESTABLISHED, the rest is here
    pub init_pending: u8,
    pub init_hook: u8,
    pub init_has_params: u8,
    pub init_ts_ns: u64,
    pub init_rcv_wnd: u32,
    pub init_rcv_mss: u32,
    pub init_space: u32,
    pub init_mss: u32,
}

/// Where a socket's first `SockState` is made before it is inserted (one slot per CPU).
#[map(name = "NEW_STATE")]
static NEW_STATE: PerCpuArray<SockState> = PerCpuArray::with_max_entries(1, 0);

/// This CPU's `NEW_STATE` slot, holding `st`: a new socket's entry is made there, not on the
/// stack (the tracepoint programs' frames with `--pid` and `--ebpf-log debug` came within 16
/// bytes of the verifier's 512 on 6.18), then inserted.
#[inline(always)]
fn fresh_entry(st: SockState) -> Option<&'static mut SockState> {
    let p = NEW_STATE.get_ptr_mut(0)?;
    // SAFETY: a per-CPU array slot from get_ptr_mut: no other writer on this CPU, and each user
    // fills it whole before reading it, within one program run.
    let slot = unsafe { &mut *p };
    *slot = st;
    Some(slot)
}

/// Keyed by the socket's address: every backend has it (kprobes cannot ask for the cookie);
/// `tcp:tcp_destroy_sock` removes the entry, so an address reused by a new socket starts clean.
#[map(name = "SOCKS")]
static SOCKS: LruHashMap<u64, SockState> = LruHashMap::with_max_entries(MAX_TRACKED_SOCKETS, 0);

/// A socket's `SOCKS` key: a copy the compiler cannot merge with `sk`. A helper reading its key
/// from the stack makes the 6.1 and 6.12 verifiers forget that the slot held a typed pointer, so
/// `sk` reloaded from that slot could no longer be read through.
#[inline(always)]
fn key(sk: u64) -> u64 {
    // SAFETY: a volatile read of a local: only forces a stack copy.
    unsafe { core::ptr::read_volatile(&sk) }
}

/// Socket inodes of the traced PID (userspace keeps this fresh from /proc/PID/fd).
#[map(name = "OWNED_INODES")]
static OWNED_INODES: HashMap<u64, u8> = HashMap::with_max_entries(MAX_OWNED_INODES, 0);

/// Listening ports of the traced PID: their not-yet-accepted children are the PID's too.
#[map(name = "OWNED_PORTS")]
static OWNED_PORTS: HashMap<PortKey, u32> = HashMap::with_max_entries(MAX_OWNED_PORTS, 0);

/// A traced workload's cgroups (ids, as `bpf_get_current_cgroup_id` returns them), written by the
/// loader from /proc: a process started in one after the last refresh is the workload's too.
#[map(name = "OWNED_CGROUPS")]
static OWNED_CGROUPS: HashMap<u64, u8> = HashMap::with_max_entries(MAX_OWNED_CGROUPS, 0);

/// The processes a `--pid` trace follows (tgid, as `bpf_get_current_pid_tgid() >> 32` gives it):
/// written by the loader from the PID's process tree in /proc, and by [`forked`] at each fork of
/// one of them, so a child's connection is the trace's from its connect().
#[map(name = "OWNED_TGIDS")]
static OWNED_TGIDS: HashMap<u64, u8> = HashMap::with_max_entries(MAX_OWNED_TGIDS, 0);

/// 1 once userspace attached the `tcp_select_initial_window` hooks (function backends only):
/// without them `PENDING_INIT` stays empty and `established` need not look there.
#[map(name = "INIT_HOOKED")]
static INIT_HOOKED: Array<u32> = Array::with_max_entries(1, 0);

/// Whether a socket's `init` waits for its first other record, and the socket walk's cut-off
/// (`init_defer::*`): userspace turns deferring on once its once-a-second walk runs.
#[map(name = "INIT_DEFER")]
static INIT_DEFER: Array<u64> = Array::with_max_entries(init_defer::SLOTS, 0);

#[inline(always)]
fn init_defer(slot: u32) -> u64 {
    INIT_DEFER.get(slot).copied().unwrap_or(0)
}

/// Per namespace, per CPU: `init`s deferred and `init`s that left since (summed, their
/// difference is what waits there): the trace walks a namespace where some wait, even one none
/// of whose sockets it has seen yet.
#[map(name = "INITS_WAITING")]
static INITS_WAITING: PerCpuHashMap<u32, [u64; 2]> =
    PerCpuHashMap::with_max_entries(MAX_COUNTED_NAMESPACES, 0);

/// Counts an `init` deferred (`slot` 0) or gone (1) in `netns`; false where the namespace
/// could not be counted (the map is full: that namespace's `init`s then leave at ESTABLISHED).
#[inline(always)]
fn count_init(netns: u32, slot: usize) -> bool {
    match INITS_WAITING.get_ptr_mut(netns) {
        Some(p) => {
            // SAFETY: a per-CPU map value from get_ptr_mut: no other writer on this CPU.
            unsafe { (*p)[slot & 1] += 1 };
            true
        }
        None => {
            let mut v = [0u64; 2];
            v[slot & 1] = 1;
            INITS_WAITING.insert(netns, v, 0).is_ok()
        }
    }
}

/// `tcp_select_initial_window` arguments waiting for their socket to reach ESTABLISHED.
#[map(name = "PENDING_INIT")]
static PENDING_INIT: LruHashMap<TupleKey, InitParams> =
    LruHashMap::with_max_entries(MAX_PENDING_INITS, 0);

/// Per-packet `len * 256 / truesize`: `HIST_BUCKETS` counters per interface slot, per CPU.
/// Aggregated here, read by userspace.
#[map(name = "PKT_HIST")]
static PKT_HIST: PerCpuArray<u64> = PerCpuArray::with_max_entries(HIST_IFACES * HIST_BUCKETS, 0);

/// Which slot of `PKT_HIST` an interface uses (userspace reads it to name the slots).
#[map(name = "IF_SLOTS")]
static IF_SLOTS: HashMap<IfKey, u32> = HashMap::with_max_entries(HIST_IFACES, 0);

/// The next free slot (a hint: `SLOT_OWNER` decides who gets a slot).
#[map(name = "IF_NEXT")]
static IF_NEXT: Array<u32> = Array::with_max_entries(1, 0);

/// Slot -> interface, inserted with BPF_NOEXIST: the one CPU whose insert succeeds owns the slot
/// (the BPF target has no atomic add to hand out slots).
#[map(name = "SLOT_OWNER")]
static SLOT_OWNER: HashMap<u32, IfKey> = HashMap::with_max_entries(HIST_IFACES, 0);

/// Sockets recently checked by a hook that cannot move their window, direct-mapped by ports
/// (shared by all CPUs: a collision or a race only costs one more check). Entries are not removed
/// at `tcp_destroy_sock` (the local port is already released then, so the slot is unknown): a new
/// socket at the same address is reported by `established` anyway, and at worst its ACKs are
/// skipped for `RECHECK_JIFFIES`.
#[map(name = "CHECKED")]
static CHECKED: Array<Checked> = Array::with_max_entries(RECHECK_SLOTS, 0);

/// Sockets `--pid` (or a workload) found not the trace's, direct-mapped by ports like `CHECKED`:
/// for `RECHECK_JIFFIES` their packets skip the socket map and the ownership lookups (their file's inode, their
/// listener's port). A socket that becomes the trace's in between (the process's own `recvmsg`,
/// or a /proc refresh naming its file) is taken at its next check, as the refresh itself would.
#[map(name = "NOT_OWNED")]
static NOT_OWNED: Array<Checked> = Array::with_max_entries(RECHECK_SLOTS, 0);

/// By the connection's ports (the verifier forbids arithmetic on the socket pointer itself).
#[inline(always)]
fn checked_slot<M: Mem>(sk: u64) -> u32 {
    let (l, r) = read::ports::<M>(sk);
    ((l as u32).wrapping_mul(0x9e37) ^ r as u32) & (RECHECK_SLOTS - 1)
}

/// For a hit that cannot move the socket's window: whether the socket was checked within
/// `RECHECK_JIFFIES` (skip it); if not, it counts as checked now. Data packets, the function hooks
/// and state changes are never skipped.
#[inline(always)]
pub fn recently_checked<M: Mem>(sk: u64) -> bool {
    let Some(c) = CHECKED.get_ptr_mut(checked_slot::<M>(sk)) else {
        return false;
    };
    // SAFETY: bpf_jiffies64 takes no arguments and only reads the clock.
    let now = unsafe { bpf_jiffies64() };
    // SAFETY: a map value pointer from get_ptr_mut, valid for this program run.
    let c = unsafe { &mut *c };
    if c.holds(sk, now) {
        count(counter::RECHECK_SKIPPED);
        return true;
    }
    c.mark(sk, now);
    false
}

/// With `--pid` (or a workload): whether `NOT_OWNED` says the socket was found not the trace's
/// within `RECHECK_JIFFIES`.
#[inline(always)]
fn recently_not_owned<M: Mem>(sk: u64) -> bool {
    let Some(c) = NOT_OWNED.get(checked_slot::<M>(sk)) else {
        return false;
    };
    // SAFETY: bpf_jiffies64 takes no arguments and only reads the clock.
    c.holds(sk, unsafe { bpf_jiffies64() })
}

/// Notes in `NOT_OWNED` that the socket is not the trace's (its packets skip the lookups).
#[inline(always)]
fn note_not_owned<M: Mem>(sk: u64) {
    if let Some(c) = NOT_OWNED.get_ptr_mut(checked_slot::<M>(sk)) {
        // SAFETY: a map value pointer from get_ptr_mut, valid for this program run; a racing
        // CPU only costs one more check.
        unsafe { (*c).mark(sk, bpf_jiffies64()) }
    }
}

/// The socket is the trace's from now on: a `NOT_OWNED` note of it (or of an earlier socket at
/// the same address) must not hide its packets.
#[inline(always)]
fn forget_not_owned<M: Mem>(sk: u64) {
    if setting!(filter_pid) == 0 {
        return;
    }
    if let Some(c) = NOT_OWNED.get_ptr_mut(checked_slot::<M>(sk)) {
        // SAFETY: a map value pointer from get_ptr_mut, valid for this program run.
        unsafe {
            if (*c).sk == sk {
                (*c).sk = 0;
            }
        }
    }
}

/// The histogram slot of an interface, allocated on first use (`None` once all are taken).
#[inline(always)]
fn if_slot(netns: u32, ifindex: u32) -> Option<u32> {
    let key = IfKey { netns, ifindex };
    // SAFETY: IF_SLOTS values are plain u32 copied out at once.
    if let Some(s) = unsafe { IF_SLOTS.get(&key) } {
        return Some(*s);
    }
    let next = IF_NEXT.get_ptr_mut(0)?;
    for _ in 0..3 {
        // SAFETY: `next` is a map value pointer from get_ptr_mut, valid for this program run.
        let c = unsafe { *next };
        if c >= HIST_IFACES {
            return None;
        }
        // SAFETY: same map value pointer; a racing CPU is resolved by SLOT_OWNER below.
        unsafe { *next = c + 1 };
        if SLOT_OWNER.insert(&c, &key, BPF_NOEXIST as u64).is_ok() {
            // the same interface raced on another CPU: keep its slot, this one stays unused
            if IF_SLOTS.insert(&key, &c, BPF_NOEXIST as u64).is_err() {
                // SAFETY: IF_SLOTS values are plain u32 copied out at once.
                return unsafe { IF_SLOTS.get(&key) }.copied();
            }
            return Some(c);
        }
    }
    None
}

/// The port filter (`Config::port`, 0 = any): either end's port matches.
#[inline(always)]
pub fn port_ok(lport: u16, rport: u16) -> bool {
    let port = setting!(port);
    port == 0 || lport == port || rport == port
}

/// One word of the address filter (`Config::addr`, `Config::addr_mask`).
macro_rules! setting_word {
    ($field:ident, $i:expr) => {
        // SAFETY: a read of our own .rodata global, in bounds (a constant index below 4).
        unsafe { core::ptr::read_volatile(core::ptr::addr_of!(CONFIG.$field[$i])) }
    };
}

/// The address filter (`Config::addr_family`, 0 = any): either end's address is in the network.
/// Read at a socket's first sight only (a socket tracked passed it).
#[inline(always)]
pub fn addr_ok<M: Mem>(sk: u64) -> bool {
    let want = setting!(addr_family);
    if want == 0 {
        return true;
    }
    let family: u16 = M::at(sk, off!(skc_family));
    if want == 4 {
        if family == read::AF_INET6 {
            // a dual-stack socket's IPv4 peer is ::ffff:a.b.c.d, and its skc_daddr and
            // skc_rcv_saddr are a.b.c.d; a native IPv6 peer is not an IPv4 address
            let d: [u32; 4] = M::at(sk, off!(skc_v6_daddr));
            if d[0] != 0 || d[1] != 0 || d[2] != u32::from_ne_bytes([0, 0, 0xff, 0xff]) {
                return false;
            }
        }
        let (a, m) = (setting_word!(addr, 0), setting_word!(addr_mask, 0));
        let l: u32 = M::at(sk, off!(skc_rcv_saddr));
        let r: u32 = M::at(sk, off!(skc_daddr));
        return l & m == a || r & m == a;
    }
    if family != read::AF_INET6 {
        return false;
    }
    let l: [u32; 4] = M::at(sk, off!(skc_v6_rcv_saddr));
    let r: [u32; 4] = M::at(sk, off!(skc_v6_daddr));
    let (mut l_in, mut r_in) = (true, true);
    for i in 0..4 {
        let (a, m) = (setting_word!(addr, i), setting_word!(addr_mask, i));
        l_in &= l[i] & m == a;
        r_in &= r[i] & m == a;
    }
    l_in || r_in
}

/// Whether the session's fixed filters (port, address, network namespace) rule the socket out.
/// Asked first at every hook, before any map: a socket they rule out costs a few loads of its
/// own header, close to what an empty program costs. `lport` is the local port (at
/// `tcp_destroy_sock` the bound port is already released: [`read::close_lport`] reads it then).
#[inline(always)]
pub fn ruled_out<M: Mem>(sk: u64, lport: u16) -> bool {
    if !port_ok(lport, read::rport::<M>(sk)) || !addr_ok::<M>(sk) {
        return true;
    }
    let netns = setting!(netns);
    netns != 0 && read::netns::<M>(sk) != netns
}

/// Whether a socket the fixed filters let through is the trace's: without `--pid` (or a
/// workload) every one; with it, one the traced process owns: its file is one of the PID's
/// (inode), or it is the child of one of the PID's listeners. The receive path runs in softirq,
/// so the current task says nothing about ownership.
#[inline(always)]
fn owned<M: Mem>(sk: u64, state: Option<&SockState>, hook: u8) -> bool {
    if setting!(filter_pid) == 0 {
        return true;
    }
    let (lport, rport) = read::ports::<M>(sk);
    if let Some(st) = state {
        if st.owned != 0 {
            return true;
        }
    }
    let ino = read::inode(sk);
    // SAFETY: OWNED_INODES values are plain bytes, only tested for presence.
    if ino != 0 && unsafe { OWNED_INODES.get(&ino) }.is_some() {
        return true;
    }
    let key = PortKey {
        netns: read::netns::<M>(sk),
        port: lport,
        _pad: 0,
    };
    // SAFETY: OWNED_PORTS values are plain u32, only tested for presence.
    if unsafe { OWNED_PORTS.get(&key) }.is_some() {
        return true;
    }
    if log::on(log::Level::Debug) && !log_repeats(sk, lport, rport) {
        klog!(
            Debug,
            hook,
            "{} socket port {} <> {} (netns {}) is not the traced process's (--pid {}): filtered",
            lport,
            rport,
            key.netns,
            setting!(target_tgid)
        );
    }
    false
}

/// Sockets whose filtering was logged, per CPU, direct-mapped by ports: a socket's packets log
/// its miss once a second (per CPU), not once each (`--ebpf-log debug` only; the map is never
/// touched else).
#[map(name = "LOG_QUIET")]
static LOG_QUIET: PerCpuArray<Checked> = PerCpuArray::with_max_entries(LOG_QUIET_SLOTS, 0);
const LOG_QUIET_SLOTS: u32 = 256;

/// Whether `sk` was logged on this CPU within the last second (then stay quiet).
#[inline(always)]
fn log_repeats(sk: u64, lport: u16, rport: u16) -> bool {
    let slot = ((lport as u32).wrapping_mul(0x9e37) ^ rport as u32) & (LOG_QUIET_SLOTS - 1);
    let Some(c) = LOG_QUIET.get_ptr_mut(slot) else {
        return false;
    };
    // SAFETY: bpf_jiffies64 takes no arguments and only reads the clock.
    let now = unsafe { bpf_jiffies64() };
    // SAFETY: a per-CPU array slot from get_ptr_mut: no other writer on this CPU.
    let c = unsafe { &mut *c };
    if c.sk == sk && now.wrapping_sub(c.at_jiffies) < LOG_QUIET_JIFFIES {
        return true;
    }
    c.sk = sk;
    c.at_jiffies = now;
    false
}

/// One second at HZ=250 (Debian's), a quarter at HZ=1000.
const LOG_QUIET_JIFFIES: u64 = 250;

/// In process context (connect, listen, recvmsg) the current task is the socket's user: the
/// traced process, or a process in one of the traced workload's cgroups.
#[inline(always)]
pub fn current_is_target() -> bool {
    if setting!(filter_pid) == 0 {
        return false;
    }
    let target = setting!(target_tgid);
    if target != u32::MAX {
        // `--pid`: the process and the processes it forked (no cgroup is noted then)
        let tgid = bpf_get_current_pid_tgid() >> 32;
        // SAFETY: OWNED_TGIDS values are plain bytes, only tested for presence.
        return tgid as u32 == target || unsafe { OWNED_TGIDS.get(&tgid) }.is_some();
    }
    // a workload (`u32::MAX`): its processes by their cgroup (no process is noted then)
    // SAFETY: bpf_get_current_cgroup_id takes no arguments; OWNED_CGROUPS values are plain
    // bytes, only tested for presence.
    unsafe { OWNED_CGROUPS.get(&bpf_get_current_cgroup_id()) }.is_some()
}

/// `connect()` or `listen()` (process context): the current task owns the socket. With `--pid`,
/// the target's listeners and connecting sockets are marked here, before any /proc refresh.
/// `sk` is a typed `tcp_sock` pointer (`bpf_skc_to_tcp_sock`), read with plain loads; so are the
/// `sk` of [`established`] and [`destroyed`].
#[inline(always)]
pub fn process_context(sk: u64, new_state: u8) {
    if !current_is_target() {
        return;
    }
    if new_state == tcp_state::LISTEN {
        let key = PortKey {
            netns: read::netns::<Direct>(sk),
            port: read::ports::<Direct>(sk).0,
            _pad: 0,
        };
        let _ = OWNED_PORTS.insert(&key, &setting!(target_tgid), 0);
        return;
    }
    let Some(st) = fresh_entry(SockState {
        owned: 1,
        netns: read::netns::<Direct>(sk),
        scaling_ratio: read::snapshot::<Direct>(sk).scaling_ratio,
        ..SockState::default()
    }) else {
        return;
    };
    set_user(st);
    if SOCKS.insert(&key(sk), &*st, 0).is_err() {
        state_full(hook::TP_SET_STATE, read::raw_cookie(sk));
    }
    forget_not_owned::<Direct>(sk);
}

/// `sched:sched_process_fork`, in the parent's context: a child of a process the trace follows
/// is followed too (a thread of it shares its tgid: nothing new).
#[inline(always)]
pub fn forked(child: u64) {
    count(hook::TP_PROCESS_FORK as u32);
    if setting!(filter_pid) == 0 || child == 0 {
        return;
    }
    let parent = bpf_get_current_pid_tgid() >> 32;
    // SAFETY: OWNED_TGIDS values are plain bytes, only tested for presence.
    let followed =
        parent as u32 == setting!(target_tgid) || unsafe { OWNED_TGIDS.get(&parent) }.is_some();
    if !followed {
        return;
    }
    let tgid: i32 = read::at(child, off!(task_tgid));
    if tgid <= 0 || tgid as u64 == parent {
        return;
    }
    if OWNED_TGIDS.insert(&(tgid as u64), &1, 0).is_err() {
        klog!(
            Warn,
            hook::TP_PROCESS_FORK,
            "{} followed processes full ({} entries): process {} (forked by {}) is found at the next /proc look instead",
            MAX_OWNED_TGIDS,
            tgid,
            parent
        );
    }
}

/// The socket state map refused a socket: counted, and explained with `--ebpf-log warn`.
#[inline(always)]
fn state_full(hook: u8, cookie: u64) {
    count(counter::STATE_FULL);
    klog!(
        Warn,
        hook,
        "{} socket state map refused socket {:x} ({} tracked at most): its changes are reported from its next hit",
        cookie,
        MAX_TRACKED_SOCKETS
    );
}

/// Records the current task as the socket's user (the name only when the user changes).
#[inline(always)]
fn set_user(st: &mut SockState) {
    let pid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if st.has_pid == 0 || st.pid != pid {
        st.pid = pid;
        st.has_pid = 1;
        if let Ok(comm) = bpf_get_current_comm() {
            st.comm = comm;
        }
    }
}

/// How a hook's packet relates to the state it observes.
#[derive(Clone, Copy)]
pub enum Pkt {
    None,
    /// not processed yet (`tcp:tcp_probe`): a change seen now was caused by the previous packet
    Before(u64),
    /// just processed (`tcp_measure_rcv_mss` exit): a change seen now was caused by this packet
    After(u64),
}

/// Counts a data packet in its interface's histogram; the socket caches its interface's slot so
/// the per-packet cost is one array update.
#[inline(always)]
pub fn histogram(netns: u32, skb: &SkbShape, cache: Option<&mut SockState>, hook: u8) {
    if skb.len == 0 || skb.truesize == 0 {
        return;
    }
    let ratio = skb.ratio().min(HIST_RATIO_MAX as u64) as u32;
    let slot = match cache {
        Some(st) if st.hist_slot != 0 && st.hist_ifindex == skb.ifindex => st.hist_slot - 1,
        Some(st) => match if_slot(netns, skb.ifindex) {
            Some(s) => {
                st.hist_ifindex = skb.ifindex;
                st.hist_slot = s + 1;
                s
            }
            None => return hist_full(hook, netns, skb.ifindex),
        },
        None => match if_slot(netns, skb.ifindex) {
            Some(s) => s,
            None => return hist_full(hook, netns, skb.ifindex),
        },
    };
    if let Some(p) = PKT_HIST.get_ptr_mut(slot * HIST_BUCKETS + ratio) {
        // SAFETY: a per-CPU array slot from get_ptr_mut: no other writer on this CPU.
        unsafe { *p += 1 };
    }
}

/// The histogram has no slot left for an interface: counted, and explained with `--ebpf-log warn`.
#[inline(always)]
fn hist_full(hook: u8, netns: u32, ifindex: u32) {
    count(counter::HIST_FULL);
    klog!(
        Warn,
        hook,
        "{} packet histogram full ({} interfaces): a packet of ifindex {} (netns {}) not counted",
        HIST_IFACES,
        ifindex,
        netns
    );
}

/// Where a hook runs: in softirq (any task) or in the socket user's process context
/// (`recvmsg` -> `tcp_rcv_space_adjust`), where the current task is the socket's user.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Ctx {
    Any,
    User,
}

/// The core of every hook: compare the socket with what was last reported, report what changed.
/// `cookie_of` asks for the socket cookie (0 where the program type cannot); it is called only
/// when the socket is first seen. The hot path (a tracked socket, nothing changed) reads five
/// socket fields and six packet fields; a pure ACK seen before processing (it cannot move the
/// window) reads three packet fields and, on a socket checked within `RECHECK_JIFFIES`, stops there.
#[inline(always)]
pub fn observe<M: Mem>(sk: u64, hook: u8, ctx: Ctx, cookie_of: impl Fn() -> u64, pkt: Pkt) {
    count(hook as u32);
    if sk == 0 {
        return;
    }
    if ruled_out::<M>(sk, read::lport::<M>(sk)) {
        count(counter::FILTERED);
        return;
    }
    // a socket found not the trace's is skipped, unless the target's own recvmsg reads it
    let mine = || ctx == Ctx::User && current_is_target();
    if setting!(filter_pid) != 0 && recently_not_owned::<M>(sk) && !mine() {
        count(counter::FILTERED);
        return;
    }
    let (skb, pulled) = match pkt {
        Pkt::Before(s) => (s, false),
        Pkt::After(s) => (s, true),
        Pkt::None => (0, false),
    };
    let mut shape = if skb != 0 {
        read::skb_shape::<M>(skb, pulled)
    } else {
        SkbShape::default()
    };
    if let Pkt::Before(_) = pkt {
        if shape.len == 0 && recently_checked::<M>(sk) {
            return;
        }
    }
    let st_ptr = SOCKS.get_ptr_mut(&key(sk));
    // a tracked socket is the trace's
    if st_ptr.is_none() && !mine() && !owned::<M>(sk, None, hook) {
        if setting!(filter_pid) != 0 {
            note_not_owned::<M>(sk);
        }
        count(counter::FILTERED);
        return;
    }
    let snap = read::snapshot::<M>(sk);

    let Some(st_ptr) = st_ptr else {
        // First sight of a socket that existed before the trace: report what it looks like,
        // unless it is not (or no longer) a connection with a receive window.
        let state: u8 = read::at(sk, off!(skc_state));
        if !tcp_state::carries_data(state) {
            return;
        }
        let c = cookie_of();
        let Some(st) = fresh_entry(SockState {
            cookie: if c != 0 { c } else { read::raw_cookie(sk) },
            netns: read::netns::<M>(sk),
            owned: setting!(filter_pid),
            ..SockState::default()
        }) else {
            return;
        };
        if ctx == Ctx::User {
            set_user(st);
        }
        remember(st, &snap);
        histogram(st.netns, &shape, None, hook);
        if shape.len != 0 {
            read::skb_gso::<M>(skb, &mut shape);
            st.skb = shape;
            st.gso_seen = shape.gso_size;
            st.has_skb = 1;
        }
        if SOCKS.insert(&key(sk), &*st, 0).is_err() {
            state_full(hook, st.cookie);
        }
        forget_not_owned::<M>(sk);
        read::absent_members(hook, st.cookie);
        report::<M>(sk, kind::SEEN, hook, st.cookie, &snap, None, None, None);
        return;
    };
    // SAFETY: a map value pointer from get_ptr_mut, valid for this program run.
    let st = unsafe { &mut *st_ptr };
    histogram(st.netns, &shape, Some(st), hook);
    if setting!(filter_pid) != 0 {
        st.owned = 1;
    }
    if ctx == Ctx::User {
        set_user(st);
    }
    let ratio_changed = snap.scaling_ratio != st.scaling_ratio;
    let space_changed = snap.window_clamp != st.window_clamp
        || snap.rcv_ssthresh != st.rcv_ssthresh
        || snap.sk_rcvbuf != st.sk_rcvbuf
        || snap.rcvq_space != st.rcvq_space;
    if ratio_changed || space_changed {
        if st.cookie == 0 {
            st.cookie = read::raw_cookie(sk);
        }
        let cause = match pkt {
            Pkt::After(_) if ratio_changed && shape.len != 0 => {
                read::skb_gso::<M>(skb, &mut shape);
                Some(shape)
            }
            // detected at a later hook: the last data packet seen before it is the cause
            _ if ratio_changed && st.has_skb != 0 => Some(st.skb),
            _ => None,
        };
        let k = if ratio_changed {
            kind::RATIO
        } else {
            kind::SPACE
        };
        report::<M>(
            sk,
            k,
            hook,
            st.cookie,
            &snap,
            Some(st),
            cause.as_ref(),
            None,
        );
        resolve_init(st);
        remember(st, &snap);
    }
    // Remember a data packet that is not processed yet: if the ratio changes before the next
    // hook, it is the cause.
    if let Pkt::Before(_) = pkt {
        if shape.len != 0 {
            if gso_may_matter(read::rcv_mss::<M>(sk), &shape, &snap, st) {
                read::skb_gso::<M>(skb, &mut shape);
                st.gso_seen = shape.gso_size;
            }
            st.skb = shape;
            st.has_skb = 1;
        }
    }
}

/// Whether a packet not processed yet may become the cause of a ratio event, so its GSO fields
/// (in the shared info, a cache line of its own: ~120 ns per packet here) are worth reading.
/// `tcp_measure_rcv_mss` sets the ratio only when `len > rcv_mss`, `len` being the packet's
/// `gso_size`, or its payload when it is one segment, and only a packet whose own ratio differs
/// changes it. A connection's `gso_size` is the sender's segment size and does not move: once one
/// was read equal to `rcv_mss`, packets larger than `rcv_mss` are taken to be more of the same.
/// If one of those does move the ratio after all, its event shows the GSO fields as not read
/// (null), never a guess.
#[inline(always)]
fn gso_may_matter(rcv_mss: u32, shape: &SkbShape, snap: &Snapshot, st: &SockState) -> bool {
    shape.ratio() != snap.scaling_ratio as u64
        && shape.len > rcv_mss
        && !(st.gso_seen != 0 && st.gso_seen as u32 == rcv_mss)
}

#[inline(always)]
fn remember(st: &mut SockState, snap: &Snapshot) {
    st.scaling_ratio = snap.scaling_ratio;
    st.window_clamp = snap.window_clamp;
    st.rcv_ssthresh = snap.rcv_ssthresh;
    st.sk_rcvbuf = snap.sk_rcvbuf;
    st.rcvq_space = snap.rcvq_space;
}

/// The connection reached ESTABLISHED: report its initial window and start tracking it afresh.
/// `cookie_of` is asked only for a socket the filters let through.
#[inline(always)]
pub fn established(sk: u64, hook: u8, cookie_of: impl Fn() -> u64) {
    if ruled_out::<Direct>(sk, read::lport::<Direct>(sk)) {
        count(counter::FILTERED);
        return;
    }
    // what connect() noted (with `--pid` only: the user, and that the socket is the trace's)
    let old = if setting!(filter_pid) != 0 {
        // SAFETY: a map value pointer from get_ptr_mut, valid for this program run.
        SOCKS.get_ptr_mut(&key(sk)).map(|p| unsafe { &*p })
    } else {
        None
    };
    if !owned::<Direct>(sk, old, hook) {
        note_not_owned::<Direct>(sk);
        count(counter::FILTERED);
        return;
    }
    forget_not_owned::<Direct>(sk);
    let cookie = cookie_of();
    let snap = read::snapshot::<Direct>(sk);
    let Some(st) = fresh_entry(SockState {
        cookie,
        netns: read::netns::<Direct>(sk),
        owned: setting!(filter_pid),
        ..SockState::default()
    }) else {
        return;
    };
    if let Some(o) = old {
        st.pid = o.pid;
        st.comm = o.comm;
        st.has_pid = o.has_pid;
    }
    remember(st, &snap);
    read::absent_members(hook, cookie);
    let mut init = None;
    if INIT_HOOKED.get(0).copied().unwrap_or(0) != 0 {
        let key = read::tuple::<Direct>(sk);
        // SAFETY: PENDING_INIT values are plain data copied out at once.
        init = unsafe { PENDING_INIT.get(&key) }.copied();
        if init.is_some() {
            let _ = PENDING_INIT.remove(&key);
        }
    }
    // The `init` waits for the socket's first other record, as `tcplife` prints one line a
    // connection: a short connection's ends then carry one record each fewer. Only where the
    // state holds it, and only while the trace's walk flushes those that wait a second.
    if init_defer(init_defer::ON) != 0 {
        let d = read::details::<Direct>(sk);
        st.init_pending = 1;
        st.init_hook = hook;
        // SAFETY: bpf_ktime_get_ns takes no arguments and only reads the clock.
        st.init_ts_ns = unsafe { bpf_ktime_get_ns() };
        st.init_rcv_wnd = d.rcv_wnd;
        st.init_rcv_mss = d.rcv_mss;
        if let Some(i) = init {
            st.init_has_params = 1;
            st.init_space = i.space;
            st.init_mss = i.mss;
        }
        if count_init(st.netns, 0) {
            if SOCKS.insert(&key(sk), &*st, 0).is_ok() {
                count(counter::INIT_DEFERRED);
                return;
            }
            count_init(st.netns, 1);
            state_full(hook, cookie);
        } else if SOCKS.insert(&key(sk), &*st, 0).is_err() {
            state_full(hook, cookie);
        }
        st.init_pending = 0;
    } else if SOCKS.insert(&key(sk), &*st, 0).is_err() {
        state_full(hook, cookie);
    }
    report::<Direct>(
        sk,
        kind::INIT,
        hook,
        cookie,
        &snap,
        Some(st),
        None,
        init.as_ref(),
    );
}

/// `tcp_select_initial_window` ran for the connection `conn` (the socket, or on the passive side
/// the request socket): keep what it was given and chose until the socket is ESTABLISHED.
#[inline(always)]
pub fn initial_window(conn: u64, params: InitParams) {
    let key = read::tuple::<Probe>(conn);
    let _ = PENDING_INIT.insert(&key, &params, 0);
}

/// The socket is being destroyed: report its final values and forget it.
#[inline(always)]
pub fn destroyed(sk: u64, hook: u8) {
    count(hook as u32);
    // a socket the fixed filters rule out was never tracked: no map is asked
    if let Some(lport) = read::close_lport::<Direct>(sk) {
        if ruled_out::<Direct>(sk, lport) {
            return;
        }
    }
    let Some(p) = SOCKS.get_ptr_mut(&key(sk)) else {
        return;
    };
    // Tracked means it passed the filters (the event's local port is 0: the port is released
    // here; userspace restores the tuple from earlier events).
    // SAFETY: a map value pointer from get_ptr_mut, valid for this program run.
    let st = unsafe { &*p };
    let snap = read::snapshot::<Direct>(sk);
    report::<Direct>(
        sk,
        kind::CLOSE,
        hook,
        st.cookie,
        &snap,
        Some(st),
        None,
        None,
    );
    if st.init_pending != 0 {
        count(counter::INIT_RESOLVED);
        count_init(st.netns, 1);
    }
    let _ = SOCKS.remove(&key(sk));
}

/// A record carried the socket's deferred `init` (see [`report`]): it waits no more.
#[inline(always)]
fn resolve_init(st: &mut SockState) {
    if st.init_pending != 0 {
        st.init_pending = 0;
        count(counter::INIT_RESOLVED);
        count_init(st.netns, 1);
    }
}

/// The trace's once-a-second socket walk met `sk` (`iter/tcp`, inside the socket lock): its
/// `init`, if it still waits and began at or before the walk's cut-off, leaves now on a record
/// of its own, so an idle connection's `init` reaches the trace within about two seconds.
/// A function of its own (a BPF-to-BPF call): its frame and the walk's 256-byte record are not
/// on one 512-byte stack frame.
#[inline(never)]
pub fn flush_init(sk: u64) {
    let Some(p) = SOCKS.get_ptr_mut(&key(sk)) else {
        return;
    };
    // SAFETY: a map value pointer from get_ptr_mut, valid for this program run.
    let st = unsafe { &mut *p };
    if st.init_pending == 0 || st.init_ts_ns > init_defer(init_defer::FLUSH_BEFORE_NS) {
        return;
    }
    let snap = read::snapshot::<Direct>(sk);
    report::<Direct>(
        sk,
        kind::INIT,
        hook::ITER,
        st.cookie,
        &snap,
        Some(st),
        None,
        None,
    );
    resolve_init(st);
}

/// `prev_*`: a socket's last reported window fields, or zeros.
#[inline(always)]
unsafe fn fill_prev(ev: *mut Event, p: Option<&SockState>) {
    let (ratio, clamp, ssthresh, rcvbuf, space) = match p {
        Some(p) => (
            p.scaling_ratio,
            p.window_clamp,
            p.rcv_ssthresh,
            p.sk_rcvbuf,
            p.rcvq_space,
        ),
        None => (0, 0, 0, 0, 0),
    };
    // SAFETY: the caller's `ev` is a live ring-buffer reservation of an `Event`.
    unsafe {
        (*ev).prev_scaling_ratio = ratio;
        (*ev).prev_window_clamp = clamp;
        (*ev).prev_rcv_ssthresh = ssthresh;
        (*ev).prev_sk_rcvbuf = rcvbuf;
        (*ev).prev_rcvq_space = space;
    }
}

/// Writes one event straight into the ring buffer. Every field is written on every path: the slot
/// is not zeroed first (a zeroed `Event` on the stack would not fit beside the rest).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn report<M: Mem>(
    sk: u64,
    k: u8,
    hook: u8,
    cookie: u64,
    snap: &Snapshot,
    prev: Option<&SockState>,
    cause: Option<&SkbShape>,
    init: Option<&InitParams>,
) {
    let Some(mut entry) = reserve(hook, k, cookie) else {
        return;
    };
    let ev: *mut Event = entry.as_mut_ptr();
    let d = read::details::<M>(sk);
    let (wscale, wscale_ok) = read::wscale::<M>(sk);
    let ratio_present = off!(tp_scaling_ratio) != tcpwin_common::ABSENT;
    let mut f = 0;
    if ratio_present {
        f |= flag::RATIO_PRESENT;
    }
    if d.userlocks & SOCK_RCVBUF_LOCK != 0 {
        f |= flag::RCVBUF_LOCKED;
    }
    if wscale_ok {
        f |= flag::WSCALE_OK;
    }
    if cookie != 0 {
        f |= flag::COOKIE;
    }
    // SAFETY: `ev` points into a ring-buffer reservation of size_of::<Event>() owned until submit.
    unsafe {
        (*ev).ts_ns = bpf_ktime_get_ns();
        (*ev).cookie = cookie;
        read::tuple_into::<M>(sk, &mut *ev);
        (*ev).kind = k;
        (*ev).hook = hook;
        (*ev).state = d.state;
        (*ev).scaling_ratio = snap.scaling_ratio;
        (*ev).rcv_wscale = wscale;
        (*ev).window_clamp = snap.window_clamp;
        (*ev).rcv_ssthresh = snap.rcv_ssthresh;
        (*ev).rcv_wnd = d.rcv_wnd;
        (*ev).sk_rcvbuf = snap.sk_rcvbuf;
        (*ev).rcvq_space = snap.rcvq_space;
        (*ev).rcv_mss = d.rcv_mss;
        (*ev).advmss = d.advmss;
        (*ev).pid = 0;
        (*ev).comm = [0; 16];
        // `prev_*`: what a change changed from, or the window fields of a deferred `init` that
        // leaves with this record (nothing was reported since ESTABLISHED)
        let shown = prev.filter(|p| {
            k == kind::RATIO || k == kind::SPACE || k == kind::CLOSE || p.init_pending != 0
        });
        fill_prev(ev, shown);
        if shown.is_some() {
            f |= flag::PREV;
        }
        if let Some(p) = prev {
            if p.has_pid != 0 {
                f |= flag::PID;
                (*ev).pid = p.pid;
                (*ev).comm = p.comm;
            }
        }
        match cause {
            Some(s) => {
                f |= flag::SKB;
                (*ev).skb_len = s.len;
                (*ev).skb_truesize = s.truesize;
                (*ev).ifindex = s.ifindex;
                (*ev).gso_size = s.gso_size;
                (*ev).gso_segs = s.gso_segs;
                (*ev).gso_read = s.gso_read;
            }
            None => {
                (*ev).skb_len = 0;
                (*ev).skb_truesize = 0;
                (*ev).ifindex = 0;
                (*ev).gso_size = 0;
                (*ev).gso_segs = 0;
                (*ev).gso_read = 0;
            }
        }
        match init {
            Some(i) => {
                f |= flag::INIT_PARAMS;
                (*ev).init_space = i.space;
                (*ev).init_mss = i.mss;
            }
            None => {
                (*ev).init_space = 0;
                (*ev).init_mss = 0;
            }
        }
        // a deferred `init` leaves with this record (its window fields are `prev_*`)
        match prev {
            Some(p) if p.init_pending != 0 => {
                if p.init_has_params != 0 {
                    f |= flag::INIT_PARAMS;
                    (*ev).init_space = p.init_space;
                    (*ev).init_mss = p.init_mss;
                }
                (*ev).flags2 = flag2::INIT_MERGED;
                (*ev).init_hook = p.init_hook;
                (*ev).init_ts_ns = p.init_ts_ns;
                (*ev).init_rcv_wnd = p.init_rcv_wnd;
                (*ev).init_rcv_mss = p.init_rcv_mss;
            }
            _ => {
                (*ev).flags2 = 0;
                (*ev).init_hook = 0;
                (*ev).init_ts_ns = 0;
                (*ev).init_rcv_wnd = 0;
                (*ev).init_rcv_mss = 0;
            }
        }
        // at teardown the bound port is released: `inet_sport` keeps it (a socket whose `init`
        // leaves with its close had no earlier record to restore it from)
        if k == kind::CLOSE {
            if let Some(p) = read::close_lport::<M>(sk) {
                (*ev).lport = p;
            }
        }
        (*ev)._pad = [0; 5];
        (*ev).flags = f;
    }
    submit(entry);
}
