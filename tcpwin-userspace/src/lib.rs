//! tcpwin-trace, the userspace side. Dependencies run one way:
//! `cmd` (commands) -> `kernel` (the only aya user) / `host` (/proc, /sys) / `view` (rendering)
//! -> `tcpwin_model` -> `tcpwin_common`. The test hosts and endpoints are `tcpwin_lab`.
pub mod cli;
pub mod cmd;
pub mod host;
pub mod kernel;
pub mod view;
