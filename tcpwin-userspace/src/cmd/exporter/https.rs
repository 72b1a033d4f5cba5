//! The exporter over TLS (`--web.config.file` with `tls_server_config`): rustls (ring provider)
//! on each accepted connection, one request per connection (`Connection: close`), read with a
//! deadline so a client that stalls or speaks plain HTTP costs one connection, never the server.
use std::{
    io::{ErrorKind, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{anyhow, Context, Result};
use rustls::{
    pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer},
    ServerConfig, ServerConnection, StreamOwned,
};
use tcpwin_model::webconfig::TlsConfig;

use super::Asked;

/// A request head larger than this is refused (a scrape's is a few hundred bytes).
const MAX_HEAD: usize = 16 << 10;
/// A client must send its request (TLS handshake included) within this.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

pub struct Https {
    listener: TcpListener,
    config: Arc<ServerConfig>,
    /// connections dropped: a failed handshake (plain HTTP, an untrusted client), a stall
    pub dropped: u64,
}

/// The server's TLS configuration from the web config's files.
pub fn server_config(t: &TlsConfig) -> Result<Arc<ServerConfig>> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&t.cert_file)
        .and_then(|i| i.collect())
        .map_err(|e| anyhow!("cert_file {}: {e}", t.cert_file.display()))?;
    if certs.is_empty() {
        anyhow::bail!(
            "cert_file {}: no PEM certificate in it",
            t.cert_file.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(&t.key_file)
        .map_err(|e| anyhow!("key_file {}: {e}", t.key_file.display()))?;
    let versions: &[&'static rustls::SupportedProtocolVersion] = match t.min_version.as_deref() {
        Some("TLS13") => &[&rustls::version::TLS13],
        _ => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let c = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(versions)
        .context("the TLS versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the certificate and key do not make a TLS server (does the key match?)")?;
    Ok(Arc::new(c))
}

/// One request read over TLS, to be answered on the same stream.
pub struct Conn {
    stream: StreamOwned<ServerConnection, TcpStream>,
    pub asked: Asked,
}

impl Https {
    pub fn bind(addr: SocketAddr, config: Arc<ServerConfig>) -> Result<Https> {
        let listener =
            TcpListener::bind(addr).map_err(|e| anyhow!("cannot listen on {addr}: {e}"))?;
        listener.set_nonblocking(true)?;
        Ok(Https {
            listener,
            config,
            dropped: 0,
        })
    }

    /// The next request within `wait`, or None.
    pub fn recv(&mut self, wait: Duration) -> Option<Conn> {
        let until = Instant::now() + wait;
        loop {
            match self.listener.accept() {
                Ok((tcp, _)) => match self.read(tcp) {
                    Some(c) => return Some(c),
                    None => self.dropped += 1,
                },
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= until {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(_) => return None,
            }
        }
    }

    fn read(&self, tcp: TcpStream) -> Option<Conn> {
        tcp.set_nonblocking(false).ok()?;
        tcp.set_read_timeout(Some(REQUEST_DEADLINE)).ok()?;
        tcp.set_write_timeout(Some(REQUEST_DEADLINE)).ok()?;
        let conn = ServerConnection::new(self.config.clone()).ok()?;
        let mut stream = StreamOwned::new(conn, tcp);
        let start = Instant::now();
        let mut head = Vec::new();
        let mut buf = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            if head.len() > MAX_HEAD || start.elapsed() > REQUEST_DEADLINE {
                return None;
            }
            let n = stream.read(&mut buf).ok()?;
            if n == 0 {
                return None;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let asked = Asked::parse(&String::from_utf8_lossy(&head))?;
        Some(Conn { stream, asked })
    }
}

impl Conn {
    pub fn respond(mut self, code: u16, ctype: &str, body: &[u8], extra: &[(&str, &str)]) {
        let reason = match code {
            200 => "OK",
            401 => "Unauthorized",
            404 => "Not Found",
            405 => "Method Not Allowed",
            _ => "",
        };
        let mut head = format!(
            "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        // a client gone mid-response is its business, not the exporter's
        let _ = self
            .stream
            .write_all(head.as_bytes())
            .and_then(|_| self.stream.write_all(body))
            .and_then(|_| self.stream.flush());
        self.stream.conn.send_close_notify();
        let _ = self.stream.flush();
    }
}
