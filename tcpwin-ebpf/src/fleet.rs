//! The exporter's kernel side: counters a snapshot cannot give, aggregated here per CPU (no
//! locks, no ring buffer). Handshakes and closes are one hit per connection; the packet
//! histogram, opt-in, one per data packet.
use aya_ebpf::{macros::map, maps::PerCpuHashMap};
use tcpwin_common::{estab_key, hook, tcp_state, ClosedSums, MAX_COUNTED_NAMESPACES};

use crate::{
    log::klog,
    read::{self, bits, off, Direct, Mem},
    track,
};

/// Connections that reached ESTABLISHED, per namespace, by whether window scaling was negotiated
/// and which side opened them (`tcpwin_common::estab_key`).
#[map(name = "ESTAB_COUNTS")]
static ESTAB_COUNTS: PerCpuHashMap<u64, u64> =
    PerCpuHashMap::with_max_entries(MAX_COUNTED_NAMESPACES, 0);

/// Per namespace: the chrono times of the connections that closed.
#[map(name = "CLOSED_SUMS")]
static CLOSED_SUMS: PerCpuHashMap<u32, ClosedSums> =
    PerCpuHashMap::with_max_entries(MAX_COUNTED_NAMESPACES, 0);

/// `sock:inet_sock_set_state` on a full TCP socket (`sk`, 0 otherwise).
#[inline(always)]
pub fn state_change(sk: u64, old_state: u8, new_state: u8) {
    if sk == 0 || !(new_state == tcp_state::ESTABLISHED || new_state == tcp_state::CLOSE) {
        return;
    }
    let (lport, rport) = read::ports::<Direct>(sk);
    if !track::port_ok(lport, rport) || !track::addr_ok::<Direct>(sk) {
        return;
    }
    let netns = read::netns::<Direct>(sk);
    if new_state == tcp_state::ESTABLISHED {
        let (_, wscale_ok) = read::wscale::<Direct>(sk);
        let key = estab_key(netns, wscale_ok, old_state == tcp_state::SYN_RECV);
        match ESTAB_COUNTS.get_ptr_mut(key) {
            // SAFETY: a per-CPU map value from get_ptr_mut: no other writer on this CPU.
            Some(p) => unsafe { *p += 1 },
            None => {
                if ESTAB_COUNTS.insert(key, 1, 0).is_err() {
                    klog!(
                        Warn,
                        hook::TP_SET_STATE,
                        "{} handshake counter full ({} keys): a connection of netns {} not counted",
                        MAX_COUNTED_NAMESPACES,
                        netns
                    );
                }
            }
        }
        return;
    }
    // a listener or a connect that failed was never a connection
    if old_state == tcp_state::LISTEN || old_state == tcp_state::SYN_SENT {
        return;
    }
    // CLOSE: what tcp_get_info_chrono_stats would report now, the running chrono included
    let stat: [u32; 3] = Direct::at(sk, off!(tp_chrono_stat));
    let running = bits::<Direct>(sk, off!(tp_chrono_type_bit), 2) as usize;
    let start: u32 = Direct::at(sk, off!(tp_chrono_start));
    // SAFETY: bpf_jiffies64 takes no arguments and only reads the clock.
    let now = unsafe { aya_ebpf::helpers::bpf_jiffies64() } as u32;
    let mut add = [stat[0] as u64, stat[1] as u64, stat[2] as u64];
    if (1..=3).contains(&running) {
        add[running - 1] += now.wrapping_sub(start) as u64;
    }
    match CLOSED_SUMS.get_ptr_mut(netns) {
        // SAFETY: a per-CPU map value from get_ptr_mut: no other writer on this CPU.
        Some(p) => unsafe {
            (*p).chrono_jiffies[0] += add[0];
            (*p).chrono_jiffies[1] += add[1];
            (*p).chrono_jiffies[2] += add[2];
            (*p).closed += 1;
        },
        None => {
            let v = ClosedSums {
                chrono_jiffies: add,
                closed: 1,
            };
            if CLOSED_SUMS.insert(netns, v, 0).is_err() {
                klog!(
                    Warn,
                    hook::TP_SET_STATE,
                    "{} closed-connection sums full ({} namespaces): a close in netns {} not counted",
                    MAX_COUNTED_NAMESPACES,
                    netns
                );
            }
        }
    }
}

/// `tcp:tcp_probe` (the packet not yet processed: payload from the sequence numbers).
#[inline(always)]
pub fn packet(sk: u64, skb: u64) {
    if sk == 0 || skb == 0 {
        return;
    }
    let (lport, rport) = read::ports::<Direct>(sk);
    if !track::port_ok(lport, rport) || !track::addr_ok::<Direct>(sk) {
        return;
    }
    let shape = read::skb_shape::<Direct>(skb, false);
    if shape.len != 0 {
        track::histogram(read::netns::<Direct>(sk), &shape, None, hook::TP_TCP_PROBE);
    }
}
