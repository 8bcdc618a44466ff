//! The `--out` folder is dracode's own: created with a `.gitignore` holding `*` (as build tools
//! mark their output folders), so git ignores it wherever it is, and emptied of an earlier run's
//! files before a run writes its own, so two runs never mix. A folder holding anything dracode
//! does not write is refused: cleaning it would delete the user's files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The `.gitignore` dracode writes into its output folder.
pub const GITIGNORE: &str = "# Written by dracode: everything here is its output, replaced by each run.\n*\n";

/// The names dracode writes at the top of its output folder (the reserve only while a run
/// works, or when a killed run left it: [`crate::disk::Reserve`]).
const OWN_NAMES: [&str; 14] = [
    ".gitignore",
    crate::disk::RESERVE_NAME,
    "results.jsonl",
    "report.html",
    "junit.xml",
    "summary.md",
    "findings.sarif",
    "transcripts",
    "diffs",
    "outputs",
    dracode_results::file_names::RECORDINGS_DIR,
    "combined.patch",
    "combine.json",
    "combine.md",
];

/// The folders that hold one file per task (`<task file stem>.<extension>`).
const PER_TASK: [&str; 4] = ["transcripts", "diffs", "outputs", dracode_results::file_names::RECORDINGS_DIR];

/// The files that describe a whole run, and a reserve a killed run left.
const PER_RUN: [&str; 9] = [
    "results.jsonl",
    "junit.xml",
    "summary.md",
    "findings.sarif",
    "combined.patch",
    "combine.json",
    "combine.md",
    "report.html",
    crate::disk::RESERVE_NAME,
];

/// Why dracode may not use a folder as its `--out`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutDirError {
    /// `--out` names a file.
    #[error("--out {} is a file, not a folder", out.display())]
    NotAFolder {
        /// The path given.
        out: PathBuf,
    },
    /// The folder holds an entry dracode did not write.
    #[error(
        "--out {} holds {name}, which dracode did not write: dracode replaces its output folder on each run, so \
         choose a new or empty folder (or one an earlier run wrote)",
        out.display()
    )]
    Foreign {
        /// The folder.
        out: PathBuf,
        /// The first foreign entry's name.
        name: String,
    },
    /// The folder's `.gitignore` is not the one dracode writes.
    #[error("--out {}: its .gitignore was not written by dracode; choose a new or empty folder", out.display())]
    ForeignGitignore {
        /// The folder.
        out: PathBuf,
    },
}

/// Whether dracode may use `out`: it does not exist yet, or holds only what dracode writes
/// (and the entries named in `also`: a `--jsonl` file or `--record` folder the user put there,
/// which a run leaves alone). The error names one foreign entry.
pub fn check(out: &Path, also: &[String]) -> Result<(), OutDirError> {
    let Ok(entries) = std::fs::read_dir(out) else {
        if out.exists() && !out.is_dir() {
            return Err(OutDirError::NotAFolder { out: out.to_path_buf() });
        }
        return Ok(());
    };
    let mut names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let foreign = names.iter().find(|name| !OWN_NAMES.contains(&name.as_str()) && !name.starts_with(".tmp") && !also.contains(name));
    if let Some(name) = foreign {
        return Err(OutDirError::Foreign { out: out.to_path_buf(), name: name.clone() });
    }
    let gitignore = out.join(".gitignore");
    if gitignore.exists() && std::fs::read_to_string(&gitignore).ok().as_deref() != Some(GITIGNORE) {
        return Err(OutDirError::ForeignGitignore { out: out.to_path_buf() });
    }
    Ok(())
}

/// Creates `out` if missing and marks it ignored by git (its own `.gitignore`).
pub fn mark(out: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let gitignore = out.join(".gitignore");
    if std::fs::read_to_string(&gitignore).ok().as_deref() != Some(GITIGNORE) {
        super::write_atomic(&gitignore, GITIGNORE.as_bytes())?;
    }
    Ok(())
}

/// Makes `out` ready for a run: marked, the earlier run's files removed — but the per-task
/// files (transcript, patch, output) of the tasks in `keep`, which a rerun carries over.
pub fn prepare(out: &Path, keep: &BTreeSet<String>) -> std::io::Result<()> {
    mark(out)?;
    for name in PER_RUN {
        // Only files: a folder by that name is not dracode's, and writing over it will fail
        // loudly (exit 3) rather than delete what is in it.
        let path = out.join(name);
        if !path.is_dir() {
            remove_if_present(&path)?;
        }
    }
    let kept: BTreeSet<String> = keep.iter().map(|id| dracode_results::file_names::file_stem(id)).collect();
    for folder in PER_TASK {
        let Ok(entries) = std::fs::read_dir(out.join(folder)) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            if !kept.contains(&stem) {
                remove_if_present(&path)?;
            }
        }
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> std::io::Result<()> {
    let removed = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(super::cannot_write(path, &e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_dracode_files_is_accepted_and_cleaned_but_for_kept_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        assert!(check(&out, &[]).is_ok(), "a folder not made yet");
        mark(&out).unwrap();
        for file in [
            "results.jsonl",
            "summary.md",
            crate::disk::RESERVE_NAME,
            "diffs/a.patch",
            "diffs/b.patch",
            "transcripts/a.json",
            "transcripts/b.json",
        ] {
            std::fs::create_dir_all(out.join(file).parent().unwrap()).unwrap();
            std::fs::write(out.join(file), "x").unwrap();
        }
        assert!(check(&out, &[]).is_ok());
        prepare(&out, &BTreeSet::from(["a".to_string()])).unwrap();
        assert!(out.join("diffs/a.patch").exists() && out.join("transcripts/a.json").exists());
        assert!(!out.join("diffs/b.patch").exists() && !out.join("transcripts/b.json").exists());
        assert!(!out.join("results.jsonl").exists() && !out.join("summary.md").exists());
        assert!(!out.join(crate::disk::RESERVE_NAME).exists(), "a killed run's reserve is removed");
        assert_eq!(std::fs::read_to_string(out.join(".gitignore")).unwrap(), GITIGNORE);
    }

    #[test]
    fn a_folder_with_a_file_dracode_did_not_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("results.jsonl"), "x").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let e = check(dir.path(), &[]).unwrap_err().to_string();
        assert!(e.contains("holds notes.txt, which dracode did not write"), "{e}");
        assert!(check(dir.path(), &["notes.txt".to_string()]).is_ok(), "named by --jsonl or --record");
        std::fs::remove_file(dir.path().join("notes.txt")).unwrap();
        std::fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        assert!(check(dir.path(), &[]).unwrap_err().to_string().contains(".gitignore was not written by dracode"));
    }
}
