//! `--record`: recordings never reach a task (its workspace, its patch, its check) and, unless a
//! folder is named, never the user's repository; a recording replays to the same verdict.

use crate::support::cli::{crate_root, dracode, finished, git, git_repo, read_jsonl};
use std::path::Path;

/// The quickstart project as a git repository in `dir`, with its two recordings committed in
/// `replays/`, and a manifest `tasks.toml` of its two tasks with `isolation` (both checks fail
/// when a `recordings` folder is in the workspace).
fn project(dir: &Path, isolation: &str) {
    let quickstart = crate_root().join("examples/quickstart");
    let read = |path: &str| std::fs::read_to_string(quickstart.join(path)).unwrap();
    let manifest = format!(
        "[defaults]\nprovider = \"replay\"\nreplay = \"replays\"\nrepo = \".\"\nisolation = \"{isolation}\"\n\n\
         [[tasks]]\nid = \"fix-greeting\"\nprompt = \"Fix greet.sh.\"\ncheck = \"sh test.sh && test ! -e recordings\"\n\n\
         [[tasks]]\nid = \"add-readme\"\nprompt = \"Add a README.md.\"\ncheck = \"test -e README.md && test ! -e recordings\"\n"
    );
    git_repo(
        dir,
        &[
            ("greet.sh", &read("project/greet.sh")),
            ("test.sh", &read("project/test.sh")),
            ("replays/fix-greeting.json", &read("replay/fix-greeting.json")),
            ("replays/add-readme.json", &read("replay/add-readme.json")),
            ("tasks.toml", &manifest),
        ],
    );
}

#[test]
fn a_record_folder_in_the_repository_reaches_no_later_task_and_no_patch() {
    for isolation in ["none", "copy"] {
        // The output folder is beside the repository: `isolation = "none"` refuses one inside.
        let tmp = tempfile::tempdir().unwrap();
        let dir = &tmp.path().join("repo");
        project(dir, isolation);
        let out = dracode(dir).args(["run", "tasks.toml", "--jobs", "1", "--out", "../out", "--record", "recordings"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "isolation {isolation}: every task passes, no check saw a recording: {stderr}");
        let events = read_jsonl(&tmp.path().join("out/results.jsonl"));
        for id in ["fix-greeting", "add-readme"] {
            let changed = &finished(&events, id)["files_changed"];
            let named = changed.as_array().unwrap().iter().any(|f| f.as_str().unwrap().starts_with("recordings"));
            assert!(!named, "isolation {isolation}: {id} changed {changed}: a recording is not the task's change");
            assert!(dir.join(format!("recordings/{id}.json")).is_file(), "--record recordings: the folder asked for holds {id}'s");
            let patch = std::fs::read_to_string(tmp.path().join(format!("out/diffs/{id}.patch"))).unwrap();
            assert!(!patch.contains("recordings/"), "isolation {isolation}: {id}'s patch holds a recording:\n{patch}");
        }
    }
}

#[test]
fn a_bare_record_writes_under_the_output_folder_and_leaves_the_repository_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    project(dir, "copy");
    let out = dracode(dir).args(["run", "tasks.toml", "--out", "out", "--record"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for id in ["fix-greeting", "add-readme"] {
        assert!(dir.join(format!("out/recordings/{id}.json")).is_file(), "a bare --record writes out/recordings/{id}.json");
    }
    assert_eq!(git(dir, &["status", "--porcelain"]), "", "nothing is left in the user's repository");
    // The recordings replay to the same verdict, into another output folder.
    let out = dracode(dir).args(["run", "tasks.toml", "--out", "out2", "--replay", "out/recordings"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // A bare --record before a manifest would take it as its folder: refused, named.
    let out = dracode(dir).args(["run", "--record", "tasks.toml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--record tasks.toml: tasks.toml is a file, and --record takes a folder"), "{stderr}");
}

#[test]
fn a_record_folder_that_cannot_be_written_is_exit_3_in_the_record_too() {
    // `run.finished.exit_code` always equals the process's: a copy into `--record DIR` that
    // fails is counted before the record is written, as any artifact's failure is.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    project(dir, "copy");
    std::fs::write(dir.join("blocker"), "a file where the folder's parent should be\n").unwrap();
    let out = dracode(dir).args(["run", "tasks.toml", "--out", "out", "--record", "blocker/recordings"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("cannot write the recordings into blocker/recordings"), "{stderr}");
    let events = read_jsonl(&dir.join("out/results.jsonl"));
    let run_finished = events.iter().find(|e| e["type"] == "run.finished").unwrap();
    assert_eq!(run_finished["exit_code"], 3, "the record says what the process exits with");
}
