//! Which sockets a command reads and shows, the one type every flag that says so lands in: a
//! process, a port, an address, network namespaces (resolved once from the command line's
//! `cmd::args::SocketArgs`, then used alike by `ss`, `top`, `check`, the exporter and the
//! tracer), and what `ss` shows of the sockets it judged (a state, the window-bound, the active,
//! source and destination ports). From it come the kernel side's filter (`kernel_filter`) and
//! what is printed (`keeps`). A `--pid` is read in its own namespace unless `--netns` names
//! another, `--netns all` is every namespace (listed afresh at each reading), the default the
//! caller's.
use std::net::IpAddr;

use anyhow::{bail, Result};
use tcpwin_common::Config;
use tcpwin_model::{
    addr::AddrPrefix, facts::state_name, id::SocketId, schema::SsLine, verdict::Limit,
    workload::Selector,
};

use crate::host::{
    netns::{self, Netns},
    owner::{self, Owners},
};

/// Where to read sockets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// the caller's own
    Own,
    /// one from `ip netns list`
    Named(String),
    /// every namespace with a name or a process, as they come and go
    All,
    /// those the owners live in (`--pid`, `--container`, `--cgroup` without `--netns`): a
    /// process's own, or a workload's processes' (looked up at each reading)
    OfOwners,
}

/// The process or workload a command watches has ended: why it stops, not a fault (`ss -i`,
/// `top` and the trace end on it with exit status 0 and say it).
#[derive(Debug)]
pub struct Ended(pub String);

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Ended {}

/// Why a command stops, when `e` is that its owners ended.
pub fn ended(e: &anyhow::Error) -> Option<&str> {
    e.downcast_ref::<Ended>().map(|x| x.0.as_str())
}

/// Which sockets: the domain form of `--pid`, `--container`, `--cgroup`, `--port`, `--addr` and
/// `--netns`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    /// whose sockets: a process tree (`--pid`) or a workload's processes (`--container`,
    /// `--cgroup`); None: anyone's
    pub owners: Option<Owners>,
    pub port: Option<u16>,
    /// `--addr`: either end's address in this network
    pub addr: Option<AddrPrefix>,
    pub namespaces: Namespaces,
    /// `ss --state`: a state as `ss` names it, lower case (`established`, `fin-wait-1`, ...)
    pub state: Option<String>,
    /// `ss --limited`: only sockets whose window is what binds them (a window cap, the peer's
    /// window, or a window closed by an application that does not read)
    pub limited: bool,
    /// `ss --active`: only sockets that moved data (or have data waiting) over the interval
    pub active: bool,
    /// `ss --sport`, `--dport`: this end's port, the other end's
    pub sport: Option<u16>,
    pub dport: Option<u16>,
}

impl Default for Scope {
    fn default() -> Self {
        Scope {
            owners: None,
            port: None,
            addr: None,
            namespaces: Namespaces::Own,
            state: None,
            limited: false,
            active: false,
            sport: None,
            dport: None,
        }
    }
}

/// The states `ss --state` accepts.
pub const STATES: [&str; 9] = [
    "established",
    "syn-sent",
    "syn-recv",
    "fin-wait-1",
    "fin-wait-2",
    "time-wait",
    "close-wait",
    "last-ack",
    "closing",
];

impl Scope {
    /// From the command line's words: a `--pid` must name a running process, a named namespace
    /// must exist.
    pub fn new(
        pid: Option<u32>,
        port: Option<u16>,
        netns: Option<&str>,
        workload: Option<Selector>,
    ) -> Result<Scope> {
        if let Some(pid) = pid {
            if pid == 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                bail!("--pid {pid}: no such process (check `ps -p {pid}`)");
            }
            if owner::has_ended(pid) {
                bail!("--pid {pid}: the process has exited (its parent has not reaped it yet): it holds no sockets");
            }
        }
        if let Some(w) = &workload {
            if pid.is_some() {
                bail!(
                    "--pid and --{} both name whose sockets to read: give one",
                    w.describe()
                );
            }
            if owner::members(w).is_empty() {
                bail!(
                    "--{}: no process of this host runs in it (`podman ps`, `docker ps` or `crictl ps` list the running containers; /proc/PID/cgroup names a process's cgroup){}",
                    w.describe(),
                    if crate::kernel::object::check_privileges().is_err() {
                        "; without root other users' processes cannot be read"
                    } else {
                        ""
                    }
                );
            }
        }
        let namespaces = match (netns, pid) {
            (Some("all"), _) => {
                // never a silent empty node: what every namespace cannot include, said once
                for b in netns::blind_spots_here() {
                    eprintln!("tcpwin-trace: --netns all: {b}");
                }
                Namespaces::All
            }
            (Some(name), _) => {
                // refused now, in one sentence, rather than at the first reading
                netns::resolve(Some(name))?;
                Namespaces::Named(name.to_string())
            }
            (None, Some(_)) => Namespaces::OfOwners,
            (None, None) if workload.is_some() => Namespaces::OfOwners,
            (None, None) => Namespaces::Own,
        };
        let owners = match (workload, pid) {
            (Some(w), _) => Some(Owners::Workload(w)),
            (None, Some(p)) => Some(Owners::Pid(p)),
            (None, None) => None,
        };
        Ok(Scope {
            owners,
            port,
            addr: None,
            namespaces,
            ..Scope::default()
        })
    }

    /// The process `--pid` names.
    pub fn pid(&self) -> Option<u32> {
        match self.owners {
            Some(Owners::Pid(p)) => Some(p),
            _ => None,
        }
    }

    /// The kernel side's owner filter: the process whose connect()/listen() it marks itself,
    /// `u32::MAX` (no process: a workload's sockets are known from /proc only) for a container
    /// or cgroup, None for every socket.
    pub fn filter_pid(&self) -> Option<u32> {
        match self.owners {
            Some(Owners::Workload(_)) => Some(u32::MAX),
            Some(Owners::Pid(p)) => Some(p),
            None => None,
        }
    }

    /// Whose sockets, where the command was told: a process tree or a workload's processes.
    pub fn owners(&self) -> Option<Owners> {
        self.owners.clone()
    }

    /// An error of a reading, told as [`Ended`] where the owners it reads have ended since.
    pub fn why_failed(&self, e: anyhow::Error) -> anyhow::Error {
        match self.owners().and_then(|o| o.ended()) {
            Some(why) => Ended(why).into(),
            None => e,
        }
    }

    /// What the kernel side filters on: the process (`--pid`, or a workload's), the port, the
    /// address and the one namespace.
    pub fn kernel_filter(&self) -> Result<Config> {
        let c = Config::filter(self.filter_pid(), self.port, self.one_namespace()?);
        Ok(match self.addr {
            None => c,
            Some(AddrPrefix {
                addr: IpAddr::V4(v4),
                len,
            }) => {
                let mut o = [0u8; 16];
                o[..4].copy_from_slice(&v4.octets());
                c.with_addr(true, o, len)
            }
            Some(AddrPrefix {
                addr: IpAddr::V6(v6),
                len,
            }) => c.with_addr(false, v6.octets(), len),
        })
    }

    /// Either end's port matches (or no port was asked).
    pub fn port_matches(&self, lport: u16, rport: u16) -> bool {
        self.port.is_none_or(|p| lport == p || rport == p)
    }

    /// What `ss` prints of a socket it judged (both ends of a connection are judged together,
    /// then each line is kept or not): its state, whether its window binds, whether it is
    /// active, its ports.
    pub fn keeps(&self, l: &SsLine) -> bool {
        let f = &l.facts;
        let v = &l.verdict;
        let state_ok = self.state.as_deref().is_none_or(|s| {
            state_name(f.state).eq_ignore_ascii_case(if s == "established" { "estab" } else { s })
        });
        let limited_ok = !self.limited || v.limit.window_bound();
        let active_ok = !self.active || !matches!(v.limit, Limit::Idle | Limit::Unknown);
        state_ok
            && limited_ok
            && active_ok
            && self.sport.is_none_or(|p| f.id.lport == p)
            && self.dport.is_none_or(|p| f.id.rport == p)
    }

    /// The connection passes `--port` and `--addr` (either end each).
    pub fn matches(&self, id: &SocketId) -> bool {
        self.port_matches(id.lport, id.rport) && self.addr.is_none_or(|a| a.matches(id))
    }

    /// The namespaces to read now (`all` listed afresh).
    pub fn resolve(&self) -> Result<Vec<Netns>> {
        match &self.namespaces {
            Namespaces::Own => netns::resolve(None),
            Namespaces::Named(n) => netns::resolve(Some(n)),
            Namespaces::All => netns::resolve(Some("all")),
            Namespaces::OfOwners => match &self.owners {
                Some(Owners::Pid(pid)) => Ok(vec![netns::of_pid(*pid)?]),
                Some(Owners::Workload(w)) => {
                    let mut out: Vec<Netns> = Vec::new();
                    for p in owner::members(w) {
                        // a process that ended since the listing has no namespace to read
                        if let Ok(n) = netns::of_pid(p) {
                            if out.iter().all(|o| o.inode != n.inode) {
                                out.push(n);
                            }
                        }
                    }
                    if out.is_empty() {
                        bail!("--{}: no process runs in it any more", w.describe());
                    }
                    Ok(out)
                }
                None => netns::resolve(None),
            },
        }
    }

    /// One namespace the kernel side can filter on (its inode), or None for every namespace. A
    /// `--pid` alone filters by ownership instead: a process's sockets are its own wherever they
    /// live (it may be entering its namespace as the trace starts: `ip netns exec`).
    pub fn one_namespace(&self) -> Result<Option<u32>> {
        Ok(match &self.namespaces {
            Namespaces::All | Namespaces::OfOwners => None,
            _ => self.resolve()?.first().map(|n| n.inode as u32),
        })
    }

    /// In words, for the line a command opens with: "sockets of pid 12 with port 80 in
    /// namespace x".
    pub fn describe(&self) -> String {
        let who = match (self.pid(), self.port) {
            (Some(p), Some(port)) => format!("sockets of pid {p} with port {port}"),
            (Some(p), None) => format!("sockets of pid {p} (and the processes it forked)"),
            (None, Some(port)) => format!("TCP sockets with port {port}"),
            (None, None) => "every TCP socket".into(),
        };
        let who = match &self.owners {
            Some(Owners::Workload(w)) => match self.port {
                Some(port) => format!("sockets of {} with port {port}", w.describe()),
                None => format!("sockets of {}", w.describe()),
            },
            _ => who,
        };
        let who = match self.addr {
            Some(a) => format!("{who} to or from {a}"),
            None => who,
        };
        let whr = match &self.namespaces {
            Namespaces::Own => "in this network namespace (--netns all: every one)".to_string(),
            Namespaces::Named(n) => format!("in network namespace {n}"),
            Namespaces::All => "in every network namespace".into(),
            Namespaces::OfOwners => match &self.owners {
                Some(Owners::Pid(p)) => format!("in the network namespace of pid {p}"),
                _ => "in the network namespaces its processes live in".into(),
            },
        };
        format!("{who} {whr}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_model::{
        facts::SockFacts,
        verdict::{Side, Verdict},
    };

    #[test]
    fn a_pid_is_read_in_its_own_namespace_unless_one_is_named() {
        let me = std::process::id();
        let s = Scope::new(Some(me), None, None, None).unwrap();
        assert_eq!(s.namespaces, Namespaces::OfOwners);
        assert_eq!(s.owners(), Some(Owners::Pid(me)));
        assert!(s
            .describe()
            .ends_with(&format!("in the network namespace of pid {me}")));
        assert_eq!(
            Scope::new(Some(me), None, Some("all"), None)
                .unwrap()
                .namespaces,
            Namespaces::All
        );
        assert_eq!(
            Scope::new(None, None, None, None).unwrap(),
            Scope::default()
        );
        let e = Scope::new(Some(u32::MAX - 1), None, None, None).unwrap_err();
        assert!(e.to_string().contains("no such process"), "{e}");
        let e = Scope::new(None, None, Some("no-such-ns-here"), None).unwrap_err();
        assert!(format!("{e:#}").contains("no-such-ns-here"), "{e:#}");
        let s = Scope {
            port: Some(80),
            ..Scope::default()
        };
        assert!(s.port_matches(80, 1) && s.port_matches(1, 80) && !s.port_matches(1, 2));
        assert!(s
            .describe()
            .starts_with("TCP sockets with port 80 in this network namespace"));
        // --port and --addr together: both, each at either end
        let s = Scope {
            addr: Some("10.0.0.0/8".parse().unwrap()),
            ..s
        };
        let id = |l: &str, lport, r: &str, rport| SocketId {
            laddr: Some(l.parse().unwrap()),
            lport,
            raddr: Some(r.parse().unwrap()),
            rport,
            ..Default::default()
        };
        assert!(s.matches(&id("192.168.0.1", 80, "10.1.1.1", 5000)));
        assert!(s.matches(&id("10.1.1.1", 5000, "192.168.0.1", 80)));
        assert!(!s.matches(&id("192.168.0.1", 80, "11.1.1.1", 5000)));
        assert!(!s.matches(&id("192.168.0.1", 81, "10.1.1.1", 5000)));
        assert!(
            s.describe().contains("port 80 to or from 10.0.0.0/8"),
            "{}",
            s.describe()
        );
        let c = s.kernel_filter().unwrap();
        assert_eq!((c.port, c.addr_family), (80, 4));
        assert_eq!(c.addr[0], u32::from_ne_bytes([10, 0, 0, 0]));
    }

    /// `--cgroup` of this test's own cgroup reads the namespaces its processes live in and
    /// selects this process; a container no process runs in is refused in one sentence.
    #[test]
    fn a_workload_is_read_where_its_processes_live() {
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let mine = tcpwin_model::workload::from_cgroup(&text).unwrap().cgroup;
        let sel = Selector::Cgroup(mine.clone());
        let s = Scope::new(None, None, None, Some(sel.clone())).unwrap();
        assert_eq!(s.namespaces, Namespaces::OfOwners);
        assert_eq!(s.owners(), Some(Owners::Workload(sel.clone())));
        assert_eq!(s.filter_pid(), Some(u32::MAX));
        assert!(owner::members(&sel).contains(&std::process::id()));
        let here = netns::of_pid(std::process::id()).unwrap();
        assert!(s.resolve().unwrap().iter().any(|n| n.inode == here.inode));
        assert!(s
            .describe()
            .starts_with(&format!("sockets of cgroup {mine}")));
        let e = Scope::new(
            None,
            None,
            None,
            Some(Selector::Container("no-such-container-here".into())),
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "--container no-such-container-here: no process of this host runs in it"
            ),
            "{e}"
        );
        let e = Scope::new(Some(std::process::id()), None, None, Some(sel)).unwrap_err();
        assert!(e.to_string().contains("give one"), "{e}");
    }

    fn line(state: u8, lport: u16, rport: u16, limit: Limit) -> SsLine {
        SsLine {
            host: None,
            other_end: None,
            source: "iterator".into(),
            netns_name: "-".into(),
            state_name: state_name(state).into(),
            facts: SockFacts {
                id: SocketId {
                    lport,
                    rport,
                    ..Default::default()
                },
                state,
                ..Default::default()
            },
            verdict: Verdict {
                limit,
                ..Verdict::unknown(Side::Receiving)
            },
        }
    }

    #[test]
    fn filters_as_ss_users_expect() {
        let all = [
            line(1, 5201, 40000, Limit::AutotuneMax),
            line(1, 22, 50000, Limit::Idle),
            line(8, 80, 41000, Limit::NotWindowLimited),
            line(1, 40001, 443, Limit::AppNotReading),
        ];
        let kept = |s: Scope| -> Vec<u16> {
            all.iter()
                .filter(|l| s.keeps(l))
                .map(|l| l.facts.id.lport)
                .collect()
        };
        assert_eq!(kept(Scope::default()).len(), 4);
        assert_eq!(
            kept(Scope {
                limited: true,
                ..Default::default()
            }),
            vec![5201, 40001]
        );
        assert_eq!(
            kept(Scope {
                active: true,
                ..Default::default()
            }),
            vec![5201, 80, 40001]
        );
        assert_eq!(
            kept(Scope {
                state: Some("close-wait".into()),
                ..Default::default()
            }),
            vec![80]
        );
        assert_eq!(
            kept(Scope {
                state: Some("established".into()),
                dport: Some(443),
                ..Default::default()
            }),
            vec![40001]
        );
        assert_eq!(
            kept(Scope {
                sport: Some(22),
                ..Default::default()
            }),
            vec![22]
        );
        // every state accepted is one `ss` prints
        for s in STATES {
            assert!((1..=11).any(|n| {
                let name = state_name(n).to_ascii_lowercase();
                name == s || (s == "established" && name == "estab")
            }));
        }
    }
}
