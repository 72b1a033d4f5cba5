//! Which socket: the identity every per-socket line and fact carries, and how it is written.
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// A socket's (local address, local port, remote address, remote port).
pub type FourTuple = (Option<IpAddr>, u16, Option<IpAddr>, u16);

/// The tuple the other end of `id` has: the same four-tuple, reversed.
pub fn other_end(id: &SocketId) -> FourTuple {
    id.peer_tuple()
}

/// A key that must be present, whose value may be null: absent facts are `null`, and a line
/// missing the key is not this schema (so a flattened part missing all its keys is `None`).
pub fn nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// `addr:port`, IPv6 in brackets, `?` for an address not read.
pub fn endpoint(a: Option<IpAddr>, port: u16) -> String {
    match a {
        Some(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
        Some(v4) => format!("{v4}:{port}"),
        None => format!("?:{port}"),
    }
}

/// Which socket: the identity every per-socket line and fact carries (events, verdicts,
/// samples, `ss` rows, the tracer's timeline, `top`'s rows). A part a source did not read is
/// `null`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SocketId {
    /// socket cookie (`ss -e` `sk:`)
    #[serde(deserialize_with = "nullable")]
    pub cookie: Option<u64>,
    /// the network namespace's inode
    #[serde(deserialize_with = "nullable")]
    pub netns: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub laddr: Option<IpAddr>,
    pub lport: u16,
    #[serde(deserialize_with = "nullable")]
    pub raddr: Option<IpAddr>,
    pub rport: u16,
}

impl SocketId {
    /// `local -> remote` as `addr:port`.
    pub fn local(&self) -> String {
        endpoint(self.laddr, self.lport)
    }
    pub fn remote(&self) -> String {
        endpoint(self.raddr, self.rport)
    }
    /// `local <- remote` (or `->`, `<>`): the socket with the way its data flows
    /// (`verdict::Side::arrow`).
    pub fn flow(&self, arrow: &str) -> String {
        format!("{} {arrow} {}", self.local(), self.remote())
    }

    /// The other end's identity as this end sees it: the same four-tuple, reversed.
    pub fn tuple(&self) -> FourTuple {
        (self.laddr, self.lport, self.raddr, self.rport)
    }
    pub fn peer_tuple(&self) -> FourTuple {
        (self.raddr, self.rport, self.laddr, self.lport)
    }
}
