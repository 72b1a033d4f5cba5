//! Network namespaces to read sockets in: by name (`ip netns`), all of them (named ones and those
//! processes live in), or the caller's. Entering one changes only the calling thread's network
//! namespace (setns), never its mount namespace, and is undone on drop.
use std::{
    collections::BTreeMap,
    fs::File,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};

pub const NAMED: &str = "/run/netns";

/// A namespace to enter: its name for people, the file to setns to, its inode (`netns` in
/// events).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Netns {
    pub name: String,
    pub path: PathBuf,
    pub inode: u64,
}

impl Netns {
    /// How to run a command inside it from the caller's namespace; None for the caller's own.
    pub fn exec_prefix(&self) -> Option<String> {
        if self.name == "-" {
            None
        } else if let Some(pid) = self.name.strip_prefix("pid:") {
            Some(format!("nsenter -t {pid} -n"))
        } else {
            Some(format!("ip netns exec {}", self.name))
        }
    }
}

fn inode_of(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.ino())
}

/// The caller's own namespace.
pub fn own() -> Result<Netns> {
    let path = PathBuf::from("/proc/thread-self/ns/net");
    Ok(Netns {
        name: "-".into(),
        inode: inode_of(&path).context("cannot read /proc/thread-self/ns/net")?,
        path,
    })
}

/// The namespace a process lives in: the caller's own, a named one with the same inode, or
/// `pid:PID`.
pub fn of_pid(pid: u32) -> Result<Netns> {
    let path = PathBuf::from(format!("/proc/{pid}/ns/net"));
    let inode = inode_of(&path).with_context(|| {
        format!(
            "cannot read the network namespace of process {pid} ({}): is it gone?",
            path.display()
        )
    })?;
    let me = own()?;
    if me.inode == inode {
        return Ok(me);
    }
    if let Some(n) = named().into_iter().find(|n| n.inode == inode) {
        return Ok(n);
    }
    Ok(Netns {
        name: format!("pid:{pid}"),
        path,
        inode,
    })
}

/// A namespace file: `/run/netns/NAME` once `ip netns add` bound the namespace on it (nsfs).
/// Before that (a namespace being made, or a file left by one that crashed) it is an empty
/// file of mode 0 on tmpfs: not a namespace, and not one to enter.
fn is_nsfs(path: &Path) -> bool {
    use nix::sys::statfs::{statfs, NSFS_MAGIC};
    statfs(path).is_ok_and(|s| s.filesystem_type() == NSFS_MAGIC)
}

/// Named namespaces (`ip netns add`), by name.
pub fn named() -> Vec<Netns> {
    let mut v: Vec<Netns> = std::fs::read_dir(NAMED)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| is_nsfs(&e.path()))
        .filter_map(|e| {
            let path = e.path();
            Some(Netns {
                name: e.file_name().to_string_lossy().into_owned(),
                inode: inode_of(&path)?,
                path,
            })
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// `--netns`: None = the caller's, `all` = every namespace with a name or a process, else a
/// name from `ip netns list`.
pub fn resolve(arg: Option<&str>) -> Result<Vec<Netns>> {
    match arg {
        None => Ok(vec![own()?]),
        Some("all") => {
            let mut by_inode: BTreeMap<u64, Netns> = BTreeMap::new();
            let me = own()?;
            by_inode.insert(me.inode, me);
            for n in named() {
                by_inode.insert(n.inode, n);
            }
            for pid in super::owner::pids() {
                let path = PathBuf::from(format!("/proc/{pid}/ns/net"));
                if let Some(inode) = inode_of(&path) {
                    by_inode.entry(inode).or_insert(Netns {
                        name: format!("pid:{pid}"),
                        path,
                        inode,
                    });
                }
            }
            Ok(by_inode.into_values().collect())
        }
        Some(name) => {
            if name.is_empty() || name.contains('/') {
                bail!("--netns {name:?}: not a namespace name (see `ip netns list`, or use `all`)");
            }
            let path = Path::new(NAMED).join(name);
            let Some(inode) = inode_of(&path) else {
                bail!(
                    "--netns {name}: no such network namespace (see `ip netns list`, or use `all`)"
                );
            };
            Ok(vec![Netns {
                name: name.to_string(),
                path,
                inode,
            }])
        }
    }
}

/// The initial PID namespace's inode (`PROC_PID_INIT_INO`): a process in it sees every process,
/// and so every namespace a process lives in.
const HOST_PID_NS: u64 = 0xEFFF_FFFC;

/// What `--netns all` cannot see from where it runs, each in one sentence with the setting that
/// lifts it: `pid_ns` the caller's PID namespace inode, `own_mounts` whether the caller's mount
/// namespace is not the host's (PID 1's: a container's), `named` whether `/run/netns` lists any.
pub fn blind_spots(pid_ns: Option<u64>, own_mounts: bool, named: bool) -> Vec<String> {
    blind_spot_kinds(pid_ns, own_mounts, named, None)
        .into_iter()
        .filter_map(|(_, b)| b)
        .collect()
}

/// `CAP_SYS_PTRACE` in a capability set: reading other processes' fds (a socket's owner).
const CAP_SYS_PTRACE: u64 = 1 << 19;

/// The kinds of blind spot `--netns all` can have (`host_pid_namespace`, `host_run_netns`,
/// `process_owners`), each with its sentence where it is one here (the exporter's
/// `tcpwin_blind_spot{what}`); `cap_eff` the effective capabilities (None: unknown).
pub fn blind_spot_kinds(
    pid_ns: Option<u64>,
    own_mounts: bool,
    named: bool,
    cap_eff: Option<u64>,
) -> Vec<(&'static str, Option<String>)> {
    vec![
        (
            "process_owners",
            cap_eff.filter(|c| c & CAP_SYS_PTRACE == 0).map(|_| {
                "no CAP_SYS_PTRACE: other processes' file descriptors cannot be read, so their sockets have no owner, workload or container (and --pid, --container, --cgroup find none of them); add it (Kubernetes: capabilities.add: [SYS_PTRACE]; podman or docker: --cap-add SYS_PTRACE)".to_string()
            }),
        ),
        (
            "host_pid_namespace",
            pid_ns.filter(|ns| *ns != HOST_PID_NS).map(|ns| format!(
                "not in the host's PID namespace (pid:[{ns}]): the namespaces of processes outside it cannot be found, only this container's are read; run it with the host's (Kubernetes: hostPID: true; podman or docker: --pid=host)"
            )),
        ),
        (
            "host_run_netns",
            (own_mounts && !named).then(|| {
                "no /run/netns of the host here (this mount namespace is not the host's): namespaces made with `ip netns add` that no process lives in cannot be found, and the rest are named pid:N after a process that may come and go; mount the host's /run/netns (Kubernetes: a hostPath volume; podman or docker: -v /run/netns:/run/netns)".to_string()
            }),
        ),
    ]
}

/// [`blind_spots`] of this process, as it runs.
pub fn blind_spots_here() -> Vec<String> {
    blind_spot_kinds_here()
        .into_iter()
        .filter_map(|(_, b)| b)
        .collect()
}

/// [`blind_spot_kinds`] of this process, as it runs.
pub fn blind_spot_kinds_here() -> Vec<(&'static str, Option<String>)> {
    let ns = |p: &str| std::fs::metadata(p).ok().map(|m| m.ino());
    let pid_ns = ns("/proc/self/ns/pid");
    // PID 1's mount namespace is the host's when the PID namespace is (hostPID)
    let own_mounts = match (ns("/proc/self/ns/mnt"), ns("/proc/1/ns/mnt")) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    };
    let cap_eff = super::process::cap_eff();
    blind_spot_kinds(pid_ns, own_mounts, !named().is_empty(), cap_eff)
}

/// Inside a namespace until dropped.
pub struct Entered {
    /// the namespace to return to; None when the thread never left
    home: Option<File>,
}

/// Moves the calling thread into `ns` (a namespace that vanished is an error naming it).
pub fn enter(ns: &Netns) -> Result<Entered> {
    let home = File::open("/proc/thread-self/ns/net").context("opening the own namespace")?;
    // already there (the caller's own): nothing to enter, no privilege needed
    if std::fs::metadata("/proc/thread-self/ns/net")
        .map(|m| m.ino())
        .ok()
        == Some(ns.inode)
    {
        return Ok(Entered { home: None });
    }
    let target = File::open(&ns.path).with_context(|| {
        format!(
            "network namespace {} ({}) is gone",
            ns.name,
            ns.path.display()
        )
    })?;
    tcpwin_common::netns::enter_thread(&target).map_err(|e| {
        let why = match e.raw_os_error() {
            Some(libc::EINVAL) => format!(
                "{} ({}) is not a network namespace (a file no namespace is bound on)",
                ns.name,
                ns.path.display()
            ),
            _ => format!(
                "entering network namespace {} needs root (CAP_SYS_ADMIN)",
                ns.name
            ),
        };
        anyhow::Error::new(e).context(why)
    })?;
    Ok(Entered { home: Some(home) })
}

impl Drop for Entered {
    fn drop(&mut self) {
        let Some(home) = &self.home else {
            return;
        };
        if let Err(e) = tcpwin_common::netns::enter_thread(home) {
            // the thread would go on reading the wrong namespace: stop rather than mislead
            eprintln!("tcpwin-trace: cannot return to the own network namespace: {e}");
            std::process::exit(2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container without the host's PID namespace sees only its own; with it but without the
    /// host's /run/netns, namespaces no process holds are missing; on the host, nothing is.
    #[test]
    fn what_every_namespace_cannot_see_is_said() {
        assert!(blind_spots(Some(HOST_PID_NS), false, false).is_empty());
        assert!(blind_spots(Some(HOST_PID_NS), false, true).is_empty());
        let c = blind_spots(Some(4026532500), true, false);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c[0].contains("hostPID: true") && c[0].contains("pid:[4026532500]"));
        assert!(c[1].contains("-v /run/netns:/run/netns"));
        let privileged = blind_spots(Some(HOST_PID_NS), true, false);
        assert_eq!(privileged.len(), 1);
        assert!(blind_spots(Some(HOST_PID_NS), true, true).is_empty());
        // every kind named, each with its sentence where it is one
        let k = blind_spot_kinds(Some(4026532500), false, false, Some(!0));
        assert_eq!((k[0].0, k[0].1.is_some()), ("process_owners", false));
        assert_eq!(k[1].0, "host_pid_namespace");
        assert!(k[1].1.is_some());
        assert_eq!((k[2].0, k[2].1.is_some()), ("host_run_netns", false));
        // SYS_ADMIN alone (as measured in a container): no owners, said with the fix
        let k = blind_spot_kinds(Some(HOST_PID_NS), false, true, Some(1 << 21));
        assert!(k[0].1.as_deref().unwrap().contains("--cap-add SYS_PTRACE"));
    }

    /// A file under /run/netns that `ip netns add` has not bound a namespace on yet (mode 0,
    /// tmpfs) is not a namespace; the caller's own namespace file is.
    #[test]
    fn only_bound_namespace_files_are_namespaces() {
        assert!(is_nsfs(Path::new("/proc/self/ns/net")));
        let f = std::env::temp_dir().join(format!("tcpwt-notns-{}", std::process::id()));
        std::fs::write(&f, b"").unwrap();
        assert!(!is_nsfs(&f));
        let _ = std::fs::remove_file(&f);
    }

    #[test]
    fn bad_names_are_refused_with_the_fix() {
        let e = resolve(Some("no-such-ns-tcpwin")).unwrap_err().to_string();
        assert!(e.contains("ip netns list"), "{e}");
        assert!(resolve(Some("../etc")).is_err());
        assert_eq!(resolve(None).unwrap().len(), 1);
        let all = resolve(Some("all")).unwrap();
        assert!(all.iter().any(|n| n.inode == own().unwrap().inode));
    }
}
