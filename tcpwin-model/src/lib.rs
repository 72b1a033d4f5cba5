//! tcpwin-model: what tcpwin-trace knows about sockets, whatever read it (the tracer's ring
//! buffer, the socket iterator, a recording). Pure: no kernel access, no aya, no libc; every test
//! runs without root.
//!
//! - `id`: which socket (`SocketId`, shared by every per-socket line and fact);
//! - `kernel_notes`: what each kernel version changed or gets wrong about receive windows;
//! - `kind`: event kinds;
//! - `decode`: a kernel event decoded into a `Record`, with absent facts made explicit;
//! - `schema`: every serialized shape (event, verdict, sample, header and summary lines; `ss`
//!   lines) and the socket identity they share: the JSON key names live there;
//! - `recording`: a recording parsed, per-socket series, the figures `report A B` compares;
//! - `timeline`: per-socket last and final values;
//! - `hist`: histograms;
//! - `tcp_info`: `struct tcp_info` from its bytes;
//! - `facts`: what verdicts read (a socket, the host limits, an end's recorded readings);
//! - `verdict`: which limit binds a window, and the change that lifts it;
//! - `judge`: the one stateful judge every front end uses (readings in, verdicts out);
//! - `units`: rates, durations and paths as users write them;
//! - `addr`: an address or a network (`--addr`), matched against a connection's ends;
//! - `check`: the host audited, and whether a bandwidth-delay product fits;
//! - `metrics`: what the exporter publishes (the metric names live there);
//! - `workload`: whose a socket is (container, pod, unit) from its owner's cgroup.
pub mod addr;
pub mod check;
pub mod decode;
pub mod facts;
pub mod hist;
pub mod id;
pub mod judge;
pub mod kernel_notes;
pub mod kind;
pub mod metrics;
pub mod peer;
pub mod recording;
pub mod schema;
pub mod tcp_info;
pub mod timeline;
pub mod units;
pub mod verdict;
pub mod workload;
