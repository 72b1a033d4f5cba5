//! Developer tasks: `cargo xtask setup | build-ebpf | build | test | proof | demo | image | bench |
//! vm-test | dist`.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

mod dist;
mod image;
mod proof;
mod suite;
mod toolchain;
mod vm;

#[derive(Parser)]
#[command(about = "tcpwin-trace developer tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install the kernel-side toolchain (Debian rustc-web, prebuilt bpfel core, LLVM, bpf-linker).
    Setup,
    /// Build the eBPF object (installs the toolchain first when running as root).
    BuildEbpf {
        /// Debug profile (still optimised: the BPF stack is 512 bytes)
        #[arg(long)]
        debug: bool,
    },
    /// Build the eBPF object and the release `tcpwin-trace` binary.
    Build,
    /// The gate, everything CI checks: fmt, clippy and the source checks first (they stop it at
    /// once), then the build, unit and end-to-end tests (root), the lab's smoke rows and the qemu
    /// kernel matrix; deterministic, about 10 minutes on a warm tree.
    Test {
        /// Skip the qemu kernel matrix (vm-test)
        #[arg(long)]
        no_vm: bool,
        /// Extra arguments for `cargo test`, after `--`.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// The proof, the statistical tier (not in CI): every lab scenario repeated with its fix
    /// applied, and the overhead bench; each figure held against docs/proof.json (a regression:
    /// over 20 % worse). Exits non-zero on a missed verdict, an open fix loop or a regression.
    Proof {
        /// Lab runs per scenario row (the README's table is over 5)
        #[arg(long, default_value_t = 5)]
        repeat: u32,
        /// Write this run's figures to docs/proof.json (to commit)
        #[arg(long)]
        save: bool,
        /// Leave the lab out
        #[arg(long)]
        no_lab: bool,
        /// Leave the bench and the soak out
        #[arg(long)]
        no_bench: bool,
    },
    /// Build, then trace a transfer the tool generates itself between two network namespaces.
    Demo,
    /// Measure what tracing costs (paired veth transfers; prints ratios). Extra args go to
    /// `tcpwin-bench` (--runs N, --bytes B, --json, --no-peers, --floor-alongside, --churn N).
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// A static `tcpwin-trace` (no glibc dependency) and a .deb with it, the exporter's systemd
    /// unit and the man pages, in target/dist/
    Dist,
    /// An OCI image of the static binary, built offline with buildah from scratch (in local
    /// storage as localhost/tcpwin-trace:VERSION, and target/dist/tcpwin-trace-VERSION.oci.tar)
    Image,
    /// Boot Debian kernels under qemu and prove every backend there (function hooks included).
    VmTest {
        /// Kernel series to boot (5.10 bullseye, 6.1 bookworm, 6.12 trixie, 7.2 sid)
        #[arg(long, default_value = vm::DEFAULT_KERNELS)]
        kernels: String,
    },
}

fn main() {
    // `cargo xtask` runs this with CARGO_MANIFEST_DIR set to xtask's; passed on to the cargo runs
    // below it reaches build scripts that watch it (ring's), which then rebuild whenever a
    // developer's own `cargo build` or `cargo test` (without it) ran in between: every crate
    // above ring (rustls, the product) compiled again for nothing. The workspace is read from it
    // first: a cached xtask binary's compiled-in path names the checkout that built it.
    ROOT.get_or_init(tcpwin_lab::harness::workspace);
    std::env::remove_var("CARGO_MANIFEST_DIR");
    if let Err(e) = run() {
        eprintln!("xtask: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Setup => toolchain::setup(),
        Cmd::BuildEbpf { debug } => build_ebpf(!debug).map(|_| ()),
        Cmd::Build => build().map(|_| ()),
        Cmd::Test { args, no_vm } => test(&args, no_vm),
        Cmd::Proof {
            repeat,
            save,
            no_lab,
            no_bench,
        } => proof::proof(&proof::Args {
            repeat,
            save,
            no_lab,
            no_bench,
        }),
        Cmd::Demo => demo(),
        Cmd::Image => {
            let obj = build()?;
            image::image(&dist::static_binary(&obj)?).map(|_| ())
        }
        Cmd::Bench { args } => {
            let obj = build()?;
            // the same code without its log statements: what the log code costs while off
            let nolog = build_ebpf_variant(true, Some("nolog"))?;
            toolchain::apt_install(&["bpftrace", "bpftool"])?;
            run_cmd(
                Command::new(root().join("target/release/tcpwin-bench"))
                    .arg("--tracer")
                    .arg(root().join("target/release/tcpwin-trace"))
                    .arg("--obj")
                    .arg(&obj)
                    .arg("--nolog-obj")
                    .arg(&nolog)
                    .args(&args),
            )
        }
        Cmd::Dist => dist::dist(&dist::static_binary(&build_ebpf(true)?)?)
            .map(|deb| println!("{}", deb.display())),
        Cmd::VmTest { kernels } => vm::vm_test(&kernels, &dist::static_binary(&build_ebpf(true)?)?),
    }
}

/// The workspace, where cargo runs xtask from (`cargo xtask`), as read when xtask started.
static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// The workspace, where cargo runs xtask from (`cargo xtask`).
pub fn root() -> PathBuf {
    ROOT.get_or_init(tcpwin_lab::harness::workspace).clone()
}

/// Runs a command, failing with its name and status.
pub fn run_cmd(cmd: &mut Command) -> Result<()> {
    let desc = format!("{cmd:?}");
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {desc}"))?;
    if !status.success() {
        bail!("{desc} failed: {status}");
    }
    Ok(())
}

/// Builds the kernel side and returns the object's path.
fn build_ebpf(release: bool) -> Result<PathBuf> {
    build_ebpf_variant(release, None)
}

/// Builds the kernel side with `feature` (into a target directory of its own, so the
/// product's object stays built) and returns the object's path.
fn build_ebpf_variant(release: bool, feature: Option<&str>) -> Result<PathBuf> {
    let tc = toolchain::ensure()?;
    let dir = root().join("tcpwin-ebpf");
    let profile = if release { "release" } else { "dev" };
    let target_dir = match feature {
        Some(f) => dir.join("target").join(format!("feature-{f}")),
        None => dir.join("target"),
    };
    let mut cmd = tc.cargo_command();
    // --locked: the lock file pins what rustc-web can build (aya-build 0.2.0)
    cmd.current_dir(&dir).args([
        "build",
        "--locked",
        "--target",
        "bpfel-unknown-none",
        "--profile",
        profile,
    ]);
    cmd.arg("--target-dir").arg(&target_dir);
    if let Some(f) = feature {
        cmd.args(["--features", f]);
    }
    run_cmd(&mut cmd).context("building the eBPF object")?;
    let out = target_dir
        .join("bpfel-unknown-none")
        .join(if release { "release" } else { "debug" })
        .join("tcpwin");
    if !out.exists() {
        bail!("the eBPF build succeeded but {} is missing", out.display());
    }
    println!("eBPF object: {}", out.display());
    Ok(out)
}

/// A host cargo command at the workspace root, embedding `obj`. Every build, clippy and test
/// run sets the same `TCPWIN_EBPF_OBJ`: the build script reruns when it changes, and with it the
/// whole product crate.
fn cargo(obj: &Path) -> Command {
    let mut c = Command::new(env!("CARGO"));
    c.current_dir(root()).env("TCPWIN_EBPF_OBJ", obj);
    c
}

/// Builds the eBPF object, then the product (`tcpwin-trace`, which embeds it) and the benchmark
/// (`tcpwin-bench`, which loads its calibration program from it); returns the object's path.
fn build() -> Result<PathBuf> {
    let obj = build_ebpf(true)?;
    build_host(&obj)?;
    Ok(obj)
}

/// The release `tcpwin-trace` embedding `obj`, and `tcpwin-bench`.
fn build_host(obj: &Path) -> Result<()> {
    run_cmd(cargo(obj).args([
        "build",
        "--release",
        "-p",
        "tcpwin-userspace",
        "-p",
        "tcpwin-lab",
    ]))
}

/// The gate. The cheap checks first, each stopping it at once (fmt, clippy, the source and docs
/// checks: a minute on a warm tree); then the whole suite runs even when a test binary fails
/// (`--no-fail-fast`), with the qemu matrix beside it; one summary at the end names what failed
/// and says where the time went.
fn test(extra: &[String], no_vm: bool) -> Result<()> {
    let started = std::time::Instant::now();
    let mut steps = suite::Steps::default();
    steps.time("fmt", || {
        run_cmd(
            Command::new(env!("CARGO"))
                .current_dir(root())
                .args(["fmt", "--all", "--", "--check"]),
        )
        .context("cargo fmt found unformatted code: run `cargo fmt --all`")?;
        run_cmd(Command::new(env!("CARGO")).current_dir(root()).args([
            "fmt",
            "--manifest-path",
            "tcpwin-ebpf/Cargo.toml",
            "--",
            "--check",
        ]))
        .context(
            "the eBPF crate is unformatted: run `cargo fmt --manifest-path tcpwin-ebpf/Cargo.toml`",
        )
    })?;
    let obj = steps.time("kernel side", || build_ebpf(true))?;
    steps.time("clippy", || {
        run_cmd(cargo(&obj).args([
            "clippy",
            "--release",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    // the source and docs checks need no root and no network: layout (imports), docs (links,
    // commands), the unit tests of the pure parts
    steps.time("source and docs checks", || {
        run_cmd(cargo(&obj).args([
            "test",
            "--release",
            "-p",
            "tcpwin-userspace",
            "--test",
            "layout",
            "--test",
            "docs",
        ]))
    })?;
    // the property tests of every parser that reads from outside, in the debug profile: an
    // arithmetic overflow panics there (the release run below would wrap it silently); a bounded
    // number of cases each, the kept failures replayed first
    steps.time("parsers fuzzed", || {
        run_cmd(cargo(&obj).args([
            "test",
            "-p",
            "tcpwin-model",
            "-p",
            "tcpwin-userspace",
            "--test",
            "fuzz",
        ]))
    })?;
    steps.time("build", || build_host(&obj))?;
    // one static build: the package the dist test installs, and the binary the guests run
    let static_bin = steps.time("static build and package", || dist::static_binary(&obj))?;
    let deb = dist::dist(&static_bin)?;
    // what the tests call besides the tracer (installed by `setup` too; checked here for machines
    // that got the toolchain earlier)
    // prometheus: promtool checks the exporter's format and the rules, a real Prometheus scrapes
    // it; iperf3, nginx-light, curl: the lab's real-program scenarios; util-linux: setpriv
    steps.time("test packages", || {
        toolchain::apt_install(toolchain::TEST_PACKAGES)
    })?;
    // End-to-end tests create namespaces with fixed prefixes and load BPF programs: one at a time.
    // the image the container tests run with the DaemonSet's settings
    let (image, _) = steps.time("image", || image::image(&static_bin))?;
    let mut cmd = cargo(&obj);
    cmd.env("TCPWIN_REQUIRE_EBPF", "1")
        .env("TCPWIN_DEB", &deb)
        .env("TCPWIN_IMAGE", &image)
        .args(["test", "--release", "--workspace", "--no-fail-fast"])
        .args(["--", "--test-threads=1"])
        .args(extra);
    // the qemu matrix beside the suite, one guest at a time: a TCG guest keeps one core busy,
    // and the suite is deterministic with one core busy beside it (docs/testing.md); booted two
    // at a time after the suite, it added 90 s to the gate
    let matrix = (!no_vm).then(|| {
        println!("xtask test: qemu kernel matrix (beside the tests, one guest at a time)");
        let bin = static_bin.clone();
        std::thread::spawn(move || vm::vm_test_with(vm::DEFAULT_KERNELS, &bin, 1))
    });
    let mut failed = steps.time("tests", || suite::run(&mut cmd))?;
    if let Err(e) = steps.time("check without the kernel side", check_without_kernel_side) {
        failed.step("cargo check without the eBPF object", format!("{e:#}"));
    }
    match matrix {
        None => println!("xtask: vm-test skipped (--no-vm)"),
        Some(m) => {
            // what the matrix took past the suite
            let r = steps.time("qemu kernel matrix, after the tests", || {
                m.join()
                    .map_err(|_| anyhow::anyhow!("the qemu matrix's thread panicked"))
            })?;
            if let Err(e) = r {
                failed.step("vm-test", format!("{e:#}"));
            }
        }
    }
    println!("xtask test: where the time went: {}", steps.said());
    let took = started.elapsed().as_secs();
    if failed.is_empty() {
        println!(
            "xtask test: all passed in {} min {} s",
            took / 60,
            took % 60
        );
        return Ok(());
    }
    let headline = failed.headline();
    println!(
        "xtask test: {headline} failed (after {} min {} s):",
        took / 60,
        took % 60
    );
    for f in failed.lines() {
        println!("  {f}");
    }
    bail!("{headline} failed")
}

/// A fresh clone's `cargo check` works before the kernel side is built, and says how to get it
/// (build.rs embeds an empty stand-in the binary refuses to load).
fn check_without_kernel_side() -> Result<()> {
    // a target directory of its own: in the shared one this check reran the product's build
    // script without the object, and the next gate rebuilt the product twice (145 s) for it
    let out = Command::new(env!("CARGO"))
        .current_dir(root())
        .env("TCPWIN_EBPF_OBJ", "/nonexistent/tcpwin-ebpf-object")
        .args(["check", "--release", "-p", "tcpwin-userspace"])
        .arg("--target-dir")
        .arg(root().join("target/no-kernel-side"))
        .output()
        .context("cannot run cargo check")?;
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("it failed: {err}");
    }
    if !err.contains("cargo xtask build") {
        bail!("it did not say how to get the kernel side: {err}");
    }
    println!("xtask: cargo check without the eBPF object: builds, and says `cargo xtask build`");
    Ok(())
}

fn demo() -> Result<()> {
    build()?;
    run_cmd(
        Command::new(root().join("target/release/tcpwin-trace"))
            .args(["demo"])
            .current_dir(root()),
    )
}
