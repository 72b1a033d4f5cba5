//! `lab`: the command's arguments, the lab's runs asked of `tcpwin_lab` with the product's
//! readings handed to it (`Readings`), the tables printed and drawn; and the hidden `transfer`
//! command (the lab's endpoints).
use std::path::PathBuf;

use anyhow::{Context, Result};
use tcpwin_lab::{experiment, pair::Pair, table, wan};
use tcpwin_model::units::{parse_path, PathSpec};

use crate::kernel::object::check_privileges;

mod readings;

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
    /// iperf3 (-w, -R, -P), nginx (sndbuf=, curl --limit-rate), own-pace, py-serve, h2-upload
    /// and https (programs held out of the judge's making: ssh, iperf3 --fq-rate and -b;
    /// Python's http.server; curl uploading to nginx over HTTP/2; nginx over TLS), all (with
    /// --quick: one row per limit family, each once, as the test suite runs it). Exits 1 when
    /// any verdict differs
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

pub fn run(args: LabArgs) -> Result<()> {
    lab(args).map_err(tcpwin_lab::harness::interruption_alone)
}

fn lab(args: LabArgs) -> Result<()> {
    if let Some(f) = &args.from {
        return table::tables_from(f, args.markdown, args.rejudge);
    }
    check_privileges()?;
    tcpwin_lab::plot::svg_dir(args.svg.as_deref())?;
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
                let r = wan::path(&exe, &mut readings::Product::load()?, *p)?;
                show(&r)?;
                vec![r]
            }
            (None, Some(s)) => wan::scenarios(
                &exe,
                &mut readings::Product::load()?,
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
            tcpwin_lab::plot::draw_wan(d, &rows)?;
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
        return table::print_tables(&rows);
    }
    let opts = experiment::LabOpts {
        full: args.full,
        json: args.json,
        bytes: args.bytes,
    };
    let pair = Pair::create(&format!("tcpwin-lab-{}", std::process::id()), 1500)
        .context("the lab creates two network namespaces joined by veth")?;
    let result = experiment::run_in(
        &pair,
        &exe,
        &opts,
        crate::kernel::Kernel::default().release().into(),
    );
    drop(pair);
    let result = result?;
    if opts.json {
        result.print_json();
    } else {
        result.print_text();
    }
    if let Some(d) = &args.svg {
        tcpwin_lab::plot::draw_experiment(d, &result)?;
    }
    Ok(())
}
