//! An ACP agent kept alive between the turns of one attempt: started on its first turn (its
//! program confined like any command, pointed at its own endpoint by its `[agents.NAME]`
//! table), given each turn — the task, then a repair's message — as a `session/prompt` of the
//! same session, and stopped with the attempt or when a limit ends it.

use super::acp::AcpSession;
use super::calls::Answerer;
use super::{AcpAgent, Endpoint, Run, not_configured, widened, write_config};
use crate::agent::{AgentEnd, AgentState};
use crate::events::{FailureKind, TaskError};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::io::AsyncReadExt;

/// The attempt's running ACP agent, if any; dropping it stops the agent.
#[derive(Default)]
pub struct Sessions(tokio::sync::Mutex<Option<Live>>);

/// A running ACP agent: its endpoint, its session, its process group and what it printed on
/// stderr (the tail, for the error when it fails).
pub(crate) struct Live {
    endpoint: Endpoint,
    session: AcpSession,
    _child: tokio::process::Child,
    _group: dracode_sandbox::process::ProcessGroup,
    stderr: Arc<Mutex<String>>,
}

/// Bytes of the agent's stderr kept.
const STDERR_TAIL: usize = 4096;

impl Sessions {
    /// Stops the attempt's agent, if one runs.
    pub async fn stop(&self) {
        self.0.lock().await.take();
    }

    /// One turn of `acp`: the agent is started on the first, and stopped when a limit or a
    /// failure ends it.
    pub(crate) async fn turn(
        &self,
        run: &Run<'_>,
        acp: &AcpAgent,
        answerer: &Answerer<'_>,
        text: &str,
        state: &mut AgentState,
    ) -> Result<AgentEnd, TaskError> {
        let mut slot = self.0.lock().await;
        if slot.is_none() {
            *slot = Some(start(run, acp).await?);
        }
        let Some(live) = slot.as_mut() else { return Err(TaskError::internal("the ACP agent did not start")) };
        let Live { endpoint, session, stderr, .. } = live;
        let stop = match endpoint.serve_while(session.prompt(text), answerer, state).await {
            Ok(Ok(reason)) => return Ok(stop_reason(&reason)),
            Ok(Err(why)) => AgentEnd::Failed(failed(&run.agent.name, &why.0, stderr)),
            Err(end) => end,
        };
        // The agent does not answer again: it ends here.
        slot.take();
        Ok(stop)
    }
}

/// Starts the agent of `acp`: its HOME files, environment and command with the placeholders
/// filled in, confined, then `initialize` and `session/new` in the workspace.
async fn start(run: &Run<'_>, acp: &AcpAgent) -> Result<Live, TaskError> {
    let (program, lead) = run.agent.resolve(run.env.get("PATH").map(String::as_str)).map_err(not_configured)?;
    let (home, mut env) = run.home_and_env()?;
    let endpoint = Endpoint::start().await?;
    let fill = |text: &str| {
        text.replace("{endpoint}", &endpoint.gateway.base_url())
            .replace("{token}", &endpoint.token)
            .replace("{model}", run.model)
            .replace("{home}", &home.display().to_string())
    };
    for (relative, contents) in &acp.files {
        write_config(&home.join(relative), &fill(contents))?;
    }
    env.extend(acp.env.iter().map(|(k, v)| (k.clone(), fill(v))));
    env.extend([("NO_PROXY".to_string(), "127.0.0.1,localhost".to_string()), ("no_proxy".into(), "127.0.0.1,localhost".into())]);
    let args: Vec<String> = lead.iter().map(|a| fill(a)).collect();
    let confine = run.confine.map(|policy| widened(policy, &endpoint.gateway, &program));
    let program_text = program.display().to_string();
    let spec = run.spec(&program_text, &args, &env, confine.as_ref());
    let cannot = |e: String| TaskError::new(FailureKind::Agent, format!("agent {:?}: {e}", run.agent.name));
    let (mut child, group) =
        dracode_sandbox::process::spawn_service(&spec).map_err(|e| cannot(format!("cannot start {program_text}: {e}")))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(cannot("its pipes are missing".into()));
    };
    let stderr = Arc::new(Mutex::new(String::new()));
    if let Some(pipe) = child.stderr.take() {
        tokio::spawn(keep_tail(pipe, stderr.clone()));
    }
    let session = AcpSession::start(stdin, stdout, run.workdir).await.map_err(|why| failed(&run.agent.name, &why.0, &stderr))?;
    Ok(Live { endpoint, session, _child: child, _group: group, stderr })
}

/// Reads `pipe` to its end, keeping its last [`STDERR_TAIL`] bytes in `tail`.
async fn keep_tail(mut pipe: tokio::process::ChildStderr, tail: Arc<Mutex<String>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            return;
        }
        let mut kept = tail.lock().unwrap_or_else(PoisonError::into_inner);
        kept.push_str(&String::from_utf8_lossy(&buf[..n]));
        if kept.len() > STDERR_TAIL {
            let cut = kept.len() - STDERR_TAIL;
            let cut = (cut..kept.len()).find(|i| kept.is_char_boundary(*i)).unwrap_or(kept.len());
            kept.drain(..cut);
        }
    }
}

/// The error of an agent whose session failed: why, and the end of its stderr.
fn failed(name: &str, why: &str, stderr: &Mutex<String>) -> TaskError {
    let tail = stderr.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let tail = if tail.trim().is_empty() { String::new() } else { format!("; its last output:\n{}", tail.trim_end()) };
    TaskError::new(FailureKind::Agent, format!("agent {name:?}: {why}{tail}"))
}

/// How a turn that the agent answered ended: `end_turn` is the agent's own end; a turn cut by
/// the agent's own request limit is `max_iterations`; anything else fails the task.
fn stop_reason(reason: &str) -> AgentEnd {
    match reason {
        "end_turn" => AgentEnd::Finished,
        "max_turn_requests" => AgentEnd::MaxIterations,
        other => AgentEnd::Failed(TaskError::new(FailureKind::Agent, format!("the agent's turn ended with stopReason {other:?}"))),
    }
}
