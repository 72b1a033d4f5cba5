//! A verdict as text: the limit, its numbers, why, the fix, and the factors beside it.
use tcpwin_model::verdict::{fmt_rate, fmt_rtt, Basis, Verdict};

/// `rcvbuf-locked (rate 210.0 Mbit/s, window 539136 B, rtt 18.0 ms); fix: ...`: the limit, the
/// numbers that say why, and what to change, on one line.
pub fn verdict_short(v: &Verdict) -> String {
    let numbers: Vec<String> = [
        v.rate_bps.map(|r| format!("rate {}", fmt_rate(r))),
        v.window.map(|w| format!("window {w} B")),
        v.rtt_us.map(|r| format!("rtt {}", fmt_rtt(r))),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut s = v.limit.id().to_string();
    if !numbers.is_empty() {
        s.push_str(&format!(" ({})", numbers.join(", ")));
    }
    if let Some(fix) = &v.suggested {
        s.push_str(&format!("; fix: {fix}"));
    }
    s
}

/// `verdict: rcvbuf-locked (receiving, rate 210 Mbit/s, window 539136 B, rtt 18.0 ms, ...)`
pub fn verdict_line(v: &Verdict) -> String {
    let mut s = format!("  verdict: {} ({}", v.limit.id(), v.side.id());
    let numbers: Vec<String> = [
        v.rate_bps.map(|r| {
            format!(
                "rate {}{}",
                fmt_rate(r),
                if v.basis == Basis::Life {
                    " over its life"
                } else {
                    ""
                }
            )
        }),
        v.window.map(|w| format!("window {w} B")),
        v.rtt_us.map(|r| format!("rtt {}", fmt_rtt(r))),
        v.base_rtt_us
            .filter(|b| Some(*b) != v.rtt_us)
            .map(|b| format!("base {}", fmt_rtt(b))),
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
    for f in &v.factors {
        s.push_str(&format!(
            "\n    also {}: {}; fix: {}{}",
            f.limit.id(),
            f.setting,
            f.suggested,
            // said once: a fix that already names its gain is not followed by it again
            f.window_gain
                .filter(|_| !f.suggested.contains("window x"))
                .map(|g| format!(" (window x{g:.2})"))
                .unwrap_or_default()
        ));
    }
    if let Some(p) = &v.peer {
        s.push_str(&format!(
            "\n    one connection: judged with its other end {} (same verdict there)",
            p.local()
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_model::verdict::{Factor, Limit, Side};

    #[test]
    fn factors_and_the_peer_are_said() {
        let mut v = Verdict::unknown(Side::Receiving);
        v.limit = Limit::AutotuneMax;
        v.basis = Basis::Interval;
        v.rate_bps = Some(112_000_000);
        v.rtt_us = Some(26_000);
        v.base_rtt_us = Some(20_000);
        v.factors.push(Factor {
            limit: Limit::LowRatio,
            setting: "scaling_ratio=160".into(),
            suggested: "receiver GRO on".into(),
            window_gain: Some(229.0 / 160.0),
        });
        let t = verdict_line(&v);
        assert!(
            t.contains("verdict: autotune-max (receiving, rate 112.0 Mbit/s"),
            "{t}"
        );
        assert!(t.contains("rtt 26.0 ms, base 20.0 ms"), "{t}");
        assert!(
            t.contains("also low-ratio: scaling_ratio=160; fix: receiver GRO on (window x1.43)"),
            "{t}"
        );
        // a fix that names its gain is not followed by it again
        v.factors[0].suggested = "receiver GRO on: window x1.43 on the same buffer".into();
        let t = verdict_line(&v);
        assert_eq!(t.matches("x1.43").count(), 1, "{t}");
    }

    /// The trace's default: the limit, rate, window, RTT and the fix, nothing else.
    #[test]
    fn the_short_form_is_one_line() {
        let mut v = Verdict::unknown(Side::Receiving);
        v.limit = Limit::AutotuneMax;
        v.rate_bps = Some(162_000_000);
        v.window = Some(395_264);
        v.rtt_us = Some(18_700);
        v.base_rtt_us = Some(18_300);
        v.setting = Some("autotuning reached tcp_rmem max".into());
        v.suggested = Some("sysctl -w net.ipv4.tcp_rmem='4096 131072 1048576'".into());
        v.factors.push(Factor {
            limit: Limit::LowRatio,
            setting: "scaling_ratio=160".into(),
            suggested: "receiver GRO on".into(),
            window_gain: None,
        });
        assert_eq!(
            verdict_short(&v),
            "autotune-max (rate 162.0 Mbit/s, window 395264 B, rtt 18.7 ms); fix: sysctl -w net.ipv4.tcp_rmem='4096 131072 1048576'"
        );
    }
}
