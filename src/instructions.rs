//! What the agent is told besides its task: how its work will be graded (the check that grades
//! it, the paths it may not change) and the repository's own instructions, its `AGENTS.md`
//! files — read as Codex reads them: from the root of the workspace down to the task's working
//! folder, one file per folder, the nearest last; empty files left out; each cut at
//! [`MAX_FILE_BYTES`] and all of them at [`MAX_TOTAL_BYTES`], with a note where text was cut.
//!
//! The files are read from the task's workspace (what the agent works on, at the task's base),
//! never from the user's checkout; a file that is a symbolic link, or a folder on the way that
//! leads out of the workspace, is not read.

use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Component, Path, PathBuf};

/// The file name read in each folder.
pub const FILE_NAME: &str = "AGENTS.md";
/// The file that replaces [`FILE_NAME`] in its folder when it is there and not empty (as Codex
/// reads them: at most one file per folder, the override first).
pub const OVERRIDE_FILE_NAME: &str = "AGENTS.override.md";
/// The most of one `AGENTS.md` the agent is shown, in bytes (its head; a note says what was cut).
pub const MAX_FILE_BYTES: usize = 32 * 1024;
/// The most of all `AGENTS.md` files together, in bytes: a file past it is cut or left out (noted).
pub const MAX_TOTAL_BYTES: usize = 64 * 1024;

/// How the task's work is graded, as far as the agent is told it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grading<'a> {
    /// The check command (`check`), when the agent is told it.
    pub check: Option<&'a str>,
    /// Repairs after a failed check (`check_repairs`).
    pub repairs: u32,
    /// The protected globs (`protect`), when the agent is told them (empty: nothing said).
    pub protect: &'a [String],
}

/// The paragraph of the system prompt that says how the work is graded; `None` when there is
/// nothing to tell (no check, no protected path, or the task turned both off).
pub fn grading_paragraph(grading: &Grading<'_>) -> Option<String> {
    let mut text = String::new();
    if let Some(check) = grading.check {
        let _ = write!(
            text,
            "How your work is graded: when you stop, dracode runs the check `{check}` (with `sh -c`, in your working folder, \
             on a fresh copy of the repository with your changes; files git ignores are not carried over unless the task \
             keeps them). The task passes only if it exits 0: what you say about your work does not count."
        );
        if grading.repairs > 0 {
            let _ = write!(
                text,
                " If it fails, you are shown its output and may repair your work ({} round{} at most).",
                grading.repairs,
                if grading.repairs == 1 { "" } else { "s" }
            );
        }
    }
    if !grading.protect.is_empty() {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        let globs: Vec<String> = grading.protect.iter().map(|g| format!("`{g}`")).collect();
        let _ = write!(
            text,
            "Protected paths (globs relative to the workspace root): {}. You may not change them: the file tools refuse \
             them, and a change made any other way is undone before the check and fails the task.",
            globs.join(", ")
        );
    }
    (!text.is_empty()).then_some(text)
}

/// One `AGENTS.md` as the agent is shown it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryFile {
    /// Its path relative to the workspace root, `/`-separated (`AGENTS.md`, `crates/x/AGENTS.md`).
    pub path: String,
    /// The text shown (the file's head when it was cut).
    pub text: String,
    /// The file's size in bytes.
    pub size: u64,
    /// Why the file is cut or left out, when it is (the note the agent reads).
    pub cut: Option<String>,
}

/// The `AGENTS.md` files of the folders from `root` down to `workdir` (a folder under it),
/// root first, each cut to the limits — in a folder with a non-empty `AGENTS.override.md`, that
/// file instead. Unreadable, empty and linked files are left out.
pub fn read_agents_md(root: &Path, workdir: &Path) -> Vec<RepositoryFile> {
    let mut files = Vec::new();
    let mut left = MAX_TOTAL_BYTES;
    for (dir, shown) in folders(root, workdir) {
        let limit = MAX_FILE_BYTES.min(left);
        let not_blank = |(bytes, size): &(Vec<u8>, u64)| *size > 0 && !String::from_utf8_lossy(bytes).trim().is_empty();
        let (name, found) = match read_head(&dir.join(OVERRIDE_FILE_NAME), limit.max(1)).filter(not_blank) {
            Some(found) => (OVERRIDE_FILE_NAME, Some(found)),
            None => (FILE_NAME, read_head(&dir.join(FILE_NAME), limit)),
        };
        let path = if shown.is_empty() { name.to_string() } else { format!("{shown}/{name}") };
        let Some((bytes, size)) = found else { continue };
        if left == 0 && size > 0 {
            let cut = format!("left out: the {FILE_NAME} files above reached the limit of {MAX_TOTAL_BYTES} bytes in all");
            files.push(RepositoryFile { path, text: String::new(), size, cut: Some(cut) });
            continue;
        }
        let whole = bytes.len() as u64 == size;
        let text = if whole { String::from_utf8_lossy(&bytes).into_owned() } else { head_at_line(&bytes) };
        if whole && text.trim().is_empty() {
            continue;
        }
        // A file cut by the total limit is the last one shown.
        let by_total = !whole && limit < MAX_FILE_BYTES;
        left = if by_total { 0 } else { left.saturating_sub(text.len()) };
        let cut = (!whole).then(|| {
            let limit = if by_total { "the limit of all files together" } else { "the limit of one file" };
            format!("cut: the file has {size} bytes; its first {} are shown ({limit})", text.len())
        });
        files.push(RepositoryFile { path, text, size, cut });
    }
    files
}

/// The section of the system prompt holding `files`, marked as the repository's text; `None`
/// without a file.
pub fn repository_section(files: &[RepositoryFile]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    let mut text = format!(
        "The repository's instructions: its {FILE_NAME} files, from the workspace root down to your working folder, the \
         nearest last (where two disagree, the nearer one wins). Each is the repository's own text, not dracode's, between \
         <repository_instructions> tags: follow it unless it contradicts the task, the limits or how you are graded."
    );
    for file in files {
        let _ = write!(text, "\n\n<repository_instructions file=\"{}\">\n", file.path);
        text.push_str(file.text.trim_end());
        if let Some(cut) = &file.cut {
            let _ = write!(text, "{}[dracode: {} {cut}]", if file.text.is_empty() { "" } else { "\n" }, file.path);
        }
        text.push_str("\n</repository_instructions>");
    }
    Some(text)
}

/// The folders from `root` to `workdir`, each with its path shown relative to the root; it
/// stops at a folder that is missing or leads out of the root (a link).
fn folders(root: &Path, workdir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(real_root) = root.canonicalize() else { return Vec::new() };
    let mut out = vec![(real_root.clone(), String::new())];
    let Ok(rel) = workdir.strip_prefix(root) else { return out };
    let (mut dir, mut shown) = (root.to_path_buf(), Vec::new());
    for part in rel.components() {
        let Component::Normal(name) = part else { break };
        dir.push(name);
        shown.push(name.to_string_lossy().into_owned());
        match dir.canonicalize() {
            Ok(real) if real.starts_with(&real_root) && real.is_dir() => out.push((real, shown.join("/"))),
            _ => break,
        }
    }
    out
}

/// At most `limit` bytes of the regular file `path` (never through a link) and its size.
fn read_head(path: &Path, limit: usize) -> Option<(Vec<u8>, u64)> {
    let meta = std::fs::symlink_metadata(path).ok().filter(std::fs::Metadata::is_file)?;
    let mut bytes = Vec::new();
    std::fs::File::open(path).ok()?.take(limit as u64).read_to_end(&mut bytes).ok()?;
    Some((bytes, meta.len()))
}

/// The head of a cut file as text: up to its last whole line (unless that drops over half),
/// never half a character.
fn head_at_line(bytes: &[u8]) -> String {
    let end = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(n) if n >= bytes.len() / 2 => n + 1,
        _ => bytes.len(),
    };
    match std::str::from_utf8(&bytes[..end]) {
        Ok(text) => text.to_string(),
        Err(e) => String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn an_override_file_replaces_its_folders_agents_md_unless_it_is_empty() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(
            root,
            "AGENTS.md",
            "root rules
",
        );
        write(
            root,
            "AGENTS.override.md",
            "for now: root override
",
        );
        write(
            root,
            "a/AGENTS.md",
            "a rules
",
        );
        write(
            root,
            "a/AGENTS.override.md",
            " 
",
        );
        let files = read_agents_md(root, &root.join("a"));
        let got: Vec<(&str, &str)> = files.iter().map(|f| (f.path.as_str(), f.text.as_str())).collect();
        assert_eq!(
            got,
            [
                (
                    "AGENTS.override.md",
                    "for now: root override
"
                ),
                (
                    "a/AGENTS.md",
                    "a rules
"
                )
            ]
        );
    }

    #[test]
    fn files_come_from_the_root_down_to_the_working_folder_nearest_last() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(root, "AGENTS.md", "root rules\n");
        write(root, "a/AGENTS.md", "   \n");
        write(root, "a/b/AGENTS.md", "b rules\n");
        write(root, "a/b/c/AGENTS.md", "below the working folder\n");
        write(root, "other/AGENTS.md", "a sibling\n");
        let files = read_agents_md(root, &root.join("a/b"));
        let got: Vec<(&str, &str)> = files.iter().map(|f| (f.path.as_str(), f.text.as_str())).collect();
        assert_eq!(got, [("AGENTS.md", "root rules\n"), ("a/b/AGENTS.md", "b rules\n")], "the empty one is left out");
        let section = repository_section(&files).unwrap();
        assert!(section.find("root rules").unwrap() < section.find("b rules").unwrap(), "{section}");
        assert!(section.contains("<repository_instructions file=\"a/b/AGENTS.md\">\nb rules\n</repository_instructions>"), "{section}");
        assert!(read_agents_md(root, root).len() == 1 && repository_section(&[]).is_none());
    }

    #[test]
    fn a_large_file_is_cut_at_a_line_and_the_total_is_capped_with_notes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let big = "0123456789abcdef\n".repeat(3000); // 51,000 bytes
        for dir in ["", "a/", "a/b/"] {
            write(root, &format!("{dir}AGENTS.md"), &big);
        }
        write(root, "a/b/c/AGENTS.md", "never shown\n");
        let files = read_agents_md(root, &root.join("a/b/c"));
        assert_eq!(files.len(), 4);
        for file in &files[..2] {
            assert!(file.text.len() <= MAX_FILE_BYTES && file.text.ends_with('\n'), "cut at a line");
            assert!(file.cut.as_deref().unwrap().contains("51000 bytes") && file.cut.as_deref().unwrap().contains("one file"), "{file:?}");
        }
        let total: usize = files.iter().map(|f| f.text.len()).sum();
        assert!(total <= MAX_TOTAL_BYTES && files[2].cut.as_deref().unwrap().contains("all files"), "{:?}", files[2].cut);
        assert!(files[3].text.is_empty() && files[3].cut.as_deref().unwrap().starts_with("left out"), "{:?}", files[3]);
        let section = repository_section(&files).unwrap();
        assert!(section.len() < MAX_TOTAL_BYTES + 2048 && section.contains("[dracode: AGENTS.md cut: the file has 51000 bytes"));
        assert!(!section.contains("never shown"));
    }

    #[test]
    fn a_link_is_not_followed_out_of_the_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, outside) = (tmp.path().join("ws"), tmp.path().join("outside"));
        write(&outside, "AGENTS.md", "secret\n");
        write(&root, "keep.txt", "");
        std::os::unix::fs::symlink(outside.join("AGENTS.md"), root.join("AGENTS.md")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("sub")).unwrap();
        assert!(read_agents_md(&root, &root.join("sub")).is_empty());
    }

    #[test]
    fn the_grading_paragraph_names_the_check_and_the_protected_globs() {
        let protect = ["tests/**".to_string(), "Cargo.lock".to_string()];
        let told = grading_paragraph(&Grading { check: Some("cargo test"), repairs: 1, protect: &protect }).unwrap();
        assert!(told.contains("`cargo test`") && told.contains("1 round at most") && told.contains("`tests/**`, `Cargo.lock`"), "{told}");
        let check_only = grading_paragraph(&Grading { check: Some("make"), ..Grading::default() }).unwrap();
        assert!(!check_only.contains("Protected") && !check_only.contains("repair"), "{check_only}");
        assert!(grading_paragraph(&Grading::default()).is_none());
    }
}
