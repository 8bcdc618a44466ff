//! Turns a [`Policy`](super::Policy)'s trees and hidden paths into the list of paths Landlock
//! rules are put on.
//!
//! Landlock is allow-only and a rule covers a whole hierarchy, so "all of `/` except `~/.ssh`"
//! cannot be one rule. Instead, every directory on the way from a granted tree down to a hidden
//! path is split: it gets only the right to list it (a *passage*), and each of its entries gets
//! the full grant — except the hidden entry itself, and except entries that lead to another
//! hidden path, which are split in turn. The split is computed when the ruleset is built (in the
//! supervisor, just before the command starts), from the entries that exist then: an entry
//! created later in a split folder is not covered by any rule, so it is not readable. Symlinked
//! entries that lead into (or above) a hidden path are left out, since a rule follows the link.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A hidden path: a name (or, with a trailing `*`, a name prefix) in a canonical folder.
#[derive(Debug, Clone)]
pub(super) struct Hidden {
    dir: PathBuf,
    name: OsString,
    prefix: bool,
}

impl Hidden {
    /// Hidden paths from a policy, canonicalised; those whose folder does not exist are dropped
    /// (nothing there to read). A symlinked hidden path hides its target too.
    pub(super) fn resolve(paths: &[PathBuf]) -> Vec<Hidden> {
        let mut out = Vec::new();
        for path in paths {
            let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { continue };
            let Ok(dir) = parent.canonicalize() else { continue };
            let text = name.as_bytes();
            let prefix = text.ends_with(b"*");
            let name = if prefix { OsString::from(std::ffi::OsStr::from_bytes(&text[..text.len() - 1])) } else { name.to_os_string() };
            let target = if prefix { None } else { dir.join(&name).canonicalize().ok() };
            out.push(Hidden { dir: dir.clone(), name: name.clone(), prefix });
            if let Some(target) = target.filter(|t| *t != dir.join(&name))
                && let (Some(tdir), Some(tname)) = (target.parent(), target.file_name())
            {
                out.push(Hidden { dir: tdir.to_path_buf(), name: tname.to_os_string(), prefix: false });
            }
        }
        out
    }

    /// Whether `path` (canonical) is this hidden path or inside it.
    fn covers(&self, path: &Path) -> bool {
        let Ok(rest) = path.strip_prefix(&self.dir) else { return false };
        let Some(first) = rest.components().next() else { return false };
        let first = first.as_os_str().as_bytes();
        if self.prefix { first.starts_with(self.name.as_bytes()) } else { first == self.name.as_bytes() }
    }

    /// Whether this hidden path lies strictly below `path` (canonical).
    fn below(&self, path: &Path) -> bool {
        self.dir.starts_with(path)
    }
}

/// The paths that cover a granted tree minus the hidden ones.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Cover {
    /// Paths that get the whole grant.
    pub whole: Vec<PathBuf>,
    /// Folders split around a hidden path: they get at most the right to list them.
    pub passages: Vec<PathBuf>,
}

/// Adds to `cover` the paths that cover `root` except the hidden paths below it. A root inside a
/// hidden path is granted whole: that is how a caller puts back, say, `.git/objects`.
pub(super) fn cover(root: &Path, hidden: &[Hidden], cover: &mut Cover) {
    let Ok(root) = root.canonicalize() else { return };
    let below: Vec<Hidden> = hidden.iter().filter(|h| !h.covers(&root)).cloned().collect();
    split(&root, &below, cover, 0);
}

/// Whether `path` (canonical) lies in one of `roots` and outside every hidden path below that
/// root: readable under the rules [`cover`] makes, as far as a path that exists now can tell (an
/// entry made in a split folder after the rules were built is not readable, yet counts here).
pub(super) fn granted(path: &Path, roots: &[&Path], hidden: &[Hidden]) -> bool {
    roots
        .iter()
        .filter_map(|root| root.canonicalize().ok())
        .any(|root| path.starts_with(&root) && !hidden.iter().any(|h| !h.covers(&root) && h.covers(path)))
}

/// The depth past which a folder is not split further (hidden paths are a few levels down).
const MAX_DEPTH: usize = 32;

fn split(dir: &Path, hidden: &[Hidden], cover: &mut Cover, depth: usize) {
    if hidden.iter().any(|h| h.covers(dir)) {
        return;
    }
    if depth > MAX_DEPTH || !hidden.iter().any(|h| h.below(dir)) {
        cover.whole.push(dir.to_path_buf());
        return;
    }
    cover.passages.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => split(&path, hidden, cover, depth + 1),
            Ok(t) if t.is_symlink() => {
                let Ok(target) = path.canonicalize() else { continue };
                let leads_to_hidden = hidden.iter().any(|h| h.covers(&path) || h.covers(&target) || h.below(&target));
                if !leads_to_hidden {
                    cover.whole.push(path);
                }
            }
            Ok(_) if hidden.iter().any(|h| h.covers(&path)) => {}
            Ok(_) => cover.whole.push(path),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn names(root: &Path, paths: &[PathBuf]) -> Vec<String> {
        let mut v: Vec<String> = paths.iter().map(|p| p.strip_prefix(root).unwrap().display().to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn hidden_paths_are_cut_out_of_their_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for dir in [".ssh", ".config/gh", ".config/nvim", ".cargo/bin", "src"] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in [".ssh/id", ".cargo/credentials.toml", ".cargo/credentials", ".cargo/config.toml", "notes"] {
            fs::write(root.join(file), "x").unwrap();
        }
        std::os::unix::fs::symlink(root.join(".ssh"), root.join("sneaky")).unwrap();
        std::os::unix::fs::symlink(root.join("src"), root.join("fine")).unwrap();
        let hidden = Hidden::resolve(&[root.join(".ssh"), root.join(".config/gh"), root.join(".cargo/credentials*"), root.join(".aws")]);
        let mut got = Cover::default();
        cover(&root, &hidden, &mut got);
        assert_eq!(names(&root, &got.whole), [".cargo/bin", ".cargo/config.toml", ".config/nvim", "fine", "notes", "src"]);
        assert_eq!(names(&root, &got.passages), ["", ".cargo", ".config"]);
    }

    #[test]
    fn a_tree_without_hidden_paths_is_one_rule() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let hidden = Hidden::resolve(&[PathBuf::from("/nonexistent-dir/x")]);
        let mut got = Cover::default();
        cover(&root, &hidden, &mut got);
        assert_eq!(got, Cover { whole: vec![root], passages: vec![] });
    }

    #[test]
    fn a_tree_inside_a_hidden_path_is_put_back_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        fs::create_dir_all(root.join(".git/objects")).unwrap();
        fs::write(root.join(".git/config"), "x").unwrap();
        let hidden = Hidden::resolve(&[root.join(".git")]);
        let mut got = Cover::default();
        cover(&root, &hidden, &mut got);
        assert!(!got.whole.iter().any(|p| p.starts_with(root.join(".git"))), "{got:?}");
        cover(&root.join(".git/objects"), &hidden, &mut got);
        assert!(got.whole.contains(&root.join(".git/objects")), "{got:?}");
    }
}
