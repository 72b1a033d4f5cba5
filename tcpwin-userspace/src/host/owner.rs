//! Which sockets belong to a PID: its socket fds (inodes) and its listeners (netns + port), read
//! from /proc and kept fresh while it runs. The kernel side also marks sockets the PID connects
//! or listens on itself (process context), so new sockets are caught before the next refresh.
use std::{
    collections::{HashMap, HashSet},
    fs,
    path::Path,
};

use anyhow::{bail, Context, Result};
use tcpwin_model::workload::{from_cgroup, Workload};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ownership {
    pub netns: u32,
    pub inodes: HashSet<u64>,
    /// local ports of the PID's listening sockets (in `netns`)
    pub listen_ports: HashSet<u16>,
}

/// `net:[4026531840]` -> 4026531840 (also `socket:[N]`).
fn bracketed(link: &str, prefix: &str) -> Option<u64> {
    link.strip_prefix(prefix)?
        .strip_prefix('[')?
        .strip_suffix(']')?
        .parse()
        .ok()
}

pub fn netns_of(pid: u32) -> Result<u32> {
    let link = fs::read_link(format!("/proc/{pid}/ns/net"))
        .with_context(|| format!("cannot read /proc/{pid}/ns/net (is the process gone?)"))?;
    bracketed(&link.to_string_lossy(), "net:")
        .map(|v| v as u32)
        .context("unexpected /proc/PID/ns/net link")
}

/// Listening sockets (state 0A) in a `/proc/net/tcp{,6}`-format table: (inode, port).
pub fn parse_listeners(table: &str) -> Vec<(u64, u16)> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 || f[3] != "0A" {
                return None;
            }
            let port = u16::from_str_radix(f[1].rsplit(':').next()?, 16).ok()?;
            Some((f[9].parse().ok()?, port))
        })
        .collect()
}

/// The socket inodes among a process's fds (empty when it cannot be read: gone, or no right).
fn socket_inodes(pid: u32) -> impl Iterator<Item = u64> {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .filter_map(|link| bracketed(&link.to_string_lossy(), "socket:"))
}

/// A socket owner: its pid, command name and workload (from `/proc/PID/cgroup`).
#[derive(Clone, Debug)]
pub struct Owner {
    pub pid: u32,
    pub comm: String,
    pub workload: Option<Workload>,
}

/// Every socket inode on the host with the process holding it (the first one found, as `ss -p`
/// shows one of them), its command name and workload.
pub fn socket_owners() -> HashMap<u64, Owner> {
    let mut owners = HashMap::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return owners;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let comm = fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim().to_string())
            .unwrap_or_default();
        let mut workload = None;
        for ino in socket_inodes(pid) {
            // read once per process, and only for one that holds a socket
            let w = workload.get_or_insert_with(|| {
                fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .ok()
                    .and_then(|t| from_cgroup(&t))
            });
            owners.entry(ino).or_insert_with(|| Owner {
                pid,
                comm: comm.clone(),
                workload: w.clone(),
            });
        }
    }
    owners
}

pub fn scan(pid: u32) -> Result<Ownership> {
    let fd_dir = format!("/proc/{pid}/fd");
    if !Path::new(&format!("/proc/{pid}")).exists() {
        bail!("process {pid} does not exist (any more)");
    }
    let mut own = Ownership {
        netns: netns_of(pid)?,
        ..Default::default()
    };
    fs::read_dir(&fd_dir).with_context(|| {
        format!("cannot list {fd_dir}: reading another process's fds needs root (CAP_SYS_PTRACE)")
    })?;
    own.inodes.extend(socket_inodes(pid));
    for table in ["tcp", "tcp6"] {
        if let Ok(text) = fs::read_to_string(format!("/proc/{pid}/net/{table}")) {
            for (ino, port) in parse_listeners(&text) {
                if own.inodes.contains(&ino) {
                    own.listen_ports.insert(port);
                }
            }
        }
    }
    Ok(own)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn parses_proc_net_tcp() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:1451 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 12346 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(parse_listeners(t), vec![(12345, 0x1451)]);
    }

    /// Ground truth: a listener this test opens must show up with its port.
    #[test]
    fn finds_own_listener() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let own = scan(std::process::id()).unwrap();
        assert!(own.listen_ports.contains(&port), "{own:?}");
        assert!(!own.inodes.is_empty());
        assert_eq!(own.netns, netns_of(1).unwrap_or(own.netns));
    }

    #[test]
    fn owners_include_this_process() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let own = scan(std::process::id()).unwrap();
        let all = socket_owners();
        // sockets other tests (running in parallel) close between the two scans are left out;
        // the listener held here is in both
        let both: Vec<_> = own.inodes.iter().filter(|i| all.contains_key(i)).collect();
        assert!(!both.is_empty(), "{own:?}");
        assert!(both
            .iter()
            .all(|i| all.get(i).map(|o| o.pid) == Some(std::process::id())));
        // its workload, as this process's own cgroup file says it
        let mine = fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|t| from_cgroup(&t));
        assert!(both
            .iter()
            .all(|i| all.get(i).map(|o| o.workload.clone()) == Some(mine.clone())));
        drop(l);
    }

    #[test]
    fn missing_process_is_a_clear_error() {
        let e = scan(u32::MAX - 7).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
    }
}
