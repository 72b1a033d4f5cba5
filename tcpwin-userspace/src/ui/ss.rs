//! `tcpwin-trace ss` as text: one line per socket in `ss` style (state, addresses with the
//! direction data flows, rate, RTT, window, ceiling, scaling_ratio, verdict); with `-e` every
//! fact `ss` cannot show and the verdict's why and fix.
use std::io::Write;

use tcpwin_model::{facts::SockFacts, schema::SsLine, verdict::Side};

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
    // whose: the container (runtime and id, its pod) or the unit; nothing said outside both
    let who = match f.workload.as_ref().map(|w| w.short()) {
        Some(w) if w != "-" => format!("{who} workload={w}"),
        _ => who,
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
    // the application's wake-up thresholds, where it set them (SO_RCVLOWAT is 1 unless set,
    // TCP_NOTSENT_LOWAT 0: the namespace's sysctl)
    let lowat = [
        f.rcvlowat
            .filter(|v| *v > 1)
            .map(|v| format!(" rcvlowat={v}")),
        f.notsent_lowat
            .filter(|v| *v > 0)
            .map(|v| format!(" notsent_lowat={v}")),
    ]
    .into_iter()
    .flatten()
    .collect::<String>();
    // what a sending socket holds against its send buffer: queued (memory, as sk_sndbuf counts
    // it), written but not sent, in flight, and the congestion window, in bytes
    let mss = f.mss_cache.map(u64::from);
    let sendq = if f.bytes_acked.unwrap_or(0) > 0 || f.wmem_queued.unwrap_or(0) > 0 {
        format!(
            " wmem_queued={} unsent={} inflight={} cwnd={}{}{}",
            o(f.wmem_queued),
            o(f.unsent),
            o(f.inflight_bytes()),
            o(f.snd_cwnd.zip(mss).map(|(c, m)| c as u64 * m)),
            // who waited: the writer for room in its buffer (SOCK_NOSPACE), and the pacing cap
            // the application set (SO_MAX_PACING_RATE)
            match f.writer_waiting {
                Some(true) => " writer=waiting",
                Some(false) => " writer=free",
                None => "",
            },
            f.pacing_cap_bps
                .map(|c| format!(" pacing_cap={c}bps"))
                .unwrap_or_default()
        )
    } else {
        String::new()
    };
    format!(
        "{:<10} {} {} {}{who}{ns} sk={}\n  scaling_ratio={} window_clamp={} rcv_ssthresh={} rcv_wnd={} sk_rcvbuf={}{} sk_sndbuf={}{}{sendq} wscale(rcv/snd)={wscale} rcv_mss={} advmss={} unread={} rmem_alloc={} rcv_rtt={} srtt={} bytes_received={} bytes_acked={} snd_wnd={} busy={} rwnd_limited={} sndbuf_limited={}{lowat}",
        l.state_name,
        f.id.local(),
        arrow(l),
        f.id.remote(),
        f.id.cookie.map(|c| format!("{c:x}")).unwrap_or_else(|| "-".into()),
        o(f.scaling_ratio),
        o(f.window_clamp),
        o(f.rcv_ssthresh),
        o(f.rcv_wnd),
        o(f.sk_rcvbuf),
        if f.rcvbuf_locked == Some(true) { "(locked)" } else { "" },
        o(f.sk_sndbuf),
        if f.sndbuf_locked == Some(true) { "(locked)" } else { "" },
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

/// `<-` receiving, `->` sending, `<>` idle: which way the data flows from the local end.
fn arrow(l: &SsLine) -> &'static str {
    Side::arrow(Some(l.verdict.side))
}

/// 893M, 26.2M (bit/s, as `ss` prints rates)
fn rate(bps: Option<u64>) -> String {
    match bps {
        Some(b) if b >= 1_000_000_000 => format!("{:.2}G", b as f64 / 1e9),
        Some(b) if b >= 1_000_000 => format!("{:.1}M", b as f64 / 1e6),
        Some(b) => format!("{:.0}k", b as f64 / 1e3),
        None => "-".into(),
    }
}

const HEADER: &str = "State      Local                    Peer                          Rate      RTT   Window  Ceiling ratio Verdict";
/// The verdict column's width where the owner column follows it (the longest limit's id).
const VERDICT_W: usize = 20;

/// The owner column: `comm/pid` and the workload (`nginx/1234 podman:web`,
/// `curl/77 default/web-5d9f/curl`), `-` where no process holds the socket.
fn owner(f: &tcpwin_model::facts::SockFacts) -> String {
    let who = match (&f.comm, f.pid) {
        (Some(c), Some(p)) => format!("{c}/{p}"),
        _ => "-".into(),
    };
    match f.workload.as_ref().map(|w| w.short()) {
        Some(w) if w != "-" => format!("{who} {w}"),
        _ => who,
    }
}

/// One socket on one line; with `owners`, its owner and workload last.
pub fn short_line(l: &SsLine, owners: bool) -> String {
    let f = &l.facts;
    let v = &l.verdict;
    let line = format!(
        "{:<10} {:<24} {} {:<26} {:>7} {:>8} {:>8} {:>8} {:>5} {}",
        l.state_name,
        f.id.local(),
        arrow(l),
        f.id.remote(),
        rate(v.rate_bps),
        ms(v.rtt_us.or(f.srtt_us).map(u64::from)),
        o(v.window),
        rate(v.ceiling_bps),
        o(f.scaling_ratio),
        if owners {
            format!("{:<VERDICT_W$}", v.limit.id())
        } else {
            v.limit.id().to_string()
        },
    );
    if owners {
        format!("{line} {}", owner(f))
    } else {
        line
    }
}

/// A snapshot's text a line at a time, as the sockets are judged (nothing kept); a snapshot
/// without sockets is a sentence saying there are none.
pub struct Renderer {
    with_rates: bool,
    extended: bool,
    /// the one-line form names each socket's owner and workload
    owners: bool,
    lines: u64,
}

impl Renderer {
    pub fn new(with_rates: bool, extended: bool, owners: bool) -> Renderer {
        Renderer {
            with_rates,
            extended,
            owners,
            lines: 0,
        }
    }

    fn start(&self, out: &mut impl Write) -> std::io::Result<()> {
        if self.with_rates {
            writeln!(out, "--- interval")?;
        }
        Ok(())
    }

    pub fn line(&mut self, l: &SsLine, out: &mut impl Write) -> std::io::Result<()> {
        if self.lines == 0 {
            self.start(out)?;
            if !self.extended && self.owners {
                writeln!(
                    out,
                    "{HEADER}{} Owner",
                    " ".repeat(VERDICT_W - "Verdict".len())
                )?;
            } else if !self.extended {
                writeln!(out, "{HEADER}")?;
            }
        }
        self.lines += 1;
        if self.extended {
            writeln!(out, "{}", facts_line(l))?;
            writeln!(out, "{}", verdict_line(&l.verdict))
        } else {
            writeln!(out, "{}", short_line(l, self.owners))
        }
    }

    pub fn finish(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.lines == 0 {
            self.start(out)?;
            writeln!(out, "(no TCP connection matches)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpwin_model::{
        id::SocketId,
        verdict::{Limit, Verdict},
    };

    #[test]
    fn one_line_per_socket_with_the_direction() {
        let l = SsLine {
            host: None,
            other_end: None,
            source: "iterator".into(),
            netns_name: "-".into(),
            state_name: "ESTAB".into(),
            facts: SockFacts {
                id: SocketId {
                    laddr: Some("10.0.0.2".parse().unwrap()),
                    lport: 5201,
                    raddr: Some("10.0.0.1".parse().unwrap()),
                    rport: 40412,
                    ..Default::default()
                },
                scaling_ratio: Some(162),
                ..Default::default()
            },
            verdict: Verdict {
                limit: Limit::RcvbufLocked,
                rate_bps: Some(209_800_000),
                rtt_us: Some(18_000),
                window: Some(539_136),
                ceiling_bps: Some(239_600_000),
                ..Verdict::unknown(Side::Receiving)
            },
        };
        let t = short_line(&l, false);
        assert!(t.starts_with("ESTAB      10.0.0.2:5201"), "{t}");
        assert!(t.contains(" <- 10.0.0.1:40412"), "{t}");
        for w in [
            "209.8M",
            "18.0ms",
            "539136",
            "239.6M",
            "162",
            "rcvbuf-locked",
        ] {
            assert!(t.contains(w), "{w}: {t}");
        }
        let text = |extended| {
            let mut out = Vec::new();
            let mut r = Renderer::new(false, extended, false);
            r.line(&l, &mut out).unwrap();
            r.finish(&mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let t = text(false);
        assert_eq!(t.lines().count(), 2, "header and one line: {t}");
        let t = text(true);
        assert!(t.contains("verdict: rcvbuf-locked (receiving"), "{t}");
    }
}
