//! The experiment of article 004, measured instead of derived: the same buffer, different packet
//! shapes (MTU, receiver GRO, sender TSO/GSO), different windows. The ratio comes from the kernel
//! through the tracer; the receiver's and sender's own getsockopt are recorded beside it.
use std::{process::Stdio, time::Duration};

use anyhow::{bail, Context, Result};

use tcpwin_lab::rows::EndpointReport;
use tcpwin_lab::{
    harness::{check_stop, Tracer, Transfer},
    pair::Pair,
};
use tcpwin_model::{
    kind::EventKind,
    schema::{parse_trace, EventLine},
};

use crate::kernel::object::check_privileges;

pub mod demo;
pub mod table;
pub mod wan;

use std::path::PathBuf;
use table::{LabResult, Row};
use tcpwin_lab::rows::{AdvWinScaleRow, HandshakeRow};

use tcpwin_model::units::{parse_path, PathSpec};

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

pub const PINNED: u32 = 1 << 20;
const SMALL_BUF: u32 = 64 << 10;
const PORT: u16 = 5401;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// `tcp_moderate_rcvbuf=0`, `tcp_rmem` pinned at 1 MiB in the receiver's namespace
    Pinned1m,
    /// autotuning with the default `tcp_rmem`
    Auto,
    /// the receiver sets `SO_RCVBUF` 64 KiB (autotuning off for the socket)
    SoRcvbuf64k,
}

impl Buffer {
    pub fn name(self) -> &'static str {
        match self {
            Buffer::Pinned1m => "pinned-1m",
            Buffer::Auto => "auto",
            Buffer::SoRcvbuf64k => "so_rcvbuf-64k",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Condition {
    pub mtu: u32,
    pub gro: bool,
    pub tso: bool,
    pub buffer: Buffer,
}

const fn c(mtu: u32, gro: bool, tso: bool, buffer: Buffer) -> Condition {
    Condition {
        mtu,
        gro,
        tso,
        buffer,
    }
}

/// The main contrasts in well under a minute.
pub const QUICK: [Condition; 7] = [
    c(1500, false, false, Buffer::Pinned1m),
    c(1500, true, false, Buffer::Pinned1m),
    c(1500, false, true, Buffer::Pinned1m),
    c(9000, false, false, Buffer::Pinned1m),
    c(9000, true, false, Buffer::Pinned1m),
    c(1500, false, false, Buffer::SoRcvbuf64k),
    c(1500, true, true, Buffer::Auto),
];

pub fn full() -> Vec<Condition> {
    let mut v = Vec::new();
    for buffer in [Buffer::Pinned1m, Buffer::Auto, Buffer::SoRcvbuf64k] {
        for mtu in [1500, 9000] {
            for gro in [false, true] {
                for tso in [false, true] {
                    v.push(c(mtu, gro, tso, buffer));
                }
            }
        }
    }
    v
}

/// The hidden `transfer` command: the lab's own endpoints, run inside its namespaces.
pub fn endpoints(args: Vec<String>) -> Result<()> {
    use clap::Parser;
    #[derive(Parser)]
    #[command(name = "tcpwin-trace transfer")]
    struct Endpoints {
        #[command(subcommand)]
        cmd: tcpwin_lab::endpoints::TransferCmd,
    }
    let e = Endpoints::try_parse_from(std::iter::once("transfer".to_string()).chain(args))
        .unwrap_or_else(|e| e.exit());
    tcpwin_lab::endpoints::run(e.cmd)
}

/// `tcp_adv_win_scale` values swept (the documented range is -31..31).
pub const ADV_WIN_SCALES: [i32; 7] = [-31, -2, 0, 1, 2, 4, 31];

fn apply_buffer(pair: &Pair, b: Buffer) -> Result<()> {
    match b {
        Buffer::Pinned1m => pair.pin_receiver_buffer(PINNED),
        Buffer::Auto | Buffer::SoRcvbuf64k => {
            Pair::sysctl(&pair.b, "net.ipv4.tcp_moderate_rcvbuf", "1")?;
            Pair::sysctl(&pair.b, "net.ipv4.tcp_rmem", "4096 131072 6291456")
        }
    }
}

/// What one transfer produced: the receiver's and sender's own reports.
struct Done {
    receiver: EndpointReport,
    sender: EndpointReport,
}

fn transfer(pair: &Pair, exe: &std::path::Path, bytes: u64, rcvbuf: Option<u32>) -> Result<Done> {
    let t = Transfer {
        exe: exe.to_path_buf(),
        pair,
        port: PORT,
        bytes,
        conns: 1,
        ipv6: false,
        rcvbuf,
        timeout: Duration::from_secs(90),
        send: Default::default(),
    };
    let (rx, tx) = t.run_both(true)?;
    Ok(Done {
        receiver: rx
            .into_iter()
            .next()
            .context("the receiver reported nothing")?,
        sender: tx
            .into_iter()
            .next()
            .context("the sender reported nothing")?,
    })
}

pub struct LabOpts {
    pub full: bool,
    pub json: bool,
    pub bytes: u64,
}

/// `--svg DIR`: made and tried before the lab runs (minutes), so a bad path fails at once.
fn svg_dir(dir: Option<&std::path::Path>) -> Result<()> {
    let Some(d) = dir else { return Ok(()) };
    std::fs::create_dir_all(d)
        .with_context(|| format!("cannot create the SVG directory {}", d.display()))?;
    let probe = d.join(".tcpwin-probe");
    std::fs::write(&probe, b"").with_context(|| format!("cannot write into {}", d.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

fn write_svg(dir: &std::path::Path, name: &str, svg: Result<String>) -> Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, svg?).with_context(|| format!("cannot write {}", p.display()))?;
    eprintln!("tcpwin-trace lab: wrote {}", p.display());
    Ok(())
}

fn mbit(v: f64) -> String {
    format!("{:.1}", v)
}

/// The WAN rows drawn: predicted vs measured per row, and the window sweep.
fn draw_wan(dir: &std::path::Path, rows: &[tcpwin_lab::rows::WanRow]) -> Result<()> {
    let labels: Vec<String> = rows
        .iter()
        .map(|r| {
            let l = format!("{}: {}", r.scenario, r.condition);
            match l.char_indices().nth(40) {
                Some((i, _)) => format!("{}...", &l[..i]),
                None => l,
            }
        })
        .collect();
    let m = |v: Option<u64>| v.map(|v| v as f64 / 1e6);
    write_svg(
        dir,
        "wan.svg",
        crate::ui::plot::bars_svg(
            "predicted (window / RTT, capped by the path) vs measured throughput",
            "Mbit/s",
            &labels,
            &[
                (
                    "predicted",
                    rows.iter().map(|r| m(r.predicted_bps)).collect(),
                ),
                (
                    "measured",
                    rows.iter().map(|r| m(r.throughput_bps)).collect(),
                ),
            ],
            mbit,
        ),
    )?;
    let sweep: Vec<(f64, f64, f64)> = rows
        .iter()
        .filter(|r| r.scenario == "window-sweep")
        .filter_map(|r| {
            Some((
                r.window? as f64 / 1024.0,
                m(r.predicted_bps)?,
                m(r.throughput_bps)?,
            ))
        })
        .collect();
    if !sweep.is_empty() {
        let r = rows
            .iter()
            .find(|r| r.scenario == "window-sweep")
            .expect("a sweep row");
        write_svg(
            dir,
            "window-sweep.svg",
            crate::ui::plot::sweep_svg(
                &format!(
                    "window sweep: {} ms RTT, {} bottleneck",
                    r.rtt_ms,
                    r.rate_limit_bps
                        .map(tcpwin_model::verdict::fmt_rate)
                        .unwrap_or_else(|| "no".into())
                ),
                &sweep,
            ),
        )?;
    }
    Ok(())
}

pub fn run(args: LabArgs) -> Result<()> {
    lab(args).map_err(tcpwin_lab::harness::interruption_alone)
}

/// A scenario run's tables and its outcome: the notes, the accuracy table, the fix loops and the
/// summary; an error when a verdict differed or a fix did not close.
fn tables(rows: &[tcpwin_lab::rows::WanRow]) -> Result<()> {
    let acc = wan::accuracy(rows);
    table::wan_notes(rows);
    table::print_accuracy(&acc);
    table::print_fix_loops(&wan::fix_loops(rows));
    let (held, n) = wan::counters(rows);
    if n > 0 {
        println!(
            "counter-proofs (no fix printed: both buffers raised anyway): {held} of {n} held, the rate did not move"
        );
    }
    table::print_summary(&wan::summary(rows));
    table::print_by_program(&wan::by_program(rows), false);
    let (checked, refused) = wan::checked(rows);
    println!(
        "the judge's own check: {checked} verdicts read, {} refused (a why, fix and facts that disagree)",
        refused.len()
    );
    wan::outcome(&acc, rows)
}

/// `--from FILE`: the tables of an earlier `--json` run, from its rows (`markdown`: the summary
/// alone, as the README shows it; `rejudge`: every way of reading judged again by this build).
fn tables_from(f: &std::path::Path, markdown: bool, rejudge: bool) -> Result<()> {
    let text = std::fs::read_to_string(f)
        .with_context(|| format!("--from {}: cannot read it", f.display()))?;
    let mut rows = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str::<tcpwin_lab::rows::WanRow>(l).with_context(|| {
                format!(
                    "--from {}: line {} is not a row of `lab --scenario ... --json`",
                    f.display(),
                    i + 1
                )
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if rows.is_empty() {
        bail!("--from {}: no rows in it", f.display());
    }
    if rejudge {
        let again = wan::rejudge(&mut rows);
        eprintln!(
            "lab: {again} of {} rows judged again by this build from their recorded readings (the others kept too few; fix loops as they ran)",
            rows.len()
        );
    }
    if markdown {
        table::print_summary_markdown(&wan::summary(&rows));
        table::print_by_program(&wan::by_program(&rows), true);
        return wan::outcome(&wan::accuracy(&rows), &rows);
    }
    tables(&rows)
}

fn lab(args: LabArgs) -> Result<()> {
    if let Some(f) = &args.from {
        return tables_from(f, args.markdown, args.rejudge);
    }
    check_privileges()?;
    svg_dir(args.svg.as_deref())?;
    tcpwin_common::stop::install_stop_handler();
    let exe = std::env::current_exe().context("locating tcpwin-trace")?;
    if args.path.is_some() || args.scenario.is_some() {
        let json = args.json;
        if !json {
            table::wan_header();
        }
        let mut show = |r: &tcpwin_lab::rows::WanRow| -> Result<()> {
            if json {
                println!("{}", serde_json::to_string(r)?);
            } else {
                table::wan_row(r);
            }
            Ok(())
        };
        let rows = match (&args.path, &args.scenario) {
            (Some(p), _) => {
                let r = wan::path(&exe, *p)?;
                show(&r)?;
                vec![r]
            }
            (None, Some(s)) => wan::scenarios(
                &exe,
                &wan::Plan {
                    scenario: s,
                    quick: args.quick,
                    repeat: args.repeat,
                    ccs: args.cc.clone(),
                    apply_fix: args.apply_fix,
                    baseline: !args.no_baseline,
                },
                &mut show,
            )?,
            (None, None) => unreachable!("checked above"),
        };
        if let Some(d) = &args.svg {
            draw_wan(d, &rows)?;
        }
        if args.path.is_some() {
            if !json {
                table::wan_notes(&rows);
            }
            return Ok(());
        }
        if json {
            return wan::outcome(&wan::accuracy(&rows), &rows);
        }
        return tables(&rows);
    }
    let opts = LabOpts {
        full: args.full,
        json: args.json,
        bytes: args.bytes,
    };
    let pair = Pair::create(&format!("tcpwin-lab-{}", std::process::id()), 1500)
        .context("the lab creates two network namespaces joined by veth")?;
    let result = run_in(&pair, &exe, &opts);
    drop(pair);
    let result = result?;
    if opts.json {
        result.print_json();
    } else {
        result.print_text();
    }
    if let Some(d) = &args.svg {
        let lines: Vec<_> = result.rows.iter().map(|r| r.to_line()).collect();
        let labels: Vec<String> = lines
            .iter()
            .map(|r| {
                format!(
                    "MTU {} GRO {} TSO {} {}",
                    r.mtu,
                    if r.gro { "on" } else { "off" },
                    if r.tso { "on" } else { "off" },
                    r.buffer
                )
            })
            .collect();
        write_svg(
            d,
            "lab.svg",
            crate::ui::plot::bars_svg(
                &format!("scaling_ratio per packet shape (Linux {})", result.kernel),
                "scaling_ratio (256ths)",
                &labels,
                &[(
                    "scaling_ratio",
                    lines
                        .iter()
                        .map(|r| r.scaling_ratio.map(|v| v as f64))
                        .collect(),
                )],
                |v| format!("{v:.0}"),
            ),
        )?;
    }
    Ok(())
}

fn run_in(pair: &Pair, exe: &std::path::Path, opts: &LabOpts) -> Result<LabResult> {
    let conditions = if opts.full { full() } else { QUICK.to_vec() };
    let tracer = Tracer::start(
        exe,
        &["--json", "--netns", "all", "--port", &PORT.to_string()],
        Stdio::piped(),
        Duration::from_secs(60),
    )?;
    let mut matrix = Vec::new();
    for cond in &conditions {
        check_stop()?;
        pair.set_mtu(cond.mtu)?;
        pair.set_offloads(cond.tso, cond.gro)?;
        apply_buffer(pair, cond.buffer)?;
        let rcvbuf = (cond.buffer == Buffer::SoRcvbuf64k).then_some(SMALL_BUF);
        let done = transfer(pair, exe, opts.bytes, rcvbuf)
            .with_context(|| format!("transfer for {cond:?}"))?;
        if !opts.json {
            eprintln!(
                "lab: MTU {} GRO {} TSO {} {}: done",
                cond.mtu,
                on(cond.gro),
                on(cond.tso),
                cond.buffer.name()
            );
        }
        matrix.push((*cond, done));
    }
    // The SYN-ACK window for a 64 KiB buffer (article 004's quantization table), and whether
    // tcp_adv_win_scale changes it.
    pair.set_offloads(false, false)?;
    Pair::sysctl(&pair.b, "net.ipv4.tcp_moderate_rcvbuf", "0")?;
    Pair::sysctl(
        &pair.b,
        "net.ipv4.tcp_rmem",
        &format!("4096 {SMALL_BUF} {SMALL_BUF}"),
    )?;
    let mut handshakes = Vec::new();
    for mtu in [1500, 9000] {
        check_stop()?;
        pair.set_mtu(mtu)?;
        handshakes.push((mtu, transfer(pair, exe, 64 << 10, None)?));
    }
    pair.set_mtu(1500)?;
    let original = Pair::read_sysctl(&pair.b, "net.ipv4.tcp_adv_win_scale")?;
    let mut sweep = Vec::new();
    for n in ADV_WIN_SCALES {
        check_stop()?;
        Pair::sysctl(&pair.b, "net.ipv4.tcp_adv_win_scale", &n.to_string())?;
        sweep.push((n, transfer(pair, exe, 64 << 10, None)?));
    }
    Pair::sysctl(&pair.b, "net.ipv4.tcp_adv_win_scale", &original)?;
    std::thread::sleep(Duration::from_millis(300));
    let (status, out, stderr) = tracer.stop(Duration::from_secs(30))?;
    if !status.success() {
        bail!("the tracer failed: {}", stderr.join("\n"));
    }
    let tcpwin_model::schema::Trace {
        events, summary, ..
    } = parse_trace(&out).context("the tracer's output")?;
    if summary.events_lost > 0 {
        eprintln!(
            "lab: WARNING: the tracer lost {} events: some rows may be incomplete",
            summary.events_lost
        );
    }
    let of = |cookie: u64| -> Vec<&EventLine> {
        events
            .iter()
            .filter(|e| e.id.cookie == Some(cookie))
            .collect()
    };
    let rows = matrix
        .iter()
        .map(|(cond, d)| Row::from_events(*cond, &of(d.receiver.cookie), d))
        .collect();
    let init_wnd = |d: &Done| -> Option<u64> {
        of(d.receiver.cookie)
            .iter()
            .find(|e| e.event == EventKind::Init)
            .map(|e| e.rcv_wnd as u64)
    };
    let handshake = handshakes
        .iter()
        .map(|(mtu, d)| HandshakeRow {
            mtu: *mtu,
            rcvbuf: SMALL_BUF as u64,
            advmss: Some(d.receiver.advmss as u64),
            syn_ack_window: init_wnd(d),
        })
        .collect();
    let sysctl = sweep
        .iter()
        .map(|(n, d)| AdvWinScaleRow {
            tcp_adv_win_scale: *n,
            syn_ack_window: init_wnd(d),
            window_clamp: Some(d.receiver.window_clamp as u64),
        })
        .collect();
    let kernel = crate::host::kconfig::release();
    Ok(LabResult {
        kernel,
        rows,
        handshake,
        sysctl,
    })
}

pub fn on(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

impl Row {
    fn from_events(cond: Condition, events: &[&EventLine], d: &Done) -> Row {
        let setter = events
            .iter()
            .rfind(|e| e.event == EventKind::Ratio)
            .and_then(|e| e.cause.as_ref());
        let last = events.last();
        Row {
            cond,
            scaling_ratio: last.and_then(|e| e.scaling_ratio).map(u64::from),
            first_skb_len: setter.and_then(|c| c.skb_len).map(u64::from),
            first_skb_truesize: setter.and_then(|c| c.skb_truesize).map(u64::from),
            window_clamp: last.map(|e| e.window_clamp as u64),
            sk_rcvbuf: last.map(|e| e.sk_rcvbuf as u64),
            snd_wnd_peak: d.sender.snd_wnd_peak.map(u64::from),
            throughput_bps: d.sender.throughput_bps,
            init_rcv_wnd: events
                .iter()
                .find(|e| e.event == EventKind::Init)
                .map(|e| e.rcv_wnd as u64),
            getsockopt_window_clamp: Some(d.receiver.window_clamp as u64),
        }
    }
}
