//! `tcpwin-trace ss`: every TCP socket now, with what `ss` cannot show (scaling_ratio,
//! window_clamp, the buffer lock, unread bytes, the chrono times) and the verdict: which limit
//! binds its window. Read through the socket iterator; costs nothing while it does not run.
use std::{
    collections::HashMap,
    io::Write,
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::Result;
use tcpwin_model::{
    facts::{state_name, SockFacts},
    schema::SsLine,
    units::parse_rate,
    verdict::{verdict, Input},
};

use tcpwin_lab::harness::{install_stop_handler, wait_or_stop};

use super::snapshot::{self, Source, SourceArg};
use crate::{
    cli::SocketFilter,
    host::{kconfig, netns},
    kernel::btf::VMLINUX,
    view,
};

#[derive(clap::Args, Debug, Clone)]
pub struct SsArgs {
    #[command(flatten)]
    pub filter: SocketFilter,
    /// Network namespace: a name from `ip netns list`, or `all` (named ones and those processes
    /// live in); default the caller's
    #[arg(long, value_name = "NAME|all")]
    pub netns: Option<String>,
    /// One JSON object per socket
    #[arg(long)]
    pub json: bool,
    /// Repeat every MS milliseconds: rates from the deltas between snapshots, verdicts over
    /// each interval (until Ctrl-C, or --count)
    #[arg(short, long, value_name = "MS", value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub interval: Option<u64>,
    /// Snapshots to take with --interval (default: until Ctrl-C)
    #[arg(short = 'c', long, value_name = "N", requires = "interval")]
    pub count: Option<u64>,
    /// The rate suggestions are sized for, e.g. the path's bottleneck (1gbit, 250mbit); default
    /// twice the current ceiling
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub target: Option<u64>,
    /// Where to read sockets: the BPF socket iterator, or sock_diag (what `ss` reads: no
    /// scaling_ratio, window_clamp or SO_RCVBUF lock); auto falls back to sock_diag when the
    /// kernel refuses the iterator, and says so
    #[arg(long, value_enum, default_value_t = SourceArg::Auto)]
    pub source: SourceArg,
    /// Kernel BTF to resolve struct layouts from
    #[arg(long, default_value = VMLINUX, value_name = "PATH")]
    pub btf: PathBuf,
    /// Load this eBPF object instead of the one built into the binary
    #[arg(long, value_name = "PATH")]
    pub obj: Option<PathBuf>,
}

pub fn run(args: SsArgs) -> Result<()> {
    args.filter.validate()?;
    let targets = netns::resolve(args.netns.as_deref())?;
    let mut src = Source::open(args.source, &args.btf, args.obj.as_deref())?;
    if let Source::Iterator(it) = &src {
        for (field, why) in &it.absent {
            eprintln!("tcpwin-trace: {field} {why}: reported as null");
        }
    }
    let hz = kconfig::hz();
    if hz.is_none() {
        eprintln!("tcpwin-trace: the kernel's CONFIG_HZ is unknown (no /boot/config-* or /proc/config.gz): busy/rwnd-limited/sndbuf-limited times are null");
    }
    install_stop_handler();
    let mut before: HashMap<u64, SockFacts> = HashMap::new();
    let mut taken = 0u64;
    let mut out = std::io::stdout().lock();
    loop {
        let t0 = Instant::now();
        let mut seen = snapshot::read(&mut src, &targets, &args.filter, hz)?;
        snapshot::add_owners(&mut seen);
        let mut lines = Vec::with_capacity(seen.len());
        let mut next = HashMap::with_capacity(seen.len());
        for s in seen {
            let prev = s.facts.cookie.and_then(|c| before.get(&c));
            let v = verdict(&Input {
                now: &s.facts,
                before: prev,
                host: &s.host,
                target_bps: args.target,
            });
            if let Some(c) = s.facts.cookie {
                next.insert(c, s.facts.clone());
            }
            lines.push(SsLine {
                source: src.name().into(),
                netns_name: s.line_ns,
                state_name: state_name(s.facts.state).into(),
                facts: s.facts,
                verdict: v,
            });
        }
        before = next;
        taken += 1;
        // an interval's first snapshot has no rates yet: its verdicts are the static ones
        if args.json {
            for l in &lines {
                serde_json::to_writer(&mut out, l)?;
                writeln!(out)?;
            }
        } else {
            view::ss::render(&lines, args.interval.is_some() && taken > 1, &mut out)?;
        }
        out.flush()?;
        let Some(ms) = args.interval else {
            return Ok(());
        };
        if args.count.is_some_and(|c| taken >= c) {
            return Ok(());
        }
        let wait = Duration::from_millis(ms).saturating_sub(t0.elapsed());
        if wait_or_stop(wait) {
            return Ok(());
        }
    }
}
