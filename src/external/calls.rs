//! The model calls of an external agent, answered by dracode: each call the agent sends to the
//! endpoint ([`dracode_gateway`]) is counted against `max_iterations` and the budgets, sent to
//! the task's provider with the real key, metered, and reported as the built-in agent's calls
//! are (`turn.completed`, and the tool calls the model asked for with the results the agent sent
//! back). A call past a limit is refused in the agent's own format — a 400, which every agent
//! takes as final (a 429 would make some retry for minutes) — and ends the agent.

use crate::agent::{AgentEnd, AgentState, Budget, RunMeter};
use crate::events::{Emitter, Event, Header, WireEvent};
use dracode_gateway::{Call, Refusal};
use dracode_llm::{ContentBlock, LlmRequest, LlmResponse, Message, Provider, Role, Usage};
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::time::Instant;

/// The status of a refused call: final for every agent (they give up at once on a 4xx that is
/// not 429).
pub const REFUSED_STATUS: u16 = 400;

/// What answering a call needs, borrowed from the attempt.
pub struct Answerer<'a> {
    /// The task's provider (recording or replaying, governed).
    pub provider: &'a dyn Provider,
    /// Where events go.
    pub emitter: &'a Emitter,
    /// Masks secrets in what the events carry.
    pub redactor: &'a Redactor,
    /// LLM calls allowed.
    pub max_iterations: u32,
    /// Output token limit per call (`max_output_tokens`), over what the agent asks.
    pub max_output_tokens: Option<u32>,
    /// Token and cost limits of the task.
    pub budget: Budget,
    /// The run's shared spend.
    pub run_meter: &'a RunMeter,
    /// The price of a usage on the task's model.
    pub cost: &'a (dyn Fn(&Usage) -> Option<f64> + Send + Sync),
}

/// The tool calls the model asked for that the agent has not answered yet: (name, asked at).
pub type Pending = BTreeMap<String, (String, Instant)>;

impl Answerer<'_> {
    /// Answers one call: refused when a limit is reached (and `state`'s end set), else the
    /// provider's response, counted in `state`.
    pub async fn answer(
        &self,
        call: Call,
        state: &mut AgentState,
        pending: &mut Pending,
        end: &mut Option<AgentEnd>,
    ) -> Result<LlmResponse, Refusal> {
        self.report_results(&call.messages, pending);
        if state.agent_version.is_none() {
            state.agent_version = call.user_agent.as_deref().and_then(version_of);
        }
        if let Some(done) = end.as_ref() {
            return Err(refusal(&format!("the task has ended ({done:?})")));
        }
        if state.calls_used >= self.max_iterations {
            *end = Some(AgentEnd::MaxIterations);
            return Err(refusal(&format!("dracode: this task's max_iterations ({}) is used up", self.max_iterations)));
        }
        if let Some(reason) = self.over_budget(&state.usage) {
            *end = Some(AgentEnd::BudgetExceeded(reason.clone()));
            return Err(refusal(&format!("dracode: {reason}")));
        }
        let call_cost = crate::budget::CallCost {
            budget: self.budget,
            max_output_tokens: self.max_output_tokens,
            cost: self.cost,
            run_meter: Some(self.run_meter),
        };
        let estimate = crate::context::estimate_request(&call.system, &call.tools, &call.messages);
        let held = match call_cost.reserve(&state.usage, estimate) {
            Ok(held) => held,
            Err(reason) => {
                *end = Some(AgentEnd::BudgetExceeded(reason.to_string()));
                return Err(refusal(&format!("dracode: {reason}")));
            }
        };
        state.calls_used += 1;
        let max_tokens = match (call.max_tokens, self.max_output_tokens) {
            (Some(asked), Some(cap)) => Some(asked.min(cap)),
            (asked, cap) => asked.or(cap),
        };
        let started = Instant::now();
        let request = LlmRequest { system: &call.system, messages: &call.messages, tools: &call.tools, max_tokens };
        let response = match self.provider.complete(request, self.emitter).await {
            Ok(response) => response,
            Err(error) => {
                let message = format!("dracode: the provider failed: {}", error.message);
                *end = Some(AgentEnd::Failed(error.into()));
                return Err(Refusal { status: REFUSED_STATUS, message });
            }
        };
        self.count(state, &call.messages, &response, started);
        drop(held);
        for block in &response.content {
            if let ContentBlock::ToolUse { id, name, input } = block {
                self.emitter.emit(Event::tool_started(id, name, input.clone()));
                pending.insert(id.clone(), (name.clone(), Instant::now()));
            }
        }
        if let Some(reason) = self.over_budget(&state.usage) {
            *end = Some(AgentEnd::BudgetExceeded(reason));
        }
        Ok(response)
    }

    /// Counts a call that returned: usage, turns, the run's spend, `turn.completed`; the
    /// conversation as the agent sent it, then the answer, becomes the history.
    fn count(&self, state: &mut AgentState, sent: &[Message], response: &LlmResponse, started: Instant) {
        state.usage += response.usage;
        state.turns += 1;
        self.run_meter.add(&response.usage, (self.cost)(&response.usage));
        self.emitter.emit(Event::turn_completed(state.turns, &response.stop_reason, response.usage, started.elapsed()));
        let message = Message { role: Role::Assistant, content: response.content.clone() };
        let text = message.text();
        if !text.trim().is_empty() {
            state.final_text = Some(text.clone());
            if !response.content.iter().any(|b| matches!(b, ContentBlock::ToolUse { .. })) {
                self.emitter.emit(WireEvent::AgentMessage { header: Header::unstamped(None), text });
            }
        }
        state.history = sent.to_vec();
        state.history.push(message);
        state.messages.clone_from(&state.history);
    }

    /// `tool.completed` for each pending call whose result the agent now sends.
    fn report_results(&self, messages: &[Message], pending: &mut Pending) {
        let results = messages.iter().flat_map(|m| &m.content).filter_map(|block| match block {
            ContentBlock::ToolResult { tool_use_id, content, is_error } => Some((tool_use_id, content, *is_error)),
            _ => None,
        });
        for (id, content, is_error) in results {
            if let Some((name, asked)) = pending.remove(id.as_str()) {
                let output = self.redactor.redact(content).into_owned();
                self.emitter.emit(Event::tool_completed(id, &name, !is_error, output, asked.elapsed()));
            }
        }
    }

    /// Why `usage` is over the task's or the run's budget, if it is.
    fn over_budget(&self, usage: &Usage) -> Option<String> {
        if let Some(reason) = self.run_meter.exceeded() {
            return Some(reason);
        }
        if let Some(limit) = self.budget.max_tokens
            && usage.total_tokens > limit
        {
            return Some(format!("used {} tokens, over the task's max_tokens of {limit}", usage.total_tokens));
        }
        match (self.budget.max_cost_usd, (self.cost)(usage)) {
            (Some(limit), Some(cost)) if cost > limit => Some(format!("spent ${cost:.4}, over the task's max_cost_usd of ${limit}")),
            _ => None,
        }
    }
}

/// The version in a `User-Agent` such as `claude-cli/2.1.332 (external, sdk-cli)`,
/// `codex_exec/0.171.0 (…)`, `GeminiCLI/0.61.0/gemini-2.5-pro (…)` or `opencode/1.18.33 ai-sdk/…`:
/// what follows the first `/`, up to the next `/` or space, when it starts with a digit.
pub fn version_of(user_agent: &str) -> Option<String> {
    let (_, rest) = user_agent.split_once('/')?;
    let version = rest.split(['/', ' ']).next()?;
    version.starts_with(|c: char| c.is_ascii_digit()).then(|| version.to_string())
}

/// A refusal the agent takes as final.
fn refusal(message: &str) -> Refusal {
    Refusal { status: REFUSED_STATUS, message: message.to_string() }
}

#[cfg(test)]
mod tests {
    use super::version_of;

    #[test]
    fn the_version_comes_from_each_agents_user_agent() {
        let seen = [
            ("claude-cli/2.1.332 (external, sdk-cli)", Some("2.1.332")),
            ("codex_exec/0.171.0 (Debian 12.0.0; x86_64) dumb (codex_exec; 0.171.0)", Some("0.171.0")),
            ("GeminiCLI-tui/0.61.0/gemini-2.5-pro (linux; x64; terminal)", Some("0.61.0")),
            ("opencode/1.18.33 ai-sdk/provider-utils/4.0.23 runtime/bun/1.3.14", Some("1.18.33")),
            ("python-requests", None),
            ("x/latest", None),
        ];
        for (agent, version) in seen {
            assert_eq!(version_of(agent).as_deref(), version, "{agent}");
        }
    }
}
