//! Which sockets belong to a PID: its socket fds (inodes) and its listeners (netns + port), read
//! from /proc (through `procfs`) and kept fresh while it runs. The kernel side also marks sockets the PID connects
//! or listens on itself (process context), so new sockets are caught before the next refresh.
use std::{
    collections::{HashMap, HashSet},
    fs,
    path::Path,
};

use anyhow::{bail, Context, Result};
use procfs::{
    net::{TcpNetEntry, TcpState},
    process::{FDTarget, MountInfo, Process, Stat},
};
use tcpwin_model::workload::{from_cgroup, Names, Selector, Workload};

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Ownership {
    pub netns: u32,
    pub inodes: HashSet<u64>,
    /// local ports of the PID's listening sockets (in `netns`)
    pub listen_ports: HashSet<u16>,
    /// a workload's cgroups (their ids, cgroup v2 inode numbers): the kernel side marks the
    /// sockets a process in one of them connects or listens on, before the next refresh
    pub cgroups: HashSet<u64>,
    /// a `--pid`'s process tree (the PID and every process forked from it): the kernel side
    /// marks their connects and listens, and follows their forks
    pub processes: HashSet<u64>,
}

/// A process's cgroup id from its `/proc/PID/cgroup` text (cgroup v2: the inode of its
/// directory under the v2 mount `mount`, what `bpf_get_current_cgroup_id` returns); None where
/// it is not readable from here (a cgroup namespace of our own shows other processes' paths as
/// `/..`).
fn cgroup_id(cgroup: &str, mount: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(format!("{mount}{}", cgroup2_path(cgroup)?))
        .ok()
        .map(|m| m.ino())
}

/// The cgroup v2 path in a `/proc/PID/cgroup` text (its `0::` line), without a trailing `/`;
/// None without one, or where a cgroup namespace of our own shows it as `/..`.
fn cgroup2_path(text: &str) -> Option<&str> {
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    (!path.starts_with("/..")).then(|| path.trim_end_matches('/'))
}

/// Where the cgroup v2 hierarchy is mounted, whole: `/sys/fs/cgroup` on a unified host,
/// `/sys/fs/cgroup/unified` on a hybrid one (v1 controllers beside it); None without one. Read
/// once: a trace's owner scan asks every 100 ms.
pub fn cgroup2_mount() -> Option<&'static str> {
    static MOUNT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    MOUNT
        .get_or_init(|| cgroup2_mount_in(Process::myself().ok()?.mountinfo().ok()?.iter()))
        .as_deref()
}

/// [`cgroup2_mount`] from a mount table: a `cgroup2` mount of the hierarchy's root.
fn cgroup2_mount_in<'a>(mut mounts: impl Iterator<Item = &'a MountInfo>) -> Option<String> {
    mounts
        .find(|m| m.fs_type == "cgroup2" && m.root == "/")
        .map(|m| m.mount_point.display().to_string())
}

/// The process `pid` as /proc shows it (None: gone).
fn process(pid: u32) -> Option<Process> {
    Process::new(i32::try_from(pid).ok()?).ok()
}

/// The inode of `pid`'s network namespace (`/proc/PID/ns/net`).
pub fn netns_of(pid: u32) -> Result<u32> {
    use std::os::unix::fs::MetadataExt;
    let path = format!("/proc/{pid}/ns/net");
    let ns = fs::metadata(&path)
        .with_context(|| format!("cannot read {path} (is the process gone?)"))?;
    Ok(ns.ino() as u32)
}

/// Listening sockets in a TCP table (`/proc/PID/net/tcp{,6}`): (inode, port).
pub fn listeners<'a>(table: impl IntoIterator<Item = &'a TcpNetEntry>) -> Vec<(u64, u16)> {
    table
        .into_iter()
        .filter(|e| e.state == TcpState::Listen)
        .map(|e| (e.inode, e.local_address.port()))
        .collect()
}

/// The socket inodes among a process's fds (empty when it cannot be read: gone, or no right).
fn socket_inodes(pid: u32) -> impl Iterator<Item = u64> {
    process(pid)
        .and_then(|p| p.fd().ok())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| match fd.target {
            FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
}

/// A socket owner: its pid, command name and workload (from `/proc/PID/cgroup`).
#[derive(Clone, Debug)]
pub struct Owner {
    pub pid: u32,
    pub comm: String,
    pub workload: Option<Workload>,
}

/// A process's workload, from its cgroup and the runtimes' names.
fn workload_of(pid: u32, names: &HashMap<String, Names>) -> Option<Workload> {
    workload_in(
        &fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?,
        names,
    )
}

/// [`workload_of`] from a `/proc/PID/cgroup` text already read.
fn workload_in(cgroup: &str, names: &HashMap<String, Names>) -> Option<Workload> {
    let mut w = from_cgroup(cgroup)?;
    w.name_with(names);
    Some(w)
}

/// Every running process's pid (the numbered entries of /proc: a listing, without opening each
/// process as `procfs::process::all_processes` does, on a path a trace walks every 100 ms).
pub(super) fn pids() -> impl Iterator<Item = u32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|p| p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
}

/// A process's `/proc/PID/stat`, parsed by procfs (None: gone).
fn stat_of(pid: u32) -> Option<Stat> {
    <Stat as procfs::FromRead>::from_file(format!("/proc/{pid}/stat")).ok()
}

/// The processes in the workloads `sel` selects (a container's, a cgroup's and those under it).
pub fn members(sel: &Selector) -> Vec<u32> {
    member_cgroups(sel).into_iter().map(|(p, _)| p).collect()
}

/// [`members`], each with its `/proc/PID/cgroup` text (read once per process and tick).
fn member_cgroups(sel: &Selector) -> Vec<(u32, String)> {
    let names = if sel.needs_names() {
        super::containers::names()
    } else {
        HashMap::new()
    };
    pids()
        .filter_map(|p| Some((p, fs::read_to_string(format!("/proc/{p}/cgroup")).ok()?)))
        .filter(|(_, text)| workload_in(text, &names).is_some_and(|w| sel.holds(&w)))
        .collect()
}

/// Workloads by process, for a trace's events: read once per process from its cgroup, the
/// runtimes' names read again (at most once a second) when a container has none yet.
#[derive(Default)]
pub struct WorkloadCache {
    by_pid: HashMap<u32, Option<Workload>>,
    names: HashMap<String, Names>,
    names_read: Option<std::time::Instant>,
}

impl WorkloadCache {
    /// Processes kept at most: a long trace of short-lived processes starts afresh past it.
    const MAX: usize = 4096;

    pub fn of(&mut self, pid: u32) -> Option<Workload> {
        if let Some(w) = self.by_pid.get(&pid) {
            return w.clone();
        }
        let mut w = workload_of(pid, &self.names);
        if let Some(w) = w.as_mut().filter(|w| w.container_id.is_some()) {
            let stale = self
                .names_read
                .is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1));
            if w.name.is_none() && stale {
                self.names = super::containers::names();
                self.names_read = Some(std::time::Instant::now());
                w.name_with(&self.names);
            }
        }
        if self.by_pid.len() >= Self::MAX {
            self.by_pid.clear();
        }
        self.by_pid.insert(pid, w.clone());
        w
    }
}

/// Whose sockets a command reads: a process and the processes it forked, or every process of
/// a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owners {
    Pid(u32),
    Workload(Selector),
}

impl Owners {
    /// Why a command watching them stops: `process 12 exited` (gone, or exited and not yet
    /// reaped), `no process runs in container web any more`; None while they run.
    pub fn ended(&self) -> Option<String> {
        match self {
            Owners::Pid(p) => has_ended(*p).then(|| format!("process {p} exited")),
            Owners::Workload(w) => members(w)
                .is_empty()
                .then(|| format!("no process runs in {} any more", w.describe())),
        }
    }

    /// Their sockets now: every fd of theirs, and their listeners (in the namespace of the
    /// process, or of the workload's first process).
    pub fn scan(&self) -> Result<Ownership> {
        match self {
            Owners::Pid(pid) => scan(*pid),
            Owners::Workload(sel) => {
                // every member holds its own fds (its forked children are members too); the
                // listeners are those of the first member this caller can read (a process may
                // end meanwhile, or be beyond reach: PID 1 of a sandbox)
                let with_cgroups = member_cgroups(sel);
                let m: Vec<u32> = with_cgroups.iter().map(|(p, _)| *p).collect();
                let mut own = m
                    .iter()
                    .find_map(|p| scan_held(*p, &m).ok())
                    .with_context(|| format!("--{}: no process runs in it now", sel.describe()))?;
                if let Some(mount) = cgroup2_mount() {
                    own.cgroups = with_cgroups
                        .iter()
                        .filter_map(|(_, text)| cgroup_id(text, mount))
                        .collect();
                }
                Ok(own)
            }
        }
    }
}

/// Every socket inode on the host with the process holding it (the first one found, as `ss -p`
/// shows one of them), its command name and workload.
pub fn socket_owners() -> HashMap<u64, Owner> {
    let mut owners = HashMap::new();
    let names = super::containers::names();
    for pid in pids() {
        let comm = fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim().to_string())
            .unwrap_or_default();
        let mut workload = None;
        for ino in socket_inodes(pid) {
            // read once per process, and only for one that holds a socket
            let w = workload.get_or_insert_with(|| workload_of(pid, &names));
            owners.entry(ino).or_insert_with(|| Owner {
                pid,
                comm: comm.clone(),
                workload: w.clone(),
            });
        }
    }
    owners
}

/// A process's `/proc/PID/stat` that says it has exited: a zombie its parent has not reaped yet
/// (`Z`), or one being torn down (`X`).
fn exited(stat: &Stat) -> bool {
    matches!(stat.state, 'Z' | 'X' | 'x')
}

/// Whether `pid` has ended: gone from /proc, or exited and not yet reaped by its parent (its
/// sockets and namespaces went with it: only its exit status is left). A thread-group leader that
/// exited while its other threads run is a zombie too, but its process still runs.
pub fn has_ended(pid: u32) -> bool {
    let Some(stat) = stat_of(pid) else {
        return true;
    };
    exited(&stat)
        && fs::read_dir(format!("/proc/{pid}/task")).map_or(true, |threads| threads.count() <= 1)
}

/// `pid` and every process forked from it, at any depth (a server's workers and the children
/// that hold its accepted connections): from each process's parent in `/proc/*/stat`.
pub fn process_tree(pid: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for child in pids() {
        if let Some(parent) = stat_of(child).and_then(|s| u32::try_from(s.ppid).ok()) {
            children.entry(parent).or_default().push(child);
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        if let Some(c) = children.get(&tree[i]) {
            tree.extend(c.iter().filter(|c| **c != pid));
        }
        i += 1;
    }
    tree
}

/// The sockets of `pid`'s process tree: every fd of it and of its descendants (a forking server's
/// children hold the connections its listener accepted), and its listeners in `pid`'s namespace.
pub fn scan(pid: u32) -> Result<Ownership> {
    let tree = process_tree(pid);
    let mut own = scan_held(pid, &tree)?;
    own.processes = tree.into_iter().map(u64::from).collect();
    Ok(own)
}

/// The sockets `holders` hold, and `pid`'s listeners among them in `pid`'s namespace.
fn scan_held(pid: u32, holders: &[u32]) -> Result<Ownership> {
    let fd_dir = format!("/proc/{pid}/fd");
    if !Path::new(&format!("/proc/{pid}")).exists() {
        bail!("process {pid} does not exist (any more)");
    }
    if has_ended(pid) {
        bail!("process {pid} has exited (its parent has not reaped it yet): it holds no sockets");
    }
    let mut own = Ownership {
        netns: netns_of(pid)?,
        ..Default::default()
    };
    fs::read_dir(&fd_dir).with_context(|| {
        format!("cannot list {fd_dir}: reading another process's fds needs root (CAP_SYS_PTRACE)")
    })?;
    for p in holders {
        own.inodes.extend(socket_inodes(*p));
    }
    if let Some(p) = process(pid) {
        for table in [p.tcp(), p.tcp6()].into_iter().flatten() {
            for (ino, port) in listeners(&table) {
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
    fn finds_the_cgroup2_mount_unified_or_hybrid() {
        let mount_of = |text: &str| {
            let m = <procfs::process::MountInfos as procfs::FromRead>::from_read(text.as_bytes())
                .unwrap();
            cgroup2_mount_in(m.iter())
        };
        let unified = "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(mount_of(unified).as_deref(), Some("/sys/fs/cgroup"));
        let hybrid = "33 23 0:29 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n34 33 0:30 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(mount_of(hybrid).as_deref(), Some("/sys/fs/cgroup/unified"));
        // a container's view of its own subtree only is no root of the hierarchy
        let inner = "50 40 0:26 /libpod_parent/libpod-1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        assert_eq!(mount_of(inner), None);
        assert_eq!(mount_of(""), None);
    }

    /// The v2 line of a hybrid host's file among the v1 controllers', the root, and a path a
    /// cgroup namespace of our own hides.
    #[test]
    fn reads_the_cgroup2_path() {
        let hybrid = "12:memory:/machine.slice/libpod-1.scope\n1:name=systemd:/machine.slice/libpod-1.scope\n0::/machine.slice/libpod-1.scope/\n";
        assert_eq!(cgroup2_path(hybrid), Some("/machine.slice/libpod-1.scope"));
        assert_eq!(cgroup2_path("0::/\n"), Some(""));
        assert_eq!(cgroup2_path("0::/../../user.slice\n"), None);
        assert_eq!(cgroup2_path("4:cpu:/x\n"), None);
        // this process's own id is its directory's inode under the mount
        let mine = fs::read_to_string("/proc/self/cgroup").unwrap();
        if let (Some(mount), Some(path)) = (cgroup2_mount(), cgroup2_path(&mine)) {
            use std::os::unix::fs::MetadataExt;
            let dir = format!("{mount}{path}");
            assert_eq!(
                cgroup_id(&mine, mount),
                Some(fs::metadata(dir).unwrap().ino())
            );
        }
    }

    #[test]
    fn parses_proc_net_tcp() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n   1: 0100007F:1451 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 12346 1 0000000000000000 100 0 0 10 0\n";
        let table = <procfs::net::TcpNetEntries as procfs::FromReadSI>::from_read(
            t.as_bytes(),
            procfs::current_system_info(),
        )
        .unwrap();
        assert_eq!(listeners(&table.0), vec![(12345, 0x1451)]);
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

    /// A process that has exited and is not yet reaped is ended (its namespaces went with it),
    /// one asleep or running is not, whatever its name says.
    #[test]
    fn an_unreaped_process_has_ended() {
        // a stat line as the kernel writes it (52 fields), its command name with spaces and
        // parentheses
        let stat = |comm: &str, state: char| {
            let line = format!("42 ({comm}) {state} 7 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 300 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
            <Stat as procfs::FromRead>::from_read(line.as_bytes()).unwrap()
        };
        assert!(exited(&stat("iperf3", 'Z')));
        assert!(exited(&stat("a", 'X')));
        assert!(!exited(&stat("a ) Z", 'S')));
        assert!(!exited(&stat("nginx", 'R')));
        assert_eq!(stat("a (b) c", 'S').ppid, 7);
        // a child this process has not waited for yet
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !has_ended(pid) {
            assert!(std::time::Instant::now() < deadline, "{pid} never ended");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "reaped too soon"
        );
        child.wait().unwrap();
        assert!(has_ended(pid));
        assert!(!has_ended(std::process::id()));
    }

    /// A child forked by this process (a shell that forks a sleep) is in its tree, and holds
    /// a socket inherited from it: the tree's sockets include that one's fds.
    #[test]
    fn the_process_tree_holds_forked_children() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let me = std::process::id();
        let mut found = Vec::new();
        for _ in 0..50 {
            found = process_tree(me);
            if found.len() >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found[0], me);
        assert!(found.contains(&child.id()), "{found:?}");
        // the shell's own child (the sleep), a grandchild of this process
        assert!(found.len() >= 3, "{found:?}");
    }

    #[test]
    fn missing_process_is_a_clear_error() {
        let e = scan(u32::MAX - 7).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
    }

    // /proc's lines under generated input (the gate runs these with overflow checks on): an
    // answer or nothing, never a panic
    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 512,
            failure_persistence: None,
            ..Default::default()
        })]

        #[test]
        fn fuzz_cgroup_path(text in "(.{0,100}\n){0,5}") {
            let _ = cgroup2_path(&text);
        }
    }
}
