//! The kernel-side toolchain. Two paths:
//! - Debian (default, works offline from apt + crates.io): `rustc-web` with the prebuilt `core` for
//!   `bpfel-unknown-none` from `libstd-rust-web-dev-bpf`, and `bpf-linker` built against the same
//!   LLVM major as that rustc (`llvm-N-dev`). `RUSTC_BOOTSTRAP=1` because aya-ebpf uses
//!   `#![feature(asm_experimental_arch)]`.
//! - upstream aya: a rustup nightly with `rust-src` and `-Z build-std=core`, used when present.
use std::{path::PathBuf, process::Command};

use anyhow::{bail, Context, Result};

use crate::run_cmd;

const BPF_LINKER_VERSION: &str = "0.13.0";
const DEBIAN_RUSTC: &str = "/usr/bin/rustc";
const DEBIAN_CARGO: &str = "/usr/bin/cargo";
const DEBIAN_CORE_DIR: &str = "/usr/lib/rustlib/bpfel-unknown-none/lib";
const APT_PACKAGES: [&str; 6] = [
    "rustc-web",
    "cargo-web",
    "libstd-rust-web-dev-bpf",
    "iproute2",
    "ethtool",
    // the kernel's own listing of BPF programs, for the reliability tests
    "bpftool",
];

/// What the tests call besides the tracer: promtool and a real Prometheus (the exporter's
/// format, the rules), the lab's real programs (iperf3, nginx, curl, wget, Debian's python3 for
/// the client that sets its socket options), setpriv (util-linux: the
/// unprivileged runs), bpftool (the kernel's own listing of programs).
pub const TEST_PACKAGES: &[&str] = &[
    "bpftool",
    "ethtool",
    "iproute2",
    "prometheus",
    "iperf3",
    "nginx-light",
    "curl",
    "wget",
    "python3",
    "util-linux",
    // the lab's held-out family: OpenSSH's sshd and ssh over the delay line
    "openssh-server",
    "openssh-client",
    // the container tests: images built offline, run as a user runs them
    "podman",
    "buildah",
    "runc",
    // a podman pod's infra container (its pause process)
    "catatonit",
    "busybox-static",
];

pub enum Toolchain {
    Debian { cargo_bin: PathBuf },
    Nightly { cargo_bin: PathBuf },
}

fn cargo_home() -> PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cargo"))
}

impl Toolchain {
    /// A cargo command for the eBPF workspace, with the host toolchain's variables removed so the
    /// rustup proxy cannot pick stable (E0463: no `core` for bpfel).
    pub fn cargo_command(&self) -> Command {
        let (cargo, nightly) = match self {
            Toolchain::Debian { .. } => (PathBuf::from(DEBIAN_CARGO), false),
            Toolchain::Nightly { .. } => (cargo_home().join("bin/cargo"), true),
        };
        let mut cmd = Command::new(cargo);
        for var in [
            "RUSTUP_TOOLCHAIN",
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTC_WRAPPER",
            "RUSTC",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "CARGO",
        ] {
            cmd.env_remove(var);
        }
        let bin = match self {
            Toolchain::Debian { cargo_bin } | Toolchain::Nightly { cargo_bin } => cargo_bin,
        };
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", bin.display()));
        cmd.env(
            "CARGO_ENCODED_RUSTFLAGS",
            ["-C", "debuginfo=2", "-C", "link-arg=--btf"].join("\x1f"),
        );
        if nightly {
            cmd.env("RUSTUP_TOOLCHAIN", "nightly");
            cmd.args(["-Z", "build-std=core"]);
        } else {
            cmd.env("RUSTC", DEBIAN_RUSTC).env("RUSTC_BOOTSTRAP", "1");
        }
        cmd
    }
}

fn llvm_major() -> Result<String> {
    let out = Command::new(DEBIAN_RUSTC)
        .arg("-vV")
        .output()
        .with_context(|| format!("cannot run {DEBIAN_RUSTC}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .map(str::to_string)
        .context("cannot tell which LLVM /usr/bin/rustc uses")
}

fn debian_core_present() -> bool {
    std::fs::read_dir(DEBIAN_CORE_DIR)
        .map(|d| {
            d.flatten().any(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.starts_with("libcore-") && n.ends_with(".rlib")
            })
        })
        .unwrap_or(false)
}

fn bpf_linker_ok() -> bool {
    Command::new(cargo_home().join("bin/bpf-linker"))
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn nightly_with_rust_src() -> bool {
    Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", "nightly"])
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("rust-src"))
        .unwrap_or(false)
}

fn is_root() -> bool {
    // SAFETY: getuid has no preconditions.
    unsafe { libc_getuid() == 0 }
}

extern "C" {
    #[link_name = "getuid"]
    fn libc_getuid() -> u32;
}

/// Returns a usable toolchain, installing the Debian one when running as root.
pub fn ensure() -> Result<Toolchain> {
    let cargo_bin = cargo_home().join("bin");
    if std::env::var("TCPWIN_EBPF_TOOLCHAIN").as_deref() == Ok("nightly") {
        if !nightly_with_rust_src() {
            bail!("TCPWIN_EBPF_TOOLCHAIN=nightly needs `rustup toolchain install nightly --component rust-src`");
        }
        if !bpf_linker_ok() {
            bail!("bpf-linker is missing: `cargo install bpf-linker`");
        }
        return Ok(Toolchain::Nightly { cargo_bin });
    }
    let ready =
        std::path::Path::new(DEBIAN_CARGO).exists() && debian_core_present() && bpf_linker_ok();
    if !ready {
        if nightly_with_rust_src() && bpf_linker_ok() {
            return Ok(Toolchain::Nightly { cargo_bin });
        }
        if !is_root() {
            bail!(
                "the eBPF toolchain is missing and installing it needs root: run `sudo cargo xtask setup` \
                 (apt: {} llvm-<N>-dev; cargo install bpf-linker@{BPF_LINKER_VERSION})",
                APT_PACKAGES.join(" ")
            );
        }
        setup()?;
    }
    Ok(Toolchain::Debian { cargo_bin })
}

pub fn apt_install(pkgs: &[&str]) -> Result<()> {
    let missing: Vec<&str> = pkgs
        .iter()
        .copied()
        .filter(|p| {
            !Command::new("dpkg-query")
                .args(["-W", "-f=${Status}", p])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
                .unwrap_or(false)
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    println!("xtask: apt-get install {}", missing.join(" "));
    run_cmd(Command::new("apt-get").arg("update").arg("-qq"))?;
    // no service the packages ship is started on this host (openssh-server's sshd would listen
    // on port 22; the lab starts its own daemons in its namespaces): Debian's policy-rc.d
    // convention, 101 = action forbidden, removed again after the install
    const POLICY: &str = "/usr/sbin/policy-rc.d";
    let policy = !std::path::Path::new(POLICY).exists()
        && std::fs::write(POLICY, "#!/bin/sh\nexit 101\n").is_ok()
        && Command::new("chmod").args(["755", POLICY]).status().is_ok();
    let installed = run_cmd(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-q", "--no-install-recommends"])
            .args(&missing),
    );
    if policy {
        let _ = std::fs::remove_file(POLICY);
    }
    installed.context("apt-get install failed (root and Debian's package mirror are needed)")
}

/// Installs the Debian toolchain and bpf-linker (idempotent).
pub fn setup() -> Result<()> {
    if !is_root() {
        bail!("`cargo xtask setup` installs Debian packages: run it as root (sudo)");
    }
    apt_install(&APT_PACKAGES)?;
    let major = llvm_major()?;
    let llvm_dev = format!("llvm-{major}-dev");
    apt_install(&[llvm_dev.as_str()])?;
    if !bpf_linker_ok() {
        println!("xtask: cargo install bpf-linker@{BPF_LINKER_VERSION} (LLVM {major}, ~2 min)");
        run_cmd(
            Command::new(env!("CARGO"))
                .env("LLVM_PREFIX", format!("/usr/lib/llvm-{major}"))
                .args([
                    "install",
                    &format!("bpf-linker@{BPF_LINKER_VERSION}"),
                    "--locked",
                    "--no-default-features",
                    "--features",
                    &format!("llvm-{major}"),
                ]),
        )?;
    }
    if !debian_core_present() {
        bail!("{DEBIAN_CORE_DIR} has no libcore: is libstd-rust-web-dev-bpf installed?");
    }
    println!(
        "xtask: eBPF toolchain ready (rustc-web, LLVM {major}, bpf-linker {BPF_LINKER_VERSION})"
    );
    Ok(())
}
