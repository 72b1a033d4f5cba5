//! `--ebpf-log`: the kernel side's own lines, checked against what each experiment set up.
//!
//! - A kernel BTF doctored so that `tcp_sock.scaling_ratio` is not there (its name changed in
//!   the string table, nothing else): the programs must say the member is absent, for the
//!   iterator (`ss`) and for a connection the tracer sees established, and report no ratio.
//! - `--pid` of a process that owns no socket, and a connection this test owns: the programs
//!   must say its packets are filtered as not the process's.
//! - Off (the default): not one kernel line.
//!
//! Lines go to stderr only: stdout stays one JSON object per line. Needs root and BPF: fails,
//! never skips, without them.
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use tcpwin_lab::harness::Tracer;
use tcpwin_model::schema::{SsLine, SummaryLine};

fn exe() -> &'static str {
    tcpwin_lab::harness::bin_exe("tcpwin-trace", env!("CARGO_BIN_EXE_tcpwin-trace"))
}

fn require_root() {
    tcpwin_lab::harness::tests_need_root("EBPF LOG TESTS");
}

/// The running kernel's BTF with `scaling_ratio` renamed `scaling_ratiO`: the same types and
/// ids (the programs still attach), one member the layout resolver no longer finds.
fn btf_without_scaling_ratio() -> PathBuf {
    let mut b = std::fs::read("/sys/kernel/btf/vmlinux").expect("kernel BTF");
    let needle = b"\0scaling_ratio\0";
    let at: Vec<usize> = b
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        at.len(),
        1,
        "this kernel's BTF has the name scaling_ratio {} times (6.6+ has it once)",
        at.len()
    );
    b[at[0] + needle.len() - 2] = b'O';
    let p = std::env::temp_dir().join(format!("tcpwin-btf-no-ratio-{}", std::process::id()));
    std::fs::write(&p, b).unwrap();
    p
}

/// A connection over loopback, with data read on both sides: (client, server side).
fn connection() -> (TcpStream, TcpStream, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (mut s, _) = l.accept().unwrap();
    c.write_all(&[7u8; 100_000]).unwrap();
    let mut buf = vec![0u8; 100_000];
    s.read_exact(&mut buf).unwrap();
    (c, s, port)
}

fn cookie(s: &TcpStream) -> u64 {
    tcpwin_lab::endpoints::getsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_COOKIE)
        .expect("SO_COOKIE")
}

/// The kernel side's lines on stderr.
fn kernel_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            ["ERROR ", "WARN ", "INFO ", "DEBUG "]
                .iter()
                .any(|lvl| l.starts_with(&format!("tcpwin-trace: ebpf {lvl}")))
        })
        .collect()
}

fn run_ss(btf: &Path, log: Option<&str>, port: u16) -> (Vec<SsLine>, String) {
    let mut cmd = Command::new(exe());
    cmd.args(["ss", "--json", "--source", "iterator", "--port"])
        .arg(port.to_string())
        .arg("--btf")
        .arg(btf);
    if let Some(l) = log {
        cmd.args(["--ebpf-log", l]);
    }
    let out = cmd.output().expect("run ss");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "ss failed: {err}");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout not JSON ({e}): {l}")))
        .collect();
    (lines, err)
}

#[test]
fn ss_says_a_member_absent_from_the_btf_and_nothing_when_off() {
    require_root();
    let btf = btf_without_scaling_ratio();
    let (c, s, port) = connection();
    let (lines, err) = run_ss(&btf, Some("info"), port);
    let line = lines
        .iter()
        .find(|l| l.facts.id.cookie == Some(cookie(&c)))
        .unwrap_or_else(|| panic!("the client socket is not listed: {lines:?}\n{err}"));
    assert_eq!(
        line.facts.scaling_ratio, None,
        "the ratio must read as absent"
    );
    let k = kernel_lines(&err);
    assert!(
        k.iter().any(
            |l| l.starts_with("tcpwin-trace: ebpf INFO tcp_sockets (iter/tcp): ")
                && l.contains("tcp_sock.scaling_ratio is absent")
        ),
        "no absent-member line from the iterator:\n{err}"
    );
    // once per walk, not once per socket: ss walks the sockets twice for a reading it streams
    // (a first pass counts each connection's ends, the second judges and prints), three times
    // when a socket moves data (that first pass, then two readings for a rate, said so)
    let walks = if err.contains("between two readings") {
        3
    } else {
        2
    };
    assert_eq!(
        k.iter()
            .filter(|l| l.contains("scaling_ratio is absent"))
            .count(),
        walks,
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "ebpf log lines: {n} written, {n} shown, 0 lost",
            n = k.len()
        )),
        "the count of lines must match what was shown:\n{err}"
    );

    // the real BTF and no flag: the ratio is there and the kernel side says nothing
    let (lines, err) = run_ss(Path::new("/sys/kernel/btf/vmlinux"), None, port);
    let line = lines
        .iter()
        .find(|l| l.facts.id.cookie == Some(cookie(&s)))
        .expect("the server socket is listed");
    assert!(line.facts.scaling_ratio.is_some());
    assert!(kernel_lines(&err).is_empty(), "log off, yet:\n{err}");
    assert!(!err.contains("ebpf log lines"), "{err}");
    let _ = std::fs::remove_file(btf);
}

/// Runs the tracer around `work`, returns (stdout JSON lines' summary, stderr).
fn trace_around(args: &[&str], work: impl FnOnce()) -> (SummaryLine, String) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let t = Tracer::start(
        Path::new(exe()),
        &all,
        Stdio::piped(),
        Duration::from_secs(60),
    )
    .expect("the tracer starts");
    work();
    // a drain tick, so the kernel's lines of the work are read before the stop
    std::thread::sleep(Duration::from_millis(300));
    let (status, out, stderr) = t.stop(Duration::from_secs(30)).expect("the tracer stops");
    let stderr = stderr.join("\n");
    assert!(status.success(), "tracer failed: {status}\n{stderr}");
    let mut summary = None;
    for l in out.lines() {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout not JSON ({e}): {l}"));
        if v["event"] == "summary" {
            summary = Some(serde_json::from_value::<SummaryLine>(v).unwrap());
        }
    }
    (summary.expect("a summary line"), stderr)
}

#[test]
fn tracer_says_a_member_absent_for_a_new_connection() {
    require_root();
    let btf = btf_without_scaling_ratio();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let p = port.to_string();
    let btf_s = btf.to_string_lossy().to_string();
    let mut cookies = Vec::new();
    let (summary, err) = trace_around(
        &[
            "--port",
            &p,
            "--btf",
            &btf_s,
            "--ebpf-log",
            "info",
            "--no-verdicts",
        ],
        || {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let (mut s, _) = l.accept().unwrap();
            c.write_all(&[1u8; 50_000]).unwrap();
            let mut buf = vec![0u8; 50_000];
            s.read_exact(&mut buf).unwrap();
            cookies = vec![cookie(&c), cookie(&s)];
        },
    );
    assert!(!summary.scaling_ratio_present, "{summary:?}");
    let k = kernel_lines(&err);
    for c in &cookies {
        assert!(
            k.iter()
                .any(|l| l.contains("tcp_sock.scaling_ratio is absent")
                    && l.contains(&format!("socket {c:x} "))),
            "no absent-member line for socket {c:x}:\n{err}"
        );
    }
    assert!(
        k.iter()
            .all(|l| l.starts_with("tcpwin-trace: ebpf INFO ") && l.contains(" (tp_btf ")),
        "each line names its level, program and hook:\n{err}"
    );
    let log = summary.ebpf_log.expect("the summary counts the log lines");
    assert_eq!(log.shown, k.len() as u64, "{err}");
    assert_eq!((log.written, log.lost), (log.shown, 0), "{log:?}");
    let _ = std::fs::remove_file(btf);
}

#[test]
fn tracer_says_why_a_socket_is_filtered_by_pid() {
    require_root();
    // a process that owns no socket
    let mut idle = Command::new("sleep").arg("60").spawn().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (pid, p) = (idle.id().to_string(), port.to_string());
    let (summary, err) = trace_around(
        &[
            "--pid",
            &pid,
            "--port",
            &p,
            "--ebpf-log",
            "debug",
            "--no-verdicts",
        ],
        || {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let (mut s, _) = l.accept().unwrap();
            for _ in 0..20 {
                c.write_all(&[1u8; 10_000]).unwrap();
                let mut buf = vec![0u8; 10_000];
                s.read_exact(&mut buf).unwrap();
            }
        },
    );
    let _ = idle.kill();
    let _ = idle.wait();
    assert_eq!(summary.sockets, 0, "no socket is the idle process's");
    assert!(summary.counters.filtered_hits > 0, "{summary:?}");
    let k = kernel_lines(&err);
    let miss = format!("is not the traced process's (--pid {pid}): filtered");
    assert!(
        k.iter()
            .any(|l| l.starts_with("tcpwin-trace: ebpf DEBUG ") && l.contains(&miss)),
        "no ownership line:\n{err}"
    );
    // a socket's misses are logged once a second per CPU, not once per packet
    assert!(
        (k.len() as u64) < summary.counters.filtered_hits,
        "{} lines for {} filtered hits",
        k.len(),
        summary.counters.filtered_hits
    );
    let log = summary.ebpf_log.expect("counted");
    assert_eq!(
        (log.written, log.shown, log.lost),
        (k.len() as u64, k.len() as u64, 0)
    );
}

#[test]
fn a_wrong_level_is_refused_with_the_choices() {
    let out = Command::new(exe())
        .args(["ss", "--ebpf-log", "loud"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for l in ["off", "error", "warn", "info", "debug"] {
        assert!(err.contains(l), "{err}");
    }
}
