//! The official JSON-Schema-Test-Suite (vendored in `tests/fixtures/json-schema-test-suite/`,
//! see its README): every case must pass but the few skipped below, each with its reason.

use super::JsonSchema;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `(file, group description, case description or "*" for the whole group, why)`.
const SKIPPED: &[(&str, &str, &str, &str)] = &[
    ("draft2020-12/defs.json", "validate definition against metaschema", "*", "refers to the remote 2020-12 meta-schema"),
    ("draft2020-12/ref.json", "remote ref, containing refs itself", "*", "refers to the remote 2020-12 meta-schema"),
    ("draft2020-12/unevaluatedItems.json", "unevaluatedItems with $dynamicRef", "*", "no dynamic scope: $dynamicRef resolves statically"),
    (
        "draft2020-12/unevaluatedProperties.json",
        "unevaluatedProperties with $dynamicRef",
        "*",
        "no dynamic scope: $dynamicRef resolves statically",
    ),
    ("draft2020-12/optional/float-overflow.json", "*", "*", "a quotient beyond f64 (1e308 / 0.5) is not taken as an integer"),
];

fn suite() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/json-schema-test-suite")
}

fn files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, found);
        } else if path.extension().is_some_and(|e| e == "json") {
            found.push(path);
        }
    }
}

fn skipped(file: &str, group: &str, case: &str) -> bool {
    SKIPPED.iter().any(|&(f, g, c, _)| f == file && (g == "*" || g == group) && (c == "*" || c == case))
}

/// Runs one file; returns `(passed, skipped)` and adds what failed to `failures`.
fn run_file(path: &Path, failures: &mut Vec<String>) -> (usize, usize) {
    let file = path.strip_prefix(suite()).unwrap().to_string_lossy().into_owned();
    let groups: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (mut passed, mut skips) = (0, 0);
    for group in &groups {
        let name = group["description"].as_str().unwrap();
        let cases = group["tests"].as_array().unwrap();
        let compiled = JsonSchema::compile(&group["schema"]);
        for case in cases {
            let description = case["description"].as_str().unwrap();
            if skipped(&file, name, description) {
                skips += 1;
                continue;
            }
            let verdict = compiled.as_ref().map(|s| s.is_valid(&case["data"]));
            match verdict {
                Ok(valid) if valid == case["valid"].as_bool().unwrap() => passed += 1,
                Ok(valid) => failures.push(format!("{file}: {name} / {description}: said valid = {valid}")),
                Err(e) => failures.push(format!("{file}: {name} / {description}: schema refused: {e}")),
            }
        }
    }
    (passed, skips)
}

#[test]
fn the_official_test_suite_passes_but_for_the_listed_skips() {
    let mut paths = Vec::new();
    files(&suite(), &mut paths);
    paths.sort();
    assert!(paths.len() >= 50, "the vendored suite is there: {}", paths.len());
    let mut failures = Vec::new();
    let (mut passed, mut skips) = (0, 0);
    for path in &paths {
        let (p, s) = run_file(path, &mut failures);
        passed += p;
        skips += s;
    }
    println!("JSON-Schema-Test-Suite: {passed} passed, {skips} skipped, {} failed, in {} files", failures.len(), paths.len());
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));
    let unused: Vec<_> = SKIPPED.iter().filter(|(f, ..)| !paths.iter().any(|p| p.ends_with(f))).collect();
    assert!(unused.is_empty(), "skips naming no file: {unused:?}");
}
