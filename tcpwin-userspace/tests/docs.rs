//! The README is a front door and the manual lives in docs/: every link between them resolves,
//! the README stays short, and every `tcpwin-trace ...` command line shown in a shell block
//! parses with the tool's own argument definitions (a renamed or removed flag breaks this test,
//! not a reader's first try). No root needed.
use std::path::{Path, PathBuf};

use clap::Parser;
use tcpwin_userspace::cli::Cli;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
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
