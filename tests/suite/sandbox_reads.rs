//! Issue 17, reads by allowlist, through the real binary with a scripted model: what a task's
//! commands may read (the system, toolchains, the workspace, the TMPDIR, `read_paths`) and what
//! they may not (`$RUNNER_TEMP`, the rest of `$HOME`, other tasks' folders, `--out`); and a
//! legitimate task that builds, installs and tests while confined, leaving nothing outside its
//! own folders.

use super::attacks::{Scenario, value_of};
use crate::support::cli::{dracode, finished, git_repo, read_jsonl};
use crate::support::sandbox::supported;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[test]
fn sandbox_reads_hide_runner_temp_and_home_but_grant_read_paths() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let runner_temp = s.root.join("runner-temp");
    std::fs::create_dir_all(&runner_temp).unwrap();
    let token = "ghs_runnertemp_4b1e9";
    std::fs::write(runner_temp.join("git-credentials-x.config"), format!("[http]\n\textraheader = AUTHORIZATION: basic {token}\n"))
        .unwrap();
    std::fs::write(s.home.join("diary.txt"), "home-marker-77a1\n").unwrap();
    std::fs::create_dir_all(s.root.join("fixtures")).unwrap();
    std::fs::write(s.root.join("fixtures/data.txt"), "fixture-marker-3c9d\n").unwrap();
    let (rt, home, root) = (runner_temp.display(), s.home.display(), s.root.display());
    let commands = [
        format!("cat {rt}/git-credentials-x.config 2>&1; echo rc=$?"),
        format!("ls {rt} 2>&1; echo rc=$?"),
        format!("cat {home}/diary.txt 2>&1; echo rc=$?"),
        format!("ls {home} 2>&1; echo rc=$?"),
        format!("cat {root}/fixtures/data.txt 2>&1; echo rc=$?"),
    ];
    let runner_temp_env = runner_temp.display().to_string();
    let r = s.run("reads", &commands, "read_paths = [\"fixtures\"]", &[("RUNNER_TEMP", &runner_temp_env)], &[]);
    r.assert_finished("passed");
    let out = r.outputs();
    for (i, what) in ["the RUNNER_TEMP credentials", "RUNNER_TEMP", "an unlisted HOME file", "HOME"].iter().enumerate() {
        assert_ne!(value_of(out[i], "rc").as_deref(), Some("0"), "{what} was readable: {}", out[i]);
        assert!(out[i].contains("Permission denied"), "{what}: {}", out[i]);
    }
    assert!(!out[2].contains("home-marker"), "{}", out[2]);
    assert!(out[4].contains("fixture-marker-3c9d") && value_of(out[4], "rc").as_deref() == Some("0"), "read_paths: {}", out[4]);
    r.assert_nowhere(token);
}

/// Issue 29: dracode installed in `DIR/bin` and on PATH does not open `DIR` (other runs'
/// transcripts, a secret beside it): commands read the bin folder and the layout beside it
/// (`lib`), the tool still runs, and the run and `dracode sandbox` say what was left out.
#[test]
fn sandbox_a_bin_folder_on_path_opens_only_its_toolchain_layout_and_says_so() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let dir = s.root.join("install");
    for sub in ["bin", "lib", "runs/night-1/transcripts"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    std::fs::copy(env!("CARGO_BIN_EXE_dracode"), dir.join("bin/dracode")).unwrap();
    std::fs::write(dir.join("secret"), "install-secret-5e1d\n").unwrap();
    std::fs::write(dir.join("runs/night-1/transcripts/t.json"), "transcript-marker-90ab\n").unwrap();
    std::fs::write(dir.join("lib/helper.txt"), "lib-marker-11c2\n").unwrap();
    let d = dir.display();
    let commands = [
        format!("cat {d}/secret 2>&1; echo rc=$?"),
        format!("cat {d}/runs/night-1/transcripts/t.json 2>&1; echo rc=$?"),
        format!("cat {d}/lib/helper.txt; dracode --version; echo rc=$?"),
    ];
    let path = format!("{d}/bin:{}", std::env::var("PATH").unwrap_or_default());
    let r = s.run("pathbin", &commands, "", &[("PATH", &path)], &[]);
    r.assert_finished("passed");
    let out = r.outputs();
    for (i, what) in ["the secret beside the bin folder", "another run's transcript"].iter().enumerate() {
        assert_ne!(value_of(out[i], "rc").as_deref(), Some("0"), "{what} was readable: {}", out[i]);
        assert!(out[i].contains("Permission denied"), "{what}: {}", out[i]);
    }
    r.assert_nowhere("install-secret-5e1d");
    r.assert_nowhere("transcript-marker-90ab");
    assert!(out[2].contains("lib-marker-11c2") && value_of(out[2], "rc").as_deref() == Some("0"), "the layout and the tool: {}", out[2]);
    let warning = format!("PATH entry {d}/bin: {d} holds more than a toolchain (runs, secret), so commands may read only its bin, lib");
    assert!(r.stderr.contains(&format!("warning: {warning}")) && r.stderr.contains("read_paths"), "{}", r.stderr);
    let started = r.events.iter().find(|e| e["type"] == "run.started").unwrap();
    assert!(started["warnings"].as_array().unwrap().iter().any(|w| w.as_str().is_some_and(|w| w.starts_with(&warning))), "{started}");

    let view =
        dracode(&s.root).env("HOME", &s.home).env("PATH", &path).args(["sandbox", "--task", "attack", "pathbin.toml"]).output().unwrap();
    let text = String::from_utf8_lossy(&view.stdout);
    assert!(text.contains(&format!("warning: {warning}")), "{text}");
    assert!(text.contains(&format!("\n  {d}/lib  (the toolchain layout beside {d}/bin on PATH)\n")), "{text}");
    assert!(!text.contains(&format!("\n  {d}  (")), "{text}");
}

/// A scripted model's turns: `commands` by `run_command`, then a final answer.
fn script(commands: &[String]) -> Value {
    crate::support::cli::shell_turns(commands, 60, "done")
}

/// Events of a `--jsonl` file still being written (complete lines only).
fn events_so_far(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Waits up to 60 s for an event of `task` of type `kind`.
fn wait_for(path: &Path, task: &str, kind: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(e) = events_so_far(path).into_iter().find(|e| e["type"] == kind && e["task_id"] == task) {
            return e;
        }
        assert!(Instant::now() < deadline, "no {kind} for {task} in {}", std::fs::read_to_string(path).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sandbox_reads_tasks_at_jobs_2_cannot_read_each_other_or_the_out_folder() {
    if !supported() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    git_repo(&root.join("repo"), &[("README.md", "project\n")]);
    let (probe, out, home) = (root.join("probe"), root.join("out"), root.join("home"));
    for d in [&probe, &out, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    let p = probe.display();
    // A leaves markers in its TMPDIR and then its workspace (the test waits for the last), then
    // waits (up to 60 s) until B is done.
    let a = [format!(
        "echo tmp-marker-a81f > $TMPDIR/marker.txt; echo ws-marker-a81f > marker.txt; pwd; \
         i=0; while [ ! -e {p}/done ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo waited"
    )];
    // B reads the folders the test found for A (and its own, for control) and --out.
    let b = [format!(
        "i=0; while [ ! -e {p}/paths.txt ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; \
         for d in $(cat {p}/paths.txt); do echo \"== $d\"; ls $d 2>&1; cat $d/marker.txt 2>&1; done; \
         echo '== out'; ls {out} 2>&1; cat {out}/results.jsonl {out}/.gitignore 2>&1; echo probed",
        out = out.display()
    )];
    for (id, commands) in [("a", &a[..]), ("b", &b[..])] {
        std::fs::write(root.join(format!("{id}.json")), script(commands).to_string()).unwrap();
    }
    let manifest = "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\nisolation = \"worktree\"\nrequire_change = false\nread_paths = [\"probe\"]\n\
         [[tasks]]\nid = \"a\"\nprompt = \"a\"\nreplay = \"a.json\"\n[[tasks]]\nid = \"b\"\nprompt = \"b\"\nreplay = \"b.json\"\n";
    std::fs::write(root.join("tasks.toml"), manifest).unwrap();
    let jsonl = root.join("events.jsonl");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_dracode"));
    cmd.current_dir(&root).env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd.env("HOME", &home).args(["run", "tasks.toml", "--jobs", "2", "--out"]).arg(&out).arg("--jsonl").arg(&jsonl);
    let mut child = cmd.spawn().unwrap();
    let started = wait_for(&jsonl, "a", "task.started");
    wait_for(&jsonl, "b", "task.started");
    let a_workspace = PathBuf::from(started["workdir"].as_str().unwrap());
    let a_ws_marker = a_workspace.join("marker.txt");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !a_ws_marker.exists() {
        assert!(Instant::now() < deadline, "A never wrote its marker");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every task TMPDIR of this run: A's and B's own.
    let prefix = format!("dracode-task-{}-", child.id());
    let tmp_dirs: Vec<PathBuf> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path().join("tmp"))
        .collect();
    assert_eq!(tmp_dirs.len(), 2, "{tmp_dirs:?}");
    assert!(tmp_dirs.iter().any(|d| d.join("marker.txt").exists()), "A's TMPDIR marker: {tmp_dirs:?}");
    let mut paths = vec![a_workspace.clone()];
    paths.extend(tmp_dirs);
    std::fs::write(probe.join("paths.txt"), paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join("\n")).unwrap();
    wait_for(&jsonl, "b", "task.finished");
    std::fs::write(probe.join("done"), "").unwrap();
    assert!(child.wait().unwrap().success());
    let events = read_jsonl(&out.join("results.jsonl"));
    let b_output: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool.completed" && e["task_id"] == "b")
        .map(|e| e["output"].as_str().unwrap_or(""))
        .collect();
    let b_output = b_output.join("\n");
    assert!(b_output.contains("probed") && b_output.contains(&a_workspace.display().to_string()), "{b_output}");
    for marker in ["ws-marker-a81f", "tmp-marker-a81f", "README.md", "\"type\""] {
        assert!(!b_output.contains(marker), "task B read {marker}:\n{b_output}");
    }
    assert!(b_output.matches("Permission denied").count() >= 5, "{b_output}");
    assert_eq!(finished(&events, "a")["status"], "passed");
}

/// A Python interpreter this user can run that has `venv` (the one on PATH may live in a
/// folder another user cannot enter, such as root's pyenv).
fn usable_python(env: &[(String, String)]) -> Option<String> {
    ["python3", "/usr/bin/python3"].into_iter().map(String::from).find(|p| {
        std::process::Command::new(p)
            .args(["-c", "import venv, ensurepip"])
            .envs(env.iter().cloned())
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The variables cargo needs to find its toolchain when HOME is a scratch folder, if this user
/// can run cargo at all.
pub(crate) fn usable_cargo() -> Result<Vec<(String, String)>, String> {
    let home = std::env::var("HOME").unwrap_or_default();
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| format!("{home}/{default}"));
    let env = vec![("CARGO_HOME".to_string(), var("CARGO_HOME", ".cargo")), ("RUSTUP_HOME".to_string(), var("RUSTUP_HOME", ".rustup"))];
    match std::process::Command::new("cargo").arg("--version").envs(env.iter().cloned()).output() {
        Ok(o) if o.status.success() => Ok(env),
        Ok(o) => Err(format!("cargo does not run for this user: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => Err(format!("cargo does not run for this user: {e}")),
    }
}

/// Every path under `dir` with its size and modification time (empty when `dir` is absent).
fn tree_state(dir: &Path, depth: usize) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        let meta = entry.metadata().ok();
        out.push(format!("{} {:?} {:?}", path.display(), meta.as_ref().map(std::fs::Metadata::len), meta.and_then(|m| m.modified().ok())));
        if depth > 1 && entry.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(tree_state(&path, depth - 1));
        }
    }
    out.sort();
    out
}

/// The projects of the legitimate task: a tiny Rust crate, a Python package built into a wheel
/// by a script, and an npm project whose lock file names a local `file:` dependency.
fn projects(repo: &Path) {
    let files = [
        ("rust/Cargo.toml", "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
        (
            "rust/src/lib.rs",
            "pub fn add(a: i32, b: i32) -> i32 { a + b }\n#[cfg(test)]\nmod tests { #[test] fn adds() { assert_eq!(super::add(2, 2), 4); } }\n",
        ),
        ("py/localpkg.py", "VALUE = 'py-' + 'ok'\n"),
        (
            "py/make_wheel.py",
            "import zipfile\ninfo = 'localpkg-1.0.dist-info/'\nwith zipfile.ZipFile('localpkg-1.0-py3-none-any.whl', 'w') as z:\n    z.write('localpkg.py')\n    z.writestr(info + 'METADATA', 'Metadata-Version: 2.1\\nName: localpkg\\nVersion: 1.0\\n')\n    z.writestr(info + 'WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n    z.writestr(info + 'RECORD', 'localpkg.py,,\\n' + info + 'METADATA,,\\n' + info + 'WHEEL,,\\n' + info + 'RECORD,,\\n')\n",
        ),
        ("node/app/package.json", "{\"name\": \"app\", \"version\": \"1.0.0\", \"dependencies\": {\"localdep\": \"file:../localdep\"}}\n"),
        ("node/localdep/package.json", "{\"name\": \"localdep\", \"version\": \"1.0.0\", \"main\": \"index.js\"}\n"),
        ("node/localdep/index.js", "module.exports = { value: 'npm-' + 'ok' };\n"),
        (
            "node/app/package-lock.json",
            "{\"name\": \"app\", \"version\": \"1.0.0\", \"lockfileVersion\": 3, \"requires\": true, \"packages\": {\
             \"\": {\"name\": \"app\", \"version\": \"1.0.0\", \"dependencies\": {\"localdep\": \"file:../localdep\"}},\
             \"../localdep\": {\"version\": \"1.0.0\"},\
             \"node_modules/localdep\": {\"resolved\": \"../localdep\", \"link\": true}}}\n",
        ),
    ];
    git_repo(repo, &files);
}

#[test]
fn sandbox_reads_a_legitimate_task_builds_installs_and_tests_confined() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    std::fs::remove_dir_all(&s.repo).unwrap();
    projects(&s.repo);
    let mut env: Vec<(String, String)> = vec![("HOME".into(), s.home.display().to_string())];
    let cargo = usable_cargo();
    if let Ok(vars) = &cargo {
        env.extend(vars.iter().cloned());
    }
    let python = usable_python(&env);
    let npm = std::process::Command::new("npm").arg("--version").output().is_ok_and(|o| o.status.success());
    let mut commands = Vec::new();
    match &cargo {
        Ok(_) => commands.push("cd rust && cargo build --offline -q 2>&1 && cargo test --offline -q 2>&1 && echo rust-ok".to_string()),
        Err(why) => eprintln!("skipping the Rust step: {why}"),
    }
    match &python {
        Some(py) => commands.push(format!(
            "cd py && {py} make_wheel.py && {py} -m venv .venv 2>&1 && .venv/bin/pip install -q --no-index ./localpkg-1.0-py3-none-any.whl 2>&1 \
             && .venv/bin/python -c 'import localpkg; print(localpkg.VALUE)' && ls \"$PIP_CACHE_DIR\" >/dev/null 2>&1; echo pip-cache=$PIP_CACHE_DIR"
        )),
        None => eprintln!("skipping the Python step: no python3 with venv runs for this user"),
    }
    if npm {
        commands.push(
            "cd node/app && npm ci --offline --no-audit --no-fund 2>&1 && node -e \"console.log(require('localdep').value)\" \
             && echo npm-cache=$npm_config_cache"
                .to_string(),
        );
    } else {
        eprintln!("skipping the npm step: npm is not installed");
    }
    let cargo_home = cargo.as_ref().ok().and_then(|v| v.iter().find(|(k, _)| k == "CARGO_HOME").map(|(_, v)| PathBuf::from(v)));
    let user_caches = |home: &Path| {
        let mut state = tree_state(home, 8);
        if let Some(cargo) = &cargo_home {
            state.extend(tree_state(cargo, 2));
        }
        state
    };
    let before = user_caches(&s.home);
    let vars: Vec<(&str, &str)> = env.iter().filter(|(k, _)| k != "HOME").map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let r = s.run("legit", &commands, "", &vars, &[]);
    r.assert_finished("passed");
    let out = r.all_output();
    let mut expected: Vec<&str> = Vec::new();
    if cargo.is_ok() {
        expected.extend(["rust-ok", "test result: ok"]);
    }
    if python.is_some() {
        expected.push("py-ok");
    }
    if npm {
        expected.push("npm-ok");
    }
    for word in expected {
        assert!(out.contains(word), "{word} missing:\n{out}");
    }
    for cache in ["pip-cache", "npm-cache"].iter().filter_map(|name| value_of(&out, name)) {
        assert!(cache.contains("dracode-task-"), "a package cache outside the task's folder: {cache}\n{out}");
    }
    assert_eq!(user_caches(&s.home), before, "the task changed HOME or the user's caches:\n{out}");
}

#[test]
fn sandbox_command_prints_a_tasks_resolved_lists_and_refuses_an_unknown_task() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    git_repo(&root.join("repo"), &[("README.md", "project\n")]);
    std::fs::create_dir_all(root.join("fixtures")).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\nisolation = \"worktree\"\n\
         [[tasks]]\nid = \"t\"\nprompt = \"p\"\nread_paths = [\"fixtures\"]\n";
    std::fs::write(root.join("tasks.toml"), manifest).unwrap();
    let runner_temp = root.join("runner-temp");
    let output =
        dracode(&root).env("RUNNER_TEMP", &runner_temp).args(["sandbox", "--task", "t", "tasks.toml", "--out", "o"]).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{text}{}", String::from_utf8_lossy(&output.stderr));
    let section = |name: &str| -> Vec<String> {
        let start = text.find(&format!("\n{name}:\n")).unwrap_or_else(|| panic!("no {name}: in\n{text}")) + name.len() + 3;
        // A `read:` entry ends with its reason: `/usr  (the system)`.
        text[start..].lines().take_while(|l| l.starts_with("  ")).map(|l| l.trim().split("  (").next().unwrap().to_string()).collect()
    };
    let (read, write, hidden) = (section("read"), section("write"), section("hidden"));
    let show = |p: PathBuf| p.display().to_string();
    assert!(read.contains(&"/usr".to_string()) && read.contains(&show(root.join("fixtures"))), "{text}");
    assert!(read.contains(&show(root.join("repo/.git/objects"))), "the borrowed objects: {text}");
    assert!(!read.iter().any(|p| p == "/" || p == "/tmp" || *p == show(root.clone())), "HOME (the cwd here): {text}");
    assert!(write.len() == 2 && write.iter().all(|p| p.contains("<pid>-<random>")), "{text}");
    for gone in [show(runner_temp), show(root.join("o")), show(root.join("repo/.git")), show(root.join(".ssh"))] {
        assert!(hidden.contains(&gone), "{gone} not hidden:\n{text}");
    }
    assert!(text.contains("network: none\n") && text.contains("(made when the task runs)"), "{text}");
    assert!(section("env").iter().any(|l| l.starts_with("npm_config_cache=") && l.contains("dracode-task-")), "{text}");
    let mut sorted = read.clone();
    sorted.sort();
    assert_eq!(read, sorted, "a stable order");

    let unknown = dracode(&root).args(["sandbox", "--task", "nope", "tasks.toml"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(stderr.contains("no task \"nope\"") && stderr.contains("tasks: t"), "{stderr}");
}

#[test]
fn sandbox_read_paths_that_do_not_exist_are_manifest_errors() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("repo")).unwrap();
    let manifest =
        "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\n\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\nread_paths = [\"missing\"]\n";
    std::fs::write(root.join("tasks.toml"), manifest).unwrap();
    for command in [&["validate", "tasks.toml"][..], &["run", "tasks.toml", "--dry-run"][..]] {
        let output = dracode(&root).args(command).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command:?}: {stderr}");
        assert!(
            stderr.contains("tasks.toml:5:1: task \"t\": field \"read_paths\": ") && stderr.contains("missing does not exist"),
            "{stderr}"
        );
    }
}

#[test]
fn sandbox_reads_git_in_a_command_gets_the_users_identity_but_not_the_tokens_of_their_gitconfig() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let token = "ghp_gitconfigtoken_9d2c";
    std::fs::write(
        s.home.join(".gitconfig"),
        format!(
            "[user]\n\tname = Config User\n\temail = config@example.com\n[url \"https://x-access-token:{token}@example.com/\"]\n\tinsteadOf = https://example.com/\n"
        ),
    )
    .unwrap();
    let commands = [
        "git log --oneline | wc -l && echo b > b.txt && git add b.txt && git commit -q -m second && git log -1 --format='author=%an<%ae>'"
            .to_string(),
        format!("git config --global --list; cat {}/.gitconfig 2>&1; echo done", s.home.display()),
    ];
    let r = s.run("gitcfg", &commands, "isolation = \"worktree\"", &[], &[]);
    r.assert_finished("passed");
    let out = r.outputs();
    assert!(out[0].contains("author=Config User<config@example.com>"), "{}", out[0]);
    assert!(out[1].contains("user.email=config@example.com") && out[1].contains("Permission denied"), "{}", out[1]);
    assert!(!out[1].contains("insteadof") && !out[1].contains("x-access-token"), "{}", out[1]);
    r.assert_nowhere(token);
}

#[test]
fn sandbox_reads_an_isolated_home_is_the_tasks_own_to_read_and_write() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let commands = ["echo kept > $HOME/.toolrc && cat $HOME/.toolrc && ls -a $HOME && echo home=$HOME".to_string()];
    let r = s.run("isohome", &commands, "isolate_home = true", &[], &[]);
    r.assert_finished("passed");
    let out = r.all_output();
    assert!(out.contains("kept") && out.contains(".toolrc"), "{out}");
    assert!(value_of(&out, "home").is_some_and(|h| h.contains("dracode-task-") && !h.starts_with(&s.home.display().to_string())), "{out}");
    assert!(!s.home.join(".toolrc").exists());
}
