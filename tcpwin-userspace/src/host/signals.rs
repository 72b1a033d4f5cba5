//! Ctrl-C and SIGTERM as a flag the commands' loops check: `ss -i`, `top` and the exporter stop
//! between two readings, with their terminal, sockets and programs released by their own drops
//! (a default handler would kill the process first).
use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, OnceLock,
    },
    time::{Duration, Instant},
};

/// Raised by Ctrl-C / SIGTERM once [`install_stop_handler`] ran.
fn stop_flag() -> &'static Arc<AtomicBool> {
    static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    STOP.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

fn stopped() -> bool {
    stop_flag().load(Ordering::SeqCst)
}

/// How often a wait looks at the flag.
const POLL: Duration = Duration::from_millis(20);

/// Ctrl-C / SIGTERM raise the flag instead of ending the process.
pub fn install_stop_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for s in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // only the two signals every process may handle: registering cannot be refused
            signal_hook::flag::register(s, stop_flag().clone()).expect("SIGINT/SIGTERM handler");
        }
    });
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
