//! Running one task: each attempt is prepare → agent (→ check) → [`judge`] → finalize, retried as
//! the task's spec says — and exactly one outcome, whatever happens.

use super::check::CheckContext;
use super::judge::{AgentPhase, Evidence, failure_status, judge};
use super::owned_dir::OwnedDir;
use super::spec::{CheckSpec, TaskSpec};
use super::workspace::{SandboxPaths, Workspace, WorkspaceError};
use crate::agent::{Agent, AgentEnd, AgentState, RunMeter};
use crate::events::{
    Activity, CheckRecord, Emitter, Event, FailureKind, Header, RetryScope, Status, TaskError, TaskOutcome, Transcript, WireEvent, millis,
};
use crate::external::ExternalAgent;
use crate::external::calls::Answerer;
use crate::tools::{Registry, ToolContext};
use dracode_llm::governor::{Gate, Governed, Limits};
use dracode_llm::http::HttpClient;
use dracode_llm::preset::TaskBinding;
use dracode_llm::prices::PriceTable;
use dracode_llm::recording::Recorder;
use dracode_llm::registry;
use dracode_llm::{ErrorKind, Message, Provider, Usage};
use dracode_mcp::McpScope;
use dracode_results::records::{WireAttempt, WireCheckRound};
use dracode_sandbox::Policy;
use dracode_sandbox::egress::{EgressProxy, NetworkLog};
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Bytes of command output kept for the model (head and tail).
pub const COMMAND_OUTPUT_LIMIT: usize = 30 * 1024;
/// No single command may run longer than this, whatever the model asks.
pub const MAX_COMMAND_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What every task of a run shares.
pub struct Shared {
    /// Prices for cost.
    pub prices: PriceTable,
    /// Masks secrets.
    pub redactor: Arc<Redactor>,
    /// The HTTP client.
    pub http: HttpClient,
    /// dracode's own environment, from which each task's commands get the allowlisted
    /// variables and the ones its `env_passthrough` names ([`dracode_secrets::child_env`]).
    pub process_env: Arc<BTreeMap<String, String>>,
    /// `--record DIR`.
    pub record: Option<PathBuf>,
    /// Becomes `true` when the run is interrupted.
    pub cancel: watch::Receiver<bool>,
    /// The run's token and cost budget.
    pub run_meter: RunMeter,
    /// The run's id (in branch names).
    pub run_id: String,
    /// One gate per provider name, shared by all tasks.
    pub gates: std::sync::Mutex<BTreeMap<String, Arc<Gate>>>,
    /// The run's `scope = "run"` MCP servers, set by the runner before the first task.
    pub run_mcp: std::sync::OnceLock<dracode_mcp::RunServers>,
    /// What the batch's setup steps made, set by the runner before the first task.
    pub setups: std::sync::OnceLock<super::setups::Setups>,
    /// What every task's commands must not read: `--out`, `$RUNNER_TEMP`.
    pub paths: SharedPaths,
    /// What the run's `copy` workspaces are copied from, made once per source.
    pub stores: Arc<super::run_stores::RunStores>,
    /// The task folders being removed, waited for before `run.finished`.
    pub removals: super::owned_dir::Removals,
}

impl Shared {
    /// What a run that calls no model shares (`regrade`, `combine --check`): dracode's
    /// environment, the redactor, `--out` (hidden from commands), the run's interrupt and id.
    pub fn without_model(
        process_env: &BTreeMap<String, String>,
        redactor: Arc<Redactor>,
        out: &Path,
        cancel: watch::Receiver<bool>,
        run_id: String,
    ) -> Shared {
        Shared {
            prices: PriceTable::default(),
            redactor,
            http: HttpClient::default(),
            process_env: Arc::new(process_env.clone()),
            record: None,
            cancel,
            run_meter: RunMeter::new(None, None),
            run_id,
            gates: Default::default(),
            run_mcp: Default::default(),
            setups: Default::default(),
            paths: SharedPaths::new(Some(out), process_env),
            stores: Default::default(),
            removals: Default::default(),
        }
    }

    /// The gate of provider `name`, made on first use.
    fn gate(&self, name: &str, limits: Limits) -> Arc<Gate> {
        let mut gates = self.gates.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        gates.entry(name.to_string()).or_insert_with(|| Gate::new(limits)).clone()
    }
}

/// Runs `spec` to its end — `repeat` independent times, each retried as its `retry` says, each
/// attempt in a fresh workspace — and reports it with exactly one `task.finished`.
pub async fn run(spec: &TaskSpec, shared: &Shared, emitter: &Emitter) -> TaskOutcome {
    let started = Instant::now();
    let mut next_attempt = 1;
    let mut repeats: Vec<(TaskOutcome, u32)> = Vec::new();
    for _ in 0..spec.repeat.count.max(1) {
        let (outcome, last_attempt) = run_retried(spec, shared, emitter, next_attempt).await;
        next_attempt = last_attempt + 1;
        repeats.push((outcome, last_attempt));
        if *shared.cancel.borrow() {
            break;
        }
    }
    let last_emitter = emitter.task(&spec.id, next_attempt - 1);
    let outcome = if spec.repeat.count > 1 {
        super::repeat::summarise(repeats, spec.repeat)
    } else {
        repeats.pop().map(|(outcome, _)| outcome).unwrap_or_else(|| spec.outcome(Status::Cancelled))
    };
    finish(outcome, started, &last_emitter)
}

/// One independent run of `spec`, its attempts numbered from `first_attempt`, retried as its
/// `retry` says; returns its outcome (usage summed over its attempts) and its last attempt's
/// number.
async fn run_retried(spec: &TaskSpec, shared: &Shared, emitter: &Emitter, first_attempt: u32) -> (TaskOutcome, u32) {
    let started = Instant::now();
    let max_attempts = 1 + spec.retry.retries;
    let mut prior: Vec<TaskOutcome> = Vec::new();
    let mut tries = 1;
    loop {
        let attempt = first_attempt + tries - 1;
        let attempt_emitter = emitter.task(&spec.id, attempt);
        let outcome = run_attempt(spec, shared, &attempt_emitter).await;
        let retryable = spec.retry.retry_on.contains(&outcome.record.status)
            && !outcome.record.error.as_ref().is_some_and(|e| NEVER_RETRY.contains(&e.kind))
            && !*shared.cancel.borrow();
        if tries >= max_attempts || !retryable {
            return (stamp(combine(outcome, prior, tries), started), attempt);
        }
        let delay = TASK_RETRY.backoff(tries, dracode_llm::http::random_unit());
        let reason = outcome.record.error.as_ref().map_or(outcome.record.status.as_str(), |e| e.kind.as_str()).to_string();
        attempt_emitter.emit(Event::retry(RetryScope::Task, reason, delay, attempt + 1));
        prior.push(outcome);
        let mut cancel = shared.cancel.clone();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = cancel.wait_for(|c| *c) => {}
        }
        tries += 1;
    }
}

/// Failures that another attempt cannot fix (and would only burn budget on).
const NEVER_RETRY: [FailureKind; 6] = [
    FailureKind::CheckUnrunnable,
    FailureKind::Secret,
    FailureKind::Llm(ErrorKind::NotConfigured),
    FailureKind::Llm(ErrorKind::Quota),
    FailureKind::Llm(ErrorKind::Auth),
    FailureKind::Llm(ErrorKind::ContextOverflow),
];
/// Backoff between task attempts: full jitter under a doubling ceiling from 2 s to 60 s.
const TASK_RETRY: dracode_llm::http::RetryPolicy = dracode_llm::http::RetryPolicy {
    max_retries: u32::MAX,
    base_delay: Duration::from_secs(2),
    max_delay: Duration::from_secs(60),
    max_total_wait: Duration::MAX,
};

/// The final outcome of a task: the last attempt, with turns, usage and cost summed over every
/// attempt and the earlier attempts kept for JUnit's flaky/rerun records.
fn combine(mut last: TaskOutcome, prior: Vec<TaskOutcome>, attempts: u32) -> TaskOutcome {
    last.record.attempts = attempts;
    last.record.flaky = last.record.status.is_pass() && prior.iter().any(failed_on_the_agents_work);
    for p in &prior {
        last.record.num_turns += p.record.num_turns;
        last.record.usage += p.record.usage;
        last.record.total_cost_usd = match (last.record.total_cost_usd, p.record.total_cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) if p.record.usage.requests == 0 => a.or(b),
            _ => None,
        };
    }
    last.record.prior_attempts = prior
        .into_iter()
        .map(|p| WireAttempt { status: p.record.status, error: p.record.error, duration_ms: p.record.duration_ms })
        .collect();
    last
}

/// Whether an earlier attempt failed on the agent's work (a failed check, an agent error, a
/// limit): a pass after it is flaky. One that failed on the provider, the network or the machine
/// (or was interrupted) says nothing about the agent: the retry only waited it out.
fn failed_on_the_agents_work(attempt: &TaskOutcome) -> bool {
    !attempt.record.status.is_pass()
        && attempt.record.status != Status::Cancelled
        && !dracode_results::exit_codes::not_judged(attempt.record.status, attempt.record.error.as_ref())
}

/// One attempt: prepare → agent (→ check, → repair and check again) → judge → finalize. Emits
/// everything but `task.finished`.
async fn run_attempt(spec: &TaskSpec, shared: &Shared, emitter: &Emitter) -> TaskOutcome {
    let started = Instant::now();
    let activity = Activity::new();
    let emitter = &emitter.with_activity(activity.clone());
    let mut outcome = spec.outcome(Status::Error);
    let Prepared { workspace, kit, announced } = match prepare(spec, shared, emitter).await {
        Ok(prepared) => prepared,
        Err(error) => {
            outcome.record.status = failure_status(&error);
            outcome.record.error = Some(error);
            return stamp(outcome, started);
        }
    };
    let (workspace, check_before) = match &spec.check {
        Some(check) if check.before => {
            let base = workspace.record().base();
            match check_in_world(check, spec, workspace, base, &kit, shared).await {
                Ok((workspace, checked)) => (workspace, Some(checked)),
                Err(error) => {
                    outcome.record.status = failure_status(&error);
                    outcome.record.error = Some(error);
                    return stamp(outcome, started);
                }
            }
        }
        _ => (workspace, None),
    };
    let sweep = dracode_sandbox::sweep::TaskSweep::register(
        [Some(workspace.root.clone()), kit.tool_ctx.tmp_dir.clone()].into_iter().flatten().collect(),
    );
    let sessions = crate::external::Sessions::default();
    let ctx = AttemptCtx {
        spec,
        shared,
        kit: &kit,
        emitter,
        activity: &activity,
        began: announced,
        clock: Instant::now(),
        sweep: &sweep,
        sessions: &sessions,
    };
    let mut state = AgentState::default();
    let phase = ctx.agent_unless_stopped(check_before.as_ref(), &mut state).await;
    let graded = ctx.grade(workspace, phase, &mut state, &mut outcome).await;
    // However the agent ended, its MCP servers (and an ACP agent) end with it; then nothing it
    // started may run on.
    kit.mcp.stop().await;
    sessions.stop().await;
    let graded = match (graded, sweep_now(&sweep).await) {
        (Ok(_), Err(error)) => Err(error),
        (graded, _) => graded,
    };
    record_agent_work(spec, &mut state, &mut outcome);
    let (workspace, phase, unrunnable) = match graded {
        Ok(graded) => graded,
        Err(error) => {
            outcome.record.error = Some(error);
            return stamp(outcome, started);
        }
    };
    if let Some(record) = outcome.record.check.as_mut() {
        record.before = check_before.as_ref().map(|b| b.record.exit_code);
        record.before_output_tail = check_before.map(|b| b.record.output_tail);
    }
    let denials = kit.tool_ctx.network_log.totals();
    (outcome.record.network_denied, outcome.record.network_denied_hosts) = (denials.count, denials.hosts);
    // Without a check, a full disk still makes the record (and so the verdict) worthless.
    let unrunnable = unrunnable.or_else(|| if outcome.record.check.is_some() { None } else { disk_full_at(&kit) });
    (outcome.record.status, outcome.record.error) = verdict(spec, &kit, &phase, unrunnable.as_deref(), &outcome);
    finalize(spec, shared, &workspace, &mut outcome, (&kit.system, state.history), kit.provider.model());
    let outcome = stamp(outcome, started);
    // Removing the task's folders (workspace, TMPDIR) blocks on the disk: it runs off the
    // async workers that serve the other tasks' model calls, while the next task starts.
    shared.removals.remove((workspace, kit));
    outcome
}

/// What the agent did, into `outcome`'s record at once: the usage of every call counts,
/// whatever happens next.
fn record_agent_work(spec: &TaskSpec, state: &mut AgentState, outcome: &mut TaskOutcome) {
    (outcome.record.num_turns, outcome.record.usage, outcome.record.result) = (state.turns, state.usage, state.final_text.take());
    outcome.record.structured_output = state.answer.value.take();
    outcome.record.compactions = state.compactions;
    outcome.record.agent =
        spec.agent.as_ref().map(|agent| dracode_results::AgentOrigin { name: agent.name.clone(), version: state.agent_version.take() });
    outcome.record.denied = std::mem::take(&mut state.refused.denied);
    outcome.record.protected_refused = std::mem::take(&mut state.refused.protected).into_iter().collect();
}

/// Why the agent's work cannot be judged when the disk its commands wrote to is full
/// ([`crate::disk::full`]), if it is.
fn disk_full_at(kit: &AgentKit) -> Option<String> {
    let policy = kit.tool_ctx.confine.as_deref()?;
    crate::disk::full(policy.writable.iter().chain(&policy.tmp_dir)).map(|full| format!("{full} when the agent's work was recorded"))
}

/// The verdict of an attempt that ran to its end: the evidence `judge` weighs, gathered.
fn verdict(
    spec: &TaskSpec,
    kit: &AgentKit,
    phase: &AgentPhase,
    unrunnable: Option<&str>,
    outcome: &TaskOutcome,
) -> (Status, Option<TaskError>) {
    let resource = dracode_sandbox::incidents::limit_failure(&kit.tool_ctx.reports.all());
    let evidence = Evidence {
        resource: resource.as_ref(),
        unrunnable,
        phase,
        check: outcome.record.check.as_ref(),
        files_changed: outcome.record.files_changed.len(),
        require_change: spec.require_change,
        max_iterations: spec.max_iterations,
        protected: &outcome.record.protected,
    };
    judge(&evidence)
}

/// What the phases of one attempt after `prepare` share.
struct AttemptCtx<'a> {
    spec: &'a TaskSpec,
    shared: &'a Shared,
    kit: &'a AgentKit,
    emitter: &'a Emitter,
    activity: &'a Arc<Activity>,
    /// When the attempt began (its `task.started`): check runs are timed from here.
    began: Instant,
    /// When the agent started: the attempt's `timeout` counts from here, repairs included.
    clock: Instant,
    /// The attempt's registration with the sweep of escaped processes.
    sweep: &'a dracode_sandbox::sweep::TaskSweep,
    /// The attempt's running ACP agent, between its turns ([`crate::external::Sessions`]).
    sessions: &'a crate::external::Sessions,
}

impl AttemptCtx<'_> {
    /// The agent's run — unless a check before it passed a resource limit or could not run at
    /// all, which ends the attempt: the agent would work (and spend) for nothing.
    async fn agent_unless_stopped(&self, check_before: Option<&Checked>, state: &mut AgentState) -> AgentPhase {
        match (dracode_sandbox::incidents::limit_failure(&self.kit.tool_ctx.reports.all()), check_before.and_then(|c| c.unrunnable.clone()))
        {
            (Some(error), _) => AgentPhase::Ended(AgentEnd::Failed(error)),
            (None, Some(why)) => {
                let message = format!("the check could not run before the agent: {why}; the agent was not started");
                AgentPhase::Ended(AgentEnd::Failed(TaskError::new(FailureKind::CheckUnrunnable, message)))
            }
            (None, None) => self.run_agent(state, None).await,
        }
    }

    /// After the agent: puts protected paths back, records the changes and runs the check in a
    /// world made from the record ([`super::world`]) — also when the agent ran out of turns, time
    /// or budget, on the work it left. While the check fails and the task has repairs left,
    /// gives the agent the check's output in the same conversation and grades again. Returns the
    /// workspace, how the agent ended, and why the last check could not run (if so).
    async fn grade(
        &self,
        mut workspace: Workspace,
        mut phase: AgentPhase,
        state: &mut AgentState,
        outcome: &mut TaskOutcome,
    ) -> Result<(Workspace, AgentPhase, Option<String>), TaskError> {
        loop {
            // Nothing of the agent runs any more: its background processes end, and protected
            // paths are put back before the check grades.
            self.kit.tool_ctx.processes.stop_all().await;
            sweep_now(self.sweep).await?;
            outcome.record.protected.extend(restore_protected(self.spec, &workspace)?);
            outcome.record.protected.sort();
            outcome.record.protected.dedup();
            workspace = collect_changes(workspace, outcome, self.shared).await?;
            let Some(check) = self.spec.check.as_ref().filter(|_| checks_work_after(&phase)) else {
                // `check` grades the final state only: a repair that stalled or failed leaves its
                // work unchecked (the earlier rounds stay in `check_rounds`).
                outcome.record.check = None;
                return Ok((workspace, phase, None));
            };
            let started = Instant::now();
            let tree = workspace.recorded_tree().unwrap_or_else(|| workspace.record().base());
            let checked;
            (workspace, checked) = check_in_world(check, self.spec, workspace, tree, self.kit, self.shared).await?;
            outcome.record.kept_ignored = super::unrecorded::listed(checked.kept.clone());
            let mut record = checked.record;
            if *self.shared.cancel.borrow() {
                // Interrupted while the check ran: the check was stopped, and grades nothing.
                outcome.record.check = Some(record);
                return Ok((workspace, AgentPhase::Cancelled, None));
            }
            let round = WireCheckRound {
                exit_code: record.exit_code,
                duration_ms: millis(started.elapsed()),
                output_tail: record.output_tail.clone(),
                started_ms: Some(millis(started.duration_since(self.began))),
            };
            record.started_ms = round.started_ms;
            record.duration_ms = Some(round.duration_ms);
            let passed = record.exit_code == Some(0);
            // A check that could not run is not the agent's to repair.
            let unrunnable = checked.unrunnable.filter(|_| !passed);
            let message = repair_message(check, &record, outcome.record.repairs + 1);
            outcome.record.check = Some(record);
            if check.repairs > 0 {
                outcome.record.check_rounds.push(round);
            }
            if passed || unrunnable.is_some() || !self.may_repair(check, &phase, state, outcome) {
                return Ok((workspace, phase, unrunnable));
            }
            outcome.record.repairs += 1;
            phase = self.run_agent(state, Some(message)).await;
        }
    }

    /// Whether the agent gets another round after a failed check: it finished on its own,
    /// repairs, turns and time are left, it changed no protected path, and the run goes on.
    fn may_repair(&self, check: &CheckSpec, phase: &AgentPhase, state: &AgentState, outcome: &TaskOutcome) -> bool {
        let time_left = self.spec.timeout.is_none_or(|t| self.clock.elapsed() < t);
        *phase == AgentPhase::Ended(AgentEnd::Finished)
            && outcome.record.repairs < check.repairs
            && outcome.record.protected.is_empty()
            && state.calls_used < self.spec.max_iterations
            && time_left
            && dracode_sandbox::incidents::limit_failure(&self.kit.tool_ctx.reports.all()).is_none()
            && !*self.shared.cancel.borrow()
    }

    /// Runs the agent — from the task's prompt, or (`repair`) on from its conversation in
    /// `state` with that message — until it ends, the attempt's time is up or it stalls, or the
    /// run is interrupted; what it did is left in `state`.
    async fn run_agent(&self, state: &mut AgentState, repair: Option<String>) -> AgentPhase {
        let (spec, shared, kit) = (self.spec, self.shared, self.kit);
        // Priced as the model the provider answers as (a replay: the recorded one).
        let model = kit.provider.model();
        let cost = |u: &Usage| shared.prices.cost(model, u);
        let agent = Agent {
            provider: kit.provider.as_ref(),
            registry: &kit.registry,
            tool_ctx: &kit.tool_ctx,
            emitter: self.emitter,
            redactor: &shared.redactor,
            system: kit.system.clone(),
            max_iterations: spec.max_iterations,
            max_output_tokens: spec.provider.max_tokens,
            budget: spec.budget,
            run_meter: Some(&shared.run_meter),
            cost: &cost,
            output: spec.output.as_ref(),
            context: crate::context::ContextPolicy::new(
                spec.context_window.or_else(|| shared.prices.context_window(model)),
                spec.max_context_tokens,
                spec.compact_at,
            ),
            clock: (self.clock, spec.timeout),
        };
        // The idle clock starts with the agent: a slow check before a repair is not silence.
        self.emitter.keep_alive();
        let mut cancel = shared.cancel.clone();
        let limit = spec.timeout.unwrap_or(Duration::MAX);
        let left = limit.saturating_sub(self.clock.elapsed());
        let work = async {
            match (&spec.agent, repair) {
                (Some(external), repair) => self.run_external(external, &agent, repair, state).await,
                (None, Some(message)) => agent.resume(&spec.prompt, message, state).await,
                (None, None) => agent.run(&spec.prompt, state).await,
            }
        };
        tokio::select! {
            end = tokio::time::timeout(left, work) => match end {
                Ok(end) => AgentPhase::Ended(end),
                Err(_) => AgentPhase::TimedOut(limit),
            },
            idle = stalled(self.activity, spec.idle_timeout) => AgentPhase::Stalled(idle),
            _ = cancel.wait_for(|c| *c) => AgentPhase::Cancelled,
        }
    }
}

impl AttemptCtx<'_> {
    /// Runs the task's external agent ([`crate::external`]) with the limits `agent` holds: on
    /// the task (and the runner's notes for it), or on a repair's message in its own session.
    async fn run_external(&self, external: &ExternalAgent, agent: &Agent<'_>, repair: Option<String>, state: &mut AgentState) -> AgentEnd {
        let (spec, kit) = (self.spec, self.kit);
        let answerer = Answerer {
            provider: agent.provider,
            emitter: agent.emitter,
            redactor: agent.redactor,
            max_iterations: agent.max_iterations,
            max_output_tokens: agent.max_output_tokens,
            budget: agent.budget,
            run_meter: &self.shared.run_meter,
            cost: agent.cost,
        };
        let tmp_dir = kit.tool_ctx.tmp_dir.clone().unwrap_or_else(std::env::temp_dir);
        let limit = spec.timeout.unwrap_or(Duration::from_secs(24 * 3600));
        let run = crate::external::Run {
            agent: external,
            workdir: kit.tool_ctx.sandbox.root(),
            env: &kit.tool_ctx.child_env,
            tmp_dir: &tmp_dir,
            confine: kit.tool_ctx.confine.as_deref(),
            model: spec.provider.model.as_deref().unwrap_or("default"),
            time_left: limit.saturating_sub(self.clock.elapsed()).max(Duration::from_secs(1)),
            output_limit: COMMAND_OUTPUT_LIMIT,
            reports: &kit.tool_ctx.reports,
            network_log: &kit.tool_ctx.network_log,
        };
        let (text, resume) = match repair {
            Some(message) => (message, true),
            None => (crate::external::task_text(&spec.prompt, &spec.system_prompt), false),
        };
        run.run(&answerer, self.sessions, &text, resume, state).await
    }
}

/// Whether the check grades the work after the agent ended this way: when it finished, and
/// when it ran out of turns, time or budget (its work so far is checked, though the status
/// stays the limit's); not after a failure, a stall or an interruption.
fn checks_work_after(phase: &AgentPhase) -> bool {
    matches!(phase, AgentPhase::Ended(AgentEnd::Finished | AgentEnd::MaxIterations | AgentEnd::BudgetExceeded(_)) | AgentPhase::TimedOut(_))
}

/// What the agent is told when the check failed: the command, its exit code and the tail of its
/// output (redacted, paths relative to the workspace).
fn repair_message(check: &CheckSpec, record: &CheckRecord, repair: u32) -> String {
    let code = record.exit_code.map_or("no exit code (killed)".to_string(), |c| format!("exit code {c}"));
    format!(
        "[dracode] The check `{}` failed with {code} (repair {repair} of {}). The last part of its output:\n\n{}\n\n\
         Fix the cause in the workspace, then reply with a short summary; the check runs again when you stop.",
        check.command,
        check.repairs,
        record.output_tail.trim_end()
    )
}

/// What an attempt works with, made before the agent starts.
struct Prepared {
    workspace: Workspace,
    kit: AgentKit,
    /// When `task.started` was announced: the check's times count from here.
    announced: Instant,
}

/// What the agent runs with.
struct AgentKit {
    /// The whole system prompt: the planned one, then the repository's `AGENTS.md` files.
    system: String,
    provider: Arc<dyn Provider>,
    tool_ctx: ToolContext,
    registry: Registry,
    /// The task's MCP servers, stopped when the agent is done.
    mcp: dracode_mcp::McpServers,
    /// The egress proxy of a task with a network allowlist; stopped with the attempt.
    _proxy: Option<EgressProxy>,
    /// Kept for its folder's lifetime: the attempt's TMPDIR (and HOME).
    _task_temp: TaskTemp,
}

/// Makes the workspace (then announces `task.started`), the provider, the task's own TMPDIR
/// and the tools.
async fn prepare(spec: &TaskSpec, shared: &Shared, emitter: &Emitter) -> Result<Prepared, TaskError> {
    ensure_confinable(spec)?;
    if let Some(agent) = &spec.agent {
        // A missing agent program ends the task before its workspace is made.
        agent.resolve(shared.process_env.get("PATH").map(String::as_str)).map_err(crate::external::not_configured)?;
    }
    let making = Instant::now();
    let workspace = prepare_workspace(spec, shared).await?;
    let announced = Instant::now();
    emitter.emit(WireEvent::TaskStarted {
        header: Header::unstamped(None),
        workspace_ms: Some(millis(announced.duration_since(making))),
        provider: spec.provider.name.clone(),
        model: spec.provider.model.clone().unwrap_or_default(),
        isolation: spec.workspace.isolation.as_str().to_string(),
        workdir: workspace.workdir.to_string_lossy().into_owned(),
        base_commit: workspace.base_commit.clone(),
        issue: spec.issue.clone(),
    });
    let provider = build_provider(spec, shared)?;
    let CommandKit { env: child_env, confine, network_log, proxy, temp: task_temp } =
        command_kit(spec, &workspace.root, workspace.sandbox_paths(), shared, emitter).await?;
    let commands = Commands { env: child_env.clone(), tmp_dir: task_temp.tmp(), confine: confine.clone(), network_log };
    let tool_ctx = tool_context(spec, &workspace, commands, emitter).map_err(TaskError::internal)?;
    let registry = Registry::with_names(&spec.tools).map_err(|e| TaskError::internal(e.to_string()))?;
    let shared_tools = run_scope_tools(spec, shared, Some(confine.as_ref()))?;
    let mcp = start_mcp_servers(spec, shared, &tool_ctx).await?;
    let registry = registry.with_mcp(shared_tools).with_mcp(mcp.tools());
    let system = system_prompt(spec, &workspace, &shared.redactor);
    let kit = AgentKit { system, provider, tool_ctx, registry, mcp, _proxy: proxy, _task_temp: task_temp };
    Ok(Prepared { workspace, kit, announced })
}

/// The task's whole system prompt: the planned one, then (unless `agents_md = false`) the
/// repository's `AGENTS.md` files as the workspace holds them, masked as a tool's output is.
fn system_prompt(spec: &TaskSpec, workspace: &Workspace, redactor: &Redactor) -> String {
    let files = if spec.agents_md { crate::instructions::read_agents_md(&workspace.root, &workspace.workdir) } else { Vec::new() };
    match crate::instructions::repository_section(&files) {
        Some(section) => format!("{}\n\n{}", spec.system_prompt, redactor.redact(&section)),
        None => spec.system_prompt.clone(),
    }
}

/// What the commands run for a task in `workspace` get — the agent's tools, its MCP servers,
/// its check, and the batch's setup, which runs like a check: the environment (allowlisted
/// variables, the task's `env`, its own TMPDIR and caches, the egress proxy's address), the
/// confinement, and the log of refused connections (each one emitted as `network.denied`).
pub(crate) struct CommandKit {
    /// The whole environment of a command.
    pub env: Arc<BTreeMap<String, String>>,
    /// The sandbox of every command.
    pub confine: Arc<Policy>,
    /// Refused connections.
    pub network_log: Arc<NetworkLog>,
    /// The egress proxy of a network allowlist; stopped when dropped.
    pub proxy: Option<EgressProxy>,
    /// The TMPDIR (and HOME) folder; removed when dropped.
    pub temp: TaskTemp,
}

impl CommandKit {
    /// This kit with `HOME` at a folder of its own (in its TMPDIR) that holds what its commands
    /// may read of the user's home and git's reduced global configuration
    /// ([`dracode_sandbox::home_view`]), when confined with the user's home (not `isolate_home`):
    /// a build backend that clears `GIT_CONFIG_GLOBAL` before it runs git (setuptools-scm,
    /// hatch-vcs) would otherwise make git read the user's own `~/.gitconfig`, which the sandbox
    /// refuses, and fail. The setup's commands and every check get it.
    pub(crate) fn with_home_view(mut self, spec: &TaskSpec) -> Result<CommandKit, TaskError> {
        let home = self.env.get("HOME").filter(|h| Path::new(h).is_absolute());
        let (Some(home), false, false) = (home, spec.sandbox == dracode_sandbox::SandboxMode::Off, spec.isolate_home) else {
            return Ok(self);
        };
        let git_config = self.env.get(dracode_sandbox::GIT_CONFIG_VAR).map(PathBuf::from);
        let view = dracode_sandbox::home_view(&self.temp.tmp(), Path::new(home), &self.confine.readable, git_config.as_deref())
            .map_err(|e| TaskError::internal(format!("cannot make the commands' HOME: {e}")))?;
        let mut env = BTreeMap::clone(&self.env);
        env.insert("HOME".into(), view.display().to_string());
        self.env = Arc::new(env);
        Ok(self)
    }
}

/// Makes the [`CommandKit`] of `spec` working in the workspace at `root` whose sandbox paths
/// are `paths` ([`Workspace::sandbox_paths`]).
pub(crate) async fn command_kit(
    spec: &TaskSpec,
    root: &Path,
    paths: SandboxPaths,
    shared: &Shared,
    emitter: &Emitter,
) -> Result<CommandKit, TaskError> {
    command_kit_logging(spec, root, paths, shared, network_log(emitter.clone())).await
}

/// The log of refused connections that emits each as a `network.denied` event of `denials`.
pub(crate) fn network_log(denials: Emitter) -> Arc<NetworkLog> {
    Arc::new(NetworkLog::new(move |d: dracode_sandbox::egress::Denial| {
        denials.emit(WireEvent::NetworkDenied {
            header: Header::unstamped(None),
            host: d.host,
            port: d.port,
            command: d.command,
            reason: d.reason,
            phase: Some(d.phase.as_str().to_string()),
            lookup: d.lookup,
        });
    }))
}

/// [`command_kit`] whose refused connections go to `network_log`: each call makes a TMPDIR (and
/// HOME), caches, tool homes, a git configuration copy and an egress proxy of its own.
pub(crate) async fn command_kit_logging(
    spec: &TaskSpec,
    root: &Path,
    paths: SandboxPaths,
    shared: &Shared,
    network_log: Arc<NetworkLog>,
) -> Result<CommandKit, TaskError> {
    let temp = TaskTemp::new(spec.isolate_home).map_err(|e| TaskError::internal(format!("cannot make the task's TMPDIR: {e}")))?;
    let mut allowed =
        dracode_secrets::child_env(shared.process_env.iter().map(|(k, v)| (k.clone(), v.clone())), &spec.env_passthrough, &spec.env);
    let from_setup = shared.setups.get().and_then(|setups| setups.command_env_for(spec));
    if let Some((env, _)) = from_setup {
        allowed.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let proxy = start_proxy(spec, &network_log).await?;
    let mut env = temp.env(&allowed, spec).map_err(|e| TaskError::internal(format!("cannot make the task's caches: {e}")))?;
    // Set after the allowlist and the task's own `env`: nothing the task says bypasses the proxy.
    if let Some(proxy) = &proxy {
        env.extend(dracode_sandbox::egress::proxy_env(&proxy.url()).into_iter().map(|(k, v)| (k.to_string(), v)));
    }
    let layout = CommandLayout { workspace: root.to_path_buf(), tmp_dir: temp.tmp(), paths, proxy: proxy.as_ref().map(EgressProxy::addr) };
    let mut confine = command_policy(spec, &layout, &allowed, &shared.paths);
    if let Some((_, readable)) = from_setup {
        confine.readable.extend(readable.iter().cloned());
    }
    Ok(CommandKit { env: Arc::new(env), confine: Arc::new(confine), network_log, proxy, temp })
}

/// Starts the task's MCP servers in its workspace, confined like its commands; one that fails to
/// start or to list its tools fails the attempt, kind `tool`.
async fn start_mcp_servers(spec: &TaskSpec, shared: &Shared, ctx: &ToolContext) -> Result<dracode_mcp::McpServers, TaskError> {
    let own: BTreeMap<String, dracode_mcp::McpServerConfig> =
        spec.mcp_servers.iter().filter(|(_, c)| c.scope != Some(McpScope::Run)).map(|(n, c)| (n.clone(), c.clone())).collect();
    if own.is_empty() {
        return Ok(dracode_mcp::McpServers::default());
    }
    let launch = dracode_mcp::Launch {
        cwd: ctx.sandbox.root(),
        env: &ctx.child_env,
        tmp_dir: ctx.tmp_dir.as_deref(),
        confine: ctx.confine.as_deref(),
        http: shared.http.get().clone(),
        redactor: Redactor::clone(&shared.redactor),
    };
    dracode_mcp::McpServers::start(&own, &launch, &spec.tools).await.map_err(|e| {
        TaskError::new(FailureKind::Tool, shared.redactor.redact(&with_read_hint(e.to_string(), ctx.confine.as_deref())).into_owned())
    })
}

/// `message` of an MCP server that failed, followed by what the sandbox refused it when its
/// stderr names a path outside what the task's commands may read ([`super::check::refused_read`]).
fn with_read_hint(message: String, confine: Option<&Policy>) -> String {
    match confine.and_then(|policy| super::check::refused_read(&message, policy)) {
        Some(hint) => format!("{message}; {hint}"),
        None => message,
    }
}

/// The tools of the task's `scope = "run"` servers, started by the runner; one that did not
/// start fails the attempt, kind `tool`, as a task-scope server would.
fn run_scope_tools(spec: &TaskSpec, shared: &Shared, confine: Option<&Policy>) -> Result<Vec<Arc<dracode_mcp::McpTool>>, TaskError> {
    let mut tools = Vec::new();
    for (name, config) in spec.mcp_servers.iter().filter(|(_, c)| c.scope == Some(McpScope::Run)) {
        let found = match shared.run_mcp.get() {
            Some(servers) => servers.tools(name, config),
            None => Err(dracode_mcp::RunScopeError::NotStarted { name: name.clone() }),
        };
        tools.extend(found.map_err(|e| {
            TaskError::new(FailureKind::Tool, shared.redactor.redact(&with_read_hint(e.to_string(), confine)).into_owned())
        })?);
    }
    Ok(tools)
}

/// Starts the task's egress proxy when its network is an allowlist.
async fn start_proxy(spec: &TaskSpec, log: &Arc<NetworkLog>) -> Result<Option<EgressProxy>, TaskError> {
    let Some(list) = spec.network.allowlist() else { return Ok(None) };
    let proxy = EgressProxy::start(list.clone(), log.clone()).await;
    proxy.map(Some).map_err(|e| TaskError::internal(format!("cannot start the egress proxy: {e}")))
}

/// Fails the attempt up front, kind `sandbox`, when this machine cannot confine commands the
/// way the task's `sandbox` mode promises — never a silent downgrade.
fn ensure_confinable(spec: &TaskSpec) -> Result<(), TaskError> {
    let probe = Policy::for_workspace(spec.sandbox, Path::new("/"), None);
    probe.check_supported().map_err(|e| TaskError::new(FailureKind::Sandbox, e.to_string()))
}

/// Where a task's commands work: the workspace root, the TMPDIR and what the workspace needs
/// opened or hidden. Placeholders before the task runs (`dracode sandbox`).
pub struct CommandLayout {
    /// The workspace root.
    pub workspace: PathBuf,
    /// The task's TMPDIR.
    pub tmp_dir: PathBuf,
    /// The workspace's own needs (writable root, borrowed object stores, hidden git dirs).
    pub paths: super::workspace::SandboxPaths,
    /// The task's egress proxy (`network = [hosts]`), the one address its commands may reach.
    pub proxy: Option<std::net::SocketAddr>,
}

/// How the task's commands (`run_command`, `check`, MCP servers) are confined: its `sandbox`
/// mode and `network` (with an allowlist: no network but the egress proxy); the workspace (its own `.git` included) and its TMPDIR writable; readable
/// only the system, the toolchains named by `env` (the command's variables before TMPDIR and
/// HOME are set), the workspace, the borrowed object stores and `read_paths`; hidden, even
/// inside those: credentials, the source repository's git directory, `$RUNNER_TEMP`, `--out`
/// and every other task's folders.
pub fn command_policy(spec: &TaskSpec, layout: &CommandLayout, env: &BTreeMap<String, String>, shared: &SharedPaths) -> Policy {
    let runner_temp = shared.runner_temp.as_deref();
    let mut policy = Policy::for_env(spec.sandbox, &layout.workspace, Some(&layout.tmp_dir), env, runner_temp);
    let paths = layout.paths.clone();
    policy.writable = paths.writable;
    policy.readable.extend(paths.readable);
    policy.readable.extend(spec.read_paths.iter().cloned());
    policy.hidden.extend(paths.hidden);
    let temp = std::env::temp_dir();
    for prefix in [super::owned_dir::TASK_DIR_PREFIX, super::owned_dir::TASK_TEMP_PREFIX, dracode_mcp::RUN_DIR_PREFIX] {
        policy.hidden.push(temp.join(format!("{prefix}*")));
    }
    policy.hidden.extend(shared.out.iter().cloned());
    policy.network = spec.network.is_all();
    policy.proxy = layout.proxy;
    policy.unix_sockets = spec.unix_sockets.clone();
    policy.limits = spec.limits.clone();
    policy
}

/// The paths of the run that every task's policy hides: `--out` and `$RUNNER_TEMP`.
#[derive(Debug, Clone, Default)]
pub struct SharedPaths {
    /// The run's `--out` folder, absolute.
    pub out: Option<PathBuf>,
    /// dracode's `$RUNNER_TEMP`.
    pub runner_temp: Option<PathBuf>,
}

impl SharedPaths {
    /// The paths for a run writing to `out`, with dracode's environment `env`.
    pub fn new(out: Option<&Path>, env: &BTreeMap<String, String>) -> SharedPaths {
        let out = out.map(|o| std::path::absolute(o).unwrap_or_else(|_| o.to_path_buf()));
        let out = out.map(|o| o.canonicalize().unwrap_or(o));
        SharedPaths { out, runner_temp: env.get("RUNNER_TEMP").filter(|v| !v.is_empty()).map(PathBuf::from) }
    }
}

/// The attempt's workspace, with what the batch's setup made for it copied in. git and file
/// copying block: they run off the async workers that serve other tasks' I/O.
async fn prepare_workspace(spec: &TaskSpec, shared: &Shared) -> Result<Workspace, TaskError> {
    let ws = spec.workspace.clone();
    let carried = shared.setups.get().and_then(|setups| setups.carried_for(spec));
    let keeps = !spec.keep_ignored.is_empty();
    let stores = shared.stores.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        let workdir = Some(ws.workdir.as_path()).filter(|w| !w.as_os_str().is_empty());
        let mut workspace = Workspace::prepare_carrying(&stores, &ws.repo, ws.isolation, &ws.base, workdir, carried.as_deref())?;
        if keeps {
            workspace.take_inventory()?;
        }
        Ok(workspace)
    })
    .await;
    prepared.unwrap_or_else(|e| Err(WorkspaceError::Panicked(e.to_string()))).map_err(|e| TaskError::internal(format!("workspace: {e}")))
}

/// What a check in a world gave.
pub(crate) struct Checked {
    /// How it ended.
    pub record: CheckRecord,
    /// Why it could not run at all (its command not found, a read the sandbox refused), if so.
    pub unrunnable: Option<String>,
    /// What `keep_ignored` brought into its world from the workspace.
    pub kept: Vec<String>,
}

/// Runs `check` on the recorded `tree` of `workspace` in a world made for it alone
/// ([`super::world`]: that tree, the setup's outputs as the setup left them, what `keep_ignored`
/// keeps) — or in the workspace itself with `isolation = "none"` — its commands given a TMPDIR,
/// HOME and caches of their own. Returns the workspace and what the check gave; a world that
/// cannot be made, or a process of the check that escaped, ends the attempt `error`.
async fn check_in_world(
    check: &CheckSpec,
    spec: &TaskSpec,
    workspace: Workspace,
    tree: git2::Oid,
    kit: &AgentKit,
    shared: &Shared,
) -> Result<(Workspace, Checked), TaskError> {
    let keep = KeepRules::of(spec, &workspace, shared)?;
    let carried = shared.setups.get().and_then(|setups| setups.carried_for(spec));
    let workdir = spec.workspace.workdir.clone();
    let made = tokio::task::spawn_blocking(move || {
        let world = match workspace.isolation() {
            crate::manifest::Isolation::None => Ok((super::world::World::in_place(&workspace), Vec::new())),
            _ => keep.kept(&workspace).and_then(|kept| {
                let recipe = super::world::Recipe { tree, carried: carried.as_deref(), kept: &kept, workdir: &workdir };
                Ok((super::world::World::of_record(&workspace, &recipe)?, kept))
            }),
        };
        (workspace, world)
    })
    .await;
    let (workspace, world) = made.map_err(|e| TaskError::internal(format!("making the check's world panicked: {e}")))?;
    let (world, kept) = world.map_err(|e| TaskError::internal(format!("cannot make the check's world: {e}")))?;
    let place = world.place.clone();
    // Removing the world blocks on the disk: off the async workers, once the check is done.
    let world = std::sync::Mutex::new(Some(world));
    let checked = run_check_in(check, spec, &place, shared, kit.tool_ctx.network_log.clone(), Some(&kit.tool_ctx.reports)).await;
    shared.removals.remove(world.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner));
    let (record, unrunnable) = checked?;
    Ok((workspace, Checked { record, unrunnable, kept }))
}

/// Runs `check` in `world` with a command kit of its own ([`command_kit_logging`]: a fresh
/// TMPDIR, HOME, caches and tool homes) whose refused connections go to `network_log` and
/// whose sandbox reports go to `reports`; an interrupt of the run ends it at once (dropping the
/// run kills its process group), with no exit code. Returns the record and why the check could
/// not run, if so, judged by the world's own confinement; a process that escaped it is an error.
pub(crate) async fn run_check_in(
    check: &CheckSpec,
    spec: &TaskSpec,
    world: &super::world::Place,
    shared: &Shared,
    network_log: Arc<NetworkLog>,
    reports: Option<&dracode_sandbox::incidents::ReportSink>,
) -> Result<(CheckRecord, Option<String>), TaskError> {
    let kit = command_kit_logging(spec, &world.root, world.paths.clone(), shared, network_log).await?.with_home_view(spec)?;
    let tmp = kit.temp.tmp();
    let sweep = dracode_sandbox::sweep::TaskSweep::register(vec![world.root.clone(), tmp.clone()]);
    let ctx = CheckContext { env: &kit.env, tmp_dir: Some(&tmp), confine: Some(&kit.confine), redactor: &shared.redactor, reports };
    let record = {
        let _running = kit.network_log.running(&check.command, dracode_sandbox::egress::Phase::Check);
        let mut cancel = shared.cancel.clone();
        tokio::select! {
            record = super::check::run(&check.command, &world.workdir, check.timeout, ctx) => record,
            _ = cancel.wait_for(|c| *c) => CheckRecord {
                command: check.command.clone(),
                exit_code: None,
                output_tail: "[interrupted: the run was cancelled]".into(),
                ..Default::default()
            },
        }
    };
    sweep_now(&sweep).await?;
    let unrunnable = super::check::could_not_run(&record, Some(&kit.confine));
    shared.removals.remove(kit);
    Ok((record, unrunnable))
}

/// Kills every process that outlived its supervisor ([`dracode_sandbox::sweep`]); one of this
/// attempt's, or one that could not be stopped, ends it `error` (kind `sandbox`).
async fn sweep_now(sweep: &dracode_sandbox::sweep::TaskSweep) -> Result<(), TaskError> {
    sweep.sweep().map_err(|e| TaskError::new(FailureKind::Sandbox, format!("a process escaped its sandbox: {e}")))
}

/// Puts back the protected paths the agent changed (by any means) and names them; a failure to
/// do so ends the attempt `error`: the check must not grade a tampered test.
fn restore_protected(spec: &TaskSpec, workspace: &Workspace) -> Result<Vec<String>, TaskError> {
    if spec.protect.is_empty() {
        return Ok(Vec::new());
    }
    let protect = dracode_sandbox::Protect::compile(&workspace.root, &spec.protect).map_err(|e| TaskError::internal(e.to_string()))?;
    workspace.record().restore(&protect).map_err(|e| TaskError::internal(format!("cannot put protected paths back: {e}")))
}

/// What `keep_ignored` keeps for the check: its globs, `protect`'s (never kept), and dracode's
/// own outputs (`--out`, `--record`, `$RUNNER_TEMP`), never kept.
struct KeepRules {
    keep: dracode_sandbox::Protect,
    protect: dracode_sandbox::Protect,
    skip: Vec<PathBuf>,
}

impl KeepRules {
    fn of(spec: &TaskSpec, workspace: &Workspace, shared: &Shared) -> Result<KeepRules, TaskError> {
        let keep =
            dracode_sandbox::Protect::compile(&workspace.root, &spec.keep_ignored).map_err(|e| TaskError::internal(e.to_string()))?;
        let protect = dracode_sandbox::Protect::compile(&workspace.root, &spec.protect).map_err(|e| TaskError::internal(e.to_string()))?;
        let own = [shared.paths.out.clone(), shared.record.clone(), shared.paths.runner_temp.clone()];
        let skip = own.into_iter().flatten().map(|p| p.canonicalize().unwrap_or(p)).collect();
        Ok(KeepRules { keep, protect, skip })
    }

    /// The paths of `workspace` kept ([`Workspace::kept_for_check`]); none when `keep_ignored`
    /// is empty (nothing is walked).
    fn kept(&self, workspace: &Workspace) -> Result<Vec<String>, WorkspaceError> {
        if self.keep.is_empty() {
            return Ok(Vec::new());
        }
        workspace.kept_for_check(&self.keep, &self.protect, &self.skip)
    }
}

/// Records the attempt's changed files and patch in `outcome`, byte for byte; changes that
/// cannot be computed (or a panic while computing them) are an internal error: the attempt is
/// `error`. A patch holding a configured secret is withheld (never masked: a masked patch does
/// not apply), with the names of the files that hold no secret: the attempt is `error`/`secret`.
async fn collect_changes(workspace: Workspace, outcome: &mut TaskOutcome, shared: &Shared) -> Result<Workspace, TaskError> {
    let joined = tokio::task::spawn_blocking(move || {
        let changes = workspace.changes();
        (workspace, changes)
    })
    .await;
    let (workspace, changes) = joined.map_err(|e| TaskError::internal(format!("computing the diff panicked: {e}")))?;
    match changes {
        Ok(Some(changes)) => {
            let found = shared.redactor.secrets_in(&changes.patch);
            if !found.is_empty() {
                outcome.record.files_changed = changes.files.into_iter().filter(|f| shared.redactor.secrets_in(f).is_empty()).collect();
                outcome.attachments.diff = None;
                return Err(secret_in_changes(&found));
            }
            outcome.record.files_changed = changes.files;
            outcome.attachments.diff = Some(changes.patch);
        }
        Ok(None) => {}
        // Never a pass without a record of what changed.
        Err(e) => return Err(TaskError::internal(format!("cannot compute the task's changes: {e}"))),
    }
    Ok(workspace)
}

/// The error of an attempt whose changes hold the secrets named `names` (never their values).
fn secret_in_changes(names: &[String]) -> TaskError {
    TaskError::new(
        FailureKind::Secret,
        format!(
            "the task's changes hold the value of a configured secret ({}): the patch is withheld, not masked, and nothing is committed",
            names.join(", ")
        ),
    )
}

/// After the verdict: the commit of a passed task (`commit = true`), the conversation (its
/// system prompt and messages) and the cost, priced as model `priced_as` (the one the provider
/// answers as: a replay's is the recorded model).
fn finalize(
    spec: &TaskSpec,
    shared: &Shared,
    workspace: &Workspace,
    outcome: &mut TaskOutcome,
    conversation: (&str, Vec<Message>),
    priced_as: &str,
) {
    let (system, messages) = conversation;
    if outcome.record.status == Status::Passed && spec.commit && !outcome.record.files_changed.is_empty() {
        let branch = format!("dracode/{}/{}", shared.run_id, spec.id);
        let title = super::trailers::subject(&spec.prompt);
        let message = format!("{title}\n\ndracode task {:?}: {}", spec.id, outcome.record.result.as_deref().unwrap_or_default());
        let message = super::trailers::append(&message, &[(super::trailers::TASK, &spec.id), (super::trailers::RUN, &shared.run_id)]);
        match workspace.commit(&branch, &message) {
            Ok(_) => outcome.record.branch = Some(branch),
            Err(e) => {
                outcome.record.status = Status::Error;
                outcome.record.error = Some(TaskError::internal(format!("cannot commit on {branch}: {e}")));
            }
        }
    }
    let model = spec.provider.model.clone().unwrap_or_default();
    outcome.record.total_cost_usd = shared.prices.cost(priced_as, &outcome.record.usage);
    outcome.attachments.transcript = Some(Arc::new(Transcript {
        provider: spec.provider.name.clone(),
        model,
        system: system.to_string(),
        tools: spec.tools.iter().cloned().chain(spec.output.as_ref().map(|_| crate::structured::ANSWER_TOOL.to_string())).collect(),
        messages,
    }));
}

/// Stamps an attempt's duration.
fn stamp(mut outcome: TaskOutcome, started: Instant) -> TaskOutcome {
    outcome.record.duration_ms = millis(started.elapsed());
    outcome
}

/// Stamps the whole task's duration and emits `task.finished`.
fn finish(mut outcome: TaskOutcome, started: Instant, emitter: &Emitter) -> TaskOutcome {
    outcome.record.duration_ms = millis(started.elapsed());
    emitter.emit(Event::task_finished(&mut outcome));
    outcome
}

/// The task's provider, wrapped in a recorder under `--record`.
fn build_provider(spec: &TaskSpec, shared: &Shared) -> Result<Arc<dyn Provider>, dracode_llm::LlmError> {
    let binding = TaskBinding { task_id: spec.id.clone() };
    let provider = registry::build(&spec.provider, &binding, &shared.http, &dracode_input::process_env())?;
    let gate = shared.gate(&spec.provider.name, spec.provider.limits);
    let provider: Arc<dyn Provider> = Arc::new(Governed::new(provider, gate));
    Ok(match &shared.record {
        Some(dir) => Arc::new(Recorder::new(provider, dir, &spec.id, &spec.provider.name)),
        None => provider,
    })
}

/// Resolves when the task has shown no life (no event, no byte from the model: see
/// [`crate::events::Emitter::keep_alive`]) for `limit` (never, without a limit).
async fn stalled(activity: &Activity, limit: Option<Duration>) -> Duration {
    let Some(limit) = limit else { return std::future::pending().await };
    loop {
        let idle = activity.idle();
        if idle >= limit {
            return idle;
        }
        tokio::time::sleep((limit - idle).min(Duration::from_secs(1))).await;
    }
}

/// A task's own TMPDIR (and HOME, with `isolate_home`), so parallel tasks never share tool
/// caches or config files by accident. Removed with the task, or by the next run after a
/// SIGKILL (an owned folder).
pub(crate) struct TaskTemp {
    dir: OwnedDir,
    isolate_home: bool,
}

impl TaskTemp {
    fn new(isolate_home: bool) -> std::io::Result<Self> {
        let dir = OwnedDir::create(super::owned_dir::TASK_TEMP_PREFIX)?;
        std::fs::create_dir(dir.path().join("tmp"))?;
        if isolate_home {
            // Inside the TMPDIR: the one folder of its own a command may write in every mode.
            std::fs::create_dir(dir.path().join("tmp/home"))?;
        }
        Ok(TaskTemp { dir, isolate_home })
    }

    /// The TMPDIR.
    pub(crate) fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    /// `base` with TMPDIR (and HOME) pointing into this task's folder, and, when confined, the
    /// package managers' caches into its TMPDIR ([`dracode_sandbox::cache_env`]) and git's global
    /// configuration at a reduced copy of the user's ([`dracode_sandbox::git_config_env`]).
    fn env(&self, base: &BTreeMap<String, String>, spec: &TaskSpec) -> std::io::Result<BTreeMap<String, String>> {
        let mut env = base.clone();
        if spec.sandbox != dracode_sandbox::SandboxMode::Off {
            env.extend(dracode_sandbox::cache_env(&self.tmp(), base, spec.network.is_on())?);
            env.extend([dracode_sandbox::git_config_env(&self.tmp(), base)?]);
        }
        env.insert("TMPDIR".into(), self.tmp().display().to_string());
        if self.isolate_home {
            env.insert("HOME".into(), self.tmp().join("home").display().to_string());
        }
        Ok(env)
    }
}

/// What the task's commands run with.
struct Commands {
    env: Arc<BTreeMap<String, String>>,
    tmp_dir: PathBuf,
    confine: Arc<Policy>,
    network_log: Arc<NetworkLog>,
}

/// The tools' view of the task.
fn tool_context(spec: &TaskSpec, ws: &Workspace, commands: Commands, emitter: &Emitter) -> Result<ToolContext, String> {
    let protect = dracode_sandbox::Protect::compile(&ws.root, &spec.protect).map_err(|e| e.to_string())?;
    let sandbox = dracode_sandbox::Sandbox::new(&ws.workdir).map_err(|e| format!("workspace {}: {e}", ws.workdir.display()))?;
    let sandbox = sandbox.with_protect(Arc::new(protect));
    Ok(ToolContext {
        sandbox,
        child_env: commands.env,
        tmp_dir: Some(commands.tmp_dir),
        confine: Some(commands.confine),
        answers: Arc::new(spec.answers.clone()),
        max_command_timeout: MAX_COMMAND_TIMEOUT,
        output_limit: COMMAND_OUTPUT_LIMIT,
        emitter: emitter.clone(),
        policy: spec.policy.clone(),
        git_writes: spec.workspace.isolation != crate::manifest::Isolation::None,
        processes: Default::default(),
        git: ws.pinned_git(),
        reports: Arc::new(reports_to(&commands.network_log)),
        network: spec.network.clone(),
        network_log: commands.network_log,
    })
}

/// A report sink that turns the sandbox's refused connections into `network.denied` events as
/// each command ends.
fn reports_to(log: &Arc<NetworkLog>) -> dracode_sandbox::incidents::ReportSink {
    let sink = dracode_sandbox::incidents::ReportSink::default();
    let log = log.clone();
    sink.listen(move |report| {
        if let dracode_sandbox::incidents::Report::NetworkDenied { host, port, command } = report {
            // The broker reports a refused datagram socket as `udp`: what a name lookup opens.
            if host == "udp" && *port == 0 {
                log.lookup_denied(Some(command), Some("a name lookup (DNS): commands have no direct network"));
            } else {
                log.denied(host, *port, Some(command), None);
            }
        }
    });
    sink
}
