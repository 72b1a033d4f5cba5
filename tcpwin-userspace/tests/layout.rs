//! The crate's layout rules, checked from its source (no root, no kernel):
//! - the module graph (from `crate::` / `super::` paths in the code) has no cycle, between
//!   top-level modules and between files;
//! - `aya` is used only under `kernel/`;
//! - the test bench crate (`tcpwin_lab`) only under the `lab` and `demo` commands, and its own
//!   files import one way;
//! - no function outside tests, in any crate of the workspace, is over 150 lines.
use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// The crate's sources, where the running test's package is (not a path compiled in).
fn src() -> PathBuf {
    tcpwin_lab::harness::workspace().join("tcpwin-userspace/src")
}

/// Every `.rs` file under src, with its module path (`cmd::lab::wan`).
fn modules() -> Vec<(String, String)> {
    modules_of(&src())
}

/// Every `.rs` file of a library crate's `src`, with its module path (a binary's folder, whose
/// `crate::` is another crate, left out: `bench/` in tcpwin-lab).
fn modules_of(src: &Path) -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if !p.join("main.rs").exists() {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|l| l == "mod") {
                parts.pop();
            }
            let name = parts.join("::");
            // the crate roots are not modules of the graph
            (name != "lib" && name != "main" && name != "build")
                .then(|| (name, std::fs::read_to_string(&p).unwrap()))
        })
        .collect()
}

/// The code without comments (a path named in a doc comment is not a dependency).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Module paths a file refers to through `crate::a::b` (also inside `use crate::{a::b, c}`) and
/// `super::x`, resolved to the longest known module.
fn references(me: &str, text: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let code = code(text);
    let mut out = BTreeSet::new();
    let resolve = |path: &str, out: &mut BTreeSet<String>| {
        let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        for n in (1..=segs.len()).rev() {
            let cand = segs[..n].join("::");
            if known.contains(&cand) {
                out.insert(cand);
                return;
            }
        }
    };
    // `crate::` paths, with `{...}` groups expanded one level at a time
    let mut stack: Vec<(String, String)> = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        stack.push((String::new(), code[i + "crate::".len()..].to_string()));
    }
    if let Some(parent) = me
        .rsplit_once("::")
        .map(|(p, _)| p.to_string())
        .or(Some(String::new()))
    {
        for (i, _) in code.match_indices("super::") {
            stack.push((parent.clone(), code[i + "super::".len()..].to_string()));
        }
    }
    while let Some((prefix, rest)) = stack.pop() {
        let mut path = prefix.clone();
        let mut chars = rest.char_indices();
        let mut seg = String::new();
        loop {
            match chars.next() {
                Some((_, c)) if c.is_alphanumeric() || c == '_' => seg.push(c),
                Some((_, ':')) => {
                    if !seg.is_empty() {
                        path = if path.is_empty() {
                            seg.clone()
                        } else {
                            format!("{path}::{seg}")
                        };
                        seg.clear();
                    }
                }
                Some((j, '{')) => {
                    if !seg.is_empty() {
                        path = if path.is_empty() {
                            seg.clone()
                        } else {
                            format!("{path}::{seg}")
                        };
                    }
                    // split the group at top-level commas
                    let group = &rest[j + 1..];
                    let mut depth = 0;
                    let mut start = 0;
                    for (k, c) in group.char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' if depth == 0 => {
                                stack.push((path.clone(), group[start..k].to_string()));
                                break;
                            }
                            '}' => depth -= 1,
                            ',' if depth == 0 => {
                                stack.push((path.clone(), group[start..k].to_string()));
                                start = k + 1;
                            }
                            _ => {}
                        }
                    }
                    seg.clear();
                    path.clear();
                    break;
                }
                Some((_, c)) if c.is_whitespace() && seg.is_empty() => {}
                _ => {
                    if !seg.is_empty() {
                        path = if path.is_empty() {
                            seg.clone()
                        } else {
                            format!("{path}::{seg}")
                        };
                    }
                    break;
                }
            }
        }
        if !path.is_empty() {
            resolve(&path, &mut out);
        }
    }
    out.remove(me);
    // a module's own children are part of it
    out.retain(|m| !m.starts_with(&format!("{me}::")));
    out
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(1) => {
                let i = path.iter().position(|p| p == n).unwrap();
                let mut c = path[i..].to_vec();
                c.push(n.to_string());
                return Some(c);
            }
            Some(2) => return None,
            _ => {}
        }
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

type Graph = BTreeMap<String, BTreeSet<String>>;

fn graphs() -> (Graph, Graph) {
    graphs_of(modules())
}

/// The crate's import graphs: between top-level modules, and between files.
fn graphs_of(mods: Vec<(String, String)>) -> (Graph, Graph) {
    let known: BTreeSet<String> = mods.iter().map(|(n, _)| n.clone()).collect();
    let mut files = BTreeMap::new();
    let mut tops: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, text) in &mods {
        let refs = references(name, text, &known);
        let top = name.split("::").next().unwrap().to_string();
        let entry = tops.entry(top.clone()).or_default();
        for r in &refs {
            let rt = r.split("::").next().unwrap();
            if rt != top {
                entry.insert(rt.to_string());
            }
        }
        files.insert(name.clone(), refs);
    }
    (tops, files)
}

/// The lab's crate too: its files import one way (the scenarios, runs and tables moved there
/// from the product, where this test watched them).
#[test]
fn the_lab_crate_has_no_import_circle() {
    let src = tcpwin_lab::harness::workspace().join("tcpwin-lab/src");
    let (tops, files) = graphs_of(modules_of(&src));
    assert!(files["table"].contains("experiment"), "{files:?}");
    assert!(
        !files.contains_key("bench::main"),
        "the bench binary is its own crate"
    );
    for g in [&tops, &files] {
        if let Some(c) = find_cycle(g) {
            panic!("import circle in tcpwin-lab: {}", c.join(" -> "));
        }
    }
}

#[test]
fn the_module_graph_has_no_cycle() {
    let (tops, files) = graphs();
    // the parser itself is checked: these arrows exist
    assert!(tops["cmd"].contains("gather"), "{tops:?}");
    assert!(tops["gather"].contains("kernel"), "{tops:?}");
    assert!(
        files["cmd::ss"].contains("gather::snapshot"),
        "{:?}",
        files["cmd::ss"]
    );
    assert!(files["cmd::lab::readings"].contains("gather::snapshot"));
    if let Some(c) = find_cycle(&tops) {
        panic!(
            "import circle between top-level modules: {}",
            c.join(" -> ")
        );
    }
    if let Some(c) = find_cycle(&files) {
        panic!("import circle between files: {}", c.join(" -> "));
    }
    // layers: nothing below the commands reaches up into them
    for (m, refs) in &tops {
        if m != "cmd" {
            assert!(!refs.contains("cmd"), "{m} imports from cmd: {refs:?}");
        }
    }
    for low in ["kernel", "host", "ui"] {
        assert!(
            !tops[low].contains("gather"),
            "{low} imports from gather: {:?}",
            tops[low]
        );
    }
}

#[test]
fn a_cycle_is_found() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert!(find_cycle(&g).is_some());
    g.insert("b".to_string(), BTreeSet::new());
    assert!(find_cycle(&g).is_none());
}

/// Which files name `what` in code (not in comments).
fn users_of(what: &str) -> Vec<String> {
    modules()
        .into_iter()
        .filter(|(_, t)| code(t).contains(what))
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn aya_only_under_kernel() {
    let bad: Vec<String> = users_of("aya::")
        .into_iter()
        .filter(|m| !m.starts_with("kernel"))
        .collect();
    assert!(bad.is_empty(), "aya used outside kernel/: {bad:?}");
    assert!(!users_of("aya::").is_empty());
}

#[test]
fn the_test_bench_only_under_the_lab_and_demo_commands() {
    let bad: Vec<String> = users_of("tcpwin_lab")
        .into_iter()
        .filter(|m| !m.starts_with("cmd::lab") && m != "cmd::demo")
        .collect();
    assert!(
        bad.is_empty(),
        "tcpwin_lab used outside the lab and demo commands: {bad:?}"
    );
    for root in ["lib.rs", "main.rs"] {
        let t = std::fs::read_to_string(src().join(root)).unwrap();
        assert!(!code(&t).contains("tcpwin_lab"), "{root} uses tcpwin_lab");
    }
}

/// Clap stays with the commands: below them (gather, kernel, host, ui) every function takes
/// domain types (a scope, a target rate, a source), never an argument struct; each command's
/// arguments are declared beside it, the shared groups in `cmd::args`.
#[test]
fn clap_only_in_the_commands() {
    let above = |m: &str| m == "cmd" || m.starts_with("cmd::");
    let bad: Vec<String> = users_of("clap")
        .into_iter()
        .chain(users_of("args::"))
        .filter(|m| !above(m))
        .collect();
    assert!(
        bad.is_empty(),
        "clap or the argument groups used below the commands: {bad:?}"
    );
    for (m, args) in [
        ("cmd", "pub struct Cli"),
        ("cmd::args", "pub struct SocketArgs"),
        ("cmd::ss", "pub struct SsArgs"),
        ("cmd::trace", "pub struct TraceArgs"),
    ] {
        let (_, t) = modules().into_iter().find(|(n, _)| n == m).unwrap();
        assert!(code(&t).contains(args), "{m} does not declare {args}");
    }
}

/// Every function outside tests in the workspace's crates (tests/ folders and what follows a
/// file's `#[cfg(test)]` left out), with its length in lines from `fn` to its closing brace at
/// the same indent.
fn function_lengths() -> Vec<(usize, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if !matches!(name.as_str(), "target" | "tests" | ".git") {
                    walk(&p, out);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                out.push(p);
            }
        }
    }
    let root = tcpwin_lab::harness::workspace();
    let mut files = Vec::new();
    for krate in [
        "tcpwin-userspace",
        "tcpwin-model",
        "tcpwin-common",
        "tcpwin-lab",
        "tcpwin-ebpf",
        "xtask",
    ] {
        walk(&root.join(krate).join("src"), &mut files);
    }
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .take_while(|l| l.trim() != "#[cfg(test)]")
            .collect();
        for (i, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            let indent = l.len() - t.len();
            let head = [
                "pub(crate) ",
                "pub(super) ",
                "pub ",
                "const ",
                "async ",
                "unsafe ",
            ]
            .iter()
            .fold(t, |t, p| t.strip_prefix(p).unwrap_or(t));
            if !head.starts_with("fn ") || l.trim_end().ends_with(';') {
                continue;
            }
            let end = lines[i + 1..]
                .iter()
                .position(|m| {
                    let mt = m.trim_start();
                    m.len() - mt.len() == indent && mt.starts_with('}')
                })
                .map_or(lines.len(), |j| i + 1 + j);
            let name = head[3..].split(['(', '<']).next().unwrap_or("").to_string();
            let rel = f.strip_prefix(&root).unwrap().display().to_string();
            out.push((end - i + 1, format!("{rel}: fn {name}")));
        }
    }
    out
}

#[test]
fn no_function_outside_tests_is_over_150_lines() {
    let all = function_lengths();
    // the scan finds the functions it must (a scan that finds nothing would pass anything)
    assert!(all.len() > 500, "only {} functions found", all.len());
    let long: Vec<_> = all.iter().filter(|(n, _)| *n > 150).collect();
    assert!(
        long.is_empty(),
        "functions over 150 lines (split them where their steps part): {long:?}"
    );
}
