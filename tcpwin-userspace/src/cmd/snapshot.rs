//! One reading of the sockets of some namespaces through the iterator: facts, owners and the
//! limits of each namespace. Shared by `ss`, the lab's WAN scenarios and, next, the exporter and
//! `top`.
use anyhow::Result;
use tcpwin_common::{tcp_state, Offsets, SockRecord};
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
    let owners = owner::socket_owners();
    let wanted_inodes = match filter.pid {
        Some(pid) => Some(owner::scan(pid)?.inodes),
        None => None,
    };
    let keep = |r: &SockRecord| {
        filter.port_matches(r.lport, r.rport)
            && wanted_inodes.as_ref().is_none_or(|w| w.contains(&r.inode))
    };
    let offsets = it.offsets;
    let mut seen = read_with(&mut || it.read(), &offsets, targets, hz, &keep)?;
    for s in &mut seen {
        if let Some((pid, comm)) = s.facts.inode.and_then(|i| owners.get(&i)) {
            s.facts.pid = Some(*pid);
            s.facts.comm = Some(comm.clone());
        }
    }
    Ok(seen)
}

/// The sockets `keep` accepts among those carrying data, read by `records` inside each
/// namespace, with the namespace's limits.
pub fn read_with(
    records: &mut dyn FnMut() -> Result<Vec<SockRecord>>,
    offsets: &Offsets,
    targets: &[netns::Netns],
    hz: Option<u32>,
    keep: &dyn Fn(&SockRecord) -> bool,
) -> Result<Vec<Seen>> {
    let mut out = Vec::new();
    for ns in targets {
        let (records, host) = {
            let _inside = netns::enter(ns)?;
            (records()?, sysctl::host_limits())
        };
        let ts = monotonic_ns();
        for r in records
            .iter()
            .filter(|r| tcp_state::carries_data(r.state) && keep(r))
        {
            out.push(Seen {
                line_ns: ns.name.clone(),
                facts: SockFacts::from_record(r, offsets, hz, ts),
                host: host.clone(),
            });
        }
    }
    Ok(out)
}
