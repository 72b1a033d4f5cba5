//! The test suite run to the end: `cargo test --no-fail-fast`, its output passed through as it
//! comes, and what failed collected for one summary (the failing tests by name, and the test
//! binaries cargo lists as failed).
use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
};

use anyhow::{Context, Result};

/// What one line of the suite's output says failed, if anything.
fn failure(line: &str) -> Option<String> {
    // the test harness: "test wan_scenarios_show_their_verdicts ... FAILED"
    let l = line.trim();
    let name = l.strip_prefix("test ")?.strip_suffix(" ... FAILED")?;
    Some(format!("test {name}"))
}

/// A test binary cargo names in its closing list ("error: 2 targets failed:" then one
/// indented `` `-p tcpwin-userspace --test lab` `` per line).
fn failed_target(line: &str) -> Option<String> {
    let l = line.trim();
    let t = l.strip_prefix('`')?.strip_suffix('`')?;
    Some(format!("target {t}"))
}

/// Runs `cmd` (a `cargo test ... --no-fail-fast`), passing its output through; returns what
/// failed (empty: everything passed).
pub fn run(cmd: &mut Command) -> Result<Vec<String>> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start cargo test")?;
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let tests = std::thread::spawn(move || {
        let mut failed = Vec::new();
        let mut o = std::io::stdout();
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = writeln!(o, "{line}");
            failed.extend(failure(&line));
        }
        failed
    });
    let mut targets = Vec::new();
    let mut listing = false;
    let mut e = std::io::stderr();
    for line in BufReader::new(err).lines().map_while(Result::ok) {
        let _ = writeln!(e, "{line}");
        if line.starts_with("error:") && line.contains("target") && line.contains("failed") {
            listing = true;
            continue;
        }
        if listing {
            match failed_target(&line) {
                Some(t) => targets.push(t),
                None => listing = false,
            }
        }
    }
    let status = child.wait()?;
    let mut failed = tests.join().unwrap_or_default();
    failed.extend(targets);
    if !status.success() && failed.is_empty() {
        failed.push(format!("cargo test: {status} (see its output above)"));
    }
    Ok(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_read_from_the_harness_and_cargo() {
        assert_eq!(
            failure("test wan_scenarios_show_their_verdicts ... FAILED"),
            Some("test wan_scenarios_show_their_verdicts".into())
        );
        assert_eq!(failure("test a ... ok"), None);
        assert_eq!(failure("failures:"), None);
        assert_eq!(
            failed_target("    `-p tcpwin-userspace --test lab`"),
            Some("target -p tcpwin-userspace --test lab".into())
        );
        assert_eq!(failed_target("warning: x"), None);
    }
}
