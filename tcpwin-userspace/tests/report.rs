//! `record` and `report` against the kernel's own view: a transfer with GRO off, then on, into a
//! 1 MiB pinned buffer, each recorded to a file; the recording is read here as plain JSON (not
//! through the tool's parser), the SVG as XML. The last values drawn equal the receiver's own
//! getsockopt at the end; `report A B` prints each recording's figures. Needs root: fails,
//! never skips.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::Value;
use tcpwin_lab::{
    harness::{SendOpts, Tracer, Transfer},
    pair::Pair,
};

fn exe() -> PathBuf {
    PathBuf::from(tcpwin_lab::harness::bin_exe(
        "tcpwin-trace",
        env!("CARGO_BIN_EXE_tcpwin-trace"),
    ))
}

fn require_root() {
    tcpwin_lab::harness::tests_need_root("RECORD/REPORT TESTS");
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The value of `field` for `cookie` at its latest line (events and samples, by ts_ns).
fn last_value(all: &[Value], cookie: u64, field: &str) -> Option<u64> {
    all.iter()
        .filter(|v| v["cookie"].as_u64() == Some(cookie) && v[field].is_u64())
        .max_by_key(|v| v["ts_ns"].as_u64().unwrap())
        .map(|v| v[field].as_u64().unwrap())
}

fn cookies(all: &[Value]) -> Vec<u64> {
    let mut c: Vec<u64> = all
        .iter()
        .filter(|v| v["event"] != "verdict")
        .filter_map(|v| v["cookie"].as_u64())
        .collect();
    c.sort_unstable();
    c.dedup();
    c
}

fn report(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(exe())
        .arg("report")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn recordings_report_draw_and_compare() {
    require_root();
    let dir = std::env::temp_dir().join(format!("tcpwt-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = Pair::create(&format!("tcpwt-rec-{}", std::process::id()), 1500).unwrap();
    p.pin_receiver_buffer(1 << 20).unwrap();
    let port = 5331;
    let mut files = Vec::new();
    let mut truths = Vec::new();
    for gro in [false, true] {
        p.set_offloads(false, gro).unwrap();
        let file = dir.join(format!("gro-{gro}.jsonl"));
        let rec = Tracer::start(
            &exe(),
            &[
                "record",
                "-o",
                file.to_str().unwrap(),
                "--netns",
                "all",
                "--port",
                &port.to_string(),
            ],
            Stdio::null(),
            Duration::from_secs(60),
        )
        .expect("the recorder starts");
        let t = Transfer {
            exe: exe(),
            pair: &p,
            port,
            bytes: 1 << 30,
            conns: 1,
            ipv6: false,
            rcvbuf: None,
            timeout: Duration::from_secs(60),
            send: SendOpts {
                secs: Some(3.5),
                ..Default::default()
            },
        };
        let truth = t.run().expect("transfer").remove(0);
        std::thread::sleep(Duration::from_millis(300));
        let (status, _, err) = rec.stop(Duration::from_secs(30)).unwrap();
        assert!(status.success(), "{}", err.join("\n"));
        // what is recorded, and how it goes, on stderr
        assert!(
            err.iter().any(|l| l.contains("recording to"))
                && err
                    .iter()
                    .any(|l| l.contains("tcpwin-trace: recording: ") && l.contains(" events, ")),
            "{err:?}"
        );
        files.push(file);
        truths.push(truth);
    }
    for (file, truth) in files.iter().zip(&truths) {
        let all = lines(file);
        assert_eq!(all[0]["event"], "header", "{:?}", all[0]);
        assert_eq!(all.last().unwrap()["event"], "summary");
        let samples = all
            .iter()
            .filter(|v| v["event"] == "sample" && v["cookie"].as_u64() == Some(truth.cookie))
            .count();
        assert!(
            samples >= 3,
            "{samples} samples of the receiver in {}",
            file.display()
        );
        // the text report names the receiver and its last window_clamp, as getsockopt read it
        let (ok, text, err) = report(&[file.to_str().unwrap()]);
        assert!(ok, "{err}");
        assert!(
            text.contains(&format!("sk={:x}", truth.cookie))
                && text.contains(&format!("window_clamp={}", truth.window_clamp)),
            "{text}"
        );
        // the SVG: well-formed, one line per field per socket, last values in the legend
        let svg = dir.join("one.svg");
        let (ok, _, err) = report(&[file.to_str().unwrap(), "--svg", svg.to_str().unwrap()]);
        assert!(ok, "{err}");
        let xml = std::fs::read_to_string(&svg).unwrap();
        let doc = roxmltree::Document::parse(&xml).expect("the SVG parses as XML");
        let strokes: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .filter_map(|n| n.attribute("stroke").map(str::to_uppercase))
            .collect();
        let texts: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(|t| t.trim().to_string()))
            .collect();
        let socks = cookies(&all);
        for (field, stroke) in [
            ("window_clamp", "#1F77B4"),
            ("rcv_ssthresh", "#FF7F0E"),
            ("rcv_wnd", "#2CA02C"),
            ("sk_rcvbuf", "#9467BD"),
        ] {
            assert_eq!(
                strokes.iter().filter(|s| *s == stroke).count(),
                socks.len(),
                "{field}: one series per socket"
            );
            for c in &socks {
                let v = last_value(&all, *c, field).unwrap();
                let label = format!("{field} (last {v} B)");
                assert!(texts.contains(&label), "{label} not in the SVG: {texts:?}");
            }
        }
        let rate_socks = socks
            .iter()
            .filter(|c| last_value(&all, **c, "rate_bps").is_some())
            .count();
        assert!(rate_socks >= 1);
        assert_eq!(
            strokes.iter().filter(|s| *s == "#D62728").count(),
            rate_socks
        );
        assert!(texts.contains(&format!("window_clamp (last {} B)", truth.window_clamp)));
        // one direction rule: the receiver's panel `local <- remote`, the sender's `->`
        let title = |c: u64| {
            texts
                .iter()
                .find(|t| t.ends_with(&format!("(socket {c:x})")))
                .cloned()
                .unwrap_or_else(|| panic!("no panel for {c:x}: {texts:?}"))
        };
        assert!(
            title(truth.cookie).contains(" <- "),
            "{}",
            title(truth.cookie)
        );
        assert!(
            socks
                .iter()
                .filter(|c| **c != truth.cookie)
                .all(|c| title(*c).contains(" -> ")),
            "{texts:?}"
        );
    }
    // side by side: each recording's figures, computed here from its JSON
    let (ok, table, err) = report(&[files[0].to_str().unwrap(), files[1].to_str().unwrap()]);
    assert!(ok, "{err}");
    let row = |name: &str| -> Vec<String> {
        let l = table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row:\n{table}"));
        l[name.len()..]
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    let mut ratios = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let all = lines(file);
        // the busiest socket: most bytes received
        let busiest = cookies(&all)
            .into_iter()
            .max_by_key(|c| last_value(&all, *c, "bytes_received").unwrap_or(0))
            .unwrap();
        assert_eq!(busiest, truths[i].cookie, "the receiver is the busiest");
        let ratio = all
            .iter()
            .rfind(|v| {
                v["cookie"].as_u64() == Some(busiest)
                    && v["event"] != "sample"
                    && v["event"] != "verdict"
            })
            .and_then(|v| v["scaling_ratio"].as_u64())
            .unwrap();
        assert_eq!(row("scaling_ratio (last)")[i], ratio.to_string(), "{table}");
        let clamp = all
            .iter()
            .rfind(|v| {
                v["cookie"].as_u64() == Some(busiest)
                    && v["event"] != "sample"
                    && v["event"] != "verdict"
            })
            .and_then(|v| v["window_clamp"].as_u64())
            .unwrap();
        assert_eq!(row("window_clamp (last)")[i], clamp.to_string(), "{table}");
        ratios.push(ratio);
    }
    assert!(
        ratios[1] > ratios[0],
        "GRO on should raise the ratio: {ratios:?}"
    );
    // the comparison names the socket it compared in each recording
    for t in &truths {
        assert!(table.contains(&format!("sk={:x}", t.cookie)), "{table}");
    }
    let svg = dir.join("ab.svg");
    let (ok, out, err) = report(&[
        files[0].to_str().unwrap(),
        files[1].to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    // which sockets were drawn (the transfer's two ends each time), which left out
    assert_eq!(out.matches(": drew 2 (").count(), 2, "{out}");
    roxmltree::Document::parse(&std::fs::read_to_string(&svg).unwrap()).expect("A/B SVG parses");
    // lab --svg into a place it cannot write: refused before the lab runs
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let out = Command::new(exe())
            .args(["lab", "--quick", "--svg", "/proc/tcpwin-no-such-dir"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(err.contains("cannot create the SVG directory"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_recordings_and_paths_are_one_clear_sentence() {
    let dir = std::env::temp_dir().join(format!("tcpwt-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let foreign = dir.join("foreign.jsonl");
    std::fs::write(&foreign, "{\"event\":\"init\",\"ts_ns\":1}\n").unwrap();
    let header = r#"{"event":"header","tool":"tcpwin-trace","version":"0","kernel":"k","host":"h","backend":"b","hooks":"","start_unix_s":0.0,"start_ts_ns":0,"args":[]}"#;
    let truncated = dir.join("truncated.jsonl");
    std::fs::write(
        &truncated,
        format!("{header}\n{{\"event\":\"sample\",\"ts_"),
    )
    .unwrap();
    let cut = dir.join("cut.jsonl");
    std::fs::write(&cut, format!("{header}\n")).unwrap();
    let missing = dir.join("missing.jsonl");
    for (args, needle) in [
        (
            vec![foreign.to_str().unwrap()],
            "not a tcpwin-trace recording",
        ),
        (vec![truncated.to_str().unwrap()], "truncated"),
        (vec![cut.to_str().unwrap()], "no summary line"),
        (vec![missing.to_str().unwrap()], "cannot read the recording"),
    ] {
        let (ok, _, err) = report(&args);
        assert!(!ok, "{args:?}");
        assert!(
            err.contains(needle) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one sentence: {err}");
    }
    // unwritable outputs
    let out = Command::new(exe())
        .args(["record", "-o", "/nonexistent-dir/x.jsonl"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("cannot write the recording"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
