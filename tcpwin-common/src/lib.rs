//! Types shared by the kernel side (`tcpwin-ebpf`) and userspace (`tcpwin-trace`).
//!
//! Every struct here is `repr(C)` and has one layout whatever backend produced it. The kernel side
//! never knows a struct offset at build time: userspace resolves them from the running kernel's BTF
//! and writes an [`Offsets`] into the programs' `.rodata` before load.
#![cfg_attr(not(any(test, feature = "user")), no_std)]

#[cfg(feature = "chart")]
pub mod chart;
pub mod formula;
pub mod names;
/// Into a network namespace: a thread, or a program before it starts (userspace only)
#[cfg(feature = "user")]
pub mod netns;
/// Ctrl-C / SIGTERM as a flag (userspace only)
#[cfg(feature = "user")]
pub mod stop;

mod config;
mod event;
mod kernel;
mod maps;
mod offsets;

pub use config::*;
pub use event::*;
pub use kernel::*;
pub use maps::*;
pub use offsets::*;

/// The ABI both sides compile: a field added, removed or resized on one side breaks the build
/// here, not a decode at run time (the eBPF side writes these bytes, userspace reads them).
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<Offsets>() == 296);
    assert!(size_of::<Config>() == 48);
    assert!(size_of::<Checked>() == 16);
    assert!(size_of::<Event>() == 176);
    assert!(size_of::<SockRecord>() == 256);
    assert!(size_of::<IfKey>() == 8);
    assert!(size_of::<PortKey>() == 8);
    assert!(size_of::<TupleKey>() == 40);
    assert!(size_of::<InitParams>() == 16);
    assert!(size_of::<ClosedSums>() == 32);
};

#[cfg(feature = "user")]
mod user {
    use super::*;
    // SAFETY (each): repr(C) structs of integers and integer arrays only, with explicit padding
    // fields, so every bit pattern is a valid value and there are no pointers or niches; the
    // sizes are asserted above.
    unsafe impl aya::Pod for Offsets {}
    // SAFETY: as above.
    unsafe impl aya::Pod for Config {}
    // SAFETY: as above.
    unsafe impl aya::Pod for Event {}
    // SAFETY: as above.
    unsafe impl aya::Pod for IfKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for PortKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for SockRecord {}
    // SAFETY: as above.
    unsafe impl aya::Pod for ClosedSums {}
}
