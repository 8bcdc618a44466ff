//! Artifacts, each an independent [`crate::events::Reporter`] of the event stream.
//!
//! One file per output: [`jsonl`] (`results.jsonl`: each event's record, redacted),
//! [`junit`] (`junit.xml`), [`summary`] (`summary.md`), [`transcript`] (`transcripts/`),
//! [`diff`] (`diffs/`) and [`progress`] (human lines for CI logs). [`artifact_reporters`] builds
//! the set that writes into `--out`; the caller adds progress and a `--jsonl -` stream.
//! [`out_dir`] keeps `--out` dracode's own (ignored by git, one run at a time).
//! [`merge`] joins the outputs of sharded runs (or a run and its rerun) into one. [`github`] speaks to GitHub Actions:
//! annotations and step outputs.

pub mod diff;
pub mod github;
pub mod jsonl;
pub mod junit;
pub mod live;
pub mod merge;
#[cfg(feature = "otel")]
pub mod otel;
pub mod out_dir;
pub mod outputs;
pub mod page;
pub mod progress;
pub mod read_back;
pub mod slow;
pub mod summary;
pub mod transcript;

use crate::disk::Reserve;
use crate::events::Reporter;
use dracode_secrets::Redactor;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use diff::DiffReporter;
pub use jsonl::JsonlReporter;
pub use junit::JunitReporter;
pub use progress::{ProgressReporter, Verbosity};
pub use summary::SummaryReporter;
pub use transcript::TranscriptReporter;

/// The reporters that write into `out_dir` (prepared by [`out_dir::prepare`]): `results.jsonl`, `junit.xml`,
/// `summary.md` (also appended to `step_summary`, `$GITHUB_STEP_SUMMARY`), `transcripts/`,
/// `diffs/` and `outputs/`, each writing into `reserve`'s room when the disk is full; and the
/// one that takes the reserve back after a task finished ([`Reserve::take_back`]).
/// `results.jsonl` is truncated now, so a reader never mixes two runs. The lines are the
/// events' records as the bus stamped them (run id, shard, `seq`).
pub fn artifact_reporters(
    out_dir: &Path,
    redactor: Arc<Redactor>,
    step_summary: Option<PathBuf>,
    reserve: &Arc<Reserve>,
) -> std::io::Result<Vec<Box<dyn Reporter>>> {
    std::fs::create_dir_all(out_dir)?;
    let results = JsonlReporter::create(&out_dir.join("results.jsonl"), redactor.clone())?;
    let summary = SummaryReporter::new(out_dir.join("summary.md"), redactor.clone()).with_step_summary(step_summary);
    Ok(vec![
        Box::new(results.with_reserve(reserve.clone())),
        Box::new(JunitReporter::new(out_dir.join("junit.xml"), redactor.clone()).with_reserve(reserve.clone())),
        Box::new(summary.with_reserve(reserve.clone())),
        Box::new(TranscriptReporter::new(out_dir, redactor.clone()).with_reserve(reserve.clone())),
        Box::new(DiffReporter::new(out_dir).with_redactor(redactor.clone()).with_reserve(reserve.clone())),
        Box::new(outputs::OutputsReporter::new(out_dir, redactor).with_reserve(reserve.clone())),
        Box::new(TakeBack(reserve.clone())),
    ])
}

/// Takes the output folder's reserve back after each task (last of the reporters: once that
/// task's files are written), should a full disk have made the run give it up: the finished
/// task's folders are removed by then, so the room may be there again.
struct TakeBack(Arc<Reserve>);

impl Reporter for TakeBack {
    fn on_event(&mut self, event: &crate::events::Event) -> std::io::Result<()> {
        if matches!(event.record, crate::events::WireEvent::TaskFinished { .. }) {
            self.0.take_back();
        }
        Ok(())
    }
}

/// The mode of every artifact file: readable by all (as a file made by `File::create` under the
/// usual umask 022), written by its owner.
pub const ARTIFACT_MODE: u32 = 0o644;

/// Writes `contents` to `path` through a temporary file in the same folder and a rename, so a
/// reader (or a crash) never sees half a file. A failure names `path` (not the temporary file).
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let write = || -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        // A temporary file is private (0600); an artifact is as readable as results.jsonl.
        tmp.as_file().set_permissions(std::os::unix::fs::PermissionsExt::from_mode(ARTIFACT_MODE))?;
        tmp.write_all(contents)?;
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    };
    write().map_err(|e| cannot_write(path, &e))
}

/// `error` as "cannot write PATH: the OS error", for the artifact at `path`.
pub(crate) fn cannot_write(path: &Path, error: &std::io::Error) -> std::io::Error {
    std::io::Error::new(error.kind(), format!("cannot write {}: {}", path.display(), os_reason(error)))
}

/// The OS's words for `error` (`No space left on device (os error 28)`), without what a library
/// added (`tempfile` appends the name of a temporary file the user never sees).
pub(crate) fn os_reason(error: &std::io::Error) -> String {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if let Some(code) = e.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error) {
            return std::io::Error::from_raw_os_error(code).to_string();
        }
        cause = e.source().or_else(|| e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()).map(|inner| inner as _));
    }
    error.to_string()
}

/// `text` without escape sequences and control characters other than newline and tab, for
/// human-facing text: the secrets crate's, the very view its [`Redactor`] masks in.
pub(crate) use dracode_secrets::strip_control;

/// `text` as a human-facing artifact shows it: escape sequences and control characters
/// stripped first, then secrets masked — in that order, so a secret with an escape sequence
/// inside cannot come out whole once the escape is gone.
pub(crate) fn clean_text(redactor: &Redactor, text: &str) -> String {
    clean_text_keeping(redactor, text, &[])
}

/// [`clean_text`], but where a secret lies within one of `keep` (a task id: the user's own
/// words, never rewritten).
pub(crate) fn clean_text_keeping(redactor: &Redactor, text: &str, keep: &[&str]) -> String {
    let stripped = strip_control(text);
    let keep: Vec<String> = keep.iter().map(|k| strip_control(k)).collect();
    let keep: Vec<&str> = keep.iter().map(String::as_str).collect();
    redactor.redact_keeping(&stripped, &keep).into_owned()
}

/// `n` with `,` between thousands: `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A short human duration: `0.4s`, `12.3s`, `2m05s`, `1h02m`.
fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 60 {
        format!("{:.1}s", d.as_secs_f64())
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, secs % 3600 / 60)
    }
}

/// A cost in USD as shown to humans: `$0.0123`, `$0` for nothing, `<$0.0001` for a trace.
pub(crate) fn human_cost(usd: f64) -> String {
    if usd == 0.0 {
        "$0".to_string()
    } else if usd < 0.000_05 {
        "<$0.0001".to_string()
    } else {
        format!("${usd:.4}")
    }
}

/// The one line shown for a failed command's `output` (a check's, the batch's setup's): its
/// telling line (the one `telling_line` picks), else its last line that is neither blank nor a
/// tool's notice (pip's `[notice] To update, run: …`); `None` when there is no such line.
pub fn failure_line(output: &str) -> Option<String> {
    let text = strip_control(output);
    let last = || text.lines().rev().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("[notice]")).map(str::to_string);
    telling_line(&text).or_else(last)
}

/// The reason a task did not pass, in one line: the error's message (a failed check's with the
/// telling line of its output), else the check's exit code and telling (or last) output line.
pub(crate) fn short_reason(record: &dracode_results::records::WireOutcome) -> String {
    let check_failed = |e: &crate::events::TaskError| e.kind == crate::events::FailureKind::Check;
    if let Some(error) = &record.error {
        let first = error.message.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        let telling = record.check.as_ref().filter(|_| check_failed(error)).and_then(|c| telling_line(&strip_control(&c.output_tail)));
        return match telling {
            Some(line) => format!("{first}: {line}"),
            None => first.to_string(),
        };
    }
    if let Some(check) = &record.check {
        let code = match check.exit_code {
            Some(code) => format!("exited with {code}"),
            None => "did not exit".to_string(),
        };
        return match failure_line(&check.output_tail) {
            Some(line) => format!("check `{}` {code}: {line}", check.command),
            None => format!("check `{}` {code}", check.command),
        };
    }
    String::new()
}

/// Lines of a check's output that only say it failed (lowercase prefixes): the tools' closing
/// lines, which name no test, file or assertion.
const NOISE: [&str; 20] = [
    "test result:",
    "[notice]",
    "error: subprocess-exited-with-error",
    "npm err!",
    "npm error",
    "error: test failed",
    "error: could not compile",
    "error: process didn't exit successfully",
    "error: aborting due to",
    "error: recipe for target",
    "error command failed",
    "command failed with exit code",
    "make: ***",
    "make[",
    "exit status",
    "exited with",
    "note:",
    "failures:",
    "warning: build failed",
    "for more information about this error",
];

/// How much `line` says about a failure: 0 nothing (blank, a tool's closing line, a ruler), 1 a
/// mention of errors or failures, 2 a test runner's or compiler's own failure line (`error[E…]`,
/// `panicked at`, an assertion, `✘`, `not ok`), 3 pytest's short summary (`FAILED test - why`).
fn failure_weight(line: &str) -> u8 {
    let trimmed = line.trim();
    let lower = trimmed.to_lowercase();
    let ruler = trimmed.chars().take(3).collect::<String>();
    // pip's frame around a build backend's own error: `× Getting requirements to build wheel
    // did not run successfully.`
    let frame = lower.ends_with("did not run successfully.");
    if trimmed.is_empty() || frame || NOISE.iter().any(|n| lower.starts_with(n)) || ["===", "!!!", "___", "---"].contains(&ruler.as_str()) {
        return 0;
    }
    if trimmed.starts_with("FAILED ") || trimmed.starts_with("ERROR ") {
        return 3;
    }
    const OWN: [&str; 11] = ["error[", "error:", "ERROR:", "E   ", "✘", "✖", "×", "not ok ", "panicked at", "assert", "Error:"];
    if OWN.iter().any(|p| trimmed.starts_with(p))
        || ["panicked at", "Assertion", "assertion", "Error: "].iter().any(|p| trimmed.contains(p))
    {
        return 2;
    }
    u8::from(["error", "fail", "exception", "panic"].iter().any(|w| lower.contains(w)))
}

/// The line of a check's output that says most about why it failed — the first of the highest
/// [`failure_weight`] —, trimmed; Rust's `panicked at …:` with the message on the next line.
/// `None` when no line says more than that something failed.
fn telling_line(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let (mut best, mut at) = (0, None);
    for (i, line) in lines.iter().enumerate() {
        let weight = failure_weight(line);
        if weight > best {
            (best, at) = (weight, Some(i));
        }
    }
    let at = at?;
    let line = lines[at].trim();
    let next = lines[at + 1..].iter().map(|l| l.trim()).find(|l| !l.is_empty());
    match next {
        Some(next) if line.contains("panicked at") && line.ends_with(':') => Some(format!("{line} {next}")),
        _ => Some(line.to_string()),
    }
}

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_telling_line_beats_the_tools_closing_lines() {
        let cases = [
            (
                "   Compiling x\nerror[E0425]: cannot find value `y`\n  --> src/lib.rs:1:1\nerror: could not compile `x`\n",
                Some("error[E0425]: cannot find value `y`"),
            ),
            (
                "thread 't' panicked at src/lib.rs:4:5:\nboom\n\ntest result: FAILED. 0 passed; 1 failed\n",
                Some("thread 't' panicked at src/lib.rs:4:5: boom"),
            ),
            (
                "E       assert 1 == 2\nFAILED t.py::test_a - assert 1 == 2\n===== 1 failed in 0.1s =====\n",
                Some("FAILED t.py::test_a - assert 1 == 2"),
            ),
            ("  ✘ [fail]: adds\n  1 test failed\nnpm ERR! code ELIFECYCLE\nnpm ERR! Exit status 1\n", Some("✘ [fail]: adds")),
            ("test result: FAILED\nmake: *** [test] Error 1\n", None),
            // pip: the build backend's exception, not pip's frame around it nor its notice.
            (
                "  error: subprocess-exited-with-error\n  \n  × Getting requirements to build editable did not run successfully.\n  │ exit code: 1\n  ╰─> [54 lines of output]\n      Traceback (most recent call last):\n        File \"x.py\", line 1\n      LookupError: setuptools-scm was unable to detect version for ..\n      [end of output]\n  note: This error originates from a subprocess, and is likely not a problem with pip.\nerror: subprocess-exited-with-error\n\n[notice] A new release of pip is available: 23.2.1 -> 26.3\n[notice] To update, run: pip install --upgrade pip\n",
                Some("LookupError: setuptools-scm was unable to detect version for .."),
            ),
            (
                "Collecting nosuchpkg\nERROR: Could not find a version that satisfies the requirement nosuchpkg (from versions: none)\nERROR: No matching distribution found for nosuchpkg\n\n[notice] To update, run: pip install --upgrade pip\n",
                Some("ERROR: Could not find a version that satisfies the requirement nosuchpkg (from versions: none)"),
            ),
            ("", None),
        ];
        for (output, want) in cases {
            assert_eq!(telling_line(output).as_deref(), want, "{output}");
        }
    }

    #[test]
    fn the_failure_line_is_the_telling_line_else_the_last_that_is_not_a_notice() {
        let cases = [
            ("error[E0425]: cannot find value `y`\nerror: could not compile `x`\n", Some("error[E0425]: cannot find value `y`")),
            ("Resolving deps\nsomething went sideways\n\n[notice] A new release of pip is available\n", Some("something went sideways")),
            ("\x1b[31mlast words\x1b[0m\n", Some("last words")),
            ("[notice] To update, run: pip install --upgrade pip\n", None),
            ("", None),
        ];
        for (output, want) in cases {
            assert_eq!(failure_line(output).as_deref(), want, "{output}");
        }
    }

    #[test]
    fn summary_and_junit_strip_links_then_mask_a_secret_cut_by_an_escape() {
        use crate::events::{Event, Status, TaskError};
        use crate::report::test_support::{finished, outcome, totals};
        let dir = tempfile::tempdir().unwrap();
        let redactor = Arc::new(Redactor::new(["sk-live-98765".to_string()]));
        let message = "fixed, see \x1b]8;;https://example.com/pr/1\x1b\\PR 1\x1b]8;;\x1b\\ key sk-live\x1b[0m-98765";
        let mut o = outcome("linked", Status::Failed);
        o.record.result = Some(message.to_string());
        o.record.error = Some(TaskError { kind: crate::events::FailureKind::Agent, message: message.to_string(), http_status: None });
        let mut reporters: Vec<Box<dyn Reporter>> = vec![
            Box::new(JunitReporter::new(dir.path().join("junit.xml"), redactor.clone())),
            Box::new(SummaryReporter::new(dir.path().join("summary.md"), redactor)),
        ];
        for reporter in &mut reporters {
            reporter.on_event(&finished(o.clone())).unwrap();
            reporter.on_event(&Event::run_finished(&totals(&[(Status::Failed, 1)]))).unwrap();
            reporter.finish().unwrap();
        }
        for file in ["junit.xml", "summary.md"] {
            let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
            assert!(text.contains("PR 1"), "{file}: {text}");
            assert!(text.contains("REDACTED"), "{file}: {text}");
            for leak in ["\x1b", "8;;", "example.com", "98765", "sk-live"] {
                assert!(!text.contains(leak), "{file} contains {leak:?}: {text}");
            }
        }
    }

    #[test]
    fn numbers_and_durations_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1234), "1,234");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(human_duration(Duration::from_millis(2100)), "2.1s");
        assert_eq!(human_duration(Duration::from_secs(125)), "2m05s");
        assert_eq!(human_duration(Duration::from_secs(3720)), "1h02m");
        assert_eq!(human_cost(0.01234), "$0.0123");
        assert_eq!(human_cost(0.000_754_049_999_999_999_9), "$0.0008");
        assert_eq!((human_cost(0.0), human_cost(0.000_001)), ("$0".to_string(), "<$0.0001".to_string()));
    }

    #[test]
    fn artifact_reporters_create_the_out_dir_and_results_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("nested/out");
        let reporters = artifact_reporters(&out, Arc::new(Redactor::default()), None, &Reserve::none()).unwrap();
        assert_eq!(reporters.len(), 7);
        assert!(out.join("results.jsonl").is_file());
    }
}
