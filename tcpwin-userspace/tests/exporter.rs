//! `tcpwin-trace exporter` against what the sockets' owners read and against Prometheus' own
//! checker: idle connections in a namespace the test makes, scraped over HTTP; the format passes
//! `promtool check metrics`; the values equal the owners' getsockopt; the server survives bad
//! clients and namespaces that vanish, and SIGTERM leaves nothing loaded. Needs root: fails, never
//! skips.
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    os::{fd::AsRawFd, unix::fs::MetadataExt},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use tcpwin_lab::{
    harness::{programs_named, programs_named_settled, Proc},
    netns::{in_netns, Pair},
};

const EXE: &str = env!("CARGO_BIN_EXE_tcpwin-trace");

fn require_root() {
    tcpwin_lab::harness::tests_need_root("EXPORTER TESTS");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path`: (status, content type, body).
fn get(port: u16, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the exporter listens");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    let (head, body) = r.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let ctype = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, ctype, body.to_string())
}

/// The value of a sample line `name value`.
/// The exporter started on `port` with `args` after `exporter --listen`, once it listens.
fn exporter(port: u16, args: &[&str], stderr: Stdio) -> Proc {
    let p = Proc(
        Command::new(EXE)
            .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .stderr(stderr)
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "exporter did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    p
}

/// A real Prometheus with `dir/prometheus.yml`, its data in `dir/data`, once it listens.
fn prometheus(dir: &std::path::Path, port: u16) -> Proc {
    let p = Proc(
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (apt-get install prometheus)"),
    );
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "prometheus did not listen"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    p
}

fn value(body: &str, name: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{body}"))
}

/// The handshakes counted with window scale `wscale` in direction `dir` (0 before the first:
/// a series appears with it).
fn established(body: &str, wscale: &str, dir: &str) -> f64 {
    body.lines()
        .find_map(|l| {
            l.strip_prefix(&format!(
                "tcpwin_connections_established_total{{wscale=\"{wscale}\",direction=\"{dir}\"}} "
            ))?
            .parse::<f64>()
            .ok()
        })
        .unwrap_or(0.0)
}

fn clamp(s: &TcpStream) -> u32 {
    let mut v: i32 = 0;
    let mut len = 4 as libc::socklen_t;
    // SAFETY: TCP_WINDOW_CLAMP writes one int.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_WINDOW_CLAMP,
            &mut v as *mut i32 as *mut _,
            &mut len,
        )
    };
    assert_eq!(rc, 0);
    v as u32
}

/// The exporter's programs.
const EXPORTER_PROGRAMS: [&str; 3] = ["tcp_sockets", "count_states", "count_packet"];

/// Loaded programs named like the exporter's.
fn iterator_programs() -> usize {
    programs_named(&EXPORTER_PROGRAMS).expect("bpftool")
}

#[test]
fn exporter_serves_what_the_owners_read() {
    require_root();
    let pair = Pair::create(&format!("tcpwt-exp-{}", std::process::id()), 1500).unwrap();
    let ns = pair.b.clone();
    // three idle connections inside the namespace, made by a thread that entered it
    let socks: Vec<TcpStream> = in_netns(&ns, move || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut v = Vec::new();
        for _ in 0..3 {
            let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            c.write_all(&[1u8; 10_000]).unwrap();
            v.push(c);
            v.push(l.accept().unwrap().0);
        }
        v
    })
    .join()
    .unwrap();
    let port = free_port();
    let loaded_before = iterator_programs();
    let mut exp = exporter(
        port,
        &["--netns", &pair.b, "--by", "workload"],
        Stdio::piped(),
    );
    std::thread::sleep(Duration::from_millis(200));
    let (status, ctype, body) = get(port, "/metrics", None);
    assert_eq!(status, 200);
    assert!(ctype.contains("version=0.0.4"), "{ctype}");
    // ground truth: six sockets, their clamps as their owner reads them
    assert_eq!(value(&body, "tcpwin_scrape_sockets"), 6.0, "{body}");
    // --by workload: the six are this test's, one workload (its cgroup's), one series per
    // limit they show, summing to six
    let mine =
        tcpwin_model::workload::from_cgroup(&std::fs::read_to_string("/proc/self/cgroup").unwrap())
            .map(|w| w.short())
            .unwrap();
    let per_workload: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("tcpwin_workload_sockets{"))
        .collect();
    assert!(!per_workload.is_empty(), "{body}");
    assert!(
        per_workload
            .iter()
            .all(|l| l.contains(&format!("workload=\"{mine}\""))),
        "{per_workload:?}"
    );
    let n: f64 = per_workload
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(n, 6.0, "{per_workload:?}");
    assert_eq!(
        value(
            &body,
            "tcpwin_sockets_by_window_clamp_bytes{upper=\"+Inf\"}"
        ),
        6.0
    );
    let sum: u64 = socks.iter().map(|s| clamp(s) as u64).sum();
    assert_eq!(
        value(&body, "tcpwin_sockets_window_clamp_bytes"),
        sum as f64,
        "{body}"
    );
    assert_eq!(value(&body, "tcpwin_scrape_errors"), 0.0);
    // the exporter's own identity and figures
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(
        body.lines().any(|l| l.starts_with("tcpwin_build_info{")
            && l.contains(&format!("kernel=\"{}\"", kernel.trim()))
            && l.contains("source=\"iterator\"")
            && l.ends_with(" 1")),
        "{body}"
    );
    let rss = value(&body, "process_resident_memory_bytes");
    let vmrss_kib: f64 = std::fs::read_to_string(format!("/proc/{}/status", exp.id()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    assert!(
        (rss - vmrss_kib * 1024.0).abs() < 0.5 * rss,
        "process_resident_memory_bytes {rss} vs VmRSS {vmrss_kib} kB"
    );
    assert!(value(&body, "process_open_fds") >= 3.0);
    // Prometheus' own checker accepts the format
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (apt-get install prometheus)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // OpenMetrics when asked
    let (_, ctype, om) = get(
        port,
        "/metrics",
        Some("application/openmetrics-text; version=1.0.0"),
    );
    assert!(ctype.contains("openmetrics"), "{ctype}");
    assert!(om.trim_end().ends_with("# EOF"), "{om}");
    // only GET, only /metrics; garbage and a client leaving mid-request do not stop it
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 405"), "{r}");
    assert_eq!(get(port, "/", None).0, 404);
    let mut g = TcpStream::connect(("127.0.0.1", port)).unwrap();
    g.write_all(b"\x00\x01garbage\r\n\r\n").unwrap();
    drop(g);
    let mut half = TcpStream::connect(("127.0.0.1", port)).unwrap();
    half.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    drop(half);
    assert_eq!(get(port, "/metrics", None).0, 200);
    // two scrapes at once (two Prometheus replicas) share one reading: the same body, its
    // own scrape duration included; one after the freshness window (250 ms) reads again
    // (the window runs from the reading's start, which follows `t0`: a pair done within 250 ms
    // of `t0` fell in it; a pair a busy machine spread wider proves nothing and is made again)
    let (a, b) = (0..5)
        .find_map(|_| {
            std::thread::sleep(Duration::from_millis(300));
            let t0 = Instant::now();
            let pair = (get(port, "/metrics", None).2, get(port, "/metrics", None).2);
            (t0.elapsed() < Duration::from_millis(250)).then_some(pair)
        })
        .expect("no two scrapes within 250 ms in five tries: the machine stalled every time");
    assert_eq!(a, b, "two scrapes within 250 ms share the reading");
    std::thread::sleep(Duration::from_millis(300));
    let c = get(port, "/metrics", None).2;
    let duration = |body: &str| value(body, "tcpwin_scrape_duration_seconds");
    assert_ne!(
        duration(&a),
        duration(&c),
        "a scrape after the window reads again"
    );
    // handshakes in the namespace since the exporter started: 3 with window scaling, then 2
    // with it off in the namespace (both ends then agree it was not negotiated)
    let before = get(port, "/metrics", None).2;
    let connect = |n: usize| {
        let ns = pair.b.clone();
        in_netns(&ns, move || {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            for _ in 0..n {
                let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let a = l.accept().unwrap().0;
                drop((c, a));
            }
        })
        .join()
        .unwrap()
    };
    connect(3);
    Pair::sysctl(&pair.b, "net.ipv4.tcp_window_scaling", "0").unwrap();
    connect(2);
    // past the freshness window of the reading `before` shared
    std::thread::sleep(Duration::from_millis(400));
    let after = get(port, "/metrics", None).2;
    for (wscale, dir, n) in [
        ("negotiated", "active", 3.0),
        ("negotiated", "passive", 3.0),
        ("not_negotiated", "active", 2.0),
        ("not_negotiated", "passive", 2.0),
    ] {
        assert_eq!(
            established(&after, wscale, dir) - established(&before, wscale, dir),
            n,
            "{wscale} {dir}:\n{after}"
        );
    }
    // the namespace goes away: the next scrape answers and counts the error
    drop(socks);
    drop(pair);
    std::thread::sleep(Duration::from_millis(300));
    let (status, _, body) = get(port, "/metrics", None);
    assert_eq!(status, 200);
    assert_eq!(value(&body, "tcpwin_scrape_errors"), 1.0, "{body}");
    // SIGTERM: a clean stop, nothing left loaded
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(exp.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = exp.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the exporter ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    assert_eq!(
        programs_named_settled(&EXPORTER_PROGRAMS, loaded_before).expect("bpftool"),
        loaded_before,
        "the exporter's programs are still loaded 10 s after it exited"
    );
}

/// `--addr`: the sockets and the kernel's handshake counter hold the connections with that
/// address only. Loopback, one listener: two connections to 127.0.0.3 and three to 127.0.0.2,
/// kept open; the exporter with `--addr 127.0.0.3` reads four sockets (both ends of two) and
/// counts two handshakes each way.
#[test]
fn exporter_addr_keeps_that_address_only() {
    require_root();
    let listen = TcpListener::bind("0.0.0.0:0").unwrap();
    let lport = listen.local_addr().unwrap().port();
    let port = free_port();
    let mut exp = exporter(
        port,
        &["--port", &lport.to_string(), "--addr", "127.0.0.3"],
        Stdio::piped(),
    );
    let before = get(port, "/metrics", None).2;
    let mut open = Vec::new();
    for to in [
        "127.0.0.3",
        "127.0.0.2",
        "127.0.0.3",
        "127.0.0.2",
        "127.0.0.2",
    ] {
        open.push(TcpStream::connect((to, lport)).unwrap());
        open.push(listen.accept().unwrap().0);
    }
    // past the freshness window of the reading `before` shared
    std::thread::sleep(Duration::from_millis(400));
    let after = get(port, "/metrics", None).2;
    assert_eq!(value(&after, "tcpwin_scrape_sockets"), 4.0, "{after}");
    for dir in ["active", "passive"] {
        assert_eq!(
            established(&after, "negotiated", dir) - established(&before, "negotiated", dir),
            2.0,
            "{dir}:\n{after}"
        );
    }
    drop(open);
    exp.kill().unwrap();
}

#[test]
fn exporter_refuses_bad_input_in_one_sentence() {
    let port = free_port();
    let _busy = TcpListener::bind(("127.0.0.1", port)).unwrap();
    for (args, needle) in [
        (vec!["exporter", "--listen", "nonsense"], "invalid value"),
        (
            vec!["exporter", "--netns", "no-such-ns-tcpwin"],
            "ip netns list",
        ),
    ] {
        let out = Command::new(EXE).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let out = Command::new(EXE)
            .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains("cannot listen"), "{err}");
    }
}

/// `--netns all` publishes what it cannot see from where it runs, every kind with 0 or 1: on
/// the host (its PID namespace, PID 1's mounts) nothing is hidden.
#[test]
fn exporter_publishes_its_blind_spots() {
    require_root();
    let port = free_port();
    let mut exp = exporter(port, &["--netns", "all", "--port", "9"], Stdio::null());
    let body = get(port, "/metrics", None).2;
    // ground truth: the host's PID namespace is the kernel's initial one (PROC_PID_INIT_INO)
    let ino = |p: &str| std::fs::metadata(p).ok().map(|m| m.ino());
    let host_pid = ino("/proc/self/ns/pid") == Some(0xEFFF_FFFC);
    assert_eq!(
        value(&body, "tcpwin_blind_spot{what=\"host_pid_namespace\"}"),
        if host_pid { 0.0 } else { 1.0 },
        "{body}"
    );
    // another mount namespace than PID 1's (where PID 1's can be read) without /run/netns
    let own_mounts = matches!(
        (ino("/proc/self/ns/mnt"), ino("/proc/1/ns/mnt")),
        (Some(a), Some(b)) if a != b
    );
    // this test runs with every capability: the sockets' owners can be read
    assert_eq!(
        value(&body, "tcpwin_blind_spot{what=\"process_owners\"}"),
        0.0,
        "{body}"
    );
    let named = std::fs::read_dir("/run/netns").is_ok_and(|mut d| d.next().is_some());
    assert_eq!(
        value(&body, "tcpwin_blind_spot{what=\"host_run_netns\"}"),
        if own_mounts && !named { 1.0 } else { 0.0 },
        "{body}"
    );
    let _ = exp.kill();
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A real Prometheus (Debian's package) scrapes the exporter every second with the pack's rules
/// loaded; its HTTP API returns the handshake counts the test made (with and without window
/// scaling), the recording rule's negotiation rate, and the sockets the test holds, their
/// windows pinned by the namespace's tcp_rmem and read back with getsockopt. Then every query of
/// the Grafana dashboard is valid and returns data (no Grafana here: Prometheus evaluates them).
#[test]
fn prometheus_scrapes_the_exporter() {
    require_root();
    let pair = Pair::create(&format!("tcpwt-prom-{}", std::process::id()), 1500).unwrap();
    pair.pin_receiver_buffer(1 << 20).unwrap();
    let (port, prom_port) = (free_port(), free_port());
    let _exp = Proc(
        Command::new(EXE)
            .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--netns", &pair.b, "--top", "5", "--by", "workload"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let dir = std::env::temp_dir().join(format!("tcpwt-prom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // the pack's recording and alerting rules, as an operator loads them
    let pack = concat!(env!("CARGO_MANIFEST_DIR"), "/../prometheus");
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {pack}/rules.yml\n  - {pack}/alerts.yml\nscrape_configs:\n  - job_name: tcpwin\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let _prom = prometheus(&dir, prom_port);
    // three connections held open in the namespace (six sockets), made after the exporter started
    let ns = pair.b.clone();
    let held: Vec<TcpStream> = in_netns(&ns, move || {
        std::thread::sleep(Duration::from_millis(1500));
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(TcpStream::connect(l.local_addr().unwrap()).unwrap());
            v.push(l.accept().unwrap().0);
        }
        v
    })
    .join()
    .unwrap();
    let clamp_sum: u64 = held.iter().map(|s| clamp(s) as u64).sum();
    // two handshakes without window scaling, closed at once
    Pair::sysctl(&pair.b, "net.ipv4.tcp_window_scaling", "0").unwrap();
    let ns = pair.b.clone();
    in_netns(&ns, move || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        for _ in 0..2 {
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            drop((c, l.accept().unwrap().0));
        }
    })
    .join()
    .unwrap();
    let query = |q: &str| -> Option<f64> {
        let (status, _, body) = get(
            prom_port,
            &format!("/api/v1/query?query={}", urlencode(q)),
            None,
        );
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let want = [
        (
            "tcpwin_connections_established_total{wscale=\"negotiated\",direction=\"passive\"}",
            3.0,
        ),
        (
            "tcpwin_connections_established_total{wscale=\"not_negotiated\",direction=\"passive\"}",
            2.0,
        ),
        ("tcpwin_connections_closed_total", 4.0),
        ("tcpwin_sockets_by_window_clamp_bytes{upper=\"+Inf\"}", 6.0),
        ("tcpwin_sockets_window_clamp_bytes", clamp_sum as f64),
        // every limit published, zero where no socket has it
        ("tcpwin_sockets{limit=\"rcvbuf-locked\"}", 0.0),
    ];
    loop {
        let got: Vec<Option<f64>> = want.iter().map(|(q, _)| query(q)).collect();
        if got.iter().zip(&want).all(|(g, (_, w))| *g == Some(*w)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not return {want:?} within 60 s: {got:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // the recording rule, over handshakes made while Prometheus watches: 3 of 5 negotiated
    for wscale in ["1", "1", "1", "0", "0"] {
        Pair::sysctl(&pair.b, "net.ipv4.tcp_window_scaling", wscale).unwrap();
        let ns = pair.b.clone();
        in_netns(&ns, move || {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            drop((c, l.accept().unwrap().0));
        })
        .join()
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        // 3 + 3 negotiated of 5 + 5 since the exporter started; the 5 m rate sees what moved
        // within the window: every handshake of the test
        let got = query("instance:tcpwin_wscale_negotiated:ratio_rate5m");
        if got.is_some_and(|g| (g - 0.6).abs() < 1e-9) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the recording rule did not read 0.6 within 60 s: {got:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // the dashboard: every panel's query is valid and returns data once traffic has moved (a
    // transfer runs in the namespace for the --top and rwnd panels)
    let ns = pair.b.clone();
    let mover = in_netns(&ns, move || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut a, _) = l.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while a.read(&mut buf).unwrap_or(0) > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let until = Instant::now() + Duration::from_secs(8);
        while Instant::now() < until {
            if c.write_all(&[1u8; 1 << 16]).is_err() {
                break;
            }
        }
        drop(c);
        let _ = reader.join();
    });
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../grafana/tcpwin-dashboard.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().clone())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    let results = |q: &str| -> Result<usize, String> {
        let (status, _, body) = get(
            prom_port,
            &format!("/api/v1/query?query={}", urlencode(q)),
            None,
        );
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if status != 200 || v["status"] != "success" {
            return Err(format!("{status}: {body}"));
        }
        Ok(v["data"]["result"].as_array().map_or(0, |r| r.len()))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut pending: Vec<String> = exprs.clone();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for q in pending {
            match results(&q) {
                // a query Prometheus refuses is a broken panel: at once
                Err(e) => panic!("dashboard query `{q}` is refused: {e}"),
                Ok(0) => still.push(q),
                Ok(_) => {}
            }
        }
        pending = still;
        assert!(
            pending.is_empty() || Instant::now() < deadline,
            "dashboard queries empty after traffic: {pending:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    mover.join().unwrap();
    drop(held);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fleet pack's rules: `promtool check rules` accepts them, and their unit tests (series in,
/// alerts and recorded values out) pass under `promtool test rules`.
#[test]
fn the_alert_and_recording_rules_pass_promtool() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../prometheus");
    for args in [
        &["check", "rules", "rules.yml", "alerts.yml"][..],
        &["test", "rules", "alerts_test.yml"][..],
    ] {
        let out = Command::new("promtool")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("promtool (apt-get install prometheus)");
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The systemd unit passes `systemd-analyze verify` (with ExecStart pointed at this build).
#[test]
fn the_unit_file_verifies() {
    let Ok(v) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("UNIT FILE NOT VERIFIED: systemd-analyze is not installed on this host");
        return;
    };
    assert!(v.status.success());
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../dist/tcpwin-exporter.service"
    ))
    .unwrap()
    .replace("/usr/bin/tcpwin-trace", EXE);
    let path = std::env::temp_dir().join("tcpwin-exporter.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Connections that came and went between two scrapes: the busy and rwnd-limited counters grow
/// by what each socket's own `TCP_INFO` said before it closed, the closed counter by the
/// connections; with `--packet-histogram` the receiving interface's packets are counted, and
/// `--top` labels the socket still moving data.
#[test]
fn closed_connections_keep_their_chrono_times() {
    require_root();
    let pair = Pair::create(&format!("tcpwt-clo-{}", std::process::id()), 1500).unwrap();
    let port = free_port();
    let _exp = exporter(
        port,
        &["--netns", &pair.b, "--packet-histogram", "--top", "3"],
        Stdio::inherit(),
    );
    let before = get(port, "/metrics", None).2;
    let total = |body: &str, n: &str| value(body, &format!("{n}_total"));
    // in the namespace: 4 connections whose receiver (a 16 KiB buffer) waits 300 ms before
    // reading 1 MiB, so each sender is rwnd-limited; each side reads its TCP_INFO at the end
    const N: usize = 4;
    let ns = pair.b.clone();
    let infos: Vec<(u64, u64)> = in_netns(&ns, move || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let small: libc::c_int = 16 << 10;
        // SAFETY: SO_RCVBUF reads one int; accepted sockets inherit it.
        unsafe {
            libc::setsockopt(
                l.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &small as *const _ as *const _,
                4,
            )
        };
        let addr = l.local_addr().unwrap();
        let mut out = Vec::new();
        for _ in 0..N {
            let sender = std::thread::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                c.write_all(&vec![7u8; 1 << 20]).unwrap();
                c.shutdown(std::net::Shutdown::Write).unwrap();
                // the receiver's FIN: this socket is closed by the kernel (to TIME_WAIT) now
                let mut rest = Vec::new();
                c.read_to_end(&mut rest).unwrap();
                let t = tcpwin_lab::endpoints::tcp_info(c.as_raw_fd()).unwrap();
                (t.busy_us.unwrap(), t.rwnd_limited_us.unwrap())
            });
            let (mut a, _) = l.accept().unwrap();
            std::thread::sleep(Duration::from_millis(300));
            let mut sink = Vec::new();
            a.read_to_end(&mut sink).unwrap();
            assert_eq!(sink.len(), 1 << 20);
            let r = tcpwin_lab::endpoints::tcp_info(a.as_raw_fd()).unwrap();
            drop(a);
            let (busy, rwnd) = sender.join().unwrap();
            out.push((busy + r.busy_us.unwrap(), rwnd + r.rwnd_limited_us.unwrap()));
        }
        out
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let after = get(port, "/metrics", None).2;
    let busy: f64 = infos.iter().map(|i| i.0 as f64 / 1e6).sum();
    let rwnd: f64 = infos.iter().map(|i| i.1 as f64 / 1e6).sum();
    assert!(
        rwnd > 0.2 * N as f64,
        "the test's senders were not rwnd-limited: {infos:?}"
    );
    let d = |n: &str| total(&after, n) - total(&before, n);
    assert_eq!(d("tcpwin_connections_closed"), (2 * N) as f64, "{after}");
    // the senders' chronos stopped before TCP_INFO; a receiver's runs while its FIN is in
    // flight after: at most a jiffy (≤ 10 ms) each
    let rw = d("tcpwin_rwnd_limited_seconds");
    assert!(
        (rw - rwnd).abs() < 1e-3,
        "rwnd-limited {rw} s vs TCP_INFO {rwnd} s"
    );
    let b = d("tcpwin_busy_seconds");
    assert!(
        b >= busy - 1e-3 && b <= busy + 0.01 * N as f64,
        "busy {b} s vs TCP_INFO {busy} s"
    );
    // every data packet the receivers got went through veth-less loopback: counted there
    let lo = format!("{{interface=\"lo@{}\"}} ", pair.b);
    let pkts = after
        .lines()
        .find_map(|l| {
            l.strip_prefix("tcpwin_packet_scaling_ratio_count")?
                .strip_prefix(lo.as_str())?
                .parse::<f64>()
                .ok()
        })
        .unwrap_or_else(|| panic!("no packet histogram for {lo}:\n{after}"));
    // 1 MiB in segments of at most 64 KiB each, N times
    assert!(pkts >= (16 * N) as f64, "{pkts} packets:\n{after}");
    // a transfer across two scrapes: labelled by --top with its own addresses
    let ns = pair.b.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let mover = in_netns(&ns, move || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut a, _) = l.accept().unwrap();
        tx.send(l.local_addr().unwrap().port()).unwrap();
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while a.read(&mut buf).unwrap() > 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let until = Instant::now() + Duration::from_millis(2500);
        while Instant::now() < until {
            c.write_all(&[1u8; 1 << 16]).unwrap();
        }
        drop(c);
        reader.join().unwrap();
    });
    let server_port = rx.recv().unwrap();
    let first = get(port, "/metrics", None).2;
    std::thread::sleep(Duration::from_millis(1000));
    let live = get(port, "/metrics", None).2;
    mover.join().unwrap();
    let remote = format!("remote=\"127.0.0.1:{server_port}\"");
    assert!(
        live.lines()
            .any(|l| l.starts_with("tcpwin_top_socket_window_use_ratio{")
                && l.contains(&remote)
                && l.contains(&format!("netns=\"{}\"", pair.b))
                && l.contains("side=\"sending\"")),
        "the sender to {server_port} is not among --top:\n{live}\n(the scrape a second before:)\n{first}"
    );
}

/// `--web.config.file` (the exporters' shared format): a real Prometheus scrapes over TLS with
/// basic auth (its `tls_config` trusting the test's certificate); the same without credentials,
/// with a wrong password, or over plain HTTP gets nothing (`up` 0); a wrong password is a 401.
#[test]
fn prometheus_scrapes_over_tls_with_basic_auth() {
    require_root();
    let dir = std::env::temp_dir().join(format!("tcpwt-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    tcpwin_lab::harness::self_signed(&dir, "IP:127.0.0.1");
    let hash = bcrypt::hash("s3cret", 6).unwrap();
    // relative paths: from the config file's directory
    std::fs::write(
        dir.join("web.yml"),
        format!("tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\nbasic_auth_users:\n  prometheus: '{hash}'\n"),
    )
    .unwrap();
    let (port, prom_port) = (free_port(), free_port());
    let web = dir.join("web.yml");
    let mut exp = exporter(
        port,
        &["--web.config.file", web.to_str().unwrap(), "--port", "9"],
        Stdio::piped(),
    );
    // plain HTTP to the TLS port: no HTTP answer
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut r = Vec::new();
    let _ = s.read_to_end(&mut r);
    assert!(
        !r.starts_with(b"HTTP/1."),
        "{}",
        String::from_utf8_lossy(&r)
    );
    let ca = dir.join("tls.crt");
    let job = |name: &str, scheme: &str, auth: &str| {
        format!(
            "  - job_name: {name}\n    scheme: {scheme}\n    tls_config:\n      ca_file: {}\n{auth}    static_configs:\n      - targets: ['127.0.0.1:{port}']\n",
            ca.display()
        )
    };
    let auth =
        |p: &str| format!("    basic_auth:\n      username: prometheus\n      password: {p}\n");
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n{}{}{}{}",
            job("tcpwin", "https", &auth("s3cret")),
            job("noauth", "https", ""),
            job("wrong", "https", &auth("guess")),
            job("plain", "http", &auth("s3cret")),
        ),
    )
    .unwrap();
    let _prom = prometheus(&dir, prom_port);
    let up = |job: &str| -> Option<f64> {
        let (status, _, body) = get(
            prom_port,
            &format!(
                "/api/v1/query?query={}",
                urlencode(&format!("up{{job=\"{job}\"}}"))
            ),
            None,
        );
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    };
    let want = [
        ("tcpwin", 1.0),
        ("noauth", 0.0),
        ("wrong", 0.0),
        ("plain", 0.0),
    ];
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got: Vec<Option<f64>> = want.iter().map(|(j, _)| up(j)).collect();
        if got.iter().zip(&want).all(|(g, (_, w))| *g == Some(*w)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "up by job within 60 s: {got:?} (want {want:?})"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // the scraped job carries the exporter's own series
    let (_, _, body) = get(
        prom_port,
        &format!(
            "/api/v1/query?query={}",
            urlencode("tcpwin_build_info{job=\"tcpwin\"}")
        ),
        None,
    );
    assert!(body.contains("\"version\""), "{body}");
    let _ = exp.kill();
    let _ = std::fs::remove_dir_all(&dir);
}
