//! Copying what a batch's setup made into each task's workspace.
//!
//! The setup ran in a workspace of its own, at another path: what it made may name that path
//! (a virtualenv's `bin/` scripts and `.pth` files, an editable install, cargo's dep-info
//! files). So each small text file that holds the setup's root gets the task's root instead
//! (binary files, and files over [`REWRITE_LIMIT`], are copied as they are), and a symbolic
//! link into the setup's root points into the task's. Modes and modification times are kept —
//! build tools judge freshness by them. Links are copied as links, never followed.
//!
//! Each task gets a copy of its own: a task cannot change what another reads. `std::fs::copy`
//! uses `copy_file_range`, which shares the blocks on file systems that can (Btrfs, XFS).

use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Files up to this size are read and searched for the setup's root; larger ones are copied
/// as they are.
pub const REWRITE_LIMIT: u64 = 1024 * 1024;

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

/// Copies each of `paths` (relative, `/`-separated) from the folder `from` to the folder `to`,
/// rewriting `from` to `to` as the module says.
pub fn copy_outputs(from: &Path, to: &Path, paths: &[String]) -> io::Result<Copied> {
    let roots = Roots { from: from.as_os_str().as_encoded_bytes(), to: to.as_os_str().as_encoded_bytes() };
    let mut copied = Copied::default();
    for rel in paths {
        let target = to.join(rel);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        copy_entry(&from.join(rel), &target, &roots, &mut copied)?;
    }
    Ok(copied)
}

/// The two roots, as bytes.
struct Roots<'a> {
    from: &'a [u8],
    to: &'a [u8],
}

/// Copies one entry (a folder with everything in it).
fn copy_entry(src: &Path, dst: &Path, roots: &Roots<'_>, copied: &mut Copied) -> io::Result<()> {
    let meta = fs::symlink_metadata(src)?;
    let kind = meta.file_type();
    if kind.is_dir() {
        fs::create_dir_all(dst)?;
        for entry in fs::read_dir(src)? {
            let entry = entry?;
            copy_entry(&entry.path(), &dst.join(entry.file_name()), roots, copied)?;
        }
        fs::set_permissions(dst, meta.permissions())?;
        return Ok(());
    }
    copied.files += 1;
    copied.bytes += meta.len();
    if kind.is_symlink() {
        let link = fs::read_link(src)?;
        let bytes = link.as_os_str().as_encoded_bytes();
        let target = match bytes.strip_prefix(roots.from) {
            Some(rest) if rest.is_empty() || rest.starts_with(b"/") => std::ffi::OsString::from_vec([roots.to, rest].concat()),
            _ => link.into_os_string(),
        };
        return std::os::unix::fs::symlink(target, dst);
    }
    if !kind.is_file() {
        // Sockets, fifos and devices are not what a setup hands on.
        copied.files -= 1;
        return Ok(());
    }
    if meta.len() <= REWRITE_LIMIT {
        if copy_small(src, dst, &meta, roots)? {
            copied.rewritten += 1;
        }
    } else {
        fs::copy(src, dst)?;
    }
    keep_times(dst, &meta)
}

/// Copies a small file by reading it whole, with the setup's root replaced by the task's when it
/// is text that names it; true when it did.
fn copy_small(src: &Path, dst: &Path, meta: &fs::Metadata, roots: &Roots<'_>) -> io::Result<bool> {
    let text = fs::read(src)?;
    let names_root = memchr::memchr(0, &text).is_none() && memchr::memmem::find(&text, roots.from).is_some();
    let bytes = if names_root { rewrite(&text, roots) } else { text };
    let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
    let mut file = fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(dst)?;
    file.write_all(&bytes)?;
    // The mode again: the umask may have taken bits away at creation.
    file.set_permissions(meta.permissions())?;
    Ok(names_root)
}

/// `text` with every `from` replaced by `to`.
fn rewrite(text: &[u8], roots: &Roots<'_>) -> Vec<u8> {
    let finder = memchr::memmem::Finder::new(roots.from);
    let mut out = Vec::with_capacity(text.len());
    let mut last = 0;
    for at in finder.find_iter(text) {
        out.extend_from_slice(&text[last..at]);
        out.extend_from_slice(roots.to);
        last = at + roots.from.len();
    }
    out.extend_from_slice(&text[last..]);
    out
}

/// Gives `dst` the modification and access times of `meta`, by path (no file is opened).
fn keep_times(dst: &Path, meta: &fs::Metadata) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let at = |sec: i64, nsec: i64| rustix::fs::Timespec { tv_sec: sec, tv_nsec: nsec as _ };
    let times =
        rustix::fs::Timestamps { last_access: at(meta.atime(), meta.atime_nsec()), last_modification: at(meta.mtime(), meta.mtime_nsec()) };
    rustix::fs::utimensat(rustix::fs::CWD, dst, &times, rustix::fs::AtFlags::empty())?;
    Ok(())
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

    #[test]
    fn exclude_lines_are_anchored_and_escaped() {
        let paths = ["target".to_string(), "src/__pycache__".to_string(), "odd [1]*.txt".to_string(), "#x".to_string()];
        assert_eq!(exclude_lines(&paths), "/target\n/src/__pycache__\n/odd\\ \\[1]\\*.txt\n/\\#x\n");
    }
}
