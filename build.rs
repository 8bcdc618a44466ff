//! Build-time facts for `dracode --version`: the commit (from git when the source is a
//! checkout; `DRACODE_BUILD_COMMIT` overrides, e.g. in a packaging build; "unknown" in a
//! tarball without `.git`) and the target triple. Reads only local files: no network.
// Talking to cargo is a build script's job, and it is done by printing.
#![allow(clippy::print_stdout)]

use std::process::Command;

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".to_string());
    let commit = std::env::var("DRACODE_BUILD_COMMIT").ok().filter(|c| !c.trim().is_empty()).or_else(git_commit);
    let commit = commit.unwrap_or_else(|| "unknown".to_string());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=DRACODE_COMMIT={commit}");
    println!("cargo:rustc-env=DRACODE_TARGET={target}");
    println!("cargo:rustc-env=DRACODE_LONG_VERSION={version} (commit {commit}, target {target})");
    println!("cargo:rerun-if-env-changed=DRACODE_BUILD_COMMIT");
    for path in watched_git_files() {
        println!("cargo:rerun-if-changed={path}");
    }
}

/// `git rev-parse --short=12 HEAD` in the source folder, when git and a repository are there.
/// (No `-dirty` mark: cargo cannot tell a build script that a work-tree file changed, so it
/// would go stale.)
fn git_commit() -> Option<String> {
    git(&["rev-parse", "--short=12", "HEAD"]).filter(|c| !c.is_empty())
}

/// The files whose change means another commit: HEAD, the branch it points at (or, while the
/// branch is only packed, the folder its loose file would appear in), and the packed references
/// when they exist. A path that does not exist is never watched: cargo would take it as changed
/// and rebuild dracode on every build.
fn watched_git_files() -> Vec<String> {
    let exists = |p: &String| std::path::Path::new(p).exists();
    let mut files = Vec::new();
    files.extend(git(&["rev-parse", "--git-path", "HEAD"]).filter(exists));
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(reference) = git(&["rev-parse", "--git-path", &branch])
    {
        let folder = std::path::Path::new(&reference).parent().map(|p| p.display().to_string());
        files.extend(if exists(&reference) { Some(reference) } else { folder.filter(exists) });
    }
    files.extend(git(&["rev-parse", "--git-path", "packed-refs"]).filter(exists));
    files
}

/// `git args` in the crate's folder: its trimmed stdout on success, else `None`.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let output = Command::new("git").args(args).current_dir(dir).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}
