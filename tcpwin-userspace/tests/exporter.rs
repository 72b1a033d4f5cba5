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
    pair::{in_netns, Pair},
};

fn exe() -> &'static str {
    tcpwin_lab::harness::bin_exe("tcpwin-trace", env!("CARGO_BIN_EXE_tcpwin-trace"))
}

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
        Command::new(exe())
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
        let out = Command::new(exe()).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let out = Command::new(exe())
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
        Command::new(exe())
            .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--netns", &pair.b, "--top", "5", "--by", "workload"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let dir = std::env::temp_dir().join(format!("tcpwt-prom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // the pack's recording and alerting rules, as an operator loads them
    let pack = tcpwin_lab::harness::workspace().join("prometheus");
    let pack = pack.display();
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
        &std::fs::read_to_string(
            tcpwin_lab::harness::workspace().join("grafana/tcpwin-dashboard.json"),
        )
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
    let dir = tcpwin_lab::harness::workspace().join("prometheus");
    for args in [
        &["check", "rules", "rules.yml", "alerts.yml"][..],
        &["test", "rules", "alerts_test.yml"][..],
    ] {
        let out = Command::new("promtool")
            .current_dir(&dir)
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
    let unit = std::fs::read_to_string(
        tcpwin_lab::harness::workspace().join("dist/tcpwin-exporter.service"),
    )
    .unwrap()
    .replace("/usr/bin/tcpwin-trace", exe());
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

/// What a client on the network can hold, bounded (plain HTTP): 100 connections left silent
/// beside `--web.max-connections 20` cost no scrape (each answers within 2 s; the idle longest
/// are closed for newcomers, counted); a silent connection is closed after
/// `--web.header-timeout`; a kept-alive connection serves scrape after scrape; a head too large,
/// too many headers, a request line of 64 KiB and garbage are refused or closed, and the
/// exporter answers after each.
#[test]
fn exporter_bounds_what_clients_can_hold() {
    require_root();
    let port = free_port();
    let mut exp = exporter(
        port,
        &[
            "--port",
            "9",
            "--web.max-connections",
            "20",
            "--web.header-timeout",
            "2",
            // every scrape reads anew: the counters read are this moment's
            "--fresh-ms",
            "0",
        ],
        Stdio::null(),
    );
    let mut silent: Vec<TcpStream> = Vec::new();
    for round in 0..5 {
        for _ in 0..20 {
            silent.push(TcpStream::connect(("127.0.0.1", port)).unwrap());
        }
        let t = Instant::now();
        assert_eq!(get(port, "/metrics", None).0, 200);
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "a scrape beside {} silent connections took {:?} (round {round})",
            silent.len(),
            t.elapsed()
        );
    }
    let body = get(port, "/metrics", None).2;
    let evicted = value(
        &body,
        "tcpwin_http_connections_dropped_total{reason=\"evicted\"}",
    );
    assert!(evicted >= 80.0, "{evicted} evicted:\n{body}");
    assert!(value(&body, "tcpwin_http_connections") <= 20.0, "{body}");
    // the evicted ones were closed: the oldest reads its end
    silent[0]
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(silent[0].read(&mut [0u8; 16]).unwrap_or(0), 0);
    drop(silent);
    // a silent connection is closed after the header timeout (2 s; 10 s allowed)
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t = Instant::now();
    match s.read(&mut [0u8; 256]) {
        // closed (an answer of 408 would also do)
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("a silent connection was kept {:?}: {e}", t.elapsed()),
    }
    assert!(
        t.elapsed() >= Duration::from_millis(1500),
        "closed early: {:?}",
        t.elapsed()
    );
    // keep-alive: three scrapes on one connection
    let mut k = TcpStream::connect(("127.0.0.1", port)).unwrap();
    k.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for _ in 0..3 {
        k.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(k.read(&mut b).unwrap(), 1, "closed after {head:?}");
            head.push(b[0]);
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut body = vec![0u8; len];
        k.read_exact(&mut body).unwrap();
    }
    // a peer's question: the readings of the sockets asked for, as JSON lines; a bad one is a
    // 400 in one sentence
    let (code, ctype, body) = get(port, "/sockets?port=9", None);
    assert_eq!(
        (code, ctype.as_str()),
        (200, "application/x-ndjson"),
        "{body}"
    );
    let (code, _, body) = get(port, "/sockets?port=0", None);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("port=0"), "{body}");
    // hostile requests: refused (4xx) or closed, never a scrape, never the server
    let big = "a".repeat(1 << 20);
    let many: String = (0..5000).map(|i| format!("X-H{i}: v\r\n")).collect();
    let line = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "m".repeat(64 << 10));
    for (what, req) in [
        (
            "a 1 MiB header",
            format!("GET /metrics HTTP/1.1\r\nX-Big: {big}\r\n\r\n"),
        ),
        (
            "5,000 headers",
            format!("GET /metrics HTTP/1.1\r\n{many}\r\n"),
        ),
        ("a 64 KiB request line", line),
        ("garbage", "\x00\x01\x02 nonsense\r\n\r\n".to_string()),
        (
            "a path outside",
            "GET /../metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_string(),
        ),
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // the server may close while the request is still being written
        let _ = s.write_all(req.as_bytes());
        let mut r = Vec::new();
        let _ = s.read_to_end(&mut r);
        let r = String::from_utf8_lossy(&r);
        let code: u16 = r
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        assert!(
            r.is_empty() || (400..500).contains(&code),
            "{what}: {}",
            &r[..r.len().min(200)]
        );
        assert_eq!(get(port, "/metrics", None).0, 200, "after {what}");
    }
    let _ = exp.kill();
}

/// `/sockets` answers with the sockets asked for and their namespace's limits, the schema `ss
/// --json` prints (two idle connections of the test's, read through the exporter, each with its
/// getsockopt(TCP_WINDOW_CLAMP)); `--no-sockets-endpoint` turns it off, said in a 404.
#[test]
fn exporter_answers_a_peer_for_its_sockets() {
    require_root();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let lport = l.local_addr().unwrap().port();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let a = l.accept().unwrap().0;
    let port = free_port();
    let mut exp = exporter(port, &[], Stdio::null());
    let (code, _, body) = get(port, &format!("/sockets?port={lport}&addr=127.0.0.1"), None);
    assert_eq!(code, 200, "{body}");
    let lines: Vec<tcpwin_model::schema::SsLine> = body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(lines.len(), 2, "{body}");
    for s in [&c, &a] {
        let local = s.local_addr().unwrap().port();
        let line = lines
            .iter()
            .find(|l| l.facts.id.lport == local)
            .unwrap_or_else(|| panic!("no socket {local}: {body}"));
        assert_eq!(line.facts.window_clamp, Some(clamp(s)));
        let host = line.host.as_ref().expect("its namespace's limits");
        assert!(host.tcp_rmem.is_some(), "{host:?}");
    }
    let _ = exp.kill();
    let port = free_port();
    let mut exp = exporter(port, &["--no-sockets-endpoint"], Stdio::null());
    let (code, _, body) = get(port, "/sockets", None);
    assert_eq!(code, 404);
    assert!(body.contains("--no-sockets-endpoint"), "{body}");
    let _ = exp.kill();
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
    // the cost operators use (htpasswd -B's default): what a flood of guesses would burn
    let hash = bcrypt::hash("s3cret", 10).unwrap();
    let late = bcrypt::hash("l4te", 10).unwrap();
    // relative paths: from the config file's directory
    std::fs::write(
        dir.join("web.yml"),
        format!("tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\nbasic_auth_users:\n  prometheus: '{hash}'\n  late: '{late}'\n"),
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

    // What a hostile network does, all at once, the real Prometheus scraping throughout: 100
    // TCP connections opened and left silent, 50 TLS sessions left silent after their
    // handshake, and 8 clients sending wrong passwords as fast as their answers come, each
    // from another address (127.0.0.3, .4, .2: other hosts). Every authorized scrape (remembered credentials, and a user's first one,
    // checked during the flood) answers within 2 s; the flood costs the exporter under one core.
    let tls = tls_client(&ca);
    let silent_tcp: Vec<TcpStream> = (0..100)
        .map(|_| connect_from([127, 0, 0, 3], port))
        .collect();
    let silent_tls: Vec<_> = (0..50)
        .map(|_| {
            let mut c = rustls::ClientConnection::new(tls.clone(), "127.0.0.1".try_into().unwrap())
                .unwrap();
            let mut t = connect_from([127, 0, 0, 4], port);
            while c.is_handshaking() {
                c.complete_io(&mut t).expect("a TLS handshake");
            }
            (c, t)
        })
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood: Vec<_> = (0..8)
        .map(|i| {
            let (tls, stop) = (tls.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut answers = std::collections::BTreeMap::<u16, u32>::new();
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    let s = connect_from([127, 0, 0, 2], port);
                    let guess = format!("guess-{i}-{n}");
                    if let Some((code, _)) =
                        tls_get(&tls, s, "/metrics", Some(("prometheus", &guess)))
                    {
                        *answers.entry(code).or_default() += 1;
                    }
                }
                answers
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (cpu0, t0) = (cpu_seconds(exp.id()), Instant::now());
    let scrape = |user: &str, password: &str| {
        let t = Instant::now();
        let (code, body) = tls_get(
            &tls,
            TcpStream::connect(("127.0.0.1", port)).unwrap(),
            "/metrics",
            Some((user, password)),
        )
        .expect("an answer");
        (code, t.elapsed(), body)
    };
    // a user's first scrape: its password is checked while the flood's are
    let (code, took, _) = scrape("late", "l4te");
    assert_eq!(code, 200);
    assert!(
        took < Duration::from_secs(2),
        "a first scrape took {took:?} under the flood"
    );
    let mut worst = Duration::ZERO;
    while t0.elapsed() < Duration::from_secs(8) {
        let (code, took, _) = scrape("prometheus", "s3cret");
        assert_eq!(code, 200);
        worst = worst.max(took);
        std::thread::sleep(Duration::from_millis(200));
    }
    let cores = (cpu_seconds(exp.id()) - cpu0) / t0.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let answers: Vec<_> = flood.into_iter().map(|t| t.join().unwrap()).collect();
    eprintln!(
        "under 100 silent TCP, 50 silent TLS, 8 clients guessing: worst authorized scrape {worst:?}, the exporter used {cores:.2} cores; the flood's answers {answers:?}"
    );
    assert!(
        worst < Duration::from_secs(2),
        "an authorized scrape took {worst:?}"
    );
    assert!(cores < 1.0, "the flood cost the exporter {cores:.2} cores");
    let refused: u32 = answers.iter().flat_map(|a| a.values()).sum();
    assert!(refused > 8, "the flood got {answers:?}");
    assert!(
        answers
            .iter()
            .all(|a| a.keys().all(|c| *c == 401 || *c == 429)),
        "{answers:?}"
    );
    // the real Prometheus saw the exporter up at every scrape of the hostile window
    let query = |q: &str| -> Option<f64> {
        let (_, _, body) = get(
            prom_port,
            &format!("/api/v1/query?query={}", urlencode(q)),
            None,
        );
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    };
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(query("min_over_time(up{job=\"tcpwin\"}[9s])"), Some(1.0));
    let scrapes = query("count_over_time(up{job=\"tcpwin\"}[9s])").unwrap_or(0.0);
    assert!(scrapes >= 6.0, "Prometheus scraped {scrapes} times in 9 s");
    // the exporter counted what it refused and the time it spent checking
    let (_, _, body) = scrape("prometheus", "s3cret");
    assert!(
        value(&body, "tcpwin_http_auth_failures_total{reason=\"wrong\"}") >= 1.0,
        "{body}"
    );
    assert!(
        value(&body, "tcpwin_http_auth_checks_total") >= 2.0,
        "{body}"
    );
    // the silent ones are closed at the header timeout (10 s): the 100 that never finished a
    // TLS handshake as such, the 50 that sent no request as header timeouts
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, _, body) = scrape("prometheus", "s3cret");
        let dropped = |r: &str| {
            value(
                &body,
                &format!("tcpwin_http_connections_dropped_total{{reason=\"{r}\"}}"),
            )
        };
        if dropped("tls_handshake") >= 100.0 && dropped("header_timeout") >= 50.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "silent connections not closed:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    drop((silent_tcp, silent_tls));
    let _ = exp.kill();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A connection to 127.0.0.1:`port` from the address `src` (another host on loopback).
fn connect_from(src: [u8; 4], port: u16) -> TcpStream {
    use std::os::fd::FromRawFd;
    let sa = |a: [u8; 4], p: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: p.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a new socket bound and connected through plain sockaddr_in values; the fd is owned
    // by the TcpStream made from it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
        let from = sa(src, 0);
        assert_eq!(
            libc::bind(fd, &from as *const _ as *const libc::sockaddr, len),
            0
        );
        let to = sa([127, 0, 0, 1], port);
        assert_eq!(
            libc::connect(fd, &to as *const _ as *const libc::sockaddr, len),
            0,
            "{}",
            std::io::Error::last_os_error()
        );
        TcpStream::from_raw_fd(fd)
    }
}

/// The TLS client a peer reading uses (`--peer-config` with `tls_config.ca_file`), trusting the
/// test's self-signed certificate as itself.
fn tls_client(ca: &std::path::Path) -> std::sync::Arc<rustls::ClientConfig> {
    let yaml = format!("tls_config:\n  ca_file: {}\n", ca.display());
    tcpwin_userspace::gather::peer::PeerConfig::parse(&yaml, std::path::Path::new("/"))
        .and_then(|c| c.tls())
        .expect("the peer client's TLS configuration")
}

/// GET over TLS on `tcp` with basic auth: (status, body); None when the server closed first.
fn tls_get(
    tls: &std::sync::Arc<rustls::ClientConfig>,
    mut tcp: TcpStream,
    path: &str,
    auth: Option<(&str, &str)>,
) -> Option<(u16, String)> {
    use base64::Engine;
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let conn = rustls::ClientConnection::new(tls.clone(), "127.0.0.1".try_into().unwrap()).unwrap();
    let mut s = rustls::StreamOwned::new(conn, &mut tcp);
    let auth = auth
        .map(|(u, p)| {
            format!(
                "Authorization: Basic {}\r\n",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        })
        .unwrap_or_default();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut r = Vec::new();
    // the server may close without close_notify after its answer: what was read is the answer
    let _ = s.read_to_end(&mut r);
    let r = String::from_utf8_lossy(&r).to_string();
    let (head, body) = r.split_once("\r\n\r\n")?;
    Some((
        head.split_whitespace().nth(1)?.parse().ok()?,
        body.to_string(),
    ))
}

/// The CPU time (user + system) process `pid` has used, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    let f: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|v| v.parse().unwrap())
        .collect();
    // SAFETY: sysconf only reads a system value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f[0] + f[1]) as f64 / hz
}
