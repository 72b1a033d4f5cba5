//! The product's commands: each turns its arguments into kernel, host and view calls.
pub mod check;
pub mod demo;
pub mod exporter;
pub mod judges;
pub mod lab;
pub mod manpages;
pub mod report;
pub mod snapshot;
pub mod ss;
pub mod top;
pub mod trace;
