//! The receive buffer and autotuning: an SO_RCVBUF request (autotuning off for the socket,
//! perhaps capped by rmem_max), autotuning at `tcp_rmem[2]` or off, TCP memory pressure, and
//! what the running kernel gets wrong about them.
use super::{
    receiver::{Ctx, Found},
    sizing::sysctl_fix,
    Limit,
};

/// A buffer at this share of `tcp_rmem[2]` has reached autotuning's maximum.
const AT_MAX: f64 = 0.95;

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
        fix: "raise net.ipv4.tcp_mem (global), or reduce the host's TCP memory use".into(),
        gain: None,
    })
}

/// The buffer: an application's SO_RCVBUF (locked), else autotuning at its maximum or off.
pub(super) fn receive_buffer(c: &Ctx) -> Option<Found> {
    if c.f.rcvbuf_locked == Some(true) {
        return Some(rcvbuf_locked(c));
    }
    autotune(c)
}

fn rcvbuf_locked(c: &Ctx) -> Found {
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
    // the kernel doubles an SO_RCVBUF request: ask half the buffer
    let rmem_max = h.rmem_max.unwrap_or(0);
    let fix = c.sized(b, &|bytes: &str| {
        let half = bytes
            .parse::<u64>()
            .map(|n| n.div_ceil(2).to_string())
            .unwrap_or_else(|_| format!("{bytes}/2"));
        let raise = half.parse::<u64>().map_or(true, |h| h > rmem_max);
        if capped && raise {
            format!(
                "{} and an SO_RCVBUF request >= {half} (or none: autotuning)",
                sysctl_fix(h, "net.core.rmem_max", half.clone(), true)
            )
        } else {
            format!("an SO_RCVBUF request >= {half} in the application (or none: autotuning)")
        }
    });
    let gain = c
        .need
        .and_then(|n| c.buffer_for(n))
        .map(|nb| (nb.max(b) as f64) / b.max(1) as f64);
    Found {
        limit: Limit::RcvbufLocked,
        setting,
        fix,
        gain,
    }
}

fn autotune(c: &Ctx) -> Option<Found> {
    let h = c.h;
    let at_max = h
        .tcp_rmem
        .map(|t| t[2])
        .zip(c.rcvbuf)
        .is_some_and(|(m, b)| b as f64 >= AT_MAX * m as f64);
    let autotune_off = h.tcp_moderate_rcvbuf == Some(false);
    if !at_max && !autotune_off {
        return None;
    }
    let t = h.tcp_rmem.unwrap_or([4096, 131072, 6291456]);
    let (setting, current) = if autotune_off {
        (
            format!(
                "autotuning off (net.ipv4.tcp_moderate_rcvbuf=0): the buffer stays at tcp_rmem[1]={}",
                t[1]
            ),
            t[1],
        )
    } else {
        (
            format!(
                "autotuning reached net.ipv4.tcp_rmem max={} of the socket's namespace (net.core.rmem_max does not cap autotuning)",
                t[2]
            ),
            t[2],
        )
    };
    let fix = c.sized(current, &|bytes: &str| {
        if autotune_off {
            format!(
                "{}, or {}",
                sysctl_fix(h, "net.ipv4.tcp_moderate_rcvbuf", "1".into(), false),
                sysctl_fix(
                    h,
                    "net.ipv4.tcp_rmem",
                    format!(
                        "'{} {bytes} {}'",
                        t[0],
                        t[2].max(bytes.parse().unwrap_or(0))
                    ),
                    false
                )
            )
        } else {
            sysctl_fix(
                h,
                "net.ipv4.tcp_rmem",
                format!("'{} {} {bytes}'", t[0], t[1]),
                false,
            )
        }
    });
    let gain = c
        .need
        .and_then(|n| c.buffer_for(n))
        .map(|nb| nb.max(current) as f64 / current.max(1) as f64);
    Some(Found {
        limit: Limit::AutotuneMax,
        setting,
        fix,
        gain,
    })
}

/// What this kernel version gets wrong about the buffer, where it bears on this socket: a
/// factor on the buffer's limit (locked or autotuned).
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
            fix: "a kernel without this behaviour (see the note)".into(),
            gain: None,
        })
        .collect()
}
