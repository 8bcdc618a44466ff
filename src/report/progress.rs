//! Human progress lines for CI logs, one line per thing that happened, no colour:
//!
//! ```text
//!   START  [1/3] fix-clippy
//!   START  [2/3] docs
//!    PASS  [2/3] docs  (1/3 done)  4 turns  1,234 tok  $0.0123  2.1s
//!    FAIL  [1/3] fix-clippy  (2/3 done)  6 turns  9,876 tok  $0.0456  30.2s  failed: check `cargo test` exited with 101
//!   TOTAL  3 tasks in 32.4s: 2 passed, 1 failed  11,110 tok  $0.0579
//! ```
//!
//! `[k/N]` is the task's own number, given when it starts and kept on its every line; `(d/N
//! done)` counts the finished tasks. A task still running after a minute gets `SLOW` lines
//! ([`super::slow`]). `--verbose` adds a line per tool call and retry; `--quiet` writes no line
//! at all (dracode's own errors and warnings still reach stderr; the exit code and `--out` say
//! how the run went), as `git -q` and `curl -s` do.

use super::slow::{SharedWriter, SlowPolicy, SlowWatch};
use super::{human_cost, human_duration, short_reason, strip_control, thousands};
use crate::events::{Event, Reporter, RetryScope, RunFinished, Status, TaskFinished, WireEvent};
use dracode_llm::prices::PriceTable;
use dracode_secrets::Redactor;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// What the TOTAL line adds when the run exits [`dracode_results::exit_codes::NOT_JUDGED`].
const NOT_JUDGED_NOTE: &str = "  — NOT JUDGED: a task could not be judged (its provider not configured or failing, a check that could not run, a sandbox or dracode error; exit 5)";

/// How a one-line reason is cut, in characters.
const REASON_CHARS: usize = 160;

/// How much the progress reporter says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verbosity {
    /// No progress line at all (`-q`).
    Quiet,
    /// Each task's start and end, and the total.
    #[default]
    Normal,
    /// Also each tool call and retry.
    Verbose,
}

/// Writes progress lines to a terminal or CI log.
pub struct ProgressReporter {
    writer: SharedWriter,
    /// Writes `SLOW` lines for long tasks, when on.
    slow: Option<SlowWatch>,
    verbosity: Verbosity,
    total: usize,
    started: usize,
    finished: usize,
    /// The `[k/N]` number given to each task when it first started.
    numbers: HashMap<String, usize>,
    redactor: Option<Arc<Redactor>>,
    /// Colour the PASS/FAIL/SLOW labels (a terminal, `NO_COLOR` unset).
    colour: bool,
}

impl ProgressReporter {
    /// A reporter writing to `writer` (stderr, or stdout when it is not the JSONL stream) for a
    /// run of `total_tasks` tasks.
    pub fn new(writer: Box<dyn Write + Send>, verbosity: Verbosity, total_tasks: usize) -> Self {
        ProgressReporter {
            writer: Arc::new(std::sync::Mutex::new(writer)),
            slow: None,
            verbosity,
            total: total_tasks,
            started: 0,
            finished: 0,
            numbers: HashMap::new(),
            redactor: None,
            colour: false,
        }
    }

    /// Colours the labels (green PASS, red FAIL, yellow SLOW and SKIP): for a terminal, when
    /// `NO_COLOR` is not set ([`colour_wanted`]).
    pub fn with_colour(mut self, colour: bool) -> Self {
        self.colour = colour;
        self
    }

    /// Also writes a `SLOW` line for each task running longer than `policy` says, with its
    /// turns, tokens and cost (from `prices`) so far. Not under `--quiet`.
    pub fn with_slow_lines(mut self, policy: SlowPolicy, prices: PriceTable) -> Self {
        if self.verbosity != Verbosity::Quiet {
            self.slow = Some(SlowWatch::start(policy, self.writer.clone(), prices));
        }
        self
    }

    /// Masks secrets in the reasons shown (an error message may quote a refused key).
    pub fn with_redactor(mut self, redactor: Arc<Redactor>) -> Self {
        self.redactor = Some(redactor);
        self
    }

    /// Writes one line. The display is not a result: a closed or full stderr is not an
    /// artifact failure (exit code 3 is for results that could not be written), so a failed
    /// write is dropped. Secrets are masked, but within `task_id` (the user's own word).
    fn line(&mut self, text: &str, task_id: &str) -> std::io::Result<()> {
        let text = match &self.redactor {
            Some(r) => super::clean_text_keeping(r, text, &[task_id]),
            None => strip_control(text),
        };
        let text = if self.colour { coloured(&text) } else { text };
        let mut writer = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = writeln!(writer, "{text}").and_then(|()| writer.flush());
        Ok(())
    }

    /// The task's own number, given when it first starts (or ends unstarted).
    fn number(&mut self, id: &str) -> usize {
        match self.numbers.get(id) {
            Some(&n) => n,
            None => {
                self.started += 1;
                self.numbers.insert(id.to_string(), self.started);
                self.started
            }
        }
    }

    fn started(&mut self, id: &str, attempt: u32, model: &str) -> Option<String> {
        let number = self.number(id);
        if let Some(slow) = &self.slow {
            slow.started(id, format!("[{number}/{}] {id}", self.total), model);
        }
        let again = if attempt > 1 { format!(" (attempt {attempt})") } else { String::new() };
        (self.verbosity != Verbosity::Quiet).then(|| format!("{:>7}  [{number}/{}] {id}{again}", "START", self.total))
    }

    fn finished(&mut self, o: TaskFinished<'_>) -> Option<String> {
        self.finished += 1;
        let number = self.number(o.task_id);
        if let Some(slow) = &self.slow {
            slow.finished(o.task_id);
        }
        if self.verbosity == Verbosity::Quiet {
            return None;
        }
        let label = match o.record.status {
            Status::Passed => "PASS",
            Status::Skipped => "SKIP",
            _ => "FAIL",
        };
        let mut text = format!("{label:>7}  [{number}/{total}] {}  ({}/{total} done)", o.task_id, self.finished, total = self.total);
        if o.record.status != Status::Skipped {
            text.push_str(&format!(
                "  {} {}  {} tok",
                o.record.num_turns,
                if o.record.num_turns == 1 { "turn" } else { "turns" },
                thousands(o.record.usage.total_tokens)
            ));
            if let Some(cost) = o.record.total_cost_usd {
                text.push_str(&format!("  {}", human_cost(cost)));
            }
            text.push_str(&format!("  {}", human_duration(o.duration())));
        }
        if let Some(hit) = &o.record.cached_from {
            text.push_str(&format!("  cached (run {})", hit.run_id));
        }
        if !o.record.status.is_pass() {
            let reason = strip_control(&short_reason(o.record));
            let reason = reason.lines().next().unwrap_or("");
            let mut short: String = reason.chars().take(REASON_CHARS).collect();
            if short.len() < reason.len() {
                short.push('…');
            }
            if short.is_empty() {
                text.push_str(&format!("  {}", o.record.status.as_str()));
            } else {
                text.push_str(&format!("  {}: {short}", o.record.status.as_str()));
            }
        }
        Some(text)
    }

    /// The TOTAL line: task counts, tokens, cost, and what the exit code says when it is not
    /// just the tasks' (results not written, tasks not judged).
    fn total_line(&self, t: &RunFinished) -> String {
        let tasks = t.counts.total();
        let counts: Vec<String> = t.counts.iter().filter(|(_, n)| *n > 0).map(|(s, n)| format!("{n} {}", s.as_str())).collect();
        let counts = if counts.is_empty() { "nothing run".to_string() } else { counts.join(", ") };
        let mut text = format!(
            "{:>7}  {tasks} {} in {}: {counts}  {} tok",
            "TOTAL",
            if tasks == 1 { "task" } else { "tasks" },
            human_duration(t.duration()),
            thousands(t.usage.total_tokens)
        );
        if let Some(cost) = t.total_cost_usd {
            text.push_str(&format!("  {}", human_cost(cost)));
        }
        if t.artifact_failures > 0 {
            // The counts are the tasks'; the run did not succeed if its record is incomplete.
            text.push_str(&format!(
                "  — RESULTS NOT WRITTEN: {} artifact write(s) failed (see the errors below; exit {})",
                t.artifact_failures, t.exit_code
            ));
        } else if t.exit_code == dracode_results::exit_codes::NOT_JUDGED {
            text.push_str(NOT_JUDGED_NOTE);
        }
        text
    }
}

impl Reporter for ProgressReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        let id = event.task_id().unwrap_or_default();
        let verbose = self.verbosity == Verbosity::Verbose;
        let text = match &event.record {
            WireEvent::TaskStarted { model, .. } => self.started(id, event.attempt().unwrap_or(1), model),
            WireEvent::TurnCompleted { usage, .. } => {
                if let Some(slow) = &self.slow {
                    slow.turn(id, usage);
                }
                None
            }
            WireEvent::TaskFinished { .. } => event.as_task_finished().and_then(|done| self.finished(done)),
            WireEvent::ToolCompleted { name, ok, duration_ms, .. } if verbose => {
                let took = short_duration(Duration::from_millis(*duration_ms));
                Some(format!("{:>7}  {id}  {name} {} {took}", "TOOL", if *ok { "ok" } else { "error" }))
            }
            WireEvent::Retry { scope, reason, delay_ms, attempt, .. } if verbose => {
                let scope = match scope {
                    RetryScope::Http => "http",
                    RetryScope::Task => "task",
                };
                Some(format!(
                    "{:>7}  {id}  {scope} {reason}: attempt {attempt} in {}",
                    "RETRY",
                    short_duration(Duration::from_millis(*delay_ms))
                ))
            }
            WireEvent::SetupStarted { command, tasks, .. } if self.verbosity != Verbosity::Quiet => {
                Some(format!("{:>7}  {command}  (for {tasks} task{})", "SETUP", if *tasks == 1 { "" } else { "s" }))
            }
            // A setup that failed is an error: `-q` shows it too.
            WireEvent::SetupFinished { error, .. } if self.verbosity != Verbosity::Quiet || error.is_some() => setup_line(&event.record),
            WireEvent::RunFinished { .. } if self.verbosity != Verbosity::Quiet => event.as_run_finished().map(|t| self.total_line(&t)),
            _ => None,
        };
        match text {
            Some(text) => self.line(&text, id),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.slow = None;
        let _ = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).flush();
        Ok(())
    }
}

/// The line that says how the batch's setup ended (`setup.finished`): its outputs, or why it
/// failed.
fn setup_line(record: &WireEvent) -> Option<String> {
    let WireEvent::SetupFinished { command, duration_ms, output_tail, outputs, error, .. } = record else { return None };
    let took = human_duration(Duration::from_millis(*duration_ms));
    Some(match error {
        None => format!("{:>7}  {command}  {took}, {} output(s) for every task", "SETUP", outputs.len()),
        Some(why) => match super::failure_line(output_tail).filter(|line| !why.contains(line.as_str())) {
            Some(line) => format!("{:>7}  {command}  {took}: {why}\n         {line}", "SETUP"),
            None => format!("{:>7}  {command}  {took}: {why}", "SETUP"),
        },
    })
}

/// Whether a stream that `is_terminal` gets colour: not when `NO_COLOR` is set to anything
/// (no-color.org), nor for `TERM=dumb`.
pub fn colour_wanted(is_terminal: bool, env: &std::collections::BTreeMap<String, String>) -> bool {
    is_terminal && env.get("NO_COLOR").is_none_or(String::is_empty) && env.get("TERM").is_none_or(|t| t != "dumb")
}

/// `line` with its label (the first word) coloured.
fn coloured(line: &str) -> String {
    let label = line.trim_start();
    let code = match label.split(' ').next() {
        Some("PASS") => "32",
        Some("FAIL") => "31",
        Some("SLOW" | "SKIP") => "33",
        _ => return line.to_string(),
    };
    let indent = &line[..line.len() - label.len()];
    let (word, rest) = label.split_at(4);
    format!("{indent}\x1b[{code}m{word}\x1b[0m{rest}")
}

/// `12ms` below a second, else as [`human_duration`].
fn short_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) { format!("{}ms", d.as_millis()) } else { human_duration(d) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{CheckRecord, TaskError};
    use crate::report::test_support::{Shared, event, finished, outcome, run_end, totals, unstamped};
    use dracode_llm::ErrorKind;

    fn run(verbosity: Verbosity) -> String {
        let out = Shared::default();
        let redactor = Arc::new(Redactor::new(["sk-live-abcdefgh".to_string()]));
        let mut p = ProgressReporter::new(Box::new(out.clone()), verbosity, 3).with_redactor(redactor);
        let start = |id: &str, attempt| {
            event(
                Some((id, attempt)),
                WireEvent::TaskStarted {
                    header: unstamped(),
                    workspace_ms: None,
                    issue: None,
                    provider: "openai".into(),
                    model: "m".into(),
                    isolation: "none".into(),
                    workdir: ".".into(),
                    base_commit: None,
                },
            )
        };
        p.on_event(&start("a", 1)).unwrap();
        p.on_event(&event(Some(("a", 1)), Event::tool_completed("c", "read_file", false, "x".into(), Duration::from_millis(12)))).unwrap();
        p.on_event(&finished(outcome("a", Status::Passed))).unwrap();
        p.on_event(&start("b", 1)).unwrap();
        p.on_event(&event(Some(("b", 1)), Event::retry(RetryScope::Task, "server".into(), Duration::from_millis(1500), 2))).unwrap();
        p.on_event(&start("b", 2)).unwrap();
        let mut b = outcome("b", Status::Failed);
        b.record.total_cost_usd = None;
        b.record.check = Some(CheckRecord {
            before_output_tail: None,
            started_ms: None,
            duration_ms: None,
            command: "cargo test".into(),
            exit_code: Some(101),
            output_tail: "\x1b[31mtest result: FAILED\x1b[0m\n".into(),
            before: None,
        });
        p.on_event(&finished(b)).unwrap();
        let mut c = outcome("c", Status::Error);
        c.record.error =
            Some(TaskError { kind: ErrorKind::Auth.into(), message: "key sk-live-abcdefgh refused\nmore".into(), http_status: Some(401) });
        p.on_event(&finished(c)).unwrap();
        let mut t = totals(&[(Status::Passed, 1), (Status::Failed, 1), (Status::Error, 1)]);
        t.usage = dracode_llm::Usage::from_counts(3000, 702);
        p.on_event(&Event::run_finished(&t)).unwrap();
        p.finish().unwrap();
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn the_total_line_says_when_tasks_could_not_be_judged() {
        let p = ProgressReporter::new(Box::new(std::io::sink()), Verbosity::Normal, 2);
        let mut t = run_end(&totals(&[(Status::Failed, 1), (Status::NotConfigured, 1)]));
        assert!(!p.total_line(&t).contains("NOT JUDGED"));
        t.exit_code = dracode_results::exit_codes::NOT_JUDGED;
        let line = p.total_line(&t);
        assert!(line.contains("1 failed, 1 not_configured") && line.ends_with(NOT_JUDGED_NOTE), "{line}");
    }

    #[test]
    fn the_total_line_does_not_claim_success_when_artifacts_failed() {
        let p = ProgressReporter::new(Box::new(std::io::sink()), Verbosity::Normal, 1);
        let mut t = run_end(&totals(&[(Status::Passed, 1)]));
        assert!(!p.total_line(&t).contains("NOT WRITTEN"));
        t.artifact_failures = 2;
        t.exit_code = dracode_results::exit_codes::ARTIFACTS_FAILED;
        let line = p.total_line(&t);
        assert!(
            line.contains("1 passed") && line.ends_with("RESULTS NOT WRITTEN: 2 artifact write(s) failed (see the errors below; exit 3)"),
            "{line}"
        );
    }

    const NORMAL: &str = "  START  [1/3] a
   PASS  [1/3] a  (1/3 done)  4 turns  1,234 tok  $0.0123  2.1s
  START  [2/3] b
  START  [2/3] b (attempt 2)
   FAIL  [2/3] b  (2/3 done)  4 turns  1,234 tok  2.1s  failed: check `cargo test` exited with 101: test result: FAILED
   FAIL  [3/3] c  (3/3 done)  4 turns  1,234 tok  $0.0123  2.1s  error: key [REDACTED] refused
  TOTAL  3 tasks in 3.0s: 1 passed, 1 failed, 1 error  3,702 tok  $0.0246
";

    #[test]
    fn normal_shows_each_task_start_and_end_and_the_total() {
        assert_eq!(run(Verbosity::Normal), NORMAL);
    }

    #[test]
    fn quiet_shows_no_line() {
        assert_eq!(run(Verbosity::Quiet), "");
    }

    #[test]
    fn verbose_adds_tool_calls_and_retries() {
        let out = run(Verbosity::Verbose);
        assert!(out.contains("\n   TOOL  a  read_file error 12ms\n"), "{out}");
        assert!(out.contains("\n  RETRY  b  task server: attempt 2 in 1.5s\n"), "{out}");
        assert_eq!(out.lines().count(), NORMAL.lines().count() + 2);
    }

    /// Tasks finishing out of order keep their own number; the done count is labelled.
    #[test]
    fn a_task_keeps_its_number_and_the_done_count_is_labelled() {
        let out = Shared::default();
        let mut p = ProgressReporter::new(Box::new(out.clone()), Verbosity::Normal, 2);
        for id in ["a", "b"] {
            let kind = WireEvent::TaskStarted {
                header: unstamped(),
                workspace_ms: None,
                issue: None,
                provider: "p".into(),
                model: "m".into(),
                isolation: "copy".into(),
                workdir: ".".into(),
                base_commit: None,
            };
            p.on_event(&event(Some((id, 1)), kind)).unwrap();
        }
        p.on_event(&finished(outcome("b", Status::Passed))).unwrap();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert!(text.ends_with("   PASS  [2/2] b  (1/2 done)  4 turns  1,234 tok  $0.0123  2.1s\n"), "{text}");
    }

    #[test]
    fn labels_are_coloured_only_when_asked_and_never_under_no_color() {
        assert_eq!(coloured("   PASS  [1/1] a"), "   \x1b[32mPASS\x1b[0m  [1/1] a");
        assert_eq!(coloured("  START  [1/1] a"), "  START  [1/1] a");
        let env = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert!(colour_wanted(true, &env(&[])));
        assert!(!colour_wanted(false, &env(&[])));
        assert!(!colour_wanted(true, &env(&[("NO_COLOR", "1")])));
        assert!(!colour_wanted(true, &env(&[("TERM", "dumb")])));
    }

    #[test]
    fn skipped_tasks_show_no_numbers() {
        let out = Shared::default();
        let mut p = ProgressReporter::new(Box::new(out.clone()), Verbosity::Normal, 1);
        p.on_event(&finished(outcome("later", Status::Skipped))).unwrap();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "   SKIP  [1/1] later  (1/1 done)  skipped\n");
    }

    #[test]
    fn a_failed_setup_shows_its_telling_line_not_pips_notice() {
        let tail = "  error: subprocess-exited-with-error\n      LookupError: unable to detect version\n  note: see above\n\n[notice] A new release of pip is available\n[notice] To update, run: pip install --upgrade pip\n";
        let report = |error: &str| WireEvent::SetupFinished {
            header: unstamped(),
            command: "pip install -e .".into(),
            exit_code: Some(1),
            duration_ms: 3000,
            output_tail: tail.into(),
            outputs: Vec::new(),
            not_carried: Vec::new(),
            error: Some(error.into()),
        };
        let line = setup_line(&report("it exited 1")).unwrap();
        assert!(line.ends_with("\n         LookupError: unable to detect version"), "{line}");
        // The reason already holds it (as the setup step writes it): shown once.
        let line = setup_line(&report("it exited 1: LookupError: unable to detect version")).unwrap();
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(!line.contains("[notice]"), "{line}");
    }
}
