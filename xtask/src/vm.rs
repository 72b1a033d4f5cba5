//! `cargo xtask vm-test`: the function-hook backends on real kernels this host cannot run them on.
//!
//! Debian cloud kernels (bullseye 5.10, bookworm 6.1, trixie 6.12, sid 7.2) are downloaded with a private apt
//! configuration (download + extract only: the host's apt state is untouched) into `.cache/vm`,
//! a static `tcpwin-trace` goes into a busybox initramfs, and each kernel boots under qemu TCG
//! (KVM does not work here). Inside, for each backend (auto, fentry, kprobe, tracepoint), the
//! tracer watches a loopback transfer made by its own built-in receiver/sender; the host then
//! checks the tracer's JSON against the receiver's getsockopt ground truth. One more boot per
//! kernel runs `ss --json` (iterator, then sock_diag), `check --json` and one exporter scrape
//! against a connection the guest keeps open and both ends' getsockopt.
use std::{
    collections::BTreeMap,
    fs,
    io::Read,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use tcpwin_lab::rows::EndpointReport;
use tcpwin_model::{
    kind::EventKind,
    schema::{parse_line, EventLine, Line},
};

use crate::{root, run_cmd, toolchain};

pub const DEFAULT_KERNELS: &str = "5.10,6.1,6.12,7.2";

const BACKENDS: [&str; 4] = ["auto", "fentry", "tracepoint", "kprobe"];

/// Debian suite holding each kernel series, and how its package is named.
fn suite_for(series: &str) -> Result<(&'static str, String)> {
    Ok(match series {
        "5.10" => ("bullseye", "linux-image-5.10.0-".into()),
        "6.1" => ("bookworm", "linux-image-6.1.0-".into()),
        "6.12" => ("trixie", "linux-image-6.12.".into()),
        "7.2" => ("sid", "linux-binary-7.2.".into()),
        other => bail!("unknown kernel series {other}: choose among 5.10, 6.1, 6.12, 7.2"),
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
        let list: String = ["bullseye", "bookworm", "trixie", "sid"]
            .iter()
            .map(|s| format!("deb {key} {mirror} {s} main\n"))
            .collect();
        // a suite added since the lists were fetched needs them fetched again
        let changed = fs::read_to_string(dir.join("sources.list")).ok().as_deref() != Some(&list);
        fs::write(dir.join("sources.list"), &list)?;
        let apt = PrivateApt { dir };
        let fresh = apt
            .dir
            .join("state/lists")
            .read_dir()
            .map(|d| d.count() > 1)
            .unwrap_or(false);
        if !fresh || changed {
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
    let find = |dir: &Path| find_file(dir, "vmlinuz*");
    if let Some(v) = find(&dir.join("x")) {
        if let Ok(rel) = fs::read_to_string(dir.join("release")) {
            if !diag_modules(&dir).is_empty() || dir.join("no-modules").exists() {
                return Ok((rel.trim().to_string(), v));
            }
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
    // from 7.x the modules are a package of their own
    if let Some(rest) = pkg.strip_prefix("linux-binary-") {
        let modules = format!("linux-modules-{rest}");
        let mdir = dir.join("modules");
        apt.download(&modules, &mdir)?;
        for e in fs::read_dir(&mdir)?.flatten() {
            run_cmd(
                Command::new("dpkg")
                    .arg("-x")
                    .arg(e.path())
                    .arg(dir.join("x")),
            )?;
        }
        let _ = fs::remove_dir_all(&mdir);
    }
    if diag_modules(&dir).is_empty() {
        fs::write(dir.join("no-modules"), "")?;
    }
    let v = find(&dir.join("x")).context("no vmlinuz in the kernel package")?;
    let release = pkg
        .trim_start_matches("linux-image-")
        .trim_start_matches("linux-binary-")
        .to_string();
    fs::write(dir.join("release"), &release)?;
    Ok((release, v))
}

/// The kernel package's `inet_diag` and `tcp_diag` modules (in load order), where they are
/// modules.
fn diag_modules(dir: &Path) -> Vec<PathBuf> {
    ["inet_diag", "tcp_diag"]
        .iter()
        .filter_map(|m| find_file(&dir.join("x"), &format!("{m}.ko*")))
        .collect()
}

/// The first file under `dir` whose name matches the shell pattern `name`.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let out = Command::new("find")
        .arg(dir)
        .args(["-name", name, "-type", "f"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(PathBuf::from)
}

/// The initramfs with this kernel's diag modules appended (as `/modules/NAME.ko`,
/// decompressed: busybox's insmod reads plain modules); the kernel unpacks concatenated archives.
fn kernel_initrd(series: &str, base: &Path) -> Result<PathBuf> {
    let kdir = cache().join(format!("kernel-{series}"));
    let mods = diag_modules(&kdir);
    let out = cache().join(format!("initrd-{series}.cpio.gz"));
    let mut bytes = fs::read(base)?;
    if !mods.is_empty() {
        let stage = cache().join(format!("modules-{series}"));
        let _ = fs::remove_dir_all(&stage);
        fs::create_dir_all(stage.join("modules"))?;
        for m in &mods {
            let name = m
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            let plain = name
                .trim_end_matches(".xz")
                .trim_end_matches(".zst")
                .to_string();
            let to = stage.join("modules").join(&plain);
            let decompress = if name.ends_with(".xz") {
                Some("xz")
            } else if name.ends_with(".zst") {
                Some("zstd")
            } else {
                None
            };
            match decompress {
                Some(tool) => {
                    let o = Command::new(tool).arg("-dc").arg(m).output()?;
                    if !o.status.success() {
                        bail!("{tool} -dc {} failed", m.display());
                    }
                    fs::write(&to, o.stdout)?;
                }
                None => {
                    fs::copy(m, &to)?;
                }
            }
        }
        let o = Command::new("sh")
            .current_dir(&stage)
            .arg("-c")
            .arg("find modules | cpio -o -H newc --quiet | gzip -1")
            .output()?;
        if !o.status.success() {
            bail!("packing the diag modules failed");
        }
        bytes.extend_from_slice(&o.stdout);
    }
    fs::write(&out, bytes)?;
    Ok(out)
}

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t tmpfs tmp /tmp
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
# sock_diag (ss --source sock-diag, and the fallback where the iterator is refused)
for m in inet_diag tcp_diag; do [ -f /modules/$m.ko ] && insmod /modules/$m.ko; done
ip link set lo up
echo "@@KERNEL $(uname -r)"
for b in $(sed -n 's/.*tcpwin.backends=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' '); do
  echo "@@BEGIN $b"
  if [ "$b" = commands ]; then
    # ss, check and one exporter scrape against the ground truth of a connection kept open
    /tcpwin-trace transfer recv --listen 127.0.0.1:5401 --linger-ms 120000 --keep-open > /tmp/rx.json &
    R=$!
    sleep 0.3
    /tcpwin-trace transfer send --connect 127.0.0.1:5401 --bytes 4000000 --report --report-early > /tmp/tx.json &
    i=0
    while ! grep -q cookie /tmp/rx.json || ! grep -q cookie /tmp/tx.json; do
      i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.1
    done
    echo "@@SS"; /tcpwin-trace ss --json --port 5401 2> /tmp/ss.err; echo "@@SSEXIT $?"
    echo "@@SSERR"; cat /tmp/ss.err
    echo "@@DIAG"; /tcpwin-trace ss --json --port 5401 --source sock-diag 2> /tmp/diag.err; echo "@@DIAGEXIT $?"
    echo "@@DIAGERR"; cat /tmp/diag.err
    echo "@@CHECK"; /tcpwin-trace check --json 2> /tmp/check.err; echo "@@CHECKEXIT $?"
    echo "@@CHECKERR"; cat /tmp/check.err
    # --addr: the exporter's kernel counters' address filter verified too
    /tcpwin-trace exporter --listen 127.0.0.1:9943 --port 5401 --addr 127.0.0.1 2> /tmp/exp.err &
    E=$!
    i=0
    while ! wget -q -O /tmp/metrics http://127.0.0.1:9943/metrics 2>/dev/null; do
      i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.2
    done
    echo "@@METRICS"; cat /tmp/metrics
    echo "@@EXPERR"; cat /tmp/exp.err
    kill $E; kill $R
    # --pid follows forks: a shell traced before it forks runs a client once the trace is on
    # (the client is not its last command, so the shell forks it rather than exec it); over
    # IPv6 with --addr ::1, so the address filter's IPv6 branch is verified too
    /tcpwin-trace transfer recv --listen [::1]:5402 > /tmp/frx.json &
    FR=$!
    sh -c 'while [ ! -e /tmp/go ]; do sleep 0.1; done; /tcpwin-trace transfer send --connect [::1]:5402 --bytes 200000 --report; true' > /tmp/ftx.json &
    F=$!
    /tcpwin-trace --backend tracepoint --pid $F --addr ::1 --json > /tmp/fork.json 2> /tmp/fork.err &
    FT=$!
    i=0
    while ! grep -q -e '^tcpwin-trace: tracing' -e 'error' /tmp/fork.err; do
      i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1
    done
    touch /tmp/go
    wait $F; wait $FR
    sleep 0.5
    kill -INT $FT; wait $FT
    echo "@@FORK"; cat /tmp/fork.json
    echo "@@FORKERR"; cat /tmp/fork.err
    echo "@@FORKTX"; cat /tmp/ftx.json
    echo "@@RX"; cat /tmp/rx.json; cat /tmp/tx.json
    echo "@@END $b"
    continue
  fi
  # --addr: the kernel side's address filter (its IPv4 branch) verified on every backend
  TCPWIN_VERIFIER_LOG=1 /tcpwin-trace --backend $b --json --port 5400 --addr 127.0.0.0/8 > /tmp/trace.json 2> /tmp/trace.err &
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

/// Every backend of one kernel booted in turn, then the commands; the console checked.
fn one_kernel(series: &str, release: &str, vmlinuz: &Path, initrd: &Path) -> Result<KernelRun> {
    let mut lines = Vec::new();
    // One boot per backend: under TCG a tracer started right after another one's exit could
    // wait minutes in the guest kernel (probe teardown), so runs never share a kernel.
    let mut out = String::new();
    for b in BACKENDS {
        let t0 = Instant::now();
        let console = boot_with_retries(vmlinuz, initrd, release, b)?;
        eprintln!(
            "vm-test: {release}: backend {b} booted and ran in {:.0} s",
            t0.elapsed().as_secs_f64()
        );
        out.push_str(&console);
    }
    // ss, check and the exporter, against the guest's own connection
    let t0 = Instant::now();
    let console = boot_with_retries(vmlinuz, initrd, release, "commands")?;
    eprintln!(
        "vm-test: {release}: ss, check, exporter ran in {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    out.push_str(&console);
    let runs = parse_console(&out);
    let mut problems = Vec::new();
    for b in BACKENDS {
        match runs.get(b) {
            Some(r) => check_run(b, r, series, &mut problems),
            None => problems.push(format!("{b}: did not run")),
        }
    }
    check_commands(series, &out, &mut problems);
    let auto = runs.get("auto");
    let (chosen, hooks) = auto.map(|r| backend_line(&r.err)).unwrap_or_default();
    if !before_6_6(series) {
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
        problems.push(format!("auto: {series} should report its fallback hooks"));
    }
    let events = auto.map(|r| r.trace.len()).unwrap_or(0);
    let ratio = if before_6_6(series) {
        "absent"
    } else {
        "present"
    };
    let result = if problems.is_empty() { "pass" } else { "fail" };
    lines.push(format!(
        "kernel={release} backend={chosen} hooks={hooks} events={events} scaling_ratio={ratio} result={result}"
    ));
    for p in &problems {
        lines.push(format!("  {p}"));
    }
    if let Some(r) = auto {
        for l in r
            .err
            .lines()
            .filter(|l| l.contains("note:") || l.contains("not used"))
        {
            lines.push(format!("  {l}"));
        }
    }
    Ok(KernelRun {
        lines,
        passed: problems.is_empty(),
        console: out,
    })
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
    let mine = events_of(&run.trace, truth);
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
    let legacy = before_6_6(series);
    if legacy {
        if mine.iter().any(|e| e.scaling_ratio.is_some()) {
            problems.push(p(format!("scaling_ratio should be null on {series}")));
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
    // tcp:tcp_rcvbuf_grow came in 6.16: the tracepoint backend says it goes without
    if backend == "tracepoint" {
        let grow = backend_line(&run.err).1.contains("tcp_rcvbuf_grow");
        let said = run.err.contains("buffer growth (6.16+) not traced");
        if series == "7.2" && !grow {
            problems.push(p("tcp_rcvbuf_grow not attached on 7.2".into()));
        }
        if series != "7.2" && (grow || !said) {
            problems.push(p(format!(
                "tcp_rcvbuf_grow on {series}: attached {grow}, absence said {said}"
            )));
        }
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

/// The events of the socket `truth` reports: by cookie; before 5.12 a tracing program cannot
/// ask for one, and a socket's events come before its owner's SO_COOKIE assigned it: those
/// match by their addresses (the local one, and the peer's where the report has it: the lab's
/// sender reports none).
fn events_of<'a>(trace: &'a [EventLine], truth: &EndpointReport) -> Vec<&'a EventLine> {
    let addr = |a: Option<std::net::IpAddr>, p: u16| {
        a.map(|a| std::net::SocketAddr::new(a, p).to_string())
    };
    trace
        .iter()
        .filter(|e| {
            e.id.cookie == Some(truth.cookie)
                || (e.id.cookie.is_none()
                    && truth.local.is_some()
                    && addr(e.id.laddr, e.id.lport) == truth.local
                    && (truth.peer.is_none() || addr(e.id.raddr, e.id.rport) == truth.peer))
        })
        .collect()
}

/// The `commands` run's sections, as the console printed them (`@@NAME` ... up to the next).
fn sections(out: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let Some(start) = out.find("@@BEGIN commands") else {
        return m;
    };
    let body = &out[start..];
    let body = &body[..body.find("@@END commands").unwrap_or(body.len())];
    let mut cur = String::new();
    for line in body.lines().skip(1) {
        let line = line.trim_end_matches('\r');
        if let Some(name) = line.strip_prefix("@@") {
            let (name, rest) = name.split_once(' ').unwrap_or((name, ""));
            cur = name.to_string();
            m.insert(cur.clone(), rest.to_string());
            continue;
        }
        let e = m.entry(cur.clone()).or_default();
        e.push_str(line);
        e.push('\n');
    }
    m
}

/// Series whose kernels predate 6.6: no `tcp_sock.scaling_ratio`, no tcpi_rcv_wnd (6.2), and
/// `auto` falls back to the older hooks.
fn before_6_6(series: &str) -> bool {
    matches!(series, "5.10" | "6.1")
}

/// A section's lines that parse as `T` (JSON, one per line).
fn json_lines<T: serde::de::DeserializeOwned>(s: &BTreeMap<String, String>, name: &str) -> Vec<T> {
    s.get(name)
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Checks `ss --json` (iterator and sock_diag), `check --json` and one exporter scrape in the
/// guest against the ground truth of the connection the guest kept open (both ends' getsockopt).
fn check_commands(series: &str, out: &str, problems: &mut Vec<String>) {
    use tcpwin_model::{check::CheckReport, schema::SsLine};
    let s = sections(out);
    let p = |m: String| format!("commands: {m}");
    let legacy = before_6_6(series);
    let truths: Vec<EndpointReport> = json_lines(&s, "RX");
    // the receiver's line first, then the sender's
    let [rx, tx] = truths.as_slice() else {
        problems.push(p(format!(
            "the endpoints reported {} sockets, not 2",
            truths.len()
        )));
        return;
    };
    for (name, exit, err, source) in [
        ("SS", "SSEXIT", "SSERR", "iterator"),
        ("DIAG", "DIAGEXIT", "DIAGERR", "sock_diag"),
    ] {
        let err = s.get(err).cloned().unwrap_or_default();
        if s.get(exit).map(|e| e.trim()) != Some("0") {
            problems.push(p(format!("ss ({source}) failed: {}", err.trim())));
            continue;
        }
        let ls: Vec<SsLine> = json_lines(&s, name);
        let Some(l) = ls.iter().find(|l| l.facts.id.cookie == Some(rx.cookie)) else {
            problems.push(p(format!(
                "ss ({source}) does not list the receiver {:x}",
                rx.cookie
            )));
            continue;
        };
        if l.source != source {
            problems.push(p(format!("ss read {} instead of {source}", l.source)));
        }
        if l.facts.rcv_ssthresh != Some(rx.rcv_ssthresh) {
            problems.push(p(format!(
                "ss ({source}) rcv_ssthresh {:?}, getsockopt {}",
                l.facts.rcv_ssthresh, rx.rcv_ssthresh
            )));
        }
        match source {
            "iterator" => {
                if l.facts.window_clamp != Some(rx.window_clamp) {
                    problems.push(p(format!(
                        "ss window_clamp {:?}, getsockopt {}",
                        l.facts.window_clamp, rx.window_clamp
                    )));
                }
                if legacy != l.facts.scaling_ratio.is_none() {
                    problems.push(p(format!(
                        "ss scaling_ratio {:?} on {series}",
                        l.facts.scaling_ratio
                    )));
                }
                if legacy && !err.contains("scaling_ratio") {
                    problems.push(p(format!(
                        "ss does not say scaling_ratio is absent: {}",
                        err.trim()
                    )));
                }
            }
            _ => {
                // tcp_info's tcpi_rcv_wnd came in 6.2: null before, and said
                if legacy != l.facts.rcv_wnd.is_none() || (legacy && !err.contains("tcpi_rcv_wnd"))
                {
                    problems.push(p(format!(
                        "sock_diag rcv_wnd {:?} on {series} (stderr: {})",
                        l.facts.rcv_wnd,
                        err.trim()
                    )));
                }
                // what sock_diag cannot give is null, and said
                if l.facts.window_clamp.is_some() || !err.contains("window_clamp") {
                    problems.push(p(format!(
                        "sock_diag window_clamp {:?} (stderr: {})",
                        l.facts.window_clamp,
                        err.trim()
                    )));
                }
            }
        }
    }
    match s
        .get("CHECK")
        .and_then(|t| serde_json::from_str::<CheckReport>(t.trim()).ok())
    {
        Some(c) => {
            let want = if legacy {
                tcpwin_model::check::Era::AdvWinScale
            } else {
                tcpwin_model::check::Era::MeasuredRatio
            };
            if c.era != want {
                problems.push(p(format!("check era {:?} on {series}", c.era)));
            }
        }
        None => problems.push(p(format!(
            "check --json did not parse (exit {}): {}",
            s.get("CHECKEXIT").map(|e| e.trim()).unwrap_or("?"),
            s.get("CHECKERR").map(|e| e.trim()).unwrap_or("")
        ))),
    }
    check_fork(&s, problems);
    // the exporter, --port of the connection: both ends, and their window_clamp summed
    let metrics = s.get("METRICS").cloned().unwrap_or_default();
    let value = |name: &str| -> Option<f64> {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    let count = value("tcpwin_sockets_by_window_clamp_bytes{upper=\"+Inf\"}");
    let sum = value("tcpwin_sockets_window_clamp_bytes");
    let want = (rx.window_clamp + tx.window_clamp) as f64;
    if count != Some(2.0) || sum != Some(want) {
        problems.push(p(format!(
            "exporter: {count:?} sockets summing window_clamp {sum:?}, getsockopt {want} over 2 (stderr: {})",
            s.get("EXPERR").map(|e| e.trim()).unwrap_or("")
        )));
    }
}

/// `--pid` of a shell in the guest: the client it forked once the trace was on is traced from
/// its init, through the fork hook.
fn check_fork(s: &BTreeMap<String, String>, problems: &mut Vec<String>) {
    let p = |m: String| format!("commands: {m}");
    // --pid of a shell: the client it forked once the trace was on is traced from its init
    let fork_err = s.get("FORKERR").cloned().unwrap_or_default();
    let fork_trace: Vec<EventLine> = s
        .get("FORK")
        .map(|t| {
            t.lines()
                .filter_map(|l| match parse_line(l) {
                    Ok(Line::Event(e)) => Some(*e),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let clients: Vec<EndpointReport> = json_lines(s, "FORKTX");
    if !backend_line(&fork_err)
        .1
        .contains("sched_process_fork:tp_btf")
    {
        problems.push(p(format!(
            "--pid: the fork hook did not attach: {}",
            fork_err.trim()
        )));
    }
    match clients.first() {
        Some(c) => {
            let first = events_of(&fork_trace, c).first().map(|e| e.event);
            if first != Some(EventKind::Init) {
                problems.push(p(format!(
                    "--pid: the forked client's connection {:x} is not traced from its init (first event {first:?}; stderr: {})",
                    c.cookie,
                    fork_err.trim()
                )));
            }
        }
        None => problems.push(p("--pid: the forked client reported nothing".into())),
    }
}

/// ("fentry", "tcp_measure_rcv_mss:fexit,...") from the tracer's stderr.
fn backend_line(err: &str) -> (String, String) {
    for l in err.lines() {
        if let Some(rest) = l.strip_prefix("tcpwin-trace: backend ") {
            if let Some((b, hooks)) = rest.split_once(" (hooks ") {
                let hooks = hooks.split_once(')').map_or(hooks, |(h, _)| h);
                return (b.to_string(), hooks.to_string());
            }
        }
    }
    (String::new(), String::new())
}

/// Boots each kernel with `tracer` (the static binary `cargo xtask dist` builds: one static
/// build serves the package and the guests).
/// Guests booted at once: each runs on one vCPU (`-smp 1`) and this machine kind has two.
const LANES: usize = 2;

/// One kernel's boots, checked: the report lines and whether it passed, and its console.
struct KernelRun {
    lines: Vec<String>,
    passed: bool,
    console: String,
}

pub fn vm_test(kernels: &str, tracer: &Path) -> Result<()> {
    vm_test_with(kernels, tracer, LANES)
}

/// [`vm_test`] with `lanes` guests booted at once (the gate boots one at a time beside its
/// suite).
pub fn vm_test_with(kernels: &str, tracer: &Path, lanes: usize) -> Result<()> {
    toolchain::apt_install(&["qemu-system-x86", "busybox-static", "cpio"])?;
    let initrd = initramfs(tracer)?;
    let mut apt = None;
    // the downloads one after the other (one apt state), then the boots two at a time
    let mut prepared = Vec::new();
    for series in kernels.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (release, vmlinuz) = kernel(series, &mut apt)?;
        let initrd = kernel_initrd(series, &initrd)?;
        prepared.push((series.to_string(), release, vmlinuz, initrd));
    }
    let mut runs: Vec<Option<Result<KernelRun>>> = prepared.iter().map(|_| None).collect();
    std::thread::scope(|s| {
        let lanes: Vec<_> = (0..lanes)
            .map(|lane| {
                let prepared = &prepared;
                s.spawn(move || {
                    prepared
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| i % lanes == lane)
                        .map(|(i, (series, release, vmlinuz, initrd))| {
                            (i, one_kernel(series, release, vmlinuz, initrd))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for lane in lanes {
            for (i, r) in lane.join().expect("a vm-test lane panicked") {
                runs[i] = Some(r);
            }
        }
    });
    let (mut passed, mut failed_n) = (0, 0);
    for ((series, ..), run) in prepared.iter().zip(runs) {
        let run = run.expect("every kernel ran")?;
        for l in &run.lines {
            println!("{l}");
        }
        if run.passed {
            passed += 1;
        } else {
            failed_n += 1;
        }
        let _ = fs::write(cache().join(format!("console-{series}.log")), &run.console);
    }
    println!("vm-test: {passed} passed, {failed_n} failed");
    if failed_n > 0 {
        bail!("vm-test failed (console logs in {})", cache().display());
    }
    Ok(())
}
