//! Command line: every command's arguments (clap definitions) and the checks clap cannot
//! express. The one owner of argument types: commands and the layers below read them from here;
//! this module imports nothing above the kernel layer's enums.
use std::{net::SocketAddr, path::PathBuf};

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};

use tcpwin_model::{
    check::{parse_bdp, Bdp},
    select::AddrPrefix,
    units::{parse_path, parse_rate, PathSpec},
    workload::Selector,
};

use crate::{
    gather::{scope::Scope, snapshot::SourceKind},
    kernel::{attach::Backend, btf::VMLINUX, log::LogLevel, Kernel},
};

#[derive(Parser, Debug)]
#[command(
    name = "tcpwin-trace",
    version,
    about = "Trace the TCP receive-window machinery per socket: scaling_ratio, window_clamp, rcv_ssthresh, initial window",
    after_help = "Examples:\n  sudo tcpwin-trace --pid 1234          watch a process's sockets (and its forked workers')\n  sudo tcpwin-trace --port 5201 --json  JSON lines for one port\n  sudo tcpwin-trace ss -i 1000          every socket each second, with the limit that binds its window\n  sudo tcpwin-trace top                 live terminal view: rate, window, ratio, verdict, sparklines\n  sudo tcpwin-trace record -o a.jsonl   keep a trace; then: tcpwin-trace report a.jsonl [b.jsonl] --svg ab.svg\n  sudo tcpwin-trace exporter            Prometheus metrics on 127.0.0.1:9943/metrics\n  tcpwin-trace check --bdp 1gbit:18ms   does that BDP fit on this host? (exit 0/1/3)\n  sudo tcpwin-trace lab --scenario all  the articles' slow transfers, reproduced and judged\n  sudo tcpwin-trace demo                self-contained demo in two network namespaces"
)]
pub struct Cli {
    #[command(flatten)]
    pub trace: TraceArgs,
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
}

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

#[derive(clap::Args, Debug, Clone)]
pub struct TraceArgs {
    #[command(flatten)]
    pub sockets: SocketArgs,
    /// Which kernel hooks to use; auto tries fentry, then kprobe, then tracepoint
    #[arg(long, value_enum, default_value_t = BackendArg::Auto)]
    pub backend: BackendArg,
    /// Stop after this many seconds (default: until Ctrl-C / SIGTERM)
    #[arg(short, long, value_name = "SECS", value_parser = parse_duration)]
    pub duration: Option<f64>,
    /// JSON lines on stdout (one object per event, then a summary object)
    #[arg(long)]
    pub json: bool,
    /// No live lines, only the summary
    #[arg(short, long)]
    pub quiet: bool,
    /// Verdicts in full: every number, why, the fix, the factors beside (default: one short
    /// line each: the limit, rate, window, RTT and the fix)
    #[arg(short, long)]
    pub extended: bool,
    /// Which lines to show, comma-separated: init, ratio, space, seen, close, verdict (default:
    /// init, ratio, space, close, verdict, with the rcv_ssthresh-only steps of each socket folded
    /// into one line a second in the text; naming `space` shows each)
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = crate::ui::shown::EVENT_NAMES)]
    pub events: Option<Vec<String>>,
    /// No verdicts (they read the traced sockets once a second through the socket iterator)
    #[arg(long)]
    pub no_verdicts: bool,
    /// Ring buffer size in KiB (a power of two, at least 4)
    #[arg(long, default_value_t = 1024, value_name = "KIB")]
    pub ringbuf_kib: u32,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub peer: PeerArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Self-contained demo: two network namespaces, a transfer with GRO on and off, traced
    Demo,
    /// The GRO / MTU / buffer experiment, and the articles' slow transfers over a long path of its own (--path, --scenario)
    Lab(LabArgs),
    /// Every TCP socket now, with scaling_ratio, window_clamp and the limit that binds its window
    Ss(SsArgs),
    /// Audit the host's receive-window settings; with --bdp, exit 0 if the BDP fits, 1 if
    /// autotuned sockets cannot reach it, 3 if only sockets that set SO_RCVBUF cannot (rmem_max),
    /// 2 on error
    Check(CheckArgs),
    /// Serve the sockets' window facts and verdicts to Prometheus (/metrics); nothing runs per packet
    ///
    /// Each scrape walks the sockets with the BPF socket iterator (histograms of scaling_ratio,
    /// window_clamp, advertised window and window / RTT; sockets by verdict). One hook at each
    /// TCP state change counts, in the kernel, what a walk cannot see: handshakes by window
    /// scaling and side, and the busy / rwnd-limited / sndbuf-limited time of connections that
    /// closed, which the *_seconds_total counters add to the live sockets' (those counters
    /// never decrease). With --pid those kernel counters are left out: a process's sockets are
    /// known only while they are open. --port and --netns apply to everything.
    Exporter(ExporterArgs),
    /// Live terminal view of the sockets: rate, RTT, window, ceiling, ratio, verdict; sort, filter, sparklines
    Top(TopArgs),
    /// Record a trace into a file: a header, the JSON lines, a sample of every traced socket each second, the summary
    Record(RecordArgs),
    /// Summary and verdicts of a recording; two recordings side by side; --svg draws them
    Report(ReportArgs),
    /// The socket iterator `ss`, `check` and `top` keep pinned between runs (in bpffs, with its
    /// layout in /run/tcpwin-trace): what is there and whether it is used; --clear removes it
    Cache(CacheArgs),
    /// Write the man pages (tcpwin-trace.1 and one per command) into DIR (used by `cargo xtask dist`)
    #[command(hide = true)]
    Manpages {
        #[arg(value_name = "DIR")]
        dir: std::path::PathBuf,
    },
    /// Built-in traffic endpoints, run by the lab and the demo inside their namespaces (their
    /// arguments are the lab's: `tcpwin-trace transfer send|recv ...`)
    #[command(hide = true)]
    Transfer {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
}

#[derive(clap::Args, Debug)]
pub struct CacheArgs {
    /// Remove every entry (the pinned iterators and their layout files); the next command
    /// loads the iterator afresh
    #[arg(long)]
    pub clear: bool,
}

#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// The recording to write (JSON lines, readable by jq)
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    #[command(flatten)]
    pub trace: TraceArgs,
}

#[derive(clap::Args, Debug)]
pub struct LabArgs {
    /// A small subset that shows the main contrasts (the default)
    #[arg(long, conflicts_with = "full")]
    pub quick: bool,
    /// Every combination: MTU 1500/9000 x GRO x TSO x buffer (pinned 1 MiB, auto, SO_RCVBUF 64 KiB)
    #[arg(long)]
    pub full: bool,
    /// One JSON object per row
    #[arg(long)]
    pub json: bool,
    /// Bytes per transfer
    #[arg(long, default_value_t = 16 << 20)]
    pub bytes: u64,
    /// A long path instead of veth: sender, path and receiver namespaces, the path delaying
    /// every frame rtt/2 each way and limiting the rate (tbf); measured with ample windows
    #[arg(long, value_name = "rtt=18ms[,rate=250mbit]", value_parser = parse_path, conflicts_with_all = ["full", "scenario"])]
    pub path: Option<PathSpec>,
    /// Set up a slow transfer and hold the verdict (both ends, read together) against the limit
    /// the scenario is built to show: wscale-off, window-sweep, rmem-max, autotune-max, gro,
    /// not-window-limited, window-clamp, app-not-reading, queue (a deep bottleneck queue),
    /// iperf3 (-w, -R, -P), nginx (sndbuf=, curl --limit-rate), all (with --quick: one row per
    /// limit family, each once, as the test suite runs it). Exits 1 when any verdict differs
    #[arg(long, value_name = "NAME|all", conflicts_with = "full")]
    pub scenario: Option<String>,
    /// Run each scenario row N times and print the accuracy table (scenario x congestion
    /// control x end: expected vs got)
    #[arg(long, value_name = "N", default_value_t = 1, requires = "scenario", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Apply each window limit's fix as its JSON gives it (commands run as printed, the socket
    /// option given to the program), run the transfer again, and hold it to the same path's rate
    /// with nothing set: fails when a fix does not repair its transfer
    #[arg(long, requires = "scenario")]
    pub apply_fix: bool,
    /// With --apply-fix: skip the run of the same path with nothing set. The window the kernel
    /// allows after each fix and the verdicts are read as before; whether the repaired rate
    /// reached the path's is not, and no fix loop is judged (the test suite's smoke run)
    #[arg(long, requires = "apply_fix")]
    pub no_baseline: bool,
    /// Congestion controls to run each scenario with (set per namespace: bbr and reno; default
    /// both, or with --quick the one each row names)
    #[arg(long, value_name = "LIST", requires = "scenario", value_delimiter = ',', value_parser = ["bbr", "reno"])]
    pub cc: Vec<String>,
    /// Also draw the tables as SVG into DIR: lab.svg (ratio per condition), wan.svg (predicted
    /// vs measured throughput per row), window-sweep.svg (throughput against the window)
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Run nothing: print the tables of an earlier `--scenario ... --json` run from its rows
    /// (accuracy, fix loops, summary); exits 1 when a verdict differed or a fix did not close
    #[arg(long, value_name = "FILE", conflicts_with_all = ["full", "path", "scenario", "json", "svg"])]
    pub from: Option<PathBuf>,
    /// With --from: the summary alone, as a Markdown table (the README's)
    #[arg(long, requires = "from")]
    pub markdown: bool,
    /// With --from: judge every way of reading again from the readings the rows recorded, with
    /// this build's judge (how a change to the judge moves its accuracy on rows it was or was
    /// not changed for); the fix loops stay as they ran
    #[arg(long, requires = "from")]
    pub rejudge: bool,
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

#[derive(clap::Args, Debug, Clone)]
pub struct SsArgs {
    #[command(flatten)]
    pub sockets: SocketArgs,
    /// One JSON object per socket
    #[arg(long)]
    pub json: bool,
    /// Every fact of each socket and the verdict's why and fix (default: one line per socket)
    #[arg(short, long)]
    pub extended: bool,
    /// A last column naming each socket's owner: its process (`comm/pid`) and workload (the
    /// container and its runtime, the pod, or the systemd unit); shown by default with `--netns
    /// all`, `--container` and `--cgroup`
    #[arg(short = 'W', long)]
    pub workload: bool,
    /// Only sockets in this state (as `ss` names them)
    #[arg(long, value_name = "STATE", value_parser = tcpwin_model::select::STATES)]
    pub state: Option<String>,
    /// Only sockets whose receive window is what binds them (a cap, the peer's window, or a
    /// window an application closed by not reading)
    #[arg(long)]
    pub limited: bool,
    /// Hide idle sockets (no data moved or waiting), e.g. control connections
    #[arg(long)]
    pub active: bool,
    /// Only sockets with this local (source) port
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub sport: Option<u16>,
    /// Only sockets with this remote (destination) port
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub dport: Option<u16>,
    /// Repeat every MS milliseconds: rates from the deltas between snapshots, verdicts over
    /// each interval (until Ctrl-C, or --count)
    #[arg(short, long, value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub interval: Option<u64>,
    /// Snapshots to take with --interval (default: until Ctrl-C)
    #[arg(short = 'c', long, value_name = "N", requires = "interval")]
    pub count: Option<u64>,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Where to read sockets: the BPF socket iterator, or sock_diag (what `ss` reads: no
    /// scaling_ratio, window_clamp or SO_RCVBUF lock); auto falls back to sock_diag when the
    /// kernel refuses the iterator, and says so
    #[arg(long, value_enum, default_value_t = SourceArg::Auto)]
    pub source: SourceArg,
    #[command(flatten)]
    pub peer: PeerArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

impl SsArgs {
    /// The filters applied to judged sockets.
    pub fn selection(&self) -> tcpwin_model::select::Selection {
        tcpwin_model::select::Selection {
            state: self.state.clone(),
            limited: self.limited,
            active: self.active,
            sport: self.sport,
            dport: self.dport,
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// Bandwidth and RTT to size windows for, as iperf3 / tc write them: 1gbit:18ms
    #[arg(long, value_name = "RATE:RTT", value_parser = parse_bdp)]
    pub bdp: Option<Bdp>,
    /// The scaling ratio to size buffers with (default: the median measured on the sockets
    /// asked for (--pid, --port) that received data, else a fresh socket's 128)
    #[arg(long, value_name = "1-255", value_parser = clap::value_parser!(u8).range(1..))]
    pub ratio: Option<u8>,
    /// The namespace audited and the sockets the ratio is measured on (--netns all is refused:
    /// a host's namespaces each have their own settings, audit them one at a time)
    #[command(flatten)]
    pub sockets: SocketArgs,
    /// The report as one JSON object
    #[arg(long)]
    pub json: bool,
    /// Report as if the kernel were this version (`uname -r` form): the notes keyed by version
    /// (a test hook; the settings are still this host's)
    #[arg(long, value_name = "RELEASE", hide = true)]
    pub assume_kernel: Option<String>,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ExporterArgs {
    /// Address and port to serve /metrics on (only there: bind a public address yourself)
    #[arg(long, default_value = "127.0.0.1:9943", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// (On a container host, --netns all: a container's sockets live in its own namespace,
    /// looked up again at every scrape)
    #[command(flatten)]
    pub sockets: SocketArgs,
    /// Also export the ratio (len * 256 / truesize) of every data packet received, by
    /// interface, as a histogram. This attaches a per-packet hook (tcp:tcp_probe, one map update
    /// per packet, about 0.1-0.3 µs): the one option that costs per packet
    #[arg(long)]
    pub packet_histogram: bool,
    /// Also export, labelled by socket (local, remote, netns, side, limit), the N sockets
    /// running closest to their window's ceiling (rate / (window / RTT)); without it no metric
    /// has a per-socket label
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub top: Option<u16>,
    /// Also export the sockets per workload and limit (`tcpwin_workload_sockets`, labelled by
    /// the pod's namespace, name and UID, the container and the workload's short form): a
    /// series per limit each workload's sockets show, never per socket
    #[arg(long, value_name = "workload", value_parser = ["workload"])]
    pub by: Option<String>,
    /// Scrapes within this many milliseconds of a reading share it (two Prometheus replicas
    /// scraping at once read the sockets once); 0 reads at every scrape
    #[arg(long, value_name = "MS", default_value_t = 250)]
    pub fresh_ms: u64,
    /// TLS and basic auth, from a file in the format Prometheus exporters share (as
    /// node_exporter's): `tls_server_config: {cert_file, key_file, min_version}` and
    /// `basic_auth_users: {USER: BCRYPT_HASH}`; a key it does not implement is refused by name
    #[arg(long = "web.config.file", value_name = "PATH")]
    pub web_config_file: Option<PathBuf>,
    /// Scrapes answered at once; more get 503 Service Unavailable (as exporter-toolkit's
    /// --web.max-requests); 0: no bound
    #[arg(long = "web.max-requests", value_name = "N", default_value_t = 40)]
    pub max_requests: usize,
    /// Connections open at once (silent ones included); at the bound the one idle longest is
    /// closed for the newcomer
    #[arg(long = "web.max-connections", value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_connections: u32,
    /// Seconds a connection has to send a request head, TLS handshake included (and between two
    /// requests on a kept-alive connection); a silent one is closed after it
    #[arg(long = "web.header-timeout", value_name = "SECONDS", default_value_t = 10.0, value_parser = header_timeout)]
    pub header_timeout: f64,
    /// Do not serve per-socket readings at /sockets (what `--peer` asks a host's exporter for:
    /// each matching socket's facts and its namespace's limits, behind the same TLS and basic
    /// auth as /metrics)
    #[arg(long)]
    pub no_sockets_endpoint: bool,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

fn header_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.1..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("{s}: seconds from 0.1 to 3600")),
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    #[command(flatten)]
    pub sockets: SocketArgs,
    /// Refresh every MS milliseconds
    #[arg(short, long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub interval: u64,
    /// Also attach the tracer and show its events (each ratio and window change with the
    /// packet that caused it) for the selected socket; this runs the per-packet hook
    #[arg(long)]
    pub trace: bool,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub peer: PeerArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A recording (`tcpwin-trace record -o FILE`); two to set them side by side (e.g. GRO off
    /// then on)
    #[arg(required = true, num_args = 1..=2, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Also draw it as SVG: per socket, window_clamp / rcv_ssthresh / rcv_wnd / sk_rcvbuf over
    /// time with the ratio changes marked, and the rate against window / RTT
    #[arg(long, value_name = "OUT.svg")]
    pub svg: Option<PathBuf>,
}

fn parse_duration(s: &str) -> std::result::Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err("the duration must be a positive number of seconds".into());
    }
    // A year is enough; beyond that tokio's timer and Instant arithmetic overflow.
    if v > 365.0 * 86400.0 {
        return Err("the duration must be at most one year (31536000 seconds)".into());
    }
    Ok(v)
}

impl TraceArgs {
    pub fn validate(&self) -> Result<()> {
        let kib = self.ringbuf_kib;
        if kib < 4 || !kib.is_power_of_two() || kib > 1 << 20 {
            bail!("--ringbuf-kib {kib}: the ring buffer size must be a power of two between 4 and 1048576 KiB");
        }
        self.kernel.validate()
    }
}

impl Cmd {
    /// The kernel side's arguments of the command asked (None: it loads no programs).
    pub fn kernel(&self) -> Option<&KernelArgs> {
        match self {
            Cmd::Ss(a) => Some(&a.kernel),
            Cmd::Exporter(a) => Some(&a.kernel),
            Cmd::Check(a) => Some(&a.kernel),
            Cmd::Top(a) => Some(&a.kernel),
            Cmd::Record(a) => Some(&a.trace.kernel),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> std::result::Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("tcpwin-trace").chain(args.iter().copied()))
    }

    #[test]
    fn accepts_the_documented_forms() {
        let c = parse(&["--pid", "1", "--port", "5201", "--json", "-d", "2.5"]).unwrap();
        assert_eq!(c.trace.sockets.pid, Some(1));
        assert_eq!(c.trace.sockets.port, Some(5201));
        assert_eq!(c.trace.duration, Some(2.5));
        assert!(c.trace.json);
        assert_eq!(c.trace.backend, BackendArg::Auto);
        let c = parse(&["--backend", "tracepoint"]).unwrap();
        assert_eq!(Backend::from(c.trace.backend), Backend::Tracepoint);
        assert!(matches!(parse(&["demo"]).unwrap().cmd, Some(Cmd::Demo)));
    }

    #[test]
    fn rejects_bad_input_with_a_reason() {
        let e = parse(&["--pid", "abc"]).unwrap_err().to_string();
        assert!(e.contains("invalid value 'abc'"), "{e}");
        let e = parse(&["--duration=-1"]).unwrap_err().to_string();
        assert!(e.contains("positive"), "{e}");
        let e = parse(&["--duration", "1e12"]).unwrap_err().to_string();
        assert!(e.contains("at most one year"), "{e}");
        let e = parse(&["--port", "0"]).unwrap_err().to_string();
        assert!(e.contains("0"), "{e}");
        let e = parse(&["--backend", "uprobe"]).unwrap_err().to_string();
        assert!(e.contains("fentry"), "{e}");
        assert!(parse(&["--bogus"]).is_err());
    }

    #[test]
    fn validate_catches_what_clap_cannot() {
        let mut c = parse(&["--ringbuf-kib", "100"]).unwrap().trace;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("power of two"));
        c.ringbuf_kib = 64;
        c.validate().unwrap();
        c.sockets.pid = Some(u32::MAX - 1);
        assert!(c
            .sockets
            .scope()
            .unwrap_err()
            .to_string()
            .contains("no such process"));
        c.sockets.pid = Some(std::process::id());
        c.sockets.scope().unwrap();
        c.kernel.obj = Some("/nonexistent.o".into());
        assert!(c.validate().unwrap_err().to_string().contains("build-ebpf"));
    }
}
