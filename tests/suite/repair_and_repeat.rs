//! Nightly batches that get the work done (issue 21): a failed check goes back to the agent to
//! repair (`check_repairs`); the agent is told its limits and warned when one is close, and its
//! work is still checked when a limit ends it; `repeat` runs independent attempts and gives a
//! pass rate, a verdict and an exit code by `--min-pass-rate`. Against a local server that speaks
//! OpenAI Chat Completions, scripted turn by turn; what it received is asserted.

use crate::support::cli::{dracode, events, finished, git_repo, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const KEY: &str = "sk-test-0123456789abcdef";

/// A project folder: `dracode.toml` pointing the `mock` provider at `server`, `tasks.toml`, and
/// a git repository `repo/` holding `files`.
fn project(server: &OpenAiServer, manifest: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let config =
        format!("provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n", server.base_url());
    std::fs::write(tmp.path().join("dracode.toml"), config).unwrap();
    let defaults = "[defaults]\nrepo = \"repo\"\nisolation = \"copy\"\n";
    std::fs::write(tmp.path().join("tasks.toml"), format!("{defaults}{manifest}")).unwrap();
    git_repo(&tmp.path().join("repo"), files);
    tmp
}

/// Runs `dracode run tasks.toml --out out --jobs 1 ARGS` in `dir` off the async workers (the
/// server answers on them): exit code, stderr, results.jsonl.
async fn run(dir: &Path, args: &[&str]) -> (i32, String, Vec<Value>) {
    let dir: PathBuf = dir.to_path_buf();
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    tokio::task::spawn_blocking(move || {
        let output = dracode(&dir)
            .env("OPENAI_API_KEY", KEY)
            .args(["run", "tasks.toml", "--out", "out", "--jobs", "1"])
            .args(&args)
            .output()
            .unwrap();
        let results = dir.join("out/results.jsonl");
        let all = if results.exists() { read_jsonl(&results) } else { Vec::new() };
        (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned(), all)
    })
    .await
    .unwrap()
}

/// Every text a request's messages carry (user, tool and system contents), joined.
fn request_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn write_file(id: &str, path: &str, content: &str) -> ScriptedReply {
    ScriptedReply::tool_call(id, "write_file", json!({"file_path": path, "content": content}), Tokens::new(50, 10))
}

/// A check that passes only when `calc.txt` says `2+2=4`, and leaves a file behind either way.
const CALC_CHECK: &str = "touch check-leftover.txt\nif grep -qx '2+2=4' calc.txt; then echo ok; else\n  echo \"MISMATCH: calc.txt says $(cat calc.txt), expected 2+2=4\"; exit 3\nfi\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_check_goes_back_to_the_agent_which_repairs_and_passes() {
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![
            ScriptedReply::text("Looks right already.", Tokens::new(100, 5)),
            write_file("call_1", "calc.txt", "2+2=4\n"),
            ScriptedReply::text("Fixed calc.txt.", Tokens::new(120, 5)),
        ],
    )
    .await;
    let manifest = "[[tasks]]\nid = \"calc\"\nprompt = \"Fix calc.txt\"\ncheck = \"sh check.sh\"\ncheck_repairs = 2\n";
    let tmp = project(&server, manifest, &[("calc.txt", "2+2=5\n"), ("check.sh", CALC_CHECK)]);
    let (code, stderr, all) = run(tmp.path(), &[]).await;
    assert_eq!(code, 0, "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    // The model's second request carries the check's exit code and output.
    let second = request_text(&requests[1]);
    assert!(second.contains("The check `sh check.sh` failed with exit code 3 (repair 1 of 2)"), "{second}");
    assert!(second.contains("MISMATCH: calc.txt says 2+2=5, expected 2+2=4"), "{second}");
    assert!(!request_text(&requests[0]).contains("MISMATCH"));
    let task = finished(&all, "calc");
    assert_eq!(task["status"], "passed");
    assert_eq!(task["repairs"], 1);
    let rounds = task["check_rounds"].as_array().unwrap();
    assert_eq!(rounds.iter().map(|r| r["exit_code"].clone()).collect::<Vec<_>>(), [json!(3), json!(0)]);
    assert!(rounds[0]["output_tail"].as_str().unwrap().contains("MISMATCH") && rounds[0]["duration_ms"].is_u64());
    assert_eq!(task["check"]["exit_code"], 0);
    assert_eq!(task["usage"]["requests"], 3, "the repair's calls count in the task's usage");
    // The patch is the final state, without what the check left behind.
    assert_eq!(task["files_changed"], json!(["calc.txt"]));
    let patch = std::fs::read_to_string(tmp.path().join("out/diffs/calc.patch")).unwrap();
    assert!(patch.contains("+2+2=4") && !patch.contains("check-leftover"), "{patch}");
    let summary = std::fs::read_to_string(tmp.path().join("out/summary.md")).unwrap();
    assert!(summary.contains("passed (after 1 repair)"), "{summary}");
    let junit = std::fs::read_to_string(tmp.path().join("out/junit.xml")).unwrap();
    assert!(junit.contains(r#"<property name="calc.repairs" value="1"/>"#), "{junit}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_is_told_its_limits_and_warned_two_turns_before_max_iterations() {
    let list = |id: &str| ScriptedReply::tool_call(id, "list_files", json!({}), Tokens::new(50, 10));
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![
            write_file("call_1", "notes.txt", "step 1\n"),
            list("call_2"),
            ScriptedReply::text("Wrote notes.txt; nothing left.", Tokens::new(80, 5)),
        ],
    )
    .await;
    let manifest = "[[tasks]]\nid = \"notes\"\nprompt = \"Write notes\"\nmax_iterations = 4\ntimeout = \"20m\"\n";
    let tmp = project(&server, manifest, &[("a.txt", "a\n")]);
    let (code, stderr, all) = run(tmp.path(), &[]).await;
    assert_eq!(code, 0, "{stderr}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("Limits of this task: at most 4 model turns") && system.contains("20m of wall-clock time"), "{system}");
    let warning = "A limit of this task is close: 2 model turns left, this one included (max_iterations = 4)";
    assert!(!request_text(&requests[1]).contains(warning), "not before");
    let third = request_text(&requests[2]);
    assert!(third.contains(warning) && third.contains("leave the workspace in a good state"), "{third}");
    let warnings = events(&all, "limit.warning");
    assert_eq!(warnings.len(), 1, "once");
    assert_eq!(
        (warnings[0]["limit"].clone(), warnings[0]["remaining"].clone(), warnings[0]["allowed"].clone()),
        (json!("max_iterations"), json!(2), json!(4))
    );
    assert_eq!(warnings[0]["attempt"], 1);
    assert_eq!(finished(&all, "notes")["status"], "passed");
}

#[tokio::test(flavor = "multi_thread")]
async fn work_left_at_max_iterations_is_diffed_and_checked() {
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![write_file("call_1", "calc.txt", "2+2=4\n"), ScriptedReply::tool_call("call_2", "list_files", json!({}), Tokens::new(50, 10))],
    )
    .await;
    let manifest = "[[tasks]]\nid = \"busy\"\nprompt = \"Fix calc.txt\"\ncheck = \"sh check.sh\"\nmax_iterations = 2\n";
    let tmp = project(&server, manifest, &[("calc.txt", "2+2=5\n"), ("check.sh", CALC_CHECK)]);
    let (code, stderr, all) = run(tmp.path(), &[]).await;
    assert_eq!(code, 1, "{stderr}");
    let task = finished(&all, "busy");
    assert_eq!(task["status"], "max_iterations");
    assert_eq!(task["check"]["exit_code"], 0, "the work so far was checked");
    assert!(task["error"]["message"].as_str().unwrap().ends_with("(its work so far passes the check)"), "{task}");
    assert_eq!(task["files_changed"], json!(["calc.txt"]));
    assert!(tmp.path().join("out/diffs/busy.patch").is_file());
}

/// Five attempts, the model scripted to write `good` in the 1st, 3rd and 5th.
fn five_attempts() -> Vec<ScriptedReply> {
    ["good", "bad", "good", "bad", "good"]
        .iter()
        .enumerate()
        .flat_map(|(i, word)| {
            [write_file(&format!("call_{i}"), "answer.txt", &format!("{word}\n")), ScriptedReply::text("done", Tokens::new(60, 3))]
        })
        .collect()
}

const REPEAT_CHECK: &str = "check = \"grep -qx good answer.txt\"\n";

#[tokio::test(flavor = "multi_thread")]
async fn five_repeats_passing_three_are_flaky_and_min_pass_rate_decides_the_exit_code() {
    let server = OpenAiServer::start_with_key(KEY, five_attempts()).await;
    let manifest = format!("[[tasks]]\nid = \"answer\"\nprompt = \"Answer\"\nrepeat = 5\n{REPEAT_CHECK}");
    let tmp = project(&server, &manifest, &[("answer.txt", "?\n")]);
    let (code, stderr, all) = run(tmp.path(), &[]).await;
    assert_eq!(code, 1, "every attempt must pass by default: {stderr}");
    let task = finished(&all, "answer");
    assert_eq!((task["verdict"].clone(), task["pass_rate"].clone(), task["status"].clone()), (json!("flaky"), json!(0.6), json!("failed")));
    assert!(task["error"]["message"].as_str().unwrap().starts_with("passed 3 of 5 attempts (pass rate 0.6"), "{task}");
    assert_eq!(events(&all, "task.finished").len(), 1, "one task.finished per task");
    let started: Vec<Value> = events(&all, "task.started").iter().map(|e| e["attempt"].clone()).collect();
    assert_eq!(started, [json!(1), json!(2), json!(3), json!(4), json!(5)]);
    let repeats = task["repeats"].as_array().unwrap();
    let statuses: Vec<&str> = repeats.iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["passed", "failed", "passed", "failed", "passed"]);
    assert_eq!(task["usage"]["requests"], 10, "usage sums every attempt");
    for (i, word) in ["good", "bad", "good", "bad", "good"].iter().enumerate() {
        let patch = std::fs::read_to_string(tmp.path().join(format!("out/diffs/answer@{}.patch", i + 1))).unwrap();
        assert!(patch.contains(&format!("+{word}")), "attempt {}: {patch}", i + 1);
        assert_eq!(repeats[i]["diff_path"], format!("diffs/answer@{}.patch", i + 1));
        assert!(tmp.path().join(format!("out/transcripts/answer@{}.json", i + 1)).is_file());
    }
    let summary = std::fs::read_to_string(tmp.path().join("out/summary.md")).unwrap();
    assert!(summary.contains("failed (3/5 passed, flaky)"), "{summary}");

    // The same, with the attempts asked for on the command line and a pass rate of 0.6 enough.
    let server = OpenAiServer::start_with_key(KEY, five_attempts()).await;
    let tmp = project(&server, &format!("[[tasks]]\nid = \"answer\"\nprompt = \"Answer\"\n{REPEAT_CHECK}"), &[("answer.txt", "?\n")]);
    let (code, stderr, all) = run(tmp.path(), &["--repeat", "5", "--min-pass-rate", "0.6"]).await;
    assert_eq!(code, 0, "{stderr}");
    let task = finished(&all, "answer");
    assert_eq!((task["verdict"].clone(), task["status"].clone(), task["flaky"].clone()), (json!("flaky"), json!("passed"), json!(true)));
    let junit_path = tmp.path().join("out/junit.xml");
    let junit = std::fs::read_to_string(&junit_path).unwrap();
    assert_eq!(junit.matches("<flakyFailure").count(), 2, "{junit}");
    assert!(junit.contains(r#"<property name="answer.verdict" value="flaky"/>"#), "{junit}");
    assert!(junit.contains(r#"<property name="answer.pass_rate" value="0.6"/>"#), "{junit}");
    crate::support::xmllint::assert_valid("jenkins-xunit-junit-10.xsd", &junit_path);
    // Below a threshold of 0.7.
    let server = OpenAiServer::start_with_key(KEY, five_attempts()).await;
    let tmp = project(&server, &format!("[[tasks]]\nid = \"answer\"\nprompt = \"Answer\"\n{REPEAT_CHECK}"), &[("answer.txt", "?\n")]);
    let (code, stderr, all) = run(tmp.path(), &["--repeat", "5", "--min-pass-rate", "0.7"]).await;
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(finished(&all, "answer")["status"], "failed");
}

#[test]
fn repeat_zero_and_a_pass_rate_above_one_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), "[[tasks]]\nid = \"t\"\nprompt = \"p\"\nprovider = \"replay\"\nrepeat = 0\n").unwrap();
    let output = dracode(tmp.path()).args(["validate", "tasks.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("tasks.toml") && stderr.contains("field \"repeat\": must be at least 1"), "{stderr}");
    std::fs::write(tmp.path().join("tasks.toml"), "[[tasks]]\nid = \"t\"\nprompt = \"p\"\nprovider = \"replay\"\n").unwrap();
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--dry-run", "--offline", "--min-pass-rate", "1.5"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--min-pass-rate 1.5: a share from 0 to 1"), "{stderr}");
    // The plan shows them.
    let tasks = "[[tasks]]\nid = \"t\"\nprompt = \"p\"\nprovider = \"replay\"\nrepeat = 3\ncheck = \"true\"\ncheck_repairs = 2\n";
    std::fs::write(tmp.path().join("tasks.toml"), tasks).unwrap();
    let output = dracode(tmp.path()).args(["run", "tasks.toml", "--dry-run", "--offline", "--min-pass-rate", "0.5"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains(" check_repairs=2 ") && stdout.contains(" repeat=3 min_pass_rate=0.5\t"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn work_left_at_a_timeout_or_a_budget_is_checked_too() {
    let slow = ScriptedReply::text("still thinking", Tokens::new(10, 1)).with_delay(std::time::Duration::from_secs(20));
    let server = OpenAiServer::start_with_key(KEY, vec![write_file("call_1", "calc.txt", "2+2=4\n"), slow]).await;
    let manifest = "[[tasks]]\nid = \"slow\"\nprompt = \"Fix calc.txt\"\ncheck = \"sh check.sh\"\ntimeout = \"3s\"\n";
    let tmp = project(&server, manifest, &[("calc.txt", "2+2=5\n"), ("check.sh", CALC_CHECK)]);
    let (code, stderr, all) = run(tmp.path(), &[]).await;
    assert_eq!(code, 1, "{stderr}");
    let task = finished(&all, "slow");
    assert_eq!((task["status"].clone(), task["check"]["exit_code"].clone()), (json!("timeout"), json!(0)), "{task}");
    assert_eq!(task["files_changed"], json!(["calc.txt"]));

    let server = OpenAiServer::start_with_key(
        KEY,
        vec![write_file("call_1", "calc.txt", "2+2=3\n"), ScriptedReply::tool_call("call_2", "list_files", json!({}), Tokens::new(50, 10))],
    )
    .await;
    let manifest = "[[tasks]]\nid = \"spent\"\nprompt = \"Fix calc.txt\"\ncheck = \"sh check.sh\"\nmax_tokens = 100\n";
    let tmp = project(&server, manifest, &[("calc.txt", "2+2=5\n"), ("check.sh", CALC_CHECK)]);
    let (code, stderr, all) = run(tmp.path(), &[]).await;
    assert_eq!(code, 1, "{stderr}");
    let task = finished(&all, "spent");
    assert_eq!((task["status"].clone(), task["check"]["exit_code"].clone()), (json!("budget_exceeded"), json!(3)), "{task}");
    assert!(task["check"]["output_tail"].as_str().unwrap().contains("calc.txt says 2+2=3"), "the work so far was checked");
    assert!(tmp.path().join("out/diffs/spent.patch").is_file());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_check_does_not_make_the_repair_look_stalled() {
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![
            ScriptedReply::text("Looks right already.", Tokens::new(100, 5)),
            write_file("call_1", "calc.txt", "2+2=4\n"),
            ScriptedReply::text("Fixed calc.txt.", Tokens::new(120, 5)),
        ],
    )
    .await;
    // The check is silent for longer than idle_timeout: the repair after it must not count that.
    let manifest =
        "[[tasks]]\nid = \"calc\"\nprompt = \"Fix calc.txt\"\ncheck = \"sleep 3; sh check.sh\"\ncheck_repairs = 1\nidle_timeout = \"2s\"\n";
    let tmp = project(&server, manifest, &[("calc.txt", "2+2=5\n"), ("check.sh", CALC_CHECK)]);
    let (code, stderr, all) = run(tmp.path(), &[]).await;
    let task = finished(&all, "calc");
    assert_eq!((code, task["status"].clone(), task["repairs"].clone()), (0, json!("passed"), json!(1)), "{stderr}\n{task}");
}
