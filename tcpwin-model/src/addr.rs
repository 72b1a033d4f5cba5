//! An address or a network (`--addr`), matched against either end of a connection, as the
//! kernel side compares them.
use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    str::FromStr,
};

use crate::id::SocketId;

/// `--addr ADDR[/LEN]`: an address or a network, matched against either end of a connection,
/// as tcpdump's `host`/`net`. An IPv4 one also matches a dual-stack socket's IPv4-mapped IPv6
/// address (`[::ffff:10.0.0.1]`), which is how such a socket's peer is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrPrefix {
    /// the network: bits past `len` are zero
    pub addr: IpAddr,
    pub len: u8,
}

impl FromStr for AddrPrefix {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let a = a.trim_start_matches('[').trim_end_matches(']');
        let addr: IpAddr = a.parse().map_err(|_| {
            format!("{s:?} is not an address or a network (10.0.0.5, 10.0.0.0/24, 2001:db8::/32)")
        })?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| format!("{s:?}: the prefix length is 0 to {max}"))?,
        };
        // a mapped address (or a network within ::ffff:0:0/96) is the IPv4 one: the filter then
        // matches both forms
        let (addr, len) = match addr {
            IpAddr::V6(v6) if len >= 96 => v6
                .to_ipv4_mapped()
                .map_or((addr, len), |v4| (IpAddr::V4(v4), len - 96)),
            a => (a, len),
        };
        Ok(AddrPrefix {
            addr: network(addr, len),
            len,
        })
    }
}

impl From<IpAddr> for AddrPrefix {
    /// The one address (an IPv4-mapped IPv6 address as the IPv4 one, as a parsed one is).
    fn from(a: IpAddr) -> Self {
        match a {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => AddrPrefix {
                    addr: IpAddr::V4(v4),
                    len: 32,
                },
                None => AddrPrefix { addr: a, len: 128 },
            },
            IpAddr::V4(_) => AddrPrefix { addr: a, len: 32 },
        }
    }
}

impl std::fmt::Display for AddrPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let max = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.len == max {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.len)
        }
    }
}

/// `a` with the bits past `len` cleared.
fn network(a: IpAddr, len: u8) -> IpAddr {
    match a {
        IpAddr::V4(v4) => {
            let mask = u32::MAX.checked_shl(32 - len as u32).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX.checked_shl(128 - len as u32).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}

impl AddrPrefix {
    /// `a` is in this network: an IPv4 network holds IPv4 addresses and their IPv4-mapped IPv6
    /// form, an IPv6 one IPv6 addresses as written (as the kernel side compares them).
    pub fn contains(&self, a: IpAddr) -> bool {
        let a = match (self.addr, a) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => return false,
            },
            (IpAddr::V6(_), IpAddr::V4(_)) => return false,
            _ => a,
        };
        network(a, self.len) == self.addr
    }

    /// Either end's address is in this network (an end not read does not match).
    pub fn matches(&self, id: &SocketId) -> bool {
        [id.laddr, id.raddr]
            .into_iter()
            .flatten()
            .any(|a| self.contains(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_or_a_network_matches_either_end() {
        let p = |s: &str| s.parse::<AddrPrefix>().unwrap();
        let id = |l: &str, r: &str| SocketId {
            laddr: Some(l.parse().unwrap()),
            raddr: Some(r.parse().unwrap()),
            ..Default::default()
        };
        let c = id("10.0.0.1", "192.168.7.9");
        assert!(p("10.0.0.1").matches(&c) && p("192.168.7.9").matches(&c));
        assert!(p("192.168.0.0/16").matches(&c) && p("0.0.0.0/0").matches(&c));
        assert!(!p("192.168.8.0/24").matches(&c) && !p("10.0.0.2").matches(&c));
        // bits past the length are the network's: 192.168.7.1/24 is 192.168.7.0/24
        assert_eq!(p("192.168.7.1/24"), p("192.168.7.0/24"));
        assert_eq!(p("192.168.7.1/24").to_string(), "192.168.7.0/24");
        assert_eq!(p("10.0.0.1").to_string(), "10.0.0.1");
        // a dual-stack socket writes an IPv4 peer mapped: both forms match it, either way
        let mapped = id("::ffff:127.0.0.1", "::ffff:10.1.2.3");
        assert!(p("10.1.2.3").matches(&mapped) && p("10.1.0.0/16").matches(&mapped));
        assert_eq!(p("::ffff:10.1.2.3"), p("10.1.2.3"));
        assert_eq!(p("::ffff:10.1.0.0/112"), p("10.1.0.0/16"));
        assert_eq!(p("::ffff:0:0/96"), p("0.0.0.0/0"));
        assert!(p("[::ffff:10.1.2.3]").matches(&mapped));
        // IPv6 networks match IPv6 ends only; ::/0 is not every IPv4 socket
        let v6 = id("2001:db8::1", "2001:db8:1::5");
        assert!(p("2001:db8::/32").matches(&v6) && p("[2001:db8:1::5]").matches(&v6));
        assert!(!p("2001:db8::/48").matches(&id("2001:db8:2::1", "2001:db8:3::1")));
        assert!(!p("::/0").matches(&c) && !p("10.0.0.0/8").matches(&v6));
        // an IPv6 network holds a dual-stack socket's mapped addresses as written
        assert!(p("::/0").matches(&mapped) && p("::ffff:0:0/95").matches(&mapped));
        // an end not read matches nothing
        assert!(!p("0.0.0.0/0").matches(&SocketId::default()));
        for bad in ["10.0.0", "10.0.0.1/33", "::1/129", "host", "10.0.0.1/x", ""] {
            let e = bad.parse::<AddrPrefix>().unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }
}
