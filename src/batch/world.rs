//! The world a check runs in: made for that check alone, from the record.
//!
//! Every check — `check_before`, the check after each attempt and each repair, `dracode regrade`
//! and `dracode combine --check` — runs in a folder of its own, never where the agent has been:
//!
//! - the tree the change record holds ([`World::of_record`]), or the recorded patch on its base
//!   commit ([`World::of_workspace`], for regrade and combine), written by dracode: of the
//!   agent's workspace, only what the record holds;
//! - a repository of its own, made the way the workspace's was ([`Workspace::remake_at`]): its
//!   config, hooks, index and refs are dracode's, never a byte of the agent's `.git`;
//! - the `[setup]` outputs copied from the setup's own workspace, which no command writes once
//!   the setup ended: exactly as the setup left them (bytes, modes, modification times), whatever
//!   the agent did to its copy — so a build the setup made stays valid for the check;
//! - what the task's `keep_ignored` names, copied from the workspace and listed
//!   (`task.finished.kept_ignored`): the one way the agent's unrecorded files reach a check, and
//!   a visible one;
//! - and, by `task::command_kit`, a TMPDIR, HOME, package caches, tool homes and git
//!   configuration of its own.
//!
//! No process of the agent runs by then (they are stopped and swept first), and the world's
//! path is new: the Landlock grant of anything the task still has (an MCP server between repair
//! rounds) names the workspace's folder, not this one.
//!
//! Why a world is built rather than the workspace reset: a reset must find and undo everything
//! a hostile agent can leave — a folder it made unreadable, a `.git/config` with
//! `core.fsmonitor`, a file's mode, extended attributes, hard links, a FIFO — and any kind it
//! misses is a forged pass. A world holds only what dracode writes into it. The cost is a
//! checkout and a copy of the setup's outputs per check (`docs/src/performance.md`).
//!
//! With `isolation = "none"` the workspace is the user's own folder and the check runs there
//! ([`World::in_place`]), with a TMPDIR and HOME of its own.

use super::owned_dir::{OwnedDir, TASK_DIR_PREFIX};
use super::workspace::{Carried, SandboxPaths, Workspace, WorkspaceError, carry_into};
use git2::Oid;
use std::path::{Path, PathBuf};

/// Where a check runs, and what holds that folder (removed when dropped).
pub struct World {
    /// The folder and its sandbox paths.
    pub place: Place,
    _holder: Holder,
}

/// The folders of a [`World`] (plain data, shared freely).
#[derive(Debug, Clone)]
pub struct Place {
    /// The world's root: what the workspace root is to the agent.
    pub root: PathBuf,
    /// Where the check runs: `root` joined with the task's `workdir`.
    pub workdir: PathBuf,
    /// What the OS sandbox must let the check write and read, and what it must hide.
    pub paths: SandboxPaths,
}

/// What keeps a world's folder alive.
enum Holder {
    /// The user's own folder: nothing to remove.
    InPlace,
    /// A folder dracode made for the check.
    Folder { _dir: OwnedDir },
    /// A workspace made for the check (regrade, combine).
    Workspace { _workspace: Box<Workspace> },
}

/// What a world made from a task's record holds besides the recorded tree.
pub struct Recipe<'a> {
    /// The tree of the change record to check (its base, for `check_before`).
    pub tree: Oid,
    /// What the batch's setup made, copied in from where it ran.
    pub carried: Option<&'a Carried>,
    /// Paths of the workspace `keep_ignored` keeps (`dir/` for a folder), copied in.
    pub kept: &'a [String],
    /// The task's `workdir`, relative to the root.
    pub workdir: &'a Path,
}

impl World {
    /// The check runs in the workspace itself (`isolation = "none"`: the user's folder).
    pub fn in_place(workspace: &Workspace) -> World {
        World { place: Self::place_of(workspace), _holder: Holder::InPlace }
    }

    /// A world made from `workspace`'s change record as `recipe` says (see the module).
    pub fn of_record(workspace: &Workspace, recipe: &Recipe<'_>) -> Result<World, WorkspaceError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| WorkspaceError::Io { path, source }
        };
        let dir = OwnedDir::create(TASK_DIR_PREFIX).map_err(io(&std::env::temp_dir()))?;
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).map_err(io(&root))?;
        workspace.remake_at(&root, recipe.tree)?;
        if let Some(carried) = recipe.carried {
            carry_into(&root, carried, &[root.join(".git")]).map_err(io(&root))?;
        }
        copy_kept(&workspace.root, &root, recipe.kept).map_err(io(&root))?;
        let workdir = root.join(recipe.workdir);
        std::fs::create_dir_all(&workdir).map_err(io(&workdir))?;
        let place = Place { paths: workspace.sandbox_paths_at(&root), root, workdir };
        Ok(World { place, _holder: Holder::Folder { _dir: dir } })
    }

    /// The place of a workspace dracode made and wrote itself, no agent in it (`combine`'s
    /// union), used as a world as it is.
    pub fn place_of(workspace: &Workspace) -> Place {
        Place { root: workspace.root.clone(), workdir: workspace.workdir.clone(), paths: workspace.sandbox_paths() }
    }

    /// The world of a workspace made for the check alone (regrade and combine: a fresh worktree
    /// at the recorded base, the setup's outputs carried in, the recorded patch applied).
    pub fn of_workspace(workspace: Workspace) -> World {
        World { place: Self::place_of(&workspace), _holder: Holder::Workspace { _workspace: Box::new(workspace) } }
    }
}

/// Copies each of `kept` (relative, a folder as `dir/`) from the workspace at `from` into the
/// world at `to`, over what the world holds there, text naming `from` rewritten to `to`
/// ([`super::carry::copy_outputs`]). The folders on the way are made real folders first (a
/// link there is replaced, never followed).
fn copy_kept(from: &Path, to: &Path, kept: &[String]) -> std::io::Result<()> {
    if kept.is_empty() {
        return Ok(());
    }
    let root = super::beneath::open_root(to)?;
    let mut paths = Vec::with_capacity(kept.len());
    for path in kept {
        let rel = path.trim_end_matches('/');
        let parts: Vec<&[u8]> = rel.split('/').map(str::as_bytes).collect();
        let Some((name, folders)) = parts.split_last() else { continue };
        if let Some(dir) = super::beneath::walk_to(&root, folders, true)? {
            super::beneath::remove_entry(&dir, name)?;
        }
        paths.push(rel.to_string());
    }
    super::carry::copy_outputs(from, to, &paths).map(drop)
}
