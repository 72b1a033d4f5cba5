//! Ring-buffer output and the per-CPU counters that make every loss visible.
use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, BPF_RB_RING_SIZE},
    macros::map,
    maps::{ring_buf::RingBufEntry, PerCpuArray, RingBuf},
};
use tcpwin_common::{counter, Event};

use crate::log::klog;

/// 1 MiB by default; userspace may resize it (`--ringbuf-kib`).
#[map(name = "EVENTS")]
static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 20, 0);

#[map(name = "COUNTERS")]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::COUNT, 0);

#[inline(always)]
pub fn count(idx: u32) {
    if let Some(p) = COUNTERS.get_ptr_mut(idx) {
        // SAFETY: a per-CPU array slot from get_ptr_mut: no other writer on this CPU.
        unsafe { *p += 1 };
    }
}

/// Reserves an event slot (counted as due; a full ring buffer is counted as a drop, never silent).
/// The caller writes every field in place (no stack copy: the BPF stack is 512 bytes) and calls
/// [`submit`].
#[inline(always)]
pub fn reserve(hook: u8, kind: u8, cookie: u64) -> Option<RingBufEntry<Event>> {
    count(counter::EVENTS_DUE);
    let entry = EVENTS.reserve::<Event>(0);
    if entry.is_none() {
        count(counter::EVENTS_DROPPED);
        klog!(
            Warn,
            hook,
            "{} ring buffer full: event (kind {}) of socket {:x} lost (a larger --ringbuf-kib keeps up)",
            kind,
            cookie
        );
    }
    entry
}

/// Hands the event over without waking the reader: a wakeup is an interrupt (a VM exit on a guest,
/// several microseconds) per event. Userspace collects on its 100 ms tick; it is woken only
/// when a quarter of the ring is in use, so a burst cannot fill the ring between two ticks.
#[inline(always)]
pub fn submit(entry: RingBufEntry<Event>) {
    let used = EVENTS.query(BPF_RB_AVAIL_DATA as u64);
    let size = EVENTS.query(BPF_RB_RING_SIZE as u64);
    let flags = if used >= size / 4 {
        BPF_RB_FORCE_WAKEUP
    } else {
        BPF_RB_NO_WAKEUP
    };
    entry.submit(flags as u64);
    count(counter::EVENTS_SENT);
}
