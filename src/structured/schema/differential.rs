//! Differential test: dracode's validator and the `jsonschema` crate (a dev-dependency only)
//! must give the same verdict on a corpus — the schemas dracode publishes or ships (findings,
//! events, SARIF 2.1.0), the test suite's schemas and hand-written tricky ones — over seed
//! values and many mutations of them.

use super::JsonSchema;
use serde_json::{Value, json};
use std::path::Path;

/// Variants of `value`: each part replaced by values of other types, each property dropped,
/// one added; at most `limit`.
fn mutations(value: &Value, limit: usize) -> Vec<Value> {
    let mut found = Vec::new();
    let mut paths = Vec::new();
    collect_paths(value, String::new(), &mut paths);
    let replacements = [json!(null), json!(0), json!(-1), json!(2.5), json!(""), json!("x"), json!([]), json!({}), json!(true)];
    for path in &paths {
        for replacement in &replacements {
            let mut changed = value.clone();
            *changed.pointer_mut(path).unwrap() = replacement.clone();
            found.push(changed);
        }
        let (parent, key) = path.rsplit_once('/').unwrap_or(("", ""));
        let mut dropped = value.clone();
        match dropped.pointer_mut(parent) {
            Some(Value::Object(map)) => drop(map.shift_remove(&key.replace("~1", "/").replace("~0", "~"))),
            Some(Value::Array(items)) => drop(items.remove(key.parse().unwrap())),
            _ => continue,
        }
        found.push(dropped);
    }
    if let Some(map) = value.as_object() {
        let mut added = map.clone();
        added.insert("unexpected".into(), json!(1));
        found.push(Value::Object(added));
    }
    found.truncate(limit);
    found
}

fn collect_paths(value: &Value, path: String, paths: &mut Vec<String>) {
    if !path.is_empty() {
        paths.push(path.clone());
    }
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                collect_paths(v, format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")), paths);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect_paths(v, format!("{path}/{i}"), paths);
            }
        }
        _ => {}
    }
}

/// A value to compare on, with the verdict the test suite expects when it is one of its cases.
type Case = (Value, Option<bool>);

/// Both validators' disagreements, split by who the test suite says is right.
#[derive(Default)]
struct Tally {
    agreed: usize,
    /// Disagreements the suite does not settle (or settles against dracode): failures.
    disagreements: Vec<String>,
    /// Cases of the suite that `jsonschema` gets wrong and dracode right.
    theirs_wrong: Vec<String>,
}

/// Compares both validators on every case.
fn compare(name: &str, schema: &Value, theirs: &jsonschema::Validator, cases: &[Case], tally: &mut Tally) {
    let ours = JsonSchema::compile(schema).unwrap_or_else(|e| panic!("{name}: {e}"));
    for (value, expected) in cases {
        let (mine, other) = (ours.is_valid(value), theirs.is_valid(value));
        let line = format!("{name}: dracode says {mine}, jsonschema {other}, for {value}");
        match (mine == other, *expected == Some(mine)) {
            (true, _) => tally.agreed += 1,
            (false, true) => tally.theirs_wrong.push(line),
            (false, false) => tally.disagreements.push(line),
        }
    }
}

fn with_mutations(seeds: &[Case], limit: usize) -> Vec<Case> {
    seeds.iter().flat_map(|seed| std::iter::once(seed.clone()).chain(mutations(&seed.0, limit).into_iter().map(|v| (v, None)))).collect()
}

/// `jsonschema` with `format` not asserted (its default for draft-04 and draft-07 asserts it;
/// dracode never does).
fn theirs(schema: &Value, draft: jsonschema::Draft) -> Result<jsonschema::Validator, String> {
    jsonschema::options().with_draft(draft).should_validate_formats(false).build(schema).map_err(|e| e.to_string())
}

fn shipped_schemas() -> Vec<(&'static str, Value, Vec<Value>)> {
    let finding = json!({"rule_id": "unsafe-block", "message": "unchecked read", "file": "src/lib.rs", "start_line": 2, "end_line": 3, "severity": "warning"});
    let findings = json!({"findings": [finding, {"rule_id": "x", "message": "y", "file": "a", "start_line": 1, "start_column": 1, "end_column": 4, "severity": "note"}]});
    let located: Vec<_> = serde_json::from_value::<Vec<super::super::findings::Finding>>(findings["findings"].clone())
        .unwrap()
        .into_iter()
        .map(|finding| super::super::sarif::Located { task_id: "t".into(), path: finding.file.clone(), finding })
        .collect();
    let sarif_schema: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schemas/sarif-schema-2.1.0.json")).unwrap(),
    )
    .unwrap();
    let events = crate::report::test_support::sample_run();
    let wire =
        events.iter().enumerate().map(|(i, e)| serde_json::to_value(crate::report::contract::to_wire(e, i as u64 + 1, "run", None)).unwrap());
    let risk = json!({"type": "object", "required": ["risk", "reasons"], "additionalProperties": false,
        "properties": {"risk": {"type": "integer", "minimum": 1, "maximum": 5}, "reasons": {"type": "array", "items": {"type": "string"}}}});
    vec![
        ("findings", super::super::findings::schema(), vec![findings, json!({"findings": []})]),
        ("sarif-2.1.0", sarif_schema, vec![super::super::sarif::log(&located, "run-1")]),
        ("events", crate::results::records::events_schema(), wire.collect()),
        ("risk", risk, vec![json!({"risk": 2, "reasons": ["a", "b"]})]),
    ]
}

/// Hand-written schemas of values (numbers, equality, strings) where validators often go wrong,
/// with seeds.
fn tricky_values() -> Vec<(&'static str, Value, Vec<Value>)> {
    vec![
        (
            "integers",
            json!({"type": "integer", "multipleOf": 3, "exclusiveMaximum": 10}),
            vec![json!(3.0), json!(9), json!(12), json!(6.5)],
        ),
        (
            "big numbers",
            json!({"minimum": 18446744073709551615_u64}),
            vec![json!(18446744073709551615_u64), json!(-9223372036854775808_i64), json!(1e20)],
        ),
        ("decimals", json!({"multipleOf": 0.01, "maximum": 1.5}), vec![json!(0.07), json!(1.49), json!(1.5), json!(1.501)]),
        (
            "equality",
            json!({"enum": [[1, {"a": 2.0}], {"b": [false]}], "uniqueItems": true}),
            vec![json!([1.0, {"a": 2}]), json!({"b": [false]}), json!([1, 1])],
        ),
        (
            "code points",
            json!({"minLength": 2, "maxLength": 3, "pattern": "^\\p{L}+$"}),
            vec![json!("💩💩"), json!("é"), json!("abcd"), json!("ab1")],
        ),
    ]
}

/// Hand-written schemas of structure (refs, applicators, unevaluated*), with seeds.
fn tricky_structures() -> Vec<(&'static str, Value, Vec<Value>)> {
    vec![
        (
            "tree",
            json!({"$defs": {"node": {"type": "object", "required": ["v"], "properties": {"v": {"type": "number"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"}),
            vec![json!({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]})],
        ),
        (
            "discriminated",
            json!({"oneOf": [{"properties": {"kind": {"const": "a"}, "n": {"type": "integer"}}, "required": ["kind", "n"]},
                             {"properties": {"kind": {"const": "b"}, "s": {"type": "string"}}, "required": ["kind"]}],
                   "unevaluatedProperties": false}),
            vec![json!({"kind": "a", "n": 1}), json!({"kind": "b", "s": "x"})],
        ),
        (
            "conditional",
            json!({"if": {"properties": {"country": {"const": "US"}}}, "then": {"properties": {"zip": {"pattern": "^\\d{5}$"}}}, "else": {"properties": {"zip": {"type": "string"}}},
                   "dependentRequired": {"zip": ["country"]}, "dependentSchemas": {"country": {"required": ["zip"]}}, "propertyNames": {"pattern": "^[a-z]+$"}}),
            vec![json!({"country": "US", "zip": "12345"}), json!({"country": "FR", "zip": "75001"})],
        ),
        (
            "arrays",
            json!({"prefixItems": [{"type": "string"}, {"type": "number"}], "items": {"type": "boolean"}, "contains": {"const": true}, "minContains": 1, "maxContains": 2, "minItems": 2, "unevaluatedItems": false}),
            vec![json!(["a", 1, true]), json!(["a", 1, true, false, true])],
        ),
        (
            "anchors and ids",
            json!({"$id": "https://example.com/root", "properties": {"a": {"$ref": "#item"}, "b": {"$ref": "sub#/$defs/x"}},
                   "$defs": {"i": {"$anchor": "item", "type": "array", "maxItems": 1}, "s": {"$id": "sub", "$defs": {"x": {"type": "null"}}}}}),
            vec![json!({"a": [1], "b": null})],
        ),
        (
            "patterns",
            json!({"patternProperties": {"^x-": {"type": "string"}, "n$": {"type": "number"}}, "additionalProperties": {"type": "boolean"}}),
            vec![json!({"x-a": "s", "an": 1, "x-n": "s", "o": true})],
        ),
        (
            "booleans",
            json!({"properties": {"yes": true, "no": false}, "items": false, "not": {"type": "null"}}),
            vec![json!({"yes": 1}), json!([]), json!(1)],
        ),
    ]
}

#[test]
fn dracode_and_the_jsonschema_crate_agree_on_shipped_and_tricky_schemas() {
    let mut tally = Tally::default();
    for (name, schema, seeds) in shipped_schemas().into_iter().chain(tricky_values()).chain(tricky_structures()) {
        let draft = if name == "sarif-2.1.0" { jsonschema::Draft::Draft4 } else { jsonschema::Draft::Draft202012 };
        let theirs = theirs(&schema, draft).unwrap_or_else(|e| panic!("{name}: {e}"));
        let shipped = ["findings", "sarif-2.1.0", "events", "risk"].contains(&name);
        let seeds: Vec<Case> = seeds.into_iter().map(|seed| (seed, shipped.then_some(true))).collect();
        for (seed, _) in seeds.iter().filter(|_| shipped) {
            assert!(theirs.is_valid(seed), "{name}: the seed is valid: {seed}");
        }
        compare(name, &schema, &theirs, &with_mutations(&seeds, 400), &mut tally);
    }
    println!("shipped and tricky schemas: {} agreed", tally.agreed);
    assert!(tally.agreed > 1000, "a real corpus: {}", tally.agreed);
    assert!(tally.disagreements.is_empty() && tally.theirs_wrong.is_empty(), "{:?}\n{:?}", tally.disagreements, tally.theirs_wrong);
}

/// The suite's groups both can compile, over their cases and mutations of them. Groups with
/// `$dynamicRef` are left out: dracode resolves it statically (see the module docs).
#[test]
fn dracode_and_the_jsonschema_crate_agree_on_the_test_suite_and_its_mutations() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/json-schema-test-suite");
    let mut tally = Tally::default();
    for dir in ["draft2020-12", "draft2020-12/optional", "draft7"] {
        let draft = if dir == "draft7" { jsonschema::Draft::Draft7 } else { jsonschema::Draft::Draft202012 };
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "json") || path.ends_with("float-overflow.json") {
                continue;
            }
            let groups: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for group in groups.iter().filter(|g| !g["schema"].to_string().contains("$dynamicRef")) {
                let (Ok(theirs), Ok(_)) = (theirs(&group["schema"], draft), JsonSchema::compile(&group["schema"])) else { continue };
                let seeds: Vec<Case> =
                    group["tests"].as_array().unwrap().iter().map(|t| (t["data"].clone(), t["valid"].as_bool())).collect();
                let name = format!("{dir}/{} / {}", path.file_name().unwrap().to_string_lossy(), group["description"]);
                compare(&name, &group["schema"], &theirs, &with_mutations(&seeds, 40), &mut tally);
            }
        }
    }
    println!("test suite: {} agreed; jsonschema wrong where dracode is right: {:#?}", tally.agreed, tally.theirs_wrong);
    assert!(tally.agreed > 3000, "a real corpus: {}", tally.agreed);
    assert!(tally.theirs_wrong.len() <= 4, "{:#?}", tally.theirs_wrong);
    assert!(tally.disagreements.is_empty(), "{} disagreements:\n{}", tally.disagreements.len(), tally.disagreements.join("\n"));
}
