//! `tcpwin-trace top`: a live terminal view of the sockets, refreshed from iterator snapshots
//! (nothing runs per packet). The terminal is restored on every way out: `q`, Ctrl-C, SIGTERM,
//! an error, a panic.
use std::{
    io::IsTerminal,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use ratatui::{
    crossterm::{
        event::{self, Event, KeyCode, KeyEventKind, KeyModifiers},
        execute,
        terminal::{self, EnterAlternateScreen, LeaveAlternateScreen},
    },
    prelude::CrosstermBackend,
    Terminal,
};
use tcpwin_common::counter;
use tcpwin_model::judge::Judge;

use super::args::{KernelArgs, PeerArgs, SocketArgs, TargetArgs};
use crate::{
    gather::{
        audit,
        scope::{self, Namespaces, Scope},
        snapshot::{self, Source, SourceKind},
    },
    host::monotonic_ns,
    kernel::log::LogLevel,
    kernel::{attach::Backend, maps, maps::OwnerSync, ring::Ring, tracer::Tracer, Kernel},
    ui::{
        text::event_short,
        top::{
            draw, header_lines,
            state::{Action, Key, TopState},
            MIN_SIZE,
        },
    },
};
use tcpwin_common::stop::{install_stop_handler, wait_or_stop};

#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    #[command(flatten)]
    pub sockets: SocketArgs,
    /// Refresh every MS milliseconds
    #[arg(short, long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub interval: u64,
    /// Also attach the tracer and show its events (each ratio and window change with the
    /// packet that caused it) for the selected socket; this runs the per-packet hook
    #[arg(long)]
    pub trace: bool,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub peer: PeerArgs,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

/// The ring buffer of `top --trace`, KiB (the tracer's default).
const TOP_RINGBUF_KIB: u32 = 1024;

/// The tracer running under `top --trace`.
struct Tracing {
    tracer: Tracer,
    ring: Ring,
    owner: Option<OwnerSync>,
    t0_ns: u64,
    /// the ring buffer's fd is registered with tokio's reactor: kept for as long as the ring
    _rt: tokio::runtime::Runtime,
}

impl Tracing {
    fn start(kernel: &Kernel, scope: &Scope) -> Result<Tracing> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the event reader")?;
        let _in = rt.enter();
        let mut tracer = Tracer::load(
            kernel,
            scope.kernel_filter()?,
            Backend::Auto,
            TOP_RINGBUF_KIB,
        )?;
        let mut owner = scope.owners().map(OwnerSync::new);
        if let Some(o) = owner.as_mut() {
            o.sync(&mut tracer.bpf)?;
        }
        let ring = Ring::take(&mut tracer.bpf)?;
        drop(_in);
        Ok(Tracing {
            tracer,
            ring,
            owner,
            t0_ns: monotonic_ns(),
            _rt: rt,
        })
    }

    /// Moves the events waiting in the ring buffer into the state; counts losses.
    fn drain(&mut self, state: &mut TopState) -> Result<()> {
        let t0 = self.t0_ns;
        self.ring.drain(&mut |r| {
            state.push_event(r.cookie(), event_short(&r, t0));
            Ok(())
        })?;
        let c = maps::read_counters(&self.tracer.bpf)?;
        let at = |i: u32| c[i as usize];
        state.events_lost = at(counter::EVENTS_DROPPED)
            + at(counter::EVENTS_SENT).saturating_sub(self.ring.received);
        if let Some(o) = self.owner.as_mut() {
            o.sync(&mut self.tracer.bpf)?;
        }
        Ok(())
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        self.tracer.detach();
    }
}

/// Raw mode and the alternate screen, undone on drop (and by the panic hook).
struct Screen;

fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        LeaveAlternateScreen,
        ratatui::crossterm::cursor::Show
    );
}

impl Screen {
    fn enter() -> Result<Screen> {
        terminal::enable_raw_mode().context("cannot put the terminal in raw mode")?;
        let s = Screen;
        execute!(
            std::io::stdout(),
            EnterAlternateScreen,
            ratatui::crossterm::cursor::Hide
        )
        .context("cannot switch to the alternate screen")?;
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            prev(info);
        }));
        Ok(s)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// SIGTERM/SIGINT only raise a flag the loop checks; a terminal that stopped reading (a stalled
/// ssh session) leaves the loop blocked in a write that never returns. Then, 2 s after the signal,
/// this thread turns raw mode off (tcsetattr: no write needed) and exits with status 3.
fn stop_watchdog() {
    std::thread::spawn(|| {
        while !wait_or_stop(Duration::from_millis(100)) {}
        std::thread::sleep(Duration::from_secs(2));
        let _ = terminal::disable_raw_mode();
        // no message and no stdout flush: both would block on the same terminal (and the main
        // thread may hold stdout's lock); the exit status says it
        // SAFETY: _exit ends the process at once; nothing after it runs.
        unsafe { libc::_exit(3) };
    });
}

fn too_small(w: u16, h: u16) -> Option<String> {
    (w < MIN_SIZE.0 || h < MIN_SIZE.1).then(|| {
        format!(
            "the terminal is {w}x{h}: top needs at least {}x{} (enlarge it, or use `tcpwin-trace ss -i 1000`)",
            MIN_SIZE.0, MIN_SIZE.1
        )
    })
}

fn key_of(e: &event::KeyEvent) -> Option<Key> {
    if e.kind != KeyEventKind::Press {
        return None;
    }
    Some(match e.code {
        KeyCode::Char('c') if e.modifiers.contains(KeyModifiers::CONTROL) => Key::CtrlC,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        _ => return None,
    })
}

pub fn run(args: TopArgs) -> Result<()> {
    args.kernel.validate()?;
    let scope = args.sockets.scope()?;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!("top needs a terminal on stdin and stdout; for a stream use `tcpwin-trace ss -i 1000` (or --json)");
    }
    if args.kernel.log_level() != LogLevel::Off && std::io::stderr().is_terminal() {
        bail!("--ebpf-log writes lines to stderr, which would tear top's screen: redirect it (2>ebpf.log) and read the file beside");
    }
    let (w, h) = terminal::size().context("cannot read the terminal's size")?;
    if let Some(e) = too_small(w, h) {
        bail!(e);
    }
    let mut rereading = snapshot::Rereading::new(scope.clone());
    let mut peers = args.peer.peers()?;
    let kernel = args.kernel.kernel();
    let mut src = Source::open(SourceKind::Auto, &kernel)?;
    // the header's settings: the namespace read (the caller's, over every namespace)
    let audited = match scope.namespaces {
        Namespaces::All => Scope::default(),
        _ => scope.clone(),
    };
    let header = audit::report(&audit::Audit {
        scope: &audited,
        bdp: None,
        ratio: Some(tcpwin_model::check::DEFAULT_RATIO),
        assume_kernel: None,
        kernel: &kernel,
    })
    .map(|r| header_lines(&r))
    .unwrap_or_else(|e| vec![format!("host check unavailable: {e:#}")]);
    let hz = kernel.hz();
    let mut tracing = if args.trace {
        Some(Tracing::start(&kernel, &scope)?)
    } else {
        None
    };
    install_stop_handler();
    stop_watchdog();
    let screen = Screen::enter()?;
    let mut term = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .context("cannot draw on this terminal")?;
    let mut state = TopState::default();
    state.header = header;
    state.interval_ms = args.interval;
    state.tracing = tracing.is_some();
    let mut judge = Judge::new(args.target.target);
    let every = Duration::from_millis(args.interval);
    let mut next = Instant::now();
    let result = loop {
        if wait_or_stop(Duration::ZERO) {
            break Ok(());
        }
        if Instant::now() >= next {
            next = Instant::now() + every;
            let mut seen = match rereading.read(&mut src, hz) {
                Ok(s) => s,
                Err(e) => break Err(e),
            };
            snapshot::add_owners(&mut seen);
            // the peers' ends at the same moment; what they could not answer in the header
            if let Some(p) = peers.as_mut() {
                let theirs = p.read(&seen, rereading.scope.port);
                seen.extend(theirs);
                for n in p.news() {
                    state.header.push(format!("peer: {n}"));
                }
            }
            let verdicts = judge.judge(seen.iter().map(|x| (&x.facts, &*x.host)));
            let rows = seen
                .into_iter()
                .zip(verdicts)
                .map(|(x, v)| (x.facts, v, x.line_ns))
                .collect::<Vec<_>>();
            state.update(rows);
            if rereading.gone > 0 {
                const GONE: &str = "namespaces gone while read (skipped): ";
                state.header.retain(|h| !h.starts_with(GONE));
                state.header.insert(0, format!("{GONE}{}", rereading.gone));
            }
        }
        if let Some(t) = tracing.as_mut() {
            if let Err(e) = t.drain(&mut state) {
                break Err(rereading.scope.why_failed(e));
            }
        }
        let size = match term.size() {
            Ok(s) => s,
            Err(e) => break Err(e.into()),
        };
        if let Some(e) = too_small(size.width, size.height) {
            break Err(anyhow::anyhow!(e));
        }
        if let Err(e) = term.draw(|f| draw(f, &state)) {
            break Err(e.into());
        }
        let wait = next
            .saturating_duration_since(Instant::now())
            .min(Duration::from_millis(200));
        match event::poll(wait) {
            Ok(true) => match event::read() {
                Ok(Event::Key(k)) => {
                    if let Some(k) = key_of(&k) {
                        if state.key(k) == Action::Quit {
                            break Ok(());
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => break Err(e.into()),
            },
            Ok(false) => {}
            Err(e) => break Err(e.into()),
        }
    };
    drop(term);
    drop(screen);
    drop(tracing);
    // the process or workload watched ended: said once the screen is left, not an error
    match result {
        Err(e) if scope::ended(&e).is_some() => {
            eprintln!("tcpwin-trace: {e}; stopping");
            Ok(())
        }
        r => r,
    }
}
