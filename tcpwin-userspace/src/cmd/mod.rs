//! The product's commands: each turns its arguments (from `cli`) into `gather`, kernel, host and
//! ui calls. No command calls another; the lab (with the demo and its traffic endpoints) is
//! the only one that uses the test bench crate.
pub mod cache;
pub mod check;
pub mod exporter;
pub mod lab;
pub mod manpages;
pub mod report;
pub mod ss;
pub mod top;
pub mod trace;
