//! dracode's own writes and removals in a workspace, relative to a directory fd, never through
//! a link: every folder on the way is opened one component at a time with
//! `openat(…, O_DIRECTORY | O_NOFOLLOW)`, every file is created with `O_CREAT | O_EXCL |
//! O_NOFOLLOW`, and every removal is an `unlinkat` on the folder fd that holds the entry. A
//! folder swapped for a link while this runs (by a racing process) makes the open fail with
//! `ELOOP`/`ENOTDIR`; the link itself is then removed, never followed — so nothing outside the
//! workspace is opened, written or removed, whatever changes under it.

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// How often a component swapped for a link under us is replaced again before giving up.
const RETRIES: usize = 64;

/// The flags of every folder open: a folder, never a link, kept out of child processes.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Opens the folder `path` (absolute, trusted: the workspace root) as the start of every walk.
pub fn open_root(path: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?)
}

/// `name` as a C string for the `*at` calls; refuses a name that is not one path component.
fn component(name: &[u8]) -> std::io::Result<CString> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') {
        return Err(std::io::Error::other(format!("{:?} is not a file name", String::from_utf8_lossy(name))));
    }
    CString::new(name).map_err(|_| std::io::Error::other("a file name holds a NUL byte"))
}

/// Opens the folder `name` in `dir`, never following a link.
pub fn open_dir(dir: impl AsFd, name: &[u8]) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat(dir, component(name)?.as_c_str(), dir_flags(), Mode::empty())?)
}

/// The folder `rel` (`a/b`, relative to `root`), opened one component at a time. With
/// `create`, a missing folder on the way is made and anything else in its place (a file, a
/// link) is replaced by a folder; without, `None` when one is missing or not a folder.
pub fn walk_to(root: impl AsFd, rel: &[&[u8]], create: bool) -> std::io::Result<Option<OwnedFd>> {
    let mut dir = rustix::io::fcntl_dupfd_cloexec(root, 0)?;
    for part in rel {
        let name = component(part)?;
        let mut tries = 0;
        dir = loop {
            match rustix::fs::openat(&dir, name.as_c_str(), dir_flags(), Mode::empty()) {
                Ok(next) => break next,
                Err(e) if !create && matches!(e, Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => return Ok(None),
                Err(e) if tries >= RETRIES || !matches!(e, Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => return Err(e.into()),
                Err(Errno::NOENT) => ignore_exists(rustix::fs::mkdirat(&dir, name.as_c_str(), Mode::from_raw_mode(0o755)))?,
                // A file or a link where a folder belongs: removed (the link itself, never what
                // it names), then made a folder.
                Err(_) => {
                    remove_entry(&dir, part)?;
                    ignore_exists(rustix::fs::mkdirat(&dir, name.as_c_str(), Mode::from_raw_mode(0o755)))?;
                }
            }
            tries += 1;
        };
    }
    Ok(Some(dir))
}

/// `EEXIST` is fine: someone made the folder first (the next open checks what it is).
fn ignore_exists(result: rustix::io::Result<()>) -> std::io::Result<()> {
    match result {
        Ok(()) | Err(Errno::EXIST) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Removes the entry `name` of `dir`, whatever it is: a folder with everything in it, a file, a
/// link (never what it names). A missing entry is fine.
pub fn remove_entry(dir: impl AsFd, name: &[u8]) -> std::io::Result<()> {
    let dir = dir.as_fd();
    let cname = component(name)?;
    for _ in 0..RETRIES {
        let stat = match rustix::fs::statat(dir, cname.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            match rustix::fs::unlinkat(dir, cname.as_c_str(), AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => return Ok(()),
                // It became a folder meanwhile: look again.
                Err(Errno::ISDIR | Errno::PERM) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        match open_dir_made_readable(dir, name) {
            Ok(sub) => empty_dir(&sub)?,
            // It became a link or a file meanwhile: look again.
            Err(e) if matches!(e.raw_os_error().map(Errno::from_raw_os_error), Some(Errno::LOOP | Errno::NOTDIR | Errno::NOENT)) => {
                continue;
            }
            Err(e) => return Err(e),
        }
        match rustix::fs::unlinkat(dir, cname.as_c_str(), AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => return Ok(()),
            Err(Errno::NOTDIR | Errno::NOTEMPTY | Errno::EXIST) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(std::io::Error::other(format!("{} kept changing while it was removed", String::from_utf8_lossy(name))))
}

/// Opens the folder `name` in `dir` like [`open_dir`]; one the agent made unreadable or
/// unwritable (`chmod 000`) is given `rwx` for its owner first, through an `O_PATH` fd of the
/// folder itself (never a link), so that what is in it can be removed.
pub fn open_dir_made_readable(dir: impl AsFd, name: &[u8]) -> std::io::Result<OwnedFd> {
    let dir = dir.as_fd();
    match open_dir(dir, name) {
        Ok(sub) if rustix::fs::fstat(&sub)?.st_mode & 0o700 == 0o700 => return Ok(sub),
        Ok(_) => {}
        Err(e) if e.raw_os_error() == Some(Errno::ACCESS.raw_os_error()) => {}
        Err(e) => return Err(e),
    }
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let path = rustix::fs::openat(dir, component(name)?.as_c_str(), flags, Mode::empty())?;
    let magic = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&path));
    rustix::fs::chmod(magic.as_str(), Mode::from_raw_mode(0o700))?;
    open_dir(dir, name)
}

/// Removes everything in the open folder `dir`.
fn empty_dir(dir: &OwnedFd) -> std::io::Result<()> {
    for name in entries(dir)? {
        remove_entry(dir, &name)?;
    }
    Ok(())
}

/// The names in the open folder `dir` (without `.` and `..`).
pub fn entries(dir: &OwnedFd) -> std::io::Result<Vec<Vec<u8>>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let name = entry?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(name);
        }
    }
    Ok(names)
}

/// Creates the file `name` in `dir` (which must not hold it) with `content` and `mode`.
pub fn write_new(dir: impl AsFd, name: &[u8], content: &[u8], mode: u32) -> std::io::Result<()> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, component(name)?.as_c_str(), flags, Mode::from_raw_mode(mode))?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, content)?;
    rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
    Ok(())
}

/// Creates the link `name` in `dir` pointing at `target` (its text, not followed).
pub fn link_new(dir: impl AsFd, name: &[u8], target: &[u8]) -> std::io::Result<()> {
    Ok(rustix::fs::symlinkat(OsStr::from_bytes(target), dir, component(name)?.as_c_str())?)
}

/// What `name` in `dir` is, the link itself when it is one; `None` when missing.
pub fn stat_entry(dir: impl AsFd, name: &[u8]) -> std::io::Result<Option<rustix::fs::Stat>> {
    match rustix::fs::statat(dir, component(name)?.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
