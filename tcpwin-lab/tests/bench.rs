//! The benchmark runs end to end and reports every figure it promises, in every mode. A smoke
//! test of the measuring tool, not a performance test: the numbers are only checked for being
//! there and sane (hits counted, no drops), never against a target.
use std::process::Command;

use tcpwin_lab::rows::BenchRow;

#[test]
fn bench_reports_every_figure_per_mode() {
    tcpwin_lab::harness::tests_need_root("BENCH SMOKE TEST");
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
    let out = Command::new(tcpwin_lab::harness::bin_exe(
        "tcpwin-bench",
        env!("CARGO_BIN_EXE_tcpwin-bench"),
    ))
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
        "--same-runs",
        "1",
        "--same-bytes",
        "67108864",
        "--json",
    ])
    .output()
    .expect("run tcpwin-bench");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {err}");
    let rows: Vec<BenchRow> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a bench row ({e}): {l}")))
        .collect();
    let bulk = |m: &str| {
        rows.iter()
            .find_map(|r| match r {
                BenchRow::Bulk(b) if b.mode == m => Some(b),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no bulk `{m}` row in {rows:?}"))
    };
    // every mode has its row (raw says why it has no figures)
    for m in ["empty-tp", "default"] {
        let b = bulk(m);
        assert!(
            b.throughput_ratio.is_some() && b.cpu_per_gb_ratio.is_some(),
            "{b:?}"
        );
    }
    assert!(bulk("raw").note.is_some());
    let d = bulk("default");
    assert_eq!(d.drops, Some(0), "{d:?}");
    assert!(d.bpf_ns_per_hit.unwrap() > 0.0, "{d:?}");
    assert!(
        d.bpf_ms_per_gb.is_some() && d.bpf_cpu_share.is_some(),
        "{d:?}"
    );
    assert!(
        d.events_per_sec.is_some() && d.tracer_cpu_share.is_some(),
        "{d:?}"
    );
    assert!(d.tracer_rss_bytes.unwrap() > 0, "{d:?}");
    assert!(d.changes_seen.unwrap() > 0, "{d:?}");
    let probe = &d.bpf_programs["tcp_probe"];
    assert!(probe.hits > 0, "{d:?}");
    assert!(
        probe.ns_above_floor.is_some(),
        "floor alongside missing: {d:?}"
    );
    // the floor program is reported, not counted as the tracer's own cost
    assert!(d.bpf_programs["calib_tcp_probe"].hits > 0);
    // same packets: both observers of a pair counted hits (how closely their counts agree
    // depends on when each attached, a few hundred µs apart: `cargo xtask proof` reports it); the
    // log code of a level that is off is not in the program the kernel runs (the verifier
    // removed it)
    for (a, b) in [
        ("log-off", "log-warn"),
        ("pid-miss-log-off", "pid-miss-log-debug"),
    ] {
        let r = rows
            .iter()
            .find_map(|r| match r {
                BenchRow::SamePackets(s) if s.a == a && s.b == b && s.hook == "tcp:tcp_probe" => {
                    Some(s)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no same-packets row {a} + {b} in {rows:?}"));
        let (ha, hb) = (r.a_hits as f64, r.b_hits as f64);
        assert!(ha > 0.0 && hb > 0.0, "{r:?}");
        assert!(r.ratio_both > 0.0 && r.a_ns_per_hit[0] > 0.0, "{r:?}");
        assert!(
            r.a_xlated_bytes > 0 && r.a_xlated_bytes * 2 < r.b_xlated_bytes,
            "log off must leave the log code out: {r:?}"
        );
    }
    // ss over many sockets: both commands timed, every socket listed (the bench checks)
    let ss = rows
        .iter()
        .find_map(|r| match r {
            BenchRow::Ss(s) => Some(s),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no ss row in {rows:?}"));
    for (k, v) in [
        ("tool_ms", ss.tool_ms),
        ("tool_rss_mib", ss.tool_rss_mib),
        ("ss_ms", ss.ss_ms),
        ("ss_rss_mib", ss.ss_rss_mib),
    ] {
        assert!(v > 0.0, "ss: {k}: {ss:?}");
    }
    // short connections: per-connection cost, every connection's state changes seen, no drops
    let churn_of = |mode: &str| {
        rows.iter()
            .find_map(|r| match r {
                BenchRow::Churn(c) if c.mode == mode => Some(c),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no churn row for {mode} in {rows:?}"))
    };
    let churn = churn_of("default");
    assert!(churn.conns_per_sec_ratio > 0.0 && churn.cpu_per_conn_ratio > 0.0);
    assert!(churn.bpf_us_per_conn.is_some() && churn.bpf_cpu_share.is_some());
    assert_eq!(churn.drops, Some(0), "{churn:?}");
    // both ends of every connection: init and close at least reach the trace, in fewer ring
    // records when an `init` rides with its socket's close
    assert!(churn.records_per_conn.unwrap() >= 4.0, "{churn:?}");
    assert!(
        churn.events_per_conn.unwrap() <= churn.records_per_conn.unwrap(),
        "{churn:?}"
    );
    assert!(
        churn.bpf_programs["inet_sock_set_state"].hits >= 300 * 2 * 3,
        "{churn:?}"
    );
    // the floor (empty programs on the tracer's four hooks) and the exporter's state hook: each
    // saw at least the two handshakes and two closes of every connection
    for (mode, prog) in [
        ("empty-all", "calib_set_state"),
        ("exporter", "count_states"),
    ] {
        let row = churn_of(mode);
        assert!(row.bpf_us_per_conn.unwrap() > 0.0, "{row:?}");
        assert!(row.conns_per_sec_ratio > 0.0, "{row:?}");
        assert!(row.bpf_programs[prog].hits >= 300 * 4, "{row:?}");
    }
    // the tracer with filters that rule every connection out (another --port, the --pid of a
    // process that owns no socket): its programs ran on every state change, and not one event
    // of these connections reached userspace
    for mode in ["filtered", "other-pid"] {
        let row = churn_of(mode);
        assert!(row.bpf_us_per_conn.unwrap() > 0.0, "{row:?}");
        assert!(
            row.bpf_programs["inet_sock_set_state"].hits >= 300 * 4,
            "{row:?}"
        );
        assert_eq!(row.events_per_conn, Some(0.0), "{row:?}");
        assert_eq!(row.drops, Some(0), "{row:?}");
    }
    // the exporter over the bench's sockets: scrape time, memory, idle CPU
    let exp = rows
        .iter()
        .find_map(|r| match r {
            BenchRow::Exporter(e) => Some(e),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no exporter row in {rows:?}"));
    for (k, v) in [
        ("scrape_ms", exp.scrape_ms),
        ("rss_mib", exp.rss_mib),
        ("peak_rss_mib", exp.peak_rss_mib),
    ] {
        assert!(v > 0.0, "exporter: {k}: {exp:?}");
    }
    assert!(exp.idle_cpu_share >= 0.0, "{exp:?}");
}
