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
//!
//! The check alone would be raceable: a process the agent started could swap a checked
//! directory for a symlink to `/` before the tool opens the path. So the tools never open the
//! checked path by name. The root is held open as a directory fd for the sandbox's lifetime,
//! and every open, create, delete and rename goes through [`Sandbox::open_beneath`] and its
//! siblings: the checked path, relative to that fd, is opened with `openat2(2)` and
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, so the kernel refuses (`EXDEV`) any lookup that
//! would leave the root, whatever changed since the check; deletes and renames act with
//! `unlinkat`/`renameat` on a parent directory fd obtained that way. A lookup refused like this
//! is reported as [`Escaped`], which the tools show as `PATH_OUTSIDE_WORKSPACE`. Where
//! `openat2` is missing (Linux before 5.6, other Unixes, or a seccomp filter that denies it)
//! the sandbox walks the checked path one component at a time with `openat(…, O_NOFOLLOW)`
//! instead: the checked path has no symlinks left in it, so one appearing there can only be a
//! swap, and it is refused the same way.
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

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
    /// The path is protected (`protect`): the agent may not change it.
    #[error("{shown} is protected: this task may not change it (protect = [...] in the manifest); nothing was changed")]
    Protected {
        /// The path as the model gave it.
        shown: String,
        /// The path relative to the workspace's root.
        path: String,
    },
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

/// Whether the folder `dir` (not followed if a link) holds a protected file at any depth.
fn holds_protected(protect: &super::Protect, dir: &Path) -> bool {
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.flatten().any(|e| protect.covers(&e.path()) || holds_protected(protect, &e.path()))
}

/// An operation's path led outside the workspace between the check and the open (a symlink was
/// swapped in): the kernel refused it. Carried inside an [`std::io::Error`]; see [`is_escape`].
#[derive(Debug, thiserror::Error)]
#[error("the path led outside the workspace")]
pub struct Escaped;

/// The [`std::io::Error`] for an [`Escaped`] lookup.
fn escaped() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::PermissionDenied, Escaped)
}

/// Whether `err` is an [`Escaped`] lookup.
pub fn is_escape(err: &std::io::Error) -> bool {
    err.get_ref().is_some_and(<dyn std::error::Error + Send + Sync>::is::<Escaped>)
}

/// A workspace root and the rules for resolving paths inside it.
#[derive(Debug, Clone)]
pub struct Sandbox {
    root: PathBuf,
    /// The root, open (`O_PATH`) for the sandbox's lifetime; every operation starts from it.
    dir: Arc<OwnedFd>,
    /// Whether the kernel has `openat2`; without it, the `O_NOFOLLOW` walk is used.
    openat2: bool,
    /// Paths the file tools may not change.
    protect: Option<Arc<super::Protect>>,
}

/// Where a walk ended.
struct Walked {
    /// The resolved absolute path (canonical up to the first missing component).
    path: PathBuf,
    /// Whether every component exists.
    exists: bool,
}

impl Sandbox {
    /// A sandbox rooted at `root` (canonicalised), opened as a directory fd.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        let root = root.canonicalize()?;
        let dir = rustix::fs::open(&root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        let openat2 = has_openat2(dir.as_fd());
        if !openat2 {
            tracing::debug!("openat2 is not available; file tools open paths one component at a time with O_NOFOLLOW");
        }
        Ok(Sandbox { root, dir: Arc::new(dir), openat2, protect: None })
    }

    /// A sandbox that never uses `openat2`, to test the fallback.
    #[cfg(any(test, feature = "test-support"))]
    pub fn without_openat2(root: &Path) -> std::io::Result<Self> {
        Ok(Sandbox { openat2: false, ..Sandbox::new(root)? })
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

    /// This sandbox with `protect`'s paths closed to changes.
    pub fn with_protect(mut self, protect: Arc<super::Protect>) -> Sandbox {
        self.protect = Some(protect).filter(|p| !p.is_empty());
        self
    }

    /// `Err(Protected)` when `abs` (a resolved path; `shown` as the model gave it) is a
    /// protected path, or a folder holding one that would be removed or renamed as a whole.
    pub fn check_changeable(&self, abs: &Path, shown: &str) -> Result<(), PathError> {
        let Some(protect) = &self.protect else { return Ok(()) };
        if protect.covers(abs) || holds_protected(protect, abs) {
            let path = abs.strip_prefix(&self.root).map_or_else(|_| shown.to_string(), |p| p.to_string_lossy().into_owned());
            return Err(PathError::Protected { shown: shown.to_string(), path });
        }
        Ok(())
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

    /// Opens `abs` — a path returned by [`Sandbox::resolve`] or its siblings — with `flags`
    /// (`O_CLOEXEC` added), resolved beneath the root so that nothing swapped in since the check
    /// can lead outside it (an [`Escaped`] error then).
    pub fn open_beneath(&self, abs: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
        let rel = self.rel(abs)?;
        self.open_rel(rel, flags, mode)
    }

    /// Opens `abs` for reading, beneath the root, as a [`std::fs::File`].
    pub fn open_read(&self, abs: &Path) -> std::io::Result<std::fs::File> {
        Ok(self.open_beneath(abs, OFlags::RDONLY | OFlags::NOCTTY, Mode::empty())?.into())
    }

    /// Opens (creating or truncating) `abs` for writing, beneath the root.
    pub fn open_write(&self, abs: &Path) -> std::io::Result<std::fs::File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOCTTY;
        Ok(self.open_beneath(abs, flags, Mode::from_raw_mode(0o666))?.into())
    }

    /// Whether the entry `abs` (a symlink itself, not followed) exists beneath the root right
    /// now. A walk that reads directories by path uses it to drop names that a swapped-in
    /// symlink made it read outside.
    pub fn exists_beneath(&self, abs: &Path) -> bool {
        self.open_beneath(abs, OFlags::PATH | OFlags::NOFOLLOW, Mode::empty()).is_ok()
    }

    /// Creates directory `abs` and its missing parents, each with `mkdirat` in a parent opened
    /// beneath the root.
    pub fn create_dir_all(&self, abs: &Path) -> std::io::Result<()> {
        let rel = self.rel(abs)?;
        let mut parent = self.open_rel(Path::new("."), dir_flags(), Mode::empty())?;
        let mut prefix = PathBuf::new();
        for comp in rel.components() {
            let name = match comp {
                Component::CurDir => continue,
                Component::Normal(name) => name,
                _ => return Err(escaped()),
            };
            match rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            prefix.push(name);
            parent = self.open_rel(&prefix, dir_flags(), Mode::empty())?;
        }
        Ok(())
    }

    /// The directory holding `abs` (opened beneath the root) and `abs`'s own name, for
    /// `*at` calls that must act on the entry itself (a symlink is not followed). The root
    /// itself has no such parent (`InvalidInput`).
    pub fn open_parent(&self, abs: &Path) -> std::io::Result<Entry> {
        let rel = self.rel(abs)?;
        let (Some(name), Some(parent)) = (rel.file_name(), rel.parent()) else {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the workspace root has no parent in the workspace"));
        };
        let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
        Ok(Entry { dir: self.open_rel(parent, dir_flags(), Mode::empty())?, name: name.to_os_string() })
    }

    /// `abs` relative to the root (`.` for the root); a path outside is [`Escaped`].
    fn rel<'a>(&self, abs: &'a Path) -> std::io::Result<&'a Path> {
        match abs.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => Ok(Path::new(".")),
            Ok(rel) => Ok(rel),
            Err(_) => Err(escaped()),
        }
    }

    /// Opens `rel` relative to the root fd, never leaving the root.
    fn open_rel(&self, rel: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
        let flags = flags | OFlags::CLOEXEC;
        if self.openat2 {
            return openat2_beneath(self.dir.as_fd(), rel, flags, mode);
        }
        open_nofollow(self.dir.as_fd(), rel, flags, mode)
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
                    let target = match std::fs::read_link(&cur) {
                        Ok(target) => target,
                        // No longer a link (swapped meanwhile): look at this component again.
                        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                            cur.pop();
                            queue.push_front(part);
                            continue;
                        }
                        Err(source) => return Err(PathError::Io { path: path.to_string(), source }),
                    };
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

/// A directory entry to act on with `*at` calls: its parent, opened beneath the root, and its
/// name there.
#[derive(Debug)]
pub struct Entry {
    /// The parent directory (`O_PATH`).
    pub dir: OwnedFd,
    /// The entry's name in it.
    pub name: OsString,
}

impl Entry {
    /// `lstat` of the entry.
    pub fn metadata(&self) -> std::io::Result<rustix::fs::Stat> {
        Ok(rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW)?)
    }

    /// Whether the entry (not following a symlink) is a directory.
    pub fn is_dir(&self) -> std::io::Result<bool> {
        Ok(rustix::fs::FileType::from_raw_mode(self.metadata()?.st_mode) == rustix::fs::FileType::Directory)
    }

    /// Removes a file, a symlink, or an empty directory.
    pub fn remove(&self) -> std::io::Result<()> {
        let flags = if self.is_dir()? { AtFlags::REMOVEDIR } else { AtFlags::empty() };
        Ok(rustix::fs::unlinkat(&self.dir, &self.name, flags)?)
    }

    /// Removes the entry and, for a directory, everything in it; every step is relative to a
    /// directory fd opened without following symlinks, so nothing outside can be reached.
    pub fn remove_all(&self) -> std::io::Result<()> {
        remove_tree(self.dir.as_fd(), &self.name)
    }

    /// Renames the entry to `to` (`renameat`, replacing a file or an empty directory).
    pub fn rename_to(&self, to: &Entry) -> std::io::Result<()> {
        Ok(rustix::fs::renameat(&self.dir, &self.name, &to.dir, &to.name)?)
    }
}

/// The flags of a directory opened only to anchor further lookups.
fn dir_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY
}

/// Whether `openat2` works here (Linux ≥ 5.6 and not denied by a seccomp filter).
#[cfg(target_os = "linux")]
fn has_openat2(dir: BorrowedFd<'_>) -> bool {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::openat2(dir, ".", flags, Mode::empty(), rustix::fs::ResolveFlags::BENEATH).is_ok()
}

#[cfg(not(target_os = "linux"))]
fn has_openat2(_dir: BorrowedFd<'_>) -> bool {
    false
}

/// `openat2(dir, rel, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; `EXDEV` (the lookup would
/// leave `dir`) becomes [`Escaped`]. `EAGAIN` (a concurrent rename during `..` handling) is
/// retried a few times.
#[cfg(target_os = "linux")]
fn openat2_beneath(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
    use rustix::fs::ResolveFlags;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(dir, rel, flags, mode, resolve) {
            Err(Errno::AGAIN) if tries < 8 => tries += 1,
            Err(Errno::XDEV) => return Err(escaped()),
            other => return Ok(other?),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn openat2_beneath(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
    open_nofollow(dir, rel, flags, mode)
}

/// The fallback without `openat2`: `rel` (a checked path, so symlink-free and without `..`)
/// opened one component at a time with `O_NOFOLLOW`; a symlink met on the way (`ELOOP`, or a
/// symlink where a directory should be) can only have been swapped in, and is [`Escaped`].
fn open_nofollow(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags, mode: Mode) -> std::io::Result<OwnedFd> {
    let names = rel
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(escaped()),
        })
        .collect::<std::io::Result<Vec<&OsStr>>>()?;
    let Some((last, parents)) = names.split_last() else {
        return Ok(rustix::fs::openat(dir, ".", flags, mode)?);
    };
    let mut cur: Option<OwnedFd> = None;
    for name in parents {
        let at = cur.as_ref().map_or(dir, |fd| fd.as_fd());
        let next = rustix::fs::openat(at, *name, dir_flags() | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty());
        cur = Some(next.map_err(nofollow_error)?);
    }
    let at = cur.as_ref().map_or(dir, |fd| fd.as_fd());
    rustix::fs::openat(at, *last, flags | OFlags::NOFOLLOW, mode).map_err(nofollow_error)
}

/// `ELOOP`/`ENOTDIR` from an `O_NOFOLLOW` walk of a checked path mean a symlink was swapped in.
fn nofollow_error(err: Errno) -> std::io::Error {
    match err {
        Errno::LOOP | Errno::NOTDIR => escaped(),
        other => other.into(),
    }
}

/// Removes `name` in `parent`: a non-directory with `unlinkat`, a directory after emptying it
/// through an fd opened with `O_NOFOLLOW`.
fn remove_tree(parent: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<()> {
    match rustix::fs::unlinkat(parent, name, AtFlags::empty()) {
        Ok(()) => return Ok(()),
        // Linux says EISDIR for unlink(2) on a directory; POSIX allows EPERM.
        Err(Errno::ISDIR | Errno::PERM) => {}
        Err(e) => return Err(e.into()),
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = rustix::fs::openat(parent, name, flags, Mode::empty())?;
    // Names first, removals after: a directory changed while it is read may skip entries.
    let mut children = Vec::new();
    for entry in rustix::fs::Dir::read_from(&dir)? {
        let child = entry?.file_name().to_bytes().to_vec();
        if child != b"." && child != b".." {
            children.push(<OsString as std::os::unix::ffi::OsStringExt>::from_vec(child));
        }
    }
    for child in &children {
        remove_tree(dir.as_fd(), child)?;
    }
    Ok(rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)?)
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

    /// Which refusal `r` is (the tools map each to one error code the model sees).
    fn code(r: Result<PathBuf, PathError>) -> Refusal {
        match r.expect_err("expected an error") {
            PathError::Outside(_) => Refusal::PathOutsideWorkspace,
            PathError::NotFound(_) => Refusal::FileNotFound,
            PathError::SymlinkLoop(_) | PathError::Io { .. } => Refusal::IoError,
            PathError::Nul(_) | PathError::Protected { .. } => Refusal::Other,
        }
    }

    #[derive(Debug, PartialEq)]
    enum Refusal {
        PathOutsideWorkspace,
        FileNotFound,
        IoError,
        Other,
    }

    #[test]
    fn escapes_are_refused_for_read_and_write() {
        let (tmp, sb) = setup();
        let evil = tmp.path().canonicalize().unwrap().join("ws-evil/x");
        let evil = evil.to_str().unwrap().to_string();
        for path in ["../x", "a/../../x", "/etc/passwd", "../ws-evil/x", evil.as_str(), "a/b/../../../out/secret"] {
            assert_eq!(code(sb.resolve(path)), Refusal::PathOutsideWorkspace, "resolve {path}");
            assert_eq!(code(sb.resolve_for_write(path)), Refusal::PathOutsideWorkspace, "write {path}");
            assert_eq!(code(sb.resolve_entry(path)), Refusal::PathOutsideWorkspace, "entry {path}");
        }
        for path in ["../new", "/tmp/definitely-new/file", "new/../../x"] {
            assert_eq!(code(sb.resolve_for_write(path)), Refusal::PathOutsideWorkspace, "write {path}");
        }
    }

    #[test]
    fn error_names_the_path_as_given() {
        let (_tmp, sb) = setup();
        let err = sb.resolve("../x").unwrap_err();
        assert!(err.to_string().starts_with("\"../x\" is outside the workspace"), "{err}");
    }

    #[test]
    fn symlinks_pointing_outside_are_refused() {
        let (tmp, sb) = setup();
        let out = tmp.path().join("out");
        symlink(&out, sb.root().join("dirlink")).unwrap();
        symlink(out.join("secret"), sb.root().join("filelink")).unwrap();
        symlink("../../out", sb.root().join("a/rellink")).unwrap();
        for path in ["dirlink", "dirlink/secret", "filelink", "a/rellink/secret", "a/b/../rellink"] {
            assert_eq!(code(sb.resolve(path)), Refusal::PathOutsideWorkspace, "resolve {path}");
        }
        // Writing a new file through a symlinked directory must not land outside.
        for path in ["dirlink/new.txt", "dirlink/newdir/new.txt", "filelink", "a/rellink/new"] {
            assert_eq!(code(sb.resolve_for_write(path)), Refusal::PathOutsideWorkspace, "write {path}");
        }
        // A dangling link whose target would be created outside.
        symlink(out.join("not-yet"), sb.root().join("dangling")).unwrap();
        assert_eq!(code(sb.resolve_for_write("dangling")), Refusal::PathOutsideWorkspace);
        // `..` after a link applies to the link's target directory, as the kernel does.
        symlink(sb.root().join("a/b"), sb.root().join("deep")).unwrap();
        assert_eq!(sb.resolve("deep/../b/f.txt").unwrap(), sb.root().join("a/b/f.txt"));
    }

    #[test]
    fn links_themselves_can_be_named_for_delete_and_move() {
        let (tmp, sb) = setup();
        symlink(tmp.path().join("out"), sb.root().join("dirlink")).unwrap();
        assert_eq!(sb.resolve_entry("dirlink").unwrap(), sb.root().join("dirlink"));
        assert_eq!(code(sb.resolve_entry("dirlink/secret")), Refusal::PathOutsideWorkspace);
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
        assert_eq!(code(sb.resolve("nope.txt")), Refusal::FileNotFound);
        assert_eq!(code(sb.resolve("x/below-a-file")), Refusal::FileNotFound);
    }

    #[test]
    fn symlink_loops_are_an_error_not_a_hang() {
        let (_tmp, sb) = setup();
        symlink("loop2", sb.root().join("loop1")).unwrap();
        symlink("loop1", sb.root().join("loop2")).unwrap();
        assert_eq!(code(sb.resolve("loop1")), Refusal::IoError);
    }

    #[test]
    fn relative_uses_forward_slashes() {
        let (_tmp, sb) = setup();
        assert_eq!(sb.relative(&sb.root().join("a/b/f.txt")), "a/b/f.txt");
        assert_eq!(sb.relative(sb.root()), ".");
    }
}
