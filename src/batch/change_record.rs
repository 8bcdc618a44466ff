//! The change record: what a task changed, computed by dracode from the working tree alone.
//!
//! The task's own `.git` lies in its workspace, where the agent may write: it can mark files
//! `--skip-worktree` or `--assume-unchanged` in its index, list them in `.git/info/exclude`, or
//! replace `.git` with a file that points elsewhere. None of that may hide a change. So the
//! record is a private bare repository in the task's own folder (outside the workspace, which no
//! command may read) whose working directory is set to the workspace: each snapshot starts from
//! a fresh in-memory index holding the base tree, adds every file of the working tree with only
//! the workspace's `.gitignore` files (never the task's `info/exclude` or index flags), and
//! writes the tree to the private object store. The base objects are borrowed read-only through
//! `objects/info/alternates` (the user's object stores).

use super::beneath;
use super::snapshot::{self, Changes};
use git2::{Index, IndexAddOption, Oid, Repository};
use std::path::{Path, PathBuf};

/// A private repository that snapshots one working tree.
pub struct Record {
    repo: Repository,
    /// The tree the task started from (the base of every diff).
    base: Oid,
    /// Whether `base` is tracked content (a commit's tree, or the first snapshot once taken):
    /// its files stay in every snapshot, ignored or not, as git tracks them.
    tracked_base: bool,
    /// The working tree's path in its git repository (`sub/dir/`, empty at the root): patch
    /// paths start with it, so `git apply` at the repository's root reproduces the change.
    prefix: String,
    /// Ignore rules of dracode's own (what the batch's setup made), held in memory: a record's
    /// store may be shared by the tasks of a run (a copy base's records store).
    rules: String,
}

impl Record {
    /// A record in `dir` (a new folder outside the workspace) of the working tree `workdir`,
    /// reading objects also from `object_dirs`. `base` is the tree the task starts from (a
    /// commit's tree); `None` snapshots the working tree as it is now and starts from that.
    pub fn create(dir: &Path, workdir: &Path, object_dirs: &[PathBuf], base: Option<Oid>) -> Result<Record, git2::Error> {
        Self::create_at(dir, workdir, object_dirs, base, "")
    }

    /// [`Record::create`] for a working tree that lies at `prefix` (`sub/dir/`) in its git
    /// repository: patches and file names are given from the repository's root.
    pub fn create_at(dir: &Path, workdir: &Path, object_dirs: &[PathBuf], base: Option<Oid>, prefix: &str) -> Result<Record, git2::Error> {
        let repo = super::fresh_repo::init(dir, true)?;
        if !object_dirs.is_empty() {
            let listed: String = object_dirs.iter().map(|d| format!("{}\n", d.display())).collect();
            let alternates = dir.join("objects/info/alternates");
            let io = |e: std::io::Error| git2::Error::from_str(&format!("{}: {e}", alternates.display()));
            // A fresh repository has no `objects/info` (`fresh_repo`): made only when needed.
            std::fs::create_dir_all(dir.join("objects/info")).map_err(io)?;
            std::fs::write(&alternates, listed).map_err(io)?;
        }
        repo.set_workdir(workdir, false)?;
        let mut record =
            Record { repo, base: Oid::ZERO_SHA1, tracked_base: base.is_some(), prefix: prefix.to_string(), rules: String::new() };
        record.base = match base {
            Some(tree) => tree,
            None => record.snapshot()?,
        };
        // What the task started with stays in every snapshot, as git keeps tracked files: a
        // `.gitignore` the agent writes cannot make a file of the start vanish from the record.
        record.tracked_base = true;
        Ok(record)
    }

    /// A record of the working tree `workdir` whose objects go to the existing bare repository
    /// `store` (shared by the records of a run, each with its own handle and working tree), its
    /// base the tree `base` (which `store` holds or borrows). Nothing is written.
    pub fn in_store(store: &Path, workdir: &Path, base: Oid, prefix: &str) -> Result<Record, git2::Error> {
        let repo = Repository::open_bare(store)?;
        repo.set_workdir(workdir, false)?;
        Ok(Record { repo, base, tracked_base: true, prefix: prefix.to_string(), rules: String::new() })
    }

    /// Leaves the paths `lines` ignores (gitignore lines, from the root) out of every later
    /// snapshot but where the base has them, as `info/exclude` would.
    pub fn exclude(&mut self, lines: &str) -> Result<(), git2::Error> {
        self.repo.add_ignore_rule(lines)?;
        self.rules.push_str(lines);
        Ok(())
    }

    /// The tree the task started from.
    pub fn base(&self) -> Oid {
        self.base
    }

    /// The private repository (its object store holds every snapshot).
    pub fn repo(&self) -> &Repository {
        &self.repo
    }

    /// The tree of the working directory as it is now: the base's files as they are now (gone
    /// ones left out), plus every new file the workspace's `.gitignore` files do not ignore.
    /// Its new objects are written as one pack ([`snapshot::packed`]).
    pub fn snapshot(&self) -> Result<Oid, git2::Error> {
        snapshot::packed(&self.repo, |writer| self.snapshot_with(writer))
    }

    /// [`Record::snapshot`], writing through `writer` (a handle of the record's repository).
    fn snapshot_with(&self, writer: &Repository) -> Result<Oid, git2::Error> {
        let mut index = Index::new()?;
        if self.tracked_base {
            index.read_tree(&writer.find_tree(self.base)?)?;
        }
        writer.set_index(&mut index)?;
        // A second handle (`snapshot::packed`) does not have this one's rules yet.
        if !self.rules.is_empty() && !std::ptr::eq(writer, &self.repo) {
            writer.add_ignore_rule(&self.rules)?;
        }
        index.update_all(["*"].iter(), None)?;
        index.add_all(["*"].iter(), IndexAddOption::DEFAULT, None)?;
        index.write_tree()
    }

    /// Puts every protected path the working tree changed back to its base content (a file
    /// the base lacks is removed) and returns those paths, sorted. Called when no command of the
    /// task runs any more; nothing is written outside the working tree (a link on the way to a
    /// protected path is replaced by a folder).
    pub fn restore(&self, protect: &dracode_sandbox::Protect) -> Result<Vec<String>, git2::Error> {
        self.put_back_since(self.base, |path| protect.matches(path), "restoring")
    }

    /// Gives every path that changed since `tree` and that `wanted` its content in `tree` again
    /// (removed when `tree` lacks it); returns those paths, sorted. `verb` names the work in an
    /// error (`restoring a.txt: …`).
    fn put_back_since(&self, tree: Oid, wanted: impl Fn(&str) -> bool, verb: &str) -> Result<Vec<String>, git2::Error> {
        let now = self.snapshot()?;
        let (old, new) = (self.repo.find_tree(tree)?, self.repo.find_tree(now)?);
        let changed = changed_paths(&self.repo, &old, &new, wanted)?;
        let workdir = self.repo.workdir().ok_or_else(|| git2::Error::from_str("the record has no working tree"))?.to_path_buf();
        for rel in &changed {
            let entry = old.get_path(Path::new(rel)).ok();
            put_back(&self.repo, &workdir, rel, entry.as_ref()).map_err(|e| git2::Error::from_str(&format!("{verb} {rel}: {e}")))?;
        }
        Ok(changed)
    }

    /// Writes `tree` (a snapshot of this record) into the empty folder `dir`: every file and
    /// link with its content and mode, through folder fds ([`super::beneath`]). A submodule is an
    /// empty folder. The start of a check's world (`world.rs`) when nothing else holds the
    /// tree the task started from (`copy`).
    pub fn write_tree_into(&self, tree: Oid, dir: &Path) -> Result<(), git2::Error> {
        let tree = self.repo.find_tree(tree)?;
        let mut failed: Option<git2::Error> = None;
        tree.walk(git2::TreeWalkMode::PreOrder, |folder, entry| {
            let rel = format!("{folder}{}", entry.name().unwrap_or_default());
            let result = match entry.kind() {
                Some(git2::ObjectType::Tree) => Ok(()),
                Some(git2::ObjectType::Commit) => beneath::open_root(dir)
                    .and_then(|root| beneath::walk_to(&root, &rel.split('/').map(str::as_bytes).collect::<Vec<_>>(), true).map(drop)),
                _ => put_back(&self.repo, dir, &rel, Some(entry)),
            };
            match result {
                Ok(()) => git2::TreeWalkResult::Ok,
                Err(e) => {
                    failed = Some(git2::Error::from_str(&format!("writing {rel}: {e}")));
                    git2::TreeWalkResult::Abort
                }
            }
        })?;
        failed.map_or(Ok(()), Err)
    }

    /// Makes the folder `dir`, which holds the tree `from` (both snapshots of this record, or
    /// the base), hold `to`: every path that differs gets its content in `to` (removed when `to`
    /// lacks it). Returns the paths written or removed, sorted.
    pub fn write_changes_into(&self, from: Oid, to: Oid, dir: &Path) -> Result<Vec<String>, git2::Error> {
        let (old, new) = (self.repo.find_tree(from)?, self.repo.find_tree(to)?);
        let changed = changed_paths(&self.repo, &old, &new, |_| true)?;
        for rel in &changed {
            let entry = new.get_path(Path::new(rel)).ok();
            put_back(&self.repo, dir, rel, entry.as_ref()).map_err(|e| git2::Error::from_str(&format!("writing {rel}: {e}")))?;
        }
        Ok(changed)
    }

    /// What changed from the base to the working tree now; `None` when nothing did.
    pub fn changes(&self) -> Result<Option<Changes>, git2::Error> {
        Ok(self.changes_now()?.1)
    }

    /// The tree of the working tree now, and what changed from the base to it.
    pub fn changes_now(&self) -> Result<(Oid, Option<Changes>), git2::Error> {
        let now = self.snapshot()?;
        Ok((now, snapshot::changes_at(&self.repo, self.base, now, &self.prefix)?))
    }
}

/// The paths that differ between `old` and `new` and that `wanted`, sorted, each once.
fn changed_paths(
    repo: &Repository,
    old: &git2::Tree<'_>,
    new: &git2::Tree<'_>,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<String>, git2::Error> {
    let diff = repo.diff_tree_to_tree(Some(old), Some(new), None)?;
    let mut changed: Vec<String> = diff
        .deltas()
        .flat_map(|d| [d.old_file().path(), d.new_file().path()])
        .flatten()
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .filter(|p| wanted(p))
        .collect();
    changed.sort();
    changed.dedup();
    Ok(changed)
}

/// Makes `workdir/rel` what `entry` of the base is (removed when `None`), relative to a folder
/// fd and never through a link ([`super::beneath`]): a link or file on the way is replaced by a
/// folder, so nothing outside the working tree is opened, written or removed, even when a
/// racing process swaps a folder for a link meanwhile.
fn put_back(repo: &Repository, workdir: &Path, rel: &str, entry: Option<&git2::TreeEntry<'_>>) -> std::io::Result<()> {
    let parts: Vec<&[u8]> = rel.split('/').map(str::as_bytes).collect();
    let Some((name, folders)) = parts.split_last() else { return Ok(()) };
    let root = beneath::open_root(workdir)?;
    let Some(dir) = beneath::walk_to(&root, folders, entry.is_some())? else { return Ok(()) };
    beneath::remove_entry(&dir, name)?;
    let Some(entry) = entry else { return Ok(()) };
    let blob = repo.find_blob(entry.id()).map_err(std::io::Error::other)?;
    if entry.filemode() == 0o120000 {
        return beneath::link_new(&dir, name, blob.content());
    }
    let mode = if entry.filemode() == 0o100755 { 0o755 } else { 0o644 };
    beneath::write_new(&dir, name, blob.content(), mode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A user repository with `test.sh`, `src/lib.rs` and a `.gitignore` of `target/`,
    /// committed; returns its HEAD tree.
    fn user_repo(root: &Path) -> Oid {
        git(root, &["init", "-q"]);
        std::fs::write(root.join("test.sh"), "exit 1\n").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "fn a() {}\n").unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        git(root, &["add", "-A"]);
        git(root, &["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "base"]);
        Repository::open(root).unwrap().head().unwrap().peel_to_tree().unwrap().id()
    }

    /// A workspace at `root` cloned from a user repository in `user`, and its record in
    /// `private` (borrowing the user's objects, as a `worktree` workspace does).
    fn record_of(user: &Path, root: &Path, private: &Path) -> Record {
        let base = user_repo(user);
        git(user, &["clone", "-q", ".", &root.display().to_string()]);
        let objects = vec![user.join(".git/objects")];
        Record::create(private, root, &objects, Some(base)).unwrap()
    }

    #[test]
    fn index_flags_and_info_exclude_of_the_task_hide_nothing() {
        let (user, dir, private) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let root = &dir.path().join("ws");
        let record = record_of(user.path(), root, &private.path().join("r"));
        std::fs::write(root.join("test.sh"), "exit 0\n").unwrap();
        std::fs::write(root.join("src/lib.rs"), "fn b() {}\n").unwrap();
        std::fs::write(root.join("conftest.py"), "x = 1\n").unwrap();
        git(root, &["update-index", "--skip-worktree", "test.sh"]);
        git(root, &["update-index", "--assume-unchanged", "src/lib.rs"]);
        std::fs::write(root.join(".git/info/exclude"), "conftest.py\n").unwrap();
        let changes = record.changes().unwrap().expect("changes are seen");
        let mut files = changes.files.clone();
        files.sort();
        assert_eq!(files, ["conftest.py", "src/lib.rs", "test.sh"]);
        assert!(changes.patch.contains("+exit 0"), "{}", changes.patch);
    }

    #[test]
    fn a_replaced_git_dir_is_not_followed_and_ignored_files_stay_out() {
        let (user, dir, private) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let root = &dir.path().join("ws");
        let record = record_of(user.path(), root, &private.path().join("r"));
        std::fs::remove_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git"), "gitdir: /nonexistent/elsewhere\n").unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join("target/out.o"), "bin").unwrap();
        std::fs::write(root.join("test.sh"), "exit 0\n").unwrap();
        let changes = record.changes().unwrap().expect("changes are seen");
        assert_eq!(changes.files, ["test.sh"]);
    }

    #[test]
    fn a_folder_that_is_not_a_repository_gets_a_record_too() {
        let (dir, private) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let root = dir.path();
        std::fs::write(root.join("a.txt"), "1\n").unwrap();
        let record = Record::create(&private.path().join("r"), root, &[], None).unwrap();
        assert_eq!(record.changes().unwrap(), None);
        std::fs::write(root.join("a.txt"), "2\n").unwrap();
        std::fs::write(root.join("b.txt"), "new\n").unwrap();
        let changes = record.changes().unwrap().unwrap();
        assert_eq!(changes.files, ["a.txt", "b.txt"]);
        assert!(!root.join(".git").exists(), "nothing is written into the folder");
    }

    #[test]
    fn protected_paths_are_put_back_from_the_base_and_named() {
        let (user, dir, private) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let root = &dir.path().join("ws");
        let record = record_of(user.path(), root, &private.path().join("r"));
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(root.join("test.sh"), "exit 0\n").unwrap();
        std::fs::write(root.join("src/lib.rs"), "fn b() {}\n").unwrap();
        std::fs::create_dir_all(root.join("tests")).unwrap();
        std::fs::write(root.join("tests/new_test.py"), "ok\n").unwrap();
        let names = ["test.sh".to_string(), "tests/**".to_string()];
        let protect = dracode_sandbox::Protect::compile(root, &names).unwrap();
        assert_eq!(record.restore(&protect).unwrap(), ["test.sh", "tests/new_test.py"]);
        assert_eq!(std::fs::read_to_string(root.join("test.sh")).unwrap(), "exit 1\n");
        assert!(!root.join("tests/new_test.py").exists());
        assert_eq!(record.changes().unwrap().unwrap().files, ["src/lib.rs"], "the agent's other work stays");
        // A link planted on the way to a protected path is not written through.
        std::fs::remove_dir_all(root.join("src")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("src")).unwrap();
        let protect = dracode_sandbox::Protect::compile(root, &["src/**".to_string()]).unwrap();
        assert_eq!(record.restore(&protect).unwrap(), ["src/lib.rs"]);
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "nothing written outside");
        assert_eq!(std::fs::read_to_string(root.join("src/lib.rs")).unwrap(), "fn a() {}\n");
    }

    #[test]
    fn a_recorded_tree_is_written_into_a_fresh_folder_exactly_and_nothing_unrecorded_with_it() {
        let (user, dir, private) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let root = &dir.path().join("ws");
        let record = record_of(user.path(), root, &private.path().join("r"));
        // The agent's work: an edit, a removal, a new script, a link; and what the record ignores.
        std::fs::write(root.join("src/lib.rs"), "fn b() {}\n").unwrap();
        std::fs::remove_file(root.join("test.sh")).unwrap();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("bin/run"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(root.join("bin/run"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("../src/lib.rs", root.join("bin/lib")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join("target/out.o"), "bin").unwrap();
        let agents = record.snapshot().unwrap();

        let world = dir.path().join("world");
        std::fs::create_dir(&world).unwrap();
        record.write_tree_into(record.base(), &world).unwrap();
        assert_eq!(std::fs::read_to_string(world.join("test.sh")).unwrap(), "exit 1\n");
        let written = record.write_changes_into(record.base(), agents, &world).unwrap();
        assert_eq!(written, ["bin/lib", "bin/run", "src/lib.rs", "test.sh"]);
        let mut expected = tree_of(root);
        expected.retain(|path, _| !path.starts_with("target") && !path.starts_with(".git"));
        assert_eq!(tree_of(&world), expected);
        let mode = std::fs::metadata(world.join("bin/run")).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o755);
        assert!(!world.join("target").exists(), "what the record does not hold is not written");
    }

    /// Every file under `dir` with its bytes (links by their text).
    fn tree_of(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
        let mut all = std::collections::BTreeMap::new();
        for entry in walkdir_all(dir) {
            let meta = std::fs::symlink_metadata(&entry).unwrap();
            let bytes = if meta.is_symlink() {
                std::fs::read_link(&entry).unwrap().into_os_string().into_encoded_bytes()
            } else if meta.is_file() {
                std::fs::read(&entry).unwrap()
            } else {
                b"<dir>".to_vec()
            };
            all.insert(entry.strip_prefix(dir).unwrap().to_path_buf(), bytes);
        }
        all
    }

    fn walkdir_all(dir: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                found.extend(walkdir_all(&path));
            }
            found.push(path);
        }
        found
    }

    #[test]
    fn a_folder_swapped_for_a_link_during_restore_and_sweep_leads_nowhere_outside() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (user, dir, private) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let root = dir.path().join("ws");
        let record = record_of(user.path(), &root, &private.path().join("r"));
        let inventory = crate::batch::unrecorded::Inventory::take(&root).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("lib.rs"), "outside\n").unwrap();
        std::fs::write(outside.path().join("out.o"), "outside\n").unwrap();
        std::fs::create_dir(outside.path().join("deep")).unwrap();
        std::fs::write(outside.path().join("deep/x"), "outside\n").unwrap();
        let before = tree_of(outside.path());
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        // The racer: moves `src` (protected) and `target` (ignored) aside, changes them, puts a
        // link to the outside folder in their place, and back — in a loop.
        let racer = {
            let (root, outside, stop) = (root.clone(), outside.path().to_path_buf(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    for (name, file) in [("src", "lib.rs"), ("target", "out.o")] {
                        let (real, aside) = (root.join(name), root.join(format!(".aside{n}{name}")));
                        let _ = std::fs::create_dir_all(&real);
                        if std::fs::rename(&real, &aside).is_err() {
                            continue;
                        }
                        // A new file renamed over the old one, never truncated in place: libgit2
                        // maps the files it hashes, and a file cut short under a mapping is SIGBUS.
                        let fresh = aside.join(format!("{file}.new"));
                        if std::fs::write(&fresh, format!("changed {n}\n")).is_ok() {
                            let _ = std::fs::rename(&fresh, aside.join(file));
                        }
                        let _ = std::os::unix::fs::symlink(&outside, &real);
                        std::thread::yield_now();
                        match std::fs::symlink_metadata(&real) {
                            Ok(m) if m.is_symlink() => drop(std::fs::remove_file(&real)),
                            Ok(_) => drop(std::fs::remove_dir_all(&real)),
                            Err(_) => {}
                        }
                        let _ = std::fs::rename(&aside, &real);
                    }
                }
            })
        };
        let protect = dracode_sandbox::Protect::compile(&root, &["src/**".to_string()]).unwrap();
        let keep = dracode_sandbox::Protect::compile(&root, &[]).unwrap();
        let started = std::time::Instant::now();
        let mut rounds = 0;
        while started.elapsed() < std::time::Duration::from_secs(3) || rounds < 50 {
            rounds += 1;
            let _ = record.restore(&protect);
            if let Ok(tree) = record.snapshot() {
                let recorded = crate::batch::unrecorded::Recorded::of(&record.repo, tree).unwrap();
                let rules = crate::batch::unrecorded::Rules {
                    recorded: &recorded,
                    inventory: &inventory,
                    keep: &keep,
                    protect: &protect,
                    skip: &[],
                };
                let _ = crate::batch::unrecorded::kept(&root, &rules);
            }
        }
        stop.store(true, Ordering::Relaxed);
        racer.join().unwrap();
        assert_eq!(tree_of(outside.path()), before, "nothing outside was written or removed ({rounds} rounds)");
    }
}
