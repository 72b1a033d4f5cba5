//! Per-socket timeline in userspace: the last values each socket reported, for the summary.
use std::collections::HashMap;

use crate::record::Record;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Last {
    pub laddr: std::net::IpAddr,
    pub lport: u16,
    pub raddr: std::net::IpAddr,
    pub rport: u16,
    pub ratio: Option<u8>,
    pub window_clamp: u32,
    pub rcv_ssthresh: u32,
    pub events: u64,
}

#[derive(Default)]
pub struct Sockets {
    by_key: HashMap<String, Last>,
}

/// The cookie when known, else the connection's addresses.
fn key(r: &Record) -> String {
    match r.cookie() {
        Some(c) => format!("c{c}"),
        None => format!(
            "{}:{}:{}:{}:{}",
            r.ev.netns, r.laddr, r.ev.lport, r.raddr, r.ev.rport
        ),
    }
}

impl Sockets {
    /// Records an event. A `close` arrives after the kernel released the local port: its
    /// addresses are restored from the socket's earlier events.
    pub fn update(&mut self, r: &mut Record) {
        let e = self.by_key.entry(key(r)).or_insert_with(|| Last {
            laddr: r.laddr,
            lport: r.ev.lport,
            raddr: r.raddr,
            rport: r.ev.rport,
            ratio: None,
            window_clamp: 0,
            rcv_ssthresh: 0,
            events: 0,
        });
        if r.kind == "close" && r.ev.lport == 0 && e.lport != 0 {
            r.laddr = e.laddr;
            r.ev.lport = e.lport;
            r.raddr = e.raddr;
            r.ev.rport = e.rport;
        }
        e.ratio = r.ratio();
        e.window_clamp = r.ev.window_clamp;
        e.rcv_ssthresh = r.ev.rcv_ssthresh;
        e.events += 1;
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Last> {
        self.by_key.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_common::{flag, kind, Event};

    fn rec(k: u8, lport: u16) -> Record {
        let ev = Event {
            kind: k,
            family: libc::AF_INET as u8,
            cookie: 7,
            flags: flag::COOKIE | flag::RATIO_PRESENT,
            lport,
            rport: 40000,
            scaling_ratio: 200,
            window_clamp: 1000,
            ..Event::default()
        };
        let mut raw = vec![0u8; std::mem::size_of::<Event>()];
        // SAFETY: Event is plain data.
        unsafe { std::ptr::write_unaligned(raw.as_mut_ptr() as *mut Event, ev) };
        crate::record::decode(&raw).unwrap()
    }

    #[test]
    fn close_gets_the_tuple_back() {
        let mut s = Sockets::default();
        s.update(&mut rec(kind::INIT, 5201));
        let mut close = rec(kind::CLOSE, 0);
        s.update(&mut close);
        assert_eq!(close.ev.lport, 5201);
        assert_eq!(s.len(), 1);
        let last = s.iter().next().unwrap();
        assert_eq!(
            (last.ratio, last.window_clamp, last.events),
            (Some(200), 1000, 2)
        );
    }
}
