//! Artifacts, each an independent [`crate::events::Reporter`] of the event stream.
//!
//! One file per output: [`jsonl`] (`results.jsonl`, mapped through the wire types of [`wire`]),
//! [`junit`] (`junit.xml`), [`summary`] (`summary.md`), [`transcript`] (`transcripts/`),
//! [`diff`] (`diffs/`) and [`progress`] (human lines for CI logs). [`artifact_reporters`] builds
//! the set that writes into `--out`; the caller adds progress and a `--jsonl -` stream.
//! [`merge`] joins the outputs of sharded runs into one.

pub mod diff;
pub mod jsonl;
pub mod junit;
pub mod live;
pub mod merge;
pub mod progress;
pub mod summary;
pub mod transcript;
pub mod wire;

use crate::events::Reporter;
use crate::secrets::Redactor;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use diff::DiffReporter;
pub use jsonl::JsonlReporter;
pub use junit::JunitReporter;
pub use progress::{ProgressReporter, Verbosity};
pub use summary::SummaryReporter;
pub use transcript::TranscriptReporter;

pub use crate::fsname::file_stem;

/// The reporters that write into `out_dir` (created if missing): `results.jsonl`, `junit.xml`,
/// `summary.md`, `transcripts/` and `diffs/`. `results.jsonl` is truncated now, so a reader never
/// mixes two runs.
pub fn artifact_reporters(
    out_dir: &Path,
    run_id: &str,
    shard: Option<&str>,
    redactor: Arc<Redactor>,
) -> std::io::Result<Vec<Box<dyn Reporter>>> {
    std::fs::create_dir_all(out_dir)?;
    let results = std::fs::File::create(out_dir.join("results.jsonl"))?;
    Ok(vec![
        Box::new(JsonlReporter::new(Box::new(results), run_id, shard, redactor.clone())),
        Box::new(JunitReporter::new(out_dir.join("junit.xml"), redactor.clone())),
        Box::new(SummaryReporter::new(out_dir.join("summary.md"), redactor.clone())),
        Box::new(TranscriptReporter::new(out_dir, redactor)),
        Box::new(DiffReporter::new(out_dir)),
    ])
}

/// Writes `contents` to `path` through a temporary file in the same folder and a rename, so a
/// reader (or a crash) never sees half a file.
fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// `text` without ANSI escape sequences and control characters other than newline and tab, for
/// human-facing text (check output is often coloured).
fn strip_control(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI (`ESC [ params final`) is what compilers and test runners emit; any other
            // escape is dropped with the one character that follows it.
            if chars.next_if_eq(&'[').is_some() {
                for p in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&p) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        } else if c == '\n' || c == '\t' || !c.is_control() {
            out.push(c);
        }
    }
    out
}

/// `n` with `,` between thousands: `1,234,567`.
fn thousands(n: u64) -> String {
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

/// A cost in USD as shown to humans: `$0.0123`.
fn human_cost(usd: f64) -> String {
    format!("${usd:.4}")
}

/// The last line of `text` that is not blank, trimmed; what a one-line reason shows.
fn last_line(text: &str) -> &str {
    text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
}

/// The reason a task did not pass, in one line: the error's message, else the check's exit
/// code and last output line.
fn short_reason(outcome: &crate::events::TaskOutcome) -> String {
    if let Some(error) = &outcome.error {
        let first = error.message.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
        return first.to_string();
    }
    if let Some(check) = &outcome.check {
        let code = match check.exit_code {
            Some(code) => format!("exited with {code}"),
            None => "did not exit".to_string(),
        };
        let tail = strip_control(&check.output_tail);
        let line = last_line(&tail);
        return if line.is_empty() {
            format!("check `{}` {code}", check.command)
        } else {
            format!("check `{}` {code}: {line}", check.command)
        };
    }
    String::new()
}

#[cfg(test)]
pub(crate) mod test_support;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_control_drops_ansi_and_control_characters() {
        assert_eq!(strip_control("\x1b[1;31merror\x1b[0m: x\x07\r\n\tok"), "error: x\n\tok");
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
    }

    #[test]
    fn artifact_reporters_create_the_out_dir_and_results_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("nested/out");
        let reporters = artifact_reporters(&out, "run-1", None, Arc::new(Redactor::default())).unwrap();
        assert_eq!(reporters.len(), 5);
        assert!(out.join("results.jsonl").is_file());
    }
}
