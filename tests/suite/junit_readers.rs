//! Every `junit.xml` dracode writes is opened by the JUnit readers in wide use (issue 30): a
//! mixed batch run through the binary with the offline `replay` provider, in two shards (each
//! writes its own `junit.xml`) merged by `dracode merge`, and each of the three files read by
//! xunitparser, junitparser (its xunit2 reader, which knows flaky elements) and junit2html from
//! PyPI, junit2json and xunit-viewer from npm, and validated against Surefire's and Jenkins'
//! schemas. The readers are installed, pinned, into the test cache on first use; without python3
//! (with venv) or npm the tests are skipped with a note, unless `DRACODE_REQUIRE_JUNIT_READERS`
//! is set (CI), which makes that a failure.
//!
//! The batch: a pass; a failed check whose output holds tabs and invalid UTF-8; an error (no
//! recording: `not_configured`); a task repeated three times that fails once and passes twice
//! (`--min-pass-rate 0.6`: a pass with a `flakyFailure`); one repeated twice that always fails
//! (a failure with a `rerunFailure`); and one repaired after a failed check. Two manifests, so
//! every file has two suites.

use crate::support::cli::{crate_root, dracode, events, git_repo, read_jsonl};
use crate::support::xmllint::{assert_surefire_valid, assert_valid};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The PyPI readers, pinned so a new release cannot change what is checked.
const PYTHON_READERS: [&str; 3] = ["xunitparser==1.3.4", "junitparser==5.0.3", "junit2html==31.1.4"];
/// The npm readers, pinned likewise.
const NPM_READERS: [&str; 2] = ["junit2json@4.0.0", "xunit-viewer@10.6.1"];
const REQUIRE: &str = "DRACODE_REQUIRE_JUNIT_READERS";

/// How each task of the batch ends in JUnit terms.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Ends {
    Passed,
    Flaky,
    Failure,
    Error,
}

const TASKS: [(&str, Ends); 6] = [
    ("passes", Ends::Passed),
    ("check-fails", Ends::Failure),
    ("no-recording", Ends::Error),
    ("repeat-flaky", Ends::Flaky),
    ("repeat-fails", Ends::Failure),
    ("repaired", Ends::Passed),
];

fn ends(id: &str) -> Ends {
    TASKS.iter().find(|(t, _)| *t == id).map(|(_, e)| *e).unwrap_or_else(|| panic!("unknown task {id}"))
}

/// One `junit.xml` and the tasks it holds (from its folder's `results.jsonl`).
struct JunitFile {
    label: &'static str,
    path: PathBuf,
    tasks: Vec<String>,
}

impl JunitFile {
    fn with(&self, end: Ends) -> Vec<String> {
        self.tasks.iter().filter(|t| ends(t) == end).cloned().collect()
    }

    fn failures(&self) -> Vec<String> {
        self.with(Ends::Failure)
    }

    fn errors(&self) -> Vec<String> {
        self.with(Ends::Error)
    }
}

/// A replay recording: write a note, then say done (more answers than any repair needs).
fn recording() -> String {
    let usage = r#""usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12,"requests":1}"#;
    let write = format!(
        r#"{{"content":[{{"type":"tool_use","id":"c1","name":"write_file","input":{{"file_path":"note.txt","content":"x\n"}}}}],"stop_reason":"tool_use",{usage}}}"#
    );
    let done = format!(r#"{{"content":[{{"type":"text","text":"Done."}}],"stop_reason":"end_turn",{usage}}}"#);
    format!(r#"{{"responses":[{write},{done},{done},{done},{done},{done}]}}"#)
}

/// Writes the project (manifests, recordings, check scripts) into `dir`.
fn project(dir: &Path) {
    // The check of `check-fails`, in the workspace: tabs, and two bytes that are not UTF-8.
    let bad_output = "printf 'want\\tgot\\n1\\t2\\nbad bytes: \\377\\376 end\\n'\nexit 1\n";
    git_repo(&dir.join("project"), &[("a.txt", "hello\n"), ("bad-output.sh", bad_output)]);
    std::fs::create_dir_all(dir.join("replay")).unwrap();
    std::fs::create_dir_all(dir.join("counts")).unwrap();
    for (id, _) in TASKS.iter().filter(|(id, _)| *id != "no-recording") {
        std::fs::write(dir.join(format!("replay/{id}.json")), recording()).unwrap();
    }
    // Fails the first time it runs for the name $1, passes after (the counts are outside the
    // workspace: these tasks run with `sandbox = "off"`).
    let counts = dir.join("counts");
    let once = format!(
        "f={}/$1\nn=$(cat \"$f\" 2>/dev/null || echo 0)\necho $((n+1)) > \"$f\"\n[ \"$n\" -ge 1 ] || {{ echo 'not yet'; exit 1; }}\n",
        counts.display()
    );
    std::fs::write(dir.join("fails-once.sh"), once).unwrap();
    let d = dir.display();
    let defaults =
        "[defaults]\nprovider = \"replay\"\nreplay = \"replay\"\nrepo = \"project\"\nisolation = \"copy\"\nrequire_change = false\n";
    let a = format!(
        "{defaults}\n[[tasks]]\nid = \"passes\"\nprompt = \"Write a note.\"\n\n[[tasks]]\nid = \"check-fails\"\nprompt = \"Write a note.\"\ncheck = \"sh bad-output.sh\"\n\n[[tasks]]\nid = \"no-recording\"\nprompt = \"Nothing recorded.\"\n"
    );
    let b = format!(
        "{defaults}sandbox = \"off\"\n\n[[tasks]]\nid = \"repeat-flaky\"\nprompt = \"Write a note.\"\nrepeat = 3\ncheck = \"sh {d}/fails-once.sh flaky\"\n\n[[tasks]]\nid = \"repeat-fails\"\nprompt = \"Write a note.\"\nrepeat = 2\ncheck = \"echo always fails; exit 2\"\n\n[[tasks]]\nid = \"repaired\"\nprompt = \"Write a note.\"\ncheck_repairs = 1\ncheck = \"sh {d}/fails-once.sh repair\"\n"
    );
    std::fs::write(dir.join("a.toml"), a).unwrap();
    std::fs::write(dir.join("b.toml"), b).unwrap();
}

/// The task ids a run folder's `results.jsonl` finished.
fn finished_ids(out: &Path) -> Vec<String> {
    let all = read_jsonl(&out.join("results.jsonl"));
    events(&all, "task.finished").iter().map(|e| e["task_id"].as_str().unwrap().to_string()).collect()
}

/// The batch, run once per test process: the two shards' files and the merged one.
fn batch() -> &'static [JunitFile] {
    static BATCH: OnceLock<(tempfile::TempDir, Vec<JunitFile>)> = OnceLock::new();
    &BATCH
        .get_or_init(|| {
            let tmp = tempfile::Builder::new().prefix("junit-readers-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            let dir = tmp.path();
            project(dir);
            let mut files = Vec::new();
            for (k, label) in [(1, "shard 1"), (2, "shard 2")] {
                let out = format!("out{k}");
                let shard = format!("slice:{k}/2");
                let args = ["run", "a.toml", "b.toml", "--out", &out, "--shard", &shard, "--min-pass-rate", "0.6", "--jobs", "1"];
                let run = dracode(dir).args(args).output().unwrap();
                let stderr = String::from_utf8_lossy(&run.stderr);
                assert!(dir.join(&out).join("junit.xml").is_file(), "{label}: no junit.xml\n{stderr}");
                files.push(JunitFile { label, path: dir.join(&out).join("junit.xml"), tasks: finished_ids(&dir.join(&out)) });
            }
            let merge = dracode(dir).args(["merge", "out1", "out2", "--out", "merged"]).output().unwrap();
            assert!(dir.join("merged/junit.xml").is_file(), "merge: {}", String::from_utf8_lossy(&merge.stderr));
            let tasks = finished_ids(&dir.join("merged"));
            assert_eq!(tasks.len(), 6, "every task once in the merged run: {tasks:?}");
            files.push(JunitFile { label: "merged", path: dir.join("merged/junit.xml"), tasks });
            (tmp, files)
        })
        .1
}

/// Installs at most one reader set at a time in this process.
static INSTALLING: Mutex<()> = Mutex::new(());

/// `None` (after a note) when `tool` is missing and [`REQUIRE`] is unset.
fn missing(tool: &str) -> Option<PathBuf> {
    assert!(std::env::var_os(REQUIRE).is_none(), "{tool} is missing and {REQUIRE} is set");
    eprintln!("note: {tool} is missing: the JUnit reader checks are skipped");
    None
}

/// A python with the PyPI readers, from a venv in the test cache made on first use.
fn python_readers() -> Option<PathBuf> {
    let _one = INSTALLING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("junit-readers-py-{}", PYTHON_READERS.join("-")));
    let python = venv.join("bin/python");
    let imports = "import xunitparser, junitparser.xunit2, junit2htmlreport.parser";
    if Command::new(&python).args(["-c", imports]).output().is_ok_and(|o| o.status.success()) {
        return Some(python);
    }
    if !Command::new("python3").args(["-c", "import venv, ensurepip"]).output().is_ok_and(|o| o.status.success()) {
        return missing("python3 with venv and ensurepip");
    }
    let made = Command::new("python3").args(["-m", "venv"]).arg(&venv).output().unwrap();
    assert!(made.status.success(), "python3 -m venv: {}", String::from_utf8_lossy(&made.stderr));
    let pip = Command::new(venv.join("bin/pip")).args(["install", "--quiet"]).args(PYTHON_READERS).output().unwrap();
    assert!(pip.status.success(), "pip install {PYTHON_READERS:?}: {}", String::from_utf8_lossy(&pip.stderr));
    Some(python)
}

/// The npm readers' `node_modules/.bin`, installed into the test cache on first use.
fn npm_readers() -> Option<PathBuf> {
    let _one = INSTALLING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("junit-readers-npm-{}", NPM_READERS.join("-")));
    let bin = prefix.join("node_modules/.bin");
    if bin.join("junit2json").is_file() && bin.join("xunit-viewer").is_file() {
        return Some(bin);
    }
    if Command::new("npm").arg("--version").output().is_err() {
        return missing("npm");
    }
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
        .arg(&prefix)
        .args(NPM_READERS)
        .output()
        .unwrap();
    assert!(
        out.status.success() && bin.join("xunit-viewer").is_file(),
        "npm install {NPM_READERS:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(bin)
}

/// What the three PyPI readers make of a file, as JSON (`tests/support/junit_readers.py`).
fn python_views(python: &Path, file: &JunitFile) -> Value {
    let out = Command::new(python).arg(crate_root().join("tests/support/junit_readers.py")).arg(&file.path).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: a PyPI reader failed on {}:\n{stderr}", file.label, file.path.display());
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn sorted(value: &Value) -> Vec<String> {
    let mut list: Vec<String> =
        value.as_array().unwrap_or_else(|| panic!("a list: {value}")).iter().map(|v| v.as_str().unwrap().to_string()).collect();
    list.sort();
    list
}

fn sorted_ids(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

#[test]
fn xunitparser_junitparser_and_junit2html_open_every_file_and_count_alike() {
    let Some(python) = python_readers() else { return };
    for file in batch() {
        let views = python_views(&python, file);
        let label = file.label;
        let x = &views["xunitparser"];
        assert_eq!(x["tests"], file.tasks.len(), "{label}: xunitparser {x}");
        assert_eq!(sorted(&x["failures"]), sorted_ids(file.failures()), "{label}: xunitparser failures");
        assert_eq!(sorted(&x["errors"]), sorted_ids(file.errors()), "{label}: xunitparser errors");

        let j = &views["junitparser"];
        assert_eq!(j["suites"].as_array().unwrap().len(), 2, "{label}: {j}");
        assert_eq!(sorted(&j["cases"]), sorted_ids(file.tasks.clone()), "{label}: junitparser cases");
        assert_eq!(sorted(&j["failures"]), sorted_ids(file.failures()), "{label}: junitparser failures");
        assert_eq!(sorted(&j["errors"]), sorted_ids(file.errors()), "{label}: junitparser errors");
        assert_eq!(sorted(&j["flaky"]), sorted_ids(file.with(Ends::Flaky)), "{label}: junitparser flaky");
        for trace in j["traces"].as_array().unwrap() {
            assert!(
                trace.as_str().is_some_and(|t| t.starts_with("failed: check `")),
                "{label}: a stackTrace with the attempt's text: {trace}"
            );
        }
        let reruns = usize::from(file.tasks.iter().any(|t| t == "repeat-fails"));
        let flaky = file.with(Ends::Flaky).len();
        assert_eq!(j["traces"].as_array().unwrap().len(), reruns + flaky, "{label}: {j}");

        let h = &views["junit2html"];
        assert_eq!(sorted(&h["passed"]), sorted_ids([file.with(Ends::Passed), file.with(Ends::Flaky)].concat()), "{label}: junit2html {h}");
        assert_eq!(h["cases"], file.tasks.len(), "{label}: junit2html {h}");
        assert!(h["html_bytes"].as_u64().unwrap() > 1000, "{label}: junit2html wrote its page");

        if file.tasks.iter().any(|t| t == "check-fails") {
            let text = x["texts"]["check-fails"].as_str().unwrap();
            assert!(text.contains("want\tgot\n1\t2\nbad bytes: ?? end"), "{label}: tabs kept, bad bytes as `?`: {text:?}");
        }
    }
}

#[test]
fn junit2json_and_xunit_viewer_open_every_file_and_count_alike() {
    let Some(bin) = npm_readers() else { return };
    for file in batch() {
        let label = file.label;
        let out = Command::new(bin.join("junit2json")).arg(&file.path).output().unwrap();
        assert!(out.status.success(), "{label}: junit2json: {}", String::from_utf8_lossy(&out.stderr));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        let cases: Vec<&Value> = json["testsuite"].as_array().unwrap().iter().flat_map(|s| s["testcase"].as_array().unwrap()).collect();
        let with = |key: &str| {
            sorted_ids(cases.iter().filter(|c| c.get(key).is_some()).map(|c| c["name"].as_str().unwrap().to_string()).collect())
        };
        assert_eq!(cases.len(), file.tasks.len(), "{label}: junit2json {json}");
        assert_eq!(with("failure"), sorted_ids(file.failures()), "{label}: junit2json failures");
        assert_eq!(with("error"), sorted_ids(file.errors()), "{label}: junit2json errors");
        assert_eq!(with("flakyFailure"), sorted_ids(file.with(Ends::Flaky)), "{label}: junit2json flaky");
        for case in &cases {
            for kind in ["flakyFailure", "rerunFailure"] {
                for rerun in case[kind].as_array().into_iter().flatten() {
                    let trace = rerun["stackTrace"][0]["inner"].as_str();
                    assert!(trace.is_some_and(|t| t.starts_with("failed: check `")), "{label}: {kind} without a stackTrace: {rerun}");
                }
            }
        }
        xunit_viewer(&bin, file);
    }
}

/// xunit-viewer renders `file` to HTML and to the console; the console's closing line counts
/// each status, and each test's line is marked `✓` (pass), `✗` (failure), `!` (error) or `?`
/// (a pass with a `flakyFailure`).
fn xunit_viewer(bin: &Path, file: &JunitFile) {
    let label = file.label;
    let html = file.path.with_extension("xunit-viewer.html");
    let out =
        Command::new(bin.join("xunit-viewer")).arg("-r").arg(&file.path).arg("-o").arg(&html).args(["-c", "-n", "-C"]).output().unwrap();
    let console = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && html.is_file(), "{label}: xunit-viewer failed:\n{console}\n{}", String::from_utf8_lossy(&out.stderr));
    let marks: BTreeMap<String, String> = console
        .lines()
        .map(str::trim)
        .filter_map(|l| {
            let (mark, rest) = l.split_once(' ')?;
            let name = rest.split(" time=").next().filter(|_| rest.contains(" time="))?;
            ["✓", "✗", "!", "?"].contains(&mark).then(|| (name.to_string(), mark.to_string()))
        })
        .collect();
    for task in &file.tasks {
        let want = match ends(task) {
            Ends::Passed => "✓",
            Ends::Failure => "✗",
            Ends::Error => "!",
            Ends::Flaky => "?",
        };
        assert_eq!(marks.get(task).map(String::as_str), Some(want), "{label}: xunit-viewer's mark for {task}:\n{console}");
    }
    assert_eq!(marks.len(), file.tasks.len(), "{label}:\n{console}");
}

#[test]
fn every_suite_of_every_file_is_valid_for_surefire_and_jenkins() {
    for file in batch() {
        assert_valid("jenkins-xunit-junit-10.xsd", &file.path);
        assert_eq!(assert_surefire_valid(&file.path), 2, "{}: two suites", file.label);
        let xml = std::fs::read_to_string(&file.path).unwrap();
        assert!(!xml.contains('\u{FFFD}'), "{}: {xml}", file.label);
    }
    let merged = std::fs::read_to_string(&batch()[2].path).unwrap();
    assert_eq!(merged.matches("<flakyFailure").count(), 1, "{merged}");
    assert_eq!(merged.matches("<rerunFailure").count(), 1, "{merged}");
    assert!(merged.contains(r#"<property name="repaired.repairs" value="1"/>"#), "{merged}");
}
