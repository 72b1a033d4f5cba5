//! The closing summary of a trace as text (the JSON form is the schema's `SummaryLine` itself).
use std::io::Write;

use tcpwin_model::{
    hist::{BYTES_SCALE, RATIO_SCALE},
    schema::SummaryLine,
};

use super::hist::render as hist;

/// The counters as `name=value` pairs, in the schema's order.
fn counters(s: &SummaryLine) -> Vec<String> {
    let c = &s.counters;
    [
        ("due", c.due),
        ("sent", c.sent),
        ("dropped", c.dropped),
        ("filtered_hits", c.filtered_hits),
        ("state_full", c.state_full),
        ("packets", c.packets),
        ("hist_full", c.hist_full),
        ("recheck_skipped", c.recheck_skipped),
        ("hook_runs_missed", c.hook_runs_missed),
        ("caught_up", c.caught_up),
        ("inits_deferred", c.inits_deferred),
        ("inits_lost", c.inits_lost),
        ("records", c.records),
    ]
    .iter()
    .map(|(k, v)| format!("{k}={v}"))
    .collect()
}

pub fn render(s: &SummaryLine, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "\n--- tcpwin-trace summary ---")?;
    writeln!(
        out,
        "backend {} ({:.1} s, stopped: {}), hooks {}",
        s.backend, s.duration_s, s.stop_reason, s.hooks
    )?;
    let hits: Vec<String> = s
        .hook_hits
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    writeln!(out, "hook hits: {}", hits.join(" "))?;
    writeln!(
        out,
        "events: {} received={} decode_errors={}",
        counters(s).join(" "),
        s.events_received,
        s.decode_errors
    )?;
    if s.events_lost > 0 {
        writeln!(
            out,
            "WARNING: {} events were lost (ring buffer full): raise --ringbuf-kib or narrow the filters",
            s.events_lost
        )?;
    }
    if let Some(l) = s.ebpf_log {
        writeln!(
            out,
            "ebpf log: {} lines written, {} shown, {} lost{}",
            l.written,
            l.shown,
            l.lost,
            if l.lost > 0 {
                " (the log ring was full: a narrower level or filter keeps them)"
            } else {
                ""
            }
        )?;
    }
    writeln!(out, "sockets reported: {}", s.sockets)?;
    if !s.verdicts.is_empty() {
        let v: Vec<String> = s.verdicts.iter().map(|(k, n)| format!("{k}={n}")).collect();
        writeln!(out, "final verdicts (sockets): {}", v.join(" "))?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "Per-packet skb->len*256/truesize (the ratio each data packet would set), per ingress interface:"
    )?;
    let h = &s.histograms;
    if h.packet_ratio.is_empty() {
        writeln!(out, "  (no data packets on traced sockets)")?;
    }
    for (name, p) in &h.packet_ratio {
        write!(
            out,
            "{}",
            hist(&format!("packet_ratio[{name}]"), p, RATIO_SCALE)
        )?;
    }
    writeln!(out)?;
    if s.scaling_ratio_present {
        write!(
            out,
            "{}",
            hist(
                "scaling_ratio (settled, per socket)",
                &h.scaling_ratio,
                RATIO_SCALE
            )
        )?;
    } else {
        writeln!(
            out,
            "@scaling_ratio: absent on this kernel (before 6.6 the window comes from tcp_adv_win_scale)"
        )?;
    }
    write!(
        out,
        "{}",
        hist(
            "window_clamp (final, per socket)",
            &h.window_clamp,
            BYTES_SCALE
        )
    )?;
    write!(
        out,
        "{}",
        hist(
            "rcv_ssthresh (final, per socket)",
            &h.rcv_ssthresh,
            BYTES_SCALE
        )
    )?;
    Ok(())
}
