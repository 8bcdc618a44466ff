//! The official JSON-Schema-Test-Suite (vendored in `tests/fixtures/json-schema-test-suite/`,
//! see its README), run through [`JsonSchema`] as dracode compiles an `output_schema`: every
//! case must pass (the `draft7/` files have no `$schema`, so they also check that draft-07's
//! spellings are still read).

use super::JsonSchema;
use serde_json::Value;
use std::path::{Path, PathBuf};

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

/// Runs one file; returns how many cases passed and adds what failed to `failures`.
fn run_file(path: &Path, failures: &mut Vec<String>) -> usize {
    let file = path.strip_prefix(suite()).unwrap().to_string_lossy().into_owned();
    let groups: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut passed = 0;
    for group in &groups {
        let name = group["description"].as_str().unwrap();
        let cases = group["tests"].as_array().unwrap();
        let compiled = JsonSchema::compile(&group["schema"]);
        for case in cases {
            let description = case["description"].as_str().unwrap();
            let verdict = compiled.as_ref().map(|s| s.is_valid(&case["data"]));
            if let Ok(schema) = &compiled {
                let listed = schema.errors(&case["data"]).is_empty();
                assert_eq!(verdict, Ok(listed), "{file}: {name} / {description}: errors() and is_valid() agree");
            }
            match verdict {
                Ok(valid) if valid == case["valid"].as_bool().unwrap() => passed += 1,
                Ok(valid) => failures.push(format!("{file}: {name} / {description}: said valid = {valid}")),
                Err(e) => failures.push(format!("{file}: {name} / {description}: schema refused: {e}")),
            }
        }
    }
    passed
}

#[test]
fn the_official_test_suite_passes() {
    let mut paths = Vec::new();
    files(&suite(), &mut paths);
    paths.sort();
    assert!(paths.len() >= 50, "the vendored suite is there: {}", paths.len());
    let mut failures = Vec::new();
    let passed: usize = paths.iter().map(|path| run_file(path, &mut failures)).sum();
    println!("JSON-Schema-Test-Suite: {passed} passed, {} failed, in {} files", failures.len(), paths.len());
    assert!(failures.is_empty(), "{} failed:\n{}", failures.len(), failures.join("\n"));
    assert!(passed >= 1400, "every case ran: {passed}");
}
