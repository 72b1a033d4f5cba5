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

/// How long each step of the gate took, to say where the time went.
#[derive(Debug, Default)]
pub struct Steps {
    took: Vec<(&'static str, std::time::Duration)>,
}

impl Steps {
    /// Runs `f` as the step `name`, timing it.
    pub fn time<T>(&mut self, name: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let t0 = std::time::Instant::now();
        println!("xtask test: {name}");
        let r = f();
        self.took.push((name, t0.elapsed()));
        r
    }

    /// "fmt 1 s, clippy 12 s, ...".
    pub fn said(&self) -> String {
        self.took
            .iter()
            .map(|(n, d)| format!("{n} {} s", d.as_secs()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The longest excerpt of one failing test's panic the summary repeats (lines, characters each).
const EXCERPT_LINES: usize = 6;
const EXCERPT_CHARS: usize = 300;

/// Why each failing test failed, read from libtest's `failures:` section: for each
/// `---- NAME stdout ----` block, its `panicked at` line and the lines after it (the assertion's
/// message), cut to [`EXCERPT_LINES`] of [`EXCERPT_CHARS`]. The run's own output is long and a CI
/// log shows its end: the summary repeats these so the end says why, not only what.
#[derive(Debug, Default)]
struct Excerpts {
    current: Option<(String, Vec<String>, bool)>,
    done: Vec<(String, Vec<String>)>,
}

impl Excerpts {
    fn line(&mut self, line: &str) {
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"))
        {
            self.close();
            self.current = Some((name.to_string(), Vec::new(), false));
            return;
        }
        // the block ends with the list of failures or the result line
        if line == "failures:" || line.starts_with("test result:") {
            self.close();
            return;
        }
        let Some((_, lines, panicked)) = self.current.as_mut() else {
            return;
        };
        *panicked |= line.contains("panicked at ");
        if *panicked && lines.len() < EXCERPT_LINES {
            let cut: String = line.chars().take(EXCERPT_CHARS).collect();
            lines.push(if cut.len() < line.len() {
                format!("{cut}…")
            } else {
                cut
            });
        }
    }

    fn close(&mut self) {
        if let Some((name, mut lines, _)) = self.current.take() {
            while lines.last().is_some_and(|l| l.trim().is_empty()) {
                lines.pop();
            }
            self.done.push((name, lines));
        }
    }

    /// The excerpt of test `name` (its last failure, if it ran in several binaries).
    fn of(&self, name: &str) -> Option<&[String]> {
        self.done
            .iter()
            .rev()
            .find(|(n, l)| n == name && !l.is_empty())
            .map(|(_, l)| l.as_slice())
    }
}

/// What failed in the whole run: tests by name, the test binaries cargo lists as failed (one
/// per binary, whatever number of its tests failed), and the steps after the suite.
#[derive(Debug, Default)]
pub struct Failures {
    pub tests: Vec<String>,
    pub binaries: Vec<String>,
    /// (the step's name, its line: the name and its error)
    steps: Vec<(&'static str, String)>,
}

impl Failures {
    pub fn is_empty(&self) -> bool {
        self.tests.is_empty() && self.binaries.is_empty() && self.steps.is_empty()
    }

    /// "1 test (in 1 test binary), and vm-test": what failed, counted once each (a binary that
    /// failed without a test named, e.g. one that crashed, counts as itself).
    pub fn headline(&self) -> String {
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let mut parts = Vec::new();
        match (self.tests.len(), self.binaries.len()) {
            (0, 0) => {}
            (0, b) => parts.push(plural(b, "test binary", "test binaries")),
            (t, 0) => parts.push(plural(t, "test", "tests")),
            (t, b) => parts.push(format!(
                "{} (in {})",
                plural(t, "test", "tests"),
                plural(b, "test binary", "test binaries")
            )),
        }
        parts.extend(self.steps.iter().map(|(name, _)| name.to_string()));
        parts.join(", and ")
    }

    /// One line each: the tests, the binaries they ran in, the steps with their error.
    pub fn lines(&self) -> impl Iterator<Item = &String> {
        self.tests
            .iter()
            .chain(&self.binaries)
            .chain(self.steps.iter().map(|(_, line)| line))
    }

    /// A step after the suite failed: `name` in the headline, with its error in the lines.
    pub fn step(&mut self, name: &'static str, error: impl std::fmt::Display) {
        self.steps.push((name, format!("{name}: {error}")));
    }
}

/// Each failing test's line, followed by its panic's excerpt (indented) where one was read.
fn with_excerpts(failed: Vec<String>, why: &Excerpts) -> Vec<String> {
    failed
        .into_iter()
        .map(|t| {
            let name = t.strip_prefix("test ").unwrap_or(&t);
            match why.of(name) {
                Some(lines) => format!("{t}\n      {}", lines.join("\n      ")),
                None => t,
            }
        })
        .collect()
}

/// Runs `cmd` (a `cargo test ... --no-fail-fast`), passing its output through; returns what
/// failed (empty: everything passed).
pub fn run(cmd: &mut Command) -> Result<Failures> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start cargo test")?;
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let tests = std::thread::spawn(move || {
        let mut failed = Vec::new();
        let mut why = Excerpts::default();
        let mut o = std::io::stdout();
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = writeln!(o, "{line}");
            failed.extend(failure(&line));
            why.line(&line);
        }
        why.close();
        with_excerpts(failed, &why)
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
    let mut failed = Failures {
        tests: tests.join().unwrap_or_default(),
        binaries: targets,
        steps: Vec::new(),
    };
    if !status.success() && failed.is_empty() {
        failed.step("cargo test", format!("{status} (see its output above)"));
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

    /// The summary repeats why a test failed: the panic's place and message, cut short; a test
    /// whose block holds no panic keeps its bare name.
    #[test]
    fn the_summary_says_why_a_test_failed() {
        let out = [
            "test a ... FAILED",
            "test b ... FAILED",
            "",
            "failures:",
            "",
            "---- a stdout ----",
            "some output of the test",
            "",
            "thread 'a' (1855) panicked at tcpwin-userspace/tests/e2e.rs:163:9:",
            "no init event for EndpointReport { cookie: 7 }",
            "hook hits [1, 2]",
            "",
            "---- b stdout ----",
            "only output",
            "",
            "failures:",
            "    a",
            "    b",
            "",
            "test result: FAILED. 0 passed; 2 failed",
        ];
        let mut why = Excerpts::default();
        let mut failed = Vec::new();
        for l in out {
            failed.extend(failure(l));
            why.line(l);
        }
        why.close();
        let lines = with_excerpts(failed, &why);
        assert_eq!(
            lines[0],
            "test a\n      thread 'a' (1855) panicked at tcpwin-userspace/tests/e2e.rs:163:9:\n      no init event for EndpointReport { cookie: 7 }\n      hook hits [1, 2]"
        );
        assert_eq!(lines[1], "test b");
        let mut long = Excerpts::default();
        long.line("---- c stdout ----");
        long.line("thread 'c' panicked at x.rs:1:1:");
        long.line(&"y".repeat(1000));
        for _ in 0..20 {
            long.line("more");
        }
        long.close();
        let c = long.of("c").unwrap();
        assert_eq!(c.len(), EXCERPT_LINES);
        assert_eq!(c[1].chars().count(), EXCERPT_CHARS + 1);
    }

    /// One failing test is one failure, said with the binary it ran in (the summary said
    /// "2 failed" for one test and its binary).
    #[test]
    fn the_headline_counts_each_failure_once() {
        let one = Failures {
            tests: vec!["test ss_fields_equal_the_owners_getsockopt".into()],
            binaries: vec!["target -p tcpwin-userspace --test ss".into()],
            ..Failures::default()
        };
        assert_eq!(one.headline(), "1 test (in 1 test binary)");
        assert_eq!(one.lines().count(), 2);
        let mut more = Failures {
            tests: vec!["test a".into(), "test b".into()],
            binaries: vec!["target x".into()],
            ..Failures::default()
        };
        more.step("vm-test", "6.1 failed: ...");
        assert_eq!(more.headline(), "2 tests (in 1 test binary), and vm-test");
        assert_eq!(
            more.lines().last().map(String::as_str),
            Some("vm-test: 6.1 failed: ...")
        );
        let crashed = Failures {
            binaries: vec!["target x".into()],
            ..Failures::default()
        };
        assert_eq!(crashed.headline(), "1 test binary");
        assert!(Failures::default().is_empty());
    }
}
