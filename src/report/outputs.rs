//! The artifacts of structured answers: `outputs/<id>.json` for every task with one, and
//! `findings.sarif` (plus GitHub annotations) for `output = "findings"` tasks.

use crate::disk::Reserve;
use crate::events::{Event, Reporter, WireEvent};
use crate::structured::annotations::{self, MAX_ANNOTATIONS};
use crate::structured::findings::{self, PathBase};
use crate::structured::sarif::{self, Located};
use dracode_results::{file_names::file_stem, html};
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a task's answer is written, relative to the output folder: `outputs/<file_stem>.json`.
pub fn output_path(task_id: &str) -> String {
    format!("outputs/{}.json", file_stem(task_id))
}

/// Characters of one answer `summary.md` shows; the whole answer is in `outputs/<id>.json`.
const SUMMARY_CHARS: usize = 4000;

/// The "Structured output" part of `summary.md`: each answer in a collapsed `<details>`, as
/// HTML-escaped JSON (no Markdown in it can break the page); empty when no task has one.
pub fn summary_section(outcomes: &[&crate::events::TaskOutcome], redactor: &Redactor) -> String {
    let mut md = String::new();
    for o in outcomes {
        let Some(value) = &o.record.structured_output else { continue };
        if md.is_empty() {
            md.push_str("\n### Structured output\n\n");
        }
        let text = super::clean_text(redactor, &serde_json::to_string_pretty(value).unwrap_or_default());
        let mut shown: String = text.chars().take(SUMMARY_CHARS).collect();
        if shown.len() < text.len() {
            shown.push_str(&format!("\n… (cut; the whole answer is {})", output_path(&o.task_id)));
        }
        let id = html::escape(&super::strip_control(&o.task_id));
        md.push_str(&format!("<details><summary>{id}</summary>\n\n<pre>{}</pre>\n\n</details>\n\n", html::escape(&shown)));
    }
    md
}

/// Writes `outputs/<id>.json`, pretty-printed with secrets masked, for every finished task
/// with a structured answer.
pub struct OutputsReporter {
    out_dir: PathBuf,
    redactor: Arc<Redactor>,
    reserve: Arc<Reserve>,
}

impl OutputsReporter {
    /// A reporter writing under `out_dir`.
    pub fn new(out_dir: impl Into<PathBuf>, redactor: Arc<Redactor>) -> Self {
        OutputsReporter { out_dir: out_dir.into(), redactor, reserve: Reserve::none() }
    }

    /// This reporter, writing into `reserve`'s room when the disk is full.
    pub fn with_reserve(self, reserve: Arc<Reserve>) -> Self {
        OutputsReporter { reserve, ..self }
    }
}

impl Reporter for OutputsReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        let Some(done) = event.as_task_finished() else { return Ok(()) };
        let Some(value) = &done.record.structured_output else { return Ok(()) };
        let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)? + "\n";
        let (path, text) = (self.out_dir.join(output_path(done.task_id)), self.redactor.redact(&text));
        self.reserve.write(|| super::write_atomic(&path, text.as_bytes()))
    }
}

/// Collects the findings of `output = "findings"` tasks into `findings.sarif`, written when the
/// run ends (with no results when no task found anything). Findings on paths outside the
/// workspace are dropped with a warning; with annotations on, each kept finding (at most
/// [`MAX_ANNOTATIONS`]) is also a `::warning` line.
pub struct SarifReporter {
    path: PathBuf,
    run_id: String,
    bases: BTreeMap<String, PathBase>,
    messages: Box<dyn Write + Send>,
    annotate: bool,
    redactor: Arc<Redactor>,
    found: Vec<Located>,
    annotated: usize,
    reserve: Arc<Reserve>,
}

impl SarifReporter {
    /// A reporter writing `out_dir/findings.sarif` for the tasks of `bases` (task id → where
    /// its paths point); warnings and annotations go to `messages`.
    pub fn new(out_dir: &Path, bases: BTreeMap<String, PathBase>, messages: Box<dyn Write + Send>, redactor: Arc<Redactor>) -> Self {
        SarifReporter {
            path: out_dir.join("findings.sarif"),
            run_id: "run".to_string(),
            bases,
            messages,
            annotate: false,
            redactor,
            found: Vec::new(),
            annotated: 0,
            reserve: Reserve::none(),
        }
    }

    /// This reporter, writing into `reserve`'s room when the disk is full.
    pub fn with_reserve(self, reserve: Arc<Reserve>) -> Self {
        SarifReporter { reserve, ..self }
    }

    /// This reporter, naming the run `run_id` in `automationDetails.id`
    /// (`dracode/findings/RUN_ID`).
    pub fn with_run_id(self, run_id: &str) -> Self {
        SarifReporter { run_id: run_id.to_string(), ..self }
    }

    /// This reporter, printing `::warning` annotations (GitHub Actions).
    pub fn with_annotations(self, annotate: bool) -> Self {
        SarifReporter { annotate, ..self }
    }

    fn add(&mut self, task_id: &str, answer: &serde_json::Value) -> std::io::Result<()> {
        let Some(base) = self.bases.get(task_id) else { return Ok(()) };
        for mut finding in findings::parse(answer) {
            let Some(path) = base.repo_path(&finding.file) else {
                let file = super::clean_text(&self.redactor, &finding.file);
                writeln!(
                    self.messages,
                    "warning: task {task_id:?}: finding {:?} on {file:?} dropped: the file is outside the workspace",
                    finding.rule_id
                )?;
                continue;
            };
            finding.message = super::clean_text(&self.redactor, &finding.message);
            let located = Located { task_id: task_id.to_string(), finding, path };
            if self.annotate && self.annotated < MAX_ANNOTATIONS {
                writeln!(self.messages, "{}", annotations::annotation(&located))?;
                self.annotated += 1;
            }
            self.found.push(located);
        }
        Ok(())
    }
}

impl Reporter for SarifReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        if let (WireEvent::TaskStarted { workdir, .. }, Some(task_id)) = (&event.record, event.task_id()) {
            if let Some(base) = self.bases.get_mut(task_id) {
                base.absolute_workdir = Some(workdir.into());
            }
            return Ok(());
        }
        match event.as_task_finished() {
            Some(done) => done.record.structured_output.as_ref().map_or(Ok(()), |answer| self.add(done.task_id, answer)),
            None => Ok(()),
        }
    }

    fn finish(&mut self) -> std::io::Result<()> {
        if self.annotate && self.found.len() > self.annotated {
            writeln!(
                self.messages,
                "dracode: {} more finding(s) not annotated (at most {MAX_ANNOTATIONS}); see findings.sarif",
                self.found.len() - self.annotated
            )?;
        }
        let log = sarif::log(&self.found, &self.run_id);
        let left_out = sarif::left_out(&log);
        if left_out > 0 {
            writeln!(self.messages, "warning: {}", capped(self.found.len() as u64, left_out))?;
        }
        let (text, too_large) = sarif::render(&log);
        if let Some(why) = too_large {
            writeln!(self.messages, "warning: {why}")?;
        }
        self.reserve.write(|| super::write_atomic(&self.path, text.as_bytes()))?;
        self.messages.flush()
    }

    /// `findings.sarif` is a whole-run file: written before the record gets `run.finished`, so
    /// a failure to write it shows in `run.finished.exit_code`.
    fn run_end(&self) -> crate::events::RunEnd {
        crate::events::RunEnd::WritesFiles
    }
}

/// The warning when findings.sarif keeps only [`sarif::MAX_RESULTS`] of `total` findings.
fn capped(total: u64, left_out: u64) -> String {
    format!(
        "findings.sarif keeps {} of {total} findings, {left_out} left out: GitHub code scanning refuses a run of more than \
         {} results. The least severe were left out (notes, then warnings); every finding is in outputs/<task>.json",
        total - left_out,
        sarif::MAX_RESULTS
    )
}

/// `dracode merge`: the `findings.sarif` of every input that has one, as one log in `out`
/// (none when no input has one), and the warnings about it (findings left out over GitHub's
/// limit, a file too large to upload). A log that cannot be read is an error: dropping its
/// findings silently would hide alerts.
pub fn merge_sarif(inputs: &[PathBuf], out: &Path) -> std::io::Result<Vec<String>> {
    let mut logs = Vec::new();
    for dir in inputs {
        let path = dir.join("findings.sarif");
        if !path.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let log = serde_json::from_str(&text).map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        logs.push(log);
    }
    if logs.is_empty() {
        return Ok(Vec::new());
    }
    let merged = sarif::merge(&logs);
    let mut warnings = Vec::new();
    let left_out = sarif::left_out(&merged);
    if left_out > 0 {
        let kept = merged["runs"][0]["results"].as_array().map_or(0, Vec::len) as u64;
        warnings.push(capped(kept + left_out, left_out));
    }
    let (text, too_large) = sarif::render(&merged);
    warnings.extend(too_large);
    super::write_atomic(&out.join("findings.sarif"), text.as_bytes())?;
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Status;
    use crate::report::test_support::{Shared, event, finished, outcome};
    use serde_json::json;

    fn finding(file: &str, line: u64) -> serde_json::Value {
        json!({"rule_id": "r", "message": "m", "file": file, "start_line": line, "severity": "warning"})
    }

    #[test]
    fn outputs_are_written_per_task_and_tasks_without_one_get_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut reporter = OutputsReporter::new(dir.path(), Arc::new(Redactor::new(["hunter22".to_string()])));
        let mut with = outcome("a:b", Status::Passed);
        with.record.structured_output = Some(json!({"risk": 3, "why": "hunter22"}));
        reporter.on_event(&finished(with)).unwrap();
        reporter.on_event(&finished(outcome("plain", Status::Passed))).unwrap();
        let text = std::fs::read_to_string(dir.path().join("outputs/a_b.json")).unwrap();
        let written: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(written["risk"], 3);
        assert!(!text.contains("hunter22"), "{text}");
        assert_eq!(std::fs::read_dir(dir.path().join("outputs")).unwrap().count(), 1);
    }

    #[test]
    fn findings_outside_the_workspace_are_dropped_and_annotations_capped() {
        let dir = tempfile::tempdir().unwrap();
        let messages = Shared::default();
        let bases = BTreeMap::from([("review".to_string(), PathBase { workdir: "src".into(), ..PathBase::default() })]);
        let mut reporter = SarifReporter::new(dir.path(), bases, Box::new(messages.clone()), Arc::default()).with_annotations(true);
        reporter
            .on_event(&event(
                Some(("review", 1)),
                WireEvent::TaskStarted {
                    header: crate::report::test_support::unstamped(),
                    workspace_ms: None,
                    issue: None,
                    provider: "p".into(),
                    model: "m".into(),
                    isolation: "copy".into(),
                    workdir: "/ws/src".into(),
                    base_commit: None,
                },
            ))
            .unwrap();
        let mut items: Vec<serde_json::Value> = (1..=55).map(|i| finding("lib.rs", i)).collect();
        items.push(finding("../../etc/passwd", 1));
        items.push(finding("/ws/src/abs.rs", 2));
        let mut o = outcome("review", Status::Passed);
        o.record.structured_output = Some(json!({ "findings": items }));
        reporter.on_event(&finished(o.clone())).unwrap();
        o.task_id = "not-a-findings-task".into();
        reporter.on_event(&finished(o)).unwrap();
        reporter.finish().unwrap();
        let log: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("findings.sarif")).unwrap()).unwrap();
        let results = log["runs"][0]["results"].as_array().unwrap();
        assert_eq!(results.len(), 56);
        assert_eq!(results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "src/lib.rs");
        assert_eq!(results[55]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "src/abs.rs");
        let printed = String::from_utf8(messages.0.lock().unwrap().clone()).unwrap();
        assert_eq!(printed.lines().filter(|l| l.starts_with("::warning file=src/lib.rs,line=")).count(), MAX_ANNOTATIONS);
        assert!(printed.contains("finding \"r\" on \"../../etc/passwd\" dropped: the file is outside the workspace"), "{printed}");
        assert!(printed.contains("6 more finding(s) not annotated"), "{printed}");
    }

    #[test]
    fn the_summary_lists_answers_collapsed_and_escaped() {
        let mut a = outcome("a", Status::Passed);
        a.record.structured_output = Some(json!({"note": "</pre><script>x</script>"}));
        let b = outcome("b", Status::Passed);
        let md = summary_section(&[&a, &b], &Redactor::default());
        assert!(md.starts_with("\n### Structured output\n"), "{md}");
        assert!(md.contains("<details><summary>a</summary>"), "{md}");
        assert!(md.contains("&lt;/pre&gt;&lt;script&gt;") && !md.contains("<script>"), "{md}");
        assert!(!md.contains("<summary>b</summary>"));
        assert_eq!(summary_section(&[&b], &Redactor::default()), "");
    }

    #[test]
    fn merged_outputs_join_every_input_log() {
        let dir = tempfile::tempdir().unwrap();
        let located = |rule: &str| {
            let finding = crate::structured::findings::parse(&json!({"findings": [finding("a.rs", 1)]})).remove(0);
            Located {
                task_id: "t".into(),
                finding: crate::structured::findings::Finding { rule_id: rule.into(), ..finding },
                path: "a.rs".into(),
            }
        };
        let (one, two, none, out) = (dir.path().join("1"), dir.path().join("2"), dir.path().join("3"), dir.path().join("out"));
        for (d, rule) in [(&one, "x"), (&two, "y")] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("findings.sarif"), sarif::log(&[located(rule)], "r1").to_string()).unwrap();
        }
        std::fs::create_dir_all(&none).unwrap();
        merge_sarif(std::slice::from_ref(&none), &out).unwrap();
        assert!(!out.join("findings.sarif").exists(), "no input log, no merged log");
        merge_sarif(&[one, none, two], &out).unwrap();
        let log: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("findings.sarif")).unwrap()).unwrap();
        assert_eq!(log["runs"][0]["results"].as_array().unwrap().len(), 2);
        assert_eq!(log["runs"][0]["results"][1]["ruleIndex"], 1);
    }

    #[test]
    fn a_run_without_findings_still_writes_an_empty_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut reporter = SarifReporter::new(dir.path(), BTreeMap::new(), Box::new(std::io::sink()), Arc::default());
        reporter.finish().unwrap();
        let log: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("findings.sarif")).unwrap()).unwrap();
        assert_eq!(log["runs"][0]["results"], json!([]));
    }
}
