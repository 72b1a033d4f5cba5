//! `tcpwin-trace check`: the host's receive-window settings audited (kernel era, sysctls of the
//! namespace and global caps, interfaces and their offloads), and with `--bdp RATE:RTT` whether
//! an autotuned and an SO_RCVBUF socket can advertise that bandwidth-delay product here. Exit 0
//! fits, 1 autotuned sockets do not, 3 only SO_RCVBUF sockets do not, 2 error: usable as a
//! health check.
use anyhow::Result;
use tcpwin_model::check::CheckReport;

use crate::{cli::CheckArgs, gather::audit, ui};

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
