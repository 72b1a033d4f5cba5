//! The benchmark runs end to end and reports every figure it promises, in every mode. A smoke
//! test of the measuring tool, not a performance test: the numbers are only checked for being
//! there and sane (hits counted, no drops), never against a target.
use std::process::Command;

use serde_json::Value;

#[test]
fn bench_reports_every_figure_per_mode() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("BENCH SMOKE TEST CANNOT RUN: it needs root (run `sudo cargo xtask test`). Failing, not skipping.");
    }
    // the tracer is built beside the bench by the same `cargo test --workspace` (target/<profile>)
    let tracer = std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("tcpwin-trace");
    assert!(
        tracer.exists(),
        "{} missing: build the workspace (`cargo xtask build`)",
        tracer.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_tcpwin-bench"))
        .arg("--tracer")
        .arg(&tracer)
        .args([
            "--runs",
            "1",
            "--bytes",
            "67108864",
            "--no-peers",
            "--floor-alongside",
            "--churn",
            "300",
            "--ss-sockets",
            "2000",
            "--json",
        ])
        .output()
        .expect("run tcpwin-bench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {err}");
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let mode = |m: &str| {
        rows.iter()
            .find(|r| r["mode"] == m)
            .unwrap_or_else(|| panic!("no `{m}` row in {rows:?}"))
    };
    for m in ["empty-tp", "default", "raw"] {
        for k in [
            "bpf_ns_per_hit",
            "bpf_ms_per_gb",
            "bpf_cpu_share",
            "throughput_ratio",
            "cpu_per_gb_ratio",
            "drops",
            "events_per_sec",
            "changes_seen",
            "tracer_cpu_share",
            "tracer_rss_bytes",
        ] {
            assert!(mode(m).get(k).is_some(), "{m}: key {k} missing");
        }
    }
    let d = mode("default");
    assert_eq!(d["drops"], 0, "{d}");
    assert!(d["bpf_ns_per_hit"].as_f64().unwrap() > 0.0, "{d}");
    assert!(d["tracer_rss_bytes"].as_u64().unwrap() > 0, "{d}");
    assert!(d["changes_seen"].as_u64().unwrap() > 0, "{d}");
    let probe = &d["bpf_programs"]["tcp_probe"];
    assert!(probe["hits"].as_u64().unwrap() > 0, "{d}");
    assert!(
        probe["ns_above_floor"].is_f64(),
        "floor alongside missing: {d}"
    );
    // the floor program is reported, not counted as the tracer's own cost
    assert!(
        d["bpf_programs"]["calib_tcp_probe"]["hits"]
            .as_u64()
            .unwrap()
            > 0
    );
    // ss over many sockets: both commands timed, every socket listed (the bench checks)
    let ss = rows
        .iter()
        .find(|r| r["workload"] == "ss")
        .unwrap_or_else(|| panic!("no ss row in {rows:?}"));
    for k in ["tool_ms", "tool_rss_mib", "ss_ms", "ss_rss_mib"] {
        assert!(ss[k].as_f64().unwrap() > 0.0, "ss: {k}: {ss}");
    }
    // short connections: per-connection cost, every connection's state changes seen, no drops
    let churn_of = |mode: &str| {
        rows.iter()
            .find(|r| r["workload"] == "churn" && r["mode"] == mode)
            .unwrap_or_else(|| panic!("no churn row for {mode} in {rows:?}"))
    };
    let churn = churn_of("default");
    for k in [
        "conns_per_sec_ratio",
        "cpu_per_conn_ratio",
        "bpf_us_per_conn",
        "bpf_cpu_share",
        "events_per_conn",
    ] {
        assert!(churn[k].is_f64(), "churn: {k} missing: {churn}");
    }
    assert_eq!(churn["drops"], 0, "{churn}");
    // both ends of every connection: init and close at least
    assert!(churn["events_per_conn"].as_f64().unwrap() >= 4.0, "{churn}");
    let set_state = &churn["bpf_programs"]["inet_sock_set_state"];
    assert!(
        set_state["hits"].as_u64().unwrap() >= 300 * 2 * 3,
        "{churn}"
    );
    // the floor (empty programs on the tracer's four hooks) and the exporter's state hook: each
    // saw at least the two handshakes and two closes of every connection
    for (mode, prog) in [
        ("empty-all", "calib_set_state"),
        ("exporter", "count_states"),
    ] {
        let row = churn_of(mode);
        assert!(row["bpf_us_per_conn"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["conns_per_sec_ratio"].as_f64().unwrap() > 0.0, "{row}");
        assert!(
            row["bpf_programs"][prog]["hits"].as_u64().unwrap() >= 300 * 4,
            "{row}"
        );
    }
    // the exporter over the bench's sockets: scrape time, memory, idle CPU
    let exp = rows
        .iter()
        .find(|r| r["workload"] == "exporter")
        .unwrap_or_else(|| panic!("no exporter row in {rows:?}"));
    for k in ["scrape_ms", "rss_mib", "peak_rss_mib"] {
        assert!(exp[k].as_f64().unwrap() > 0.0, "exporter: {k}: {exp}");
    }
    assert!(exp["idle_cpu_share"].as_f64().unwrap() >= 0.0, "{exp}");
}
