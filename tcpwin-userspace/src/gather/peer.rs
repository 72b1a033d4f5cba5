//! The other end of each connection, from the peer host's exporter (`--peer URL`): at each
//! reading, the exporter on the peer is asked (`/sockets`, over HTTPS with the CA and basic auth
//! of `--peer-config`, as Prometheus scrapes it) for its sockets towards this host, and they are
//! judged with this host's as one connection, as `--netns all` judges two namespaces of one host.
//! What could not be matched or asked is said on stderr, never dropped silently; it never
//! changes the exit status.
use std::{net::IpAddr, path::Path, sync::Arc, time::Duration};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{header, Request, Uri};
use hyper_util::rt::TokioIo;
use rustls::{
    client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    pki_types::{pem::PemObject, CertificateDer, ServerName, UnixTime},
    ClientConfig, DigitallySignedStruct, SignatureScheme,
};
use serde::Deserialize;
use tcpwin_model::{
    facts::SockFacts,
    peer::{self, Flow, FourTuple, Query},
    schema::SsLine,
};

use super::snapshot::Seen;

/// How long one answer may take (a scrape of a few sockets takes milliseconds).
const TIMEOUT: Duration = Duration::from_secs(3);

/// `--peer-config`: what a Prometheus scrape job's `http_config` says, for the peers' exporters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    #[serde(default)]
    pub tls_config: Option<TlsConfig>,
    #[serde(default)]
    pub basic_auth: Option<BasicAuth>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM CA (or the exporter's own self-signed certificate) to trust; relative paths are
    /// from the config file's directory
    pub ca_file: Option<std::path::PathBuf>,
    /// the name to check the certificate against, where the URL names an address
    #[serde(default)]
    pub server_name: Option<String>,
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicAuth {
    pub username: String,
    #[serde(default)]
    pub password: Option<String>,
    /// a file holding the password (its first line)
    #[serde(default)]
    pub password_file: Option<std::path::PathBuf>,
}

impl PeerConfig {
    /// Parses the file's text; `dir` is its directory.
    pub fn parse(text: &str, dir: &Path) -> Result<PeerConfig> {
        let mut c: PeerConfig = serde_yaml_ng::from_str(text).map_err(|e| {
            anyhow!("{e} (the peer config takes tls_config: ca_file, server_name, insecure_skip_verify; basic_auth: username, password or password_file)")
        })?;
        if let Some(ca) = c.tls_config.as_mut().and_then(|t| t.ca_file.as_mut()) {
            if ca.is_relative() {
                *ca = dir.join(&*ca);
            }
        }
        if let Some(b) = c.basic_auth.as_mut() {
            if let Some(f) = b.password_file.as_mut() {
                if f.is_relative() {
                    *f = dir.join(&*f);
                }
            }
            if b.password.is_some() == b.password_file.is_some() {
                bail!("basic_auth: give password or password_file (one of them)");
            }
        }
        Ok(c)
    }

    pub fn load(path: &Path) -> Result<PeerConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--peer-config {}: cannot read it", path.display()))?;
        PeerConfig::parse(&text, path.parent().unwrap_or(Path::new(".")))
            .with_context(|| format!("--peer-config {}", path.display()))
    }

    /// The `Authorization` header's value, where basic auth is configured.
    fn authorization(&self) -> Result<Option<String>> {
        let Some(b) = &self.basic_auth else {
            return Ok(None);
        };
        let password = match (&b.password, &b.password_file) {
            (Some(p), _) => p.clone(),
            (None, Some(f)) => std::fs::read_to_string(f)
                .with_context(|| format!("basic_auth.password_file {}", f.display()))?
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
            (None, None) => String::new(),
        };
        use base64::Engine;
        Ok(Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{}:{password}", b.username))
        )))
    }

    /// The TLS client: the CA file's certificates trusted (a certificate that is its own CA, as
    /// an exporter's self-signed one is, is trusted as itself, as Prometheus does), or none.
    pub fn tls(&self) -> Result<Arc<ClientConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .context("the TLS versions")?;
        let t = self.tls_config.as_ref();
        let mut pinned = Vec::new();
        let mut roots = rustls::RootCertStore::empty();
        if let Some(ca) = t.and_then(|t| t.ca_file.as_ref()) {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(ca)
                .and_then(|i| i.collect())
                .map_err(|e| anyhow!("tls_config.ca_file {}: {e}", ca.display()))?;
            if certs.is_empty() {
                bail!(
                    "tls_config.ca_file {}: no PEM certificate in it",
                    ca.display()
                );
            }
            for c in &certs {
                roots
                    .add(c.clone())
                    .map_err(|e| anyhow!("tls_config.ca_file {}: {e}", ca.display()))?;
            }
            pinned = certs;
        } else {
            // the system's roots, where the exporter has a certificate of a public CA
            for c in CertificateDer::pem_file_iter("/etc/ssl/certs/ca-certificates.crt")
                .into_iter()
                .flatten()
                .flatten()
            {
                let _ = roots.add(c);
            }
        }
        let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .context("the certificate verifier")?;
        let verifier = Verifier {
            webpki,
            pinned,
            insecure: t.is_some_and(|t| t.insecure_skip_verify),
            provider,
        };
        Ok(Arc::new(
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth(),
        ))
    }
}

/// webpki's verification, with two allowances a scrape job has too: a self-signed certificate
/// given as the CA is trusted as itself (webpki refuses a CA as the server's own certificate),
/// and `insecure_skip_verify`. Signatures are always checked.
#[derive(Debug)]
struct Verifier {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    insecure: bool,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.insecure
            || self
                .pinned
                .iter()
                .any(|p| p.as_ref() == end_entity.as_ref())
        {
            return Ok(ServerCertVerified::assertion());
        }
        self.webpki
            .verify_server_cert(end_entity, intermediates, name, ocsp, now)
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            m,
            c,
            d,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            m,
            c,
            d,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// One peer's exporter.
pub struct Peer {
    pub url: Uri,
    host: String,
    port: u16,
    tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    authorization: Option<String>,
}

/// Why a peer gave no readings, in one sentence.
#[derive(Debug)]
pub struct PeerError(pub String);

impl Peer {
    /// `http://HOST:PORT` or `https://HOST:PORT` (the exporter's address: its `--listen`).
    pub fn new(url: &str, config: &PeerConfig) -> Result<Peer> {
        let uri: Uri = url
            .parse()
            .map_err(|e| anyhow!("--peer {url}: not a URL ({e}): write https://HOST:9943"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => bail!("--peer {url}: http:// or https://, as the exporter serves"),
        };
        let host = uri
            .host()
            .ok_or_else(|| anyhow!("--peer {url}: no host in it"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tls = if https {
            let name = config
                .tls_config
                .as_ref()
                .and_then(|t| t.server_name.clone())
                .unwrap_or_else(|| host.clone());
            let name = ServerName::try_from(name.clone())
                .map_err(|e| anyhow!("--peer {url}: {name} is not a TLS server name ({e})"))?;
            Some((config.tls()?, name))
        } else {
            None
        };
        Ok(Peer {
            url: uri,
            host,
            port,
            tls,
            authorization: config.authorization()?,
        })
    }

    /// The peer's address, where the URL names one.
    pub fn addr(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }

    /// The peer's sockets the query asks for, and how many its exporter left out. On a thread
    /// of its own with a runtime of its own: callers run inside a runtime (the trace) or not.
    pub fn ask(&self, q: &Query) -> Result<(Vec<SsLine>, usize), PeerError> {
        std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| PeerError(format!("no runtime: {e}")))?;
                rt.block_on(async { tokio::time::timeout(TIMEOUT, self.get(q)).await })
                    .map_err(|_| PeerError(format!("no answer within {} s", TIMEOUT.as_secs())))?
            })
            .join()
            .unwrap_or_else(|_| Err(PeerError("the client failed".into())))
        })
    }

    async fn get(&self, q: &Query) -> Result<(Vec<SsLine>, usize), PeerError> {
        let e = |what: &str, err: &dyn std::fmt::Display| PeerError(format!("{what}: {err}"));
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|x| e("unreachable", &x))?;
        let path = format!("{}?{}", peer::PATH, q.to_query_string());
        let req = Request::get(path)
            .header(header::HOST, format!("{}:{}", self.host, self.port))
            .header(header::ACCEPT, "application/x-ndjson");
        let req = match &self.authorization {
            Some(a) => req.header(header::AUTHORIZATION, a),
            None => req,
        }
        .body(Empty::<Bytes>::new())
        .map_err(|x| e("the request", &x))?;
        let resp = match &self.tls {
            Some((config, name)) => {
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|x| e("TLS", &x))?;
                send(TokioIo::new(tls), req).await?
            }
            None => send(TokioIo::new(tcp), req).await?,
        };
        let status = resp.status();
        let omitted = resp
            .headers()
            .get(peer::OMITTED_HEADER)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(0);
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|x| e("the answer", &x))?
            .to_bytes();
        match status.as_u16() {
            200 => {}
            401 => {
                return Err(PeerError(
                    "unauthorized (401): the peer config's basic_auth is not one of the exporter's users".into(),
                ))
            }
            404 => {
                return Err(PeerError(
                    "no per-socket readings there (404: an exporter of an older version, or one run with --no-sockets-endpoint)".into(),
                ))
            }
            s => {
                return Err(PeerError(format!(
                    "answered {s}: {}",
                    String::from_utf8_lossy(&body).trim()
                )))
            }
        }
        let mut lines = Vec::new();
        for l in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            lines.push(
                serde_json::from_slice::<SsLine>(l)
                    .map_err(|x| e("a line of its answer is not a socket", &x))?,
            );
        }
        Ok((lines, omitted))
    }
}

async fn send<IO>(
    io: TokioIo<IO>,
    req: Request<Empty<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, PeerError>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|x| PeerError(format!("HTTP: {x}")))?;
    tokio::spawn(conn);
    sender
        .send_request(req)
        .await
        .map_err(|x| PeerError(format!("HTTP: {x}")))
}

/// The peers asked at each reading, and what was said of them (once each, not at every
/// reading; the caller shows it: `ss` on stderr, `top` in its header).
pub struct Peers {
    list: Vec<Peer>,
    said: std::collections::BTreeSet<String>,
    news: Vec<String>,
}

impl Peers {
    pub fn new(urls: &[String], config: Option<&Path>) -> Result<Option<Peers>> {
        if urls.is_empty() {
            if config.is_some() {
                bail!("--peer-config without --peer: give the peer's exporter, --peer https://HOST:9943");
            }
            return Ok(None);
        }
        let config = match config {
            Some(p) => PeerConfig::load(p)?,
            None => PeerConfig::default(),
        };
        let list = urls
            .iter()
            .map(|u| Peer::new(u, &config))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Peers {
            list,
            said: Default::default(),
            news: Vec::new(),
        }))
    }

    fn say(&mut self, what: String) {
        if self.said.insert(what.clone()) {
            self.news.push(what);
        }
    }

    /// What was found to say since the last call, each thing once.
    pub fn news(&mut self) -> Vec<String> {
        std::mem::take(&mut self.news)
    }

    /// The peers' ends of this reading's connections (`local`: this host's sockets, with the
    /// port the command was asked for, if any), as sockets of this reading: their cookies tagged
    /// per peer, their limits marked as the peer's, and where a host translated the connection
    /// (this one's connection tracking, or the peer's as its answer says) their tuple written as
    /// the reverse of ours, so that the judge pairs them. Each peer's failure, and each
    /// connection to a peer that has no end there, is said.
    pub fn read(&mut self, local: &[Seen], port: Option<u16>) -> Vec<Seen> {
        // what this host translated: its own namespace's tracking and the sockets' namespaces'
        let names: std::collections::BTreeSet<&str> =
            local.iter().map(|s| s.line_ns.as_str()).collect();
        let namespaces: Vec<crate::host::netns::Netns> = names
            .into_iter()
            .filter_map(|n| crate::host::netns::resolve(Some(n)).ok())
            .flatten()
            .collect();
        let flows = tracked_flows(&namespaces);
        // each of our sockets: the tuple its other end has (through a translation, or plainly
        // reversed), and the reverse of ours (what the judge pairs)
        let ends: Vec<(FourTuple, FourTuple, &SockFacts, bool)> = local
            .iter()
            .map(|s| {
                let plain = peer::other_end(&s.facts.id);
                match peer::other_end_through(&s.facts.id, &flows) {
                    Some(t) => (canon(t), plain, &s.facts, true),
                    None => (canon(plain), plain, &s.facts, false),
                }
            })
            .collect();
        let translated = ends.iter().any(|e| e.3);
        // our addresses as the peers see them (a masquerade's too)
        let addrs: std::collections::BTreeSet<IpAddr> = local
            .iter()
            .filter_map(|s| s.facts.id.laddr)
            .chain(ends.iter().filter(|e| e.3).filter_map(|e| e.0 .2))
            .collect();
        let q = Query {
            // a translated port is not the one asked for: every socket towards our addresses
            port: port.filter(|_| !translated),
            addrs: addrs
                .into_iter()
                .take(peer::MAX_ADDRS)
                .map(|a| a.into())
                .collect(),
        };
        let mut out = Vec::new();
        for i in 0..self.list.len() {
            let answer = self.list[i].ask(&q);
            let url = self.list[i].url.to_string();
            let peer_addr = self.list[i].addr();
            let (lines, omitted) = match answer {
                Ok(a) => a,
                Err(PeerError(why)) => {
                    self.say(format!(
                        "--peer {url}: {why}; its connections are judged from this end alone"
                    ));
                    continue;
                }
            };
            if omitted > 0 {
                self.say(format!(
                    "--peer {url}: {omitted} of its sockets were left out of its answer (it answers {} at most): narrow with --port or --addr",
                    peer::MAX_SOCKETS
                ));
            }
            let mut matched = std::collections::BTreeSet::new();
            for l in lines {
                // the peer's socket as itself, or as the peer's host translated it
                let theirs = canon(l.facts.id.tuple());
                let through = l.other_end.map(canon);
                let Some(e) = ends
                    .iter()
                    .find(|e| e.0 == theirs || through == Some(canon(e.2.id.tuple())))
                else {
                    continue;
                };
                matched.insert(e.1);
                let mut facts = l.facts;
                let mut host = l.host.unwrap_or_default();
                host.remote = facts.id.laddr.or(peer_addr);
                let real = facts.id.clone();
                // paired by the judge as the reverse of ours
                (
                    facts.id.laddr,
                    facts.id.lport,
                    facts.id.raddr,
                    facts.id.rport,
                ) = e.1;
                facts.id.cookie = facts.id.cookie.map(|c| peer::tag_cookie(c, i));
                let translated = e.3 || through.is_some();
                out.push(Seen {
                    line_ns: if translated {
                        format!(
                            "peer:{} (its end {} <> {}, translated)",
                            self.list[i].host,
                            real.local(),
                            real.remote()
                        )
                    } else {
                        format!("peer:{}", self.list[i].host)
                    },
                    facts,
                    host: Arc::new(host),
                });
            }
            // our connections to this peer's address with no end there
            for (theirs, plain, f, translated) in &ends {
                let to_peer = peer_addr.is_some_and(|a| {
                    f.id.raddr.map(|r| r.to_canonical()) == Some(a.to_canonical())
                        || theirs.0.map(|r| r.to_canonical()) == Some(a.to_canonical())
                });
                if !to_peer
                    || f.state != tcpwin_model::facts::ESTABLISHED
                    || matched.contains(plain)
                {
                    continue;
                }
                self.say(if *translated {
                    format!(
                        "--peer {url}: {} was translated by this host (its other end is {} <> {}), and the peer has no socket as that: judged from this end alone",
                        f.id.flow("->"),
                        tcpwin_model::id::endpoint(theirs.0, theirs.1),
                        tcpwin_model::id::endpoint(theirs.2, theirs.3),
                    )
                } else {
                    format!(
                        "--peer {url}: no socket there for {} (closed meanwhile, or an address translation this host does not track: the peer's host, or a middlebox between): judged from this end alone",
                        f.id.flow("->")
                    )
                });
            }
        }
        out
    }
}

/// IPv4-mapped IPv6 addresses as IPv4 (a dual-stack socket's form), for comparing tuples.
fn canon((a, ap, b, bp): FourTuple) -> FourTuple {
    (
        a.map(|x| x.to_canonical()),
        ap,
        b.map(|x| x.to_canonical()),
        bp,
    )
}

/// The TCP flows this host's connection tracking holds: in the caller's own namespace and in
/// each of `namespaces`. A table that cannot be read (no CAP_NET_ADMIN, no conntrack) gives
/// none, said once.
pub fn tracked_flows(namespaces: &[crate::host::netns::Netns]) -> Vec<Flow> {
    static SAID: std::sync::Once = std::sync::Once::new();
    let mut out = Vec::new();
    let mut read = |what: &str, r: Result<Vec<Flow>>| {
        match r {
        Ok(f) => out.extend(f),
        Err(e) => SAID.call_once(|| {
            eprintln!("tcpwin-trace: the connection-tracking table of {what} could not be read ({e:#}): a connection this host translated is not matched to its other end")
        }),
    }
    };
    read("this namespace", crate::host::conntrack::tcp_flows());
    let own = crate::host::netns::own().ok().map(|n| n.inode);
    for ns in namespaces.iter().filter(|n| Some(n.inode) != own) {
        let r = crate::host::netns::enter(ns).and_then(|_in| crate::host::conntrack::tcp_flows());
        read(&ns.name, r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_config_is_prometheus_http_config() {
        let c = PeerConfig::parse(
            "tls_config:\n  ca_file: ca.crt\nbasic_auth:\n  username: prometheus\n  password: s3cret\n",
            Path::new("/etc/tcpwin"),
        )
        .unwrap();
        assert_eq!(
            c.tls_config.unwrap().ca_file.unwrap(),
            Path::new("/etc/tcpwin/ca.crt")
        );
        let e = PeerConfig::parse("basic_auth:\n  username: u\n", Path::new("/"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("password or password_file"), "{e}");
        let e = PeerConfig::parse("bearer_token: x\n", Path::new("/"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bearer_token") && e.contains("basic_auth"),
            "{e}"
        );
        let c = PeerConfig::parse(
            "basic_auth:\n  username: prometheus\n  password: s3cret\n",
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(
            c.authorization().unwrap().unwrap(),
            "Basic cHJvbWV0aGV1czpzM2NyZXQ="
        );
    }

    #[test]
    fn a_peer_url_is_checked_at_once() {
        let c = PeerConfig::default();
        assert!(Peer::new("https://10.0.0.1:9943", &c).is_ok());
        let p = Peer::new("http://10.0.0.1:9943", &c).unwrap();
        assert_eq!(p.addr(), Some("10.0.0.1".parse().unwrap()));
        for (u, says) in [
            ("ftp://x", "http:// or https://"),
            ("not a url", "not a URL"),
        ] {
            let e = Peer::new(u, &c).err().unwrap().to_string();
            assert!(e.contains(says), "{u}: {e}");
        }
    }
}
