//! The receive buffer and autotuning: an SO_RCVBUF request (autotuning off for the socket,
//! perhaps capped by rmem_max), autotuning at `tcp_rmem[2]` or off, TCP memory pressure, and
//! what the running kernel gets wrong about them. Each fix is sized with the kernel's arithmetic:
//! the buffer the measured ratio needs, SO_RCVBUF's doubling, rmem_max capping a request (not
//! autotuning), and the window scale the handshake will choose for it.
use tcpwin_common::formula::{handshake_wscale, max_scaled_window, win_from_space, wscale_for};

use super::{
    fix::{AppFix, Fix},
    limit::Limit,
    receiver::{Ctx, Found, INITIAL_RATIO},
};

/// TCP memory pressure clamps rcv_ssthresh to 4 x advmss.
pub(super) fn memory_pressure(c: &Ctx) -> Option<Found> {
    let pressed = c.h.memory_pressure == Some(true)
        && c.f
            .rcv_ssthresh
            .zip(c.f.advmss)
            .is_some_and(|(s, a)| s <= 4 * a);
    pressed.then(|| Found {
        limit: Limit::MemoryPressure,
        setting: "TCP memory pressure (net.ipv4.tcp_mem) clamps rcv_ssthresh to 4 x advmss".into(),
        text: "raise net.ipv4.tcp_mem (global), or reduce the host's TCP memory use".into(),
        fix: None,
        gain: None,
    })
}

/// The buffer: an application's SO_RCVBUF (locked), else autotuning at its maximum or off.
pub(super) fn receive_buffer(c: &Ctx) -> Option<Found> {
    if c.f.rcvbuf_locked == Some(true) {
        return rcvbuf_locked(c);
    }
    autotune(c)
}

/// The SO_RCVBUF request that gives a window of `w` at the measured ratio, with a handshake
/// scale that can express it: the kernel doubles the request into sk_rcvbuf, and the handshake
/// clamps the scale to the buffer's window at the initial ratio (`ilog2(request) - 15`).
pub(super) fn so_rcvbuf_request(c: &Ctx, w: u64) -> Option<u64> {
    let holds = c.buffer_for(w)?.div_ceil(2);
    let scale = 1u64 << (15 + wscale_for(w) as u32);
    Some(holds.max(scale))
}

/// The fix for an application's buffer: its SO_RCVBUF request sized for `w` (rmem_max raised
/// when it would cap it: a global setting, run in the root namespace); for new connections.
pub(super) fn so_rcvbuf_fix(c: &Ctx, w: u64) -> Option<Fix> {
    let req = so_rcvbuf_request(c, w)?;
    let rmem_max = c.h.rmem_max.unwrap_or(0);
    let mut commands = Vec::new();
    if req > rmem_max {
        commands.push(format!("sysctl -w net.core.rmem_max={req}"));
    }
    let buffer = 2 * req;
    let clamp = win_from_space(buffer, INITIAL_RATIO);
    let wscale = handshake_wscale(clamp, c.tcp_rmem()[2], rmem_max.max(req), clamp);
    Some(c.finish(
        Fix {
            commands,
            app: Some(AppFix::new("SO_RCVBUF", req, c.f.comm.clone())),
            new_connections: true,
            ..Fix::default()
        },
        buffer,
        None,
        wscale,
    ))
}

fn rcvbuf_locked(c: &Ctx) -> Option<Found> {
    let h = c.h;
    let b = c.rcvbuf.unwrap_or(0);
    let capped = h.rmem_max.is_some_and(|m| b == 2 * m);
    let setting = if capped {
        format!(
            "SO_RCVBUF capped by net.core.rmem_max={} (sk_rcvbuf {b} = 2 x rmem_max); autotuning is off for the socket",
            h.rmem_max.unwrap_or(0)
        )
    } else {
        format!(
            "SO_RCVBUF set by the application (sk_rcvbuf {b}); autotuning is off for the socket"
        )
    };
    let fix = c.need().and_then(|w| so_rcvbuf_fix(c, w));
    // named only where lifting it raises the window
    if fix
        .as_ref()
        .is_some_and(|f| f.window.is_some_and(|w| w <= c.w))
    {
        return None;
    }
    let text = match &fix {
        Some(f) => format!("{}: {} (or no SO_RCVBUF: autotuning)", c.words(), f.words()),
        None => format!(
            "a larger SO_RCVBUF request in the application (or none: autotuning), {}",
            c.words()
        ),
    };
    Some(c.found(Limit::RcvbufLocked, setting, fix, Some(text)))
}

fn autotune(c: &Ctx) -> Option<Found> {
    let h = c.h;
    let at_max = c
        .rcvbuf
        .is_some_and(|b| super::sizing::at_max(b, h.tcp_rmem));
    let autotune_off = h.tcp_moderate_rcvbuf == Some(false);
    // still growing while the window binds: the cap it meets, short of a --target rate's window
    if !at_max && !autotune_off && c.target.and(c.need()).is_none() {
        return None;
    }
    let t = c.tcp_rmem();
    let setting = if autotune_off {
        format!(
            "autotuning off (net.ipv4.tcp_moderate_rcvbuf=0): the buffer stays at tcp_rmem[1]={}",
            t[1]
        )
    } else if at_max {
        format!("autotuning reached net.ipv4.tcp_rmem max={} of the socket's namespace (net.core.rmem_max does not cap autotuning)", t[2])
    } else {
        format!("autotuning still grows the buffer (sk_rcvbuf {} now), up to net.ipv4.tcp_rmem max={} of the socket's namespace: the window there falls short", c.rcvbuf.unwrap_or(0), t[2])
    };
    let fix = c.need().and_then(|w| {
        let buffer = c.buffer_for(w)?.max(if autotune_off { t[1] } else { t[2] });
        let mut commands = Vec::new();
        if autotune_off {
            commands.push(c.here("sysctl -w net.ipv4.tcp_moderate_rcvbuf=1".into()));
        }
        let max = t[2].max(buffer);
        if max > t[2] {
            commands.push(c.here(format!(
                "sysctl -w net.ipv4.tcp_rmem='{} {} {max}'",
                t[0], t[1]
            )));
        }
        if commands.is_empty() {
            // the setting already allows the window: not what binds
            return None;
        }
        // a running connection keeps its handshake's scale; one that cannot express the window
        // must be re-opened
        let new_connections = max_scaled_window(c.shift) < w;
        let wscale = if new_connections {
            c.autotuned_wscale(max, 0)
        } else {
            c.shift
        };
        Some(c.finish(
            Fix {
                commands,
                new_connections,
                ..Fix::default()
            },
            max,
            None,
            wscale,
        ))
    });
    if c.need().is_some() && fix.is_none() {
        return None;
    }
    Some(c.found(Limit::AutotuneMax, setting, fix, None))
}

/// What this kernel version gets wrong about the buffer, where it bears on this socket: a
/// factor on the buffer's limit (locked or autotuned), with no command.
pub(super) fn kernel_notes(c: &Ctx) -> Vec<Found> {
    let h = c.h;
    let known = h
        .kernel
        .as_deref()
        .and_then(crate::kernel_notes::Version::parse)
        .map(crate::kernel_notes::notes)
        .unwrap_or_default();
    let locked = c.f.rcvbuf_locked == Some(true);
    let base = c.base;
    known
        .into_iter()
        .filter(|n| match n.id {
            "autotune-regression-6.16" => !locked && base.is_some_and(|b| b >= 10_000),
            "so-rcvbuf-freezes-clamp" => locked,
            "rcvbuf-low-rtt" => !locked && base.is_some_and(|b| b < 1000),
            _ => false,
        })
        .map(|n| Found {
            limit: if locked {
                Limit::RcvbufLocked
            } else {
                Limit::AutotuneMax
            },
            setting: format!("kernel {}: {}", h.kernel.as_deref().unwrap_or("?"), n.text),
            text: "a kernel without this behaviour (see the note)".into(),
            fix: None,
            gain: None,
        })
        .collect()
}
