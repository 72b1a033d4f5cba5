//! tcpwin-lab: test hosts for tcpwin-trace, apart from the tracer's core. Used by the product's
//! `lab` and `demo` commands, the end-to-end tests and the benchmark (`tcpwin-bench`).
//!
//! - `netns`: two network namespaces joined by veth, removed on drop;
//! - `endpoints`: the built-in receiver and sender, reporting the kernel's view of each
//!   connection from the owning process (the ground truth);
//! - `harness`: the tracer and the endpoints as child processes, bounded waits, Ctrl-C.
pub mod endpoints;
pub mod harness;
pub mod netns;
