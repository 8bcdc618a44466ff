//! `findings.sarif` as GitHub code scanning ingests it: checked with Microsoft's SARIF
//! multitool and its `Gh` rules (GitHub's ingestion requirements), installed from npm into the
//! test cache on first use. Without npm the tests are skipped with a note, unless
//! `DRACODE_REQUIRE_SARIF_MULTITOOL` is set (CI), which makes that a failure.

use crate::support::cli::{dracode, finished, git_repo, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The npm package, pinned so a new release cannot change what is checked.
const MULTITOOL_PACKAGE: &str = "@microsoft/sarif-multitool";
const MULTITOOL_VERSION: &str = "5.7.0";
const KEY: &str = "sk-sarif-123456789";

/// The multitool's launcher, installed with npm on first use; `None` (after printing why) only
/// when npm is missing and `DRACODE_REQUIRE_SARIF_MULTITOOL` is unset. Installed once per
/// process: two tests installing at once saw each other's half-installed package.
fn multitool() -> Option<PathBuf> {
    static LAUNCHER: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    LAUNCHER.get_or_init(install_multitool).clone()
}

fn install_multitool() -> Option<PathBuf> {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sarif-multitool-{MULTITOOL_VERSION}"));
    let launcher = prefix.join("node_modules/.bin/sarif-multitool");
    if launcher.is_file() {
        return Some(launcher);
    }
    let required = std::env::var_os("DRACODE_REQUIRE_SARIF_MULTITOOL").is_some();
    if std::process::Command::new("npm").arg("--version").output().is_err() {
        assert!(!required, "npm is missing and DRACODE_REQUIRE_SARIF_MULTITOOL is set");
        eprintln!("skipping the SARIF multitool check: npm is not installed");
        return None;
    }
    let out = std::process::Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
        .arg(&prefix)
        .arg(format!("{MULTITOOL_PACKAGE}@{MULTITOOL_VERSION}"))
        .output()
        .unwrap();
    assert!(out.status.success() && launcher.is_file(), "npm install {MULTITOOL_PACKAGE}: {}", String::from_utf8_lossy(&out.stderr));
    Some(launcher)
}

/// Every problem `sarif-multitool validate --rule-kind Gh` finds in `log` (JSON schema and
/// GitHub's ingestion rules), as `RULE: message` lines.
fn gh_problems(launcher: &Path, log: &Path) -> Vec<String> {
    let report = log.with_extension("validation.sarif");
    let out = std::process::Command::new(launcher)
        // Its default skips files over 10,000 KB (and then reports nothing wrong).
        .args(["validate", "--rule-kind", "Gh", "--max-file-size-in-kb", "102400", "--log", "ForceOverwrite", "--output"])
        .arg(&report)
        .arg(log)
        .output()
        .unwrap();
    let console = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the multitool failed: {console}{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let results = report["runs"][0]["results"].as_array().cloned().unwrap_or_default();
    let mut problems: Vec<String> = results
        .iter()
        .filter(|r| r["level"] != "note" && r["level"] != "none")
        .map(|r| format!("{}: {}", r["ruleId"], r["message"]))
        .collect();
    // A file it skipped or could not parse shows only in the invocation, not as a result.
    let invocation = &report["runs"][0]["invocations"][0];
    if invocation["executionSuccessful"] != true {
        problems.push(format!("the multitool did not analyse {}: {invocation}", log.display()));
    }
    for kind in ["toolExecutionNotifications", "toolConfigurationNotifications"] {
        for notification in invocation[kind].as_array().into_iter().flatten() {
            problems.push(format!("{kind}: {}", notification["message"]["text"]));
        }
    }
    problems
}

/// The warnings of the multitool's general SARIF rules that `log` must not have: SARIF1001 (a
/// rule's `name` equal to its `id`) and SARIF2005 (a tool without `informationUri`; written
/// when the action runs dracode), as `RULE: arguments` lines.
fn naming_warnings(launcher: &Path, log: &Path) -> Vec<String> {
    let report = log.with_extension("naming.sarif");
    let out = std::process::Command::new(launcher)
        // The launcher hands its arguments to a shell: the `;` list needs its own quotes.
        .args(["validate", "--rule-kind", "\"Gh;Sarif\"", "--max-file-size-in-kb", "102400", "--log", "ForceOverwrite", "--output"])
        .arg(&report)
        .arg(log)
        .output()
        .unwrap();
    assert!(out.status.success(), "the multitool failed: {}", String::from_utf8_lossy(&out.stdout));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let results = report["runs"][0]["results"].as_array().cloned().unwrap_or_default();
    results
        .iter()
        .filter(|r| ["SARIF1001", "SARIF2005"].contains(&r["ruleId"].as_str().unwrap_or_default()))
        .map(|r| format!("{}: {}", r["ruleId"], r["message"]["arguments"]))
        .collect()
}

/// A git repository with a project and a config pointing `openai` at `server` (unstreamed);
/// returns its root.
fn project(server: &OpenAiServer, files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = files.to_vec();
    files.push((".gitignore", "out/\n"));
    git_repo(tmp.path(), &files);
    // Unstreamed: 30,000 findings streamed in the mock's 7-character argument deltas are ~460,000
    // events, which would make this test about streaming.
    std::fs::write(tmp.path().join("dracode.toml"), format!("[providers.openai]\nbase_url = \"{}\"\nstream = false\n", server.base_url()))
        .unwrap();
    std::fs::write(tmp.path().join("review.toml"), "[[tasks]]\nid = \"review\"\nprompt = \"Review the code.\"\noutput = \"findings\"\n")
        .unwrap();
    tmp
}

async fn run(root: &Path) -> (i32, String) {
    let root = root.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        // As the action runs it: findings.sarif names the action's repository as dracode's home.
        let action = [("GITHUB_SERVER_URL", "https://github.com"), ("DRACODE_ACTION_REPOSITORY", "acme/dracode")];
        let mut cmd = dracode(&root);
        cmd.env("OPENAI_API_KEY", KEY).envs(action).args(["run", "review.toml", "--out", "out", "--provider", "openai"]);
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn read_log(root: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root.join("out/findings.sarif")).unwrap()).unwrap()
}

/// A review whose first answer has a blank message is sent back to the model; the log it then
/// writes passes GitHub's ingestion rules: rules with a full description and help, messages
/// with text, fingerprints, columns where the finding has them and an automation id.
#[tokio::test(flavor = "multi_thread")]
async fn findings_sarif_passes_githubs_ingestion_rules() {
    let Some(launcher) = multitool() else { return };
    let blank = json!({"findings": [
        {"rule_id": "unwrap", "message": "   ", "file": "src/main.rs", "start_line": 1, "severity": "error"}
    ]});
    let good = json!({"findings": [
        {"rule_id": "unwrap", "message": "may panic on a missing file", "file": "src/main.rs", "start_line": 2, "start_column": 5, "end_column": 30, "severity": "error"},
        {"rule_id": "unsafe-block", "message": "unchecked pointer read", "file": "src/lib.rs", "start_line": 1, "end_line": 2, "severity": "warning"},
        {"rule_id": "unsafe-block", "message": "another one", "file": "src/lib.rs", "start_line": 1, "end_line": 2, "severity": "note"}
    ]});
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![
            ScriptedReply::tool_call("c1", "final_answer", blank, Tokens::new(20, 5)),
            ScriptedReply::tool_call("c2", "final_answer", good, Tokens::new(30, 5)),
        ],
    )
    .await;
    let tmp = project(
        &server,
        &[("src/main.rs", "fn main() {\n    let t = std::fs::read(\"x\").unwrap();\n}\n"), ("src/lib.rs", "unsafe {\n}\n")],
    );
    let (code, stderr) = run(tmp.path()).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(finished(&read_jsonl(&tmp.path().join("out/results.jsonl")), "review")["num_turns"], 2, "the blank message was refused");
    let repair = server.requests()[1].to_string();
    assert!(repair.contains("/findings/0/message"), "the model is told which field is blank: {repair}");

    assert_eq!(gh_problems(&launcher, &tmp.path().join("out/findings.sarif")), Vec::<String>::new());
    assert_eq!(naming_warnings(&launcher, &tmp.path().join("out/findings.sarif")), Vec::<String>::new());
    let log = read_log(tmp.path());
    let run = &log["runs"][0];
    assert!(run["automationDetails"]["id"].as_str().unwrap().starts_with("dracode/findings/"), "{}", run["automationDetails"]);
    for rule in run["tool"]["driver"]["rules"].as_array().unwrap() {
        assert!(rule["fullDescription"]["text"].as_str().is_some_and(|t| !t.trim().is_empty()), "{rule}");
        assert!(rule["help"]["text"].as_str().is_some_and(|t| !t.trim().is_empty()), "{rule}");
    }
    let results = run["results"].as_array().unwrap();
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"]["region"],
        json!({"startLine": 2, "startColumn": 5, "endLine": 2, "endColumn": 30})
    );
    let prints: Vec<&Value> = results.iter().map(|r| &r["partialFingerprints"]).collect();
    assert!(prints.iter().all(|p| p.as_object().is_some_and(|m| !m.is_empty())), "{prints:?}");
    assert_ne!(prints[1], prints[2], "two findings on the same lines are told apart");
}

/// 30,000 findings: GitHub refuses a run of more than 25,000 results, so the log keeps the
/// 25,000 most severe (errors first), says so with a count on stderr and in the log, and still
/// passes the ingestion rules and stays under GitHub's size limit.
#[tokio::test(flavor = "multi_thread")]
async fn thirty_thousand_findings_are_capped_with_a_warning_and_a_count() {
    let Some(launcher) = multitool() else { return };
    let severity = |i: usize| match i % 3 {
        0 => "note",
        1 => "warning",
        _ => "error",
    };
    let findings: Vec<Value> = (0..30_000)
        .map(|i| json!({"rule_id": format!("rule-{}", i % 7), "message": format!("finding number {i}"), "file": "src/lib.rs", "start_line": 1 + i % 50, "severity": severity(i)}))
        .collect();
    let server = OpenAiServer::start_with_key(
        KEY,
        vec![ScriptedReply::tool_call("c1", "final_answer", json!({ "findings": findings }), Tokens::new(20, 5))],
    )
    .await;
    let lib: String = (1..=60).map(|i| format!("line {i}\n")).collect();
    let tmp = project(&server, &[("src/lib.rs", &lib)]);
    let (code, stderr) = run(tmp.path()).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("findings.sarif keeps 25000 of 30000 findings") && stderr.contains("5000 left out"),
        "a warning with the count: {stderr}"
    );
    let log = read_log(tmp.path());
    assert_eq!(log["runs"].as_array().unwrap().len(), 1);
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 25_000);
    assert_eq!(log["runs"][0]["properties"]["dracodeFindingsLeftOut"], 5000);
    let levels = |level: &str| results.iter().filter(|r| r["level"] == level).count();
    assert_eq!((levels("error"), levels("warning"), levels("note")), (10_000, 10_000, 5_000), "the most severe are kept");
    let size = std::fs::metadata(tmp.path().join("out/findings.sarif")).unwrap().len();
    assert!(size < 10 * 1024 * 1024, "under GitHub's 10 MB even before gzip: {size}");
    assert_eq!(gh_problems(&launcher, &tmp.path().join("out/findings.sarif")), Vec::<String>::new());
}
