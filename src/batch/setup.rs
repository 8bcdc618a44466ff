//! The batch's setup step (`[setup]`): a command run once, before any agent, for every group of
//! tasks that start from the same place — the same manifest, repository, base and isolation.
//!
//! It runs at the root of a workspace made like its tasks' and confined like their checks
//! (the first task's sandbox, limits, `read_paths` and environment, with the setup's own
//! `network` and `env`, and a `HOME` of its own: [`dracode_sandbox::home_view`]). What it made
//! there — new folders whole, new files in folders that were there
//! ([`Inventory::made_since`]) — is copied into every task's workspace before the task starts
//! ([`super::carry`]), left out of the task's patch, and kept from the agent's reach as any
//! prepared file is (the sweep before a check). Files of the base it changed are not
//! carried: each task starts from the base. With `isolation = "none"` it runs in the
//! repository itself, where its outputs stay.
//!
//! A setup that fails (or cannot start) ends the batch before any agent: every task ends
//! `error`, kind `setup` (exit 5). With network, cargo downloads into the setup's own cargo
//! home; the tasks then read it (read-only) as their `CARGO_HOME`.

use super::setups::{Done, Key, Setups};
use super::spec::{SetupSpec, TaskSpec};
use super::task::{self, Shared};
use super::unrecorded::Inventory;
use super::workspace::{Carried, Workspace};
use crate::events::{Emitter, Header, WireEvent, millis};
use crate::manifest::Isolation;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// At most this many paths are named in `setup.finished`'s `outputs` and `not_carried`.
const LISTED: usize = 100;

/// Why the setups ended the batch before any agent ran (every task then ends `error`, kind
/// `setup`).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The run was interrupted before the next setup started.
    #[error("the run was interrupted before its setup ended")]
    Interrupted,
    /// A setup failed, or could not start.
    #[error("the setup `{command}` failed: {why}; no agent ran")]
    Failed {
        /// The setup's command.
        command: String,
        /// What went wrong.
        why: SetupFailure,
    },
}

/// What went wrong with one setup (the `error` of its `setup.finished`).
#[derive(Debug, thiserror::Error)]
pub enum SetupFailure {
    /// Its workspace could not be made.
    #[error("cannot make the setup's workspace: {0}")]
    Workspace(#[source] std::io::Error),
    /// Its confinement (sandbox, temporary folder, home) could not be made: why.
    #[error("{0}")]
    Confinement(String),
    /// The run was interrupted while it ran.
    #[error("the run was interrupted")]
    Interrupted,
    /// Its command did not exit 0: how it ended, or why it could not run.
    #[error("{0}")]
    Command(String),
    /// What it made could not be listed.
    #[error("cannot list what it made: {0}")]
    Listing(#[source] std::io::Error),
}

/// Runs the setup of every group of `tasks` that has one, one after another; the first that
/// fails ends it: `Err` says why (every task then ends `error`, kind `setup`). `tasks` are
/// those that will run: a group whose tasks were all reused from the cache, refused by the
/// provider pre-flight or left to other shards has no setup.
pub async fn run_all(tasks: &[&TaskSpec], shared: &Shared, emitter: &Emitter) -> Result<Setups, SetupError> {
    let mut setups = Setups::default();
    let mut groups: Vec<(Key, &TaskSpec, &SetupSpec, usize)> = Vec::new();
    for &spec in tasks {
        let (Some(key), Some(setup)) = (Key::of(spec), spec.setup.as_deref()) else { continue };
        match groups.iter_mut().find(|(k, ..)| *k == key) {
            Some(group) => group.3 += 1,
            None => groups.push((key, spec, setup, 1)),
        }
    }
    for (key, first, setup, count) in groups {
        if *shared.cancel.borrow() {
            return Err(SetupError::Interrupted);
        }
        let done = run_one(setup, first, count, shared, emitter).await?;
        setups.done.insert(key, done);
    }
    Ok(setups)
}

/// Runs `setup` for the group of `count` tasks whose first is `first`, and reports it.
async fn run_one(setup: &SetupSpec, first: &TaskSpec, count: usize, shared: &Shared, emitter: &Emitter) -> Result<Done, SetupError> {
    let spec = setup.as_task(first);
    let started = Instant::now();
    let ws = spec.workspace.clone();
    let made = blocking(move || Workspace::prepare(&ws.repo, ws.isolation, &ws.base, None).map_err(std::io::Error::other)).await;
    let workspace = match made {
        Ok(workspace) => workspace,
        Err(e) => return Err(failed(setup, emitter, started, Ran::default(), SetupFailure::Workspace(e))),
    };
    emitter.emit(WireEvent::SetupStarted {
        header: Header::unstamped(None),
        command: setup.command.clone(),
        // The folder itself, not the manifest-relative way to it (`./.`).
        repo: spec
            .workspace
            .repo
            .canonicalize()
            .unwrap_or_else(|_| dracode_input::lexical(&spec.workspace.repo))
            .to_string_lossy()
            .into_owned(),
        base_commit: workspace.base_commit.clone(),
        tasks: count,
    });
    let kit = match task::command_kit(&spec, &workspace.root.clone(), workspace.sandbox_paths(), shared, emitter).await {
        Ok(kit) => kit.with_home_view(&spec).map_err(|e| e.message),
        Err(e) => Err(e.message),
    };
    let kit = match kit {
        Ok(kit) => kit,
        Err(why) => return Err(failed(setup, emitter, started, Ran::default(), SetupFailure::Confinement(why))),
    };
    let root = workspace.root.clone();
    let before = inventory(&root).await;
    let record = run_command(setup, &root, &kit, shared).await;
    let ran = Ran { exit_code: record.exit_code, output_tail: record.output_tail.clone(), ..Ran::default() };
    if record.exit_code != Some(0) {
        let interrupted = *shared.cancel.borrow();
        let why = match super::check::could_not_run(&record, Some(&kit.confine)) {
            _ if interrupted => SetupFailure::Interrupted,
            Some(why) => SetupFailure::Command(why),
            None => SetupFailure::Command(with_failure_line(exit_words(record.exit_code), &record.output_tail)),
        };
        return Err(failed(setup, emitter, started, ran, why));
    }
    let made = match before {
        Ok(before) => blocking(move || before.made_since(&root)).await,
        Err(e) => Err(e),
    };
    let made = match made {
        Ok(made) => made,
        Err(e) => return Err(failed(setup, emitter, started, ran, SetupFailure::Listing(e))),
    };
    let in_place = spec.workspace.isolation == Isolation::None;
    let carried = Carried { from: (!in_place).then(|| workspace.root.clone()), paths: made.added.clone() };
    let ran = Ran { outputs: made.added, not_carried: made.changed, ..ran };
    finish(setup, emitter, started, ran, None);
    let (env, readable) = cargo_home_for_tasks(&kit);
    let kept = (!in_place).then_some(workspace);
    Ok(Done { carried: Arc::new(carried), env, readable, _kept: Mutex::new(Box::new((kept, kit))) })
}

/// The inventory of `root` as the setup found it, taken off the async workers.
async fn inventory(root: &Path) -> std::io::Result<Inventory> {
    let root = root.to_path_buf();
    blocking(move || Inventory::take(&root)).await
}

/// Runs `work` (file-system work that blocks) off the async workers; a panic is an error.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> std::io::Result<T> + Send + 'static) -> std::io::Result<T> {
    tokio::task::spawn_blocking(work).await.map_err(|e| std::io::Error::other(format!("panicked: {e}")))?
}

/// Runs the setup's command in `root`, confined like a check, and sweeps what escaped.
async fn run_command(setup: &SetupSpec, root: &Path, kit: &task::CommandKit, shared: &Shared) -> crate::events::CheckRecord {
    let sweep = dracode_sandbox::sweep::TaskSweep::register(vec![root.to_path_buf(), kit.temp.tmp()]);
    let tmp = kit.temp.tmp();
    let ctx = super::check::CheckContext {
        env: &kit.env,
        tmp_dir: Some(&tmp),
        confine: Some(&kit.confine),
        redactor: &shared.redactor,
        reports: None,
    };
    let mut cancel = shared.cancel.clone();
    let record = {
        let _running = kit.network_log.running(&setup.command, dracode_sandbox::egress::Phase::Setup);
        // An interrupt ends the setup at once: dropping the run kills its process group.
        tokio::select! {
            record = super::check::run(&setup.command, root, setup.timeout, ctx) => record,
            _ = cancel.wait_for(|c| *c) => crate::events::CheckRecord {
                command: setup.command.clone(),
                exit_code: None,
                output_tail: "[interrupted: the run was cancelled]".into(),
                ..Default::default()
            },
        }
    };
    if let Err(e) = sweep.sweep() {
        tracing::warn!("after the setup: {e}");
    }
    record
}

/// What a setup's command did, for `setup.finished`.
#[derive(Default)]
struct Ran {
    exit_code: Option<i32>,
    output_tail: String,
    outputs: Vec<String>,
    not_carried: Vec<String>,
}

/// Emits `setup.finished` of a setup that failed; returns the error the tasks are given.
fn failed(setup: &SetupSpec, emitter: &Emitter, started: Instant, ran: Ran, why: SetupFailure) -> SetupError {
    finish(setup, emitter, started, ran, Some(why.to_string()));
    SetupError::Failed { command: setup.command.clone(), why }
}

/// Emits `setup.finished` (`error`: why it failed).
fn finish(setup: &SetupSpec, emitter: &Emitter, started: Instant, ran: Ran, error: Option<String>) {
    let listed = |mut paths: Vec<String>| {
        if paths.len() > LISTED {
            let more = paths.len() - LISTED;
            paths.truncate(LISTED);
            paths.push(format!("... and {more} more"));
        }
        paths
    };
    emitter.emit(WireEvent::SetupFinished {
        header: Header::unstamped(None),
        command: setup.command.clone(),
        exit_code: ran.exit_code,
        duration_ms: millis(started.elapsed()),
        output_tail: ran.output_tail,
        outputs: listed(ran.outputs),
        not_carried: listed(ran.not_carried),
        error,
    });
}

/// How a command that did not exit 0 ended, in words.
fn exit_words(code: Option<i32>) -> String {
    match code {
        Some(code) => format!("it exited {code}"),
        None => "it was killed or timed out".into(),
    }
}

/// `why` followed by the line of `output` that says why, as a failed check's reason shows it
/// ([`crate::report::failure_line`]): the build backend's error, not pip's closing notice.
fn with_failure_line(why: String, output: &str) -> String {
    match crate::report::failure_line(output) {
        Some(line) => format!("{why}: {line}"),
        None => why,
    }
}

/// The setup's own cargo home, when cargo downloaded into it (a setup with network): the
/// variable that points the tasks' cargo at it, and the folder they may read.
fn cargo_home_for_tasks(kit: &task::CommandKit) -> (BTreeMap<String, String>, Vec<PathBuf>) {
    match kit.env.get("CARGO_HOME").map(PathBuf::from).filter(|home| home.starts_with(kit.temp.tmp())) {
        Some(home) => (BTreeMap::from([("CARGO_HOME".to_string(), home.display().to_string())]), vec![home]),
        None => (BTreeMap::new(), Vec::new()),
    }
}
