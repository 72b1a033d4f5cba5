//! Embeds the kernel side. The object comes from `cargo xtask build-ebpf`; without it the build
//! stops here and says so.
use std::path::PathBuf;

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
    println!("cargo:rustc-env=TCPWIN_EBPF_OBJ_FNV={:016x}", fnv(&bytes));
}

/// The same hash as `kernel::cache::Fnv` (FNV-1a over 8-byte words, then the tail).
fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        h = (h ^ u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .wrapping_mul(0x0000_0100_0000_01b3);
    }
    for b in words.remainder() {
        h = (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
