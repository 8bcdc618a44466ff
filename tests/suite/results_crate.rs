//! `dracode-results` as a pipeline written in Rust uses it: a run's output folder read back with
//! `output_folder::read`, every line of `results.jsonl` parsed as a `WireEvent`, and the exit
//! code recomputed from the records.

use crate::support::cli::{crate_root, dracode, read_jsonl};
use dracode_results::records::WireEvent;
use dracode_results::{Status, exit_codes, output_folder};

#[test]
fn a_pipeline_reads_a_run_back_with_the_results_crate() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let manifest = crate_root().join("examples/quickstart.toml");
    let output = dracode(tmp.path()).args(["run"]).arg(&manifest).arg("--out").arg(&out).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));

    for line in read_jsonl(&out.join("results.jsonl")) {
        serde_json::from_value::<WireEvent>(line.clone()).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    let run = output_folder::read(&out).unwrap();
    let ids: Vec<&str> = run.tasks.iter().map(|t| t.task_id.as_str()).collect();
    assert_eq!(ids, ["fix-greeting", "add-readme"], "manifest order");
    for task in &run.tasks {
        assert_eq!(task.outcome.status, Status::Passed, "{}", task.task_id);
        let patch = std::fs::read_to_string(out.join(task.outcome.diff_path.as_deref().unwrap())).unwrap();
        assert_eq!(task.diff.as_deref(), Some(patch.as_str()), "{}: the patch read back is the file", task.task_id);
        assert!(task.base_commit.as_deref().is_some_and(|c| c.len() == 40), "{}: {:?}", task.task_id, task.base_commit);
    }
    let code = exit_codes::of_tasks(run.tasks.iter().map(|t| (t.outcome.status, t.outcome.error.as_ref())));
    assert_eq!(Some(code), output.status.code());

    std::fs::write(out.join("results.jsonl"), "{\"type\":\"run.started\"}\n").unwrap();
    let error = output_folder::read(&out).unwrap_err().to_string();
    assert!(error.contains("results.jsonl:1: not a dracode event"), "{error}");
}
