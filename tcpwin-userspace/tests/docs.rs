//! The README is a front door and the manual lives in docs/: every link between them resolves,
//! the README stays short, and every `tcpwin-trace ...` command line shown in a shell block
//! parses with the tool's own argument definitions (a renamed or removed flag breaks this test,
//! not a reader's first try). No root needed.
use std::path::{Path, PathBuf};

use clap::Parser;
use tcpwin_userspace::cmd::Cli;

fn root() -> PathBuf {
    tcpwin_lab::harness::workspace()
}

fn pages() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            v.push(p);
        }
    }
    v
}

/// `[text](target)` targets of a page, without anchors and external links.
fn local_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        let target = &after[..end];
        if !target.starts_with("http") && !target.starts_with('#') && !target.contains(' ') {
            out.push(target.split('#').next().unwrap().to_string());
        }
        rest = &after[end..];
    }
    out
}

#[test]
fn links_resolve() {
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for l in local_links(&text) {
            let target = page.parent().unwrap().join(&l);
            assert!(
                target.exists(),
                "{}: link to {l} does not resolve",
                page.display()
            );
        }
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    // every manual page is reachable from the front door
    for page in pages().iter().skip(1) {
        let name = page.file_name().unwrap().to_string_lossy();
        assert!(
            readme.contains(&format!("docs/{name}")),
            "README does not link docs/{name}"
        );
    }
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let n = readme.lines().count();
    assert!(n <= 300, "README.md has {n} lines: move detail into docs/");
    // the two commands a newcomer needs
    assert!(readme.contains("cargo xtask demo") && readme.contains("cargo xtask test"));
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for stale in ["../shared", "KERNEL-NOTES", "issue #"] {
            assert!(
                !text.contains(stale),
                "{} refers to {stale}: docs cite public sources only",
                page.display()
            );
        }
    }
}

/// Shell words of a command line (quotes kept simple: the docs use plain words).
fn words(line: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    for c in line.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if !cur.is_empty() {
                    v.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        v.push(cur);
    }
    v
}

#[test]
fn every_command_shown_parses() {
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut in_sh = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with("```") {
                in_sh = t == "```sh";
                continue;
            }
            if !in_sh {
                continue;
            }
            // the command, without a trailing comment, `sudo`, pipes or redirections
            let cmd = t.split(" #").next().unwrap();
            let cmd = cmd.split(['|', '>', '&']).next().unwrap().trim();
            let cmd = cmd.strip_prefix("sudo ").unwrap_or(cmd);
            if !cmd.starts_with("tcpwin-trace") {
                continue;
            }
            let w = words(cmd);
            if let Err(e) = Cli::try_parse_from(&w) {
                // --help and --version "fail" with their output
                if matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) {
                    continue;
                }
                panic!("{}: `{cmd}` does not parse:\n{e}", page.display());
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} command lines found");
}

/// Every place that lists the limits lists the same ones as the table in the model: the alert
/// pack's regex (the receivers' caps), the exporter's zero-filled `tcpwin_sockets{limit}`, and
/// the limit table of docs/verdicts.md (one row per limit, in backquotes).
#[test]
fn every_list_of_limits_is_the_table() {
    use tcpwin_model::{metrics::Scrape, verdict::Limit};
    let alerts = std::fs::read_to_string(root().join("prometheus/alerts.yml")).unwrap();
    // the receivers' caps as the alert pack's regex alternation: `wscale-off|rcvbuf-locked|...`
    let caps: Vec<&str> = Limit::ALL
        .iter()
        .filter(|l| l.is_receiver_cap())
        .map(|l| l.id())
        .collect();
    let regex = format!("limit=~\"{}\"", caps.join("|"));
    assert!(
        alerts.contains(&regex),
        "prometheus/alerts.yml should select the receivers' caps as {regex}"
    );
    let filled: Vec<&str> = Scrape::default()
        .sockets_by_limit()
        .into_iter()
        .map(|(id, n)| {
            assert_eq!(n, 0);
            id
        })
        .collect();
    let ids: Vec<&str> = Limit::ALL.iter().map(|l| l.id()).collect();
    assert_eq!(filled, ids, "the exporter zero-fills every limit");
    let doc = std::fs::read_to_string(root().join("docs/verdicts.md")).unwrap();
    // the limit table: from its header to the first line that is not a row
    let table = doc
        .split("| limit | when | the fix it names |")
        .nth(1)
        .expect("docs/verdicts.md has its limit table");
    let rows: Vec<&str> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("` |").map(|(id, _)| id))
        .collect();
    let mut want = ids.clone();
    want.sort_unstable();
    let mut got = rows.clone();
    got.sort_unstable();
    assert_eq!(got, want, "docs/verdicts.md's limit table");
}

/// docs/architecture.md's file map names every source file of every crate, under its crate:
/// a file added, moved or removed breaks this test, not the reader's trust in the map.
#[test]
fn the_architecture_map_lists_every_file() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let crates = [
        "tcpwin-common",
        "tcpwin-ebpf",
        "tcpwin-model",
        "tcpwin-userspace",
        "tcpwin-lab",
        "xtask",
    ];
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut missing = Vec::new();
    for (i, c) in crates.iter().enumerate() {
        // the crate's block: from its heading to the next crate's
        let from = doc
            .find(&format!("\n{c}/"))
            .unwrap_or_else(|| panic!("no {c}/ in the map"));
        let to = crates[i + 1..]
            .iter()
            .filter_map(|n| doc[from..].find(&format!("\n{n}/")))
            .min()
            .map_or(doc.len(), |n| from + n);
        let block = &doc[from..to];
        let base = root().join(c);
        let mut files = Vec::new();
        for d in ["src", "tests"] {
            walk(&base.join(d), &mut files);
        }
        if base.join("build.rs").exists() {
            files.push(base.join("build.rs"));
        }
        for f in files {
            let rel = f
                .strip_prefix(&base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if !block.contains(&format!("  {rel} ")) {
                missing.push(format!("{c}/{rel}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md's map lacks: {missing:?}"
    );
}

/// deploy/kubernetes/prometheusrule.yaml carries prometheus/rules.yml's and alerts.yml's groups
/// line for line (indented under `spec:`): a rule changed in one place is changed in both.
#[test]
fn the_prometheus_rule_is_the_rule_files() {
    let groups = |f: &str| -> Vec<String> {
        let t = std::fs::read_to_string(root().join("prometheus").join(f)).unwrap();
        let (_, body) = t.split_once("groups:\n").unwrap();
        body.lines()
            .map(|l| {
                if l.trim().is_empty() {
                    String::new()
                } else {
                    format!("  {l}")
                }
            })
            .collect()
    };
    let want = [groups("rules.yml"), groups("alerts.yml")].concat();
    let t = std::fs::read_to_string(root().join("deploy/kubernetes/prometheusrule.yaml")).unwrap();
    let (head, body) = t.split_once("  groups:\n").unwrap();
    assert!(head.contains("kind: PrometheusRule"), "{head}");
    let got: Vec<String> = body.lines().map(|l| l.trim_end().to_string()).collect();
    let want: Vec<String> = want.iter().map(|l| l.trim_end().to_string()).collect();
    assert_eq!(
        got, want,
        "regenerate deploy/kubernetes/prometheusrule.yaml from prometheus/"
    );
}
