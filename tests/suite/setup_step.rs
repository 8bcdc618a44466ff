//! Issue 29, "a batch setup step": `[setup]` runs once per batch, confined, on the base; what it
//! makes reaches every task's workspace (at the task's own path) without entering its patch and
//! without letting one task change what another reads; a failing setup ends the batch with
//! exit 5 before any agent; `--cache` keys include the setup.

use crate::support::cli::{dracode, events, finished, git, git_repo, read_jsonl, shell_turns};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A scratch folder with a git repository `repo/` and a HOME of its own.
struct Batch {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

/// What one run left.
struct Ran {
    code: i32,
    stderr: String,
    events: Vec<Value>,
    out: PathBuf,
}

impl Batch {
    fn new(files: &[(&str, &str)]) -> Batch {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        git_repo(&root.join("repo"), files);
        Batch { _tmp: tmp, root }
    }

    /// Writes a manifest of `setup` (a TOML table body) and one task per `(id, commands)`, each
    /// checked by `check`, and runs it with `args`.
    fn run(&self, name: &str, setup: &str, check: &str, tasks: &[(&str, &[&str])], args: &[&str]) -> Ran {
        self.run_with(name, setup, check, tasks, args, &[])
    }

    /// [`Batch::run`] with the variables `env` set for dracode too.
    fn run_with(&self, name: &str, setup: &str, check: &str, tasks: &[(&str, &[&str])], args: &[&str], env: &[(String, String)]) -> Ran {
        let mut manifest = format!(
            "[setup]\n{setup}\n\n[defaults]\nprovider = \"replay\"\nreplay = \"replay-{name}\"\nrepo = \"repo\"\nisolation = \"worktree\"\nrequire_change = false\ncheck = {check:?}\n"
        );
        let replay = self.root.join(format!("replay-{name}"));
        std::fs::create_dir_all(&replay).unwrap();
        for (id, commands) in tasks {
            let commands: Vec<String> = commands.iter().map(std::string::ToString::to_string).collect();
            std::fs::write(replay.join(format!("{id}.json")), shell_turns(&commands, 20, "done").to_string()).unwrap();
            manifest.push_str(&format!("\n[[tasks]]\nid = \"{id}\"\nprompt = \"work\"\n"));
        }
        std::fs::write(self.root.join(format!("{name}.toml")), manifest).unwrap();
        let out = self.root.join(format!("out-{name}"));
        let mut cmd = dracode(&self.root);
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let output = cmd.arg("run").arg(format!("{name}.toml")).arg("--out").arg(&out).args(args).output().unwrap();
        let results = out.join("results.jsonl");
        Ran {
            code: output.status.code().unwrap_or(-1),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            events: if results.exists() { read_jsonl(&results) } else { Vec::new() },
            out,
        }
    }

    fn repo(&self) -> PathBuf {
        self.root.join("repo")
    }
}

impl Ran {
    fn status(&self, id: &str) -> String {
        finished(&self.events, id)["status"].as_str().unwrap_or("").to_string()
    }

    fn setup_finished(&self) -> &Value {
        let all = events(&self.events, "setup.finished");
        assert_eq!(all.len(), 1, "one setup.finished: {:?}", self.events);
        all[0]
    }

    fn patch(&self, id: &str) -> String {
        std::fs::read_to_string(self.out.join("diffs").join(format!("{id}.patch"))).unwrap_or_default()
    }
}

/// The repository's `git status --porcelain`, its ignored files included.
fn status_of(repo: &Path) -> String {
    git(repo, &["status", "--porcelain", "--ignored"])
}

/// A setup that makes an ignored `build/` and an unignored `deps/` holding its own path.
const MAKES: &str = r#"command = "mkdir -p build deps && echo built > build/out.txt && echo \"$PWD\" > deps/where""#;

/// A check that reads both, and wants `deps/where` to name the task's own workspace.
const READS: &str = r#"test "$(cat build/out.txt)" = built && test "$(cat deps/where)" = "$PWD""#;

#[test]
fn a_setup_runs_once_and_every_task_reads_what_it_made_at_its_own_path() {
    let b = Batch::new(&[("lib.sh", "echo lib\n"), (".gitignore", "/build/\n")]);
    let tasks: &[(&str, &[&str])] = &[("one", &["echo 1 >> notes.txt"]), ("two", &["echo 2 >> notes.txt"]), ("three", &[])];
    let r = b.run("ok", MAKES, READS, tasks, &["--jobs", "2"]);
    assert_eq!(r.code, 0, "{}\n{:?}", r.stderr, r.events);
    let started = events(&r.events, "setup.started");
    assert_eq!(started.len(), 1, "the setup runs once for the batch: {started:?}");
    assert_eq!(started[0]["tasks"], 3);
    let repo = b.root.join("repo").canonicalize().unwrap();
    assert_eq!(started[0]["repo"].as_str(), repo.to_str(), "the folder itself, not the manifest's way to it");
    let setup = r.setup_finished();
    assert_eq!((setup["exit_code"].as_i64(), &setup["error"]), (Some(0), &Value::Null), "{setup}");
    assert_eq!(setup["outputs"], serde_json::json!(["build", "deps"]), "{setup}");
    let first_task = r.events.iter().position(|e| e["type"] == "task.started").unwrap();
    let setup_end = r.events.iter().position(|e| e["type"] == "setup.finished").unwrap();
    assert!(setup_end < first_task, "no task starts before the setup ends");
    for id in ["one", "two", "three"] {
        assert_eq!(r.status(id), "passed", "{}", finished(&r.events, id));
        let patch = r.patch(id);
        assert!(!patch.contains("deps/") && !patch.contains("build/"), "the setup's outputs are not the task's change: {patch}");
    }
    assert!(r.patch("one").contains("notes.txt"), "the task's own change is: {}", r.patch("one"));
    assert_eq!(status_of(&b.repo()), "", "nothing is left in the user's repository");
}

#[test]
fn a_task_that_changes_what_the_setup_made_changes_no_other_task() {
    let b = Batch::new(&[("lib.sh", "echo lib\n"), (".gitignore", "/build/\n")]);
    let tasks: &[(&str, &[&str])] = &[("tamper", &["echo forged > build/out.txt && cat build/out.txt"]), ("after", &["cat build/out.txt"])];
    let r = b.run("tamper", MAKES, READS, tasks, &["--jobs", "1"]);
    let outputs: Vec<&str> = events(&r.events, "tool.completed").iter().map(|e| e["output"].as_str().unwrap_or("")).collect();
    assert!(outputs[0].contains("forged") && outputs[1].contains("built"), "each task reads its own copy: {outputs:?}");
    // What the tampering task changed is not recorded: its check's world holds the setup's
    // output as the setup left it.
    assert_eq!(r.status("tamper"), "passed", "{}", finished(&r.events, "tamper"));
    assert_eq!(finished(&r.events, "tamper")["files_changed"], serde_json::json!([]));
    assert_eq!(r.status("after"), "passed", "{}", finished(&r.events, "after"));
}

#[test]
fn a_failing_setup_ends_the_batch_with_exit_5_before_any_agent() {
    let b = Batch::new(&[("lib.sh", "echo lib\n")]);
    let setup = r#"command = "echo 'npm ERR! cannot reach the registry' >&2; exit 3""#;
    let r = b.run("fails", setup, "true", &[("one", &["touch ran"]), ("two", &[])], &[]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    let setup = r.setup_finished();
    assert_eq!(setup["exit_code"], 3);
    assert!(setup["output_tail"].as_str().unwrap().contains("cannot reach the registry"), "{setup}");
    assert!(events(&r.events, "task.started").is_empty(), "no agent ran: {:?}", r.events);
    for id in ["one", "two"] {
        let task = finished(&r.events, id);
        assert_eq!(task["status"], "error", "{task}");
        assert_eq!(task["error"]["kind"], "setup", "{task}");
        let message = task["error"]["message"].as_str().unwrap();
        assert!(message.contains("exited 3") && message.contains("no agent ran"), "{message}");
    }
    let summary = std::fs::read_to_string(r.out.join("summary.md")).unwrap();
    assert!(summary.contains("setup"), "the summary says why: {summary}");
}

#[test]
fn files_of_the_base_the_setup_changed_are_named_and_not_carried() {
    let b = Batch::new(&[("package-lock.json", "{\"lock\": 1}\n")]);
    let setup = r#"command = "echo '{\"lock\": 2}' > package-lock.json && mkdir node_modules && touch node_modules/x.js""#;
    let check = r#"grep -q '"lock": 1' package-lock.json && test -f node_modules/x.js"#;
    let r = b.run("changed", setup, check, &[("one", &[])], &[]);
    assert_eq!(r.code, 0, "{}\n{:?}", r.stderr, r.events);
    let setup = r.setup_finished();
    assert_eq!(setup["not_carried"], serde_json::json!(["package-lock.json"]), "{setup}");
    assert_eq!(setup["outputs"], serde_json::json!(["node_modules"]), "{setup}");
}

#[test]
fn a_virtualenv_the_setup_made_imports_each_tasks_own_source() {
    let python = "/usr/bin/python3";
    if !std::process::Command::new(python).args(["-m", "venv", "--help"]).output().is_ok_and(|o| o.status.success()) {
        return;
    }
    let b = Batch::new(&[("src/proj/__init__.py", "VALUE = 1\n"), (".gitignore", "/.venv/\n")]);
    // An editable install as pip makes one: a `.pth` file naming the source folder's absolute path.
    let setup = format!(
        r#"command = "{python} -m venv --without-pip .venv && echo \"$PWD/src\" > .venv/lib/python3.$({python} -c 'import sys; print(sys.version_info[1])')/site-packages/proj.pth""#
    );
    let check = r#".venv/bin/python -c "import os, proj; assert proj.__file__.startswith(os.getcwd()), proj.__file__; assert proj.VALUE == 2, proj.VALUE""#;
    let fix = "sed -i 's/VALUE = 1/VALUE = 2/' src/proj/__init__.py";
    let r = b.run("venv", &setup, check, &[("fix", &[fix]), ("nothing", &[])], &[]);
    let setup = r.setup_finished();
    assert_eq!(setup["error"], Value::Null, "{setup}");
    assert_eq!(r.status("fix"), "passed", "the venv imports the task's own fixed source: {}", finished(&r.events, "fix"));
    assert_eq!(r.status("nothing"), "failed", "and not another's: {}", finished(&r.events, "nothing"));
}

#[test]
fn cache_keys_include_the_setup() {
    let b = Batch::new(&[("lib.sh", "echo lib\n"), (".gitignore", "/build/\n")]);
    let cache = b.root.join("cache");
    let cache_arg = cache.to_str().unwrap();
    let tasks: &[(&str, &[&str])] = &[("one", &[])];
    let first = b.run("cached", MAKES, READS, tasks, &["--cache", cache_arg]);
    assert_eq!(first.status("one"), "passed", "{:?}", first.events);
    let again = b.run("cached", MAKES, READS, tasks, &["--cache", cache_arg]);
    assert_eq!(finished(&again.events, "one")["cached"], true, "{:?}", finished(&again.events, "one"));
    let other = MAKES.replace("echo built", "echo built ");
    let changed = b.run("cached", &other, READS, tasks, &["--cache", cache_arg]);
    assert_ne!(finished(&changed.events, "one")["cached"], true, "a changed setup runs the task afresh");
}

#[test]
fn a_setup_without_a_command_or_with_an_unknown_field_is_exit_2_naming_the_field() {
    let b = Batch::new(&[("lib.sh", "echo lib\n")]);
    for (setup, want) in [
        ("timeout = \"1m\"", "[setup] command: missing"),
        ("comand = \"true\"", "did you mean"),
        ("command = \"true\"\ntimeout = \"soon\"", "[setup] timeout:"),
        // As every limit: a unit is required and zero is refused.
        ("command = \"true\"\ntimeout = \"0s\"", "[setup] timeout: \"0s\" is zero"),
        ("command = \"true\"\ntimeout = \"600\"", "[setup] timeout: \"600\" has no unit"),
    ] {
        let r = b.run("bad", setup, "true", &[("one", &[])], &[]);
        assert_eq!(r.code, 2, "{setup}: {}", r.stderr);
        assert!(r.stderr.contains("bad.toml:") && r.stderr.contains(want), "{setup}: {}", r.stderr);
    }
}

#[test]
fn every_isolation_gets_the_setups_outputs_and_none_keeps_them_in_place() {
    for isolation in ["copy", "none"] {
        let b = Batch::new(&[("lib.sh", "echo lib\n"), (".gitignore", "/build/\n/deps/\n")]);
        let tasks: &[(&str, &[&str])] = &[("one", &["echo 1 >> notes.txt"]), ("two", &[])];
        let r = b.run(isolation, MAKES, READS, tasks, &["--isolation", isolation]);
        assert_eq!(r.code, 0, "{isolation}: {}\n{:?}", r.stderr, r.events);
        assert_eq!(r.setup_finished()["outputs"], serde_json::json!(["build", "deps"]), "{isolation}");
        assert!(!r.patch("one").contains("build/") && r.patch("one").contains("notes.txt"), "{isolation}: {}", r.patch("one"));
        // With `none` the setup ran in the user's folder, as the tasks do: its outputs stay there.
        assert_eq!(b.repo().join("build/out.txt").exists(), isolation == "none", "{isolation}");
    }
}

#[test]
fn sandbox_the_setup_is_confined_like_a_check() {
    if !crate::support::sandbox::supported() {
        return;
    }
    let b = Batch::new(&[("lib.sh", "echo lib\n")]);
    let outside = b.root.join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "s3cr3t").unwrap();
    let setup =
        format!("command = \"cat {0}/secret.txt > stolen.txt; echo planted > {0}/planted.txt; test -s stolen.txt\"", outside.display());
    let r = b.run("confined", &setup, "true", &[("one", &[])], &[]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(!outside.join("planted.txt").exists(), "the setup cannot write outside its workspace");
    let setup = r.setup_finished();
    assert!(setup["error"].as_str().is_some(), "{setup}");
    assert!(!setup.to_string().contains("s3cr3t"), "nor read outside what a check may: {setup}");
}

#[test]
fn an_interrupt_during_the_setup_ends_it_at_once_and_every_task_is_cancelled() {
    let b = Batch::new(&[("lib.sh", "echo lib\n")]);
    // The manifest and recordings, written by a run that fails fast on a bad flag.
    let _ = b.run("slow", "command = \"touch started && sleep 60\"", "true", &[("one", &[]), ("two", &[])], &["--no-such-flag"]);
    let out = b.root.join("out-slow");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dracode"))
        .current_dir(&b.root)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &b.root)
        .args(["run", "slow.toml", "--out"])
        .arg(&out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let started = || std::fs::read_to_string(out.join("results.jsonl")).is_ok_and(|t| t.contains("setup.started"));
    while !started() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(started(), "the setup started");
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let at = std::time::Instant::now();
    let status = child.wait().unwrap();
    assert!(at.elapsed() < std::time::Duration::from_secs(15), "the interrupt took {:?}", at.elapsed());
    assert_eq!(status.code(), Some(130));
    let all = read_jsonl(&out.join("results.jsonl"));
    assert_eq!(events(&all, "setup.finished").len(), 1, "{all:?}");
    for id in ["one", "two"] {
        assert_eq!(finished(&all, id)["status"], "cancelled", "{}", finished(&all, id));
    }
    assert_eq!(all.last().unwrap()["exit_code"], 130);
}

/// A project whose version setuptools-scm takes from its git tag.
const SCM_PYPROJECT: &str = r#"[build-system]
requires = ["setuptools>=64", "setuptools-scm>=8"]
build-backend = "setuptools.build_meta"

[project]
name = "scmdemo"
dynamic = ["version"]

[tool.setuptools_scm]
"#;

/// Whether `python3` makes virtualenvs and pip's package index (whichever pip's own
/// configuration names) serves `package`; a note says why not (a panic under
/// `DRACODE_REQUIRE_EXAMPLES=1`), as for the Python example.
fn python_and_index(package: &str) -> bool {
    use crate::suite::examples::{present, runs};
    if !present("setuptools-scm setup", runs("python3", &["-c", "import venv, ensurepip"]), "python3 with venv and ensurepip") {
        return false;
    }
    let probe = tempfile::tempdir().unwrap();
    let dir = probe.path().to_str().unwrap();
    let args = ["-m", "pip", "download", "--quiet", "--no-deps", "--retries", "0", "--timeout", "15", "-d", dir, package];
    present("setuptools-scm setup", runs("python3", &args), &format!("pip's package index (its setup installs {package})"))
}

/// The toolchain variables a Python on PATH may need (pyenv's shims), as the example test passes.
fn python_env() -> Vec<(String, String)> {
    std::env::vars().filter(|(k, _)| k == "PYENV_ROOT").collect()
}

#[test]
fn a_setuptools_scm_project_installs_in_the_setup_at_its_tags_version() {
    if !python_and_index("setuptools-scm") {
        return;
    }
    let files = [("pyproject.toml", SCM_PYPROJECT), ("src/scmdemo/__init__.py", "VALUE = 1\n"), (".gitignore", "/.venv/\n")];
    let b = Batch::new(&files);
    git(&b.repo(), &["tag", "-a", "v1.2.3", "-m", "release 1.2.3"]);
    // A global git configuration, as on a developer's machine or a CI runner that set
    // `user.name`: confined commands may not read it.
    std::fs::write(b.root.join(".gitconfig"), "[user]\n\tname = Someone\n\temail = someone@localhost\n").unwrap();
    let setup = "command = \"python3 -m venv .venv && .venv/bin/pip install -e .\"\nnetwork = true\ntimeout = \"5m\"";
    let check = r#".venv/bin/python -c "import importlib.metadata as m; v = m.version('scmdemo'); print(v); assert v == '1.2.3', v""#;
    let r = b.run_with("scm", setup, check, &[("one", &[])], &[], &python_env());
    let setup = r.setup_finished();
    assert_eq!((setup["exit_code"].as_i64(), &setup["error"]), (Some(0), &Value::Null), "the project installs: {setup}");
    assert_eq!(r.status("one"), "passed", "at the version of its tag, as in a clone: {}", finished(&r.events, "one"));
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn a_failed_setup_shows_the_line_that_says_why_not_pips_notice() {
    let b = Batch::new(&[("lib.sh", "echo lib\n")]);
    // pip's shape: the build backend's error, 30 lines of its output, pip's frame, pip's notice.
    let setup = r#"command = "echo '  error: subprocess-exited-with-error'; echo '      LookupError: unable to detect version for ..'; for i in $(seq 30); do echo \"      line $i\"; done; echo '  note: This error originates from a subprocess'; echo; echo '[notice] A new release of pip is available: 23.2.1 -> 26.3'; echo '[notice] To update, run: pip install --upgrade pip'; exit 1""#;
    let r = b.run("telling", setup, "true", &[("one", &[])], &[]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    let why = "LookupError: unable to detect version for ..";
    let error = r.setup_finished()["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains(why), "setup.finished.error: {error}");
    let message = finished(&r.events, "one")["error"]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains(why) && message.contains("no agent ran"), "the task's reason: {message}");
    // The progress line of the setup that failed, and the line under it.
    let shown: Vec<&str> = r.stderr.lines().skip_while(|l| !l.contains("it exited 1")).take(2).collect();
    assert!(shown[0].ends_with(why), "{}", r.stderr);
    assert!(!shown[1].trim_start().starts_with("[notice]"), "{}", r.stderr);
    let summary = std::fs::read_to_string(r.out.join("summary.md")).unwrap();
    assert!(summary.contains(why), "{summary}");
}

#[test]
fn a_dead_provider_endpoint_is_found_before_the_setup_runs() {
    let b = Batch::new(&[("lib.sh", "echo lib\n")]);
    // Port 9 of loopback: nothing listens there.
    let config = "[providers.own]\ntype = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"my-finetune\"\n";
    std::fs::write(b.root.join("dracode.toml"), config).unwrap();
    let manifest = "[setup]\ncommand = \"touch setup-ran\"\n\n[defaults]\nprovider = \"own\"\nrepo = \"repo\"\nisolation = \"none\"\n\
                    check = \"true\"\ncheck_before = true\n\n[[tasks]]\nid = \"one\"\nprompt = \"work\"\n";
    std::fs::write(b.root.join("dead.toml"), manifest).unwrap();
    let out = b.root.join("out-dead");
    let started = std::time::Instant::now();
    let output =
        dracode(&b.root).env("OPENAI_API_KEY", "sk-test-0123456789").args(["run", "dead.toml", "--out"]).arg(&out).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(5), "{stderr}");
    assert!(!b.repo().join("setup-ran").exists(), "the setup did not run");
    let all = read_jsonl(&out.join("results.jsonl"));
    assert!(events(&all, "setup.started").is_empty() && events(&all, "task.started").is_empty(), "{all:?}");
    let task = finished(&all, "one");
    assert_eq!((&task["status"], &task["error"]["kind"]), (&Value::from("error"), &Value::from("network")), "{task}");
    let message = task["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cannot connect to 127.0.0.1:9") && message.contains("no agent ran"), "{message}");
    assert!(stderr.contains("cannot connect to 127.0.0.1:9"), "{stderr}");
    // Refused connections are retried as a call's are, then no longer.
    assert!(started.elapsed() < std::time::Duration::from_secs(40), "took {:?}", started.elapsed());
}

#[test]
fn a_run_whose_every_task_is_a_cache_hit_runs_no_setup() {
    let b = Batch::new(&[("lib.sh", "echo lib\n"), (".gitignore", "/build/\n")]);
    let cache = b.root.join("cache");
    let args = ["--cache", cache.to_str().unwrap()];
    let tasks: &[(&str, &[&str])] = &[("one", &[]), ("two", &[])];
    let first = b.run("hits", MAKES, READS, tasks, &args);
    assert_eq!((first.code, events(&first.events, "setup.started").len()), (0, 1), "{}", first.stderr);
    let again = b.run("hits", MAKES, READS, tasks, &args);
    assert_eq!(again.code, 0, "{}", again.stderr);
    for id in ["one", "two"] {
        assert_eq!(finished(&again.events, id)["cached"], true, "{}", finished(&again.events, id));
    }
    assert!(events(&again.events, "setup.started").is_empty(), "no task runs, so no setup: {:?}", again.events);
    assert!(!again.stderr.contains("SETUP"), "{}", again.stderr);
}

#[test]
fn a_shard_runs_only_the_setups_of_its_own_tasks() {
    let b = Batch::new(&[("lib.sh", "echo lib\n")]);
    for name in ["first", "second"] {
        let manifest = format!(
            "[setup]\ncommand = \"echo {name}\"\n\n[defaults]\nprovider = \"replay\"\nreplay = \"replay\"\nrepo = \"repo\"\n\
             require_change = false\ncheck = \"true\"\n\n[[tasks]]\nid = \"{name}\"\nprompt = \"work\"\n"
        );
        std::fs::write(b.root.join(format!("{name}.toml")), manifest).unwrap();
        std::fs::create_dir_all(b.root.join("replay")).unwrap();
        std::fs::write(b.root.join(format!("replay/{name}.json")), shell_turns(&[], 20, "done").to_string()).unwrap();
    }
    for (shard, want) in [("slice:1/2", vec!["echo first"]), ("slice:2/2", vec!["echo second"]), ("slice:3/3", vec![])] {
        let out = b.root.join(format!("out-{}", shard.replace([':', '/'], "-")));
        let output = dracode(&b.root).args(["run", "first.toml", "second.toml", "--shard", shard, "--out"]).arg(&out).output().unwrap();
        let all = read_jsonl(&out.join("results.jsonl"));
        let setups: Vec<&str> = events(&all, "setup.started").iter().map(|e| e["command"].as_str().unwrap_or_default()).collect();
        assert_eq!(setups, want, "{shard}: {}", String::from_utf8_lossy(&output.stderr));
    }
}

#[test]
fn every_folder_of_the_run_is_gone_when_run_finished_is_written() {
    // A setup's `node_modules` took seconds to remove after the TOTAL line: the folders of the
    // run (tasks, checks, the setup's workspace, the copy bases) are removed before
    // `run.finished`, so the TOTAL line counts that time and the process ends when it prints.
    let b = Batch::new(&[("lib.sh", "echo lib\n")]);
    let setup = r#"command = "mkdir -p deps && for i in $(seq 1 3000); do echo $i > deps/f$i; done""#;
    let _ = b.run("many", setup, "test -e deps/f3000", &[("one", &[]), ("two", &[])], &["--no-such-flag"]);
    let tmp = b.root.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dracode"))
        .current_dir(&b.root)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &b.root)
        .env("TMPDIR", &tmp)
        .args(["run", "many.toml", "--quiet", "--jsonl", "/dev/stdout", "--out"])
        .arg(b.root.join("out-many"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ours = || -> Vec<String> {
        let names = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
        names.filter(|n| n.starts_with("dracode-")).collect()
    };
    let mut left_at_the_end = None;
    for line in std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap())) {
        let line = line.unwrap();
        if line.contains("\"type\":\"run.finished\"") {
            left_at_the_end = Some(ours());
        }
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert_eq!(left_at_the_end, Some(Vec::new()), "folders of the run still there when run.finished was written");
}
