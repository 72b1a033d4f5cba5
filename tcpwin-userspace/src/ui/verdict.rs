//! A verdict as text: the limit, its numbers, why, the fix, and the factors beside it.
use tcpwin_model::verdict::{fmt_rate, fmt_rtt, Basis, Fix, Verdict};

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

/// A fix's commands, each alone on its line (pasteable as it stands, as root), then what the
/// application must ask for and what the kernel will then allow.
fn fix_lines(f: &Fix) -> String {
    let mut s = String::new();
    if !f.commands.is_empty() {
        match f.on_peer {
            // the other end's host: its end was not read here
            Some(p) => s.push_str(&format!(
                "\n    run as root on the peer {p} (its host's setting):"
            )),
            None => s.push_str("\n    run as root:"),
        }
        for c in &f.commands {
            s.push_str(&format!("\n      {c}"));
        }
    }
    if let Some(p) = &f.pod {
        s.push_str(&format!("\n    {p}"));
    }
    if let Some(a) = &f.app {
        s.push_str(&format!(
            "\n    in the application{}: {} >= {} ({})",
            a.process
                .as_ref()
                .map(|p| format!(" ({p})"))
                .unwrap_or_default(),
            a.option,
            a.bytes,
            a.how.join("; ")
        ));
    }
    if let (Some(w), Some(c)) = (f.window, f.ceiling_bps) {
        s.push_str(&format!(
            "\n    then: a window of up to {w} B, {} at the base RTT{}",
            fmt_rate(c),
            if f.new_connections {
                " (connections opened after the change)"
            } else {
                ""
            }
        ));
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
        // the commands and the application's option follow on lines of their own: the fix line
        // keeps what they are sized for
        let words = v.fix.as_ref().map(|f| f.words()).unwrap_or_default();
        let sug = match sug.strip_suffix(words.as_str()) {
            Some(head) if !words.is_empty() => head.trim_end_matches([':', ' ']),
            _ => sug.as_str(),
        };
        s.push_str(&format!("\n    fix: {sug}"));
    }
    if let Some(f) = &v.fix {
        s.push_str(&fix_lines(f));
    }
    if let Some(n) = &v.next {
        s.push_str(&format!("\n    next: {n}"));
    }
    if !v.ceilings.is_empty() {
        s.push_str(&format!(
            "\n    ceilings at the base RTT: {}",
            v.ceilings
                .iter()
                .map(|c| format!("{} {} ({})", c.kind.id(), fmt_rate(c.rate_bps), c.from))
                .collect::<Vec<_>>()
                .join(" < ")
        ));
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
    for r in &v.refused {
        s.push_str(&format!("\n    refused by the judge's check: {r}"));
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
            fix: None,
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

    /// The commands of a fix each stand alone on a line (pasteable), the application's option
    /// beside, and what the kernel then allows.
    #[test]
    fn a_fixs_commands_stand_on_their_own_lines() {
        let mut v = Verdict::unknown(Side::Receiving);
        v.limit = Limit::RcvbufLocked;
        let fix = tcpwin_model::verdict::Fix {
            commands: vec!["sysctl -w net.core.rmem_max=2097152".into()],
            app: Some(tcpwin_model::verdict::AppFix::new(
                "SO_RCVBUF",
                2097152,
                None,
            )),
            window: Some(2654208),
            ceiling_bps: Some(1_179_648_000),
            new_connections: true,
            ..Default::default()
        };
        v.suggested = Some(format!("for 1.00 Gbit/s at 18.0 ms: {}", fix.words()));
        v.fix = Some(fix);
        let t = verdict_line(&v);
        // the fix line says what it is sized for, the commands follow once each
        assert!(t.contains("\n    fix: for 1.00 Gbit/s at 18.0 ms\n"), "{t}");
        assert_eq!(t.matches("rmem_max=2097152").count(), 1, "{t}");
        let lines: Vec<&str> = t.lines().collect();
        let i = lines
            .iter()
            .position(|l| l.trim() == "run as root:")
            .unwrap();
        assert_eq!(lines[i + 1], "      sysctl -w net.core.rmem_max=2097152");
        assert!(
            lines[i + 2].contains("SO_RCVBUF >= 2097152 (iperf3 -w 2097152;"),
            "{t}"
        );
        assert!(
            lines[i + 3].contains(
                "2654208 B, 1.18 Gbit/s at the base RTT (connections opened after the change)"
            ),
            "{t}"
        );
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
            fix: None,
            window_gain: None,
        });
        assert_eq!(
            verdict_short(&v),
            "autotune-max (rate 162.0 Mbit/s, window 395264 B, rtt 18.7 ms); fix: sysctl -w net.ipv4.tcp_rmem='4096 131072 1048576'"
        );
    }
}
