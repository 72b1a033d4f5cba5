//! The scaling ratio: little payload per truesize (GRO off, a small MTU, XDP on the ingress
//! interface) makes the window a small share of the buffer. GRO is advised only where the
//! interface the connection's packets use has it off (read in the socket's namespace); a
//! connection measures its ratio on its first packets, so only new ones get the new ratio.
use super::{
    fix::Fix,
    limit::Limit,
    receiver::{Ctx, Found},
};

/// Ratios under this (70 % of the buffer) are called low: one segment per packet gives 158-162 at
/// MTU 1500 and page-sized buffers (XDP) 85-89, while any aggregation lifts it (two segments
/// merged: 193; GRO on a NIC or veth: 229; MTU 9000: 232-234; all measured on this machine kind).
pub const LOW_RATIO: u8 = 180;
/// The ratio receiver GRO gives at MTU 1500 when it merges a burst (veth and NICs, measured on
/// this machine kind).
pub const GRO_RATIO: u8 = 229;
/// The ratio GRO gives at least: two segments merged (measured on a stream arriving one frame at
/// a time, as the lab's long path delivers it). A fix's window is promised at this ratio: the
/// one it reaches depends on how many segments arrive together, which no setting decides.
pub const GRO_RATIO_FLOOR: u8 = 193;

/// A low ratio, with what GRO would give on the same buffer when it is off on the interface.
pub(super) fn low_ratio(c: &Ctx) -> Option<Found> {
    let r = c.ratio.filter(|r| *r < LOW_RATIO)?;
    let gain = GRO_RATIO_FLOOR as f64 / r as f64;
    let gain_up_to = GRO_RATIO as f64 / r as f64;
    let iface = c.peer().and_then(|p| c.h.iface_to(p));
    let setting = format!(
        "scaling_ratio={r}: the window is {:.0} % of the buffer (little payload per truesize: GRO off, a small MTU or XDP on the ingress interface)",
        r as f64 * 100.0 / 256.0
    );
    let (text, fix) = match iface {
        Some(i) if i.gro == Some(false) && i.xdp != Some(true) => {
            let fix = c.finish(
                Fix {
                    commands: vec![c.here(format!("ethtool -K {} gro on", i.name))],
                    new_connections: true,
                    ..Fix::default()
                },
                c.rcvbuf.unwrap_or(0),
                Some(GRO_RATIO_FLOOR),
                c.shift,
            );
            (
                format!(
                    "{} (ratio {GRO_RATIO_FLOOR}-{GRO_RATIO} at MTU 1500 by how many segments arrive together, window x{gain:.2}-x{gain_up_to:.2} on the same buffer)",
                    fix.words()
                ),
                Some(fix),
            )
        }
        Some(i) if i.xdp == Some(true) => (
            format!(
                "an XDP program on {} hands the stack page-sized buffers: a larger buffer makes up for the ratio (or no XDP there)",
                i.name
            ),
            None,
        ),
        Some(i) if i.gro == Some(true) => (
            format!(
                "GRO is on on {} and the packets still arrive one segment each (the sender's pacing, a driver that does not aggregate): a larger buffer or MTU makes up for the ratio",
                i.name
            ),
            None,
        ),
        _ => (
            format!("receiver GRO on the interface the packets arrive on, or a larger MTU: ratio {GRO_RATIO_FLOOR}-{GRO_RATIO} at MTU 1500, window x{gain:.2}-x{gain_up_to:.2} on the same buffer"),
            None,
        ),
    };
    Some(Found {
        limit: Limit::LowRatio,
        setting,
        gain: Some(gain),
        text,
        fix,
    })
}

/// Lifting the ratio alone reaches the rate sized for (a target was given, GRO can be turned
/// on; the window after it carries the target at the base RTT, headroom or not): then the ratio
/// leads, the cheapest fix (no memory).
pub(super) fn alone_reaches(c: &Ctx, found: &Found) -> bool {
    // the window the kernel allows after it: within the handshake's scale (an SO_RCVBUF
    // socket's scale may stop it short of what the buffer would give at GRO's ratio)
    let Some(after) = found.fix.as_ref().and_then(|f| f.window) else {
        return false;
    };
    c.target.is_some() && c.bdp().is_some_and(|n| after >= n)
}
