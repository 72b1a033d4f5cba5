//! tcpwin-trace: the userspace side. `main.rs` only parses the command line and runs a session.
pub mod attach;
pub mod bench;
pub mod btf;
pub mod cli;
pub mod demo;
pub mod hist;
pub mod ifname;
pub mod lab;
pub mod netns;
pub mod output;
pub mod owner;
pub mod record;
pub mod session;
pub mod sockets;
pub mod transfer;
