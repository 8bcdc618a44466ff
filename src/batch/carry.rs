//! Copying what a batch's setup made into each task's workspace.
//!
//! The setup ran in a workspace of its own, at another path: what it made may name that path
//! (a virtualenv's `bin/` scripts and `.pth` files, an editable install, cargo's dep-info
//! files). So each small text file that holds the setup's root gets the task's root instead
//! (binary files, and files over [`REWRITE_LIMIT`], are copied as they are), and a symbolic
//! link into the setup's root points into the task's. Modes and modification times are kept —
//! build tools judge freshness by them. Links are copied as links, never followed.
//!
//! Each task gets a copy of its own: a task cannot change what another reads. The copy is made
//! relative to folder fds (`openat`, `mkdirat`, `fchmod`, `futimens`: no path is resolved per
//! file), a few threads sharing the folders out. A file up to [`REWRITE_LIMIT`] is read once,
//! searched, and that same buffer written (rewritten when it names the root); a larger one, and
//! one from [`CLONE_FROM`] up that needs no rewriting, is cloned (`FICLONE`: a reflink, on Btrfs
//! and XFS) or, where the file system cannot (ext4; the first refusal is remembered for the rest
//! of the copy), a large one is copied by the kernel (`copy_file_range`).
//! docs/src/performance.md ("Carrying the setup's outputs") says what it costs and why; `cargo
//! bench --bench carry` measures it.

use super::beneath;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::{CStr, CString, OsStr};
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Files up to this size are read and searched for the setup's root; larger ones are copied
/// as they are.
pub const REWRITE_LIMIT: u64 = 1024 * 1024;

/// Files from this size up that need no rewriting are cloned where the file system can: below
/// it, writing the bytes already read costs less CPU time than a clone (XFS).
const CLONE_FROM: u64 = 256 * 1024;

/// At most this many threads copy one tree (fewer on a machine with fewer cores).
const THREADS: usize = 4;

/// What a copy did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    /// Files and links copied.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Files whose text named the setup's root and now names the task's.
    pub rewritten: u64,
}

impl Copied {
    /// Adds what another part of the copy did.
    fn add(&mut self, other: Copied) {
        self.files += other.files;
        self.bytes += other.bytes;
        self.rewritten += other.rewritten;
    }
}

/// Copies each of `paths` (relative, `/`-separated) from the folder `from` to the folder `to`,
/// rewriting `from` to `to` as the module says.
pub fn copy_outputs(from: &Path, to: &Path, paths: &[String]) -> io::Result<Copied> {
    let (from_bytes, to_bytes) = (from.as_os_str().as_bytes(), to.as_os_str().as_bytes());
    let copier = Copier { from: memchr::memmem::Finder::new(from_bytes), to: to_bytes, reflink: AtomicBool::new(true) };
    let mut copied = Copied::default();
    for rel in paths {
        let (src, dst) = (from.join(rel), to.join(rel));
        let (Some(name), Some(src_parent), Some(dst_parent)) = (src.file_name(), src.parent(), dst.parent()) else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{rel:?} names no file")));
        };
        fs::create_dir_all(dst_parent)?;
        let (src_dir, dst_dir) = (beneath::open_root(src_parent)?, beneath::open_root(dst_parent)?);
        let name = CString::new(name.as_bytes()).map_err(io::Error::other)?;
        let done = copier.copy_top(&src_dir, &dst_dir, &name);
        copied.add(done.map_err(|e| io::Error::new(e.kind(), format!("copying the setup's {rel}: {e}")))?);
    }
    Ok(copied)
}

/// One copy: the roots, and whether the file system may still clone.
struct Copier<'a> {
    /// Finds the setup's root.
    from: memchr::memmem::Finder<'a>,
    /// The task's root.
    to: &'a [u8],
    /// False once the file system refused a clone: the rest is copied without asking again.
    reflink: AtomicBool,
}

impl Copier<'_> {
    /// Copies the entry `name` of `src` into `dst`: a folder with everything in it, shared out
    /// to a few threads ([`Tree`]).
    fn copy_top(&self, src: &OwnedFd, dst: &OwnedFd, name: &CStr) -> io::Result<Copied> {
        let stat = rustix::fs::statat(src, name, AtFlags::SYMLINK_NOFOLLOW)?;
        let kind = FileType::from_raw_mode(stat.st_mode);
        if kind != FileType::Directory {
            let mut copied = Copied::default();
            self.copy_entry(src, dst, name, kind, &mut Vec::new(), &mut copied)?;
            return Ok(copied);
        }
        make_dir(dst, name)?;
        let top = name.to_bytes().to_vec();
        let tree = Tree {
            copier: self,
            src,
            dst,
            queue: Mutex::new(Queue { todo: vec![top.clone()], busy: 0, failed: None }),
            moved: Condvar::new(),
            dirs: Mutex::new(vec![(top, stat.st_mode)]),
        };
        let copied = tree.run()?;
        tree.keep_dir_modes()?;
        Ok(copied)
    }

    /// Copies the file or link `name` (of kind `kind`) of the folder `src` into `dst`; other
    /// kinds (sockets, fifos, devices: not what a setup hands on) are left out.
    fn copy_entry(
        &self,
        src: &OwnedFd,
        dst: &OwnedFd,
        name: &CStr,
        kind: FileType,
        buf: &mut Vec<u8>,
        copied: &mut Copied,
    ) -> io::Result<()> {
        match kind {
            FileType::RegularFile => self.copy_file(src, dst, name, buf, copied),
            FileType::Symlink => self.copy_link(src, dst, name, copied),
            _ => Ok(()),
        }
    }

    /// Copies a file with its mode and times; `buf` is the caller's, reused from file to file.
    fn copy_file(&self, src: &OwnedFd, dst: &OwnedFd, name: &CStr, buf: &mut Vec<u8>, copied: &mut Copied) -> io::Result<()> {
        let from = File::from(rustix::fs::openat(src, name, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?);
        let stat = rustix::fs::fstat(&from)?;
        let mode = Mode::from_raw_mode(stat.st_mode & 0o7777);
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let to = File::from(rustix::fs::openat(dst, name, flags, mode)?);
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        if size <= REWRITE_LIMIT {
            if self.copy_small(&from, &to, size, buf)? {
                copied.rewritten += 1;
            }
        } else {
            self.copy_large(&from, &to)?;
        }
        // The mode again where the umask took bits away at creation (or a write the set-id
        // bits: `fstat` is cheaper than a needless `fchmod`), then the times, last: every
        // write moves them.
        if rustix::fs::fstat(&to)?.st_mode & 0o7777 != mode.as_raw_mode() {
            rustix::fs::fchmod(&to, mode)?;
        }
        let at = |sec: i64, nsec: i64| rustix::fs::Timespec { tv_sec: sec, tv_nsec: nsec as _ };
        let times = rustix::fs::Timestamps {
            last_access: at(stat.st_atime as _, stat.st_atime_nsec as _),
            last_modification: at(stat.st_mtime as _, stat.st_mtime_nsec as _),
        };
        rustix::fs::futimens(&to, &times)?;
        copied.files += 1;
        copied.bytes += size;
        Ok(())
    }

    /// Copies a small file by reading it once into `buf` and writing that, with the setup's
    /// root replaced by the task's when it is text that names it (true then); from
    /// [`CLONE_FROM`] up, one that does not is cloned where the file system can.
    fn copy_small(&self, from: &File, mut to: &File, size: u64, buf: &mut Vec<u8>) -> io::Result<bool> {
        buf.clear();
        read_up_to(from, usize::try_from(size).unwrap_or(0), buf)?;
        let names_root = memchr::memchr(0, buf).is_none() && self.from.find(buf).is_some();
        if names_root {
            to.write_all(&self.rewrite(buf))?;
        } else if buf.len() as u64 >= CLONE_FROM && self.try_clone(from, to) {
            // Shared, not written: no cheaper below this size (XFS, measured).
        } else {
            to.write_all(buf)?;
        }
        Ok(names_root)
    }

    /// Clones a large file where the file system can, else has the kernel copy it.
    fn copy_large(&self, mut from: &File, mut to: &File) -> io::Result<()> {
        if !self.try_clone(from, to) {
            // `copy_file_range` (or `sendfile`, or a plain copy where neither works).
            io::copy(&mut from, &mut to)?;
        }
        Ok(())
    }

    /// Makes the empty file `to` share the blocks of `from` (`FICLONE`) unless the file
    /// system refused before; true when it did.
    fn try_clone(&self, from: &File, to: &File) -> bool {
        if !self.reflink.load(Ordering::Relaxed) {
            return false;
        }
        match rustix::fs::ioctl_ficlone(to, from) {
            Ok(()) => true,
            // This file system (or this pair of folders) cannot: not asked again.
            Err(Errno::OPNOTSUPP | Errno::XDEV | Errno::NOTTY | Errno::NOSYS | Errno::INVAL) => {
                self.reflink.store(false, Ordering::Relaxed);
                false
            }
            // Anything else (a full disk, say) is for the copy to meet and report.
            Err(_) => false,
        }
    }

    /// Copies a link as a link; one into the setup's root points into the task's.
    fn copy_link(&self, src: &OwnedFd, dst: &OwnedFd, name: &CStr, copied: &mut Copied) -> io::Result<()> {
        let link = rustix::fs::readlinkat(src, name, Vec::new())?;
        let bytes = link.as_bytes();
        let target = match bytes.strip_prefix(self.from.needle()) {
            Some(rest) if rest.is_empty() || rest.starts_with(b"/") => [self.to, rest].concat(),
            _ => bytes.to_vec(),
        };
        rustix::fs::symlinkat(OsStr::from_bytes(&target), dst, name)?;
        copied.files += 1;
        copied.bytes += bytes.len() as u64;
        Ok(())
    }

    /// `text` with every occurrence of the setup's root replaced by the task's.
    fn rewrite(&self, text: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        let mut last = 0;
        for at in self.from.find_iter(text) {
            out.extend_from_slice(&text[last..at]);
            out.extend_from_slice(self.to);
            last = at + self.from.needle().len();
        }
        out.extend_from_slice(&text[last..]);
        out
    }
}

/// The copy of one folder: a stack of its folders still to copy, shared by a few threads.
/// Each takes a folder, copies its files and links, makes its folders and puts them on the
/// stack. Folders are named by their path from `src` and `dst`, so that no more fds are open
/// than threads are busy, however many folders wait.
struct Tree<'a> {
    /// The copy.
    copier: &'a Copier<'a>,
    /// The folder holding the tree in the setup's workspace, and in the task's.
    src: &'a OwnedFd,
    dst: &'a OwnedFd,
    /// The folders still to copy.
    queue: Mutex<Queue>,
    /// Signalled when `queue` changed.
    moved: Condvar,
    /// Every folder made (its path from `dst`) and the mode it gets once full.
    dirs: Mutex<Vec<(Vec<u8>, u32)>>,
}

/// The folders still to copy, and how the copy goes.
struct Queue {
    /// Their paths from [`Tree::src`] (and [`Tree::dst`]).
    todo: Vec<Vec<u8>>,
    /// Threads copying a folder (which may put more on `todo`).
    busy: usize,
    /// The first error: every thread stops.
    failed: Option<io::Error>,
}

impl Tree<'_> {
    /// Copies the tree on a few threads, this one included.
    fn run(&self) -> io::Result<Copied> {
        let threads = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, THREADS);
        let copied = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(|| self.work())).collect();
            let mut copied = self.work();
            for helper in helpers {
                copied.add(helper.join().map_err(|_| io::Error::other("a thread copying the setup's outputs panicked"))?);
            }
            Ok(copied)
        });
        match lock(&self.queue).failed.take() {
            Some(e) => Err(e),
            None => copied,
        }
    }

    /// One thread's share: folders taken from the stack until none is left.
    fn work(&self) -> Copied {
        let (mut buf, mut copied) = (Vec::new(), Copied::default());
        while let Some(rel) = self.next() {
            let result = self.copy_dir(&rel, &mut buf, &mut copied);
            let mut queue = lock(&self.queue);
            queue.busy -= 1;
            if let Err(e) = result {
                queue.failed.get_or_insert(e);
            }
            self.moved.notify_all();
        }
        copied
    }

    /// The next folder to copy; `None` once all are copied (or one failed).
    fn next(&self) -> Option<Vec<u8>> {
        let mut queue = lock(&self.queue);
        loop {
            if queue.failed.is_some() {
                return None;
            }
            if let Some(rel) = queue.todo.pop() {
                queue.busy += 1;
                return Some(rel);
            }
            if queue.busy == 0 {
                return None;
            }
            queue = self.moved.wait(queue).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Copies the files and links of the folder `rel` and makes its folders, put on the stack.
    fn copy_dir(&self, rel: &[u8], buf: &mut Vec<u8>, copied: &mut Copied) -> io::Result<()> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let src = rustix::fs::openat(self.src, rel, flags, Mode::empty())?;
        let dst = rustix::fs::openat(self.dst, rel, flags, Mode::empty())?;
        let mut entries = rustix::fs::Dir::read_from(&src)?;
        while let Some(entry) = entries.read() {
            let entry = entry?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            let mut kind = entry.file_type();
            if kind == FileType::Unknown {
                kind = FileType::from_raw_mode(rustix::fs::statat(&src, name, AtFlags::SYMLINK_NOFOLLOW)?.st_mode);
            }
            if kind != FileType::Directory {
                self.copier.copy_entry(&src, &dst, name, kind, buf, copied)?;
                continue;
            }
            let mode = rustix::fs::statat(&src, name, AtFlags::SYMLINK_NOFOLLOW)?.st_mode;
            make_dir(&dst, name)?;
            let sub = [rel, b"/", name.to_bytes()].concat();
            lock(&self.dirs).push((sub.clone(), mode));
            lock(&self.queue).todo.push(sub);
            self.moved.notify_one();
        }
        Ok(())
    }

    /// Gives every folder made its mode, the deepest first: a folder made read-only is full.
    fn keep_dir_modes(&self) -> io::Result<()> {
        let mut dirs = std::mem::take(&mut *lock(&self.dirs));
        dirs.sort_by_key(|(rel, _)| std::cmp::Reverse(memchr::memchr_iter(b'/', rel).count()));
        for (rel, mode) in dirs {
            rustix::fs::chmodat(self.dst, rel.as_slice(), Mode::from_raw_mode(mode & 0o7777), AtFlags::empty())?;
        }
        Ok(())
    }
}

/// Reads on from `from` into `buf` until it holds `size` bytes (or the file ends): one `read`
/// where `Read::read_to_end` makes several (it grows its reads from 8 KiB and reads once more
/// to see the end).
fn read_up_to(from: &File, size: usize, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.reserve(size.saturating_sub(buf.len()));
    while buf.len() < size {
        match rustix::io::read(from, rustix::buffer::spare_capacity(buf)) {
            Ok(0) => break,
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Makes the folder `name` in `dst`, for its owner alone until it is full (then
/// [`Tree::keep_dir_modes`]); one already there is used.
fn make_dir(dst: &OwnedFd, name: &CStr) -> io::Result<()> {
    match rustix::fs::mkdirat(dst, name, Mode::from_raw_mode(0o700)) {
        Ok(()) => Ok(()),
        Err(Errno::EXIST)
            if FileType::from_raw_mode(rustix::fs::statat(dst, name, AtFlags::SYMLINK_NOFOLLOW)?.st_mode) == FileType::Directory =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// `mutex` locked, whether or not a thread panicked holding it (the copy then fails anyway).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `info/exclude` lines that ignore exactly `paths` (anchored at the root, glob characters
/// escaped).
pub fn exclude_lines(paths: &[String]) -> String {
    let mut lines = String::new();
    for path in paths {
        lines.push('/');
        for c in path.chars() {
            if matches!(c, '*' | '?' | '[' | '\\' | '!' | '#') || c == ' ' {
                lines.push('\\');
            }
            lines.push(c);
        }
        lines.push('\n');
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn text_naming_the_setup_root_is_rewritten_binaries_and_times_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, to) = (tmp.path().join("setup/ws"), tmp.path().join("task/ws"));
        fs::create_dir_all(from.join(".venv/bin")).unwrap();
        fs::create_dir_all(&to).unwrap();
        let script = format!("#!{}/.venv/bin/python\nprint(1)\n", from.display());
        fs::write(from.join(".venv/bin/tool"), &script).unwrap();
        fs::set_permissions(from.join(".venv/bin/tool"), fs::Permissions::from_mode(0o755)).unwrap();
        let binary = [b"\0ELF".as_slice(), from.as_os_str().as_encoded_bytes()].concat();
        fs::write(from.join(".venv/lib.so"), &binary).unwrap();
        std::os::unix::fs::symlink(from.join(".venv/bin/tool"), from.join(".venv/bin/link")).unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", from.join(".venv/bin/python")).unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        fs::File::options().write(true).open(from.join(".venv/lib.so")).unwrap().set_modified(old).unwrap();

        let copied = copy_outputs(&from, &to, &[".venv".to_string()]).unwrap();
        assert_eq!((copied.files, copied.rewritten), (4, 1), "{copied:?}");
        let tool = fs::read_to_string(to.join(".venv/bin/tool")).unwrap();
        assert_eq!(tool, format!("#!{}/.venv/bin/python\nprint(1)\n", to.display()));
        assert_eq!(fs::metadata(to.join(".venv/bin/tool")).unwrap().permissions().mode() & 0o777, 0o755);
        assert_eq!(fs::read(to.join(".venv/lib.so")).unwrap(), binary, "a binary is never rewritten");
        assert_eq!(fs::metadata(to.join(".venv/lib.so")).unwrap().modified().unwrap(), old);
        assert_eq!(fs::read_link(to.join(".venv/bin/link")).unwrap(), to.join(".venv/bin/tool"));
        assert_eq!(fs::read_link(to.join(".venv/bin/python")).unwrap(), Path::new("/usr/bin/python3"));
        // The copy is the task's own: writing it leaves the setup's as it was.
        fs::write(to.join(".venv/bin/tool"), "changed").unwrap();
        assert_eq!(fs::read_to_string(from.join(".venv/bin/tool")).unwrap(), script);
    }

    /// Sets the modification time of `path` (not following a link) to `secs`.`nanos`.
    fn set_mtime(path: &Path, secs: i64, nanos: i64) {
        let at = rustix::fs::Timespec { tv_sec: secs, tv_nsec: nanos as _ };
        let times = rustix::fs::Timestamps { last_access: at, last_modification: at };
        rustix::fs::utimensat(rustix::fs::CWD, path, &times, AtFlags::SYMLINK_NOFOLLOW).unwrap();
    }

    /// Asserts that `to` holds what `from` holds: the same entries (fifos left out), kinds and
    /// modes; for files the same modification times and bytes, for links the same targets
    /// (`expect` turns the source's bytes or target into the copy's).
    fn assert_copied(from: &Path, to: &Path, expect: &dyn Fn(&Path, Vec<u8>) -> Vec<u8>) {
        use std::os::unix::fs::MetadataExt;
        let names = |dir: &Path| {
            let mut names: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
            names.sort();
            names
        };
        let (mut here, there) = (names(from), names(to));
        here.retain(|name| !fs::symlink_metadata(from.join(name)).unwrap().file_type().is_fifo());
        assert_eq!(here, there, "{}", to.display());
        for name in here {
            let (a, b) = (from.join(&name), to.join(&name));
            let (ma, mb) = (fs::symlink_metadata(&a).unwrap(), fs::symlink_metadata(&b).unwrap());
            assert_eq!(format!("{:o}", ma.mode()), format!("{:o}", mb.mode()), "{}", b.display());
            if ma.is_dir() {
                assert_copied(&a, &b, expect);
            } else if ma.is_symlink() {
                let target = |path: &Path| fs::read_link(path).unwrap().into_os_string().into_encoded_bytes();
                assert_eq!(expect(&a, target(&a)), target(&b), "{}", b.display());
            } else {
                assert_eq!((ma.mtime(), ma.mtime_nsec()), (mb.mtime(), mb.mtime_nsec()), "{}", b.display());
                assert!(expect(&a, fs::read(&a).unwrap()) == fs::read(&b).unwrap(), "{} differs", b.display());
            }
        }
    }

    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn files_at_and_over_the_rewrite_limit_large_and_empty_files() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, to) = (tmp.path().join("setup"), tmp.path().join("task-with-a-longer-root"));
        let out = from.join("out");
        fs::create_dir_all(&out).unwrap();
        fs::create_dir_all(&to).unwrap();
        let naming = |len: u64| {
            let mut text = format!("{}/lib\n", from.display()).into_bytes();
            text.resize(len as usize, b'x');
            text
        };
        fs::write(out.join("at-limit.txt"), naming(REWRITE_LIMIT)).unwrap();
        fs::write(out.join("over-limit.txt"), naming(REWRITE_LIMIT + 1)).unwrap();
        let large: Vec<u8> = (0..3 * REWRITE_LIMIT + 7).map(|i| (i * 7 % 251) as u8).collect();
        fs::write(out.join("large.bin"), &large).unwrap();
        fs::write(out.join("empty"), b"").unwrap();
        fs::set_permissions(out.join("empty"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::set_permissions(out.join("large.bin"), fs::Permissions::from_mode(0o751)).unwrap();
        for (n, name) in ["at-limit.txt", "over-limit.txt", "large.bin", "empty"].iter().enumerate() {
            set_mtime(&out.join(name), 1_500_000_000 + n as i64, 123_456_789);
        }

        let copied = copy_outputs(&from, &to, &["out".to_string()]).unwrap();
        assert_eq!((copied.files, copied.rewritten), (4, 1), "{copied:?}");
        assert_eq!(copied.bytes, 2 * REWRITE_LIMIT + 1 + large.len() as u64);
        let at_limit = fs::read(to.join("out/at-limit.txt")).unwrap();
        let root_grew = to.as_os_str().len() - from.as_os_str().len();
        assert_eq!(at_limit.len() as u64, REWRITE_LIMIT + root_grew as u64);
        assert!(at_limit.starts_with(format!("{}/lib\n", to.display()).as_bytes()), "a file of exactly the limit is rewritten");
        assert_copied(&out, &to.join("out"), &|path: &Path, bytes| {
            if path.ends_with("at-limit.txt") { at_limit.clone() } else { bytes }
        });
    }

    #[test]
    fn a_deep_tree_is_copied_whole_folders_keep_their_modes_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, to) = (tmp.path().join("setup"), tmp.path().join("task"));
        let made = from.join("made");
        for d in 0..40 {
            let dir = made.join(format!("a{}/b{}/c{d}", d % 3, d % 7));
            fs::create_dir_all(&dir).unwrap();
            for f in 0..30 {
                let file = dir.join(format!("f{f}"));
                let text = if f == 0 { format!("root={}\n", from.display()) } else { format!("file {d} {f}\n") };
                fs::write(&file, text).unwrap();
                fs::set_permissions(&file, fs::Permissions::from_mode([0o644, 0o755, 0o600, 0o4755][f % 4])).unwrap();
                set_mtime(&file, 1_600_000_000 + f as i64, f as i64 * 1_000_003);
            }
        }
        fs::create_dir_all(made.join("readonly/inner")).unwrap();
        fs::write(made.join("readonly/inner/kept"), "kept").unwrap();
        fs::set_permissions(made.join("readonly/inner"), fs::Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(made.join("readonly"), fs::Permissions::from_mode(0o500)).unwrap();
        std::os::unix::fs::symlink("a0", made.join("to-a-folder")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), made.join("outside")).unwrap();
        std::os::unix::fs::symlink(from.join("made/a1"), made.join("absolute")).unwrap();
        rustix::fs::mknodat(rustix::fs::CWD, made.join("fifo").as_path(), FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();

        let copied = copy_outputs(&from, &to, &["made".to_string()]).unwrap();
        assert_eq!((copied.files, copied.rewritten), (40 * 30 + 1 + 3, 40), "the fifo is left out: {copied:?}");
        let (from_text, to_text) = (from.display().to_string(), to.display().to_string());
        assert_copied(&made, &to.join("made"), &|_: &Path, bytes: Vec<u8>| {
            String::from_utf8(bytes).unwrap().replace(&from_text, &to_text).into_bytes()
        });
        let absolute = fs::read_link(to.join("made/absolute")).unwrap();
        assert_eq!(absolute, to.join("made/a1"), "a link into the setup's folder points into the task's");
        assert_eq!(fs::read_link(to.join("made/outside")).unwrap(), tmp.path());
        for dir in [&made, &to.join("made")] {
            fs::set_permissions(dir.join("readonly"), fs::Permissions::from_mode(0o700)).unwrap();
            fs::set_permissions(dir.join("readonly/inner"), fs::Permissions::from_mode(0o700)).unwrap();
        }
    }

    #[test]
    fn single_files_and_links_get_their_folders_and_a_failure_names_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let (from, to) = (tmp.path().join("setup"), tmp.path().join("task"));
        fs::create_dir_all(from.join("a/b")).unwrap();
        fs::write(from.join("a/b/file.txt"), "text").unwrap();
        std::os::unix::fs::symlink("a/b/file.txt", from.join("top-link")).unwrap();
        fs::create_dir_all(&to).unwrap();
        let paths = ["a/b/file.txt".to_string(), "top-link".to_string()];
        let copied = copy_outputs(&from, &to, &paths).unwrap();
        assert_eq!(copied, Copied { files: 2, bytes: 4 + 12, rewritten: 0 });
        assert_eq!(fs::read_to_string(to.join("a/b/file.txt")).unwrap(), "text");
        assert_eq!(fs::read_link(to.join("top-link")).unwrap(), Path::new("a/b/file.txt"));
        // What is there already is never written over.
        let err = copy_outputs(&from, &to, &paths).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
        assert!(err.to_string().contains("a/b/file.txt"), "{err}");
    }

    #[test]
    fn exclude_lines_are_anchored_and_escaped() {
        let paths = ["target".to_string(), "src/__pycache__".to_string(), "odd [1]*.txt".to_string(), "#x".to_string()];
        assert_eq!(exclude_lines(&paths), "/target\n/src/__pycache__\n/odd\\ \\[1]\\*.txt\n/\\#x\n");
    }
}
