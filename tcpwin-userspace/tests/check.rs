//! `tcpwin-trace check` against what the test set itself in a namespace of its own: the sysctls
//! (per namespace) and the receiver interface's MTU and GRO (set with `ip` and `ethtool`), and
//! the kernel's formula for the window a buffer allows. Needs root: fails, never skips.
use std::process::Command;

use tcpwin_common::formula::{space_from_win, win_from_space};
use tcpwin_lab::pair::Pair;
use tcpwin_model::check::CheckReport;

fn exe() -> &'static str {
    tcpwin_lab::harness::bin_exe("tcpwin-trace", env!("CARGO_BIN_EXE_tcpwin-trace"))
}

fn check(args: &[&str]) -> (i32, Option<CheckReport>, String) {
    let out = Command::new(exe())
        .arg("check")
        .args(args)
        .output()
        .expect("run tcpwin-trace check");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_slice(&out.stdout).ok();
    (out.status.code().unwrap_or(-1), report, err)
}

#[test]
fn check_reads_the_namespace_and_sizes_the_bdp() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("CHECK TESTS CANNOT RUN: they need root (run `sudo cargo xtask test`). Failing, not skipping.");
    }
    let p = Pair::create(&format!("tcpwt-chk-{}", std::process::id()), 9000).unwrap();
    Pair::sysctl(&p.b, "net.ipv4.tcp_rmem", "4096 131072 1048576").unwrap();
    Pair::offload(&p.b, p.dev_b, "gro", false).unwrap();
    let (code, r, err) = check(&[
        "--netns",
        &p.b,
        "--bdp",
        "1gbit:18ms",
        "--ratio",
        "162",
        "--json",
    ]);
    let r = r.unwrap_or_else(|| panic!("no JSON report: {err}"));
    assert_eq!(code, 1, "does not fit: exit 1 ({err})");
    assert_eq!(r.limits.tcp_rmem, Some([4096, 131072, 1048576]));
    let veth = r
        .interfaces
        .iter()
        .find(|i| i.name == p.dev_b)
        .expect("the namespace's veth");
    assert_eq!(veth.mtu, Some(9000));
    assert_eq!(veth.gro, Some(false));
    // the caller's interfaces are not this namespace's
    assert!(r
        .interfaces
        .iter()
        .all(|i| i.name == "lo" || i.name == p.dev_b));
    assert_eq!(r.bdp_bytes, Some(2_250_000));
    let auto = &r.fits[0];
    assert_eq!(auto.max_window, Some(win_from_space(1 << 20, 162)));
    assert_eq!(auto.fits, Some(false));
    let need = space_from_win(2_250_000, 162).unwrap();
    assert!(
        auto.fix.iter().any(|f| f.contains(&format!(
            "ip netns exec {} sysctl -w net.ipv4.tcp_rmem=\"4096 131072 {need}\"",
            p.b
        ))),
        "{:?}",
        auto.fix
    );
    // GRO back on: the report follows
    Pair::offload(&p.b, p.dev_b, "gro", true).unwrap();
    let (code, r, err) = check(&["--netns", &p.b, "--bdp", "10mbit:1ms", "--json"]);
    assert_eq!(code, 0, "fits: exit 0 ({err})");
    let r = r.unwrap();
    assert_eq!(
        r.interfaces.iter().find(|i| i.name == p.dev_b).unwrap().gro,
        Some(true)
    );
}

/// Window scaling off in a namespace on a host whose rmem_max is large: the fix is scaling, run
/// in that namespace; rmem_max (global) is never suggested lower than the host has.
#[test]
fn check_fixes_never_lower_a_setting() {
    tcpwin_lab::harness::tests_need_root("CHECK TESTS");
    let p = Pair::create(&format!("tcpwt-chk2-{}", std::process::id()), 1500).unwrap();
    Pair::sysctl(&p.b, "net.ipv4.tcp_window_scaling", "0").unwrap();
    let rmem_max: u64 = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let (code, r, err) = check(&["--netns", &p.b, "--bdp", "100mbit:20ms", "--json"]);
    assert_eq!(code, 1, "does not fit: exit 1 ({err})");
    let r = r.unwrap();
    for f in &r.fits {
        for fix in &f.fix {
            if let Some(v) = fix
                .strip_prefix("sysctl -w net.core.rmem_max=")
                .and_then(|x| x.split_whitespace().next())
            {
                assert!(
                    v.parse::<u64>().unwrap() > rmem_max,
                    "lowers rmem_max: {fix}"
                );
            }
        }
        assert!(
            f.fix.contains(&format!(
                "ip netns exec {} sysctl -w net.ipv4.tcp_window_scaling=1",
                p.b
            )),
            "{f:?}"
        );
    }
}

/// An unprivileged user checks the own namespace (no setns, no BPF): it works, says why the ratio
/// is a fresh socket's, prints sub-millisecond RTTs in µs, and exits by what fits (0, 1 or 3).
#[test]
fn check_runs_unprivileged_in_its_own_namespace() {
    tcpwin_lab::harness::tests_need_root("CHECK TESTS (setpriv to drop to nobody)");
    let out = tcpwin_lab::harness::run_as_nobody(
        std::path::Path::new(exe()),
        &["check", "--bdp", "10gbit:250us"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().unwrap_or(-1);
    assert!([0, 1, 3].contains(&code), "exit {code}: {err}");
    assert!(text.contains("BDP 10.00 Gbit/s x 250 us"), "{text}");
    assert!(text.contains("not root"), "{text}");
    assert!(
        !text.contains("(a fresh socket's ("),
        "doubled brackets: {text}"
    );
    assert!(!text.contains("0.0 ms"), "{text}");
}

/// The notes keyed by kernel version, on a simulated version (the settings are this host's).
#[test]
fn check_names_what_each_kernel_gets_wrong() {
    for (release, needle, absent) in [
        (
            "6.17.2",
            "could not double the window",
            "tcp_rcvbuf_low_rtt",
        ),
        (
            "6.19.1",
            "tcp_rcvbuf_low_rtt",
            "could not double the window",
        ),
        (
            "5.10.0-30-cloud-amd64",
            "tcp_adv_win_scale, not a measured",
            "4 MB",
        ),
        ("6.8.0-45-generic", "about 25 %", "tcp_rcvbuf_low_rtt"),
    ] {
        let (code, r, err) = check(&["--assume-kernel", release, "--json"]);
        assert!([0, 1, 3].contains(&code), "{release}: {err}");
        let r = r.unwrap();
        assert!(
            r.notes.iter().any(|n| n.contains(needle)),
            "{release}: {:?}",
            r.notes
        );
        assert!(
            !r.notes.iter().any(|n| n.contains(absent)),
            "{release}: {:?}",
            r.notes
        );
    }
}

#[test]
fn check_errors_exit_2_with_one_sentence() {
    for (args, needle) in [
        (&["--bdp", "1gbit"][..], "RATE:RTT"),
        (&["--bdp", "1gbps:18ms"][..], "bits"),
        (&["--netns", "no-such-ns-tcpwin"][..], "ip netns list"),
        (&["--ratio", "0"][..], "0"),
    ] {
        let (code, _, err) = check(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
