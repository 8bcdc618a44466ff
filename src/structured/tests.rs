use super::*;
use dracode_llm::ContentBlock;
use serde_json::json;

fn contract(schema: Value, retries: u32) -> OutputContract {
    OutputContract::new(schema, retries, false).unwrap()
}

fn risk() -> Value {
    json!({"type": "object", "properties": {"risk": {"type": "integer", "minimum": 1, "maximum": 5}, "reasons": {"type": "array", "items": {"type": "string"}}}, "required": ["risk", "reasons"]})
}

#[test]
fn an_invalid_schema_is_refused_with_the_reason() {
    let e = OutputContract::new(json!({"type": "objekt"}), 2, false).unwrap_err().to_string();
    assert!(e.starts_with("not a valid JSON Schema"), "{e}");
    assert!(OutputContract::new(json!({"properties": {"a": {"minimum": "one"}}}), 2, false).is_err());
    assert!(OutputContract::new(json!([1]), 2, false).unwrap_err().to_string().contains("not an array"));
}

#[test]
fn errors_name_every_failing_path_and_why() {
    let c = contract(risk(), 2);
    assert_eq!(c.check(&json!({"risk": 2, "reasons": ["x"]})).unwrap(), json!({"risk": 2, "reasons": ["x"]}));
    let errors = c.check(&json!({"risk": 9, "reasons": ["ok", 3]})).unwrap_err().to_string();
    assert!(errors.contains("at /risk: 9 is greater than the maximum of 5"), "{errors}");
    assert!(errors.contains("at /reasons/1: 3 is not of type \"string\""), "{errors}");
    let missing = c.check(&json!({})).unwrap_err().to_string();
    assert!(missing.contains("at /: \"risk\" is a required property"), "{missing}");
}

#[test]
fn a_non_object_schema_is_wrapped_for_the_tool_and_unwrapped_for_the_answer() {
    let c = contract(
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array", "items": {"$ref": "#/$defs/n"}, "$defs": {"n": {"type": "integer"}}}),
        0,
    );
    let spec = c.tool_spec();
    assert_eq!(spec.name, ANSWER_TOOL);
    assert_eq!(spec.parameters["type"], "object");
    assert_eq!(spec.parameters["required"], json!(["value"]));
    assert_eq!(spec.parameters["properties"]["value"]["items"], json!({"type": "integer"}), "local refs are inlined");
    assert!(spec.parameters.get("$defs").is_none());
    assert!(spec.parameters["properties"]["value"].get("$schema").is_none());
    // The wrapped tool schema itself accepts a wrapped answer (its $refs still resolve).
    assert!(jsonschema::is_valid(&spec.parameters, &json!({"value": [1, 2]})));
    assert_eq!(c.check(&json!({"value": [1, 2]})).unwrap(), json!([1, 2]));
    assert!(c.check(&json!({"value": ["x"]})).unwrap_err().to_string().contains("at /0:"));
    assert!(c.check(&json!([1])).unwrap_err().to_string().contains("missing property \"value\""));
    let object = contract(risk(), 0).tool_spec();
    assert_eq!(object.parameters, risk());
}

#[test]
fn recursive_or_remote_refs_are_left_as_they_are() {
    let tree = json!({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}},
        "definitions": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}}});
    assert_eq!(contract(tree.clone(), 0).tool_spec().parameters, tree);
    let unknown = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}, "$defs": {"b": {"type": "string"}}});
    assert_eq!(inline_refs(unknown.clone()), unknown);
}

#[test]
fn repairs_are_counted_until_the_task_gives_up() {
    let c = contract(risk(), 1);
    let mut progress = AnswerProgress::default();
    let (result, step) = c.answer("c1", &json!({"risk": 0, "reasons": []}), &mut progress);
    assert_eq!(step, Step::Continue);
    let ContentBlock::ToolResult { content, is_error, tool_use_id } = result else { panic!("{result:?}") };
    assert!(is_error && tool_use_id == "c1" && content.contains("at /risk: 0 is less than the minimum of 1"), "{content}");
    assert!(content.contains("0 more attempt(s)"), "{content}");
    let (_, step) = c.answer("c2", &json!({"risk": 0, "reasons": []}), &mut progress);
    let Step::GiveUp(error) = step else { panic!("{step:?}") };
    assert_eq!(error.kind, FailureKind::Agent);
    assert!(error.message.contains("at /risk") && error.message.contains("output_retries = 1"), "{}", error.message);
    assert_eq!(progress.value, None);
}

#[test]
fn a_plain_text_end_asks_for_the_tool_then_gives_up() {
    let c = contract(risk(), 1);
    let mut progress = AnswerProgress::default();
    assert!(matches!(c.on_plain_end(&mut progress), Step::Repair(m) if m.contains(ANSWER_TOOL)));
    assert!(matches!(c.on_plain_end(&mut progress), Step::GiveUp(e) if e.message.contains("without calling final_answer")));
    let mut done = AnswerProgress::default();
    assert_eq!(c.answer("c", &json!({"risk": 1, "reasons": []}), &mut done).1, Step::Accept);
    assert_eq!(done.value, Some(json!({"risk": 1, "reasons": []})));
    assert_eq!(c.on_plain_end(&mut done), Step::Accept);
}

#[test]
fn fields_pick_the_schema_and_refuse_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.json");
    std::fs::write(&file, risk().to_string()).unwrap();
    let fields = |f: fn(&mut OutputFields)| {
        let mut t = OutputFields::default();
        f(&mut t);
        t
    };
    assert!(OutputContract::from_fields(&OutputFields::default()).unwrap().is_none());
    let mut from_file = OutputFields { output_schema_file: Some(file.clone()), output_retries: Some(4), ..OutputFields::default() };
    let c = OutputContract::from_fields(&from_file).unwrap().unwrap();
    assert_eq!((c.schema.clone(), c.retries, c.findings), (risk(), 4, false));
    from_file.output_schema_file = Some(dir.path().join("missing.json"));
    let (field, e) = OutputContract::from_fields(&from_file).unwrap_err();
    assert!(field == "output_schema_file" && e.contains("cannot read"), "{e}");
    std::fs::write(&file, "{not json").unwrap();
    from_file.output_schema_file = Some(file);
    assert!(OutputContract::from_fields(&from_file).unwrap_err().1.contains("not JSON"));
    let findings = OutputContract::from_fields(&fields(|t| t.output = Some(OutputPreset::Findings))).unwrap().unwrap();
    assert!(findings.findings && findings.retries == DEFAULT_OUTPUT_RETRIES);
    let both = fields(|t| {
        t.output = Some(OutputPreset::Findings);
        t.output_schema = Some(json!({"type": "object"}));
    });
    assert_eq!(OutputContract::from_fields(&both).unwrap_err().0, "output");
    assert_eq!(OutputContract::from_fields(&fields(|t| t.output_retries = Some(1))).unwrap_err().0, "output_retries");
}
