//! `tcpwin-trace exporter`: the sockets' window facts and verdicts for Prometheus. Every scrape
//! reads a snapshot through the socket iterator (loaded once); nothing runs per packet. Verdicts
//! are taken over the time since the previous scrape.
mod auth;
mod stats;
mod tls;
mod web;
pub mod webconfig;
use std::{sync::Arc, time::Duration};

use anyhow::{Context, Result};
use bytes::Bytes;
use tcpwin_model::{
    facts::state_name,
    judge::Judge,
    metrics::{keep_top, Counters, Scrape, TopSocket},
    peer,
    schema::SsLine,
};

use self::{auth::Guard, stats::Stats, webconfig::WebConfig};
use crate::{
    gather::{
        scope::Scope,
        snapshot::{self, Source},
    },
    kernel::iter::Counting,
    ui::openmetrics,
};
use std::{net::SocketAddr, path::PathBuf};
use tcpwin_common::stop::{install_stop_handler, wait_or_stop};

use super::args::{KernelArgs, SocketArgs};

#[derive(clap::Args, Debug, Clone)]
pub struct ExporterArgs {
    /// Address and port to serve /metrics on (only there: bind a public address yourself)
    #[arg(long, default_value = "127.0.0.1:9943", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// (On a container host, --netns all: a container's sockets live in its own namespace,
    /// looked up again at every scrape)
    #[command(flatten)]
    pub sockets: SocketArgs,
    /// Also export the ratio (len * 256 / truesize) of every data packet received, by
    /// interface, as a histogram. This attaches a per-packet hook (tcp:tcp_probe, one map update
    /// per packet, about 0.1-0.3 µs): the one option that costs per packet
    #[arg(long)]
    pub packet_histogram: bool,
    /// Also export, labelled by socket (local, remote, netns, side, limit), the N sockets
    /// running closest to their window's ceiling (rate / (window / RTT)); without it no metric
    /// has a per-socket label
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub top: Option<u16>,
    /// Also export the sockets per workload and limit (`tcpwin_workload_sockets`, labelled by
    /// the pod's namespace, name and UID, the container and the workload's short form): a
    /// series per limit each workload's sockets show, never per socket
    #[arg(long, value_name = "workload", value_parser = ["workload"])]
    pub by: Option<String>,
    /// Scrapes within this many milliseconds of a reading share it (two Prometheus replicas
    /// scraping at once read the sockets once); 0 reads at every scrape
    #[arg(long, value_name = "MS", default_value_t = 250)]
    pub fresh_ms: u64,
    /// TLS and basic auth, from a file in the format Prometheus exporters share (as
    /// node_exporter's): `tls_server_config: {cert_file, key_file, min_version}` and
    /// `basic_auth_users: {USER: BCRYPT_HASH}`; a key it does not implement is refused by name
    #[arg(long = "web.config.file", value_name = "PATH")]
    pub web_config_file: Option<PathBuf>,
    /// Scrapes answered at once; more get 503 Service Unavailable (as exporter-toolkit's
    /// --web.max-requests); 0: no bound
    #[arg(long = "web.max-requests", value_name = "N", default_value_t = 40)]
    pub max_requests: usize,
    /// Connections open at once (silent ones included); at the bound the one idle longest is
    /// closed for the newcomer
    #[arg(long = "web.max-connections", value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_connections: u32,
    /// Seconds a connection has to send a request head, TLS handshake included (and between two
    /// requests on a kept-alive connection); a silent one is closed after it
    #[arg(long = "web.header-timeout", value_name = "SECONDS", default_value_t = 10.0, value_parser = header_timeout)]
    pub header_timeout: f64,
    /// Do not serve per-socket readings at /sockets (what `--peer` asks a host's exporter for:
    /// each matching socket's facts and its namespace's limits, behind the same TLS and basic
    /// auth as /metrics)
    #[arg(long)]
    pub no_sockets_endpoint: bool,
    #[command(flatten)]
    pub kernel: KernelArgs,
}

fn header_timeout(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.1..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("{s}: seconds from 0.1 to 3600")),
    }
}

/// One scrape: the encoded body.
struct Scraper {
    src: Source,
    args: ExporterArgs,
    /// which sockets (`--pid`, `--port`, `--netns`), resolved afresh at each scrape
    scope: Scope,
    hz: Option<u32>,
    judge: Judge,
    /// `uname -r`, for tcpwin_build_info
    kernel: String,
    counters: Counters,
    /// the kernel counters run (not with --pid: a process's sockets are known only while open)
    counting: bool,
    /// with --netns all: what it cannot see from where it runs (said on stderr at start)
    blind_spots: Vec<(&'static str, bool)>,
    /// the HTTP server counting itself
    stats: Arc<Stats>,
}

impl Scraper {
    fn scrape(&mut self, openmetrics: bool) -> String {
        let t0 = std::time::Instant::now();
        let mut errors = 0u64;
        let targets = match self.scope.resolve() {
            Ok(t) => t,
            Err(e) => {
                eprintln!("tcpwin-trace: exporter: {e:#}");
                errors += 1;
                Vec::new()
            }
        };
        let by_workload = self.args.by.as_deref() == Some("workload");
        // the server's own counts as the scrape starts
        let http = self.stats.counts();
        let mut s = Scrape {
            by_workload: by_workload.then(Default::default),
            blind_spots: self.blind_spots.clone(),
            build: Some((
                env!("CARGO_PKG_VERSION").to_string(),
                self.kernel.clone(),
                self.src.name().to_string(),
            )),
            process: crate::host::process::stats(),
            ..Scrape::default()
        };
        let wanted: Vec<u32> = targets.iter().map(|t| t.inode as u32).collect();
        // closed sums before the sockets: one closing in between is in neither for one scrape
        // (the counters hold their value), never in both
        let closed = self.closed_sums(&wanted, &mut errors);
        let mut seen = Vec::new();
        for t in &targets {
            match snapshot::read(&mut self.src, std::slice::from_ref(t), &self.scope, self.hz) {
                Ok(v) => seen.extend(v),
                Err(e) => {
                    // a namespace gone between listing and reading, or refused: counted
                    eprintln!("tcpwin-trace: exporter: namespace {}: {e:#}", t.name);
                    errors += 1;
                }
            }
        }
        // whose each socket is: a scan of the processes' fds, only where it is exported
        if by_workload {
            snapshot::add_owners(&mut seen);
        }
        // each verdict counted as it is made: a scrape never holds every socket's verdict
        let now: Vec<_> = seen.iter().map(|x| (&x.facts, &*x.host)).collect();
        let mut top = Vec::new();
        let top_asked = self.args.top.is_some();
        let _ = self.judge.judge_each(&now, |i, v| {
            let x = &seen[i];
            s.add(&x.facts, &v);
            if top_asked {
                top.extend(TopSocket::of(&x.facts, &v, &x.line_ns));
            }
            Ok::<(), std::convert::Infallible>(())
        });
        if let Some(n) = self.args.top {
            s.top = keep_top(top, n as usize);
        }
        if let (Some((jiffies, n)), Some(hz)) = (closed, self.hz) {
            s.chrono = Some(self.counters.publish(jiffies, n, hz, s.live_chrono_us));
        }
        if let (Source::Iterator(it), true) = (&self.src, self.args.packet_histogram) {
            match it.packet_counts(&wanted) {
                Ok(v) => s.packet_ratio = Some(v.into_iter().collect()),
                Err(e) => {
                    eprintln!("tcpwin-trace: exporter: packet histogram: {e:#}");
                    errors += 1;
                }
            }
        }
        if let (Source::Iterator(it), true) = (&self.src, self.counting) {
            match it.established() {
                Ok(v) => {
                    let mut m = std::collections::BTreeMap::new();
                    for (ns, ok, passive, n) in v {
                        if wanted.contains(&ns) {
                            *m.entry((ok, passive)).or_default() += n;
                        }
                    }
                    s.established = Some(m);
                }
                Err(e) => {
                    eprintln!("tcpwin-trace: exporter: handshake counts: {e:#}");
                    errors += 1;
                }
            }
        }
        openmetrics::encode(
            &s,
            Some(&http),
            t0.elapsed().as_secs_f64(),
            errors,
            openmetrics,
        )
    }

    /// A peer's question (`/sockets`): the readings of the sockets the query asks for, among
    /// those this exporter reads, as JSON lines of `ss --json`'s schema with their namespace's
    /// limits; at most `peer::MAX_SOCKETS`, the number left out beside. A namespace it cannot
    /// read is said on stderr and counted, as at a scrape.
    fn sockets(&mut self, q: &peer::Query) -> (Bytes, usize) {
        let targets = self.scope.resolve().unwrap_or_else(|e| {
            eprintln!("tcpwin-trace: exporter: {e:#}");
            Vec::new()
        });
        // the sockets first, as soon as asked: the asker reads its own end at that moment
        let mut read = Vec::new();
        for t in &targets {
            match snapshot::read(&mut self.src, std::slice::from_ref(t), &self.scope, self.hz) {
                Ok(v) => read.extend(v),
                Err(e) => eprintln!("tcpwin-trace: exporter: namespace {}: {e:#}", t.name),
            }
        }
        // what this host translated (its own namespace's and the read ones' connection
        // tracking): the tuple the other end knows each such connection by; a socket is asked
        // for by its own tuple or by that one
        let flows = crate::gather::peer::tracked_flows(&targets);
        let mut seen: Vec<_> = read
            .into_iter()
            .filter_map(|s| {
                let other = peer::other_end_through(&s.facts.id, &flows);
                (q.matches(&s.facts.id) || other.is_some_and(|o| q.matches_tuple(o)))
                    .then_some((s, other))
            })
            .collect();
        let omitted = seen.len().saturating_sub(peer::MAX_SOCKETS);
        seen.truncate(peer::MAX_SOCKETS);
        // each end's verdict of one reading, as `ss` gives it; the asker judges the connection
        let verdicts = Judge::one_shot(None).judge(seen.iter().map(|(x, _)| (&x.facts, &*x.host)));
        let mut out = Vec::new();
        for ((x, other_end), v) in seen.into_iter().zip(verdicts) {
            let line = SsLine {
                source: self.src.name().into(),
                netns_name: x.line_ns,
                state_name: state_name(x.facts.state).into(),
                facts: x.facts,
                verdict: v,
                host: Some((*x.host).clone()),
                other_end,
            };
            // a line that cannot be written is left out, never half-written
            if let Ok(mut l) = serde_json::to_vec(&line) {
                l.push(b'\n');
                out.extend_from_slice(&l);
            }
        }
        (Bytes::from(out), omitted)
    }

    /// The closed connections' chrono sums (jiffies) and count over the namespaces `wanted`;
    /// None without the kernel counter or the chrono members.
    fn closed_sums(&self, wanted: &[u32], errors: &mut u64) -> Option<([u64; 3], u64)> {
        let Source::Iterator(it) = &self.src else {
            return None;
        };
        if !self.counting || it.offsets.tp_chrono_stat == tcpwin_common::ABSENT {
            return None;
        }
        match it.closed() {
            Ok(v) => {
                let (mut j, mut n) = ([0u64; 3], 0);
                for (_, c) in v.iter().filter(|(ns, _)| wanted.contains(ns)) {
                    for (a, b) in j.iter_mut().zip(c.chrono_jiffies) {
                        *a += b;
                    }
                    n += c.closed;
                }
                Some((j, n))
            }
            Err(e) => {
                eprintln!("tcpwin-trace: exporter: closed connections: {e:#}");
                *errors += 1;
                None
            }
        }
    }
}

/// The last encoded body per content type and when it was read: scrapes within the freshness
/// window share it (a clone of `Bytes` is a reference count). A reading is also what the next
/// one's rates are taken over, so sharing keeps two replicas from halving each other's interval.
#[derive(Default)]
struct Shared {
    last: Vec<(&'static str, std::time::Instant, Bytes)>,
}

impl Shared {
    fn get(&mut self, ctype: &'static str, fresh: Duration, read: impl FnOnce() -> Bytes) -> Bytes {
        let now = std::time::Instant::now();
        if let Some((_, _, b)) = self
            .last
            .iter()
            .find(|(c, at, _)| *c == ctype && now.duration_since(*at) < fresh)
        {
            return b.clone();
        }
        let b = read();
        self.last.retain(|(c, _, _)| *c != ctype);
        self.last.push((ctype, now, b.clone()));
        b
    }
}

pub fn run(args: ExporterArgs) -> Result<()> {
    args.kernel.validate()?;
    let scope = args.sockets.scope()?;
    // TLS and basic auth from the web config (as node_exporter's --web.config.file), and the
    // port, before anything is loaded: a wrong file or a taken port fails at once
    let web = match &args.web_config_file {
        Some(p) => webconfig::load(p)?,
        None => WebConfig::default(),
    };
    let tls = match &web.tls_server_config {
        Some(t) => Some(tls::server_config(t).with_context(|| {
            format!(
                "--web.config.file {}",
                args.web_config_file.as_ref().expect("a file").display()
            )
        })?),
        None => None,
    };
    let listener = web::bind(args.listen)?;
    // the kernel's counters filter by port and address: not by a process's or workload's
    // sockets, known only while open
    let counting = scope.owners().is_none();
    let scraper_all = scope.namespaces == crate::gather::scope::Namespaces::All;
    let kernel = args.kernel.kernel();
    let src = Source::open_counting(
        &kernel,
        &Counting {
            states: counting,
            packets: args.packet_histogram,
            filter: scope.kernel_filter()?,
        },
    )?;
    // the kernel's BTF was parsed to load the programs (tens of MiB): free it and give those
    // pages back, an exporter stays resident for months
    crate::kernel::btf::release();
    // SAFETY: malloc_trim only releases free heap memory to the kernel.
    unsafe { libc::malloc_trim(0) };
    install_stop_handler();
    let stats = Arc::new(Stats::default());
    let limits = web::Limits {
        max_connections: args.max_connections as usize,
        max_requests: args.max_requests,
        header_timeout: Duration::from_secs_f64(args.header_timeout),
        sockets: !args.no_sockets_endpoint,
    };
    let (jobs, scrapes) = std::sync::mpsc::channel();
    let server = web::Server::start(
        listener,
        tls,
        limits,
        Arc::new(Guard::new(Arc::new(web.clone()), stats.clone())),
        stats.clone(),
        jobs,
    )?;
    eprintln!(
        "tcpwin-trace: exporter serving {}://{}/metrics{} (sockets from the {})",
        if web.tls_server_config.is_some() {
            "https"
        } else {
            "http"
        },
        args.listen,
        if web.basic_auth_users.is_empty() {
            ""
        } else {
            ", basic auth"
        },
        src.name()
    );
    let mut scraper = Scraper {
        src,
        scope,
        hz: kernel.hz(),
        args,
        judge: Judge::new(None),
        kernel: kernel.release().into(),
        counters: Counters::default(),
        counting,
        blind_spots: if scraper_all {
            crate::host::netns::blind_spot_kinds_here()
                .into_iter()
                .map(|(k, b)| (k, b.is_some()))
                .collect()
        } else {
            Vec::new()
        },
        stats,
    };
    let fresh = Duration::from_millis(scraper.args.fresh_ms);
    let mut shared = Shared::default();
    // the scrapes, one at a time on this thread (the kernel's iterator and the judge's memory
    // are this thread's), as the server's tasks ask for them
    loop {
        if wait_or_stop(Duration::ZERO) {
            server.stop();
            eprintln!("tcpwin-trace: exporter stopped");
            return Ok(());
        }
        let job: web::Job = match scrapes.recv_timeout(Duration::from_millis(100)) {
            Ok(j) => j,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                anyhow::bail!("the exporter's HTTP server ended")
            }
        };
        let answer = match &job.ask {
            web::Ask::Metrics(ctype) => (
                shared.get(ctype, fresh, || {
                    Bytes::from(scraper.scrape(ctype.contains("openmetrics")))
                }),
                0,
            ),
            web::Ask::Sockets(q) => scraper.sockets(q),
        };
        // a client gone meanwhile is its business
        let _ = job.reply.send(answer);
        // a scrape of many sockets allocates megabytes for a moment: return them between
        // scrapes, or glibc keeps the high-water mark resident
        // SAFETY: malloc_trim only releases free heap memory to the kernel.
        unsafe { libc::malloc_trim(0) };
    }
}
