//! A verdict as text: the limit, its numbers, why and the fix.
use tcpwin_model::verdict::{fmt_rate, Verdict};

/// `verdict: rcvbuf-locked (receiving, 210 Mbit/s of a 240 Mbit/s ceiling: ...)`
pub fn verdict_line(v: &Verdict) -> String {
    let mut s = format!("  verdict: {} ({:?}", v.limit.id(), v.side).to_lowercase();
    let numbers: Vec<String> = [
        v.rate_bps.map(|r| format!("rate {}", fmt_rate(r))),
        v.window.map(|w| format!("window {w} B")),
        v.rtt_us.map(|r| {
            if r < 1000 {
                format!("rtt {r} us")
            } else {
                format!("rtt {:.1} ms", r as f64 / 1000.0)
            }
        }),
        v.ceiling_bps.map(|c| format!("ceiling {}", fmt_rate(c))),
        v.rwnd_limited_share
            .map(|r| format!("rwnd-limited {:.0} %", r * 100.0)),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !numbers.is_empty() {
        s.push_str(", ");
        s.push_str(&numbers.join(", "));
    }
    s.push(')');
    if let Some(set) = &v.setting {
        s.push_str(&format!("\n    why: {set}"));
    }
    if let Some(sug) = &v.suggested {
        s.push_str(&format!("\n    fix: {sug}"));
    }
    s
}
