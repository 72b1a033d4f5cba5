//! The routes of the calling thread's network namespace, through rtnetlink: the main table's
//! unicast routes with what identifies each to `ip route change` and their `window` metric (a
//! clamp on every connection through the route, set with `ip route ... window N`).
use std::net::IpAddr;

use anyhow::{Context, Result};
use futures_util::TryStreamExt;
use rtnetlink::packet_route::{
    route::{RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteMetric, RouteType},
    AddressFamily,
};
use tcpwin_model::facts::Route;

fn addr(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// One route message as a [`Route`] (None: not a unicast route of the main table).
fn route(m: &RouteMessage, names: &dyn Fn(u32) -> Option<String>) -> Option<Route> {
    let mut table = m.header.table as u32;
    let (mut dst, mut dev, mut via, mut src, mut metric, mut window) =
        (None, None, None, None, None, None);
    for a in &m.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(d) => dst = addr(d),
            RouteAttribute::Gateway(g) => via = addr(g),
            RouteAttribute::PrefSource(p) => src = addr(p),
            RouteAttribute::Oif(i) => dev = names(*i),
            RouteAttribute::Priority(p) => metric = Some(*p),
            RouteAttribute::Metrics(ms) => {
                window = ms.iter().find_map(|x| match x {
                    RouteMetric::Window(w) => Some(*w),
                    _ => None,
                })
            }
            _ => {}
        }
    }
    if table != RouteHeader::RT_TABLE_MAIN as u32 || m.header.kind != RouteType::Unicast {
        return None;
    }
    let dst = dst.unwrap_or(match m.header.address_family {
        AddressFamily::Inet6 => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        _ => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    });
    Some(Route {
        dst,
        len: m.header.destination_prefix_length,
        dev,
        via,
        src,
        metric,
        window,
    })
}

/// The main table's unicast routes, IPv4 and IPv6; `names` gives an interface's name by index.
/// Callable from inside a runtime too (see `netlink::exchange`).
pub fn routes(names: &(dyn Fn(u32) -> Option<String> + Sync)) -> Result<Vec<Route>> {
    super::netlink::exchange(|| async {
        let (conn, handle, _) = rtnetlink::new_connection().context("rtnetlink socket")?;
        tokio::spawn(conn);
        let mut out = Vec::new();
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let mut m = RouteMessage::default();
            m.header.address_family = family;
            let mut s = handle.route().get(m).execute();
            while let Some(msg) = s.try_next().await.context("listing routes")? {
                out.extend(route(&msg, names));
            }
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ground truth: the loopback namespace of the test has at least its connected routes, each
    /// with the name of an interface sysfs lists.
    #[test]
    fn routes_name_their_interfaces() {
        let ifaces = super::super::netdev::interfaces().unwrap();
        let names = |i: u32| {
            ifaces
                .iter()
                .find(|x| x.index == Some(i))
                .map(|x| x.name.clone())
        };
        let rs = routes(&names).unwrap();
        for r in rs.iter().filter_map(|r| r.dev.as_ref()) {
            assert!(
                std::path::Path::new("/sys/class/net").join(r).exists(),
                "{r}: {rs:?}"
            );
        }
    }
}
