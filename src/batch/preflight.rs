//! The providers of the tasks a setup serves, checked before the setup runs: configured (what
//! [`super::plan::preflight`] checks for `validate`) and their endpoint accepting a connection
//! ([`dracode_llm::reach::reach`], nothing sent). A missing key or a dead endpoint then ends
//! those tasks at once — `not_configured`, or `error` kind `network`, exit 5 — instead of after
//! the setup's minutes and `check_before`. Each endpoint is probed once, all at the same time.

use super::spec::TaskSpec;
use crate::events::{FailureKind, TaskError};
use dracode_llm::preset::{Env, TaskBinding};
use std::collections::HashMap;

/// What the pre-flight found for each of `tasks`, in order: `None` for a task that may start,
/// else the error it ends with (no agent ran).
pub async fn check(tasks: &[&TaskSpec], env: &Env) -> Vec<Option<TaskError>> {
    let mut found: Vec<Option<TaskError>> = tasks.iter().map(|spec| not_configured(spec)).collect();
    let mut probes: HashMap<(String, String), tokio::task::JoinHandle<Result<(), dracode_llm::LlmError>>> = HashMap::new();
    for (spec, _) in tasks.iter().zip(&found).filter(|(_, f)| f.is_none()) {
        let provider = spec.provider.clone();
        let env = env.clone();
        probes.entry(endpoint(spec)).or_insert_with(|| tokio::spawn(async move { dracode_llm::reach::reach(&provider, &env).await }));
    }
    let mut reached: HashMap<(String, String), Option<TaskError>> = HashMap::new();
    for (endpoint, probe) in probes {
        let error = match probe.await {
            Ok(result) => result.err().map(|e| TaskError::new(FailureKind::Llm(e.kind), format!("{}; no agent ran", e.message))),
            Err(e) => Some(TaskError::internal(format!("dracode bug: the provider pre-flight panicked: {e}"))),
        };
        reached.insert(endpoint, error);
    }
    for (spec, slot) in tasks.iter().zip(found.iter_mut()) {
        if slot.is_none() {
            *slot = reached.get(&endpoint(spec)).cloned().flatten();
        }
    }
    found
}

/// The error of a task whose provider could not send a request, as the task would end.
fn not_configured(spec: &TaskSpec) -> Option<TaskError> {
    let binding = TaskBinding { task_id: spec.id.clone() };
    let path = || dracode_input::process_env().get("PATH").cloned();
    let why = dracode_llm::registry::preflight(&spec.provider, &binding)
        .or_else(|| spec.agent.as_ref()?.resolve(path().as_deref()).err().map(|why| why.0))?;
    Some(TaskError::new(FailureKind::Llm(dracode_llm::ErrorKind::NotConfigured), why))
}

/// What one probe answers for: the provider's name (its error names it) and endpoint.
fn endpoint(spec: &TaskSpec) -> (String, String) {
    (spec.provider.name.clone(), spec.provider.base_url.clone().unwrap_or_default())
}
