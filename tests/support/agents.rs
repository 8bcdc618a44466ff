//! The real coding agents, installed from the npm registry into the test cache on first use, at
//! the versions `.github/action/agents.tsv` pins (the action installs the same).
//!
//! [`installed`] gives the folder holding the agent's program, or `None` after printing why it
//! could not be installed (no npm, no registry) — unless `DRACODE_REQUIRE_AGENTS` is set (CI),
//! which makes that a failure.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The Node that Gemini CLI (a Node script that wants Node 20 or later) runs on: the `node`
/// package, installed beside it.
pub const NODE_VERSION: &str = "22.23.3";

/// The agents and their pinned versions, as the action installs them: one row each, tab
/// separated — the `agent` field's name, npm package, version, program.
pub const TABLE: &str = include_str!("../../.github/action/agents.tsv");

/// The rows of [`TABLE`]: (name, npm package, pinned version, program).
pub fn agents() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    TABLE
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let cells: Vec<&str> = line.split('\t').collect();
            (cells[0], cells[1], cells[2], cells[3])
        })
        .collect()
}

/// One install at a time: two tests installing the same agent into one prefix would collide.
static INSTALLING: Mutex<()> = Mutex::new(());

/// The pinned entry of agent `name`.
pub fn pinned(name: &str) -> (&'static str, &'static str, &'static str, &'static str) {
    agents().into_iter().find(|a| a.0 == name).unwrap_or_else(|| panic!("no pinned agent {name}"))
}

/// The folder holding agent `name`'s program (`node_modules/.bin` of its own prefix in the test
/// cache), installed on first use.
pub fn installed(name: &str) -> Option<PathBuf> {
    let (_, package, version, program) = pinned(name);
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("agents").join(format!("{name}-{version}"));
    let bin = prefix.join("node_modules/.bin");
    let _one = INSTALLING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // nextest runs each test in a process of its own: a file lock keeps a second test from
    // starting the agent while the first one's `npm install` is still writing it (exec of a
    // file open for writing fails, ETXTBSY: the sandbox's exit 125), and a marker written
    // after a whole install (not the program's file, which npm makes first) says it is done.
    let _lock = install_lock(&prefix);
    let done = prefix.join(".dracode-installed");
    if !done.is_file() {
        let installed = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
            .arg(&prefix)
            .arg(format!("{package}@{version}"))
            .args((name == "gemini-cli").then(|| format!("node@{NODE_VERSION}")))
            .output();
        let why = match installed {
            Ok(out) if out.status.success() && bin.join(program).is_file() => None,
            Ok(out) => Some(format!("npm install {package}@{version} failed: {}", String::from_utf8_lossy(&out.stderr))),
            Err(e) => Some(format!("cannot run npm: {e}")),
        };
        if let Some(why) = why {
            assert!(std::env::var_os("DRACODE_REQUIRE_AGENTS").is_none(), "{why}");
            eprintln!("skipping the {name} test: {why}");
            return None;
        }
        std::fs::write(&done, "").unwrap();
    }
    Some(bin)
}

/// An exclusive lock on `prefix`'s install, shared by every test process (held until dropped);
/// a user who may not write the lock file (the CI's second pass, as uid 65534, over root's
/// install) locks it read-only.
fn install_lock(prefix: &Path) -> Option<std::fs::File> {
    let _ = std::fs::create_dir_all(prefix);
    let path = format!("{}.lock", prefix.display());
    let file = std::fs::File::create(&path).or_else(|_| std::fs::File::open(&path)).ok()?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive).ok()?;
    Some(file)
}

/// `PATH` with `bin` first.
pub fn path_with(bin: &Path) -> String {
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}
