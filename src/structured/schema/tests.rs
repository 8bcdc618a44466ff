use super::*;
use serde_json::json;

fn errors(schema: Value, instance: Value) -> Vec<String> {
    JsonSchema::compile(&schema).unwrap().errors(&instance).iter().map(ToString::to_string).collect()
}

fn refused(schema: Value) -> String {
    JsonSchema::compile(&schema).unwrap_err().to_string()
}

#[test]
fn every_failing_path_is_listed_with_its_reason() {
    let schema = json!({"type": "object", "required": ["risk", "reasons"], "additionalProperties": false,
        "properties": {"risk": {"type": "integer", "minimum": 1, "maximum": 5}, "reasons": {"type": "array", "items": {"type": "string", "minLength": 2}}}});
    assert_eq!(
        errors(schema.clone(), json!({"risk": 9, "reasons": ["ok", 3, "x"], "extra/~": 1})),
        [
            "at /reasons/1: 3 is not of type \"string\"",
            "at /reasons/2: \"x\" is shorter than 2 characters",
            "at /risk: 9 is greater than the maximum of 5",
            "at /: Additional properties are not allowed ('extra/~' was unexpected)",
        ]
    );
    assert_eq!(errors(schema, json!({"risk": 1.0})), ["at /: \"reasons\" is a required property"], "1.0 is an integer");
    let nested = json!({"properties": {"a/b": {"properties": {"c~d": {"enum": ["x", "y"]}}}}});
    assert_eq!(errors(nested, json!({"a/b": {"c~d": "z"}})), ["at /a~1b/c~0d: \"z\" is not one of \"x\" or \"y\""]);
}

#[test]
fn messages_for_the_other_keywords() {
    let cases = [
        (json!({"type": ["string", "null"]}), json!(1), "at /: 1 is not of types \"null\", \"string\""),
        (json!({"const": 1}), json!(2), "at /: 1 was expected"),
        (json!({"enum": [1, 2, 3, 4]}), json!(5), "at /: 5 is not one of 1, 2 or 2 other candidates"),
        (json!({"exclusiveMinimum": 0}), json!(0), "at /: 0 is less than or equal to the minimum of 0"),
        (json!({"multipleOf": 0.5}), json!(1.2), "at /: 1.2 is not a multiple of 0.5"),
        (json!({"pattern": "^a+$"}), json!("b"), "at /: \"b\" does not match \"^a+$\""),
        (json!({"maxLength": 2}), json!("ééé"), "at /: \"ééé\" is longer than 2 characters"),
        (json!({"uniqueItems": true}), json!([1, 1.0]), "at /: [1,1.0] has non-unique elements"),
        (json!({"contains": {"type": "string"}}), json!([1]), "at /: None of [1] are valid under the given schema"),
        (json!({"not": {"type": "string"}}), json!("s"), "at /: {\"type\":\"string\"} is not allowed for \"s\""),
        (
            json!({"oneOf": [{"type": "integer"}, {"minimum": 0}]}),
            json!(1),
            "at /: 1 is valid under more than one of the schemas listed in the 'oneOf' keyword",
        ),
        (json!({"anyOf": [{"type": "string"}]}), json!(1), "at /: 1 is not valid under any of the schemas listed in the 'anyOf' keyword"),
        (json!({"prefixItems": [true], "items": false}), json!([1, 2]), "at /1: False schema does not allow 2"),
        (json!({"dependentRequired": {"a": ["b"]}}), json!({"a": 1}), "at /: \"b\" is a required property"),
        (json!({"propertyNames": {"maxLength": 1}}), json!({"ab": 1}), "at /: \"ab\" is longer than 1 character"),
        (json!({"if": {"type": "string"}, "then": {"minLength": 1}, "else": false}), json!(1), "at /: False schema does not allow 1"),
    ];
    for (schema, instance, expected) in cases {
        assert_eq!(errors(schema.clone(), instance), [expected], "{schema}");
    }
}

#[test]
fn unevaluated_keywords_see_what_subschemas_evaluated() {
    let schema = json!({"allOf": [{"properties": {"a": true}}], "anyOf": [{"properties": {"b": true}}, {"required": ["c"]}],
        "if": {"properties": {"kind": {"const": "x"}}, "required": ["kind"]}, "then": {"properties": {"x": true}},
        "unevaluatedProperties": false});
    assert!(errors(schema.clone(), json!({"a": 1, "b": 2, "kind": "x", "x": 3})).is_empty());
    assert_eq!(
        errors(schema, json!({"a": 1, "c": 2, "x": 3})),
        ["at /: Unevaluated properties are not allowed ('c', 'x' were unexpected)"]
    );
    let items = json!({"prefixItems": [true], "contains": {"type": "string"}, "unevaluatedItems": {"type": "integer"}});
    assert!(errors(items.clone(), json!([null, "s", 2])).is_empty());
    assert_eq!(errors(items, json!([null, "s", 2.5])), ["at /: Unevaluated items are not allowed ('2.5' was unexpected)"]);
}

#[test]
fn refs_follow_pointers_ids_and_anchors_and_loops_end() {
    let tree = json!({"$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
        "$ref": "#/$defs/node"});
    assert!(errors(tree.clone(), json!({"kids": [{"kids": []}, {"kids": [{}]}]})).is_empty());
    assert_eq!(errors(tree, json!({"kids": [{"kids": [5]}]})), ["at /kids/0/kids/0: 5 is not of type \"object\""]);
    let escaped = json!({"$defs": {"a/b~c%": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/a~1b~0c%25"}}});
    assert_eq!(errors(escaped, json!({"x": 1})), ["at /x: 1 is not of type \"string\""]);
    let ids = json!({"$id": "https://example.com/root.json", "properties": {"x": {"$ref": "item.json"}, "y": {"$ref": "#num"}},
        "$defs": {"i": {"$id": "item.json", "type": "string"}, "n": {"$anchor": "num", "type": "number"}}});
    assert_eq!(errors(ids, json!({"x": 1, "y": "s"})), ["at /x: 1 is not of type \"string\"", "at /y: \"s\" is not of type \"number\""]);
    let draft7 = json!({"definitions": {"p": {"$id": "#pos", "minimum": 0}}, "items": [{"$ref": "#pos"}], "additionalItems": {"$ref": "#/definitions/p"}});
    assert_eq!(errors(draft7, json!([-1, 0, -2])), ["at /0: -1 is less than the minimum of 0", "at /2: -2 is less than the minimum of 0"]);
    let looping = json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"});
    assert!(errors(looping, json!(1)).is_empty(), "a $ref loop checks nothing, and ends");
    assert!(errors(json!({"$ref": "#"}), json!({"a": [1]})).is_empty());
}

#[test]
fn a_schema_that_is_not_valid_is_refused_naming_where_and_why() {
    assert_eq!(refused(json!({"type": 5})), "\"type\" must be a type name or an array of them, not 5 (at /type in the schema)");
    assert!(refused(json!({"properties": {"x": {"type": "objekt"}}})).starts_with("unknown type \"objekt\" (the types are array, "));
    assert!(refused(json!({"properties": {"x": {"type": "objekt"}}})).ends_with("(at /properties/x/type in the schema)"));
    assert!(refused(json!({"type": ["string", "strin"]})).starts_with("unknown type \"strin\""));
    let property = refused(json!({"properties": {"type": 5}}));
    assert!(
        property.starts_with("\"properties\": 5 is not of types") && property.ends_with("(at /properties/type in the schema)"),
        "{property}"
    );
    assert_eq!(refused(json!({"required": "x"})), "\"required\": \"x\" is not of type \"array\" (at /required in the schema)");
    assert_eq!(refused(json!({"minimum": "a"})), "\"minimum\": \"a\" is not of type \"number\" (at /minimum in the schema)");
    assert_eq!(refused(json!({"minLength": -1})), "\"minLength\": -1 is less than the minimum of 0 (at /minLength in the schema)");
    assert_eq!(refused(json!({"allOf": [5]})), "\"allOf\": 5 is not of types \"boolean\", \"object\" (at /allOf/0 in the schema)");
    assert_eq!(
        refused(json!({"prefixItems": [5]})),
        "\"prefixItems\": 5 is not of types \"boolean\", \"object\" (at /prefixItems/0 in the schema)"
    );
    let bad_regex = refused(json!({"patternProperties": {"(": {}}}));
    assert!(bad_regex.starts_with("bad regex \"(\":") && bad_regex.ends_with("(at /patternProperties/( in the schema)"), "{bad_regex}");
    let nested_regex = refused(json!({"properties": {"a/b": {"pattern": "(a"}}}));
    assert!(nested_regex.starts_with("bad regex \"(a\":") && nested_regex.ends_with("(at /properties/a~1b/pattern in the schema)"));
    assert_eq!(
        refused(json!({"items": {"$ref": "#/$defs/nope"}})),
        "$ref does not resolve: \"#/$defs/nope\" (at /items/$ref in the schema)"
    );
    assert_eq!(refused(json!({"$ref": "#nope"})), "$ref does not resolve: \"#nope\" (at /$ref in the schema)");
    assert_eq!(
        refused(json!({"properties": {"a": {"$ref": "https://example.com/s.json"}}})),
        "not supported: remote $ref \"https://example.com/s.json\" (only refs inside the schema are followed) (at /properties/a/$ref in the schema)"
    );
    assert!(
        refused(json!({"properties": {"a": {"$ref": "file:///etc/passwd"}}}))
            .starts_with("not supported: remote $ref \"file:///etc/passwd\"")
    );
    assert_eq!(
        refused(json!({"allOf": [{"$ref": "other.json#/a"}]})),
        "$ref does not resolve: \"other.json#/a\" (only refs inside the schema are followed) (at /allOf/0/$ref in the schema)"
    );
    assert!(refused(json!({"$schema": "https://example.com/meta"})).starts_with("unknown meta-schema \"https://example.com/meta\""));
    assert_eq!(refused(json!(5)), "5 is not of types \"boolean\", \"object\" (at / in the schema)");
}

#[test]
fn regexes_are_ecma_262_with_look_around() {
    let schema = json!({"properties": {"code": {"pattern": "^\\d+$"}, "word": {"pattern": "(?<=a)b"}}});
    assert_eq!(errors(schema.clone(), json!({"code": "߀"})), ["at /code: \"߀\" does not match \"^\\d+$\""], "\\d is ASCII only");
    assert!(errors(schema.clone(), json!({"code": "12", "word": "ab"})).is_empty());
    assert_eq!(errors(schema, json!({"word": "cb"})).len(), 1);
}

#[test]
fn format_is_an_annotation_and_numbers_compare_exactly() {
    assert!(errors(json!({"format": "email"}), json!("not an email")).is_empty());
    assert!(errors(json!({"format": "nonsense-format"}), json!(1)).is_empty());
    assert!(errors(json!({"maximum": 9007199254740992_u64}), json!(9007199254740993_u64)).len() == 1, "beyond f64's integers");
    assert!(errors(json!({"multipleOf": 0.0001}), json!(0.0075)).is_empty());
    assert!(errors(json!({"minimum": 5, "exclusiveMinimum": true}), json!(5)).len() == 1, "draft-04 boolean exclusiveMinimum");
    assert!(errors(json!({"const": {"a": [1, 2.0]}}), json!({"a": [1.0, 2]})).is_empty());
}

#[test]
fn objects_compare_equal_whatever_their_key_order() {
    let schema = json!({"properties": {"c": {"const": {"a": 1, "b": [{"x": 1, "y": 2}]}}, "e": {"enum": [{"a": 1, "b": 2}]}, "u": {"uniqueItems": true}}});
    let reordered = json!({"c": {"b": [{"y": 2, "x": 1}], "a": 1}, "e": {"b": 2, "a": 1}, "u": [{"a": 1, "b": 2}, {"b": 3, "a": 1}]});
    assert!(errors(schema.clone(), reordered).is_empty());
    let duplicate = json!({"u": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]});
    assert_eq!(errors(schema, duplicate), ["at /u: [{\"a\":1,\"b\":2},{\"a\":1,\"b\":2}] has non-unique elements"]);
}

#[test]
fn older_drafts_are_read_as_declared_or_when_2020_12_refuses_their_spelling() {
    let declared = json!({"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}], "additionalItems": false});
    assert_eq!(errors(declared, json!(["a", 1])), ["at /: Additional items are not allowed (1 was unexpected)"]);
    let draft4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 5, "exclusiveMaximum": true});
    assert_eq!(errors(draft4, json!(5)).len(), 1);
    assert!(errors(json!({"items": [{"type": "string"}]}), json!([1, 2])).len() == 1, "draft-07 tuple items, no $schema");
    let typo = refused(json!({"prefixItems": [{"type": "string"}], "items": [5]}));
    assert!(typo.ends_with("(at /items in the schema)"), "the 2020-12 refusal is reported: {typo}");
}

#[test]
fn no_remote_schema_is_ever_fetched() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/s.json", listener.local_addr().unwrap());
    let refusal = refused(json!({"properties": {"a": {"$ref": url}}}));
    assert!(refusal.starts_with(&format!("not supported: remote $ref {url:?}")), "{refusal}");
    assert!(refused(json!({"$schema": url, "type": "object"})).starts_with("unknown meta-schema"));
    assert!(refused(json!({"$id": url, "$ref": "other.json"})).starts_with("$ref does not resolve: \"other.json\""));
    let accepted = listener.accept();
    assert!(accepted.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock), "a connection came in: {accepted:?}");
}

#[test]
fn answers_longer_than_a_screen_are_cut_in_messages() {
    let long = "x".repeat(10_000);
    let listed = errors(json!({"type": "integer"}), json!(long));
    assert!(listed.len() == 1 && listed[0].chars().count() < 400 && listed[0].ends_with('…'), "{listed:?}");
}

/// The schemas dracode ships (findings, SARIF 2.1.0 that `findings.sarif` follows; the events of
/// `dracode schema events` are checked in `events::records`) compile and accept what dracode
/// writes; a broken record fails.
#[test]
fn shipped_schemas_accept_what_dracode_writes() {
    use crate::structured::{findings, sarif};
    let answer = json!({"findings": [{"rule_id": "unsafe-block", "message": "unchecked read", "file": "src/lib.rs", "start_line": 2,
        "end_line": 3, "severity": "warning"}, {"rule_id": "x", "message": "y", "file": "a", "start_line": 1, "start_column": 1, "end_column": 4, "severity": "note"}]});
    let findings_schema = JsonSchema::compile(&findings::schema()).unwrap();
    assert!(findings_schema.is_valid(&answer) && findings_schema.is_valid(&json!({"findings": []})));
    assert!(!findings_schema.is_valid(&json!({"findings": [{"rule_id": "x"}]})));
    let located: Vec<sarif::Located> = serde_json::from_value::<Vec<findings::Finding>>(answer["findings"].clone())
        .unwrap()
        .into_iter()
        .map(|finding| sarif::Located { task_id: "t".into(), path: finding.file.clone(), finding })
        .collect();
    let sarif_file = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schemas/sarif-schema-2.1.0.json");
    let sarif_schema = JsonSchema::compile(&serde_json::from_str(&std::fs::read_to_string(sarif_file).unwrap()).unwrap()).unwrap();
    let mut log = sarif::log(&located, "run-1");
    assert_eq!(sarif_schema.errors(&log), []);
    log["version"] = json!("2.0.0");
    assert!(!sarif_schema.is_valid(&log));
}
