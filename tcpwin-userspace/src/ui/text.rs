//! Live event lines as text: one grep-friendly line per event with kernel / `ss` field names.
use tcpwin_common::flag;
use tcpwin_model::{decode::Record, kind::EventKind, schema::VerdictLine, verdict::Side};

use super::shown::Fold;

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

/// `<-` receiving, `->` sending, `<>` unknown or idle: which way data flows from the local end.
pub fn direction(side: Option<Side>) -> &'static str {
    Side::arrow(side)
}

/// One grep-friendly line with the JSON's field names: the socket, the direction data flows
/// (`side`, from [`super::shown::Directions`]), and the values the event is about
/// (`prev->now` where one changed).
pub fn text_line(
    r: &Record,
    t0_ns: u64,
    pid_override: Option<u32>,
    side: Option<Side>,
    workload: Option<&str>,
) -> String {
    let id = r.id();
    let who = match (r.pid().or(pid_override), &r.comm) {
        (Some(pid), Some(c)) => format!(" pid={pid}/{c}"),
        (Some(pid), None) => format!(" pid={pid}"),
        _ => String::new(),
    };
    let who = match workload.filter(|w| *w != "-") {
        Some(w) => format!("{who} workload={w}"),
        None => who,
    };
    let cookie = r.cookie().map(|c| format!(" sk={c:x}")).unwrap_or_default();
    format!(
        "{:>11.6} {:<7} {} {} {}{cookie}{who}{}",
        secs(r.ev.ts_ns, t0_ns),
        r.kind.name(),
        id.local(),
        direction(side),
        id.remote(),
        event_fields(r)
    )
}

/// An event without its socket: time, kind and the values (`top --trace`'s events pane, where
/// the socket is the selected one).
pub fn event_short(r: &Record, t0_ns: u64) -> String {
    format!(
        "{:>11.6} {:<7}{}",
        secs(r.ev.ts_ns, t0_ns),
        r.kind.name(),
        event_fields(r)
    )
}

/// The values an event is about, each ` name=value` (`prev->now` where it changed): what moved
/// for `space` and `ratio` (with the packet that set the ratio), the starting values for `init`,
/// the values for `seen` and `close`.
fn event_fields(r: &Record) -> String {
    let e = &r.ev;
    let prev = r.has(flag::PREV);
    let p = |v: u32| prev.then_some(v);
    let mut s = match r.scaling_ratio() {
        Some(v) => format!(
            " scaling_ratio={}",
            arrow(prev.then_some(e.prev_scaling_ratio), v)
        ),
        None => " scaling_ratio=absent".into(),
    };
    let locked = if r.has(flag::RCVBUF_LOCKED) {
        "(locked)"
    } else {
        ""
    };
    let fields = [
        ("window_clamp", p(e.prev_window_clamp), e.window_clamp),
        ("rcv_ssthresh", p(e.prev_rcv_ssthresh), e.rcv_ssthresh),
        ("sk_rcvbuf", p(e.prev_sk_rcvbuf), e.sk_rcvbuf),
        ("rcvq_space", p(e.prev_rcvq_space), e.rcvq_space),
    ];
    for (name, before, now) in fields {
        // a change shows what moved; init, seen and close show where the socket stands
        let moved = before.is_some_and(|b| b != now);
        let standing = matches!(r.kind, EventKind::Init | EventKind::Seen | EventKind::Close)
            && name != "rcvq_space";
        if moved || standing || (r.kind == EventKind::Ratio && name == "window_clamp") {
            s.push_str(&format!(" {name}={}", arrow(before, now)));
            if name == "sk_rcvbuf" {
                s.push_str(locked);
            }
            if name == "window_clamp" && r.placeholder_clamp() {
                s.push_str("(placeholder)");
            }
        }
    }
    if r.kind == EventKind::Init {
        s.push_str(&format!(" rcv_wnd={}", e.rcv_wnd));
    }
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
    if e.hook == tcpwin_common::hook::ITER_CATCH_UP {
        s.push_str(" (read by iter/tcp: no hook saw it)");
    }
    s
}

/// A socket's folded rcv_ssthresh steps on one line, at `at_ns` (its last step, or a later line's
/// time when another socket's lines came in between: the lines stay in time order and the steps'
/// own span is in the line).
pub fn fold_line(f: &Fold, t0_ns: u64, at_ns: u64, side: Option<Side>) -> String {
    let id = f.last.id();
    let (from, to) = f.range();
    let first = secs(f.first.ev.ts_ns, t0_ns);
    let steps = match f.steps {
        1 => format!("1 step at {first:.6} s"),
        n => format!(
            "{n} steps from {first:.6} s to {:.6} s",
            secs(f.last.ev.ts_ns, t0_ns)
        ),
    };
    format!(
        "{:>11.6} {:<7} {} {} {}{} rcv_ssthresh={from}->{to} ({steps}; --events space shows each)",
        secs(at_ns.max(f.last.ev.ts_ns), t0_ns),
        "space",
        id.local(),
        direction(side),
        id.remote(),
        f.last
            .cookie()
            .map(|c| format!(" sk={c:x}"))
            .unwrap_or_default(),
    )
}

/// A verdict as the trace prints it: one short line (the limit, rate, window, RTT and the fix),
/// or with `extended` every number, why, the fix and the factors, as `ss -e` prints them.
pub fn verdict_text(v: &VerdictLine, t0_ns: u64, extended: bool) -> String {
    let head = format!(
        "{:>11.6} {:<7} {} sk={:x}{}",
        secs(v.ts_ns, t0_ns),
        "verdict",
        v.id.flow(direction(Some(v.verdict.side))),
        v.id.cookie.unwrap_or(0),
        if v.last { " final" } else { "" },
    );
    if extended {
        return format!("{head}\n{}", super::verdict::verdict_line(&v.verdict));
    }
    format!("{head} {}", super::verdict::verdict_short(&v.verdict))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_common::{kind, Event};

    fn step(ts_ns: u64, from: u32, to: u32) -> Record {
        Record {
            ev: Event {
                ts_ns,
                kind: kind::SPACE,
                cookie: 0x1f,
                flags: flag::PREV | flag::COOKIE,
                prev_rcv_ssthresh: from,
                rcv_ssthresh: to,
                lport: 5201,
                rport: 40000,
                ..Event::default()
            },
            kind: EventKind::Space,
            laddr: "10.0.0.2".parse().unwrap(),
            raddr: "10.0.0.1".parse().unwrap(),
            comm: None,
        }
    }

    /// Folded steps say how many and from when to when, in the singular for one; the arrow is the side given.
    #[test]
    fn folded_steps_read_as_a_sentence() {
        let one = Fold {
            first: step(2_000_000, 100, 200),
            last: step(2_000_000, 100, 200),
            steps: 1,
        };
        let l = fold_line(&one, 1_000_000, 0, Some(Side::Receiving));
        assert!(l.starts_with("   0.001000 space "), "{l}");
        assert!(l.contains(" <- ") && l.contains("sk=1f"), "{l}");
        assert!(
            l.contains("rcv_ssthresh=100->200 (1 step at 0.001000 s;"),
            "{l}"
        );
        let many = Fold {
            first: step(2_000_000, 100, 200),
            last: step(5_000_000, 300, 900),
            steps: 7,
        };
        let l = fold_line(&many, 1_000_000, 0, None);
        assert!(
            l.contains(" <> ") && l.starts_with("   0.004000 space "),
            "{l}"
        );
        assert!(
            l.contains("rcv_ssthresh=100->900 (7 steps from 0.001000 s to 0.004000 s;"),
            "{l}"
        );
        // printed after another socket's later line: at that line's time, the span unchanged
        let l = fold_line(&many, 1_000_000, 9_000_000, None);
        assert!(l.starts_with("   0.008000 space "), "{l}");
        assert!(l.contains("(7 steps from 0.001000 s to 0.004000 s;"), "{l}");
    }
}
