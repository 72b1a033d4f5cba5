//! Rendering into a `Write`, nothing else: live event lines, histograms, the summary.
pub mod check;
pub mod hist;
pub mod openmetrics;
pub mod plot;
pub mod report;
pub mod ss;
pub mod summary;
pub mod text;
pub mod top;
pub mod verdict;

/// A value, or `-` where it is absent.
pub fn or_dash<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}
