//! Live lines (text or JSON) and the closing summary. Rendering only: it never touches BPF objects.
use std::io::Write;

use serde_json::{json, Value};
use tcpwin_common::flag;

use crate::{hist::Hist, record::Record};

/// Everything the summary shows, gathered by the session.
pub struct Summary {
    pub backend: &'static str,
    pub hooks: String,
    pub duration_s: f64,
    pub stop_reason: String,
    pub hook_hits: Vec<(&'static str, u64)>,
    pub counters: Vec<(&'static str, u64)>,
    pub received: u64,
    pub decode_errors: u64,
    pub sockets: u64,
    pub packet_ratio: Vec<(String, Hist)>,
    pub scaling_ratio: Hist,
    pub window_clamp: Hist,
    pub rcv_ssthresh: Hist,
    pub scaling_ratio_present: bool,
    pub lost: u64,
}

fn arrow<T: std::fmt::Display + PartialEq>(prev: Option<T>, now: T) -> String {
    match prev {
        Some(p) if p != now => format!("{p}->{now}"),
        _ => now.to_string(),
    }
}

/// One grep-friendly line with kernel / `ss` field names.
/// A GSO field of the cause packet, `?` when the tracer did not read it.
fn gso(read: u8, v: u16) -> String {
    if read != 0 {
        v.to_string()
    } else {
        "?".into()
    }
}

pub fn text_line(r: &Record, t0_ns: u64, pid_override: Option<u32>) -> String {
    let e = &r.ev;
    let prev = r.has(flag::PREV);
    let p = |v: u32| prev.then_some(v);
    let secs = e.ts_ns.saturating_sub(t0_ns) as f64 / 1e9;
    let (l, rr) = if r.laddr.is_ipv6() {
        (
            format!("[{}]:{}", r.laddr, e.lport),
            format!("[{}]:{}", r.raddr, e.rport),
        )
    } else {
        (
            format!("{}:{}", r.laddr, e.lport),
            format!("{}:{}", r.raddr, e.rport),
        )
    };
    let who = match (r.pid().or(pid_override), &r.comm) {
        (Some(pid), Some(c)) => format!(" pid={pid}/{c}"),
        (Some(pid), None) => format!(" pid={pid}"),
        _ => String::new(),
    };
    let cookie = r.cookie().map(|c| format!(" sk={c:x}")).unwrap_or_default();
    let ratio = match r.ratio() {
        Some(v) => format!(
            " scaling_ratio={}",
            arrow(prev.then_some(e.prev_scaling_ratio), v)
        ),
        None => " scaling_ratio=absent".into(),
    };
    let mut s = format!(
        "{secs:>11.6} {:<5} {l} <- {rr}{cookie}{who}{ratio} window_clamp={} rcv_ssthresh={} rcv_wnd={} sk_rcvbuf={}{} rcvq_space={} rcv_mss={}",
        r.kind,
        arrow(p(e.prev_window_clamp), e.window_clamp),
        arrow(p(e.prev_rcv_ssthresh), e.rcv_ssthresh),
        e.rcv_wnd,
        arrow(p(e.prev_sk_rcvbuf), e.sk_rcvbuf),
        if r.has(flag::RCVBUF_LOCKED) { "(locked)" } else { "" },
        arrow(p(e.prev_rcvq_space), e.rcvq_space),
        e.rcv_mss,
    );
    if r.kind == "ratio" {
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
    if r.kind == "init" {
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

impl Summary {
    pub fn to_json(&self) -> Value {
        let mut pr = serde_json::Map::new();
        for (name, h) in &self.packet_ratio {
            pr.insert(name.clone(), h.to_json());
        }
        json!({
            "event": "summary",
            "backend": self.backend,
            "hooks": self.hooks,
            "duration_s": self.duration_s,
            "stop_reason": self.stop_reason,
            "hook_hits": self.hook_hits.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "counters": self.counters.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "events_received": self.received,
            "events_lost": self.lost,
            "decode_errors": self.decode_errors,
            "sockets": self.sockets,
            "scaling_ratio_present": self.scaling_ratio_present,
            "histograms": {
                "packet_ratio": pr,
                "scaling_ratio": self.scaling_ratio.to_json(),
                "window_clamp": self.window_clamp.to_json(),
                "rcv_ssthresh": self.rcv_ssthresh.to_json(),
            }
        })
    }

    pub fn render(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "\n--- tcpwin-trace summary ---")?;
        writeln!(
            out,
            "backend {} ({:.1} s, stopped: {}), hooks {}",
            self.backend, self.duration_s, self.stop_reason, self.hooks
        )?;
        let hits: Vec<String> = self
            .hook_hits
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(out, "hook hits: {}", hits.join(" "))?;
        let c: Vec<String> = self
            .counters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(
            out,
            "events: {} received={} decode_errors={}",
            c.join(" "),
            self.received,
            self.decode_errors
        )?;
        if self.lost > 0 {
            writeln!(
                out,
                "WARNING: {} events were lost (ring buffer full): raise --ringbuf-kib or narrow the filters",
                self.lost
            )?;
        }
        writeln!(out, "sockets reported: {}\n", self.sockets)?;
        writeln!(
            out,
            "Per-packet skb->len*256/truesize (the ratio each data packet would set), per ingress interface:"
        )?;
        if self.packet_ratio.is_empty() {
            writeln!(out, "  (no data packets on traced sockets)")?;
        }
        for (name, h) in &self.packet_ratio {
            write!(out, "{}", h.render(&format!("packet_ratio[{name}]")))?;
        }
        writeln!(out)?;
        if self.scaling_ratio_present {
            write!(
                out,
                "{}",
                self.scaling_ratio
                    .render("scaling_ratio (settled, per socket)")
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
            self.window_clamp.render("window_clamp (final, per socket)")
        )?;
        write!(
            out,
            "{}",
            self.rcv_ssthresh.render("rcv_ssthresh (final, per socket)")
        )?;
        Ok(())
    }
}
