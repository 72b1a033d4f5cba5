//! Asking a peer host's exporter for its end of connections (`--peer URL`): which sockets (the
//! query, written by the asking end and parsed by the exporter), and how a peer's socket is told
//! from the asker's own in one judgement. Pure: text in, values out. The reply is JSON lines of
//! [`SsLine`](crate::schema::SsLine) with their namespace's limits (`host`).
use crate::{addr::AddrPrefix, id::SocketId};

/// The path the exporter answers on.
pub const PATH: &str = "/sockets";
/// The most sockets one answer carries; the rest are counted in [`OMITTED_HEADER`].
pub const MAX_SOCKETS: usize = 1000;
/// The answer's header saying how many matching sockets were left out.
pub const OMITTED_HEADER: &str = "tcpwin-sockets-omitted";
/// The most addresses one query names.
pub const MAX_ADDRS: usize = 16;

/// Which of the peer's sockets: those with this port at either end, and with one of these
/// addresses (or in one of these networks) at either end; nothing given, every socket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Query {
    pub port: Option<u16>,
    pub addrs: Vec<AddrPrefix>,
}

impl Query {
    /// `port=5201&addr=10.0.0.2&addr=10.0.1.0%2F24`
    pub fn to_query_string(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.port {
            parts.push(format!("port={p}"));
        }
        for a in &self.addrs {
            parts.push(format!("addr={}", a.to_string().replace('/', "%2F")));
        }
        parts.join("&")
    }

    /// The exporter's side: a query string (after `?`), or one sentence saying what is wrong.
    pub fn parse(q: &str) -> Result<Query, String> {
        let mut out = Query::default();
        for kv in q.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("`{kv}`: write port=N or addr=ADDR[/LEN]"))?;
            let v = v
                .replace("%2F", "/")
                .replace("%2f", "/")
                .replace("%3A", ":");
            match k {
                "port" => {
                    let p: u16 = v
                        .parse()
                        .map_err(|_| format!("port={v}: a port from 1 to 65535"))?;
                    if p == 0 || out.port.is_some_and(|q| q != p) {
                        return Err(format!("port={v}: one port, from 1 to 65535"));
                    }
                    out.port = Some(p);
                }
                "addr" => {
                    if out.addrs.len() >= MAX_ADDRS {
                        return Err(format!("at most {MAX_ADDRS} addr= in one query"));
                    }
                    out.addrs
                        .push(v.parse().map_err(|e| format!("addr={v}: {e}"))?);
                }
                _ => return Err(format!("`{k}`: the query takes port= and addr=")),
            }
        }
        Ok(out)
    }

    /// Whether the socket `id` is one the query asks for.
    pub fn matches(&self, id: &SocketId) -> bool {
        self.matches_tuple(id.tuple())
    }

    /// Whether a socket with this four-tuple is one the query asks for (a socket's own, or the
    /// one its other end has through a translation).
    pub fn matches_tuple(&self, (l, lp, r, rp): FourTuple) -> bool {
        let id = SocketId {
            laddr: l,
            lport: lp,
            raddr: r,
            rport: rp,
            ..SocketId::default()
        };
        self.port.is_none_or(|p| lp == p || rp == p)
            && (self.addrs.is_empty() || self.addrs.iter().any(|a| a.matches(&id)))
    }
}

/// A peer's socket cookie as the asker keeps it: the peer's own counter cannot be told from the
/// asker's, so each peer's cookies get a tag of their own in the top byte (peer `i`, from 0).
pub fn tag_cookie(cookie: u64, peer: usize) -> u64 {
    (cookie & 0x00ff_ffff_ffff_ffff) | ((0x80 | (peer as u64 & 0x7f)) << 56)
}

pub use crate::id::{other_end, FourTuple};

/// A flow the host's connection tracking holds: its tuple as it left the initiator
/// (source, source port, destination, destination port) and as the replies come back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub orig: FourTuple,
    pub reply: FourTuple,
}

impl Flow {
    /// The host changed an address or a port on the way.
    pub fn translated(&self) -> bool {
        let (s, sp, d, dp) = self.orig;
        canon(self.reply) != canon((d, dp, s, sp))
    }
}

/// IPv4-mapped IPv6 addresses as IPv4 (a dual-stack socket's form), for comparing tuples.
fn canon((a, ap, b, bp): FourTuple) -> FourTuple {
    (
        a.map(|x| x.to_canonical()),
        ap,
        b.map(|x| x.to_canonical()),
        bp,
    )
}

/// The tuple the other end of `id` has where this host's connection tracking translated the
/// connection (a Service's DNAT, a node port, a masquerade): the initiator's end knows it by
/// the flow's reply addresses, the responder's end by its original ones. None where no tracked
/// flow translated it.
pub fn other_end_through(id: &SocketId, flows: &[Flow]) -> Option<FourTuple> {
    let ours = canon(id.tuple());
    flows.iter().filter(|f| f.translated()).find_map(|f| {
        let (rs, rsp, rd, rdp) = canon(f.reply);
        if canon(f.orig) == ours {
            // we initiated: the replies come from the other end, to us as it sees us
            Some((Some(rs?), rsp, Some(rd?), rdp))
        } else if (rs, rsp, rd, rdp) == ours {
            // we answered: the other end has the tuple it sent from
            Some(canon(f.orig))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(l: &str, lp: u16, r: &str, rp: u16) -> SocketId {
        SocketId {
            laddr: Some(l.parse().unwrap()),
            lport: lp,
            raddr: Some(r.parse().unwrap()),
            rport: rp,
            ..Default::default()
        }
    }

    #[test]
    fn a_query_round_trips_and_selects() {
        let q = Query {
            port: Some(5201),
            addrs: vec!["10.0.0.2".parse().unwrap(), "10.1.0.0/16".parse().unwrap()],
        };
        let s = q.to_query_string();
        assert_eq!(s, "port=5201&addr=10.0.0.2&addr=10.1.0.0%2F16");
        assert_eq!(Query::parse(&s).unwrap(), q);
        assert!(q.matches(&id("10.0.0.1", 40000, "10.0.0.2", 5201)));
        assert!(q.matches(&id("10.1.2.3", 5201, "192.0.2.1", 1)));
        assert!(!q.matches(&id("10.0.0.1", 40000, "10.0.0.3", 5201)));
        assert!(!q.matches(&id("10.0.0.1", 40000, "10.0.0.2", 80)));
        assert!(Query::default().matches(&id("1.1.1.1", 1, "2.2.2.2", 2)));
        assert_eq!(Query::parse("").unwrap(), Query::default());
    }

    #[test]
    fn a_bad_query_is_one_sentence() {
        for (q, says) in [
            ("port=0", "from 1 to 65535"),
            ("port=99999", "from 1 to 65535"),
            ("port=1&port=2", "one port"),
            ("addr=nope", "addr=nope"),
            ("pid=1", "port= and addr="),
            ("port", "write port=N"),
        ] {
            let e = Query::parse(q).unwrap_err();
            assert!(e.contains(says), "{q}: {e}");
        }
        let many = (0..=MAX_ADDRS)
            .map(|i| format!("addr=10.0.0.{i}"))
            .collect::<Vec<_>>()
            .join("&");
        assert!(Query::parse(&many).unwrap_err().contains("at most"));
    }

    /// A client that connected to a Service's address, translated on its host (DNAT), and a
    /// server behind a node port, translated on its own (with a masquerade): each end's other
    /// end through the tracked flow; an untranslated flow names nothing.
    #[test]
    fn the_other_end_through_a_translation() {
        let t = |a: &str, ap: u16, b: &str, bp: u16| -> FourTuple {
            (Some(a.parse().unwrap()), ap, Some(b.parse().unwrap()), bp)
        };
        let dnat = Flow {
            orig: t("10.0.0.1", 40000, "10.96.0.10", 80),
            reply: t("10.244.1.5", 8080, "10.0.0.1", 40000),
        };
        assert!(dnat.translated());
        let client = id("10.0.0.1", 40000, "10.96.0.10", 80);
        assert_eq!(
            other_end_through(&client, &[dnat]),
            Some(t("10.244.1.5", 8080, "10.0.0.1", 40000))
        );
        // a dual-stack socket's mapped form is the same flow
        let mapped = id("::ffff:10.0.0.1", 40000, "::ffff:10.96.0.10", 80);
        assert!(other_end_through(&mapped, &[dnat]).is_some());
        // the server behind a node port, its host masquerading the client
        let nodeport = Flow {
            orig: t("192.0.2.7", 51000, "10.0.0.2", 30080),
            reply: t("10.244.2.9", 8080, "10.0.0.2", 62000),
        };
        let server = id("10.244.2.9", 8080, "10.0.0.2", 62000);
        assert_eq!(
            other_end_through(&server, &[nodeport]),
            Some(t("192.0.2.7", 51000, "10.0.0.2", 30080))
        );
        let plain = Flow {
            orig: t("10.0.0.1", 1, "10.0.0.2", 2),
            reply: t("10.0.0.2", 2, "10.0.0.1", 1),
        };
        assert!(!plain.translated());
        assert_eq!(
            other_end_through(&id("10.0.0.1", 1, "10.0.0.2", 2), &[plain]),
            None
        );
    }

    #[test]
    fn peers_cookies_never_meet_ours() {
        let ours = 0x1234u64;
        let a = tag_cookie(ours, 0);
        let b = tag_cookie(ours, 1);
        assert!(a != ours && b != ours && a != b);
        assert_eq!(a & 0x00ff_ffff_ffff_ffff, ours);
        assert_eq!(
            other_end(&id("10.0.0.1", 1, "10.0.0.2", 2)),
            id("10.0.0.2", 2, "10.0.0.1", 1).tuple()
        );
    }
}
