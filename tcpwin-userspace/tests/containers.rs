//! Containers as a user runs them (podman with runc, images built offline with buildah from
//! scratch): a busybox web server and a client reading it slowly, the client joined to the
//! server's network namespace; each socket named by its container, `--container` selecting
//! exactly its sockets, and the tool's own image run with the DaemonSet's settings (host PID and
//! network, the least capabilities, the host's /run/netns and podman's metadata read-only) seeing
//! the same, and saying so when it lacks the host's PID namespace; a process started in a traced
//! container between two /proc refreshes traced by its cgroup. Ground truth: `podman inspect`.
//! Needs root, podman, buildah and the image `cargo xtask test` builds (TCPWIN_IMAGE): fails,
//! never skips, without them.
use std::{
    io::{BufRead, Read},
    path::PathBuf,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use tcpwin_model::schema::{parse_trace, EventLine, SsLine};

fn exe() -> &'static str {
    tcpwin_lab::harness::bin_exe("tcpwin-trace", env!("CARGO_BIN_EXE_tcpwin-trace"))
}

/// What deploy/kubernetes/daemonset.yaml gives the tool, as podman flags: its host PID and
/// network namespaces, the capabilities it adds (every other dropped), a read-only root, no
/// privilege escalation, and each hostPath volume at its mountPath (read-only where it says so).
fn daemonset() -> Vec<String> {
    let text = std::fs::read_to_string(
        tcpwin_lab::harness::workspace().join("deploy/kubernetes/daemonset.yaml"),
    )
    .unwrap();
    let field = |key: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("{key} in daemonset.yaml"))
    };
    let mut flags = Vec::new();
    if field("hostPID:") == "true" {
        flags.push("--pid=host".to_string());
    }
    if field("hostNetwork:") == "true" {
        flags.push("--network=host".to_string());
    }
    let caps = field("add:");
    let caps = caps
        .trim_start_matches('[')
        .trim_end_matches(']')
        .replace(' ', "");
    flags.push("--cap-drop=all".into());
    flags.push(format!("--cap-add={caps}"));
    if field("readOnlyRootFilesystem:") == "true" {
        flags.push("--read-only".into());
    }
    if field("allowPrivilegeEscalation:") == "false" {
        flags.push("--security-opt=no-new-privileges".into());
    }
    // volumes: name -> host path; mounts: name -> (mount path, read-only)
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let after = |i: usize, key: &str| {
        lines[i + 1..]
            .iter()
            .take(4)
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
    };
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = l.strip_prefix("- name: ") else {
            continue;
        };
        let Some(mount) = after(i, "mountPath: ") else {
            continue;
        };
        let ro = after(i, "readOnly: ").as_deref() == Some("true");
        // a hostPath volume (a Secret's, the web config, is the test's own to give)
        let Some(host) = lines
            .iter()
            .enumerate()
            .filter(|(_, v)| **v == format!("- name: {name}"))
            .find_map(|(j, _)| after(j, "path: "))
        else {
            continue;
        };
        if std::path::Path::new(&host).exists() {
            flags.push("-v".into());
            flags.push(format!("{host}:{mount}{}", if ro { ":ro" } else { "" }));
        }
    }
    flags
}

/// podman as this machine kind runs it (KERNEL-NOTES): runc, cgroupfs, events to a file.
struct Podman {
    conf: PathBuf,
    dir: PathBuf,
    names: Vec<String>,
    images: Vec<String>,
}

impl Podman {
    fn new() -> Podman {
        tcpwin_lab::harness::tests_need_root("CONTAINER TESTS");
        for p in ["podman", "buildah"] {
            assert!(
                Command::new(p).arg("--version").output().is_ok(),
                "CONTAINER TESTS CANNOT RUN: {p} is missing (apt-get install podman buildah runc busybox-static; `cargo xtask test` installs them). Failing, not skipping."
            );
        }
        // one directory per test (tests of one binary share a PID when run in parallel)
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tcpwt-podman-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("containers.conf");
        std::fs::write(
            &conf,
            "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", \"nproc=1024:1024\"]\n[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
        )
        .unwrap();
        Podman {
            conf,
            dir,
            names: Vec::new(),
            images: Vec::new(),
        }
    }

    fn cmd(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program)
            .env("CONTAINERS_CONF", &self.conf)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// Runs `program args`, its standard output on success.
    fn ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.cmd(program, args);
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A busybox image with an 8 MB file to serve, built offline from the static busybox.
    fn busybox(&mut self) -> String {
        let name = format!("localhost/tcpwt-busybox-{}", std::process::id());
        let ctr = self.ok("buildah", &["from", "scratch"]);
        let mnt = PathBuf::from(self.ok("buildah", &["mount", &ctr]));
        std::fs::create_dir_all(mnt.join("bin")).unwrap();
        std::fs::create_dir_all(mnt.join("www")).unwrap();
        std::fs::create_dir_all(mnt.join("tmp")).unwrap();
        std::fs::copy("/bin/busybox", mnt.join("bin/busybox"))
            .expect("/bin/busybox (apt-get install busybox-static)");
        std::fs::write(mnt.join("www/big"), vec![b'x'; 8 << 20]).unwrap();
        self.ok("buildah", &["commit", "--quiet", &ctr, &name]);
        self.ok("buildah", &["rm", &ctr]);
        self.images.push(name.clone());
        name
    }

    /// Starts a container in the background; its full id.
    fn run(&mut self, name: &str, args: &[&str]) -> String {
        let mut a = vec!["run", "-d", "--name", name];
        a.extend_from_slice(args);
        let id = self.ok("podman", &a);
        self.names.push(name.to_string());
        id
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = self.cmd("podman", &["rm", "-f", "-t", "0", n]);
        }
        for i in &self.images {
            let _ = self.cmd("podman", &["rmi", "-f", i]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The events of a trace's `--json` output, read through the schema (the whole output must
/// parse, its summary last).
fn events_of(stdout: &str) -> Vec<EventLine> {
    parse_trace(stdout)
        .unwrap_or_else(|e| panic!("the trace's --json: {e:#}\n{stdout}"))
        .events
}

/// The workload an event names.
fn workload_of(e: &EventLine) -> Option<&str> {
    e.workload.as_ref().and_then(|w| w.name.as_deref())
}

/// Every event a trace printed names `name`'s workload, or none (softirq, no process).
fn only_of(events: &[EventLine], name: &str) {
    assert!(
        events.iter().all(|e| e
            .workload
            .as_ref()
            .is_none_or(|w| w.name.as_deref() == Some(name))),
        "only {name}'s: {events:?}"
    );
}

fn lines(stdout: &str) -> Vec<SsLine> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn ss(args: &[&str]) -> (Vec<SsLine>, String) {
    let out = Command::new(exe())
        .arg("ss")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ss {args:?}: {err}");
    (lines(&String::from_utf8_lossy(&out.stdout)), err)
}

/// The socket of `lines` whose workload is the container `id`.
fn of<'a>(lines: &'a [SsLine], id: &str) -> Vec<&'a SsLine> {
    lines
        .iter()
        .filter(|l| {
            l.facts
                .workload
                .as_ref()
                .and_then(|w| w.container_id.as_deref())
                == Some(id)
        })
        .collect()
}

#[test]
fn containers_name_their_sockets_and_the_daemonset_sees_them() {
    let image = std::env::var("TCPWIN_IMAGE").unwrap_or_else(|_| {
        panic!("CONTAINER TESTS CANNOT RUN: build the image with `cargo xtask image` and set TCPWIN_IMAGE to it (`cargo xtask test` does both). Failing, not skipping.")
    });
    let mut p = Podman::new();
    let bb = p.busybox();
    let me = std::process::id();
    let (web, client) = (format!("tcpwt-web-{me}"), format!("tcpwt-client-{me}"));
    // the server in its own network namespace (loopback only: no container network to set up)
    let web_id = p.run(
        &web,
        &[
            "--network=none",
            &bb,
            "/bin/busybox",
            "httpd",
            "-f",
            "-p",
            "127.0.0.1:8080",
            "-h",
            "/www",
        ],
    );
    std::thread::sleep(Duration::from_millis(500));
    // the client joins it and reads slowly: wget writes into a pipe drained 16 KiB every
    // 100 ms, so the connection stays open, its window mostly closed, wget reading in turn
    let client_id = p.run(
        &client,
        &[
            &format!("--network=container:{web}"),
            &bb,
            "/bin/busybox",
            "sh",
            "-c",
            "/bin/busybox wget -q -O - http://127.0.0.1:8080/big | while true; do /bin/busybox head -c 16384 >/dev/null; /bin/busybox sleep 0.1; done",
        ],
    );
    // the host's view: every namespace, the port; both ends named by their container
    let deadline = Instant::now() + Duration::from_secs(30);
    let all = loop {
        let (l, _) = ss(&["--netns", "all", "--port", "8080"]);
        if of(&l, &web_id).len() == 1 && of(&l, &client_id).len() == 1 {
            break l;
        }
        assert!(
            Instant::now() < deadline,
            "both ends named within 30 s: {l:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let server_end = of(&all, &web_id)[0];
    let client_end = of(&all, &client_id)[0];
    assert_eq!(server_end.facts.id.lport, 8080, "{server_end:?}");
    assert_eq!(client_end.facts.id.rport, 8080, "{client_end:?}");
    for (l, name) in [(server_end, &web), (client_end, &client)] {
        let w = l.facts.workload.as_ref().unwrap();
        assert_eq!(w.runtime.as_deref(), Some("podman"), "{w:?}");
        assert_eq!(w.name.as_deref(), Some(name.as_str()), "{w:?}");
    }
    // the owners' pids are the containers' processes, as podman says
    let pid_of = |name: &str| -> u32 {
        p.ok("podman", &["inspect", "--format", "{{.State.Pid}}", name])
            .parse()
            .unwrap()
    };
    // busybox httpd forks a child per connection: the owner is the container's PID 1's child
    let owner = server_end.facts.pid.expect("an owner");
    let stat = std::fs::read_to_string(format!("/proc/{owner}/stat")).unwrap();
    let ppid: u32 = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        ppid,
        pid_of(&web),
        "the connection's httpd is forked by web's"
    );
    // --pid of web's httpd covers its forked child's connection
    let (sel, _) = ss(&["--pid", &pid_of(&web).to_string(), "--port", "8080"]);
    assert_eq!(sel.len(), 1, "{sel:?}");
    assert_eq!(sel[0].facts.id, server_end.facts.id);
    // --container selects exactly its sockets: by name, and by a prefix of its id
    let (sel, _) = ss(&["--container", &web, "--port", "8080"]);
    assert_eq!(sel.len(), 1, "{sel:?}");
    assert_eq!(sel[0].facts.id, server_end.facts.id);
    let (sel, _) = ss(&["--container", &client_id[..12], "--port", "8080"]);
    assert_eq!(sel.len(), 1, "{sel:?}");
    assert_eq!(sel[0].facts.id, client_end.facts.id);
    // the one-line form's owner column names the container
    let out = Command::new(exe())
        .args(["ss", "--netns", "all", "--port", "8080"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("podman:{web}")), "{text}");
    assert!(text.contains(&format!("podman:{client}")), "{text}");

    // top names them too: a wide terminal shows each row's owner and its workload
    let term = tcpwin_lab::pty::pty(200, 40);
    let mut top = term.spawn(
        exe(),
        &["top", "--netns", "all", "--port", "8080", "-i", "500"],
    );
    term.wait_for(&format!("podman:{web}"), 30);
    term.wait_for(&format!("podman:{client}"), 30);
    let _ = top.kill();
    let _ = top.wait();

    // the live trace of the client container: wget's reads move its window, and the events
    // its reads report (process context: wget, in the client's cgroup) name the container
    let out = Command::new(exe())
        .args(["--container", &client, "--json", "--duration", "4"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let events = events_of(&String::from_utf8_lossy(&out.stdout));
    let named: Vec<&EventLine> = events
        .iter()
        .filter(|e| workload_of(e) == Some(client.as_str()))
        .collect();
    assert!(
        !named.is_empty(),
        "events named by the client container: {events:?}\n{err}"
    );
    only_of(&events, &client);

    // a process started in the web container while its trace runs, connecting and done within
    // milliseconds (between two /proc refreshes): the kernel side knows it by its cgroup, so its
    // connection is traced and named web's. Five of them, each a new process (podman exec)
    let mut trace = Command::new(exe())
        .args(["--container", &web, "--json", "--duration", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(trace.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("tcpwin-trace: backend") {
        let mut l = String::new();
        assert!(
            err.read_line(&mut l).unwrap() > 0,
            "the trace ended before tracing: {said}"
        );
        said.push_str(&l);
    }
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    // its events read as they come (a full pipe would stall the trace)
    let mut stdout = trace.stdout.take().unwrap();
    let printed = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    const EXECS: usize = 5;
    for _ in 0..EXECS {
        p.ok(
            "podman",
            &[
                "exec",
                &web,
                "/bin/busybox",
                "wget",
                "-q",
                "-O",
                "/dev/null",
                "http://127.0.0.1:8080/big",
            ],
        );
    }
    // SIGINT: the trace stops cleanly and prints what it saw
    let _ = Command::new("kill")
        .args(["-INT", &trace.id().to_string()])
        .status();
    let status = trace.wait().unwrap();
    let err = said + &rest.join().unwrap();
    assert!(status.success(), "{err}");
    let events = events_of(&printed.join().unwrap());
    // the client ends of the exec'd wgets: to port 8080 from web's namespace, named web's
    let execs: std::collections::BTreeSet<u16> = events
        .iter()
        .filter(|e| e.id.rport == 8080 && workload_of(e) == Some(web.as_str()))
        .map(|e| e.id.lport)
        .collect();
    assert_eq!(
        execs.len(),
        EXECS,
        "each exec'd wget's connection traced: {execs:?}\n{err}"
    );
    only_of(&events, &web);

    // the tool's own image, with the DaemonSet's settings: the same sockets, the same names
    let ds = daemonset();
    eprintln!("the DaemonSet as podman flags: {ds:?}");
    for f in [
        "--pid=host",
        "--network=host",
        "--cap-add=SYS_ADMIN,SYS_PTRACE",
        "--read-only",
        "--security-opt=no-new-privileges",
        "/run/netns:/run/netns:ro",
    ] {
        assert!(ds.iter().any(|d| d == f), "{f} in {ds:?}");
    }
    let mut args: Vec<&str> = vec!["run", "--rm"];
    args.extend(ds.iter().map(String::as_str));
    args.extend_from_slice(&[&image, "ss", "--netns", "all", "--json", "--port", "8080"]);
    let inside = lines(&p.ok("podman", &args));
    assert_eq!(of(&inside, &web_id).len(), 1, "{inside:?}");
    assert_eq!(of(&inside, &client_id).len(), 1, "{inside:?}");
    assert_eq!(
        of(&inside, &web_id)[0]
            .facts
            .workload
            .as_ref()
            .unwrap()
            .name
            .as_deref(),
        Some(web.as_str())
    );
    // without the host's PID namespace, or without CAP_SYS_PTRACE, it says what it cannot see,
    // and how to lift it
    let said = |flags: &[&str]| {
        let mut a = vec!["run", "--rm", "--network=host", "--cap-drop=all"];
        a.extend_from_slice(flags);
        a.extend_from_slice(&[&image, "ss", "--netns", "all", "--port", "8080"]);
        String::from_utf8_lossy(&p.cmd("podman", &a).stderr).into_owned()
    };
    let err = said(&["--cap-add=SYS_ADMIN,SYS_PTRACE"]);
    assert!(
        err.contains("not in the host's PID namespace") && err.contains("hostPID: true"),
        "{err}"
    );
    let err = said(&["--pid=host", "--cap-add=SYS_ADMIN"]);
    assert!(
        err.contains("no CAP_SYS_PTRACE") && err.contains("--cap-add SYS_PTRACE"),
        "{err}"
    );

    // the exporter in the image, as the DaemonSet runs it, scraped: per-workload series name
    // both containers
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let exporter = format!("tcpwt-exporter-{me}");
    let listen = format!("127.0.0.1:{port}");
    // the Secret the DaemonSet mounts at /etc/tcpwin-trace: web.yml, tls.crt, tls.key
    let secret = p.dir.join("web");
    std::fs::create_dir_all(&secret).unwrap();
    tcpwin_lab::harness::self_signed(&secret, "DNS:tcpwin-trace");
    std::fs::write(
        secret.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\nbasic_auth_users:\n  prometheus: '{}'\n",
            bcrypt::hash("s3cret", 6).unwrap()
        ),
    )
    .unwrap();
    let mount = format!("{}:/etc/tcpwin-trace:ro", secret.display());
    let mut args: Vec<&str> = ds.iter().map(String::as_str).collect();
    args.extend_from_slice(&[
        "-v",
        &mount,
        &image,
        "exporter",
        "--listen",
        &listen,
        "--netns",
        "all",
        "--by",
        "workload",
        "--port",
        "8080",
        "--web.config.file",
        "/etc/tcpwin-trace/web.yml",
    ]);
    p.run(&exporter, &args);
    // scraped as the ServiceMonitor does: TLS to the name the certificate carries, basic auth
    let ca = secret.join("tls.crt");
    let curl = |user: &str| {
        Command::new("curl")
            .args(["-sS", "--max-time", "5", "--cacert", ca.to_str().unwrap()])
            .args(["--resolve", &format!("tcpwin-trace:{port}:127.0.0.1")])
            .args(["-u", user, "-w", "\n%{http_code}"])
            .arg(format!("https://tcpwin-trace:{port}/metrics"))
            .output()
            .expect("curl")
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let out = curl("prometheus:s3cret");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.ends_with("\n200") && text.contains(&format!("container=\"{client}\"")) {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "the exporter in the image did not name the containers within 30 s: {text} {}",
            p.ok("podman", &["logs", &exporter])
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(body.contains(&format!("container=\"{web}\"")), "{body}");
    assert!(
        body.contains("tcpwin_blind_spot{what=\"host_pid_namespace\"} 0"),
        "{body}"
    );
    // a wrong password is refused; plain HTTP gets no HTTP answer
    let refused = String::from_utf8_lossy(&curl("prometheus:guess").stdout).into_owned();
    assert!(refused.ends_with("\n401"), "{refused}");
    assert!(
        scrape(port).is_none(),
        "plain HTTP answered on the TLS port"
    );
}

/// One plain HTTP GET of /metrics, the body; None while nothing answers.
fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    Some(r.split_once("\r\n\r\n")?.1.to_string())
}

/// A podman pod (its infra container holding the network namespace, catatonit as its pause):
/// a server and a client run as two containers in it. Each one's sockets are named by their own
/// container, the pod beside it (`podman:POD/CONTAINER`), never the pod's id as if it were the
/// container; `--container` of either selects exactly its sockets, by name and by id; `top`,
/// the live trace and the exporter's `--by workload` name them alike. Ground truth: `podman
/// inspect` (each container's id, its pod's name).
#[test]
fn a_pods_containers_are_named_as_containers() {
    let mut p = Podman::new();
    let bb = p.busybox();
    let me = std::process::id();
    let pod = format!("tcpwt-pod-{me}");
    let (web, client) = (format!("tcpwt-pweb-{me}"), format!("tcpwt-pcli-{me}"));
    let pod_id = p.ok("podman", &["pod", "create", "--name", &pod]);
    struct PodGone<'a>(&'a Podman, String);
    impl Drop for PodGone<'_> {
        fn drop(&mut self) {
            let _ = self
                .0
                .cmd("podman", &["pod", "rm", "-f", "-t", "0", &self.1]);
        }
    }
    let web_id = p.run(
        &web,
        &[
            "--pod",
            &pod,
            &bb,
            "/bin/busybox",
            "httpd",
            "-f",
            "-p",
            "127.0.0.1:8081",
            "-h",
            "/www",
        ],
    );
    std::thread::sleep(Duration::from_millis(500));
    let client_id = p.run(
        &client,
        &[
            "--pod",
            &pod,
            &bb,
            "/bin/busybox",
            "sh",
            "-c",
            "/bin/busybox wget -q -O - http://127.0.0.1:8081/big | while true; do /bin/busybox head -c 16384 >/dev/null; /bin/busybox sleep 0.1; done",
        ],
    );
    let _gone = PodGone(&p, pod.clone());
    // podman's own word: each container in the pod
    for c in [&web, &client] {
        let in_pod = p.ok("podman", &["inspect", "--format", "{{.Pod}}", c]);
        assert_eq!(in_pod, pod_id, "{c}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let all = loop {
        let (l, _) = ss(&["--netns", "all", "--port", "8081"]);
        if of(&l, &web_id).len() == 1 && of(&l, &client_id).len() == 1 {
            break l;
        }
        assert!(
            Instant::now() < deadline,
            "both ends named by their own containers within 30 s: {l:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for (id, name) in [(&web_id, &web), (&client_id, &client)] {
        let w = of(&all, id)[0].facts.workload.clone().unwrap();
        assert_eq!(w.name.as_deref(), Some(name.as_str()), "{w:?}");
        assert_eq!(w.pod_id.as_deref(), Some(pod_id.as_str()), "{w:?}");
        assert_eq!(w.pod.as_deref(), Some(pod.as_str()), "{w:?}");
        assert_eq!(w.short(), format!("podman:{pod}/{name}"));
    }
    // --container of either: exactly its sockets, by name and by id
    for (sel, id) in [(&web, &web_id), (&client_id[..12].to_string(), &client_id)] {
        let (got, err) = ss(&["--container", sel, "--port", "8081"]);
        assert_eq!(got.len(), 1, "--container {sel}: {got:?}\n{err}");
        assert_eq!(
            got[0]
                .facts
                .workload
                .as_ref()
                .unwrap()
                .container_id
                .as_deref(),
            Some(id.as_str())
        );
    }
    // top names both, each with its pod
    let term = tcpwin_lab::pty::pty(200, 40);
    let mut top = term.spawn(
        exe(),
        &["top", "--netns", "all", "--port", "8081", "-i", "500"],
    );
    term.wait_for(&format!("podman:{pod}/{web}"), 30);
    term.wait_for(&format!("podman:{pod}/{client}"), 30);
    let _ = top.kill();
    let _ = top.wait();
    // the live trace of the client container: its events name it, read through the schema
    let out = Command::new(exe())
        .args(["--container", &client, "--json", "--duration", "4"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let trace = parse_trace(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let named: Vec<_> = trace
        .events
        .iter()
        .filter_map(|e| e.workload.as_ref())
        .collect();
    assert!(!named.is_empty(), "events named by their container: {err}");
    for w in &named {
        assert_eq!(w.name.as_deref(), Some(client.as_str()), "{w:?}");
        assert_eq!(w.pod.as_deref(), Some(pod.as_str()), "{w:?}");
    }
    // the exporter's --by workload: a series per container, its pod beside it
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut exp = tcpwin_lab::harness::Proc(
        Command::new(exe())
            .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--netns", "all", "--by", "workload", "--port", "8081"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        if let Some(b) = scrape(port).filter(|b| {
            b.contains(&format!("workload=\"podman:{pod}/{web}\""))
                && b.contains(&format!("workload=\"podman:{pod}/{client}\""))
        }) {
            break b;
        }
        assert!(
            Instant::now() < deadline,
            "the exporter names both containers: {:?}",
            scrape(port)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for c in [&web, &client] {
        assert!(
            body.lines()
                .any(|l| l.starts_with("tcpwin_workload_sockets{")
                    && l.contains(&format!("pod=\"{pod}\""))
                    && l.contains(&format!("container=\"{c}\""))),
            "{body}"
        );
    }
    let _ = exp.kill();
}
