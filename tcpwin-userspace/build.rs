//! Embeds the kernel side. The object comes from `cargo xtask build-ebpf`; without it the build
//! stops here and says so.
use std::path::PathBuf;

/// The cache's hash, the same code (kernel/cache.rs names the object by it).
#[path = "src/kernel/fnv.rs"]
mod fnv;

fn main() {
    println!("cargo:rerun-if-env-changed=TCPWIN_EBPF_OBJ");
    let default = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tcpwin-ebpf/target/bpfel-unknown-none/release/tcpwin");
    let obj = std::env::var_os("TCPWIN_EBPF_OBJ")
        .map(PathBuf::from)
        .unwrap_or(default);
    println!("cargo:rerun-if-changed={}", obj.display());
    if !obj.exists() {
        eprintln!();
        eprintln!("error: the eBPF object {} is missing.", obj.display());
        eprintln!("       Build it first with `cargo xtask build-ebpf` (or `cargo xtask build`),");
        eprintln!("       or point TCPWIN_EBPF_OBJ at an object you built.");
        std::process::exit(1);
    }
    let obj = obj
        .canonicalize()
        .expect("canonical path of an existing file");
    println!("cargo:rustc-env=TCPWIN_EBPF_OBJ_PATH={}", obj.display());
    // the object's identity for the pinned iterator's cache (kernel/cache.rs), hashed here so
    // that a command never reads the 5 MB it embeds only to name it
    let bytes = std::fs::read(&obj).expect("the eBPF object is readable");
    println!(
        "cargo:rustc-env=TCPWIN_EBPF_OBJ_FNV={:016x}",
        fnv::hash(&bytes)
    );
}
