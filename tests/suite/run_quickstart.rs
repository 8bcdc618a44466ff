//! The README's first command: the bundled example, offline, end to end.

use crate::support::cli::{crate_root, dracode, events, finished, git, read_jsonl};

#[test]
fn the_bundled_example_passes_offline_and_writes_every_artifact() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let manifest = crate_root().join("examples/quickstart.toml");
    let assert = dracode(tmp.path()).args(["run"]).arg(&manifest).arg("--out").arg(&out).assert();
    let output = assert.get_output().clone();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(stderr.contains("fix-greeting") && stderr.contains("add-readme"), "progress per task on stderr:\n{stderr}");

    for file in [
        "results.jsonl",
        "junit.xml",
        "summary.md",
        "transcripts/fix-greeting.json",
        "transcripts/add-readme.json",
        "diffs/fix-greeting.patch",
        "diffs/add-readme.patch",
    ] {
        assert!(out.join(file).is_file(), "missing {file}");
    }

    let all = read_jsonl(&out.join("results.jsonl"));
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=all.len() as u64).collect::<Vec<_>>(), "seq increases by one per line");
    assert_eq!(all.first().unwrap()["type"], "run.started");
    assert_eq!(all.last().unwrap()["type"], "run.finished");
    assert_eq!(events(&all, "task.finished").len(), 2, "exactly one task.finished per task");

    let fix = finished(&all, "fix-greeting");
    assert_eq!(fix["status"], "passed");
    assert_eq!(fix["is_error"], false);
    assert_eq!(fix["num_turns"], 3);
    assert_eq!(fix["check"]["exit_code"], 0);
    // The recording's usage, summed exactly: 1210+1395+1530 in, 64+71+38 out.
    assert_eq!(fix["usage"]["input_tokens"], 4135);
    assert_eq!(fix["usage"]["output_tokens"], 173);
    assert_eq!(fix["usage"]["cached_input_tokens"], 2432);
    assert_eq!(fix["usage"]["requests"], 3);
    assert_eq!(fix["diff_path"], "diffs/fix-greeting.patch");
    let project = crate_root().join("examples/quickstart/project");
    let prefix = crate::support::cli::repo_prefix(&project);
    assert_eq!(fix["files_changed"], serde_json::json!([format!("{prefix}greet.sh")]), "rooted at the repository's root");
    let run = all.last().unwrap();
    assert_eq!(run["exit_code"], 0);
    assert_eq!(run["counts"]["passed"], 2);
    assert_eq!(
        run["usage"]["total_tokens"].as_u64().unwrap(),
        fix["usage"]["total_tokens"].as_u64().unwrap() + finished(&all, "add-readme")["usage"]["total_tokens"].as_u64().unwrap()
    );

    // The patches reproduce the changes on a pristine copy of the project, applied at the root
    // of a repository where the project lies where it lies in this one.
    let root = tmp.path().join("pristine");
    let pristine = root.join(&prefix);
    std::fs::create_dir_all(&pristine).unwrap();
    for name in ["greet.sh", "test.sh"] {
        std::fs::copy(project.join(name), pristine.join(name)).unwrap();
    }
    git(&root, &["init", "-q"]);
    for patch in ["fix-greeting", "add-readme"] {
        let path = out.join(format!("diffs/{patch}.patch"));
        git(&root, &["apply", "--check", path.to_str().unwrap()]);
        git(&root, &["apply", path.to_str().unwrap()]);
    }
    let test = std::process::Command::new("sh").arg("test.sh").current_dir(&pristine).output().unwrap();
    assert!(test.status.success(), "the fixed project passes its test");
    assert!(pristine.join("README.md").is_file());

    // Copy isolation: the example itself is untouched.
    let greet = std::fs::read_to_string(project.join("greet.sh")).unwrap();
    assert!(greet.contains("Helo,"), "examples/quickstart/project was modified");
    assert!(!project.join("README.md").exists());

    // The transcript has the whole conversation, tool results included.
    let transcript: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("transcripts/fix-greeting.json")).unwrap()).unwrap();
    let text = transcript.to_string();
    assert!(text.contains("FAIL: expected 'Hello, Ada!'"), "the red test run is in the transcript");
    assert!(text.contains("ok: Hello, Ada!"), "the green test run is in the transcript");
}

#[test]
fn dry_run_resolves_everything_and_calls_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = crate_root().join("examples/quickstart.toml");
    let out = dracode(tmp.path()).args(["run", "--dry-run"]).arg(&manifest).assert().success().get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("fix-greeting") && out.contains("provider=replay") && out.contains("ready"), "{out}");
    // The example sets `timeout = "2m"`; `idle_timeout` takes the default.
    assert!(out.lines().all(|l| l.contains(" timeout=2m idle_timeout=5m\t")), "{out}");
    assert!(!tmp.path().join("dracode-out").exists(), "a dry run writes no artifacts");
}

/// The run's last file, `report.html` and its record in the cache, cannot be written (the
/// cache's `history` is a file): the process exits 3, and the record says 3 too — its
/// `run.finished` is written after the page (it said 0 while the process exited 3).
#[test]
fn a_page_that_cannot_be_written_leaves_the_same_exit_code_in_the_record_as_the_process() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, cache) = (tmp.path().join("out"), tmp.path().join("cache"));
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("history"), "not a folder").unwrap();
    let manifest = crate_root().join("examples/quickstart.toml");
    let output = dracode(tmp.path()).args(["run", "-q"]).arg(&manifest).arg("--out").arg(&out).arg("--cache").arg(&cache).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "stderr:\n{stderr}");
    assert!(stderr.contains("history"), "the failure is named:\n{stderr}");
    let all = read_jsonl(&out.join("results.jsonl"));
    let run = all.last().unwrap();
    assert_eq!((run["type"].as_str(), run["exit_code"].as_i64()), (Some("run.finished"), Some(3)), "the record's exit code");
    assert_eq!(run["counts"]["passed"], 2, "the tasks themselves passed");
}
