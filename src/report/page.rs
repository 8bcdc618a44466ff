//! `report.html` ([`dracode_report_page`]) in an output folder: written at the end of a run, a
//! regrade, a merge and a combine, and by `dracode report OUT`. With `--cache`, the cache folder
//! also keeps each run's results (`history/<run_id>.json`), so the next night's page shows them.

use super::contract::from_wire;
use super::{short_reason, strip_control};
use dracode_results::records::WireOutcome;
use std::path::{Path, PathBuf};

/// Writes `out/report.html`, with the runs of `history` (earlier output folders or cache folders)
/// and of `cache` beside this one; then, with a `cache`, leaves this run's record in it (under
/// `history/`). Returns the page's path; the error names the file.
pub fn write(out: &Path, history: &[PathBuf], cache: Option<&Path>) -> Result<PathBuf, String> {
    let reason = |w: &WireOutcome| Some(strip_control(&short_reason(&from_wire(String::new(), w.clone(), None))));
    let mut sources = history.to_vec();
    sources.extend(cache.filter(|c| c.join("history").is_dir()).map(Path::to_path_buf));
    let options = dracode_report_page::Options { version: env!("CARGO_PKG_VERSION"), history: sources, reason: &reason };
    let (path, report) = dracode_report_page::write(out, &options).map_err(|e| e.to_string())?;
    if let Some(cache) = cache {
        dracode_report_page::history::remember(cache, &report).map_err(|e| e.to_string())?;
    }
    Ok(path)
}
