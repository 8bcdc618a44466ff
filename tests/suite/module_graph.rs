//! The architecture as docs/src/architecture.md draws it, checked: within every crate of the
//! workspace the top-level modules import one another in one direction only — no cycle, however
//! long. An import is any `crate::` or `super::` path that names another top-level module (a
//! `use`, a path in code, a doc link), in every file under the crate's `src/` but an inline
//! `#[cfg(test)] mod tests` block at a file's end.

use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A crate's top-level modules and, for each, the modules it imports with the first file that does.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The source folders of every crate in the workspace: `src/` and `crates/*/src/`.
fn crate_sources(root: &Path) -> Vec<PathBuf> {
    let mut sources = vec![root.join("src")];
    let mut members: Vec<PathBuf> = std::fs::read_dir(root.join("crates")).unwrap().map(|e| e.unwrap().path().join("src")).collect();
    members.sort();
    sources.extend(members.into_iter().filter(|src| src.join("lib.rs").exists() || src.join("main.rs").exists()));
    sources
}

/// Every `.rs` file under `dir`, as paths relative to `src`.
fn rust_files(src: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(src, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path.strip_prefix(src).unwrap().to_path_buf());
        }
    }
}

/// The module path of a file: `a/b.rs` is `a::b`, `a/mod.rs` is `a`, `lib.rs` the crate root.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.with_extension("").iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|last| matches!(last.as_str(), "mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The full paths a file's `crate::`/`super::` paths name (a braced group gives one per item).
fn named_paths(text: &str, me: &[String]) -> Vec<Vec<String>> {
    let path = Regex::new(r"\b(crate|super)((?:::\s*[A-Za-z_][A-Za-z0-9_]*)*)(::\s*\{([^;]*?)\})?").unwrap();
    let mut named = Vec::new();
    for found in path.captures_iter(text) {
        let mut rest: Vec<String> = found[2].split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
        let mut start: Vec<String> = Vec::new();
        if &found[1] == "super" {
            start = me[..me.len().saturating_sub(1)].to_vec();
            while rest.first().is_some_and(|r| r == "super") {
                start.pop();
                rest.remove(0);
            }
        }
        start.extend(rest);
        match found.get(4) {
            None => named.push(start),
            Some(group) => {
                for item in group.as_str().split(',') {
                    let item = item.split(" as ").next().unwrap_or_default();
                    let mut full = start.clone();
                    full.extend(item.split("::").map(str::trim).filter(|s| !s.is_empty() && !s.starts_with('{')).map(str::to_string));
                    named.push(full);
                }
            }
        }
    }
    named
}

/// The import graph of the crate whose sources are in `src`: among its top-level modules.
fn graph(src: &Path) -> Graph {
    graph_in(src, &[])
}

/// The import graph among the modules directly inside `folder` (a module path such as
/// `["tools"]`; empty: the crate's top-level modules) of the crate whose sources are in `src`.
/// The folder's own `mod.rs` is not one of them: its children may all name it.
fn graph_in(src: &Path, folder: &[&str]) -> Graph {
    let mut files = Vec::new();
    rust_files(src, src, &mut files);
    files.sort();
    let depth = folder.len();
    let inside = |path: &[String]| path.len() > depth && path.iter().zip(folder).all(|(a, b)| a == b);
    let modules: BTreeSet<String> = files.iter().map(|f| module_path(f)).filter(|m| inside(m)).map(|m| m[depth].clone()).collect();
    let mut graph: Graph = modules.iter().map(|m| (m.clone(), BTreeMap::new())).collect();
    for rel in &files {
        let me = module_path(rel);
        if !inside(&me) {
            continue;
        }
        let from = &me[depth];
        let text = std::fs::read_to_string(src.join(rel)).unwrap();
        let text = text.find("#[cfg(test)]\nmod tests").map_or(text.as_str(), |end| &text[..end]);
        for path in named_paths(text, &me).into_iter().filter(|p| inside(p)) {
            if let Some(target) = path.get(depth).filter(|t| modules.contains(*t) && *t != from) {
                graph.get_mut(from).unwrap().entry(target.clone()).or_insert_with(|| rel.display().to_string());
            }
        }
    }
    graph
}

/// The modules reachable from `from` by one or more imports.
fn reachable(graph: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut queue: Vec<&String> = graph[from].keys().collect();
    while let Some(next) = queue.pop() {
        if seen.insert(next.clone()) {
            queue.extend(graph[next].keys());
        }
    }
    seen
}

/// The groups of modules that import one another (each of more than one module), with the
/// imports inside each group and the file that makes it.
fn cycles(graph: &Graph) -> Vec<String> {
    let reach: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|m| (m, reachable(graph, m))).collect();
    let mut reported = BTreeSet::new();
    let mut out = Vec::new();
    for (module, from_it) in &reach {
        let group: BTreeSet<&String> = graph.keys().filter(|other| from_it.contains(*other) && reach[other].contains(*module)).collect();
        if group.len() < 2 || !reported.insert(group.clone()) {
            continue;
        }
        let edges: Vec<String> = group
            .iter()
            .flat_map(|a| graph[*a].iter().filter(|(b, _)| group.contains(b)).map(move |(b, file)| format!("{a} -> {b} ({file})")))
            .collect();
        out.push(format!("cycle of {}: {}", group.len(), edges.join(", ")));
    }
    out
}

#[test]
fn no_crate_has_a_cycle_among_its_top_level_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = crate_sources(root);
    assert!(sources.len() >= 7, "the workspace's crates: {sources:?}");
    let (mut found, mut modules) = (Vec::new(), 0);
    for src in &sources {
        let graph = graph(src);
        modules += graph.len();
        found.extend(cycles(&graph).into_iter().map(|c| format!("{}: {c}", src.strip_prefix(root).unwrap().display())));
    }
    assert!(modules >= 40, "every crate's modules were read: {modules}");
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

#[test]
fn the_files_inside_each_folder_of_the_core_import_one_another_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let folders: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut found = Vec::new();
    for folder in &folders {
        let graph = graph_in(&src, &[folder]);
        found.extend(cycles(&graph).into_iter().map(|c| format!("src/{folder}/: {c}")));
    }
    assert!(graph_in(&src, &["batch"]).len() >= 20 && graph_in(&src, &["tools"]).len() >= 10, "the folders were read: {folders:?}");
    assert!(found.is_empty(), "files that import each other:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_cycle_through_super_braces_and_doc_links() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a; pub mod b; pub mod c;").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::{c::X, std_only};").unwrap();
    std::fs::write(src.join("b/mod.rs"), "mod inner;").unwrap();
    std::fs::write(src.join("b/inner.rs"), "/// See [`super::super::a::Y`].\npub struct Z;").unwrap();
    std::fs::write(src.join("c.rs"), "pub struct X;\n#[cfg(test)]\nmod tests { use crate::a::Y; }").unwrap();
    assert_eq!(cycles(&graph(src)), Vec::<String>::new(), "a test block at a file's end is not an import");
    std::fs::write(src.join("c.rs"), "pub fn f() -> crate::b::Z { crate::b::Z }").unwrap();
    let found = cycles(&graph(src));
    assert_eq!(found, ["cycle of 3: a -> c (a.rs), b -> a (b/inner.rs), c -> b (c.rs)"]);
}

#[test]
fn the_check_sees_a_cycle_among_the_files_of_a_folder_but_not_through_its_mod_rs() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("t/sub")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod t; pub mod other;").unwrap();
    std::fs::write(src.join("other.rs"), "use crate::t::x::X;").unwrap();
    std::fs::write(src.join("t/mod.rs"), "pub mod x; pub mod y; pub mod sub; use crate::other::O;").unwrap();
    std::fs::write(src.join("t/x.rs"), "use super::{ToolError, y::Y};").unwrap();
    std::fs::write(src.join("t/y.rs"), "pub struct Y;").unwrap();
    std::fs::write(src.join("t/sub/mod.rs"), "pub struct S;").unwrap();
    assert_eq!(cycles(&graph_in(src, &["t"])), Vec::<String>::new(), "x -> y only; the folder's mod.rs is no node");
    assert_eq!(graph_in(src, &["t"]).keys().cloned().collect::<Vec<_>>(), ["sub", "x", "y"]);
    std::fs::write(src.join("t/sub/mod.rs"), "pub fn f() -> crate::t::x::X { todo!() }").unwrap();
    std::fs::write(src.join("t/y.rs"), "/// Made by [`super::sub::S`].\npub struct Y;").unwrap();
    assert_eq!(cycles(&graph_in(src, &["t"])), ["cycle of 3: sub -> x (t/sub/mod.rs), x -> y (t/x.rs), y -> sub (t/y.rs)"]);
}

/// The workspace crates' names as code writes them (`dracode_llm`), by their folder under `src/`.
fn crate_ident(root: &Path, src: &Path) -> String {
    let manifest = std::fs::read_to_string(src.parent().unwrap().join("Cargo.toml")).unwrap();
    let name = manifest.lines().find_map(|l| l.strip_prefix("name = \"")).and_then(|l| l.strip_suffix('"'));
    let name = name.unwrap_or_else(|| panic!("no package name in {}", src.strip_prefix(root).unwrap().display()));
    name.replace('-', "_")
}

/// The workspace crates a crate's `Cargo.toml` lists under `[dependencies]`.
fn declared_edges(src: &Path) -> BTreeSet<String> {
    let manifest = std::fs::read_to_string(src.parent().unwrap().join("Cargo.toml")).unwrap();
    let section = manifest.split("\n[dependencies]").nth(1).unwrap_or_default();
    let section = section.split("\n[").next().unwrap_or_default();
    section
        .lines()
        .filter_map(|l| l.split(['.', ' ', '=']).next())
        .filter(|n| n.starts_with("dracode-"))
        .map(|n| n.replace('-', "_"))
        .collect()
}

/// For each workspace crate a crate's sources name (`dracode_x::…` or `use dracode_x`), how
/// many times; and every re-export of a whole crate (`pub use dracode_x as x`, `pub use dracode_x::*`),
/// which would let its users reach it under another name and hide the edge. (A crate may re-export
/// one item of a crate below it that its own signatures use, as `dracode_llm::Usage`.)
fn named_edges(src: &Path, crates: &BTreeSet<String>) -> (BTreeMap<String, usize>, Vec<String>) {
    let path = Regex::new(r"\b(dracode_[a-z_]+)\b").unwrap();
    let reexport = Regex::new(r"pub\s+use\s+(dracode_[a-z_]+)(\s+as\b|\s*;|::\*)").unwrap();
    let mut files = Vec::new();
    rust_files(src, src, &mut files);
    let (mut counts, mut reexports) = (BTreeMap::new(), Vec::new());
    for rel in &files {
        let text = std::fs::read_to_string(src.join(rel)).unwrap();
        for found in path.captures_iter(&text).filter(|c| crates.contains(&c[1])) {
            *counts.entry(found[1].to_string()).or_insert(0) += 1;
        }
        reexports.extend(reexport.captures_iter(&text).map(|c| format!("{} re-exports {}", rel.display(), &c[1])));
    }
    (counts, reexports)
}

#[test]
fn every_crate_edge_is_named_where_it_is_used_and_the_crate_graph_points_down() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = crate_sources(root);
    let names: Vec<String> = sources.iter().map(|s| crate_ident(root, s)).collect();
    let crates: BTreeSet<String> = names.iter().cloned().collect();
    let (mut problems, mut graph, mut report) = (Vec::new(), Graph::new(), Vec::new());
    for (src, me) in sources.iter().zip(&names) {
        let declared = declared_edges(src);
        let (named, reexports) = named_edges(src, &crates);
        let named_set: BTreeSet<String> = named.keys().filter(|c| *c != me).cloned().collect();
        problems.extend(reexports);
        problems.extend(named_set.difference(&declared).map(|c| format!("{me} names {c}, which its Cargo.toml does not list")));
        problems.extend(declared.difference(&named_set).map(|c| format!("{me} lists {c} but never names it")));
        report.extend(named.iter().filter(|(c, _)| *c != me).map(|(c, n)| format!("{me} -> {c}: {n} paths")));
        graph.insert(me.clone(), named_set.iter().map(|c| (c.clone(), String::new())).collect());
    }
    problems.extend(cycles(&graph));
    assert!(report.len() >= 10, "the crate edges were counted:\n{}", report.join("\n"));
    assert!(problems.is_empty(), "crate edges:\n{}\n\nall edges:\n{}", problems.join("\n"), report.join("\n"));
}

#[test]
fn the_crate_edge_check_sees_a_reexport_and_an_undeclared_crate() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"dracode-x\"\n\n[dependencies]\ndracode-llm.workspace = true\n")
        .unwrap();
    std::fs::write(src.join("lib.rs"), "pub use dracode_llm as llm;\nfn f() -> dracode_results::Status { todo!() }\n").unwrap();
    let crates: BTreeSet<String> = ["dracode_llm", "dracode_results"].map(String::from).into();
    let (named, reexports) = named_edges(&src, &crates);
    assert_eq!(reexports, ["lib.rs re-exports dracode_llm"]);
    assert_eq!(named.keys().cloned().collect::<Vec<_>>(), ["dracode_llm", "dracode_results"]);
    assert_eq!(declared_edges(&src), ["dracode_llm".to_string()].into());
}
