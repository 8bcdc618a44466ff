//! `worktree` isolation against a hostile task: each task has a git directory of its own, so
//! nothing it does to git reaches the user's repository or the next task (issue 8), and
//! nothing is left behind at any `--jobs` or after SIGKILL (issue 9).

use crate::support::cli::{dracode, events, files_containing, finished, git, git_repo, read_jsonl};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A replay that runs each shell line with `run_command`, then ends.
fn replay(lines: &[&str]) -> String {
    let mut turns: Vec<Value> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let call = json!({"type": "tool_use", "id": format!("c{i}"), "name": "run_command", "input": {"command": line, "shell": true}});
            json!({"content": [call], "stop_reason": "tool_use"})
        })
        .collect();
    turns.push(json!({"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}));
    Value::Array(turns).to_string()
}

/// A scratch folder with `repo/` (one commit) and a TMPDIR of its own for dracode.
struct Scene {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    repo: PathBuf,
    tmpdir: PathBuf,
}

impl Scene {
    fn new(files: &[(&str, &str)]) -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let (repo, tmpdir) = (dir.join("repo"), dir.join("tmp"));
        git_repo(&repo, files);
        std::fs::create_dir(&tmpdir).unwrap();
        Scene { _tmp: tmp, dir, repo, tmpdir }
    }

    /// Runs `manifest` (written as `name`) and returns the events; asserts exit 0.
    fn run(&self, name: &str, manifest: &str, args: &[&str]) -> Vec<Value> {
        std::fs::write(self.dir.join(name), manifest).unwrap();
        let out_dir = format!("out-{name}");
        let out = dracode(&self.dir).env("TMPDIR", &self.tmpdir).args(["run", name, "--out", &out_dir]).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        read_jsonl(&self.dir.join(out_dir).join("results.jsonl"))
    }

    /// What must not change in the user's repository: worktrees, branches, config, hooks.
    fn git_state(&self) -> (String, String, Vec<u8>, Vec<String>) {
        let mut hooks: Vec<String> = std::fs::read_dir(self.repo.join(".git/hooks"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        hooks.sort();
        let branches =
            git(&self.repo, &["branch", "--list"]).lines().filter(|b| !b.trim().starts_with("dracode/")).collect::<Vec<_>>().join("\n");
        (git(&self.repo, &["worktree", "list", "--porcelain"]), branches, std::fs::read(self.repo.join(".git/config")).unwrap(), hooks)
    }

    /// Asserts no task folder is left in dracode's TMPDIR.
    fn assert_no_leftovers(&self) {
        let left: Vec<_> = std::fs::read_dir(&self.tmpdir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert!(left.is_empty(), "left in TMPDIR: {left:?} (this process is {})", std::process::id());
    }
}

fn tool_outputs(all: &[Value], task: &str) -> String {
    events(all, "tool.completed").iter().filter(|e| e["task_id"] == task).map(|e| e["output"].to_string()).collect()
}

#[test]
fn a_smudge_filter_planted_by_one_task_never_runs_in_the_next_task_or_the_next_run() {
    let scene = Scene::new(&[("a.txt", "one\n"), ("b.txt", "two\n")]);
    let marker = scene.dir.join("pwned");
    let plant = format!(
        "git config filter.pwn.smudge 'touch {m}' && git config filter.pwn.clean 'touch {m}; cat' && git config filter.pwn.required true \
         && echo '* filter=pwn' > .gitattributes && echo '* filter=pwn' > \"$(git rev-parse --git-common-dir)/info/attributes\" && echo planted",
        m = marker.display()
    );
    std::fs::write(scene.dir.join("attack.json"), replay(&[&plant])).unwrap();
    std::fs::write(scene.dir.join("plain.json"), replay(&["cat a.txt"])).unwrap();
    let before = scene.git_state();
    let manifest = "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\nisolation = \"worktree\"\nrequire_change = false\n\
                    [[tasks]]\nid = \"attacker\"\nprompt = \"p\"\nreplay = \"attack.json\"\n\
                    [[tasks]]\nid = \"next\"\nprompt = \"p\"\nreplay = \"plain.json\"\n";
    let all = scene.run("tasks.toml", manifest, &["--jobs", "1"]);
    assert!(tool_outputs(&all, "attacker").contains("planted"), "the attack ran: {}", tool_outputs(&all, "attacker"));
    assert_eq!(finished(&all, "attacker")["status"], "passed");
    assert_eq!(finished(&all, "next")["status"], "passed");
    assert!(tool_outputs(&all, "next").contains("one"));
    let again = scene.run("again.toml", &manifest.replace("attack.json", "plain.json"), &[]);
    assert_eq!(finished(&again, "attacker")["status"], "passed");
    assert!(!marker.exists(), "the planted filter ran");
    assert_eq!(scene.git_state(), before);
    scene.assert_no_leftovers();
}

#[test]
fn a_hook_planted_by_a_task_stays_in_the_task_and_the_users_commit_does_not_run_it() {
    let scene = Scene::new(&[("a.txt", "one\n")]);
    let marker = scene.dir.join("hooked");
    let plant = format!(
        "hooks=\"$(git rev-parse --git-common-dir)/hooks\" && mkdir -p \"$hooks\" && printf '#!/bin/sh\\ntouch {}\\n' > \"$hooks/pre-commit\" \
         && chmod +x \"$hooks/pre-commit\" && echo planted",
        marker.display()
    );
    std::fs::write(scene.dir.join("attack.json"), replay(&[&plant])).unwrap();
    let before = scene.git_state();
    let all = scene.run(
        "tasks.toml",
        "[[tasks]]\nid = \"hook\"\nprompt = \"p\"\nprovider = \"replay\"\nreplay = \"attack.json\"\nrepo = \"repo\"\nrequire_change = false\n",
        &[],
    );
    assert!(tool_outputs(&all, "hook").contains("planted"), "{}", tool_outputs(&all, "hook"));
    assert_eq!(finished(&all, "hook")["status"], "passed");
    assert_eq!(scene.git_state(), before, "the user's hooks are unchanged");
    std::fs::write(scene.repo.join("a.txt"), "mine\n").unwrap();
    git(&scene.repo, &["commit", "-qam", "user's own commit"]);
    assert!(!marker.exists(), "the planted pre-commit hook ran on the user's commit");
}

#[test]
fn runs_with_and_without_commit_leave_worktrees_branches_config_and_hooks_unchanged() {
    let scene = Scene::new(&[("a.txt", "one\n")]);
    let write = json!([
        {"content": [{"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": "a.txt", "content": "two\n"}}], "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "changed"}], "stop_reason": "end_turn"}
    ]);
    std::fs::write(scene.dir.join("rec.json"), write.to_string()).unwrap();
    let before = scene.git_state();
    let manifest =
        "[defaults]\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"repo\"\n[[tasks]]\nid = \"bump\"\nprompt = \"Bump\"\n";
    let all = scene.run("commit.toml", &manifest.replace("[[tasks]]", "commit = true\n[[tasks]]"), &[]);
    let branch = finished(&all, "bump")["branch"].as_str().unwrap().to_string();
    assert_eq!(git(&scene.repo, &["show", &format!("{branch}:a.txt")]), "two\n");
    git(&scene.repo, &["fsck", "--strict"]);
    let all = scene.run("plain.toml", manifest, &[]);
    assert_eq!(finished(&all, "bump")["files_changed"], json!(["a.txt"]));
    assert_eq!(scene.git_state(), before);
    let dracode_branches: Vec<String> =
        git(&scene.repo, &["branch", "--list", "dracode/*"]).lines().map(|l| l.trim().to_string()).collect();
    assert_eq!(dracode_branches, [branch], "exactly the committed task's branch");
    assert_eq!(git(&scene.repo, &["status", "--porcelain"]), "");
    scene.assert_no_leftovers();
}

#[test]
fn the_users_extraheader_token_is_not_in_the_task_repository() {
    const TOKEN: &str = "ZXh0cmFoZWFkZXItdG9rZW4tMTIz";
    let scene = Scene::new(&[("a.txt", "one\n")]);
    git(&scene.repo, &["config", "http.https://github.com/.extraheader", &format!("AUTHORIZATION: basic {TOKEN}")]);
    let look = "{ git config --list --show-origin; cat .git/config; ls -a .git; } > seen.txt; echo looked";
    std::fs::write(scene.dir.join("look.json"), replay(&[look])).unwrap();
    let all = scene.run(
        "tasks.toml",
        "[[tasks]]\nid = \"look\"\nprompt = \"p\"\nprovider = \"replay\"\nreplay = \"look.json\"\nrepo = \"repo\"\n",
        &[],
    );
    assert_eq!(finished(&all, "look")["files_changed"], json!(["seen.txt"]));
    let patch = std::fs::read_to_string(scene.dir.join("out-tasks.toml/diffs/look.patch")).unwrap();
    assert!(patch.contains("alternates") || patch.contains("objects"), "the task saw its own git dir: {patch}");
    assert!(!patch.contains(TOKEN), "{patch}");
    assert_eq!(files_containing(&scene.dir.join("out-tasks.toml"), TOKEN), Vec::<PathBuf>::new());
    assert_eq!(files_containing(&scene.tmpdir, TOKEN), Vec::<PathBuf>::new());
}

/// Everything a run must leave as it found it in the user's repository: branches (all of
/// them), every ref, the worktree list, `.git/config` and the folder listing of `.git`.
fn repository_state(repo: &Path) -> (String, String, String, Vec<u8>, Vec<String>) {
    let mut git_dir: Vec<String> =
        std::fs::read_dir(repo.join(".git")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    git_dir.sort();
    (
        git(repo, &["branch", "-a"]),
        git(repo, &["for-each-ref"]),
        git(repo, &["worktree", "list", "--porcelain"]),
        std::fs::read(repo.join(".git/config")).unwrap(),
        git_dir,
    )
}

/// The ids of the tasks that passed in a results.jsonl a killed run left (a cut last line is
/// ignored).
fn passed_in(results: &Path) -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(results).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "task.finished" && e["status"] == "passed")
        .map(|e| e["task_id"].as_str().unwrap().to_string())
        .collect()
}

/// Issue 9, worktrees at scale: `tasks` one-turn tasks at `--jobs jobs` with worktree isolation
/// on a repository of `files` files all pass and leave the repository as it was; a second run
/// of the batch killed with SIGKILL mid-run leaves folders in TMPDIR, which the next run
/// removes, and `--rerun-failed` on the killed run's results.jsonl runs exactly the tasks it
/// did not finish. Returns the wall time of the first run.
fn worktrees_at_scale(tasks: usize, jobs: usize, files: usize) -> std::time::Duration {
    let files: Vec<(String, String)> = (0..files).map(|i| (format!("src/m{}/f{i}.rs", i % 40), format!("pub fn f{i}() {{}}\n"))).collect();
    let refs: Vec<(&str, &str)> = files.iter().map(|(p, t)| (p.as_str(), t.as_str())).collect();
    let scene = Scene::new(&refs);
    std::fs::write(scene.dir.join("rec.json"), replay(&[])).unwrap();
    let (before, git_before) = (repository_state(&scene.repo), scene.git_state());
    let mut manifest =
        "[defaults]\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"repo\"\nisolation = \"worktree\"\nrequire_change = false\n"
            .to_string();
    let ids: std::collections::BTreeSet<String> = (0..tasks).map(|i| format!("t{i}")).collect();
    for id in &ids {
        manifest.push_str(&format!("[[tasks]]\nid = \"{id}\"\nprompt = \"p\"\n"));
    }
    let jobs = jobs.to_string();
    let started = std::time::Instant::now();
    let all = scene.run("tasks.toml", &manifest, &["--jobs", &jobs]);
    let elapsed = started.elapsed();
    let passed = events(&all, "task.finished").iter().filter(|e| e["status"] == "passed").count();
    assert_eq!(passed, tasks);
    assert_eq!(repository_state(&scene.repo), before);
    assert_eq!(scene.git_state(), git_before);
    scene.assert_no_leftovers();

    // The same batch again, killed once a tenth of it has finished.
    let killed_results = scene.dir.join("out-killed/results.jsonl");
    let binary = assert_cmd::cargo::cargo_bin("dracode");
    let mut child = std::process::Command::new(binary)
        .current_dir(&scene.dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &scene.dir)
        .env("TMPDIR", &scene.tmpdir)
        .args(["run", "tasks.toml", "--out", "out-killed", "--jobs", &jobs, "--quiet"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    while std::fs::read_to_string(&killed_results).map_or(0, |t| t.matches("\"task.finished\"").count()) < tasks / 10 {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be killed");
        assert!(std::time::Instant::now() < deadline, "the second run made no progress");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed_pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    eprintln!("killed run: pid {killed_pid}");
    let finished_before_kill = passed_in(&killed_results);
    assert!(finished_before_kill.len() < tasks, "killed mid-run");
    assert!(std::fs::read_dir(&scene.tmpdir).unwrap().next().is_some(), "a killed run leaves its task folders behind");

    let out = dracode(&scene.dir)
        .env("TMPDIR", &scene.tmpdir)
        .args(["run", "tasks.toml", "--out", "out-rerun", "--jobs", &jobs, "--rerun-failed", "out-killed/results.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let rerun = read_jsonl(&scene.dir.join("out-rerun/results.jsonl"));
    let rerun_ids: std::collections::BTreeSet<String> =
        events(&rerun, "task.finished").iter().map(|e| e["task_id"].as_str().unwrap().to_string()).collect();
    let unfinished: std::collections::BTreeSet<String> = ids.difference(&finished_before_kill).cloned().collect();
    assert_eq!(rerun_ids, unfinished, "exactly the tasks the killed run did not finish");
    assert!(events(&rerun, "task.finished").iter().all(|e| e["status"] == "passed"));
    scene.assert_no_leftovers();
    assert_eq!(repository_state(&scene.repo), before, "nothing of the killed run is left in the repository");
    elapsed
}

/// The scale scenario at a size the default suite can afford on a 2-core machine.
#[test]
fn many_tasks_at_high_jobs_all_pass_survive_sigkill_and_leave_nothing_behind() {
    let elapsed = worktrees_at_scale(64, 32, 500);
    // 64 checkouts of 500 files: ~3 s on a quiet 2-core machine, 40 s with four other builds
    // running; the bound only catches serialisation.
    assert!(elapsed < std::time::Duration::from_secs(60), "took {elapsed:?}");
}

/// The issue's own numbers: 500 tasks, `--jobs 32`, 2,000 files. About 2 minutes per full run
/// in a debug build on a 2-core machine (most of it creating and removing a million files), so
/// not in the default suite: `cargo test --test all -- --ignored worktrees_at_the_issues_scale`.
#[test]
#[ignore = "several minutes in debug; run with --ignored"]
fn worktrees_at_the_issues_scale() {
    let elapsed = worktrees_at_scale(500, 32, 2000);
    eprintln!("500 tasks at --jobs 32 on 2,000 files: {elapsed:?}");
}

/// A task folder as a run killed by SIGKILL leaves it.
fn leftover(tmpdir: &Path, pid: u32) -> PathBuf {
    let dir = tmpdir.join(format!("dracode-workspace-{pid}-Ab12Cd"));
    std::fs::create_dir_all(dir.join("ws/.git")).unwrap();
    std::fs::write(dir.join("ws/a.txt"), "x").unwrap();
    std::fs::write(dir.join("owner.lock"), format!("{pid}\n")).unwrap();
    dir
}

#[test]
fn the_next_run_removes_what_a_killed_run_left_and_keeps_what_a_live_one_uses() {
    let scene = Scene::new(&[("a.txt", "one\n")]);
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let (killed, live) = (leftover(&scene.tmpdir, dead), leftover(&scene.tmpdir, std::process::id()));
    // What an older dracode left: a worktree entry and branch `dracode-<pid>-<n>`, folder present.
    let legacy = scene.tmpdir.join("dracode-wt-old").join(format!("dracode-{dead}-0"));
    git(&scene.repo, &["worktree", "add", "-q", "-b", &format!("dracode-{dead}-0"), legacy.to_str().unwrap()]);
    std::fs::write(scene.dir.join("rec.json"), replay(&[])).unwrap();
    let all = scene.run(
        "tasks.toml",
        "[[tasks]]\nid = \"t\"\nprompt = \"p\"\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"repo\"\nrequire_change = false\n",
        &[],
    );
    assert_eq!(finished(&all, "t")["status"], "passed");
    assert!(!killed.exists(), "the killed run's folder is removed");
    assert!(live.exists(), "a live process's folder is kept");
    assert!(!legacy.exists(), "the old version's worktree folder is removed");
    assert_eq!(git(&scene.repo, &["worktree", "list"]).lines().count(), 1);
    assert_eq!(git(&scene.repo, &["branch", "--list"]).trim(), "* main");
}

#[test]
fn without_a_git_binary_libgit2_makes_the_workspace_and_the_commit() {
    let scene = Scene::new(&[("a.txt", "one\n"), ("sub/b.txt", "b\n")]);
    let write = json!([
        {"content": [{"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": "sub/b.txt", "content": "B\n"}}], "stop_reason": "tool_use"},
        {"content": [{"type": "text", "text": "changed"}], "stop_reason": "end_turn"}
    ]);
    std::fs::write(scene.dir.join("rec.json"), write.to_string()).unwrap();
    std::fs::write(
        scene.dir.join("tasks.toml"),
        "[[tasks]]\nid = \"t\"\nprompt = \"p\"\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"repo\"\ncommit = true\n",
    )
    .unwrap();
    let empty = scene.dir.join("no-git-here");
    std::fs::create_dir(&empty).unwrap();
    let out =
        dracode(&scene.dir).env("PATH", &empty).env("TMPDIR", &scene.tmpdir).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let all = read_jsonl(&scene.dir.join("out/results.jsonl"));
    assert_eq!(finished(&all, "t")["files_changed"], json!(["sub/b.txt"]));
    let branch = finished(&all, "t")["branch"].as_str().unwrap().to_string();
    assert_eq!(git(&scene.repo, &["show", &format!("{branch}:sub/b.txt")]), "B\n");
    assert_eq!(git(&scene.repo, &["show", &format!("{branch}:a.txt")]), "one\n");
    scene.assert_no_leftovers();
}
