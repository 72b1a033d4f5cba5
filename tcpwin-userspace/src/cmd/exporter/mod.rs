//! `tcpwin-trace exporter`: the sockets' window facts and verdicts for Prometheus. Every scrape
//! reads a snapshot through the socket iterator (loaded once); nothing runs per packet. Verdicts
//! are taken over the time since the previous scrape.
mod https;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use tcpwin_model::{
    judge::Judge,
    metrics::{keep_top, Counters, Scrape, TopSocket},
    webconfig::{self, WebConfig},
};

use crate::{
    cli::ExporterArgs,
    gather::{
        scope::Scope,
        snapshot::{self, Source},
    },
    host::{
        kconfig,
        signals::{install_stop_handler, wait_or_stop},
    },
    kernel::iter::Counting,
    view::openmetrics,
};

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
        let verdicts = self.judge.judge(seen.iter().map(|x| (&x.facts, &*x.host)));
        let mut top = Vec::new();
        for (x, v) in seen.iter().zip(&verdicts) {
            s.add(&x.facts, v);
            if self.args.top.is_some() {
                top.extend(TopSocket::of(&x.facts, v, &x.line_ns));
            }
        }
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
        openmetrics::encode(&s, t0.elapsed().as_secs_f64(), errors, openmetrics)
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
    // the kernel's counters filter by port and address: not by a process's or workload's
    // sockets, known only while open
    let counting = scope.owners().is_none();
    let scraper_all = scope.namespaces == crate::gather::scope::Namespaces::All;
    let src = Source::open_counting(
        &args.kernel.btf,
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
    // TLS and basic auth from the web config (as node_exporter's --web.config.file)
    let web = match &args.web_config_file {
        Some(p) => webconfig::load(p)?,
        None => WebConfig::default(),
    };
    let mut server = match &web.tls_server_config {
        Some(t) => Server::Https(https::Https::bind(
            args.listen,
            https::server_config(t).with_context(|| {
                format!(
                    "--web.config.file {}",
                    args.web_config_file.as_ref().expect("a file").display()
                )
            })?,
        )?),
        None => Server::Http(
            tiny_http::Server::http(args.listen)
                .map_err(|e| anyhow!("cannot listen on {}: {e}", args.listen))?,
        ),
    };
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
        hz: kconfig::hz(),
        args,
        judge: Judge::new(None),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|k| k.trim().to_string())
            .unwrap_or_default(),
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
    };
    let fresh = Duration::from_millis(scraper.args.fresh_ms);
    let mut shared = Shared::default();
    let mut passed = Passed::default();
    loop {
        if wait_or_stop(Duration::ZERO) {
            eprintln!("tcpwin-trace: exporter stopped");
            return Ok(());
        }
        let Some(mut req) = server.recv(Duration::from_millis(200)) else {
            continue;
        };
        let asked = req.asked();
        if !passed.allows(&web, asked.authorization.as_deref()) {
            req.respond(
                401,
                "text/plain",
                Bytes::from_static(b"tcpwin-trace: basic auth required\n"),
                &[("WWW-Authenticate", "Basic realm=\"tcpwin-trace\"")],
            );
            continue;
        }
        if !asked.get {
            req.respond(405, "text/plain", Bytes::from_static(b"only GET\n"), &[]);
            continue;
        }
        if asked.path.split('?').next() != Some("/metrics") {
            req.respond(
                404,
                "text/plain",
                Bytes::from_static(b"tcpwin-trace: see /metrics\n"),
                &[],
            );
            continue;
        }
        let ctype = openmetrics::content_type(asked.accept.as_deref());
        let body = shared.get(ctype, fresh, || {
            Bytes::from(scraper.scrape(ctype.contains("openmetrics")))
        });
        req.respond(200, ctype, body, &[]);
        // a scrape of many sockets allocates megabytes for a moment: return them between
        // scrapes, or glibc keeps the high-water mark resident
        // SAFETY: malloc_trim only releases free heap memory to the kernel.
        unsafe { libc::malloc_trim(0) };
    }
}

/// What a request asks, from either server.
#[derive(Default)]
pub(crate) struct Asked {
    get: bool,
    path: String,
    accept: Option<String>,
    authorization: Option<String>,
}

impl Asked {
    /// From a request head's text (the TLS server's own reading).
    fn parse(head: &str) -> Option<Asked> {
        let mut lines = head.split("\r\n");
        let mut first = lines.next()?.split(' ');
        let (method, path) = (first.next()?, first.next()?);
        let header = |name: &str| {
            head.split("\r\n").skip(1).find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
        };
        Some(Asked {
            get: method == "GET",
            path: path.to_string(),
            accept: header("Accept"),
            authorization: header("Authorization"),
        })
    }
}

/// The plain server (tiny_http) or the TLS one.
enum Server {
    Http(tiny_http::Server),
    Https(https::Https),
}

/// One request, answered on the server it came from.
enum Req {
    Http(tiny_http::Request),
    Https(Box<https::Conn>),
}

impl Server {
    fn recv(&mut self, wait: Duration) -> Option<Req> {
        match self {
            Server::Http(s) => match s.recv_timeout(wait) {
                Ok(r) => r.map(Req::Http),
                Err(e) => {
                    eprintln!("tcpwin-trace: exporter: {e}");
                    None
                }
            },
            Server::Https(s) => s.recv(wait).map(|c| Req::Https(Box::new(c))),
        }
    }
}

impl Req {
    /// What the request asks (the TLS connection's reading moves out: it is read once).
    fn asked(&mut self) -> Asked {
        match self {
            Req::Http(r) => {
                let header = |name: &'static str| {
                    r.headers()
                        .iter()
                        .find(|h| h.field.equiv(name))
                        .map(|h| h.value.as_str().to_string())
                };
                Asked {
                    get: *r.method() == tiny_http::Method::Get,
                    path: r.url().to_string(),
                    accept: header("Accept"),
                    authorization: header("Authorization"),
                }
            }
            Req::Https(c) => std::mem::take(&mut c.asked),
        }
    }

    fn respond(self, code: u16, ctype: &str, body: Bytes, extra: &[(&str, &str)]) {
        match self {
            Req::Http(r) => {
                let mut headers =
                    vec![
                        tiny_http::Header::from_bytes(&b"Content-Type"[..], ctype.as_bytes())
                            .expect("a valid header"),
                    ];
                for (k, v) in extra {
                    headers.push(
                        tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes())
                            .expect("a valid header"),
                    );
                }
                let len = body.len();
                // a client gone mid-response is its business, not the exporter's
                let _ = r.respond(tiny_http::Response::new(
                    tiny_http::StatusCode(code),
                    headers,
                    std::io::Cursor::new(body),
                    Some(len),
                    None,
                ));
            }
            Req::Https(c) => c.respond(code, ctype, &body, extra),
        }
    }
}

/// Authorization headers that passed: bcrypt is slow on purpose (tens of ms a check), and a
/// Prometheus sends the same header at every scrape.
#[derive(Default)]
struct Passed(std::collections::HashSet<String>);

impl Passed {
    const MAX: usize = 64;

    fn allows(&mut self, web: &WebConfig, authorization: Option<&str>) -> bool {
        if web.basic_auth_users.is_empty() {
            return true;
        }
        let Some(a) = authorization else {
            return false;
        };
        if self.0.contains(a) {
            return true;
        }
        let ok = web.allows(Some(a));
        if ok {
            if self.0.len() >= Self::MAX {
                self.0.clear();
            }
            self.0.insert(a.to_string());
        }
        ok
    }
}
