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
/// a run's copy base (`run_stores.rs`), made once per run. Its objects are written as one pack
/// ([`packed`]).
pub fn init_baseline(dir: &Path) -> Result<(Repository, Oid), git2::Error> {
    let repo = super::fresh_repo::init_once(dir, false)?;
    let sig = git2::Signature::now("dracode", "dracode@localhost")?;
    let mut tree = Oid::ZERO_SHA1;
    let commit = packed(&repo, |writer| {
        tree = snapshot(writer)?;
        writer.commit(None, &sig, &sig, "dracode baseline", &writer.find_tree(tree)?, &[])
    })?;
    // The branch is set only now that the pack holding the commit is on disk.
    let branch = repo.find_reference("HEAD")?.symbolic_target().ok().flatten().map(str::to_string);
    let branch = branch.ok_or_else(|| git2::Error::from_str("HEAD of a fresh repository is not a branch"))?;
    repo.reference(&branch, commit, true, "commit (initial): dracode baseline")?;
    // The index matches the baseline, so `git status` in the workspace starts clean.
    let mut index = repo.index()?;
    index.read_tree(&repo.find_tree(tree)?)?;
    index.write()?;
    Ok((repo, tree))
}

/// Runs `write` on a second handle of `repo` whose new objects are held in memory, then stores
/// the new objects reachable from the tree or commit it returns as ONE pack in `repo`'s object
/// store (files are what cost: a loose object is a file, often a folder too). Objects already
/// on disk are not packed again; `repo` itself writes loose objects as before. The pack folder
/// must have existed when `repo` was opened (as [`super::fresh_repo::init`] makes it).
///
/// The new objects wait in memory until the pack is written, so a work tree holding more than
/// [`PACK_IN_MEMORY_LIMIT`] bytes of files (or none) is snapshotted with loose objects instead:
/// memory stays bounded on a large repository.
pub fn packed(repo: &Repository, write: impl FnOnce(&Repository) -> Result<Oid, git2::Error>) -> Result<Oid, git2::Error> {
    packed_within(repo, PACK_IN_MEMORY_LIMIT, write)
}

/// Bytes of files a work tree may hold for [`packed`] to gather its new objects in memory.
pub const PACK_IN_MEMORY_LIMIT: u64 = 32 << 20;

/// [`packed`] with the limit given.
fn packed_within(repo: &Repository, limit: u64, write: impl FnOnce(&Repository) -> Result<Oid, git2::Error>) -> Result<Oid, git2::Error> {
    if repo.workdir().is_none_or(|dir| files_exceed(dir, limit)) {
        return write(repo);
    }
    let writer = Repository::open(repo.path())?;
    if let Some(workdir) = repo.workdir() {
        writer.set_workdir(workdir, false)?;
    }
    let odb = writer.odb()?;
    let memory = odb.add_new_mempack_backend(1000)?;
    let root = write(&writer)?;
    let on_disk = repo.odb()?;
    on_disk.refresh()?;
    let mut builder = writer.packbuilder()?;
    add_new_objects(&writer, &on_disk, &mut builder, root, None)?;
    if builder.object_count() > 0 {
        let mut pack = git2::Buf::new();
        builder.write_buf(&mut pack)?;
        let mut sink = odb.packwriter()?;
        std::io::Write::write_all(&mut sink, &pack).map_err(|e| git2::Error::from_str(&format!("writing a pack: {e}")))?;
        sink.commit()?;
    }
    memory.reset()?;
    Ok(root)
}

/// The files and folders under `dir` that git would see: `.gitignore` honoured, no `.git` at
/// any depth (a nested repository's config may hold a token), hidden files included, links not
/// followed. What a `copy` workspace copies and what a snapshot may add.
pub fn unignored(dir: &Path) -> ignore::Walk {
    ignore::WalkBuilder::new(dir).hidden(false).git_ignore(true).require_git(false).filter_entry(|e| e.file_name() != ".git").build()
}

/// Whether the files a snapshot of `dir` may add ([`unignored`]) hold more than `limit` bytes;
/// stops counting as soon as they do. An unreadable entry counts as too much.
fn files_exceed(dir: &Path, limit: u64) -> bool {
    let mut total = 0u64;
    for entry in unignored(dir) {
        let Ok(entry) = entry else { return true };
        if entry.file_type().is_some_and(|k| k.is_file()) {
            total += entry.metadata().map_or(0, |m| m.len());
            if total > limit {
                return true;
            }
        }
    }
    false
}

/// Adds `id` (of type `kind` when known) and every object it reaches to `builder`, leaving out
/// those `on_disk` already holds (and all they reach: an object is only stored after what it
/// names).
fn add_new_objects(
    repo: &Repository,
    on_disk: &git2::Odb<'_>,
    builder: &mut git2::PackBuilder<'_>,
    id: Oid,
    kind: Option<git2::ObjectType>,
) -> Result<(), git2::Error> {
    if on_disk.exists_ext(id, git2::OdbLookupFlags::NO_REFRESH) {
        return Ok(());
    }
    builder.insert_object(id, None)?;
    if kind == Some(git2::ObjectType::Blob) {
        return Ok(());
    }
    let object = repo.find_object(id, kind)?;
    if let Some(commit) = object.as_commit() {
        add_new_objects(repo, on_disk, builder, commit.tree_id(), Some(git2::ObjectType::Tree))?;
    } else if let Some(tree) = object.as_tree() {
        // A gitlink (a submodule's commit) names an object of another repository.
        for entry in tree.iter().filter(|e| e.kind() != Some(git2::ObjectType::Commit)) {
            add_new_objects(repo, on_disk, builder, entry.id(), entry.kind())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::batch::test_git as git;

    /// What `objects/` holds: (loose object folders, pack files).
    fn stored(repo: &Path) -> (usize, usize) {
        let names = |dir: &Path| -> Vec<String> {
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
        };
        let objects = repo.join(".git/objects");
        let loose = names(&objects).iter().filter(|n| n.len() == 2).count();
        let packs = names(&objects.join("pack")).iter().filter(|n| n.ends_with(".pack")).count();
        (loose, packs)
    }

    #[test]
    fn a_work_tree_over_the_memory_limit_keeps_loose_objects() {
        for (limit, expected) in [(10_000, (0, 1)), (100, (4, 0))] {
            let dir = tempfile::tempdir().unwrap();
            for name in ["a", "b", "c"] {
                std::fs::write(dir.path().join(name), name.repeat(60)).unwrap();
            }
            let repo = crate::batch::fresh_repo::init(dir.path(), false).unwrap();
            let tree = packed_within(&repo, limit, snapshot).unwrap();
            assert_eq!(stored(dir.path()), expected, "limit {limit}");
            assert_eq!(git(dir.path(), &["ls-tree", "--name-only", &tree.to_string()]), "a\nb\nc\n");
        }
    }

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
