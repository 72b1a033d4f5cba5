//! The judge's floors, checked from its source: in `src/verdict/`, every import between files
//! names a sibling file (never an item the folder's `mod.rs` re-exports, which would import the
//! file that calls it), the files' graph has no circle, nothing imports the judge, and the
//! shared types import only the floor below them. Adding a family touches one file.
use std::collections::{BTreeMap, BTreeSet};

/// The verdict folder, where the running test's package is (cargo sets `CARGO_MANIFEST_DIR`
/// for what it runs): the path compiled in names the checkout that built a cached binary.
fn dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
        .join("src/verdict")
}

/// The code without comments.
fn code(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first segment of every path after `super::` (a `{...}` group: of each of its items).
fn super_refs(text: &str) -> BTreeSet<String> {
    let code = code(text);
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("super::") {
        let rest = code[i + "super::".len()..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(first_segment(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.insert(first_segment(&item));
        } else {
            out.insert(first_segment(rest));
        }
    }
    out.remove("");
    out
}

fn first_segment(s: &str) -> String {
    s.trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Each file of the folder (tests aside) and the siblings it imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<(String, String)> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| {
            (
                p.file_stem().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    let names: BTreeSet<String> = files.iter().map(|(n, _)| n.clone()).collect();
    let mut g = BTreeMap::new();
    for (name, text) in &files {
        if name == "mod" {
            continue;
        }
        // a file's own `mod tests` reaches its file with `super::*`: not an import
        let text = text.split("#[cfg(test)]").next().unwrap_or(text);
        let refs = super_refs(text);
        for r in &refs {
            assert!(
                names.contains(r) && r != "mod",
                "verdict/{name}.rs imports `super::{r}`: an item of the folder's mod.rs, not a sibling file; import it from the file that defines it"
            );
        }
        g.insert(name.clone(), refs);
    }
    g
}

#[test]
fn no_import_runs_up_a_floor() {
    let g = graph();
    // no circle: every file can be placed on a floor above everything it imports
    let mut floor: BTreeMap<String, usize> = BTreeMap::new();
    while floor.len() < g.len() {
        let before = floor.len();
        for (n, deps) in &g {
            if !floor.contains_key(n) && deps.iter().all(|d| floor.contains_key(d)) {
                let f = deps.iter().map(|d| floor[d] + 1).max().unwrap_or(0);
                floor.insert(n.clone(), f);
            }
        }
        assert!(
            floor.len() > before,
            "an import circle among {:?}",
            g.keys()
                .filter(|k| !floor.contains_key(*k))
                .collect::<Vec<_>>()
        );
    }
    // the judge is the top: nothing imports it
    for (n, deps) in &g {
        assert!(
            !deps.contains("decide"),
            "verdict/{n}.rs imports the judge (decide.rs)"
        );
    }
    assert_eq!(
        floor["decide"],
        *floor.values().max().unwrap(),
        "the judge (decide.rs) is not on the top floor: {floor:?}"
    );
    // the shared types sit at the bottom: they import only what a verdict is made of
    let allowed: BTreeSet<String> = ["end", "fix", "limit"].map(String::from).into();
    assert!(
        g["types"].is_subset(&allowed),
        "verdict/types.rs imports {:?}",
        g["types"]
    );
}

#[test]
fn the_floor_check_sees_an_import_of_the_folder() {
    // the check itself: an import of a re-exported item, a group and a plain path
    let refs =
        super_refs("use super::{end::End, Limit,\n sizing::{a, b}};\nlet x = super::caps::caps();");
    let want: BTreeSet<String> = ["end", "Limit", "sizing", "caps"].map(String::from).into();
    assert_eq!(refs, want);
}
