//! Git snapshots of a working tree, and the patch between two of them.
//!
//! A snapshot is the tree the working directory would commit as (tracked and untracked files,
//! .gitignore honoured), built in an in-memory index: the user's index file and branches are
//! never written. The diff of two snapshots is exactly what a task changed, new, deleted and
//! binary files included, in a format `git apply` accepts.

use git2::{DiffOptions, IndexAddOption, Oid, Repository};
use std::path::Path;

/// A task's changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changes {
    /// The unified diff (`git apply`-able).
    pub patch: String,
    /// Repository-relative paths changed, added or deleted.
    pub files: Vec<String>,
}

/// The tree of the working directory of `repo` as it is now.
pub fn snapshot(repo: &Repository) -> Result<Oid, git2::Error> {
    let mut index = repo.index()?;
    // Start from the index as it is on disk (our earlier in-memory edits are discarded) and
    // never write it back.
    index.read(true)?;
    index.add_all(["*"].iter(), IndexAddOption::DEFAULT, None)?;
    index.update_all(["*"].iter(), None)?;
    let tree = index.write_tree()?;
    index.read(true)?;
    Ok(tree)
}

/// The changes from tree `before` to tree `after`; `None` when nothing changed.
pub fn changes(repo: &Repository, before: Oid, after: Oid, under: Option<&Path>) -> Result<Option<Changes>, git2::Error> {
    if before == after {
        return Ok(None);
    }
    let (old, new) = (repo.find_tree(before)?, repo.find_tree(after)?);
    let mut opts = DiffOptions::new();
    opts.show_binary(true).include_typechange(true);
    if let Some(dir) = under.filter(|d| !d.as_os_str().is_empty()) {
        opts.pathspec(dir);
    }
    diff_of(repo, &old, &new, &mut opts, "")
}

/// The changes from tree `before` to tree `after` of a working tree that lies at `prefix`
/// (`sub/dir/`, or empty) in its repository: file names and patch paths start with `prefix`.
pub fn changes_at(repo: &Repository, before: Oid, after: Oid, prefix: &str) -> Result<Option<Changes>, git2::Error> {
    if before == after {
        return Ok(None);
    }
    let (old, new) = (repo.find_tree(before)?, repo.find_tree(after)?);
    let mut opts = DiffOptions::new();
    opts.show_binary(true).include_typechange(true).old_prefix(format!("a/{prefix}")).new_prefix(format!("b/{prefix}"));
    diff_of(repo, &old, &new, &mut opts, prefix)
}

/// The diff of two trees as [`Changes`] (`None` when empty), file names prefixed.
fn diff_of(
    repo: &Repository,
    old: &git2::Tree<'_>,
    new: &git2::Tree<'_>,
    opts: &mut DiffOptions,
    prefix: &str,
) -> Result<Option<Changes>, git2::Error> {
    let diff = repo.diff_tree_to_tree(Some(old), Some(new), Some(opts))?;
    let files: Vec<String> = diff
        .deltas()
        .filter_map(|d| d.new_file().path().or_else(|| d.old_file().path()))
        .map(|p| format!("{prefix}{}", p.to_string_lossy().replace('\\', "/")))
        .collect();
    if files.is_empty() {
        return Ok(None);
    }
    Ok(Some(Changes { patch: crate::tools::git_diff::patch_text(&diff)?, files }))
}

/// Makes `dir` a fresh repository whose single commit holds every file in it: the baseline of
/// a `copy` workspace.
pub fn init_baseline(dir: &Path) -> Result<(Repository, Oid), git2::Error> {
    let repo = super::fresh_repo::init(dir, false)?;
    let tree = snapshot(&repo)?;
    let sig = git2::Signature::now("dracode", "dracode@localhost")?;
    {
        let tree_obj = repo.find_tree(tree)?;
        repo.commit(Some("HEAD"), &sig, &sig, "dracode baseline", &tree_obj, &[])?;
    }
    Ok((repo, tree))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::batch::test_git as git;

    #[test]
    fn diff_covers_new_modified_deleted_and_binary_and_applies_to_the_base() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("keep.txt"), "a\nb\n").unwrap();
        std::fs::write(root.join("gone.txt"), "bye\n").unwrap();
        std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
        let (repo, base) = init_baseline(root).unwrap();
        std::fs::write(root.join("keep.txt"), "a\nB\n").unwrap();
        std::fs::remove_file(root.join("gone.txt")).unwrap();
        std::fs::create_dir_all(root.join("new/dir")).unwrap();
        std::fs::write(root.join("new/dir/file.rs"), "fn main() {}\n").unwrap();
        std::fs::write(root.join("blob.bin"), [0u8, 159, 146, 150, 0, 1]).unwrap();
        std::fs::create_dir_all(root.join("ignored")).unwrap();
        std::fs::write(root.join("ignored/x"), "x").unwrap();
        let after = snapshot(&repo).unwrap();
        let changes = changes(&repo, base, after, None).unwrap().unwrap();
        let mut files = changes.files.clone();
        files.sort();
        assert_eq!(files, ["blob.bin", "gone.txt", "keep.txt", "new/dir/file.rs"]);
        assert!(changes.patch.contains("GIT binary patch"), "{}", changes.patch);

        // The patch reproduces the change on a pristine copy of the base.
        let pristine = tempfile::tempdir().unwrap();
        std::fs::write(pristine.path().join("keep.txt"), "a\nb\n").unwrap();
        std::fs::write(pristine.path().join("gone.txt"), "bye\n").unwrap();
        std::fs::write(pristine.path().join(".gitignore"), "ignored/\n").unwrap();
        git(pristine.path(), &["init", "-q"]);
        std::fs::write(pristine.path().join("p.patch"), &changes.patch).unwrap();
        git(pristine.path(), &["apply", "--check", "p.patch"]);
        git(pristine.path(), &["apply", "p.patch"]);
        assert_eq!(std::fs::read_to_string(pristine.path().join("keep.txt")).unwrap(), "a\nB\n");
        assert!(!pristine.path().join("gone.txt").exists());
        assert_eq!(std::fs::read(pristine.path().join("blob.bin")).unwrap(), [0u8, 159, 146, 150, 0, 1]);
    }

    #[test]
    fn snapshot_does_not_touch_the_users_index() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "1\n").unwrap();
        git(root, &["add", "a.txt"]);
        let status_before = git(root, &["status", "--porcelain"]);
        let repo = Repository::open(root).unwrap();
        let t1 = snapshot(&repo).unwrap();
        std::fs::write(root.join("b.txt"), "2\n").unwrap();
        let t2 = snapshot(&repo).unwrap();
        assert_ne!(t1, t2);
        std::fs::remove_file(root.join("b.txt")).unwrap();
        assert_eq!(git(root, &["status", "--porcelain"]), status_before);
        assert_eq!(changes(&repo, t1, t1, None).unwrap(), None);
    }
}
