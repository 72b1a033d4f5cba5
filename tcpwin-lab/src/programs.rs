//! Real programs as the lab's traffic, from the distribution: iperf3 (`-w`, `-R`, `-P`, `-C`),
//! nginx serving a file with sendfile (`listen ... sndbuf=`) to curl or wget (`--limit-rate` as
//! a slow reader) or to a Python client setting its socket options, and uploads to nginx
//! (`curl -T`, `listen ... rcvbuf=`). Each runs inside the lab's namespaces, the sending side in the sender's
//! namespace; what each is set up to do is the ground truth the verdicts are held against, and
//! each program's own report of its rate is kept beside the tool's.
use std::{
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use crate::{harness::Proc, pair::Pair};

/// A program the lab needs, or the one-sentence fix.
pub fn require(program: &str, package: &str) -> Result<()> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
        || ["/usr/sbin", "/sbin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(program).is_file());
    if !found {
        bail!("{program} is not installed: apt-get install {package} (the lab's real-program scenarios run it)");
    }
    Ok(())
}

/// When the Python client sets its TCP_WINDOW_CLAMP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClampWhen {
    /// on the socket before connect: the handshake's window scale is chosen within it
    BeforeConnect,
    /// right after connect, before any data: a kernel that measures the ratio on the first data
    /// packets (6.12+) rewrites the clamp from the buffer then
    AfterConnect,
    /// once the first 256 KiB arrived (the ratio measured)
    AfterData,
}

impl ClampWhen {
    fn arg(self) -> &'static str {
        match self {
            ClampWhen::BeforeConnect => "before",
            ClampWhen::AfterConnect => "connect",
            ClampWhen::AfterData => "data",
        }
    }

    fn words(self) -> &'static str {
        match self {
            ClampWhen::BeforeConnect => "before connect",
            ClampWhen::AfterConnect => "after connect",
            ClampWhen::AfterData => "after 256 KiB",
        }
    }
}

/// Who fetches the file nginx serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    Curl,
    Wget,
    /// a Python client that sets its socket options as such programs do: `SO_RCVBUF` before
    /// connect, `TCP_WINDOW_CLAMP` before connect, after it, or once data arrived
    Python {
        rcvbuf: Option<u32>,
        clamp: Option<u32>,
        clamp_when: ClampWhen,
    },
}

/// What drives a row's traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// iperf3: `-w` (SO_SNDBUF and SO_RCVBUF at both ends), `-R` (the server sends), `-P`, `-C`
    /// (a congestion control per socket, as root: cubic, which a namespace cannot choose here)
    Iperf3 {
        window: Option<u32>,
        reverse: bool,
        streams: u8,
        congestion: Option<&'static str>,
        /// `--fq-rate`: the sender caps its own pacing rate (SO_MAX_PACING_RATE), bit/s
        fq_rate: Option<u64>,
        /// `-b`: iperf3 paces its own writes (a token bucket in the application), bit/s
        bitrate: Option<u64>,
    },
    /// `ssh HOST cat /dev/zero`: OpenSSH's sshd in the sender's namespace streams to the ssh
    /// client in the receiver's, through its own channel window above TCP (2 MiB in OpenSSH 9)
    Ssh,
    /// nginx (sendfile on, as shipped) in the sender's namespace serving a file to `client`;
    /// `listen ... sndbuf=`; the client's `--limit-rate` (curl, wget); nginx's own `limit_rate`
    Nginx {
        sndbuf: Option<u32>,
        /// the client's `--limit-rate`, bit/s
        limit_rate: Option<u64>,
        /// nginx's own `limit_rate` (the server sends slowly), bit/s
        server_rate: Option<u64>,
        client: Client,
    },
    /// an upload: curl -T sending to nginx in the receiver's namespace (`dav_methods PUT`), the
    /// server the receiving end, its listener's `rcvbuf=` set; over HTTP/2 (`h2`: cleartext,
    /// curl --http2-prior-knowledge), where nginx's stream window for the body sits above TCP's
    Upload { rcvbuf: Option<u32>, h2: bool },
    /// Python's `http.server` (Debian's python3) in the sender's namespace serving a file to
    /// curl: a writer in Python, 64 KiB `write()`s where nginx hands the kernel its file with
    /// sendfile; curl's `--limit-rate`, bit/s
    PyServe { limit_rate: Option<u64> },
    /// nginx serving the file over TLS (a self-signed certificate; OpenSSL's `SSL_write` in 16 KiB
    /// records, no sendfile) to `curl -k`; curl's `--limit-rate`, bit/s
    Https { limit_rate: Option<u64> },
}

/// The Python client: connects, sets what it is told, fetches /big for SECS, prints bit/s.
const PYTHON_CLIENT: &str = r#"import socket, sys, time
host, port, secs, rcvbuf, clamp, when = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
s = socket.socket()
if rcvbuf:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
if clamp and when == "before":
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, clamp)
s.connect((host, port))
if clamp and when == "connect":
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, clamp)
s.sendall(("GET /big HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
buf = bytearray(1 << 20)
t0 = time.monotonic()
end, n, later = t0 + secs, 0, clamp and when == "data"
while time.monotonic() < end:
    k = s.recv_into(buf)
    if not k:
        break
    n += k
    if later and n >= 256 << 10:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, clamp)
        later = False
print(n * 8 / (time.monotonic() - t0))
"#;

impl App {
    pub fn describe(self) -> String {
        match self {
            App::Iperf3 {
                window,
                reverse,
                streams,
                congestion,
                fq_rate,
                bitrate,
            } => {
                let mut s = "iperf3".to_string();
                if let Some(w) = window {
                    s.push_str(&format!(" -w {}K", w >> 10));
                }
                if reverse {
                    s.push_str(" -R");
                }
                if streams > 1 {
                    s.push_str(&format!(" -P {streams}"));
                }
                if let Some(c) = congestion {
                    s.push_str(&format!(" -C {c}"));
                }
                if let Some(r) = fq_rate {
                    s.push_str(&format!(" --fq-rate {}M", r / 1_000_000));
                }
                if let Some(r) = bitrate {
                    s.push_str(&format!(" -b {}M", r / 1_000_000));
                }
                s
            }
            App::Ssh => "ssh cat /dev/zero".into(),
            App::Nginx {
                sndbuf,
                limit_rate,
                server_rate,
                client,
            } => {
                let mut s = "nginx".to_string();
                if let Some(b) = sndbuf {
                    s.push_str(&format!(" sndbuf={}k", b >> 10));
                }
                if let Some(r) = server_rate {
                    s.push_str(&format!(" limit_rate {}k", r / 8 / 1000));
                }
                match client {
                    Client::Curl => s.push_str(" -> curl"),
                    Client::Wget => s.push_str(" -> wget"),
                    Client::Python {
                        rcvbuf,
                        clamp,
                        clamp_when,
                    } => {
                        s.push_str(" -> python");
                        if let Some(b) = rcvbuf {
                            s.push_str(&format!(" SO_RCVBUF {b}"));
                        }
                        if let Some(c) = clamp {
                            s.push_str(&format!(" TCP_WINDOW_CLAMP {c} {}", clamp_when.words()));
                        }
                    }
                }
                if let Some(r) = limit_rate {
                    s.push_str(&format!(" --limit-rate {}k", r / 8 / 1000));
                }
                s
            }
            App::Upload { rcvbuf, h2 } => {
                let mut s = if h2 {
                    "curl --http2-prior-knowledge -T -> nginx (HTTP/2)".to_string()
                } else {
                    "curl -T -> nginx".to_string()
                };
                if let Some(b) = rcvbuf {
                    s.push_str(&format!(" rcvbuf={}k", b >> 10));
                }
                s
            }
            App::PyServe { limit_rate } => {
                let limit = limit_rate.map(|r| format!(" --limit-rate {}k", r / 8 / 1000));
                format!(
                    "python3 -m http.server -> curl{}",
                    limit.unwrap_or_default()
                )
            }
            App::Https { limit_rate } => {
                let limit = limit_rate.map(|r| format!(" --limit-rate {}k", r / 8 / 1000));
                format!("nginx (TLS) -> curl{}", limit.unwrap_or_default())
            }
        }
    }

    /// How long the program talks before its data flows, which the readings wait out: OpenSSH's
    /// version exchange, key exchange, authentication and channel set-up take about a dozen
    /// round trips (1.2-1.6 s over 100 ms), so its flow is read as old as the others'.
    pub fn lead(self) -> Duration {
        match self {
            App::Ssh => Duration::from_secs(2),
            _ => Duration::ZERO,
        }
    }

    /// The programs it needs installed.
    pub fn require(self) -> Result<()> {
        match self {
            App::Iperf3 { .. } => require("iperf3", "iperf3"),
            App::Ssh => {
                require("sshd", "openssh-server")?;
                require("ssh", "openssh-client")
            }
            App::Nginx { client, .. } => {
                require("nginx", "nginx-light")?;
                match client {
                    Client::Curl => require("curl", "curl"),
                    Client::Wget => require("wget", "wget"),
                    Client::Python { .. } => require("python3", "python3"),
                }
            }
            App::Upload { .. } => {
                require("nginx", "nginx-light")?;
                require("curl", "curl")
            }
            App::PyServe { .. } => {
                require("python3", "python3")?;
                require("curl", "curl")
            }
            App::Https { .. } => {
                require("nginx", "nginx-light")?;
                require("openssl", "openssl")?;
                require("curl", "curl")
            }
        }
    }

    /// The congestion control the program sets on its own sockets, over the namespace's.
    pub fn own_congestion(self) -> Option<&'static str> {
        match self {
            App::Iperf3 { congestion, .. } => congestion,
            _ => None,
        }
    }

    /// Starts the traffic on `port` for `secs`, congestion control `cc` at the sending end (set
    /// per namespace by the caller too). The sending side runs in `pair.a`, the receiving side
    /// in `pair.b`.
    pub fn start(self, pair: &Pair, port: u16, secs: f64, cc: &str) -> Result<Running> {
        match self {
            App::Iperf3 {
                window,
                reverse,
                streams,
                congestion,
                fq_rate,
                bitrate,
            } => {
                // the sender is in a: with -R the server (in a) sends to the client (in b)
                let (server_ns, client_ns, server_ip) = if reverse {
                    (&pair.a, &pair.b, pair.ip_a)
                } else {
                    (&pair.b, &pair.a, pair.ip_b)
                };
                let server = Proc(
                    Pair::exec(server_ns, "iperf3")
                        .args(["-s", "-1", "-p", &port.to_string(), "-B", server_ip])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .context("starting iperf3 -s")?,
                );
                wait_listening(server_ns, port)?;
                let mut c = Pair::exec(client_ns, "iperf3");
                c.args(["-c", server_ip, "-p", &port.to_string(), "-J"])
                    .args(["-t", &format!("{secs}"), "-C", congestion.unwrap_or(cc)]);
                if let Some(w) = window {
                    c.args(["-w", &w.to_string()]);
                }
                if reverse {
                    c.arg("-R");
                }
                if streams > 1 {
                    c.args(["-P", &streams.to_string()]);
                }
                if let Some(r) = fq_rate {
                    c.args(["--fq-rate", &r.to_string()]);
                }
                if let Some(r) = bitrate {
                    c.args(["-b", &r.to_string()]);
                }
                let client = c
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("starting iperf3 -c")?;
                Ok(Running {
                    procs: vec![server],
                    client: Some(client),
                    kind: Kind::Iperf3,
                    dir: None,
                    sweep: None,
                })
            }
            App::Ssh => {
                let (dir, server) = sshd(&pair.a, pair.ip_a, port)?;
                // what arrived in SECS is its rate, as wget's
                let mut c = Pair::exec(&pair.b, "sh");
                c.args([
                    "-c",
                    &format!(
                        "timeout {secs} ssh -p {port} -i {d}/client -F none -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR root@{ip} 'cat /dev/zero' | wc -c | awk '{{print $1 / {secs}}}'",
                        d = dir.display(),
                        ip = pair.ip_a,
                    ),
                ]);
                let mut running = Running::served(server, dir, c, Kind::BytesPerSecond)?;
                running.sweep = Some((pair.a.clone(), "sshd"));
                Ok(running)
            }
            App::Nginx {
                sndbuf,
                limit_rate,
                server_rate,
                client,
            } => {
                let mut listen = format!("{}:{port}", pair.ip_a);
                if let Some(b) = sndbuf {
                    listen.push_str(&format!(" sndbuf={b}"));
                }
                let throttle = server_rate
                    .map(|r| format!(" limit_rate {};", r / 8))
                    .unwrap_or_default();
                let (dir, server) = nginx(&pair.a, port, &listen, &throttle, true, None)?;
                let (c, kind) = nginx_client(client, limit_rate, pair, port, secs, &dir, false)?;
                Running::served(server, dir, c, kind)
            }
            App::PyServe { limit_rate } => {
                let (dir, server) = py_serve(&pair.a, pair.ip_a, port)?;
                let (c, kind) =
                    nginx_client(Client::Curl, limit_rate, pair, port, secs, &dir, false)?;
                Running::served(server, dir, c, kind)
            }
            App::Https { limit_rate } => {
                let listen = format!("{}:{port}", pair.ip_a);
                let (dir, server) = nginx(&pair.a, port, &listen, "", true, Some(pair.ip_a))?;
                let (c, kind) =
                    nginx_client(Client::Curl, limit_rate, pair, port, secs, &dir, true)?;
                Running::served(server, dir, c, kind)
            }
            App::Upload { rcvbuf, h2 } => upload(pair, port, secs, rcvbuf, h2),
        }
    }
}

/// curl uploading an endless body to nginx on `port` in `pair.b` for `secs` (`rcvbuf`: nginx's
/// `listen ... rcvbuf=`; `h2`: over HTTP/2 cleartext).
fn upload(pair: &Pair, port: u16, secs: f64, rcvbuf: Option<u32>, h2: bool) -> Result<Running> {
    let mut listen = format!("{}:{port}", pair.ip_b);
    if let Some(b) = rcvbuf {
        listen.push_str(&format!(" rcvbuf={b}"));
    }
    if h2 {
        listen.push_str(" http2");
    }
    // PUT bodies taken as they come (written to the server's disk), no size bound.
    // Over HTTP/2 nginx keeps a body's flow control only where it passes the body
    // on unbuffered (a buffered body gets a 2 GiB stream window): there the body is
    // proxied to a second server on the host's loopback, the stream window 64 KiB
    // (http2_body_preread_size), opened again as the upstream takes it
    let extra = if h2 {
        format!(
            " client_max_body_size 0; location / {{ proxy_request_buffering off; proxy_http_version 1.1; proxy_pass http://127.0.0.1:{up}; }} }}\n  server {{ listen 127.0.0.1:{up}; client_max_body_size 0; location / {{ dav_methods PUT; }}",
            up = port + 1
        )
    } else {
        " client_max_body_size 0; location / { dav_methods PUT; }".to_string()
    };
    let (dir, server) = nginx(&pair.b, port, &listen, &extra, false, None)?;
    let mut c = Pair::exec(&pair.a, "sh");
    // curl -T - with an endless body (chunked), for SECS
    c.args([
        "-c",
        &format!(
            "curl -s -o /dev/null -w '%{{speed_upload}}' --max-time {secs}{} -T - http://{}:{port}/up < /dev/zero",
            if h2 { " --http2-prior-knowledge" } else { "" },
            pair.ip_b
        ),
    ]);
    Running::served(server, dir, c, Kind::BytesPerSecond)
}

/// Python's http.server in namespace `ns` on `ip`:`port`, serving a sparse 64 GiB file as /big
/// (read as zeros, on tmpfs where the host has one): its directory and the running server.
fn py_serve(ns: &str, ip: &str, port: u16) -> Result<(PathBuf, Proc)> {
    let dir = scratch(true).join(format!("tcpwin-lab-pyserve-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::File::create(dir.join("big"))?.set_len(64 << 30)?;
    let port_s = port.to_string();
    let d = dir.display().to_string();
    let args = [
        "-m",
        "http.server",
        &port_s,
        "--bind",
        ip,
        "--directory",
        &d,
    ];
    // Debian's python3 (what the package installs), not a user's own
    let server = serve(ns, port, "/usr/bin/python3", &args, Stdio::null())?;
    Ok((dir, server))
}

/// The client that downloads the served file (nginx's, Python's) for `secs` in the receiver's namespace, at most at
/// `limit_rate` bit/s (over TLS where `tls`, the server's certificate not checked), and the unit
/// it prints its rate in.
fn nginx_client(
    client: Client,
    limit_rate: Option<u64>,
    pair: &Pair,
    port: u16,
    secs: f64,
    dir: &std::path::Path,
    tls: bool,
) -> Result<(std::process::Command, Kind)> {
    let scheme = if tls { "https" } else { "http" };
    let url = format!("{scheme}://{}:{port}/big", pair.ip_a);
    Ok(match client {
        Client::Curl => {
            let mut c = Pair::exec(&pair.b, "curl");
            c.args(["-s", "-o", "/dev/null", "-w", "%{speed_download}"])
                .args(["--max-time", &format!("{secs}")]);
            if tls {
                c.arg("-k");
            }
            if let Some(r) = limit_rate {
                c.args(["--limit-rate", &format!("{}", r / 8)]);
            }
            c.arg(&url);
            (c, Kind::BytesPerSecond)
        }
        Client::Wget => {
            // wget writes the file to a pipe; what arrived in SECS is its rate
            let limit = limit_rate
                .map(|r| format!(" --limit-rate={}", r / 8))
                .unwrap_or_default();
            let mut c = Pair::exec(&pair.b, "sh");
            c.args([
                "-c",
                &format!(
                    "timeout {secs} wget -q -O - --tries=1{limit} {url} | wc -c | awk '{{print $1 / {secs}}}'"
                ),
            ]);
            (c, Kind::BytesPerSecond)
        }
        Client::Python {
            rcvbuf,
            clamp,
            clamp_when,
        } => {
            std::fs::write(dir.join("client.py"), PYTHON_CLIENT)?;
            // Debian's python3 (what the package installs), not a user's own
            let mut c = Pair::exec(&pair.b, "/usr/bin/python3");
            c.arg(dir.join("client.py"))
                .args([pair.ip_a, &port.to_string(), &format!("{secs}")])
                .arg(rcvbuf.unwrap_or(0).to_string())
                .arg(clamp.unwrap_or(0).to_string())
                .arg(clamp_when.arg());
            (c, Kind::BitsPerSecond)
        }
    })
}

fn spawn_client(mut c: std::process::Command) -> Result<Child> {
    c.stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the traffic's client")
}

/// nginx (sendfile on, as Debian ships it) in namespace `ns`, listening as `listen` says, the
/// server block's extra directives `extra`, serving a sparse 64 GiB file as /big: its directory
/// (on tmpfs where `serving` and the host has one, see [`scratch`]) and the running server, once
/// it listens. Over TLS where `tls` names the server's address (a self-signed certificate for
/// it, made in the directory).
fn nginx(
    ns: &str,
    port: u16,
    listen: &str,
    extra: &str,
    serving: bool,
    tls: Option<&str>,
) -> Result<(PathBuf, Proc)> {
    let dir = scratch(serving).join(format!("tcpwin-lab-nginx-{}-{port}", std::process::id()));
    std::fs::create_dir_all(dir.join("www"))?;
    let (listen, extra) = match tls {
        Some(ip) => {
            crate::harness::self_signed(&dir, &format!("IP:{ip}"));
            let d = dir.display();
            let certs = format!(" ssl_certificate {d}/tls.crt; ssl_certificate_key {d}/tls.key;");
            (format!("{listen} ssl"), format!("{extra}{certs}"))
        }
        None => (listen.to_string(), extra.to_string()),
    };
    // a sparse file: sendfile reads zeros, enough for any rate here
    let f = std::fs::File::create(dir.join("www/big"))?;
    f.set_len(64 << 30)?;
    let d = dir.display();
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 64; }}\nhttp {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  sendfile on;\n  server {{ listen {listen}; root {d}/www;{extra} }}\n}}\n"
        ),
    )?;
    let conf = format!("{d}/nginx.conf");
    let prefix = d.to_string();
    let args = ["-c", &conf, "-p", &prefix];
    let server = serve(ns, port, "nginx", &args, Stdio::piped())?;
    Ok((dir, server))
}

/// `program` with `args` started in namespace `ns` (its output discarded, its errors to
/// `stderr`), killed when dropped, once something listens on `port` there.
fn serve(
    ns: &str,
    port: u16,
    program: &str,
    args: &[impl AsRef<std::ffi::OsStr>],
    stderr: Stdio,
) -> Result<Proc> {
    let server = Proc(
        Pair::exec(ns, program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {program}"))?,
    );
    wait_listening(ns, port)?;
    Ok(server)
}

/// OpenSSH's sshd as Debian ships it, in namespace `ns` on `ip`:`port`, with a host key and a
/// client key of its own (root logs in with that key only; no PAM): its directory, holding
/// the client's key as `client`, and the running server, once it listens.
fn sshd(ns: &str, ip: &str, port: u16) -> Result<(PathBuf, Proc)> {
    let dir = std::env::temp_dir().join(format!("tcpwin-lab-sshd-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // privilege separation wants its directory
    std::fs::create_dir_all("/run/sshd")?;
    for key in ["host", "client"] {
        let _ = std::fs::remove_file(dir.join(key));
        let out = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(dir.join(key))
            .output()
            .context("ssh-keygen (openssh-client)")?;
        if !out.status.success() {
            bail!("ssh-keygen: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    std::fs::copy(dir.join("client.pub"), dir.join("authorized_keys"))?;
    let d = dir.display();
    std::fs::write(
        dir.join("sshd_config"),
        format!(
            "ListenAddress {ip}:{port}\nHostKey {d}/host\nPidFile {d}/sshd.pid\nAuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        ),
    )?;
    let conf = dir.join("sshd_config");
    let args = [
        "-D".as_ref(),
        "-e".as_ref(),
        "-f".as_ref(),
        conf.as_os_str(),
    ];
    let server = serve(ns, port, "/usr/sbin/sshd", &args, Stdio::null())?;
    Ok((dir, server))
}

/// Where nginx's directory goes: for a server that serves the sparse file (`serving`), tmpfs
/// (`/dev/shm`) where the host has one. sendfile from tmpfs hands a hole over as the shared zero
/// page; from a sparse file on disk every read fills new page-cache pages with zeros inside
/// nginx's sendfile (ext4 readahead), and on a kernel without preemption (`Dynamic Preempt:
/// none`) that held a CPU for 40 ms at a time: the delay line's real-time threads waited behind
/// it, and the nginx rows ran late. A server that takes uploads writes them to disk, not memory.
fn scratch(serving: bool) -> PathBuf {
    let shm = Path::new("/dev/shm");
    if serving && is_tmpfs(shm) {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Whether `p` is on a tmpfs (statfs).
fn is_tmpfs(p: &Path) -> bool {
    use nix::sys::statfs::{statfs, TMPFS_MAGIC};
    statfs(p).is_ok_and(|s| s.filesystem_type() == TMPFS_MAGIC)
}

/// Waits (bounded) until something listens on `port` in namespace `ns`.
fn wait_listening(ns: &str, port: u16) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let out = Pair::exec(ns, "ss")
            .args(["-Htln", &format!("sport = :{port}")])
            .output()
            .context("ss (iproute2)")?;
        if !out.stdout.is_empty() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!("nothing listens on port {port} in {ns} after 5 s")
}

enum Kind {
    Iperf3,
    /// the client prints bytes per second (curl's `%{speed_*}`)
    BytesPerSecond,
    /// the client prints bits per second
    BitsPerSecond,
}

/// Programs running; killed and cleaned up on drop.
pub struct Running {
    procs: Vec<Proc>,
    client: Option<Child>,
    kind: Kind,
    dir: Option<PathBuf>,
    /// a server whose per-connection processes leave its process group (sshd's sessions call
    /// setsid): every process of this name in this namespace is killed with it, before the path
    /// goes (a session left behind retransmits into a path that no longer exists)
    sweep: Option<(String, &'static str)>,
}

impl Running {
    /// A server (its files in `dir`) and the client `c` started against it, whose output is
    /// read as `kind`.
    fn served(server: Proc, dir: PathBuf, c: std::process::Command, kind: Kind) -> Result<Running> {
        Ok(Running {
            procs: vec![server],
            client: Some(spawn_client(c)?),
            kind,
            dir: Some(dir),
            sweep: None,
        })
    }

    /// Waits for the client (bounded) and returns the rate the program itself reports, bit/s.
    pub fn finish(mut self, timeout: Duration) -> Result<Option<u64>> {
        let mut client = self.client.take().expect("started with a client");
        let until = Instant::now() + timeout;
        loop {
            crate::harness::stop_child_if_asked(&mut client)?;
            if client.try_wait()?.is_some() {
                break;
            }
            if Instant::now() > until {
                let _ = client.kill();
                let _ = client.wait();
                bail!("the traffic's client did not finish within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut out = String::new();
        if let Some(mut o) = client.stdout.take() {
            std::io::Read::read_to_string(&mut o, &mut out)?;
        }
        Ok(match self.kind {
            // iperf3 -J: what the receiving end counted
            Kind::Iperf3 => serde_json::from_str::<serde_json::Value>(&out)
                .ok()
                .and_then(|v| v["end"]["sum_received"]["bits_per_second"].as_f64())
                .map(|b| b as u64),
            // curl: bytes per second over the transfer
            Kind::BytesPerSecond => out.trim().parse::<f64>().ok().map(|b| (b * 8.0) as u64),
            Kind::BitsPerSecond => out.trim().parse::<f64>().ok().map(|b| b as u64),
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = self.client.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.procs.clear();
        if let Some((ns, comm)) = &self.sweep {
            kill_in(ns, comm);
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Kills every process named `comm` in namespace `ns` (`ip netns pids`).
fn kill_in(ns: &str, comm: &str) {
    let Ok(out) = std::process::Command::new("ip")
        .args(["netns", "pids", ns])
        .output()
    else {
        return;
    };
    for pid in String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        let named =
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm);
        if named {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held against `stat -f` (coreutils), which names each path's filesystem type.
    #[test]
    fn tmpfs_is_told_as_stat_tells_it() {
        for p in ["/dev/shm", "/proc", "/", "/tmp"] {
            let out = std::process::Command::new("stat")
                .args(["-f", "-c", "%T", p])
                .output()
                .expect("stat (coreutils)");
            let said = String::from_utf8_lossy(&out.stdout).trim() == "tmpfs";
            assert_eq!(is_tmpfs(Path::new(p)), said, "{p}");
        }
        assert!(!is_tmpfs(Path::new("/no/such/path")));
        // a server that takes uploads keeps them on disk
        assert_eq!(scratch(false), std::env::temp_dir());
    }
}
