//! `results.jsonl` and `--jsonl`: every event's record ([`dracode_results::records`]) as one line,
//! as the bus stamped it and redacted, written and flushed as it happens so a tailing reader sees
//! it at once and a crash loses nothing.

use crate::disk::Reserve;
use crate::events::{Event, Reporter, RunEnd, WireEvent};
use dracode_results::records::{TOOL_OUTPUT_LIMIT, cap_strings, cut_at};
use dracode_secrets::Redactor;
use std::borrow::Cow;
use std::io::Write;
use std::sync::Arc;

/// Writes each event as one redacted JSON line: its record as the bus stamped it (`seq`, `ts`,
/// `run_id`, `shard`), so every JSONL reporter of a run writes the same lines.
///
/// When a line cannot be written (a full disk), the file is cut back to the last whole line; a
/// file with the output folder's [`Reserve`] gets the line again into the reserve's room. When
/// that fails too, nothing more is written: the record then ends early — with no
/// `run.finished`, which readers take as an unfinished run — rather than in half a line or with
/// a gap.
pub struct JsonlReporter {
    writer: Box<dyn Write + Send>,
    redactor: Arc<Redactor>,
    /// What failures call the destination (`dracode-out/results.jsonl`, `stdout`).
    name: String,
    /// The file again, to cut a half-written line off; `None` for a stream.
    file: Option<std::fs::File>,
    /// Bytes of whole lines written so far.
    written: u64,
    /// A line could not be written: write no more.
    broken: bool,
    /// Room held back for a full disk (none for a stream).
    reserve: Arc<Reserve>,
}

impl JsonlReporter {
    /// A reporter writing to `writer` (a file, or stdout for `--jsonl -`).
    pub fn new(writer: Box<dyn Write + Send>, redactor: Arc<Redactor>) -> Self {
        JsonlReporter {
            writer,
            redactor,
            name: "the event stream".to_string(),
            file: None,
            written: 0,
            broken: false,
            reserve: Reserve::none(),
        }
    }

    /// A reporter writing to a new (or truncated) file at `path`, which failures name.
    pub fn create(path: &std::path::Path, redactor: Arc<Redactor>) -> std::io::Result<Self> {
        let file = std::fs::File::create(path).map_err(|e| super::cannot_write(path, &e))?;
        let again = file.try_clone().map_err(|e| super::cannot_write(path, &e))?;
        Ok(JsonlReporter { file: Some(again), ..Self::new(Box::new(file), redactor).named(&path.display().to_string()) })
    }

    /// This reporter, with failures naming its destination `name`.
    pub fn named(self, name: &str) -> Self {
        JsonlReporter { name: name.to_string(), ..self }
    }

    /// This reporter, a line that finds the disk full written again into `reserve`'s room (a
    /// file only: a stream cannot be cut back).
    pub fn with_reserve(self, reserve: Arc<Reserve>) -> Self {
        JsonlReporter { reserve, ..self }
    }

    /// Writes one whole line, the event `seq` — after a full disk, once more into the reserve's
    /// room — or cuts the file back to the lines before it.
    fn write_line(&mut self, line: &str, seq: u64) -> std::io::Result<()> {
        let reserve = if self.file.is_some() { self.reserve.clone() } else { Reserve::none() };
        let result = reserve.write(|| self.try_line(line));
        match result {
            Ok(()) => {
                self.written += line.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.broken = true;
                let message = format!(
                    "cannot write {}: {}; it ends before event {seq} and records nothing after it",
                    self.name,
                    super::os_reason(&e),
                );
                Err(std::io::Error::new(e.kind(), message))
            }
        }
    }

    /// Writes `line` after the whole lines; on failure cuts off what part of it reached the
    /// file and goes back to the end of the last whole line, so a retry (or nothing) follows it.
    fn try_line(&mut self, line: &str) -> std::io::Result<()> {
        let result = self.writer.write_all(line.as_bytes()).and_then(|()| self.writer.flush());
        if result.is_err()
            && let Some(file) = &mut self.file
        {
            // The clone shares the writer's offset: seeking it moves the writer back too.
            let _ = file.set_len(self.written);
            let _ = std::io::Seek::seek(file, std::io::SeekFrom::Start(self.written));
        }
        result
    }

    fn line(&self, event: &Event) -> std::io::Result<String> {
        let redacted = self.tool_output_redacted(event).or_else(|| self.tool_input_redacted(event));
        let record = redacted.map_or(Cow::Borrowed(&event.record), Cow::Owned);
        let mut value = serde_json::to_value(&*record)?;
        // Redacting string values rather than the serialised line keeps the line valid JSON
        // and also catches secrets containing characters JSON escapes.
        redact_event(&mut value, &self.redactor);
        let mut line = serde_json::to_string(&value)?;
        line.push('\n');
        Ok(line)
    }

    /// A `tool.completed` record whose output holds a secret, with the whole output (the
    /// event's attachment) redacted before it is cut to 2 KB, so the cut cannot split a secret
    /// and leave its first half unmasked; `None` for every other record (and for a record
    /// without its whole output, whose strings are masked as any).
    fn tool_output_redacted(&self, event: &Event) -> Option<WireEvent> {
        let whole = event.tool_output()?;
        let WireEvent::ToolCompleted { output_bytes, .. } = &event.record else { return None };
        if whole.len() != *output_bytes {
            return None;
        }
        let Cow::Owned(redacted) = self.redactor.redact(whole) else { return None };
        let mut record = event.record.clone();
        if let WireEvent::ToolCompleted { output, output_bytes, .. } = &mut record {
            *output = cut_at(&redacted, TOOL_OUTPUT_LIMIT).to_string();
            *output_bytes = redacted.len();
        }
        Some(record)
    }
    /// A `tool.started` record whose arguments were cut, made again from the whole arguments
    /// (the event's attachment) with their secrets masked before the cut, as for an output;
    /// `None` for every other record.
    fn tool_input_redacted(&self, event: &Event) -> Option<WireEvent> {
        let WireEvent::ToolStarted { input_bytes, .. } = &event.record else { return None };
        if *input_bytes <= TOOL_OUTPUT_LIMIT {
            return None;
        }
        let mut whole = event.tool_input()?.clone();
        redact_strings(&mut whole, &self.redactor);
        let mut record = event.record.clone();
        if let WireEvent::ToolStarted { input, input_bytes, .. } = &mut record {
            *input_bytes = serde_json::to_string(&whole).map_or(0, |text| text.len());
            *input = cap_strings(&whole, TOOL_OUTPUT_LIMIT);
        }
        Some(record)
    }
}

/// The fields of an event (and of its `check` and `repeats`) that are the user's own words or
/// name what a task changed — ids, file names, paths, names from the config — and are never
/// rewritten: `--rerun-failed` must find the task, a path must lead to its file.
const EXACT_FIELDS: &[&str] = &[
    "task_id",
    "run_id",
    "shard",
    "manifests",
    "manifest",
    "manifest_name",
    "provider",
    "model",
    "workdir",
    "base_commit",
    "files_changed",
    "diff_path",
    "transcript_path",
    "branch",
    "protected",
    "carried_from",
    "cached_from",
    "regraded_from",
    "merged_from",
];

/// Replaces secrets in every string of an event's JSON `value` but its [`EXACT_FIELDS`] and its
/// check's `command`: what remains is free text (tool input and output, the agent's answer,
/// error messages, check output).
pub(crate) fn redact_event(value: &mut serde_json::Value, redactor: &Redactor) {
    redact_but(value, redactor, EXACT_FIELDS);
}

/// [`redact_strings`] on every field of the object `value` but those named in `exact`.
fn redact_but(value: &mut serde_json::Value, redactor: &Redactor, exact: &[&str]) {
    let serde_json::Value::Object(map) = value else { return redact_strings(value, redactor) };
    for (key, field) in map.iter_mut() {
        match (key.as_str(), field) {
            (key, _) if exact.contains(&key) => {}
            ("check", check) => redact_but(check, redactor, &["command"]),
            ("repeats", serde_json::Value::Array(repeats)) => repeats.iter_mut().for_each(|r| redact_but(r, redactor, EXACT_FIELDS)),
            (_, other) => redact_strings(other, redactor),
        }
    }
}

/// Replaces secrets in every string of `value`.
pub(crate) fn redact_strings(value: &mut serde_json::Value, redactor: &Redactor) {
    match value {
        serde_json::Value::String(s) => {
            if let Cow::Owned(r) = redactor.redact(s) {
                *s = r;
            }
        }
        serde_json::Value::Array(items) => {
            items.iter_mut().for_each(|v| redact_strings(v, redactor));
        }
        serde_json::Value::Object(map) => {
            map.values_mut().for_each(|v| redact_strings(v, redactor));
        }
        _ => {}
    }
}

impl Reporter for JsonlReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        if self.broken {
            return Ok(());
        }
        let line = self.line(event)?;
        self.write_line(&line, event.record.header().seq)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        if self.broken { Ok(()) } else { self.writer.flush() }
    }

    fn run_end(&self) -> RunEnd {
        RunEnd::Records
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::{event, sample_run, stamped, unstamped};
    use std::time::Duration;

    /// What the JSONL reporter writes is what is read back: for an outcome with every field
    /// set and for one at its defaults, the record read from `results.jsonl` (and the patch
    /// from `diffs/`) equals the one written (the transcripts stay files).
    #[test]
    fn task_finished_records_written_are_read_back_equal() {
        use crate::events::{RunTotals, Status, TaskOutcome};
        use crate::report::test_support::{every_field, finished, outcome};
        let dir = tempfile::tempdir().unwrap();
        let blank = {
            let mut o = TaskOutcome::new("blank", std::path::Path::new(""), 5, Status::Skipped, "", "");
            o.finish();
            o
        };
        let written = [every_field("full"), outcome("plain", Status::Passed), blank];
        let started = WireEvent::RunStarted {
            header: unstamped(),
            version: "0.1.0".into(),
            manifests: vec!["tasks.toml".into()],
            task_count: written.len(),
            jobs: 1,
            warnings: Vec::new(),
            config_files: None,
            merged_from: None,
        };
        let mut events = vec![event(None, started)];
        events.extend(written.iter().cloned().map(finished));
        events.push(event(None, Event::run_finished(&RunTotals::of(&written, Duration::from_secs(1)))));
        let events = stamped(events, "run-1", None);
        let reserve = Reserve::none();
        let mut reporters = crate::report::artifact_reporters(dir.path(), Arc::new(Redactor::default()), None, &reserve).unwrap();
        for reporter in &mut reporters {
            for e in &events {
                reporter.on_event(e).unwrap();
            }
            reporter.finish().unwrap();
        }
        let folder = dracode_results::output_folder::read(dir.path()).unwrap();
        let mut read: Vec<TaskOutcome> = folder.tasks.into_iter().map(TaskOutcome::from).collect();
        read.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        let mut expected: Vec<TaskOutcome> = written.to_vec();
        expected.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        for (got, want) in read.iter().zip(&expected) {
            assert_eq!(got.record, want.record, "{}", got.task_id);
            assert_eq!(got.attachments.diff, want.attachments.diff, "{}", got.task_id);
        }
        assert_eq!(read.len(), expected.len());
    }

    fn read_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn each_event_is_on_disk_before_the_next_and_seq_counts_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let file = std::fs::File::create(&path).unwrap();
        let mut reporter = JsonlReporter::new(Box::new(file), Arc::new(Redactor::default()));
        let events = stamped(sample_run(), "run-9", Some("1/2"));
        for (i, e) in events.iter().enumerate() {
            reporter.on_event(e).unwrap();
            // No finish(): a reader tailing the file must already see this line.
            let lines = read_lines(&path);
            assert_eq!(lines.len(), i + 1);
            let last = &lines[i];
            assert_eq!(last["seq"], i as u64 + 1);
            assert_eq!(last["run_id"], "run-9");
            assert_eq!(last["shard"], "1/2");
            assert_eq!(last["schema_version"], 1);
        }
        let types: Vec<String> = read_lines(&path).iter().map(|l| l["type"].as_str().unwrap().to_string()).collect();
        assert_eq!(
            types,
            [
                "run.started",
                "task.started",
                "turn.completed",
                "tool.started",
                "tool.completed",
                "retry",
                "context.compacted",
                "network.denied",
                "limit.warning",
                "agent.message",
                "task.finished",
                "run.finished"
            ]
        );
    }

    /// Writes `budget` bytes, then fails like a full disk (having written part of the buffer):
    /// for good, or (`recovers`) once, writing everything after.
    struct FillingUp {
        file: std::fs::File,
        budget: usize,
        recovers: bool,
        failed: bool,
    }

    impl Write for FillingUp {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.failed && self.recovers {
                return self.file.write(buf);
            }
            if self.budget == 0 {
                self.failed = true;
                return Err(std::io::Error::from_raw_os_error(28));
            }
            let n = buf.len().min(self.budget);
            self.budget -= n;
            self.file.write(&buf[..n])
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.file.flush()
        }
    }

    #[test]
    fn a_line_that_does_not_fit_is_cut_off_and_nothing_is_written_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut reporter = JsonlReporter::create(&path, Arc::new(Redactor::default())).unwrap();
        let events = stamped(sample_run(), "r", None);
        reporter.on_event(&events[0]).unwrap();
        let whole = std::fs::metadata(&path).unwrap().len();
        // The next line gets 10 bytes on disk, then the disk is full.
        let file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        reporter.writer = Box::new(FillingUp { file, budget: 10, recovers: false, failed: false });
        let err = reporter.on_event(&events[1]).unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with(&format!("cannot write {}: No space left on device", path.display())), "{message}");
        assert!(message.contains("ends before event 2"), "{message}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), whole, "the half line is cut off");
        // Space again: still nothing, so the record has no gap; it ends unfinished.
        reporter.writer = Box::new(std::fs::OpenOptions::new().append(true).open(&path).unwrap());
        for e in &events[2..] {
            reporter.on_event(e).unwrap();
        }
        reporter.finish().unwrap();
        let lines = read_lines(&path);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["type"], "run.started");
    }

    #[test]
    fn a_line_that_finds_the_disk_full_is_written_whole_into_the_reserves_room() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let reserve = Reserve::hold_bytes(dir.path(), 64 * 1024);
        let mut reporter = JsonlReporter::create(&path, Arc::new(Redactor::default())).unwrap().with_reserve(reserve.clone());
        let events = stamped(sample_run(), "r", None);
        reporter.on_event(&events[0]).unwrap();
        // The next line gets 10 bytes on disk, then the disk is full, once. The writer shares the
        // file's offset, as the file it replaces did: the retry must start where the line did.
        let file = reporter.file.as_ref().unwrap().try_clone().unwrap();
        reporter.writer = Box::new(FillingUp { file, budget: 10, recovers: true, failed: false });
        for e in &events[1..] {
            reporter.on_event(e).unwrap();
        }
        reporter.finish().unwrap();
        let lines = read_lines(&path);
        let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>(), "every line, whole, no gap");
        assert_eq!(lines.last().unwrap()["type"], "run.finished");
        assert_eq!(reserve.times_given_up(), 1);
        assert!(!dir.path().join(crate::disk::RESERVE_NAME).exists(), "its room went to the line");
    }

    /// A reporter writing `results.jsonl` in a new temporary folder, masking `secret`.
    fn masking(secret: &str) -> (tempfile::TempDir, JsonlReporter) {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("results.jsonl")).unwrap();
        let reporter = JsonlReporter::new(Box::new(file), Arc::new(Redactor::new([secret.to_string()])));
        (dir, reporter)
    }

    #[test]
    fn secrets_are_masked_even_where_the_output_is_cut() {
        let secret = "sk-test-0123456789abcdef";
        let (dir, mut reporter) = masking(secret);
        let path = dir.path().join("results.jsonl");
        // The secret straddles the 2 KB cut: cutting first would leave "sk-test-01" behind.
        let output = format!("{}{secret} tail", "x".repeat(2030));
        reporter.on_event(&event(Some(("t", 1)), Event::tool_completed("c", "run_command", true, output, Duration::ZERO))).unwrap();
        let input = serde_json::json!({"command": format!("echo {secret}")});
        reporter.on_event(&event(Some(("t", 1)), Event::tool_started("c\"2", "run_command", input))).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("sk-test-01"), "{text}");
        let lines = read_lines(&path);
        assert!(lines[0]["output"].as_str().unwrap().ends_with("[REDACTED] tail"), "{}", lines[0]);
        assert_eq!(lines[1]["input"]["command"], "echo [REDACTED]");
        assert_eq!(lines[1]["call_id"], "c\"2");
    }

    #[test]
    fn secrets_are_masked_even_where_the_arguments_are_cut() {
        let secret = "sk-test-0123456789abcdef";
        let (dir, mut reporter) = masking(secret);
        let path = dir.path().join("results.jsonl");
        // A file written with the secret across the 2 KB cut of its `content`.
        let input = serde_json::json!({"path": "notes.txt", "content": format!("{}{secret} tail", "x".repeat(2030))});
        reporter.on_event(&event(Some(("t", 1)), Event::tool_started("c", "write_file", input))).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("sk-test"), "{text}");
        let line = &read_lines(&path)[0];
        assert!(line["input"]["content"].as_str().unwrap().ends_with("[REDACTED] tail"), "{line}");
        assert_eq!(line["input"]["path"], "notes.txt");
    }

    #[test]
    fn encoded_and_escape_cut_secrets_are_masked_and_lines_stay_json() {
        use base64::Engine as _;
        let secret = "s3cr3t/K3Y";
        let (dir, mut reporter) = masking(secret);
        let path = dir.path().join("results.jsonl");
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("user:{secret}"));
        let output = format!("b64 {encoded}\nurl s3cr3t%2FK3Y\ncut s3cr3\x1b[1mt/K3Y\n");
        let kind = Event::tool_completed("c", "run_command", true, output, Duration::ZERO);
        reporter.on_event(&event(Some(("t", 1)), kind)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let output = read_lines(&path)[0]["output"].as_str().unwrap().to_string();
        assert!(!text.contains("s3cr") && !text.contains("K3Y"), "{text}");
        assert_eq!(output.matches("[REDACTED]").count(), 3, "{output}");
    }

    #[test]
    fn ids_file_names_and_the_check_command_are_exact_and_free_text_is_masked() {
        let secret = "fixture-key-2026";
        let (dir, mut reporter) = masking(secret);
        let mut o = crate::report::test_support::outcome("rotate-fixture-key-2026", crate::events::Status::Failed);
        o.record.files_changed = vec!["keys/fixture-key-2026.txt".into()];
        o.attachments.diff = Some("diff --git a/keys/fixture-key-2026.txt b/keys/fixture-key-2026.txt\n".into());
        o.record.result = Some(format!("rotated {secret}"));
        let check = crate::events::CheckRecord {
            before_output_tail: None,
            started_ms: None,
            duration_ms: None,
            command: "./check fixture-key-2026".into(),
            exit_code: Some(1),
            output_tail: format!("still {secret}"),
            before: None,
        };
        o.record.check = Some(check);
        reporter.on_event(&crate::report::test_support::finished(o)).unwrap();
        let line = &read_lines(&dir.path().join("results.jsonl"))[0];
        assert_eq!(line["task_id"], "rotate-fixture-key-2026");
        assert_eq!(line["files_changed"], serde_json::json!(["keys/fixture-key-2026.txt"]));
        assert_eq!(line["diff_path"], "diffs/rotate-fixture-key-2026.patch");
        assert_eq!(line["check"]["command"], "./check fixture-key-2026");
        assert_eq!(
            (line["result"].as_str(), line["check"]["output_tail"].as_str()),
            (Some("rotated [REDACTED]"), Some("still [REDACTED]"))
        );
    }

    /// Keeps every record it is handed.
    struct Capture(Arc<std::sync::Mutex<Vec<WireEvent>>>);

    impl Reporter for Capture {
        fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
            self.0.lock().unwrap().push(event.record.clone());
            Ok(())
        }
    }

    /// Through the bus, `results.jsonl` and a `--jsonl -` stream get the same lines, stamped once
    /// (`seq` 1, 2, …, the run's id and shard, the event's time, the emitter's task and attempt),
    /// and each line reads back as the record every reporter was handed.
    #[test]
    fn the_bus_stamps_each_event_once_and_every_jsonl_reporter_writes_the_same_lines() {
        use crate::events::{Emitter, EventBus, RetryScope, RunTotals, Stamp, Status};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let (stream, seen) = (crate::report::test_support::Shared::default(), Arc::new(std::sync::Mutex::new(Vec::new())));
        let redactor = Arc::new(Redactor::default());
        let reporters: Vec<Box<dyn Reporter>> = vec![
            Box::new(JsonlReporter::create(&path, redactor.clone()).unwrap()),
            Box::new(JsonlReporter::new(Box::new(stream.clone()), redactor).named("stdout (--jsonl -)")),
            Box::new(Capture(seen.clone())),
        ];
        let bus = EventBus::new(Stamp::new("run-7", Some("2/3")), reporters);
        let (run, task) = (Emitter::run(bus.clone()), Emitter::run(bus.clone()).task("t", 2));
        run.emit(sample_run().remove(0));
        task.emit(Event::tool_completed("c1", "read_file", true, "é".repeat(1500), Duration::from_millis(4)));
        task.emit(Event::retry(RetryScope::Task, "server".into(), Duration::from_millis(1500), 3));
        task.emit(Event::task_finished(&mut crate::report::test_support::outcome("t", Status::Passed)));
        run.emit(Event::run_finished(&RunTotals::of(&[], Duration::ZERO)));
        assert!(bus.finish().is_empty());
        let file = std::fs::read_to_string(&path).unwrap();
        let streamed = String::from_utf8(stream.0.lock().unwrap().clone()).unwrap();
        assert_eq!(file, streamed, "the file and the stream hold the same lines");
        let read: Vec<WireEvent> = file.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(read, *seen.lock().unwrap(), "each line reads back as the record the reporters were handed");
        let lines = read_lines(&path);
        for (i, line) in lines.iter().enumerate() {
            assert_eq!((line["seq"].as_u64(), &line["run_id"], &line["shard"]), (Some(i as u64 + 1), &"run-7".into(), &"2/3".into()));
            let ts = line["ts"].as_str().unwrap();
            assert!(ts.len() == 24 && ts.ends_with('Z') && humantime::parse_rfc3339(ts).is_ok(), "{ts}");
        }
        let task_of = |l: &serde_json::Value| (l["task_id"].as_str().map(str::to_string), l["attempt"].as_u64());
        let tasks: Vec<_> = lines.iter().map(task_of).collect();
        let t = |attempt| (Some("t".to_string()), Some(attempt));
        assert_eq!(tasks, [(None, None), t(2), t(3), t(2), (None, None)], "a retry's attempt is the next one");
        let cut = &lines[1];
        assert_eq!((cut["output"].as_str().unwrap().len(), cut["output_bytes"].as_u64()), (TOOL_OUTPUT_LIMIT, Some(3000)));
        assert!(file.lines().nth(2).unwrap().matches("\"attempt\"").count() == 1, "one attempt key on a retry");
    }
}
