//! Scale and clamp: window scaling not negotiated (64 KB for the connection's life), and a
//! clamp below what the buffer allows (TCP_WINDOW_CLAMP, a route's `window` metric).
use tcpwin_common::formula::{max_scaled_window, win_from_space};

use super::{
    end::End,
    receiver::{Ctx, Found},
    sizing::sysctl_fix,
    Limit,
};

/// A clamp below this share of what the buffer allows was set by a user or a route.
const CLAMP_SLACK: f64 = 0.95;

/// The largest window the receiver can advertise: its clamp, within what the negotiated scale
/// can express. None when the source does not read them.
pub(super) fn receiver_window(r: End) -> Option<u64> {
    let (clamp, wscale_ok) = (r.now.window_clamp?, r.now.wscale_ok?);
    let shift = if wscale_ok {
        r.now.rcv_wscale.unwrap_or(0)
    } else {
        0
    };
    Some((clamp as u64).min(max_scaled_window(shift)))
}

/// Window scaling not negotiated: which side, and the fix on the side that can give it.
pub(super) fn wscale_off(c: &Ctx) -> Option<Found> {
    if c.wscale_ok {
        return None;
    }
    let (h, words) = (c.h, &c.words);
    let setting = match h.tcp_window_scaling {
        Some(false) => "window scaling off on this host (net.ipv4.tcp_window_scaling=0): the window stays <= 65535 for the connection's life".to_string(),
        Some(true) => "the peer did not offer window scaling in its SYN: the window stays <= 65535 for the connection's life".into(),
        None => "window scaling not negotiated: the window stays <= 65535 for the connection's life".into(),
    };
    let fix = match h.tcp_window_scaling {
        Some(false) => format!(
            "{}, on new connections; {words}",
            sysctl_fix(h, "net.ipv4.tcp_window_scaling", "1".into(), false)
        ),
        _ => format!("window scaling on the peer (net.ipv4.tcp_window_scaling=1 there) and on every middlebox between; {words}"),
    };
    Some(Found {
        limit: Limit::WscaleOff,
        setting,
        fix,
        gain: c.need.map(|n| n.max(c.w) as f64 / c.w.max(1) as f64),
    })
}

/// A clamp below what the buffer allows, and below what the scale can express: set by the
/// application (TCP_WINDOW_CLAMP) or a route.
pub(super) fn window_clamp(c: &Ctx) -> Option<Found> {
    let bw = c.rcvbuf.zip(c.ratio).map(|(b, r)| win_from_space(b, r))?;
    let clamp = c.clamp;
    if (clamp as f64) >= CLAMP_SLACK * bw as f64 || (clamp as u64) >= max_scaled_window(c.shift) {
        return None;
    }
    let words = &c.words;
    Some(Found {
        limit: Limit::WindowClamp,
        setting: format!(
            "window_clamp={clamp} below the {bw} the buffer allows (TCP_WINDOW_CLAMP by the application, or a route `window` metric)"
        ),
        fix: match c.need {
            Some(n) if n > clamp as u64 => {
                format!("{words}: the clamp must be >= {n}: raise or remove it")
            }
            _ => format!("raise or remove the clamp ({words})"),
        },
        gain: c
            .need
            .map(|n| n.min(bw).max(c.w) as f64 / c.w.max(1) as f64),
    })
}
