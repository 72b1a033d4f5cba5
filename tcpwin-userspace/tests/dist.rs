//! The package `cargo xtask dist` builds (path in TCPWIN_DEB; `cargo xtask test` sets it):
//! `dpkg -i` installs it on this machine, the installed binary is static, answers `--version`
//! and serves a scrape; its man pages and unit are where the system looks; `dpkg --purge`
//! removes it all again. Needs root: fails, never skips.
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use tcpwin_lab::harness::Proc;

/// Purges the package whatever the test's outcome.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg")
            .args(["--purge", "tcpwin-trace"])
            .stdout(Stdio::null())
            .status();
    }
}

fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_deb_installs_and_its_binary_serves_a_scrape() {
    let Ok(deb) = std::env::var("TCPWIN_DEB") else {
        panic!("PACKAGE TEST CANNOT RUN: build it with `cargo xtask dist` and set TCPWIN_DEB to the .deb (`cargo xtask test` does both). Failing, not skipping.");
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("PACKAGE TEST CANNOT RUN: dpkg -i needs root. Failing, not skipping.");
    }
    let status = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "tcpwin-trace"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&status.stdout).contains("install ok installed"),
        "a tcpwin-trace package is installed on this machine already: not replacing it"
    );
    let _guard = Installed;
    ok(Command::new("dpkg").arg("-i").arg(&deb));
    let v = ok(Command::new("/usr/bin/tcpwin-trace").arg("--version"));
    assert!(v.starts_with("tcpwin-trace "), "{v}");
    // static: no dynamic loader, whatever glibc the host has
    let ldd = Command::new("ldd")
        .arg("/usr/bin/tcpwin-trace")
        .output()
        .unwrap();
    let l = String::from_utf8_lossy(&ldd.stdout) + String::from_utf8_lossy(&ldd.stderr);
    assert!(
        l.contains("statically linked") || l.contains("not a dynamic executable"),
        "{l}"
    );
    let files = ok(Command::new("dpkg").args(["-L", "tcpwin-trace"]));
    for f in [
        "/usr/share/man/man1/tcpwin-trace.1.gz",
        "/usr/share/man/man1/tcpwin-trace-exporter.1.gz",
        "/lib/systemd/system/tcpwin-exporter.service",
        "/usr/share/doc/tcpwin-trace/examples/prometheus.yml",
        "/usr/share/tcpwin-trace/prometheus/rules.yml",
        "/usr/share/tcpwin-trace/prometheus/alerts.yml",
        "/usr/share/tcpwin-trace/prometheus/alerts_test.yml",
        "/usr/share/tcpwin-trace/grafana/tcpwin-dashboard.json",
    ] {
        assert!(
            files.lines().any(|l| l == f),
            "{f} not in the package:\n{files}"
        );
        assert!(std::path::Path::new(f).exists(), "{f} not installed");
    }
    // the installed pack: the example configuration (with its rule files) and the rules' own
    // unit tests pass Prometheus' checker
    ok(Command::new("promtool").args([
        "check",
        "config",
        "/usr/share/doc/tcpwin-trace/examples/prometheus.yml",
    ]));
    ok(Command::new("promtool")
        .current_dir("/usr/share/tcpwin-trace/prometheus")
        .args(["test", "rules", "alerts_test.yml"]));
    // the man page says what --help says
    let page =
        ok(Command::new("sh").args(["-c", "zcat /usr/share/man/man1/tcpwin-trace-exporter.1.gz"]));
    assert!(page.contains("packet\\-histogram"), "{page}");
    // the installed binary scrapes
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _exp = Proc(
        Command::new("/usr/bin/tcpwin-trace")
            .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    let mut s = loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no exporter");
        std::thread::sleep(Duration::from_millis(50));
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("tcpwin_scrape_sockets "), "{r}");
    assert!(r.contains("tcpwin_connections_established_total"), "{r}");
}
