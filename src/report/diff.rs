//! `diffs/<id>.patch`: the unified diff of each task's changes, as `git apply` takes it. A task
//! that changed nothing has no patch file.

use super::{file_stem, write_atomic};
use crate::events::{Event, EventKind, Reporter};
use crate::secrets::Redactor;
use std::path::PathBuf;
use std::sync::Arc;

/// Writes a patch file for every finished task that changed something.
pub struct DiffReporter {
    dir: PathBuf,
    redactor: Arc<Redactor>,
}

impl DiffReporter {
    /// A reporter writing into `<out_dir>/diffs/` (created on the first patch).
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        DiffReporter { dir: out_dir.into().join("diffs"), redactor: Arc::default() }
    }

    /// This reporter, masking the secrets `redactor` knows.
    pub fn with_redactor(self, redactor: Arc<Redactor>) -> Self {
        DiffReporter { redactor, ..self }
    }
}

impl Reporter for DiffReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        let EventKind::TaskFinished(outcome) = &event.kind else { return Ok(()) };
        // Each attempt of a repeated task has its own patch too, `diffs/<id>@<repeat>.patch`.
        for repeat in &outcome.repeats {
            if let Some(diff) = repeat.diff.as_deref().filter(|d| !d.is_empty()) {
                let path = self.dir.join(format!("{}@{}.patch", file_stem(&outcome.task_id), repeat.repeat));
                write_atomic(&path, self.redactor.redact(diff).as_bytes())?;
            }
        }
        match outcome.diff.as_deref() {
            Some(diff) if !diff.is_empty() => {
                // Written byte for byte, so it applies; only a secret is masked (a patch that
                // carries a credential must not be written, even if it then does not apply).
                let path = self.dir.join(format!("{}.patch", file_stem(&outcome.task_id)));
                write_atomic(&path, self.redactor.redact(diff).as_bytes())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Status;
    use crate::report::test_support::{finished, outcome};
    use crate::report::wire::diff_path;

    #[test]
    fn a_changed_task_gets_its_patch_where_the_jsonl_says() {
        let dir = tempfile::tempdir().unwrap();
        let mut reporter = DiffReporter::new(dir.path());
        let patch = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-old\n+new\n";
        let mut o = outcome("fix:bug", Status::Passed);
        o.diff = Some(patch.to_string());
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
        empty.diff = Some(String::new());
        reporter.on_event(&finished(empty)).unwrap();
        reporter.on_event(&finished(outcome("none", Status::Failed))).unwrap();
        assert!(!dir.path().join("diffs").exists());
    }

    #[test]
    fn a_secret_in_a_patch_is_masked() {
        let dir = tempfile::tempdir().unwrap();
        let redactor = Arc::new(Redactor::new(["hunter22".to_string()]));
        let mut reporter = DiffReporter::new(dir.path()).with_redactor(redactor);
        let mut o = outcome("leaky", Status::Passed);
        o.diff = Some("--- a/.env\n+++ b/.env\n@@ -0,0 +1 @@\n+PASSWORD=hunter22\n".into());
        reporter.on_event(&finished(o)).unwrap();
        let patch = std::fs::read_to_string(dir.path().join("diffs/leaky.patch")).unwrap();
        assert_eq!(patch, "--- a/.env\n+++ b/.env\n@@ -0,0 +1 @@\n+PASSWORD=[REDACTED]\n");
    }
}
