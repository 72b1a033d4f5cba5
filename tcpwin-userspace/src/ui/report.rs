//! `tcpwin-trace report`: a recording in text (its header, each socket's last values and final
//! verdict, the summary), and two recordings' figures side by side.
use std::io::Write;
use tcpwin_model::units::count;

use tcpwin_model::{
    recording::{Figures, Recording, SocketSeries},
    verdict::fmt_rate,
};

use super::{or_dash, summary};

pub fn render(
    r: &Recording,
    name: &str,
    series: &[SocketSeries],
    out: &mut impl Write,
) -> std::io::Result<()> {
    let h = &r.header;
    writeln!(
        out,
        "recording {name}: {} {} on {} (kernel {}), backend {}, {:.1} s, {} events, {} samples",
        h.tool,
        h.version,
        h.host,
        h.kernel,
        h.backend,
        r.summary.duration_s,
        r.events.len(),
        r.samples.len()
    )?;
    for s in series {
        let last = |f: &str| s.series.get(f).and_then(|v| v.last()).map(|p| p.1 as u64);
        let verdict = r
            .verdicts
            .iter()
            .rev()
            .find(|v| v.id.cookie == Some(s.cookie))
            .map(|v| {
                format!(
                    "{}{}",
                    v.verdict.limit.id(),
                    v.verdict
                        .setting
                        .as_ref()
                        .map(|x| format!(": {x}"))
                        .unwrap_or_default()
                )
            });
        let rates: Vec<f64> = s
            .series
            .get("rate")
            .map(|v| v.iter().map(|p| p.1).collect())
            .unwrap_or_default();
        let mean = (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64);
        writeln!(
            out,
            "  {} sk={:x}: {}; last window_clamp={} rcv_ssthresh={} rcv_wnd={} sk_rcvbuf={}; mean rate {}; verdict {}",
            s.name,
            s.cookie,
            count(s.marks.len() as u64, "ratio change"),
            or_dash(last("window_clamp")),
            or_dash(last("rcv_ssthresh")),
            or_dash(last("rcv_wnd")),
            or_dash(last("sk_rcvbuf")),
            mean.map(|m| fmt_rate(m as u64)).unwrap_or_else(|| "-".into()),
            verdict.unwrap_or_else(|| "-".into())
        )?;
        for m in &s.marks {
            writeln!(out, "    {:>8.3} s  {}", m.t_s, m.label)?;
        }
    }
    summary::render(&r.summary, out)
}

/// The rows of `report A B`: (figure, A, B).
pub fn comparison_rows(a: &Figures, b: &Figures) -> Vec<(&'static str, Option<f64>, Option<f64>)> {
    let f = |x: Option<u64>| x.map(|v| v as f64);
    vec![
        ("sockets", Some(a.sockets as f64), Some(b.sockets as f64)),
        (
            "packet ratio p50",
            f(a.packet_ratio_p50),
            f(b.packet_ratio_p50),
        ),
        (
            "scaling_ratio (last)",
            f(a.scaling_ratio.map(u64::from)),
            f(b.scaling_ratio.map(u64::from)),
        ),
        (
            "window_clamp (last)",
            f(a.window_clamp.map(u64::from)),
            f(b.window_clamp.map(u64::from)),
        ),
        (
            "rcv_wnd (max)",
            f(a.max_rcv_wnd.map(u64::from)),
            f(b.max_rcv_wnd.map(u64::from)),
        ),
        ("mean rate (bit/s)", a.mean_rate_bps, b.mean_rate_bps),
        (
            "ratio changes",
            Some(a.ratio_changes as f64),
            Some(b.ratio_changes as f64),
        ),
    ]
}

pub fn render_comparison(
    names: (&str, &str),
    a: &Figures,
    b: &Figures,
    out: &mut impl Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "busiest socket of each recording (most bytes received)"
    )?;
    writeln!(out, "{:<22} {:>16} {:>16} {:>8}", "", "A", "B", "B/A")?;
    let v = |x: Option<f64>| {
        x.map(|x| format!("{}", x.round() as u64))
            .unwrap_or_else(|| "-".into())
    };
    for (name, x, y) in comparison_rows(a, b) {
        let ratio = match (x, y) {
            (Some(x), Some(y)) if x > 0.0 => format!("{:.3}", y / x),
            _ => "-".into(),
        };
        writeln!(out, "{name:<22} {:>16} {:>16} {ratio:>8}", v(x), v(y))?;
    }
    writeln!(
        out,
        "A: {}: {}\nB: {}: {}",
        names.0,
        a.busiest.as_deref().unwrap_or("no socket"),
        names.1,
        b.busiest.as_deref().unwrap_or("no socket")
    )
}
