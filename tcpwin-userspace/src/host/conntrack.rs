//! The connection-tracking table of the calling thread's network namespace (ctnetlink, what
//! `conntrack -L` reads): each tracked TCP flow's tuple as it left and as its replies come back.
//! Where they differ, the host translated the connection (a Service's DNAT, a node port, a
//! masquerade), and the other end knows it by other addresses (`--peer` matches through it).
use std::net::IpAddr;

use anyhow::{bail, Context, Result};
use netlink_packet_core::{NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_packet_netfilter::{
    conntrack::{ConntrackAttribute, ConntrackMessage, IPTuple, ProtoTuple, Protocol, Tuple},
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
};
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr};
use tcpwin_model::peer::{Flow, FourTuple};

/// The TCP flows tracked in the calling thread's namespace, IPv4 and IPv6. A namespace that
/// tracks nothing is not dumped: a dump walks the whole host's table (262,144 buckets here,
/// 10 ms each family), and `--peer` and the exporter's `/sockets` ask at every reading.
pub fn tcp_flows() -> Result<Vec<Flow>> {
    // net sysctls answer for the namespace of whoever opens them: the calling thread's
    let count = super::sysctl::read("net.netfilter.nf_conntrack_count");
    if nothing_tracked(count.as_deref()) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for family in [NetfilterProtoFamily::IPv4, NetfilterProtoFamily::IPv6] {
        out.extend(dump(family)?);
    }
    Ok(out)
}

/// `nf_conntrack_count` says this namespace tracks no connection (no file: the table is asked,
/// which says why).
fn nothing_tracked(count: Option<&str>) -> bool {
    count.and_then(|c| c.trim().parse::<u64>().ok()) == Some(0)
}

fn dump(family: NetfilterProtoFamily) -> Result<Vec<Flow>> {
    let mut msg = NetlinkMessage::from(NetfilterMessage::new(
        NetfilterHeader::new(family, 0, 0),
        ConntrackMessage::Get(vec![]),
    ));
    msg.header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    msg.finalize();
    let mut req = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut req);
    let mut socket =
        Socket::new(NETLINK_NETFILTER).context("a netfilter netlink socket (conntrack)")?;
    socket.bind_auto().context("binding the netfilter socket")?;
    socket
        .connect(&SocketAddr::new(0, 0))
        .context("connecting the netfilter socket")?;
    socket
        .send(&req, 0)
        .context("asking for the conntrack table (needs CAP_NET_ADMIN)")?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = socket
            .recv(&mut &mut buf[..], 0)
            .context("reading the conntrack table")?;
        if n == 0 {
            break;
        }
        let mut off = 0;
        while off < n {
            let m = NetlinkMessage::<NetfilterMessage>::deserialize(&buf[off..n])
                .context("a conntrack message")?;
            let len = m.header.length as usize;
            match m.payload {
                NetlinkPayload::Done(_) => return Ok(out),
                NetlinkPayload::Error(e) => match e.code {
                    None => return Ok(out),
                    // no conntrack in this namespace (the module not loaded, nothing tracked)
                    Some(c) if matches!(-c.get(), libc::ENOENT | libc::EOPNOTSUPP) => {
                        return Ok(out)
                    }
                    Some(c) => bail!(
                        "the conntrack table: {}",
                        std::io::Error::from_raw_os_error(-c.get())
                    ),
                },
                NetlinkPayload::InnerMessage(NetfilterMessage {
                    inner: NetfilterMessageInner::Conntrack(ConntrackMessage::New(attrs)),
                    ..
                }) => out.extend(flow_of(&attrs)),
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += (len + 3) & !3;
        }
    }
    Ok(out)
}

/// A tracked flow's two tuples, when it is TCP and both are whole.
fn flow_of(attrs: &[ConntrackAttribute]) -> Option<Flow> {
    let mut orig = None;
    let mut reply = None;
    for a in attrs {
        match a {
            ConntrackAttribute::CtaTupleOrig(t) => orig = tuple_of(t),
            ConntrackAttribute::CtaTupleReply(t) => reply = tuple_of(t),
            _ => {}
        }
    }
    Some(Flow {
        orig: orig?,
        reply: reply?,
    })
}

fn tuple_of(t: &[Tuple]) -> Option<FourTuple> {
    let (mut src, mut dst, mut sport, mut dport, mut tcp) = (None, None, None, None, false);
    for x in t {
        match x {
            Tuple::Ip(ips) => {
                for ip in ips {
                    match ip {
                        IPTuple::SourceAddress(a) => src = Some(*a),
                        IPTuple::DestinationAddress(a) => dst = Some(*a),
                        _ => {}
                    }
                }
            }
            Tuple::Proto(ps) => {
                for p in ps {
                    match p {
                        ProtoTuple::Protocol(Protocol::Tcp) => tcp = true,
                        ProtoTuple::SourcePort(v) => sport = Some(*v),
                        ProtoTuple::DestinationPort(v) => dport = Some(*v),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let (src, dst): (IpAddr, IpAddr) = (src?, dst?);
    tcp.then_some((Some(src), sport?, Some(dst), dport?))
}

#[cfg(test)]
mod tests {
    use super::nothing_tracked;

    /// Only a count of none skips the dump; a count, an unreadable or a missing file ask it.
    #[test]
    fn only_an_empty_count_skips_the_dump() {
        assert!(nothing_tracked(Some("0\n")));
        assert!(!nothing_tracked(Some("3\n")));
        assert!(!nothing_tracked(Some("")));
        assert!(!nothing_tracked(None));
    }
}
