//! Per-socket timeline in userspace: the last values of each live socket, and the final values of
//! every socket seen, as histograms. A socket's entry goes when it closes, so memory follows the
//! number of live sockets, not how many came and went.
use std::{collections::HashMap, net::IpAddr};

use crate::{
    hist::{Hist, BYTES_SCALE, RATIO_SCALE},
    kind::EventKind,
    record::Record,
    schema::SocketId,
};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Last {
    pub id: SocketId,
    pub scaling_ratio: Option<u8>,
    pub window_clamp: u32,
    pub rcv_ssthresh: u32,
    pub events: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Cookie(u64),
    Tuple(u32, IpAddr, u16, IpAddr, u16),
}

/// Final values per socket.
pub struct Finals {
    pub sockets: u64,
    pub scaling_ratio: Hist,
    pub window_clamp: Hist,
    pub rcv_ssthresh: Hist,
}

pub struct Sockets {
    live: HashMap<Key, Last>,
    finals: Finals,
}

impl Default for Sockets {
    fn default() -> Self {
        Sockets {
            live: HashMap::new(),
            finals: Finals {
                sockets: 0,
                scaling_ratio: Hist::new(RATIO_SCALE),
                window_clamp: Hist::new(BYTES_SCALE),
                rcv_ssthresh: Hist::new(BYTES_SCALE),
            },
        }
    }
}

/// The cookie when known, else the connection's addresses.
fn key(r: &Record) -> Key {
    match r.cookie() {
        Some(c) => Key::Cookie(c),
        None => Key::Tuple(r.ev.netns, r.laddr, r.ev.lport, r.raddr, r.ev.rport),
    }
}

impl Finals {
    fn record(&mut self, l: &Last) {
        self.sockets += 1;
        if let Some(r) = l.scaling_ratio {
            self.scaling_ratio.record(r as u64);
        }
        self.window_clamp.record(l.window_clamp as u64);
        self.rcv_ssthresh.record(l.rcv_ssthresh as u64);
    }
}

impl Sockets {
    /// Records an event. A `close` arrives after the kernel released the local port: its
    /// addresses are restored from the socket's earlier events, and the socket is retired.
    pub fn update(&mut self, r: &mut Record) {
        let k = key(r);
        let e = self.live.entry(k.clone()).or_insert_with(|| Last {
            id: r.id(),
            scaling_ratio: None,
            window_clamp: 0,
            rcv_ssthresh: 0,
            events: 0,
        });
        if r.kind == EventKind::Close && r.ev.lport == 0 && e.id.lport != 0 {
            r.laddr = e.id.laddr.unwrap_or(r.laddr);
            r.ev.lport = e.id.lport;
            r.raddr = e.id.raddr.unwrap_or(r.raddr);
            r.ev.rport = e.id.rport;
        }
        e.scaling_ratio = r.scaling_ratio();
        e.window_clamp = r.ev.window_clamp;
        e.rcv_ssthresh = r.ev.rcv_ssthresh;
        e.events += 1;
        if r.kind == EventKind::Close {
            if let Some(done) = self.live.remove(&k) {
                self.finals.record(&done);
            }
        }
    }

    /// Live sockets (not closed yet).
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// Live sockets with a cookie: (cookie, their last values).
    pub fn live_cookies(&self) -> impl Iterator<Item = (u64, &Last)> {
        self.live.iter().filter_map(|(k, l)| match k {
            Key::Cookie(c) => Some((*c, l)),
            Key::Tuple(..) => None,
        })
    }

    /// Ends the trace: sockets still open count with their last values.
    pub fn finish(mut self) -> Finals {
        for l in std::mem::take(&mut self.live).values() {
            self.finals.record(l);
        }
        self.finals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_common::{flag, kind, Event};

    fn rec(k: u8, lport: u16) -> Record {
        rec_cookie(k, lport, 7)
    }

    fn rec_cookie(k: u8, lport: u16, cookie: u64) -> Record {
        let ev = Event {
            kind: k,
            family: tcpwin_common::AF_INET,
            cookie,
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
        assert_eq!(s.live(), 1);
        let mut close = rec(kind::CLOSE, 0);
        s.update(&mut close);
        assert_eq!(close.ev.lport, 5201);
        // a closed socket no longer takes memory; its final values are in the histograms
        assert_eq!(s.live(), 0);
        let f = s.finish();
        assert_eq!(f.sockets, 1);
        assert_eq!(f.scaling_ratio.quantile(0.5), 200);
        assert_eq!(f.window_clamp.count(), 1);
    }

    #[test]
    fn memory_follows_live_sockets() {
        let mut s = Sockets::default();
        for c in 0..10_000u64 {
            s.update(&mut rec_cookie(kind::INIT, 5201, c));
            s.update(&mut rec_cookie(kind::CLOSE, 0, c));
        }
        assert_eq!(s.live(), 0);
        assert_eq!(s.finish().sockets, 10_000);
    }
}
