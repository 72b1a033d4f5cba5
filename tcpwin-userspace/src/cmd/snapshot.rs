//! One reading of the sockets of some namespaces through the iterator: facts, owners and the
//! limits of each namespace. Shared by `ss`, the lab's WAN scenarios and, next, the exporter and
//! `top`.
use anyhow::Result;
use tcpwin_common::tcp_state;
use tcpwin_model::facts::{HostLimits, SockFacts};

use crate::{
    cli::SocketFilter,
    host::{monotonic_ns, netns, owner, sysctl},
    kernel::iter::SocketIter,
};

/// One socket read, with the limits of its namespace.
pub struct Seen {
    /// the namespace's name
    pub line_ns: String,
    pub facts: SockFacts,
    pub host: HostLimits,
}

/// Reads every namespace asked once: the sockets that pass the filters, with their owners.
pub fn read(
    it: &mut SocketIter,
    targets: &[netns::Netns],
    filter: &SocketFilter,
    hz: Option<u32>,
) -> Result<Vec<Seen>> {
    let mut out = Vec::new();
    let owners = owner::socket_owners();
    let wanted_inodes = match filter.pid {
        Some(pid) => Some(owner::scan(pid)?.inodes),
        None => None,
    };
    for ns in targets {
        let (records, host) = {
            let _inside = netns::enter(ns)?;
            (it.read()?, sysctl::host_limits())
        };
        let ts = monotonic_ns();
        for r in &records {
            if !tcp_state::carries_data(r.state) {
                continue;
            }
            if !filter.port_matches(r.lport, r.rport) {
                continue;
            }
            if let Some(w) = &wanted_inodes {
                if !w.contains(&r.inode) {
                    continue;
                }
            }
            let mut facts = SockFacts::from_record(r, &it.offsets, hz, ts);
            if let Some((pid, comm)) = facts.inode.and_then(|i| owners.get(&i)) {
                facts.pid = Some(*pid);
                facts.comm = Some(comm.clone());
            }
            out.push(Seen {
                line_ns: ns.name.clone(),
                facts,
                host: host.clone(),
            });
        }
    }
    Ok(out)
}
