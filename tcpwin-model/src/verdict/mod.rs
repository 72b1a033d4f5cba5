//! Which limit binds a connection's window: pure functions over [`SockFacts`] and [`HostLimits`].
//!
//! One connection, one truth: when both ends are visible (same host, or any namespaces asked),
//! they are judged together — the sender's RTTs and delivered rate, the receiver's window and
//! caps — and both get the same verdict.
//!
//! The order of the questions:
//! 1. **Is an application not reading?** A zero window with unread data (at the receiver), or a
//!    zero window seen by the sender, stalls the connection at any rate: `app-not-reading`, never
//!    `idle`. So is a backlog that keeps the advertised window under three quarters of its size
//!    over the interval (half, in one snapshot), and a reader caught between its bursts.
//! 2. **Does the sender's own buffer bind?** Direct evidence first: data queued up to the send
//!    buffer while the peer's window and the congestion window allow more; the kernel's
//!    sndbuf-limited time supports it (it stays at 0 for some write patterns).
//! 3. **Does the window bind?** Little's law makes rate ≈ window / RTT true of every flow whose
//!    in-flight data fills its window, window-limited or not: behind a bottleneck queue the RTT
//!    grows until it holds. So when the RTT is well above the base RTT (the path's minimum,
//!    `min_rtt`), the window binds only if the rate is near window / **base** RTT; a flow at
//!    window / RTT but far under window / base RTT is held by the path's queue (`path-queue`):
//!    a larger window only lengthens the queue. Without a queue, rate ≥ 70 % of window / RTT is
//!    window-limited. The rate decides, for every congestion control alike (BBR paces and shows
//!    ~40 % rwnd-limited time where cubic shows ~99 % for the same window).
//! 4. **Which cap makes the window what it is** (receiver's side): scaling not negotiated,
//!    memory pressure, a clamp, a locked buffer, autotuning at its maximum (or off), the scaling
//!    ratio — a primary limit and the others as contributing factors, each with its fix and the
//!    window it would give.
//!
//! Fixes are sized from the base RTT and `--target` (or per 100 Mbit/s when no target is
//! given; per 1, 10 or 100 Gbit/s on short paths), never lower a setting, say which settings are global (`net.core.rmem_max`) and which
//! belong to the socket's namespace, and run in that namespace (`ip netns exec NAME`).
//!
//! One file per family of limits, each holding its decision, its fix and its sizing: `scale`
//! (scaling, clamps), `buffer` (the receive buffer, autotuning, memory pressure), `ratio`,
//! `apps` (a receiver that does not read), `sender` (its buffer, its congestion window, the
//! peer's window), `path` (the RTT judged against, a queue, the window not binding); `caps`
//! asks the receiver's families in order; `limit` is the table of every limit.
//!
//! Floors: `types` (what a verdict says, what it is judged from), `limit`, `fix`, `end` and
//! `sizing` at the bottom; the families in between; `decide` (the questions in order) on top.
//! No file imports one above it (`tests/floors.rs` checks it): a new family is one file and
//! one row of the limit table.
mod apps;
mod buffer;
mod caps;
mod ceilings;
mod decide;
mod end;
mod fix;
mod limit;
mod path;
mod ratio;
mod receiver;
mod scale;
mod selfcheck;
mod sender;
mod sizing;
mod types;

pub use decide::verdict;
pub use end::End;
pub use fix::{AppFix, Fix, FixEnd};
pub use limit::{Class, Limit};
pub use ratio::{GRO_RATIO, GRO_RATIO_FLOOR, LOW_RATIO};
pub use selfcheck::{contradictions, Contradiction, Reading};
pub use sizing::{fmt_rate, fmt_rtt};
pub use types::{Basis, Ceiling, Factor, Input, Kind, Side, Verdict, WINDOW_LIMITED_SHARE};

#[cfg(test)]
mod tests;
