//! `report.html` through the binary: every run, merge and `dracode report OUT` writes it; its
//! embedded data (`report-data`) draws the folder it sits in, with `--history` and `--cache`
//! the earlier runs; bad folders are usage errors (exit 2).

use crate::support::cli::{crate_root, dracode, events, finished, git_repo, read_jsonl};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// The `report-data` JSON embedded in the page at `path`.
fn report_data(path: &Path) -> Value {
    let page = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let open = "<script type=\"application/json\" id=\"report-data\">";
    let start = page.find(open).unwrap_or_else(|| panic!("no report-data in {}", path.display())) + open.len();
    let end = start + page[start..].find("</script>").expect("report-data is closed");
    serde_json::from_str(&page[start..end]).unwrap_or_else(|e| panic!("report-data is not JSON: {e}"))
}

/// The `run_id` of the run in `out`.
fn run_id(out: &Path) -> String {
    read_jsonl(&out.join("results.jsonl"))[0]["run_id"].as_str().unwrap().to_string()
}

/// The ids and statuses of the page's tasks, in its order.
fn task_statuses(data: &Value) -> Vec<(String, String)> {
    let tasks = data["tasks"].as_array().unwrap();
    tasks.iter().map(|t| (t["id"].as_str().unwrap().to_string(), t["status"].as_str().unwrap().to_string())).collect()
}

/// `dracode run examples/quickstart.toml --out OUT` with `extra`, from `cwd`; must exit 0.
fn quickstart(cwd: &Path, out: &Path, extra: &[&str]) {
    let manifest = crate_root().join("examples/quickstart.toml");
    let output = dracode(cwd).arg("run").arg(&manifest).arg("--out").arg(out).args(extra).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
}

/// `dracode report ARGS` from `cwd`: its exit code and stderr.
fn report(cwd: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = dracode(cwd).arg("report").args(args).output().unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn a_run_writes_report_html_and_dracode_report_writes_it_again() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    quickstart(tmp.path(), &out, &[]);
    let page = out.join("report.html");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&page).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o644, "readable by all, as every artifact");
    let data = report_data(&page);
    assert_eq!(data["kind"], "run");
    assert_eq!(data["run"]["run_id"], run_id(&out).as_str());
    assert_eq!(task_statuses(&data), [("fix-greeting".into(), "passed".into()), ("add-readme".into(), "passed".into())]);
    assert_eq!((data["counts"]["passed"].as_u64(), data["counts"]["total"].as_u64()), (Some(2), Some(2)));
    assert!(data["run"]["finished_at"].is_string() && data["run"]["exit_code"] == 0, "{}", data["run"]);

    // The folder with its page is still dracode's own: a second run into it is accepted.
    quickstart(tmp.path(), &out, &[]);
    assert_ne!(report_data(&page)["run"]["run_id"], data["run"]["run_id"], "the page draws the new run");

    std::fs::remove_file(&page).unwrap();
    let (code, stderr) = report(tmp.path(), &["out"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains(&format!("wrote {}", Path::new("out").join("report.html").display())), "{stderr}");
    assert_eq!(report_data(&page)["run"]["run_id"], run_id(&out).as_str());
    assert!(
        std::fs::read_dir(&out).unwrap().flatten().all(|e| !e.file_name().to_string_lossy().starts_with(".tmp")),
        "no temporary file left"
    );
}

#[test]
fn dracode_report_refuses_a_folder_that_is_not_an_output_folder() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    let (code, stderr) = report(tmp.path(), &["empty"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("empty: not the output folder of a dracode run (no results.jsonl)"), "{stderr}");
    assert!(!tmp.path().join("empty/report.html").exists());

    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let started = json!({"type": "run.started", "schema_version": 1, "seq": 1, "ts": "2026-01-01T00:00:00.000Z",
        "run_id": "r1", "version": "0", "manifests": ["t.toml"], "task_count": 0, "jobs": 1});
    std::fs::write(out.join("results.jsonl"), format!("{started}\n{{\"type\": 1}}\n")).unwrap();
    let (code, stderr) = report(tmp.path(), &["out"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("{}:2: not a dracode event", Path::new("out").join("results.jsonl").display())), "{stderr}");

    std::fs::write(out.join("results.jsonl"), format!("{started}\n")).unwrap();
    std::fs::write(tmp.path().join("empty/notes.txt"), "mine").unwrap();
    let (code, stderr) = report(tmp.path(), &["out", "--history", "empty"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--history empty: neither an output folder"), "{stderr}");
    assert!(!out.join("report.html").exists(), "no page from a bad --history");

    // A page that cannot be written (a folder in its place) is an artifact failure, exit 3.
    std::fs::create_dir_all(out.join("report.html/x")).unwrap();
    let (code, stderr) = report(tmp.path(), &["out"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("cannot write") && stderr.contains("report.html"), "{stderr}");
}

/// A recording that writes `name` and ends.
fn writes(name: &str) -> Value {
    json!([
        {"content": [{"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": name, "content": "x\n"}}], "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
    ])
}

/// A repository at `repo` whose `tasks.toml` has tasks `ids`, each writing its own file; `extra`
/// is added to every task's table.
fn repository(repo: &Path, ids: &[&str], extra: &str) {
    let mut manifest = "[defaults]\nprovider = \"replay\"\n".to_string();
    let mut files = Vec::new();
    for id in ids {
        files.push((format!("rec-{id}.json"), writes(&format!("{id}.txt")).to_string()));
        manifest.push_str(&format!("[[tasks]]\nid = \"{id}\"\nprompt = \"p\"\nreplay = \"rec-{id}.json\"\n{extra}"));
    }
    files.push(("tasks.toml".to_string(), manifest));
    let borrowed: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    git_repo(repo, &borrowed);
}

#[test]
fn merge_writes_one_report_of_both_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    repository(&repo, &["a", "b", "c", "d"], "");
    for k in 1..=2 {
        let output =
            dracode(&repo).args(["run", "tasks.toml", "--shard", &format!("slice:{k}/2"), "--out", &format!("out-{k}")]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(report_data(&repo.join(format!("out-{k}/report.html")))["tasks"].as_array().unwrap().len(), 2);
    }
    let output = dracode(&repo).args(["merge", "out-1", "out-2", "--out", "merged"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let data = report_data(&repo.join("merged/report.html"));
    assert_eq!(data["kind"], "merged");
    let shards: Vec<(&str, u64)> =
        data["run"]["shards"].as_array().unwrap().iter().map(|s| (s["dir"].as_str().unwrap(), s["task_count"].as_u64().unwrap())).collect();
    assert_eq!(shards, [("out-1", 2), ("out-2", 2)]);
    let ids: Vec<String> = task_statuses(&data).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
    assert_eq!(data["counts"]["passed"], 4);
    assert_eq!(data["run"]["run_id"], run_id(&repo.join("merged")).as_str());
}

#[test]
fn cache_runs_leave_their_history_and_the_next_report_shows_it() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let cache_arg = cache.to_str().unwrap();
    quickstart(tmp.path(), &tmp.path().join("out1"), &["--cache", cache_arg]);
    let first = run_id(&tmp.path().join("out1"));
    let record: Value = serde_json::from_str(&std::fs::read_to_string(cache.join(format!("history/{first}.json"))).unwrap()).unwrap();
    assert_eq!(record["run_id"], first.as_str());
    assert_eq!(record["tasks"]["fix-greeting"]["status"], "passed");

    quickstart(tmp.path(), &tmp.path().join("out2"), &["--cache", cache_arg]);
    let second = run_id(&tmp.path().join("out2"));
    let data = report_data(&tmp.path().join("out2/report.html"));
    let past: Vec<&str> = data["history"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(past, [first.as_str()], "the first run, not this one");
    let task = &data["tasks"][0];
    assert_eq!((task["id"].as_str(), task["cached"].as_bool()), (Some("fix-greeting"), Some(true)));
    let cost = &record["tasks"]["fix-greeting"]["cost_usd"];
    assert_eq!(task["history"], json!([{"status": "passed", "group": "passed", "cost_usd": cost, "protected_refused": 0}]));
    assert!(cache.join(format!("history/{second}.json")).is_file());

    // `dracode report --history` reads the cache folder, and an earlier output folder, alike.
    let (code, stderr) = report(tmp.path(), &["out2", "--history", "out1", "--history", cache_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    let data = report_data(&tmp.path().join("out2/report.html"));
    let past: Vec<&str> = data["history"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(past, [first.as_str()], "one entry per run, this one left out");
}

#[test]
fn an_interrupted_run_still_writes_its_report() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    repository(&repo, &["quick"], "");
    let manifest = std::fs::read_to_string(repo.join("tasks.toml")).unwrap();
    std::fs::write(repo.join("rec-slow.json"), writes("slow.txt").to_string()).unwrap();
    let slow = "[[tasks]]\nid = \"slow\"\nprompt = \"p\"\nreplay = \"rec-slow.json\"\ncheck = \"sleep 60\"\n";
    std::fs::write(repo.join("tasks.toml"), format!("{manifest}{slow}")).unwrap();
    let out = tmp.path().join("out");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dracode"))
        .current_dir(&repo)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", tmp.path())
        .args(["run", "tasks.toml", "--jobs", "1", "--out"])
        .arg(&out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Interrupt once `quick` is done and `slow` (its check sleeping a minute) has begun.
    let deadline = Instant::now() + Duration::from_secs(30);
    let ready = || {
        std::fs::read_to_string(out.join("results.jsonl"))
            .is_ok_and(|t| t.lines().any(|l| l.contains("\"task.started\"") && l.contains("\"task_id\":\"slow\"")))
    };
    while !ready() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ready(), "the slow task started");
    let kill = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let all = read_jsonl(&out.join("results.jsonl"));
    let slow = finished(&all, "slow");
    assert_eq!(slow["status"], "cancelled", "the interrupt stops the check: {slow}");
    assert_eq!((&slow["check"]["exit_code"], &slow["error"]["kind"]), (&Value::Null, &json!("cancelled")), "{slow}");
    assert_eq!(events(&all, "run.finished").len(), 1, "an interrupt still ends the record");
    let data = report_data(&out.join("report.html"));
    assert_eq!(task_statuses(&data), [("quick".into(), "passed".into()), ("slow".into(), "cancelled".into())]);
    assert_eq!(data["run"]["exit_code"], 130);
    assert!(data["run"]["finished_at"].is_string(), "{}", data["run"]);
    assert_eq!(data["tasks"][1]["group"], "not_judged", "a cancelled task says nothing of the agent's work");
    assert_eq!((&data["counts"]["failed"], &data["counts"]["not_judged"]), (&json!(0), &json!(1)), "{}", data["counts"]);
}
