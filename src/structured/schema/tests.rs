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
            "at /risk: 9 is greater than the maximum of 5",
            "at /reasons/1: 3 is not of type \"string\"",
            "at /reasons/2: \"x\" is shorter than 2 characters",
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
        (json!({"type": ["string", "null"]}), json!(1), "at /: 1 is not of types \"string\", \"null\""),
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
        (json!({"prefixItems": [true], "items": false}), json!([1, 2, 3]), "at /: Additional items are not allowed (2, 3 were unexpected)"),
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
    assert_eq!(errors(items, json!([null, "s", 2.5])), ["at /2: 2.5 is not of type \"integer\""]);
}

#[test]
fn refs_follow_pointers_ids_and_anchors_and_recursion_ends() {
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
    let loop_errors = errors(looping, json!(1));
    assert!(loop_errors.len() == 1 && loop_errors[0].contains("loops back to itself"), "{loop_errors:?}");
}

#[test]
fn a_schema_that_is_not_valid_is_refused_naming_where_and_why() {
    assert_eq!(refused(json!({"type": 5})), "\"type\" must be a type name or an array of them, not a number (5) (at /type in the schema)");
    assert!(refused(json!({"properties": {"x": {"type": "objekt"}}})).starts_with("unknown type \"objekt\""));
    assert!(refused(json!({"properties": {"x": {"type": "objekt"}}})).ends_with("(at /properties/x/type in the schema)"));
    assert_eq!(
        refused(json!({"required": "x"})),
        "\"required\" must be an array of strings, not a string (\"x\") (at /required in the schema)"
    );
    assert_eq!(refused(json!({"minimum": "a"})), "\"minimum\" must be a number, not a string (\"a\") (at /minimum in the schema)");
    assert_eq!(
        refused(json!({"minLength": -1})),
        "\"minLength\" must be a non-negative integer, not a number (-1) (at /minLength in the schema)"
    );
    assert_eq!(refused(json!({"allOf": [5]})), "a schema must be an object or a boolean, not a number (5) (at /allOf/0 in the schema)");
    let bad_regex = refused(json!({"patternProperties": {"(": {}}}));
    assert!(bad_regex.starts_with("bad regex \"(\":") && bad_regex.ends_with("(at /patternProperties/( in the schema)"), "{bad_regex}");
    assert!(refused(json!({"pattern": "(?<=a)b"})).contains("look-around"));
    assert_eq!(
        refused(json!({"items": {"$ref": "#/$defs/nope"}})),
        "$ref does not resolve: \"#/$defs/nope\" (at /items/$ref in the schema)"
    );
    assert_eq!(refused(json!({"$ref": "#nope"})), "$ref does not resolve: \"#nope\" (at /$ref in the schema)");
    assert_eq!(
        refused(json!({"properties": {"a": {"$ref": "https://example.com/s.json"}}})),
        "not supported: remote $ref \"https://example.com/s.json\" (only refs inside the schema are followed) (at /properties/a/$ref in the schema)"
    );
    assert_eq!(refused(json!(5)), "a schema must be an object or a boolean, not a number (5) (at / in the schema)");
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
