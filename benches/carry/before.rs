//! `copy_outputs` as it was before it was made faster (commit 0a1c231, `src/batch/carry.rs`):
//! the "before" of the bench's A/B, run in the same process as the current one. Per file: a
//! `statx` by path, the whole file read when it is up to 1 MiB (else `std::fs::copy`), written
//! to a new file, `utimensat` by path; one thread.

use dracode::batch::carry::Copied;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Files up to this size are read and searched for the setup's root; larger ones are copied
/// as they are.
const REWRITE_LIMIT: u64 = 1024 * 1024;

/// Copies each of `paths` (relative, `/`-separated) from the folder `from` to the folder `to`,
/// rewriting `from` to `to` as `dracode::batch::carry` says.
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
