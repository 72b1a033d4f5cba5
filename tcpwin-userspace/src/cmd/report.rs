//! `tcpwin-trace report FILE [B] [--svg OUT]`: what a recording holds, or two side by side.
use std::io::Write;

use anyhow::{Context, Result};
use tcpwin_model::recording::{figures, moved_data, parse_recording, socket_series, Recording};

use crate::ui::{plot, report};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A recording (`tcpwin-trace record -o FILE`); two to set them side by side (e.g. GRO off
    /// then on)
    #[arg(required = true, num_args = 1..=2, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Also draw it as SVG: per socket, window_clamp / rcv_ssthresh / rcv_wnd / sk_rcvbuf over
    /// time with the ratio changes marked, and the rate against window / RTT
    #[arg(long, value_name = "OUT.svg")]
    pub svg: Option<PathBuf>,
}

fn load(p: &std::path::Path) -> Result<Recording> {
    let text = std::fs::read_to_string(p)
        .with_context(|| format!("cannot read the recording {}", p.display()))?;
    parse_recording(&text, &p.display().to_string())
}

pub fn run(args: ReportArgs) -> Result<()> {
    let recs: Vec<Recording> = args.files.iter().map(|p| load(p)).collect::<Result<_>>()?;
    let series: Vec<_> = recs.iter().map(socket_series).collect();
    // the SVG first: an unwritable path fails before any output; sockets that moved no data
    // (control connections) are left out, and said so
    let mut drawn_note = Vec::new();
    if let Some(out) = &args.svg {
        let drawn: Vec<Vec<_>> = series
            .iter()
            .map(|s| s.iter().filter(|x| moved_data(x)).cloned().collect())
            .collect();
        for (i, (all, d)) in series.iter().zip(&drawn).enumerate() {
            let names: Vec<&str> = d.iter().map(|x| x.name.as_str()).collect();
            drawn_note.push(format!(
                "{}: drew {} ({}); left out {} idle",
                args.files[i].display(),
                names.len(),
                names.join(", "),
                all.len() - d.len()
            ));
        }
        let cols: Vec<&[_]> = drawn.iter().map(|s| s.as_slice()).collect();
        let svg = plot::columns_svg(&cols)?;
        std::fs::write(out, svg)
            .with_context(|| format!("cannot write the SVG {}", out.display()))?;
    }
    let stdout = std::io::stdout();
    let mut w = std::io::BufWriter::new(stdout.lock());
    match recs.as_slice() {
        [a] => report::render(a, &args.files[0].display().to_string(), &series[0], &mut w)?,
        [a, b] => report::render_comparison(
            (
                &args.files[0].display().to_string(),
                &args.files[1].display().to_string(),
            ),
            &figures(a),
            &figures(b),
            &mut w,
        )?,
        _ => unreachable!("clap takes one or two files"),
    }
    if let Some(out) = &args.svg {
        writeln!(w, "SVG: {}", out.display())?;
        for n in drawn_note {
            writeln!(w, "  {n}")?;
        }
    }
    Ok(w.flush()?)
}
