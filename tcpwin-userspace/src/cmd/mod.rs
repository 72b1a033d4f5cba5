//! The product's commands: the command line (`Cli`, `Cmd`), and each command, its arguments
//! beside it, turning them into `gather`, kernel, host and ui calls. No command calls another; the lab (with the demo and its traffic endpoints) is
//! the only one that uses the test bench crate.
pub mod args;
pub mod cache;
pub mod check;
pub mod demo;
pub mod exporter;
pub mod lab;
pub mod manpages;
pub mod report;
pub mod ss;
pub mod top;
pub mod trace;

use clap::{Parser, Subcommand};

use args::KernelArgs;
use cache::CacheArgs;
use check::CheckArgs;
use exporter::ExporterArgs;
use lab::LabArgs;
use report::ReportArgs;
use ss::SsArgs;
use top::TopArgs;
use trace::{RecordArgs, TraceArgs};

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
    use crate::kernel::attach::Backend;
    use args::BackendArg;

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
