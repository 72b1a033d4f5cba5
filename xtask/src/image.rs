//! `cargo xtask image`: an OCI image of the static `tcpwin-trace`, built offline with buildah
//! from scratch (no base image, no registry): the binary alone, its entrypoint the exporter over
//! every namespace, and an OCI archive beside it (`target/dist/tcpwin-trace-VERSION.oci.tar`)
//! to load where the image is run (`podman load -i`, `ctr -n k8s.io images import`).
use std::{path::Path, process::Command};

use anyhow::{bail, Context, Result};

use crate::{root, run_cmd};

/// The image's name in local storage.
pub fn name() -> String {
    format!("localhost/tcpwin-trace:{}", env!("CARGO_PKG_VERSION"))
}

/// One buildah call's standard output, trimmed; an error with its standard error otherwise.
fn buildah(args: &[&str]) -> Result<String> {
    let out = Command::new("buildah")
        .args(args)
        .output()
        .context("cannot run buildah (apt-get install buildah)")?;
    if !out.status.success() {
        bail!(
            "buildah {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Builds the image from the static binary `bin`; returns its name and the archive's path.
pub fn image(bin: &Path) -> Result<(String, std::path::PathBuf)> {
    crate::toolchain::apt_install(&["buildah"])?;
    let name = name();
    let ctr = buildah(&["from", "scratch"])?;
    let built = (|| -> Result<()> {
        let mnt = buildah(&["mount", &ctr])?;
        let dest = Path::new(&mnt).join("usr/bin");
        std::fs::create_dir_all(&dest)?;
        std::fs::copy(bin, dest.join("tcpwin-trace"))
            .with_context(|| format!("copying {} into the image", bin.display()))?;
        buildah(&[
            "config",
            "--entrypoint",
            r#"["/usr/bin/tcpwin-trace"]"#,
            "--cmd",
            r#"["exporter","--listen","0.0.0.0:9943","--netns","all","--by","workload"]"#,
            "--port",
            "9943/tcp",
            "--label",
            &format!(
                "org.opencontainers.image.version={}",
                env!("CARGO_PKG_VERSION")
            ),
            "--label",
            "org.opencontainers.image.title=tcpwin-trace",
            &ctr,
        ])?;
        buildah(&["commit", "--quiet", &ctr, &name])?;
        Ok(())
    })();
    let _ = buildah(&["rm", &ctr]);
    built?;
    let archive = root().join(format!(
        "target/dist/tcpwin-trace-{}.oci.tar",
        env!("CARGO_PKG_VERSION")
    ));
    std::fs::create_dir_all(archive.parent().expect("target/dist"))?;
    let _ = std::fs::remove_file(&archive);
    run_cmd(Command::new("buildah").args([
        "push",
        "--quiet",
        &name,
        &format!("oci-archive:{}:{}", archive.display(), name),
    ]))?;
    println!("xtask image: {name}, and {}", archive.display());
    Ok((name, archive))
}
