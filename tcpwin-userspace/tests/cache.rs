//! The pinned socket iterator (`ss`, `check` and `top` keep it between runs): a stale or foreign
//! entry is detected and ignored, and what `ss` reports is the same with or without one, and
//! equal to what the connection's owner reads (getsockopt). Needs root and BPF: fails, never
//! skips, without them.
use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    os::fd::AsRawFd,
    path::{Path, PathBuf},
    process::Command,
};

use tcpwin_model::schema::SsLine;

fn exe() -> &'static str {
    tcpwin_lab::harness::bin_exe("tcpwin-trace", env!("CARGO_BIN_EXE_tcpwin-trace"))
}
const LAYOUTS: &str = "/run/tcpwin-trace";
const PINS: &str = "/sys/fs/bpf/tcpwin-trace";

fn require_root() {
    tcpwin_lab::harness::tests_need_root("CACHE TESTS");
}

fn opt<T: Copy>(fd: i32, level: i32, name: i32) -> T {
    tcpwin_lab::endpoints::getsockopt(fd, level, name).expect("getsockopt")
}

/// `ss --json --port P` (with extra environment), checked against the owner of `c`.
fn ss_matches_owner(c: &TcpStream, port: u16, env: &[(&str, &str)]) -> SsLine {
    let out = Command::new(exe())
        .args(["ss", "--json", "--port", &port.to_string()])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let fd = c.as_raw_fd();
    let cookie: u64 = opt(fd, libc::SOL_SOCKET, libc::SO_COOKIE);
    let lines: Vec<SsLine> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let l = lines
        .into_iter()
        .find(|l| l.facts.id.cookie == Some(cookie))
        .unwrap_or_else(|| panic!("socket {cookie:x} not listed\n{err}"));
    let clamp: i32 = opt(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP);
    assert_eq!(l.facts.window_clamp, Some(clamp as u32), "{l:?}");
    assert!(
        l.facts.scaling_ratio.is_some(),
        "the ratio must be read: {l:?}"
    );
    l
}

/// The one layout file and what it records.
fn entry() -> (PathBuf, serde_json::Value) {
    let files: Vec<PathBuf> = std::fs::read_dir(LAYOUTS)
        .expect("a layout file after ss ran")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let v = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    (files[0].clone(), v)
}

fn pin_of(layout: &Path) -> PathBuf {
    let name = layout.file_stem().unwrap().to_string_lossy().to_string();
    Path::new(PINS).join(name).join("iter_tcp")
}

fn clear() {
    let out = Command::new(exe())
        .args(["cache", "--clear"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn connection() -> (TcpStream, TcpStream, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let (mut s, _) = l.accept().unwrap();
    s.write_all(&[3u8; 200_000]).unwrap();
    let mut buf = vec![0u8; 200_000];
    c.read_exact(&mut buf).unwrap();
    (c, s, port)
}

#[test]
fn stale_or_foreign_entries_are_ignored_and_replaced() {
    require_root();
    clear();
    let (c, _s, port) = connection();

    // without an entry: loaded, pinned, recorded
    ss_matches_owner(&c, port, &[]);
    let (file, first) = entry();
    let pin = pin_of(&file);
    assert!(pin.exists(), "{} not pinned", pin.display());
    let status = Command::new(exe()).arg("cache").output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(status.contains("in use"), "{status}");

    // with it: used as it is (a miss would have pinned a new program and rewritten the file)
    ss_matches_owner(&c, port, &[]);
    assert_eq!(entry().1, first, "a valid entry was replaced");

    // a stale file (another kernel's BTF): ignored, replaced by a fresh load
    let mut stale = first.clone();
    stale["btf"] = "0000000000000000".into();
    std::fs::write(&file, serde_json::to_vec(&stale).unwrap()).unwrap();
    ss_matches_owner(&c, port, &[]);
    let (_, now) = entry();
    assert_eq!(now["btf"], first["btf"], "the stale file was not replaced");
    assert_ne!(now["prog_id"], first["prog_id"], "not loaded afresh");

    // a file that records another program than the one pinned: ignored
    let mut foreign = now.clone();
    foreign["prog_id"] = (now["prog_id"].as_u64().unwrap() + 1000).into();
    std::fs::write(&file, serde_json::to_vec(&foreign).unwrap()).unwrap();
    ss_matches_owner(&c, port, &[]);
    let (_, again) = entry();
    assert_ne!(again["prog_id"], foreign["prog_id"]);
    assert_ne!(again["prog_id"], now["prog_id"], "not loaded afresh");

    // something else pinned in its place (a map): ignored
    std::fs::remove_file(&pin).unwrap();
    let made = Command::new("bpftool")
        .args(["map", "create"])
        .arg(&pin)
        .args([
            "type", "array", "key", "4", "value", "4", "entries", "1", "name", "foreign",
        ])
        .status()
        .expect("bpftool");
    assert!(made.success());
    ss_matches_owner(&c, port, &[]);
    let (_, last) = entry();
    assert_ne!(last["prog_id"], again["prog_id"], "not loaded afresh");

    // garbage where the file was: ignored
    std::fs::write(&file, b"not json").unwrap();
    ss_matches_owner(&c, port, &[]);
    assert!(entry().1["prog_id"].is_u64());

    // switched off: neither read nor written
    clear();
    ss_matches_owner(&c, port, &[("TCPWIN_TRACE_CACHE", "off")]);
    assert!(
        std::fs::read_dir(LAYOUTS).map_or(true, |mut d| d.next().is_none()),
        "TCPWIN_TRACE_CACHE=off left an entry"
    );
    // and --clear removes everything
    ss_matches_owner(&c, port, &[]);
    clear();
    assert!(!Path::new(PINS).exists() || std::fs::read_dir(PINS).unwrap().next().is_none());
    assert!(!Path::new(LAYOUTS).exists() || std::fs::read_dir(LAYOUTS).unwrap().next().is_none());
}
