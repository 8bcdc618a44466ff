//! `report.html`: a dracode output folder (and earlier ones, for history) drawn as one
//! self-contained page that a person opens from a downloaded artifact — no server, no network.
//!
//! [`data`] is what the page is given (the contract between this crate and `assets/report.js`):
//! [`events`] reads `results.jsonl`, [`timeline`] cuts each attempt into phases, [`detail`] reads a
//! task's patch and conversation, [`history`] reads (and keeps) earlier runs, [`build`] puts them
//! together; [`page`] writes the file around them.

#![forbid(unsafe_code)]

pub mod build;
pub mod data;
pub mod detail;
pub mod events;
pub mod history;
pub mod page;
pub mod timeline;

#[cfg(test)]
mod test_support;

use dracode_results::output_folder::ReadError;
use dracode_results::records::{WireEvent, WireOutcome};
use std::path::{Path, PathBuf};

/// Why a page (or a run's history record) could not be made: each names the file or folder.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The folder's `results.jsonl` could not be read.
    #[error(transparent)]
    Results(#[from] ReadError),
    /// The folder's `combine.json` is not what `dracode combine` writes.
    #[error("{}: {source}", path.display())]
    Combine {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A `--history` folder that is neither an output folder, a cache folder, nor empty.
    #[error(
        "--history {}: neither an output folder (no results.jsonl) nor a cache folder (no history/), nor an empty folder",
        dir.display()
    )]
    NotHistory {
        /// The folder.
        dir: PathBuf,
    },
    /// A cache folder's `history/` (or a record in it) could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file in `history/` that is not a run's record.
    #[error("{}: not a dracode history record: {source}", path.display())]
    HistoryRecord {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The page or a record could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A run's record could not be encoded.
    #[error(transparent)]
    Encode(serde_json::Error),
}

/// The name of the page in an output folder.
pub const FILE_NAME: &str = "report.html";

/// How a report is made.
pub struct Options<'a> {
    /// dracode's version, for the page's footer.
    pub version: &'a str,
    /// Earlier output folders or cache folders (`--history`).
    pub history: Vec<PathBuf>,
    /// Why a task did not pass, in one line (as `summary.md` words it).
    pub reason: &'a dyn Fn(&WireOutcome) -> Option<String>,
    /// The run's last line when it is not in `results.jsonl` yet: a run's page is written just
    /// before the record gets `run.finished`, so that the record's exit code can say whether
    /// the page was written.
    pub end: Option<WireEvent>,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options { version: "", history: Vec::new(), reason: &|_| None, end: None }
    }
}

/// Writes `out/report.html` from the folder's artifacts (through a temporary file and a rename:
/// a reader never sees half a page) and returns the page's path and the run it draws. The error
/// names the file that could not be read or written.
pub fn write(out: &Path, options: &Options<'_>) -> Result<(PathBuf, data::Report), PageError> {
    let (mut report, run) = build::report(out, options)?;
    let current: Vec<String> = std::iter::once(&report.run.run_id).chain(report.run.shards.iter().map(|s| &s.run_id)).cloned().collect();
    let past = history::read(&options.history, &current)?;
    history::attach(&mut report, &past);
    let details = build::details(out, &report, &run);
    let details: Vec<String> = details.iter().map(json).collect();
    let title = format!("dracode {} — {} passed of {}", report.run.run_id, report.counts.passed, report.counts.total);
    let html = page::html(&title, &json(&report), &details);
    let path = out.join(FILE_NAME);
    write_atomic(&path, html.as_bytes()).map_err(|source| PageError::Write { path: path.clone(), source })?;
    Ok((path, report))
}

/// `contents` into `path` (its folder made if missing) by a temporary file beside it and a
/// rename, readable by all (0644): a reader never sees half a file. A write that fails (a full
/// disk) removes its temporary file: the folder keeps nothing of it.
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    // `.tmp…`: the name dracode's output folder takes for a temporary file of its own.
    let tmp = path.with_file_name(format!(".tmp-{name}.{}", std::process::id()));
    let written = std::fs::write(&tmp, contents)
        .and_then(|()| std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// `value` as JSON text.
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_write_that_fails_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.html");
        super::write_atomic(&path, b"<html></html>\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "<html></html>\n");
        // A folder with a file in it where the page goes: the rename fails.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir_all(path.join("x")).unwrap();
        assert!(super::write_atomic(&path, b"page").is_err());
        let names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["report.html"], "nothing but the folder in the way");
    }
}
