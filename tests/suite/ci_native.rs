//! dracode as a CI step: exit code 4 for an empty selection, GitHub annotations and step
//! outputs, the action's argument parsing.

use crate::support::cli::{crate_root, dracode, read_jsonl};
use std::path::Path;

/// Runs the bundled example with `extra` arguments in `dir`; returns (exit code, stderr).
fn run_quickstart(dir: &Path, extra: &[&str]) -> (i32, String) {
    let manifest = crate_root().join("examples/quickstart.toml");
    let output = dracode(dir).arg("run").arg(&manifest).arg("--out").arg(dir.join("out")).args(extra).output().unwrap();
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned())
}

fn run_finished_exit_code(dir: &Path) -> i64 {
    let all = read_jsonl(&dir.join("out/results.jsonl"));
    let last = all.last().unwrap();
    assert_eq!(last["type"], "run.finished");
    last["exit_code"].as_i64().unwrap()
}

#[test]
fn a_filter_that_selects_nothing_exits_4_and_names_the_filter() {
    let tmp = tempfile::tempdir().unwrap();
    // The quotes arrive literally, as from `args: --filter "tag:docs"` re-split by a shell.
    let (code, stderr) = run_quickstart(tmp.path(), &["--filter", "\"tag:docs\""]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains(r#"no task selected: --filter "tag:docs" selected none of 2 task(s)"#), "{stderr}");
    assert!(stderr.contains("quotes passed literally"), "a hint about the quotes: {stderr}");
    assert_eq!(run_finished_exit_code(tmp.path()), 4, "run.finished.exit_code equals the process's");

    let (code, stderr) = run_quickstart(tmp.path(), &["--filter", "tag:nothing", "--no-tasks", "warn"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("warning: no task selected: --filter tag:nothing"), "{stderr}");
    assert_eq!(run_finished_exit_code(tmp.path()), 0);

    let (code, stderr) = run_quickstart(tmp.path(), &["--filter", "tag:nothing", "--no-tasks=pass"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("no task selected"), "pass is silent: {stderr}");

    let (code, stderr) = run_quickstart(tmp.path(), &["--filter", "tag:nothing", "--dry-run"]);
    assert_eq!(code, 4, "a dry run selects the same nothing: {stderr}");
}

#[test]
fn an_empty_shard_warns_unless_told_to_fail() {
    let tmp = tempfile::tempdir().unwrap();
    // Two tasks in three slices: the third is empty.
    let (code, stderr) = run_quickstart(tmp.path(), &["--shard", "slice:3/3"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("warning: no task selected: shard slice:3/3 selected none of 2 task(s)"), "{stderr}");
    assert_eq!(run_finished_exit_code(tmp.path()), 0);

    let (code, stderr) = run_quickstart(tmp.path(), &["--shard", "slice:3/3", "--no-tasks", "fail"]);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(run_finished_exit_code(tmp.path()), 4);

    let (code, stderr) = run_quickstart(tmp.path(), &["--shard", "slice:1/3", "--no-tasks", "fail"]);
    assert_eq!(code, 0, "a shard with a task runs it: {stderr}");
}

#[test]
fn help_documents_exit_code_4_and_the_policy() {
    let tmp = tempfile::tempdir().unwrap();
    let output = dracode(tmp.path()).args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("4 no task selected"), "{help}");
    assert!(help.contains("5 a task could not be judged"), "{help}");
    assert!(help.contains("When several apply: 130/143, then 3, then 5, then 1"), "{help}");
    assert!(help.contains("--no-tasks <POLICY>"), "{help}");
    assert!(help.contains("--github-output <FILE>"), "{help}");
}

/// A copy of the bundled example in `dir/ex` whose `fix-greeting` check always fails.
fn failing_example(dir: &Path) -> std::path::PathBuf {
    let ex = dir.join("ex");
    std::fs::create_dir_all(&ex).unwrap();
    let status = std::process::Command::new("cp").arg("-R").arg(crate_root().join("examples/quickstart")).arg(&ex).status().unwrap();
    assert!(status.success());
    let manifest = std::fs::read_to_string(crate_root().join("examples/quickstart.toml")).unwrap();
    std::fs::write(ex.join("quickstart.toml"), manifest.replace("check = \"sh test.sh\"", "check = \"false\"")).unwrap();
    ex.join("quickstart.toml")
}

fn outputs(path: &Path) -> std::collections::BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut map = std::collections::BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((name, delimiter)) = line.split_once("<<") {
            let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delimiter).collect();
            map.insert(name.to_string(), value.join("\n"));
        } else if let Some((name, value)) = line.split_once('=') {
            map.insert(name.to_string(), value.to_string());
        }
    }
    map
}

#[test]
fn under_actions_a_failed_task_is_annotated_at_its_line_and_the_outputs_are_written() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = failing_example(tmp.path());
    let github_output = tmp.path().join("github_output");
    let output = dracode(tmp.path())
        .args(["run", "ex/quickstart.toml", "--out", "out"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_OUTPUT", &github_output)
        .env("GITHUB_WORKSPACE", tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let line = std::fs::read_to_string(&manifest).unwrap().lines().position(|l| l.contains("id = \"fix-greeting\"")).unwrap();
    // The task's table header is the line before its id.
    let expected = format!("::error file=ex/quickstart.toml,line={line},title=dracode fix-greeting%3A failed::check `false` exited with 1");
    assert!(stderr.lines().any(|l| l == expected), "want {expected:?} in:\n{stderr}");
    assert_eq!(stderr.matches("::error").count(), 1, "the passing task is not annotated:\n{stderr}");

    let outputs = outputs(&github_output);
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let run = all.last().unwrap();
    assert_eq!(outputs["exit-code"], "1");
    assert_eq!((outputs["total"].as_str(), outputs["passed"].as_str(), outputs["failed"].as_str()), ("2", "1", "1"));
    assert_eq!(outputs["input-tokens"], run["usage"]["input_tokens"].to_string());
    assert_eq!(outputs["output-tokens"], run["usage"]["output_tokens"].to_string());
    assert_eq!(outputs["cost-usd"].parse::<f64>().unwrap(), run["total_cost_usd"].as_f64().unwrap());
    for (name, file) in [("results", "results.jsonl"), ("junit", "junit.xml"), ("summary", "summary.md")] {
        assert!(Path::new(&outputs[name]).is_absolute(), "{name}: {}", outputs[name]);
        assert!(outputs[name].ends_with(&format!("out/{file}")) && Path::new(&outputs[name]).is_file(), "{name}: {}", outputs[name]);
    }
    assert!(Path::new(&outputs["out"]).is_dir());
}

#[test]
fn github_output_works_outside_actions_and_annotations_need_actions() {
    let tmp = tempfile::tempdir().unwrap();
    let github_output = tmp.path().join("outputs.txt");
    let (code, stderr) = run_quickstart(tmp.path(), &["--github-output", github_output.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("::"), "no workflow commands outside Actions:\n{stderr}");
    let outputs = outputs(&github_output);
    assert_eq!((outputs["exit-code"].as_str(), outputs["passed"].as_str(), outputs["failed"].as_str()), ("0", "2", "0"));
}

#[test]
fn an_osc8_hyperlink_in_a_final_message_reaches_no_human_artifact_as_an_escape() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = failing_example(tmp.path());
    let replay = tmp.path().join("ex/quickstart/replay/add-readme.json");
    let linked = r"Added README.md, see \u001b]8;;https://example.test/pr/7\u001b\\PR 7\u001b]8;;\u001b\\ and \u001b[1mbold\u001b[0m.";
    let text = std::fs::read_to_string(&replay).unwrap().replace("Added README.md describing greet.sh and how to run its test.", linked);
    std::fs::write(&replay, text).unwrap();
    // Failed, so its message is also in the failure's details.
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str("check = \"false\"\n");
    std::fs::write(&manifest, text).unwrap();
    let output = dracode(tmp.path()).arg("run").arg(&manifest).args(["--out", "out", "--verbose"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let result = crate::support::cli::finished(&all, "add-readme")["result"].as_str().unwrap().to_string();
    assert!(result.contains("\x1b]8;;https://example.test/pr/7"), "results.jsonl keeps the raw text: {result:?}");
    let junit = std::fs::read_to_string(tmp.path().join("out/junit.xml")).unwrap();
    assert!(junit.contains("see PR 7 and bold."), "the link text stays, the escapes go:\n{junit}");
    for file in ["summary.md", "junit.xml"] {
        let text = std::fs::read_to_string(tmp.path().join("out").join(file)).unwrap();
        assert!(!text.contains('\x1b') && !text.contains("8;;") && !text.contains("example.test"), "{file}:\n{text}");
    }
    assert!(!stderr.contains('\x1b') && !stderr.contains("8;;"), "the terminal lines:\n{stderr}");
}

#[test]
fn version_names_the_version_commit_and_target() {
    let tmp = tempfile::tempdir().unwrap();
    let output = dracode(tmp.path()).arg("--version").output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    let commit = std::process::Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(crate_root()).output();
    let expected_commit = match commit {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        _ => "unknown".to_string(),
    };
    let prefix = format!("dracode {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(text.starts_with(&prefix), "{text}");
    // The binary may predate the last commit of a checkout being edited; it names a commit.
    let named = text[prefix.len()..].split(',').next().unwrap();
    assert!(named == expected_commit || named.len() == 12 || named == "unknown", "{text}");
    let arch = std::env::consts::ARCH;
    assert!(text.contains(&format!(", target {arch}-")) && text.trim_end().ends_with(')'), "{text}");
}

/// `dracode` with the real HOME and toolchain variables: the nightly example's checks run cargo.
fn dracode_with_toolchain(dir: &Path) -> crate::support::cli::Dracode {
    let mut cmd = dracode(dir);
    for var in ["HOME", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"] {
        if let Ok(value) = std::env::var(var) {
            cmd.env(var, value);
        }
    }
    cmd
}

#[test]
fn the_nightly_example_fixes_three_chores_each_proven_by_its_check() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = crate_root().join("examples/nightly.toml");
    let output = dracode_with_toolchain(tmp.path()).arg("run").arg(&manifest).args(["--out", "out", "--jobs", "3"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let prefix = crate::support::cli::repo_prefix(&crate_root().join("examples/nightly/project"));
    for (id, file) in [("fix-clippy", "src/stats.rs"), ("add-docs", "src/text.rs"), ("replace-deprecated", "src/greet.rs")] {
        let done = crate::support::cli::finished(&all, id);
        assert_eq!(done["status"], "passed", "{id}: {done}");
        assert_eq!(done["files_changed"], serde_json::json!([format!("{prefix}{file}")]), "{id}");
        assert_eq!(done["check"]["exit_code"], 0);
    }
    // Each check fails on the project as it is: the passes above are the changes' doing.
    let project = tmp.path().join("pristine");
    let status =
        std::process::Command::new("cp").arg("-R").arg(crate_root().join("examples/nightly/project")).arg(&project).status().unwrap();
    assert!(status.success());
    let manifest_text = std::fs::read_to_string(&manifest).unwrap();
    let checks: Vec<&str> = manifest_text.lines().filter_map(|l| l.strip_prefix("check = \"")).map(|l| l.trim_end_matches('"')).collect();
    assert_eq!(checks.len(), 3);
    for check in checks {
        let out = std::process::Command::new("sh").args(["-c", check]).current_dir(&project).output().unwrap();
        assert!(!out.status.success(), "`{check}` already passes before any change");
    }
}

#[test]
fn the_pipeline_script_lists_failures_with_their_kind_and_reruns_them() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = failing_example(tmp.path());
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_dracode")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let output = std::process::Command::new("bash")
        .arg(crate_root().join("examples/pipeline.sh"))
        .arg(&manifest)
        .arg("out")
        .current_dir(tmp.path())
        .env_clear()
        .env("PATH", &path)
        .env("HOME", tmp.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "the re-run fails again:\n{stdout}");
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    let run = all.last().unwrap();
    let first = format!("passed 1 of 2 · {} input + {} output tokens", run["usage"]["input_tokens"], run["usage"]["output_tokens"]);
    assert!(stdout.contains(&first), "{stdout}");
    assert!(stdout.contains("  not passed: fix-greeting\tfailed\tcheck\tcheck `false` exited with 1"), "{stdout}");
    assert!(stdout.contains("pipeline: re-running 1 task(s): fix-greeting"), "{stdout}");
    let rerun = read_jsonl(&tmp.path().join("out-rerun/results.jsonl"));
    let finished: Vec<&str> = rerun.iter().filter(|e| e["type"] == "task.finished").map(|e| e["task_id"].as_str().unwrap()).collect();
    assert_eq!(finished, ["fix-greeting"], "only the failed task ran again");
    assert!(stdout.contains("passed 0 of 1"), "{stdout}");
}

/// `dracode schema events | head -1` and the like: a reader that goes away ends a printing
/// command quietly (SIGPIPE, as Unix tools do), never with a panic on stderr.
#[test]
fn printing_into_a_closed_pipe_ends_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let tmp = tempfile::tempdir().unwrap();
    for args in [&["schema", "events"][..], &["tools", "--format", "openai"], &["list", "examples/quickstart.toml"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dracode"));
        command.current_dir(crate_root()).env_clear().env("HOME", tmp.path()).args(args).stdout(writer);
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(output.status.signal(), Some(libc::SIGPIPE), "{args:?}: {:?} {stderr}", output.status);
    }
}
