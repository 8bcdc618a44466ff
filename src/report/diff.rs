//! `diffs/<id>.patch`: the unified diff of each task's changes, as `git apply` takes it. A task
//! that changed nothing has no patch file.

use super::write_atomic;
use crate::disk::Reserve;
use crate::events::{Event, Reporter};
use dracode_results::file_names::file_stem;
use dracode_secrets::Redactor;
use std::path::PathBuf;
use std::sync::Arc;

/// Writes a patch file for every finished task that changed something.
pub struct DiffReporter {
    dir: PathBuf,
    redactor: Arc<Redactor>,
    reserve: Arc<Reserve>,
}

impl DiffReporter {
    /// A reporter writing into `<out_dir>/diffs/` (created on the first patch).
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        DiffReporter { dir: out_dir.into().join("diffs"), redactor: Arc::default(), reserve: Reserve::none() }
    }

    /// This reporter, writing into `reserve`'s room when the disk is full.
    pub fn with_reserve(self, reserve: Arc<Reserve>) -> Self {
        DiffReporter { reserve, ..self }
    }

    /// This reporter, withholding a patch that holds a secret `redactor` knows.
    pub fn with_redactor(self, redactor: Arc<Redactor>) -> Self {
        DiffReporter { redactor, ..self }
    }
}

impl Reporter for DiffReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        let Some(outcome) = event.as_task_finished() else { return Ok(()) };
        // Each attempt of a repeated task has its own patch too, `diffs/<id>@<repeat>.patch`.
        for (repeat, files) in outcome.record.repeats.iter().zip(&outcome.attachments.repeats) {
            if let Some(diff) = files.diff.as_deref().filter(|d| !d.is_empty()) {
                let path = self.dir.join(format!("{}@{}.patch", file_stem(outcome.task_id), repeat.repeat));
                self.write(&path, diff)?;
            }
        }
        match outcome.attachments.diff.as_deref() {
            Some(diff) if !diff.is_empty() => {
                let path = self.dir.join(format!("{}.patch", file_stem(outcome.task_id)));
                self.write(&path, diff)
            }
            _ => Ok(()),
        }
    }
}

impl DiffReporter {
    /// Writes `diff` byte for byte, so it applies — never masked. A task whose changes hold a
    /// secret ends `error`/`secret` without a patch; one that comes here all the same (a
    /// regraded or merged record of another run's secrets) is not written at all.
    fn write(&self, path: &std::path::Path, diff: &str) -> std::io::Result<()> {
        if !self.redactor.secrets_in(diff).is_empty() {
            return Ok(());
        }
        self.reserve.write(|| write_atomic(path, diff.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Status;
    use crate::report::test_support::{finished, outcome};
    use dracode_results::file_names::diff_path;

    #[test]
    fn a_changed_task_gets_its_patch_where_the_jsonl_says() {
        let dir = tempfile::tempdir().unwrap();
        let mut reporter = DiffReporter::new(dir.path());
        let patch = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n";
        let mut o = outcome("fix:bug", Status::Passed);
        o.attachments.diff = Some(patch.to_string());
        reporter.on_event(&finished(o)).unwrap();
        let written = std::fs::read_to_string(dir.path().join(diff_path("fix:bug"))).unwrap();
        assert_eq!(written, patch);
        assert!(dir.path().join("diffs/fix_bug.patch").is_file());
    }

    #[test]
    fn an_unchanged_task_has_no_patch() {
        let dir = tempfile::tempdir().unwrap();
        let mut reporter = DiffReporter::new(dir.path());
        let mut empty = outcome("empty", Status::Passed);
        empty.attachments.diff = Some(String::new());
        reporter.on_event(&finished(empty)).unwrap();
        reporter.on_event(&finished(outcome("none", Status::Failed))).unwrap();
        assert!(!dir.path().join("diffs").exists());
    }

    #[test]
    fn a_patch_is_never_masked_and_one_holding_a_secret_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let redactor = Arc::new(Redactor::new(["hunter22".to_string()]));
        let mut reporter = DiffReporter::new(dir.path()).with_redactor(redactor);
        let mut o = outcome("leaky", Status::Passed);
        o.attachments.diff = Some("--- a/.env\n+++ b/.env\n@@ -0,0 +1 @@\n+PASSWORD=hunter22\n".into());
        reporter.on_event(&finished(o)).unwrap();
        assert!(!dir.path().join("diffs/leaky.patch").exists());
        let mut o = outcome("bytes", Status::Passed);
        let exact = "--- a/c.py\n+++ b/c.py\n@@ -0,0 +1 @@\n+def int_to_hunter2(n):\n";
        o.attachments.diff = Some(exact.into());
        reporter.on_event(&finished(o)).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("diffs/bytes.patch")).unwrap(), exact);
    }
}
