//! The trace command: load with the running kernel's offsets, attach, keep the PID's sockets
//! fresh, read the ring buffer (tokio), stop on Ctrl-C / SIGTERM / --duration / PID exit, detach
//! cleanly and print the summary.
use std::{
    collections::BTreeMap,
    io::{BufWriter, Write},
    time::{Duration, Instant},
};
use tcpwin_model::units::count;

use anyhow::{bail, Context, Result};
use tcpwin_common::stop::{install_stop_handler, stopped_by};
use tcpwin_common::{counter, hook};
use tcpwin_model::{
    decode::Record,
    facts::SockFacts,
    kind::EventKind,
    schema::{
        Counters, EbpfLogLines, HeaderLine, HeaderTag, Histograms, SummaryLine, SummaryTag,
        VerdictLine,
    },
    timeline::{Last, Sockets},
    verdict::Side,
    workload::Workload,
};

use crate::{
    gather::{scope::Scope, traced::TracedVerdicts},
    host::{
        monotonic_ns,
        owner::{self, Owners, WorkloadCache},
        sysctl,
    },
    kernel::log::{KernelLog, LogLevel},
    kernel::{
        attach::{short_reason, Attached},
        btf::Layout,
        maps::{self, OwnerSync},
        ring::Ring,
        tracer::Tracer,
    },
    ui::{
        self,
        shown::{as_step, in_time_order, Directions, Fold, Folds, Next, Shown},
    },
};
use std::path::PathBuf;

use super::args::{BackendArg, KernelArgs, PeerArgs, SocketArgs, TargetArgs};

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

#[derive(clap::Args, Debug)]
pub struct RecordArgs {
    /// The recording to write (JSON lines, readable by jq)
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    #[command(flatten)]
    pub trace: TraceArgs,
}

/// The one workload a trace selected: the traced process's (`--pid`), or the container's or
/// cgroup's when all its processes share one (`--container`, `--cgroup`); None otherwise.
fn selected_workload(scope: &Scope, cache: &mut WorkloadCache) -> Option<Workload> {
    let pids = match scope.owners()? {
        Owners::Pid(p) => vec![p],
        Owners::Workload(sel) => owner::members(&sel),
    };
    let all: Vec<Workload> = pids.into_iter().filter_map(|p| cache.of(p)).collect();
    let first = all.first()?;
    all.iter()
        .all(|w| w.container_id == first.container_id && w.cgroup == first.cgroup)
        .then(|| first.clone())
}

/// How often the ring buffer is drained (the kernel side wakes the reader only when a quarter
/// of it is used).
const DRAIN_EVERY: Duration = Duration::from_millis(100);
/// Drains per verdict reading: the traced sockets are judged once a second.
const DRAINS_PER_VERDICT: u64 = 10;

struct Out {
    json: bool,
    /// verdicts in full (`-e`)
    extended: bool,
    quiet: bool,
    /// which lines (`--events`), and the folded rcv_ssthresh steps waiting to be printed
    shown: Shown,
    folds: Folds,
    /// the way data flows on each socket, for the text's arrows
    directions: Directions,
    /// recording: a sample line per traced socket at each verdict tick
    samples: bool,
    pid: Option<u32>,
    /// the workload of each process events name
    workloads: WorkloadCache,
    /// the one workload the trace selected, where it selected one (its sockets' events name it)
    selected: Option<Workload>,
    t0_ns: u64,
    /// the latest time a text line carried: a socket's folded steps, printed after another
    /// socket's later line, carry this one (their own span is in the line)
    printed_ns: u64,
    w: BufWriter<Box<dyn Write>>,
}

impl Out {
    /// A socket's folded steps, as a line in time order.
    fn fold(&mut self, f: &Fold, side: Option<Side>) -> Result<()> {
        self.printed_ns = self.printed_ns.max(f.last.ev.ts_ns);
        let line = ui::text::fold_line(f, self.t0_ns, self.printed_ns, side);
        writeln!(self.w, "{line}")?;
        Ok(())
    }
}

/// One event, as asked: folded (text, an rcv_ssthresh-only step), or printed after the
/// socket's folded steps. `side`: which way data flows on it, by its last verdict; `before`: the
/// socket's values the trace reported before it (the text tells each change once, from those:
/// see [`as_step`]; `--json` carries every record as its observer sent it).
fn emit(out: &mut Out, r: &Record, side: Option<Side>, before: Option<&Last>) -> Result<()> {
    if out.quiet {
        return Ok(());
    }
    // noted for every record, shown or not: the arrow of the socket's later lines
    let side = if out.json {
        side
    } else {
        out.directions.side(r, side)
    };
    if !out.shown.event(r.kind) {
        return Ok(());
    }
    // whose: the workload of the process the event names (process context), else the one the
    // trace selected (--pid, --container, --cgroup of one workload): also for a process gone
    // before its event is printed (a short-lived one, taken by the kernel side by its cgroup)
    let workload = match r.pid() {
        Some(p) => out.workloads.of(p).or_else(|| out.selected.clone()),
        None => out.selected.clone(),
    };
    if out.json {
        let mut line = r.to_line(out.pid);
        line.workload = workload;
        serde_json::to_writer(&mut out.w, &line)?;
        writeln!(out.w)?;
        return Ok(());
    }
    let Some(r) = as_step(r, before) else {
        return Ok(());
    };
    if out.shown.folds(&r) {
        out.folds.add(&r);
        return Ok(());
    }
    if let Some(f) = out.folds.take(r.cookie()) {
        out.fold(&f, side)?;
    }
    out.printed_ns = out.printed_ns.max(r.ev.ts_ns);
    writeln!(
        out.w,
        "{}",
        ui::text::text_line(
            &r,
            out.t0_ns,
            out.pid,
            side,
            workload.as_ref().map(|w| w.short()).as_deref()
        )
    )?;
    Ok(())
}

/// Every socket's folded steps (once a second, and at the end).
fn emit_folds(out: &mut Out, side: &dyn Fn(Option<u64>) -> Option<Side>) -> Result<()> {
    for f in out.folds.take_all() {
        let c = f.last.cookie();
        let side = out.directions.of(c, side(c));
        out.fold(&f, side)?;
    }
    Ok(())
}

fn emit_verdict(out: &mut Out, v: &VerdictLine) -> Result<()> {
    if out.quiet || !out.shown.verdicts() {
        return Ok(());
    }
    if out.json {
        serde_json::to_writer(&mut out.w, v)?;
        writeln!(out.w)?;
    } else {
        out.printed_ns = out.printed_ns.max(v.ts_ns);
        writeln!(
            out.w,
            "{}",
            ui::text::verdict_text(v, out.t0_ns, out.extended)
        )?;
    }
    Ok(())
}

/// One record drained: into the timeline, then printed (a close brings the socket's final
/// verdict).
fn apply(
    out: &mut Out,
    socks: &mut Sockets,
    judges: &mut Option<TracedVerdicts>,
    log: &KernelLog,
    mut r: Record,
) -> Result<()> {
    if r.kind == EventKind::Seen && r.cookie().is_some_and(|c| socks.is_live(c)) {
        // first sight of a socket already tracked: its kernel state was evicted
        log.note(
            LogLevel::Warn,
            hook::name(r.ev.hook),
            &format!(
                "socket {:x} left the tracer's socket map (an LRU of {} sockets) and is seen again: changes in between were reported as one",
                r.ev.cookie,
                tcpwin_common::MAX_TRACKED_SOCKETS
            ),
        );
    }
    let before = socks.update(&mut r);
    let side = judges
        .as_ref()
        .and_then(|j| j.side(r.cookie().unwrap_or(0)));
    emit(out, &r, side, before.as_ref())?;
    if r.kind == EventKind::Close {
        if let (Some(j), Some(c)) = (judges.as_mut(), r.cookie()) {
            if let Some(v) = j.close(c, r.ev.ts_ns) {
                emit_verdict(out, &v)?;
            }
        }
    }
    Ok(())
}

/// What a trace keeps while it runs: the output, the per-socket timeline and the verdicts.
struct Session {
    out: Out,
    socks: Sockets,
    judges: Option<TracedVerdicts>,
    /// changes reported from the iterator's readings (no hook saw them)
    caught_up: u64,
    /// a recording's progress: (samples written, seconds)
    recorded: (u64, u64),
}

impl Session {
    /// Each record updates the timeline and is printed (a close brings the socket's final
    /// verdict); the lines leave at each drain (at least every 100 ms), not at exit.
    fn drain(&mut self, ring: &mut Ring, log: &KernelLog) -> Result<()> {
        let Session {
            out, socks, judges, ..
        } = self;
        ring.drain(&mut |r: Record| apply(out, socks, judges, log, r))?;
        Ok(self.out.w.flush()?)
    }

    /// A reading's lines: what the ring holds, what the iterator read that no hook had, and the
    /// verdicts, in time order (see [`in_time_order`]); the folded steps before the first
    /// verdict, as they stood then.
    fn apply_reading(
        &mut self,
        ring: &mut Ring,
        log: &KernelLog,
        read: &[SockFacts],
        verdicts: &[VerdictLine],
    ) -> Result<()> {
        let mut records = Vec::new();
        ring.drain(&mut |r: Record| {
            records.push(r);
            Ok(())
        })?;
        let order = in_time_order(
            &records.iter().map(|r| r.ev.ts_ns).collect::<Vec<_>>(),
            &read.iter().map(|f| f.ts_ns).collect::<Vec<_>>(),
            &verdicts.iter().map(|v| v.ts_ns).collect::<Vec<_>>(),
        );
        // the merge hands the records back in the ring's order
        let mut records = records.into_iter();
        let mut folds_shown = false;
        for next in order {
            match next {
                Next::Record(_) => {
                    if let Some(r) = records.next() {
                        let Session {
                            out, socks, judges, ..
                        } = self;
                        apply(out, socks, judges, log, r)?;
                    }
                }
                Next::Reading(i) => self.catch_up(std::slice::from_ref(&read[i]))?,
                Next::Verdict(i) => {
                    if !folds_shown {
                        self.flush_folds()?;
                        folds_shown = true;
                    }
                    emit_verdict(&mut self.out, &verdicts[i])?;
                }
            }
        }
        if !folds_shown {
            self.flush_folds()?;
        }
        Ok(self.out.w.flush()?)
    }

    /// Reports what the iterator read that no hook had: a change made after a socket's last
    /// hooked packet (e.g. by the last packet itself: the tracepoint fires before the kernel
    /// processes it, and the recvmsg hits after it may be skipped within the re-check period).
    fn catch_up(&mut self, read: &[SockFacts]) -> Result<()> {
        for f in read {
            if let Some(mut r) = self.socks.catch_up(f) {
                let before = self.socks.update(&mut r);
                self.caught_up += 1;
                let side = self.side(r.cookie());
                emit(&mut self.out, &r, side, before.as_ref())?;
            }
        }
        Ok(())
    }

    /// Which way data flows on a socket, by its last verdict.
    fn side(&self, cookie: Option<u64>) -> Option<Side> {
        self.judges.as_ref()?.side(cookie?)
    }

    /// Prints every socket's folded rcv_ssthresh steps.
    fn flush_folds(&mut self) -> Result<()> {
        let sides: Vec<(u64, Side)> = self
            .live()
            .iter()
            .filter_map(|(c, _)| Some((*c, self.side(Some(*c))?)))
            .collect();
        emit_folds(&mut self.out, &|c| {
            sides.iter().find(|(k, _)| Some(*k) == c).map(|(_, s)| *s)
        })
    }

    /// The live traced sockets: (cookie, netns).
    fn live(&self) -> Vec<(u64, u32)> {
        self.socks
            .live_cookies()
            .filter_map(|(c, l)| Some((c, l.id.netns?)))
            .collect()
    }

    /// One reading at the end, before the summary: the last changes of the sockets still open.
    fn final_catch_up(&mut self, tracer: &mut Tracer, ring: &mut Ring) -> Result<()> {
        let live = self.live();
        let Some(j) = self.judges.as_mut() else {
            return Ok(());
        };
        let read: Vec<SockFacts> = j
            .read_last(tracer, &live)?
            .into_iter()
            .map(|s| s.facts)
            .collect();
        self.apply_reading(ring, &tracer.log, &read, &[])
    }

    /// Judges the live sockets (once a second).
    fn judge(&mut self, tracer: &mut Tracer, ring: &mut Ring) -> Result<()> {
        let live = self.live();
        let Some(j) = self.judges.as_mut() else {
            return Ok(());
        };
        let tick = j.tick(tracer, &live)?;
        // A hook may have fired between the last drain and the reading, or while the sockets
        // were read and judged (milliseconds on a busy machine): its record is in the ring, and
        // takes its place among the reading's lines by time. Before a reading, it is printed
        // as the hook's and the reading reports only what no hook saw
        self.apply_reading(ring, &tracer.log, &tick.read, &tick.verdicts)?;
        if self.out.samples {
            let n = tick.samples.len();
            for s in tick.samples {
                serde_json::to_writer(&mut self.out.w, &s)?;
                writeln!(self.out.w)?;
            }
            self.recorded.0 += n as u64;
            // a long job says how it goes, on stderr: after the first second, then every
            // RECORD_PROGRESS_EVERY
            self.recorded.1 += 1;
            if self.recorded.1 == 1 || self.recorded.1.is_multiple_of(RECORD_PROGRESS_EVERY) {
                eprintln!(
                    "tcpwin-trace: recording: {} s, {}, {}, {} open",
                    self.recorded.1,
                    count(self.socks.events(), "event"),
                    count(self.recorded.0, "sample"),
                    count(self.socks.live() as u64, "socket")
                );
            }
        }
        Ok(self.out.w.flush()?)
    }
}

/// A recording's progress line every this many verdict ticks (seconds).
const RECORD_PROGRESS_EVERY: u64 = 5;

/// The trace's first lines: the backend chosen and why (one line: on a kernel where auto falls
/// back, the refusals are the normal path, not errors; `--ebpf-log info` gives the kernel's
/// words), what this kernel lacks, and what is traced until when.
fn announce(attached: &Attached, layout: &Layout, args: &TraceArgs, scope: &Scope) {
    let why = if attached.rejected.is_empty() {
        String::new()
    } else {
        let r: Vec<String> = attached
            .rejected
            .iter()
            .map(|(b, e)| format!("{b} {}", short_reason(e)))
            .collect();
        format!("; {}", r.join(", "))
    };
    eprintln!(
        "tcpwin-trace: backend {} (hooks {}){why}",
        attached.backend,
        attached.hook_list()
    );
    if args.kernel.log_level() >= LogLevel::Info {
        for (b, why) in &attached.rejected {
            eprintln!("tcpwin-trace: backend {b} not used: {why}");
        }
    }
    for n in &attached.notes {
        eprintln!("tcpwin-trace: note: {n}");
    }
    if !layout.has_scaling_ratio() {
        eprintln!(
            "tcpwin-trace: {}",
            sysctl::legacy_note(sysctl::tcp_adv_win_scale())
        );
    }
    for (field, why) in &layout.absent {
        if field != "tcp_sock.scaling_ratio" {
            eprintln!("tcpwin-trace: {field} {why}: reported as absent");
        }
    }
    let stop = match args.duration {
        Some(d) => format!("for {d} s"),
        None => "until Ctrl-C".into(),
    };
    eprintln!("tcpwin-trace: tracing {} {stop}", scope.describe());
}

pub async fn run(args: TraceArgs) -> Result<()> {
    if args.no_verdicts && !args.peer.peers.is_empty() {
        anyhow::bail!("--peer with --no-verdicts: the other end is asked for to judge the connection; leave one out");
    }
    run_to(args, None).await
}

/// `tcpwin-trace record -o FILE`: the trace as JSON lines into FILE, opened by a header and
/// with a sample of every traced socket each second.
pub async fn record(mut args: TraceArgs, path: &std::path::Path) -> Result<()> {
    if args.no_verdicts {
        anyhow::bail!("--no-verdicts: a recording's samples come from the verdicts' socket reads; leave it out");
    }
    args.json = true;
    args.quiet = false;
    run_to(args, Some(path)).await
}

fn header(attached: &Attached, t0_ns: u64, kernel: &str) -> HeaderLine {
    HeaderLine {
        event: HeaderTag::Header,
        tool: "tcpwin-trace".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        kernel: kernel.into(),
        host: crate::host::sysctl::read("kernel.hostname").unwrap_or_default(),
        backend: attached.backend.to_string(),
        hooks: attached.hook_list(),
        start_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        start_ts_ns: t0_ns,
        args: std::env::args().collect(),
    }
}

async fn run_to(args: TraceArgs, record: Option<&std::path::Path>) -> Result<()> {
    args.validate()?;
    let scope = args.sockets.scope()?;
    // an unwritable path fails before anything is loaded
    let sink: Box<dyn Write> = match record {
        Some(p) => Box::new(
            std::fs::File::create(p)
                .with_context(|| format!("cannot write the recording {}", p.display()))?,
        ),
        None => Box::new(std::io::stdout()),
    };
    let kernel = args.kernel.kernel();
    let mut tracer = Tracer::load(
        &kernel,
        scope.kernel_filter()?,
        args.backend.into(),
        args.ringbuf_kib,
    )?;

    // Before saying "tracing": a signal from then on must reach the clean shutdown path (the
    // flag is looked at every drain tick)
    install_stop_handler();
    let mut owner = scope.owners().map(OwnerSync::new);
    if let Some(o) = owner.as_mut() {
        o.sync(&mut tracer.bpf)?;
    }
    let mut ring = Ring::take(&mut tracer.bpf)?;
    // verdicts need the socket iterator; without it the trace goes on and says so
    let judges = if args.no_verdicts {
        None
    } else {
        match tracer.prepare_iter() {
            Ok(()) => {
                let j =
                    TracedVerdicts::new(kernel.hz(), tracer.layout().offsets, args.target.target)
                        .with_peers(args.peer.peers()?, args.sockets.port);
                // an `init` waits for its socket's next record only where the close can name
                // the socket's port (`inet_sport`) and this reading flushes those that wait
                Some(
                    if tracer.layout().offsets.inet_sport != tcpwin_common::ABSENT {
                        j.with_deferred_inits(&mut tracer)?
                    } else {
                        j
                    },
                )
            }
            Err(e) => {
                eprintln!("tcpwin-trace: no verdicts: {e:#}");
                None
            }
        }
    };
    // "tracing" once everything a connection meets from now is set (its init deferred)
    announce(&tracer.attached, tracer.layout(), &args, &scope);
    let t0_ns = monotonic_ns();
    let mut w = BufWriter::new(sink);
    if let Some(p) = record {
        serde_json::to_writer(&mut w, &header(&tracer.attached, t0_ns, kernel.release()))?;
        writeln!(w)?;
        eprintln!("tcpwin-trace: recording to {}", p.display());
    }
    let mut workloads = WorkloadCache::default();
    let mut session = Session {
        out: Out {
            json: args.json,
            quiet: args.quiet,
            extended: args.extended,
            shown: Shown::new(args.events.as_deref(), args.json),
            folds: Folds::default(),
            directions: Directions::default(),
            samples: record.is_some(),
            pid: scope.pid(),
            selected: selected_workload(&scope, &mut workloads),
            workloads,
            t0_ns,
            printed_ns: 0,
            w,
        },
        socks: Sockets::default(),
        judges,
        caught_up: 0,
        recorded: (0, 0),
    };
    let mut ticks = 0u64;
    let started = Instant::now();
    let deadline = args.duration.map(|d| started + Duration::from_secs_f64(d));
    let mut refresh = tokio::time::interval(DRAIN_EVERY);
    let sleep = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep);
    let stop_reason = loop {
        tokio::select! {
            r = ring.readable() => {
                r?;
                session.drain(&mut ring, &tracer.log)?;
            }
            _ = &mut sleep => break "duration".to_string(),
            _ = refresh.tick() => {
                if let Some(by) = stopped_by() {
                    break by.to_string();
                }
                // the kernel side wakes us only when the ring fills up (see emit.rs)
                session.drain(&mut ring, &tracer.log)?;
                ticks += 1;
                if ticks.is_multiple_of(DRAINS_PER_VERDICT) {
                    session.judge(&mut tracer, &mut ring)?;
                }
                if let Some(o) = owner.as_mut() {
                    // one /proc walk a tick: the scan fails where the owners are gone, and only
                    // then is asked why
                    if let Err(e) = o.sync(&mut tracer.bpf) {
                        let why = format!("{:#}", scope.why_failed(e));
                        eprintln!("tcpwin-trace: {why}; stopping");
                        break why;
                    }
                }
            }
        }
    };
    // Detach first, then drain what is already in the ring buffer, then count.
    finish(tracer, ring, session, args.json, started, stop_reason)
}

/// The end of a trace: the hooks detached, the ring drained, the last verdicts, and the
/// summary (the kernel's counters, what the ring carried, each histogram), with any loss said.
fn finish(
    mut tracer: Tracer,
    mut ring: Ring,
    mut session: Session,
    json: bool,
    started: Instant,
    stop_reason: String,
) -> Result<()> {
    let missed_runs = tracer.recursion_misses();
    if let Some(j) = session.judges.as_mut() {
        j.stop_deferring(&mut tracer)?;
    }
    tracer.detach();
    session.drain(&mut ring, &tracer.log)?;
    session.final_catch_up(&mut tracer, &mut ring)?;
    session.flush_folds()?;
    let mut verdicts = BTreeMap::new();
    let inits_lost = session.judges.as_ref().map_or(0, |j| j.inits_lost(&tracer));
    if let Some(j) = session.judges.as_mut() {
        let (lines, finals) = j.finish();
        for v in lines {
            emit_verdict(&mut session.out, &v)?;
        }
        verdicts = finals;
    }
    let Session {
        mut out,
        socks,
        caught_up,
        ..
    } = session;

    let ebpf_log = tracer.finish_log().map(|l| EbpfLogLines {
        written: l.due,
        shown: l.shown,
        lost: l.lost(),
    });
    let c = maps::read_counters(&tracer.bpf)?;
    let finals = socks.finish();
    let packet_ratio = maps::read_packet_hist(&tracer.bpf)?;
    let at = |i: u32| c[i as usize];
    let summary = SummaryLine {
        event: SummaryTag::Summary,
        backend: tracer.attached.backend.to_string(),
        hooks: tracer.attached.hook_list(),
        duration_s: started.elapsed().as_secs_f64(),
        stop_reason,
        hook_hits: hook::NAMES
            .iter()
            .zip(&c)
            .map(|(n, v)| (n.to_string(), *v))
            .collect(),
        counters: Counters {
            due: at(counter::EVENTS_DUE),
            sent: at(counter::EVENTS_SENT),
            dropped: at(counter::EVENTS_DROPPED),
            filtered_hits: at(counter::FILTERED),
            state_full: at(counter::STATE_FULL),
            // data packets: what the in-kernel histogram counted (no per-packet counter on the
            // hot path)
            packets: packet_ratio.iter().map(|(_, h)| h.count()).sum(),
            hist_full: at(counter::HIST_FULL),
            recheck_skipped: at(counter::RECHECK_SKIPPED),
            hook_runs_missed: missed_runs,
            caught_up,
            inits_deferred: at(counter::INIT_DEFERRED),
            inits_lost,
            records: ring.records,
        },
        events_received: ring.received,
        events_lost: at(counter::EVENTS_DROPPED)
            + at(counter::EVENTS_SENT).saturating_sub(ring.received),
        decode_errors: ring.decode_errors,
        sockets: finals.sockets,
        scaling_ratio_present: tracer.layout().has_scaling_ratio(),
        histograms: Histograms {
            packet_ratio: packet_ratio
                .iter()
                .map(|(n, h)| (n.clone(), h.summary()))
                .collect::<BTreeMap<_, _>>(),
            scaling_ratio: finals.scaling_ratio.summary(),
            window_clamp: finals.window_clamp.summary(),
            rcv_ssthresh: finals.rcv_ssthresh.summary(),
        },
        verdicts,
        ebpf_log,
    };
    if json {
        serde_json::to_writer(&mut out.w, &summary)?;
        writeln!(out.w)?;
    } else {
        ui::summary::render(&summary, &mut out.w)?;
    }
    out.w.flush()?;
    if missed_runs > 0 {
        eprintln!(
            "tcpwin-trace: the kernel skipped {missed_runs} hook runs (a hook fired on a CPU where the same program was running, e.g. a softirq interrupting it): a change there is reported at the socket's next hook, an init or close there is missed"
        );
    }
    if inits_lost > 0 {
        eprintln!(
            "tcpwin-trace: {inits_lost} connections' init never reached the trace (their socket state was evicted: see state_full, or their namespace was gone before a reading found them)"
        );
    }
    if summary.events_lost > 0 {
        eprintln!(
            "tcpwin-trace: {} events lost (ring buffer full); see the summary",
            summary.events_lost
        );
    }
    Ok(())
}
