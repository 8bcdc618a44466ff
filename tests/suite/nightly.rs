//! Nightly batches (issue 21): `dracode combine` builds the union of a run's patches and names
//! the ones that conflict, `dracode regrade` checks recorded patches again without a model, and
//! `--cache` skips a task whose inputs match a recorded pass.

use crate::support::cli::{dracode, git, git_repo};
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
    let (code, stderr) = project.dracode(&["combine", "two", "--repo", "repo", "--base", "main", "--check", "grep -qx B b.txt"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(read_json(&project.dir.join("two/combine.json"))["applied"], json!(["first", "third"]));
    let (code, stderr) = project.dracode(&["combine", "no-such-folder", "--repo", "repo"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no-such-folder/results.jsonl"), "{stderr}");
}
