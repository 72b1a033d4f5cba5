//! The exporter's HTTP server, plain or TLS, on a tokio runtime of its own thread: hyper serves
//! each connection on its own task (HTTP/1.1, keep-alive), so a client that stalls stalls only
//! itself. Bounded everywhere a network could push: a request head (TLS handshake included) must
//! arrive within the header timeout, also between keep-alive requests; a head is at most
//! [`MAX_HEAD`] bytes and hyper's count of headers; at most `max_connections` are open (at the
//! cap the longest idle one is closed for the newcomer); a source opens at most
//! [`NEW_PER_SECOND`] connections a second (after a burst); at most `max_requests` scrapes wait at
//! once (503 beyond, as exporter-toolkit's `--web.max-requests`); password checks through
//! [`Guard`]. The scrapes themselves run on the caller's thread, one at a time, fed by a channel.
use std::{
    collections::HashMap,
    convert::Infallible,
    net::{IpAddr, SocketAddr},
    sync::{mpsc, Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{anyhow, Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{
    body::Incoming, header, server::conn::http1, service::service_fn, Method, Request, Response,
    StatusCode,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tcpwin_model::peer;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpListener,
    sync::{oneshot, Notify, Semaphore},
};
use tokio_rustls::TlsAcceptor;

use super::{
    auth::{Guard, Outcome, FAIL_DELAY},
    stats::Stats,
};

/// A request head larger than this is refused (a scrape's is a few hundred bytes; hyper's floor).
pub const MAX_HEAD: usize = 16 << 10;

/// What the operator bounds (`--web.*`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_connections: usize,
    /// 0: no bound
    pub max_requests: usize,
    pub header_timeout: Duration,
    /// the per-socket readings a peer asks for (`/sockets`) are served
    pub sockets: bool,
}

/// What a request asks of the scraping thread.
pub enum Ask {
    /// a scrape, in this content type
    Metrics(&'static str),
    /// a peer's question: the readings of these sockets
    Sockets(peer::Query),
}

/// One reading asked of the scraping thread, and where its answer goes: the body, and how many
/// sockets it left out (past [`peer::MAX_SOCKETS`]).
pub struct Job {
    pub ask: Ask,
    pub reply: oneshot::Sender<(Bytes, usize)>,
}

/// Each open connection by id: when it last began or ended a request (its accept, before any)
/// and how to close it; beside them the last id given.
type Live = (u64, HashMap<u64, (Instant, Arc<Notify>)>);

/// The open connections.
struct Conns {
    max: usize,
    live: Mutex<Live>,
}

impl Conns {
    /// Registers a new connection; at the cap, closes the one idle longest.
    fn admit(&self, stats: &Stats) -> (u64, Arc<Notify>) {
        let mut g = self.live.lock().unwrap_or_else(|e| e.into_inner());
        if g.1.len() >= self.max {
            if let Some(&oldest) = g.1.iter().min_by_key(|(_, (at, _))| *at).map(|(id, _)| id) {
                if let Some((_, kill)) = g.1.remove(&oldest) {
                    kill.notify_one();
                    stats.dropped("evicted");
                }
            }
        }
        g.0 += 1;
        let (id, kill) = (g.0, Arc::new(Notify::new()));
        g.1.insert(id, (Instant::now(), kill.clone()));
        (id, kill)
    }

    fn touch(&self, id: u64) {
        if let Some(c) = self
            .live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .get_mut(&id)
        {
            c.0 = Instant::now();
        }
    }

    fn leave(&self, id: u64) {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .remove(&id);
    }
}

/// New connections a source may open per second, and at once after a quiet while: a scraper
/// opens one per scrape; beyond it a connection is closed before its TLS handshake (the one
/// costly thing a connection asks before it says who it is).
const NEW_PER_SECOND: f64 = 64.0;
const NEW_BURST: f64 = 256.0;

/// A token bucket of new connections per source address.
#[derive(Default)]
struct Arrivals(HashMap<IpAddr, (f64, Instant)>);

impl Arrivals {
    fn admit(&mut self, source: IpAddr, now: Instant) -> bool {
        if self.0.len() >= 4096 {
            // forget the sources whose bucket has refilled: they are as new ones
            self.0.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * NEW_PER_SECOND < NEW_BURST
            });
        }
        let (tokens, at) = self.0.entry(source).or_insert((NEW_BURST, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * NEW_PER_SECOND).min(NEW_BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What every connection's task shares.
struct Shared {
    guard: Arc<Guard>,
    stats: Arc<Stats>,
    conns: Conns,
    /// scrapes waiting or running; None: unbounded
    requests: Option<Semaphore>,
    scrapes: Mutex<mpsc::Sender<Job>>,
    header_timeout: Duration,
    tls: Option<TlsAcceptor>,
    arrivals: Mutex<Arrivals>,
    sockets: bool,
}

type Reply = Response<Full<Bytes>>;

fn reply(code: StatusCode, ctype: &str, body: Bytes) -> Reply {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = code;
    if let Ok(v) = header::HeaderValue::from_str(ctype) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn text(code: StatusCode, s: &'static str) -> Reply {
    reply(code, "text/plain", Bytes::from_static(s.as_bytes()))
}

impl Shared {
    async fn handle(&self, id: u64, source: IpAddr, req: Request<Incoming>) -> Reply {
        self.conns.touch(id);
        let arrived = tokio::time::Instant::now();
        let r = self.answer(source, req, arrived).await;
        self.conns.touch(id);
        self.stats.response(r.status().as_u16());
        r
    }

    async fn answer<B>(
        &self,
        source: IpAddr,
        req: Request<B>,
        arrived: tokio::time::Instant,
    ) -> Reply {
        let authorization = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let outcome = self.guard.check(source, authorization).await;
        if let Some(reason) = outcome.reason() {
            self.stats.auth_failure(reason);
            // answered a second after the request came (a client that waits tries once a
            // second); a scraper without credentials configured is told at once
            if outcome != Outcome::Missing {
                tokio::time::sleep_until(arrived + FAIL_DELAY).await;
            }
            let mut r = if outcome == Outcome::Throttled {
                text(
                    StatusCode::TOO_MANY_REQUESTS,
                    "tcpwin-trace: too many password checks waiting\n",
                )
            } else {
                text(
                    StatusCode::UNAUTHORIZED,
                    "tcpwin-trace: basic auth required\n",
                )
            };
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Basic realm=\"tcpwin-trace\""),
            );
            return r;
        }
        if req.method() != Method::GET {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
            r.headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
            return r;
        }
        let path = req.uri().path();
        let ask = if path == "/metrics" {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            Ask::Metrics(crate::ui::openmetrics::content_type(accept))
        } else if path == peer::PATH && self.sockets {
            match peer::Query::parse(req.uri().query().unwrap_or("")) {
                Ok(q) => Ask::Sockets(q),
                Err(e) => {
                    return reply(
                        StatusCode::BAD_REQUEST,
                        "text/plain",
                        Bytes::from(format!("tcpwin-trace: {e}\n")),
                    )
                }
            }
        } else if path == peer::PATH {
            return text(
                StatusCode::NOT_FOUND,
                "tcpwin-trace: this exporter does not serve per-socket readings (--no-sockets-endpoint)\n",
            );
        } else {
            return text(StatusCode::NOT_FOUND, "tcpwin-trace: see /metrics\n");
        };
        let _permit = match &self.requests {
            Some(s) => match s.try_acquire() {
                Ok(p) => Some(p),
                Err(_) => {
                    return text(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "tcpwin-trace: too many scrapes at once (--web.max-requests)\n",
                    )
                }
            },
            None => None,
        };
        let ctype = match &ask {
            Ask::Metrics(c) => *c,
            Ask::Sockets(_) => "application/x-ndjson",
        };
        let (tx, rx) = oneshot::channel();
        let sent = self
            .scrapes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Job { ask, reply: tx });
        match (sent, rx.await) {
            (Ok(()), Ok((body, omitted))) => {
                let mut r = reply(StatusCode::OK, ctype, body);
                if omitted > 0 {
                    r.headers_mut().insert(
                        peer::OMITTED_HEADER,
                        header::HeaderValue::from(omitted as u64),
                    );
                }
                r
            }
            _ => text(
                StatusCode::SERVICE_UNAVAILABLE,
                "tcpwin-trace: the exporter is stopping\n",
            ),
        }
    }

    /// One connection, from accept to close.
    async fn connection(self: Arc<Self>, tcp: tokio::net::TcpStream, peer: SocketAddr) {
        let admitted = self
            .arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(peer.ip(), Instant::now());
        if !admitted {
            self.stats.dropped("rate");
            return;
        }
        let (id, kill) = self.conns.admit(&self.stats);
        self.stats.opened();
        let work = async {
            match &self.tls {
                Some(acceptor) => {
                    match tokio::time::timeout(self.header_timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => self.http(tls, id, peer.ip()).await,
                        _ => self.stats.dropped("tls_handshake"),
                    }
                }
                None => self.http(tcp, id, peer.ip()).await,
            }
        };
        tokio::select! {
            _ = work => {}
            _ = kill.notified() => {}
        }
        self.conns.leave(id);
        self.stats.closed();
    }

    async fn http<IO>(self: &Arc<Self>, io: IO, id: u64, source: IpAddr)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let me = self.clone();
        let svc = service_fn(move |req| {
            let me = me.clone();
            async move { Ok::<_, Infallible>(me.handle(id, source, req).await) }
        });
        let r = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .max_buf_size(MAX_HEAD)
            .keep_alive(true)
            .serve_connection(TokioIo::new(io), svc)
            .await;
        if let Err(e) = r {
            if e.is_timeout() {
                self.stats.dropped("header_timeout");
            }
        }
    }
}

/// The listening socket, bound before anything else is loaded (a taken port fails at once).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                " (another process listens there: pick another --listen port)"
            }
            std::io::ErrorKind::AddrNotAvailable => " (no interface of this host has that address)",
            std::io::ErrorKind::PermissionDenied => {
                " (a port under 1024 needs root or CAP_NET_BIND_SERVICE)"
            }
            _ => "",
        };
        anyhow!("cannot listen on {addr}: {e}{hint}")
    })?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// The server, on a thread of its own, until `stop` says so; scrapes are sent to `scrapes`.
pub struct Server {
    thread: Option<std::thread::JoinHandle<()>>,
    stop: Arc<Notify>,
}

impl Server {
    pub fn start(
        listener: std::net::TcpListener,
        tls: Option<Arc<rustls::ServerConfig>>,
        limits: Limits,
        guard: Arc<Guard>,
        stats: Arc<Stats>,
        scrapes: mpsc::Sender<Job>,
    ) -> Result<Server> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("the exporter's runtime")?;
        let shared = Arc::new(Shared {
            guard,
            stats,
            conns: Conns {
                max: limits.max_connections.max(1),
                live: Mutex::default(),
            },
            requests: (limits.max_requests > 0).then(|| Semaphore::new(limits.max_requests)),
            scrapes: Mutex::new(scrapes),
            header_timeout: limits.header_timeout,
            tls: tls.map(TlsAcceptor::from),
            arrivals: Mutex::default(),
            sockets: limits.sockets,
        });
        let stop = Arc::new(Notify::new());
        let stopped = stop.clone();
        let listener = {
            let _g = rt.enter();
            TcpListener::from_std(listener).context("the listening socket")?
        };
        let thread = std::thread::Builder::new()
            .name("exporter-http".into())
            .spawn(move || {
                rt.block_on(async move {
                    loop {
                        tokio::select! {
                            r = listener.accept() => match r {
                                Ok((tcp, peer)) => {
                                    let _ = tcp.set_nodelay(true);
                                    tokio::spawn(shared.clone().connection(tcp, peer));
                                }
                                // out of descriptors, a connection reset before accept: wait
                                // a moment, do not spin
                                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                            },
                            _ = stopped.notified() => break,
                        }
                    }
                });
                // dropping the runtime drops every connection's task, and with them the last
                // senders of scrapes: the scraping thread's channel ends
                drop(rt);
            })
            .context("the exporter's server thread")?;
        Ok(Server {
            thread: Some(thread),
            stop,
        })
    }

    /// Closes every connection and waits for the server's thread.
    pub fn stop(mut self) {
        self.stop.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::webconfig::WebConfig;
    use super::*;
    use std::collections::BTreeMap;

    fn shared(max_requests: usize, users: bool) -> (Arc<Shared>, mpsc::Receiver<Job>) {
        let stats = Arc::new(Stats::default());
        let mut web = WebConfig::default();
        if users {
            web.basic_auth_users =
                BTreeMap::from([("prometheus".to_string(), bcrypt::hash("s3cret", 4).unwrap())]);
        }
        let (tx, rx) = mpsc::channel();
        let s = Shared {
            guard: Arc::new(Guard::new(Arc::new(web), stats.clone())),
            stats,
            conns: Conns {
                max: 3,
                live: Mutex::default(),
            },
            requests: (max_requests > 0).then(|| Semaphore::new(max_requests)),
            scrapes: Mutex::new(tx),
            header_timeout: Duration::from_secs(10),
            tls: None,
            arrivals: Mutex::default(),
            sockets: true,
        };
        (Arc::new(s), rx)
    }

    fn get(path: &str) -> Request<()> {
        Request::get(path).body(()).unwrap()
    }

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// `--web.max-requests 1`: while one scrape waits for its reading, a second is refused with
    /// 503; once it is answered, the next one is served.
    #[test]
    fn scrapes_beyond_the_bound_get_503() {
        let (s, jobs) = shared(1, false);
        rt().block_on(async {
            let now = tokio::time::Instant::now();
            let first = tokio::spawn({
                let s = s.clone();
                async move { s.answer(HERE, get("/metrics"), now).await.status() }
            });
            // the first one is waiting for its reading
            let job = loop {
                if let Ok(j) = jobs.try_recv() {
                    break j;
                }
                tokio::task::yield_now().await;
            };
            let second = s.answer(HERE, get("/metrics"), now).await.status();
            assert_eq!(second, StatusCode::SERVICE_UNAVAILABLE);
            job.reply.send((Bytes::from_static(b"x 1\n"), 0)).unwrap();
            assert_eq!(first.await.unwrap(), StatusCode::OK);
            let third = tokio::spawn({
                let s = s.clone();
                async move { s.answer(HERE, get("/metrics"), now).await.status() }
            });
            let job = loop {
                if let Ok(j) = jobs.try_recv() {
                    break j;
                }
                tokio::task::yield_now().await;
            };
            job.reply.send((Bytes::new(), 0)).unwrap();
            assert_eq!(third.await.unwrap(), StatusCode::OK);
        });
    }

    /// Only GET /metrics; credentials first (a 401 says nothing of what exists), a refusal of
    /// wrong credentials a second after the request, a missing one at once.
    #[test]
    fn what_is_answered_and_when() {
        let (s, _jobs) = shared(0, true);
        rt().block_on(async {
            let now = tokio::time::Instant::now();
            let r = s.answer(HERE, get("/nothing"), now).await;
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
            assert!(r.headers().contains_key(header::WWW_AUTHENTICATE));
            assert!(
                now.elapsed() < FAIL_DELAY,
                "a missing header is told at once"
            );
            let wrong = Request::get("/metrics")
                .header(header::AUTHORIZATION, "Basic cHJvbWV0aGV1czp4")
                .body(())
                .unwrap();
            let t = tokio::time::Instant::now();
            assert_eq!(
                s.answer(HERE, wrong, t).await.status(),
                StatusCode::UNAUTHORIZED
            );
            assert!(t.elapsed() >= FAIL_DELAY);
            // prometheus:s3cret
            let ok = |m: Method, path: &str| {
                Request::builder()
                    .method(m)
                    .uri(path)
                    .header(header::AUTHORIZATION, "Basic cHJvbWV0aGV1czpzM2NyZXQ=")
                    .body(())
                    .unwrap()
            };
            let r = s.answer(HERE, ok(Method::POST, "/metrics"), now).await;
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
            assert_eq!(r.headers()[header::ALLOW], "GET");
            for p in ["/", "/../metrics", "/metrics/x"] {
                assert_eq!(
                    s.answer(HERE, ok(Method::GET, p), now).await.status(),
                    StatusCode::NOT_FOUND,
                    "{p}"
                );
            }
        });
    }

    /// A source opens a burst of connections, then NEW_PER_SECOND a second; another source is
    /// not held by it.
    #[test]
    fn a_source_opens_connections_at_a_bounded_rate() {
        let mut a = Arrivals::default();
        let now = Instant::now();
        let x = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 9));
        let admitted = (0..1000).filter(|_| a.admit(x, now)).count();
        assert_eq!(admitted, NEW_BURST as usize);
        assert!(a.admit(HERE, now));
        let later = now + Duration::from_millis(500);
        let admitted = (0..1000).filter(|_| a.admit(x, later)).count();
        assert_eq!(admitted, (NEW_PER_SECOND / 2.0) as usize);
    }

    /// At the cap the connection idle longest is closed for the newcomer, counted.
    #[test]
    fn the_longest_idle_connection_makes_room() {
        let stats = Stats::default();
        let c = Conns {
            max: 3,
            live: Mutex::default(),
        };
        let (a, ka) = c.admit(&stats);
        let (b, _kb) = c.admit(&stats);
        let (_c, _kc) = c.admit(&stats);
        // a asks something: b is now the one idle longest
        std::thread::sleep(Duration::from_millis(2));
        c.touch(a);
        let (_d, _kd) = c.admit(&stats);
        let live = c.live.lock().unwrap();
        assert!(!live.1.contains_key(&b) && live.1.contains_key(&a));
        assert_eq!(live.1.len(), 3);
        drop(live);
        assert_eq!(stats.counts().dropped.get("evicted"), Some(&1));
        // b's task was told to close; a's was not
        let rt = rt();
        let told = rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(50), ka.notified())
                .await
                .is_ok()
        });
        assert!(!told);
    }
}
