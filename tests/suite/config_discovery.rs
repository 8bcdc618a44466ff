//! Where `dracode.toml` is found (issue 29): from the current folder up to the repository's
//! root, else from the manifest's folder up; `--config` wins; every run names the file it used
//! (`run.started.config_files`, `--dry-run`, `dracode config`), and `list` shows the provider and
//! model `run` would use.

use crate::support::cli::{dracode, git_repo, read_jsonl};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A replayed answer that changes nothing and ends the task.
const ANSWER: &str = r#"[{"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}]"#;

/// `repo/` (a git repository) holding `dracode.toml` (a `replay` default provider whose model
/// is `from-root`) and `ci/tasks.toml` (one task, no provider of its own); `home/` is HOME.
fn repo_with_config_at_its_root() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let tasks = "[[tasks]]\nid = \"t\"\nprompt = \"p\"\nreplay = \"t.json\"\nrequire_change = false\n";
    git_repo(&repo, &[("ci/tasks.toml", tasks), ("ci/t.json", ANSWER), (".gitignore", "out/\n")]);
    std::fs::write(repo.join("dracode.toml"), "provider = \"rp\"\n[providers.rp]\ntype = \"replay\"\nmodel = \"from-root\"\n").unwrap();
    std::fs::create_dir(tmp.path().join("home")).unwrap();
    (tmp, repo)
}

/// `dracode args…` in `cwd` with HOME at `home`; (exit code, stdout, stderr).
fn run_in(cwd: &Path, home: &Path, args: &[&str]) -> (i32, String, String) {
    let out = dracode(cwd).env("HOME", home).args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// `dracode config --format json` in `cwd` (extra args after), parsed.
fn config_json(cwd: &Path, home: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["config", "--format", "json"];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = run_in(cwd, home, &args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn a_run_in_a_subfolder_uses_the_repository_roots_config_and_says_so() {
    let (tmp, repo) = repo_with_config_at_its_root();
    let home = tmp.path().join("home");
    let ci = repo.join("ci");
    let root_config = repo.join("dracode.toml").canonicalize().unwrap();

    let (code, stdout, stderr) = run_in(&ci, &home, &["run", "tasks.toml", "--dry-run"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("provider=rp model=from-root"), "{stdout}");
    assert!(stderr.contains(&format!("config: {}", root_config.display())), "{stderr}");

    let (code, stdout, stderr) = run_in(&ci, &home, &["run", "tasks.toml", "--out", "../out"]);
    assert_eq!(code, 0, "the root's provider, not the built-in openai: {stdout}{stderr}");
    let events = read_jsonl(&repo.join("out/results.jsonl"));
    assert_eq!(events[0]["type"], "run.started");
    assert_eq!(events[0]["config_files"], json!([root_config.display().to_string()]));

    let shown = config_json(&ci, &home, &[]);
    assert_eq!(shown["files"], json!([root_config.display().to_string()]), "{shown}");
    assert_eq!(
        (shown["provider"].as_str(), shown["type"].as_str(), shown["model"].as_str()),
        (Some("rp"), Some("replay"), Some("from-root"))
    );
    let (code, text, stderr) = run_in(&ci, &home, &["config"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(text.contains(&root_config.display().to_string()) && text.contains("rp") && text.contains("from-root"), "{text}");

    // The local overlay beside the found file applies too, and is named.
    std::fs::write(repo.join("dracode.local.toml"), "[providers.rp]\nmodel = \"from-local\"\n").unwrap();
    let shown = config_json(&ci, &home, &[]);
    let local = repo.join("dracode.local.toml").canonicalize().unwrap();
    assert_eq!(shown["files"], json!([root_config.display().to_string(), local.display().to_string()]));
    assert_eq!(shown["model"], "from-local");
    std::fs::remove_file(&local).unwrap();

    // Nearest to the current folder first: a config in ci/ wins over the root's.
    std::fs::write(ci.join("dracode.toml"), "provider = \"rp\"\n[providers.rp]\ntype = \"replay\"\nmodel = \"from-ci\"\n").unwrap();
    assert_eq!(config_json(&ci, &home, &[])["model"], "from-ci");
    // --config wins over every found file.
    std::fs::write(tmp.path().join("explicit.toml"), "provider = \"ex\"\n[providers.ex]\ntype = \"replay\"\nmodel = \"m-ex\"\n").unwrap();
    let explicit = tmp.path().join("explicit.toml");
    let shown = config_json(&ci, &home, &["--config", explicit.to_str().unwrap()]);
    assert_eq!((shown["provider"].as_str(), shown["model"].as_str()), (Some("ex"), Some("m-ex")), "{shown}");
}

#[test]
fn the_search_stops_at_the_repository_root_and_falls_back_to_the_manifests_folder() {
    let (tmp, repo) = repo_with_config_at_its_root();
    let home = tmp.path().join("home");
    let root_config = repo.join("dracode.toml").canonicalize().unwrap();
    // A config above the repository is not the repository's: never read from inside it.
    std::fs::write(tmp.path().join("dracode.toml"), "provider = \"above\"\n[providers.above]\ntype = \"replay\"\n").unwrap();
    let inner = repo.join("ci/inner");
    git_repo(&inner, &[("x.txt", "x\n")]);
    let shown = config_json(&inner, &home, &[]);
    assert_eq!((shown["files"].clone(), shown["provider"].as_str()), (json!([]), Some("openai")), "stops at inner's root: {shown}");

    // From a folder outside the repository, the manifest's folder is searched up to its root.
    let elsewhere = home.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let manifest = repo.join("ci/tasks.toml");
    let (code, stdout, stderr) = run_in(&elsewhere, &home, &["run", manifest.to_str().unwrap(), "--dry-run"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("provider=rp model=from-root"), "{stdout}");
    assert!(stderr.contains(&format!("config: {}", root_config.display())), "{stderr}");
    // Outside any repository the search goes up to HOME (not included): home/dracode.toml is
    // not read from home/elsewhere/sub, home/elsewhere/dracode.toml is.
    std::fs::write(home.join("dracode.toml"), "provider = \"home\"\n[providers.home]\ntype = \"replay\"\n").unwrap();
    let sub = elsewhere.join("sub");
    std::fs::create_dir(&sub).unwrap();
    assert_eq!(config_json(&sub, &home, &[])["files"], json!([]));
    std::fs::write(elsewhere.join("dracode.toml"), "provider = \"near\"\n[providers.near]\ntype = \"replay\"\n").unwrap();
    assert_eq!(config_json(&sub, &home, &[])["provider"], "near");
    // The current folder's chain wins over the manifest's.
    let (_, stdout, _) = run_in(&sub, &home, &["run", manifest.to_str().unwrap(), "--dry-run"]);
    assert!(stdout.contains("provider=near"), "{stdout}");
}

#[test]
fn list_shows_the_provider_and_model_run_would_use() {
    let (tmp, repo) = repo_with_config_at_its_root();
    let home = tmp.path().join("home");
    let ci = repo.join("ci");
    std::fs::write(
        ci.join("more.toml"),
        "[[tasks]]\nid = \"own\"\nprompt = \"p\"\nmodel = \"m2\"\n[[tasks]]\nid = \"other\"\nprompt = \"p\"\nprovider = \"openai\"\n",
    )
    .unwrap();
    let (code, stdout, stderr) = run_in(&ci, &home, &["list", "tasks.toml", "more.toml", "--format", "json"]);
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let pm = |l: &Value| (l["id"].as_str().unwrap().to_string(), l["provider"].clone(), l["model"].clone());
    assert_eq!(
        lines.iter().map(pm).collect::<Vec<_>>(),
        [
            ("t".to_string(), json!("rp"), json!("from-root")),
            ("own".to_string(), json!("rp"), json!("m2")),
            ("other".to_string(), json!("openai"), json!("gpt-4o")),
        ]
    );
}
