//! The kernel side explaining itself (`--ebpf-log LEVEL`): an aya-log line where the programs
//! lose or skip something that the counters only count: a socket the state map could not keep,
//! an event the ring buffer had no room for, an interface the histogram could not place, a
//! member absent on this kernel, an iterator record not written, a kernel read that faulted,
//! a socket `--pid` does not own.
//!
//! The level is aya-log's `AYA_LOG_LEVEL`, a `.rodata` constant the loader writes (0 when
//! `--ebpf-log` is not given): the verifier knows it, so the code of every disabled level is
//! never reached, never verified, and costs nothing at run time.
//!
//! Every line starts with the hook's id (`tcpwin_common::hook`): userspace prints the program and
//! hook in its place. Every line is counted as due (`counter::LOG_DUE`) before aya-log tries to
//! write it: one the log ring had no room for is counted as lost by userspace, never silent.

pub use aya_log_ebpf::macro_support::Level;

/// `klog!(Warn, hook, "{} text {}", arg)`: the format string's first `{}` is the hook id.
#[cfg(not(feature = "nolog"))]
macro_rules! klog {
    ($level:ident, $hook:expr, $fmt:tt $(, $arg:expr)* $(,)?) => {{
        if aya_log_ebpf::macro_support::level_enabled(aya_log_ebpf::macro_support::Level::$level) {
            $crate::emit::count(tcpwin_common::counter::LOG_DUE);
            aya_log_ebpf::log!(
                &(),
                target: "tcpwin",
                aya_log_ebpf::macro_support::Level::$level,
                $fmt,
                $hook $(, $arg)*
            );
        }
    }};
}
/// Built with `--features nolog` (`cargo xtask bench` builds such an object to compare against):
/// no log code at all, the arguments type-checked and never evaluated.
#[cfg(feature = "nolog")]
macro_rules! klog {
    ($level:ident, $hook:expr, $fmt:tt $(, $arg:expr)* $(,)?) => {{
        if false {
            let _ = ($hook $(, $arg)*);
        }
    }};
}
pub(crate) use klog;

/// Whether lines of `level` are wanted (a `.rodata` constant to the verifier).
#[inline(always)]
pub fn on(level: aya_log_ebpf::macro_support::Level) -> bool {
    !cfg!(feature = "nolog") && aya_log_ebpf::macro_support::level_enabled(level)
}
