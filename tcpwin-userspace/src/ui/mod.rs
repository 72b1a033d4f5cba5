//! What users see, and the state of what they see: facts and verdicts in, text out (live event
//! lines, `ss` rows, the summary, histograms, `check`, OpenMetrics into a `Write`; SVG charts into
//! a file; `top` onto a ratatui frame), with the live trace's folding (`shown`) and `top`'s rows,
//! sort and keys (`top::state`). Pure: no kernel, no host.
pub mod check;
pub mod hist;
pub mod openmetrics;
pub mod plot;
pub mod report;
pub mod shown;
pub mod ss;
pub mod summary;
pub mod text;
pub mod top;
pub mod verdict;

/// A value, or `-` where it is absent.
pub fn or_dash<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}
