//! `tcpwin-trace check`: the host's receive-window settings audited (kernel era, sysctls of the
//! namespace and global caps, interfaces and their offloads), and with `--bdp RATE:RTT` whether
//! an autotuned and an SO_RCVBUF socket can advertise that bandwidth-delay product here. Exit 0
//! fits, 1 autotuned sockets do not, 3 only SO_RCVBUF sockets do not, 2 error: usable as a
//! health check.
use anyhow::Result;
use tcpwin_model::check::CheckReport;

use crate::{gather::audit, ui};
use tcpwin_model::check::{parse_bdp, Bdp};

use super::args::{KernelArgs, SocketArgs};

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

/// `check`'s exit statuses, for scripts: 0 every kind of socket fits the BDP (or none was asked),
/// 1 autotuned sockets do not (nor, then, need SO_RCVBUF ones be asked about), 3 autotuned
/// sockets fit but a socket that sets SO_RCVBUF cannot (net.core.rmem_max caps it); 2 is an
/// error (the check could not be made).
pub mod exit {
    pub const FITS: i32 = 0;
    pub const AUTOTUNED_DOES_NOT_FIT: i32 = 1;
    pub const ERROR: i32 = 2;
    pub const ONLY_SO_RCVBUF_DOES_NOT_FIT: i32 = 3;
}

/// The exit status of a report (see [`exit`]).
fn exit_code(r: &CheckReport) -> i32 {
    if r.misses("autotuned") {
        exit::AUTOTUNED_DOES_NOT_FIT
    } else if r.misses("so_rcvbuf") {
        exit::ONLY_SO_RCVBUF_DOES_NOT_FIT
    } else {
        exit::FITS
    }
}

/// Runs the audit; Ok(the exit status: [`exit`]).
pub fn run(args: CheckArgs) -> Result<i32> {
    args.kernel.validate()?;
    let scope = args.sockets.scope()?;
    let r = audit::report(&audit::Audit {
        scope: &scope,
        bdp: args.bdp,
        ratio: args.ratio,
        assume_kernel: args.assume_kernel.clone(),
        kernel: &args.kernel.kernel(),
    })?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &r)?;
        std::io::Write::write_all(&mut out, b"\n")?;
    } else {
        ui::check::render(&r, &mut out)?;
    }
    Ok(exit_code(&r))
}
