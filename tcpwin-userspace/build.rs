//! Embeds the kernel side. The object comes from `cargo xtask build-ebpf`; without it (a fresh
//! clone's `cargo check`) the product builds with an empty stand-in it refuses to load, and the
//! build says how to get the real one.
use std::path::PathBuf;

/// The cache's hash, the same code (kernel/cache.rs names the object by it).
#[path = "src/kernel/fnv.rs"]
mod fnv;

fn main() {
    println!("cargo:rerun-if-env-changed=TCPWIN_EBPF_OBJ");
    // set by cargo for the build script as it runs (a path compiled in would name the checkout
    // that built a cached script)
    let default = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo"))
        .join("../tcpwin-ebpf/target/bpfel-unknown-none/release/tcpwin");
    let obj = std::env::var_os("TCPWIN_EBPF_OBJ")
        .map(PathBuf::from)
        .unwrap_or(default);
    println!("cargo:rerun-if-changed={}", obj.display());
    if !obj.exists() {
        // `cargo check` / `cargo build` on a fresh clone: build the product without its kernel
        // side (an empty object it refuses to load, saying how to get the real one)
        println!(
            "cargo:warning=the eBPF object {} is missing: this build has no kernel side (get it with `cargo xtask build`, or point TCPWIN_EBPF_OBJ at an object you built)",
            obj.display()
        );
        let stub = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
            .join("tcpwin-no-kernel-side.o");
        std::fs::write(&stub, b"").expect("writing the stub object into OUT_DIR");
        println!("cargo:rustc-env=TCPWIN_EBPF_OBJ_PATH={}", stub.display());
        println!(
            "cargo:rustc-env=TCPWIN_EBPF_OBJ_FNV={:016x}",
            fnv::hash(b"")
        );
        return;
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
