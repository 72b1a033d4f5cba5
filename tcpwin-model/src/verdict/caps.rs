//! The receiver's caps: which of its settings makes the window what it is. Each family decides
//! its own (`scale`: scaling and clamps; `buffer`: the receive buffer and autotuning; `ratio`:
//! the scaling ratio); here they are asked in order, the primary chosen, the others kept as
//! factors with the gain each change would give.
use super::{
    buffer,
    end::End,
    fix::Fix,
    limit::Limit,
    ratio,
    receiver::{Ctx, Found},
    scale::{self, receiver_window},
    sizing::Sizing,
    types::{Factor, Verdict},
};

/// The receiver's caps: the primary limit into `v`, the others as factors. `window`: the
/// window judged (None: one snapshot, the cap it would meet); `peer`: the sending end, where it
/// was read too (a setting of its host is fixed there).
pub(super) fn caps(
    v: &mut Verdict,
    r: End,
    peer: Option<End>,
    window: Option<u64>,
    target: Option<u64>,
) {
    let f = r.now;
    let Some(w) = window.or_else(|| receiver_window(r)) else {
        v.setting = Some("window_clamp or wscale_ok not read by this source".into());
        return;
    };
    v.window.get_or_insert(w);
    let wscale_ok = f.wscale_ok.unwrap_or(true);
    let base = v.base_rtt_us.or_else(|| f.receiver_rtt_us());
    let sizing = base.map(|b| Sizing { base_us: b, target });
    let c = Ctx {
        f,
        h: r.host,
        w,
        clamp: f.window_clamp.unwrap_or(0),
        wscale_ok,
        shift: f.rcv_wscale.filter(|_| wscale_ok).unwrap_or(0),
        base,
        sizing,
        ratio: f.scaling_ratio,
        rcvbuf: f.sk_rcvbuf.map(u64::from),
        target,
        peer_host: peer.map(|p| p.host),
    };
    let mut found: Vec<Found> = Vec::new();
    found.extend(scale::wscale_off(&c));
    found.extend(buffer::memory_pressure(&c));
    found.extend(scale::window_clamp(&c));
    found.extend(scale::scale_cap(&c));
    found.extend(buffer::receive_buffer(&c));
    found.extend(ratio::low_ratio(&c));
    found.extend(buffer::kernel_notes(&c));
    // the primary: the first found, except that a low ratio leads when fixing it alone reaches
    // the target (the cheapest fix: no memory), and a buffer setting (the operator's choice and
    // the bigger lever) otherwise
    let ratio_alone = found
        .iter()
        .position(|x| x.limit == Limit::LowRatio)
        .filter(|i| ratio::alone_reaches(&c, &found[*i]));
    // a cap whose fix would not widen the window (another cap binds first) does not lead
    let lifts = |x: &Found| widens(x.fix.as_ref(), c.w);
    if let Some(i) = found.iter().position(lifts).filter(|i| *i > 0) {
        if ratio_alone.is_none() {
            let x = found.remove(i);
            found.insert(0, x);
        }
    }
    let primary = match (ratio_alone, found.first()) {
        (Some(i), _)
            if !matches!(
                found[0].limit,
                Limit::WscaleOff | Limit::MemoryPressure | Limit::WindowClamp
            ) =>
        {
            i
        }
        (_, Some(_)) => 0,
        (_, None) => {
            // autotuning still has room: the window grows with the transfer
            v.limit = Limit::NotWindowLimited;
            v.setting = Some(format!(
                "autotuning can still grow the buffer (sk_rcvbuf {} of tcp_rmem max {})",
                c.rcvbuf.unwrap_or(0),
                c.h.tcp_rmem
                    .map(|t| t[2].to_string())
                    .unwrap_or_else(|| "?".into())
            ));
            return;
        }
    };
    let p = found.remove(primary);
    v.limit = p.limit;
    v.setting = Some(p.setting);
    v.suggested = Some(p.text);
    v.fix = p.fix;
    // a factor whose fix would not widen the window now (the primary holds it where it is:
    // GRO on under a scale that stops the window at 524280) keeps its place, not its fix:
    // it is the next to lift once the primary is
    let primary = p.limit;
    v.factors.extend(found.into_iter().map(|x| {
        let now = lifts(&x);
        Factor {
            limit: x.limit,
            setting: x.setting,
            suggested: if now {
                x.text
            } else {
                format!(
                    "nothing now: {primary} holds the window at {} B whatever this changes; once it is lifted: {}",
                    c.w, x.text
                )
            },
            fix: x.fix.filter(|_| now),
            window_gain: x.gain.filter(|_| now),
        }
    }));
}

/// A fix that gives a larger window than `window` (or names none: it lifts what it says).
fn widens(fix: Option<&Fix>, window: u64) -> bool {
    fix.and_then(|f| f.window).is_none_or(|w| w > window)
}

/// The receiver's caps that would bind were the window the limit, as factors of `v` (saying
/// `note` as their fix's preface); `peer`: the sending end, where it was read too.
pub(super) fn potential_caps(
    v: &mut Verdict,
    r: End,
    peer: Option<End>,
    window: u64,
    target: Option<u64>,
    note: &str,
) {
    let mut probe = v.clone();
    probe.factors.clear();
    caps(&mut probe, r, peer, Some(window), target);
    // a potential gain only where there is one: a cap whose fix would give no larger window
    // (autotuning already at the window its fix would size: 848673 B now, 847975 after) is not
    // a factor of a window that does not bind
    if !probe.limit.is_receiver_cap() {
        return;
    }
    if widens(probe.fix.as_ref(), window) {
        v.factors.push(Factor {
            limit: probe.limit,
            setting: probe.setting.unwrap_or_default(),
            suggested: format!("{note}: {}", probe.suggested.unwrap_or_default()),
            fix: probe.fix,
            window_gain: None,
        });
    }
    v.factors.extend(probe.factors.into_iter().filter(|f| {
        f.limit.is_receiver_cap() && f.limit != probe.limit && widens(f.fix.as_ref(), window)
    }));
}
