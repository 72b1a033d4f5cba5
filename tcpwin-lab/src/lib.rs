//! tcpwin-lab: test hosts for tcpwin-trace, apart from the tracer's core. Used by the product's
//! `lab` and `demo` commands, the end-to-end tests and the benchmark (`tcpwin-bench`).
//!
//! - `programs`: real programs as traffic (iperf3, nginx, curl, wget, python), run inside the
//!   namespaces;
//! - `pair`: two network namespaces joined by veth, or by a path namespace (a WAN), removed on
//!   drop (entered by `tcpwin_common::netns`, the one way in);
//! - `delay`: the path's delay line (AF_PACKET forwarder; this machine kind has no netem);
//! - `endpoints`: the built-in receiver and sender, reporting the kernel's view of each
//!   connection from the owning process (the ground truth);
//! - `sysctl`: global sysctls set for an experiment and restored;
//! - `harness`: the tracer and the endpoints as child processes, bounded waits, Ctrl-C;
//! - `pty`: a pseudo-terminal for the tests of full-screen commands;
//! - `rows`: what the lab, its endpoints and the benchmark write (JSON lines), as typed structs;
//! - `experiment`: article 004's experiment (packet shapes against one buffer), traced;
//! - `wan`: the scenarios over a long path, their runs, four ways of reading, the fix loop, the
//!   tallies; `table`: the lab's tables; `plot`: the same drawn as SVG;
//! - `readings`: what the lab asks of the product (its readings of sockets, its peer client).
pub mod delay;
pub mod endpoints;
pub mod experiment;
pub mod harness;
pub mod pair;
pub mod plot;
pub mod programs;
pub mod pty;
pub mod readings;
pub mod rows;
pub mod sysctl;
pub mod table;
pub mod wan;
