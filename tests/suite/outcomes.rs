//! Outcomes that say what happened (issue 29, Nightly round 2): identical fixes combine, a task
//! that fixed nothing is not a plain pass, a provider outage is not agent flakiness, repeats
//! count turns like tokens, JUnit classnames do not collide across repositories, the failure
//! reason keeps the check output's telling line, and a rerun does not add up `jobs`.

use crate::support::cli::{dracode, events, finished, git_repo, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use serde_json::{Value, json};
use std::path::PathBuf;

/// A recording whose model writes each `(file, content)` in turn, then says "done".
fn writes(files: &[(&str, &str)]) -> String {
    let mut turns: Vec<Value> = files
        .iter()
        .enumerate()
        .map(|(i, (file, content))| {
            json!({"content": [{"type": "tool_use", "id": format!("c{i}"), "name": "write_file", "input": {"file_path": file, "content": content}}], "stop_reason": "tool_use"})
        })
        .collect();
    turns.push(json!({"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}));
    Value::Array(turns).to_string()
}

/// A folder holding `repo/` (a git repository with `files`) and the recordings.
struct Project {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Project {
    fn new(files: &[(&str, &str)]) -> Project {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        git_repo(&dir.join("repo"), files);
        Project { _tmp: tmp, dir }
    }

    fn file(&self, name: &str, text: &str) {
        let path = self.dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// `dracode args…` in `dir` (relative to the project): (exit code, stderr).
    fn dracode_in(&self, dir: &str, args: &[&str]) -> (i32, String) {
        let out = dracode(&self.dir.join(dir)).args(args).output().unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    fn dracode(&self, args: &[&str]) -> (i32, String) {
        self.dracode_in("", args)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn json(&self, name: &str) -> Value {
        serde_json::from_str(&self.read(name)).unwrap()
    }
}

/// `[[tasks]]` entries: (id, recording, extra lines).
fn manifest(defaults: &str, tasks: &[(&str, &str, &str)]) -> String {
    let mut text = format!("[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\n{defaults}\n");
    for (id, replay, extra) in tasks {
        text.push_str(&format!("[[tasks]]\nid = \"{id}\"\nprompt = \"p\"\nreplay = \"{replay}\"\n{extra}\n"));
    }
    text
}

/// The summary.md row of task `id`, Markdown escapes removed.
fn summary_rows(md: &str, id: &str) -> Vec<String> {
    md.lines().filter(|l| l.starts_with(&format!("| {id} |"))).map(|l| l.replace('\\', "")).collect()
}

#[test]
fn combine_takes_identical_fixes_as_agreement_and_keeps_a_real_conflict() {
    let project = Project::new(&[("a.txt", "one\n"), ("b.txt", "b\n")]);
    project.file("one.json", &writes(&[("a.txt", "ONE\n")]));
    project.file("uno.json", &writes(&[("a.txt", "uno\n")]));
    project.file("both.json", &writes(&[("a.txt", "ONE\n"), ("b.txt", "B\n")]));
    let tasks = [("first", "one.json", ""), ("same", "one.json", ""), ("more", "both.json", ""), ("other", "uno.json", "")];
    project.file("tasks.toml", &manifest("check = \"true\"", &tasks));
    let (code, stderr) = project.dracode(&["run", "tasks.toml", "--out", "out"]);
    assert_eq!(code, 0, "{stderr}");

    let (code, stderr) = project.dracode(&["combine", "out", "--repo", "repo"]);
    assert_eq!(code, 1, "the overlapping, different change is still a conflict: {stderr}");
    let report = project.json("out/combine.json");
    assert_eq!(report["applied"], json!(["first", "same", "more"]), "{report}");
    let conflicts: Vec<&str> = report["conflicts"].as_array().unwrap().iter().map(|c| c["task_id"].as_str().unwrap()).collect();
    assert_eq!(conflicts, ["other"], "{report}");
    assert_eq!(report["agreed"][0], json!({"task_id": "same", "files": ["a.txt"], "with": ["first"]}), "{report}");
    assert_eq!(report["agreed"][1], json!({"task_id": "more", "files": ["a.txt"], "with": ["first"]}), "{report}");
    let patch = project.read("out/combined.patch");
    assert_eq!(patch.matches("+ONE").count(), 1, "the change once: {patch}");
    assert_eq!(patch.matches("+B").count(), 1, "{patch}");
    let md = project.read("out/combine.md");
    assert!(md.contains("`same` made the same change as `first` to `a.txt`"), "{md}");

    // Two tasks that made the same fix, and nothing else: they combine, exit 0.
    let (code, stderr) = project.dracode(&["run", "tasks.toml", "--out", "two", "--filter", "first", "--filter", "same"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = project.dracode(&["combine", "two", "--repo", "repo"]);
    assert_eq!(code, 0, "two identical fixes agree: {stderr}");
    assert_eq!(project.json("two/combine.json")["applied"], json!(["first", "same"]));
    assert_eq!(project.read("two/combined.patch").matches("+ONE").count(), 1);
}

#[test]
fn a_task_that_changed_nothing_while_its_check_was_green_before_is_not_a_plain_pass() {
    let project = Project::new(&[("a.txt", "one\n")]);
    project.file("idle.json", &writes(&[]));
    project.file("fix.json", &writes(&[("a.txt", "two\n")]));
    let tasks = [
        ("idle", "idle.json", "check = \"true\"\ncheck_before = true"),
        ("idle-allowed", "idle.json", "check = \"true\"\ncheck_before = true\nrequire_change = false"),
        ("fix", "fix.json", "check = \"grep -qx two a.txt\"\ncheck_before = true"),
        ("idle-no-before", "idle.json", "check = \"true\""),
    ];
    project.file("tasks.toml", &manifest("", &tasks));
    let (code, stderr) = project.dracode(&["run", "tasks.toml", "--out", "out"]);
    assert_eq!(code, 1, "nothing was fixed: the agents' work fell short: {stderr}");
    let all = read_jsonl(&project.dir.join("out/results.jsonl"));
    let idle = finished(&all, "idle");
    assert_eq!(idle["status"], "failed", "{idle}");
    assert_eq!(idle["error"]["kind"], "agent", "{idle}");
    let message = idle["error"]["message"].as_str().unwrap();
    assert!(message.contains("the check passed before the agent ran (check_before)") && message.contains("changed no file"), "{message}");
    assert_eq!(idle["check"]["before"], 0);
    assert_eq!(finished(&all, "idle-allowed")["status"], "passed", "require_change = false accepts it");
    assert_eq!(finished(&all, "fix")["status"], "passed", "red → green is a pass");
    assert_eq!(finished(&all, "idle-no-before")["status"], "passed", "without check_before nothing is known");
    let md = project.read("out/summary.md");
    assert!(summary_rows(&md, "idle").iter().any(|r| r.contains("the check passed before the agent ran")), "{md}");
    let junit = project.read("out/junit.xml");
    assert_eq!(junit.matches("<failure").count(), 1, "{junit}");
}

/// HTTP 500s until the call gives up (Retry-After 0: no wait), then a pass on the task's retry:
/// not the agent's flakiness. A truncated answer, then a pass: the agent's.
#[tokio::test(flavor = "multi_thread")]
async fn a_pass_after_a_provider_outage_is_not_flaky_and_the_summary_agrees_with_the_results() {
    let outage = (0..5).map(|_| ScriptedReply::server_error().with_header("retry-after", "0"));
    let mut script: Vec<ScriptedReply> = outage.collect();
    script.push(ScriptedReply::text("done", Tokens::new(7, 2)));
    script.push(ScriptedReply::text("cut", Tokens::new(5, 1)).with_finish_reason("length"));
    script.push(ScriptedReply::text("done", Tokens::new(5, 1)));
    let server = OpenAiServer::start_with_key("sk-test-0123456789abcdef", script).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::write(
        dir.join("dracode.toml"),
        format!("provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n", server.base_url()),
    )
    .unwrap();
    std::fs::create_dir(dir.join("ws")).unwrap();
    std::fs::write(
        dir.join("tasks.toml"),
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\nretries = 1\nretry_on = [\"error\", \"failed\"]\n\
         [[tasks]]\nid = \"outage\"\nprompt = \"p\"\n[[tasks]]\nid = \"cut\"\nprompt = \"p\"\n",
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || {
        dracode(&dir).env("OPENAI_API_KEY", "sk-test-0123456789abcdef").args(["run", "tasks.toml", "--out", "out", "--jobs", "1"]).output()
    })
    .await
    .unwrap()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let outage = finished(&all, "outage");
    assert_eq!((outage["status"].as_str(), outage["attempts"].as_u64()), (Some("passed"), Some(2)), "{outage}");
    assert_eq!(outage["flaky"], false, "a provider outage is not the agent's flakiness: {outage}");
    let cut = finished(&all, "cut");
    assert_eq!((cut["status"].as_str(), cut["attempts"].as_u64()), (Some("passed"), Some(2)), "{cut}");
    assert_eq!(cut["flaky"], true, "the agent's own failure, then a pass: {cut}");
    assert_eq!(cut["num_turns"], 2, "turns summed over the attempts, as tokens are: {cut}");
    assert_eq!(cut["usage"]["requests"], 2, "{cut}");
    let md = std::fs::read_to_string(tmp.path().join("out/summary.md")).unwrap();
    let row = |id: &str| summary_rows(&md, id).concat();
    assert!(row("cut").contains("passed (flaky"), "{md}");
    assert!(!row("outage").contains("flaky"), "{md}");
}

#[test]
fn a_repeated_task_counts_turns_over_every_attempt_as_it_sums_tokens() {
    let project = Project::new(&[("a.txt", "one\n")]);
    project.file("fix.json", &writes(&[("a.txt", "two\n")]));
    project.file("tasks.toml", &manifest("", &[("fix", "fix.json", "check = \"grep -qx two a.txt\"\nrepeat = 3")]));
    let (code, stderr) = project.dracode(&["run", "tasks.toml", "--out", "out"]);
    assert_eq!(code, 0, "{stderr}");
    let all = read_jsonl(&project.dir.join("out/results.jsonl"));
    let task = finished(&all, "fix");
    assert_eq!(task["num_turns"], 6, "two turns in each of three attempts: {task}");
    let junit = project.read("out/junit.xml");
    assert!(junit.contains(r#"<property name="fix.turns" value="6"/>"#), "{junit}");
}

/// The `classname` attributes of a junit.xml.
fn classnames(junit: &str) -> Vec<String> {
    junit.split("classname=\"").skip(1).map(|rest| rest.split('"').next().unwrap().to_string()).collect()
}

#[test]
fn junit_classnames_name_the_repository_and_the_manifest_path_and_survive_a_merge() {
    let project = Project::new(&[("README", "alpha\n")]);
    std::fs::rename(project.dir.join("repo"), project.dir.join("alpha")).unwrap();
    git_repo(&project.dir.join("beta"), &[("README", "beta\n")]);
    let idle = writes(&[]);
    let tasks = |n: usize| {
        let mut text = "[defaults]\nprovider = \"replay\"\nrequire_change = false\n".to_string();
        for i in 1..=n {
            text.push_str(&format!("[[tasks]]\nid = \"t{i}\"\nprompt = \"p\"\nreplay = \"idle.json\"\n"));
        }
        text
    };
    project.file("alpha/nightly.toml", &tasks(1));
    project.file("alpha/idle.json", &idle);
    project.file("beta/ci/nightly.toml", &tasks(4));
    project.file("beta/ci/idle.json", &idle);

    let (code, stderr) = project.dracode_in("alpha", &["run", "nightly.toml", "--out", "out"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(classnames(&project.read("alpha/out/junit.xml")), ["alpha.nightly"]);
    // The same from the repository's root and from the manifest's folder.
    let (code, stderr) = project.dracode_in("beta", &["run", "ci/nightly.toml", "--out", "out1"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = project.dracode_in("beta/ci", &["run", "nightly.toml", "--out", "../out2"]);
    assert_eq!(code, 0, "{stderr}");
    for out in ["beta/out1", "beta/out2"] {
        assert_eq!(classnames(&project.read(&format!("{out}/junit.xml"))), vec!["beta.ci.nightly"; 4], "{out}");
        let all = read_jsonl(&project.dir.join(out).join("results.jsonl"));
        assert_eq!(finished(&all, "t1")["manifest_name"], "beta/ci/nightly.toml", "{out}");
    }

    // Shards merged elsewhere (no checkout there) keep the classname.
    for k in 1..=2 {
        let (code, stderr) =
            project.dracode_in("beta", &["run", "ci/nightly.toml", "--shard", &format!("{k}/2"), "--out", &format!("s{k}")]);
        assert_eq!(code, 0, "{stderr}");
        std::fs::rename(project.dir.join(format!("beta/s{k}")), project.dir.join(format!("s{k}"))).unwrap();
    }
    let (code, stderr) = project.dracode(&["merge", "s1", "s2", "--out", "merged"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(classnames(&project.read("merged/junit.xml")), vec!["beta.ci.nightly"; 4]);
}

/// Check outputs as the tools print them, where the telling line is not the last one.
const CARGO_BUILD: &str = "   Compiling itoa v1.0.11 (/work/itoa)
error[E0308]: mismatched types
  --> src/lib.rs:120:16
    |
119 |     fn write(self, buf: &mut [MaybeUninit<u8>; 40]) -> &str {
    |                                                        ---- expected `&str` because of return type
120 |         return buf;
    |                ^^^ expected `&str`, found `&mut [MaybeUninit<u8>; 40]`
    |
    = note: expected reference `&str`
               found mutable reference `&mut [MaybeUninit<u8>; 40]`

For more information about this error, try `rustc --explain E0308`.
error: could not compile `itoa` (lib) due to 1 previous error
warning: build failed, waiting for other jobs to finish...
error: could not compile `itoa` (lib test) due to 1 previous error
";

const CARGO_TEST: &str = "running 3 tests
test tests::parses_zero ... ok
test tests::parses_max ... FAILED
test tests::parses_min ... ok

failures:

---- tests::parses_max stdout ----

thread 'tests::parses_max' panicked at src/lib.rs:42:9:
assertion `left == right` failed
  left: \"18446744073709551615\"
 right: \"18446744073709551614\"
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::parses_max

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: test failed, to rerun pass `--lib`
";

const PYTEST: &str = "============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.3, pluggy-1.5.0
rootdir: /work/pkg
collected 12 items

tests/test_parse.py ...F........                                         [100%]

=================================== FAILURES ===================================
________________________________ test_negative _________________________________

    def test_negative():
>       assert parse_number(\"-1\") == 1
E       AssertionError: assert -1 == 1
E        +  where -1 = parse_number('-1')

tests/test_parse.py:14: AssertionError
=========================== short test summary info ============================
FAILED tests/test_parse.py::test_negative - AssertionError: assert -1 == 1
========================= 1 failed, 11 passed in 0.31s =========================
";

const AVA_NPM: &str = "
> pkg@1.0.0 test /work/pkg
> xo && ava


  ✔ parses strings
  ✘ [fail]: parses numbers Difference (- actual, + expected):

  parses numbers

  test.js:8

   7: test('parses numbers', t => {
   8:   t.is(parse('1'), 2);
   9: });

  Difference (- actual, + expected):

  - 1
  + 2

  ─

  1 test failed
npm ERR! code ELIFECYCLE
npm ERR! errno 1
npm ERR! pkg@1.0.0 test: `xo && ava`
npm ERR! Exit status 1
npm ERR!
npm ERR! Failed at the pkg@1.0.0 test script.
npm ERR! This is probably not a problem with npm. There is likely additional logging output above.

npm ERR! A complete log of this run can be found in:
npm ERR!     /root/.npm/_logs/2026-11-27T18_02_11_123Z-debug.log
";

#[test]
fn the_failure_reason_keeps_the_check_outputs_telling_line() {
    let outputs = [("cargo-build", CARGO_BUILD), ("cargo-test", CARGO_TEST), ("pytest", PYTEST), ("ava", AVA_NPM)];
    let files: Vec<(String, &str)> = outputs.iter().map(|(id, text)| (format!("{id}.log"), *text)).collect();
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(n, t)| (n.as_str(), *t)).collect();
    let project = Project::new(&borrowed);
    project.file("idle.json", &writes(&[]));
    let checks: Vec<(String, String)> =
        outputs.iter().map(|(id, _)| (id.to_string(), format!("check = \"cat {id}.log; exit 1\""))).collect();
    let tasks: Vec<(&str, &str, &str)> = checks.iter().map(|(id, check)| (id.as_str(), "idle.json", check.as_str())).collect();
    project.file("tasks.toml", &manifest("", &tasks));
    let (code, stderr) = project.dracode(&["run", "tasks.toml", "--out", "out", "--jobs", "1"]);
    assert_eq!(code, 1, "{stderr}");
    let md = project.read("out/summary.md");
    let panicked = "thread 'tests::parses_max' panicked at src/lib.rs:42:9:";
    let with_message = format!("{panicked} assertion `left == right` failed");
    let telling = [
        ("cargo-build", "error[E0308]: mismatched types", "error[E0308]: mismatched types"),
        ("cargo-test", panicked, with_message.as_str()),
        (
            "pytest",
            "FAILED tests/test_parse.py::test_negative - AssertionError: assert -1 == 1",
            "FAILED tests/test_parse.py::test_negative",
        ),
        ("ava", "✘ [fail]: parses numbers Difference (- actual, + expected):", "✘ [fail]: parses numbers Difference"),
    ];
    for (id, in_summary, line) in telling {
        let rows = summary_rows(&md, id);
        assert!(rows.iter().any(|r| r.contains(in_summary)), "{id}: {in_summary}\n{md}");
        // The one-line reason (the FAIL line, JUnit's message, an annotation) names it too.
        let fail = stderr.lines().find(|l| l.contains("FAIL") && l.contains(&format!("] {id} "))).unwrap_or_default();
        assert!(fail.contains(&format!("exited with 1: {line}")), "{id}: {fail}\n{stderr}");
    }
}

#[test]
fn a_rerun_into_its_folder_reports_the_jobs_of_one_run_not_their_sum() {
    let project = Project::new(&[("a.txt", "one\n")]);
    let marker = project.dir.join("marker");
    project.file("idle.json", &writes(&[]));
    let check = format!("check = \"test -f {}\"", marker.display());
    let tasks = [("a", "idle.json", "check = \"true\""), ("b", "idle.json", check.as_str()), ("c", "idle.json", "check = \"true\"")];
    project.file("tasks.toml", &manifest("", &tasks));
    let (code, stderr) = project.dracode(&["run", "tasks.toml", "--out", "out", "--jobs", "3"]);
    assert_eq!(code, 1, "{stderr}");
    std::fs::write(&marker, "").unwrap();
    let (code, stderr) = project.dracode(&["run", "tasks.toml", "--rerun-failed", "out/results.jsonl", "--out", "out", "--jobs", "2"]);
    assert_eq!(code, 0, "{stderr}");
    let all = read_jsonl(&project.dir.join("out/results.jsonl"));
    let started = events(&all, "run.started");
    assert_eq!(started.len(), 1);
    assert_eq!(started[0]["jobs"], 3, "a run and its rerun ran one after the other: the larger --jobs, not the sum");
}
