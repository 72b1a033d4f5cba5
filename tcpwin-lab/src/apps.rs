//! Real programs as the lab's traffic, from the distribution: iperf3 (`-w`, `-R`, `-P`), nginx
//! serving a file with sendfile (`listen ... sndbuf= rcvbuf=`) to curl (`--limit-rate` as a
//! slow reader). Each runs inside the lab's namespaces, the sending side in the sender's
//! namespace; what each is set up to do is the ground truth the verdicts are held against, and
//! each program's own report of its rate is kept beside the tool's.
use std::{
    path::PathBuf,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use crate::{harness::Proc, netns::Pair};

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

/// What drives a row's traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// iperf3: `-w` (SO_SNDBUF and SO_RCVBUF at both ends), `-R` (the server sends), `-P`
    Iperf3 {
        window: Option<u32>,
        reverse: bool,
        streams: u8,
    },
    /// nginx (sendfile) to curl; `listen ... sndbuf=`, `rcvbuf=`; curl `--limit-rate`
    NginxCurl {
        sndbuf: Option<u32>,
        limit_rate: Option<u64>,
        /// nginx's own `limit_rate` (the server sends slowly), bit/s
        server_rate: Option<u64>,
    },
}

impl App {
    pub fn describe(self) -> String {
        match self {
            App::Iperf3 {
                window,
                reverse,
                streams,
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
                s
            }
            App::NginxCurl {
                sndbuf,
                limit_rate,
                server_rate,
            } => {
                let mut s = "nginx".to_string();
                if let Some(b) = sndbuf {
                    s.push_str(&format!(" sndbuf={}k", b >> 10));
                }
                if let Some(r) = server_rate {
                    s.push_str(&format!(" limit_rate {}k", r / 8 / 1000));
                }
                s.push_str(" -> curl");
                if let Some(r) = limit_rate {
                    s.push_str(&format!(" --limit-rate {}k", r / 8 / 1000));
                }
                s
            }
        }
    }

    /// The programs it needs installed.
    pub fn require(self) -> Result<()> {
        match self {
            App::Iperf3 { .. } => require("iperf3", "iperf3"),
            App::NginxCurl { .. } => {
                require("nginx", "nginx-light")?;
                require("curl", "curl")
            }
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
                    .args(["-t", &format!("{secs}"), "-C", cc]);
                if let Some(w) = window {
                    c.args(["-w", &w.to_string()]);
                }
                if reverse {
                    c.arg("-R");
                }
                if streams > 1 {
                    c.args(["-P", &streams.to_string()]);
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
                })
            }
            App::NginxCurl {
                sndbuf,
                limit_rate,
                server_rate,
            } => {
                let dir = std::env::temp_dir()
                    .join(format!("tcpwin-lab-nginx-{}-{port}", std::process::id()));
                std::fs::create_dir_all(dir.join("www"))?;
                // a sparse file: sendfile reads zeros, enough for any rate here
                let f = std::fs::File::create(dir.join("www/big"))?;
                f.set_len(64 << 30)?;
                let mut listen = format!("{}:{port}", pair.ip_a);
                if let Some(b) = sndbuf {
                    listen.push_str(&format!(" sndbuf={b}"));
                }
                let d = dir.display();
                let throttle = server_rate
                    .map(|r| format!(" limit_rate {};", r / 8))
                    .unwrap_or_default();
                std::fs::write(
                    dir.join("nginx.conf"),
                    format!(
                        "daemon off;\nmaster_process off;\nworker_processes 1;\nuser root;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nevents {{ worker_connections 64; }}\nhttp {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  sendfile on;\n  server {{ listen {listen}; root {d}/www;{throttle} }}\n}}\n"
                    ),
                )?;
                let server = Proc(
                    Pair::exec(&pair.a, "nginx")
                        .args(["-c", &format!("{d}/nginx.conf"), "-p", &d.to_string()])
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .spawn()
                        .context("starting nginx")?,
                );
                wait_listening(&pair.a, port)?;
                let mut c = Pair::exec(&pair.b, "curl");
                c.args(["-s", "-o", "/dev/null", "-w", "%{speed_download}"])
                    .args(["--max-time", &format!("{secs}")]);
                if let Some(r) = limit_rate {
                    c.args(["--limit-rate", &format!("{}", r / 8)]);
                }
                c.arg(format!("http://{}:{port}/big", pair.ip_a));
                let client = c
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("starting curl")?;
                Ok(Running {
                    procs: vec![server],
                    client: Some(client),
                    kind: Kind::Curl,
                    dir: Some(dir),
                })
            }
        }
    }
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
    Curl,
}

/// Programs running; killed and cleaned up on drop.
pub struct Running {
    procs: Vec<Proc>,
    client: Option<Child>,
    kind: Kind,
    dir: Option<PathBuf>,
}

impl Running {
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
            Kind::Curl => out.trim().parse::<f64>().ok().map(|b| (b * 8.0) as u64),
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
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
