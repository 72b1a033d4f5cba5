//! The charts' shared style: the product's recordings (`ui/plot.rs`) and the lab's tables
//! (`tcpwin_lab::plot`) draw their legends the same way, beside the data.
use anyhow::anyhow;
use plotters::{coord::types::RangedCoordf64, prelude::*};

pub const BLUE: RGBColor = RGBColor(31, 119, 180);
pub const ORANGE: RGBColor = RGBColor(255, 127, 14);
pub const GREEN: RGBColor = RGBColor(44, 160, 44);
pub const PURPLE: RGBColor = RGBColor(148, 103, 189);
pub const RED: RGBColor = RGBColor(214, 39, 40);
pub const GRAY: RGBColor = RGBColor(127, 127, 127);

/// A chart with both axes in f64 on an SVG drawing.
pub type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A series' mark in the legend box.
pub fn swatch(col: RGBColor) -> impl Fn((i32, i32)) -> Rectangle<(i32, i32)> {
    move |(x, y)| Rectangle::new([(x, y - 3), (x + 16, y + 3)], col.filled())
}

/// Room to the right of each chart's data, for its legend: the legend never covers the data.
pub const LEGEND_W: u32 = 230;

/// The legend box, beside the data (in the margin kept for it), level with the chart's top.
pub fn legend_box<'a, 'b: 'a>(c: &mut Chart<'a, 'b>) -> anyhow::Result<()> {
    let (w, _) = c.plotting_area().dim_in_pixel();
    c.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .position(SeriesLabelPosition::Coordinate(w as i32 + 10, 0))
        .draw()
        .map_err(err)
}

pub fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing the SVG: {e:?}")
}
