//! The agent loop for one task: call the model; if it asks
//! for tools, run every call of the turn in order and answer each; repeat until it ends its
//! turn, fails, or runs out of iterations or budget. Before each call the conversation is kept
//! inside the model's context window ([`crate::context`]: trim old tool outputs, then a summary
//! call); a provider's overflow refusal gets one compaction and one more try.
//!
//! The loop keeps its progress in an [`AgentState`] owned by the caller, so a task stopped from
//! outside (timeout, cancellation) still reports its conversation and exact token usage.

use crate::budget::BudgetExceeded;
use crate::context::{self, ContextMeter, ContextPolicy};
use crate::events::{CompactionMethod, DeniedCall, Emitter, Event, FailureKind, Header, TaskError, WireEvent};
use crate::structured::{ANSWER_TOOL, AnswerProgress, OutputContract, Step};
use crate::tools::policy::OnDenied;
use crate::tools::{ErrorCode, Registry, ToolContext, ToolError};
use dracode_llm::overflow;
use dracode_llm::{ContentBlock, ErrorKind, LlmError, LlmRequest, LlmResponse, Message, Provider, Role, StopReason, ToolSpec, Usage};
use dracode_secrets::Redactor;
use std::time::{Duration, Instant};

/// The system prompt every task starts with. It names no absolute path, so it is identical
/// across tasks and runs (providers can cache it).
pub const SYSTEM_PROMPT: &str = "\
You are dracode, an autonomous coding agent running non-interactively in a CI job. \
You work inside one workspace directory; every path you pass to a tool is relative to it, and \
tools refuse paths outside it. Use the tools to inspect the code, make the requested change, \
and verify it (run the project's build or tests with run_command when that is cheap). \
Nobody will answer questions: make reasonable decisions yourself. When the task is done, reply \
with a short summary of what you changed and how you checked it, without calling a tool.";

pub use crate::budget::{Budget, RunMeter};

/// Everything the loop needs, borrowed from the runner.
pub struct Agent<'a> {
    /// The model.
    pub provider: &'a dyn Provider,
    /// The enabled tools.
    pub registry: &'a Registry,
    /// The tools' workspace and settings.
    pub tool_ctx: &'a ToolContext,
    /// Where events go.
    pub emitter: &'a Emitter,
    /// Masks secrets in tool output before the model or any artifact sees it.
    pub redactor: &'a Redactor,
    /// The system prompt.
    pub system: String,
    /// LLM calls allowed.
    pub max_iterations: u32,
    /// Output token limit per call.
    pub max_output_tokens: Option<u32>,
    /// Token and cost limits of the task.
    pub budget: Budget,
    /// The run's shared spend and limits.
    pub run_meter: Option<&'a RunMeter>,
    /// The price of a usage on this task's model (`None` when unpriced).
    pub cost: &'a (dyn Fn(&Usage) -> Option<f64> + Send + Sync),
    /// The schema the final answer must match ([`crate::structured`]), if the task has one.
    pub output: Option<&'a OutputContract>,
    /// The context window the conversation must stay in ([`crate::context`]).
    pub context: ContextPolicy,
    /// When the agent started and the time it has (`timeout`), for the warning when little is
    /// left ([`crate::deadline`]).
    pub clock: (Instant, Option<Duration>),
}

/// The loop's progress, readable after it stops for any reason.
#[derive(Debug, Clone, Default)]
pub struct AgentState {
    /// The conversation as the next request sends it, the task prompt first (compacted when
    /// it outgrew the context window).
    pub messages: Vec<Message>,
    /// The whole conversation for the transcript: every message as first sent, compactions
    /// marked where they happened.
    pub history: Vec<Message>,
    /// Summed usage of every call that returned.
    pub usage: Usage,
    /// LLM calls that returned.
    pub turns: u32,
    /// The agent's last text.
    pub final_text: Option<String>,
    /// The structured answer so far (tasks with an output schema).
    pub answer: AnswerProgress,
    /// Times the conversation was shrunk or compacted (`context.compacted` events).
    pub compactions: u32,
    /// The tool calls the task's policy denied, and the protected paths it refused to change.
    pub refused: Refused,
    /// Calls counted against `max_iterations` so far (a refused request sent again after
    /// compaction counts once).
    pub calls_used: u32,
    /// The limits the agent was already warned about ([`crate::deadline`]).
    pub warned: crate::deadline::Warned,
    /// The version of an agent other than dracode's own, as its requests told it (their
    /// `User-Agent`).
    pub agent_version: Option<String>,
}

/// What was refused of a task's tool calls.
#[derive(Debug, Clone, Default)]
pub struct Refused {
    /// The calls the task's policy denied, in order.
    pub denied: Vec<DeniedCall>,
    /// The workspace-relative protected paths a tool was refused to change (`protect`).
    pub protected: std::collections::BTreeSet<String>,
}

impl AgentState {
    /// Adds `message` to the conversation and to the history.
    fn push(&mut self, message: Message) {
        self.history.push(message.clone());
        self.messages.push(message);
    }
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEnd {
    /// The model ended its turn.
    Finished,
    /// Every iteration was used.
    MaxIterations,
    /// A token or cost budget ran out.
    BudgetExceeded(String),
    /// The model or the provider failed.
    Failed(TaskError),
}

impl Agent<'_> {
    /// Runs the task `prompt` to its end, recording progress in `state`.
    pub async fn run(&self, prompt: &str, state: &mut AgentState) -> AgentEnd {
        state.push(Message::user_text(prompt));
        self.drive(prompt, state).await
    }

    /// Continues the conversation in `state` (of an earlier [`Agent::run`] of `prompt` that
    /// finished) with the user's `message`, e.g. a failed check's output; the calls it makes
    /// count against the same `max_iterations` and budgets.
    pub async fn resume(&self, prompt: &str, message: String, state: &mut AgentState) -> AgentEnd {
        state.push(Message::user_text(message));
        self.drive(prompt, state).await
    }

    /// The loop: calls the model on `state`'s conversation until it ends its turn, fails, or
    /// runs out of iterations or budget.
    async fn drive(&self, prompt: &str, state: &mut AgentState) -> AgentEnd {
        let mut specs: Vec<ToolSpec> = self.registry.specs();
        specs.extend(self.output.map(OutputContract::tool_spec));
        let mut meter = ContextMeter::default();
        let mut refused_once = false;
        while state.calls_used < self.max_iterations {
            state.calls_used += 1;
            if let Err(end) = self.fit_context(prompt, &specs, state, &mut meter, false).await {
                return end;
            }
            self.warn_if_close(state);
            let estimate = meter.estimate(&self.system, &specs, &state.messages);
            let held = match self.reserve_call(&state.usage, estimate) {
                Ok(held) => held,
                Err(reason) => return AgentEnd::BudgetExceeded(reason.to_string()),
            };
            let started = Instant::now();
            let request = LlmRequest { system: &self.system, messages: &state.messages, tools: &specs, max_tokens: self.max_output_tokens };
            // The emitter reports retries as events and restarts the idle clock on every byte.
            let response = match self.provider.complete(request, self.emitter).await.map_err(overflow::recognise) {
                Ok(response) => response,
                // Refused as longer than the window: compact once and send again.
                Err(e) if e.kind == ErrorKind::ContextOverflow && !refused_once && state.messages.len() > 1 => {
                    refused_once = true;
                    meter.learn(overflow::reported_window(&e.message));
                    if let Err(end) = self.fit_context(prompt, &specs, state, &mut meter, true).await {
                        return end;
                    }
                    state.calls_used -= 1;
                    continue;
                }
                Err(e) if e.kind == ErrorKind::ContextOverflow => return AgentEnd::Failed(still_too_long(e)),
                Err(e) => return AgentEnd::Failed(e.into()),
            };
            refused_once = false;
            meter.observe(&response.usage, state.messages.len());
            self.count_turn(state, &response, started);
            drop(held);
            let message = Message { role: Role::Assistant, content: response.content };
            let text = message.text();
            if !text.trim().is_empty() {
                state.final_text = Some(text.clone());
            }
            let calls: Vec<(String, String, serde_json::Value)> = message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse { id, name, input } => Some((id.clone(), name.clone(), input.clone())),
                    _ => None,
                })
                .collect();
            state.push(message);
            if let Some(reason) = self.over_budget(&state.usage) {
                return AgentEnd::BudgetExceeded(reason);
            }
            if !calls.is_empty() {
                match self.run_tool_calls(calls, state).await {
                    Some(end) => return end,
                    None => continue,
                }
            }
            match response.stop_reason {
                StopReason::EndTurn | StopReason::StopSequence => {
                    if !text.trim().is_empty() {
                        self.emitter.emit(WireEvent::AgentMessage { header: Header::unstamped(None), text });
                    }
                    match self.output.map(|contract| contract.on_plain_end(&mut state.answer)) {
                        Some(Step::Repair(ask)) => state.push(Message::user_text(ask)),
                        Some(Step::GiveUp(error)) => return AgentEnd::Failed(error),
                        Some(Step::Accept | Step::Continue) | None => return AgentEnd::Finished,
                    }
                }
                StopReason::PauseTurn => continue,
                other => return AgentEnd::Failed(stop_failure(&other)),
            }
        }
        AgentEnd::MaxIterations
    }

    /// Runs a turn's tool calls and records their results; `Some` when the turn ends the task:
    /// a denial under `on_denied = "fail"`, a command past a resource limit (its result is
    /// recorded first), or the output contract's verdict.
    async fn run_tool_calls(&self, calls: Vec<(String, String, serde_json::Value)>, state: &mut AgentState) -> Option<AgentEnd> {
        let (denied_before, reports_before) = (state.refused.denied.len(), self.tool_ctx.reports.len());
        let (results, step) = self.answer_turn(calls, &mut state.answer, &mut state.refused).await;
        state.push(Message { role: Role::User, content: results });
        if let Some(error) = self.denial_ends_task(&state.refused.denied[denied_before..]) {
            return Some(AgentEnd::Failed(error));
        }
        if let Some(error) = dracode_sandbox::incidents::limit_failure(&self.tool_ctx.reports.all()[reports_before..]) {
            return Some(AgentEnd::Failed(error));
        }
        match step {
            Step::Accept => Some(AgentEnd::Finished),
            Step::GiveUp(error) => Some(AgentEnd::Failed(error)),
            Step::Continue | Step::Repair(_) => None,
        }
    }

    /// Answers every call of a turn, in the order the model made them: the task's tools run,
    /// final-answer calls go to the output contract, whose verdict is the step.
    async fn answer_turn(
        &self,
        calls: Vec<(String, String, serde_json::Value)>,
        answer: &mut AnswerProgress,
        refused: &mut Refused,
    ) -> (Vec<ContentBlock>, Step) {
        let Some(contract) = self.output else { return (self.call_tools(calls, refused).await, Step::Continue) };
        let order: Vec<String> = calls.iter().map(|(id, ..)| id.clone()).collect();
        let (finals, tools): (Vec<_>, Vec<_>) = calls.into_iter().partition(|(_, name, _)| name == ANSWER_TOOL);
        let mut results = self.call_tools(tools, refused).await;
        let mut step = Step::Continue;
        for (id, name, input) in finals {
            self.emitter.emit(Event::tool_started(&id, &name, input.clone()));
            let started = Instant::now();
            let (result, verdict) = contract.answer(&id, &input, answer);
            if let ContentBlock::ToolResult { content, is_error, .. } = &result {
                let (ok, output) = (!is_error, self.redactor.redact(content).into_owned());
                self.emitter.emit(Event::tool_completed(&id, &name, ok, output, started.elapsed()));
            }
            results.push(result);
            if step == Step::Continue {
                step = verdict;
            }
        }
        results.sort_by_key(|r| match r {
            ContentBlock::ToolResult { tool_use_id, .. } => order.iter().position(|id| id == tool_use_id),
            _ => None,
        });
        (results, step)
    }

    /// Shrinks the conversation when the next request would reach the compaction threshold, or
    /// (`refused`) because the provider refused it as too long: old tool outputs first, then a
    /// summary (cutting the kept turns' outputs too when the summary alone is not enough).
    async fn fit_context(
        &self,
        prompt: &str,
        specs: &[ToolSpec],
        state: &mut AgentState,
        meter: &mut ContextMeter,
        refused: bool,
    ) -> Result<(), AgentEnd> {
        let mut before = meter.estimate(&self.system, specs, &state.messages);
        let share = |tokens: u64| ((tokens as f64) * self.context.compact_at).floor() as u64;
        // A refused request was over the real window whatever the estimate says: aim below
        // `compact_at` of its size too (and take that size for the window if none is known).
        let window = meter.window(&self.context).or(refused.then_some(before));
        let threshold = match window.map(share) {
            Some(t) if refused => Some(t.min(share(before))),
            other => other,
        };
        if !refused && threshold.is_none_or(|t| before < t) {
            return Ok(());
        }
        let saved = context::trim_tool_outputs(&mut state.messages, context::RECENT_TURNS);
        if saved > 0 {
            meter.discount(saved.div_ceil(context::BYTES_PER_TOKEN));
            let after = meter.estimate(&self.system, specs, &state.messages);
            self.compacted(state, before, after, CompactionMethod::TrimToolOutputs);
            if threshold.is_some_and(|t| after < t) {
                return Ok(());
            }
            before = after;
        }
        let summary = self.summarise(state, window).await?;
        state.messages = context::rebuild(prompt, &summary, &state.messages, KEEP_TURNS_AFTER_SUMMARY);
        let note = format!("[dracode: the conversation was compacted here; the model continued from:]\n{}", state.messages[0].text());
        state.history.push(Message::user_text(note));
        meter.forget();
        // The kept turns' outputs too, when the summary alone is not enough.
        if threshold.is_some_and(|t| meter.estimate(&self.system, specs, &state.messages) >= t) {
            context::trim_tool_outputs(&mut state.messages, 0);
        }
        let after = meter.estimate(&self.system, specs, &state.messages);
        self.compacted(state, before, after, CompactionMethod::Summary);
        Ok(())
    }

    /// Asks the model (no tools) for a summary of the work in `state` so far, its request
    /// sized for `window`; the call counts as a turn, with its usage.
    async fn summarise(&self, state: &mut AgentState, window: Option<u64>) -> Result<String, AgentEnd> {
        let budget = window.map(|w| {
            let bytes = (w as f64 * SUMMARY_SHARE) as u64 * context::BYTES_PER_TOKEN;
            usize::try_from(bytes).unwrap_or(usize::MAX).min(MAX_SUMMARY_TRANSCRIPT)
        });
        let messages = [context::summary_request(&state.messages, budget)];
        let _held = self
            .reserve_call(&state.usage, context::estimate_request(&self.system, &[], &messages))
            .map_err(|e| AgentEnd::BudgetExceeded(e.to_string()))?;
        let started = Instant::now();
        let request = LlmRequest { system: &self.system, messages: &messages, tools: &[], max_tokens: self.max_output_tokens };
        let response = match self.provider.complete(request, self.emitter).await.map_err(overflow::recognise) {
            Ok(response) => response,
            Err(e) if e.kind == ErrorKind::ContextOverflow => return Err(AgentEnd::Failed(still_too_long(e))),
            Err(e) => return Err(AgentEnd::Failed(e.into())),
        };
        self.count_turn(state, &response, started);
        if let Some(reason) = self.over_budget(&state.usage) {
            return Err(AgentEnd::BudgetExceeded(reason));
        }
        let text = Message { role: Role::Assistant, content: response.content }.text();
        Ok(if text.trim().is_empty() { "(the model gave no summary)".to_string() } else { text })
    }

    /// Counts a call that returned (started at `started`) in the task's and the run's usage
    /// and reports it as `turn.completed`.
    fn count_turn(&self, state: &mut AgentState, response: &LlmResponse, started: Instant) {
        state.usage += response.usage;
        state.turns += 1;
        if let Some(meter) = self.run_meter {
            meter.add(&response.usage, (self.cost)(&response.usage));
        }
        self.emitter.emit(Event::turn_completed(state.turns, &response.stop_reason, response.usage, started.elapsed()));
    }

    /// Tells the agent, in the request about to be sent, of the limits that are close (each
    /// once), and reports each as `limit.warning`.
    fn warn_if_close(&self, state: &mut AgentState) {
        let limits = crate::deadline::Limits { max_iterations: self.max_iterations, timeout: self.clock.1, budget: self.budget };
        let spent = crate::deadline::Spent {
            calls: state.calls_used,
            elapsed: self.clock.0.elapsed(),
            tokens: state.usage.total_tokens,
            cost_usd: (self.cost)(&state.usage),
        };
        let close = crate::deadline::close_limits(&limits, &spent, &mut state.warned);
        if close.is_empty() {
            return;
        }
        let text = crate::deadline::message(&close);
        for w in &close {
            self.emitter.emit(WireEvent::LimitWarning {
                header: Header::unstamped(None),
                limit: w.limit,
                remaining: w.remaining,
                allowed: w.allowed,
                message: text.clone(),
            });
        }
        for list in [&mut state.messages, &mut state.history] {
            match list.last_mut() {
                Some(last) if last.role == Role::User => last.content.push(ContentBlock::text(text.clone())),
                _ => list.push(Message::user_text(text.clone())),
            }
        }
    }

    /// Counts and reports one shrink of the conversation.
    fn compacted(&self, state: &mut AgentState, tokens_before: u64, tokens_after: u64, method: CompactionMethod) {
        state.compactions += 1;
        self.emitter.emit(WireEvent::ContextCompacted { header: Header::unstamped(None), tokens_before, tokens_after, method });
    }

    /// Runs each call in order and answers every one, errors included; calls the policy
    /// refused are added to `refused`. A turn whose calls all only read runs them at once.
    async fn call_tools(&self, calls: Vec<(String, String, serde_json::Value)>, refused: &mut Refused) -> Vec<ContentBlock> {
        if calls.len() > 1 && calls.iter().all(|(_, name, _)| self.registry.is_read_only(name)) {
            return self.call_read_only_tools(calls, refused).await;
        }
        let mut results = Vec::with_capacity(calls.len());
        for (id, name, input) in calls {
            self.emitter.emit(Event::tool_started(&id, &name, input.clone()));
            let started = Instant::now();
            let result = self.registry.call(self.tool_ctx, &name, input).await;
            results.push(self.tool_completed(id, name, result, started.elapsed(), refused));
        }
        results
    }

    /// The failure that ends the task when it has `on_denied = "fail"` and `new` holds a
    /// denied call (the model was answered first, so the transcript shows the denial).
    fn denial_ends_task(&self, new: &[DeniedCall]) -> Option<TaskError> {
        let first = new.first().filter(|_| self.tool_ctx.policy.on_denied == OnDenied::Fail)?;
        let message = format!("{} call denied (on_denied = \"fail\"): {}", first.tool, first.message);
        Some(TaskError::new(FailureKind::Denied, message))
    }

    /// Runs a turn's calls that only read all at once; they
    /// are still started, completed and answered in the model's order. Dropping the turn (a
    /// timeout, a cancel) aborts those still running.
    async fn call_read_only_tools(&self, calls: Vec<(String, String, serde_json::Value)>, refused: &mut Refused) -> Vec<ContentBlock> {
        let mut running = tokio::task::JoinSet::new();
        let mut handles = Vec::with_capacity(calls.len());
        for (id, name, input) in calls {
            self.emitter.emit(Event::tool_started(&id, &name, input.clone()));
            let (registry, ctx, tool) = (self.registry.clone(), self.tool_ctx.clone(), name.clone());
            let handle = running.spawn(async move {
                let started = Instant::now();
                (registry.call(&ctx, &tool, input).await, started.elapsed())
            });
            handles.push((id, name, handle.id()));
        }
        let mut done = std::collections::HashMap::with_capacity(handles.len());
        while let Some(joined) = running.join_next_with_id().await {
            let (task, outcome) = match joined {
                Ok((task, outcome)) => (task, outcome),
                Err(e) => (e.id(), (Err(ToolError::new(ErrorCode::IoError, format!("tool task failed: {e}"))), Duration::ZERO)),
            };
            done.insert(task, outcome);
        }
        let mut results = Vec::with_capacity(handles.len());
        for (id, name, task) in handles {
            let (result, elapsed) =
                done.remove(&task).unwrap_or_else(|| (Err(ToolError::new(ErrorCode::IoError, "tool task lost")), Duration::ZERO));
            results.push(self.tool_completed(id, name, result, elapsed, refused));
        }
        results
    }

    /// Reports one finished call (`tool.completed`, output redacted) and makes its answer; a
    /// call the policy or `protect` refused is added to `refused`.
    fn tool_completed(
        &self,
        id: String,
        name: String,
        result: Result<String, ToolError>,
        duration: Duration,
        refused: &mut Refused,
    ) -> ContentBlock {
        let (ok, output) = match result {
            Ok(text) => (true, text),
            Err(e) => {
                if e.code == ErrorCode::Denied {
                    let message = self.redactor.redact(&e.message).into_owned();
                    refused.denied.push(DeniedCall { call_id: id.clone(), tool: name.clone(), message });
                }
                refused.protected.extend(e.protected.iter().map(|path| self.redactor.redact(path).into_owned()));
                (false, e.to_string())
            }
        };
        let output = self.redactor.redact(&output).into_owned();
        self.emitter.emit(Event::tool_completed(&id, &name, ok, output.clone(), duration));
        ContentBlock::ToolResult { tool_use_id: id, content: output, is_error: !ok }
    }

    /// Holds the next call's largest possible cost (`input_tokens` in, the whole output
    /// allowance out) against the task's and the run's cost caps; `Err` with the reason when it
    /// could pass one, and then the call is not sent ([`crate::budget`]).
    fn reserve_call(&self, spent: &Usage, input_tokens: u64) -> Result<Option<crate::budget::Reservation<'_>>, BudgetExceeded> {
        let call = crate::budget::CallCost {
            budget: self.budget,
            max_output_tokens: self.max_output_tokens,
            cost: self.cost,
            run_meter: self.run_meter,
        };
        call.reserve(spent, input_tokens)
    }

    /// Why `usage` is over the task's budget, if it is.
    fn over_budget(&self, usage: &Usage) -> Option<String> {
        if let Some(reason) = self.run_meter.and_then(RunMeter::exceeded) {
            return Some(reason);
        }
        if let Some(limit) = self.budget.max_tokens
            && usage.total_tokens > limit
        {
            return Some(format!("used {} tokens, over the task's max_tokens of {limit}", usage.total_tokens));
        }
        if let (Some(limit), Some(cost)) = (self.budget.max_cost_usd, (self.cost)(usage))
            && cost > limit
        {
            return Some(format!("spent ${cost:.4}, over the task's max_cost_usd of ${limit}"));
        }
        None
    }
}

/// Assistant turns kept verbatim after a summary.
const KEEP_TURNS_AFTER_SUMMARY: usize = 2;
/// The share of the window the summary call's transcript may fill.
const SUMMARY_SHARE: f64 = 0.5;
/// The summary call's transcript never exceeds this many bytes, however large the window.
const MAX_SUMMARY_TRANSCRIPT: usize = 256 * 1024;

/// The failure when a request is still refused as too long after compaction.
fn still_too_long(e: LlmError) -> TaskError {
    TaskError {
        kind: FailureKind::Llm(ErrorKind::ContextOverflow),
        message: format!("the conversation does not fit the model's context window, even after compaction: {}", e.message),
        http_status: e.http_status,
    }
}

/// The failure for a stop reason that is neither a finished turn nor a tool request.
fn stop_failure(reason: &StopReason) -> TaskError {
    let message = match reason {
        StopReason::MaxTokens => "the model's answer was cut off at the output token limit (raise max_output_tokens)".to_string(),
        StopReason::Refusal => "the model refused the task".to_string(),
        StopReason::ContentFilter => "the provider's content filter withheld the answer".to_string(),
        StopReason::MalformedToolCall => "the model produced a malformed tool call".to_string(),
        other => format!("the model stopped with {:?}", other.as_str()),
    };
    TaskError::new(FailureKind::Agent, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dracode_llm::ErrorKind;
    use dracode_llm::replay::Replay;
    use serde_json::json;

    fn reply(content: Vec<ContentBlock>, stop: StopReason, input: u64, output: u64) -> LlmResponse {
        LlmResponse { content, stop_reason: stop, usage: Usage::from_counts(input, output), model: None }
    }

    fn tool_use(id: &str, name: &str, input: serde_json::Value) -> ContentBlock {
        ContentBlock::ToolUse { id: id.into(), name: name.into(), input }
    }

    async fn run(responses: Vec<LlmResponse>, max_iterations: u32, budget: Budget) -> (AgentEnd, AgentState, tempfile::TempDir) {
        run_with(responses, max_iterations, budget, None).await
    }

    async fn run_with(
        responses: Vec<LlmResponse>,
        max_iterations: u32,
        budget: Budget,
        output: Option<&OutputContract>,
    ) -> (AgentEnd, AgentState, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let provider = Replay::from_responses(responses);
        let registry = Registry::all();
        let ctx = crate::tools::test_context(dir.path());
        let emitter = Emitter::discard();
        let redactor = Redactor::new(["sk-secret-value-123".to_string()]);
        let cost = |u: &Usage| Some(u.total_tokens as f64 / 1000.0);
        let agent = Agent {
            provider: &provider,
            registry: &registry,
            tool_ctx: &ctx,
            emitter: &emitter,
            redactor: &redactor,
            system: SYSTEM_PROMPT.into(),
            max_iterations,
            max_output_tokens: None,
            budget,
            run_meter: None,
            cost: &cost,
            output,
            context: ContextPolicy::unknown(),
            clock: (Instant::now(), None),
        };
        let mut state = AgentState::default();
        let end = agent.run("do it", &mut state).await;
        (end, state, dir)
    }

    #[tokio::test]
    async fn every_call_of_a_turn_is_answered_in_order_and_usage_sums() {
        let (end, state, dir) = run(
            vec![
                reply(
                    vec![
                        tool_use("a", "write_file", json!({"file_path": "x.txt", "content": "hi"})),
                        tool_use("b", "read_file", json!({"file_path": "missing.txt"})),
                        tool_use("c", "no_such_tool", json!({})),
                    ],
                    StopReason::ToolUse,
                    10,
                    5,
                ),
                reply(vec![ContentBlock::text("done")], StopReason::EndTurn, 20, 3),
            ],
            10,
            Budget::default(),
        )
        .await;
        assert_eq!(end, AgentEnd::Finished);
        assert_eq!(std::fs::read_to_string(dir.path().join("x.txt")).unwrap(), "hi");
        assert_eq!(state.turns, 2);
        assert_eq!(state.usage.total_tokens, 38);
        assert_eq!(state.final_text.as_deref(), Some("done"));
        let results = &state.messages[2].content;
        let ids: Vec<(&str, bool)> = results
            .iter()
            .map(|b| match b {
                ContentBlock::ToolResult { tool_use_id, is_error, .. } => (tool_use_id.as_str(), *is_error),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(ids, [("a", false), ("b", true), ("c", true)]);
        let ContentBlock::ToolResult { content, .. } = &results[1] else { unreachable!() };
        assert!(content.starts_with("Error [FILE_NOT_FOUND]"), "{content}");
    }

    #[tokio::test]
    async fn a_final_answer_is_repaired_in_call_order_then_ends_the_loop() {
        let contract =
            OutputContract::new(json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}), 2, false).unwrap();
        let turns = vec![
            reply(
                vec![
                    tool_use("a", ANSWER_TOOL, json!({"n": "x"})),
                    tool_use("b", "write_file", json!({"file_path": "x.txt", "content": "hi"})),
                ],
                StopReason::ToolUse,
                1,
                1,
            ),
            reply(vec![ContentBlock::text("I am done.")], StopReason::EndTurn, 1, 1),
            reply(vec![tool_use("c", ANSWER_TOOL, json!({"n": 7}))], StopReason::ToolUse, 1, 1),
            reply(vec![ContentBlock::text("never asked for")], StopReason::EndTurn, 1, 1),
        ];
        let (end, state, dir) = run_with(turns, 10, Budget::default(), Some(&contract)).await;
        assert_eq!(end, AgentEnd::Finished);
        assert_eq!(state.turns, 3, "the loop ends at the accepted answer");
        assert_eq!(state.answer, AnswerProgress { value: Some(json!({"n": 7})), repairs: 2 });
        assert!(dir.path().join("x.txt").is_file());
        let results: Vec<(&str, bool, &str)> = state.messages[2]
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::ToolResult { tool_use_id, is_error, content } => (tool_use_id.as_str(), *is_error, content.as_str()),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!((results[0].0, results[0].1, results[1].0), ("a", true, "b"), "answered in call order");
        assert!(results[0].2.contains("at /n: \"x\" is not of type \"integer\""), "{}", results[0].2);
        assert!(state.messages[4].text().contains("Call the final_answer tool"), "a plain end gets a repair turn");
    }

    #[tokio::test]
    async fn max_iterations_and_typed_failures() {
        let looping = (0..3).map(|i| reply(vec![tool_use(&format!("c{i}"), "list_files", json!({}))], StopReason::ToolUse, 1, 1)).collect();
        assert_eq!(run(looping, 3, Budget::default()).await.0, AgentEnd::MaxIterations);
        let (end, ..) = run(vec![reply(vec![ContentBlock::text("…")], StopReason::MaxTokens, 1, 1)], 3, Budget::default()).await;
        assert!(matches!(end, AgentEnd::Failed(TaskError { kind: FailureKind::Agent, .. })));
        let (end, ..) = run(vec![], 3, Budget::default()).await;
        assert!(matches!(end, AgentEnd::Failed(TaskError { kind: FailureKind::Llm(ErrorKind::BadResponse), .. })));
    }

    /// A provider answering from a script of results, recording each request's messages and
    /// tool count, and reporting each request's estimated size as its prompt tokens.
    struct Scripted {
        replies: std::sync::Mutex<std::collections::VecDeque<Result<LlmResponse, LlmError>>>,
        seen: std::sync::Mutex<Vec<(Vec<Message>, usize, u64)>>,
    }

    impl Provider for Scripted {
        fn complete<'a>(
            &'a self,
            request: LlmRequest<'a>,
            _: dracode_llm::RetryObserver<'a>,
        ) -> dracode_llm::BoxFuture<'a, Result<LlmResponse, LlmError>> {
            let size = context::estimate_request(request.system, request.tools, request.messages);
            self.seen.lock().unwrap().push((request.messages.to_vec(), request.tools.len(), size));
            let reply = self.replies.lock().unwrap().pop_front().expect("script exhausted");
            Box::pin(async move {
                reply.map(|mut r| {
                    r.usage = Usage::from_counts(size, r.usage.output_tokens);
                    r
                })
            })
        }

        fn model(&self) -> &str {
            "scripted"
        }
    }

    fn overflow(message: &str) -> Result<LlmResponse, LlmError> {
        let mut e = LlmError::new(ErrorKind::BadResponse, format!("HTTP 400: {message} (type invalid_request_error)"));
        e.http_status = Some(400);
        Err(e)
    }

    async fn run_scripted(replies: Vec<Result<LlmResponse, LlmError>>, policy: ContextPolicy) -> (AgentEnd, AgentState, Scripted) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.txt"), "line of a big file\n".repeat(1000)).unwrap();
        let provider = Scripted { replies: std::sync::Mutex::new(replies.into()), seen: std::sync::Mutex::default() };
        // The default tools: the sizes below count their schemas.
        let registry = Registry::with_names(&crate::tools::DEFAULT_TOOLS).unwrap();
        let ctx = crate::tools::test_context(dir.path());
        let emitter = Emitter::discard();
        let redactor = Redactor::new(Vec::<String>::new());
        let cost = |_: &Usage| None;
        let agent = Agent {
            provider: &provider,
            registry: &registry,
            tool_ctx: &ctx,
            emitter: &emitter,
            redactor: &redactor,
            system: SYSTEM_PROMPT.into(),
            max_iterations: 10,
            max_output_tokens: None,
            budget: Budget::default(),
            run_meter: None,
            cost: &cost,
            output: None,
            context: policy,
            clock: (Instant::now(), None),
        };
        let mut state = AgentState::default();
        let end = agent.run("fix it", &mut state).await;
        (end, state, provider)
    }

    fn read_big(id: &str) -> Result<LlmResponse, LlmError> {
        Ok(reply(vec![tool_use(id, "read_file", json!({"file_path": "big.txt"}))], StopReason::ToolUse, 0, 5))
    }

    fn text(t: &str) -> Result<LlmResponse, LlmError> {
        Ok(reply(vec![ContentBlock::text(t)], StopReason::EndTurn, 0, 5))
    }

    /// Issue 9: a provider's overflow refusal leads to one summary and a retry, not the end.
    #[tokio::test]
    async fn an_overflow_refusal_is_compacted_by_summary_and_sent_again() {
        let replies = vec![
            read_big("c1"),
            overflow("prompt is too long: 9000 tokens > 4000 maximum"),
            text("read big.txt; nothing changed yet"),
            text("done"),
        ];
        let (end, state, provider) = run_scripted(replies, ContextPolicy::unknown()).await;
        assert_eq!(end, AgentEnd::Finished);
        let seen = provider.seen.lock().unwrap();
        assert_eq!(seen.len(), 4);
        let (summary_messages, summary_tools, _) = &seen[2];
        assert_eq!((summary_messages.len(), *summary_tools), (1, 0), "the summary call is one message, no tools");
        assert!(summary_messages[0].text().contains("agent called read_file"));
        let (retried, tools, size) = &seen[3];
        assert!(tools > &0);
        assert!(retried[0].text().starts_with("fix it") && retried[0].text().contains("read big.txt; nothing changed yet"));
        assert!(*size < 3400, "the retried request fits the window the provider named: {size}");
        let ContentBlock::ToolResult { content, .. } = &retried[2].content[0] else { panic!("{retried:?}") };
        assert!(content.contains("dracode cut"), "{content}");
        // One summary (which also cut the kept turn's output).
        assert_eq!(state.compactions, 1);
        // The history keeps the whole output and marks the compaction.
        let ContentBlock::ToolResult { content, .. } = &state.history[2].content[0] else { panic!("{:?}", state.history) };
        assert!(content.len() >= 19_000 && !content.contains("dracode cut"), "{}", content.len());
        assert!(state.history[3].text().starts_with("[dracode: the conversation was compacted here"));
        assert_eq!(state.history.len(), 5, "prompt, call, result, note, answer");
        assert_eq!(state.turns, 3, "the summary call is a turn");
        assert_eq!(state.usage.requests, 3);
    }

    #[tokio::test]
    async fn a_second_refusal_ends_the_task_as_context_overflow() {
        let too_long = "This model's maximum context length is 4000 tokens. However, your messages resulted in 9000 tokens.";
        let replies = vec![read_big("c1"), overflow(too_long), text("summary"), overflow(too_long)];
        let (end, ..) = run_scripted(replies, ContextPolicy::unknown()).await;
        let AgentEnd::Failed(error) = end else { panic!("{end:?}") };
        assert_eq!(error.kind, FailureKind::Llm(ErrorKind::ContextOverflow));
        assert!(!error.kind.is_infrastructure());
        assert!(error.message.contains("even after compaction") && error.message.contains("maximum context length"), "{}", error.message);
        // The prompt alone too long: nothing to compact.
        let (end, ..) = run_scripted(vec![overflow(too_long)], ContextPolicy::unknown()).await;
        assert!(matches!(end, AgentEnd::Failed(TaskError { kind: FailureKind::Llm(ErrorKind::ContextOverflow), .. })));
    }

    /// With a known window, old outputs are trimmed before any request reaches the threshold.
    #[tokio::test]
    async fn a_known_window_is_never_reached() {
        let mut replies: Vec<_> = (0..6).map(|i| read_big(&format!("c{i}"))).collect();
        replies.push(text("done"));
        let window = 26_000;
        let (end, state, provider) = run_scripted(replies, ContextPolicy::new(Some(window), None, 0.85)).await;
        assert_eq!(end, AgentEnd::Finished);
        let seen = provider.seen.lock().unwrap();
        assert!(seen.iter().all(|(_, _, size)| *size < window), "{:?}", seen.iter().map(|s| s.2).collect::<Vec<_>>());
        assert!(state.compactions >= 1);
        assert_eq!(seen.len(), 7, "trimming sufficed: no summary call");
    }

    /// With a known window that trimming cannot keep, the model summarises before any request
    /// passes the threshold, and no provider refusal is needed.
    #[tokio::test]
    async fn a_known_window_leads_to_a_summary_before_the_provider_refuses() {
        let replies = vec![read_big("c1"), text("read big.txt"), text("done")];
        let window = 6_000;
        let (end, state, provider) = run_scripted(replies, ContextPolicy::new(Some(100_000), Some(window), 0.85)).await;
        assert_eq!(end, AgentEnd::Finished);
        let seen = provider.seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[1].1, 0, "the second call is the summary, without tools");
        assert!(seen[2].0[0].text().contains("read big.txt"));
        assert!(seen.iter().all(|(_, _, size)| *size < 5_100), "{:?}", seen.iter().map(|s| s.2).collect::<Vec<_>>());
        assert_eq!(state.compactions, 1);
    }

    /// A refusal naming no window: trimming old outputs well below the refused size is enough,
    /// no summary call needed.
    #[tokio::test]
    async fn a_refusal_without_a_window_may_be_met_by_trimming_alone() {
        let mut replies: Vec<_> = (0..5).map(|i| read_big(&format!("c{i}"))).collect();
        replies.push(overflow("the request exceeds the available context size, try increasing it"));
        replies.push(text("done"));
        let (end, state, provider) = run_scripted(replies, ContextPolicy::unknown()).await;
        assert_eq!(end, AgentEnd::Finished);
        let seen = provider.seen.lock().unwrap();
        assert_eq!(seen.len(), 7);
        assert!(seen.iter().all(|(_, tools, _)| *tools > 0), "no summary call");
        assert!(seen[6].2 * 100 < seen[5].2 * 85, "{} then {}", seen[5].2, seen[6].2);
        assert_eq!(state.compactions, 1);
    }

    #[tokio::test]
    async fn budgets_stop_the_loop() {
        let turns = (0..5)
            .map(|i| reply(vec![tool_use(&format!("c{i}"), "list_files", json!({}))], StopReason::ToolUse, 100, 50))
            .collect::<Vec<_>>();
        let (end, state, _) = run(turns.clone(), 10, Budget { max_tokens: Some(200), max_cost_usd: None }).await;
        assert!(matches!(end, AgentEnd::BudgetExceeded(_)));
        assert_eq!(state.turns, 2);
        let (end, _, _) = run(turns, 10, Budget { max_tokens: None, max_cost_usd: Some(0.2) }).await;
        assert!(matches!(end, AgentEnd::BudgetExceeded(ref m) if m.contains("max_cost_usd")));
    }
}

#[cfg(test)]
mod concurrent_tests {
    use super::*;
    use crate::tools::Tool;
    use dracode_llm::replay::Replay;
    use serde_json::json;
    use std::sync::{Arc, Mutex};

    /// A tool that waits until three calls of it run at once (or gives up after `patience`, answering "alone").
    struct Meeting {
        active: Arc<std::sync::atomic::AtomicUsize>,
        met: Arc<std::sync::atomic::AtomicBool>,
        patience: Duration,
        read_only: bool,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl Tool for Meeting {
        fn name(&self) -> &'static str {
            "meet"
        }
        fn description(&self) -> &'static str {
            "waits for the others"
        }
        fn schema(&self) -> serde_json::Value {
            json!({"type": "object", "properties": {}})
        }
        fn read_only(&self) -> bool {
            self.read_only
        }
        fn call<'a>(&'a self, _: &'a ToolContext, input: serde_json::Value) -> dracode_llm::BoxFuture<'a, Result<String, ToolError>> {
            Box::pin(async move {
                let who = input["who"].as_str().unwrap_or("?").to_string();
                self.log.lock().unwrap().push(format!("start {who}"));
                use std::sync::atomic::Ordering;
                self.active.fetch_add(1, Ordering::SeqCst);
                let meet = async {
                    // Once three ran at once, the meeting happened for all of them.
                    while self.active.load(Ordering::SeqCst) < 3 && !self.met.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    self.met.store(true, Ordering::SeqCst);
                };
                let met = tokio::time::timeout(self.patience, meet).await.is_ok();
                self.active.fetch_sub(1, Ordering::SeqCst);
                self.log.lock().unwrap().push(format!("end {who}"));
                Ok(format!("{who}: {}", if met { "met" } else { "alone" }))
            })
        }
    }

    fn reply(content: Vec<ContentBlock>, stop: StopReason) -> LlmResponse {
        LlmResponse { content, stop_reason: stop, usage: Usage::from_counts(1, 1), model: None }
    }

    /// Runs one turn of three `meet` calls (plus `extra` calls) and returns the answers in order
    /// and the tools' start/end log.
    async fn one_turn(read_only: bool, extra: Vec<ContentBlock>) -> (Vec<String>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        // Sequential calls give up soon (they can never meet); concurrent ones get plenty of time.
        let patience = Duration::from_millis(if read_only && extra.is_empty() { 20_000 } else { 200 });
        let meeting = Meeting { active: Default::default(), met: Default::default(), patience, read_only, log: log.clone() };
        let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(meeting)];
        tools.extend(crate::tools::builtin());
        let registry = Registry::from_tools(tools);
        let mut calls: Vec<ContentBlock> = ["a", "b", "c"]
            .iter()
            .map(|w| ContentBlock::ToolUse { id: format!("id-{w}"), name: "meet".into(), input: json!({"who": w}) })
            .collect();
        calls.extend(extra);
        let provider =
            Replay::from_responses(vec![reply(calls, StopReason::ToolUse), reply(vec![ContentBlock::text("done")], StopReason::EndTurn)]);
        let ctx = crate::tools::test_context(dir.path());
        let (emitter, redactor, cost) = (Emitter::discard(), Redactor::new(Vec::<String>::new()), |_: &Usage| None);
        let agent = Agent {
            provider: &provider,
            registry: &registry,
            tool_ctx: &ctx,
            emitter: &emitter,
            redactor: &redactor,
            system: SYSTEM_PROMPT.into(),
            max_iterations: 5,
            max_output_tokens: None,
            budget: Budget::default(),
            run_meter: None,
            cost: &cost,
            output: None,
            context: crate::context::ContextPolicy::unknown(),
            clock: (Instant::now(), None),
        };
        let mut state = AgentState::default();
        assert_eq!(agent.run("go", &mut state).await, AgentEnd::Finished);
        let answers = state.messages[2]
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::ToolResult { tool_use_id, content, .. } => format!("{tool_use_id}={content}"),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        let log = log.lock().unwrap().clone();
        (answers, log)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn read_only_calls_of_one_turn_run_together_and_are_answered_in_order() {
        // Each call waits until all three are running: sequentially none would get through.
        let (answers, _) = one_turn(true, vec![]).await;
        assert_eq!(answers, ["id-a=a: met", "id-b=b: met", "id-c=c: met"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_turn_with_one_write_runs_its_calls_one_after_another() {
        let write =
            ContentBlock::ToolUse { id: "id-w".into(), name: "write_file".into(), input: json!({"file_path": "x.txt", "content": "hi"}) };
        let (answers, log) = one_turn(true, vec![write]).await;
        assert_eq!(answers[..3], ["id-a=a: alone", "id-b=b: alone", "id-c=c: alone"]);
        assert!(answers[3].starts_with("id-w="), "{answers:?}");
        assert_eq!(log, ["start a", "end a", "start b", "end b", "start c", "end c"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_not_marked_read_only_run_in_order() {
        let (answers, log) = one_turn(false, vec![]).await;
        assert_eq!(answers, ["id-a=a: alone", "id-b=b: alone", "id-c=c: alone"]);
        assert_eq!(log, ["start a", "end a", "start b", "end b", "start c", "end c"]);
    }
}
