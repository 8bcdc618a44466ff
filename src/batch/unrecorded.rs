//! What the change record does not see — gitignored files, paths a `.gitignore` the agent wrote
//! hides, a nested `.git` — may not change the verdict unseen. Before each check, every path of
//! the working tree that is neither in the recorded tree nor in the workspace as it was prepared
//! ([`Inventory`], unchanged since) is removed, except those the task's `keep_ignored` names,
//! which are reported; a path `protect` names is removed even then. The walk goes through folder
//! fds and never follows a link ([`super::beneath`]). The workspace's own `.git` (at its root)
//! is left alone.

use super::beneath;
use crate::sandbox::Protect;
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

/// What a sweep is told.
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

/// Removes from the working tree `workdir` what [`Rules`] do not account for (see the module);
/// returns the kept paths, sorted (a folder that is new and kept whole as `dir/`), at most
/// [`KEPT_LISTED`] and then `... and N more`.
pub fn sweep(workdir: &Path, rules: &Rules<'_>) -> std::io::Result<Vec<String>> {
    let root = beneath::open_root(workdir)?;
    let mut kept = sweep_dir(&root, &[], rules)?.kept;
    kept.sort();
    if kept.len() > KEPT_LISTED {
        let more = kept.len() - KEPT_LISTED;
        kept.truncate(KEPT_LISTED);
        kept.push(format!("... and {more} more"));
    }
    Ok(kept)
}

/// What a folder's sweep left.
struct Left {
    /// The kept paths in it.
    kept: Vec<String>,
    /// Whether everything in it is new and kept (it is then listed as a whole).
    all_new_kept: bool,
    /// Whether anything is left in it.
    any: bool,
}

fn sweep_dir(dir: &OwnedFd, rel: &[u8], rules: &Rules<'_>) -> std::io::Result<Left> {
    let mut left = Left { kept: Vec::new(), all_new_kept: true, any: false };
    for name in beneath::entries(dir)? {
        let path = join(rel, &name);
        if (rel.is_empty() && name == b".git") || rules.skip.contains(&path) {
            left.any = true;
            left.all_new_kept = false;
            continue;
        }
        let Some(stat) = beneath::stat_entry(dir, &name)? else { continue };
        let ident = Ident::of(&stat);
        let text = String::from_utf8_lossy(&path).into_owned();
        let was = rules.inventory.entries.get(&path) == Some(&ident);
        if ident == Ident::Dir {
            let opened = if was { beneath::open_dir(dir, &name) } else { beneath::open_dir_made_readable(dir, &name) };
            let Ok(sub) = opened else {
                if was {
                    // The user's own folder that this process cannot read: left alone.
                    left.any = true;
                    left.all_new_kept = false;
                } else {
                    // Swapped for a link since the stat: not followed, removed.
                    beneath::remove_entry(dir, &name)?;
                }
                continue;
            };
            let inner = sweep_dir(&sub, &path, rules)?;
            // A recorded folder, or a submodule's (a gitlink in the record).
            let base = was || rules.recorded.dirs.contains(&path) || rules.recorded.files.contains(&path);
            if inner.any || base {
                left.any = true;
                left.all_new_kept &= !base && inner.all_new_kept && inner.any;
                if !base && inner.all_new_kept && inner.any {
                    left.kept.push(format!("{text}/"));
                } else {
                    left.kept.extend(inner.kept);
                }
            } else {
                beneath::remove_entry(dir, &name)?;
            }
            continue;
        }
        if rules.recorded.files.contains(&path) || was {
            left.any = true;
            left.all_new_kept = false;
        } else if rules.keep.matches(&text) && !rules.protect.matches(&text) {
            left.any = true;
            left.kept.push(text);
        } else {
            beneath::remove_entry(dir, &name)?;
        }
    }
    Ok(left)
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
    fn what_the_record_does_not_hold_goes_unless_kept_and_unprotected() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, ".gitignore", "*.log\nbuild/\nnode_modules/\n__pycache__/\n");
        write(root, "tests/test_a.py", "real\n");
        write(root, "user.log", "the user's\n");
        write(root, "changed.log", "the user's\n");
        std::fs::create_dir(root.join("empty")).unwrap();
        write(root, ".git/HEAD", "ref\n");
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
        let (keep, protect) = (globs(root, &["node_modules/**", "tests/**"]), globs(root, &["tests/**"]));
        let skip = [b"out".to_vec()];
        let rules = Rules { recorded: &recorded, inventory: &inventory, keep: &keep, protect: &protect, skip: &skip };
        assert_eq!(sweep(root, &rules).unwrap(), ["node_modules/"]);
        for gone in ["changed.log", "build", "tests/__pycache__", "tests/.gitignore", "tests/test_0.py", "sub", "new-empty"] {
            assert!(std::fs::symlink_metadata(root.join(gone)).is_err(), "{gone} is removed");
        }
        for stays in ["src/new.py", "user.log", "empty", ".git/HEAD", "tests/test_a.py", "node_modules/pkg/index.js", "out/results.jsonl"] {
            assert!(std::fs::symlink_metadata(root.join(stays)).is_ok(), "{stays} stays");
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
        let kept = sweep(root, &rules).unwrap();
        assert_eq!(kept.len(), KEPT_LISTED + 1);
        assert_eq!((kept[0].as_str(), kept[KEPT_LISTED].as_str()), ("target/f000", "... and 5 more"));
        assert!(root.join("target/old").exists() && root.join("target/f104").exists());
    }
}
