//! Bad input and missing privileges end with one clear sentence and a non-zero exit, never a panic.
use std::process::Command;

fn exe() -> &'static str {
    tcpwin_lab::harness::bin_exe("tcpwin-trace", env!("CARGO_BIN_EXE_tcpwin-trace"))
}

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(exe())
        .args(args)
        .output()
        .expect("run tcpwin-trace");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "panic: {err}");
    (out.status.success(), err)
}

fn fails_with(args: &[&str], needle: &str) {
    let (ok, err) = run(args);
    assert!(!ok, "{args:?} should fail");
    assert!(
        err.contains(needle),
        "{args:?}: expected `{needle}` in: {err}"
    );
}

#[test]
fn bad_flags() {
    fails_with(&["--pid", "abc"], "invalid value 'abc'");
    fails_with(&["--duration", "1e12"], "at most one year");
    fails_with(&["--duration", "0"], "positive");
    fails_with(&["--ringbuf-kib", "3"], "power of two");
    fails_with(&["--backend", "ebpf"], "possible values");
    fails_with(&["--port", "70000"], "70000");
}

#[test]
fn missing_things() {
    fails_with(&["--pid", "4000000"], "no such process");
    fails_with(
        &["--btf", "/nonexistent/vmlinux", "-d", "1"],
        "no such file",
    );
    fails_with(&["--btf", "/etc/hostname", "-d", "1"], "cannot parse BTF");
    fails_with(
        &["--obj", "/nonexistent.o", "-d", "1"],
        "cargo xtask build-ebpf",
    );
}

/// `--obj` is the object every command loads, never passed over: one that is not an eBPF object
/// is what each command says it could not load (check and the exporter then go on without it,
/// and say so), and one that does not exist is refused before anything runs.
#[test]
fn every_command_loads_the_object_asked_for() {
    let not_bpf = "/etc/hostname";
    fails_with(
        &["ss", "--obj", not_bpf, "--source", "iterator"],
        "error parsing ELF",
    );
    fails_with(
        &["check", "--obj", "/nonexistent.o"],
        "cargo xtask build-ebpf",
    );
    let out = Command::new(exe())
        .args(["check", "--obj", not_bpf])
        .output()
        .expect("run tcpwin-trace");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("error parsing ELF"), "{said}");
    // the exporter: said at start, then it serves from sock_diag until stopped
    let mut exporter = Command::new(exe())
        .args(["exporter", "--listen", "127.0.0.1:0", "--obj", not_bpf])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the exporter");
    let mut err = std::io::BufReader::new(exporter.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut err, &mut first).unwrap();
    let _ = exporter.kill();
    let _ = exporter.wait();
    assert!(first.contains("error parsing ELF"), "{first}");
}

/// A forced backend that this kernel refuses names the hook and the kernel's reason; where the
/// kernel accepts it the run succeeds.
#[test]
fn forced_backend_explains_refusal() {
    for backend in ["fentry", "kprobe"] {
        let (ok, err) = run(&["--backend", backend, "-d", "0.5", "-q"]);
        if !ok {
            assert!(
                err.contains(&format!("--backend {backend} cannot attach")),
                "{err}"
            );
            assert!(err.contains("tcp_measure_rcv_mss"), "{err}");
            assert!(err.contains("os error"), "the kernel's reason: {err}");
        } else {
            assert!(err.contains(&format!("backend {backend}")), "{err}");
        }
    }
}

#[test]
fn unprivileged_user_is_told_to_use_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root to drop privileges"
    );
    for args in [
        &["-d", "1"][..],
        &["ss"][..],
        &["ss", "--source", "iterator"][..],
    ] {
        let out = Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(exe())
            .args(args)
            .output()
            .expect("setpriv (util-linux)");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains("run it as root"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing partial");
    }
}
