//! Scale and clamp: window scaling not negotiated (64 KB for the connection's life), a window
//! held by the scale its handshake chose (`65535 << rcv_wscale`: an SO_RCVBUF set before
//! connect/listen, a route's `window` metric, a clamp set before the handshake, small caps
//! when the connection opened: the why says which the reading rules out), and a
//! clamp below what the buffer allows (TCP_WINDOW_CLAMP, a route's `window` metric).
use tcpwin_common::formula::{max_scaled_window, win_from_space, wscale_for};

use super::{
    buffer::so_rcvbuf_fix,
    end::End,
    fix::{AppFix, Fix, FixEnd},
    limit::Limit,
    receiver::{Ctx, Found},
};
use crate::facts::Route;

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

/// A window advertised below this share of the receiver's largest, at both readings, is what
/// the sender was given instead.
const ADVERTISED_BELOW: f64 = 0.9;

/// The window a receiver advertised below `cap` (its largest) at its readings: its buffer partly
/// full at an ACK (an application that drains it in bursts: nginx taking an upload into its body
/// buffer, 54 KB advertised under a 98 KB clamp). Where both readings' windows were below it,
/// their mean (an interval's rate follows the window's average, not either reading: 56 KB then
/// 85 KB under a 98 KB clamp); where one was, that one (the other may catch the reader just
/// drained, the window back at the clamp); None with one reading, or where neither was below.
pub(super) fn advertised_below(r: End, cap: u64) -> Option<u64> {
    let below = |w: Option<u32>| {
        w.map(u64::from)
            .filter(|w| *w > 0 && (*w as f64) < ADVERTISED_BELOW * cap as f64)
    };
    let before = r.before?;
    match (below(before.rcv_wnd), below(r.now.rcv_wnd)) {
        (Some(a), Some(b)) => Some((a + b) / 2),
        (a, b) => a.or(b),
    }
}

/// The route to the peer, when it carries a `window` metric.
fn route_window<'a>(c: &Ctx<'a>) -> Option<&'a Route> {
    c.h.route_to(c.peer()?).filter(|r| r.window.is_some())
}

/// The fix for a route's `window` metric: the route changed without it (new connections get
/// the scale the host's caps give).
fn route_fix(c: &Ctx, r: &Route, w: u64) -> Fix {
    let t = c.tcp_rmem();
    let buffer = c
        .buffer_for(w)
        .unwrap_or(t[2])
        .min(t[2])
        .max(c.rcvbuf.unwrap_or(0));
    c.finish(
        Fix {
            commands: vec![c.here(format!("ip route change {}", r.spec()))],
            new_connections: true,
            ..Fix::default()
        },
        buffer,
        None,
        c.autotuned_wscale(t[2], 0),
    )
}

/// Window scaling not negotiated: which side refused it, and the fix on the end that owns that
/// setting: this host's (`net.ipv4.tcp_window_scaling=0` here); the sending host's, read here
/// too (its namespace's command); or the peer's, not read here (its command, to run on that
/// host). Scaling on at both ends read here: a middlebox stripped the option, no command lifts it.
pub(super) fn wscale_off(c: &Ctx) -> Option<Found> {
    if c.wscale_ok {
        return None;
    }
    let h = c.h;
    let t = c.tcp_rmem();
    let fixed = |cmd: String, end: FixEnd, on_peer: Option<std::net::IpAddr>| {
        c.finish(
            Fix {
                commands: vec![cmd],
                new_connections: true,
                end: Some(end),
                on_peer,
                ..Fix::default()
            },
            c.rcvbuf.unwrap_or(t[2]).max(t[2]),
            None,
            c.autotuned_wscale(t[2], 0),
        )
    };
    const ON: &str = "sysctl -w net.ipv4.tcp_window_scaling=1";
    let (setting, fix) = match (h.tcp_window_scaling, c.peer_host.map(|p| p.tcp_window_scaling)) {
        (Some(false), _) => (
            "window scaling off on this host (net.ipv4.tcp_window_scaling=0): the window stays <= 65535 for the connection's life".to_string(),
            Some(fixed(c.here(ON.into()), FixEnd::Receiver, None)),
        ),
        // the sending end read here too: its namespace's own setting
        (_, Some(Some(false))) => (
            "window scaling off on the sending host (its net.ipv4.tcp_window_scaling=0): the window stays <= 65535 for the connection's life".to_string(),
            c.peer_host.map(|p| {
                let cmd = match &p.run_in {
                    Some(prefix) => format!("{prefix} {ON}"),
                    None => ON.to_string(),
                };
                fixed(cmd, FixEnd::Sender, None)
            }),
        ),
        (_, Some(Some(true))) => (
            "window scaling on at both ends, yet not negotiated: a middlebox between them strips the option from the SYN; the window stays <= 65535 for the connection's life".to_string(),
            None,
        ),
        // only this end read: the peer's host refused it (or a middlebox), its command
        (Some(true), _) => (
            "the peer did not offer window scaling in its SYN (its net.ipv4.tcp_window_scaling=0, or a middlebox stripped the option): the window stays <= 65535 for the connection's life".to_string(),
            c.peer()
                .map(|addr| fixed(ON.to_string(), FixEnd::Sender, Some(addr))),
        ),
        (None, _) => (
            "window scaling not negotiated: the window stays <= 65535 for the connection's life".to_string(),
            None,
        ),
    };
    let text = match &fix {
        Some(f) if f.on_peer.is_some() => format!(
            "{}: {} (and on every middlebox between, window scaling let through)",
            c.words(),
            f.words()
        ),
        Some(f) => format!("{}: {}", c.words(), f.words()),
        None => format!(
            "window scaling on every middlebox between the two hosts; {}",
            c.words()
        ),
    };
    let mut found = c.found(Limit::WscaleOff, setting, fix, Some(text));
    // without a fix here (the peer's setting), the gain of the window the rate needs
    found.gain = found
        .gain
        .or_else(|| c.need().map(|n| n.max(c.w) as f64 / c.w.max(1) as f64));
    Some(found)
}

/// How far the buffer's window must pass the scale's for the scale to be the limit named.
const SCALE_MATERIAL: f64 = 1.1;

/// The window held by the scale its handshake chose: the clamp reaches `65535 << rcv_wscale`
/// while the buffer allows (or autotuning would grow it to) more. Why the scale is small: a
/// route's `window` metric, an SO_RCVBUF set before the handshake, or smaller caps then.
pub(super) fn scale_cap(c: &Ctx) -> Option<Found> {
    if !c.wscale_ok {
        return None;
    }
    let cap = max_scaled_window(c.shift);
    let ratio = c.ratio?;
    let buffer_window = win_from_space(c.rcvbuf?, ratio);
    let grows = c.f.rcvbuf_locked != Some(true)
        && c.h.tcp_moderate_rcvbuf != Some(false)
        && win_from_space(c.tcp_rmem()[2], ratio) > cap;
    // a scale that stops the window within a tenth of what the buffer gives is the buffer's own
    // limit (an SO_RCVBUF's scale is chosen from that buffer): the buffer's fix names the scale
    // it needs
    if (c.clamp as u64) < cap || (buffer_window as f64 <= SCALE_MATERIAL * cap as f64 && !grows) {
        return None;
    }
    let need = c.need();
    if need.is_some_and(|n| n <= cap) {
        return None;
    }
    let w = need.unwrap_or(2 * cap);
    let (why, fix) = if let Some(r) = route_window(c) {
        (
            format!(
                "the route {} carries `window {}`: it held the handshake's window scale to {}",
                r.spec(),
                r.window.unwrap_or(0),
                c.shift
            ),
            Some(route_fix(c, r, w)),
        )
    } else if c.f.rcvbuf_locked == Some(true) {
        (
            format!(
                "an SO_RCVBUF set before the handshake (sk_rcvbuf {}) held its window scale to {}",
                c.rcvbuf.unwrap_or(0),
                c.shift
            ),
            so_rcvbuf_fix(c, w),
        )
    } else {
        let t = c.tcp_rmem();
        let now = c.autotuned_wscale(t[2], 0);
        if now > c.shift {
            chosen_elsewhere(c, now, w)
        } else {
            // the caps now give the same scale: they chose it, and raising tcp_rmem[2] gives
            // new connections one that can express the window
            let max = 1u64 << (15 + wscale_for(w) as u32);
            let fix = c.finish(
                Fix {
                    commands: vec![c.here(format!(
                        "sysctl -w net.ipv4.tcp_rmem='{} {} {}'",
                        t[0],
                        t[1],
                        max.max(t[2])
                    ))],
                    new_connections: true,
                    ..Fix::default()
                },
                max.max(t[2]),
                None,
                c.autotuned_wscale(max.max(t[2]), 0),
            );
            (
                format!(
                    "the host's caps (tcp_rmem[2] {}, rmem_max {}) give window scale {}",
                    t[2],
                    c.h.rmem_max.unwrap_or(0),
                    c.shift
                ),
                Some(fix),
            )
        }
    };
    let setting = format!(
        "{why}: the window stays <= {cap} (65535 << {}) for the connection's life, whatever the buffer ({buffer_window} B of window now)",
        c.shift
    );
    let text = match &fix {
        Some(f) if f.app.as_ref().is_some_and(|a| a.option == "TCP_WINDOW_CLAMP") => Some(format!(
            "{}: find which: open a new connection the same way and read its scale (`tcpwin-trace ss -e`): {} means the caps were smaller when this one opened, and re-opening it is the fix; {} again means a clamp set before connect()/listen(): {}",
            c.words(),
            c.autotuned_wscale(c.tcp_rmem()[2], 0),
            c.shift,
            f.words()
        )),
        _ => None,
    };
    Some(c.found(Limit::ScaleCap, setting, fix, text))
}

/// The scale this connection got is smaller than the one the host's caps give new connections
/// now (`now`): the caps did not choose it, unless they changed since it opened. What else can
/// (`tcp_select_initial_window`: the space offered within `window_clamp`): a clamp set before
/// connect()/listen() (TCP_WINDOW_CLAMP by the application, on its listener, or a BPF sockops
/// program; autotuning rewrites the clamp later, so the clamp now cannot rule it out), a route's
/// `window` metric, a locked SO_RCVBUF. The why names each and what this reading rules out; the
/// fix is the test that tells them apart and the application's change.
fn chosen_elsewhere(c: &Ctx, now: u8, w: u64) -> (String, Option<Fix>) {
    let t = c.tcp_rmem();
    let mut ruled_out = Vec::new();
    match c.peer().and_then(|p| c.h.route_to(p)) {
        Some(r) => ruled_out.push(format!("no `window` metric on the route {} now", r.spec())),
        None if c.peer().is_some() && !c.h.routes.is_empty() => {
            ruled_out.push("no route to the peer carries a `window` metric now".into())
        }
        None => {}
    }
    if c.f.rcvbuf_locked == Some(false) {
        ruled_out.push("SO_RCVBUF not set (the buffer is not locked)".into());
    }
    let why = format!(
        "the handshake chose window scale {shift}, yet this host's caps (tcp_rmem[2] {}, rmem_max {}) give new connections {now}: either the caps were smaller when it opened, or a window_clamp set before connect()/listen() held the scale (TCP_WINDOW_CLAMP by the application or on its listener, or a BPF sockops program; autotuning rewrites the clamp since, so the clamp now ({}) cannot rule it out){}",
        t[2],
        c.h.rmem_max.unwrap_or(0),
        c.clamp,
        if ruled_out.is_empty() {
            String::new()
        } else {
            format!("; ruled out by this reading: {}", ruled_out.join(", "))
        },
        shift = c.shift,
    );
    // a clamp asked before the handshake at the window needed gives a scale that expresses it;
    // autotuning then rewrites the clamp as the buffer grows, so the window reaches what that
    // scale and the buffer allow (the lab: a clamp of 942235 gave scale 4 and 1048560)
    let fix = c.finish(
        Fix {
            app: Some(AppFix::new("TCP_WINDOW_CLAMP", w, c.f.comm.clone())),
            new_connections: true,
            ..Fix::default()
        },
        t[2],
        None,
        c.autotuned_wscale(t[2], w).min(now),
    );
    (why, Some(fix))
}

/// A clamp below what the buffer allows, and below what the scale can express: set by the
/// application (TCP_WINDOW_CLAMP) or a route's `window` metric.
pub(super) fn window_clamp(c: &Ctx) -> Option<Found> {
    let bw = c.rcvbuf.zip(c.ratio).map(|(b, r)| win_from_space(b, r))?;
    let clamp = c.clamp;
    if (clamp as f64) >= CLAMP_SLACK * bw as f64 || (clamp as u64) >= max_scaled_window(c.shift) {
        return None;
    }
    let need = c.need();
    if need.is_some_and(|n| n <= clamp as u64) {
        return None;
    }
    let w = need.unwrap_or(bw);
    let route = route_window(c).filter(|r| r.window.is_some_and(|x| x as u64 >= clamp as u64));
    let (setting, fix) = match route {
        Some(r) => (
            format!(
                "window_clamp={clamp} below the {bw} the buffer allows: the route {} carries `window {}`",
                r.spec(),
                r.window.unwrap_or(0)
            ),
            route_fix(c, r, w),
        ),
        None => (
            format!(
                "window_clamp={clamp} below the {bw} the buffer allows: TCP_WINDOW_CLAMP set by the application"
            ),
            // the window is then the clamp asked, within what the buffer gives
            c.within(
                c.finish(
                    Fix {
                        app: Some(AppFix::new("TCP_WINDOW_CLAMP", w, c.f.comm.clone())),
                        ..Fix::default()
                    },
                    c.rcvbuf.unwrap_or(0),
                    None,
                    c.shift,
                ),
                w,
            ),
        ),
    };
    let text = format!("{}: {} (or remove the clamp)", c.words(), fix.words());
    Some(c.found(Limit::WindowClamp, setting, Some(fix), Some(text)))
}
