//! `tcpwin-trace ss`: every TCP socket now, with what `ss` cannot show (scaling_ratio,
//! window_clamp, the buffer lock, unread bytes, the chrono times) and the verdict: which limit
//! binds its window. Read through the socket iterator; costs nothing while it does not run.
use std::{
    io::Write,
    time::{Duration, Instant},
};

use anyhow::Result;
use tcpwin_model::{
    facts::state_name,
    judge::{end_keys, same_connection, Judge},
    schema::SsLine,
    verdict::Verdict,
};

use super::args::{KernelArgs, PeerArgs, SocketArgs, SourceArg, TargetArgs};
use crate::{
    gather::{
        scope::{self, Scope},
        snapshot::{self, Source, SourceKind},
    },
    ui,
};
use tcpwin_common::stop::{install_stop_handler, wait_or_stop};

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
    #[arg(long, value_name = "STATE", value_parser = crate::gather::scope::STATES)]
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
    /// Which sockets: those of the socket arguments, and of them what `ss` shows (a state,
    /// the window-bound, the active, the ports).
    pub fn scope(&self) -> Result<Scope> {
        Ok(Scope {
            state: self.state.clone(),
            limited: self.limited,
            active: self.active,
            sport: self.sport,
            dport: self.dport,
            ..self.sockets.scope()?
        })
    }
}

/// Why sock_diag's readings have no advertised window, said where none has one.
const RCV_WND_NULL: &str =
    "rcv_wnd is null: this kernel's tcp_info has no tcpi_rcv_wnd (Linux 6.2+)";

/// Without `-i`, how long after the first reading the sockets moving data are read again.
const SECOND_READING: Duration = Duration::from_millis(250);

/// A connection that sent or received data lately (or whose source cannot say).
fn moving(f: &tcpwin_model::facts::SockFacts) -> bool {
    f.state == tcpwin_model::facts::ESTABLISHED
        && f.idle_now().map_or(
            f.bytes_received.unwrap_or(0) + f.bytes_acked.unwrap_or(0) > 0,
            |idle| !idle,
        )
}

/// Prints one judged socket where the selection keeps it: a JSON line or a text line.
struct Printer<'a> {
    args: &'a SsArgs,
    select: Scope,
    text: ui::ss::Renderer,
    source: &'static str,
}

impl Printer<'_> {
    fn line(&mut self, s: &snapshot::Seen, verdict: Verdict, out: &mut impl Write) -> Result<()> {
        let l = SsLine {
            host: None,
            other_end: None,
            source: self.source.into(),
            netns_name: s.line_ns.clone(),
            state_name: state_name(s.facts.state).into(),
            facts: s.facts.clone(),
            verdict,
        };
        if !self.select.keeps(&l) {
            return Ok(());
        }
        if self.args.json {
            serde_json::to_writer(&mut *out, &l)?;
            writeln!(out)?;
        } else {
            self.text.line(&l, out)?;
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut impl Write) -> Result<()> {
        if !self.args.json {
            self.text.finish(out)?;
        }
        Ok(())
    }
}

/// Whether the owner (a scan of every process's fds) is shown: JSON, -e and the owner column
/// (--workload, or where containers are read: --netns all, --container, --cgroup).
fn owners_shown(args: &SsArgs) -> (bool, bool) {
    let column = args.workload
        || args.sockets.container.is_some()
        || args.sockets.cgroup.is_some()
        || args.sockets.netns.as_deref() == Some("all");
    (args.json || args.extended || column, column)
}

/// One reading (no `-i`, no `--peer`) judged and printed as it is read, so that what is held
/// does not grow with the sockets: a first pass counts each connection's ends (8 bytes a
/// socket) and whether any socket moves data; where none does, a second judges and prints each
/// socket as it comes, holding only an end whose other end is still to come. False where a
/// socket moves data: that reading is judged over an interval, with every socket's first
/// reading held (the caller's way).
fn streamed<W: Write>(
    args: &SsArgs,
    (shown, column): (bool, bool),
    rereading: &mut snapshot::Rereading,
    src: &mut Source,
    hz: Option<u32>,
    out: &mut W,
) -> Result<bool> {
    // each socket's end key, sorted: how many sockets share one (8 bytes a socket)
    let mut ends: Vec<u64> = Vec::new();
    let mut moves = false;
    rereading.read_each(src, hz, &mut |s, _| {
        moves |= moving(&s.facts);
        ends.push(end_keys(&s.facts.id).0);
    })?;
    if moves {
        return Ok(false);
    }
    ends.sort_unstable();
    ends.shrink_to_fit();
    let mut waiting = snapshot::Holder::new(src, hz, shown.then(crate::host::owner::socket_owners));
    let mut judge = Judge::one_shot(args.target.target);
    let mut p = Printer {
        args,
        select: rereading.scope.clone(),
        text: ui::ss::Renderer::new(false, args.extended, column),
        source: src.name(),
    };
    let mut failed = None;
    let mut rcv_wnd_read = false;
    let mut judged = |p: &mut Printer, out: &mut W, pair: &[&snapshot::Seen]| -> Result<()> {
        let now: Vec<_> = pair.iter().map(|s| (&s.facts, &*s.host)).collect();
        judge.judge_each(&now, |i, v| p.line(pair[i], v, out))
    };
    rereading.read_each(src, hz, &mut |mut s, record| {
        if failed.is_some() {
            return;
        }
        if let Some(o) = waiting.owners() {
            snapshot::add_owner(&mut s.facts, o);
        }
        rcv_wnd_read |= s.facts.rcv_wnd.is_some();
        let (own, other) = end_keys(&s.facts.id);
        let once = |k| ends.partition_point(|e| *e < k) + 1 == ends.partition_point(|e| *e <= k);
        let r = if own != other && once(own) && once(other) {
            // an end whose other end is in the reading (each seen once), until that one comes
            match waiting.take(other) {
                Err(e) => Err(e),
                Ok(Some(w)) if same_connection(&w.facts.id, &s.facts.id) => {
                    judged(&mut p, &mut *out, &[&w, &s])
                }
                Ok(Some(w)) => {
                    judged(&mut p, &mut *out, &[&w]).and_then(|_| judged(&mut p, &mut *out, &[&s]))
                }
                Ok(None) => {
                    waiting.hold(own, s, record);
                    Ok(())
                }
            }
        } else {
            judged(&mut p, &mut *out, &[&s])
        };
        if let Err(e) = r {
            failed = Some(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    // ends whose other end closed between the two passes
    for w in waiting.drain()? {
        judged(&mut p, &mut *out, &[&w])?;
    }
    p.finish(out)?;
    if matches!(src, Source::SockDiag) && !ends.is_empty() && !rcv_wnd_read {
        eprintln!("tcpwin-trace: {RCV_WND_NULL}");
    }
    Ok(true)
}

pub fn run(args: SsArgs) -> Result<()> {
    args.kernel.validate()?;
    let owners = owners_shown(&args);
    // a process's sockets live in its namespace: read that one unless --netns says otherwise
    let mut rereading = snapshot::Rereading::new(args.scope()?);
    let source = args.source.into();
    let kernel = args.kernel.kernel();
    let mut src = Source::open(source, &kernel)?;
    if source == SourceKind::SockDiag {
        eprintln!(
            "tcpwin-trace: reading sock_diag (what iproute2's ss reads): {} are null{}",
            crate::host::sockdiag::MISSING.join(", "),
            if crate::kernel::object::check_privileges().is_err() {
                "; without root only this namespace is read and other users' sockets have no owner"
            } else {
                ""
            }
        );
    }
    if let Source::Iterator(it) = &src {
        for (field, why) in &it.absent {
            eprintln!("tcpwin-trace: {field} {why}: reported as null");
        }
    }
    let hz = kernel.hz();
    if hz.is_none() {
        eprintln!("tcpwin-trace: the kernel's CONFIG_HZ is unknown (no /boot/config-* or /proc/config.gz): busy/rwnd-limited/sndbuf-limited times are null");
    }
    let mut peers = args.peer.peers()?;
    // one reading of idle sockets (what a busy server mostly holds) is streamed
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    if args.interval.is_none()
        && peers.is_none()
        && streamed(&args, owners, &mut rereading, &mut src, hz, &mut out)?
    {
        out.flush()?;
        said_gone(&rereading);
        return Ok(());
    }
    let port = rereading.scope.port;
    // a reading, and the peers' ends of its connections at the same moment
    let mut read =
        |rereading: &mut snapshot::Rereading, src: &mut Source| -> Result<Vec<snapshot::Seen>> {
            let mut seen = rereading.read(src, hz)?;
            if let Some(p) = peers.as_mut() {
                let theirs = p.read(&seen, port);
                seen.extend(theirs);
                for n in p.news() {
                    eprintln!("tcpwin-trace: {n}");
                }
            }
            Ok(seen)
        };
    install_stop_handler();
    let mut judge = match args.interval {
        Some(_) => Judge::new(args.target.target),
        None => Judge::one_shot(args.target.target),
    };
    let mut taken = 0u64;
    let mut said_rcv_wnd = false;
    loop {
        let t0 = Instant::now();
        let mut seen = match read(&mut rereading, &mut src) {
            Ok(seen) => seen,
            // `-i`: the process or workload watched ended since the last reading
            Err(e) if taken > 0 && scope::ended(&e).is_some() => {
                eprintln!("tcpwin-trace: {e}; stopping");
                break;
            }
            Err(e) => return Err(e),
        };
        // one reading has no rate: without -i, sockets moving data are read again a moment
        // later and judged over that interval (said on stderr)
        if args.interval.is_none() && seen.iter().any(|s| moving(&s.facts)) {
            judge = Judge::new(args.target.target);
            // the first reading remembered (its verdicts made and dropped one at a time)
            let now: Vec<_> = seen.iter().map(|s| (&s.facts, &*s.host)).collect();
            let _ = judge.judge_each(&now, |_, _| Ok::<(), std::convert::Infallible>(()));
            if wait_or_stop(SECOND_READING) {
                break;
            }
            seen = read(&mut rereading, &mut src)?;
            eprintln!(
                "tcpwin-trace: verdicts over the {} ms between two readings (one reading has no rate to hold against a window; -i MS for longer intervals)",
                SECOND_READING.as_millis()
            );
        }
        // sock_diag's tcp_info carries the advertised window from 6.2 only: say why it is null
        if !said_rcv_wnd
            && matches!(src, Source::SockDiag)
            && !seen.is_empty()
            && seen.iter().all(|s| s.facts.rcv_wnd.is_none())
        {
            eprintln!("tcpwin-trace: {RCV_WND_NULL}");
            said_rcv_wnd = true;
        }
        // the owner (a scan of every process's fds) only where it is shown
        let (shown, column) = owners;
        if shown {
            snapshot::add_owners(&mut seen);
        }
        taken += 1;
        // an interval's first snapshot has no rates yet: its verdicts are the static ones
        let mut p = Printer {
            args: &args,
            select: rereading.scope.clone(),
            text: ui::ss::Renderer::new(
                args.interval.is_some() && taken > 1,
                args.extended,
                column,
            ),
            source: src.name(),
        };
        // each socket judged and printed in turn: nothing but the sockets read is held at once
        // (not every verdict's text)
        let now: Vec<_> = seen.iter().map(|s| (&s.facts, &*s.host)).collect();
        judge.judge_each(&now, |i, v| p.line(&seen[i], v, &mut out))?;
        p.finish(&mut out)?;
        out.flush()?;
        let Some(ms) = args.interval else {
            break;
        };
        if args.count.is_some_and(|c| taken >= c) {
            break;
        }
        let wait = Duration::from_millis(ms).saturating_sub(t0.elapsed());
        if wait_or_stop(wait) {
            break;
        }
    }
    said_gone(&rereading);
    Ok(())
}

fn said_gone(rereading: &snapshot::Rereading) {
    if rereading.gone > 0 {
        eprintln!(
            "tcpwin-trace: {} namespace(s) disappeared between listing and reading (skipped)",
            rereading.gone
        );
    }
}
