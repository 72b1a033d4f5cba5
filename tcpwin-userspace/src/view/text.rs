//! Live event lines as text: one grep-friendly line per event with kernel / `ss` field names.
use tcpwin_common::flag;
use tcpwin_model::{kind::EventKind, record::Record, schema::VerdictLine};

fn arrow<T: std::fmt::Display + PartialEq>(prev: Option<T>, now: T) -> String {
    match prev {
        Some(p) if p != now => format!("{p}->{now}"),
        _ => now.to_string(),
    }
}

/// A GSO field of the cause packet, `?` when the tracer did not read it.
fn gso(read: u8, v: u16) -> String {
    if read != 0 {
        v.to_string()
    } else {
        "?".into()
    }
}

/// Seconds since the trace started, as every line starts.
fn secs(ts_ns: u64, t0_ns: u64) -> f64 {
    ts_ns.saturating_sub(t0_ns) as f64 / 1e9
}

/// One grep-friendly line with kernel / `ss` field names.
pub fn text_line(r: &Record, t0_ns: u64, pid_override: Option<u32>) -> String {
    let id = r.id();
    let who = match (r.pid().or(pid_override), &r.comm) {
        (Some(pid), Some(c)) => format!(" pid={pid}/{c}"),
        (Some(pid), None) => format!(" pid={pid}"),
        _ => String::new(),
    };
    let cookie = r.cookie().map(|c| format!(" sk={c:x}")).unwrap_or_default();
    format!(
        "{:>11.6} {:<5} {} <- {}{cookie}{who}{}",
        secs(r.ev.ts_ns, t0_ns),
        r.kind.name(),
        id.local(),
        id.remote(),
        event_fields(r)
    )
}

/// An event without its socket: time, kind and the values (`top --trace`'s events pane, where
/// the socket is the selected one).
pub fn event_short(r: &Record, t0_ns: u64) -> String {
    format!(
        "{:>11.6} {:<5}{}",
        secs(r.ev.ts_ns, t0_ns),
        r.kind.name(),
        event_fields(r)
    )
}

/// The values an event carries, each ` name=value` (`prev->now` where it changed).
fn event_fields(r: &Record) -> String {
    let e = &r.ev;
    let prev = r.has(flag::PREV);
    let p = |v: u32| prev.then_some(v);
    let ratio = match r.scaling_ratio() {
        Some(v) => format!(
            " scaling_ratio={}",
            arrow(prev.then_some(e.prev_scaling_ratio), v)
        ),
        None => " scaling_ratio=absent".into(),
    };
    let mut s = format!(
        "{ratio} window_clamp={} rcv_ssthresh={} rcv_wnd={} sk_rcvbuf={}{} rcvq_space={} rcv_mss={}",
        arrow(p(e.prev_window_clamp), e.window_clamp),
        arrow(p(e.prev_rcv_ssthresh), e.rcv_ssthresh),
        e.rcv_wnd,
        arrow(p(e.prev_sk_rcvbuf), e.sk_rcvbuf),
        if r.has(flag::RCVBUF_LOCKED) { "(locked)" } else { "" },
        arrow(p(e.prev_rcvq_space), e.rcvq_space),
        e.rcv_mss,
    );
    if r.kind == EventKind::Ratio {
        match r.skb_ratio() {
            Some(q) => s.push_str(&format!(
                " skb_len={} skb_truesize={} (len*256/truesize={q}{}) gso_size={} gso_segs={} ifindex={}",
                e.skb_len,
                e.skb_truesize,
                if q >= 256 { ", >=256: driver under-reports truesize" } else { "" },
                gso(e.gso_read, e.gso_size),
                gso(e.gso_read, e.gso_segs),
                e.ifindex
            )),
            None => s.push_str(" skb=unknown"),
        }
    }
    if r.kind == EventKind::Init {
        s.push_str(&format!(
            " rcv_wscale={} wscale_ok={}",
            e.rcv_wscale,
            r.has(flag::WSCALE_OK)
        ));
        if r.has(flag::INIT_PARAMS) {
            s.push_str(&format!(" space={} mss={}", e.init_space, e.init_mss));
        }
    }
    s.push_str(&format!(" hook={}", r.hook_name()));
    s
}

/// A verdict on one line: which limit binds, its numbers, why and the fix.
pub fn verdict_text(v: &VerdictLine, t0_ns: u64) -> String {
    let detail = super::verdict::verdict_line(&v.verdict);
    format!(
        "{:>11.6} {:<5} {} <- {} sk={:x}{} {}",
        secs(v.ts_ns, t0_ns),
        "judge",
        v.id.local(),
        v.id.remote(),
        v.id.cookie.unwrap_or(0),
        if v.last { " final" } else { "" },
        detail
            .trim_start()
            .trim_start_matches("verdict: ")
            .replace("\n    ", "; ")
    )
}
