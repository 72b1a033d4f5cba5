//! Every parser of the model that reads what comes from outside, under generated and mutated
//! input (property tests, proptest): recordings and the trace's JSON lines, cgroup paths and the
//! container runtimes' files, `tcp_info`, and what users type (rates, durations, paths, BDPs,
//! kernel releases). Each must answer (a value or an error), never panic or hang; where a value can be
//! written back, it reads back the same. Run by the gate with the debug profile (overflow checks
//! on) and a bounded number of cases; a failure is kept in proptest-regressions/ and replayed.
use proptest::{prelude::*, test_runner::FileFailurePersistence};
use tcpwin_common::{Offsets, SockRecord, ABSENT};
use tcpwin_model::{
    check::parse_bdp,
    facts::{HostLimits, SockFacts},
    judge::Judge,
    kernel_notes::Version,
    recording::{figures, moved_data, parse_recording, socket_series},
    schema::{parse_line, parse_trace},
    tcp_info::TcpInfo,
    units::{parse_duration_us, parse_path, parse_rate},
    workload::{docker_name, from_cgroup, kubelet_log_names, podman_names},
};

const RECORDING: &str = include_str!("fixtures/recording-iperf3-loopback.jsonl");

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        // replayed first at every run (cargo runs the test from the crate's directory)
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/fuzz.proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

/// A valid text with a few bytes changed, cut, or a span repeated: inputs near the valid ones,
/// where parsers' assumptions break.
fn mutated(seed: &'static str) -> impl Strategy<Value = String> {
    let n = seed.len();
    (
        prop::collection::vec((0..n, any::<u8>()), 0..8),
        0..=n,
        prop::option::of((0..n, 0..n)),
    )
        .prop_map(move |(flips, cut, dup)| {
            let mut b = seed.as_bytes().to_vec();
            for (i, v) in flips {
                b[i] = v;
            }
            if let Some((a, z)) = dup {
                let (a, z) = (a.min(z), a.max(z).min(a + 512));
                let span = b[a..z].to_vec();
                b.splice(a..a, span);
            }
            b.truncate(cut.max(1).min(b.len()));
            String::from_utf8_lossy(&b).into_owned()
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_recording(text in mutated(RECORDING)) {
        if let Ok(r) = parse_recording(&text, "fuzz") {
            // what report draws and compares from it
            for s in socket_series(&r) {
                let _ = moved_data(&s);
            }
            let _ = figures(&r);
        }
    }

    #[test]
    fn fuzz_trace_lines(line in ".{0,300}") {
        let _ = parse_line(&line);
        let _ = parse_trace(&line);
    }

    #[test]
    fn fuzz_trace_lines_near_valid(text in mutated(RECORDING)) {
        for l in text.lines() {
            let _ = parse_line(l);
        }
        let _ = parse_trace(&text);
    }

    #[test]
    fn fuzz_cgroup(text in ".{0,300}") {
        let _ = from_cgroup(&text);
    }

    /// cgroup files shaped as runtimes and the kubelet write them, with generated segments.
    #[test]
    fn fuzz_cgroup_shaped(
        segs in prop::collection::vec(
            prop_oneof![
                "[a-z0-9_.-]{0,20}",
                "libpod-[0-9a-f]{0,64}(\\.scope)?",
                "(cri-containerd|crio|docker)-[0-9a-f]{0,64}\\.scope",
                "kubepods(-besteffort|-burstable)?(\\.slice)?",
                "(kubepods-[a-z]+-)?pod[0-9a-f_-]{0,36}(\\.slice)?",
                "[0-9a-f]{64}",
                "libpod_parent",
            ],
            0..7,
        ),
        hier in "(0|[0-9]{1,2})",
        ctrl in "(|cpu|memory|name=systemd)",
    ) {
        let text = format!("{hier}:{ctrl}:/{}\n", segs.join("/"));
        if let Some(w) = from_cgroup(&text) {
            let _ = w.short();
        }
    }

    #[test]
    fn fuzz_runtime_files(text in ".{0,300}") {
        let _ = podman_names(&text);
        let _ = docker_name(&text);
        let _ = kubelet_log_names(&text);
    }

    #[test]
    fn fuzz_runtime_files_near_valid(
        podman in mutated(r#"[{"id":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","names":["web"],"image":"x","layer":"y","metadata":"{\"image-name\":\"x\",\"pod-id\":\"abcdef\"}","created":"2026-01-01T00:00:00Z"}]"#),
        docker in mutated(r#"{"ID":"0123456789abcdef","Name":"/web","Config":{"Labels":{"io.kubernetes.pod.name":"p"}}}"#),
        kubelet in mutated("web-5d9f8_default_nginx-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.log"),
    ) {
        let _ = podman_names(&podman);
        let _ = docker_name(&docker);
        let _ = kubelet_log_names(&kubelet);
    }

    #[test]
    fn fuzz_tcp_info(b in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Some(i) = TcpInfo::parse(&b) {
            prop_assert!(b.len() >= TcpInfo::MIN_LEN);
            prop_assert!(i.rcv_wscale < 16 && i.snd_wscale < 16);
        }
    }

    #[test]
    fn fuzz_units(s in ".{0,40}") {
        let _ = parse_rate(&s);
        let _ = parse_duration_us(&s);
        let _ = parse_path(&s);
        let _ = parse_bdp(&s);
        let _ = Version::parse(&s);
    }

    /// A rate and a duration written as users write them read back as the number.
    #[test]
    fn fuzz_units_roundtrip(kbit in 1u64..10_000_000_000, us in 1u64..3_600_000_000) {
        prop_assert_eq!(parse_rate(&format!("{kbit}kbit")), Ok(kbit * 1000));
        prop_assert_eq!(parse_duration_us(&format!("{us}us")), Ok(us));
    }

    #[test]
    fn fuzz_kernel_release(a in 0u32..100, b in 0u32..1000, tail in "[-+.a-z0-9]{0,30}") {
        let v = Version::parse(&format!("{a}.{b}{tail}"));
        if !tail.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            prop_assert!(v.is_some());
        }
    }
}

/// A socket record as the kernel's iterator could write it (any bytes) and the offsets it was
/// read with (each member present or absent).
fn record(bytes: &[u8], present: &[bool]) -> (SockRecord, Offsets) {
    let mut b = bytes.to_vec();
    b.resize(std::mem::size_of::<SockRecord>(), 0);
    let n = std::mem::size_of::<Offsets>() / 4;
    let words: Vec<u32> = (0..n)
        .map(|i| {
            if present.get(i).copied().unwrap_or(true) {
                (i as u32) * 4
            } else {
                ABSENT
            }
        })
        .collect();
    // SAFETY: both are repr(C) plain integers (Offsets: u32s only, as `words`), and each buffer
    // is exactly the struct's size.
    unsafe {
        (
            std::ptr::read_unaligned(b.as_ptr() as *const SockRecord),
            std::ptr::read_unaligned(words.as_ptr() as *const Offsets),
        )
    }
}

/// A namespace's settings: the kernel keeps each as an int (0..=i32::MAX), read from /proc text.
fn limits() -> impl Strategy<Value = HostLimits> {
    let int = || 0u64..=i32::MAX as u64;
    (
        prop::option::of(int()),
        prop::option::of([int(), int(), int()]),
        prop::option::of([int(), int(), int()]),
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::of(int()),
    )
        .prop_map(
            |(rmem_max, tcp_rmem, tcp_wmem, scaling, moderate, wmem_max)| HostLimits {
                rmem_max,
                wmem_max,
                tcp_rmem,
                tcp_wmem,
                tcp_window_scaling: scaling,
                tcp_moderate_rcvbuf: moderate,
                kernel: Some("6.18.0".into()),
                ..HostLimits::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..config() })]

    /// The judge over any values a kernel's socket could hold: two readings of one connection's
    /// two ends, then each end alone. Every verdict is made (no panic: no division by a zero RTT,
    /// no overflow of a window times a ratio) and passes the judge's own consistency check or
    /// is refused by it, never half-made.
    #[test]
    fn fuzz_judge(
        a in prop::collection::vec(any::<u8>(), 0..400),
        b in prop::collection::vec(any::<u8>(), 0..400),
        later in prop::collection::vec(any::<u8>(), 0..400),
        present in prop::collection::vec(prop::bool::weighted(0.9), 0..80),
        hz in prop::option::of(prop_oneof![Just(100u32), Just(250), Just(1000), any::<u32>()]),
        host in limits(),
        dt in 0u64..10_000_000_000,
        // `--target`: what parse_rate takes (1 bit/s to 10 Tbit/s)
        target in prop::option::of(1u64..=10_000_000_000_000),
    ) {
        let facts = |bytes: &[u8], ts| {
            let (r, o) = record(bytes, &present);
            SockFacts::from_record(&r, &o, hz, ts)
        };
        let (mut x, mut y) = (facts(&a, 1), facts(&b, 1));
        // the two ends of one connection
        y.id.laddr = x.id.raddr;
        y.id.lport = x.id.rport;
        y.id.raddr = x.id.laddr;
        y.id.rport = x.id.lport;
        y.id.cookie = x.id.cookie.map(|c| c.wrapping_add(1));
        let mut x2 = facts(&later, 1 + dt);
        x2.id = x.id.clone();
        let mut judge = Judge::new(target);
        let _ = judge.judge([(&x, &host), (&y, &host)]);
        let _ = judge.judge([(&x2, &host), (&y, &host)]);
        x.ts_ns = 0;
        let _ = Judge::new(target).judge([(&x, &host)]);
    }
}

/// The fixture is a real recording and parses as one (the mutations start from something valid).
#[test]
fn the_fixture_is_a_recording() {
    let r = parse_recording(RECORDING, "fixture").unwrap();
    assert!(!r.events.is_empty() && !r.samples.is_empty());
}
