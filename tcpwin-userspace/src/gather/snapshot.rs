//! One reading of the sockets of some namespaces: facts, owners and the limits of each
//! namespace, from the socket iterator or, where it is refused, from sock_diag. Shared by `ss`,
//! the lab's WAN scenarios and the tracer's verdicts.

use anyhow::Result;
use tcpwin_common::{tcp_state, Offsets, SockRecord};
use tcpwin_model::facts::{HostLimits, SockFacts};

use crate::{
    gather::scope::{Namespaces, Scope},
    host::{
        monotonic_ns, netdev, netns, owner, route,
        sockdiag::{self, MISSING},
        sysctl,
    },
    kernel::{
        iter::{Counting, SocketIter},
        Kernel,
    },
};

/// Which source to read sockets from (`ss --source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// the iterator, or sock_diag where the kernel refuses it (said)
    Auto,
    Iterator,
    SockDiag,
}

/// Where socket facts come from.
pub enum Source {
    /// the BPF socket iterator: every fact
    Iterator(Box<SocketIter>),
    /// sock_diag: no scaling_ratio, window_clamp or rcvbuf lock (see `sockdiag::MISSING`)
    SockDiag,
}

impl Source {
    /// Opens the source asked; with `auto` an iterator the kernel refuses falls back to
    /// sock_diag and says which facts are then missing (a missing privilege is an error: the fix
    /// is to run as root, not to read less).
    pub fn open(arg: SourceKind, kernel: &Kernel) -> Result<Source> {
        if arg != SourceKind::SockDiag {
            crate::kernel::object::check_privileges()
                .map_err(|e| anyhow::anyhow!("{e:#} (or read less with --source sock-diag)"))?;
        }
        match arg {
            SourceKind::SockDiag => Ok(Source::SockDiag),
            SourceKind::Iterator => Ok(Source::Iterator(Box::new(SocketIter::load(kernel)?))),
            SourceKind::Auto => match SocketIter::load(kernel) {
                Ok(it) => Ok(Source::Iterator(Box::new(it))),
                Err(e) => {
                    eprintln!(
                        "tcpwin-trace: the socket iterator is unavailable ({e:#}); reading sock_diag instead: {} are null",
                        MISSING.join(", ")
                    );
                    Ok(Source::SockDiag)
                }
            },
        }
    }

    /// The exporter's source: the iterator with the counters asked for attached. Without
    /// the per-packet histogram, a kernel that refuses them falls back to sock_diag (then
    /// without counters, and said so); the histogram asked for and refused is an error.
    pub fn open_counting(kernel: &Kernel, c: &Counting) -> Result<Source> {
        crate::kernel::object::check_privileges()?;
        match SocketIter::load_with(kernel, c) {
            Ok(it) => Ok(Source::Iterator(Box::new(it))),
            Err(e) if c.packets => Err(e.context(
                "--packet-histogram needs the eBPF socket iterator and the tcp_probe hook",
            )),
            Err(e) => {
                eprintln!(
                    "tcpwin-trace: the socket iterator or the kernel counters are unavailable ({e:#}); reading sock_diag instead: {} are null and connections are not counted",
                    MISSING.join(", ")
                );
                Ok(Source::SockDiag)
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Source::Iterator(_) => "iterator",
            Source::SockDiag => "sock_diag",
        }
    }

    /// The sockets of the calling thread's namespace, each handed to `each` as it is made
    /// into facts, with the iterator's record it was made from (none held here: a reading keeps
    /// only the sockets its caller keeps).
    fn read_each(&mut self, hz: Option<u32>, each: &mut Each) -> Result<()> {
        let ts = monotonic_ns();
        match self {
            Source::Iterator(it) => {
                let o = it.offsets;
                it.read_each(&mut |r| each(SockFacts::from_record(&r, &o, hz, ts), Some(&r)))?;
            }
            Source::SockDiag => sockdiag::dump(ts)?.into_iter().for_each(|f| each(f, None)),
        }
        Ok(())
    }

    /// The layout the iterator's records are read with (None from sock_diag).
    pub fn offsets(&self) -> Option<Offsets> {
        match self {
            Source::Iterator(it) => Some(it.offsets),
            Source::SockDiag => None,
        }
    }
}

/// A reading of the calling thread's namespace that hands each socket's facts to its sink.
pub type ReadEach<'a> = dyn FnMut(&mut dyn FnMut(SockFacts)) -> Result<()> + 'a;

/// A socket's facts with the iterator's record they were made from (None from sock_diag).
type Each<'a> = dyn FnMut(SockFacts, Option<&SockRecord>) + 'a;
/// [`Each`] with the namespace's limits.
pub type SeenEach<'a> = dyn FnMut(Seen, Option<&SockRecord>) + 'a;

/// Iterator records as facts, read at `ts_ns`, each handed to `each`.
pub fn record_facts(
    records: impl IntoIterator<Item = SockRecord>,
    offsets: &Offsets,
    hz: Option<u32>,
    ts_ns: u64,
    each: &mut dyn FnMut(SockFacts),
) {
    for r in records {
        each(SockFacts::from_record(&r, offsets, hz, ts_ns));
    }
}

/// One socket read, with the limits of its namespace (the model's).
pub use tcpwin_model::facts::Seen;

/// Reads every namespace asked once: the sockets that pass the filters.
pub fn read(
    src: &mut Source,
    targets: &[netns::Netns],
    filter: &Scope,
    hz: Option<u32>,
) -> Result<Vec<Seen>> {
    let mut out = Vec::new();
    read_each(src, targets, filter, hz, &mut |s, _| out.push(s))?;
    Ok(out)
}

/// [`read`], each socket handed to `sink` as it is read (none held here).
fn read_each(
    src: &mut Source,
    targets: &[netns::Netns],
    filter: &Scope,
    hz: Option<u32>,
    sink: &mut SeenEach,
) -> Result<()> {
    let wanted_inodes = match filter.owners() {
        Some(o) => Some(o.scan()?.inodes),
        None => None,
    };
    let keep = |f: &SockFacts| {
        filter.matches(&f.id)
            && wanted_inodes
                .as_ref()
                .is_none_or(|w| f.inode.is_some_and(|i| w.contains(&i)))
    };
    read_with_each(&mut |each| src.read_each(hz, each), targets, &keep, sink)
}

/// The namespaces a repeated reading covers (`ss -i`, `top`, the exporter). `--netns all` is
/// listed afresh at each reading, since namespaces come and go (containers, test harnesses);
/// one that disappears between the listing and its reading is skipped and counted in `gone`. A
/// namespace named on the command line, or a process's, that disappears is an error: what was
/// asked for is gone.
pub struct Rereading {
    pub scope: Scope,
    /// namespaces of an `all` listing that were gone when read
    pub gone: u64,
}

impl Rereading {
    pub fn new(scope: Scope) -> Self {
        Rereading { scope, gone: 0 }
    }

    /// One reading of every namespace covered now; an [`Ended`](crate::gather::scope::Ended)
    /// error where the process or workload read has ended.
    pub fn read(&mut self, src: &mut Source, hz: Option<u32>) -> Result<Vec<Seen>> {
        let mut out = Vec::new();
        self.read_each(src, hz, &mut |s, _| out.push(s))?;
        Ok(out)
    }

    /// [`Rereading::read`], each socket handed to `sink` as it is read, with the iterator's
    /// record it was made from: a caller that judges and prints them as they come holds none of
    /// them (and one that must hold a few can hold the record: a third of the facts' size).
    pub fn read_each(
        &mut self,
        src: &mut Source,
        hz: Option<u32>,
        sink: &mut SeenEach,
    ) -> Result<()> {
        self.read_covered(src, hz, sink)
            .map_err(|e| self.scope.why_failed(e))
    }

    fn read_covered(
        &mut self,
        src: &mut Source,
        hz: Option<u32>,
        sink: &mut SeenEach,
    ) -> Result<()> {
        let now = self.scope.resolve()?;
        if self.scope.namespaces != Namespaces::All {
            return read_each(src, &now, &self.scope, hz, sink);
        }
        for t in now {
            match read_each(src, std::slice::from_ref(&t), &self.scope, hz, sink) {
                Ok(()) => {}
                Err(_) if !t.path.exists() => self.gone += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Sockets held for a while, by a key (`ss` holds a connection's first end until its other
/// end is read): each as the iterator's record (248 bytes) where it came from one, made into
/// facts again when taken, else as its facts (500 bytes); what a namespace's sockets share (its
/// name, limits, the reading's clock) is kept once.
pub struct Holder {
    offsets: Option<Offsets>,
    hz: Option<u32>,
    owners: Option<std::collections::HashMap<u64, owner::Owner>>,
    /// each namespace's name, limits and reading time
    namespaces: Vec<(String, std::sync::Arc<HostLimits>, u64)>,
    held: std::collections::HashMap<u64, Held>,
}

enum Held {
    /// the record and the index of its namespace in `namespaces`
    Record(Box<(SockRecord, usize)>),
    Seen(Box<Seen>),
}

impl Holder {
    /// Holds sockets read from `src`, their owners named from `owners` when taken again.
    pub fn new(
        src: &Source,
        hz: Option<u32>,
        owners: Option<std::collections::HashMap<u64, owner::Owner>>,
    ) -> Holder {
        Holder {
            offsets: src.offsets(),
            hz,
            owners,
            namespaces: Vec::new(),
            held: Default::default(),
        }
    }

    pub fn hold(&mut self, key: u64, s: Seen, record: Option<&SockRecord>) {
        let held = match record.filter(|_| self.offsets.is_some()) {
            Some(r) => {
                let same = |n: &(String, std::sync::Arc<HostLimits>, u64)| {
                    n.0 == s.line_ns
                        && std::sync::Arc::ptr_eq(&n.1, &s.host)
                        && n.2 == s.facts.ts_ns
                };
                let ns = match self.namespaces.iter().rposition(same) {
                    Some(i) => i,
                    None => {
                        self.namespaces.push((s.line_ns, s.host, s.facts.ts_ns));
                        self.namespaces.len() - 1
                    }
                };
                Held::Record(Box::new((*r, ns)))
            }
            None => Held::Seen(Box::new(s)),
        };
        self.held.insert(key, held);
    }

    /// The socket held under `key`, as it was read (the same record, offsets, clock rate and
    /// owners), or None.
    pub fn take(&mut self, key: u64) -> Result<Option<Seen>> {
        self.held.remove(&key).map(|h| self.seen(h)).transpose()
    }

    /// Every socket still held.
    pub fn drain(mut self) -> Result<Vec<Seen>> {
        let held = std::mem::take(&mut self.held);
        held.into_values().map(|h| self.seen(h)).collect()
    }

    pub fn owners(&self) -> Option<&std::collections::HashMap<u64, owner::Owner>> {
        self.owners.as_ref()
    }

    fn seen(&self, h: Held) -> Result<Seen> {
        let (r, ns) = match h {
            Held::Seen(s) => return Ok(*s),
            Held::Record(r) => *r,
        };
        let (Some(o), Some((line_ns, host, ts_ns))) = (&self.offsets, self.namespaces.get(ns))
        else {
            anyhow::bail!("a socket's record was held without the layout to read it");
        };
        let mut facts = SockFacts::from_record(&r, o, self.hz, *ts_ns);
        if let Some(ow) = &self.owners {
            add_owner(&mut facts, ow);
        }
        Ok(Seen {
            line_ns: line_ns.clone(),
            facts,
            host: host.clone(),
        })
    }
}

/// Names each socket's owner (pid, comm, workload) from /proc: a scan of every process's fds,
/// so only for those who show it.
pub fn add_owners(seen: &mut [Seen]) {
    let owners = owner::socket_owners();
    for s in seen {
        add_owner(&mut s.facts, &owners);
    }
}

/// One socket's owner from a scan of every process's fds (`owner::socket_owners`).
pub fn add_owner(f: &mut SockFacts, owners: &std::collections::HashMap<u64, owner::Owner>) {
    if let Some(o) = f.inode.and_then(|i| owners.get(&i)) {
        f.pid = Some(o.pid);
        f.comm = Some(o.comm.clone());
        f.workload = o.workload.clone().map(Box::new);
    }
}

/// The limits of the namespace the calling thread is in: its sysctls, and where its sockets'
/// packets go (routes, interfaces: a route's window metric, the interface's GRO). A namespace
/// whose netlink cannot be read has them absent, said once.
pub fn namespace_limits() -> HostLimits {
    let mut h = sysctl::host_limits();
    match netdev::interfaces() {
        Ok(ifaces) => {
            let names = |i: u32| {
                ifaces
                    .iter()
                    .find(|x| x.index == Some(i))
                    .map(|x| x.name.clone())
            };
            h.routes = route::routes(&names).unwrap_or_default();
            h.ifaces = ifaces;
        }
        Err(e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                eprintln!("tcpwin-trace: interfaces and routes unknown ({e:#}): a route's window metric and GRO are not read")
            });
        }
    }
    h
}

/// The sockets `keep` accepts among those carrying data, read by `facts` inside each namespace,
/// with the namespace's limits.
pub fn read_with(
    facts: &mut ReadEach,
    targets: &[netns::Netns],
    keep: &dyn Fn(&SockFacts) -> bool,
) -> Result<Vec<Seen>> {
    let mut out = Vec::new();
    let mut each = |e: &mut Each| facts(&mut |f| e(f, None));
    read_with_each(&mut each, targets, keep, &mut |s, _| out.push(s))?;
    Ok(out)
}

/// [`read_with`], each socket kept handed to `sink` with the record it was made from.
fn read_with_each(
    facts: &mut dyn FnMut(&mut Each) -> Result<()>,
    targets: &[netns::Netns],
    keep: &dyn Fn(&SockFacts) -> bool,
    sink: &mut SeenEach,
) -> Result<()> {
    for ns in targets {
        let _inside = netns::enter(ns)?;
        let mut host = namespace_limits();
        host.run_in = ns.exec_prefix();
        let host = std::sync::Arc::new(host);
        // each socket kept as it is read: the namespace's sockets are never held twice (as
        // facts, then as what is kept)
        facts(&mut |f, record| {
            if tcp_state::carries_data(f.state) && keep(&f) {
                let seen = Seen {
                    line_ns: ns.name.clone(),
                    facts: f,
                    host: host.clone(),
                };
                sink(seen, record);
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An end held as its record comes back as the facts it was read as (the same record,
    /// offsets, clock rate and reading time), its namespace's name and limits with it; one kept
    /// copy of what the namespace's sockets share, whatever the number held.
    #[test]
    fn a_held_record_comes_back_as_the_facts_it_was_read_as() {
        let mut o = Offsets::absent();
        o.tp_window_clamp = 1676;
        o.tp_rcv_nxt = 1;
        o.tp_copied_seq = 2;
        let host = std::sync::Arc::new(HostLimits::default());
        let mut holder = Holder {
            offsets: Some(o),
            hz: Some(250),
            owners: None,
            namespaces: Vec::new(),
            held: Default::default(),
        };
        let mut want = Vec::new();
        for port in 1..=3u16 {
            let r = SockRecord {
                window_clamp: 663552 + port as u32,
                rcv_nxt: 5,
                copied_seq: 2,
                lport: port,
                family: tcpwin_common::AF_INET,
                ..Default::default()
            };
            let seen = Seen {
                line_ns: "tw-a".into(),
                facts: SockFacts::from_record(&r, &o, Some(250), 7),
                host: host.clone(),
            };
            want.push(seen.facts.clone());
            holder.hold(port as u64, seen, Some(&r));
        }
        assert_eq!(holder.namespaces.len(), 1);
        let back = holder.take(2).unwrap().expect("held");
        assert_eq!(back.facts, want[1]);
        assert_eq!(back.line_ns, "tw-a");
        assert!(std::sync::Arc::ptr_eq(&back.host, &host));
        assert!(holder.take(2).unwrap().is_none());
        let mut rest: Vec<SockFacts> = holder
            .drain()
            .unwrap()
            .into_iter()
            .map(|s| s.facts)
            .collect();
        rest.sort_by_key(|f| f.id.lport);
        assert_eq!(rest, vec![want[0].clone(), want[2].clone()]);
    }
}
