//! The lab's tables drawn as SVG by `plotters`: the ratio per packet shape of the experiment
//! (lab.svg), predicted against measured throughput per scenario row (wan.svg) and the window
//! sweep (window-sweep.svg).
use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;
use tcpwin_common::chart::{err, legend_box, swatch, BLUE, GREEN, LEGEND_W, RED};

/// `--svg DIR`: made and tried before the lab runs (minutes), so a bad path fails at once.
pub fn svg_dir(dir: Option<&Path>) -> Result<()> {
    let Some(d) = dir else { return Ok(()) };
    std::fs::create_dir_all(d)
        .with_context(|| format!("cannot create the SVG directory {}", d.display()))?;
    let probe = d.join(".tcpwin-probe");
    std::fs::write(&probe, b"").with_context(|| format!("cannot write into {}", d.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

fn write_svg(dir: &Path, name: &str, svg: Result<String>) -> Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, svg?).with_context(|| format!("cannot write {}", p.display()))?;
    eprintln!("tcpwin-trace lab: wrote {}", p.display());
    Ok(())
}

fn mbit(v: f64) -> String {
    format!("{:.1}", v)
}

/// The WAN rows drawn: predicted vs measured per row, and the window sweep.
pub fn draw_wan(dir: &Path, rows: &[crate::rows::WanRow]) -> Result<()> {
    let labels: Vec<String> = rows
        .iter()
        .map(|r| {
            let l = format!("{}: {}", r.scenario, r.condition);
            match l.char_indices().nth(40) {
                Some((i, _)) => format!("{}...", &l[..i]),
                None => l,
            }
        })
        .collect();
    let m = |v: Option<u64>| v.map(|v| v as f64 / 1e6);
    write_svg(
        dir,
        "wan.svg",
        bars_svg(
            "predicted (window / RTT, capped by the path) vs measured throughput",
            "Mbit/s",
            &labels,
            &[
                (
                    "predicted",
                    rows.iter().map(|r| m(r.predicted_bps)).collect(),
                ),
                (
                    "measured",
                    rows.iter().map(|r| m(r.throughput_bps)).collect(),
                ),
            ],
            mbit,
        ),
    )?;
    let sweep: Vec<(f64, f64, f64)> = rows
        .iter()
        .filter(|r| r.scenario == "window-sweep")
        .filter_map(|r| {
            Some((
                r.window? as f64 / 1024.0,
                m(r.predicted_bps)?,
                m(r.throughput_bps)?,
            ))
        })
        .collect();
    if !sweep.is_empty() {
        let r = rows
            .iter()
            .find(|r| r.scenario == "window-sweep")
            .expect("a sweep row");
        write_svg(
            dir,
            "window-sweep.svg",
            sweep_svg(
                &format!(
                    "window sweep: {} ms RTT, {} bottleneck",
                    r.rtt_ms,
                    r.rate_limit_bps
                        .map(tcpwin_model::verdict::fmt_rate)
                        .unwrap_or_else(|| "no".into())
                ),
                &sweep,
            ),
        )?;
    }
    Ok(())
}

/// The experiment drawn: scaling_ratio per packet shape (lab.svg).
pub fn draw_experiment(dir: &Path, result: &crate::experiment::LabResult) -> Result<()> {
    let lines: Vec<_> = result.rows.iter().map(|r| r.to_line()).collect();
    let labels: Vec<String> = lines
        .iter()
        .map(|r| {
            format!(
                "MTU {} GRO {} TSO {} {}",
                r.mtu,
                if r.gro { "on" } else { "off" },
                if r.tso { "on" } else { "off" },
                r.buffer
            )
        })
        .collect();
    write_svg(
        dir,
        "lab.svg",
        bars_svg(
            &format!("scaling_ratio per packet shape (Linux {})", result.kernel),
            "scaling_ratio (256ths)",
            &labels,
            &[(
                "scaling_ratio",
                lines
                    .iter()
                    .map(|r| r.scaling_ratio.map(|v| v as f64))
                    .collect(),
            )],
            |v| format!("{v:.0}"),
        ),
    )?;
    Ok(())
}

/// One bar group per label, one bar per series, each bar labelled with its value (`fmt`).
pub fn bars_svg(
    title: &str,
    y_desc: &str,
    labels: &[String],
    series: &[(&str, Vec<Option<f64>>)],
    fmt: fn(f64) -> String,
) -> Result<String> {
    let colors = [BLUE, RED, GREEN];
    let n = labels.len().max(1);
    let y_max = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .fold(0.0f64, |a, b| a.max(*b));
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, ((n as u32 * 90).max(640) + 80 + LEGEND_W, 640))
                .into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .margin_right(LEGEND_W)
            .x_label_area_size(220)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..n as f64, 0.0..(y_max * 1.15).max(1.0))
            .map_err(err)?;
        c.configure_mesh()
            .max_light_lines(0)
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(y_desc)
            .draw()
            .map_err(err)?;
        // the group names, written downwards under each group (plotters' own axis labels
        // would centre rotated text on the axis)
        let style = TextStyle::from(
            ("sans-serif", 11)
                .into_font()
                .transform(FontTransform::Rotate90),
        );
        for (i, name) in labels.iter().enumerate() {
            let (px, py) = c.backend_coord(&(i as f64 + 0.5, 0.0));
            root.draw(&Text::new(name.clone(), (px + 4, py + 8), style.clone()))
                .map_err(err)?;
        }
        let k = series.len().max(1) as f64;
        let w = 0.8 / k;
        for (si, (name, values)) in series.iter().enumerate() {
            let col = colors[si % colors.len()];
            let bars: Vec<(f64, f64)> = values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| (i as f64 + 0.1 + w * si as f64, v)))
                .collect();
            c.draw_series(
                bars.iter()
                    .map(|(x, v)| Rectangle::new([(*x, 0.0), (*x + w * 0.9, *v)], col.filled())),
            )
            .map_err(err)?
            .label(*name)
            .legend(swatch(col));
            c.draw_series(bars.iter().map(|(x, v)| {
                Text::new(
                    fmt(*v),
                    (*x, *v + y_max * 0.02),
                    ("sans-serif", 10).into_font(),
                )
            }))
            .map_err(err)?;
        }
        legend_box(&mut c)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// Throughput against the window: the window / RTT line (capped by the bottleneck) and what
/// each transfer measured, in Mbit/s over window KiB.
pub fn sweep_svg(title: &str, points: &[(f64, f64, f64)]) -> Result<String> {
    let x_max = points.iter().map(|p| p.0).fold(0.0, f64::max) * 1.1;
    let y_max = points.iter().map(|p| p.1.max(p.2)).fold(0.0, f64::max) * 1.15;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (800 + LEGEND_W, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .margin_right(LEGEND_W)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max.max(1.0), 0.0..y_max.max(1.0))
            .map_err(err)?;
        c.configure_mesh()
            .max_light_lines(0)
            .x_desc("window (KiB)")
            .y_desc("Mbit/s")
            .draw()
            .map_err(err)?;
        c.draw_series(LineSeries::new(
            points.iter().map(|p| (p.0, p.1)),
            BLUE.stroke_width(2),
        ))
        .map_err(err)?
        .label("predicted: min(window / RTT, bottleneck)")
        .legend(swatch(BLUE));
        c.draw_series(
            points
                .iter()
                .map(|p| Circle::new((p.0, p.2), 5, RED.filled())),
        )
        .map_err(err)?
        .label("measured (the sender's steady rate)")
        .legend(move |(x, y)| Circle::new((x + 8, y), 4, RED.filled()));
        c.draw_series(points.iter().map(|p| {
            Text::new(
                format!("{:.1}", p.2),
                (p.0, p.2 + y_max * 0.03),
                ("sans-serif", 10).into_font(),
            )
        }))
        .map_err(err)?;
        legend_box(&mut c)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}
