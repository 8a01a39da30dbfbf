//! The core's modules read bottom-up: no module uses one that uses it back, directly or through
//! others (each `super::PATH` or `crate::core::PATH` in the code of a file of src/core, not its
//! comments, is an edge to the module the path names). A directory module (src/core/NAME/) is a
//! module of its own, `NAME`, with an edge to each of its files (`NAME::FILE`): what uses it may
//! reach any of them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every file of the core with its module's path (`isolation::rules` for
/// src/core/isolation/rules.rs, `isolation` for its mod.rs; the core's own mod.rs is left out).
fn core_files() -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, module: &str, out: &mut Vec<(String, PathBuf)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_string();
            let child = match module {
                "" => name.clone(),
                _ => format!("{module}::{name}"),
            };
            match (path.is_dir(), name.as_str()) {
                (true, _) => walk(&path, &child, out),
                (false, "mod") if module.is_empty() => {}
                (false, "mod") => out.push((module.to_string(), path)),
                (false, _) => out.push((child, path)),
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core"),
        "",
        &mut out,
    );
    out
}

/// Each core module and the core modules it names.
fn core_modules() -> BTreeMap<String, BTreeSet<String>> {
    let files = core_files();
    let known: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        // Code only: a doc comment may point at any module.
        let text: String = std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut uses = edges(&text, module, &known);
        // A directory module reaches each of its files.
        let children = known.iter().filter(|k| parent(k) == module.as_str());
        uses.extend(children.cloned());
        graph.insert(module.clone(), uses);
    }
    graph
}

/// The module `module` is a file of: `isolation` for `isolation::rules`, "" (the core) for
/// `settings`.
fn parent(module: &str) -> &str {
    module.rsplit_once("::").map_or("", |(p, _)| p)
}

/// The core modules `text` (the code of module `own`) names: `super::a::f` (a sibling of
/// `own`), `crate::core::a::b::f`, and each item of a group, `use super::{a, b::{C, D}}`, each
/// as the longest of its prefixes that is a module of `known`.
fn edges(text: &str, own: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (prefix, base) in [("super::", parent(own)), ("crate::core::", "")] {
        for rest in text.split(prefix).skip(1) {
            for path in paths(rest) {
                let full = match base {
                    "" => path,
                    _ => format!("{base}::{path}"),
                };
                let segments: Vec<&str> = full.split("::").collect();
                let module = (1..=segments.len())
                    .rev()
                    .map(|n| segments[..n].join("::"))
                    .find(|m| known.contains(m));
                used.extend(module);
            }
        }
    }
    used.retain(|u| u != own);
    used
}

/// The paths a `use` tree or an expression names from its start: `a::b::f` is one path,
/// `a::{b, c::{D, E}}` three (`a::b`, `a::c::D`, `a::c::E`).
fn paths(rest: &str) -> Vec<String> {
    if let Some(group) = rest.strip_prefix('{') {
        return group_items(group)
            .iter()
            .flat_map(|item| paths(item))
            .collect();
    }
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() {
        return Vec::new();
    }
    match rest[name.len()..].strip_prefix("::") {
        Some(tail) => match paths(tail).as_slice() {
            [] => vec![name],
            more => more.iter().map(|p| format!("{name}::{p}")).collect(),
        },
        None => vec![name],
    }
}

/// The text of each top-level item of a `{...}` group (the text after `{`).
fn group_items(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0, None);
    for (at, c) in group.char_indices() {
        match c {
            '}' | ',' if depth == 0 => {
                items.extend(start.take().map(|s| &group[s..at]));
                if c == '}' {
                    break;
                }
            }
            '{' => depth += 1,
            '}' => depth -= 1,
            c if start.is_none() && !c.is_whitespace() => start = Some(at),
            _ => {}
        }
    }
    items
}

/// How the check reads a module's code: (the module, code, the modules it names).
#[rustfmt::skip]
#[test]
fn each_way_of_naming_a_module_is_an_edge() {
    let known: BTreeSet<String> = ["address", "text", "error", "layout", "gpus", "ports", "spec",
        "topology", "het", "own", "isolation", "isolation::rules", "isolation::tables"]
        .iter().map(|s| s.to_string()).collect();
    let cases: &[(&str, &str, &[&str])] = &[
        ("own", "use super::address::Endpoints;",                      &["address"]),
        ("own", "let x = super::text::decimal(s);",                    &["text"]),
        ("own", "use super::{address, text::decimal};",                &["address", "text"]),
        ("own", "use super::{error::{Error, Result}, layout};",        &["error", "layout"]),
        ("own", "use super::{\n    gpus,\n    ports::Place,\n};",     &["gpus", "ports"]),
        ("own", "use crate::core::{spec::Spec, topology};",            &["spec", "topology"]),
        ("own", "use crate::core::het::Component;",                    &["het"]),
        ("own", "use super::own::Thing;",                              &[]),
        ("own", "use std::collections::BTreeMap;",                     &[]),
        ("own", "use super::isolation::rules::StepFirewall;",          &["isolation::rules"]),
        ("own", "isolation::rules::check_ports(range, ports)?; use super::isolation;", &["isolation"]),
        ("isolation::rules", "use super::tables::{ended_table_name, table_name};", &["isolation::tables"]),
        ("isolation::rules", "use crate::core::text::decimal;",        &["text"]),
        ("isolation::tables", "use crate::core::isolation::{rules::OWNED, tables};", &["isolation::rules"]),
    ];
    for (own, code, want) in cases {
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(edges(code, own, &known), want, "{own}: {code}");
    }
}

/// The core never reaches up into the SPANK shell, by name or through its parent.
#[test]
fn the_core_never_names_the_shell() {
    for (_, path) in core_files() {
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
