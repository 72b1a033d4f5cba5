//! The maps' keys, values and sizes, shared by the programs and the loader that reads them.

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
/// The slots of `INIT_DEFER` (an array of u64 userspace writes).
pub mod init_defer {
    /// nonzero: a socket's `init` waits for its first other record (the trace walks its sockets
    /// once a second, which flushes those that waited; else each `init` leaves at ESTABLISHED)
    pub const ON: u32 = 0;
    /// the socket walk reports every `init` still waiting that began at or before this
    /// `bpf_ktime_get_ns()` (u64::MAX: all, at the trace's end)
    pub const FLUSH_BEFORE_NS: u32 = 1;
    pub const SLOTS: u32 = 2;
}

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

impl Checked {
    /// Whether this slot says `sk` was checked within `RECHECK_JIFFIES` of `now` (jiffies; the
    /// clock wraps).
    #[inline(always)]
    pub const fn holds(&self, sk: u64, now: u64) -> bool {
        self.sk == sk && now.wrapping_sub(self.at_jiffies) < RECHECK_JIFFIES
    }

    /// The slot now says `sk` was checked at `now`.
    #[inline(always)]
    pub fn mark(&mut self, sk: u64, now: u64) {
        self.sk = sk;
        self.at_jiffies = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_holds_for_recheck_jiffies_across_the_clocks_wrap() {
        let mut c = Checked::default();
        c.mark(7, u64::MAX - 2);
        assert!(c.holds(7, u64::MAX - 2));
        assert!(c.holds(7, RECHECK_JIFFIES - 4));
        assert!(!c.holds(7, RECHECK_JIFFIES - 3));
        assert!(!c.holds(8, u64::MAX - 2));
    }
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
