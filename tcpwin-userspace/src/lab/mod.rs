//! `tcpwin-trace lab`: experiments in namespaces, traced by the tracer itself.
//! - `harness`: the tracer as a child process, the built-in receiver/sender in a `netns::Pair`;
//! - `experiment`: the GRO / MTU / buffer matrix and the handshake / sysctl tables;
//! - `table`: text and JSON rendering of the results.
pub mod experiment;
pub mod harness;
pub mod table;

pub use harness::{check_stop, install_stop_handler, wait_bounded, Proc, Tracer, Transfer};
