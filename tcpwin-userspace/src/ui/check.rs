//! `tcpwin-trace check` as text.
use std::io::Write;

use tcpwin_model::{check::CheckReport, facts::HostLimits};

use super::or_dash as o;

fn triple(t: Option<[u64; 3]>) -> String {
    t.map(|t| format!("{} {} {}", t[0], t[1], t[2]))
        .unwrap_or_else(|| "-".into())
}

fn onoff(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "-",
    }
}

fn sysctls(l: &HostLimits) -> Vec<(String, String)> {
    vec![
        (
            "net.ipv4.tcp_window_scaling".into(),
            o(l.tcp_window_scaling.map(u8::from)),
        ),
        ("net.ipv4.tcp_rmem".into(), triple(l.tcp_rmem)),
        ("net.ipv4.tcp_wmem".into(), triple(l.tcp_wmem)),
        (
            "net.ipv4.tcp_moderate_rcvbuf".into(),
            o(l.tcp_moderate_rcvbuf.map(u8::from)),
        ),
        ("net.ipv4.tcp_adv_win_scale".into(), o(l.tcp_adv_win_scale)),
        ("net.core.rmem_max (global)".into(), o(l.rmem_max)),
        ("net.core.wmem_max (global)".into(), o(l.wmem_max)),
        (
            "TCP memory pressure".into(),
            onoff(l.memory_pressure).into(),
        ),
    ]
}

pub fn render(r: &CheckReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(
        out,
        "Linux {}: {}",
        r.kernel,
        match r.era {
            tcpwin_model::check::Era::MeasuredRatio =>
                "window = buffer x scaling_ratio / 256, the ratio measured per socket (6.6+)",
            tcpwin_model::check::Era::AdvWinScale =>
                "window = buffer share set by tcp_adv_win_scale (before 6.6)",
        }
    )?;
    for (k, v) in sysctls(&r.limits) {
        writeln!(out, "  {k:<32} {v}")?;
    }
    writeln!(out, "interfaces:")?;
    for i in &r.interfaces {
        writeln!(
            out,
            "  {:<16} mtu {:>6}  gro {:<3} lro {:<3} tso {:<3} gso {:<3} xdp {}",
            i.name,
            o(i.mtu),
            onoff(i.gro),
            onoff(i.lro),
            onoff(i.tso),
            onoff(i.gso),
            match i.xdp {
                Some(true) => "attached",
                Some(false) => "none",
                None => "-",
            }
        )?;
    }
    for n in &r.notes {
        writeln!(out, "note: {n}")?;
    }
    writeln!(
        out,
        "scaling_ratio used below: {} ({})",
        r.ratio, r.ratio_source
    )?;
    if let (Some(b), Some(bytes)) = (r.bdp, r.bdp_bytes) {
        writeln!(out, "BDP {b} = {bytes} bytes:")?;
        for f in &r.fits {
            writeln!(
                out,
                "  {:<10} buffer up to {:>10}  window up to {:>10}  {}",
                f.socket,
                o(f.max_buffer),
                o(f.max_window),
                match f.fits {
                    Some(true) => "fits",
                    Some(false) => "DOES NOT FIT",
                    None => "unknown",
                }
            )?;
            for fix in &f.fix {
                writeln!(out, "      {fix}")?;
            }
        }
    }
    Ok(())
}
