//! What the change record does not see — gitignored files, paths a `.gitignore` the agent wrote
//! hides, a nested `.git` — may not change the verdict unseen: the check runs in a world made
//! from the record (`world.rs`), which holds none of it. What the task's `keep_ignored`
//! names is the exception: [`kept`] finds those paths of the working tree that are neither in
//! the recorded tree nor as the workspace was prepared ([`Inventory`], unchanged since), and the
//! world gets a copy of them, reported; a path `protect` names is never kept. The walk goes
//! through folder fds and never follows a link ([`super::beneath`]). The workspace's own `.git`
//! (at its root) is left out.

use super::beneath;
use dracode_sandbox::Protect;
use rustix::fs::FileType;
use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::path::Path;

/// At most this many kept paths are named in `kept_ignored`; a last entry counts the rest.
pub const KEPT_LISTED: usize = 100;

/// One entry of the working tree as it was prepared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ident {
    Dir,
    /// A file, link or other entry: changed when any of these differs (`ctime` cannot be set
    /// back by a process).
    Other {
        ino: u64,
        size: i64,
        mode: u32,
        ctime: (i64, i64),
    },
}

impl Ident {
    fn of(stat: &rustix::fs::Stat) -> Ident {
        if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
            return Ident::Dir;
        }
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
        Ident::Other {
            ino: stat.st_ino as u64,
            size: stat.st_size as i64,
            mode: stat.st_mode as u32,
            ctime: (stat.st_ctime as i64, stat.st_ctime_nsec as i64),
        }
    }
}

/// Every entry of a working tree (its root `.git` left out) as the workspace was prepared, before
/// any command ran: what was there is not the agent's.
#[derive(Debug, Default)]
pub struct Inventory {
    entries: HashMap<Vec<u8>, Ident>,
}

impl Inventory {
    /// The entries under `workdir` now.
    pub fn take(workdir: &Path) -> std::io::Result<Inventory> {
        let mut inventory = Inventory::default();
        let root = beneath::open_root(workdir)?;
        inventory.add(&root, &[])?;
        Ok(inventory)
    }

    fn add(&mut self, dir: &OwnedFd, rel: &[u8]) -> std::io::Result<()> {
        for name in beneath::entries(dir)? {
            if rel.is_empty() && name == b".git" {
                continue;
            }
            let Some(stat) = beneath::stat_entry(dir, &name)? else { continue };
            let path = join(rel, &name);
            let ident = Ident::of(&stat);
            self.entries.insert(path.clone(), ident);
            // A folder this process may not read (the user's, with `isolation = "none"`) is
            // left as it is, here and by the sweep.
            if ident == Ident::Dir
                && let Ok(sub) = beneath::open_dir(dir, &name)
            {
                self.add(&sub, &path)?;
            }
        }
        Ok(())
    }
}

/// What commands made in a working tree since its [`Inventory`] was taken.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Made {
    /// New entries, sorted: a new folder whole (not what is in it), a new file or link in a
    /// folder that was there.
    pub added: Vec<String>,
    /// Files or links that were there and changed (or were replaced), sorted.
    pub changed: Vec<String>,
}

impl Inventory {
    /// What was made in `workdir` (the tree this inventory was taken of) since (see [`Made`]).
    pub fn made_since(&self, workdir: &Path) -> std::io::Result<Made> {
        let mut made = Made::default();
        self.compare(&beneath::open_root(workdir)?, &[], &mut made)?;
        made.added.sort();
        made.changed.sort();
        Ok(made)
    }

    fn compare(&self, dir: &OwnedFd, rel: &[u8], made: &mut Made) -> std::io::Result<()> {
        for name in beneath::entries(dir)? {
            if rel.is_empty() && name == b".git" {
                continue;
            }
            let Some(stat) = beneath::stat_entry(dir, &name)? else { continue };
            let path = join(rel, &name);
            let text = || String::from_utf8_lossy(&path).into_owned();
            match (self.entries.get(&path), Ident::of(&stat)) {
                (None, _) => made.added.push(text()),
                (Some(Ident::Dir), Ident::Dir) => {
                    if let Ok(sub) = beneath::open_dir(dir, &name) {
                        self.compare(&sub, &path, made)?;
                    }
                }
                (Some(was), now) if *was != now => made.changed.push(text()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// `rel/name` (or `name` at the root).
fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = rel.to_vec();
    if !path.is_empty() {
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

/// The paths of a recorded tree: its files, links and submodules, and the folders holding them.
#[derive(Debug, Default)]
pub struct Recorded {
    files: HashSet<Vec<u8>>,
    dirs: HashSet<Vec<u8>>,
}

impl Recorded {
    /// The paths of `tree` in `repo`.
    pub fn of(repo: &git2::Repository, tree: git2::Oid) -> Result<Recorded, git2::Error> {
        let mut recorded = Recorded::default();
        repo.find_tree(tree)?.walk(git2::TreeWalkMode::PreOrder, |folder, entry| {
            let path = [folder.as_bytes(), entry.name_bytes()].concat();
            if entry.kind() == Some(git2::ObjectType::Tree) {
                recorded.dirs.insert(path);
            } else {
                recorded.files.insert(path);
            }
            git2::TreeWalkResult::Ok
        })?;
        Ok(recorded)
    }
}

/// What the walk for `keep_ignored` is told.
pub struct Rules<'a> {
    /// The tree just recorded.
    pub recorded: &'a Recorded,
    /// The working tree as prepared.
    pub inventory: &'a Inventory,
    /// `keep_ignored`.
    pub keep: &'a Protect,
    /// `protect`.
    pub protect: &'a Protect,
    /// Paths (relative) never touched: dracode's own output when it lies in the working tree.
    pub skip: &'a [Vec<u8>],
}

/// The paths of the working tree `workdir` that [`Rules`] keep for the check: neither recorded
/// nor as prepared, named by `keep` and not by `protect` — sorted, a new folder whose entries are
/// all kept named whole as `dir/`. Nothing is changed: a folder this process cannot open keeps
/// nothing. The rest of what the record does not hold never reaches the check
/// (`world.rs`).
pub fn kept(workdir: &Path, rules: &Rules<'_>) -> std::io::Result<Vec<String>> {
    let root = beneath::open_root(workdir)?;
    let mut kept = kept_in(&root, &[], rules)?.kept;
    kept.sort();
    Ok(kept)
}

/// `kept` as `task.finished.kept_ignored` lists it: at most [`KEPT_LISTED`] entries, then
/// `... and N more`.
pub fn listed(mut kept: Vec<String>) -> Vec<String> {
    if kept.len() > KEPT_LISTED {
        let more = kept.len() - KEPT_LISTED;
        kept.truncate(KEPT_LISTED);
        kept.push(format!("... and {more} more"));
    }
    kept
}

/// What a folder holds for the check.
struct Found {
    /// The kept paths in it.
    kept: Vec<String>,
    /// Whether everything in it is new and kept (it is then listed as a whole).
    all_new_kept: bool,
    /// Whether anything in it is recorded, prepared or kept.
    any: bool,
}

fn kept_in(dir: &OwnedFd, rel: &[u8], rules: &Rules<'_>) -> std::io::Result<Found> {
    let mut found = Found { kept: Vec::new(), all_new_kept: true, any: false };
    for name in beneath::entries(dir)? {
        let path = join(rel, &name);
        let Some(stat) = beneath::stat_entry(dir, &name)? else { continue };
        let ident = Ident::of(&stat);
        let text = String::from_utf8_lossy(&path).into_owned();
        let was = rules.inventory.entries.get(&path) == Some(&ident);
        let own = (rel.is_empty() && name == b".git") || rules.skip.contains(&path);
        let opened = if ident == Ident::Dir && !own { beneath::open_dir(dir, &name).ok() } else { None };
        let inner = opened.map(|sub| kept_in(&sub, &path, rules)).transpose()?;
        // A recorded folder, or a submodule's (a gitlink in the record).
        let base = own || was || rules.recorded.dirs.contains(&path) || rules.recorded.files.contains(&path);
        match inner {
            Some(inner) if !base && inner.all_new_kept && inner.any => {
                found.any = true;
                found.kept.push(format!("{text}/"));
            }
            Some(inner) => {
                found.any |= inner.any || base;
                found.all_new_kept &= !(inner.any || base);
                found.kept.extend(inner.kept);
            }
            None if base || (ident == Ident::Dir && !own) => {
                // Recorded, as prepared, dracode's own — or a folder it cannot open: nothing of
                // it is kept.
                found.any = true;
                found.all_new_kept = false;
            }
            None if rules.keep.matches(&text) && !rules.protect.matches(&text) => {
                found.any = true;
                found.kept.push(text);
            }
            None => {}
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn globs(root: &Path, patterns: &[&str]) -> Protect {
        Protect::compile(root, &patterns.iter().map(|p| (*p).to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn only_what_keep_names_and_protect_does_not_is_kept_and_nothing_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".gitignore", "*.log\nbuild/\nnode_modules/\n__pycache__/\n");
        write(root, "tests/test_a.py", "real\n");
        write(root, "user.log", "the user's\n");
        write(root, "changed.log", "the user's\n");
        std::fs::create_dir(root.join("empty")).unwrap();
        let (repo, _) = crate::batch::snapshot::init_baseline(root).unwrap();
        let inventory = Inventory::take(root).unwrap();
        // The agent's work: a recorded file, then what the record does not hold.
        write(root, "src/new.py", "recorded\n");
        write(root, "changed.log", "the agent's\n");
        write(root, "build/out/a.o", "x");
        write(root, "node_modules/pkg/index.js", "x");
        write(root, "node_modules/.bin/tool", "x");
        write(root, "tests/__pycache__/test_a.pyc", "forged");
        write(root, "tests/.gitignore", "*\n");
        write(root, "tests/test_0.py", "planted\n");
        write(root, "sub/.git/config", "nested\n");
        write(root, "out/results.jsonl", "dracode's own\n");
        std::fs::create_dir(root.join("new-empty")).unwrap();
        let tree = crate::batch::snapshot::snapshot(&repo).unwrap();
        let recorded = Recorded::of(&repo, tree).unwrap();
        let (keep, protect) = (globs(root, &["node_modules/**", "tests/**", "*.log"]), globs(root, &["tests/**"]));
        let skip = [b"out".to_vec()];
        let rules = Rules { recorded: &recorded, inventory: &inventory, keep: &keep, protect: &protect, skip: &skip };
        assert_eq!(kept(root, &rules).unwrap(), ["changed.log", "node_modules/"]);
        for stays in ["changed.log", "build/out/a.o", "tests/test_0.py", "sub/.git/config", "new-empty", "out/results.jsonl"] {
            assert!(std::fs::symlink_metadata(root.join(stays)).is_ok(), "{stays} is left where it is");
        }
    }

    #[test]
    fn kept_paths_are_listed_file_by_file_in_a_folder_that_was_there_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".gitignore", "target/\n");
        write(root, "target/old", "x");
        let (repo, tree) = crate::batch::snapshot::init_baseline(root).unwrap();
        let inventory = Inventory::take(root).unwrap();
        for i in 0..(KEPT_LISTED + 5) {
            write(root, &format!("target/f{i:03}"), "x");
        }
        let recorded = Recorded::of(&repo, tree).unwrap();
        let (keep, protect) = (globs(root, &["target/**"]), globs(root, &[]));
        let rules = Rules { recorded: &recorded, inventory: &inventory, keep: &keep, protect: &protect, skip: &[] };
        let kept = listed(kept(root, &rules).unwrap());
        assert_eq!(kept.len(), KEPT_LISTED + 1);
        assert_eq!((kept[0].as_str(), kept[KEPT_LISTED].as_str()), ("target/f000", "... and 5 more"));
        assert!(root.join("target/old").exists() && root.join("target/f104").exists());
    }
}
