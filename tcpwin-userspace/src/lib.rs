//! tcpwin-trace, the userspace side. Dependencies run one way:
//! `cmd` (commands) -> `gather` (readings that combine kernel and host) -> `kernel` (the only aya
//! user) / `host` (/proc, /sys, netlink) / `ui` (rendering and its state) -> `tcpwin_model` ->
//! `tcpwin_common`. Each command declares its arguments beside it; only the `lab` command uses
//! the test bench crate (`tcpwin_lab`). `tests/layout.rs` checks these rules.
pub mod cmd;
pub mod gather;
pub mod host;
pub mod kernel;
pub mod ui;
