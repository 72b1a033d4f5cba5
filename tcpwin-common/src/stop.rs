//! Ctrl-C and SIGTERM as a flag the loops check (signal-hook), one for every userspace program:
//! the tracer, `ss -i`, `top`, the exporter, the lab and the bench stop between two steps, their
//! programs, terminal, sockets and namespaces released by their own drops (a default handler
//! would kill the process first).
use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, OnceLock,
    },
    time::{Duration, Instant},
};

use signal_hook::consts::{SIGINT, SIGTERM};

/// The signal that asked to stop (0: none yet), once [`install_stop_handler`] ran.
fn flag() -> &'static Arc<AtomicUsize> {
    static STOP: OnceLock<Arc<AtomicUsize>> = OnceLock::new();
    STOP.get_or_init(|| Arc::new(AtomicUsize::new(0)))
}

/// How often a wait looks at the flag.
const POLL: Duration = Duration::from_millis(20);

/// Ctrl-C / SIGTERM raise the flag instead of ending the process (from the first call on).
pub fn install_stop_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for s in [SIGINT, SIGTERM] {
            // only the two signals every process may handle: registering cannot be refused
            signal_hook::flag::register_usize(s, flag().clone(), s as usize)
                .expect("SIGINT/SIGTERM handler");
        }
    });
}

/// Whether Ctrl-C / SIGTERM asked to stop.
pub fn stopped() -> bool {
    flag().load(Ordering::SeqCst) != 0
}

/// The signal that asked to stop, by name (`SIGINT`, `SIGTERM`), or None.
pub fn stopped_by() -> Option<&'static str> {
    match flag().load(Ordering::SeqCst) {
        0 => None,
        s if s == SIGINT as usize => Some("SIGINT"),
        _ => Some("SIGTERM"),
    }
}

/// Sleeps up to `d`, waking early on Ctrl-C / SIGTERM (after [`install_stop_handler`]); true when
/// asked to stop.
pub fn wait_or_stop(d: Duration) -> bool {
    let deadline = Instant::now() + d;
    while Instant::now() < deadline {
        if stopped() {
            return true;
        }
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()).min(POLL));
    }
    stopped()
}
