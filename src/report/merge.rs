//! `dracode merge`: joins the output folders of a sharded run (`run --shard K/N`, one folder per
//! CI job) into one `results.jsonl`, `junit.xml`, `summary.md`, `diffs/` and `transcripts/`, as
//! if every task had run in one run.
//!
//! `results.jsonl` keeps every line of every input (turns, tools, retries, …), inputs in shard
//! order, `seq` renumbered 1, 2, … across the file and `run_id` replaced by one merged id, so a
//! reader filtering on the id sees the whole run. Task lines keep their `shard`, and the new
//! `run.started` lists the inputs in `merged_from` (folder, original `run_id`, shard), so it
//! stays clear which job ran a task. `junit.xml`, `summary.md` and `diffs/` are written by the
//! same reporters as a run's, from the `task.finished` lines (so are `outputs/`); transcripts are
//! copied as they are, and the inputs' `findings.sarif` become one log.
//!
//! Unsharded inputs may be a run and its reruns (`--rerun-failed` into another folder): a task in
//! several of them keeps the attempt of the run that started last, and the earlier run's lines
//! of that task are left out. The same code joins a rerun into its own folder
//! ([`add_up_rerun`]), the tasks not run again marked `carried_from`.
//!
//! Inputs that cannot belong to one split (shards of different N or scheme, sharded mixed with
//! unsharded, the same shard twice, a task in two shards or twice in one input) are errors: their
//! merged counts would be wrong. A missing shard — a job that died before it wrote anything — or an input whose run
//! never reached `run.finished` is not an error: the tasks that did run are still worth
//! publishing. The merge is written, the problem is listed in `summary.md` and in
//! [`MergeSummary::warnings`], and the merged `run.finished` has exit code 5
//! ([`exit_codes::NOT_JUDGED`]: the split's tasks could not all be judged), so the merged result
//! fails as the job did — and unlike a failed task — also for a reader that only looks at the
//! file. The shard count comes from the inputs' `run.started` (`shard` = `K/N`).

use super::jsonl::redact_event;
use super::{DiffReporter, JunitReporter, SummaryReporter, write_atomic};
use crate::events::{Attachment, Event, Header, Reporter, RunTotals, Stamp, TaskOutcome};
use crate::shard::Shard;
use dracode_results::exit_codes;
use dracode_results::file_names::file_stem;
use dracode_results::records::{MergedFrom, WireEvent, WireOutcome};
use dracode_secrets::Redactor;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What a merge produced.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeSummary {
    /// Tasks in the merged output.
    pub tasks: usize,
    /// Input folders merged.
    pub shards: usize,
    /// Problems that did not stop the merge (a missing or unfinished shard, a missing patch,
    /// differing dracode versions); also listed at the end of `summary.md`.
    pub warnings: Vec<String>,
    /// The merged `run.finished` exit code: 5 when a shard is missing or unfinished or a task
    /// could not be judged, else 1 when a task did not pass, else 0.
    pub exit_code: i32,
}

/// Why nothing was merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// `report.html` could not be written.
    #[error(transparent)]
    Page(dracode_report_page::PageError),
    /// No input folder was given.
    #[error("nothing to merge: give the output folders of the shards")]
    NoInputs,
    /// An input could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line of an input's `results.jsonl` is not a dracode event.
    #[error("{}:{line}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// An input is a file, not a folder (a glob such as `shards/*` caught a log file).
    #[error("{}: not an output folder but a file; give the output folders of the shards (did a glob catch a file?)", path.display())]
    NotAFolder {
        /// The input.
        path: PathBuf,
    },
    /// An input's `results.jsonl` has no `run.started`.
    #[error("{}: no run.started line: not the results of a dracode run", path.display())]
    NoRunStarted {
        /// The file.
        path: PathBuf,
    },
    /// Two inputs are not shards of the same split.
    #[error("{first} but {second}: only the shards of one split can be merged")]
    MixedShards {
        /// The first input and what it is (`out1 is shard 1/3`).
        first: String,
        /// The input that differs.
        second: String,
    },
    /// The same shard was given twice.
    #[error("shard {shard} is in more than one input: {}; keep one", list(dirs))]
    DuplicateShard {
        /// `K/N`.
        shard: String,
        /// The folders holding it.
        dirs: Vec<PathBuf>,
    },
    /// A task was reported by two inputs (or twice by one).
    #[error("task {task_id:?} is in more than one input: {}", list(dirs))]
    DuplicateTask {
        /// The task's id.
        task_id: String,
        /// The folders reporting it.
        dirs: Vec<PathBuf>,
    },
    /// `--out` holds files dracode did not write.
    #[error(transparent)]
    Out(super::out_dir::OutDirError),
    /// `--out` is one of the inputs: writing would overwrite what is being read.
    #[error("--out {} is one of the inputs; write the merge to a new folder", path.display())]
    OutIsInput {
        /// The folder.
        path: PathBuf,
    },
    /// The merged output could not be written.
    #[error("{}: {source}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn list(dirs: &[PathBuf]) -> String {
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// A `task.finished` line as read (its header, its record), with the patches read back beside.
struct Finished {
    outcome: TaskOutcome,
    header: Header,
    ts: SystemTime,
}

impl Finished {
    /// The line replayed to the reporters: as read, the patches beside it.
    fn event(&self) -> Event {
        let record = WireEvent::TaskFinished { header: self.header.clone(), outcome: Box::new(self.outcome.record.clone()) };
        Event { ts: self.ts, record, attachment: Some(Box::new(Attachment::Task(self.outcome.attachments.clone()))) }
    }
}

/// What one input folder holds.
struct Input {
    dir: PathBuf,
    run_id: String,
    shard_text: Option<String>,
    shard: Option<Shard>,
    version: String,
    manifests: Vec<String>,
    jobs: usize,
    task_count: usize,
    /// `run.started`'s warnings (none in files of versions before they existed).
    run_warnings: Vec<String>,
    /// Every line but `run.started` and `run.finished`, as read.
    lines: Vec<serde_json::Value>,
    finished: Vec<Finished>,
    /// `run.finished`'s exit code; `None` when the run never got there.
    exit_code: Option<i32>,
    started: SystemTime,
    last: SystemTime,
}

impl Input {
    /// `out1 is shard 1/3`, `out2 is not sharded`.
    fn describe(&self) -> String {
        match &self.shard {
            Some(shard) => format!("{} is shard {shard}", self.dir.display()),
            None => format!("{} is not sharded", self.dir.display()),
        }
    }
}

/// Merges the output folders `inputs` into `out` (created if missing, or replaced when an
/// earlier run or merge wrote it). Every input is read and checked before anything is written.
/// Unsharded inputs may hold the same task (a run, then its `--rerun-failed`): the attempt of
/// the input that started last wins, and the earlier one's lines of that task are left out.
pub fn merge(inputs: &[PathBuf], out: &Path, redactor: Arc<Redactor>) -> Result<MergeSummary, MergeError> {
    if inputs.is_empty() {
        return Err(MergeError::NoInputs);
    }
    refuse_out_as_input(inputs, out)?;
    super::out_dir::check(out, &[]).map_err(MergeError::Out)?;
    let mut warnings = Vec::new();
    let mut read = Vec::with_capacity(inputs.len());
    for dir in inputs {
        read.push(read_input(dir, &mut warnings)?);
    }
    let missing = check_shards(&read)?;
    // By K, so that `out-10` globbed before `out-2` still gives lines in shard order; unsharded
    // runs by their start, so that a rerun comes after the run it repeats.
    read.sort_by_key(|i| (i.shard.map(|s| s.index), i.started));
    check_tasks(&read)?;
    supersede(&mut read, false);
    super::out_dir::prepare(out, &Default::default()).map_err(|source| MergeError::Write { path: out.to_path_buf(), source })?;
    let mut summary = write_merged(&read, &missing, out, redactor, warnings)?;
    let sarif_warnings =
        super::outputs::merge_sarif(inputs, out).map_err(|source| MergeError::Write { path: out.join("findings.sarif"), source })?;
    summary.warnings.extend(sarif_warnings);
    Ok(summary)
}

/// `run --rerun-failed DIR/results.jsonl --out DIR`, once the rerun has written DIR: DIR then
/// describes the whole batch. `earlier` is the text DIR's results.jsonl had before the rerun;
/// its tasks that were not run again are carried over (`carried_from` its run id; their patch
/// and transcript were left in DIR), the rerun's tasks replace theirs.
///
/// Written in a run's own order: the record without its `run.finished`, then the reports, then
/// `report.html` (with `cache`, its history there too), then the `run.finished`, whose exit code
/// counts `failures` — the run's artifacts that could not be written, to which the add-up's own
/// are added — so that it is the process's. Returns that exit code with the summary.
pub fn add_up_rerun(
    earlier: &str,
    out: &Path,
    redactor: Arc<Redactor>,
    cache: Option<&Path>,
    failures: &mut Vec<String>,
) -> Result<MergeSummary, MergeError> {
    let path = out.join("results.jsonl");
    // Patches of the rerun tasks were removed before the rerun: not worth a warning.
    let mut earlier = parse_input(out, &path, earlier, &mut Vec::new())?;
    let mut warnings = Vec::new();
    let mut rerun = read_input(out, &mut warnings)?;
    // An interrupted rerun stays interrupted, as the process does.
    let signal = rerun.exit_code.filter(|c| matches!(*c, exit_codes::INTERRUPTED | exit_codes::TERMINATED)).unwrap_or(exit_codes::OK);
    // The rerun's own artifact failures are in `failures`, not a reason to doubt its tasks.
    if rerun.exit_code == Some(exit_codes::ARTIFACTS_FAILED) {
        rerun.exit_code = Some(exit_codes::of_tasks(rerun.finished.iter().map(|f| f.outcome.ending())));
    }
    let carried_from = earlier.run_id.clone();
    for f in &mut earlier.finished {
        f.outcome.record.carried_from = Some(carried_from.clone());
    }
    for line in earlier.lines.iter_mut().filter(|l| l["type"] == "task.finished") {
        if let Some(fields) = line.as_object_mut() {
            fields.insert("carried_from".into(), carried_from.clone().into());
        }
    }
    let mut read = vec![earlier, rerun];
    supersede(&mut read, true);
    let inputs_code = exit_codes::worst(problems(&read, &[], &mut warnings), signal);
    let merged = Merged::of(&read, inputs_code);
    let record = merged.record(&read, &redactor)?;
    write_atomic(&path, record.lines.as_bytes()).map_err(|source| MergeError::Write { path: path.clone(), source })?;
    let failed = |result: Result<(), MergeError>, failures: &mut Vec<String>| {
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    };
    failed(merged.write_reports(&read, out, redactor.clone(), &warnings), failures);
    let mut finished = merged.finished();
    set_exit_code(&mut finished.record, exit_codes::after_artifacts(merged.totals.exit_code, failures.len()));
    failed(super::page::write_ending(out, &[], cache, Some(finished.record)).map(drop).map_err(MergeError::Page), failures);
    let exit_code = exit_codes::after_artifacts(merged.totals.exit_code, failures.len());
    let last = record.finished_line(exit_code, &redactor)?;
    failed(append(&path, last.as_bytes()).map_err(|source| MergeError::Write { path: path.clone(), source }), failures);
    Ok(MergeSummary {
        tasks: merged.outcomes.len(),
        shards: read.len(),
        warnings,
        exit_code: exit_codes::after_artifacts(exit_code, failures.len()),
    })
}

/// Sets a `run.finished` record's exit code.
fn set_exit_code(record: &mut WireEvent, code: i32) {
    if let WireEvent::RunFinished { exit_code, .. } = record {
        *exit_code = code;
    }
}

/// Appends `bytes` to the file at `path` and syncs it.
fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    std::io::Write::write_all(&mut file, bytes)?;
    file.sync_all()
}

/// Leaves out of each unsharded input (of any input when `any`: a rerun into its own folder)
/// the tasks a later input ran again: their `task.finished`, every line of theirs, and their
/// count; an input that lost tasks is judged again on the rest.
fn supersede(read: &mut [Input], any: bool) {
    for later in (1..read.len()).rev() {
        let (before, after) = read.split_at_mut(later);
        let redone: Vec<String> = after[0].finished.iter().map(|f| f.outcome.task_id.clone()).collect();
        for input in before.iter_mut().filter(|i| any || i.shard.is_none()) {
            let count = input.finished.len();
            input.finished.retain(|f| !redone.contains(&f.outcome.task_id));
            input.lines.retain(|l| l["task_id"].as_str().is_none_or(|id| !redone.iter().any(|r| r == id)));
            let removed = count - input.finished.len();
            if removed > 0 {
                input.task_count = input.task_count.saturating_sub(removed);
                // Judged again on the tasks it keeps: a task that could not be judged (5) and
                // was run again no longer speaks for this input.
                if matches!(input.exit_code, Some(exit_codes::OK | exit_codes::TASKS_FAILED | exit_codes::NOT_JUDGED)) {
                    input.exit_code = Some(exit_codes::of_tasks(input.finished.iter().map(|f| f.outcome.ending())));
                }
            }
        }
    }
}

/// Writes the merged `results.jsonl`, `junit.xml`, `summary.md`, patches and transcripts of
/// `read` into `out`.
fn write_merged(
    read: &[Input],
    missing: &[String],
    out: &Path,
    redactor: Arc<Redactor>,
    mut warnings: Vec<String>,
) -> Result<MergeSummary, MergeError> {
    let inputs_code = problems(read, missing, &mut warnings);
    let merged = Merged::of(read, inputs_code);
    std::fs::create_dir_all(out).map_err(|source| MergeError::Write { path: out.to_path_buf(), source })?;
    let record = merged.record(read, &redactor)?;
    let text = record.lines.clone() + &record.finished_line(merged.totals.exit_code, &redactor)?;
    let path = out.join("results.jsonl");
    write_atomic(&path, text.as_bytes()).map_err(|source| MergeError::Write { path: path.clone(), source })?;
    merged.write_reports(read, out, redactor, &warnings)?;
    Ok(MergeSummary { tasks: merged.outcomes.len(), shards: read.len(), warnings, exit_code: merged.totals.exit_code })
}

/// The merged run of some inputs: its header fields, its tasks and its totals.
struct Merged<'a> {
    run: MergedRun,
    outcomes: Vec<&'a Finished>,
    totals: RunTotals,
}

impl<'a> Merged<'a> {
    /// The run `read` makes together, its exit code no better than `inputs_code`.
    fn of(read: &'a [Input], inputs_code: i32) -> Self {
        let run = merged_run(read);
        let outcomes: Vec<&Finished> = read.iter().flat_map(|i| &i.finished).collect();
        let plain: Vec<TaskOutcome> = outcomes.iter().map(|f| f.outcome.clone()).collect();
        let mut totals = RunTotals::of(&plain, run.duration());
        totals.exit_code = exit_codes::worst(totals.exit_code, inputs_code);
        Merged { run, outcomes, totals }
    }

    /// Its `run.finished`.
    fn finished(&self) -> Event {
        self.run.finished(&self.totals)
    }

    /// Its record ([`write_results`]'s lines).
    fn record(&self, read: &[Input], redactor: &Redactor) -> Result<MergedRecord, MergeError> {
        merged_record(read, &self.run, &self.totals, redactor)
    }

    /// `junit.xml`, `summary.md` (with `warnings` at its end), the patches, outputs and
    /// transcripts.
    fn write_reports(&self, read: &[Input], out: &Path, redactor: Arc<Redactor>, warnings: &[String]) -> Result<(), MergeError> {
        write_reports(&self.outcomes, &self.run, &self.totals, out, redactor)?;
        copy_transcripts(read, out)?;
        if !warnings.is_empty() {
            append_warnings(&out.join("summary.md"), warnings)?;
        }
        Ok(())
    }
}

/// Adds a warning for each missing or unfinished shard and for inputs of different versions;
/// returns the exit code the inputs alone give the merge: [`exit_codes::NOT_JUDGED`] for a
/// missing or unfinished shard or an input that ended with a code other than 0 and 1 (it could
/// not judge its own tasks, or was interrupted), 1 for an input that ended with 1, else 0.
fn problems(read: &[Input], missing: &[String], warnings: &mut Vec<String>) -> i32 {
    let mut code = exit_codes::OK;
    if !missing.is_empty() {
        let (noun, verb, their) = if missing.len() == 1 { ("shard", "is", "its") } else { ("shards", "are", "their") };
        warnings.push(format!(
            "{noun} {} {verb} missing (did {their} job fail before writing its output?): {their} tasks are \
             not in this report",
            missing.join(", ")
        ));
        code = exit_codes::NOT_JUDGED;
    }
    for input in read {
        if input.exit_code.is_none() || input.finished.len() < input.task_count {
            warnings.push(format!(
                "{} ({}) did not finish: {} of {} tasks reported",
                input.dir.display(),
                input.shard_text.as_deref().unwrap_or("not sharded"),
                input.finished.len(),
                input.task_count
            ));
            code = exit_codes::NOT_JUDGED;
        } else if let Some(own) = input.exit_code.filter(|c| *c != exit_codes::OK) {
            let judged = if own == exit_codes::TASKS_FAILED { own } else { exit_codes::NOT_JUDGED };
            code = exit_codes::worst(code, judged);
            if input.finished.iter().all(|f| f.outcome.record.status.is_pass()) {
                warnings.push(format!("{} ended with exit code {own}", input.dir.display()));
            }
        }
    }
    let versions: Vec<&str> = read.iter().map(|i| i.version.as_str()).collect();
    if versions.iter().any(|v| *v != versions[0]) {
        let each: Vec<String> = read.iter().map(|i| format!("{} in {}", i.version, i.dir.display())).collect();
        warnings.push(format!("the inputs were written by different dracode versions: {}", each.join(", ")));
    }
    code
}

fn refuse_out_as_input(inputs: &[PathBuf], out: &Path) -> Result<(), MergeError> {
    let Ok(out_real) = out.canonicalize() else { return Ok(()) };
    match inputs.iter().find(|dir| dir.canonicalize().is_ok_and(|d| d == out_real)) {
        Some(_) => Err(MergeError::OutIsInput { path: out.to_path_buf() }),
        None => Ok(()),
    }
}

/// Reads and checks `dir/results.jsonl`, with the patches its tasks name.
fn read_input(dir: &Path, warnings: &mut Vec<String>) -> Result<Input, MergeError> {
    if dir.exists() && !dir.is_dir() {
        return Err(MergeError::NotAFolder { path: dir.to_path_buf() });
    }
    let path = dir.join("results.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|source| MergeError::Read { path: path.clone(), source })?;
    parse_input(dir, &path, &text, warnings)
}

/// Checks `text`, the results.jsonl at `path` of the output folder `dir`.
fn parse_input(dir: &Path, path: &Path, text: &str, warnings: &mut Vec<String>) -> Result<Input, MergeError> {
    let path = path.to_path_buf();
    let mut input: Option<Input> = None;
    for (n, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let invalid = |message: String| MergeError::Invalid { path: path.clone(), line: n + 1, message };
        let value: serde_json::Value = serde_json::from_str(raw).map_err(|e| invalid(format!("not a JSON line: {e}")))?;
        let event = WireEvent::deserialize(&value).map_err(|e| invalid(format!("not a dracode event: {e}")))?;
        let header = event.header();
        let ts = humantime::parse_rfc3339(&header.ts).map_err(|e| invalid(format!("ts {:?}: {e}", header.ts)))?;
        if let WireEvent::RunStarted { header, version, manifests, task_count, jobs, warnings: run_warnings, .. } = &event {
            if input.is_some() {
                return Err(invalid("a second run.started: the file holds more than one run".into()));
            }
            let shard = header.shard.as_deref().map(Shard::parse).transpose().map_err(|e| invalid(e.to_string()))?;
            input = Some(Input {
                dir: dir.to_path_buf(),
                run_id: header.run_id.clone(),
                shard_text: shard.map(|s| s.to_string()),
                shard,
                version: version.clone(),
                manifests: manifests.clone(),
                jobs: *jobs,
                task_count: *task_count,
                run_warnings: run_warnings.clone(),
                lines: Vec::new(),
                finished: Vec::new(),
                exit_code: None,
                started: ts,
                last: ts,
            });
            continue;
        }
        let Some(input) = input.as_mut() else {
            return Err(invalid(format!("{} before run.started", type_of(&value))));
        };
        input.last = input.last.max(ts);
        match event {
            WireEvent::RunFinished { exit_code, .. } => input.exit_code = Some(exit_code),
            WireEvent::TaskFinished { header, outcome } => {
                let Some(task_id) = header.task_id.clone() else {
                    return Err(invalid("task.finished without task_id".into()));
                };
                let outcome = rebuild(dir, task_id, *outcome, warnings)?;
                input.finished.push(Finished { outcome, header, ts });
                input.lines.push(value);
            }
            _ => input.lines.push(value),
        }
    }
    input.ok_or(MergeError::NoRunStarted { path })
}

fn type_of(value: &serde_json::Value) -> &str {
    value.get("type").and_then(|t| t.as_str()).unwrap_or("a line")
}

/// The outcome a `task.finished` line describes: its record as read, its patches read back from
/// the input folder. The transcript stays a file: it is copied, not rebuilt.
fn rebuild(dir: &Path, task_id: String, w: WireOutcome, warnings: &mut Vec<String>) -> Result<TaskOutcome, MergeError> {
    // The patch is looked up by the task id, not by the line's `diff_path`, so that a crafted
    // file cannot make the merge copy something from outside the folder.
    let stem = file_stem(&task_id);
    let diff = match w.diff_path {
        None => None,
        Some(_) => read_patch(dir, &format!("{stem}.patch"), &task_id, warnings)?,
    };
    // So are the patches of a repeated task's attempts, by their repeat number.
    let repeat_patches: Vec<Option<u32>> = w.repeats.iter().map(|r| r.diff_path.as_ref().map(|_| r.repeat)).collect();
    let mut outcome = TaskOutcome::recorded(task_id, w, diff);
    for (files, repeat) in outcome.attachments.repeats.iter_mut().zip(repeat_patches) {
        if let Some(n) = repeat {
            files.diff = read_patch(dir, &format!("{stem}@{n}.patch"), &outcome.task_id, warnings)?;
        }
    }
    Ok(outcome)
}

/// `dir/diffs/<name>`; a missing one is a warning (the task has no patch here).
fn read_patch(dir: &Path, name: &str, task_id: &str, warnings: &mut Vec<String>) -> Result<Option<String>, MergeError> {
    let path = dir.join("diffs").join(name);
    match std::fs::read_to_string(&path) {
        Ok(diff) => Ok(Some(diff)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            warnings.push(format!("{} is missing: task {task_id:?} has no patch here", path.display()));
            Ok(None)
        }
        Err(source) => Err(MergeError::Read { path, source }),
    }
}

/// The shards of one split, each once; returns the missing ones (`K/N`).
fn check_shards(inputs: &[Input]) -> Result<Vec<String>, MergeError> {
    let first = &inputs[0];
    for other in inputs {
        let same = match (first.shard, other.shard) {
            (None, None) => true,
            (Some(a), Some(b)) => a.count == b.count && a.scheme == b.scheme,
            _ => false,
        };
        if !same {
            return Err(MergeError::MixedShards { first: first.describe(), second: other.describe() });
        }
    }
    let Some(split) = first.shard else { return Ok(Vec::new()) };
    let mut dirs: BTreeMap<u32, Vec<PathBuf>> = BTreeMap::new();
    for input in inputs {
        if let Some(shard) = input.shard {
            dirs.entry(shard.index).or_default().push(input.dir.clone());
        }
    }
    if let Some((&index, dirs)) = dirs.iter().find(|(_, d)| d.len() > 1) {
        let shard = Shard { index, ..split }.to_string();
        return Err(MergeError::DuplicateShard { shard, dirs: dirs.clone() });
    }
    Ok((1..=split.count).filter(|k| !dirs.contains_key(k)).map(|index| Shard { index, ..split }.to_string()).collect())
}

/// A task twice in one input, or in two shards, is an error; in two unsharded inputs it is a
/// rerun ([`supersede`]).
fn check_tasks(inputs: &[Input]) -> Result<(), MergeError> {
    let mut seen: BTreeMap<&str, &Path> = BTreeMap::new();
    for input in inputs {
        if input.shard.is_none() {
            seen.clear();
        }
        for f in &input.finished {
            if let Some(first) = seen.insert(&f.outcome.task_id, &input.dir) {
                return Err(MergeError::DuplicateTask {
                    task_id: f.outcome.task_id.clone(),
                    dirs: vec![first.to_path_buf(), input.dir.clone()],
                });
            }
        }
    }
    Ok(())
}

/// The merged run's own facts.
struct MergedRun {
    run_id: String,
    version: String,
    manifests: Vec<String>,
    jobs: usize,
    task_count: usize,
    /// Every input's run warnings, once each.
    warnings: Vec<String>,
    started: SystemTime,
    finished: SystemTime,
    /// The summed time of unsharded inputs.
    busy: Option<Duration>,
}

impl MergedRun {
    /// Shards (jobs side by side): from the first start to the last line, the wall time of
    /// the whole split. Unsharded runs (a run and its reruns, one after another): the sum of
    /// their own times, not the hours between them.
    fn duration(&self) -> Duration {
        self.busy.unwrap_or_else(|| self.finished.duration_since(self.started).unwrap_or_default())
    }

    /// The merged `run.started` (unstamped), naming the inputs in `merged_from` when given.
    fn started(&self, merged_from: Option<Vec<MergedFrom>>) -> Event {
        let record = WireEvent::RunStarted {
            header: Header::unstamped(None),
            version: self.version.clone(),
            manifests: self.manifests.clone(),
            task_count: self.task_count,
            jobs: self.jobs,
            warnings: self.warnings.clone(),
            config_files: None,
            merged_from,
        };
        Event { ts: self.started, ..Event::new(record) }
    }

    /// The merged `run.finished` (unstamped).
    fn finished(&self, totals: &RunTotals) -> Event {
        Event { ts: self.finished, ..Event::run_finished(totals) }
    }
}

/// The merged run's `jobs`: shards ran side by side, so theirs add up; the runs of one shard
/// (or unsharded runs: a run and its reruns) ran one after another, so the largest counts.
fn merged_jobs(inputs: &[Input]) -> usize {
    let mut by_shard: Vec<(Option<&str>, usize)> = Vec::new();
    for input in inputs {
        let shard = input.shard_text.as_deref();
        match by_shard.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, jobs)) => *jobs = (*jobs).max(input.jobs),
            None => by_shard.push((shard, input.jobs)),
        }
    }
    by_shard.iter().map(|(_, jobs)| jobs).sum()
}

fn merged_run(inputs: &[Input]) -> MergedRun {
    let mut manifests: Vec<String> = Vec::new();
    for m in inputs.iter().flat_map(|i| &i.manifests) {
        if !manifests.contains(m) {
            manifests.push(m.clone());
        }
    }
    let mut warnings: Vec<String> = Vec::new();
    for w in inputs.iter().flat_map(|i| &i.run_warnings) {
        if !warnings.contains(w) {
            warnings.push(w.clone());
        }
    }
    MergedRun {
        warnings,
        // The first shard's id (ids sort by time) marked as merged: merging the same folders
        // again gives the same id.
        run_id: format!("{}-merged", inputs[0].run_id),
        version: inputs[0].version.clone(),
        manifests,
        jobs: merged_jobs(inputs),
        task_count: inputs.iter().map(|i| i.finished.len()).sum(),
        started: inputs.iter().map(|i| i.started).min().unwrap_or(SystemTime::UNIX_EPOCH),
        finished: inputs.iter().map(|i| i.last).max().unwrap_or(SystemTime::UNIX_EPOCH),
        busy: inputs
            .iter()
            .all(|i| i.shard.is_none())
            .then(|| inputs.iter().map(|i| i.last.duration_since(i.started).unwrap_or_default()).sum()),
    }
}

/// `junit.xml`, `summary.md` and `diffs/`, by the reporters a run uses, from the merged run's
/// events.
fn write_reports(
    outcomes: &[&Finished],
    run: &MergedRun,
    run_totals: &RunTotals,
    out: &Path,
    redactor: Arc<Redactor>,
) -> Result<(), MergeError> {
    let write_err = |source| MergeError::Write { path: out.to_path_buf(), source };
    let mut reporters: Vec<Box<dyn Reporter>> = vec![
        Box::new(JunitReporter::new(out.join("junit.xml"), redactor.clone())),
        Box::new(SummaryReporter::new(out.join("summary.md"), redactor.clone())),
        Box::new(DiffReporter::new(out).with_redactor(redactor.clone())),
        Box::new(super::outputs::OutputsReporter::new(out, redactor)),
    ];
    let mut events = vec![run.started(None)];
    events.extend(outcomes.iter().map(|f| f.event()));
    events.push(run.finished(run_totals));
    for reporter in &mut reporters {
        for event in &events {
            reporter.on_event(event).map_err(write_err)?;
        }
        reporter.finish().map_err(write_err)?;
    }
    Ok(())
}

/// The lines of a merged `results.jsonl`: a `run.started` naming the inputs, their lines
/// renumbered, and its `run.finished` apart (its exit code is set when it is written).
struct MergedRecord {
    /// Every line but the last, each ending in a newline.
    lines: String,
    /// The `run.finished` record, stamped.
    finished: WireEvent,
}

impl MergedRecord {
    /// The `run.finished` line, with `exit_code`.
    fn finished_line(&self, exit_code: i32, redactor: &Redactor) -> Result<String, MergeError> {
        let mut record = self.finished.clone();
        set_exit_code(&mut record, exit_code);
        let mut value = serde_json::to_value(record).map_err(json_err)?;
        redact_event(&mut value, redactor);
        Ok(serde_json::to_string(&value).map_err(json_err)? + "\n")
    }
}

/// A record line that could not be made (it cannot happen: every record is JSON).
fn json_err(e: serde_json::Error) -> MergeError {
    MergeError::Write { path: PathBuf::from("results.jsonl"), source: e.into() }
}

/// The merged record of `inputs`, `run` and `run_totals`.
fn merged_record(inputs: &[Input], run: &MergedRun, run_totals: &RunTotals, redactor: &Redactor) -> Result<MergedRecord, MergeError> {
    // One shard throughout (a shard's rerun into its folder): the file stays that shard's.
    let same = inputs.len() > 1 && inputs.iter().all(|i| i.shard_text == inputs[0].shard_text);
    let shard = inputs[0].shard_text.clone().filter(|_| same);
    let mut stamp = Stamp::new(&run.run_id, shard.as_deref());
    let merged_from = inputs
        .iter()
        .map(|i| MergedFrom {
            dir: i.dir.display().to_string(),
            run_id: i.run_id.clone(),
            shard: i.shard_text.clone(),
            task_count: i.finished.len(),
        })
        .collect();
    let mut first = run.started(Some(merged_from));
    stamp.stamp(&mut first);
    let mut lines = vec![serde_json::to_value(first.record).map_err(json_err)?];
    for value in inputs.iter().flat_map(|i| &i.lines) {
        let mut value = value.clone();
        stamp.restamp_line(&mut value);
        lines.push(value);
    }
    let mut text = String::new();
    for mut line in lines {
        // The shards redacted their own secrets; this also masks the ones the merge knows.
        redact_event(&mut line, redactor);
        text.push_str(&serde_json::to_string(&line).map_err(json_err)?);
        text.push('\n');
    }
    let mut last = run.finished(run_totals);
    stamp.stamp(&mut last);
    Ok(MergedRecord { lines: text, finished: last.record })
}

/// Copies each merged task's `transcripts/<id>.json` (and a repeated task's
/// `transcripts/<id>@<repeat>.json`), byte for byte (already redacted).
fn copy_transcripts(inputs: &[Input], out: &Path) -> Result<(), MergeError> {
    for input in inputs {
        for f in &input.finished {
            let stem = file_stem(&f.outcome.task_id);
            let repeats = f.outcome.record.repeats.iter().map(|r| format!("{stem}@{}.json", r.repeat));
            for name in std::iter::once(format!("{stem}.json")).chain(repeats) {
                copy_transcript(input, out, &name)?;
            }
        }
    }
    Ok(())
}

/// Copies `transcripts/<name>` of `input` into `out`, when it has one.
fn copy_transcript(input: &Input, out: &Path, name: &str) -> Result<(), MergeError> {
    let from = input.dir.join("transcripts").join(name);
    let bytes = match std::fs::read(&from) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(MergeError::Read { path: from, source }),
    };
    let to = out.join("transcripts").join(name);
    write_atomic(&to, &bytes).map_err(|source| MergeError::Write { path: to, source })
}

/// Adds the merge's warnings under the summary, where a reader of the CI page sees them.
fn append_warnings(path: &Path, warnings: &[String]) -> Result<(), MergeError> {
    let read_err = |source| MergeError::Read { path: path.to_path_buf(), source };
    let mut md = std::fs::read_to_string(path).map_err(read_err)?;
    md.push_str("\n### ⚠️ Merge warnings\n\n");
    for warning in warnings {
        let text = dracode_results::html::escape(warning);
        let _ = writeln!(md, "- {text}");
    }
    write_atomic(path, md.as_bytes()).map_err(|source| MergeError::Write { path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::FailureKind;
    use crate::events::{CheckRecord, Status, TaskError};
    use crate::report::artifact_reporters;
    use crate::report::test_support::{fixed_ts, outcome, transcript};
    use dracode_llm::{ErrorKind, StopReason, Usage};
    use dracode_results::records::WireAttempt;
    use dracode_results::records::events_schema;
    use serde_json::Value;

    const SECRET: &str = "sk-secret-0123456789";

    fn redactor() -> Arc<Redactor> {
        Arc::new(Redactor::new([SECRET.to_string()]))
    }

    /// Nine tasks over two manifests, of every kind the reports treat differently. Costs are
    /// multiples of 1/64 so that sums in any order are exact.
    fn tasks() -> Vec<TaskOutcome> {
        let mut tasks: Vec<TaskOutcome> = (0..9)
            .map(|i| {
                let mut o = outcome(&format!("task-{i}"), Status::Passed);
                o.record.index = i;
                o.record.total_cost_usd = Some(0.015625 * (i + 1) as f64);
                o.record.usage = Usage { requests: 2, ..Usage::from_counts(100 * (i as u64 + 1), 10) };
                if i >= 6 {
                    o.record.manifest = "more/extra.yaml".into();
                }
                o
            })
            .collect();
        tasks[1].record.status = Status::Failed;
        tasks[1].record.error = Some(TaskError { kind: FailureKind::Check, message: "check failed".into(), http_status: None });
        tasks[1].record.check = Some(CheckRecord {
            before_output_tail: None,
            started_ms: None,
            duration_ms: None,
            command: "cargo test".into(),
            exit_code: Some(101),
            output_tail: "test x ... FAILED".into(),
            before: Some(Some(101)),
        });
        tasks[1].record.files_changed = vec!["src/lib.rs".into()];
        tasks[1].attachments.diff = Some("diff --git a/src/lib.rs b/src/lib.rs\n-a\n+b\n".into());
        tasks[2].record.status = Status::Error;
        tasks[2].record.error =
            Some(TaskError { kind: ErrorKind::Auth.into(), message: format!("401: key {SECRET} refused"), http_status: Some(401) });
        tasks[3].record.flaky = true;
        tasks[3].record.attempts = 2;
        tasks[3].record.prior_attempts = vec![WireAttempt {
            status: Status::Timeout,
            error: Some(TaskError { kind: ErrorKind::Network.into(), message: "reset".into(), http_status: None }),
            duration_ms: 900,
        }];
        tasks[3].attachments.transcript = Some(transcript("done after a retry"));
        tasks[4].record.status = Status::Skipped;
        tasks[4].record.usage = Usage::default();
        tasks[4].record.total_cost_usd = None;
        tasks[4].record.num_turns = 0;
        tasks[4].record.attempts = 0;
        tasks[5].record.files_changed = vec!["README.md".into()];
        tasks[5].attachments.diff = Some("diff --git a/README.md b/README.md\n+hello\n".into());
        tasks[5].attachments.transcript = Some(transcript("wrote it"));
        tasks[7].record.status = Status::Timeout;
        tasks[7].record.model = "other-model".into();
        tasks[8].record.structured_output = Some(serde_json::json!({"risk": 2, "reasons": ["small diff"]}));
        tasks
    }

    /// The output folder of a run of `tasks`, written by the reporters a run uses: it starts
    /// at [`fixed_ts`] and ends 3 s later.
    fn write_run(dir: &Path, run_id: &str, shard: Option<&str>, tasks: &[TaskOutcome]) -> PathBuf {
        let start = fixed_ts();
        let started = WireEvent::RunStarted {
            header: Header { shard: shard.map(str::to_string), ..Header::unstamped(None) },
            version: "0.1.0".into(),
            manifests: vec!["tasks.toml".into(), "more/extra.yaml".into()],
            task_count: tasks.len(),
            jobs: 2,
            warnings: Vec::new(),
            config_files: Some(Vec::new()),
            merged_from: None,
        };
        let mut events = vec![Event { ts: start, ..Event::new(started) }];
        for o in tasks {
            let ts = start + Duration::from_millis(100 * (o.record.index as u64 + 1));
            let attempt = o.record.attempts.max(1);
            if o.record.status != Status::Skipped {
                let turn = Event::turn_completed(1, &StopReason::EndTurn, o.record.usage, Duration::from_millis(50));
                events.push(Event { ts, ..turn.of_task(&o.task_id, attempt) });
            }
            events.push(Event { ts, ..Event::task_finished(&mut o.clone()).of_task(&o.task_id, attempt) });
        }
        let run_totals = RunTotals::of(tasks, Duration::from_secs(3));
        events.push(Event { ts: start + Duration::from_secs(3), ..Event::run_finished(&run_totals) });
        let events = crate::report::test_support::stamped(events, run_id, shard);
        let mut reporters = artifact_reporters(dir, redactor(), None, &crate::disk::Reserve::none()).unwrap();
        for reporter in &mut reporters {
            for event in &events {
                reporter.on_event(event).unwrap();
            }
            reporter.finish().unwrap();
        }
        dir.to_path_buf()
    }

    /// `root/shard-K` for K in 1..=n, each holding the tasks `run --shard K/n` would run.
    fn shard_runs(root: &Path, tasks: &[TaskOutcome], n: u32) -> Vec<PathBuf> {
        (1..=n)
            .map(|k| {
                let shard = Shard::parse(&format!("{k}/{n}")).unwrap();
                let ids: Vec<&str> = tasks.iter().map(|t| t.task_id.as_str()).collect();
                let mine: Vec<TaskOutcome> =
                    tasks.iter().zip(shard.selects(&ids)).filter(|(_, here)| *here).map(|(t, _)| t.clone()).collect();
                assert!(!mine.is_empty(), "shard {k}/{n} should get a task");
                write_run(&root.join(format!("shard-{k}")), &format!("run-{k}"), Some(&shard.to_string()), &mine)
            })
            .collect()
    }

    fn read_lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// `task.finished` lines by task id, without the fields that name the run or the file.
    fn finished_by_id(lines: &[Value]) -> BTreeMap<String, Value> {
        lines
            .iter()
            .filter(|l| l["type"] == "task.finished")
            .map(|l| {
                let mut l = l.clone();
                for key in ["seq", "run_id", "shard"] {
                    l.as_object_mut().unwrap().remove(key);
                }
                (l["task_id"].as_str().unwrap().to_string(), l)
            })
            .collect()
    }

    fn files(dir: &Path) -> BTreeMap<String, String> {
        match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .map(|e| {
                    let e = e.unwrap();
                    (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap())
                })
                .collect(),
            Err(_) => BTreeMap::new(),
        }
    }

    /// xmllint's complaints about `file` against the Jenkins xunit schema (none when skipped).
    fn junit_complaints(file: &Path) -> Vec<String> {
        crate::report::test_support::xmllint::complaints("jenkins-xunit-junit-10.xsd", file).unwrap_or_default()
    }

    fn assert_valid_junit(file: &Path) {
        assert_eq!(junit_complaints(file), Vec::<String>::new());
    }

    #[test]
    fn run_warnings_of_new_inputs_are_kept_and_old_inputs_without_them_merge() {
        let root = tempfile::tempdir().unwrap();
        let shards = shard_runs(root.path(), &tasks(), 3);
        // Shards 1 and 2 come from a version that writes warnings; shard 3 from one that did not.
        for dir in &shards[..2] {
            let path = dir.join("results.jsonl");
            let mut lines = read_lines(&path);
            lines[0]["warnings"] = serde_json::json!(["commands of 1 task(s) ran unconfined (sandbox = \"off\")"]);
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            std::fs::write(&path, text).unwrap();
        }
        let merged = root.path().join("merged");
        merge(&shards, &merged, redactor()).unwrap();
        let started = &read_lines(&merged.join("results.jsonl"))[0];
        assert_eq!(started["warnings"], serde_json::json!(["commands of 1 task(s) ran unconfined (sandbox = \"off\")"]));
        let md = std::fs::read_to_string(merged.join("summary.md")).unwrap();
        assert!(md.contains("### ⚠️ Warnings\n\n- commands of 1 task(s) ran unconfined"), "{md}");
    }

    #[test]
    fn merging_every_shard_gives_what_one_run_gives() {
        let root = tempfile::tempdir().unwrap();
        let tasks = tasks();
        let single = write_run(&root.path().join("single"), "run-0", None, &tasks);
        let mut shards = shard_runs(root.path(), &tasks, 3);
        // Given out of order, as `shard-*` globs `shard-10` before `shard-2`.
        shards.reverse();
        let merged = root.path().join("merged");

        let summary = merge(&shards, &merged, redactor()).unwrap();
        assert_eq!(summary, MergeSummary { tasks: 9, shards: 3, warnings: Vec::new(), exit_code: exit_codes::NOT_JUDGED });

        let lines = read_lines(&merged.join("results.jsonl"));
        let one = read_lines(&single.join("results.jsonl"));
        let shard_lines: usize = (1..=3).map(|k| read_lines(&root.path().join(format!("shard-{k}/results.jsonl"))).len()).sum();
        assert_eq!(lines.len(), shard_lines - 2 * 3 + 2, "every task line kept, one run.started and run.finished");
        let validator = jsonschema::validator_for(&events_schema()).unwrap();
        for (i, line) in lines.iter().enumerate() {
            assert_eq!(line["seq"], i as u64 + 1);
            assert_eq!(line["run_id"], "run-1-merged");
            assert!(validator.is_valid(line), "{line}");
        }
        let started = &lines[0];
        assert_eq!(started["type"], "run.started");
        assert_eq!(started["task_count"], 9);
        assert!(started.get("shard").is_none(), "the merged run is not a shard");
        let from: Vec<(&str, &str)> = started["merged_from"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["run_id"].as_str().unwrap(), m["shard"].as_str().unwrap()))
            .collect();
        assert_eq!(from, [("run-1", "1/3"), ("run-2", "2/3"), ("run-3", "3/3")], "inputs in shard order");
        let shard_of: Vec<&str> = lines[1..lines.len() - 1].iter().map(|l| l["shard"].as_str().unwrap()).collect();
        assert!(shard_of.windows(2).all(|w| w[0] <= w[1]), "lines follow shard order: {shard_of:?}");

        // The same tasks with the same results, and the same totals.
        assert_eq!(finished_by_id(&lines), finished_by_id(&one));
        let (end, one_end) = (lines.last().unwrap(), one.last().unwrap());
        assert_eq!(end["type"], "run.finished");
        for key in ["counts", "usage", "total_cost_usd", "duration_ms", "exit_code"] {
            assert_eq!(end[key], one_end[key], "{key}");
        }
        assert_eq!(end["counts"]["passed"], 5);

        // The other artifacts are what the single run wrote.
        let junit = std::fs::read_to_string(merged.join("junit.xml")).unwrap();
        assert_eq!(junit, std::fs::read_to_string(single.join("junit.xml")).unwrap());
        assert!(junit.contains("<flakyError message=\"timeout: reset\"") && !junit.contains(SECRET), "{junit}");
        assert_eq!(junit_complaints(&merged.join("junit.xml")), Vec::<String>::new(), "valid JUnit");
        assert_eq!(
            std::fs::read_to_string(merged.join("summary.md")).unwrap(),
            std::fs::read_to_string(single.join("summary.md")).unwrap()
        );
        for sub in ["diffs", "transcripts"] {
            let (got, want) = (files(&merged.join(sub)), files(&single.join(sub)));
            assert_eq!(got.len(), 2, "{sub}: {:?}", got.keys());
            assert_eq!(got, want, "{sub}");
        }
        assert_eq!(finished_by_id(&lines)["task-8"]["structured_output"]["risk"], 2, "structured_output is carried");
        assert_eq!(files(&merged.join("outputs")), files(&single.join("outputs")));
        assert_eq!(files(&merged.join("outputs")).len(), 1);
    }

    #[test]
    fn a_repeated_tasks_attempts_patches_and_transcripts_are_merged_with_it() {
        use crate::events::{Attachments, RepeatVerdict};
        use dracode_results::records::WireRepeat;
        let mut tasks = passing();
        let repeat = |n: u32, status| WireRepeat {
            repeat: n,
            attempt: n,
            status,
            error: None,
            duration_ms: 10,
            repairs: 0,
            check_exit_code: Some(Some(if status == Status::Passed { 0 } else { 1 })),
            reported: n == 2,
            files_changed: vec!["a.txt".into()],
            diff_path: None,
            transcript_path: None,
        };
        let attached = |n: u32| Attachments {
            diff: Some(format!("diff --git a/a.txt b/a.txt\n+attempt {n}\n")),
            transcript: Some(transcript(&format!("attempt {n}"))),
            repeats: Vec::new(),
        };
        tasks[0].record.repeats = vec![repeat(1, Status::Failed), repeat(2, Status::Passed)];
        tasks[0].attachments.repeats = vec![attached(1), attached(2)];
        (tasks[0].record.pass_rate, tasks[0].record.verdict, tasks[0].record.attempts) = (Some(0.5), Some(RepeatVerdict::Flaky), 2);
        let root = tempfile::tempdir().unwrap();
        let single = write_run(&root.path().join("single"), "run-0", None, &tasks);
        let shards = shard_runs(root.path(), &tasks, 2);
        let merged = root.path().join("merged");
        merge(&shards, &merged, redactor()).unwrap();
        let lines = read_lines(&merged.join("results.jsonl"));
        assert_eq!(
            finished_by_id(&lines)["task-0"]["repeats"],
            finished_by_id(&read_lines(&single.join("results.jsonl")))["task-0"]["repeats"]
        );
        for sub in ["diffs", "transcripts"] {
            let (got, want) = (files(&merged.join(sub)), files(&single.join(sub)));
            assert_eq!(
                got.keys().collect::<Vec<_>>(),
                ["task-0@1", "task-0@2"]
                    .map(|n| format!("{n}.{}", if sub == "diffs" { "patch" } else { "json" }))
                    .iter()
                    .collect::<Vec<_>>(),
                "{sub}"
            );
            assert_eq!(got, want, "{sub}");
        }
    }

    fn passing() -> Vec<TaskOutcome> {
        (0..9)
            .map(|i| {
                let mut o = outcome(&format!("task-{i}"), Status::Passed);
                o.record.index = i;
                o
            })
            .collect()
    }

    #[test]
    fn a_missing_shard_is_written_but_fails_and_says_which() {
        let root = tempfile::tempdir().unwrap();
        let shards = shard_runs(root.path(), &passing(), 3);
        let merged = root.path().join("merged");
        let present = [shards[0].clone(), shards[2].clone()];

        let summary = merge(&present, &merged, redactor()).unwrap();
        assert_eq!(summary.exit_code, exit_codes::NOT_JUDGED, "every task passed, but a shard's tasks are unknown");
        assert_eq!(summary.warnings.len(), 1, "{:?}", summary.warnings);
        assert!(summary.warnings[0].starts_with("shard 2/3 is missing"), "{:?}", summary.warnings);
        let lines = read_lines(&merged.join("results.jsonl"));
        assert_eq!(summary.tasks, finished_by_id(&lines).len());
        assert_eq!(lines.last().unwrap()["exit_code"], exit_codes::NOT_JUDGED);
        assert_eq!(lines.last().unwrap()["counts"]["passed"], summary.tasks);
        let md = std::fs::read_to_string(merged.join("summary.md")).unwrap();
        assert!(md.starts_with("## ❌"), "{md}");
        assert!(md.contains("### ⚠️ Merge warnings\n\n- shard 2/3 is missing"), "{md}");
        assert_valid_junit(&merged.join("junit.xml"));
    }

    #[test]
    fn a_shard_that_did_not_finish_fails_the_merge() {
        let root = tempfile::tempdir().unwrap();
        let shards = shard_runs(root.path(), &passing(), 3);
        let results = shards[2].join("results.jsonl");
        let text = std::fs::read_to_string(&results).unwrap();
        let cut: Vec<&str> = text.lines().collect();
        // Killed after its first task: no later task, no run.finished.
        let kept = cut.iter().position(|l| l.contains("\"task.finished\"")).unwrap() + 1;
        std::fs::write(&results, cut[..kept].join("\n") + "\n").unwrap();

        let summary = merge(&shards, &root.path().join("merged"), redactor()).unwrap();
        assert_eq!(summary.exit_code, exit_codes::NOT_JUDGED);
        assert_eq!(summary.warnings.len(), 1, "{:?}", summary.warnings);
        assert!(summary.warnings[0].contains("shard-3 (3/3) did not finish: 1 of"), "{:?}", summary.warnings);
    }

    #[test]
    fn a_shard_given_twice_is_refused_naming_both_folders() {
        let root = tempfile::tempdir().unwrap();
        let mut shards = shard_runs(root.path(), &passing(), 3);
        let again = root.path().join("shard-2-again");
        std::fs::create_dir(&again).unwrap();
        std::fs::copy(shards[1].join("results.jsonl"), again.join("results.jsonl")).unwrap();
        shards.push(again.clone());
        let merged = root.path().join("merged");

        let err = merge(&shards, &merged, redactor()).unwrap_err();
        assert!(matches!(&err, MergeError::DuplicateShard { shard, dirs } if shard == "2/3" && dirs == &[shards[1].clone(), again]));
        let text = err.to_string();
        assert!(text.starts_with("shard 2/3 is in more than one input: ") && text.contains("shard-2-again"), "{text}");
        assert!(!merged.exists(), "nothing is written");
    }

    #[test]
    fn shards_of_different_splits_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let tasks = passing();
        let mut shards = shard_runs(root.path(), &tasks, 3);
        let half = write_run(&root.path().join("half"), "run-h", Some("1/2"), &tasks[..2]);
        shards.push(half);
        let text = merge(&shards, &root.path().join("m"), redactor()).unwrap_err().to_string();
        assert!(text.contains("shard-1 is shard 1/3 but ") && text.contains("half is shard 1/2"), "{text}");

        let plain = write_run(&root.path().join("plain"), "run-p", None, &tasks[..1]);
        let text = merge(&[shards[0].clone(), plain], &root.path().join("m"), redactor()).unwrap_err().to_string();
        assert!(text.contains("plain is not sharded"), "{text}");

        let slice = write_run(&root.path().join("slice"), "run-s", Some("slice:2/3"), &tasks[..1]);
        let text = merge(&[shards[0].clone(), slice], &root.path().join("m"), redactor()).unwrap_err().to_string();
        assert!(text.contains("slice is shard slice:2/3"), "{text}");
    }

    #[test]
    fn unsharded_outputs_merge_and_a_later_run_of_a_task_wins() {
        let root = tempfile::tempdir().unwrap();
        let tasks = passing();
        let a = write_run(&root.path().join("a"), "run-a", None, &tasks[..4]);
        let b = write_run(&root.path().join("b"), "run-b", None, &tasks[4..]);
        let summary = merge(&[a.clone(), b], &root.path().join("ab"), redactor()).unwrap();
        assert_eq!((summary.tasks, summary.exit_code, summary.warnings.len()), (9, 0, 0));

        // A rerun of task-3 (and a new task-4): the later input's attempt replaces the earlier.
        let c = write_run(&root.path().join("c"), "run-c", None, &tasks[3..5]);
        let summary = merge(&[c, a], &root.path().join("ac"), redactor()).unwrap();
        assert_eq!((summary.tasks, summary.exit_code), (5, 0));
        let text = std::fs::read_to_string(root.path().join("ac/results.jsonl")).unwrap();
        assert_eq!(text.matches("\"task.finished\"").count(), 5, "{text}");
    }

    #[test]
    fn a_corrupt_line_is_named_by_file_and_line() {
        let root = tempfile::tempdir().unwrap();
        let shards = shard_runs(root.path(), &passing(), 3);
        let results = shards[1].join("results.jsonl");
        let original = std::fs::read_to_string(&results).unwrap();
        let with_line_3 = |line: &str| {
            let mut lines: Vec<&str> = original.lines().collect();
            lines[2] = line;
            std::fs::write(&results, lines.join("\n") + "\n").unwrap();
            merge(&shards, &root.path().join("merged"), redactor()).unwrap_err().to_string()
        };
        let prefix = format!("{}:3: ", results.display());

        let text = with_line_3(r#"{"type": "task.finished", "seq": 3"#);
        assert!(text.starts_with(&format!("{prefix}not a JSON line: ")), "{text}");
        let text = with_line_3(r#"{"type": "task.finished", "schema_version": 1, "seq": 3}"#);
        assert!(text.starts_with(&format!("{prefix}not a dracode event: missing field")), "{text}");
        let text = with_line_3(r#"{"type": "task.exploded"}"#);
        assert!(text.starts_with(&format!("{prefix}not a dracode event: unknown variant")), "{text}");

        std::fs::write(&results, "").unwrap();
        let text = merge(&shards, &root.path().join("merged"), redactor()).unwrap_err().to_string();
        assert_eq!(text, format!("{}: no run.started line: not the results of a dracode run", results.display()));
        let missing = root.path().join("nowhere");
        let err = merge(std::slice::from_ref(&missing), &root.path().join("merged"), redactor()).unwrap_err();
        assert!(matches!(&err, MergeError::Read { path, .. } if *path == missing.join("results.jsonl")), "{err}");
        let log = root.path().join("shard.log");
        std::fs::write(&log, "a log a glob caught\n").unwrap();
        let err = merge(&[shards[0].clone(), log.clone()], &root.path().join("merged"), redactor()).unwrap_err();
        assert!(matches!(&err, MergeError::NotAFolder { path } if *path == log), "{err}");
    }

    #[test]
    fn the_output_may_not_be_an_input_and_inputs_are_required() {
        let root = tempfile::tempdir().unwrap();
        let shards = shard_runs(root.path(), &passing(), 2);
        let before = std::fs::read_to_string(shards[0].join("results.jsonl")).unwrap();
        let err = merge(&shards, &shards[0], redactor()).unwrap_err();
        assert!(matches!(err, MergeError::OutIsInput { .. }), "{err}");
        assert_eq!(std::fs::read_to_string(shards[0].join("results.jsonl")).unwrap(), before);
        assert!(matches!(merge(&[], &root.path().join("m"), redactor()), Err(MergeError::NoInputs)));
    }

    #[test]
    fn secrets_the_merge_knows_are_masked_too() {
        let root = tempfile::tempdir().unwrap();
        let late = "ghp_known_only_to_the_merge_42";
        let mut tasks = passing();
        tasks[0].record.result = Some(format!("the token is {late}"));
        let shards = shard_runs(root.path(), &tasks, 2);
        let merged = root.path().join("merged");
        merge(&shards, &merged, Arc::new(Redactor::new([late.to_string()]))).unwrap();
        for file in ["results.jsonl", "junit.xml", "summary.md"] {
            let text = std::fs::read_to_string(merged.join(file)).unwrap();
            assert!(!text.contains(late), "{file}: {text}");
        }
        assert!(std::fs::read_to_string(merged.join("results.jsonl")).unwrap().contains("the token is [REDACTED]"));
    }
}
