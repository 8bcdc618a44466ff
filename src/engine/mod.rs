//! The one entry point of the commands that run things: a batch ([`BatchBuilder`] →
//! [`Batch::execute`] → [`RunSummary`]) and a regrade ([`regrade`]). What they share is made here
//! once: the output folder and its reserve, the run id, the artifact reporters, the bus (which
//! stamps every event with the run id and shard, [`crate::events::Stamp`]), the
//! runtime and the signal handling ([`signals`]); the exit code is decided once, by the bus as it
//! hands `run.finished` to the record ([`crate::events::EventBus::finish`]), so the code in
//! `results.jsonl` is the process's. Nothing here prints: what a person should read comes back
//! in [`RunSummary::notes`], for the command line (`src/cli/`) to show.

mod batch;
pub mod regrade;
pub mod signals;

pub use batch::{Batch, BatchBuilder, EngineError, RunSummary};

use crate::disk::Reserve;
use crate::events::Reporter;
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A run id that sorts by time: `20261122T133207Z-1a2b`. The suffix tells apart runs of the same
/// second: the process id for a process's first run, and another for each further run of the
/// same process (a program running batches in-process).
pub fn run_id() -> String {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let earlier = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let compact: String = now.chars().filter(char::is_ascii_alphanumeric).collect();
    // An odd step visits all 65,536 suffixes before one comes back.
    format!("{compact}-{:04x}", std::process::id().wrapping_add(earlier.wrapping_mul(0x9e37)) & 0xffff)
}

/// An output folder made ready for a run: prepared (what `keep` names is kept), its reserve held,
/// and the reporters that write its artifacts (results, JUnit, summary, transcripts, diffs,
/// outputs, and `report.html` from what they wrote).
pub struct RunFolder {
    /// The folder.
    pub out: PathBuf,
    /// Room held back for the run's last files ([`crate::disk`]).
    pub reserve: Arc<Reserve>,
    /// The artifacts' reporters, in the order the bus must call them.
    pub reporters: Vec<Box<dyn Reporter>>,
}

impl RunFolder {
    /// Prepares `out` and makes its reporters. `cache`: the cache folder that also keeps this
    /// run's page record (`history/`).
    pub fn open(
        out: &Path,
        keep: &std::collections::BTreeSet<String>,
        redactor: &Arc<Redactor>,
        env: &BTreeMap<String, String>,
        cache: Option<&Path>,
    ) -> Result<RunFolder, EngineError> {
        let failed = |source| EngineError::Folder { path: out.to_path_buf(), source };
        crate::report::out_dir::prepare(out, keep).map_err(failed)?;
        let reserve = Reserve::hold(out);
        let step_summary = env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()).map(PathBuf::from);
        let mut reporters = crate::report::artifact_reporters(out, redactor.clone(), step_summary, &reserve).map_err(failed)?;
        reporters.push(Box::new(crate::report::page::PageReporter::new(out, cache, reserve.clone())));
        Ok(RunFolder { out: out.to_path_buf(), reserve, reporters })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_of_one_process_in_one_second_have_their_own_ids() {
        let ids: std::collections::BTreeSet<String> = (0..100).map(|_| super::run_id()).collect();
        assert_eq!(ids.len(), 100, "each run its own id: {ids:?}");
        assert!(ids.iter().all(|id| id.len() == "20261122T133207Z-1a2b".len()), "{ids:?}");
    }
}
