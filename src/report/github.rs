//! GitHub Actions (docs/src/github-actions.md): workflow-command annotations and step outputs.
//!
//! [`AnnotationReporter`] (on when `GITHUB_ACTIONS=true`) prints one `::error` per task that did
//! not pass, at the task's line of its manifest, and a `::warning` per task retry, per task
//! whose HTTP calls were retried (once), per flaky pass and per budget cut. GitHub reads
//! workflow commands from stdout and stderr alike; they go to stderr, with the human lines, so
//! `--jsonl -` keeps a clean stdout.
//!
//! [`OutputsReporter`] writes the step outputs (`exit-code`, `total`, `passed`, `failed`,
//! `cost-usd`, `input-tokens`, `output-tokens`, `results`, `junit`, `summary`, `out`) to a
//! `$GITHUB_OUTPUT`-style file once the run is finished; a value with a line break uses the
//! multi-line-safe `name<<DELIMITER` form.

use super::{clean_text_keeping, short_reason};
use crate::events::{Event, Reporter, RetryScope, RunFinished, Status, TaskFinished, WireEvent};
use dracode_results::records::WireOutcome;
use dracode_secrets::Redactor;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Whether dracode runs as a GitHub Actions step (`GITHUB_ACTIONS=true`).
pub fn in_actions(env: &std::collections::BTreeMap<String, String>) -> bool {
    env.get("GITHUB_ACTIONS").is_some_and(|v| v == "true")
}

/// Escapes the message of a workflow command (what follows `::`), as `@actions/core` does.
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// Escapes a property value of a workflow command (`file=`, `title=`): also `:` and `,`.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// Prints annotations for the tasks of a run as they finish.
pub struct AnnotationReporter {
    out: Box<dyn Write + Send>,
    redactor: Arc<Redactor>,
    workspace: Option<PathBuf>,
    http_retried: BTreeSet<String>,
}

impl AnnotationReporter {
    /// Annotations to `out`. `workspace` (`$GITHUB_WORKSPACE`) makes absolute manifest paths
    /// relative to the repository, as annotations need.
    pub fn new(out: Box<dyn Write + Send>, redactor: Arc<Redactor>, workspace: Option<PathBuf>) -> Self {
        AnnotationReporter { out, redactor, workspace, http_retried: BTreeSet::new() }
    }

    /// `::LEVEL file=…,line=…,title=…::MESSAGE`; `file`/`line` only for a task from a manifest.
    /// Secrets are masked but within `task_id`, the user's own word.
    fn command(
        &mut self,
        level: &str,
        place: Option<(&Path, Option<usize>)>,
        task_id: &str,
        title: &str,
        message: &str,
    ) -> std::io::Result<()> {
        let mut properties = Vec::new();
        if let Some((manifest, line)) = place {
            properties.push(format!("file={}", escape_property(&self.repository_path(manifest))));
            if let Some(line) = line {
                properties.push(format!("line={line}"));
            }
        }
        properties.push(format!("title={}", escape_property(&clean_text_keeping(&self.redactor, title, &[task_id]))));
        let message = escape_data(&clean_text_keeping(&self.redactor, message, &[task_id]));
        writeln!(self.out, "::{level} {}::{message}", properties.join(","))
    }

    /// `manifest` as the repository sees it: relative to `$GITHUB_WORKSPACE` when under it.
    fn repository_path(&self, manifest: &Path) -> String {
        let relative = self.workspace.as_deref().and_then(|w| manifest.strip_prefix(w).ok()).unwrap_or(manifest);
        relative.to_string_lossy().into_owned()
    }

    fn on_finished(&mut self, o: TaskFinished<'_>) -> std::io::Result<()> {
        let place = place(o.record);
        let reason = short_reason(o.record);
        let title = format!("dracode {}: {}", o.task_id, o.record.status.as_str());
        match o.record.status {
            Status::Passed if o.record.flaky => {
                let title = format!("dracode {}: flaky", o.task_id);
                self.command("warning", place, o.task_id, &title, &format!("passed after {} attempts", o.record.attempts))
            }
            Status::Passed => Ok(()),
            // A budget cut is the run's limit speaking, not the task failing on its own.
            Status::BudgetExceeded => self.command("warning", place, o.task_id, &title, non_empty(&reason, o.record.status.as_str())),
            _ => self.command("error", place, o.task_id, &title, non_empty(&reason, o.record.status.as_str())),
        }
    }

    fn on_retry(&mut self, task_id: &str, scope: RetryScope, reason: &str, next_attempt: u32) -> std::io::Result<()> {
        match scope {
            RetryScope::Task => {
                let title = format!("dracode {task_id}: retry");
                self.command("warning", None, task_id, &title, &format!("attempt {next_attempt} after: {reason}"))
            }
            // HTTP retries can come by the dozen under a rate limit: the first one says so.
            RetryScope::Http if self.http_retried.insert(task_id.to_string()) => {
                let title = format!("dracode {task_id}: LLM calls retried");
                self.command("warning", None, task_id, &title, &format!("an LLM call was retried after: {reason}"))
            }
            RetryScope::Http => Ok(()),
        }
    }
}

/// Where a task's annotation points: its manifest and line; nothing for an ad-hoc `--task`.
fn place(record: &WireOutcome) -> Option<(&Path, Option<usize>)> {
    let manifest = Path::new(&record.manifest);
    let ad_hoc = manifest.as_os_str().is_empty() || manifest == Path::new("--task");
    (!ad_hoc).then_some((manifest, record.line))
}

fn non_empty<'a>(text: &'a str, fallback: &'a str) -> &'a str {
    if text.is_empty() { fallback } else { text }
}

impl Reporter for AnnotationReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        if let Some(done) = event.as_task_finished() {
            return self.on_finished(done);
        }
        match (&event.record, event.task_id()) {
            (WireEvent::Retry { scope, reason, attempt, .. }, Some(task_id)) => self.on_retry(task_id, *scope, reason, *attempt),
            _ => Ok(()),
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Writes the step outputs when the run finishes.
pub struct OutputsReporter {
    path: PathBuf,
    out_dir: PathBuf,
    totals: Option<RunFinished>,
}

impl OutputsReporter {
    /// Outputs appended to `path` (a `$GITHUB_OUTPUT` file); artifact paths under `out_dir`
    /// (best made absolute by the caller, for steps with another working directory).
    pub fn new(path: impl Into<PathBuf>, out_dir: impl Into<PathBuf>) -> Self {
        OutputsReporter { path: path.into(), out_dir: out_dir.into(), totals: None }
    }
}

impl Reporter for OutputsReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        if let Some(totals) = event.as_run_finished() {
            self.totals = Some(totals);
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let Some(totals) = &self.totals else { return Ok(()) };
        let text = render_outputs(totals, &self.out_dir);
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
        file.write_all(text.as_bytes())
    }
}

/// The outputs of a run, in `$GITHUB_OUTPUT` syntax.
pub fn render_outputs(totals: &RunFinished, out_dir: &Path) -> String {
    let total = totals.counts.total();
    let passed = totals.counts.get(Status::Passed);
    let path = |name: &str| out_dir.join(name).to_string_lossy().into_owned();
    let pairs = [
        ("exit-code", totals.exit_code.to_string()),
        ("total", total.to_string()),
        ("passed", passed.to_string()),
        ("failed", (total - passed).to_string()),
        // An unknown price stays unknown: empty, never a guessed 0.
        ("cost-usd", totals.total_cost_usd.map(|c| format!("{c:.6}")).unwrap_or_default()),
        ("input-tokens", totals.usage.input_tokens.to_string()),
        ("output-tokens", totals.usage.output_tokens.to_string()),
        ("results", path("results.jsonl")),
        ("junit", path("junit.xml")),
        ("summary", path("summary.md")),
        ("report", path("report.html")),
        ("out", out_dir.to_string_lossy().into_owned()),
    ];
    pairs.iter().map(|(name, value)| output_line(name, value)).collect()
}

/// `name=value\n`, or the heredoc form `name<<D\nvalue\nD\n` when the value would not survive
/// one line: a line break in it, or white space at either end.
fn output_line(name: &str, value: &str) -> String {
    let simple = !value.contains(['\n', '\r']) && value.trim() == value;
    if simple {
        return format!("{name}={value}\n");
    }
    let mut delimiter = format!("ghadelimiter_dracode_{}", std::process::id());
    while value.contains(&delimiter) {
        delimiter.push('_');
    }
    format!("{name}<<{delimiter}\n{value}\n{delimiter}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{FailureKind, TaskError};
    use crate::report::test_support::{Shared, event, finished, outcome, run_end, totals};

    fn annotate(events: &[Event], workspace: Option<&str>) -> String {
        let sink = Shared::default();
        let redactor = Arc::new(Redactor::new(["sk-live-123456".to_string()]));
        let mut reporter = AnnotationReporter::new(Box::new(sink.clone()), redactor, workspace.map(PathBuf::from));
        for e in events {
            reporter.on_event(e).unwrap();
        }
        reporter.finish().unwrap();
        String::from_utf8(sink.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn a_failed_task_is_an_error_at_its_manifest_line_with_escaped_properties() {
        let mut o = outcome("fix,it", Status::Failed);
        o.record.line = Some(14);
        o.record.manifest = "/repo/ci/tasks.toml".into();
        o.record.error = Some(TaskError {
            kind: FailureKind::Check,
            message: "check failed: 50% done\nsecond line with sk-live-123456".into(),
            http_status: None,
        });
        let text = annotate(&[finished(o)], Some("/repo"));
        assert_eq!(text, "::error file=ci/tasks.toml,line=14,title=dracode fix%2Cit%3A failed::check failed: 50%25 done\n");
    }

    #[test]
    fn passes_are_silent_and_flaky_passes_budget_cuts_and_retries_warn() {
        let passed = outcome("ok", Status::Passed);
        let mut flaky = outcome("flaky", Status::Passed);
        (flaky.record.flaky, flaky.record.attempts, flaky.record.line) = (true, 2, Some(3));
        let mut cut = outcome("cut", Status::BudgetExceeded);
        cut.record.error = Some(TaskError::internal("not started: the run's token budget of 100 is spent"));
        let retry = |scope| event(Some(("slow", 1)), Event::retry(scope, "429".into(), std::time::Duration::ZERO, 2));
        let text = annotate(
            &[finished(passed), finished(flaky), finished(cut), retry(RetryScope::Http), retry(RetryScope::Http), retry(RetryScope::Task)],
            None,
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "::warning file=tasks.toml,line=3,title=dracode flaky%3A flaky::passed after 2 attempts",
                "::warning file=tasks.toml,title=dracode cut%3A budget_exceeded::not started: the run's token budget of 100 is spent",
                "::warning title=dracode slow%3A LLM calls retried::an LLM call was retried after: 429",
                "::warning title=dracode slow%3A retry::attempt 2 after: 429",
            ]
        );
    }

    #[test]
    fn an_ad_hoc_task_has_no_file_and_secrets_and_escapes_never_reach_the_log() {
        let mut o = outcome("task-1", Status::Error);
        o.record.manifest = "--task".into();
        o.record.error = Some(TaskError {
            kind: FailureKind::Agent,
            message: "see \x1b]8;;https://x.test\x1b\\link\x1b]8;;\x1b\\ sk-live-123456".into(),
            http_status: None,
        });
        let text = annotate(&[finished(o)], None);
        assert_eq!(text, "::error title=dracode task-1%3A error::see link [REDACTED]\n");
    }

    #[test]
    fn outputs_use_the_heredoc_form_for_line_breaks_and_leave_an_unknown_cost_empty() {
        let mut t = run_end(&totals(&[(Status::Passed, 2), (Status::Failed, 1), (Status::Skipped, 1)]));
        t.usage.input_tokens = 1200;
        t.usage.output_tokens = 34;
        t.total_cost_usd = Some(0.0125);
        let text = render_outputs(&t, Path::new("/w/out dir"));
        assert!(
            text.starts_with("exit-code=1\ntotal=4\npassed=2\nfailed=2\ncost-usd=0.012500\ninput-tokens=1200\noutput-tokens=34\n"),
            "{text}"
        );
        assert!(text.contains("\nresults=/w/out dir/results.jsonl\njunit=/w/out dir/junit.xml\nsummary=/w/out dir/summary.md\nreport=/w/out dir/report.html\n"), "{text}");
        let d = format!("ghadelimiter_dracode_{}", std::process::id());
        let text = render_outputs(&t, Path::new("/w/two\nlines"));
        assert!(text.contains(&format!("results<<{d}\n/w/two\nlines/results.jsonl\n{d}\n")), "{text}");
        assert!(text.ends_with(&format!("out<<{d}\n/w/two\nlines\n{d}\n")), "{text}");
        t.total_cost_usd = None;
        assert!(render_outputs(&t, Path::new("o")).contains("\ncost-usd=\n"), "unknown, not 0");
    }

    #[test]
    fn outputs_are_appended_after_the_run_finished() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("github_output");
        std::fs::write(&path, "earlier=1\n").unwrap();
        let mut reporter = OutputsReporter::new(&path, "out");
        reporter.on_event(&finished(outcome("a", Status::Passed))).unwrap();
        reporter.on_event(&Event::run_finished(&totals(&[(Status::Passed, 1)]))).unwrap();
        reporter.finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("earlier=1\nexit-code=0\ntotal=1\npassed=1\nfailed=0\n"), "{text}");
    }
}
