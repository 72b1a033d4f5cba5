//! Facts about the host read from /proc, /sys and netlink: which sockets a PID owns, interface
//! names, network namespaces, sysctls, the kernel's configuration, the container
//! runtimes' names.
pub mod conntrack;
pub mod containers;
pub mod ifname;
pub mod kconfig;
pub mod netdev;
pub mod netlink;
pub mod netns;
pub mod owner;
pub mod process;
pub mod route;
pub mod sockdiag;
pub mod sysctl;

/// CLOCK_MONOTONIC in ns: the clock of `bpf_ktime_get_ns`, so event times and snapshots compare.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
