//! `cargo xtask vm-test`: the function-hook backends on real kernels this host cannot run them on.
//!
//! Debian cloud kernels (bookworm 6.1, trixie 6.12, sid 7.2) are downloaded with a private apt
//! configuration (download + extract only: the host's apt state is untouched) into `.cache/vm`,
//! a static `tcpwin-trace` goes into a busybox initramfs, and each kernel boots under qemu TCG
//! (KVM does not work here). Inside, for each backend (auto, fentry, kprobe, tracepoint), the
//! tracer watches a loopback transfer made by its own built-in receiver/sender; the host then
//! checks the tracer's JSON against the receiver's getsockopt ground truth.
use std::{
    collections::BTreeMap,
    fs,
    io::Read,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use tcpwin_model::{
    kind::EventKind,
    schema::{parse_line, EndpointReport, EventLine, Line},
};

use crate::{root, run_cmd, toolchain};

pub const DEFAULT_KERNELS: &str = "6.1,6.12,7.2";

const BACKENDS: [&str; 4] = ["auto", "fentry", "tracepoint", "kprobe"];

/// Debian suite holding each kernel series, and how its package is named.
fn suite_for(series: &str) -> Result<(&'static str, String)> {
    Ok(match series {
        "6.1" => ("bookworm", "linux-image-6.1.0-".into()),
        "6.12" => ("trixie", "linux-image-6.12.".into()),
        "7.2" => ("sid", "linux-binary-7.2.".into()),
        other => bail!("unknown kernel series {other}: choose among 6.1, 6.12, 7.2"),
    })
}

fn cache() -> PathBuf {
    root().join(".cache/vm")
}

/// The Debian mirror this host's apt already uses (so nothing new is named or configured).
fn host_mirror() -> Result<String> {
    let mut texts = vec![fs::read_to_string("/etc/apt/sources.list").unwrap_or_default()];
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        for e in dir.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.ends_with(".sources") || n.ends_with(".list") {
                texts.push(fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
    }
    for t in &texts {
        for l in t.lines() {
            let uri = l.strip_prefix("URIs:").map(str::trim).or_else(|| {
                l.strip_prefix("deb ")
                    .and_then(|r| r.split_whitespace().find(|w| w.contains("://")))
            });
            if let Some(u) = uri {
                let u = u.split_whitespace().next().unwrap_or(u);
                if u.trim_end_matches('/').ends_with("/debian") {
                    return Ok(u.to_string());
                }
            }
        }
    }
    bail!("no Debian mirror found in /etc/apt: the VM test downloads kernels from the host's Debian mirror")
}

struct PrivateApt {
    dir: PathBuf,
}

impl PrivateApt {
    fn opts(&self) -> Vec<String> {
        let d = self.dir.display();
        vec![
            format!("-oDir::Etc::SourceList={d}/sources.list"),
            "-oDir::Etc::SourceParts=/nonexistent".into(),
            format!("-oDir::State={d}/state"),
            format!("-oDir::State::status={d}/state/status"),
            format!("-oDir::Cache={d}/cache"),
            "-oAPT::Architecture=amd64".into(),
            "-oAcquire::Languages=none".into(),
            "-oAPT::Sandbox::User=root".into(),
        ]
    }

    fn new() -> Result<PrivateApt> {
        let dir = cache().join("apt");
        for d in ["state/lists/partial", "cache/archives/partial"] {
            fs::create_dir_all(dir.join(d))?;
        }
        let status = dir.join("state/status");
        if !status.exists() {
            fs::write(&status, "")?;
        }
        let mirror = host_mirror()?;
        let key = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]";
        let list: String = ["bookworm", "trixie", "sid"]
            .iter()
            .map(|s| format!("deb {key} {mirror} {s} main\n"))
            .collect();
        fs::write(dir.join("sources.list"), list)?;
        let apt = PrivateApt { dir };
        let fresh = apt
            .dir
            .join("state/lists")
            .read_dir()
            .map(|d| d.count() > 1)
            .unwrap_or(false);
        if !fresh {
            run_cmd(
                Command::new("apt-get")
                    .args(apt.opts())
                    .args(["update", "-q"]),
            )
            .context("private apt-get update")?;
        }
        Ok(apt)
    }

    /// The newest cloud kernel package of a series.
    fn newest(&self, prefix: &str) -> Result<String> {
        let out = Command::new("apt-cache")
            .args(self.opts())
            .args(["pkgnames", prefix])
            .output()?;
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|n| n.ends_with("-cloud-amd64") && !n.contains("unsigned"))
            .map(str::to_string)
            .collect();
        names.sort_by_key(|n| {
            n.split(|c: char| !c.is_ascii_digit())
                .filter_map(|p| p.parse::<u64>().ok())
                .collect::<Vec<_>>()
        });
        names
            .pop()
            .with_context(|| format!("no {prefix}*-cloud-amd64 package in the Debian archive"))
    }

    fn download(&self, pkg: &str, into: &Path) -> Result<()> {
        fs::create_dir_all(into)?;
        run_cmd(
            Command::new("apt-get")
                .current_dir(into)
                .args(self.opts())
                .args(["download", "-q", pkg]),
        )
    }
}

/// Returns (kernel release, vmlinuz) for a series, from the cache or the archive.
fn kernel(series: &str, apt: &mut Option<PrivateApt>) -> Result<(String, PathBuf)> {
    let dir = cache().join(format!("kernel-{series}"));
    let find = |dir: &Path| -> Option<PathBuf> {
        let out = Command::new("find")
            .arg(dir)
            .args(["-name", "vmlinuz*", "-type", "f"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .map(PathBuf::from)
    };
    if let Some(v) = find(&dir.join("x")) {
        if let Ok(rel) = fs::read_to_string(dir.join("release")) {
            return Ok((rel.trim().to_string(), v));
        }
    }
    if apt.is_none() {
        *apt = Some(PrivateApt::new()?);
    }
    let apt = apt.as_ref().expect("set above");
    let (_, prefix) = suite_for(series)?;
    let pkg = apt.newest(&prefix)?;
    let _ = fs::remove_dir_all(&dir);
    apt.download(&pkg, &dir)?;
    let deb = fs::read_dir(&dir)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .context("apt-get download produced no .deb")?;
    run_cmd(Command::new("dpkg").arg("-x").arg(&deb).arg(dir.join("x")))?;
    let _ = fs::remove_file(&deb);
    let v = find(&dir.join("x")).context("no vmlinuz in the kernel package")?;
    let release = pkg
        .trim_start_matches("linux-image-")
        .trim_start_matches("linux-binary-")
        .to_string();
    fs::write(dir.join("release"), &release)?;
    Ok((release, v))
}

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs tmp /tmp
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
ip link set lo up
echo "@@KERNEL $(uname -r)"
for b in $(sed -n 's/.*tcpwin.backends=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' '); do
  echo "@@BEGIN $b"
  TCPWIN_VERIFIER_LOG=1 /tcpwin-trace --backend $b --json --port 5400 > /tmp/trace.json 2> /tmp/trace.err &
  T=$!
  i=0
  while ! grep -q -e '^tcpwin-trace: tracing' -e 'error' /tmp/trace.err; do
    i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1
  done
  if ! grep -q '^tcpwin-trace: tracing' /tmp/trace.err; then
    echo "tcpwin-trace did not start within 60 s" >> /tmp/trace.err
    kill -9 $T
  else
    /tcpwin-trace transfer recv --listen 127.0.0.1:5400 > /tmp/rx.json &
    R=$!
    sleep 0.3
    /tcpwin-trace transfer send --connect 127.0.0.1:5400 --bytes 16000000
    wait $R
    sleep 0.5
    kill -INT $T
  fi
  wait $T
  echo "@@EXIT $?"
  echo "@@TRACE"; cat /tmp/trace.json
  echo "@@ERR"; cat /tmp/trace.err
  echo "@@RX"; cat /tmp/rx.json 2>/dev/null
  echo "@@END $b"
done
echo "@@DONE"
poweroff -f
"#;

fn build_static_tracer() -> Result<PathBuf> {
    let target = "x86_64-unknown-linux-gnu";
    run_cmd(
        Command::new(env!("CARGO"))
            .current_dir(root())
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .args([
                "build",
                "--release",
                "-p",
                "tcpwin-userspace",
                "--target",
                target,
            ])
            .args(["--target-dir", "target/static"]),
    )?;
    Ok(root().join(format!("target/static/{target}/release/tcpwin-trace")))
}

fn initramfs(tracer: &Path) -> Result<PathBuf> {
    let dir = cache().join("initramfs");
    let _ = fs::remove_dir_all(&dir);
    for d in ["bin", "proc", "sys", "tmp", "dev"] {
        fs::create_dir_all(dir.join(d))?;
    }
    fs::copy("/bin/busybox", dir.join("bin/busybox")).context("busybox-static")?;
    fs::copy(tracer, dir.join("tcpwin-trace"))?;
    fs::write(dir.join("init"), INIT)?;
    run_cmd(Command::new("chmod").arg("+x").arg(dir.join("init")))?;
    let out = cache().join("initrd.cpio.gz");
    run_cmd(Command::new("sh").current_dir(&dir).arg("-c").arg(format!(
        "find . | cpio -o -H newc --quiet | gzip -1 > {}",
        out.display()
    )))?;
    Ok(out)
}

/// Boots until the guest test starts (a rare early-boot Oops under TCG is retried, up to 3 boots);
/// a test that started and then hung is a result, not retried.
fn boot_with_retries(
    vmlinuz: &Path,
    initrd: &Path,
    release: &str,
    backend: &str,
) -> Result<String> {
    let mut out = String::new();
    for attempt in 1..=3 {
        out = boot(vmlinuz, initrd, backend, Duration::from_secs(240))?;
        if out.contains("@@DONE") || out.contains("@@BEGIN") {
            return Ok(out);
        }
        let log = cache().join(format!("console-{release}-{backend}-{attempt}.log"));
        let _ = fs::write(&log, &out);
        eprintln!(
            "vm-test: {release}: boot attempt {attempt} died before the test (console in {}); retrying",
            log.display()
        );
    }
    Ok(out)
}

/// Boots once; returns the console output.
fn boot(vmlinuz: &Path, initrd: &Path, backends: &str, timeout: Duration) -> Result<String> {
    let mut child = Command::new("qemu-system-x86_64")
        .args(["-accel", "tcg", "-cpu", "max", "-m", "1G", "-smp", "1"])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args([
            "-append",
            &format!("console=ttyS0 panic=-1 quiet tcpwin.backends={backends}"),
        ])
        .args(["-nographic", "-no-reboot"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("qemu-system-x86_64 (apt-get install qemu-system-x86)")?;
    let mut so = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = so.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let start = Instant::now();
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(reader.join().unwrap_or_default())
}

/// One backend's run inside the guest, as the console printed it.
#[derive(Default, Debug)]
struct Run {
    exit: String,
    trace: Vec<EventLine>,
    err: String,
    rx: Vec<EndpointReport>,
}

fn parse_console(out: &str) -> BTreeMap<String, Run> {
    let mut runs = BTreeMap::new();
    let mut cur: Option<(String, Run)> = None;
    let mut section = "";
    for line in out.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(b) = line.strip_prefix("@@BEGIN ") {
            cur = Some((b.to_string(), Run::default()));
            section = "";
            continue;
        }
        if let Some(b) = line.strip_prefix("@@END ") {
            if let Some((n, r)) = cur.take() {
                if n == b {
                    runs.insert(n, r);
                }
            }
            continue;
        }
        let Some((_, run)) = cur.as_mut() else {
            continue;
        };
        match line {
            "@@TRACE" => section = "trace",
            "@@ERR" => section = "err",
            "@@RX" => section = "rx",
            l if l.starts_with("@@EXIT ") => run.exit = l[7..].to_string(),
            l => match section {
                // the serial console may interleave kernel messages: other lines are not ours
                "trace" => {
                    if let Ok(Line::Event(e)) = parse_line(l) {
                        run.trace.push(*e)
                    }
                }
                "rx" => {
                    if let Ok(v) = serde_json::from_str::<EndpointReport>(l) {
                        run.rx.push(v)
                    }
                }
                "err" => {
                    run.err.push_str(l);
                    run.err.push('\n');
                }
                _ => {}
            },
        }
    }
    runs
}

/// Checks one backend's run; returns problems (empty = pass).
fn check_run(backend: &str, run: &Run, series: &str, problems: &mut Vec<String>) {
    let p = |m: String| format!("{backend}: {m}");
    if run.exit != "0" {
        problems.push(p(format!("tracer exit {} ({})", run.exit, run.err.trim())));
        return;
    }
    let Some(truth) = run.rx.first() else {
        problems.push(p("the receiver reported nothing".into()));
        return;
    };
    let mine: Vec<&EventLine> = run
        .trace
        .iter()
        .filter(|e| e.id.cookie == Some(truth.cookie))
        .collect();
    let Some(last) = mine.last() else {
        problems.push(p(format!(
            "no event for the receiving socket {}",
            truth.cookie
        )));
        return;
    };
    for (k, mine, t) in [
        ("window_clamp", last.window_clamp, truth.window_clamp),
        ("rcv_ssthresh", last.rcv_ssthresh, truth.rcv_ssthresh),
    ] {
        if mine != t {
            problems.push(p(format!("{k} {mine} but getsockopt says {t}")));
        }
    }
    let legacy = series == "6.1";
    if legacy {
        if mine.iter().any(|e| e.scaling_ratio.is_some()) {
            problems.push(p("scaling_ratio should be null on 6.1".into()));
        }
        if !run.err.contains("tcp_adv_win_scale") {
            problems.push(p(
                "no tcp_adv_win_scale explanation on a pre-6.6 kernel".into()
            ));
        }
    } else if !mine.iter().any(|e| {
        e.event == EventKind::Ratio
            && e.cause.as_ref().and_then(|c| c.prev_scaling_ratio) == Some(128)
            && e.scaling_ratio != Some(128)
    }) {
        problems.push(p("no ratio event leaving 128".into()));
    }
    let chosen = backend_line(&run.err).0;
    if backend != "auto" && chosen != backend {
        problems.push(p(format!("forced backend but `{chosen}` attached")));
    }
    if chosen == "fentry" || chosen == "kprobe" {
        let init = mine.iter().find(|e| e.event == EventKind::Init);
        if init
            .and_then(|e| e.init.as_ref())
            .and_then(|i| i.space)
            .is_none()
        {
            problems.push(p(
                "the init event lacks tcp_select_initial_window's space/mss".into(),
            ));
        }
    }
}

/// ("fentry", "tcp_measure_rcv_mss:fexit,...") from the tracer's stderr.
fn backend_line(err: &str) -> (String, String) {
    for l in err.lines() {
        if let Some(rest) = l.strip_prefix("tcpwin-trace: backend ") {
            if let Some((b, hooks)) = rest.split_once(" (hooks ") {
                return (b.to_string(), hooks.trim_end_matches(')').to_string());
            }
        }
    }
    (String::new(), String::new())
}

pub fn vm_test(kernels: &str) -> Result<()> {
    toolchain::apt_install(&["qemu-system-x86", "busybox-static", "cpio"])?;
    let tracer = build_static_tracer()?;
    let initrd = initramfs(&tracer)?;
    let mut apt = None;
    let (mut passed, mut failed_n) = (0, 0);
    for series in kernels.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (release, vmlinuz) = kernel(series, &mut apt)?;
        // One boot per backend: under TCG a tracer started right after another one's exit could
        // wait minutes in the guest kernel (probe teardown), so runs never share a kernel.
        let mut out = String::new();
        for b in BACKENDS {
            let t0 = Instant::now();
            let console = boot_with_retries(&vmlinuz, &initrd, &release, b)?;
            eprintln!(
                "vm-test: {release}: backend {b} booted and ran in {:.0} s",
                t0.elapsed().as_secs_f64()
            );
            out.push_str(&console);
        }
        let runs = parse_console(&out);
        let mut problems = Vec::new();
        for b in BACKENDS {
            match runs.get(b) {
                Some(r) => check_run(b, r, series, &mut problems),
                None => problems.push(format!("{b}: did not run")),
            }
        }
        let auto = runs.get("auto");
        let (chosen, hooks) = auto.map(|r| backend_line(&r.err)).unwrap_or_default();
        if series != "6.1" {
            for want in [
                "tcp_measure_rcv_mss:fexit",
                "tcp_rcv_space_adjust:fentry",
                "tcp_select_initial_window:fexit",
            ] {
                if !hooks.contains(want) {
                    problems.push(format!("auto: {want} not attached (hooks {hooks})"));
                }
            }
        } else if !auto.is_some_and(|r| r.err.contains("fell back")) {
            problems.push("auto: 6.1 should report its fallback hooks".into());
        }
        let events = auto.map(|r| r.trace.len()).unwrap_or(0);
        let ratio = if series == "6.1" { "absent" } else { "present" };
        let result = if problems.is_empty() { "pass" } else { "fail" };
        println!(
            "kernel={release} backend={chosen} hooks={hooks} events={events} scaling_ratio={ratio} result={result}"
        );
        for p in &problems {
            println!("  {p}");
        }
        if let Some(r) = auto {
            for l in r
                .err
                .lines()
                .filter(|l| l.contains("note:") || l.contains("not used"))
            {
                println!("  {l}");
            }
        }
        if problems.is_empty() {
            passed += 1;
        } else {
            failed_n += 1;
        }
        let _ = fs::write(cache().join(format!("console-{series}.log")), &out);
    }
    println!("vm-test: {passed} passed, {failed_n} failed");
    if failed_n > 0 {
        bail!("vm-test failed (console logs in {})", cache().display());
    }
    Ok(())
}
