//! Nightly batches (issue 21): `dracode combine` builds the union of a run's patches and names
//! the ones that conflict, `dracode regrade` checks recorded patches again without a model, and
//! `--cache` skips a task whose inputs match a recorded pass.

use crate::support::cli::{dracode, finished, git, git_repo, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A project folder: `repo/` (a git repository with `files`), a TMPDIR of its own (to see
/// what is left behind) and the recordings tasks replay.
struct Project {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    repo: PathBuf,
    tmpdir: PathBuf,
}

impl Project {
    fn new(files: &[(&str, &str)]) -> Project {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let repo = dir.join("repo");
        git_repo(&repo, files);
        let tmpdir = dir.join("tmp");
        std::fs::create_dir(&tmpdir).unwrap();
        Project { _tmp: tmp, dir, repo, tmpdir }
    }

    /// A recording whose model writes `content` to `file` and says "done".
    fn writer(&self, name: &str, file: &str, content: &str) {
        let turns = json!([
            {"content": [{"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": file, "content": content}}], "stop_reason": "tool_use"},
            {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}
        ]);
        std::fs::write(self.dir.join(name), turns.to_string()).unwrap();
    }

    /// `dracode args…` in the project folder, its own TMPDIR; (exit code, stderr).
    fn dracode(&self, args: &[&str]) -> (i32, String) {
        let out = dracode(&self.dir).env("TMPDIR", &self.tmpdir).args(args).output().unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// [`Project::dracode`] with the mock provider's key set.
    fn dracode_with_key(&self, args: &[&str]) -> (i32, String) {
        let out = dracode(&self.dir).env("OPENAI_API_KEY", KEY).env("TMPDIR", &self.tmpdir).args(args).output().unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    /// Folders dracode left in its TMPDIR.
    fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(&self.tmpdir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()
    }
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Three tasks: `first` and `second` both rewrite `a.txt`, `third` writes `b.txt`.
const THREE_TASKS: &str = "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\ncheck = \"true\"\n\
    [[tasks]]\nid = \"first\"\nprompt = \"p\"\nreplay = \"first.json\"\n\
    [[tasks]]\nid = \"second\"\nprompt = \"p\"\nreplay = \"second.json\"\n\
    [[tasks]]\nid = \"third\"\nprompt = \"p\"\nreplay = \"third.json\"\n";

fn three_task_run() -> Project {
    let project = Project::new(&[("a.txt", "one\n"), ("b.txt", "b\n")]);
    project.writer("first.json", "a.txt", "ONE\n");
    project.writer("second.json", "a.txt", "uno\n");
    project.writer("third.json", "b.txt", "B\n");
    std::fs::write(project.dir.join("tasks.toml"), THREE_TASKS).unwrap();
    let (code, stderr) = project.dracode(&["run", "tasks.toml", "--out", "out"]);
    assert_eq!(code, 0, "{stderr}");
    project
}

#[test]
fn combine_applies_the_patches_in_order_names_the_conflict_checks_the_union_and_makes_the_branch() {
    let project = three_task_run();
    let summary = std::fs::read_to_string(project.dir.join("out/summary.md")).unwrap();
    assert!(summary.contains("### Patches that touch the same files"), "{summary}");
    assert!(summary.contains("| a.txt | first, second |"), "{summary}");
    let branches = |p: &Project| git(&p.repo, &["branch", "--list", "--format=%(refname:short)"]);
    assert_eq!(branches(&project), "main\n");

    let check = "grep -qx ONE a.txt && grep -qx B b.txt";
    let (code, stderr) = project.dracode(&["combine", "out", "--repo", "repo", "--check", check, "--branch", "dracode/nightly"]);
    assert_eq!(code, 1, "a conflict is exit 1: {stderr}");
    let report = read_json(&project.dir.join("out/combine.json"));
    assert_eq!(report["applied"], json!(["first", "third"]));
    assert_eq!(report["conflicts"].as_array().unwrap().len(), 1, "{report}");
    let conflict = &report["conflicts"][0];
    assert_eq!(conflict["task_id"], "second");
    assert_eq!(conflict["files"], json!(["a.txt"]));
    assert_eq!(conflict["with"], json!(["first"]));
    assert_eq!(report["check"]["exit_code"], 0, "the union's check ran and passed: {report}");
    assert_eq!(report["files_changed"], json!(["a.txt", "b.txt"]));
    let md = std::fs::read_to_string(project.dir.join("out/combine.md")).unwrap();
    assert!(md.contains("| `second` | `a.txt` | `first` |"), "{md}");
    assert!(stderr.contains("`second`"), "{stderr}");

    // The union, as a patch and as a branch whose parent is the base.
    let patch = std::fs::read_to_string(project.dir.join("out/combined.patch")).unwrap();
    assert!(patch.contains("+ONE") && patch.contains("+B") && !patch.contains("+uno"), "{patch}");
    assert_eq!(git(&project.repo, &["show", "dracode/nightly:a.txt"]), "ONE\n");
    assert_eq!(git(&project.repo, &["show", "dracode/nightly:b.txt"]), "B\n");
    assert_eq!(git(&project.repo, &["rev-parse", "dracode/nightly~1"]), git(&project.repo, &["rev-parse", "main"]));
    assert_eq!(report["branch"]["name"], "dracode/nightly");

    // Nothing else was written to the repository, and no working tree is left.
    assert_eq!(git(&project.repo, &["status", "--porcelain"]), "");
    assert_eq!(branches(&project), "dracode/nightly\nmain\n");
    assert_eq!(git(&project.repo, &["worktree", "list"]).lines().count(), 1);
    assert_eq!(project.leftovers(), Vec::<String>::new());

    // An existing branch is refused (exit 2) unless --force.
    let (code, stderr) = project.dracode(&["combine", "out", "--repo", "repo", "--branch", "dracode/nightly"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("branch \"dracode/nightly\" exists already"), "{stderr}");
    let (code, stderr) = project.dracode(&["combine", "out", "--repo", "repo", "--branch", "dracode/nightly", "--force"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(git(&project.repo, &["show", "dracode/nightly:a.txt"]), "ONE\n");
}

#[test]
fn combine_without_conflicts_and_a_failing_check_on_the_union_is_exit_1_and_makes_no_branch() {
    let project = three_task_run();
    let (code, stderr) = project.dracode(&["combine", "out", "--repo", "repo", "--check", "grep -qx uno a.txt", "--branch", "nope"]);
    assert_eq!(code, 1, "{stderr}");
    let report = read_json(&project.dir.join("out/combine.json"));
    assert_eq!(report["check"]["exit_code"], 1);
    assert!(report["branch"].is_null());
    assert!(git(&project.repo, &["branch", "--list", "nope"]).is_empty(), "no branch for a union that failed its check");
    assert_eq!(project.leftovers(), Vec::<String>::new());

    // Only the tasks that combine, the check passing: exit 0.
    let (code, stderr) = project.dracode(&["run", "tasks.toml", "--out", "two", "--filter", "first", "--filter", "third"]);
    assert_eq!(code, 0, "{stderr}");
    // The union's check is confined like a task's: it cannot write outside its working tree.
    let escaped = project.dir.join("escaped.txt");
    let check = format!("echo x > {}; grep -qx B b.txt", escaped.display());
    let (code, stderr) = project.dracode(&["combine", "two", "--repo", "repo", "--base", "main", "--check", &check]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!escaped.exists(), "the check wrote outside its working tree");
    assert_eq!(read_json(&project.dir.join("two/combine.json"))["applied"], json!(["first", "third"]));
    let (code, stderr) = project.dracode(&["combine", "no-such-folder", "--repo", "repo"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no-such-folder/results.jsonl"), "{stderr}");
}

const KEY: &str = "sk-test-0123456789abcdef";

/// `dracode.toml` declaring `mock` (OpenAI wire) on `server`, plus `extra`.
fn mock_config(project: &Project, server: &OpenAiServer, extra: &str) {
    let config = format!(
        "provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"{}\"\nmodel = \"gpt-4o\"\n{extra}",
        server.base_url()
    );
    std::fs::write(project.dir.join("dracode.toml"), config).unwrap();
}

/// `bump` rewrites `a.txt` and passes its check; `red` answers at once and fails its check.
fn cache_tasks(prompt: &str) -> String {
    format!(
        "[defaults]\nrepo = \"repo\"\n[[tasks]]\nid = \"bump\"\nprompt = \"{prompt}\"\ncheck = \"grep -qx two a.txt\"\n\
         [[tasks]]\nid = \"red\"\nprompt = \"p\"\ncheck = \"false\"\n"
    )
}

fn write_a() -> ScriptedReply {
    ScriptedReply::tool_call("call_1", "write_file", json!({"file_path": "a.txt", "content": "two\n"}), Tokens::new(100, 20))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cached_pass_sends_no_request_and_reports_the_earlier_result_and_a_changed_prompt_misses() {
    let project = Project::new(&[("a.txt", "one\n")]);
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![
            // Run 1: bump, then red.
            write_a(),
            ScriptedReply::text("Bumped.", Tokens::new(150, 10)),
            ScriptedReply::text("no", Tokens::new(5, 1)),
            // Run 2: red only (a failure is never cached).
            ScriptedReply::text("no", Tokens::new(5, 1)),
            // Run 3: bump with a new prompt.
            write_a(),
            ScriptedReply::text("Bumped again.", Tokens::new(150, 10)),
        ],
    )
    .await;
    mock_config(&project, &server, "");
    std::fs::write(project.dir.join("tasks.toml"), cache_tasks("Bump a.txt")).unwrap();
    let run = |out: &str, extra: &[&str]| {
        let mut args = vec!["run", "tasks.toml", "--jobs", "1", "--out", out];
        args.extend_from_slice(extra);
        let output = dracode(&project.dir).env("OPENAI_API_KEY", KEY).env("TMPDIR", &project.tmpdir).args(&args).output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let (code, stderr) = run("out1", &["--cache", "cache"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(server.requests().len(), 3);
    let first = read_jsonl(&project.dir.join("out1/results.jsonl"));
    assert_eq!(finished(&first, "bump")["status"], "passed");
    assert!(finished(&first, "bump").get("cached").is_none());

    // The same inputs, the cache named by the config: bump is not run again.
    mock_config(&project, &server, "[run]\ncache = \"cache\"\n");
    let (code, stderr) = run("out2", &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(server.requests().len(), 4, "only red's request: bump sent none");
    let run_id = first[0]["run_id"].as_str().unwrap();
    assert!(stderr.contains(&format!("cached (run {run_id})")), "the progress line says so: {stderr}");
    let second = read_jsonl(&project.dir.join("out2/results.jsonl"));
    let bump = finished(&second, "bump");
    assert_eq!(bump["status"], "passed");
    assert_eq!(bump["cached"], true);
    assert_eq!(bump["usage"]["total_tokens"], 0);
    assert_eq!(bump["total_cost_usd"], 0.0);
    assert_eq!(bump["cached_from"]["run_id"], first[0]["run_id"]);
    assert_eq!(bump["cached_from"]["usage"], finished(&first, "bump")["usage"], "the original's figures are kept");
    assert_eq!(bump["files_changed"], json!(["a.txt"]));
    assert_eq!(bump["check"]["exit_code"], 0);
    let patch = std::fs::read_to_string(project.dir.join("out2/diffs/bump.patch")).unwrap();
    assert_eq!(patch, std::fs::read_to_string(project.dir.join("out1/diffs/bump.patch")).unwrap());
    let started = second.iter().find(|e| e["type"] == "task.started" && e["task_id"] == "bump").unwrap();
    assert_eq!(started["base_commit"], git(&project.repo, &["rev-parse", "main"]).trim(), "the base the reused patch applies to");
    assert_eq!(finished(&second, "red")["status"], "failed");
    assert!(finished(&second, "red").get("cached").is_none(), "a failed task is never cached");
    let summary = std::fs::read_to_string(project.dir.join("out2/summary.md")).unwrap();
    assert!(summary.contains("passed (cached)") && summary.contains("### Reused from the cache"), "{summary}");
    let junit = std::fs::read_to_string(project.dir.join("out2/junit.xml")).unwrap();
    assert!(junit.contains(&format!("name=\"bump.cached_from\" value=\"{run_id}\"")), "{junit}");

    // A changed prompt misses the cache.
    std::fs::write(project.dir.join("tasks.toml"), cache_tasks("Bump a.txt, please")).unwrap();
    let (code, stderr) = run("out3", &["--filter", "bump"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(server.requests().len(), 6);
    let third = read_jsonl(&project.dir.join("out3/results.jsonl"));
    assert!(finished(&third, "bump").get("cached").is_none());
    // --no-cache runs it even though it is cached now.
    let (code, _) = run("out4", &["--filter", "bump", "--no-cache"]);
    assert_eq!(code, Some(5), "the server has no reply left: the task ran and could not be judged");
    assert!(server.requests().len() > 6, "--no-cache sent requests");
    let entries: Vec<_> = walk(&project.dir.join("cache")).into_iter().filter(|p| !p.ends_with(".gitignore")).collect();
    assert!(project.dir.join("cache/.gitignore").exists(), "git ignores the cache wherever it lies");
    assert!(entries.iter().all(|p| p.extension().is_some_and(|e| e == "json")), "plain files, no temporaries: {entries:?}");
    let (runs, passes): (Vec<_>, Vec<_>) = entries.iter().partition(|p| p.parent().is_some_and(|d| d.ends_with("history")));
    assert_eq!(passes.len(), 2, "one entry per passed input set: {entries:?}");
    assert_eq!(runs.len(), 4, "and the record of each run, for report.html's history: {entries:?}");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.path().is_dir() {
            files.extend(walk(&entry.path()));
        } else {
            files.push(entry.path());
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread")]
async fn regrade_with_a_new_check_fails_a_passed_task_without_calling_the_model() {
    let project = Project::new(&[("a.txt", "one\n")]);
    let server = OpenAiServer::start_with_key(KEY, vec![write_a(), ScriptedReply::text("Bumped.", Tokens::new(150, 10))]).await;
    mock_config(&project, &server, "");
    let tasks =
        "[defaults]\nrepo = \"repo\"\n[[tasks]]\nid = \"bump\"\nprompt = \"Bump\"\ncheck = \"grep -qx two a.txt\"\ntags = [\"t\"]\n";
    std::fs::write(project.dir.join("tasks.toml"), tasks).unwrap();
    let (code, stderr) = project.dracode_with_key(&["run", "tasks.toml", "--out", "out"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(server.requests().len(), 2);
    let original = read_jsonl(&project.dir.join("out/results.jsonl"));

    // The task's own check again: still passes.
    // No key needed: no model is called.
    let (code, stderr) = project.dracode(&["regrade", "out", "--out", "same"]);
    assert_eq!(code, 0, "{stderr}");
    let same = read_jsonl(&project.dir.join("same/results.jsonl"));
    assert_eq!(finished(&same, "bump")["status"], "passed");

    let (code, stderr) = project.dracode(&["regrade", "out", "--out", "out"]);
    assert_eq!(code, 2, "regrading into the run itself would erase it: {stderr}");
    assert!(stderr.contains("is the run being regraded"), "{stderr}");
    assert_eq!(read_jsonl(&project.dir.join("out/results.jsonl")), original);

    // The check is confined like a task's: it cannot write outside its workspace.
    let escaped = project.dir.join("escaped.txt");
    let check = format!("echo x > {}; grep -qx two a.txt", escaped.display());
    let (code, stderr) = project.dracode(&["regrade", "out", "--check", &check, "--out", "confined"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!escaped.exists(), "the regrade's check wrote outside its workspace");

    // A stricter check: the passing task now fails, and no request reached the model.
    let (code, stderr) = project.dracode(&["regrade", "out", "--check", "grep -qx three a.txt", "--filter", "tag:t"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(server.requests().len(), 2, "regrade calls no model");
    let regraded = read_jsonl(&project.dir.join("out-regraded/results.jsonl"));
    let bump = finished(&regraded, "bump");
    assert_eq!(bump["status"], "failed");
    assert_eq!(bump["check"]["command"], "grep -qx three a.txt");
    assert_eq!(bump["check"]["exit_code"], 1);
    assert_eq!(bump["regraded_from"], json!({"run_id": original[0]["run_id"], "attempt": 1, "status": "passed"}));
    assert_eq!(bump["usage"]["total_tokens"], 0);
    assert_eq!(bump["files_changed"], json!(["a.txt"]));
    assert!(project.dir.join("out-regraded/junit.xml").exists() && project.dir.join("out-regraded/diffs/bump.patch").exists());
    let summary = std::fs::read_to_string(project.dir.join("out-regraded/summary.md")).unwrap();
    assert!(summary.contains("grep -qx three a.txt"), "{summary}");
    let started = regraded.iter().find(|e| e["type"] == "task.started").unwrap();
    assert_eq!(started["base_commit"], git(&project.repo, &["rev-parse", "main"]).trim(), "the base the patch was graded on");
    assert_eq!(git(&project.repo, &["status", "--porcelain"]), "", "the user's checkout is untouched");
    assert_eq!(project.leftovers(), Vec::<String>::new());
}

#[test]
fn an_interrupted_combine_leaves_no_working_tree_and_no_branch() {
    let project = three_task_run();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_dracode"))
        .current_dir(&project.dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &project.dir)
        .env("TMPDIR", &project.tmpdir)
        .args(["combine", "out", "--repo", "repo", "--check", "sleep 30", "--branch", "late"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The check has started once its TMPDIR exists beside the working tree.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !project.leftovers().iter().any(|n| n.starts_with("dracode-task-")) {
        assert!(std::time::Instant::now() < deadline, "the check never started: {:?}", project.leftovers());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(project.leftovers().iter().any(|n| n.starts_with("dracode-workspace-")), "{:?}", project.leftovers());
    let started = std::time::Instant::now();
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "the check did not hold the exit up");
    assert_eq!(project.leftovers(), Vec::<String>::new(), "the working tree and the check's TMPDIR are removed");
    assert!(git(&project.repo, &["branch", "--list", "late"]).is_empty());
    assert!(!project.dir.join("out/combine.json").exists());
}

/// The shipped nightly workflow's combine step, run as the runner would (bash, `set -e`, the
/// real dracode on PATH) in a checkout holding a run's output with a conflict: a conflict does
/// not stop the step (the pull requests of the step after it are opened per task), combine.md
/// names it for the step summary, and the checkout is left as it was. The check is replaced by
/// one that fits this repository.
#[test]
fn the_nightly_combine_step_names_the_conflict_and_leaves_the_checkout_alone() {
    let workflow: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(crate::support::cli::crate_root().join("examples/workflows/nightly.yml")).unwrap())
            .unwrap();
    let steps = workflow["jobs"]["merge"]["steps"].as_array().unwrap();
    let step = steps.iter().find(|s| s["name"] == "Combine the patches of the tasks that passed").unwrap();
    let script = step["run"].as_str().unwrap();
    let check = "cargo test --offline --quiet --manifest-path examples/nightly/project/Cargo.toml";
    assert!(script.contains(check), "{script}");
    let script = script.replace(check, "grep -qx ONE a.txt");
    let publish = steps.iter().position(|s| s["run"].as_str().is_some_and(|r| r.contains("dracode publish dracode-out")));
    let combine = steps.iter().position(|s| s == step);
    assert!(publish > combine, "the pull requests are opened after the union is checked");

    let project = three_task_run();
    std::fs::rename(project.dir.join("out"), project.repo.join("dracode-out")).unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_dracode")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let out = std::process::Command::new("bash")
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
        .current_dir(&project.repo)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &project.dir)
        .env("TMPDIR", &project.tmpdir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "a conflict is for the reviewers to see: {text}");
    let md = std::fs::read_to_string(project.repo.join("dracode-out/combine.md")).unwrap();
    assert!(md.contains("| `second` | `a.txt` | `first` |"), "combine.md names the conflict: {md}");
    assert_eq!(git(&project.repo, &["status", "--porcelain"]), "", "nothing staged or changed in the checkout");
}
