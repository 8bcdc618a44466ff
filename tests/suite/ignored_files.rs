//! Issue 27, "the check grades exactly what was recorded": files the change record does not
//! see (gitignored, hidden by a `.gitignore` the agent wrote) cannot change the verdict unseen.
//! Before each check, every path that is neither in the recorded tree nor in the workspace as
//! it was prepared is removed, except those `keep_ignored` names, which `task.finished` lists
//! (`kept_ignored`); a protected path is removed even when `keep_ignored` names it.

use super::attacks::{Run, Scenario};
use crate::support::cli::{finished, git};
use crate::support::sandbox::supported;

/// The system's Python (not a user toolchain the unprivileged run could not read).
pub(crate) const PYTHON: &str = "/usr/bin/python3";

/// A Python project whose one test fails (`add` subtracts), `__pycache__/` ignored.
pub(crate) fn python_project() -> Scenario {
    let s = Scenario::new();
    let files = [
        ("calc.py", "def add(a, b):\n    return a - b\n"),
        (
            "tests/test_calc.py",
            "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
        ),
        (".gitignore", "__pycache__/\n"),
    ];
    for (name, text) in files {
        let path = s.repo.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(&s.repo, &["add", "-A"]);
    git(&s.repo, &["commit", "-q", "-m", "python project"]);
    s
}

/// The task's manifest fields: the project's tests as the check, plus `extra`.
pub(crate) fn checked(extra: &str) -> String {
    format!("check = \"{PYTHON} -m unittest discover -s tests\"\n{extra}")
}

pub(crate) fn python_runs() -> bool {
    std::process::Command::new(PYTHON).arg("-c").arg("pass").status().is_ok_and(|s| s.success())
}

/// The task's `kept_ignored`, as strings (empty when absent).
fn kept(run: &Run) -> Vec<String> {
    let task = finished(&run.events, "attack");
    task["kept_ignored"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

#[test]
fn attack_a_self_ignoring_gitignore_cannot_hide_a_planted_test() {
    if !supported() || !python_runs() {
        return;
    }
    for (i, ignore) in ["*", ".gitignore\\ntest_0.py"].iter().enumerate() {
        let s = python_project();
        let commands = [format!(
            "printf '{ignore}\\n' > tests/.gitignore && printf 'import os\\nos._exit(0)\\n' > tests/test_0.py && \
             {PYTHON} -m unittest discover -s tests; echo planted-rc=$?"
        )];
        let r = s.run(&format!("selfignore{i}"), &commands, &checked(""), &[], &[]);
        assert!(r.all_output().contains("planted-rc=0"), "the planted test passes the suite in the agent's turn: {}", r.all_output());
        r.assert_finished("failed");
        let task = finished(&r.events, "attack");
        assert_eq!(task["check"]["exit_code"], 1, "the check ran the real tests: {task}");
        assert_eq!(kept(&r), Vec::<String>::new());
    }
}

/// A script that compiles a passing `tests/test_calc.py` into its `__pycache__` with the header
/// (mtime, size) of the real source, so Python loads the forged bytecode instead.
const FORGE_PYC: &str = r#"import importlib.util, marshal, os, struct
src = 'tests/test_calc.py'
st = os.stat(src)
fake = 'import unittest\nclass T(unittest.TestCase):\n    def test_add(self):\n        pass\n'
code = compile(fake, src, 'exec')
header = importlib.util.MAGIC_NUMBER + struct.pack('<III', 0, int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)
os.makedirs('tests/__pycache__', exist_ok=True)
open(importlib.util.cache_from_source(src), 'wb').write(header + marshal.dumps(code))
"#;

#[test]
fn attack_a_forged_pyc_cannot_replace_a_protected_test() {
    if !supported() || !python_runs() {
        return;
    }
    // `keep_ignored` naming the protected folder keeps nothing in it: protection wins.
    for (i, keep) in ["", "keep_ignored = [\"tests/**\"]\n"].iter().enumerate() {
        let s = python_project();
        let commands = [
            format!("cat > \"$TMPDIR/forge.py\" <<'EOF'\n{FORGE_PYC}EOF"),
            format!("{PYTHON} \"$TMPDIR/forge.py\" && {PYTHON} -m unittest discover -s tests; echo forged-rc=$?"),
        ];
        let fields = checked(&format!("protect = [\"tests/**\"]\n{keep}"));
        let r = s.run(&format!("pyc{i}"), &commands, &fields, &[], &[]);
        assert!(r.all_output().contains("forged-rc=0"), "the forged bytecode passes in the agent's turn: {}", r.all_output());
        r.assert_finished("failed");
        let task = finished(&r.events, "attack");
        assert_eq!(task["check"]["exit_code"], 1, "the check ran the real test: {task}");
        assert_eq!(kept(&r), Vec::<String>::new());
    }
}

#[test]
fn keep_ignored_keeps_named_build_output_and_lists_it() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    std::fs::write(s.repo.join(".gitignore"), "build/\n").unwrap();
    git(&s.repo, &["add", "-A"]);
    git(&s.repo, &["commit", "-q", "-m", "ignore build"]);
    let commands =
        ["mkdir -p build/deep && echo made > build/deep/out.txt && echo x > build/other.txt && echo stray > stray.log".to_string()];
    let check = "check = \"test -f build/deep/out.txt\"\n";
    // Without `keep_ignored` the agent's build output is gone before the check (it would
    // have to rebuild); with it, the output stays and the task names it.
    let r = s.run("nokeep", &commands, check, &[], &[]);
    r.assert_finished("failed");
    let r = s.run("keep", &commands, &format!("{check}keep_ignored = [\"build/**\"]\n"), &[], &[]);
    r.assert_finished("passed");
    assert_eq!(kept(&r), ["build/"]);
    assert!(
        finished(&r.events, "attack")["files_changed"].as_array().unwrap().iter().any(|f| f == "stray.log"),
        "unignored files are recorded"
    );
}

#[test]
fn an_honest_fix_passes_although_its_bytecode_is_removed_before_the_check() {
    if !supported() || !python_runs() {
        return;
    }
    let s = python_project();
    let commands = [format!(
        "{PYTHON} -m unittest discover -s tests; sed -i 's/a - b/a + b/' calc.py && {PYTHON} -m unittest discover -s tests && \
         ls tests/__pycache__ __pycache__"
    )];
    let r = s.run("honest", &commands, &checked("protect = [\"tests/**\"]\nrequire_change = true\n"), &[], &[]);
    r.assert_finished("passed");
    let task = finished(&r.events, "attack");
    assert_eq!(task["files_changed"], serde_json::json!(["calc.py"]));
    assert!(
        task["protected"].as_array().is_none_or(Vec::is_empty),
        "bytecode in a protected folder that the agent's own run made is not blamed: {task}"
    );
}
