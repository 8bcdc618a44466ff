use super::*;
use crate::preset::ProviderType;
use crate::stream::{Framing, decode};

/// A Responses stream as OpenAI sends it for a reasoning model: a reasoning item (summary in
/// deltas, encrypted content whole only in its `.done`), a message in `output_text` deltas, a
/// function call and an `apply_patch` custom call in fragments, `response.completed` with the
/// output and usage.
const STREAM: &str = include_str!("../../../../tests/fixtures/streams/openai_responses.sse");

const PATCH: &str = "*** Begin Patch\n*** Update File: a.rs\n@@\n-old\n+new\n*** End Patch\n";

fn decode_stream(text: &str) -> Result<(Value, bool), LlmError> {
    decode(Framing::Sse, Box::<EventDecoder>::default(), text)
}

fn reasoning(text: &str, encrypted: &str, id: &str) -> ContentBlock {
    ContentBlock::Reasoning { text: text.into(), signature: Some(encrypted.into()), id: Some(id.into()), redacted: false }
}

#[test]
fn a_stream_folds_into_the_unstreamed_answer_with_exact_usage() {
    let (body, complete) = decode_stream(STREAM).unwrap();
    assert!(complete);
    let response = parse_response(&body).unwrap();
    assert_eq!(
        response.content,
        [
            reasoning("**Reading the file**\n\nI should look at a.rs first.", "gAAAAABor-Qx7vZ0kL2m", "rs_68af01"),
            ContentBlock::Text { text: "Checking".into(), id: Some("msg_68af02".into()) },
            ContentBlock::ToolUse { id: "call_DdmO".into(), name: "read_file".into(), input: json!({"file_path": "a.rs"}) },
            ContentBlock::ToolUse { id: "call_Xk2p".into(), name: "apply_patch".into(), input: json!({"input": PATCH}) },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    let u = response.usage;
    assert_eq!((u.input_tokens, u.output_tokens, u.cached_input_tokens, u.reasoning_output_tokens, u.requests), (812, 154, 512, 64, 1));
    assert_eq!(response.model.as_deref(), Some("gpt-5-codex"));
    let proxied = format!("{STREAM}data: [DONE]\n\n");
    assert_eq!(decode_stream(&proxied).unwrap().0, body, "a trailing [DONE] changes nothing");
    // Cut before `response.completed`: not whole.
    let cut = &STREAM[..STREAM.find("event: response.completed").unwrap()];
    assert!(!decode_stream(cut).unwrap().1);
}

#[test]
fn deltas_alone_make_the_items_when_the_final_response_lists_none() {
    let events = [
        json!({"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "summary_index": 0, "delta": "Think"}),
        json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "Hel"}),
        json!({"type": "response.output_text.delta", "output_index": 1, "content_index": 0, "delta": "lo"}),
        json!({"type": "response.output_item.added", "output_index": 2,
            "item": {"type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": ""}}),
        json!({"type": "response.custom_tool_call_input.delta", "output_index": 2, "delta": "*** Begin"}),
        json!({"type": "response.custom_tool_call_input.delta", "output_index": 2, "delta": " Patch"}),
        json!({"type": "response.incomplete", "response": {"id": "r", "status": "incomplete", "output": [],
            "incomplete_details": {"reason": "max_output_tokens"},
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 16,
                "output_tokens_details": {"reasoning_tokens": 4}, "total_tokens": 26}}}),
    ];
    let text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    let (body, complete) = decode_stream(&text).unwrap();
    assert!(complete);
    let response = parse_response(&body).unwrap();
    assert_eq!(
        response.content,
        [
            ContentBlock::Reasoning { text: "Think".into(), signature: None, id: None, redacted: false },
            ContentBlock::text("Hello"),
            ContentBlock::ToolUse { id: "call_1".into(), name: "apply_patch".into(), input: json!({"input": "*** Begin Patch"}) },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::MaxTokens, "incomplete_details.reason wins over the call");
    assert_eq!((response.usage.output_tokens, response.usage.reasoning_output_tokens), (16, 4));
}

#[test]
fn failed_responses_and_error_events_are_the_errors_they_stand_for() {
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"context_length_exceeded\",\"message\":\"Your input exceeds the context window of this model. Please adjust your input and try again.\"}}}\n\n";
    let e = decode_stream(failed).unwrap_err();
    assert!(e.message.contains("context_length_exceeded") && !e.is_transient(), "{}", e.message);
    assert_eq!(crate::overflow::recognise(e).kind, ErrorKind::ContextOverflow);
    let server = "data: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"An error occurred\"}}}\n\n";
    assert!(decode_stream(server).unwrap_err().is_transient());
    let limited = "data: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"Rate limit reached\",\"param\":null}\n\n";
    let e = decode_stream(limited).unwrap_err();
    assert_eq!(e.kind, ErrorKind::RateLimit, "{}", e.message);
    let invalid = "data: {\"type\":\"error\",\"code\":\"invalid_prompt\",\"message\":\"Invalid prompt\",\"param\":null}\n\n";
    assert_eq!(decode_stream(invalid).unwrap_err().kind, ErrorKind::BadResponse);
    let unstreamed = json!({"id": "r", "status": "failed", "output": [], "error": {"code": "server_error", "message": "boom"}});
    assert!(parse_response(&unstreamed).unwrap_err().is_transient());
}

fn conversation() -> Vec<Message> {
    vec![
        Message::user_text("Fix the bug"),
        Message {
            role: Role::Assistant,
            content: vec![
                reasoning("Look first.", "gAAAA-enc-1", "rs_1"),
                // Its reasoning goes back: the output message goes back under its id.
                ContentBlock::Text { text: "Looking.".into(), id: Some("msg_1".into()) },
                ContentBlock::ToolUse { id: "call_a".into(), name: "read_file".into(), input: json!({"file_path": "a.rs"}) },
                ContentBlock::ToolUse { id: "call_b".into(), name: "apply_patch".into(), input: json!({"input": PATCH}) },
            ],
        },
        Message {
            role: Role::User,
            content: vec![
                ContentBlock::ToolResult { tool_use_id: "call_a".into(), content: "fn main() {}".into(), is_error: false },
                ContentBlock::ToolResult { tool_use_id: "call_b".into(), content: "OK\nM a.rs".into(), is_error: false },
                ContentBlock::text("Also keep it short."),
            ],
        },
        Message {
            role: Role::Assistant,
            content: vec![
                // From another API (no id): cannot be resumed here, left out.
                ContentBlock::Reasoning { text: "x".into(), signature: Some("sig".into()), id: None, redacted: false },
                // Without its reasoning the message may not go back under its id: a plain string.
                ContentBlock::Text { text: "Listing.".into(), id: Some("msg_2".into()) },
                ContentBlock::ToolUse { id: "call_c".into(), name: "list_files".into(), input: Value::String("{oops".into()) },
            ],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "call_c".into(),
                content: "Error [INVALID_ARGUMENTS]".into(),
                is_error: true,
            }],
        },
    ]
}

fn tools() -> Vec<ToolSpec> {
    vec![
        crate::snapshot::list_files_spec(),
        ToolSpec { name: "apply_patch".into(), description: "Edit files with a patch".into(), parameters: json!({"type": "object"}) },
    ]
}

#[test]
fn a_message_id_goes_out_once_and_only_a_completed_message_keeps_one() {
    let said = Message { role: Role::Assistant, content: vec![ContentBlock::Text { text: "Done.".into(), id: Some("msg_9".into()) }] };
    let messages = [Message::user_text("hi"), said.clone(), Message::user_text("again"), said];
    let request = LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: None };
    let body = request_body("gpt-5-codex", &request, None);
    let contents: Vec<&Value> =
        body["input"].as_array().unwrap().iter().filter(|i| i["role"] == "assistant").map(|i| &i["content"]).collect();
    assert_eq!(contents.len(), 2);
    assert_eq!((contents[0][0]["type"].as_str(), contents[1].as_str()), (Some("output_text"), Some("Done.")), "{body}");
    let kept = |status: &str, id: &str| {
        let item = json!([{"type": "message", "id": id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": "t", "annotations": []}]}]);
        parse_response(&response(item, "completed")).unwrap().content
    };
    assert_eq!(kept("completed", "msg_1"), [ContentBlock::Text { text: "t".into(), id: Some("msg_1".into()) }]);
    assert_eq!(kept("incomplete", "msg_1"), [ContentBlock::text("t")]);
    assert_eq!(kept("completed", "chatcmpl-9"), [ContentBlock::text("t")]);
}

#[test]
fn request_body_maps_the_conversation() {
    let (messages, tools) = (conversation(), tools());
    let request = LlmRequest { system: "You are terse.", messages: &messages, tools: &tools, max_tokens: Some(4096) };
    insta::assert_json_snapshot!(request_body("gpt-5-codex", &request, Some(ReasoningEffort::High)));
}

#[test]
fn encrypted_reasoning_is_asked_of_all_but_models_known_not_to_reason_and_dropped_when_refused() {
    let messages = [Message::user_text("hi")];
    let request = LlmRequest { system: "", messages: &messages, tools: &[], max_tokens: None };
    let plain = request_body("gpt-4.1", &request, None);
    let wire = ResponsesFormat::for_provider(&crate::snapshot::settings(ProviderType::Azure, "https://r", "dep"));
    let mut relaxed = request_body("dep", &request, None);
    assert!(wire.relax_body(&mut relaxed) && relaxed.get("include").is_none() && !wire.relax_body(&mut relaxed));
    let mut refusal = LlmError::new(ErrorKind::BadResponse, "HTTP 400: Encrypted content is not supported with this model.");
    refusal.http_status = Some(400);
    assert!(wire.may_refuse_form(&refusal));
    assert!(plain.get("include").is_none() && plain.get("reasoning").is_none() && plain.get("instructions").is_none());
    assert!(plain.get("tools").is_none() && plain.get("max_output_tokens").is_none());
    assert_eq!(plain["store"], false);
    assert_eq!(plain["input"], json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]));
    assert!(request_body("gpt-5-chat-latest", &request, None).get("include").is_none());
    for model in ["o3-pro", "gpt-5.1-codex-max", "codex-mini-latest", "gpt-5", "my-deployment"] {
        let body = request_body(model, &request, None);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]), "{model}");
        assert!(body.get("reasoning").is_none(), "{model}: no effort unless set");
    }
    let low = request_body("my-deployment", &request, Some(ReasoningEffort::Low));
    assert_eq!(low["reasoning"], json!({"effort": "low", "summary": "auto"}));
    assert_eq!(low["include"], json!(["reasoning.encrypted_content"]));
}

#[test]
fn urls_follow_the_vendor_and_azure_sends_its_key_header() {
    use crate::snapshot::{endpoint, settings};
    let openai = endpoint::<ResponsesFormat>(&settings(ProviderType::Openai, "https://api.openai.com/v1", "gpt-5-codex"));
    assert_eq!(openai["url"], "https://api.openai.com/v1/responses");
    assert_eq!(openai["headers"]["authorization"], "Bearer <key>");
    let azure = endpoint::<ResponsesFormat>(&settings(ProviderType::Azure, "https://r.openai.azure.com/", "codex dep"));
    assert_eq!(azure["url"], "https://r.openai.azure.com/openai/v1/responses");
    assert_eq!(azure["headers"]["api-key"], "<key>");
    let mut dated = settings(ProviderType::Azure, "https://r.openai.azure.com", "dep");
    dated.api_version = Some("2025-04-01-preview".into());
    assert_eq!(endpoint::<ResponsesFormat>(&dated)["url"], "https://r.openai.azure.com/openai/responses?api-version=2025-04-01-preview");
}

fn response(output: Value, status: &str) -> Value {
    json!({
        "id": "resp_1", "object": "response", "created_at": 1, "status": status, "model": "gpt-5-codex",
        "output": output, "error": null, "incomplete_details": null,
        "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 64}, "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 8}, "total_tokens": 120}
    })
}

#[test]
fn snapshot_parse_response() {
    let body = response(
        json!([
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "A"}, {"type": "summary_text", "text": "B"}],
                "encrypted_content": "enc"},
            {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "Patching.", "annotations": []}]},
            {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "apply_patch", "input": PATCH},
            {"type": "function_call", "id": "fc_1", "call_id": "call_2", "name": "read_file", "arguments": "{\"file_path\":\"a\"}"}
        ]),
        "completed",
    );
    insta::assert_json_snapshot!(parse_response(&body).unwrap());
}

#[test]
fn statuses_map_to_stop_reasons() {
    let text = json!([{"type": "message", "id": "m", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": "done", "annotations": []}]}]);
    let refusal = json!([{"type": "message", "id": "m", "status": "completed", "role": "assistant",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}]}]);
    assert_eq!(parse_response(&response(text.clone(), "completed")).unwrap().stop_reason, StopReason::EndTurn);
    let refused = parse_response(&response(refusal, "completed")).unwrap();
    assert_eq!((refused.stop_reason, refused.content), (StopReason::Refusal, vec![ContentBlock::text("I can't help with that.")]));
    for (reason, expected) in [("max_output_tokens", StopReason::MaxTokens), ("content_filter", StopReason::ContentFilter)] {
        let mut body = response(text.clone(), "incomplete");
        body["incomplete_details"] = json!({"reason": reason});
        assert_eq!(parse_response(&body).unwrap().stop_reason, expected);
    }
    assert_eq!(parse_response(&json!({"id": "r"})).unwrap_err().kind, ErrorKind::BadResponse, "no output");
}

#[test]
fn apply_patch_is_a_free_form_tool_with_a_grammar_and_others_are_functions() {
    let rendered = ResponsesFormat::render_tools(&tools());
    assert_eq!(rendered[0]["type"], "function");
    assert_eq!(rendered[0]["strict"], false);
    assert_eq!(rendered[0]["parameters"]["properties"]["recursive"]["type"], "boolean");
    assert_eq!(rendered[1]["type"], "custom");
    assert_eq!(rendered[1]["format"], json!({"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR}));
    assert!(rendered[1].get("parameters").is_none());
}

#[test]
fn responses_only_models_have_their_own_prices_and_windows() {
    let table = crate::prices::PriceTable::with_overrides(&std::collections::BTreeMap::new());
    let cases = [
        ("gpt-5-codex", 400_000, 1.25, 10.0),
        ("gpt-5.1-codex-mini", 400_000, 0.25, 2.0),
        ("gpt-5-pro-2025-10-06", 400_000, 15.0, 120.0),
        ("codex-mini-latest", 200_000, 1.5, 6.0),
        ("o3-pro-2025-06-10", 200_000, 20.0, 80.0),
        ("o1-pro", 200_000, 150.0, 600.0),
    ];
    for (model, window, input, output) in cases {
        let price = table.price(model).unwrap_or_else(|| panic!("{model} has no price"));
        assert_eq!((table.context_window(model), price.input, price.output), (Some(window), input, output), "{model}");
    }
}

#[test]
fn models_openai_serves_through_responses_only_are_known() {
    use crate::preset::needs_responses;
    for model in [
        "gpt-5-codex",
        "gpt-5.1-codex-max",
        "codex-mini-latest",
        "o1-pro",
        "o3-pro-2025-06-10",
        "gpt-5-pro",
        "gpt-5.2-pro",
        "openai/gpt-5-codex",
    ] {
        assert!(needs_responses(model), "{model}");
    }
    for model in ["gpt-5", "gpt-4o", "o3", "gpt-5-mini", "gpt-5.1", "o4-mini", "qwen3-coder"] {
        assert!(!needs_responses(model), "{model}");
    }
}
