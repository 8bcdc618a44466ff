//! Confines every path a file tool touches to the task's workspace.
//!
//! A path from the model is resolved the way the kernel would resolve it — component by
//! component, expanding every symlink on the way (relative ones against the link's own
//! directory) and applying `..` to the real directory reached so far — and only then compared,
//! component-wise, with the canonical root. Components that do not exist yet (a file about to be
//! written) are appended as they are. So `../x`, `/etc/passwd`, a link to `/etc`, and
//! `/ws-evil/x` next to `/ws` are all refused, while `sub/../x` or an absolute path inside the
//! root are fine. The check guards the file tools' arguments; commands are confined by the OS
//! sandbox of the parent module instead.
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The kernel's own limit on symlinks followed in one lookup (Linux `MAXSYMLINKS`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a path was refused or could not be resolved; the tools turn it into their own error.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path resolves outside the root.
    #[error("{0:?} is outside the workspace; use a path relative to the workspace root")]
    Outside(String),
    /// The path does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// The path contains a NUL byte.
    #[error("{0:?} contains a NUL byte")]
    Nul(String),
    /// Too many symlinks were followed.
    #[error("{0}: too many levels of symbolic links")]
    SymlinkLoop(String),
    /// Reading a symlink failed.
    #[error("{path}: {source}")]
    Io {
        /// The path as given.
        path: String,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },
}

/// A workspace root and the rules for resolving paths inside it.
#[derive(Debug, Clone)]
pub struct Sandbox {
    root: PathBuf,
}

/// Where a walk ended.
struct Walked {
    /// The resolved absolute path (canonical up to the first missing component).
    path: PathBuf,
    /// Whether every component exists.
    exists: bool,
}

impl Sandbox {
    /// A sandbox rooted at `root` (canonicalised).
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Sandbox { root: root.canonicalize()? })
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `path` (relative to the root, or absolute inside it) to an existing file or
    /// directory, symlinks followed. Errors: `PATH_OUTSIDE_WORKSPACE`, `FILE_NOT_FOUND`.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        let walked = self.walk(path, true)?;
        if walked.exists { Ok(walked.path) } else { Err(PathError::NotFound(path.to_string())) }
    }

    /// Resolves `path` for a file that may not exist yet: symlinks in its existing part are
    /// followed, missing components are appended. Error: `PATH_OUTSIDE_WORKSPACE`.
    pub fn resolve_for_write(&self, path: &str) -> Result<PathBuf, PathError> {
        Ok(self.walk(path, true)?.path)
    }

    /// Like [`Sandbox::resolve_for_write`], but a symlink as the last component is not
    /// followed: the result names the link itself, which is what deleting or renaming must act
    /// on. The link's directory must still be inside the workspace.
    pub fn resolve_entry(&self, path: &str) -> Result<PathBuf, PathError> {
        Ok(self.walk(path, false)?.path)
    }

    /// `abs` relative to the root with forward slashes (`.` for the root itself); a path
    /// outside the root is shown as it is.
    pub fn relative(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"),
            Err(_) => abs.display().to_string(),
        }
    }

    /// Resolves `path` like the kernel does, keeping a missing tail, then checks containment.
    fn walk(&self, path: &str, follow_last: bool) -> Result<Walked, PathError> {
        if path.contains('\0') {
            return Err(PathError::Nul(path.to_string()));
        }
        let mut queue: VecDeque<OsString> = VecDeque::new();
        let mut cur = self.root.clone();
        push_front_components(&mut queue, &mut cur, Path::new(path));
        // Components appended to `cur` that do not exist on disk; `..` removes them lexically,
        // which is sound because a missing component cannot be a symlink.
        let mut missing = 0usize;
        let mut hops = 0usize;
        while let Some(part) = queue.pop_front() {
            if part == ".." {
                cur.pop();
                missing = missing.saturating_sub(1);
                continue;
            }
            cur.push(&part);
            if missing > 0 {
                missing += 1;
                continue;
            }
            match std::fs::symlink_metadata(&cur) {
                Ok(meta) if meta.file_type().is_symlink() && (follow_last || !queue.is_empty()) => {
                    hops += 1;
                    if hops > MAX_SYMLINK_HOPS {
                        return Err(PathError::SymlinkLoop(path.to_string()));
                    }
                    let target = std::fs::read_link(&cur).map_err(|source| PathError::Io { path: path.to_string(), source })?;
                    cur.pop();
                    push_front_components(&mut queue, &mut cur, &target);
                }
                Ok(_) => {}
                // NotFound, or ENOTDIR below a file: nothing further exists on disk.
                Err(_) => missing = 1,
            }
        }
        if !cur.starts_with(&self.root) {
            return Err(PathError::Outside(path.to_string()));
        }
        Ok(Walked { path: cur, exists: missing == 0 })
    }
}

/// Puts `path`'s components at the front of `queue`; an absolute path restarts `cur` at `/`.
fn push_front_components(queue: &mut VecDeque<OsString>, cur: &mut PathBuf, path: &Path) {
    let mut parts = Vec::new();
    for comp in path.components() {
        match comp {
            Component::Prefix(p) => *cur = PathBuf::from(p.as_os_str()),
            // After a Windows prefix the root completes it (`C:` + `\`); on Unix it is `/`.
            Component::RootDir if matches!(cur.components().next_back(), Some(Component::Prefix(_))) => cur.push(comp.as_os_str()),
            Component::RootDir => *cur = PathBuf::from(comp.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => parts.push(OsString::from("..")),
            Component::Normal(name) => parts.push(name.to_os_string()),
        }
    }
    for part in parts.into_iter().rev() {
        queue.push_front(part);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ErrorCode, ToolError};
    use std::fs;
    use std::os::unix::fs::symlink;

    /// `<tmp>/ws` (the root, with `a/b/f.txt` and `x`) next to `<tmp>/ws-evil/x` and `<tmp>/out`.
    fn setup() -> (tempfile::TempDir, Sandbox) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        fs::create_dir_all(ws.join("a/b")).unwrap();
        fs::write(ws.join("a/b/f.txt"), "f").unwrap();
        fs::write(ws.join("x"), "x").unwrap();
        fs::create_dir_all(tmp.path().join("ws-evil")).unwrap();
        fs::write(tmp.path().join("ws-evil/x"), "evil").unwrap();
        fs::create_dir_all(tmp.path().join("out")).unwrap();
        fs::write(tmp.path().join("out/secret"), "secret").unwrap();
        let sb = Sandbox::new(&ws).unwrap();
        (tmp, sb)
    }

    fn code(r: Result<PathBuf, PathError>) -> ErrorCode {
        ToolError::from(r.expect_err("expected an error")).code
    }

    #[test]
    fn escapes_are_refused_for_read_and_write() {
        let (tmp, sb) = setup();
        let evil = tmp.path().canonicalize().unwrap().join("ws-evil/x");
        let evil = evil.to_str().unwrap().to_string();
        for path in ["../x", "a/../../x", "/etc/passwd", "../ws-evil/x", evil.as_str(), "a/b/../../../out/secret"] {
            assert_eq!(code(sb.resolve(path)), ErrorCode::PathOutsideWorkspace, "resolve {path}");
            assert_eq!(code(sb.resolve_for_write(path)), ErrorCode::PathOutsideWorkspace, "write {path}");
            assert_eq!(code(sb.resolve_entry(path)), ErrorCode::PathOutsideWorkspace, "entry {path}");
        }
        for path in ["../new", "/tmp/definitely-new/file", "new/../../x"] {
            assert_eq!(code(sb.resolve_for_write(path)), ErrorCode::PathOutsideWorkspace, "write {path}");
        }
    }

    #[test]
    fn error_names_the_path_as_given() {
        let (_tmp, sb) = setup();
        let err = ToolError::from(sb.resolve("../x").unwrap_err());
        assert!(err.to_string().starts_with("Error [PATH_OUTSIDE_WORKSPACE]: \"../x\""), "{err}");
    }

    #[test]
    fn symlinks_pointing_outside_are_refused() {
        let (tmp, sb) = setup();
        let out = tmp.path().join("out");
        symlink(&out, sb.root().join("dirlink")).unwrap();
        symlink(out.join("secret"), sb.root().join("filelink")).unwrap();
        symlink("../../out", sb.root().join("a/rellink")).unwrap();
        for path in ["dirlink", "dirlink/secret", "filelink", "a/rellink/secret", "a/b/../rellink"] {
            assert_eq!(code(sb.resolve(path)), ErrorCode::PathOutsideWorkspace, "resolve {path}");
        }
        // Writing a new file through a symlinked directory must not land outside.
        for path in ["dirlink/new.txt", "dirlink/newdir/new.txt", "filelink", "a/rellink/new"] {
            assert_eq!(code(sb.resolve_for_write(path)), ErrorCode::PathOutsideWorkspace, "write {path}");
        }
        // A dangling link whose target would be created outside.
        symlink(out.join("not-yet"), sb.root().join("dangling")).unwrap();
        assert_eq!(code(sb.resolve_for_write("dangling")), ErrorCode::PathOutsideWorkspace);
        // `..` after a link applies to the link's target directory, as the kernel does.
        symlink(sb.root().join("a/b"), sb.root().join("deep")).unwrap();
        assert_eq!(sb.resolve("deep/../b/f.txt").unwrap(), sb.root().join("a/b/f.txt"));
    }

    #[test]
    fn links_themselves_can_be_named_for_delete_and_move() {
        let (tmp, sb) = setup();
        symlink(tmp.path().join("out"), sb.root().join("dirlink")).unwrap();
        assert_eq!(sb.resolve_entry("dirlink").unwrap(), sb.root().join("dirlink"));
        assert_eq!(code(sb.resolve_entry("dirlink/secret")), ErrorCode::PathOutsideWorkspace);
    }

    #[test]
    fn paths_inside_resolve() {
        let (_tmp, sb) = setup();
        let root = sb.root().to_path_buf();
        assert_eq!(sb.resolve("./a/b").unwrap(), root.join("a/b"));
        assert_eq!(sb.resolve("a/../x").unwrap(), root.join("x"));
        assert_eq!(sb.resolve(".").unwrap(), root);
        assert_eq!(sb.resolve("").unwrap(), root);
        assert_eq!(sb.resolve(root.join("a/b/f.txt").to_str().unwrap()).unwrap(), root.join("a/b/f.txt"));
        assert_eq!(sb.resolve_for_write("sub/../new.txt").unwrap(), root.join("new.txt"));
        assert_eq!(sb.resolve_for_write("n1/n2/f.txt").unwrap(), root.join("n1/n2/f.txt"));
        assert_eq!(sb.resolve_for_write(root.join("new").to_str().unwrap()).unwrap(), root.join("new"));
        symlink("a/b", root.join("inlink")).unwrap();
        assert_eq!(sb.resolve("inlink/f.txt").unwrap(), root.join("a/b/f.txt"));
        assert_eq!(sb.resolve_for_write("inlink/new.txt").unwrap(), root.join("a/b/new.txt"));
    }

    #[test]
    fn root_reached_through_a_symlink_still_works() {
        let (tmp, _) = setup();
        symlink(tmp.path().join("ws"), tmp.path().join("alias")).unwrap();
        let sb = Sandbox::new(&tmp.path().join("alias")).unwrap();
        let abs = tmp.path().join("alias/x");
        assert_eq!(sb.resolve(abs.to_str().unwrap()).unwrap(), sb.root().join("x"));
    }

    #[test]
    fn missing_paths_are_not_found() {
        let (_tmp, sb) = setup();
        assert_eq!(code(sb.resolve("nope.txt")), ErrorCode::FileNotFound);
        assert_eq!(code(sb.resolve("x/below-a-file")), ErrorCode::FileNotFound);
    }

    #[test]
    fn symlink_loops_are_an_error_not_a_hang() {
        let (_tmp, sb) = setup();
        symlink("loop2", sb.root().join("loop1")).unwrap();
        symlink("loop1", sb.root().join("loop2")).unwrap();
        assert_eq!(code(sb.resolve("loop1")), ErrorCode::IoError);
    }

    #[test]
    fn relative_uses_forward_slashes() {
        let (_tmp, sb) = setup();
        assert_eq!(sb.relative(&sb.root().join("a/b/f.txt")), "a/b/f.txt");
        assert_eq!(sb.relative(sb.root()), ".");
    }
}
