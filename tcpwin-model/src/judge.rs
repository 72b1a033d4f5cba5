//! The judge: one stateful place that turns readings of sockets into verdicts. Every front end
//! (`ss`, `top`, the exporter, the tracer's verdict lines, the lab) reads its sockets, hands the
//! reading here and gets one verdict per socket back: over the interval since the same socket
//! was last read, or over its life on its first reading (the verdict says which).
//!
//! Both ends of a connection in one reading (one host, or namespaces read together) are judged
//! together and get the same verdict. A socket missing from a reading has closed (or left the
//! filter): it is forgotten, and if it comes back it is judged afresh.
use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
};

use crate::{
    facts::{HostLimits, SockFacts},
    id::SocketId,
    schema::{VerdictLine, VerdictTag},
    verdict::{verdict, End, Input, Limit, Verdict},
};

type Tuple = (Option<IpAddr>, u16, Option<IpAddr>, u16);

/// A connection's four-tuple as one end sees it, IPv4-mapped addresses as IPv4 (a dual-stack
/// socket's peer may be a plain IPv4 socket).
fn tuple(id: &SocketId) -> Tuple {
    let c = |a: Option<IpAddr>| a.map(|a| a.to_canonical());
    (c(id.laddr), id.lport, c(id.raddr), id.rport)
}

fn peer_tuple(id: &SocketId) -> Tuple {
    let (l, lp, r, rp) = tuple(id);
    (r, rp, l, lp)
}

/// A socket's end of its connection as a key of 8 bytes, and its other end's: a reading counts
/// its sockets' keys in a first pass and holds only the ends whose other end is to come
/// ([`same_connection`] says whether two held ends are one connection's, whatever the keys).
pub fn end_keys(id: &SocketId) -> (u64, u64) {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let h = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
    (h.hash_one(tuple(id)), h.hash_one(peer_tuple(id)))
}

/// Whether `a` and `b` are the two ends of one connection (as [`Judge::judge`] pairs them).
pub fn same_connection(a: &SocketId, b: &SocketId) -> bool {
    tuple(a) == peer_tuple(b) && tuple(a) != tuple(b)
}

/// Verdicts over intervals: remembers each socket's last reading.
#[derive(Debug, Default)]
pub struct Judge {
    /// the rate suggestions are sized for (`--target`); None: from what the socket shows
    target_bps: Option<u64>,
    before: HashMap<u64, SockFacts>,
    /// per socket, the lowest receiver RTT estimate seen (a receiver's base RTT)
    min_rcv_rtt: HashMap<u64, u32>,
    /// whether readings are kept for the next (false: one reading only, nothing kept)
    keep: bool,
}

impl Judge {
    pub fn new(target_bps: Option<u64>) -> Judge {
        Judge {
            target_bps,
            before: HashMap::new(),
            min_rcv_rtt: HashMap::new(),
            keep: true,
        }
    }

    /// A judge of one reading: it keeps nothing for a next one (a copy of every socket's facts
    /// otherwise: `ss` without `-i` over many sockets).
    pub fn one_shot(target_bps: Option<u64>) -> Judge {
        Judge {
            keep: false,
            ..Judge::new(target_bps)
        }
    }

    /// Judges one reading of sockets, each with the limits of its namespace (in any order; the
    /// verdicts come back in the same order). Two sockets of the reading that are the two ends
    /// of one connection are judged together.
    pub fn judge<'a>(
        &mut self,
        now: impl IntoIterator<Item = (&'a SockFacts, &'a HostLimits)>,
    ) -> Vec<Verdict> {
        let now: Vec<(&SockFacts, &HostLimits)> = now.into_iter().collect();
        let mut out = Vec::with_capacity(now.len());
        let _ = self.judge_each(&now, |_, v| {
            out.push(v);
            Ok::<(), std::convert::Infallible>(())
        });
        out
    }

    /// [`Judge::judge`], handing each verdict to `each` (with its socket's index in `now`) as it
    /// is made: a caller that prints it at once never holds every verdict's text together.
    pub fn judge_each<E>(
        &mut self,
        now: &[(&SockFacts, &HostLimits)],
        mut each: impl FnMut(usize, Verdict) -> Result<(), E>,
    ) -> Result<(), E> {
        // the lowest receiver RTT each socket has shown
        let mut min_rcv_rtt = HashMap::new();
        for (f, _) in now {
            if let (Some(c), Some(r)) = (f.id.cookie, f.rcv_rtt_us.filter(|r| *r > 0)) {
                let m = self.min_rcv_rtt.get(&c).map_or(r, |m| (*m).min(r));
                min_rcv_rtt.insert(c, m);
            }
        }
        // the ends of each connection: a tuple seen once only (two namespaces with the same
        // addresses are not paired)
        let mut by_tuple: HashMap<Tuple, Vec<usize>> = HashMap::new();
        for (i, (f, _)) in now.iter().enumerate() {
            by_tuple.entry(tuple(&f.id)).or_default().push(i);
        }
        let end = |i: usize| End {
            now: now[i].0,
            before: now[i].0.id.cookie.and_then(|c| self.before.get(&c)),
            host: now[i].1,
        };
        for (i, &(f, host)) in now.iter().enumerate() {
            let peer = match by_tuple.get(&peer_tuple(&f.id)).map(Vec::as_slice) {
                Some([j]) if *j != i && by_tuple[&tuple(&f.id)].len() == 1 => Some(end(*j)),
                _ => None,
            };
            each(
                i,
                verdict(&Input {
                    now: f,
                    before: f.id.cookie.and_then(|c| self.before.get(&c)),
                    host,
                    target_bps: self.target_bps,
                    peer,
                    min_rcv_rtt_us: f.id.cookie.and_then(|c| min_rcv_rtt.get(&c).copied()),
                }),
            )?;
        }
        if self.keep {
            // the earlier readings are done with: let go before this one is kept (two readings
            // held at most, not three)
            drop(std::mem::take(&mut self.before));
            self.before = now
                .iter()
                .filter_map(|(f, _)| Some((f.id.cookie?, (*f).clone())))
                .collect();
            self.min_rcv_rtt = min_rcv_rtt;
        }
        Ok(())
    }

    /// Sockets remembered for the next interval.
    pub fn remembered(&self) -> usize {
        self.before.len()
    }
}

/// The tracer's verdict lines: one when a socket's binding limit changes, and a final one when
/// it closes or the trace ends; counts the final verdicts.
#[derive(Debug, Default)]
pub struct Changes {
    last: HashMap<u64, VerdictLine>,
    /// sockets by their final verdict
    pub finals: BTreeMap<Limit, u64>,
}

impl Changes {
    /// A socket's verdict over an interval: the line to print when its limit changed.
    pub fn observe(&mut self, f: &SockFacts, v: Verdict) -> Option<VerdictLine> {
        let cookie = f.id.cookie?;
        let line = VerdictLine {
            event: VerdictTag::Verdict,
            ts_ns: f.ts_ns,
            id: f.id.clone(),
            last: false,
            verdict: v,
        };
        let changed = self.last.get(&cookie).map(|p| p.verdict.limit) != Some(line.verdict.limit);
        self.last.insert(cookie, line.clone());
        changed.then_some(line)
    }

    /// The socket closed at `at_ns`: its last verdict, as final, stamped with the close (the
    /// lines of a trace stay in time order).
    pub fn close(&mut self, cookie: u64, at_ns: u64) -> Option<VerdictLine> {
        let mut l = self.last.remove(&cookie)?;
        l.last = true;
        l.ts_ns = l.ts_ns.max(at_ns);
        *self.finals.entry(l.verdict.limit).or_default() += 1;
        Some(l)
    }

    /// The trace ends at `at_ns`: the last verdict of every socket still open, as final.
    pub fn finish(&mut self, at_ns: u64) -> Vec<VerdictLine> {
        let mut cookies: Vec<u64> = self.last.keys().copied().collect();
        cookies.sort_unstable();
        cookies
            .into_iter()
            .filter_map(|c| self.close(c, at_ns))
            .collect()
    }

    /// Which way data flows on a socket, by its last verdict.
    pub fn side(&self, cookie: u64) -> Option<crate::verdict::Side> {
        self.last.get(&cookie).map(|l| l.verdict.side)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{schema::SocketId, verdict::Basis};

    /// One socket read, with the limits of its namespace.
    #[derive(Clone)]
    struct Reading {
        facts: SockFacts,
        host: HostLimits,
    }

    fn all(r: &[Reading]) -> impl Iterator<Item = (&SockFacts, &HostLimits)> {
        r.iter().map(|r| (&r.facts, &r.host))
    }

    fn host() -> HostLimits {
        HostLimits {
            rmem_max: Some(4 << 20),
            tcp_rmem: Some([4096, 131072, 6 << 20]),
            tcp_window_scaling: Some(true),
            tcp_moderate_rcvbuf: Some(true),
            memory_pressure: Some(false),
            ..Default::default()
        }
    }

    /// A receiver at `t` seconds that got `rx` bytes so far.
    fn rcv(cookie: u64, t: f64, rx: u64) -> Reading {
        Reading {
            facts: SockFacts {
                ts_ns: (t * 1e9) as u64,
                id: SocketId {
                    cookie: Some(cookie),
                    lport: 5201,
                    rport: 40000,
                    ..Default::default()
                },
                state: 1,
                scaling_ratio: Some(229),
                window_clamp: Some(500_000),
                rcv_ssthresh: Some(500_000),
                rcv_wnd: Some(400_000),
                sk_rcvbuf: Some(560_000),
                rcvbuf_locked: Some(false),
                wscale_ok: Some(true),
                rcv_wscale: Some(7),
                rcv_mss: Some(1448),
                advmss: Some(1448),
                unread: Some(0),
                rcv_rtt_us: Some(20_000),
                srtt_us: Some(20_000),
                bytes_received: Some(rx),
                bytes_acked: Some(1),
                ..Default::default()
            },
            host: host(),
        }
    }

    #[test]
    fn first_reading_is_over_the_life_then_intervals() {
        let mut j = Judge::new(None);
        let v = j.judge(all(&[rcv(1, 1.0, 10_000_000)]));
        assert_eq!(v[0].basis, Basis::Life);
        let v = j.judge(all(&[rcv(1, 2.0, 20_000_000)]));
        assert_eq!(v[0].basis, Basis::Interval);
        // 10 MB in a second
        assert_eq!(v[0].rate_bps, Some(80_000_000));
    }

    /// `ss` without `-i`: the same verdicts as a first reading, and nothing kept.
    #[test]
    fn a_one_shot_judge_keeps_nothing() {
        let r = [rcv(1, 1.0, 10_000_000), rcv(2, 1.0, 0)];
        let mut once = Judge::one_shot(None);
        assert_eq!(once.judge(all(&r)), Judge::new(None).judge(all(&r)));
        assert_eq!(once.remembered(), 0);
        // a second reading is judged over each socket's life again
        assert_eq!(once.judge(all(&r))[0].basis, Basis::Life);
    }

    #[test]
    fn an_interval_with_no_data_is_idle() {
        let mut j = Judge::new(None);
        j.judge(all(&[rcv(1, 1.0, 5_000)]));
        let v = j.judge(all(&[rcv(1, 2.0, 5_000)]));
        assert_eq!(v[0].limit, Limit::Idle, "{v:?}");
    }

    #[test]
    fn a_zero_window_with_unread_data_is_the_application() {
        let mut j = Judge::new(None);
        j.judge(all(&[rcv(1, 1.0, 5_000_000)]));
        let mut now = rcv(1, 2.0, 5_100_000);
        now.facts.rcv_wnd = Some(0);
        now.facts.unread = Some(560_000);
        let v = j.judge(all(&[now]));
        assert_eq!(v[0].limit, Limit::AppNotReading, "{v:?}");
    }

    #[test]
    fn a_socket_that_closes_mid_interval_is_forgotten() {
        let mut j = Judge::new(None);
        j.judge(all(&[rcv(1, 1.0, 0), rcv(2, 1.0, 0)]));
        assert_eq!(j.remembered(), 2);
        // socket 2 closed before the second reading
        let v = j.judge(all(&[rcv(1, 2.0, 1_000_000)]));
        assert_eq!(v.len(), 1);
        assert_eq!(j.remembered(), 1);
        // a socket reappearing (a reused cookie never is; a filter that let it out and in is)
        // starts afresh: over its life, not over an interval that it was not read in
        let v = j.judge(all(&[rcv(1, 3.0, 2_000_000), rcv(2, 3.0, 9_000_000)]));
        assert_eq!(v[0].basis, Basis::Interval);
        assert_eq!(v[1].basis, Basis::Life);
    }

    #[test]
    fn both_ends_in_one_reading_share_one_verdict() {
        let mut j = Judge::new(None);
        let r = |t: f64, rx: u64| rcv(1, t, rx);
        let s = |t: f64, acked: u64| {
            let mut f = rcv(2, t, 0);
            f.facts.id.lport = 40000;
            f.facts.id.rport = 5201;
            f.facts.id.laddr = Some("::ffff:10.0.0.1".parse().unwrap());
            f.facts.bytes_received = Some(0);
            f.facts.bytes_acked = Some(acked);
            f.facts.snd_wnd = Some(400_000);
            f.facts.unread = Some(0);
            f
        };
        let addrs = |mut x: Reading| {
            x.facts.id.laddr = Some("10.0.0.1".parse().unwrap());
            x.facts.id.raddr = Some("10.0.0.1".parse().unwrap());
            x
        };
        let (r1, s1) = (addrs(r(1.0, 0)), s(1.0, 0));
        j.judge(all(&[r1, s1]));
        let mut s2 = s(2.0, 10_000_000);
        s2.facts.id.raddr = Some("10.0.0.1".parse().unwrap());
        let v = j.judge(all(&[addrs(r(2.0, 10_000_000)), s2]));
        assert_eq!(v[0].limit, v[1].limit, "{v:?}");
        assert!(v[0].peer.is_some() && v[1].peer.is_some(), "{v:?}");
        assert_eq!(
            (v[0].side, v[1].side),
            (
                crate::verdict::Side::Receiving,
                crate::verdict::Side::Sending
            )
        );
    }

    #[test]
    fn changes_print_on_a_new_limit_and_once_at_close() {
        let mut j = Judge::new(None);
        let mut c = Changes::default();
        j.judge(all(&[rcv(1, 1.0, 0)]));
        let r = rcv(1, 2.0, 0);
        let v = j.judge(all(std::slice::from_ref(&r))).remove(0);
        assert!(c.observe(&r.facts, v.clone()).is_some());
        // the same limit again: nothing new to say
        assert!(c.observe(&r.facts, v).is_none());
        let f = c.close(1, 5_000_000_000).unwrap();
        assert!(f.last);
        // stamped with the close, after the interval it was judged over
        assert_eq!(f.ts_ns, 5_000_000_000);
        assert_eq!(c.finals.get(&Limit::Idle), Some(&1));
        assert!(c.close(1, 0).is_none());
        assert!(c.finish(0).is_empty());
    }
}
