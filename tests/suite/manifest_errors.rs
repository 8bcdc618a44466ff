//! Bad input: a clear message naming file, line, task and field, exit code 2, nothing run.

use crate::support::cli::{crate_root, dracode};

#[test]
fn a_typo_in_a_manifest_is_exit_2_with_file_line_task_field_and_suggestion() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), "[[tasks]]\nid = \"ok\"\nprompt = \"x\"\n\n[[tasks]]\nid = \"docs\"\npromt = \"y\"\n")
        .unwrap();
    let output = dracode(tmp.path()).args(["run", "tasks.toml"]).assert().code(2).get_output().clone();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("tasks.toml:7:1: task \"docs\": unknown field \"promt\" (did you mean \"prompt\"?)"), "{stderr}");
    assert!(!tmp.path().join("dracode-out").exists(), "nothing was run or written");

    let output = dracode(tmp.path()).args(["validate", "tasks.toml"]).assert().code(2).get_output().clone();
    assert!(String::from_utf8_lossy(&output.stderr).contains("did you mean \"prompt\""));
}

#[test]
fn validate_accepts_the_example_and_list_prints_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = crate_root().join("examples/quickstart.toml");
    dracode(tmp.path()).arg("validate").arg(&manifest).assert().success();
    let out = dracode(tmp.path()).arg("list").arg(&manifest).args(["--filter", "tag:docs"]).assert().success().get_output().stdout.clone();
    assert_eq!(String::from_utf8(out).unwrap(), "add-readme\n");
}

#[test]
fn unknown_provider_and_missing_config_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("t.yaml"), "tasks:\n  - id: a\n    prompt: x\n    provider: opnai\n").unwrap();
    let output = dracode(tmp.path()).args(["run", "t.yaml"]).assert().code(2).get_output().clone();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("task \"a\"") && stderr.contains("did you mean \"openai\""), "{stderr}");
    dracode(tmp.path()).args(["run", "t.yaml", "--config", "nope.toml"]).assert().code(2);
    dracode(tmp.path()).args(["run"]).assert().code(2);
}

#[test]
fn schema_commands_print_json_schemas() {
    let tmp = tempfile::tempdir().unwrap();
    for which in ["manifest", "events"] {
        let out = dracode(tmp.path()).args(["schema", which]).assert().success().get_output().stdout.clone();
        let schema: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(schema.is_object(), "{which}");
    }
    let out = dracode(tmp.path()).args(["schema", "manifest"]).assert().success().get_output().stdout.clone();
    assert!(String::from_utf8_lossy(&out).contains("prompt_file"));
}

#[test]
fn tools_and_providers_commands_describe_what_exists_without_secrets() {
    let tmp = tempfile::tempdir().unwrap();
    for (format, probe) in [
        ("openai", "/0/function/name"),
        ("anthropic", "/0/input_schema/type"),
        ("gemini", "/0/functionDeclarations/0/parameters"),
        ("mcp", "/tools/0/inputSchema"),
    ] {
        let out = dracode(tmp.path()).args(["tools", "--format", format]).assert().success().get_output().stdout.clone();
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(value.pointer(probe).is_some(), "{format}: {value}");
    }
    let out = dracode(tmp.path())
        .env("OPENAI_API_KEY", "sk-visible-nowhere-123456")
        .arg("providers")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("sk-visible-nowhere-123456"), "{text}");
    let line = |name: &str| text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_default().to_string();
    assert!(line("openai").contains("configured") && !line("openai").contains("not configured"), "{text}");
    assert!(line("anthropic").contains("not configured") && line("anthropic").contains("ANTHROPIC_API_KEY"), "{text}");
}

/// Issue 9, "Input limits": `validate` runs every check `run` runs, and inputs that could hang
/// or flood dracode are refused with the file, line, task and field named.
#[test]
fn validate_refuses_what_run_refuses_and_inputs_beyond_the_limits() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo.md");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::fs::write(tmp.path().join("big.md"), "x".repeat(1024 * 1024 + 1)).unwrap();
    let long_id = "a".repeat(201);
    let manifest = format!(
        "[defaults]\nisolation = \"copy\"\n\
         [[tasks]]\nid = \"no-repo\"\nprompt = \"x\"\nrepo = \"missing\"\n\
         [[tasks]]\nid = \"{long_id}\"\nprompt = \"x\"\n\
         [[tasks]]\nid = \"zero\"\nprompt = \"x\"\ntimeout = \"0s\"\n\
         [[tasks]]\nid = \"nan\"\nprompt = \"x\"\nmax_cost_usd = nan\n\
         [[tasks]]\nid = \"neg\"\nprompt = \"x\"\nmax_cost_usd = -inf\n\
         [[tasks]]\nid = \"zero-file\"\nprompt_file = \"/dev/zero\"\n\
         [[tasks]]\nid = \"fifo\"\nprompt_file = \"fifo.md\"\n\
         [[tasks]]\nid = \"big\"\nprompt_file = \"big.md\"\n\
         [[tasks]]\nid = \"outside\"\nprompt_file = \"/etc/hostname\"\n\
         [[tasks]]\nid = \"up\"\nprompt = \"x\"\nworkdir = \"../elsewhere\"\n\
         [[tasks]]\nid = \"abs\"\nprompt = \"x\"\nworkdir = \"/tmp\"\n"
    );
    std::fs::write(tmp.path().join("m.toml"), manifest).unwrap();
    for command in ["validate", "run"] {
        let output =
            dracode(tmp.path()).args([command, "m.toml"]).timeout(std::time::Duration::from_secs(30)).assert().code(2).get_output().clone();
        assert_mentions_all(
            &output.stderr,
            &[
                "m.toml:6:1: task \"no-repo\": field \"repo\":",
                "ids name files and may have at most 200",
                "m.toml:13:1: task \"zero\": field \"timeout\": \"0s\" is zero",
                "task \"nan\": field \"max_cost_usd\": NaN is not a finite amount",
                "task \"neg\": field \"max_cost_usd\": -inf is not a finite amount",
                "task \"zero-file\": field \"prompt_file\":",
                "task \"fifo\": field \"prompt_file\": cannot read",
                "task \"big\": field \"prompt_file\": cannot read",
                "task \"outside\": field \"prompt_file\": /etc/hostname is outside the manifest's folder and the task's repo",
                "task \"up\": field \"workdir\": ../elsewhere leaves the workspace",
                "task \"abs\": field \"workdir\": /tmp is absolute",
            ],
        );
        assert!(!tmp.path().join("dracode-out").exists(), "nothing was run");
    }
}

/// Issue 7: config-file `[defaults]` get the manifest's field checks (before, an unknown tool
/// there became a retried `internal` error at run time).
#[test]
fn config_defaults_are_checked_like_a_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("dracode.toml"), "[defaults]\nfoo = 1\nid = \"x\"\ntools = [\"read_fil\"]\ntimeout = \"0s\"\n").unwrap();
    std::fs::write(tmp.path().join("m.toml"), "[[tasks]]\nid = \"a\"\nprompt = \"x\"\nisolation = \"copy\"\n").unwrap();
    let output = dracode(tmp.path()).args(["validate", "m.toml"]).assert().code(2).get_output().clone();
    assert_mentions_all(
        &output.stderr,
        &[
            "dracode.toml: [defaults] unknown field \"foo\"",
            "dracode.toml: [defaults] field \"id\": `id` cannot be set in [defaults]",
            "dracode.toml: [defaults] field \"tools\": unknown tool \"read_fil\" (did you mean \"read_file\"?)",
            "dracode.toml: [defaults] field \"timeout\":",
        ],
    );
}

/// Asserts that `stderr` holds every one of `needles`.
fn assert_mentions_all(stderr: &[u8], needles: &[&str]) {
    let stderr = String::from_utf8_lossy(stderr);
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} not in\n{stderr}");
    }
}

#[test]
fn a_bare_number_is_not_a_duration_in_a_manifest_or_a_flag() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), "[[tasks]]\nid = \"t\"\nprompt = \"x\"\ntimeout = \"10\"\n").unwrap();
    for args in [vec!["validate", "tasks.toml"], vec!["run", "tasks.toml"]] {
        let output = dracode(tmp.path()).args(&args).assert().code(2).get_output().clone();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("tasks.toml:4:1: task \"t\": field \"timeout\"")
                && stderr.contains("\"10\" has no unit")
                && stderr.contains("\"10m\""),
            "{stderr}"
        );
    }
    std::fs::write(tmp.path().join("tasks.toml"), "[[tasks]]\nid = \"t\"\nprompt = \"x\"\n").unwrap();
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--timeout", "10", "--dry-run"]).assert().code(2).get_output().clone();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--timeout 10: \"10\" has no unit") && !stderr.contains("tasks.toml"),
        "the flag's error names the flag: {stderr}"
    );
}

#[test]
fn a_keep_ignored_glob_outside_the_workspace_is_exit_2_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.toml"), "[[tasks]]\nid = \"a\"\nprompt = \"p\"\nprovider = \"replay\"\nkeep_ignored = [\"../x\"]\n")
        .unwrap();
    let out = dracode(dir.path()).args(["validate", "m.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("field \"keep_ignored\"") && stderr.contains("relative to the workspace root"), "{stderr}");
}

/// A manifest with ten mistakes in `[defaults]`, `[setup]` and three tasks — wrong types among
/// them — is named whole by one `validate`: no mistake waits for another to be fixed.
#[test]
fn every_mistake_of_a_manifest_is_named_in_one_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = "[defaults]\ntimeout = 5\nmax_iterations = \"ten\"\nbogus = 1\n\n\
        [setup]\ncommand = \"\"\ntimeout = \"soon\"\n\n\
        [[tasks]]\nid = \"a\"\nprompt = \"p\"\nretries = \"two\"\nrepeat = -1\n\n\
        [[tasks]]\nid = \"a\"\nprompt = \"q\"\nidle_timeout = \"x\"\n\n\
        [[tasks]]\nid = \"bad id!\"\nprompt = \"r\"\ntools = [\"nope\"]\n";
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    let output = dracode(tmp.path()).args(["validate", "--offline", "tasks.toml"]).assert().code(2).get_output().clone();
    let stderr = String::from_utf8_lossy(&output.stderr);
    for (line, needle) in [
        ("tasks.toml:2:", "[defaults] field \"timeout\""),
        ("tasks.toml:3:", "[defaults] field \"max_iterations\""),
        ("tasks.toml:4:", "unknown field \"bogus\""),
        ("tasks.toml:7:", "[setup] command"),
        ("tasks.toml:8:", "[setup] timeout"),
        ("tasks.toml:13:", "task \"a\": field \"retries\""),
        ("tasks.toml:14:", "task \"a\": field \"repeat\""),
        ("tasks.toml:", "duplicate id \"a\""),
        ("tasks.toml:19:", "field \"idle_timeout\""),
        ("tasks.toml:", "invalid id \"bad id!\""),
        ("tasks.toml:24:", "unknown tool \"nope\""),
    ] {
        assert!(stderr.lines().any(|l| l.contains(line) && l.contains(needle)), "{needle:?} at {line} in:\n{stderr}");
    }
}

#[test]
fn validate_names_wrong_types_and_unknown_providers_and_agents_in_one_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = "[[tasks]]\nid = \"typed-wrong\"\nprompt = \"x\"\nmax_iterations = \"ten\"\n\n\
                    [[tasks]]\nid = \"unknown-provider\"\nprompt = \"y\"\nprovider = \"nope\"\n\n\
                    [[tasks]]\nid = \"unknown-agent\"\nprompt = \"z\"\nagent = \"no-such-agent\"\n";
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    let output = dracode(tmp.path()).args(["validate", "--offline", "tasks.toml"]).assert().code(2).get_output().clone();
    let stderr = String::from_utf8_lossy(&output.stderr);
    for expected in [
        "tasks.toml:4:1: task \"typed-wrong\": field \"max_iterations\": invalid type: string \"ten\", expected u32",
        "tasks.toml:6:1: task \"unknown-provider\": field \"provider\": unknown provider \"nope\"",
        "tasks.toml:11:1: task \"unknown-agent\": field \"agent\": unknown agent \"no-such-agent\"",
    ] {
        assert!(stderr.contains(expected), "one pass names every problem; missing {expected:?} in:\n{stderr}");
    }
}
