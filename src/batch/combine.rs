//! `dracode combine OUT`: the passed tasks' patches of a run, applied in manifest order onto one
//! working tree of the base — a fresh `worktree` workspace of the user's repository
//! ([`super::grade`]), removed afterwards — so a nightly learns before the pull request which
//! patches do not combine.
//!
//! A patch that does not apply on top of those before it is taken hunk by hunk: hunks the union
//! holds already (another task made the same change) are agreement — the change stays in the
//! union once and the report names the tasks that agreed —, the rest are applied. A patch with
//! a hunk that neither applies nor is there already is a conflict: it is skipped and
//! reported with the files it shares with the patches already applied (and those tasks). The
//! union is written to `OUT/combined.patch`, the report to `OUT/combine.json` and
//! `OUT/combine.md`; `--check` runs a command on the union (sandboxed like a task's check);
//! `--branch NAME` commits the union onto a new branch of the user's repository — the one thing
//! combine writes there, and only when the check (if any) passed.

mod hunks;

use super::grade;
use super::options::RunOptions;
use super::spec::{CheckSpec, TaskSpec};
use super::task::Shared;
use super::workspace::Workspace;
use super::world::World;
use crate::events::{CheckRecord, Status};
use crate::manifest::Isolation;
use crate::report::read_back::{self, FinishedTask as RecordedTask, OutputFolder};
use dracode_secrets::Redactor;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What `dracode combine` is asked to do.
#[derive(Debug, Clone)]
pub struct CombineOptions {
    /// The output folder of the run.
    pub out: PathBuf,
    /// A folder in the user's repository.
    pub repo: PathBuf,
    /// The commit-ish to combine onto (default: the commit the tasks started from).
    pub base: Option<String>,
    /// A command run on the union.
    pub check: Option<String>,
    /// Its time limit.
    pub check_timeout: Duration,
    /// The branch to commit the union onto.
    pub branch: Option<String>,
    /// Move `branch` when it exists already.
    pub force: bool,
    /// The folder the run's manifests are read from (dracode's current folder).
    pub cwd: PathBuf,
}

/// A patch that did not apply on top of the ones before it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Conflict {
    /// The task whose patch was skipped.
    pub task_id: String,
    /// The files it changes that an applied patch changed too.
    pub files: Vec<String>,
    /// The applied tasks that changed those files, in manifest order.
    pub with: Vec<String>,
    /// git's reason.
    pub message: String,
}

/// A patch whose changes the union held already, in part or whole: two tasks made the same fix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Agreement {
    /// The task whose patch made a change already applied (the rest of its patch is applied).
    pub task_id: String,
    /// The files where it made the same change.
    pub files: Vec<String>,
    /// The applied tasks that changed those files, in manifest order.
    pub with: Vec<String>,
}

/// The branch the union was committed onto.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BranchRecord {
    /// Its name.
    pub name: String,
    /// The commit.
    pub commit: String,
}

/// What `combine.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CombineReport {
    /// The combined run's `run_id`.
    pub run_id: String,
    /// The commit the patches were applied to.
    pub base_commit: String,
    /// The tasks whose patches are in the union, in the order applied.
    pub applied: Vec<String>,
    /// The tasks whose patches were skipped.
    pub conflicts: Vec<Conflict>,
    /// The applied tasks that made a change another applied task had made: in the union once.
    pub agreed: Vec<Agreement>,
    /// Files more than one passed task changed, with those tasks (whether or not they combine).
    pub overlaps: BTreeMap<String, Vec<String>>,
    /// The files the union changes.
    pub files_changed: Vec<String>,
    /// `combined.patch` when the union changes anything.
    pub patch_path: Option<String>,
    /// The check run on the union.
    pub check: Option<CheckRecord>,
    /// The branch made with `--branch`.
    pub branch: Option<BranchRecord>,
    /// What the user should know about how the check ran (absent when nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// 0: everything combined (and the check passed); 1: a conflict or a failed check.
    pub exit_code: i32,
}

/// Why combine could not run (exit 2) or could not write its report (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum CombineError {
    /// Bad input: the folder, the repository, the base or the branch.
    #[error("{0}")]
    Input(String),
    /// A report file could not be written.
    #[error("{0}")]
    Write(String),
}

/// Combines the run in `opts.out`; `env` is dracode's environment (for the check's).
pub async fn combine(
    opts: &CombineOptions,
    env: &BTreeMap<String, String>,
    redactor: &Arc<Redactor>,
) -> Result<CombineReport, CombineError> {
    let input = |e: String| CombineError::Input(e);
    let run = dracode_results::output_folder::read(&opts.out).map_err(|e| input(e.to_string()))?;
    let passed: Vec<&RecordedTask> =
        run.tasks.iter().filter(|t| t.outcome.status == Status::Passed && t.diff.as_deref().is_some_and(|d| !d.is_empty())).collect();
    let root = repository_root(&opts.repo).map_err(input)?;
    let base = base_of(opts.base.as_deref(), &passed).map_err(input)?;
    if let Some(branch) = &opts.branch {
        refuse_branch(&root, branch, opts.force).map_err(input)?;
    }
    let grader = match &opts.check {
        Some(_) => Some(Grader::of(opts, env, redactor, &run, &passed).await?),
        None => None,
    };
    let carried = grader.as_ref().and_then(Grader::carried);
    super::owned_dir::sweep_killed_runs();
    let workspace = Workspace::prepare_carrying(&Default::default(), &root, Isolation::Worktree, &base, None, carried.as_deref())
        .map_err(|e| input(format!("base {base:?}: {e}")))?;
    let mut report = CombineReport {
        run_id: run.run_id.clone(),
        base_commit: workspace.base_commit.clone().unwrap_or_default(),
        applied: Vec::new(),
        conflicts: Vec::new(),
        agreed: Vec::new(),
        overlaps: read_back::overlaps(passed.iter().map(|t| (t.task_id.as_str(), &t.outcome))),
        files_changed: Vec::new(),
        patch_path: None,
        check: None,
        branch: None,
        warnings: grader.iter().filter_map(|g| g.warning.clone()).collect(),
        exit_code: 0,
    };
    apply_all(&workspace, &passed, &mut report);
    let changes = workspace.changes().map_err(|e| CombineError::Write(format!("cannot compute the combined changes: {e}")))?;
    if let Some(changes) = &changes {
        report.files_changed.clone_from(&changes.files);
        write(&opts.out.join(PATCH_FILE), &changes.patch)?;
        report.patch_path = Some(PATCH_FILE.to_string());
    }
    let mut unrunnable = None;
    if let (Some(command), Some(grader)) = (&opts.check, &grader) {
        let (record, why) = grader.check(command, opts.check_timeout, &workspace).await;
        (report.check, unrunnable) = (Some(record), why);
    }
    let check_passed = report.check.as_ref().is_none_or(|c| c.exit_code == Some(0));
    report.exit_code = match (&unrunnable, report.conflicts.is_empty() && check_passed) {
        (Some(_), _) => dracode_results::exit_codes::NOT_JUDGED,
        (None, true) => 0,
        (None, false) => 1,
    };
    if let (Some(name), true, Some(_)) = (&opts.branch, check_passed, &changes) {
        let message = commit_message(&report);
        let commit = workspace.commit_onto(name, &message, opts.force).map_err(|e| CombineError::Write(format!("branch {name}: {e}")))?;
        report.branch = Some(BranchRecord { name: name.clone(), commit });
    }
    write_reports(&opts.out, &report, redactor)?;
    Ok(report)
}

/// How `--check` runs: as the first combined task's check runs in `dracode run` — its sandbox,
/// network, `env` and `read_paths` from the run's manifests as they are now, after its `[setup]`
/// ran (the outputs carried into the union's working tree), in a TMPDIR and HOME of its own
/// ([`super::task::run_check_in`]).
struct Grader {
    spec: TaskSpec,
    shared: Shared,
    /// Why the check does not run as the first task's (its manifests cannot be read), if so.
    warning: Option<String>,
    /// Kept for the whole combine: a dropped sender would read as an interrupt.
    _interrupt: tokio::sync::watch::Sender<bool>,
}

impl Grader {
    /// The grader of the union of `passed` (the run read from `opts.out`); the error is for the
    /// user (exit 2): the manifests cannot be read, or their setup failed.
    async fn of(
        opts: &CombineOptions,
        env: &BTreeMap<String, String>,
        redactor: &Arc<Redactor>,
        run: &OutputFolder,
        passed: &[&RecordedTask],
    ) -> Result<Grader, CombineError> {
        let (spec, warning) = spec_for_check(opts, env, run, passed)?;
        let (interrupt, cancel) = tokio::sync::watch::channel(false);
        let shared = Shared::without_model(env, redactor.clone(), &opts.out, cancel, run.run_id.clone());
        let emitter = crate::events::Emitter::discard();
        let setups = super::setup::run_all(&[&spec], &shared, &emitter).await.map_err(|e| CombineError::Input(e.to_string()))?;
        let _ = shared.setups.set(setups);
        Ok(Grader { spec, shared, warning, _interrupt: interrupt })
    }

    /// What the setup made, to carry into the union's working tree.
    fn carried(&self) -> Option<Arc<super::workspace::Carried>> {
        self.shared.setups.get().and_then(|setups| setups.carried_for(&self.spec))
    }

    /// Runs `command` on the union in `workspace`; its record, and why it could not run (if so).
    async fn check(&self, command: &str, timeout: Duration, workspace: &Workspace) -> (CheckRecord, Option<String>) {
        let check = CheckSpec { command: command.to_string(), before: false, timeout, repairs: 0 };
        let place = World::place_of(workspace);
        let log = Arc::new(dracode_sandbox::egress::NetworkLog::new(|_| {}));
        let checked = super::task::run_check_in(&check, &self.spec, &place, &self.shared, log, None).await;
        self.shared.removals.wait().await;
        match checked {
            Ok(checked) => checked,
            Err(e) => {
                let record = CheckRecord { command: command.to_string(), output_tail: e.message.clone(), ..Default::default() };
                (record, Some(e.message))
            }
        }
    }
}

/// The spec of the first task of `passed` in the run's manifests (planned as `dracode run`
/// would now, from the current folder); when they cannot be read from here, an ad-hoc task's
/// (the default sandbox, no network, no setup), with a warning that says so.
fn spec_for_check(
    opts: &CombineOptions,
    env: &BTreeMap<String, String>,
    run: &OutputFolder,
    passed: &[&RecordedTask],
) -> Result<(TaskSpec, Option<String>), CombineError> {
    let about = |why: String| format!("--check: {why} (the check runs as the first combined task's, from the run's manifests)");
    let first = passed.first().map(|t| t.task_id.as_str());
    let manifests: Vec<PathBuf> = run.manifests.iter().filter(|m| m.as_str() != "--task").map(PathBuf::from).collect();
    let found = if manifests.is_empty() {
        Err(about(format!("{} names no manifest", opts.out.display())))
    } else {
        planned(opts, env, RunOptions { manifests, ..Default::default() }).map_err(|e| about(e.to_string())).and_then(|tasks| {
            let spec = tasks.into_iter().find(|spec| first.is_none_or(|id| spec.id == id));
            spec.ok_or_else(|| about("the run's manifests hold none of its passed tasks".to_string()))
        })
    };
    found.map(|spec| (spec, None)).or_else(|why| {
        let adhoc = RunOptions { tasks: vec!["combine".into()], ..Default::default() };
        let tasks = planned(opts, env, adhoc).map_err(|e| CombineError::Input(e.to_string()))?;
        let warning = format!("{why}; it runs in the default sandbox, without a setup");
        tasks.into_iter().next().map(|spec| (spec, Some(warning))).ok_or(CombineError::Input(why))
    })
}

/// The tasks `args` (with `--out` set to the combined run's folder) plans, from `opts.cwd`.
fn planned(opts: &CombineOptions, env: &BTreeMap<String, String>, args: RunOptions) -> Result<Vec<TaskSpec>, super::plan::PlanError> {
    let args = RunOptions { out: opts.out.clone(), ..args };
    super::plan::plan(&args, &opts.cwd, env).map(|plan| plan.tasks)
}

/// The union's patch, in the output folder.
pub const PATCH_FILE: &str = "combined.patch";

/// Applies each passed task's patch in turn; one that does not apply whole is applied but for
/// the hunks already there (an [`Agreement`]), else it is a [`Conflict`].
fn apply_all(workspace: &Workspace, passed: &[&RecordedTask], report: &mut CombineReport) {
    let mut touched: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for task in passed {
        let outcome = &task.outcome;
        let patch = task.diff.as_deref().unwrap_or_default();
        let id = task.task_id.clone();
        let (changed, same) = match grade::apply(workspace, patch) {
            Ok(()) => (outcome.files_changed.clone(), Vec::new()),
            Err(message) => match apply_agreeing(workspace, patch) {
                Some(split) => split,
                None => {
                    let files: Vec<String> = outcome.files_changed.iter().filter(|f| touched.contains_key(f.as_str())).cloned().collect();
                    let with = tasks_on(&touched, &files);
                    report.conflicts.push(Conflict { task_id: id, files, with, message: message.to_string() });
                    continue;
                }
            },
        };
        if !same.is_empty() {
            let with = tasks_on(&touched, &same);
            report.agreed.push(Agreement { task_id: id.clone(), files: same, with });
        }
        for file in changed {
            touched.entry(file).or_default().push(id.clone());
        }
        report.applied.push(id);
    }
}

/// The tasks in `touched` that changed any of `files`, once each, in the order they were applied.
fn tasks_on(touched: &BTreeMap<String, Vec<String>>, files: &[String]) -> Vec<String> {
    let mut with: Vec<String> = Vec::new();
    for id in files.iter().filter_map(|f| touched.get(f)).flatten() {
        if !with.contains(id) {
            with.push(id.clone());
        }
    }
    with
}

/// `patch` hunk by hunk: each hunk either applies or is in the working tree already (it reverses
/// cleanly). When every hunk is one or the other and at least one is there already, applies the
/// rest and returns (the files it changed, the files where it agreed); else changes nothing.
fn apply_agreeing(workspace: &Workspace, patch: &str) -> Option<(Vec<String>, Vec<String>)> {
    let pieces = hunks::split(patch);
    let (mut rest, mut same) = (Vec::new(), Vec::new());
    for piece in &pieces {
        let text = piece.patch();
        if grade::git_apply(workspace, &text, &["--check"]).is_ok() {
            rest.push(piece);
        } else if grade::git_apply(workspace, &text, &["--check", "--reverse"]).is_ok() {
            same.push(piece.file.clone());
        } else {
            return None;
        }
    }
    if same.is_empty() || (!rest.is_empty() && grade::apply(workspace, &hunks::join(&rest)).is_err()) {
        return None;
    }
    let mut changed: Vec<String> = rest.iter().map(|p| p.file.clone()).collect();
    changed.dedup();
    same.dedup();
    Some((changed, same))
}

/// The root of the git repository holding `dir`.
fn repository_root(dir: &Path) -> Result<PathBuf, String> {
    let repo = git2::Repository::discover(dir).map_err(|e| format!("{} is not in a git repository: {}", dir.display(), e.message()))?;
    repo.workdir().map(Path::to_path_buf).ok_or_else(|| format!("{}: a bare repository has no working tree", dir.display()))
}

/// `--base`, else the one commit the passed tasks started from, else `HEAD`.
fn base_of(given: Option<&str>, passed: &[&RecordedTask]) -> Result<String, String> {
    if let Some(base) = given {
        return Ok(base.to_string());
    }
    let mut bases: Vec<&str> = passed.iter().filter_map(|t| t.base_commit.as_deref()).collect();
    bases.sort_unstable();
    bases.dedup();
    match bases.as_slice() {
        [] => Ok("HEAD".to_string()),
        [one] => Ok((*one).to_string()),
        many => Err(format!("the tasks started from different commits ({}): choose one with --base", many.join(", "))),
    }
}

/// An existing branch `name` is refused unless `force`; so is a name git does not allow.
fn refuse_branch(root: &Path, name: &str, force: bool) -> Result<(), String> {
    if !git2::Branch::name_is_valid(name).unwrap_or(false) {
        return Err(format!("--branch {name:?} is not a valid branch name"));
    }
    let repo = git2::Repository::open(root).map_err(|e| e.message().to_string())?;
    if !force && repo.find_branch(name, git2::BranchType::Local).is_ok() {
        return Err(format!("branch {name:?} exists already in {}: choose another name, or pass --force to move it", root.display()));
    }
    Ok(())
}

fn commit_message(report: &CombineReport) -> String {
    let mut message = format!("dracode combine: {} task(s) of run {}\n\n", report.applied.len(), report.run_id);
    for id in &report.applied {
        let _ = writeln!(message, "- {id}");
    }
    for agreement in &report.agreed {
        let _ = writeln!(
            message,
            "- {} made the same change as {} to {}",
            agreement.task_id,
            agreement.with.join(", "),
            agreement.files.join(", ")
        );
    }
    for conflict in &report.conflicts {
        let _ = writeln!(message, "- skipped {} (conflicts on {})", conflict.task_id, conflict.files.join(", "));
    }
    let mut trailers: Vec<(&str, &str)> = report.applied.iter().map(|id| (super::trailers::TASK, id.as_str())).collect();
    trailers.push((super::trailers::RUN, &report.run_id));
    super::trailers::append(&message, &trailers)
}

fn write(path: &Path, text: &str) -> Result<(), CombineError> {
    crate::report::write_atomic(path, text.as_bytes()).map_err(|e| CombineError::Write(format!("{}: {e}", path.display())))
}

/// `combine.json` and `combine.md` in the output folder.
fn write_reports(out: &Path, report: &CombineReport, redactor: &Redactor) -> Result<(), CombineError> {
    let json = serde_json::to_string_pretty(report).map_err(|e| CombineError::Write(e.to_string()))?;
    write(&out.join("combine.json"), &redactor.redact(&json))?;
    write(&out.join("combine.md"), &redactor.redact(&markdown(report)))
}

/// The report for people: `combine.md`, also appended to `$GITHUB_STEP_SUMMARY`.
pub fn markdown(report: &CombineReport) -> String {
    let mut md = String::from("## dracode combine\n\n");
    let short = &report.base_commit[..report.base_commit.len().min(12)];
    let _ = writeln!(md, "{} patch(es) combined onto `{short}`: {}.\n", report.applied.len(), ids(&report.applied));
    if !report.conflicts.is_empty() {
        md.push_str("### Conflicts (skipped)\n\n| Task | Files | Conflicts with |\n|---|---|---|\n");
        for c in &report.conflicts {
            let _ = writeln!(md, "| `{}` | {} | {} |", c.task_id, code_list(&c.files), ids(&c.with));
        }
        md.push('\n');
    }
    if !report.agreed.is_empty() {
        md.push_str("### Agreements (in the union once)\n\n");
        for a in &report.agreed {
            let _ =
                writeln!(md, "- {} made the same change as {} to {}", ids(std::slice::from_ref(&a.task_id)), ids(&a.with), ids(&a.files));
        }
        md.push('\n');
    }
    if let Some(check) = &report.check {
        let verdict = if check.exit_code == Some(0) { "passed" } else { "failed" };
        let code = check.exit_code.map_or("none".to_string(), |c| c.to_string());
        let _ = writeln!(md, "Check `{}` on the union: **{verdict}** (exit {code}).\n", check.command);
        if check.exit_code != Some(0) {
            let _ = writeln!(md, "```\n{}\n```\n", check.output_tail.trim_end());
        }
    }
    if let Some(branch) = &report.branch {
        let _ = writeln!(md, "Committed onto branch `{}` ({}).\n", branch.name, &branch.commit[..branch.commit.len().min(12)]);
    }
    md
}

fn ids(list: &[String]) -> String {
    if list.is_empty() { "none".to_string() } else { list.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>().join(", ") }
}

fn code_list(files: &[String]) -> String {
    if files.is_empty() { "(no file in common: the patch does not apply to the base)".to_string() } else { ids(files) }
}
