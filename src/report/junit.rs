//! `junit.xml`: one `<testsuite>` per manifest, one `<testcase>` per task, via `quick-junit`.
//!
//! Passed tasks are successes; infrastructure failures (auth, rate limit, network, …) are
//! `<error>`; the task's own failures (check, agent, tool, iterations, budget) are `<failure>`;
//! fail-fast skips are `<skipped>`. The file validates against the Jenkins xunit `junit-10.xsd`,
//! the schema CI servers read. Two things that schema has no place for are placed where it
//! allows them: per-task numbers (tokens, cost, turns, attempts, provider, model) are suite
//! properties named `<task id>.<name>`, and the `<testsuites>` root carries no attributes
//! (quick-junit always writes a `skipped` count there that the schema rejects; the counts are
//! on every `<testsuite>`). Each suite also has `package`, `id`, `hostname`, a zone-less
//! `timestamp` and empty `system-out`/`system-err`, as the Ant schema (windyroad `JUnit.xsd`)
//! requires; that schema still rejects the `<system-out>` holding each task's final message.
//!
//! What the readers in wide use need besides (each is tested on a real batch,
//! `tests/suite/junit_readers.rs`): every earlier attempt (`flakyFailure`, `rerunFailure`, …)
//! has a `<stackTrace>` with its text, as Surefire's schema requires, failures before errors as
//! that schema orders them; a property name is used once in the whole file (xunitparser puts
//! every suite's properties in one map and refuses a name twice), so the run's own properties
//! (`manifest`, `dracode_version`) are on the first suite only (every suite's name is its
//! manifest); tabs are kept (as `&#9;`: quick-junit drops them, and an attribute would turn a
//! literal one into a space); and no U+FFFD is written (xunit-viewer takes a file holding one
//! for another encoding than UTF-8 and fails to read it): each becomes `?`.

use super::{clean_text_keeping, short_reason, strip_control, write_atomic};
use crate::disk::Reserve;
use crate::events::{Event, Reporter, RunEnd, Status, TaskOutcome, WireEvent};
use dracode_results::records::WireAttempt;
use dracode_secrets::Redactor;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The suite name (and test class) of tasks given without a manifest (`--task`).
const AD_HOC_SUITE: &str = "dracode";

/// Stands for a tab while quick-junit holds the text (it drops tabs); a noncharacter, which no
/// text exchanged between programs should hold (one that does is written as `?`).
const TAB_MARK: char = '\u{FDD0}';

/// Collects finished tasks and writes `junit.xml` on [`Reporter::finish`].
pub struct JunitReporter {
    path: PathBuf,
    redactor: Arc<Redactor>,
    manifests: Vec<String>,
    version: Option<String>,
    started: Option<SystemTime>,
    outcomes: Vec<TaskOutcome>,
    reserve: Arc<Reserve>,
}

impl JunitReporter {
    /// A reporter that will write `path` (atomically: a reader never sees half a file).
    pub fn new(path: impl Into<PathBuf>, redactor: Arc<Redactor>) -> Self {
        let (manifests, outcomes) = (Vec::new(), Vec::new());
        JunitReporter { path: path.into(), redactor, manifests, version: None, started: None, outcomes, reserve: Reserve::none() }
    }

    /// This reporter, writing into `reserve`'s room when the disk is full.
    pub fn with_reserve(self, reserve: Arc<Reserve>) -> Self {
        JunitReporter { reserve, ..self }
    }

    /// The report as XML.
    fn render(&self) -> std::io::Result<String> {
        let timestamp = self.started.map(zone_less_timestamp);
        let host = hostname();
        let mut report = Report::unnamed();
        for (id, (manifest, mut outcomes)) in self.suites().into_iter().enumerate() {
            outcomes.sort_by(|a, b| a.record.index.cmp(&b.record.index).then_with(|| a.task_id.cmp(&b.task_id)));
            let name = suite_name(manifest);
            let mut suite = TestSuite::new(name.as_str());
            suite.extra.insert("package".into(), name.as_str().into());
            suite.extra.insert("id".into(), id.to_string().into());
            suite.extra.insert("hostname".into(), host.as_str().into());
            if let Some(ts) = &timestamp {
                suite.extra.insert("timestamp".into(), ts.as_str().into());
            }
            suite.set_time(outcomes.iter().map(|o| o.duration()).sum::<Duration>());
            // The run's own properties once per file: xunitparser refuses a name seen twice.
            if id == 0 {
                suite.add_property(Property::new("manifest", xml_text(&name)));
                if let Some(version) = &self.version {
                    suite.add_property(Property::new("dracode_version", xml_text(version)));
                }
            }
            for outcome in &outcomes {
                suite.add_properties(self.properties(outcome));
            }
            suite.add_test_cases(outcomes.iter().map(|o| self.test_case(o)));
            suite.set_system_out("");
            suite.set_system_err("");
            report.add_test_suite(suite);
        }
        let xml = report.to_string().map_err(std::io::Error::other)?;
        Ok(readable_by_all(&bare_root(reruns_before_error(xml))))
    }

    /// Outcomes grouped by manifest, suites in the order of `run.started`'s manifest list, then
    /// by their first task.
    fn suites(&self) -> Vec<(&Path, Vec<&TaskOutcome>)> {
        let mut suites: Vec<(&Path, Vec<&TaskOutcome>)> = Vec::new();
        for outcome in &self.outcomes {
            let manifest = Path::new(&outcome.record.manifest);
            match suites.iter_mut().find(|(m, _)| *m == manifest) {
                Some((_, list)) => list.push(outcome),
                None => suites.push((manifest, vec![outcome])),
            }
        }
        suites.sort_by_key(|(manifest, list)| {
            let listed = self.manifests.iter().position(|m| Path::new(m) == *manifest);
            (listed.unwrap_or(usize::MAX), list.iter().map(|o| o.record.index).min())
        });
        suites
    }

    fn test_case(&self, o: &TaskOutcome) -> TestCase {
        let status = match o.record.status {
            Status::Passed => TestCaseStatus::success(),
            Status::Skipped => {
                let mut status = TestCaseStatus::skipped();
                status.set_message(self.redact(&message(o), o));
                status
            }
            _ => {
                let mut status = TestCaseStatus::non_success(non_success_kind(o));
                let kind = o.record.error.as_ref().map_or(o.record.status.as_str(), |e| e.kind.as_str());
                status.set_message(self.redact(&without_type(&message(o), kind), o));
                status.set_type(kind);
                let details = details(o);
                if !details.is_empty() {
                    status.set_description(self.redact(&details, o));
                }
                status
            }
        };
        let mut status = status;
        status.add_reruns(self.reruns(o));
        let mut case = TestCase::new(xml_text(&strip_control(&o.task_id)), status);
        case.set_classname(class_name(o));
        case.set_time(o.duration());
        if let Some(result) = &o.record.result {
            case.set_system_out(self.redact(result, o));
        }
        case
    }

    /// Every earlier attempt, as nextest keeps them: `flakyFailure`/`flakyError` under a pass,
    /// `rerunFailure`/`rerunError` under a final failure. The attempts of a repeated task that
    /// did not pass are kept the same way (surefire's flaky test: a pass with `flakyFailure`s).
    /// Each has its text in `<stackTrace>` (Surefire's schema requires one); failures come
    /// before errors, in the order Surefire's schema lists them.
    fn reruns(&self, o: &TaskOutcome) -> Vec<TestRerun> {
        let repeats = o.record.repeats.iter().filter(|r| !r.reported && !r.status.is_pass());
        let repeats = repeats.map(|r| WireAttempt { status: r.status, error: r.error.clone(), duration_ms: r.duration_ms });
        let mut reruns: Vec<TestRerun> = o
            .record
            .prior_attempts
            .iter()
            .cloned()
            .chain(repeats)
            .map(|prior| {
                let kind = if prior.error.as_ref().is_some_and(|e| e.kind.is_infrastructure()) {
                    NonSuccessKind::Error
                } else {
                    NonSuccessKind::Failure
                };
                let mut rerun = TestRerun::new(kind);
                let reason = prior.error.as_ref().map(|e| format!("{}: {}", prior.status.as_str(), e.message));
                let kind = prior.error.as_ref().map_or(prior.status.as_str(), |e| e.kind.as_str());
                rerun.set_message(self.redact(&without_type(&reason.unwrap_or_else(|| prior.status.as_str().to_string()), kind), o));
                rerun.set_type(kind);
                rerun.set_stack_trace(self.redact(&attempt_text(prior.status, prior.error.as_ref()), o));
                rerun
            })
            .collect();
        reruns.sort_by_key(|r| r.kind == NonSuccessKind::Error);
        reruns
    }

    fn properties(&self, o: &TaskOutcome) -> Vec<Property> {
        let mut props = vec![
            ("provider", o.record.provider.clone()),
            ("model", o.record.model.clone()),
            ("turns", o.record.num_turns.to_string()),
            ("attempts", o.record.attempts.to_string()),
            ("input_tokens", o.record.usage.input_tokens.to_string()),
            ("cached_input_tokens", o.record.usage.cached_input_tokens.to_string()),
            ("output_tokens", o.record.usage.output_tokens.to_string()),
            ("total_tokens", o.record.usage.total_tokens.to_string()),
        ];
        if let Some(cost) = o.record.total_cost_usd {
            props.push(("cost_usd", dracode_results::records::exact_cost(cost).to_string()));
        }
        if o.record.flaky {
            props.push(("flaky", "true".to_string()));
        }
        if o.record.repairs > 0 {
            props.push(("repairs", o.record.repairs.to_string()));
        }
        if let (Some(rate), Some(verdict)) = (o.record.pass_rate, o.record.verdict) {
            props.push(("pass_rate", rate.to_string()));
            props.push(("verdict", verdict.as_str().to_string()));
        }
        if let Some(run_id) = &o.record.carried_from {
            props.push(("carried_from", run_id.clone()));
        }
        if let Some(hit) = &o.record.cached_from {
            props.push(("cached_from", hit.run_id.clone()));
        }
        if let Some(from) = &o.record.regraded_from {
            props.push(("regraded_from", format!("{}#{}", from.run_id, from.attempt)));
        }
        // Where the task is defined. The schemas have no `file`/`line` on a testcase (Jenkins
        // allows `file` on a testsuite only, the Ant schema nowhere), so these are properties.
        if let Some(line) = o.record.line {
            props.push(("file", o.record.manifest.clone()));
            props.push(("line", line.to_string()));
        }
        // Ids, names, numbers and paths: never masked.
        let id = strip_control(&o.task_id);
        props.into_iter().map(|(name, value)| Property::new(xml_text(&format!("{id}.{name}")), xml_text(&strip_control(&value)))).collect()
    }

    /// Free text about `o`, stripped and masked — but for its task id.
    fn redact(&self, text: &str, o: &TaskOutcome) -> String {
        xml_text(&clean_text_keeping(&self.redactor, text, &[&o.task_id]))
    }
}

impl Reporter for JunitReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        self.started.get_or_insert(event.ts);
        if let WireEvent::RunStarted { version, manifests, .. } = &event.record {
            self.version = Some(version.clone());
            self.manifests = manifests.clone();
        }
        if let Some(done) = event.as_task_finished() {
            self.outcomes.push(done.to_bare_outcome());
        }
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let xml = self.render()?;
        self.reserve.write(|| write_atomic(&self.path, xml.as_bytes()))
    }

    fn run_end(&self) -> RunEnd {
        RunEnd::WritesFiles
    }
}

/// `<error>` for infrastructure, `<failure>` for the task's own failure.
fn non_success_kind(o: &TaskOutcome) -> NonSuccessKind {
    let infrastructure = match &o.record.error {
        Some(error) => error.kind.is_infrastructure(),
        None => matches!(o.record.status, Status::Error | Status::NotConfigured | Status::Timeout | Status::Stalled | Status::Cancelled),
    };
    if infrastructure { NonSuccessKind::Error } else { NonSuccessKind::Failure }
}

/// `<status>: <reason>`, or the status alone when there is no reason.
fn message(o: &TaskOutcome) -> String {
    let reason = short_reason(&o.record);
    if reason.is_empty() { o.record.status.as_str().to_string() } else { format!("{}: {reason}", o.record.status.as_str()) }
}

/// `message` without a leading `<kind>: `: test-report tools show `type: message`, so
/// `not_configured: not_configured: …` would say it twice. A message that is only the kind
/// stays whole.
fn without_type(message: &str, kind: &str) -> String {
    match message.strip_prefix(kind).and_then(|rest| rest.strip_prefix(": ")) {
        Some(rest) if !rest.trim().is_empty() => rest.to_string(),
        _ => message.to_string(),
    }
}

/// The element's text: the whole error message, then the check's output tail.
fn details(o: &TaskOutcome) -> String {
    let mut parts = Vec::new();
    if let Some(error) = &o.record.error {
        match error.http_status {
            Some(code) => parts.push(format!("{} (HTTP {code})", error.message)),
            None => parts.push(error.message.clone()),
        }
    }
    if let Some(check) = &o.record.check {
        let code = check.exit_code.map_or("none".to_string(), |c| c.to_string());
        parts.push(format!("check: {}\nexit code: {code}\n{}", check.command, strip_control(&check.output_tail)));
    }
    parts.join("\n\n")
}

/// An earlier attempt's text: its status, then its whole error message.
fn attempt_text(status: Status, error: Option<&crate::events::TaskError>) -> String {
    match error {
        Some(e) => match e.http_status {
            Some(code) => format!("{}: {} (HTTP {code})", status.as_str(), e.message),
            None => format!("{}: {}", status.as_str(), e.message),
        },
        None => status.as_str().to_string(),
    }
}

/// `text` as handed to quick-junit: each tab as [`TAB_MARK`] (restored by
/// [`readable_by_all`]), and a `TAB_MARK` already there as `?`.
fn xml_text(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' => TAB_MARK,
            TAB_MARK => '?',
            c => c,
        })
        .collect()
}

/// The rendered report with its tabs back, as `&#9;` (kept in attributes too), and every U+FFFD
/// (an invalid byte in a check's output) as `?`: xunit-viewer reads a file holding U+FFFD in
/// an encoding guessed from its words instead of UTF-8, and fails on the guess.
fn readable_by_all(xml: &str) -> String {
    let mut out = String::with_capacity(xml.len());
    for c in xml.chars() {
        match c {
            TAB_MARK => out.push_str("&#9;"),
            '\u{FFFD}' => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

fn suite_name(manifest: &Path) -> String {
    let name = manifest.to_string_lossy();
    if name.trim().is_empty() { AD_HOC_SUITE.to_string() } else { name.into_owned() }
}

/// The test class: the manifest's stable name without its extension, dotted
/// (`itoa/ci/nightly.toml` → `itoa.ci.nightly`), so two repositories' `nightly.toml` differ;
/// else (a result written before the name existed) the manifest's file stem.
fn class_name(o: &TaskOutcome) -> String {
    if let Some(name) = o.record.manifest_name.as_deref().filter(|n| !n.is_empty()) {
        let (folders, file) = name.rsplit_once('/').unwrap_or(("", name));
        let stem = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
        return if folders.is_empty() { stem.to_string() } else { format!("{folders}.{stem}").replace('/', ".") };
    }
    match Path::new(&o.record.manifest).file_stem() {
        Some(stem) if !stem.is_empty() => stem.to_string_lossy().into_owned(),
        _ => AD_HOC_SUITE.to_string(),
    }
}

/// `YYYY-MM-DDTHH:MM:SS` in UTC: the Ant schema allows neither a zone nor fractions.
fn zone_less_timestamp(ts: SystemTime) -> String {
    humantime::format_rfc3339_seconds(ts).to_string().trim_end_matches('Z').to_string()
}

/// This machine's name, or `localhost` (what the Ant schema asks for when it is unknown).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// `xml` with the attributes of its `<testsuites>` start tag removed. quick-junit always writes
/// `tests`, `skipped`, `failures` and `errors` there; Jenkins' schema rejects `skipped` and the
/// Ant schema rejects any attribute. The report is unnamed, so the tag holds only numbers and
/// its first `>` ends it.
fn bare_root(xml: String) -> String {
    let Some(start) = xml.find("<testsuites") else { return xml };
    let Some(len) = xml[start..].find('>') else { return xml };
    let mut out = String::with_capacity(xml.len());
    out.push_str(&xml[..start]);
    out.push_str("<testsuites>");
    out.push_str(&xml[start + len + 1..]);
    out
}

/// `xml` with each test case's `<rerunFailure>` elements moved before its `<error>`: quick-junit
/// writes the status element first, and Surefire's schema orders a test case's children
/// `failure*, rerunFailure*, flakyFailure*, skipped?, error?, rerunError*, flakyError*` — so a
/// task that failed, then ended `error`, was refused by it.
fn reruns_before_error(xml: String) -> String {
    let mut out = String::with_capacity(xml.len());
    let mut rest = xml.as_str();
    while let Some(start) = rest.find("<testcase") {
        let Some(len) = rest[start..].find("</testcase>") else { break };
        let end = start + len + "</testcase>".len();
        out.push_str(&rest[..start]);
        out.push_str(&reruns_first(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// One test case with the `<rerunFailure>` elements after its `<error` (each with the blank
/// before it) moved to just before it.
fn reruns_first(case: &str) -> String {
    let Some(error) = case.find("<error") else { return case.to_string() };
    let (before, after) = case.split_at(case[..error].trim_end().len());
    let (mut moved, mut kept, mut rest) = (String::new(), String::new(), after);
    while let Some(at) = rest.find("<rerunFailure") {
        let blank = rest[..at].trim_end().len();
        let Some(tag_end) = rest[at..].find('>').map(|n| at + n + 1) else { break };
        let end = if rest[..tag_end].ends_with("/>") {
            tag_end
        } else {
            match rest[tag_end..].find("</rerunFailure>") {
                Some(n) => tag_end + n + "</rerunFailure>".len(),
                None => break,
            }
        };
        kept.push_str(&rest[..blank]);
        moved.push_str(&rest[blank..end]);
        rest = &rest[end..];
    }
    format!("{before}{moved}{kept}{rest}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::FailureKind;
    use crate::events::{CheckRecord, TaskError};
    use crate::report::test_support::{event, finished, outcome, totals, unstamped};
    use dracode_llm::ErrorKind;

    use crate::report::test_support::xmllint::{assert_valid, complaints};

    const JENKINS_XSD: &str = "jenkins-xunit-junit-10.xsd";
    const WINDYROAD_XSD: &str = "windyroad-JUnit.xsd";

    /// The document minus what the Ant schema has no place for and the brief asks for: each
    /// task's final message in `<testcase><system-out>`. The schema's own complaint about it
    /// is asserted separately, so this cannot hide anything else.
    fn ant_profile(xml: &str) -> String {
        let cases = regex::Regex::new(r"(?s)<testcase\b[^>]*>.*?</testcase>").unwrap();
        let out = regex::Regex::new(r"(?s)\s*<system-out>.*?</system-out>").unwrap();
        cases.replace_all(xml, |c: &regex::Captures| out.replace_all(&c[0], "").into_owned()).into_owned()
    }

    fn outcomes() -> Vec<TaskOutcome> {
        let passed = outcome("passes", Status::Passed);

        let mut check_failed = outcome("check-fails", Status::Failed);
        check_failed.record.index = 1;
        check_failed.record.line = Some(7);
        check_failed.record.check = Some(CheckRecord {
            before_output_tail: None,
            started_ms: None,
            duration_ms: None,
            command: "cargo test".into(),
            exit_code: Some(101),
            output_tail: "\x1b[31merror\x1b[0m: Vec<String> & ]]> mismatch\x07\nline two".into(),
            before: None,
        });
        check_failed.record.error = Some(TaskError { kind: FailureKind::Check, message: "check failed".into(), http_status: None });
        check_failed.record.result = Some("I changed <b>it</b> & ]]> done \x1b[1mbold\x1b[0m \x00".into());

        let mut auth = outcome("auth-error", Status::Error);
        auth.record.index = 2;
        auth.record.error = Some(TaskError {
            kind: ErrorKind::Auth.into(),
            message: "401 Unauthorized: key sk-secret-12345678 refused".into(),
            http_status: Some(401),
        });
        auth.record.result = None;

        let mut not_configured = outcome("no-key", Status::NotConfigured);
        not_configured.record.index = 3;
        not_configured.record.total_cost_usd = None;
        not_configured.record.error =
            Some(TaskError { kind: ErrorKind::NotConfigured.into(), message: "OPENAI_API_KEY is not set".into(), http_status: None });

        let mut skipped = outcome("skipped", Status::Skipped);
        skipped.record.index = 4;
        skipped.record.num_turns = 0;

        let mut other = outcome("other-manifest", Status::Passed);
        other.record.manifest = "more/extra.yaml".into();
        other.record.index = 5;
        other.record.flaky = true;
        other.record.attempts = 2;

        vec![passed, check_failed, auth, not_configured, skipped, other]
    }

    fn write(outcomes: Vec<TaskOutcome>) -> (tempfile::TempDir, PathBuf, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junit.xml");
        let redactor = Arc::new(Redactor::new(["sk-secret-12345678".to_string()]));
        let mut reporter = JunitReporter::new(&path, redactor);
        reporter
            .on_event(&event(
                None,
                WireEvent::RunStarted {
                    header: unstamped(),
                    version: "0.1.0".into(),
                    manifests: vec!["tasks.toml".into(), "more/extra.yaml".into()],
                    task_count: outcomes.len(),
                    jobs: 2,
                    warnings: Vec::new(),
                    config_files: None,
                    merged_from: None,
                },
            ))
            .unwrap();
        // Finished out of order, as parallel jobs do.
        for o in outcomes.into_iter().rev() {
            reporter.on_event(&finished(o)).unwrap();
        }
        reporter.on_event(&Event::run_finished(&totals(&[]))).unwrap();
        assert!(!path.exists(), "junit.xml is written by finish()");
        reporter.finish().unwrap();
        let xml = std::fs::read_to_string(&path).unwrap();
        (dir, path, xml)
    }

    #[test]
    fn report_validates_against_the_jenkins_schema() {
        let (_dir, path, _) = write(outcomes());
        assert_valid(JENKINS_XSD, &path);
    }

    #[test]
    fn report_validates_against_the_ant_schema_except_testcase_output() {
        let (dir, path, xml) = write(outcomes());
        let profile = dir.path().join("ant.xml");
        std::fs::write(&profile, ant_profile(&xml)).unwrap();
        assert!(profile.metadata().unwrap().len() < path.metadata().unwrap().len());
        assert_valid(WINDYROAD_XSD, &profile);

        // And the one thing removed is indeed what the Ant schema rejects.
        if let Some(complaints) = complaints(WINDYROAD_XSD, &path) {
            assert!(!complaints.is_empty());
            for line in complaints {
                assert!(line.contains("Element 'system-out'"), "unexpected complaint: {line}");
            }
        }
    }

    #[test]
    fn empty_run_and_ad_hoc_task_still_validate() {
        let (_dir, path, xml) = write(Vec::new());
        assert!(xml.contains("<testsuites>"));
        assert_valid(JENKINS_XSD, &path);
        assert_valid(WINDYROAD_XSD, &path);

        let mut ad_hoc = outcome("task-1", Status::Passed);
        ad_hoc.record.manifest = String::new();
        let (_dir, path, xml) = write(vec![ad_hoc]);
        assert!(xml.contains(r#"<testsuite name="dracode""#), "{xml}");
        assert!(xml.contains(r#"classname="dracode""#), "{xml}");
        assert_valid(JENKINS_XSD, &path);
    }

    #[test]
    fn statuses_map_to_junit_elements() {
        let (_dir, _, xml) = write(outcomes());
        // A case's text runs to the next case or the end of its suite.
        let case = |name: &str| {
            let start = xml.find(&format!(r#"<testcase name="{name}""#)).unwrap();
            let rest = &xml[start + 1..];
            let end = [rest.find("<testcase"), rest.find("</testsuite>")].into_iter().flatten().min().unwrap();
            xml[start..start + 1 + end].to_string()
        };
        let passed = case("passes");
        assert!(["<failure", "<error", "<skipped"].iter().all(|t| !passed.contains(t)), "{passed}");
        let failed = case("check-fails");
        // The one-line reason names the check output's telling line.
        let message = r#"<failure message="failed: check failed: error: Vec&lt;String&gt; &amp; ]]&gt; mismatch" type="check">"#;
        assert!(failed.contains(message), "{failed}");
        assert!(failed.contains("exit code: 101"), "{failed}");
        let auth = case("auth-error");
        assert!(auth.contains(r#"<error message="error: 401 Unauthorized: key [REDACTED] refused" type="auth">"#), "{auth}");
        assert!(auth.contains("(HTTP 401)"), "{auth}");
        assert!(!xml.contains("sk-secret"), "secrets are masked");
        assert!(case("no-key").contains(r#"<error message="OPENAI_API_KEY is not set" type="not_configured""#), "the type once");
        assert!(case("skipped").contains(r#"<skipped message="skipped"/>"#), "{}", case("skipped"));
    }

    #[test]
    fn suites_follow_manifests_and_cases_follow_manifest_order() {
        let (_dir, _, xml) = write(outcomes());
        let suite_a = xml.find(r#"<testsuite name="tasks.toml" tests="5" skipped="1" errors="2" failures="1""#);
        let suite_b = xml.find(r#"<testsuite name="more/extra.yaml" tests="1""#);
        assert!(suite_a.unwrap() < suite_b.unwrap(), "{xml}");
        let order: Vec<usize> = ["passes", "check-fails", "auth-error", "no-key", "skipped"]
            .iter()
            .map(|n| xml.find(&format!(r#"<testcase name="{n}" classname="tasks" time="#)).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{xml}");
        assert!(xml.contains(r#"<property name="passes.total_tokens" value="1234"/>"#));
        assert!(xml.contains(r#"<property name="passes.cost_usd" value="0.0123"/>"#));
        assert!(xml.contains(r#"<property name="passes.provider" value="openai"/>"#));
        assert!(xml.contains(r#"<property name="other-manifest.flaky" value="true"/>"#));
        assert!(xml.contains(r#"<property name="check-fails.file" value="tasks.toml"/>"#), "{xml}");
        assert!(xml.contains(r#"<property name="check-fails.line" value="7"/>"#), "{xml}");
        assert!(!xml.contains("passes.line"), "no line where the manifest gave none");
        assert!(!xml.contains("no-key.cost_usd"), "an unknown price is left out, not guessed");
        assert!(xml.contains(r#"time="2.100""#));
    }

    #[test]
    fn output_with_markup_and_control_characters_is_escaped() {
        let (_dir, _, xml) = write(outcomes());
        assert!(xml.contains("I changed &lt;b&gt;it&lt;/b&gt; &amp; ]]&gt; done bold"), "{xml}");
        assert!(xml.contains("error: Vec&lt;String&gt; &amp; ]]&gt; mismatch"), "{xml}");
        assert!(!xml.contains('\x1b') && !xml.contains('\x07') && !xml.contains('\x00'));
    }

    #[test]
    fn no_message_repeats_its_type() {
        assert_eq!(without_type("not_configured: OPENAI_API_KEY is not set", "not_configured"), "OPENAI_API_KEY is not set");
        assert_eq!(without_type("failed: check failed", "check"), "failed: check failed");
        assert_eq!(without_type("timeout", "timeout"), "timeout");
        let (_dir, _, xml) = write(outcomes());
        for kind in ["not_configured", "auth", "check", "skipped"] {
            assert!(!xml.contains(&format!(r#"message="{kind}: "#)), "{kind} repeated:\n{xml}");
        }
    }

    /// A pass after an infrastructure error and a failed check, and a failure after one failed
    /// check: the earlier attempts as nextest and Surefire write them.
    fn with_earlier_attempts() -> Vec<TaskOutcome> {
        use dracode_results::records::WireAttempt;
        let check = |message: &str| WireAttempt {
            status: Status::Failed,
            error: Some(TaskError { kind: FailureKind::Check, message: message.into(), http_status: None }),
            duration_ms: 1000,
        };
        let reset = WireAttempt {
            status: Status::Error,
            error: Some(TaskError { kind: ErrorKind::Network.into(), message: "connection reset".into(), http_status: Some(502) }),
            duration_ms: 1000,
        };
        let mut flaky = outcome("flaky", Status::Passed);
        flaky.record.flaky = true;
        flaky.record.prior_attempts = vec![reset, check("check `make` exited with 2:\tcol\t2")];
        let mut failed = outcome("rerun", Status::Failed);
        failed.record.index = 1;
        failed.record.error = Some(TaskError { kind: FailureKind::Check, message: "check failed".into(), http_status: None });
        failed.record.prior_attempts = vec![check("check `make` exited with 1")];
        // Failed, then errored: Surefire wants the `rerunFailure` before the `error`.
        let mut broke = outcome("broke", Status::Error);
        broke.record.index = 2;
        broke.record.error =
            Some(TaskError { kind: ErrorKind::Network.into(), message: "connection reset".into(), http_status: Some(502) });
        broke.record.prior_attempts = vec![check("check `make` exited with 1")];
        let mut other = outcome("elsewhere", Status::Passed);
        other.record.manifest = "more/extra.yaml".into();
        other.record.index = 3;
        vec![flaky, failed, broke, other]
    }

    #[test]
    fn every_earlier_attempt_has_a_stack_trace_and_each_suite_is_valid_for_surefire() {
        let (_dir, path, xml) = write(with_earlier_attempts());
        let flaky = r#"<flakyFailure message="failed: check `make` exited with 2:&#9;col&#9;2" type="check">"#;
        assert!(xml.contains(flaky), "{xml}");
        assert!(xml.contains("<stackTrace>failed: check `make` exited with 2:&#9;col&#9;2</stackTrace>"), "{xml}");
        assert!(xml.contains("<stackTrace>error: connection reset (HTTP 502)</stackTrace>"), "{xml}");
        assert!(xml.find("<flakyFailure").unwrap() < xml.find("<flakyError").unwrap(), "failures before errors: {xml}");
        assert!(xml.contains("<stackTrace>failed: check `make` exited with 1</stackTrace>"), "{xml}");
        assert_eq!(xml.matches("<stackTrace>").count(), 4, "{xml}");
        let broke = &xml[xml.find(r#"<testcase name="broke""#).unwrap()..];
        assert!(broke.find("<rerunFailure").unwrap() < broke.find("<error").unwrap(), "the earlier failure first: {broke}");
        assert_valid(JENKINS_XSD, &path);
        let profile = crate::report::test_support::xmllint::assert_surefire_valid(&path);
        assert_eq!(profile, 2, "one document per suite");
        // Unprofiled, Surefire's schema rejects only what the Ant schema requires.
        let suite_name = regex::Regex::new(r#"<testsuite name="([^"]*)""#).unwrap();
        for suite in crate::report::test_support::xmllint::surefire_suites(&path) {
            let whole = suite.with_extension("whole.xml");
            let text = std::fs::read_to_string(&suite).unwrap();
            let name = suite_name.captures(&text).unwrap()[1].to_string();
            let start = xml.find(&format!(r#"<testsuite name="{name}""#)).unwrap();
            let end = start + xml[start..].find("</testsuite>").unwrap() + "</testsuite>".len();
            std::fs::write(&whole, &xml[start..end]).unwrap();
            for line in complaints("surefire-test-report-2.22.3.xsd", &whole).unwrap_or_default() {
                let ant = ["'package'", "'id'", "'hostname'", "'timestamp'", "Element 'system-out'", "Element 'system-err'"];
                assert!(ant.iter().any(|a| line.contains(a)), "unexpected complaint: {line}");
            }
        }
    }

    #[test]
    fn tabs_survive_and_no_replacement_character_is_written() {
        let mut o = outcome("tabs", Status::Failed);
        o.record.error = Some(TaskError { kind: FailureKind::Check, message: "check failed:\tcolumns".into(), http_status: None });
        o.record.check = Some(CheckRecord {
            before_output_tail: None,
            started_ms: None,
            duration_ms: None,
            command: "sh t.sh".into(),
            exit_code: Some(1),
            output_tail: "want\tgot\n1\t2\nbad bytes: \u{FFFD}\u{FFFD} end \u{FDD0}\n".into(),
            before: None,
        });
        o.record.result = Some("done\twell \u{FFFD}".into());
        let (_dir, path, xml) = write(vec![o]);
        assert!(xml.contains(r#"message="failed: check failed:&#9;columns""#), "a tab in an attribute: {xml}");
        assert!(xml.contains("want&#9;got\n1&#9;2\nbad bytes: ?? end ?\n"), "{xml}");
        assert!(xml.contains("<system-out>done&#9;well ?</system-out>"), "{xml}");
        assert!(!xml.contains('\u{FFFD}') && !xml.contains('\u{FDD0}'), "{xml}");
        assert_valid(JENKINS_XSD, &path);
    }

    #[test]
    fn a_property_name_is_used_once_in_the_file() {
        let (_dir, _, xml) = write(outcomes());
        let names: Vec<&str> =
            xml.match_indices(r#"<property name=""#).map(|(i, m)| xml[i + m.len()..].split('"').next().unwrap()).collect();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(names.len(), unique.len(), "{xml}");
        assert_eq!(xml.matches(r#"<property name="manifest" value="tasks.toml"/>"#).count(), 1, "{xml}");
        assert_eq!(xml.matches(r#"<property name="dracode_version""#).count(), 1, "{xml}");
        assert!(xml.find(r#"name="dracode_version""#).unwrap() < xml.find(r#"<testsuite name="more/extra.yaml""#).unwrap());
    }

    #[test]
    fn the_file_is_replaced_whole() {
        let (dir, path, _) = write(outcomes());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, [path.file_name().unwrap().to_owned()], "no temporary file left");
    }
}
