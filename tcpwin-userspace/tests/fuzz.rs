//! The product's parsers of what comes from outside, under generated and mutated input
//! (property tests, proptest; the model's are in tcpwin-model/tests/fuzz.rs): the kernel's BTF
//! (this machine's, cut and changed), the socket iterator's records, `/proc/net/tcp`,
//! `/proc/net/sockstat`, `/proc/config.gz`'s text, an HTTP `Accept` header, the
//! exporter's web config and Authorization header, sock_diag replies. Each
//! answers (a value or an error), never panics or hangs. No root needed. Run by the gate with
//! the debug profile (overflow checks on) and a bounded number of cases; a failure is kept in
//! tests/fuzz.proptest-regressions and replayed first.
use proptest::{prelude::*, test_runner::FileFailurePersistence};
use tcpwin_userspace::{
    cmd::exporter::webconfig::{basic_credentials, WebConfig},
    host::{owner::listeners, sockdiag::wire::parse_replies, sysctl::memory_pressure},
    kernel::{btf::Resolver, iter::parse_records},
    ui::openmetrics::content_type,
};

/// A `/proc/net/tcp`-format table read as the tracer reads it (procfs's parser, then the
/// listeners in it): an answer or nothing, never a panic.
fn tcp_listeners(text: &str) -> Vec<(u64, u16)> {
    match <procfs::net::TcpNetEntries as procfs::FromReadSI>::from_read(
        text.as_bytes(),
        procfs::current_system_info(),
    ) {
        Ok(t) => listeners(&t.0),
        Err(_) => Vec::new(),
    }
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/fuzz.proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

/// A valid text with a generated piece put in at a generated place, and cut short at another:
/// inputs near the valid ones, where a parser's assumptions break.
fn near(seed: &'static str) -> impl Strategy<Value = String> {
    (0..=seed.len(), ".{0,12}", 0..=seed.len() + 12).prop_map(move |(at, piece, cut)| {
        let (head, tail) = seed.as_bytes().split_at(at);
        let text = format!(
            "{}{piece}{}",
            String::from_utf8_lossy(head),
            String::from_utf8_lossy(tail)
        );
        text.chars().take(cut).collect()
    })
}

/// This machine's BTF, once (a few MiB).
fn vmlinux() -> &'static [u8] {
    static B: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    B.get_or_init(|| {
        std::fs::read("/sys/kernel/btf/vmlinux")
            .expect("/sys/kernel/btf/vmlinux: this machine kind has BTF (the tool needs it)")
    })
}

proptest! {
    #![proptest_config(config(32))]

    /// The kernel's BTF cut short or with bytes changed (in its header, its type section or its
    /// strings): resolving the layout the programs read gives a layout or an error, never a
    /// panic; a member resolved from damaged types is still checked for its size.
    #[test]
    fn fuzz_btf(
        cut in prop::option::weighted(0.3, 0.0f64..1.0),
        flips in prop::collection::vec((0.0f64..1.0, any::<u8>()), 0..6),
        header_flips in prop::collection::vec((0usize..24, any::<u8>()), 0..2),
    ) {
        let mut b = vmlinux().to_vec();
        let n = b.len();
        for (at, v) in flips {
            b[((at * n as f64) as usize).min(n - 1)] = v;
        }
        for (at, v) in header_flips {
            b[at] = v;
        }
        if let Some(c) = cut {
            b.truncate((c * n as f64) as usize);
        }
        if let Ok(r) = Resolver::from_bytes(&b) {
            let _ = r.layout();
        }
        // aya's parse of the same file (the programs' loading and attach points)
        let _ = aya::Btf::parse(&b, aya::Endianness::default());
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn fuzz_btf_small(b in prop::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(r) = Resolver::from_bytes(&b) {
            let _ = r.layout();
        }
    }

    #[test]
    fn fuzz_iterator_records(b in prop::collection::vec(any::<u8>(), 0..2000)) {
        let _ = parse_records(&b);
    }

    #[test]
    fn fuzz_proc_net_tcp(text in "(.{0,120}\n){0,6}") {
        let _ = tcp_listeners(&text);
    }

    /// `/proc/net/tcp` lines as the kernel writes them, with generated fields.
    #[test]
    fn fuzz_proc_net_tcp_shaped(
        rows in prop::collection::vec(
            ("[0-9]{1,4}", "[0-9A-F]{8}:[0-9A-F]{1,6}", "[0-9A-Fx]{1,3}", "[0-9]{0,22}"),
            0..6,
        )
    ) {
        let mut t = String::from("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n");
        for (sl, local, st, inode) in rows {
            t.push_str(&format!("{sl}: {local} 00000000:0000 {st} 00000000:00000000 00:00000000 00000000 0 0 {inode} 1 0 100 0 0 10 0\n"));
        }
        for (_, port) in tcp_listeners(&t) {
            let _ = port;
        }
    }

    #[test]
    fn fuzz_sockstat(text in "(.{0,80}\n){0,5}", mem in any::<[u64; 3]>()) {
        let _ = memory_pressure(&text, mem);
        let _ = memory_pressure(&format!("TCP: inuse 5 orphan 0 tw 0 alloc 9 mem {text}"), mem);
    }

    #[test]
    fn fuzz_accept_header(accept in prop::option::of(".{0,200}")) {
        let c = content_type(accept.as_deref());
        prop_assert!(c.starts_with("text/plain") || c.starts_with("application/openmetrics-text"));
    }

    #[test]
    fn fuzz_web_config(text in ".{0,300}") {
        let _ = WebConfig::parse(&text, std::path::Path::new("/etc"));
    }

    #[test]
    fn fuzz_web_config_near_valid(text in near(
        "tls_server_config:\n  cert_file: tls.crt\n  key_file: /k.key\n  min_version: TLS13\nbasic_auth_users:\n  prometheus: '$2y$10$abcdefghijklmnopqrstuu5Vc0Zw5C8S3Tk6c/7Tm5W2Wm0xQHq3y'\n"
    )) {
        if let Ok(c) = WebConfig::parse(&text, std::path::Path::new("/etc")) {
            // whatever passed the parse is what the server relies on
            for hash in c.basic_auth_users.values() {
                prop_assert!(hash.starts_with("$2"));
            }
            // a hash that is not one: a refusal, never a panic
            let _ = c.allows(Some("Basic cHJvbWV0aGV1czp4"));
        }
    }

    #[test]
    fn fuzz_authorization_header(h in ".{0,200}") {
        let _ = basic_credentials(&h);
    }

    /// `Basic base64(user:password)` reads back as written (a user holds no `:`).
    #[test]
    fn fuzz_authorization_roundtrip(user in "[^:]{0,40}", password in ".{0,80}") {
        use base64::Engine;
        let h = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        );
        prop_assert_eq!(basic_credentials(&h), Some((user, password)));
    }

    #[test]
    fn fuzz_sock_diag(b in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_replies(&b, 0);
    }

    /// netlink messages with sane headers (length, type) and arbitrary bodies: the shape a
    /// kernel sends, with every length and type a kernel could get wrong.
    #[test]
    fn fuzz_sock_diag_messages(
        msgs in prop::collection::vec(
            (prop_oneof![Just(2u16), Just(3u16), Just(20u16), any::<u16>()],
             prop::collection::vec(any::<u8>(), 0..300),
             0u32..8),
            1..5,
        )
    ) {
        let mut buf = Vec::new();
        for (ty, body, slack) in msgs {
            let len = 16 + body.len() as u32;
            buf.extend_from_slice(&(len.saturating_sub(slack % 2 * slack)).to_ne_bytes());
            buf.extend_from_slice(&ty.to_ne_bytes());
            buf.extend_from_slice(&[0u8; 10]);
            buf.extend_from_slice(&body);
            while buf.len() % 4 != 0 {
                buf.push(0);
            }
        }
        let _ = parse_replies(&buf, 0);
    }
}
