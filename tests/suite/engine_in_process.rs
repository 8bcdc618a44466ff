//! The engine driven in-process, as a program embedding dracode would: options in, a
//! [`dracode::engine::RunSummary`] out, no binary spawned for the run itself (the sandbox's
//! supervisor is the built binary, as in production).

use crate::support::cli::{crate_root, read_jsonl};
use dracode::batch::options::RunOptions;
use dracode::engine::BatchBuilder;
use std::collections::BTreeMap;
use std::path::Path;

/// A clean environment for a run in `home`: PATH and HOME only.
fn env(home: &Path) -> BTreeMap<String, String> {
    dracode_sandbox::use_supervisor_program(env!("CARGO_BIN_EXE_dracode").into());
    BTreeMap::from([("PATH".to_string(), std::env::var("PATH").unwrap_or_default()), ("HOME".to_string(), home.display().to_string())])
}

fn quickstart(out: &Path, cache: Option<&Path>) -> RunOptions {
    RunOptions {
        manifests: vec![crate_root().join("examples/quickstart.toml")],
        out: out.to_path_buf(),
        cache: cache.map(Path::to_path_buf),
        jobs: 2,
        ..RunOptions::default()
    }
}

#[test]
fn a_batch_runs_in_process_and_its_summary_is_the_record() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let batch = BatchBuilder::new(quickstart(&out, None), tmp.path(), env(tmp.path())).build().unwrap();
    assert_eq!(batch.plan.tasks.len(), 2, "planned without touching the disk");
    assert!(!out.exists(), "building writes nothing");
    let summary = batch.execute(Vec::new(), || {}).unwrap();
    assert_eq!((summary.exit_code, summary.failures.len()), (0, 0), "{summary:?}");
    let all = read_jsonl(&out.join("results.jsonl"));
    let run = all.last().unwrap();
    assert_eq!(run["type"], "run.finished");
    assert_eq!(run["exit_code"].as_i64(), Some(i64::from(summary.exit_code)), "the record holds the summary's exit code");
    assert!(out.join("report.html").is_file() && out.join("junit.xml").is_file(), "every artifact of the folder");
}

#[test]
fn an_unwritable_page_is_counted_before_the_record_gets_its_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, cache) = (tmp.path().join("out"), tmp.path().join("cache"));
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join("history"), "not a folder").unwrap();
    let batch = BatchBuilder::new(quickstart(&out, Some(&cache)), tmp.path(), env(tmp.path())).build().unwrap();
    let summary = batch.execute(Vec::new(), || {}).unwrap();
    assert_eq!(summary.exit_code, dracode_results::exit_codes::ARTIFACTS_FAILED, "{summary:?}");
    assert!(summary.failures.iter().any(|f| f.contains("history")), "{:?}", summary.failures);
    let all = read_jsonl(&out.join("results.jsonl"));
    assert_eq!(all.last().unwrap()["exit_code"].as_i64(), Some(3), "the record says what the process says");
}
