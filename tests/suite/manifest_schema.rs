//! `dracode schema manifest` is a schema an editor can check a manifest with: every bundled
//! example and every manifest the documentation shows is valid against it, and a misspelt key
//! in any table is not — as the binary itself refuses it.

use crate::support::cli::{crate_root, dracode, git};
use crate::support::docs::{all_pages, code_blocks};
use serde_json::Value;

fn schema() -> jsonschema::Validator {
    let out = dracode(&crate_root()).args(["schema", "manifest"]).output().unwrap();
    assert!(out.status.success(), "dracode schema manifest failed");
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    jsonschema::validator_for(&schema).expect("the manifest schema compiles")
}

/// A TOML manifest as the JSON an editor's schema check sees.
fn as_json(toml_text: &str) -> Value {
    let table: toml::Table = toml::from_str(toml_text).unwrap_or_else(|e| panic!("{e}\n{toml_text}"));
    serde_json::to_value(table).unwrap()
}

/// The schema's complaints about `manifest`, one line each.
fn complaints(validator: &jsonschema::Validator, manifest: &Value) -> Vec<String> {
    validator.iter_errors(manifest).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[test]
fn every_bundled_and_documented_manifest_is_valid_against_the_schema() {
    let validator = schema();
    let mut manifests: Vec<(String, String)> = Vec::new();
    for entry in std::fs::read_dir(crate_root().join("examples")).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "toml") {
            manifests.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
        }
    }
    for page in all_pages() {
        for block in code_blocks(&page.text, "toml").into_iter().filter(|b| b.contains("[[tasks]]")) {
            manifests.push((page.name(), block));
        }
    }
    assert!(manifests.len() >= 10, "only {} manifests found", manifests.len());
    let invalid: Vec<String> = manifests
        .iter()
        .filter_map(|(name, text)| {
            let problems = complaints(&validator, &as_json(text));
            (!problems.is_empty()).then(|| format!("{name}: {}", problems.join("; ")))
        })
        .collect();
    assert!(invalid.is_empty(), "manifests the schema refuses:\n{}", invalid.join("\n"));
}

#[test]
fn a_misspelt_key_in_any_table_is_refused_by_the_schema_as_by_dracode() {
    let validator = schema();
    let task = "[[tasks]]\nid = \"t\"\nprompt = \"p\"\n";
    let cases = [
        ("the top level", format!("bogus = 1\n{task}")),
        ("[defaults]", format!("[defaults]\nbogus = 1\n{task}")),
        ("[[tasks]]", format!("{task}bogus = 1\n")),
        ("[setup]", format!("[setup]\ncommand = \"true\"\nbogus = 1\n{task}")),
        ("[defaults.limits]", format!("[defaults.limits]\nbogus = 1\n{task}")),
        ("[defaults.network]", format!("[defaults.network]\nallow = [\"a.example\"]\nbogus = 1\n{task}")),
        ("[tasks.policy.TOOL]", format!("{task}[tasks.policy.run_command]\nallow = [\"cargo *\"]\nbogus = 1\n")),
        ("[mcp_servers.NAME]", format!("[mcp_servers.fs]\ncommand = \"server\"\nbogus = 1\n{task}")),
    ];
    let tmp = tempfile::tempdir().unwrap();
    git(tmp.path(), &["init", "-q"]);
    for (table, text) in cases {
        let valid = complaints(&validator, &as_json(&text.replace("bogus = 1\n", "")));
        assert!(valid.is_empty(), "{table}: the manifest without the misspelt key is valid: {valid:?}");
        assert!(!complaints(&validator, &as_json(&text)).is_empty(), "{table}: the schema accepts an unknown key:\n{text}");
        std::fs::write(tmp.path().join("tasks.toml"), &text).unwrap();
        let out = dracode(tmp.path()).args(["validate", "--offline", "tasks.toml"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{table}: dracode accepts what the schema refuses:\n{text}\n{stderr}");
        assert!(stderr.contains("bogus"), "{table}: {stderr}");
    }
}
