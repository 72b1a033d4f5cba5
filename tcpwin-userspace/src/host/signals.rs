//! Ctrl-C and SIGTERM as a flag the commands' loops check: `ss -i`, `top` and the exporter stop
//! between two readings, with their terminal, sockets and programs released by their own drops
//! (a default handler would kill the process first).
use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

static STOP: AtomicBool = AtomicBool::new(false);

/// How often a wait looks at the flag.
const POLL: Duration = Duration::from_millis(20);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Ctrl-C / SIGTERM raise the flag instead of ending the process.
pub fn install_stop_handler() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
}

/// Sleeps up to `d`, waking early on Ctrl-C / SIGTERM (after [`install_stop_handler`]); true when
/// asked to stop.
pub fn wait_or_stop(d: Duration) -> bool {
    let deadline = Instant::now() + d;
    while Instant::now() < deadline {
        if STOP.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()).min(POLL));
    }
    STOP.load(Ordering::SeqCst)
}
