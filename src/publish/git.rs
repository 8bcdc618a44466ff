//! The git side of `dracode publish`, with git's own command line (so the pushes use the
//! user's remotes, credentials and `insteadOf` rules as `git push` would).
//!
//! Nothing is written to the user's repository: every object publish makes or fetches (a
//! task's commit, its tree, a remote branch's tip) goes into a scratch object store of its own
//! (`GIT_OBJECT_DIRECTORY`, borrowing the repository's objects read-only through
//! `GIT_ALTERNATE_OBJECT_DIRECTORIES`) with a scratch index, both removed afterwards; and the
//! remote is spoken to by its URL, so no remote-tracking ref is updated. A dry run makes the
//! commits too (to know whether a branch would move) and pushes nothing.

use crate::batch::trailers;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The author of the commits publish makes: the agent, as in a task's own repository.
pub const AUTHOR: (&str, &str) = crate::batch::worktree::DEFAULT_IDENTITY;

/// The committer of the commits publish makes; a branch tip by another committer is not
/// dracode's.
pub const COMMITTER: (&str, &str) = ("dracode", "dracode@localhost");

/// Variables of the caller's environment that would point git somewhere else.
const REDIRECTING: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
];

/// Why a git step failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The folder is not in a git repository.
    #[error("{}: not in a git repository ({message})", dir.display())]
    NotARepository {
        /// The folder.
        dir: PathBuf,
        /// git's words.
        message: String,
    },
    /// `--remote` names no remote of the repository (and is not a URL or a path).
    #[error("no remote named {remote:?} in the repository at {} (git remote -v lists them): pass --remote NAME or a URL", dir.display())]
    NoRemote {
        /// The name given.
        remote: String,
        /// The repository.
        dir: PathBuf,
    },
    /// The scratch store or a file in it could not be made.
    #[error("cannot make a scratch object store: {0}")]
    Scratch(std::io::Error),
    /// git could not be started.
    #[error("cannot run git: {0}")]
    Spawn(std::io::Error),
    /// A git command failed.
    #[error("git {command} failed: {message}")]
    Failed {
        /// The command, as `push` or `apply`.
        command: String,
        /// Its stderr.
        message: String,
    },
    /// The commit a task started from is not in the repository.
    #[error(
        "the run's base commit {commit} is not in the repository at {}: publish from a checkout that has it (with \
         actions/checkout, the commit the run checked out)",
        dir.display()
    )]
    MissingBase {
        /// The commit.
        commit: String,
        /// The repository.
        dir: PathBuf,
    },
    /// The patch does not apply to its base.
    #[error("the recorded patch does not apply to {base}: {message}")]
    PatchRefused {
        /// The base commit.
        base: String,
        /// git's words.
        message: String,
    },
}

/// A commit as `git cat-file commit` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// Its id.
    pub id: String,
    /// Its tree.
    pub tree: String,
    /// Its parents.
    pub parents: Vec<String>,
    /// `Name <email>` of its committer.
    pub committer: String,
    /// Its message.
    pub message: String,
}

impl CommitInfo {
    /// Whether dracode made this commit: committed as [`COMMITTER`], with a `Dracode-Run`
    /// trailer and, for a task's branch (`task`), exactly the `Dracode-Task` trailer of that task.
    pub fn made_by_dracode(&self, task: Option<&str>) -> bool {
        let committer = format!("{} <{}>", COMMITTER.0, COMMITTER.1);
        let ran = !trailers::values(&self.message, trailers::RUN).is_empty();
        let task_matches = match task {
            Some(id) => trailers::values(&self.message, trailers::TASK) == [id],
            None => true,
        };
        self.committer == committer && ran && task_matches
    }
}

/// A commit made in the scratch store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    /// The commit.
    pub commit: String,
    /// Its tree.
    pub tree: String,
}

/// The user's repository and a remote, with a scratch object store.
pub struct Git {
    dir: PathBuf,
    url: String,
    objects: PathBuf,
    scratch: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

impl std::fmt::Debug for Git {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Git").field("dir", &self.dir).field("url", &self.url).finish_non_exhaustive()
    }
}

impl Git {
    /// The repository holding `dir`, its remote `remote` (a remote's name, else a URL or a
    /// path), git run with `env` (the caller's environment).
    pub fn open(dir: &Path, remote: &str, env: &BTreeMap<String, String>) -> Result<Git, GitError> {
        let env: BTreeMap<String, String> =
            env.iter().filter(|(k, _)| !REDIRECTING.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
        let plain = |args: &[&str]| run(base_command(dir, &env).args(args));
        let objects = plain(&["rev-parse", "--path-format=absolute", "--git-path", "objects"])
            .map_err(|e| GitError::NotARepository { dir: dir.to_path_buf(), message: e.to_string() })?;
        let url = match plain(&["remote", "get-url", "--push", remote]) {
            Ok(url) => url,
            Err(_) if remote.contains(['/', ':']) => remote.to_string(),
            Err(_) => return Err(GitError::NoRemote { remote: remote.to_string(), dir: dir.to_path_buf() }),
        };
        let scratch = tempfile::Builder::new().prefix("dracode-publish-").tempdir().map_err(GitError::Scratch)?;
        std::fs::create_dir_all(scratch.path().join("objects/pack")).map_err(GitError::Scratch)?;
        Ok(Git { dir: dir.to_path_buf(), url, objects: PathBuf::from(objects), scratch, env })
    }

    /// The remote's URL (or path), as pushed to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The remote's default branch (what its `HEAD` names), if it says.
    pub fn default_branch(&self) -> Result<Option<String>, GitError> {
        let out = run(self.command().args(["ls-remote", "--symref", &self.url, "HEAD"]))?;
        Ok(out.lines().find_map(|l| l.strip_prefix("ref: refs/heads/")?.strip_suffix("\tHEAD")).map(str::to_string))
    }

    /// The commit the remote's `branch` points at, if it exists.
    pub fn remote_tip(&self, branch: &str) -> Result<Option<String>, GitError> {
        let reference = format!("refs/heads/{branch}");
        let out = run(self.command().args(["ls-remote", "--refs", &self.url, &reference]))?;
        Ok(out.lines().find_map(|l| l.split_once('\t').filter(|(_, r)| *r == reference).map(|(id, _)| id.to_string())))
    }

    /// The commit `id`, fetched from the remote's `branch` into the scratch store first when
    /// the repository lacks it.
    pub fn remote_commit(&self, branch: &str, id: &str) -> Result<CommitInfo, GitError> {
        if !self.has(id) {
            let reference = format!("refs/heads/{branch}");
            let fetch = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-maintenance", "--no-recurse-submodules"];
            run(self.command().args(fetch).args([self.url.as_str(), reference.as_str()]))?;
        }
        self.commit_info(id)
    }

    /// `patch` applied to `base`, committed with `message` (as [`AUTHOR`] and [`COMMITTER`]),
    /// in the scratch store.
    pub fn make_commit(&self, base: &str, patch: &str, message: &str) -> Result<Made, GitError> {
        if !self.has(&format!("{base}^{{commit}}")) {
            return Err(GitError::MissingBase { commit: base.to_string(), dir: self.dir.clone() });
        }
        run(self.command().args(["read-tree", base]))?;
        let patch_file = self.scratch.path().join("change.patch");
        std::fs::write(&patch_file, patch).map_err(GitError::Scratch)?;
        let applied = run(self.command().args(["apply", "--cached", "--whitespace=nowarn", "--binary"]).arg(&patch_file));
        if let Err(e) = applied {
            let message = match e {
                GitError::Failed { message, .. } => message.replace(&format!("{}:", patch_file.display()), "patch:"),
                other => other.to_string(),
            };
            return Err(GitError::PatchRefused { base: base.to_string(), message });
        }
        let tree = run(self.command().arg("write-tree"))?;
        let message_file = self.scratch.path().join("message.txt");
        std::fs::write(&message_file, message).map_err(GitError::Scratch)?;
        let mut commit = self.command();
        commit.args(["commit-tree", "--no-gpg-sign", &tree, "-p", base, "-F"]).arg(&message_file);
        commit.env("GIT_AUTHOR_NAME", AUTHOR.0).env("GIT_AUTHOR_EMAIL", AUTHOR.1);
        commit.env("GIT_COMMITTER_NAME", COMMITTER.0).env("GIT_COMMITTER_EMAIL", COMMITTER.1);
        Ok(Made { commit: run(&mut commit)?, tree })
    }

    /// Points the remote's `branch` at `commit`, only if it still points at `expected` (`None`:
    /// only if it does not exist): someone's push in between is never overwritten.
    pub fn push(&self, commit: &str, branch: &str, expected: Option<&str>) -> Result<(), GitError> {
        let lease = format!("--force-with-lease=refs/heads/{branch}:{}", expected.unwrap_or_default());
        let refspec = format!("{commit}:refs/heads/{branch}");
        run(self.command().args(["push", "--quiet", "--no-verify", &lease, &self.url, &refspec])).map(|_| ())
    }

    /// The commit `id` (in the repository or the scratch store).
    pub fn commit_info(&self, id: &str) -> Result<CommitInfo, GitError> {
        let raw = run_raw(self.command().args(["cat-file", "commit", id]))?;
        let (head, message) = raw.split_once("\n\n").unwrap_or((raw.as_str(), ""));
        let field =
            |name: &str| head.lines().filter_map(|l| l.strip_prefix(name)?.strip_prefix(' ')).map(str::to_string).collect::<Vec<_>>();
        let committer = field("committer").into_iter().next().unwrap_or_default();
        // `Name <email> 1700000000 +0000`: the identity without the date.
        let committer = committer.rsplitn(3, ' ').nth(2).unwrap_or_default().to_string();
        Ok(CommitInfo {
            id: id.to_string(),
            tree: field("tree").into_iter().next().unwrap_or_default(),
            parents: field("parent"),
            committer,
            message: message.to_string(),
        })
    }

    /// Whether the object `spec` exists (in the repository or the scratch store).
    fn has(&self, spec: &str) -> bool {
        self.command().args(["cat-file", "-e", spec]).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    }

    /// git in the repository, on the scratch store and index.
    fn command(&self) -> Command {
        let mut cmd = base_command(&self.dir, &self.env);
        cmd.env("GIT_OBJECT_DIRECTORY", self.scratch.path().join("objects"))
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &self.objects)
            .env("GIT_INDEX_FILE", self.scratch.path().join("index"));
        cmd
    }
}

/// git in `dir` with `env`, no hook, no prompt for credentials.
fn base_command(dir: &Path, env: &BTreeMap<String, String>) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear().envs(env).env("GIT_TERMINAL_PROMPT", "0").args(["-c", "core.hooksPath=/dev/null"]);
    cmd.current_dir(dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Runs `cmd`; its stdout, trimmed.
fn run(cmd: &mut Command) -> Result<String, GitError> {
    run_raw(cmd).map(|out| out.trim().to_string())
}

/// Runs `cmd`; its stdout as it is.
fn run_raw(cmd: &mut Command) -> Result<String, GitError> {
    let output = cmd.output().map_err(GitError::Spawn)?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let command = args.iter().find(|a| !(a.starts_with('-') || a.contains('='))).cloned().unwrap_or_default();
    Err(GitError::Failed { command, message: String::from_utf8_lossy(&output.stderr).trim().to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(committer: &str, message: &str) -> CommitInfo {
        CommitInfo { id: "c".into(), tree: "t".into(), parents: vec!["p".into()], committer: committer.into(), message: message.into() }
    }

    #[test]
    fn a_commit_is_dracodes_by_its_committer_and_trailers() {
        let ours = "dracode: a\n\nDone.\n\nDracode-Task: a\nDracode-Run: r1\n";
        assert!(info("dracode <dracode@localhost>", ours).made_by_dracode(Some("a")));
        assert!(info("dracode <dracode@localhost>", ours).made_by_dracode(None));
        assert!(!info("dracode <dracode@localhost>", ours).made_by_dracode(Some("b")), "another task's commit");
        assert!(!info("Jane <jane@example.com>", ours).made_by_dracode(Some("a")), "amended by a person");
        assert!(!info("dracode <dracode@localhost>", "dracode: a\n\nDone.\n").made_by_dracode(Some("a")), "no trailers");
    }
}
