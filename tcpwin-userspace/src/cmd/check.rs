//! `tcpwin-trace check`: the host's receive-window settings audited (kernel era, sysctls of the
//! namespace and global caps, interfaces and their offloads), and with `--bdp RATE:RTT` whether
//! an autotuned and an SO_RCVBUF socket can advertise that bandwidth-delay product here. Exit 0
//! fits, 1 autotuned sockets do not, 3 only SO_RCVBUF sockets do not, 2 error: usable as a
//! health check.
use anyhow::Result;

use crate::{cli::CheckArgs, gather::audit, ui};

/// Runs the audit; Ok(the exit status: `tcpwin_model::check::exit`).
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
    Ok(r.exit_code())
}
