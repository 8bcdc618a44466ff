//! Config layering through the real binary: `dracode.toml` (or `--config` / `$DRACODE_CONFIG`)
//! → `dracode.local.toml` → `DRACODE_*` variables (nested with `__`, values typed as TOML-ish
//! literals), and errors that name the file or variable that set the bad key.

use crate::support::cli::{dracode, finished, git_repo, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use std::path::Path;

const KEY: &str = "sk-test-config-env-0123456789";

/// The `dracode providers` line of provider `name`, run in `dir` with `env`.
fn providers_line(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
    let output = dracode(dir).envs(env.iter().copied()).arg("providers").args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout.lines().find(|l| l.starts_with("mock ")).unwrap_or_else(|| panic!("no `mock` line in:\n{stdout}")).to_string()
}

/// `dracode validate --offline tasks.toml` in `dir` with `env`: exit code and stderr.
fn validate(dir: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let output = dracode(dir).envs(env.iter().copied()).args(["validate", "--offline", "tasks.toml"]).output().unwrap();
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// A provider set by variables alone reaches the server with every value typed as its field
/// wants: a string with dots (`gpt-4.1`), an integer, a boolean, a table of headers (merged
/// with a header set by a variable of its own, whose number is taken as the text written) and
/// an array of tool names.
#[tokio::test(flavor = "multi_thread")]
async fn a_provider_set_only_by_dracode_variables_reaches_the_server() {
    let server = OpenAiServer::start_with_key(KEY, vec![ScriptedReply::text("done", Tokens::new(10, 2))]).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[[tasks]]\nid = \"t\"\nprompt = \"p\"\nrepo = \"repo\"\nisolation = \"none\"\nrequire_change = false\n",
    )
    .unwrap();
    git_repo(&tmp.path().join("repo"), &[("a.txt", "one\n")]);
    let url = server.base_url();
    let dir = tmp.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        dracode(&dir)
            .env("OPENAI_API_KEY", KEY)
            .env("DRACODE_PROVIDER", "mock")
            .env("DRACODE_PROVIDERS__MOCK__TYPE", "openai")
            .env("DRACODE_PROVIDERS__MOCK__BASE_URL", &url)
            .env("DRACODE_PROVIDERS__MOCK__MODEL", "gpt-4.1")
            .env("DRACODE_PROVIDERS__MOCK__MAX_TOKENS", "77")
            .env("DRACODE_PROVIDERS__MOCK__STREAM", "false")
            .env("DRACODE_PROVIDERS__MOCK__TIMEOUT", "30")
            .env("DRACODE_PROVIDERS__MOCK__HEADERS", "{X-Team = \"core\", X-Quote = \"a, b\"}")
            .env("DRACODE_PROVIDERS__MOCK__HEADERS__X_BUILD", "0123")
            .env("DRACODE_DEFAULTS__TOOLS", "[read_file, list_files]")
            .env("DRACODE_SLOW_AFTER", "1h")
            .args(["run", "tasks.toml", "--out", "out"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(finished(&read_jsonl(&tmp.path().join("out/results.jsonl")), "t")["status"], "passed");
    let received = server.received();
    let request = received.last().unwrap();
    let body = request.body.as_ref().unwrap();
    assert_eq!(body["model"], "gpt-4.1");
    assert_eq!(body["max_completion_tokens"], 77);
    assert!(body.get("stream").is_none_or(|s| s == false), "stream = false: {body}");
    assert_eq!(request.headers.get("x-team").map(String::as_str), Some("core"));
    assert_eq!(request.headers.get("x-quote").map(String::as_str), Some("a, b"));
    assert_eq!(request.headers.get("x_build").map(String::as_str), Some("0123"), "a number where text is wanted: as written");
    let tools: Vec<&str> = body["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(tools, ["read_file", "list_files"]);
}

/// File → local file → variable, each overriding key by key (the tables merge); `--config`
/// and `$DRACODE_CONFIG` replace `dracode.toml`, not the local file.
#[test]
fn layers_override_key_by_key_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("tasks.toml"), "[[tasks]]\nid = \"t\"\nprompt = \"p\"\n").unwrap();
    std::fs::write(
        dir.join("dracode.toml"),
        "[providers.mock]\ntype = \"vllm\"\nmodel = \"from-file\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let line = providers_line(dir, &[], &[]);
    assert!(line.contains("vllm") && line.contains("from-file") && line.contains("127.0.0.1:9/v1"), "{line}");
    std::fs::write(dir.join("dracode.local.toml"), "[providers.mock]\nmodel = \"from-local\"\n").unwrap();
    let line = providers_line(dir, &[], &[]);
    assert!(line.contains("vllm") && line.contains("from-local") && line.contains("127.0.0.1:9/v1"), "{line}");
    let line = providers_line(dir, &[("DRACODE_PROVIDERS__MOCK__MODEL", "from-env"), ("DRACODE_GITHUB_URL", "x")], &[]);
    assert!(line.contains("from-env") && line.contains("127.0.0.1:9/v1"), "{line}");
    std::fs::write(dir.join("other.toml"), "[providers.mock]\ntype = \"sglang\"\nbase_url = \"http://127.0.0.1:7/v1\"\n").unwrap();
    for (env, args) in [(vec![], vec!["--config", "other.toml"]), (vec![("DRACODE_CONFIG", "other.toml")], vec![])] {
        let line = providers_line(dir, &env, &args);
        assert!(line.contains("sglang") && line.contains("from-local") && line.contains("127.0.0.1:7/v1"), "{line}");
        assert!(!line.contains("vllm"), "{line}");
    }
}

/// A bad key or value set by a variable is a config error (exit 2, nothing run) naming the
/// variable and the key path; one set in `dracode.local.toml` names that file.
#[test]
fn a_bad_key_or_value_names_the_variable_or_file_that_set_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("tasks.toml"), "[[tasks]]\nid = \"t\"\nprompt = \"p\"\n").unwrap();
    std::fs::write(dir.join("dracode.toml"), "[providers.mock]\ntype = \"openai\"\n").unwrap();
    let cases = [
        ("DRACODE_PROVIDERS__MOCK__MODLE", "m", "`providers.mock.modle`: unknown field `modle`"),
        ("DRACODE_PROVIDERS__MOCK__MAX_TOKENS", "many", "`providers.mock.max_tokens`: invalid type: string \"many\""),
        ("DRACODE_PROVIDERS__MOCK__TIMEOUT", "soon", "`providers.mock.timeout`:"),
        ("DRACODE_DEFAULTS__MAX_ITERATIONS", "0", "[defaults] field \"max_iterations\": must be at least 1"),
    ];
    for (var, value, says) in cases {
        let (code, stderr) = validate(dir, &[(var, value)]);
        assert_eq!(code, 2, "{var}: {stderr}");
        assert!(stderr.contains(&format!("{var}: {says}")), "{var}: {stderr}");
    }
    std::fs::write(dir.join("dracode.local.toml"), "[providers.mock]\nstream = \"no\"\n").unwrap();
    let (code, stderr) = validate(dir, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("dracode.local.toml: `providers.mock.stream`: invalid type: string \"no\""), "{stderr}");
    let run = dracode(dir).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(!dir.join("out").exists(), "nothing was run");
}
