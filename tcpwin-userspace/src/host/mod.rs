//! Facts about the host read from /proc and /sys: which sockets a PID owns, interface names,
//! sysctls.
pub mod ifname;
pub mod owner;
pub mod sysctl;
