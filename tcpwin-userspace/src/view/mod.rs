//! Rendering into a `Write`, nothing else: live event lines, histograms, the summary.
pub mod check;
pub mod hist;
pub mod openmetrics;
pub mod ss;
pub mod summary;
pub mod text;
pub mod verdict;
