//! Recordings drawn as SVG by `plotters` (its SVG backend; text laid out without system fonts):
//! per socket, the window fields over time with each ratio change marked and labelled with its
//! packet, and the rate against the window / RTT ceiling.
use anyhow::Result;
use plotters::{coord::Shift, prelude::*};
use tcpwin_common::chart::{
    err, legend_box, swatch, Chart, BLUE, GRAY, GREEN, LEGEND_W, ORANGE, PURPLE, RED,
};
use tcpwin_model::recording::{SocketSeries, RATE_FIELDS, WINDOW_FIELDS};

const W: u32 = 960;
const PANEL_H: u32 = 560;
/// ratio-change labels drawn per socket (all are marked)
const MAX_LABELS: usize = 6;

fn color(field: &str) -> RGBColor {
    match field {
        "window_clamp" => BLUE,
        "rcv_ssthresh" => ORANGE,
        "rcv_wnd" => GREEN,
        "sk_rcvbuf" => PURPLE,
        "rate" => RED,
        _ => GRAY,
    }
}

/// A chart over the recording's time axis, its values labelled by `y_label`.
fn time_chart<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: Option<String>,
    t_max: f64,
    y_max: f64,
    y_label: &dyn Fn(&f64) -> String,
) -> Result<Chart<'a, 'b>> {
    let mut b = ChartBuilder::on(area);
    if let Some(c) = caption {
        b.caption(c, ("sans-serif", 16));
    }
    let mut c = b
        .margin(8)
        .margin_right(LEGEND_W)
        .x_label_area_size(28)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..t_max.max(1e-3), 0.0..(y_max * 1.15).max(1.0))
        .map_err(err)?;
    c.configure_mesh()
        .max_light_lines(0)
        .x_desc("s")
        .y_label_formatter(y_label)
        .draw()
        .map_err(err)?;
    Ok(c)
}

/// One line per field the socket has, labelled with its last value; `dots`: each point marked
/// too (one sample a second: a short recording still shows).
fn field_lines(c: &mut Chart, s: &SocketSeries, fields: &[&str], dots: bool) -> Result<()> {
    for f in fields {
        let Some(pts) = s.series.get(f).filter(|p| !p.is_empty()) else {
            continue;
        };
        let col = color(f);
        if dots {
            c.draw_series(pts.iter().map(|p| Circle::new(*p, 3, col.filled())))
                .map_err(err)?;
        }
        c.draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))
            .map_err(err)?
            .label(legend(f, pts.last().expect("not empty").1))
            .legend(swatch(col));
    }
    Ok(())
}

/// The label a series carries in the legend: its field and last value (what the tests read).
pub fn legend(field: &str, last: f64) -> String {
    match field {
        "rate" | "ceiling" => format!("{field} (last {} bit/s)", last.round() as u64),
        _ => format!("{field} (last {} B)", last.round() as u64),
    }
}

fn bytes_label(v: &f64) -> String {
    match *v {
        v if v >= (1 << 20) as f64 => format!("{:.1} MiB", v / (1 << 20) as f64),
        v if v >= 1024.0 => format!("{:.0} KiB", v / 1024.0),
        v => format!("{v:.0} B"),
    }
}

fn rate_label(v: &f64) -> String {
    match *v {
        v if v >= 1e9 => format!("{:.1} Gbit/s", v / 1e9),
        v if v >= 1e6 => format!("{:.0} Mbit/s", v / 1e6),
        v => format!("{:.0} kbit/s", v / 1e3),
    }
}

fn max_of<'a>(s: &'a SocketSeries, fields: &'a [&str]) -> (f64, f64) {
    let pts = fields
        .iter()
        .filter_map(|f| s.series.get(f))
        .flat_map(|v| v.iter());
    pts.fold((0.0f64, 0.0f64), |(t, y), (a, b)| (t.max(*a), y.max(*b)))
}

/// One socket: windows above, rates below.
fn panel(area: &DrawingArea<SVGBackend, Shift>, s: &SocketSeries, t_max: f64) -> Result<()> {
    let (top, bottom) = area.split_vertically(PANEL_H * 3 / 5);
    let (_, y_max) = max_of(s, &WINDOW_FIELDS);
    let mut c = time_chart(
        &top,
        Some(format!("{} (socket {:x})", s.name, s.cookie)),
        t_max,
        y_max,
        &bytes_label,
    )?;
    field_lines(&mut c, s, &WINDOW_FIELDS, false)?;
    // ratio changes: a mark at the top, the first few labelled with their packet
    let y_mark = y_max * 1.08;
    c.draw_series(
        s.marks
            .iter()
            .map(|m| Circle::new((m.t_s, y_mark), 4, BLACK.filled())),
    )
    .map_err(err)?;
    for (i, m) in s.marks.iter().take(MAX_LABELS).enumerate() {
        let y = y_max * (1.02 - 0.07 * (i % 3) as f64);
        c.draw_series(std::iter::once(Text::new(
            m.label.clone(),
            (m.t_s, y),
            ("sans-serif", 11).into_font().color(&BLACK),
        )))
        .map_err(err)?;
    }
    legend_box(&mut c)?;

    let (_, r_max) = max_of(s, &RATE_FIELDS);
    let mut r = time_chart(&bottom, None, t_max, r_max, &rate_label)?;
    field_lines(&mut r, s, &RATE_FIELDS, true)?;
    if RATE_FIELDS.iter().any(|f| s.series.contains_key(f)) {
        legend_box(&mut r)?;
    }
    Ok(())
}

/// Every socket of one recording, one panel each, on a shared time axis.
pub fn sockets_svg(sockets: &[SocketSeries]) -> Result<String> {
    columns_svg(&[sockets])
}

/// Recordings side by side (one column each), their sockets stacked.
pub fn columns_svg(columns: &[&[SocketSeries]]) -> Result<String> {
    let rows = columns.iter().map(|c| c.len()).max().unwrap_or(0).max(1);
    let t_max = columns
        .iter()
        .flat_map(|c| c.iter())
        .map(|s| max_of(s, &WINDOW_FIELDS).0.max(max_of(s, &RATE_FIELDS).0))
        .fold(0.0, f64::max);
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (W * columns.len() as u32, PANEL_H * rows as u32))
                .into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let cols = root.split_evenly((1, columns.len()));
        for (area, sockets) in cols.iter().zip(columns) {
            let panels = area.split_evenly((rows, 1));
            for (p, s) in panels.iter().zip(sockets.iter()) {
                panel(p, s, t_max)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn socket() -> SocketSeries {
        let mut s = SocketSeries {
            cookie: 1,
            name: "10.0.0.2:5201 <- 10.0.0.1:40000".into(),
            ..Default::default()
        };
        for (f, v) in [("window_clamp", 900_000.0), ("rcv_wnd", 800_000.0)] {
            s.series
                .insert(f, (0..20).map(|i| (i as f64 * 0.5, v)).collect());
        }
        s.series
            .insert("rate", (0..20).map(|i| (i as f64 * 0.5, 9e8)).collect());
        s
    }

    /// The x of every point of the SVG's lines, and of each text that is a legend label.
    fn xs(svg: &str) -> (f64, Vec<(String, f64)>) {
        let doc = roxmltree::Document::parse(svg).expect("the SVG parses");
        let mut data_max = 0.0f64;
        let mut labels = Vec::new();
        for n in doc.descendants() {
            if n.has_tag_name("polyline") {
                for p in n.attribute("points").unwrap_or("").split_whitespace() {
                    let x: f64 = p.split(',').next().unwrap().parse().unwrap();
                    data_max = data_max.max(x);
                }
            }
            if n.has_tag_name("text") {
                let t = n.text().unwrap_or("").trim().to_string();
                if t.contains("(last ") {
                    labels.push((t, n.attribute("x").unwrap().parse().unwrap()));
                }
            }
        }
        (data_max, labels)
    }

    /// The legend sits beside the data, never on it: every label starts right of the last point
    /// of every line.
    #[test]
    fn the_legend_is_outside_the_data() {
        let svg = sockets_svg(&[socket()]).unwrap();
        let (data_max, labels) = xs(&svg);
        assert_eq!(labels.len(), 3, "{labels:?}");
        for (t, x) in labels {
            assert!(
                x > data_max,
                "legend {t:?} at x {x} over the data (up to {data_max})"
            );
        }
    }
}
