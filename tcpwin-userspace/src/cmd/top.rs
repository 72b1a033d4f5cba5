//! `tcpwin-trace top`: a live terminal view of the sockets, refreshed from iterator snapshots
//! (nothing runs per packet). The terminal is restored on every way out: `q`, Ctrl-C, SIGTERM,
//! an error, a panic.
use std::{
    collections::HashMap,
    io::IsTerminal,
    path::PathBuf,
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
use tcpwin_lab::harness::{install_stop_handler, wait_or_stop};
use tcpwin_model::{
    check::CheckReport,
    facts::SockFacts,
    top::{Action, Key, TopState},
    verdict::{verdict, Input},
};

use super::snapshot::{self, Source, SourceArg};
use crate::{
    cli::SocketFilter,
    host::{kconfig, netns},
    kernel::btf::VMLINUX,
    view::top::{draw, MIN_SIZE},
};

#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    #[command(flatten)]
    pub filter: SocketFilter,
    /// Network namespace: a name from `ip netns list`, or `all`; default the caller's
    #[arg(long, value_name = "NAME|all")]
    pub netns: Option<String>,
    /// Refresh every MS milliseconds
    #[arg(short, long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub interval: u64,
    /// Also attach the tracer and show its events (each ratio and window change with the
    /// packet that caused it) for the selected socket; this runs the per-packet hook
    #[arg(long)]
    pub trace: bool,
    /// Kernel BTF to resolve struct layouts from
    #[arg(long, default_value = VMLINUX, value_name = "PATH")]
    pub btf: PathBuf,
}

/// The tracer running under `top --trace`.
struct Tracing {
    loaded: super::trace::Loaded,
    ring: crate::kernel::ring::Ring,
    owner: Option<crate::kernel::maps::OwnerSync>,
    t0_ns: u64,
    /// the ring buffer's fd is registered with tokio's reactor: kept for as long as the ring
    _rt: tokio::runtime::Runtime,
}

impl Tracing {
    fn start(args: &TopArgs) -> Result<Tracing> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the event reader")?;
        let _in = rt.enter();
        let mut loaded = super::trace::load(
            &args.btf,
            None,
            &args.filter,
            crate::kernel::attach::Backend::Auto,
            1024,
        )?;
        let mut owner = args.filter.pid.map(crate::kernel::maps::OwnerSync::new);
        if let Some(o) = owner.as_mut() {
            o.sync(&mut loaded.bpf)?;
        }
        let ring = crate::kernel::ring::Ring::take(&mut loaded.bpf)?;
        drop(_in);
        Ok(Tracing {
            loaded,
            ring,
            owner,
            t0_ns: crate::host::monotonic_ns(),
            _rt: rt,
        })
    }

    /// Moves the events waiting in the ring buffer into the state; counts losses.
    fn drain(&mut self, state: &mut TopState) -> Result<()> {
        let t0 = self.t0_ns;
        self.ring.drain(&mut |r| {
            let line = crate::view::text::text_line(&r, t0, None);
            state.push_event(r.cookie(), crate::view::top::event_line(&line));
            Ok(())
        })?;
        let c = crate::kernel::maps::read_counters(&self.loaded.bpf)?;
        let at = |i: u32| c[i as usize];
        use tcpwin_common::counter;
        state.events_lost = at(counter::EVENTS_DROPPED)
            + at(counter::EVENTS_SENT).saturating_sub(self.ring.received);
        if let Some(o) = self.owner.as_mut() {
            o.sync(&mut self.loaded.bpf)?;
        }
        Ok(())
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        crate::kernel::attach::release(&mut self.loaded.bpf, &self.loaded.attached.hooks);
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

/// The host's check, as header lines: era and caps, then the interfaces' GRO/MTU.
pub fn header_lines(r: &CheckReport) -> Vec<String> {
    let l = &r.limits;
    let mut v = vec![format!(
        "kernel {} ({}), tcp_rmem max {}, rmem_max {}, window scaling {}",
        r.kernel,
        match r.era {
            tcpwin_model::check::Era::MeasuredRatio => "measured scaling_ratio",
            tcpwin_model::check::Era::AdvWinScale => "tcp_adv_win_scale",
        },
        crate::view::or_dash(l.tcp_rmem.map(|t| t[2])),
        crate::view::or_dash(l.rmem_max),
        match l.tcp_window_scaling {
            Some(true) => "on",
            Some(false) => "OFF",
            None => "?",
        }
    )];
    let ifs: Vec<String> = r
        .interfaces
        .iter()
        .map(|i| {
            format!(
                "{} gro {} mtu {}",
                i.name,
                match i.gro {
                    Some(true) => "on",
                    Some(false) => "off",
                    None => "?",
                },
                crate::view::or_dash(i.mtu)
            )
        })
        .collect();
    v.push(ifs.join(", "));
    v
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
    args.filter.validate()?;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!("top needs a terminal on stdin and stdout; for a stream use `tcpwin-trace ss -i 1000` (or --json)");
    }
    let (w, h) = terminal::size().context("cannot read the terminal's size")?;
    if let Some(e) = too_small(w, h) {
        bail!(e);
    }
    let targets = netns::resolve(args.netns.as_deref())?;
    let mut src = Source::open(SourceArg::Auto, &args.btf, None)?;
    let header = super::check::report(&super::check::CheckArgs {
        bdp: None,
        ratio: Some(tcpwin_model::check::DEFAULT_RATIO),
        netns: args.netns.clone().filter(|n| n != "all"),
        json: false,
        btf: args.btf.clone(),
    })
    .map(|r| header_lines(&r))
    .unwrap_or_else(|e| vec![format!("host check unavailable: {e:#}")]);
    let hz = kconfig::hz();
    let mut tracing = if args.trace {
        Some(Tracing::start(&args)?)
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
    state.tracing = tracing.is_some();
    let mut before: HashMap<u64, SockFacts> = HashMap::new();
    let every = Duration::from_millis(args.interval);
    let mut next = Instant::now();
    let result = loop {
        if wait_or_stop(Duration::ZERO) {
            break Ok(());
        }
        if Instant::now() >= next {
            next = Instant::now() + every;
            let mut seen = match snapshot::read(&mut src, &targets, &args.filter, hz) {
                Ok(s) => s,
                Err(e) => break Err(e),
            };
            snapshot::add_owners(&mut seen);
            let rows = seen
                .into_iter()
                .map(|x| {
                    let v = verdict(&Input {
                        now: &x.facts,
                        before: x.facts.cookie.and_then(|c| before.get(&c)),
                        host: &x.host,
                        target_bps: None,
                    });
                    (x.facts, v, x.line_ns)
                })
                .collect::<Vec<_>>();
            before = rows
                .iter()
                .filter_map(|(f, _, _)| Some((f.cookie?, f.clone())))
                .collect();
            state.update(rows);
        }
        if let Some(t) = tracing.as_mut() {
            if let Err(e) = t.drain(&mut state) {
                break Err(e);
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
    result
}
