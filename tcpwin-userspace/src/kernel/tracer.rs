//! The tracer's programs: the object loaded with the running kernel's offsets and the session's
//! filters, the hooks of the backend asked attached, and the socket iterator of the same object
//! (the verdicts read the traced sockets through it).
use anyhow::Result;
use aya::Ebpf;
use tcpwin_common::{counter, hook, Config, SockRecord};

use super::{
    attach::{self, Attached, Backend},
    btf::{KernelBtf, Layout},
    iter,
    log::{KernelLog, LogCount, LogLevel},
    maps,
    object::{self, LoadOpts},
};

/// The tracer's programs loaded and attached.
pub struct Tracer {
    pub bpf: Ebpf,
    pub attached: Attached,
    btf: std::sync::Arc<KernelBtf>,
    /// the programs' own lines (`--ebpf-log`)
    pub log: KernelLog,
}

impl Tracer {
    /// Loads the object with `config` (the --pid / --port filters) and attaches `backend`.
    pub fn load(
        kernel: &super::Kernel,
        config: Config,
        backend: Backend,
        ringbuf_kib: u32,
    ) -> Result<Tracer> {
        let (mut t, by_read) = object::load_reading_cookies(|by_read| {
            let config = Config {
                cookie_by_read: by_read as u8,
                ..config
            };
            Self::load_config(kernel, config, backend, ringbuf_kib)
        })?;
        if by_read {
            t.attached.notes.push(object::COOKIE_BY_READ_NOTE.into());
        }
        Ok(t)
    }

    fn load_config(
        kernel: &super::Kernel,
        config: Config,
        backend: Backend,
        ringbuf_kib: u32,
    ) -> Result<Tracer> {
        object::check_privileges()?;
        let k = kernel.btf()?;
        let opts = LoadOpts {
            obj: kernel.obj(),
            config,
            ringbuf_bytes: ringbuf_kib * 1024,
        };
        let mut bpf = object::load(&opts, &k.layout, &k.aya)?;
        let log = KernelLog::start(&mut bpf)?;
        let attached = attach::attach(&mut bpf, &k.aya, backend, config.follows_a_process())?;
        log.name_programs(attach::hook_programs(&attached.hooks));
        log.name_programs([(hook::ITER, "tcp_sockets (iter/tcp)".to_string())]);
        if attached
            .hooks
            .iter()
            .any(|h| h.target == "tcp_select_initial_window")
        {
            maps::enable_init_matching(&mut bpf)?;
        }
        Ok(Tracer {
            bpf,
            attached,
            btf: k,
            log,
        })
    }

    /// The kernel's struct layout the programs were loaded with.
    pub fn layout(&self) -> &Layout {
        &self.btf.layout
    }

    /// Loads the object's socket iterator, for reading the traced sockets.
    pub fn prepare_iter(&mut self) -> Result<()> {
        iter::prepare(&mut self.bpf, &self.btf.aya)
    }

    /// Every TCP socket of the calling thread's namespace (after [`Tracer::prepare_iter`]).
    pub fn read_sockets(&mut self) -> Result<Vec<SockRecord>> {
        iter::read(&mut self.bpf)
    }

    /// Runs the kernel skipped (read before [`Tracer::detach`]); with `--ebpf-log warn`, each
    /// program's are said (the kernel does not run a program it skips: no line of its own).
    pub fn recursion_misses(&self) -> u64 {
        let by_hook = attach::recursion_misses_by_hook(&self.bpf, &self.attached.hooks);
        for (h, n) in by_hook.iter().filter(|(_, n)| *n > 0) {
            self.log.note(
                LogLevel::Warn,
                &format!("{} ({} {})", h.prog, h.method.name(), h.target),
                &format!("the kernel skipped {n} runs (the program was already running on that CPU: a softirq interrupted it)"),
            );
        }
        by_hook.iter().map(|(_, n)| n).sum()
    }

    /// The last lines of `--ebpf-log`, and how many were written, shown and lost.
    pub fn finish_log(&mut self) -> Option<LogCount> {
        let due = maps::read_counters(&self.bpf)
            .ok()
            .and_then(|c| c.get(counter::LOG_DUE as usize).copied())
            .unwrap_or(0);
        self.log.finish(due)
    }

    /// Detaches every hook; the maps stay readable.
    pub fn detach(&mut self) {
        attach::release(&mut self.bpf, &self.attached.hooks);
    }
}
