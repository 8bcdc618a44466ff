//! Issue 39, "Grading, round 4": every check — `check_before`, the check after the agent,
//! `regrade`, `combine --check` — runs in a world made from the record alone: the recorded tree,
//! a fresh `.git`, the setup's outputs as the setup left them, a fresh TMPDIR, HOME and caches.
//! Each forgery here (`attack_…`, which `.ci/run` runs again as uid 65534) ended `passed` while
//! the check ran where the agent had been; a forged task must end `failed`, its check having run
//! the project's own test. Then: what `check_before` writes is not the agent's change, the
//! setup's Rust build stays valid after an agent ran cargo, `regrade` and `combine --check` carry
//! the setup's outputs, and the setup runs only when a task will (after the provider's pre-flight).
//!
//! When this machine cannot confine (no Landlock or seccomp), the confined scenarios only print
//! why and return.

use super::attacks::{Run, Scenario};
use super::ignored_files::{PYTHON, checked, python_project, python_runs};
use super::sandbox_reads::usable_cargo;
use crate::support::cli::{events, git};
use crate::support::sandbox::supported;
use serde_json::{Value, json};

/// A setup making a fake virtualenv, offline: `.venv/bin/runtests`, the project's test, which
/// passes once `src/lib.txt` says `fixed`.
const VENV_SETUP: &str = r#"command = "mkdir -p .venv/bin && printf '#!/bin/sh\\ngrep -q fixed src/lib.txt\\n' > .venv/bin/runtests && chmod +x .venv/bin/runtests""#;

/// The check of a task on the fake virtualenv, red before the agent.
const VENV_CHECK: &str = "check = \".venv/bin/runtests\"\ncheck_before = true\n";

/// The honest fix the project's test wants; a forgery writes it while the check runs instead.
const FIX: &str = "echo fixed > src/lib.txt";

/// `commands` as the harness takes them.
fn cmds(commands: &[&str]) -> Vec<String> {
    commands.iter().map(ToString::to_string).collect()
}

/// Writes `files` into the scenario's repository and commits them.
fn commit(s: &Scenario, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = s.repo.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(&s.repo, &["add", "-A"]);
    git(&s.repo, &["commit", "-q", "-m", "project"]);
}

/// How the forged task ended: its status and its check's exit code (1 when the check ran the
/// project's own test, red), with what was recorded as its change.
fn verdict(r: &Run) -> String {
    let task = r.finished("attack");
    format!(
        "{} (check exit {}, files_changed {})",
        task["status"].as_str().unwrap_or("?"),
        task["check"]["exit_code"],
        task["files_changed"]
    )
}

/// What a forged task must end with: its check ran the project's own test, red.
const FORGERY_FAILED: &str = "failed (check exit 1, files_changed [])";

/// The forged task ended [`FORGERY_FAILED`], after its final message.
fn assert_forgery_failed(r: &Run) {
    assert_eq!(verdict(r), FORGERY_FAILED, "{}\n{}", r.stderr, r.all_output());
    r.assert_finished("failed");
}

#[test]
fn attack_a_setup_folder_made_unreadable_cannot_hide_a_forged_script() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    // As root dracode still reads the folder; as any other user it cannot list it.
    let forge = "printf '#!/bin/sh\\nexit 0\\n' > .venv/bin/runtests && chmod 0111 .venv/bin && .venv/bin/runtests; echo forged-rc=$?";
    let r = s.run_batch("unreadable", VENV_SETUP, VENV_CHECK, &[("attack", &cmds(&[forge]))], &[], &[]);
    assert!(r.all_output().contains("forged-rc=0"), "the forged script passes in the agent's turn: {}", r.all_output());
    assert_eq!(r.finished("attack")["check"]["before"], 1, "red before the agent: {}", r.finished("attack"));
    assert_forgery_failed(&r);
}

/// A project whose test (`tests/run.sh`) passes once `src/lib.txt` says `fixed`, checked by a
/// command that calls git first, as many do (the tests untouched, then the tests).
fn git_checked_project() -> Scenario {
    let s = Scenario::new();
    commit(&s, &[("tests/run.sh", "grep -q fixed src/lib.txt\n")]);
    s
}

/// The check of [`git_checked_project`].
const GIT_CHECK: &str = "check = \"git status --porcelain -- tests && sh tests/run.sh\"\ncheck_before = true\n";

#[test]
fn attack_the_workspaces_git_configuration_does_not_run_in_the_check() {
    if !supported() {
        return;
    }
    let hook = ".git/hooks/post-index-change";
    let forgeries = [
        format!("git config core.fsmonitor '{FIX}; false' && echo forged-ok"),
        format!("mkdir -p .git/hooks && printf '#!/bin/sh\\n{FIX}\\n' > {hook} && chmod +x {hook} && echo forged-ok"),
    ];
    let verdicts: Vec<String> = forgeries
        .iter()
        .enumerate()
        .map(|(i, forge)| {
            let s = git_checked_project();
            let r = s.run_batch(&format!("gitdir{i}"), "", GIT_CHECK, &[("attack", std::slice::from_ref(forge))], &[], &[]);
            assert!(r.all_output().contains("forged-ok"), "{forge}: {}", r.all_output());
            format!("{forge}: {}", verdict(&r))
        })
        .collect();
    let want: Vec<String> = forgeries.iter().map(|forge| format!("{forge}: {FORGERY_FAILED}")).collect();
    assert_eq!(verdicts, want);
}

#[test]
fn attack_the_global_git_configuration_in_the_tmpdir_does_not_run_in_the_check() {
    if !supported() {
        return;
    }
    let s = git_checked_project();
    // `GIT_CONFIG_GLOBAL` names a copy in the task's TMPDIR, which the task's commands may write.
    let forge = format!("git config --global core.fsmonitor '{FIX}; false' && echo global=$GIT_CONFIG_GLOBAL");
    let r = s.run_batch("global", "", GIT_CHECK, &[("attack", &[forge])], &[], &[]);
    assert!(r.all_output().contains("global=/"), "{}", r.all_output());
    assert_forgery_failed(&r);
}

#[test]
fn attack_usercustomize_in_an_isolated_home_does_not_run_in_the_check() {
    if !supported() {
        return;
    }
    if !python_runs() {
        eprintln!("skipping: no {PYTHON}");
        return;
    }
    let s = python_project();
    let forge = format!(
        "d=$({PYTHON} -c 'import site; print(site.getusersitepackages())') && mkdir -p \"$d\" && \
         printf 'import os\\nos._exit(0)\\n' > \"$d/usercustomize.py\" && {PYTHON} -m unittest discover -s tests; echo planted-rc=$?"
    );
    let r = s.run("usercustomize", &[forge], &checked("isolate_home = true\ncheck_before = true\n"), &[], &[]);
    assert!(r.all_output().contains("planted-rc=0"), "the planted module passes the suite in the agent's turn: {}", r.all_output());
    assert_forgery_failed(&r);
}

#[test]
fn grading_a_check_whose_tool_clears_git_config_global_still_runs_git() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    // The user's own git configuration, which the sandbox refuses to every command.
    std::fs::write(s.home.join(".gitconfig"), "[user]\n\tname = someone\n").unwrap();
    // What setuptools-scm and hatch-vcs do before they run git: drop every GIT_* variable.
    let fields = "check = \"env -u GIT_CONFIG_GLOBAL git rev-parse --show-prefix\"\nrequire_change = false\n";
    let r = s.run("clears", &[], fields, &[], &[]);
    let task = r.finished("attack");
    assert_eq!(task["check"]["exit_code"], 0, "git in the check read a configuration it may read: {task}");
    r.assert_finished("passed");
}

#[test]
fn grading_what_check_before_writes_is_not_the_agents_change() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    // A check that writes a file git does not ignore, as `cargo test` writes a `Cargo.lock`.
    let fields = "check = \"echo lock > lockfile.txt\"\ncheck_before = true\nrequire_change = false\n";
    let r = s.run("lockfile", &[], fields, &[], &[]);
    r.assert_finished("passed");
    let task = r.finished("attack");
    assert_eq!(task["files_changed"], json!([]), "the agent changed nothing: {task}");
    let patch = std::fs::read_to_string(r.out.join("diffs/attack.patch")).unwrap_or_default();
    assert!(!patch.contains("lockfile.txt"), "{patch}");
}

/// A crate `app` whose test fails until `add` adds, with a dependency `helper` outside the
/// repository (`vendor/helper`, readable by `read_paths`) that has a build script, as a registry
/// crate is and most have: two crates to compile, offline.
fn rust_project() -> Scenario {
    let s = Scenario::new();
    let package = |name: &str, deps: &str| format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n{deps}");
    let helper = s.root.join("vendor/helper");
    std::fs::create_dir_all(helper.join("src")).unwrap();
    std::fs::write(helper.join("Cargo.toml"), package("helper", "")).unwrap();
    std::fs::write(helper.join("src/lib.rs"), "pub fn id(x: i32) -> i32 {\n    x\n}\n").unwrap();
    std::fs::write(helper.join("build.rs"), "fn main() {}\n").unwrap();
    let deps = format!("\n[dependencies]\nhelper = {{ path = \"{}\" }}\n", helper.display());
    commit(
        &s,
        &[
            ("Cargo.toml", &package("app", &deps)),
            (
                "src/lib.rs",
                "pub fn add(a: i32, b: i32) -> i32 {\n    helper::id(a - b)\n}\n\n#[test]\nfn adds() {\n    assert_eq!(add(1, 2), 3);\n}\n",
            ),
            (".gitignore", "/target/\n"),
        ],
    );
    s
}

/// How many crates the task's check compiled (cargo's `Compiling` lines).
fn compiled(r: &Run, id: &str) -> usize {
    let tail = r.finished(id)["check"]["output_tail"].as_str().unwrap_or("").to_string();
    tail.lines().filter(|l| l.trim_start().starts_with("Compiling ")).count()
}

#[test]
fn grading_the_setups_rust_build_stays_valid_after_the_agent_ran_cargo() {
    if !supported() {
        return;
    }
    let vars = match usable_cargo() {
        Ok(vars) => vars,
        Err(why) => {
            eprintln!("skipping: {why}");
            return;
        }
    };
    let env: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let s = rust_project();
    let setup = "command = \"cargo build --tests --offline\"\nenv = { CARGO_TERM_COLOR = \"never\" }";
    let fields = "check = \"cargo test --offline\"\nenv = { CARGO_TERM_COLOR = \"never\" }\nread_paths = [\"vendor\"]\n";
    let fix = "sed -i 's/a - b/a + b/' src/lib.rs";
    let tasks: &[(&str, &[String])] = &[("built", &cmds(&[fix, "cargo test --offline"])), ("edited", &cmds(&[fix]))];
    let r = s.run_batch("cargo", setup, fields, tasks, &env, &["--jobs", "1"]);
    for id in ["built", "edited"] {
        assert_eq!(r.finished(id)["status"], "passed", "{}\n{}", r.stderr, r.finished(id));
    }
    let (built, edited) = (compiled(&r, "built"), compiled(&r, "edited"));
    eprintln!("the check compiled {built} crate(s) after an agent that ran cargo, {edited} after one that only edited");
    assert!(
        built <= edited,
        "after an agent that ran cargo the check compiled {built} crate(s), after one that only edited {edited}:\n{}",
        r.finished("built")["check"]["output_tail"]
    );
}

/// A run of one task that fixes the fake virtualenv's test, passed; returns the scenario and run.
fn venv_run_passed() -> (Scenario, Run) {
    let s = Scenario::new();
    let r = s.run_batch("venv", VENV_SETUP, VENV_CHECK, &[("attack", &cmds(&[FIX]))], &[], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.assert_finished("passed");
    (s, r)
}

#[test]
fn grading_regrade_grades_with_the_setups_outputs() {
    if !supported() {
        return;
    }
    let (s, r) = venv_run_passed();
    let out = s.root.join("out-regraded");
    let args = ["regrade".to_string(), r.out.display().to_string(), "--out".into(), out.display().to_string()];
    let again = s.launch(&args, &out, &[]);
    assert_eq!(again.code, 0, "{}\n{}", again.stderr, again.events.last().unwrap_or(&Value::Null));
    let task = again.finished("attack");
    assert_eq!(task["status"], "passed", "{task}");
    assert_eq!(task["check"]["exit_code"], 0, "{task}");
}

#[test]
fn grading_combine_check_runs_with_the_setups_outputs() {
    if !supported() {
        return;
    }
    let (s, r) = venv_run_passed();
    let args = ["combine", &r.out.display().to_string(), "--repo", "repo", "--check", ".venv/bin/runtests"].map(String::from);
    let combined = s.launch(&args, &r.out, &[]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(r.out.join("combine.json")).unwrap_or_default()).unwrap_or_default();
    assert_eq!(combined.code, 0, "{}\n{report}", combined.stderr);
    assert_eq!(report["applied"], json!(["attack"]), "{report}");
}

/// A setup that makes `build/out.txt`, and the check that wants it.
const BUILD_SETUP: &str = "command = \"mkdir -p build && echo built > build/out.txt\"";

#[test]
fn grading_a_run_of_cache_hits_only_skips_the_setup() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let cache = s.root.join("cache").display().to_string();
    let fields = "check = \"test -f build/out.txt\"\n";
    let tasks: &[(&str, &[String])] = &[("attack", &[])];
    let first = s.run_batch("cached", BUILD_SETUP, fields, tasks, &[], &["--cache", &cache]);
    first.assert_finished("passed");
    assert_eq!(events(&first.events, "setup.started").len(), 1, "the first run sets up: {:?}", first.events);
    let again = s.run_batch("cached", BUILD_SETUP, fields, tasks, &[], &["--cache", &cache]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.finished("attack")["cached"], true, "{}", again.finished("attack"));
    let setups: Vec<&Value> = events(&again.events, "setup.started").into_iter().chain(events(&again.events, "setup.finished")).collect();
    assert!(setups.is_empty(), "no task ran, yet the setup did: {setups:?}");
}

#[test]
fn grading_a_dead_provider_endpoint_is_found_before_the_setup() {
    let s = Scenario::new();
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = format!("[providers.dead]\ntype = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"gpt-4o\"\n");
    std::fs::write(s.root.join("dracode.toml"), config).unwrap();
    let setup = "command = \"sleep 2\"";
    let key = [("OPENAI_API_KEY", "sk-test-0123456789abcdef")];
    let r = s.run_batch("dead", setup, "", &[("attack", &[])], &key, &["--provider", "dead"]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    let setups = events(&r.events, "setup.started");
    assert!(setups.is_empty(), "the setup ran before the endpoint was found dead: {setups:?}\n{}", r.stderr);
}
