//! What a new user meets on a first run in their own repository, and on the runs after it: the
//! default `--out` just works, runs do not mix, reruns add up, and a run and its rerun merge.

use crate::support::cli::{dracode, events, finished, git, git_repo, read_jsonl};
use serde_json::json;
use std::path::Path;

/// A recording that writes `<task>.txt`-like file `name` and ends.
fn writes(name: &str) -> serde_json::Value {
    json!([
        {"content": [{"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": name, "content": "x\n"}}], "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
    ])
}

/// A git repository at `repo` holding `tasks.toml` (tasks `ids`, each writing its own file, the
/// task `flaky` checked against `marker`) and its recordings, all committed.
fn repository(repo: &Path, ids: &[&str], marker: &Path) {
    let mut manifest = "[defaults]\nprovider = \"replay\"\n".to_string();
    let mut files = Vec::new();
    for id in ids {
        files.push((format!("rec-{id}.json"), writes(&format!("{id}.txt")).to_string()));
        manifest.push_str(&format!("[[tasks]]\nid = \"{id}\"\nprompt = \"p\"\nreplay = \"rec-{id}.json\"\n"));
        if *id == "flaky" {
            manifest.push_str(&format!("check = \"test -f {}\"\n", marker.display()));
        }
    }
    files.push(("tasks.toml".to_string(), manifest));
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    git_repo(repo, &borrowed);
}

#[test]
fn a_first_run_in_a_fresh_repository_works_with_the_default_out_and_runs_do_not_mix() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    repository(&repo, &["a", "b"], &tmp.path().join("none"));
    let out = dracode(&repo).args(["run", "tasks.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let dir = repo.join("dracode-out");
    assert!(std::fs::read_to_string(dir.join(".gitignore")).unwrap().lines().any(|l| l == "*"));
    assert_eq!(git(&repo, &["status", "--porcelain"]), "", "git ignores the output folder");
    assert!(dir.join("diffs/a.patch").is_file() && dir.join("diffs/b.patch").is_file());
    for file in ["results.jsonl", "junit.xml", "summary.md", "diffs/a.patch", "transcripts/a.json"] {
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(dir.join(file)).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o644, "{file}: every artifact has one mode");
    }

    // A second run replaces the first: b's patch and transcript do not linger.
    let out = dracode(&repo).args(["run", "tasks.toml", "--filter", "a"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dir.join("diffs/a.patch").is_file());
    assert!(!dir.join("diffs/b.patch").exists() && !dir.join("transcripts/b.json").exists());
    assert_eq!(events(&read_jsonl(&dir.join("results.jsonl")), "task.finished").len(), 1);

    // A --jsonl stream the user puts in the folder is theirs: allowed, and left there.
    for _ in 0..2 {
        let out = dracode(&repo).args(["run", "tasks.toml", "--filter", "a", "--jsonl", "dracode-out/stream.jsonl"]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    std::fs::remove_file(dir.join("stream.jsonl")).unwrap();

    // A folder holding a file dracode did not write is refused, the file named, nothing touched.
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let out = dracode(&repo).args(["run", "tasks.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("holds notes.txt, which dracode did not write"), "{stderr}");
    assert!(dir.join("diffs/a.patch").is_file() && dir.join("notes.txt").is_file());
}

/// A rerun into its own folder rewrites the record after its tasks (the add-up) and the page after
/// that: when the page cannot be written, the added-up record says so, as the process does.
#[test]
fn a_rerun_whose_page_cannot_be_written_records_the_exit_code_the_process_gives() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let marker = tmp.path().join("marker");
    repository(&repo, &["a", "flaky"], &marker);
    let out = dracode(&repo).args(["run", "tasks.toml", "--out", "first"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&marker, "").unwrap();
    // The page's history folder is a file: report.html cannot be written.
    let cache = tmp.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("history"), "not a folder").unwrap();
    let cache = cache.to_str().unwrap();
    let out = dracode(&repo)
        .args(["run", "tasks.toml", "--rerun-failed", "first/results.jsonl", "--out", "first", "--cache", cache])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let all = read_jsonl(&repo.join("first/results.jsonl"));
    assert_eq!(events(&all, "task.finished").len(), 2, "the whole batch: {all:?}");
    let last = all.last().unwrap();
    assert_eq!((last["type"].as_str(), last["exit_code"].as_i64()), (Some("run.finished"), Some(3)), "{stderr}");
}

#[test]
fn a_rerun_into_the_same_folder_describes_the_whole_batch_and_merges_with_its_run() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let marker = tmp.path().join("marker");
    repository(&repo, &["a", "flaky", "c"], &marker);
    let out = dracode(&repo).args(["run", "tasks.toml", "--out", "first"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    // Kept aside for the merge below.
    copy_dir(&repo.join("first"), &tmp.path().join("run1"));

    std::fs::write(&marker, "").unwrap();
    let out = dracode(&repo).args(["run", "tasks.toml", "--rerun-failed", "first/results.jsonl", "--out", "first"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("3 task(s), 2 carried over"), "{stderr}");
    let dir = repo.join("first");
    let all = read_jsonl(&dir.join("results.jsonl"));
    assert_eq!(events(&all, "task.finished").len(), 3);
    assert_eq!(finished(&all, "flaky")["status"], "passed");
    assert!(finished(&all, "flaky").get("carried_from").is_none());
    let first_id = read_jsonl(&tmp.path().join("run1/results.jsonl"))[0]["run_id"].clone();
    for id in ["a", "c"] {
        assert_eq!(finished(&all, id)["carried_from"], first_id, "{id}");
        assert!(dir.join(format!("diffs/{id}.patch")).is_file(), "{id}'s patch is kept");
    }
    assert!(dir.join("diffs/flaky.patch").is_file());
    let last = all.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["exit_code"].as_i64(), last["counts"]["passed"].as_i64()),
        (Some("run.finished"), Some(0), Some(3))
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.starts_with("## ✅ dracode: 3 of 3 tasks passed"), "{md}");
    assert!(md.contains("| a | ✅ passed (carried) |"), "{md}");
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), 3, "{junit}");
    assert!(junit.contains("a.carried_from") && !junit.contains("<failure"), "{junit}");

    // An all-green rerun changes nothing and says so.
    let before = std::fs::read(dir.join("results.jsonl")).unwrap();
    let out = dracode(&repo).args(["run", "tasks.toml", "--rerun-failed", "first/results.jsonl", "--out", "first"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("nothing to rerun: every task in first/results.jsonl passed"), "{stderr}");
    assert_eq!(std::fs::read(dir.join("results.jsonl")).unwrap(), before);

    // The first run and a rerun into its own folder merge: the later attempt wins.
    std::fs::remove_file(&marker).unwrap();
    let out = dracode(&repo).args(["run", "tasks.toml", "--rerun-failed", "../run1/results.jsonl", "--out", "../run2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(&marker, "").unwrap();
    let out = dracode(&repo).args(["run", "tasks.toml", "--rerun-failed", "../run2/results.jsonl", "--out", "../run3"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out = dracode(tmp.path()).args(["merge", "run1", "run2", "run3", "--out", "merged"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let all = read_jsonl(&tmp.path().join("merged/results.jsonl"));
    assert_eq!(events(&all, "task.finished").len(), 3, "{all:#?}");
    assert_eq!(finished(&all, "flaky")["status"], "passed");
    assert_eq!(events(&all, "task.started").len(), 3, "the superseded attempts' lines are left out");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_tasks_tags_add_to_the_default_tags() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = "[defaults]\ntags = [\"nightly\"]\nisolation = \"copy\"\n\
        [[tasks]]\nid = \"plain\"\nprompt = \"p\"\n\
        [[tasks]]\nid = \"docs\"\nprompt = \"p\"\ntags = [\"docs\"]\n\
        [[tasks]]\nid = \"both\"\nprompt = \"p\"\ntags = [\"docs\", \"nightly\"]\n";
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    let list = |filter: &str| {
        let out = dracode(tmp.path()).args(["list", "tasks.toml", "--filter", filter]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(list("tag:nightly"), "plain\ndocs\nboth\n");
    assert_eq!(list("tag:docs"), "docs\nboth\n");
    let out = dracode(tmp.path()).args(["list", "tasks.toml", "--format", "json", "--filter", "both"]).output().unwrap();
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["tags"], json!(["nightly", "docs"]), "each tag once, the defaults' first");
}

/// In plain output a long task gets `SLOW` lines with its turns and tokens so far (the
/// threshold shortened by `DRACODE_SLOW_AFTER`), and finished lines say which counter they show.
#[test]
fn a_long_task_gets_slow_lines_in_plain_output() {
    let tmp = tempfile::tempdir().unwrap();
    let usage = json!({"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "requests": 1});
    let rec = json!({"responses": [
        {"content": [{"type": "tool_use", "id": "c1", "name": "run_command", "input": {"command": "sleep 2.6", "shell": true}}],
         "stop_reason": "tool_use", "usage": usage},
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn", "usage": usage}
    ]});
    std::fs::write(tmp.path().join("rec.json"), rec.to_string()).unwrap();
    std::fs::create_dir_all(tmp.path().join("ws")).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n\
        [[tasks]]\nid = \"slow\"\nprompt = \"p\"\n";
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    let out = dracode(tmp.path()).args(["run", "tasks.toml"]).env("CI", "true").env("DRACODE_SLOW_AFTER", "1s").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let slow: Vec<&str> = stderr.lines().filter(|l| l.trim_start().starts_with("SLOW")).collect();
    assert_eq!(slow.len(), 1, "one line at 1s, the next due at 6s: {stderr}");
    // The times are read, not matched to a digit: a loaded machine runs late, never early.
    let seconds = |text: &str| text.trim_end_matches('s').parse::<f64>().unwrap_or(-1.0);
    let running = slow[0].strip_prefix("   SLOW  [1/1] slow  running ").and_then(|rest| rest.strip_suffix("  1 turn  15 tok  $0 so far"));
    assert!(running.is_some_and(|t| seconds(t) >= 1.0), "{stderr}");
    let pass = stderr.lines().find_map(|l| l.strip_prefix("   PASS  [1/1] slow  (1/1 done)  2 turns  30 tok  $0  "));
    assert!(pass.is_some_and(|t| seconds(t) >= 2.6), "{stderr}");
    // Without the knob, no SLOW line before 60 s.
    let out = dracode(tmp.path()).args(["run", "tasks.toml"]).env("CI", "true").output().unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("SLOW"));
}

/// The agent's own `git commit` in a worktree task: the task's repository has the user's
/// identity from their repository's local config, or dracode's default without one.
#[test]
fn the_agents_git_commit_works_in_a_worktree_task() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    git_repo(&repo, &[("a.txt", "one\n")]);
    git(&repo, &["config", "user.name", "Local Name"]);
    git(&repo, &["config", "user.email", "local@example.com"]);
    let command = "echo two > a.txt && git commit -qam x && git log -1 --format='author=%an <%ae>'";
    let rec = json!([
        {"content": [{"type": "tool_use", "id": "c1", "name": "run_command", "input": {"command": command, "shell": true}}], "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "committed"}], "stop_reason": "end_turn"}
    ]);
    std::fs::write(tmp.path().join("rec.json"), rec.to_string()).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"repo\"\nisolation = \"worktree\"\n\
        [[tasks]]\nid = \"commits\"\nprompt = \"p\"\n";
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    let output_of = |out: &str| {
        let all = read_jsonl(&tmp.path().join(out).join("results.jsonl"));
        let tool = events(&all, "tool.completed")[0].clone();
        (finished(&all, "commits")["status"].clone(), tool["output"].as_str().unwrap_or_default().to_string())
    };
    let out = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (status, output) = output_of("out");
    assert_eq!(status, "passed");
    assert!(output.contains("author=Local Name <local@example.com>"), "{output}");

    // Without any identity: dracode's documented default.
    git(&repo, &["config", "--unset", "user.name"]);
    git(&repo, &["config", "--unset", "user.email"]);
    let out = dracode(tmp.path()).args(["run", "tasks.toml", "--out", "out2"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(output_of("out2").1.contains("author=dracode-agent <dracode@localhost>"));
}

/// Rough edges a new user met: a flag's error names the flag once; no panic on a closed pipe;
/// `run --help` speaks the user's language; no escape codes in a log; summary.md gives one
/// reason per task, with paths as in the repository.
#[test]
fn a_typo_in_provider_is_reported_once_naming_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let mut manifest = "[defaults]\nisolation = \"copy\"\n".to_string();
    for i in 1..=6 {
        manifest.push_str(&format!("[[tasks]]\nid = \"t{i}\"\nprompt = \"p\"\n"));
    }
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    let out = dracode(tmp.path()).args(["run", "tasks.toml", "--provider", "opneai"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: --provider opneai: unknown provider \"opneai\" (did you mean \"openai\"?)"), "{stderr}");
}

#[test]
fn no_command_panics_on_a_closed_pipe() {
    let tmp = tempfile::tempdir().unwrap();
    // More output than a pipe holds, so the writer meets the closed end.
    let mut manifest = "[defaults]\nisolation = \"copy\"\nprovider = \"replay\"\n".to_string();
    for i in 1..=1500 {
        manifest.push_str(&format!("[[tasks]]\nid = \"task-with-a-long-name-{i}\"\nprompt = \"p\"\n"));
    }
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    let runs: [&[&str]; 5] = [
        &["run", "tasks.toml", "--dry-run", "--offline"],
        &["list", "tasks.toml", "--format", "json"],
        &["schema", "manifest"],
        &["tools"],
        &["providers"],
    ];
    for args in runs {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dracode"))
            .args(args)
            .current_dir(tmp.path())
            .env("HOME", tmp.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked") && out.status.code() != Some(101), "{args:?}: {:?} {stderr}", out.status);
    }
}

#[test]
fn run_help_has_no_source_references_or_promises() {
    let tmp = tempfile::tempdir().unwrap();
    let out = dracode(tmp.path()).args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for bad in ["crate::", "[`", "today's", "extra writable"] {
        assert!(!help.contains(bad), "run --help shows {bad:?}:\n{help}");
    }
    assert!(help.contains("by default (and with 0) the number of CPUs"), "{help}");
}

#[test]
fn a_log_gets_no_escape_codes_and_summary_md_one_reason_with_repository_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let rec = json!([{"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}]);
    std::fs::write(tmp.path().join("rec.json"), rec.to_string()).unwrap();
    std::fs::create_dir_all(tmp.path().join("ws/tests")).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"ws\"\nisolation = \"copy\"\n\
        [[tasks]]\nid = \"red\"\nprompt = \"p\"\ncheck = \"echo \\\"$PWD/tests/test_calc.py:3: AssertionError\\\"; exit 1\"\n";
    std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
    // A warning from the log (an OpenTelemetry endpoint nobody listens on), into a pipe.
    let out = dracode(tmp.path()).args(["run", "tasks.toml", "--otlp-endpoint", "http://127.0.0.1:9"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("WARN") && !stderr.contains('\x1b'), "{stderr:?}");
    let md = std::fs::read_to_string(tmp.path().join("dracode-out/summary.md")).unwrap();
    let row = md.lines().find(|l| l.starts_with("| red | failed |")).unwrap_or_else(|| panic!("{md}"));
    assert_eq!(row.matches("check").count(), 1, "one reason: {row}");
    assert!(row.contains("tests/test\\_calc.py:3: AssertionError") && !row.contains("dracode-workspace"), "{row}");
}

/// A shard's rerun into its own folder stays that shard's, so the split still merges.
#[test]
fn a_shards_rerun_into_its_folder_stays_that_shard_and_the_split_merges() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let marker = tmp.path().join("marker");
    repository(&repo, &["a", "flaky", "c", "d"], &marker);
    for k in 1..=2 {
        let (shard, out) = (format!("{k}/2"), format!("out-{k}"));
        dracode(&repo).args(["run", "tasks.toml", "--shard", &shard, "--out", &out]).output().unwrap();
    }
    std::fs::write(&marker, "").unwrap();
    // A task's shard is decided over every task of the manifest, whatever a rerun selects: rerun the one holding `flaky`.
    let holds_flaky =
        |k: &u32| std::fs::read_to_string(repo.join(format!("out-{k}/results.jsonl"))).unwrap().contains("\"task_id\":\"flaky\"");
    let k = (1..=2).find(holds_flaky).unwrap();
    let (shard, dir) = (format!("{k}/2"), format!("out-{k}"));
    let results = format!("{dir}/results.jsonl");
    let out = dracode(&repo).args(["run", "tasks.toml", "--shard", &shard, "--rerun-failed", &results, "--out", &dir]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let all = read_jsonl(&repo.join(&results));
    assert_eq!(all[0]["shard"], shard.as_str());
    assert_eq!(finished(&all, "flaky")["status"], "passed");
    let out = dracode(&repo).args(["merge", "out-1", "out-2", "--out", "merged"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(events(&read_jsonl(&repo.join("merged/results.jsonl")), "task.finished").len(), 4);
}

#[test]
fn a_rerun_that_fixes_the_task_that_could_not_be_judged_leaves_a_green_batch() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().canonicalize().unwrap().join("repo");
    repository(&repo, &["good", "broken"], Path::new("/nonexistent"));
    // The recording of `broken` is cut short: the provider answers nothing (kind bad_response, 5).
    std::fs::write(repo.join("rec-broken.json"), "[]").unwrap();
    let first = dracode(&repo).args(["run", "tasks.toml"]).output().unwrap();
    assert_eq!(first.status.code(), Some(5), "{}", String::from_utf8_lossy(&first.stderr));
    std::fs::write(repo.join("rec-broken.json"), writes("broken.txt").to_string()).unwrap();
    let rerun = dracode(&repo).args(["run", "tasks.toml", "--rerun-failed", "dracode-out/results.jsonl"]).output().unwrap();
    assert_eq!(rerun.status.code(), Some(0), "{}", String::from_utf8_lossy(&rerun.stderr));
    let summary = std::fs::read_to_string(repo.join("dracode-out/summary.md")).unwrap();
    assert!(summary.starts_with("## ✅ dracode: 2 of 2 tasks passed"), "{summary}");
    let all = read_jsonl(&repo.join("dracode-out/results.jsonl"));
    assert_eq!(events(&all, "run.finished").last().unwrap()["exit_code"], 0);
}
