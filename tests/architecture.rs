//! The core's modules read bottom-up: no module uses one that uses it back, directly or through
//! others (each `super::NAME` in the code of src/core/MODULE.rs, not its comments, is an edge).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each core module and the core modules it names with `super::`.
fn core_modules() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        if name == "mod" {
            continue;
        }
        // Code only: a doc comment may point at any module.
        let text: String = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let uses = edges(&text, &name);
        graph.insert(name, uses);
    }
    graph
}

/// The core modules `text` (the code of module `own`) names: `super::a::f`, `crate::core::a`,
/// and each item of a group, `use super::{a, b::{C, D}}`.
fn edges(text: &str, own: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for prefix in ["super::", "crate::core::"] {
        for rest in text.split(prefix).skip(1) {
            match rest.strip_prefix('{') {
                Some(group) => used.extend(group_items(group)),
                None => used.extend([first_name(rest)]),
            }
        }
    }
    used.retain(|u| !u.is_empty() && u != own && u != "super");
    used
}

/// The first path segment of each top-level item of a `{...}` group (the text after `{`).
fn group_items(group: &str) -> Vec<String> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0, true);
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            c if start && !c.is_whitespace() => {
                items.push(first_name(&group[at..]));
                start = false;
            }
            _ => {}
        }
    }
    items
}

fn first_name(rest: &str) -> String {
    rest.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// How the check reads a module's code: (code, the modules it names).
#[rustfmt::skip]
#[test]
fn each_way_of_naming_a_module_is_an_edge() {
    let cases: &[(&str, &[&str])] = &[
        ("use super::address::Endpoints;",             &["address"]),
        ("let x = super::text::decimal(s);",           &["text"]),
        ("use super::{address, text::decimal};",       &["address", "text"]),
        ("use super::{error::{Error, Result}, layout};", &["error", "layout"]),
        ("use super::{\n    gpus,\n    ports::Place,\n};",  &["gpus", "ports"]),
        ("use crate::core::{spec::Spec, topology};",    &["spec", "topology"]),
        ("use crate::core::het::Component;",            &["het"]),
        ("use super::own::Thing;",                      &[]),
        ("use std::collections::BTreeMap;",             &[]),
    ];
    for (code, want) in cases {
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(edges(code, "own"), want, "{code}");
    }
}

/// The core never reaches up into the SPANK shell, by name or through its parent.
#[test]
fn the_core_never_names_the_shell() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for forbidden in ["crate::spank", "super::super"] {
                assert!(
                    !code.contains(forbidden),
                    "{}:{}: {forbidden}",
                    path.display(),
                    n + 1
                );
            }
        }
    }
}

/// A path of modules that comes back to where it started, if any.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_string());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if graph.contains_key(next) {
                if let Some(found) = visit(next, graph, path, done) {
                    return Some(found);
                }
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_core_has_no_import_cycle() {
    let graph = core_modules();
    assert!(graph.len() > 10, "read too few modules: {graph:?}");
    assert_eq!(cycle(&graph), None);
}

/// The check itself finds a cycle where there is one (the one this test was written against:
/// address used tf_config's JSON writer while tf_config used address).
#[test]
fn a_cycle_is_found() {
    let edge = |a: &str, b: &[&str]| (a.to_string(), b.iter().map(|s| s.to_string()).collect());
    let graph = BTreeMap::from([
        edge("address", &["settings", "tf_config"]),
        edge("settings", &["address"]),
        edge("tf_config", &["address", "settings"]),
        edge("text", &[]),
    ]);
    assert!(cycle(&graph).is_some());
    let graph = BTreeMap::from([
        edge("address", &["text"]),
        edge("settings", &["address"]),
        edge("tf_config", &["address", "settings"]),
        edge("text", &[]),
    ]);
    assert_eq!(cycle(&graph), None);
}

/// Slurm's C functions are called from three rooms of the shell only (the safe handle, the
/// libslurm calls, the log); the hooks read only ffi's constants (src/spank/ffi.rs says so).
#[test]
fn only_three_rooms_call_slurms_functions() {
    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => files(&path, out),
                false => out.push(path),
            }
        }
    }
    let spank = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/spank");
    let mut all = Vec::new();
    files(&spank, &mut all);
    let mut callers: Vec<String> = all
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            text.split("ffi::").skip(1).any(|rest| {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                name.starts_with(|c: char| c.is_ascii_lowercase())
                    && rest[name.len()..].starts_with('(')
            })
        })
        .map(|path| path.strip_prefix(&spank).unwrap().display().to_string())
        .collect();
    callers.sort();
    assert_eq!(callers, ["handle.rs", "log.rs", "slurm.rs"]);
}
