//! Issue 27: masking never corrupts an artifact that must be exact. Patches, task ids and file
//! names are never rewritten; a key too short or too common to be a secret (`bytes`, `wrong`,
//! `sk-no-key-required`) is not masked at all; a real secret found in a task's changes ends the
//! task `error`/`secret` with its patch withheld (and no commit), never silently altered; free
//! text (tool output, the agent's answer) stays masked.

use crate::support::cli::{dracode, files_containing, finished, git, git_repo, read_jsonl, shell_turns};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A scratch folder: `repo/` (a git repository), a `dracode.toml` declaring a replay provider
/// per `(name, api_key)`, and one recording `<task>.json` per task that runs its commands.
struct Scene {
    _dir: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
}

impl Scene {
    fn new(providers: &[(&str, &str)]) -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let repo = root.join("repo");
        git_repo(&repo, &[("src/conv.py", "def to_text(n):\n    return str(n)\n"), ("README.md", "project\n")]);
        let config: String =
            providers.iter().map(|(name, key)| format!("[providers.{name}]\ntype = \"replay\"\napi_key = \"{key}\"\n")).collect();
        std::fs::write(root.join("dracode.toml"), config).unwrap();
        Scene { _dir: dir, root, repo }
    }

    /// A `[[tasks]]` entry `id` on `provider` whose model runs `commands`, then answers `last`.
    fn task(&self, id: &str, provider: &str, commands: &[&str], last: &str, fields: &str) -> String {
        let commands: Vec<String> = commands.iter().map(ToString::to_string).collect();
        std::fs::write(self.root.join(format!("{id}.json")), shell_turns(&commands, 20, last).to_string()).unwrap();
        format!("[[tasks]]\nid = \"{id}\"\nprompt = \"work\"\nprovider = \"{provider}\"\nreplay = \"{id}.json\"\n{fields}\n")
    }

    /// Runs `tasks` (repo, copy isolation) with `env` on top of dracode's; returns the exit
    /// code, stdout + stderr and the events.
    fn run(&self, tasks: &str, out: &str, env: &[(&str, &str)], args: &[&str]) -> (i32, String, Vec<Value>) {
        let manifest = format!("[defaults]\nrepo = \"repo\"\nisolation = \"copy\"\n{tasks}");
        std::fs::write(self.root.join("tasks.toml"), manifest).unwrap();
        let mut cmd = dracode(&self.root);
        cmd.args(["run", "tasks.toml", "--out", out]).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let output = cmd.output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (output.status.code().unwrap_or(-1), text, read_jsonl(&self.root.join(out).join("results.jsonl")))
    }
}

/// `git apply --check` of `patch` on a fresh clone of `repo`, and the applied file `name`.
fn applied(repo: &Path, patch: &Path, name: &str) -> String {
    let clone = repo.with_file_name(format!("clone-{}", patch.file_name().unwrap().to_string_lossy()));
    git(repo.parent().unwrap(), &["clone", "-q", &repo.to_string_lossy(), &clone.to_string_lossy()]);
    git(&clone, &["apply", &patch.to_string_lossy()]);
    std::fs::read_to_string(clone.join(name)).unwrap()
}

#[test]
fn a_patch_holding_a_short_or_placeholder_key_is_kept_byte_for_byte_and_applies() {
    let scene = Scene::new(&[("local", "bytes"), ("vllm", "sk-no-key-required")]);
    let bytes = scene.task(
        "bytes",
        "local",
        &["printf 'def int_to_bytes(n):\\n    return n.to_bytes(8, \"big\")\\n' >> src/conv.py"],
        "added int_to_bytes",
        "",
    );
    let docs =
        scene.task("docs", "vllm", &["printf 'Start vLLM, then set api_key = \"sk-no-key-required\".\\n' >> README.md"], "documented", "");
    let (code, output, events) = scene.run(&format!("{bytes}{docs}"), "out", &[], &[]);
    assert_eq!(code, 0, "{output}");
    let conv = applied(&scene.repo, &scene.root.join("out/diffs/bytes.patch"), "src/conv.py");
    assert!(conv.contains("def int_to_bytes(n):\n    return n.to_bytes(8, \"big\")\n"), "{conv}");
    let readme = applied(&scene.repo, &scene.root.join("out/diffs/docs.patch"), "README.md");
    assert!(readme.contains("api_key = \"sk-no-key-required\""), "{readme}");
    assert!(files_containing(&scene.root.join("out"), "[REDACTED]").is_empty(), "nothing was a secret");
    assert_eq!(finished(&events, "bytes")["result"], "added int_to_bytes");
}

#[test]
fn a_task_id_is_exact_in_every_artifact_and_rerun_failed_finds_it() {
    // `wrong` is too short to be a secret; `staging-key-2026` is one, and a task id holding it
    // is still the user's own word.
    let scene = Scene::new(&[("local", "wrong"), ("staging", "staging-key-2026")]);
    let wrong = scene.task("wrong-key", "local", &["echo x >> README.md"], "done", "check = \"false\"");
    let rotate = scene.task("rotate-staging-key-2026", "staging", &["echo y >> README.md"], "done", "check = \"false\"");
    let tasks = format!("{wrong}{rotate}");
    let (code, output, events) = scene.run(&tasks, "first", &[], &[]);
    assert_eq!(code, 1, "{output}");
    for id in ["wrong-key", "rotate-staging-key-2026"] {
        assert_eq!(finished(&events, id)["status"], "failed", "{output}");
        let junit = std::fs::read_to_string(scene.root.join("first/junit.xml")).unwrap();
        assert!(junit.contains(&format!("name=\"{id}\"")), "{junit}");
        let summary = std::fs::read_to_string(scene.root.join("first/summary.md")).unwrap();
        assert!(summary.contains(id), "{summary}");
        assert!(output.contains(id), "the progress lines name {id}: {output}");
    }
    assert!(files_containing(&scene.root.join("first"), "[REDACTED]-key").is_empty());
    let (code, output, events) = scene.run(&tasks, "second", &[], &["--rerun-failed", "first/results.jsonl"]);
    assert_eq!(code, 1, "{output}");
    let mut rerun: Vec<&str> = events.iter().filter(|e| e["type"] == "task.started").filter_map(|e| e["task_id"].as_str()).collect();
    rerun.sort();
    assert_eq!(rerun, ["rotate-staging-key-2026", "wrong-key"], "{output}");
}

#[test]
fn attack_a_secret_written_into_the_changes_ends_the_task_secret_with_the_patch_withheld() {
    let secret = "q8Zr2LwX9vKp7TnY";
    let scene = Scene::new(&[("hosted", "${HOSTED_KEY}")]);
    let leak = format!("printf 'TOKEN = \"{secret}\"\\n' > src/settings.py && cat src/settings.py");
    let task = scene.task("leak", "hosted", &[&leak], &format!("I stored {secret} in settings"), "commit = true\nisolation = \"worktree\"");
    let (code, output, events) = scene.run(&task, "out", &[("HOSTED_KEY", secret)], &[]);
    assert_eq!(code, 5, "a task whose changes cannot be shown is not judged: {output}");
    let task = finished(&events, "leak");
    assert_eq!((task["status"].as_str(), task["error"]["kind"].as_str()), (Some("error"), Some("secret")), "{task}");
    let message = task["error"]["message"].as_str().unwrap();
    assert!(message.contains("providers.hosted.api_key") && message.contains("HOSTED_KEY"), "{message}");
    assert!(task.get("diff_path").is_none_or(Value::is_null), "{task}");
    assert!(task.get("branch").is_none_or(Value::is_null), "no commit: {task}");
    assert!(!scene.root.join("out/diffs/leak.patch").exists());
    assert!(!git(&scene.repo, &["branch", "--list", "dracode/*"]).contains("dracode/"), "nothing was committed");
    assert!(files_containing(&scene.root.join("out"), secret).is_empty(), "the value is nowhere in the output folder");
    assert!(!output.contains(secret), "{output}");
    // Free text stays masked: the command's output and the agent's answer.
    let tool = events.iter().find(|e| e["type"] == "tool.completed").unwrap();
    assert!(tool["output"].as_str().unwrap().contains("TOKEN = \"[REDACTED]\""), "{tool}");
    assert_eq!(task["result"], "I stored [REDACTED] in settings");
}
