//! The host audited for `check` (and `top`'s header): the kernel's era (measured scaling_ratio
//! or tcp_adv_win_scale), the namespace's settings and global caps, the interfaces and their
//! offloads, the ratio to size buffers with and the sockets it was measured on.
use tcpwin_model::units::count;

use anyhow::{bail, Result};
use tcpwin_common::{flag, Offsets};
use tcpwin_model::{
    check::{check, Bdp, CheckReport, Era, DEFAULT_RATIO},
    facts::{HostLimits, SockFacts},
};

use crate::{
    gather::scope::{Namespaces, Scope},
    host::{monotonic_ns, netdev, netns, sysctl},
    kernel::{iter::SocketIter, object, Kernel},
};

/// What to audit: the namespace and sockets of `scope`, a BDP to fit, a ratio to size with.
pub struct Audit<'a> {
    pub scope: &'a Scope,
    pub bdp: Option<Bdp>,
    /// the ratio to size with (None: measured on the scope's sockets)
    pub ratio: Option<u8>,
    /// the kernel release the notes are keyed by (None: this one)
    pub assume_kernel: Option<String>,
    pub kernel: &'a Kernel,
}

/// How many sockets the ratio's source names at most.
const NAMED: usize = 3;

/// The measured ratio of the scope's sockets that received data, with the sockets it comes
/// from in words; None (and why) when there is none.
fn measured(a: &Audit) -> std::result::Result<(u8, String), String> {
    if object::check_privileges().is_err() {
        return Err("not root: the sockets' measured ratios need the socket iterator".into());
    }
    let mut it = SocketIter::load(a.kernel).map_err(|e| format!("{e:#}"))?;
    let o: Offsets = it.offsets;
    let records = it
        .read()
        .map_err(|e| format!("the socket iterator failed: {e:#}"))?;
    let wanted = match a.scope.owners() {
        Some(o) => Some(o.scan().map_err(|e| format!("{e:#}"))?.inodes),
        None => None,
    };
    let ts = monotonic_ns();
    // sockets that received data carry a measured ratio
    let mut v: Vec<(u8, SockFacts)> = records
        .iter()
        .filter(|r| r.bytes_received > 0 && r.flags & flag::RATIO_PRESENT != 0)
        .map(|r| (r.scaling_ratio, SockFacts::from_record(r, &o, None, ts)))
        .filter(|(_, f)| a.scope.matches(&f.id))
        .filter(|(_, f)| {
            wanted
                .as_ref()
                .is_none_or(|w| f.inode.is_some_and(|i| w.contains(&i)))
        })
        .collect();
    if v.is_empty() {
        return Err("no socket asked for here has received data".into());
    }
    v.sort_by_key(|(r, _)| *r);
    let (ratio, _) = v[v.len() / 2];
    let name = |(r, f): &(u8, SockFacts)| format!("{} <- {} ({r})", f.id.local(), f.id.remote());
    let named: Vec<String> = v.iter().take(NAMED).map(name).collect();
    let more = v.len().saturating_sub(NAMED);
    let list = if more > 0 {
        format!("{} and {more} more", named.join(", "))
    } else {
        named.join(", ")
    };
    Ok(match v.len() {
        1 => (
            ratio,
            format!("measured on the one socket that received data: {list}"),
        ),
        n => (
            ratio,
            format!(
                "the median of {} that received data: {list}",
                count(n as u64, "socket")
            ),
        ),
    })
}

/// The ratio to size buffers with, and where it comes from (a flag, the sockets it was
/// measured on, or a fresh socket's and why).
fn ratio(a: &Audit) -> (u8, String) {
    if let Some(r) = a.ratio {
        return (r, "--ratio".into());
    }
    measured(a).unwrap_or_else(|why| {
        (
            DEFAULT_RATIO,
            format!("a fresh socket's: {why}; pass --ratio for another"),
        )
    })
}

/// The host audited: kernel era, the namespace's and global settings, interfaces, and with
/// `--bdp` whether that bandwidth-delay product fits.
pub fn report(a: &Audit) -> Result<CheckReport> {
    if a.scope.namespaces == Namespaces::All {
        bail!("check audits one network namespace at a time (each has its own tcp_rmem, window scaling, interfaces): name one with --netns NAME, or leave it out for this one");
    }
    let ns = a.scope.resolve()?;
    let Some(ns) = ns.first() else {
        bail!("no network namespace to audit");
    };
    let _inside = netns::enter(ns)?;
    let run_in = ns.exec_prefix();
    let kernel = match &a.assume_kernel {
        Some(k) => k.clone(),
        None => a.kernel.release().into(),
    };
    let era = if a.kernel.has_scaling_ratio()? {
        Era::MeasuredRatio
    } else {
        Era::AdvWinScale
    };
    let ratio = match era {
        Era::MeasuredRatio => ratio(a),
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
        a.bdp,
    ))
}
