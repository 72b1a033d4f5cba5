//! Decoding: a raw kernel `Event` becomes a `Record` with names and absent values made explicit.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use anyhow::{bail, Result};
use std::collections::{HashSet, VecDeque};

use tcpwin_common::{flag, flag2, hook, kind, tcp_state, Event, AF_INET6};

use crate::{
    kind::EventKind,
    schema::{Cause, EventLine, Family, Init, Prev, SocketId},
};

#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub ev: Event,
    pub kind: EventKind,
    pub laddr: IpAddr,
    pub raddr: IpAddr,
    pub comm: Option<String>,
}

fn addr(family: u8, b: &[u8; 16]) -> IpAddr {
    if family == AF_INET6 {
        IpAddr::V6(Ipv6Addr::from(*b))
    } else {
        IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    }
}

/// Decodes one ring-buffer item. A short or unknown item is an error (never silently skipped).
pub fn decode(bytes: &[u8]) -> Result<Record> {
    if bytes.len() < std::mem::size_of::<Event>() {
        bail!(
            "short event: {} bytes, expected {}",
            bytes.len(),
            std::mem::size_of::<Event>()
        );
    }
    // SAFETY: Event is repr(C) plain data and the slice is long enough; read_unaligned copes with
    // any alignment of the ring buffer slot.
    let ev: Event = unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const Event) };
    let Some(kind) = EventKind::from_raw(ev.kind) else {
        bail!("unknown event kind {}", ev.kind);
    };
    let comm = (ev.flags & flag::PID != 0).then(|| {
        let end = ev.comm.iter().position(|&c| c == 0).unwrap_or(16);
        String::from_utf8_lossy(&ev.comm[..end]).into_owned()
    });
    Ok(Record {
        laddr: addr(ev.family, &ev.laddr),
        raddr: addr(ev.family, &ev.raddr),
        kind,
        comm,
        ev,
    })
}

/// A record that carries its socket's deferred `init` (`flag2::INIT_MERGED`) as the records it
/// stands for: the `init` as the socket was at ESTABLISHED, then the record itself (none where
/// the record carried only the `init`: the socket walk's flush). Any other record as it is.
pub fn split(r: Record) -> (Option<Record>, Option<Record>) {
    if r.ev.flags2 & flag2::INIT_MERGED == 0 {
        return (None, Some(r));
    }
    let e = r.ev;
    let init = Record {
        kind: EventKind::Init,
        ev: Event {
            ts_ns: e.init_ts_ns,
            kind: kind::INIT,
            hook: e.init_hook,
            state: tcp_state::ESTABLISHED,
            // nothing was reported between ESTABLISHED and this record: its `prev_*` are the
            // window fields the socket had then
            scaling_ratio: e.prev_scaling_ratio,
            window_clamp: e.prev_window_clamp,
            rcv_ssthresh: e.prev_rcv_ssthresh,
            sk_rcvbuf: e.prev_sk_rcvbuf,
            rcvq_space: e.prev_rcvq_space,
            rcv_wnd: e.init_rcv_wnd,
            rcv_mss: e.init_rcv_mss,
            flags: e.flags & !(flag::PREV | flag::SKB),
            prev_scaling_ratio: 0,
            prev_window_clamp: 0,
            prev_rcv_ssthresh: 0,
            prev_sk_rcvbuf: 0,
            prev_rcvq_space: 0,
            skb_len: 0,
            skb_truesize: 0,
            ifindex: 0,
            gso_size: 0,
            gso_segs: 0,
            gso_read: 0,
            flags2: 0,
            init_hook: 0,
            init_ts_ns: 0,
            init_rcv_wnd: 0,
            init_rcv_mss: 0,
            ..e
        },
        ..r.clone()
    };
    if r.kind == EventKind::Init {
        return (Some(init), None);
    }
    let mut rest = r;
    rest.ev.flags &= !flag::INIT_PARAMS;
    rest.ev.init_space = 0;
    rest.ev.init_mss = 0;
    rest.ev.flags2 = 0;
    (Some(init), Some(rest))
}

/// The deferred `init`s already delivered: one that two records carried at once (the socket
/// walk's flush on one CPU, the socket's first change on another) reaches the trace once.
/// Duplicates arrive within microseconds of each other; the last `CAP` are kept.
#[derive(Default)]
pub struct InitsSeen {
    order: VecDeque<(u64, u32, u64)>,
    seen: HashSet<(u64, u32, u64)>,
}

impl InitsSeen {
    const CAP: usize = 4096;

    /// Whether `init` (from [`split`]) is the first of its socket's.
    pub fn first(&mut self, init: &Record) -> bool {
        let k = (init.ev.cookie, init.ev.netns, init.ev.ts_ns);
        if !self.seen.insert(k) {
            return false;
        }
        self.order.push_back(k);
        if self.order.len() > Self::CAP {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }
}

impl Record {
    pub fn has(&self, f: u8) -> bool {
        self.ev.flags & f != 0
    }
    pub fn scaling_ratio(&self) -> Option<u8> {
        self.has(flag::RATIO_PRESENT)
            .then_some(self.ev.scaling_ratio)
    }
    /// Which socket.
    pub fn id(&self) -> SocketId {
        SocketId {
            cookie: self.cookie(),
            netns: Some(self.ev.netns),
            laddr: Some(self.laddr),
            lport: self.ev.lport,
            raddr: Some(self.raddr),
            rport: self.ev.rport,
        }
    }
    pub fn cookie(&self) -> Option<u64> {
        self.has(flag::COOKIE).then_some(self.ev.cookie)
    }
    pub fn pid(&self) -> Option<u32> {
        self.has(flag::PID).then_some(self.ev.pid)
    }
    pub fn hook_name(&self) -> &'static str {
        if self.ev.hook == hook::ITER_CATCH_UP {
            return hook::ITER_CATCH_UP_NAME;
        }
        hook::NAMES
            .get(self.ev.hook as usize)
            .copied()
            .unwrap_or("?")
    }
    /// The handshake's first `window_clamp` on the active side is a placeholder the kernel
    /// replaces at once (`65535 << rcv_wscale`, above what the buffer allows): not the value the
    /// connection starts with.
    pub fn placeholder_clamp(&self) -> bool {
        let e = &self.ev;
        let shift = if self.has(flag::WSCALE_OK) {
            e.rcv_wscale
        } else {
            0
        };
        self.kind == EventKind::Init
            && e.window_clamp as u64 == tcpwin_common::formula::max_scaled_window(shift)
            && e.window_clamp > e.sk_rcvbuf
    }

    /// The ratio `tcp_measure_rcv_mss` computes from the reported packet.
    pub fn skb_ratio(&self) -> Option<u64> {
        if !self.has(flag::SKB) {
            return None;
        }
        tcpwin_common::formula::ratio(self.ev.skb_len, self.ev.skb_truesize)
    }

    /// The `--json` line; absent values are `null`, never 0. `pid_override`: the traced PID,
    /// when the kernel did not name the owner itself.
    pub fn to_line(&self, pid_override: Option<u32>) -> EventLine {
        let e = &self.ev;
        let skb = self.has(flag::SKB);
        let prev = self.has(flag::PREV);
        let gso = skb && e.gso_read != 0;
        EventLine {
            event: self.kind,
            ts_ns: e.ts_ns,
            id: self.id(),
            pid: self.pid().or(pid_override),
            comm: self.comm.clone(),
            workload: None,
            family: if self.laddr.is_ipv6() {
                Family::Ipv6
            } else {
                Family::Ipv4
            },
            hook: self.hook_name().to_string(),
            scaling_ratio: self.scaling_ratio(),
            window_clamp: e.window_clamp,
            rcv_ssthresh: e.rcv_ssthresh,
            rcv_wnd: e.rcv_wnd,
            sk_rcvbuf: e.sk_rcvbuf,
            rcvq_space: e.rcvq_space,
            rcvbuf_locked: self.has(flag::RCVBUF_LOCKED),
            rcv_mss: e.rcv_mss,
            advmss: e.advmss,
            prev: self.kind.has_prev().then(|| Prev {
                prev_window_clamp: prev.then_some(e.prev_window_clamp),
                prev_rcv_ssthresh: prev.then_some(e.prev_rcv_ssthresh),
                prev_sk_rcvbuf: prev.then_some(e.prev_sk_rcvbuf),
                prev_rcvq_space: prev.then_some(e.prev_rcvq_space),
            }),
            cause: (self.kind == EventKind::Ratio).then(|| Cause {
                prev_scaling_ratio: (prev && self.scaling_ratio().is_some())
                    .then_some(e.prev_scaling_ratio),
                skb_len: skb.then_some(e.skb_len),
                skb_truesize: skb.then_some(e.skb_truesize),
                gso_size: gso.then_some(e.gso_size),
                gso_segs: gso.then_some(e.gso_segs),
                ifindex: skb.then_some(e.ifindex),
            }),
            init: (self.kind == EventKind::Init).then(|| {
                let p = self.has(flag::INIT_PARAMS);
                Init {
                    rcv_wscale: e.rcv_wscale,
                    wscale_ok: self.has(flag::WSCALE_OK),
                    space: p.then_some(e.init_space),
                    mss: p.then_some(e.init_mss),
                    window_clamp_placeholder: self.placeholder_clamp(),
                }
            }),
        }
    }

    /// [`Record::to_line`] as a JSON value.
    pub fn to_json(&self, pid_override: Option<u32>) -> serde_json::Value {
        serde_json::to_value(self.to_line(pid_override)).expect("plain data serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_common::kind;

    fn raw(ev: &Event) -> Vec<u8> {
        // SAFETY: Event is repr(C) plain data.
        unsafe {
            std::slice::from_raw_parts(
                ev as *const Event as *const u8,
                std::mem::size_of::<Event>(),
            )
        }
        .to_vec()
    }

    fn ratio_event() -> Event {
        let mut laddr = [0u8; 16];
        laddr[..4].copy_from_slice(&[10, 0, 0, 2]);
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"recv");
        Event {
            ts_ns: 42,
            cookie: 4097,
            netns: 4026531840,
            pid: 77,
            comm,
            laddr,
            raddr: [0; 16],
            lport: 5201,
            rport: 40000,
            kind: kind::RATIO,
            family: tcpwin_common::AF_INET,
            hook: hook::TP_TCP_PROBE,
            flags: flag::RATIO_PRESENT | flag::SKB | flag::PREV | flag::PID | flag::COOKIE,
            scaling_ratio: 162,
            prev_scaling_ratio: 128,
            window_clamp: 663552,
            skb_len: 1448,
            skb_truesize: 2280,
            ..Event::default()
        }
    }

    #[test]
    fn decodes_a_ratio_event() {
        let r = decode(&raw(&ratio_event())).unwrap();
        assert_eq!(r.kind, EventKind::Ratio);
        assert_eq!(r.laddr.to_string(), "10.0.0.2");
        assert_eq!(r.comm.as_deref(), Some("recv"));
        assert_eq!(r.skb_ratio(), Some(162));
        let j = r.to_json(None);
        assert_eq!(j["prev_scaling_ratio"], 128);
        assert_eq!(j["skb_truesize"], 2280);
        assert_eq!(j["cookie"], 4097);
        assert_eq!(j["family"], "ipv4");
        assert_eq!(j["pid"], 77);
    }

    #[test]
    fn absent_values_are_null() {
        let mut e = ratio_event();
        e.flags = 0; // no ratio on this kernel, no packet, no pid, no cookie
        let j = decode(&raw(&e)).unwrap().to_json(None);
        for k in [
            "scaling_ratio",
            "prev_scaling_ratio",
            "skb_len",
            "skb_truesize",
            "pid",
            "comm",
            "cookie",
            "prev_window_clamp",
        ] {
            assert!(j[k].is_null(), "{k} should be null: {j}");
        }
        assert_eq!(j["window_clamp"], 663552);
    }

    #[test]
    fn ipv6_addresses() {
        let mut e = ratio_event();
        e.family = tcpwin_common::AF_INET6;
        e.laddr = std::net::Ipv6Addr::LOCALHOST.octets();
        let r = decode(&raw(&e)).unwrap();
        assert_eq!(r.laddr.to_string(), "::1");
        assert_eq!(r.to_json(None)["family"], "ipv6");
    }

    /// A close that carried its socket's deferred `init` is the `init` as it was at
    /// ESTABLISHED, then the close; the walk's flush is the `init` alone, and a second copy of
    /// the same `init` is not delivered twice.
    #[test]
    fn a_merged_init_is_split_back_into_its_records() {
        let mut e = ratio_event();
        e.kind = kind::CLOSE;
        e.hook = hook::TP_DESTROY_SOCK;
        e.flags = flag::RATIO_PRESENT | flag::PREV | flag::COOKIE | flag::INIT_PARAMS;
        e.flags2 = flag2::INIT_MERGED;
        e.ts_ns = 9_000;
        e.state = 7;
        e.scaling_ratio = 190;
        e.window_clamp = 700_000;
        e.rcv_wnd = 600_000;
        e.rcv_mss = 1448;
        e.prev_scaling_ratio = 128;
        e.prev_window_clamp = 65535 << 7;
        e.prev_rcv_ssthresh = 64_000;
        e.prev_sk_rcvbuf = 131_072;
        e.prev_rcvq_space = 14_480;
        e.init_space = 131_072;
        e.init_mss = 1460;
        e.init_hook = hook::TP_SET_STATE;
        e.init_ts_ns = 1_000;
        e.init_rcv_wnd = 64_000;
        e.init_rcv_mss = 536;
        let (init, rest) = split(decode(&raw(&e)).unwrap());
        let (init, rest) = (init.unwrap(), rest.unwrap());
        assert_eq!(init.kind, EventKind::Init);
        let j = init.to_json(None);
        assert_eq!(j["event"], "init");
        assert_eq!(j["ts_ns"], 1_000);
        assert_eq!(j["hook"], "sock:inet_sock_set_state");
        assert_eq!(j["scaling_ratio"], 128);
        assert_eq!(j["window_clamp"], 65535 << 7);
        assert_eq!(j["rcv_ssthresh"], 64_000);
        assert_eq!(j["rcv_wnd"], 64_000);
        assert_eq!(j["sk_rcvbuf"], 131_072);
        assert_eq!(j["rcv_mss"], 536);
        assert_eq!(j["space"], 131_072);
        assert_eq!(j["lport"], 5201);
        assert_eq!(rest.kind, EventKind::Close);
        let j = rest.to_json(None);
        assert_eq!(j["ts_ns"], 9_000);
        assert_eq!(j["scaling_ratio"], 190);
        assert_eq!(j["prev_window_clamp"], 65535 << 7);
        assert!(!rest.has(flag::INIT_PARAMS));
        // the walk's flush: the `init` alone
        e.kind = kind::INIT;
        e.hook = hook::ITER;
        let (flushed, none) = split(decode(&raw(&e)).unwrap());
        assert!(none.is_none());
        let flushed = flushed.unwrap();
        assert_eq!(flushed.to_json(None), init.to_json(None));
        let mut seen = InitsSeen::default();
        assert!(seen.first(&init));
        assert!(!seen.first(&flushed));
        // a record without the bit is left as it is
        let plain = decode(&raw(&ratio_event())).unwrap();
        assert_eq!(split(plain.clone()), (None, Some(plain)));
    }

    #[test]
    fn rejects_short_and_unknown() {
        assert!(decode(&[0u8; 8]).unwrap_err().to_string().contains("short"));
        let mut e = ratio_event();
        e.kind = 99;
        assert!(decode(&raw(&e))
            .unwrap_err()
            .to_string()
            .contains("unknown"));
    }
}
