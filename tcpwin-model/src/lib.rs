//! tcpwin-model: what tcpwin-trace knows about sockets, whatever read it (the tracer's ring
//! buffer, the socket iterator, a recording). Pure: no kernel access, no aya, no libc; every test
//! runs without root.
//!
//! - `kind`: event kinds;
//! - `record`: a kernel event decoded, with absent facts made explicit;
//! - `schema`: the JSON written and read (the only place key names exist);
//! - `timeline`: per-socket last and final values;
//! - `hist`: histograms;
//! - `tcp_info`: `struct tcp_info` from its bytes;
//! - `facts`: what verdicts read (a socket, the host limits);
//! - `verdict`: which limit binds a window, and the change that lifts it;
//! - `units`: rates and durations as users write them;
//! - `check`: the host audited, and whether a bandwidth-delay product fits;
//! - `sockdiag`: sock_diag replies parsed into facts (the fallback of `ss`);
//! - `metrics`: what the exporter publishes (the only place metric names exist).
pub mod check;
pub mod facts;
pub mod hist;
pub mod kind;
pub mod metrics;
pub mod record;
pub mod recording;
pub mod schema;
pub mod sockdiag;
pub mod tcp_info;
pub mod timeline;
pub mod top;
pub mod units;
pub mod verdict;
