//! `summary.md`: the run at a glance, for `$GITHUB_STEP_SUMMARY` and PR comments.
//!
//! A heading with the overall result and counts, the totals, a table of every task in manifest
//! order, then the reasons of the tasks that did not pass. Every piece of text from a task is
//! redacted and then escaped, so output full of `|`, `<`, newlines or colour codes cannot break
//! the table or turn into HTML.

use super::{clean_text, clean_text_keeping, human_cost, human_duration, os_reason, strip_control, thousands, write_atomic};
use crate::disk::Reserve;
use crate::events::{Event, Reporter, RunEnd, RunFinished, Status, TaskOutcome, WireEvent};
use dracode_secrets::Redactor;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

/// What the status cell adds to the status: a carried-over result, the repairs after a failed
/// check (`passed (after 1 repair)`), a pass after the agent's own failure (`flaky: passed on
/// attempt 2`), a repeated task's passes and verdict (`3/5 passed, flaky`).
fn status_notes(o: &TaskOutcome) -> String {
    let mut notes = Vec::new();
    if o.record.carried_from.is_some() {
        notes.push("carried".to_string());
    } else if o.record.cached_from.is_some() {
        notes.push("cached".to_string());
    }
    if o.record.repairs > 0 {
        notes.push(format!("after {} repair{}", o.record.repairs, if o.record.repairs == 1 { "" } else { "s" }));
    }
    if o.record.flaky && o.record.verdict.is_none() {
        // A retry passed after the agent's own failure (results.jsonl's `flaky`).
        notes.push(format!("flaky: passed on attempt {}", o.record.attempts));
    }
    if let Some(verdict) = o.record.verdict {
        let passed = o.record.repeats.iter().filter(|r| r.status.is_pass()).count();
        notes.push(format!("{passed}/{} passed, {}", o.record.repeats.len(), verdict.as_str()));
    }
    if notes.is_empty() { String::new() } else { format!(" ({})", notes.join("; ")) }
}

/// How many trailing lines of a check's output the failures table shows.
const TAIL_LINES: usize = 10;
/// How many characters of an error message the failures table shows.
const MESSAGE_CHARS: usize = 500;

/// Collects finished tasks and writes `summary.md` on [`Reporter::finish`].
pub struct SummaryReporter {
    path: PathBuf,
    redactor: Arc<Redactor>,
    outcomes: Vec<TaskOutcome>,
    totals: Option<RunFinished>,
    warnings: Vec<String>,
    /// How each of the batch's setups ended: their `setup.finished` records.
    setups: Vec<WireEvent>,
    step_summary: Option<PathBuf>,
    reserve: Arc<Reserve>,
}

impl SummaryReporter {
    /// A reporter that will write `path` (atomically).
    pub fn new(path: impl Into<PathBuf>, redactor: Arc<Redactor>) -> Self {
        SummaryReporter {
            path: path.into(),
            redactor,
            outcomes: Vec::new(),
            totals: None,
            warnings: Vec::new(),
            setups: Vec::new(),
            step_summary: None,
            reserve: Reserve::none(),
        }
    }

    /// This reporter, writing into `reserve`'s room when the disk is full.
    pub fn with_reserve(self, reserve: Arc<Reserve>) -> Self {
        SummaryReporter { reserve, ..self }
    }

    /// This reporter, also appending the summary to `target` (`$GITHUB_STEP_SUMMARY`).
    pub fn with_step_summary(self, target: Option<PathBuf>) -> Self {
        SummaryReporter { step_summary: target, ..self }
    }

    /// One line per setup of the batch: its command, time and outputs, or why it failed and the
    /// end of its output.
    fn setup_section(&self, md: &mut String) {
        for setup in &self.setups {
            let WireEvent::SetupFinished { command, duration_ms, output_tail, outputs, error, .. } = setup else { continue };
            let command = clean_text(&self.redactor, command);
            let took = human_duration(std::time::Duration::from_millis(*duration_ms));
            match error {
                None => {
                    let outputs: Vec<String> = outputs.iter().map(|o| format!("`{}`", escape_cell(o))).collect();
                    let _ = writeln!(md, "\n**Setup** `{}` passed in {took}; every task got {}", escape_cell(&command), outputs.join(", "));
                }
                Some(why) => {
                    let why = clean_text(&self.redactor, why);
                    let _ = writeln!(md, "\n**Setup** `{}` failed after {took}: {}", escape_cell(&command), escape_cell(&why));
                    let tail: Vec<&str> = output_tail.lines().rev().take(TAIL_LINES).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    let _ = writeln!(md, "\n```\n{}\n```", clean_text(&self.redactor, &tail.join("\n")).replace("```", "'''"));
                }
            }
        }
    }

    /// The Markdown text.
    fn render(&self) -> String {
        let mut outcomes: Vec<&TaskOutcome> = self.outcomes.iter().collect();
        outcomes.sort_by(|a, b| a.record.index.cmp(&b.record.index).then_with(|| a.task_id.cmp(&b.task_id)));
        let mut md = String::new();
        self.heading(&mut md, &outcomes);
        if !self.warnings.is_empty() {
            md.push_str("\n### ⚠️ Warnings\n\n");
            for warning in &self.warnings {
                let _ = writeln!(md, "- {}", escape_cell(&clean_text(&self.redactor, warning)));
            }
        }
        self.setup_section(&mut md);
        if outcomes.is_empty() {
            return md;
        }
        md.push_str("\n| task | status | turns | tokens | cost | duration | files changed |\n");
        md.push_str("|---|---|--:|--:|--:|--:|--:|\n");
        for o in &outcomes {
            let _ = writeln!(
                md,
                "| {} | {} {}{} | {} | {} | {} | {} | {} |",
                exact_cell(&o.task_id),
                status_icon(o.record.status),
                o.record.status.as_str(),
                status_notes(o),
                o.record.num_turns,
                thousands(o.record.usage.total_tokens),
                o.record.total_cost_usd.map_or("—".to_string(), human_cost),
                human_duration(o.duration()),
                o.record.files_changed.len(),
            );
        }
        let failures: Vec<&&TaskOutcome> = outcomes.iter().filter(|o| !o.record.status.is_pass()).collect();
        if !failures.is_empty() {
            md.push_str("\n### Failures\n\n| task | status | reason |\n|---|---|---|\n");
            for o in failures {
                let _ = writeln!(md, "| {} | {} | {} |", exact_cell(&o.task_id), o.record.status.as_str(), self.cell_about(&reason(o), o));
            }
        }
        self.cached_section(&mut md, &outcomes);
        self.overlap_section(&mut md, &outcomes);
        self.denied_section(&mut md, &outcomes);
        self.protected_section(&mut md, &outcomes);
        self.network_section(&mut md, &outcomes);
        md.push_str(&super::outputs::summary_section(&outcomes, &self.redactor));
        md
    }

    /// The tasks reused from the cache: the run that recorded each pass, and what it cost then.
    fn cached_section(&self, md: &mut String, outcomes: &[&TaskOutcome]) {
        let cached: Vec<(&str, &crate::events::CacheHit)> =
            outcomes.iter().filter_map(|o| Some((o.task_id.as_str(), o.record.cached_from.as_ref()?))).collect();
        if cached.is_empty() {
            return;
        }
        md.push_str("\n### Reused from the cache\n\nNot run again: their inputs match a recorded pass.\n\n| task | recorded by run | tokens then | cost then |\n|---|---|--:|--:|\n");
        for (id, hit) in cached {
            let cost = hit.total_cost_usd.map_or("—".to_string(), human_cost);
            let _ = writeln!(md, "| {} | {} | {} | {cost} |", exact_cell(id), exact_cell(&hit.run_id), thousands(hit.usage.total_tokens));
        }
    }

    /// The files more than one passed task's patch changes: where the patches may not combine
    /// (`dracode combine` tells).
    fn overlap_section(&self, md: &mut String, outcomes: &[&TaskOutcome]) {
        let overlaps =
            super::read_back::overlaps(outcomes.iter().filter(|o| o.record.status.is_pass()).map(|o| (o.task_id.as_str(), &o.record)));
        if overlaps.is_empty() {
            return;
        }
        md.push_str("\n### Patches that touch the same files\n\n| file | tasks |\n|---|---|\n");
        for (file, ids) in overlaps {
            let _ = writeln!(md, "| {} | {} |", exact_cell(&file), exact_cell(&ids.join(", ")));
        }
    }

    /// The tasks whose tool policy denied calls: how many, and the first.
    fn denied_section(&self, md: &mut String, outcomes: &[&TaskOutcome]) {
        let denied: Vec<&&TaskOutcome> = outcomes.iter().filter(|o| !o.record.denied.is_empty()).collect();
        if denied.is_empty() {
            return;
        }
        md.push_str("\n### Denied tool calls\n\n| task | denied | first |\n|---|--:|---|\n");
        for o in denied {
            let first = o.record.denied.first().map(|d| format!("{}: {}", d.tool, d.message)).unwrap_or_default();
            let _ = writeln!(md, "| {} | {} | {} |", exact_cell(&o.task_id), o.record.denied.len(), self.cell_about(&first, o));
        }
    }

    /// The tasks that wrote or tried to write protected paths: the writes a tool refused
    /// (`protected_refused`) and the changes made otherwise, put back before the check
    /// (`protected`).
    fn protected_section(&self, md: &mut String, outcomes: &[&TaskOutcome]) {
        let touched: Vec<&&TaskOutcome> =
            outcomes.iter().filter(|o| !o.record.protected_refused.is_empty() || !o.record.protected.is_empty()).collect();
        if touched.is_empty() {
            return;
        }
        md.push_str("\n### Protected paths\n\n| task | writes refused | changed, put back |\n|---|---|---|\n");
        for o in touched {
            let list = |paths: &[String]| match paths.len() {
                0 => "—".to_string(),
                n => format!("{n}: {}", paths.join(", ")),
            };
            let (refused, put_back) = (list(&o.record.protected_refused), list(&o.record.protected));
            let _ = writeln!(md, "| {} | {} | {} |", exact_cell(&o.task_id), self.cell_about(&refused, o), self.cell_about(&put_back, o));
        }
    }

    /// The tasks whose commands had connections refused (egress allowlist or sandbox): how
    /// many, and the hosts.
    fn network_section(&self, md: &mut String, outcomes: &[&TaskOutcome]) {
        let refused: Vec<&&TaskOutcome> = outcomes.iter().filter(|o| o.record.network_denied > 0).collect();
        if refused.is_empty() {
            return;
        }
        md.push_str("\n### Refused connections\n\n| task | refused | hosts |\n|---|--:|---|\n");
        for o in refused {
            let hosts = o.record.network_denied_hosts.join(", ");
            let _ = writeln!(md, "| {} | {} | {} |", exact_cell(&o.task_id), o.record.network_denied, self.cell_about(&hosts, o));
        }
    }

    fn heading(&self, md: &mut String, outcomes: &[&TaskOutcome]) {
        let passed = outcomes.iter().filter(|o| o.record.status.is_pass()).count();
        let ok = passed == outcomes.len() && self.totals.as_ref().is_none_or(|t| t.exit_code == 0);
        let mut counts = Vec::new();
        for status in Status::ALL.into_iter().filter(|s| !s.is_pass()) {
            let n = outcomes.iter().filter(|o| o.record.status == status).count();
            if n > 0 {
                counts.push(format!("{n} {}", status.as_str()));
            }
        }
        let _ = write!(
            md,
            "## {} dracode: {passed} of {} {} passed",
            if ok { "✅" } else { "❌" },
            outcomes.len(),
            if outcomes.len() == 1 { "task" } else { "tasks" }
        );
        for count in counts {
            let _ = write!(md, " · {count}");
        }
        md.push('\n');

        let (tokens, cost) = match &self.totals {
            Some(t) => (t.usage.total_tokens, t.total_cost_usd),
            None => (
                outcomes.iter().map(|o| o.record.usage.total_tokens).sum(),
                outcomes.iter().map(|o| o.record.total_cost_usd).sum::<Option<f64>>(),
            ),
        };
        let _ = write!(md, "\n**Tokens** {} · **Cost** {}", thousands(tokens), cost.map_or("unknown".to_string(), human_cost));
        if let Some(t) = &self.totals {
            let _ = write!(md, " · **Duration** {}", human_duration(t.duration()));
        }
        md.push('\n');
        let carried: Vec<&str> = outcomes.iter().filter_map(|o| o.record.carried_from.as_deref()).collect();
        if let Some(from) = carried.first() {
            let _ = write!(
                md,
                "\n{} task(s) marked *(carried)* were not run again: their result is the earlier run's (`{}`), this run \
                 (`--rerun-failed`) ran the others.\n",
                carried.len(),
                escape_cell(from)
            );
        }
        let not_judged =
            outcomes.iter().filter(|o| dracode_results::exit_codes::not_judged(o.record.status, o.record.error.as_ref())).count();
        if not_judged > 0 {
            let _ = write!(
                md,
                "\n> ⚠️ **{not_judged} task(s) could not be judged**: the provider was not configured or failed, the check could \
                 not run, or the sandbox or dracode failed (status `not_configured`, or `error` of an infrastructure kind). The run exits {}, not 1.\n",
                dracode_results::exit_codes::NOT_JUDGED
            );
        }
    }

    /// `text` about `o` (a reason, a list of hosts), stripped and redacted — but for `o`'s task
    /// id, the user's own word — then escaped for a table cell (redacting before escaping:
    /// escaping changes the text a secret would be matched in).
    fn cell_about(&self, text: &str, o: &TaskOutcome) -> String {
        escape_cell(&clean_text_keeping(&self.redactor, text, &[&o.task_id]))
    }
}

/// A task id, file name or run id for a table cell: stripped and escaped, never masked.
fn exact_cell(text: &str) -> String {
    escape_cell(&strip_control(text))
}

impl Reporter for SummaryReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        match &event.record {
            WireEvent::TaskFinished { .. } => self.outcomes.extend(event.as_task_finished().map(|done| done.to_bare_outcome())),
            WireEvent::RunFinished { .. } => self.totals = event.as_run_finished(),
            WireEvent::RunStarted { warnings, .. } => self.warnings.clone_from(warnings),
            WireEvent::SetupFinished { .. } => self.setups.push(event.record.clone()),
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let text = self.render();
        let written = self.reserve.write(|| write_atomic(&self.path, text.as_bytes()));
        let appended = match &self.step_summary {
            Some(target) => append(target, &text).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot append to $GITHUB_STEP_SUMMARY ({}): {}", target.display(), os_reason(&e)))
            }),
            None => Ok(()),
        };
        match (written, appended) {
            (Err(a), Err(b)) => Err(std::io::Error::new(a.kind(), format!("{a}\n{b}"))),
            (Err(e), _) | (_, Err(e)) => Err(e),
            (Ok(()), Ok(())) => Ok(()),
        }
    }

    fn run_end(&self) -> RunEnd {
        RunEnd::WritesFiles
    }
}

/// Appends `text` to the file at `target`, creating it if needed.
fn append(target: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(target)?;
    file.write_all(text.as_bytes())?;
    file.flush()
}

fn status_icon(status: Status) -> &'static str {
    match status {
        Status::Passed => "✅",
        Status::Skipped => "⏭️",
        _ => "❌",
    }
}

/// Why `o` did not pass, once: its error message (shortened) — unless the check failed, which
/// its record says better — then its check's telling line and output tail.
fn reason(o: &TaskOutcome) -> String {
    let mut parts = Vec::new();
    let check_says_it = o.record.check.is_some() && o.record.error.as_ref().is_some_and(|e| e.kind == crate::events::FailureKind::Check);
    if let Some(error) = o.record.error.as_ref().filter(|_| !check_says_it) {
        let message: String = error.message.chars().take(MESSAGE_CHARS).collect();
        let ellipsis = if message.len() < error.message.len() { "…" } else { "" };
        parts.push(format!("{}: {message}{ellipsis}", error.kind.as_str()));
    }
    if let Some(check) = &o.record.check {
        let code = check.exit_code.map_or("no exit code".to_string(), |c| format!("exit {c}"));
        let tail = strip_control(&check.output_tail);
        let lines: Vec<&str> = tail.lines().filter(|l| !l.trim().is_empty()).collect();
        let shown = &lines[lines.len().saturating_sub(TAIL_LINES)..];
        // The telling line first when the last lines lack it (a compiler's error above its
        // notes, a test runner's failure above npm's closing lines).
        let telling = super::telling_line(&tail).filter(|t| !shown.iter().any(|l| t.starts_with(l.trim())));
        let telling = telling.map(|t| format!("\n{t}\n…")).unwrap_or_default();
        parts.push(format!("check `{}` ({code}){telling}\n{}", check.command, shown.join("\n")));
    }
    if parts.is_empty() && o.record.status == Status::Skipped {
        parts.push("not run (fail-fast)".to_string());
    }
    parts.join("\n")
}

/// `text` safe inside a Markdown table cell: one line (`<br>` between lines), `|` and Markdown
/// punctuation backslash-escaped, `<`, `>` and `&` as entities so nothing becomes HTML, colour
/// codes and control characters dropped.
fn escape_cell(text: &str) -> String {
    let clean = strip_control(text);
    let mut out = String::with_capacity(clean.len());
    let mut lines = clean.lines().map(str::trim_end).filter(|l| !l.is_empty()).peekable();
    while let Some(line) = lines.next() {
        for c in line.chars() {
            if let Some(entity) = dracode_results::html::entity(c) {
                out.push_str(entity);
                continue;
            }
            match c {
                '\\' | '|' | '*' | '_' | '`' | '[' | ']' | '#' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                '\t' => out.push(' '),
                _ => out.push(c),
            }
        }
        if lines.peek().is_some() {
            out.push_str("<br>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::FailureKind;
    use crate::events::RunTotals;
    use crate::events::{CheckRecord, TaskError};
    use crate::report::test_support::{event, finished, outcome, totals, unstamped};

    fn summary(outcomes: Vec<TaskOutcome>, run: Option<RunTotals>) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.md");
        let redactor = Arc::new(Redactor::new(["sk_live_secret_1234".to_string()]));
        let mut reporter = SummaryReporter::new(&path, redactor);
        for o in outcomes.into_iter().rev() {
            reporter.on_event(&finished(o)).unwrap();
        }
        if let Some(t) = run {
            reporter.on_event(&Event::run_finished(&t)).unwrap();
        }
        reporter.finish().unwrap();
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn run_warnings_are_listed_under_the_heading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.md");
        let mut reporter = SummaryReporter::new(&path, Arc::new(Redactor::new(["sk_live_secret_1234".to_string()])));
        let warnings =
            vec!["commands of 2 task(s) ran unconfined (sandbox = \"off\")".to_string(), "key sk_live_secret_1234 <b>".to_string()];
        let started = WireEvent::RunStarted {
            header: unstamped(),
            version: "0.1.0".into(),
            manifests: Vec::new(),
            task_count: 1,
            jobs: 1,
            warnings,
            config_files: None,
            merged_from: None,
        };
        reporter.on_event(&event(None, started)).unwrap();
        reporter.on_event(&finished(outcome("alpha", Status::Passed))).unwrap();
        reporter.finish().unwrap();
        let md = std::fs::read_to_string(path).unwrap();
        assert!(md.contains("\n### ⚠️ Warnings\n\n- commands of 2 task(s) ran unconfined (sandbox = \"off\")\n"), "{md}");
        assert!(!md.contains("sk_live_secret_1234") && md.contains("&lt;b&gt;"), "{md}");
        // No warnings, no section.
        assert!(!summary(vec![outcome("alpha", Status::Passed)], None).contains("Warnings"));
    }

    #[test]
    fn tasks_that_could_not_be_judged_are_called_out_under_the_heading() {
        let mut nokey = outcome("nokey", Status::NotConfigured);
        nokey.record.error = Some(crate::events::TaskError::new(dracode_llm::ErrorKind::NotConfigured.into(), "MOCK_KEY is not set"));
        let md = summary(vec![outcome("alpha", Status::Failed), nokey], None);
        assert!(md.contains("> ⚠️ **1 task(s) could not be judged**"), "{md}");
        assert!(!summary(vec![outcome("alpha", Status::Failed)], None).contains("could not be judged"));
    }

    #[test]
    fn all_passed_is_a_green_heading_and_an_ordered_table() {
        let a = outcome("alpha", Status::Passed);
        let mut b = outcome("beta", Status::Passed);
        b.record.index = 1;
        b.record.files_changed = vec!["a.rs".into(), "b.rs".into()];
        b.record.total_cost_usd = None;
        let md = summary(vec![a, b], Some(totals(&[(Status::Passed, 2)])));
        assert!(md.starts_with("## ✅ dracode: 2 of 2 tasks passed\n"), "{md}");
        assert!(md.contains("**Tokens** 2,468 · **Cost** $0.0246 · **Duration** 3.0s"), "{md}");
        assert!(md.contains("| alpha | ✅ passed | 4 | 1,234 | $0.0123 | 2.1s | 0 |"), "{md}");
        assert!(md.contains("| beta | ✅ passed | 4 | 1,234 | — | 2.1s | 2 |"), "{md}");
        assert!(md.find("| alpha").unwrap() < md.find("| beta").unwrap());
        assert!(!md.contains("Failures"));
    }

    #[test]
    fn failures_are_counted_and_explained_in_one_escaped_cell() {
        let ok = outcome("ok", Status::Passed);
        let mut bad = outcome("bad|id", Status::Failed);
        bad.record.index = 1;
        bad.record.error = Some(TaskError { kind: FailureKind::Check, message: "check failed".into(), http_status: None });
        bad.record.check = Some(CheckRecord {
            before_output_tail: None,
            started_ms: None,
            duration_ms: None,
            command: "cargo test | tee log".into(),
            exit_code: Some(101),
            output_tail: "\x1b[31merror\x1b[0m[E0308]: expected Vec<String>\n  | a && b\nkey sk_live_secret_1234\n".into(),
            before: None,
        });
        let mut skipped = outcome("later", Status::Skipped);
        skipped.record.index = 2;
        let md = summary(vec![ok, bad, skipped], None);
        assert!(md.starts_with("## ❌ dracode: 1 of 3 tasks passed · 1 failed · 1 skipped\n"), "{md}");
        assert!(md.contains("| bad\\|id | ❌ failed |"), "{md}");
        let failures = &md[md.find("### Failures").unwrap()..];
        let row = failures.lines().find(|l| l.starts_with("| bad")).unwrap();
        assert_eq!(
            row,
            "| bad\\|id | failed | check \\`cargo test \\| tee log\\` (exit 101)\
             <br>error\\[E0308\\]: expected Vec&lt;String&gt;<br>  \\| a &amp;&amp; b<br>key \\[REDACTED\\] |"
        );
        assert!(failures.contains("| later | skipped | not run (fail-fast) |"), "{md}");
        assert!(!md.contains("sk_live"), "secrets are masked before escaping");
        assert!(!md.contains('\x1b'));
    }

    #[test]
    fn denied_tool_calls_are_counted_with_the_first_one() {
        let mut o = outcome("t", Status::Passed);
        let call = |id: &str| crate::events::DeniedCall {
            call_id: id.into(),
            tool: "run_command".into(),
            message: "command `curl x` is denied (policy rule policy.run_command.deny \"curl *\")".into(),
        };
        o.record.denied = vec![call("c1"), call("c2")];
        let md = summary(vec![o, outcome("quiet", Status::Passed)], None);
        let section = &md[md.find("### Denied tool calls").unwrap()..];
        assert!(
            section
                .contains("| t | 2 | run\\_command: command \\`curl x\\` is denied (policy rule policy.run\\_command.deny \"curl \\*\")"),
            "{md}"
        );
        assert!(!section.contains("| quiet"), "{md}");
        assert!(!summary(vec![outcome("quiet", Status::Passed)], None).contains("Denied"));
    }

    #[test]
    fn refused_connections_get_a_line_per_task_with_their_hosts() {
        let mut o = outcome("egress", Status::Passed);
        (o.record.network_denied, o.record.network_denied_hosts) = (3, vec!["evil.example:443".into(), "127.0.0.1:53".into()]);
        let md = summary(vec![o, outcome("quiet", Status::Passed)], None);
        let section = &md[md.find("### Refused connections").unwrap()..];
        assert!(section.contains("| egress | 3 | evil.example:443, 127.0.0.1:53 |"), "{md}");
        assert!(!section.contains("| quiet"), "{md}");
        assert!(!summary(vec![outcome("quiet", Status::Passed)], None).contains("Refused connections"));
    }

    #[test]
    fn refused_and_put_back_writes_to_protected_paths_get_a_line_per_task() {
        let mut refused = outcome("guarded", Status::Passed);
        refused.record.protected_refused = vec!["check.sh".into(), "tests/a.py".into()];
        let mut tampered = outcome("tamper", Status::Failed);
        tampered.record.protected = vec!["test.sh".into()];
        let md = summary(vec![refused, tampered, outcome("quiet", Status::Passed)], None);
        let section = &md[md.find("### Protected paths").unwrap()..];
        assert!(section.contains("| guarded | 2: check.sh, tests/a.py | — |"), "{md}");
        assert!(section.contains("| tamper | — | 1: test.sh |"), "{md}");
        assert!(!section.contains("| quiet"), "{md}");
        assert!(!summary(vec![outcome("quiet", Status::Passed)], None).contains("Protected paths"));
    }

    #[test]
    fn an_unknown_price_is_shown_as_unknown() {
        let mut o = outcome("t", Status::Passed);
        o.record.total_cost_usd = None;
        let md = summary(vec![o], None);
        assert!(md.contains("**Cost** unknown"), "{md}");
    }

    #[test]
    fn an_empty_run_still_writes_a_heading() {
        let md = summary(Vec::new(), Some(totals(&[])));
        assert!(md.starts_with("## ✅ dracode: 0 of 0 tasks passed\n"), "{md}");
    }
}
