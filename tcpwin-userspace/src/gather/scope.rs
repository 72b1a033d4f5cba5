//! Which sockets a command reads: a process, a port, network namespaces. Resolved once from the
//! command line (`cli::SocketArgs`), then used alike by `ss`, `top`, `check`, the exporter and
//! the tracer: a `--pid` is read in its own namespace unless `--netns` names another, `--netns
//! all` is every namespace (listed afresh at each reading), the default the caller's.
use anyhow::{bail, Result};

use crate::host::netns::{self, Netns};

/// Where to read sockets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// the caller's own
    Own,
    /// one from `ip netns list`
    Named(String),
    /// every namespace with a name or a process, as they come and go
    All,
    /// the one a process lives in (`--pid` without `--netns`)
    OfPid(u32),
}

/// Which sockets: the domain form of `--pid`, `--port` and `--netns`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    pub pid: Option<u32>,
    pub port: Option<u16>,
    pub namespaces: Namespaces,
}

impl Default for Scope {
    fn default() -> Self {
        Scope {
            pid: None,
            port: None,
            namespaces: Namespaces::Own,
        }
    }
}

impl Scope {
    /// From the command line's words: a `--pid` must name a running process, a named namespace
    /// must exist.
    pub fn new(pid: Option<u32>, port: Option<u16>, netns: Option<&str>) -> Result<Scope> {
        if let Some(pid) = pid {
            if pid == 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                bail!("--pid {pid}: no such process (check `ps -p {pid}`)");
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
            (None, Some(pid)) => Namespaces::OfPid(pid),
            (None, None) => Namespaces::Own,
        };
        Ok(Scope {
            pid,
            port,
            namespaces,
        })
    }

    /// Either end's port matches (or no port was asked).
    pub fn port_matches(&self, lport: u16, rport: u16) -> bool {
        self.port.is_none_or(|p| lport == p || rport == p)
    }

    /// The namespaces to read now (`all` listed afresh).
    pub fn resolve(&self) -> Result<Vec<Netns>> {
        match &self.namespaces {
            Namespaces::Own => netns::resolve(None),
            Namespaces::Named(n) => netns::resolve(Some(n)),
            Namespaces::All => netns::resolve(Some("all")),
            Namespaces::OfPid(pid) => Ok(vec![netns::of_pid(*pid)?]),
        }
    }

    /// One namespace the kernel side can filter on (its inode), or None for every namespace. A
    /// `--pid` alone filters by ownership instead: a process's sockets are its own wherever they
    /// live (it may be entering its namespace as the trace starts: `ip netns exec`).
    pub fn one_namespace(&self) -> Result<Option<u32>> {
        Ok(match &self.namespaces {
            Namespaces::All | Namespaces::OfPid(_) => None,
            _ => self.resolve()?.first().map(|n| n.inode as u32),
        })
    }

    /// In words, for the line a command opens with: "sockets of pid 12 with port 80 in
    /// namespace x".
    pub fn describe(&self) -> String {
        let who = match (self.pid, self.port) {
            (Some(p), Some(port)) => format!("sockets of pid {p} with port {port}"),
            (Some(p), None) => format!("sockets of pid {p} (listeners' children included)"),
            (None, Some(port)) => format!("TCP sockets with port {port}"),
            (None, None) => "every TCP socket".into(),
        };
        let whr = match &self.namespaces {
            Namespaces::Own => "in this network namespace (--netns all: every one)".to_string(),
            Namespaces::Named(n) => format!("in network namespace {n}"),
            Namespaces::All => "in every network namespace".into(),
            Namespaces::OfPid(p) => format!("in the network namespace of pid {p}"),
        };
        format!("{who} {whr}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_is_read_in_its_own_namespace_unless_one_is_named() {
        let me = std::process::id();
        let s = Scope::new(Some(me), None, None).unwrap();
        assert_eq!(s.namespaces, Namespaces::OfPid(me));
        assert_eq!(
            Scope::new(Some(me), None, Some("all")).unwrap().namespaces,
            Namespaces::All
        );
        assert_eq!(Scope::new(None, None, None).unwrap(), Scope::default());
        let e = Scope::new(Some(u32::MAX - 1), None, None).unwrap_err();
        assert!(e.to_string().contains("no such process"), "{e}");
        let e = Scope::new(None, None, Some("no-such-ns-here")).unwrap_err();
        assert!(format!("{e:#}").contains("no-such-ns-here"), "{e:#}");
        let s = Scope {
            port: Some(80),
            ..Scope::default()
        };
        assert!(s.port_matches(80, 1) && s.port_matches(1, 80) && !s.port_matches(1, 2));
        assert!(s
            .describe()
            .starts_with("TCP sockets with port 80 in this network namespace"));
    }
}
