//! `tcpwin-trace check`: the host's receive-window settings audited (kernel era, sysctls of the
//! namespace and global caps, interfaces and their offloads), and with `--bdp RATE:RTT` whether
//! an autotuned and an SO_RCVBUF socket can advertise that bandwidth-delay product here. Exit 0
//! fits, 1 does not, 2 error: usable as a health check.
use std::path::PathBuf;

use anyhow::Result;
use tcpwin_model::check::{check, parse_bdp, Bdp, CheckReport, Era, DEFAULT_RATIO};

use crate::{
    host::{netdev, netns, sysctl},
    kernel::{btf::Resolver, btf::VMLINUX, iter::SocketIter, object},
    view,
};

#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// Bandwidth and RTT to size windows for, as iperf3 / tc write them: 1gbit:18ms
    #[arg(long, value_name = "RATE:RTT", value_parser = parse_bdp)]
    pub bdp: Option<Bdp>,
    /// The scaling ratio to size buffers with (default: the median measured on this namespace's
    /// sockets that received data, else a fresh socket's 128)
    #[arg(long, value_name = "1-255", value_parser = clap::value_parser!(u8).range(1..))]
    pub ratio: Option<u8>,
    /// A network namespace from `ip netns list` (default: the caller's)
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
    /// The report as one JSON object
    #[arg(long)]
    pub json: bool,
    /// Kernel BTF to learn the kernel's era from
    #[arg(long, default_value = VMLINUX, value_name = "PATH")]
    pub btf: PathBuf,
}

/// The ratio to size buffers with, and where it comes from.
fn ratio(args: &CheckArgs) -> (u8, String) {
    if let Some(r) = args.ratio {
        return (r, "--ratio".into());
    }
    let fresh = |why: String| {
        (
            DEFAULT_RATIO,
            format!("a fresh socket's ({why}; pass --ratio for another)"),
        )
    };
    if object::check_privileges().is_err() {
        return fresh("not root: the sockets' measured ratios need the socket iterator".into());
    }
    let records = SocketIter::load(&args.btf, None).and_then(|mut it| it.read());
    match records {
        Ok(r) => {
            // sockets that received data carry a measured ratio
            let mut v: Vec<u8> = r
                .iter()
                .filter(|s| {
                    s.bytes_received > 0 && s.flags & tcpwin_common::flag::RATIO_PRESENT != 0
                })
                .map(|s| s.scaling_ratio)
                .collect();
            if v.is_empty() {
                return fresh("no socket here has received data".into());
            }
            v.sort_unstable();
            (
                v[v.len() / 2],
                format!("the median of {} sockets that received data", v.len()),
            )
        }
        Err(e) => fresh(format!("the socket iterator failed: {e:#}")),
    }
}

pub fn report(args: &CheckArgs) -> Result<CheckReport> {
    let ns = netns::resolve(args.netns.as_deref())?;
    let _inside = netns::enter(&ns[0])?;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let era = match Resolver::from_file(&args.btf)?.member("tcp_sock", "scaling_ratio") {
        Some(_) => Era::MeasuredRatio,
        None => Era::AdvWinScale,
    };
    let ratio = match era {
        Era::MeasuredRatio => ratio(args),
        Era::AdvWinScale => {
            let n = sysctl::tcp_adv_win_scale().unwrap_or(1);
            (
                tcpwin_common::formula::adv_win_scale_ratio(n).min(255) as u8,
                format!("tcp_adv_win_scale={n}"),
            )
        }
    };
    Ok(check(
        kernel,
        era,
        ratio,
        sysctl::host_limits(),
        netdev::interfaces()?,
        args.bdp,
    ))
}

/// Runs the audit; Ok(true) when everything asked fits.
pub fn run(args: CheckArgs) -> Result<bool> {
    let r = report(&args)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &r)?;
        std::io::Write::write_all(&mut out, b"\n")?;
    } else {
        view::check::render(&r, &mut out)?;
    }
    Ok(r.fits_all())
}
