//! `tcpwin-trace ss` as text: a line per socket in `ss` style with what `ss` cannot show, then
//! its verdict.
use std::io::Write;

use tcpwin_model::{facts::SockFacts, schema::SsLine};

use super::or_dash as o;

fn ms(us: Option<u64>) -> String {
    match us {
        Some(u) if u < 1000 => format!("{u}us"),
        Some(u) => format!("{:.1}ms", u as f64 / 1000.0),
        None => "-".into(),
    }
}

use super::verdict::verdict_line;

/// The socket's facts on one line (kernel / `ss` names).
pub fn facts_line(l: &SsLine) -> String {
    let f: &SockFacts = &l.facts;
    let who = match (f.pid, &f.comm) {
        (Some(p), Some(c)) => format!(" pid={p}/{c}"),
        _ => String::new(),
    };
    let ns = if l.netns_name == "-" {
        String::new()
    } else {
        format!(" netns={}", l.netns_name)
    };
    let wscale = match (f.wscale_ok, f.rcv_wscale, f.snd_wscale) {
        (Some(false), _, _) => "off".to_string(),
        (Some(true), r, s) => format!("{}/{}", o(r), o(s)),
        _ => "-".into(),
    };
    format!(
        "{:<10} {} <-> {}{who}{ns} sk={}\n  scaling_ratio={} window_clamp={} rcv_ssthresh={} rcv_wnd={} sk_rcvbuf={}{} wscale(rcv/snd)={wscale} rcv_mss={} advmss={} unread={} rmem_alloc={} rcv_rtt={} srtt={} bytes_received={} bytes_acked={} snd_wnd={} busy={} rwnd_limited={} sndbuf_limited={}",
        l.state_name,
        f.id.local(),
        f.id.remote(),
        f.id.cookie.map(|c| format!("{c:x}")).unwrap_or_else(|| "-".into()),
        o(f.scaling_ratio),
        o(f.window_clamp),
        o(f.rcv_ssthresh),
        o(f.rcv_wnd),
        o(f.sk_rcvbuf),
        if f.rcvbuf_locked == Some(true) { "(locked)" } else { "" },
        o(f.rcv_mss),
        o(f.advmss),
        o(f.unread),
        o(f.rmem_alloc),
        ms(f.rcv_rtt_us.map(u64::from)),
        ms(f.srtt_us.map(u64::from)),
        o(f.bytes_received),
        o(f.bytes_acked),
        o(f.snd_wnd),
        ms(f.busy_us),
        ms(f.rwnd_limited_us),
        ms(f.sndbuf_limited_us),
    )
}

/// A snapshot: its sockets, or a sentence saying there are none.
pub fn render(lines: &[SsLine], with_rates: bool, out: &mut impl Write) -> std::io::Result<()> {
    if with_rates {
        writeln!(out, "--- interval")?;
    }
    if lines.is_empty() {
        writeln!(out, "(no TCP connection matches)")?;
    }
    for l in lines {
        writeln!(out, "{}", facts_line(l))?;
        writeln!(out, "{}", verdict_line(&l.verdict))?;
    }
    Ok(())
}
