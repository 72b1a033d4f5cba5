//! Experiments in namespaces: run the tracer as a child process and the built-in receiver/sender
//! inside a `pair::Pair`. Shared by the lab, the demo, the end-to-end tests and the bench.
use std::{
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use crate::rows::EndpointReport;
use anyhow::{bail, Context, Result};
use tcpwin_common::stop::stopped;

use crate::pair::Pair;

/// Refuses early when not root: namespaces, veth and sysctls need it.
pub fn require_root(what: &str) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("{what} creates network namespaces and loads BPF programs: run it as root (sudo)");
    }
    Ok(())
}

/// A `tcpwin-trace` child whose stderr is watched for readiness.
pub struct Tracer {
    pub child: Child,
    stderr_lines: mpsc::Receiver<String>,
    pub stderr: Vec<String>,
    /// stdout lines, read continuously so a chatty tracer never blocks on a full pipe
    stdout: Option<mpsc::Receiver<String>>,
    /// stdout lines already taken from the channel by [`Tracer::wait_stdout`]
    stdout_seen: Vec<String>,
}

impl Tracer {
    /// Starts `exe args...` and waits (up to `timeout`) until it says it is tracing.
    pub fn start(exe: &Path, args: &[&str], stdout: Stdio, timeout: Duration) -> Result<Tracer> {
        let mut child = Command::new(exe)
            .args(args)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", exe.display()))?;
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().expect("piped stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdout = child.stdout.take().map(|so| {
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(so).lines().map_while(|l| l.ok()) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            rx
        });
        let mut t = Tracer {
            child,
            stderr_lines: rx,
            stderr: Vec::new(),
            stdout,
            stdout_seen: Vec::new(),
        };
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match t.stderr_lines.recv_timeout(left) {
                Ok(line) => {
                    let ready = line.starts_with("tcpwin-trace: tracing");
                    t.stderr.push(line);
                    if ready {
                        return Ok(t);
                    }
                }
                Err(_) => {
                    let _ = t.child.kill();
                    let _ = t.child.wait();
                    t.collect_stderr();
                    bail!("tcpwin-trace did not start: {}", t.stderr.join("\n"));
                }
            }
        }
    }

    fn collect_stderr(&mut self) {
        while let Ok(l) = self.stderr_lines.recv_timeout(Duration::from_millis(200)) {
            self.stderr.push(l);
        }
    }

    /// Waits (up to `timeout`) while the tracer runs until the stdout lines so far satisfy `done`.
    pub fn wait_stdout(&mut self, timeout: Duration, done: impl Fn(&[String]) -> bool) -> bool {
        let Some(rx) = &self.stdout else {
            return false;
        };
        let deadline = Instant::now() + timeout;
        while !done(&self.stdout_seen) {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => self.stdout_seen.push(line),
                Err(_) => return false,
            }
        }
        true
    }

    /// SIGINT, then wait for exit (killing it after `timeout`); returns stdout if piped.
    pub fn stop(
        mut self,
        timeout: Duration,
    ) -> Result<(std::process::ExitStatus, String, Vec<String>)> {
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let mut lines = std::mem::take(&mut self.stdout_seen);
        if let Some(rx) = self.stdout.take() {
            let deadline = Instant::now() + timeout;
            loop {
                match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(line) => lines.push(line),
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        let _ = self.child.kill();
                        while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
                            lines.push(line);
                        }
                        break;
                    }
                }
            }
        }
        let out: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait()? {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break self.child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.collect_stderr();
        Ok((status, out, std::mem::take(&mut self.stderr)))
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A child process that is killed when dropped, so a failing test or lab leaves no receiver
/// blocked in accept() behind it.
pub struct Proc(pub Child);

impl std::ops::Deref for Proc {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Proc {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// How the sender sends, and how the receiver receives.
#[derive(Clone, Debug, Default)]
pub struct SendOpts {
    /// for this long instead of `bytes`
    pub secs: Option<f64>,
    /// congestion control set on the socket (TCP_CONGESTION)
    pub cc: Option<String>,
    /// the receiver clamps its window (TCP_WINDOW_CLAMP) once data flows
    pub window_clamp: Option<u32>,
    /// the receiver reads no faster than this (bit/s)
    pub read_bps: Option<u64>,
    /// the receiver's listener clamps its window (TCP_WINDOW_CLAMP) before any handshake
    pub listen_clamp: Option<u32>,
}

/// One transfer through the pair: the receiver runs in `b`, the sender in `a`. Returns the
/// receiver's ground-truth lines (one JSON object per connection).
pub struct Transfer<'a> {
    pub exe: PathBuf,
    pub pair: &'a Pair,
    pub port: u16,
    pub bytes: u64,
    pub conns: u32,
    pub ipv6: bool,
    pub rcvbuf: Option<u32>,
    pub timeout: Duration,
    pub send: SendOpts,
}

impl Transfer<'_> {
    pub fn start_receiver(&self) -> Result<(Proc, BufReader<std::process::ChildStdout>)> {
        let listen = if self.ipv6 {
            format!("[{}]:{}", self.pair.ip6_b, self.port)
        } else {
            format!("{}:{}", self.pair.ip_b, self.port)
        };
        let mut cmd = Pair::exec(&self.pair.b, &self.exe);
        cmd.args(["transfer", "recv", "--listen", &listen])
            .args(["--conns", &self.conns.to_string()])
            .stdout(Stdio::piped());
        if let Some(b) = self.rcvbuf {
            cmd.args(["--rcvbuf", &b.to_string()]);
        }
        if let Some(c) = self.send.window_clamp {
            cmd.args(["--window-clamp", &c.to_string()]);
        }
        if let Some(r) = self.send.read_bps {
            cmd.args(["--read-bps", &r.to_string()]);
        }
        if let Some(c) = self.send.listen_clamp {
            cmd.args(["--listen-clamp", &c.to_string()]);
        }
        let mut child = Proc(cmd.spawn().context("starting the receiver")?);
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        out.read_line(&mut line)?;
        if !line.contains("ready") {
            let _ = child.kill();
            bail!("receiver did not start: {line}");
        }
        Ok((child, out))
    }

    pub fn run_sender(&self) -> Result<()> {
        self.sender(false).map(|_| ())
    }

    /// Runs the sender; with `report`, returns its own view of each connection (`snd_wnd_peak`,
    /// `throughput_bps`, getsockopt values).
    pub fn sender(&self, report: bool) -> Result<Vec<EndpointReport>> {
        let child = self.spawn_sender(report)?;
        self.finish_sender(child)
    }

    /// Starts the sender (for a caller that watches the transfer while it runs).
    pub fn spawn_sender(&self, report: bool) -> Result<Proc> {
        let connect = if self.ipv6 {
            format!("[{}]:{}", self.pair.ip6_b, self.port)
        } else {
            format!("{}:{}", self.pair.ip_b, self.port)
        };
        let mut cmd = Pair::exec(&self.pair.a, &self.exe);
        cmd.args(["transfer", "send", "--connect", &connect])
            .args(["--bytes", &self.bytes.to_string()])
            .args(["--conns", &self.conns.to_string()])
            .args(if report { &["--report"][..] } else { &[][..] })
            .stdout(Stdio::piped());
        if let Some(s) = self.send.secs {
            cmd.args(["--secs", &s.to_string()]);
        }
        if let Some(cc) = &self.send.cc {
            cmd.args(["--cc", cc]);
        }
        Ok(Proc(cmd.spawn().context("starting the sender")?))
    }

    /// Waits for the sender (bounded) and returns its reports.
    pub fn finish_sender(&self, mut child: Proc) -> Result<Vec<EndpointReport>> {
        let out = drain(child.stdout.take());
        // a sender that never finishes: both ends' sockets as ss shows them before it is
        // stopped, to tell a stalled path (unacked data, RTO backing off) from a stalled reader
        wait_bounded_saying(&mut child, self.timeout, "sender", &|| {
            [&self.pair.a, &self.pair.b]
                .iter()
                .map(|ns| {
                    Pair::exec(ns, "ss")
                        .args(["-tinmH"])
                        .output()
                        .map(|o| format!("{ns}: {}", String::from_utf8_lossy(&o.stdout).trim()))
                        .unwrap_or_else(|e| format!("{ns}: ss: {e}"))
                })
                .collect::<Vec<_>>()
                .join("\n")
        })?;
        let text = out.join().unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).with_context(|| format!("sender said: {l}")))
            .collect()
    }

    /// Runs the whole transfer and returns the receiver's ground truth per connection.
    pub fn run(&self) -> Result<Vec<EndpointReport>> {
        self.run_both(false).map(|(rx, _)| rx)
    }

    /// Runs the whole transfer: (receiver's ground truth, sender's reports if asked).
    pub fn run_both(
        &self,
        sender_report: bool,
    ) -> Result<(Vec<EndpointReport>, Vec<EndpointReport>)> {
        self.run_watched(sender_report, || ())
            .map(|(rx, tx, ())| (rx, tx))
    }

    /// Runs the whole transfer and, while the sender runs, `during` (which may watch it).
    pub fn run_watched<T>(
        &self,
        sender_report: bool,
        during: impl FnOnce() -> T,
    ) -> Result<(Vec<EndpointReport>, Vec<EndpointReport>, T)> {
        let (mut rx, out) = self.start_receiver()?;
        // read while the sender runs: a receiver printing a line per connection must never
        // block on a full pipe
        let out = drain(Some(out));
        let sent = self
            .spawn_sender(sender_report)
            .map(|child| (child, during()))
            .and_then(|(child, watched)| Ok((self.finish_sender(child)?, watched)));
        let (sent, watched) = match sent {
            Ok(v) => v,
            Err(e) => {
                let _ = rx.kill();
                let _ = rx.wait();
                return Err(e);
            }
        };
        wait_bounded(&mut rx, self.timeout, "receiver")?;
        let text = out.join().unwrap_or_default();
        let mut truths = Vec::new();
        for l in text.lines() {
            truths.push(serde_json::from_str(l).with_context(|| format!("receiver said: {l}"))?);
        }
        Ok((truths, sent, watched))
    }
}

/// Reads a child's stdout to the end on a thread, so waiting for the child stays bounded (a
/// killed child closes the pipe) and a chatty child never blocks on a full pipe.
fn drain<R: Read + Send + 'static>(out: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut o) = out {
            let _ = o.read_to_string(&mut text);
        }
        text
    })
}

/// The lab or the bench stopped on Ctrl-C / SIGTERM.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted: its namespaces and processes removed")
    }
}

impl std::error::Error for Interrupted {}

pub fn check_stop() -> Result<()> {
    if stopped() {
        return Err(Interrupted.into());
    }
    Ok(())
}

/// An error the interruption caused is the interruption alone: the row or step it cut short
/// (and its context: the row, the delay line's counters) did not fail.
pub fn interruption_alone(e: anyhow::Error) -> anyhow::Error {
    if e.chain().any(|c| c.is::<Interrupted>()) {
        Interrupted.into()
    } else {
        e
    }
}

/// On Ctrl-C / SIGTERM (after [`install_stop_handler`]) while waiting for `child`: stops it and
/// says the lab was interrupted, so the lab stops now rather than after a transfer's seconds.
pub fn stop_child_if_asked(child: &mut Child) -> Result<()> {
    if stopped() {
        let _ = child.kill();
        let _ = child.wait();
    }
    check_stop()
}

/// The workspace's root, for a test reading the project's files (docs, sources, the deploy
/// manifests): from the running test's package (cargo sets `CARGO_MANIFEST_DIR` for what it
/// runs), not the path compiled in, which names the checkout that built a cached binary.
pub fn workspace() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .parent()
        .expect("a package of the workspace")
        .to_path_buf()
}

/// A binary of the package under test (`CARGO_BIN_EXE_<name>`): as cargo sets it when it runs the
/// test, not the path compiled in (`compiled`), which names the checkout that built a cached test
/// binary. Only a path that differs from the compiled one is kept (leaked: a few bytes a call, in
/// a test process).
pub fn bin_exe(name: &str, compiled: &'static str) -> &'static str {
    match std::env::var(format!("CARGO_BIN_EXE_{name}")) {
        Ok(path) if path != compiled => Box::leak(path.into_boxed_str()),
        _ => compiled,
    }
}

/// Tests that load BPF programs or create namespaces need root: without it they fail loudly
/// (never skip), naming what could not run.
pub fn tests_need_root(what: &str) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("{what} CANNOT RUN: they need root (run `sudo cargo xtask test`). Failing, not skipping.");
    }
}

/// Runs `exe` with `args` as the unprivileged user nobody (setpriv), from a copy in a directory
/// nobody can read: what a user without root sees.
pub fn run_as_nobody(exe: &Path, args: &[&str]) -> std::process::Output {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!(
        "tcpwin-nobody-{}-{}",
        std::process::id(),
        args.first().unwrap_or(&"")
    ));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let copy = dir.join(exe.file_name().expect("a file"));
    std::fs::copy(exe, &copy).expect("copying the binary");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
        .expect("opening the directory to nobody");
    let out = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(&copy)
        .args(args)
        .output()
        .expect("setpriv (util-linux)");
    let _ = std::fs::remove_dir_all(&dir);
    out
}

pub fn wait_bounded(child: &mut Child, timeout: Duration, what: &str) -> Result<()> {
    wait_bounded_saying(child, timeout, what, &String::new)
}

/// As `wait_bounded`; on the timeout, `say()` (taken before the child is stopped) ends the
/// error.
pub fn wait_bounded_saying(
    child: &mut Child,
    timeout: Duration,
    what: &str,
    say: &dyn Fn() -> String,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        stop_child_if_asked(child)?;
        if let Some(s) = child.try_wait()? {
            if !s.success() {
                // a terminal's Ctrl-C reaches the child too: that is the interruption
                check_stop()?;
                bail!("{what} failed: {s}");
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            let said = say();
            let _ = child.kill();
            let _ = child.wait();
            if said.is_empty() {
                bail!("{what} did not finish within {timeout:?}");
            }
            bail!("{what} did not finish within {timeout:?}; meanwhile:\n{said}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The kernel's list of loaded BPF programs (bpftool's JSON listing).
pub fn bpf_programs() -> Result<Vec<serde_json::Value>> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "-j"])
        .output()
        .context("bpftool (apt-get install bpftool; `cargo xtask setup` installs it)")?;
    serde_json::from_slice(&out.stdout).context("bpftool's JSON")
}

/// How many loaded programs carry one of `names` (the kernel keeps 15 characters of a name it
/// has no BTF for: a cut name counts as the full one).
pub fn programs_named(names: &[&str]) -> Result<usize> {
    Ok(bpf_programs()?
        .iter()
        .filter_map(|p| p["name"].as_str())
        .filter(|n| {
            names
                .iter()
                .any(|full| *full == *n || (n.len() == 15 && full.starts_with(n)))
        })
        .count())
}

/// What `read` returns once `done` holds, or after 10 s: the kernel frees a BPF program
/// asynchronously after its last file descriptor and link close (a grace period later, which a
/// CPU hog stretches past the moment the process that held it has exited).
pub fn settled<T>(mut read: impl FnMut() -> Result<T>, done: impl Fn(&T) -> bool) -> Result<T> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = read()?;
        if done(&v) || Instant::now() > deadline {
            return Ok(v);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`programs_named`] once no more than `at_most` are loaded, or after 10 s (see [`settled`]).
pub fn programs_named_settled(names: &[&str], at_most: usize) -> Result<usize> {
    settled(|| programs_named(names), |n| *n <= at_most)
}

/// A self-signed certificate and its key (`tls.crt`, `tls.key`, P-256) in `dir`, for `san`
/// (`IP:127.0.0.1`, `DNS:tcpwin-trace`): what an operator makes with openssl for a TLS exporter.
pub fn self_signed(dir: &Path, san: &str) {
    let cn = san.split_once(':').map_or(san, |(_, v)| v);
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes", "-days", "2", "-keyout", "tls.key", "-out", "tls.crt",
        ])
        .args([
            "-subj",
            &format!("/CN={cn}"),
            "-addext",
            &format!("subjectAltName={san}"),
        ])
        .current_dir(dir)
        .output()
        .expect("openssl (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ctrl-C in the middle of a row says it was interrupted, in one sentence: not the row's
    /// context around it, and other errors keep theirs.
    #[test]
    fn an_interruption_is_said_alone() {
        let cut = anyhow::Error::from(Interrupted)
            .context("the path's delay line meanwhile: ...")
            .context("row gro with reno");
        assert_eq!(
            format!("{:#}", interruption_alone(cut)),
            "interrupted: its namespaces and processes removed"
        );
        let other = anyhow::anyhow!("sender failed").context("row gro with reno");
        assert_eq!(
            format!("{:#}", interruption_alone(other)),
            "row gro with reno: sender failed"
        );
    }

    /// A child that outlives its bound is stopped, and the error ends with what `say` found
    /// while it still ran.
    #[test]
    fn a_child_past_its_bound_is_stopped_and_said() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let t0 = Instant::now();
        let e = wait_bounded_saying(&mut child, Duration::from_millis(100), "sleeper", &|| {
            "its sockets".into()
        })
        .unwrap_err()
        .to_string();
        assert!(t0.elapsed() < Duration::from_secs(10), "stopped");
        assert!(
            e.starts_with("sleeper did not finish within 100ms")
                && e.ends_with("meanwhile:\nits sockets"),
            "{e}"
        );
        let mut quick = Command::new("true").spawn().unwrap();
        wait_bounded(&mut quick, Duration::from_secs(10), "true").unwrap();
    }
}
