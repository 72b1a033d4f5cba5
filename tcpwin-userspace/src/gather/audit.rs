//! The host audited for `check` (and `top`'s header): the kernel's era (measured scaling_ratio
//! or tcp_adv_win_scale), the namespace's settings and global caps, the interfaces and their
//! offloads, the ratio to size buffers with.
use anyhow::Result;
use tcpwin_model::{
    check::{check, CheckReport, Era, DEFAULT_RATIO},
    facts::HostLimits,
};

use crate::{
    cli::CheckArgs,
    host::{netdev, netns, sysctl},
    kernel::{cache, iter::SocketIter, object},
};

/// The ratio to size buffers with, and where it comes from.
fn ratio(args: &CheckArgs) -> (u8, String) {
    if let Some(r) = args.ratio {
        return (r, "--ratio".into());
    }
    let fresh = |why: String| {
        (
            DEFAULT_RATIO,
            format!("a fresh socket's: {why}; pass --ratio for another"),
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

/// The host audited: kernel era, the namespace's and global settings, interfaces, and with
/// `--bdp` whether that bandwidth-delay product fits.
pub fn report(args: &CheckArgs) -> Result<CheckReport> {
    let ns = netns::resolve(args.netns.as_deref())?;
    let _inside = netns::enter(&ns[0])?;
    let run_in = ns[0].exec_prefix();
    let kernel = match &args.assume_kernel {
        Some(k) => k.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string(),
    };
    let era = if cache::has_scaling_ratio(&args.btf)? {
        Era::MeasuredRatio
    } else {
        Era::AdvWinScale
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
        HostLimits {
            run_in,
            ..sysctl::host_limits()
        },
        netdev::interfaces()?,
        args.bdp,
    ))
}
