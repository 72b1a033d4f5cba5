//! `cargo xtask dist`: what an operator installs. A static `tcpwin-trace` (glibc linked in, so it
//! runs on hosts with an older glibc, or none) and a Debian package holding it, the exporter's
//! systemd unit, an example Prometheus job and the man pages (rendered from `--help`).
use std::{path::Path, path::PathBuf, process::Command};

use anyhow::{bail, Context, Result};

use crate::{root, run_cmd};

const TARGET: &str = "x86_64-unknown-linux-gnu";

/// Builds the package from the static binary; returns the .deb's path.
pub fn dist(bin: &Path) -> Result<PathBuf> {
    let version = env!("CARGO_PKG_VERSION");
    let out = root().join("target/dist");
    let stage = out.join("stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    let put = |from: &Path, to: &str, mode: u32| -> Result<()> {
        let dest = stage.join(to);
        std::fs::create_dir_all(dest.parent().expect("a path under stage"))?;
        std::fs::copy(from, &dest)
            .with_context(|| format!("copying {} to {}", from.display(), dest.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(mode))?;
        Ok(())
    };
    put(bin, "usr/bin/tcpwin-trace", 0o755)?;
    put(
        &root().join("dist/tcpwin-exporter.service"),
        "lib/systemd/system/tcpwin-exporter.service",
        0o644,
    )?;
    let doc = "usr/share/doc/tcpwin-trace";
    put(
        &root().join("dist/prometheus.yml"),
        &format!("{doc}/examples/prometheus.yml"),
        0o644,
    )?;
    put(
        &root().join("README.md"),
        &format!("{doc}/README.md"),
        0o644,
    )?;
    // the fleet pack: Prometheus rules (with their unit tests) and the Grafana dashboard
    let pack = "usr/share/tcpwin-trace";
    for f in ["rules.yml", "alerts.yml", "alerts_test.yml"] {
        put(
            &root().join("prometheus").join(f),
            &format!("{pack}/prometheus/{f}"),
            0o644,
        )?;
    }
    put(
        &root().join("grafana/tcpwin-dashboard.json"),
        &format!("{pack}/grafana/tcpwin-dashboard.json"),
        0o644,
    )?;
    std::fs::write(
        stage.join(doc).join("copyright"),
        "tcpwin-trace\nLicense: MIT OR Apache-2.0\n",
    )?;
    // man pages, from the binary's own clap definitions
    let man = stage.join("usr/share/man/man1");
    run_cmd(Command::new(bin).arg("manpages").arg(&man))?;
    for page in std::fs::read_dir(&man)? {
        run_cmd(Command::new("gzip").args(["-9n"]).arg(page?.path()))?;
    }
    let installed_kib: u64 = walk_size(&stage)? / 1024;
    std::fs::create_dir_all(stage.join("DEBIAN"))?;
    std::fs::write(
        stage.join("DEBIAN/control"),
        format!(
            "Package: tcpwin-trace\n\
             Version: {version}\n\
             Architecture: amd64\n\
             Maintainer: tcpwin-trace developers <tcpwin-trace@localhost>\n\
             Section: net\n\
             Priority: optional\n\
             Installed-Size: {installed_kib}\n\
             Description: eBPF tracer of the TCP receive window (scaling_ratio, window_clamp)\n \
             Shows per socket, live, what the kernel's receive window is made of and which\n \
             limit binds it; `tcpwin-trace exporter` serves the same facts to Prometheus\n \
             (systemd unit tcpwin-exporter.service, not enabled by default). Needs a kernel\n \
             with BTF (/sys/kernel/btf/vmlinux) and root or CAP_BPF + CAP_PERFMON.\n"
        ),
    )?;
    let deb = out.join(format!("tcpwin-trace_{version}_amd64.deb"));
    run_cmd(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "--build"])
            .arg(&stage)
            .arg(&deb),
    )?;
    println!("xtask dist: {}", deb.display());
    Ok(deb)
}

/// `tcpwin-trace` with glibc linked in (`+crt-static`, a static PIE), checked to need no
/// dynamic loader: what the package holds and the qemu guests run. Built for an explicit
/// `--target`, so the flag stays off the ordinary build (and off build scripts).
pub fn static_binary(obj: &Path) -> Result<PathBuf> {
    run_cmd(
        Command::new(env!("CARGO"))
            .current_dir(root())
            .env("TCPWIN_EBPF_OBJ", obj)
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .args(["build", "--release", "--target", TARGET])
            .args(["-p", "tcpwin-userspace", "--bin", "tcpwin-trace"]),
    )
    .context("building the static binary (needs libc6-dev for libc.a)")?;
    let bin = root()
        .join("target")
        .join(TARGET)
        .join("release/tcpwin-trace");
    let bytes = std::fs::read(&bin).with_context(|| format!("reading {}", bin.display()))?;
    if has_interpreter(&bytes)? {
        bail!(
            "{} still asks for a dynamic loader (PT_INTERP): not static",
            bin.display()
        );
    }
    Ok(bin)
}

/// Whether a 64-bit little-endian ELF has a PT_INTERP program header (a dynamic loader).
fn has_interpreter(elf: &[u8]) -> Result<bool> {
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        bail!("not a 64-bit little-endian ELF file");
    }
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[32..40].try_into().expect("8 bytes")) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        let Some(h) = elf.get(o..o + 4) else {
            bail!("truncated program headers");
        };
        if u32::from_le_bytes(h.try_into().expect("4 bytes")) == 3 {
            return Ok(true);
        }
    }
    Ok(false)
}

fn walk_size(dir: &Path) -> Result<u64> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let m = e.metadata()?;
        n += if m.is_dir() {
            walk_size(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(n)
}
