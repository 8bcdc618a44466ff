//! `report.html` ([`dracode_report_page`]) in an output folder: written at the end of a run, a
//! regrade, a merge and a combine, and by `dracode report OUT`. With `--cache`, the cache folder
//! also keeps each run's results (`history/<run_id>.json`), so the next night's page shows them.

use super::{short_reason, strip_control};
use crate::disk::Reserve;
use crate::events::{Event, Reporter, RunEnd};
use dracode_report_page::PageError;
use dracode_results::records::{WireEvent, WireOutcome};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Writes `out/report.html`, with the runs of `history` (earlier output folders or cache folders)
/// and of `cache` beside this one; then, with a `cache`, leaves this run's record in it (under
/// `history/`). Returns the page's path; the error names the file.
pub fn write(out: &Path, history: &[PathBuf], cache: Option<&Path>) -> Result<PathBuf, PageError> {
    write_ending(out, history, cache, None)
}

/// [`write`], with the run's `run.finished` line given (`end`) when `results.jsonl` does not
/// hold it yet.
pub fn write_ending(out: &Path, history: &[PathBuf], cache: Option<&Path>, end: Option<WireEvent>) -> Result<PathBuf, PageError> {
    let reason = |w: &WireOutcome| Some(strip_control(&short_reason(w)));
    let mut sources = history.to_vec();
    sources.extend(cache.filter(|c| c.join("history").is_dir()).map(Path::to_path_buf));
    let options = dracode_report_page::Options { version: env!("CARGO_PKG_VERSION"), history: sources, reason: &reason, end };
    let (path, report) = dracode_report_page::write(out, &options)?;
    if let Some(cache) = cache {
        dracode_report_page::history::remember(cache, &report)?;
    }
    Ok(path)
}

/// The run's last files, as a reporter: when `run.finished` comes, after every other file of
/// the folder is written ([`RunEnd::ReadsFolder`]), it removes the folder's reserve (its room goes
/// to these last writes) and writes `report.html` from the folder and that line; a failure of
/// either is one more artifact failure, which the record's `run.finished.exit_code` then shows.
pub struct PageReporter {
    out: PathBuf,
    cache: Option<PathBuf>,
    reserve: Arc<Reserve>,
}

impl PageReporter {
    /// The page of the run in `out` (its `run.finished` as the bus stamped it); with a `cache`,
    /// its record also kept there.
    pub fn new(out: &Path, cache: Option<&Path>, reserve: Arc<Reserve>) -> Self {
        PageReporter { out: out.to_path_buf(), cache: cache.map(Path::to_path_buf), reserve }
    }
}

impl Reporter for PageReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        if !matches!(event.record, WireEvent::RunFinished { .. }) {
            return Ok(());
        }
        self.reserve.remove().map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot remove {}: {e}", self.out.join(crate::disk::RESERVE_NAME).display()))
        })?;
        write_ending(&self.out, &[], self.cache.as_deref(), Some(event.record.clone())).map(drop).map_err(std::io::Error::other)
    }

    fn run_end(&self) -> RunEnd {
        RunEnd::ReadsFolder
    }
}
