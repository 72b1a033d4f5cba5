//! The scaling ratio: little payload per truesize (GRO off, a small MTU, XDP on the ingress
//! interface) makes the window a small share of the buffer.
use super::{
    receiver::{Ctx, Found},
    Limit,
};

/// Ratios under this (70 % of the buffer) are called low: one segment per packet gives 158-162 at
/// MTU 1500 and page-sized buffers (XDP) 85-89, while any aggregation lifts it (two segments
/// merged: 193; GRO on a NIC or veth: 229; MTU 9000: 232-234; all measured on this machine kind).
pub const LOW_RATIO: u8 = 180;
/// The ratio receiver GRO gives at MTU 1500 (veth and NICs, measured on this machine kind).
pub const GRO_RATIO: u8 = 229;

/// A low ratio, with what GRO (or a larger MTU) would give on the same buffer.
pub(super) fn low_ratio(c: &Ctx) -> Option<Found> {
    let r = c.ratio.filter(|r| *r < LOW_RATIO)?;
    let gain = GRO_RATIO as f64 / r as f64;
    Some(Found {
        limit: Limit::LowRatio,
        setting: format!(
            "scaling_ratio={r}: the window is {:.0} % of the buffer (little payload per truesize: GRO off, a small MTU or XDP on the ingress interface)",
            r as f64 * 100.0 / 256.0
        ),
        fix: format!(
            "receiver GRO on (ethtool -K IFACE gro on) or a larger MTU: ratio ~{GRO_RATIO} at MTU 1500, window x{gain:.2} on the same buffer"
        ),
        gain: Some(gain),
    })
}

/// Lifting the ratio alone reaches the rate sized for (a target was given): then the ratio
/// leads, the cheapest fix (no memory).
pub(super) fn alone_reaches(c: &Ctx) -> bool {
    let g = GRO_RATIO as f64 / c.ratio.unwrap_or(GRO_RATIO) as f64;
    c.target.is_some() && c.need.is_some_and(|n| (c.w as f64) * g >= n as f64)
}
