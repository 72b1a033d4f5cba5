//! The argument groups several commands share, declared once and flattened into each: which
//! sockets, the kernel side, the rate fixes are sized for, the peers, and the enums of their
//! flags. A command's own arguments live beside it.
use std::path::PathBuf;

use anyhow::{bail, Result};

use tcpwin_model::{addr::AddrPrefix, units::parse_rate, workload::Selector};

use crate::{
    gather::{scope::Scope, snapshot::SourceKind},
    kernel::{attach::Backend, btf::VMLINUX, log::LogLevel, Kernel},
};

/// Which sockets: a process, a port, network namespaces. Declared here once and flattened
/// into every command that reads sockets; `scope()` resolves it into the domain type all of
/// them use (`gather::scope::Scope`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SocketArgs {
    /// Only sockets owned by this process and the processes it forked (their fds, and children
    /// of its listeners: a forking server's workers included), read in its own network namespace
    /// unless --netns names another
    #[arg(short, long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Only connections with this local or remote port
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// Only connections with this local or remote address, or one in this network
    /// (10.0.0.5, 10.0.0.0/24, 2001:db8::/32); an IPv4 one also matches dual-stack sockets'
    /// IPv4-mapped addresses
    #[arg(long, value_name = "ADDR[/LEN]")]
    pub addr: Option<AddrPrefix>,
    /// Network namespace: a name from `ip netns list`, or `all` (every named one and every one
    /// a process lives in, looked up again as they come and go: containers live in their own);
    /// default: the caller's, or with --pid the process's
    #[arg(long, value_name = "NAME|all")]
    pub netns: Option<String>,
    /// Only sockets of the processes in this container: its name (podman, docker, a
    /// Kubernetes container by the kubelet's names) or its id or an id prefix (4 hex digits or
    /// more), read in the namespaces they live in unless --netns names another
    #[arg(long, value_name = "ID|NAME", conflicts_with_all = ["pid", "cgroup"])]
    pub container: Option<String>,
    /// Only sockets of the processes in this cgroup or under it (as /proc/PID/cgroup writes
    /// it, or under /sys/fs/cgroup: `/system.slice/nginx.service`, a pod's `kubepods…` slice)
    #[arg(long, value_name = "PATH", conflicts_with = "pid")]
    pub cgroup: Option<String>,
}

impl SocketArgs {
    /// The sockets asked for, checked (a running --pid, an existing namespace, a container or
    /// cgroup with processes).
    pub fn scope(&self) -> Result<Scope> {
        let workload = match (&self.container, &self.cgroup) {
            (Some(c), _) => Some(Selector::Container(c.clone())),
            (None, Some(p)) => Some(Selector::Cgroup(p.clone())),
            (None, None) => None,
        };
        let mut scope = Scope::new(self.pid, self.port, self.netns.as_deref(), workload)?;
        scope.addr = self.addr;
        Ok(scope)
    }
}

/// The kernel side: where its struct layouts come from, which object to load, and whether it
/// explains itself. Flattened into every command that loads programs.
#[derive(clap::Args, Debug, Clone)]
pub struct KernelArgs {
    /// Kernel BTF to resolve struct layouts from
    #[arg(long, default_value = VMLINUX, value_name = "PATH")]
    pub btf: PathBuf,
    /// Load this eBPF object instead of the one built into the binary
    #[arg(long, value_name = "PATH")]
    pub obj: Option<PathBuf>,
    /// Let the kernel side explain what it loses or skips (aya-log lines on stderr, never in
    /// the --json output): warn = losses (ring buffer or maps full, faulted reads, skipped
    /// runs), info = and members this kernel lacks, debug = and sockets filtered or passed over.
    /// Off costs nothing: the verifier removes the log code
    #[arg(long, value_enum, default_value_t = LogArg::Off, value_name = "LEVEL")]
    pub ebpf_log: LogArg,
}

impl Default for KernelArgs {
    fn default() -> Self {
        KernelArgs {
            btf: PathBuf::from(VMLINUX),
            obj: None,
            ebpf_log: LogArg::Off,
        }
    }
}

impl KernelArgs {
    /// An --obj must exist.
    pub fn validate(&self) -> Result<()> {
        if let Some(obj) = &self.obj {
            if !obj.exists() {
                bail!(
                    "--obj {}: no such file (build it with `cargo xtask build-ebpf`)",
                    obj.display()
                );
            }
        }
        Ok(())
    }

    pub fn log_level(&self) -> LogLevel {
        self.ebpf_log.into()
    }

    /// The kernel these flags name: its BTF and the object to load.
    pub fn kernel(&self) -> Kernel {
        Kernel::new(self.btf.clone(), self.obj.clone())
    }
}

/// The rate a printed fix is sized for: every command that prints verdicts takes it.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct TargetArgs {
    /// The rate fixes are sized for, e.g. the path's bottleneck (1gbit, 250mbit), at the base
    /// RTT; without it a fix says what each 100 Mbit/s needs
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub target: Option<u64>,
}

/// The other end of each connection, from another host's exporter: `ss`, `top` and the trace.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PeerArgs {
    /// The exporter of the host at the other end (`https://HOST:9943`, repeatable): at each
    /// reading it is asked for its end of each connection, and both ends are judged as one
    /// connection, as with --netns all on one host; what it cannot match or answer is said
    #[arg(long = "peer", value_name = "URL")]
    pub peers: Vec<String>,
    /// TLS and basic auth for --peer, as a Prometheus scrape job's http_config says them:
    /// `tls_config: {ca_file, server_name, insecure_skip_verify}`, `basic_auth: {username,
    /// password | password_file}`
    #[arg(long, value_name = "FILE", requires = "peers")]
    pub peer_config: Option<PathBuf>,
}

impl PeerArgs {
    /// The peers asked at each reading, checked now (a bad URL or config fails at start).
    pub fn peers(&self) -> anyhow::Result<Option<crate::gather::peer::Peers>> {
        crate::gather::peer::Peers::new(&self.peers, self.peer_config.as_deref())
    }
}

/// `--ebpf-log`
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogArg {
    #[default]
    Off,
    Warn,
    Info,
    Debug,
}

impl From<LogArg> for LogLevel {
    fn from(a: LogArg) -> LogLevel {
        match a {
            LogArg::Off => LogLevel::Off,
            LogArg::Warn => LogLevel::Warn,
            LogArg::Info => LogLevel::Info,
            LogArg::Debug => LogLevel::Debug,
        }
    }
}

/// `--backend`
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendArg {
    /// fentry/fexit, then kprobes, then tracepoints: the first the kernel accepts
    Auto,
    Fentry,
    Kprobe,
    Tracepoint,
}

impl From<BackendArg> for Backend {
    fn from(a: BackendArg) -> Backend {
        match a {
            BackendArg::Auto => Backend::Auto,
            BackendArg::Fentry => Backend::Fentry,
            BackendArg::Kprobe => Backend::Kprobe,
            BackendArg::Tracepoint => Backend::Tracepoint,
        }
    }
}

/// `--source`
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceArg {
    /// the iterator, or sock_diag where the kernel refuses it
    Auto,
    Iterator,
    SockDiag,
}

impl From<SourceArg> for SourceKind {
    fn from(a: SourceArg) -> SourceKind {
        match a {
            SourceArg::Auto => SourceKind::Auto,
            SourceArg::Iterator => SourceKind::Iterator,
            SourceArg::SockDiag => SourceKind::SockDiag,
        }
    }
}
