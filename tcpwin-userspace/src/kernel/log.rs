//! `--ebpf-log LEVEL`: the kernel side's own explanations (aya-log), on stderr.
//!
//! The programs log where they lose or skip something the counters count (see the kernel side's
//! `log.rs`). The level is written into the object's `.rodata` before load: off (the default)
//! the verifier drops every log statement, so nothing runs. On, a thread reads aya-log's ring
//! buffer and prints each line as
//!
//! ```text
//! tcpwin-trace: ebpf WARN tcp_probe (tp_btf tcp:tcp_probe): ring buffer full: ... [track.rs:612]
//! ```
//!
//! never on stdout, so `--json` stays one JSON object per line. The lines the programs wrote are
//! counted in the kernel (`counter::LOG_DUE`) and here: a line the log ring had no room for is
//! reported as lost.
use std::{
    fmt::Write as _,
    os::fd::{AsRawFd, RawFd},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, OnceLock,
    },
    thread::JoinHandle,
};

use anyhow::{Context, Result};
use aya::Ebpf;
use tcpwin_common::{hook, names};

/// How much the kernel side explains.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// nothing (the log code is not even verified)
    #[default]
    Off,
    /// (no line is an error today: the kernel side loses nothing it does not also count)
    Error,
    /// losses: an event the ring buffer had no room for, a socket the state map refused, a
    /// packet the histogram could not place, a counter map full, a kernel read that faulted
    Warn,
    /// and what this kernel lacks: members absent from its BTF, reported as absent
    Info,
    /// and what the programs skip on purpose: sockets `--pid` does not own (once a second per
    /// socket and CPU), listeners and request/TIME_WAIT sockets the iterator passes over
    Debug,
}

impl LogLevel {
    /// aya-log's `AYA_LOG_LEVEL` (its `Level` enum, 0 = off).
    pub fn aya(self) -> u8 {
        match self {
            LogLevel::Off => 0,
            LogLevel::Error => 1,
            LogLevel::Warn => 2,
            LogLevel::Info => 3,
            LogLevel::Debug => 4,
        }
    }

    fn from_log(l: log::Level) -> LogLevel {
        match l {
            log::Level::Error => LogLevel::Error,
            log::Level::Warn => LogLevel::Warn,
            log::Level::Info => LogLevel::Info,
            log::Level::Debug | log::Level::Trace => LogLevel::Debug,
        }
    }
}

static LEVEL: OnceLock<LogLevel> = OnceLock::new();

/// Sets the process's `--ebpf-log` level before anything is loaded (once; later calls are
/// ignored).
pub fn configure(level: LogLevel) {
    let _ = LEVEL.set(level);
}

/// The process's `--ebpf-log` level.
pub fn level() -> LogLevel {
    LEVEL.get().copied().unwrap_or_default()
}

/// hook id -> "program (method target)", for the line's prefix.
type Programs = Arc<Mutex<Vec<(u8, String)>>>;

/// Prints the lines of one loaded object.
struct Printer {
    programs: Programs,
    shown: Arc<AtomicU64>,
}

impl log::Log for Printer {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, r: &log::Record) {
        let text = r.args().to_string();
        let (id, msg) = split_hook(&text);
        let who = id
            .and_then(|id| {
                let p = self.programs.lock().ok()?;
                p.iter().find(|(h, _)| *h == id).map(|(_, s)| s.clone())
            })
            .unwrap_or_else(|| id.map(hook::name).unwrap_or("?").to_string());
        let mut line = format!(
            "tcpwin-trace: ebpf {} {who}: {msg}",
            level_name(LogLevel::from_log(r.level()))
        );
        if let (Some(f), Some(n)) = (r.file(), r.line()) {
            let f = f.rsplit('/').next().unwrap_or(f);
            let _ = write!(line, " [{f}:{n}]");
        }
        eprintln!("{line}");
        self.shown.fetch_add(1, Ordering::Relaxed);
    }

    fn flush(&self) {}
}

fn level_name(l: LogLevel) -> &'static str {
    match l {
        LogLevel::Off => "OFF",
        LogLevel::Error => "ERROR",
        LogLevel::Warn => "WARN",
        LogLevel::Info => "INFO",
        LogLevel::Debug => "DEBUG",
    }
}

/// Every kernel line starts with its hook's id: (id, the rest).
pub fn split_hook(text: &str) -> (Option<u8>, &str) {
    match text.split_once(' ') {
        Some((n, rest)) => match n.parse::<u8>() {
            Ok(id) => (Some(id), rest),
            Err(_) => (None, text),
        },
        None => (None, text),
    }
}

/// How many lines were due (written by the programs) and shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCount {
    pub due: u64,
    pub shown: u64,
}

impl LogCount {
    /// Lines the log ring had no room for.
    pub fn lost(&self) -> u64 {
        self.due.saturating_sub(self.shown)
    }

    pub fn text(&self) -> String {
        format!(
            "ebpf log lines: {} written, {} shown, {} lost{}",
            self.due,
            self.shown,
            self.lost(),
            if self.lost() > 0 {
                " (the log ring was full)"
            } else {
                ""
            }
        )
    }
}

/// The reader of one loaded object's log ring (`None` inside when logging is off).
#[derive(Default)]
pub struct KernelLog {
    inner: Option<Reader>,
}

struct Reader {
    logger: Arc<Mutex<aya_log::EbpfLogger<Printer>>>,
    programs: Programs,
    shown: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl KernelLog {
    /// Starts reading `bpf`'s log ring when `--ebpf-log` asks for lines.
    pub fn start(bpf: &mut Ebpf) -> Result<KernelLog> {
        if level() == LogLevel::Off {
            return Ok(KernelLog::default());
        }
        let programs: Programs = Arc::default();
        let shown = Arc::new(AtomicU64::new(0));
        let printer = Printer {
            programs: programs.clone(),
            shown: shown.clone(),
        };
        let logger = aya_log::EbpfLogger::init_with_logger(bpf, printer).with_context(|| {
            format!(
                "--ebpf-log: the eBPF object has no {} map (built without aya-log?)",
                names::AYA_LOGS
            )
        })?;
        let fd = logger.as_raw_fd();
        let logger = Arc::new(Mutex::new(logger));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (logger, stop) = (logger.clone(), stop.clone());
            std::thread::Builder::new()
                .name("ebpf-log".into())
                .spawn(move || read_until(fd, &logger, &stop))
                .context("starting the --ebpf-log reader")?
        };
        Ok(KernelLog {
            inner: Some(Reader {
                logger,
                programs,
                shown,
                stop,
                thread: Some(thread),
            }),
        })
    }

    /// Names the programs behind hook ids (once attached).
    pub fn name_programs(&self, programs: impl IntoIterator<Item = (u8, String)>) {
        if let Some(r) = &self.inner {
            if let Ok(mut p) = r.programs.lock() {
                p.extend(programs);
            }
        }
    }

    /// Whether lines are read.
    pub fn on(&self) -> bool {
        self.inner.is_some()
    }

    /// Prints what is in the ring now (before a summary, or between readings).
    pub fn flush(&self) {
        if let Some(r) = &self.inner {
            if let Ok(mut l) = r.logger.lock() {
                l.flush();
            }
        }
    }

    /// A line from userspace about the kernel side (a run the kernel skipped, a socket the
    /// state map evicted): printed like the programs' lines, at `level`.
    pub fn note(&self, level: LogLevel, who: &str, msg: &str) {
        if self.on() && level <= self::level() {
            eprintln!(
                "tcpwin-trace: ebpf {} {who}: {msg} [seen by userspace]",
                level_name(level)
            );
        }
    }

    /// Stops reading after a last flush; `due` is the kernel's `LOG_DUE` counter.
    pub fn finish(&mut self, due: u64) -> Option<LogCount> {
        let mut r = self.inner.take()?;
        r.stop.store(true, Ordering::Relaxed);
        if let Some(t) = r.thread.take() {
            let _ = t.join();
        }
        if let Ok(mut l) = r.logger.lock() {
            l.flush();
        }
        Some(LogCount {
            due,
            shown: r.shown.load(Ordering::Relaxed),
        })
    }
}

impl Drop for KernelLog {
    fn drop(&mut self) {
        if let Some(r) = &self.inner {
            r.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// Waits on the ring's fd (100 ms at most, to see `stop`) and prints what arrived.
fn read_until(fd: RawFd, logger: &Mutex<aya_log::EbpfLogger<Printer>>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; the fd stays open while the logger (held by the Arc) lives.
        unsafe { libc::poll(&mut p, 1, 100) };
        if let Ok(mut l) = logger.lock() {
            l.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_its_hook() {
        assert_eq!(
            split_hook("0 ring buffer full"),
            (Some(0), "ring buffer full")
        );
        assert_eq!(
            split_hook("200 iterator skipped"),
            (Some(200), "iterator skipped")
        );
        assert_eq!(split_hook("no id here"), (None, "no id here"));
        assert_eq!(hook::name(200), "iter/tcp");
        assert_eq!(hook::name(0), "tcp:tcp_probe");
        assert_eq!(hook::name(255), "?");
    }

    #[test]
    fn lost_lines_are_what_was_written_and_not_shown() {
        let c = LogCount { due: 10, shown: 7 };
        assert_eq!(c.lost(), 3);
        assert!(c.text().contains("3 lost"));
        assert_eq!(LogCount { due: 2, shown: 2 }.lost(), 0);
    }

    #[test]
    fn levels_match_aya_log() {
        // aya_log_common::Level: Error = 1 .. Trace = 5; 0 enables nothing
        assert_eq!(LogLevel::Off.aya(), 0);
        assert_eq!(LogLevel::Error.aya(), 1);
        assert_eq!(LogLevel::Debug.aya(), 4);
        assert!(LogLevel::Warn < LogLevel::Info);
    }
}
