//! `tcpwin-trace lab`: identities and orderings the kernel guarantees (never this kernel's exact
//! numbers), and a clean machine afterwards, also when the lab is interrupted mid-run.
use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_tcpwin-trace")
}

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("LAB TESTS CANNOT RUN: they need root (run `sudo cargo xtask test`). Failing, not skipping.");
    }
}

/// Namespaces of the lab run with this PID.
fn lab_namespaces(pid: u32) -> Vec<String> {
    let prefix = format!("tcpwin-lab-{pid}-");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

fn leftover_processes(parent_marker: &str) -> Vec<String> {
    let out = Command::new("ps")
        .args(["-eo", "pid,args"])
        .output()
        .expect("ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(parent_marker) && l.contains("transfer"))
        .map(str::to_string)
        .collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

fn row<'a>(rows: &'a [Value], mtu: u64, gro: bool, tso: bool, buffer: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["mtu"] == mtu && r["gro"] == gro && r["tso"] == tso && r["buffer"] == buffer)
        .unwrap_or_else(|| panic!("no row {mtu} gro={gro} tso={tso} {buffer}"))
}

#[test]
fn quick_lab_identities_and_orderings() {
    require_root();
    let child = Command::new(exe())
        .args(["lab", "--quick", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the lab");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lab failed: {stderr}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let rows: Vec<Value> = lines
        .iter()
        .filter(|l| l["table"] == "matrix")
        .cloned()
        .collect();
    assert_eq!(rows.len(), 7, "{lines:?}");
    for r in &rows {
        for k in [
            "mtu",
            "gro",
            "tso",
            "buffer",
            "scaling_ratio",
            "first_skb_len",
            "first_skb_truesize",
            "window_clamp",
            "sk_rcvbuf",
            "snd_wnd_peak",
            "throughput_bps",
            "init_rcv_wnd",
        ] {
            assert!(r.get(k).is_some(), "{k} missing: {r}");
        }
        let ratio = u(r, "scaling_ratio");
        // the rule in tcp_measure_rcv_mss
        assert_eq!(
            (u(r, "first_skb_len") << 8) / u(r, "first_skb_truesize"),
            ratio,
            "{r}"
        );
        // the receiver's own TCP_WINDOW_CLAMP agrees with what the tracer read
        assert_eq!(u(r, "window_clamp"), u(r, "getsockopt_window_clamp"), "{r}");
        if r["buffer"] == "pinned-1m" {
            // tcp_win_from_space, exactly
            assert_eq!(u(r, "sk_rcvbuf"), 1 << 20, "{r}");
            assert_eq!(
                u(r, "window_clamp"),
                (u(r, "sk_rcvbuf") * ratio) >> 8,
                "{r}"
            );
        }
        // the sender never saw more window than the receiver's clamp allows
        assert!(u(r, "snd_wnd_peak") <= u(r, "window_clamp"), "{r}");
    }
    let off1500 = u(row(&rows, 1500, false, false, "pinned-1m"), "scaling_ratio");
    let gro1500 = u(row(&rows, 1500, true, false, "pinned-1m"), "scaling_ratio");
    let off9000 = u(row(&rows, 9000, false, false, "pinned-1m"), "scaling_ratio");
    assert!(
        off1500 < gro1500,
        "aggregation raises the ratio: {off1500} vs {gro1500}"
    );
    assert!(
        off1500 < off9000,
        "a bigger MTU raises the ratio: {off1500} vs {off9000}"
    );
    // SO_RCVBUF locks the buffer: the kernel doubles the request and autotuning leaves it
    let so = row(&rows, 1500, false, false, "so_rcvbuf-64k");
    assert_eq!(u(so, "sk_rcvbuf"), 2 * 65536, "{so}");

    let hs: Vec<&Value> = lines.iter().filter(|l| l["table"] == "handshake").collect();
    assert_eq!(hs.len(), 2);
    for h in hs {
        // SYN-ACK window for a fresh socket (ratio 128 or the kernel's default): a multiple of
        // the MSS the window was rounded to, and never more than the buffer allows
        let w = u(h, "syn_ack_window");
        assert!(w > 0 && w <= 65536, "{h}");
    }
    let sweep: Vec<&Value> = lines
        .iter()
        .filter(|l| l["table"] == "tcp_adv_win_scale")
        .collect();
    assert!(sweep.len() >= 5);
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release.split(|c: char| !c.is_ascii_digit());
    let ver: (u32, u32) = (
        v.next().unwrap().parse().unwrap(),
        v.next().unwrap().parse().unwrap(),
    );
    if ver >= (6, 6) {
        let first = &sweep[0]["syn_ack_window"];
        assert!(
            sweep.iter().all(|s| &s["syn_ack_window"] == first),
            "tcp_adv_win_scale is obsolete since 6.6: {sweep:?}"
        );
    }
    assert!(
        lab_namespaces(pid).is_empty(),
        "namespaces left: {:?}",
        lab_namespaces(pid)
    );
    assert!(leftover_processes(exe()).is_empty());
}

/// SIGINT in the middle of a run: the lab stops, and nothing of it remains.
#[test]
fn interrupted_lab_leaves_nothing_behind() {
    require_root();
    let mut child = Command::new(exe())
        .args(["lab", "--full", "--bytes", &(256u64 << 20).to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // wait until its namespaces exist, then interrupt
    let start = Instant::now();
    let pid = child.id();
    while lab_namespaces(pid).is_empty() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(700));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the lab did not stop within 120 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "an interrupted lab reports failure");
    assert!(err.contains("interrupted"), "{err}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        lab_namespaces(pid).is_empty(),
        "namespaces left: {:?}",
        lab_namespaces(pid)
    );
    assert!(
        leftover_processes(exe()).is_empty(),
        "{:?}",
        leftover_processes(exe())
    );
}
