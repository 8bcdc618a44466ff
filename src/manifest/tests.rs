//! Manifest loading: the three formats agree, and every error names file, line, task and field.

use super::*;
use std::time::Duration;

fn parse_str(name: &str, text: &str) -> Result<Manifest, ManifestErrors> {
    let path = Path::new(name);
    parse(path, text, Format::of(path).unwrap(), &TaskFields::default())
}

fn load(path: &Path) -> Result<Manifest, ManifestErrors> {
    load_with(path, &TaskFields::default())
}

fn errors(name: &str, text: &str) -> Vec<String> {
    parse_str(name, text).unwrap_err().0.iter().map(ToString::to_string).collect()
}

#[test]
fn toml_yaml_and_json_give_the_same_tasks() {
    let toml = "[defaults]\nmodel = \"m\"\ntimeout = \"5m\"\n\n[[tasks]]\nid = \"a\"\nprompt = \"do a\"\ntags = [\"x\"]\n\n[[tasks]]\nid = \"b\"\nprompt = \"do b\"\nmodel = \"other\"\n";
    let yaml = "defaults:\n  model: m\n  timeout: 5m\ntasks:\n  - id: a\n    prompt: do a\n    tags: [x]\n  - id: b\n    prompt: do b\n    model: other\n";
    let json = r#"{"defaults": {"model": "m", "timeout": "5m"}, "tasks": [{"id": "a", "prompt": "do a", "tags": ["x"]}, {"id": "b", "prompt": "do b", "model": "other"}]}"#;
    let a = parse_str("t.toml", toml).unwrap();
    let b = parse_str("t.yaml", yaml).unwrap();
    let c = parse_str("t.json", json).unwrap();
    for m in [&a, &b, &c] {
        assert_eq!(m.tasks.len(), 2);
        assert_eq!(m.tasks[0].fields.model.as_deref(), Some("m"), "defaults merge");
        assert_eq!(m.tasks[1].fields.model.as_deref(), Some("other"), "task wins");
        assert_eq!(
            m.tasks[0].fields.timeout.as_deref().and_then(|t| dracode_input::duration::parse(t).ok()),
            Some(Duration::from_secs(300))
        );
        assert_eq!(m.tasks[0].fields.tags.as_deref(), Some(&["x".to_string()][..]));
    }
    assert_eq!(a.tasks[1].fields, b.tasks[1].fields);
    assert_eq!(b.tasks[1].fields, c.tasks[1].fields);
}

#[test]
fn unknown_field_names_file_line_task_and_suggests() {
    let text = "[[tasks]]\nid = \"fix\"\nprompt = \"x\"\n\n[[tasks]]\nid = \"docs\"\npromt = \"y\"\n";
    let errs = errors("tasks.toml", text);
    assert!(errs.contains(&"tasks.toml:7:1: task \"docs\": unknown field \"promt\" (did you mean \"prompt\"?)".to_string()), "{errs:?}");
    // The missing prompt of the same task is reported too (every error, not just the first).
    assert!(errs.iter().any(|e| e.contains("task \"docs\"") && e.contains("missing field \"prompt\"")), "{errs:?}");
}

#[test]
fn yaml_and_json_errors_are_located_too() {
    let yaml = "tasks:\n  - id: a\n    prompt: x\n  - id: b\n    prompt: y\n    isolaton: copy\n";
    let errs = errors("t.yaml", yaml);
    assert_eq!(errs, ["t.yaml:6:5: task \"b\": unknown field \"isolaton\" (did you mean \"isolation\"?)"]);
    let json =
        "{\"tasks\": [\n  {\"id\": \"a\", \"prompt\": \"x\"},\n  {\"id\": \"b\", \"prompt\": \"y\", \"max_iterations\": \"ten\"}\n]}";
    let errs = errors("t.json", json);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("t.json:3:") && errs[0].contains("task \"b\"") && errs[0].contains("max_iterations"), "{errs:?}");
}

#[test]
fn syntax_errors_carry_the_formats_position() {
    let errs = errors("t.toml", "[[tasks]]\nid = \"a\nprompt = \"x\"\n");
    assert!(errs[0].starts_with("t.toml:2:"), "{errs:?}");
    let errs = errors("t.json", "{\"tasks\": [}");
    assert!(errs[0].starts_with("t.json:1:"), "{errs:?}");
}

#[test]
fn semantic_checks_collect_every_problem() {
    let text = "[[tasks]]\nid = \"a b\"\nprompt = \"x\"\n[[tasks]]\nid = \"c\"\nprompt = \"x\"\ntimeout = \"soon\"\ntools = [\"read_fil\"]\n[[tasks]]\nid = \"c\"\nprompt = \"\"\n";
    let errs = errors("t.toml", text);
    let has = |needle: &str| errs.iter().any(|e| e.contains(needle));
    assert!(has("invalid id \"a b\""), "{errs:?}");
    assert!(has("t.toml:7:1: task \"c\": field \"timeout\": invalid duration"), "{errs:?}");
    assert!(has("unknown tool \"read_fil\" (did you mean \"read_file\"?)"), "{errs:?}");
    assert!(has("duplicate id \"c\""), "{errs:?}");
    assert!(has("the prompt is empty"), "{errs:?}");
}

#[test]
fn prompt_file_is_relative_to_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("prompts")).unwrap();
    std::fs::write(dir.path().join("prompts/p.md"), "from a file").unwrap();
    let path = dir.path().join("m.toml");
    std::fs::write(&path, "[defaults]\nrepo = \"..\"\n[[tasks]]\nid = \"a\"\nprompt_file = \"prompts/p.md\"\n[[tasks]]\nid = \"b\"\nprompt_file = \"prompts/none.md\"\n").unwrap();
    let errs = load(&path).unwrap_err().0;
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].task.as_deref(), Some("b"));
    assert_eq!(errs[0].field.as_deref(), Some("prompt_file"));
    std::fs::write(&path, "[defaults]\nrepo = \"..\"\n[[tasks]]\nid = \"a\"\nprompt_file = \"prompts/p.md\"\n").unwrap();
    let m = load(&path).unwrap();
    assert_eq!(m.tasks[0].prompt, "from a file");
    assert_eq!(m.tasks[0].fields.repo.as_deref(), Some(dir.path().join("..").as_path()));
}

#[test]
fn defaults_cannot_set_identity_and_unknown_top_level_keys_are_named() {
    let errs = errors("t.toml", "tasx = 1\n[defaults]\nid = \"x\"\n[[tasks]]\nid = \"a\"\nprompt = \"p\"\n");
    assert!(errs.iter().any(|e| e == "t.toml:1:1: unknown field \"tasx\" (did you mean \"tasks\"?)"), "{errs:?}");
    assert!(errs.iter().any(|e| e.starts_with("t.toml:3:1:") && e.contains("`id` cannot be set in [defaults]")), "{errs:?}");
}

#[test]
fn an_empty_manifest_says_so() {
    let errs = errors("t.yaml", "");
    assert!(errs[0].contains("no tasks"), "{errs:?}");
}

/// Issue 7: positions come from the TOML parser, so a `[[tasks]]` line inside a multi-line
/// string does not count as a task.
#[test]
fn a_tasks_header_inside_a_multiline_string_does_not_shift_positions() {
    let text =
        "[[tasks]]\nid = \"a\"\nprompt = \"\"\"\n[[tasks]]\nnot a task\n\"\"\"\n\n[[tasks]]\nid = \"b\"\nprompt = \"y\"\npromt = \"z\"\n";
    let errs = errors("t.toml", text);
    assert_eq!(errs, ["t.toml:11:1: task \"b\": unknown field \"promt\" (did you mean \"prompt\"?)"]);
    let m =
        parse_str("t.toml", "[[tasks]]\nid = \"a\"\nprompt = \"\"\"\n[[tasks]]\n\"\"\"\n[[tasks]]\nid = \"b\"\nprompt = \"y\"\n").unwrap();
    assert_eq!(m.tasks.iter().map(|t| t.line).collect::<Vec<_>>(), [Some(1), Some(6)]);
}

/// Issue 7: tasks written as an array of inline tables are located too.
#[test]
fn inline_table_tasks_have_positions() {
    let text = "tasks = [\n  { id = \"a\", prompt = \"x\" },\n  { id = \"b\", prompt = \"y\", timeout = \"soon\" },\n]\n";
    let errs = errors("t.toml", text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("t.toml:3:29: task \"b\": field \"timeout\": invalid duration"), "{errs:?}");
    let m = parse_str("t.toml", "tasks = [\n  { id = \"a\", prompt = \"x\" },\n  { id = \"b\", prompt = \"y\" },\n]\n").unwrap();
    assert_eq!(m.tasks.iter().map(|t| t.line).collect::<Vec<_>>(), [Some(2), Some(3)]);
}

#[test]
fn yaml_and_json_tasks_know_their_line() {
    let m = parse_str("t.yaml", "tasks:\n  - id: a\n    prompt: x\n  - id: b\n    prompt: y\n").unwrap();
    assert_eq!(m.tasks.iter().map(|t| t.line).collect::<Vec<_>>(), [Some(2), Some(4)]);
    let m = parse_str("t.json", "{\"tasks\": [\n {\"id\": \"a\", \"prompt\": \"x\"},\n {\"id\": \"b\", \"prompt\": \"y\"}]}").unwrap();
    assert_eq!(m.tasks.iter().map(|t| t.line).collect::<Vec<_>>(), [Some(2), Some(3)]);
}

#[test]
fn containment_fields_are_typed_and_checked() {
    let text = "[defaults]\nsandbox = \"read-only\"\nnetwork = true\nenv_passthrough = [\"NPM_CONFIG_REGISTRY\"]\n[[tasks]]\nid = \"a\"\nprompt = \"x\"\n[tasks.env]\nRUST_BACKTRACE = \"1\"\n";
    let m = parse_str("t.toml", text).unwrap();
    let f = &m.tasks[0].fields;
    assert_eq!(f.sandbox, Some(SandboxMode::ReadOnly));
    assert_eq!(f.network, Some(dracode_sandbox::egress::NetworkField::All(true)));
    assert_eq!(f.env.as_ref().unwrap()["RUST_BACKTRACE"], "1");
    assert_eq!(f.env_passthrough.as_deref(), Some(&["NPM_CONFIG_REGISTRY".to_string()][..]));
    let errs = errors("t.toml", "[[tasks]]\nid = \"a\"\nprompt = \"x\"\nsandbox = \"loose\"\n");
    assert!(errs[0].starts_with("t.toml:4:") && errs[0].contains("sandbox"), "{errs:?}");
}

/// Issue 9: NaN and infinite budgets are refused in every format that can write them.
#[test]
fn non_finite_budgets_are_refused() {
    let errs = errors(
        "t.toml",
        "[[tasks]]\nid = \"a\"\nprompt = \"x\"\nmax_cost_usd = nan\n[[tasks]]\nid = \"b\"\nprompt = \"x\"\nmax_cost_usd = -inf\n",
    );
    assert_eq!(
        errs,
        [
            "t.toml:4:1: task \"a\": field \"max_cost_usd\": NaN is not a finite amount of 0 or more",
            "t.toml:8:1: task \"b\": field \"max_cost_usd\": -inf is not a finite amount of 0 or more"
        ]
    );
    let errs = errors("t.yaml", "tasks:\n  - id: a\n    prompt: x\n    max_cost_usd: .nan\n");
    assert!(errs.len() == 1 && errs[0].starts_with("t.yaml:4:") && errs[0].contains("non-finite"), "{errs:?}");
    let errs = errors("t.toml", "[[tasks]]\nid = \"a\"\nprompt = \"x\"\nmax_cost_usd = -0.5\n");
    assert_eq!(errs, ["t.toml:4:1: task \"a\": field \"max_cost_usd\": -0.5 is not a finite amount of 0 or more"]);
}

/// Issue 9: a key given twice is refused in every format (serde_json alone keeps the last).
#[test]
fn a_duplicate_key_is_refused_in_every_format() {
    let toml = "[[tasks]]\nid = \"a\"\nprompt = \"x\"\nprompt = \"y\"\n";
    let yaml = "tasks:\n  - id: a\n    prompt: x\n    prompt: y\n";
    let json = "{\"tasks\": [{\"id\": \"a\",\n \"prompt\": \"x\", \"prompt\": \"y\"}]}";
    for (name, text) in [("t.toml", toml), ("t.yaml", yaml), ("t.json", json)] {
        let errors = errors(name, text);
        assert_eq!(errors.len(), 1, "{name}: {errors:?}");
        assert!(errors[0].starts_with(&format!("{name}:")) && errors[0].contains("duplicate"), "{name}: {errors:?}");
    }
    assert!(errors("t.json", json)[0].starts_with("t.json:2:"), "the line of the second key");
    assert!(parse_str("t.json", "{\"tasks\": [{\"id\": \"a\", \"prompt\": \"x\"}, {\"id\": \"b\", \"prompt\": \"x\"}]}").is_ok());
}

/// Issue 9: the context fields are checked like every other field.
#[test]
fn context_fields_are_range_checked() {
    let errs = errors(
        "t.toml",
        "[[tasks]]\nid = \"a\"\nprompt = \"x\"\ncompact_at = 1.5\n[[tasks]]\nid = \"b\"\nprompt = \"x\"\nmax_context_tokens = 0\ncompact_at = 0\n",
    );
    assert_eq!(
        errs,
        [
            "t.toml:4:1: task \"a\": field \"compact_at\": 1.5 is not a fraction of the window in (0, 1]",
            "t.toml:8:1: task \"b\": field \"max_context_tokens\": must be at least 1",
            "t.toml:9:1: task \"b\": field \"compact_at\": 0 is not a fraction of the window in (0, 1]"
        ]
    );
    let ok = parse_str("t.yaml", "tasks:\n  - id: a\n    prompt: x\n    compact_at: 1\n    max_context_tokens: 16000\n").unwrap();
    assert_eq!((ok.tasks[0].fields.compact_at, ok.tasks[0].fields.max_context_tokens), (Some(1.0), Some(16_000)));
}
