//! Every ceiling a connection meets, as a rate at the base RTT, lowest first: what each limit
//! would allow if it were the only one. A window of `B` bytes in flight allows `B / base RTT`
//! (Little's law at the path's minimum RTT), so each ceiling is the bytes its setting lets into
//! flight now or, where the kernel grows it on its own, at the most it can grow to:
//!
//! - `window-scale`: `65535 << rcv_wscale` (65535 without scaling), the handshake's choice;
//! - `window-clamp`: `window_clamp`, where it is below what the buffer gives (set by the
//!   application or a route: autotuning keeps the clamp at the buffer's window otherwise);
//! - `receive-buffer`: the window the receive buffer gives at the measured scaling ratio —
//!   `sk_rcvbuf` where it is locked (SO_RCVBUF) or autotuning is off, else `tcp_rmem[2]`;
//! - `peer-window`: the window the peer advertises now, as a sender alone sees it;
//! - `send-buffer`: `sk_sndbuf` where SO_SNDBUF locks it, else `tcp_wmem[2]`, which autotuning
//!   grows it to (an upper bound: the queue's own overhead and unsent data take a share);
//! - `congestion-window`: `snd_cwnd x mss` now (it moves: a ceiling of this moment);
//! - `path`: the rate delivered now, where the path's queue holds it (the judge's own test of a
//!   queue: see `path::queued`).
//!
//! The verdict names the lowest that binds; the fix says what binds next and at what rate, and
//! with `--target`, every other ceiling below the target and which end can change it.
use tcpwin_common::formula::{max_scaled_window, win_from_space};

use super::{
    end::End,
    path::{queued, QueueEvidence},
    sizing::{ceiling_bps, fmt_rate},
    types::{Ceiling, Kind, Side, Verdict},
};

/// A clamp below this share of the buffer's window is a ceiling of its own.
const CLAMP_BELOW: f64 = 0.95;

/// The connection's ceilings, lowest first, from the ends that were read (none without a base
/// RTT or a moving flow).
pub(super) fn ceilings(v: &Verdict, sender: Option<End>, receiver: Option<End>) -> Vec<Ceiling> {
    let Some(base) = v.base_rtt_us.filter(|b| *b > 0) else {
        return Vec::new();
    };
    if v.rate_bps.is_none_or(|r| r == 0) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut push = |kind: Kind, bytes: u64, from: String| {
        out.push(Ceiling {
            kind,
            end: kind.end().into(),
            bytes,
            rate_bps: ceiling_bps(bytes, base),
            from,
        })
    };
    if let Some(r) = receiver {
        let f = r.now;
        match (f.wscale_ok, f.rcv_wscale) {
            (Some(false), _) => push(
                Kind::WindowScale,
                65535,
                "window scaling not negotiated".into(),
            ),
            (Some(true), Some(s)) => push(
                Kind::WindowScale,
                max_scaled_window(s),
                format!("65535 << rcv_wscale {s}"),
            ),
            _ => {}
        }
        let t = r.host.tcp_rmem;
        let grows = f.rcvbuf_locked == Some(false) && r.host.tcp_moderate_rcvbuf != Some(false);
        let buffer = match (f.sk_rcvbuf, t) {
            (Some(b), Some(t)) if grows => Some((
                (b as u64).max(t[2]),
                format!("autotuning up to tcp_rmem[2] {}", t[2]),
            )),
            (Some(b), _) => Some((
                b as u64,
                if f.rcvbuf_locked == Some(true) {
                    format!("sk_rcvbuf {b} (SO_RCVBUF: autotuning off)")
                } else {
                    format!("sk_rcvbuf {b}")
                },
            )),
            _ => None,
        };
        let buffer_window = buffer
            .zip(f.scaling_ratio)
            .map(|((b, from), ratio)| (win_from_space(b, ratio), from, ratio));
        if let Some((w, from, ratio)) = &buffer_window {
            push(
                Kind::ReceiveBuffer,
                *w,
                format!("{from} at scaling ratio {ratio}/256"),
            );
        }
        let now_window = f
            .sk_rcvbuf
            .zip(f.scaling_ratio)
            .map(|(b, r)| win_from_space(b as u64, r));
        if let (Some(c), Some(bw)) = (f.window_clamp, now_window) {
            if (c as f64) < CLAMP_BELOW * bw as f64 {
                push(Kind::WindowClamp, c as u64, format!("window_clamp {c}"));
            }
        }
    }
    if let Some(s) = sender {
        let f = s.now;
        if receiver.is_none() {
            if let Some(w) = f.snd_wnd {
                push(
                    Kind::PeerWindow,
                    w as u64,
                    format!("the peer advertises {w} B"),
                );
            }
        }
        if let Some(b) = f.sk_sndbuf {
            let (bytes, from) = match (f.sndbuf_locked, s.host.tcp_wmem) {
                (Some(false), Some(t)) => (
                    (b as u64).max(t[2]),
                    format!("autotuning up to tcp_wmem[2] {}", t[2]),
                ),
                (Some(true), _) => (b as u64, format!("sk_sndbuf {b} (SO_SNDBUF)")),
                _ => (b as u64, format!("sk_sndbuf {b}")),
            };
            push(Kind::SendBuffer, bytes, from);
        }
        if let (Some(c), Some(m)) = (f.snd_cwnd, f.mss_cache) {
            push(
                Kind::CongestionWindow,
                c as u64 * m as u64,
                format!("snd_cwnd {c} x mss {m}"),
            );
        }
    }
    // the path is a ceiling where the judge's own test finds its queue holding the flow
    if let (Some(rate), Some(rtt)) = (v.rate_bps, v.rtt_us) {
        let q = QueueEvidence {
            sender,
            receiver,
            rate,
            window: v.window.unwrap_or(0),
            rtt,
            base,
        };
        if queued(&q) {
            out.push(Ceiling {
                kind: Kind::Path,
                end: "path".into(),
                bytes: (rate as u128 * base as u128 / 8_000_000) as u64,
                rate_bps: rate,
                from: format!(
                    "delivers {} with a queue of {} ms",
                    fmt_rate(rate),
                    (rtt - base) / 1000
                ),
            });
        }
    }
    out.sort_by_key(|c| (c.rate_bps, c.kind));
    out
}

/// Two ceilings within this factor of each other bind together.
const TOGETHER: f64 = 1.1;

/// What the fix adds about the other ceilings: what binds next once the named one is lifted
/// (or, within a tenth of it, binds beside it), and with `--target`, every other ceiling below
/// it and which end can change it. Empty when nothing else is known.
pub(super) fn next_words(v: &Verdict) -> String {
    let Some(kind) = Kind::of(v.limit) else {
        return String::new();
    };
    let lifted_to = v.fix.as_ref().and_then(|f| f.ceiling_bps);
    let others: Vec<&Ceiling> = v.ceilings.iter().filter(|c| c.kind != kind).collect();
    let mut parts = Vec::new();
    let mine = v
        .ceilings
        .iter()
        .find(|c| c.kind == kind)
        .map(|c| c.rate_bps);
    if let Some(next) = others.first() {
        // two ceilings within a tenth of each other bind together: lifting one alone gains
        // that tenth at most
        if mine.is_some_and(|m| next.rate_bps as f64 <= TOGETHER * m as f64) {
            parts.push(format!(
                "two limits at once: {} too, at {}: lifting either alone gives {} at most; lift both",
                next.kind.words(),
                fmt_rate(next.rate_bps),
                fmt_rate(next.rate_bps.max(mine.unwrap_or(0)))
            ));
        } else if lifted_to.is_none_or(|l| next.rate_bps < l) {
            parts.push(format!(
                "then: {}, {}",
                next.kind.words(),
                fmt_rate(next.rate_bps)
            ));
        }
    }
    if let Some(t) = v.target_payload_bps {
        let mine = match v.side {
            Side::Sending => "sender",
            _ => "receiver",
        };
        let below: Vec<&&Ceiling> = others.iter().filter(|c| c.rate_bps < t).collect();
        let (here, there): (Vec<&&Ceiling>, Vec<&&Ceiling>) =
            below.into_iter().partition(|c| c.end == mine);
        let list = |cs: &[&&Ceiling]| {
            cs.iter()
                .map(|c| format!("{} {}", c.kind.id(), fmt_rate(c.rate_bps)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !here.is_empty() {
            parts.push(format!("below the target on this end too: {}", list(&here)));
        }
        if !there.is_empty() {
            parts.push(format!(
                "below the target, only the other end (or the path) can lift: {}",
                list(&there)
            ));
        }
    }
    parts.join("; ")
}
