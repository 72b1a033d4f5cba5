//! Per-socket timeline in userspace: the last values of each live socket, and the final values of
//! every socket seen, as histograms. A socket's entry goes when it closes, so memory follows the
//! number of live sockets, not how many came and went.
use std::{collections::HashMap, net::IpAddr};

use tcpwin_common::{flag, hook, kind, Event, AF_INET, AF_INET6};

use crate::{
    decode::Record,
    facts::SockFacts,
    hist::{Hist, BYTES_SCALE, RATIO_SCALE},
    kind::EventKind,
    schema::SocketId,
};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Last {
    pub id: SocketId,
    pub scaling_ratio: Option<u8>,
    pub window_clamp: u32,
    pub rcv_ssthresh: u32,
    pub sk_rcvbuf: u32,
    pub rcvq_space: u32,
    pub events: u64,
    /// CLOCK_MONOTONIC ns of the latest event
    pub ts_ns: u64,
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
    /// every event seen
    events: u64,
}

impl Default for Sockets {
    fn default() -> Self {
        Sockets {
            events: 0,
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
    /// Records an event and returns the socket's values before it (None: first seen). A
    /// `close` arrives after the kernel released the local port: its addresses are restored from
    /// the socket's earlier events, and the socket is retired.
    pub fn update(&mut self, r: &mut Record) -> Option<Last> {
        self.events += 1;
        let k = key(r);
        let before = self.live.get(&k).cloned();
        let e = self.live.entry(k.clone()).or_insert_with(|| Last {
            id: r.id(),
            scaling_ratio: None,
            window_clamp: 0,
            rcv_ssthresh: 0,
            sk_rcvbuf: 0,
            rcvq_space: 0,
            events: 0,
            ts_ns: 0,
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
        e.sk_rcvbuf = r.ev.sk_rcvbuf;
        e.rcvq_space = r.ev.rcvq_space;
        e.events += 1;
        e.ts_ns = e.ts_ns.max(r.ev.ts_ns);
        if r.kind == EventKind::Close {
            if let Some(done) = self.live.remove(&k) {
                self.finals.record(&done);
            }
        }
        before
    }

    /// A change the socket iterator read (`f`) that no event reported: the record that reports
    /// it, marked as read by the iterator (`hook` `iter/tcp`, no cause packet). A `ratio` event
    /// when the ratio moved, else `space`. None when the socket is not live here, nothing
    /// differs from its last reported values, or a hook reported the socket after the reading
    /// was taken (the reading is older than what is known: reporting it would go back in time).
    pub fn catch_up(&self, f: &SockFacts) -> Option<Record> {
        let last = self.live.get(&Key::Cookie(f.id.cookie?))?;
        if last.ts_ns > f.ts_ns {
            return None;
        }
        let now = (
            f.scaling_ratio,
            f.window_clamp?,
            f.rcv_ssthresh?,
            f.sk_rcvbuf?,
            f.rcvq_space?,
        );
        let ratio_moved = f.scaling_ratio.is_some() && f.scaling_ratio != last.scaling_ratio;
        if !ratio_moved
            && (now.1, now.2, now.3, now.4)
                == (
                    last.window_clamp,
                    last.rcv_ssthresh,
                    last.sk_rcvbuf,
                    last.rcvq_space,
                )
        {
            return None;
        }
        let octets = |a: Option<IpAddr>| -> [u8; 16] {
            match a {
                Some(IpAddr::V4(v4)) => {
                    let mut b = [0u8; 16];
                    b[..4].copy_from_slice(&v4.octets());
                    b
                }
                Some(IpAddr::V6(v6)) => v6.octets(),
                None => [0u8; 16],
            }
        };
        let v6 = f.id.laddr.is_some_and(|a| a.is_ipv6());
        let mut flags = flag::COOKIE | flag::PREV;
        if f.scaling_ratio.is_some() {
            flags |= flag::RATIO_PRESENT;
        }
        if f.rcvbuf_locked == Some(true) {
            flags |= flag::RCVBUF_LOCKED;
        }
        if f.wscale_ok == Some(true) {
            flags |= flag::WSCALE_OK;
        }
        let ev = Event {
            ts_ns: f.ts_ns,
            cookie: f.id.cookie?,
            netns: f.id.netns.unwrap_or(last.id.netns.unwrap_or(0)),
            laddr: octets(f.id.laddr),
            raddr: octets(f.id.raddr),
            lport: f.id.lport,
            rport: f.id.rport,
            kind: if ratio_moved {
                kind::RATIO
            } else {
                kind::SPACE
            },
            family: if v6 { AF_INET6 } else { AF_INET },
            hook: hook::ITER_CATCH_UP,
            flags,
            scaling_ratio: f.scaling_ratio.unwrap_or(0),
            prev_scaling_ratio: last.scaling_ratio.unwrap_or(0),
            rcv_wscale: f.rcv_wscale.unwrap_or(0),
            state: f.state,
            window_clamp: now.1,
            prev_window_clamp: last.window_clamp,
            rcv_ssthresh: now.2,
            prev_rcv_ssthresh: last.rcv_ssthresh,
            rcv_wnd: f.rcv_wnd.unwrap_or(0),
            sk_rcvbuf: now.3,
            prev_sk_rcvbuf: last.sk_rcvbuf,
            rcvq_space: now.4,
            prev_rcvq_space: last.rcvq_space,
            rcv_mss: f.rcv_mss.unwrap_or(0),
            advmss: f.advmss.unwrap_or(0),
            ..Event::default()
        };
        let unspecified = || {
            if v6 {
                IpAddr::from([0u8; 16])
            } else {
                IpAddr::from([0u8; 4])
            }
        };
        Some(Record {
            kind: if ratio_moved {
                EventKind::Ratio
            } else {
                EventKind::Space
            },
            laddr: f.id.laddr.unwrap_or_else(unspecified),
            raddr: f.id.raddr.unwrap_or_else(unspecified),
            comm: None,
            ev,
        })
    }

    /// Whether a socket of this cookie is live (seen, not yet closed).
    pub fn is_live(&self, cookie: u64) -> bool {
        self.live.contains_key(&Key::Cookie(cookie))
    }

    /// Events recorded so far, over every socket (closed ones included).
    pub fn events(&self) -> u64 {
        self.events
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
        crate::decode::decode(&raw).unwrap()
    }

    /// A change made after the socket's last hooked packet, read by the iterator: reported once,
    /// as a `space` event from `iter/tcp` with the previous values, no cause packet.
    #[test]
    fn a_change_the_hooks_missed_is_caught_up_once() {
        let mut s = Sockets::default();
        let mut init = rec(kind::INIT, 5201);
        init.ev.rcv_ssthresh = 890_269;
        init.ev.sk_rcvbuf = 1 << 20;
        init.ev.rcvq_space = 14_480;
        s.update(&mut init);
        let mut f = SockFacts {
            id: init.id(),
            scaling_ratio: Some(200),
            window_clamp: Some(1000),
            rcv_ssthresh: Some(890_269),
            sk_rcvbuf: Some(1 << 20),
            rcvq_space: Some(14_480),
            ..Default::default()
        };
        assert!(s.catch_up(&f).is_none(), "nothing new");
        f.rcv_ssthresh = Some(893_125);
        let mut r = s.catch_up(&f).expect("the change");
        assert_eq!(r.kind, EventKind::Space);
        assert_eq!(r.hook_name(), "iter/tcp");
        let line = r.to_line(None);
        assert_eq!(line.rcv_ssthresh, 893_125);
        assert_eq!(line.prev.as_ref().unwrap().prev_rcv_ssthresh, Some(890_269));
        assert!(line.cause.is_none());
        s.update(&mut r);
        assert!(s.catch_up(&f).is_none(), "reported once");
        // the ratio moved: a ratio event, its cause unknown
        f.scaling_ratio = Some(229);
        let r = s.catch_up(&f).unwrap();
        assert_eq!(r.kind, EventKind::Ratio);
        let cause = r.to_line(None).cause.unwrap();
        assert_eq!((cause.prev_scaling_ratio, cause.skb_len), (Some(200), None));
    }

    /// The hooks reported the socket after the iterator read it: the reading is older than
    /// the timeline and says nothing new, whatever it differs in.
    #[test]
    fn a_reading_older_than_the_last_event_is_not_reported() {
        let mut s = Sockets::default();
        let mut init = rec(kind::INIT, 5201);
        init.ev.ts_ns = 2_000;
        s.update(&mut init);
        let mut f = SockFacts {
            ts_ns: 1_000,
            id: init.id(),
            scaling_ratio: Some(200),
            window_clamp: Some(900),
            rcv_ssthresh: Some(0),
            sk_rcvbuf: Some(0),
            rcvq_space: Some(0),
            ..Default::default()
        };
        assert!(s.catch_up(&f).is_none(), "older than the last event");
        f.ts_ns = 3_000;
        let r = s.catch_up(&f).expect("newer: the change is reported");
        assert_eq!(r.ev.ts_ns, 3_000);
        assert_eq!(r.ev.prev_window_clamp, 1000);
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
