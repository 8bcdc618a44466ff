//! Agents other than dracode's own as a task's agent (`agent = "claude-code"`, `"codex"`,
//! `"gemini-cli"`, `"opencode"`): the agent's program runs in the task's sandbox, in the
//! workspace, with a scratch HOME of the attempt holding its configuration ([`launch`]); its
//! model is dracode's endpoint on loopback ([`dracode_gateway`]), which it reaches with a token
//! worth nothing outside the attempt. Every call it makes is answered by [`calls`]: limits,
//! the task's provider with the real key, metering and events — so everything after the agent
//! (protect, record, check, repairs, retries, reports) is what it is for the built-in agent.

pub mod acp;
pub mod calls;
pub mod launch;

use crate::agent::{AgentEnd, AgentState};
use crate::events::{FailureKind, TaskError};
use calls::{Answerer, Pending};
use dracode_gateway::{BoxFuture, Call, Gateway, Refusal};
use dracode_llm::LlmResponse;
use launch::{AgentKind, LaunchInput};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// A task's external agent, as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalAgent {
    /// Which agent.
    pub kind: AgentKind,
    /// Its program as `[agents.NAME] command` gives it (`None`: the kind's program on `PATH`).
    pub command: Option<Vec<String>>,
}

impl ExternalAgent {
    /// The program and its leading arguments, found: `[agents.NAME] command`'s first word or
    /// the kind's program, looked up on `path` (the commands' `PATH`). The error says how to
    /// install it.
    pub fn resolve(&self, path: Option<&str>) -> Result<(PathBuf, Vec<String>), String> {
        let (program, args) = match &self.command {
            Some(words) if !words.is_empty() => (words[0].clone(), words[1..].to_vec()),
            _ => (self.kind.program().to_string(), Vec::new()),
        };
        let found = if program.contains('/') {
            Some(PathBuf::from(&program)).filter(|p| p.is_file())
        } else {
            path.unwrap_or_default().split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(&program)).find(|p| p.is_file())
        };
        found.map(|p| (p, args)).ok_or_else(|| {
            format!(
                "agent {:?}: its program `{program}` is not on PATH; install it (`npm install -g {}`) or set `[agents.{}] command`",
                self.kind.as_str(),
                self.kind.package(),
                self.kind.as_str()
            )
        })
    }
}

/// The folders an agent's installation needs readable: the `node_modules` folder its program
/// lives in (npm installs the native binaries beside it), else the program's own folder.
pub fn installation_dirs(program: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for path in [program.to_path_buf(), program.canonicalize().unwrap_or_else(|_| program.to_path_buf())] {
        let root = path.ancestors().find(|a| a.file_name().is_some_and(|n| n == "node_modules")).map(Path::to_path_buf);
        let dir = root.or_else(|| path.parent().map(Path::to_path_buf));
        if let Some(dir) = dir.filter(|d| !dirs.contains(d)) {
            dirs.push(dir);
        }
    }
    dirs
}

/// The first message an external agent gets: the task, then what the runner's system prompt
/// adds to dracode's own (the limits, how the work is graded, the task's `system_prompt`),
/// which the agent's own system prompt does not say.
pub fn task_text(prompt: &str, system_prompt: &str) -> String {
    let notes = system_prompt.strip_prefix(crate::agent::SYSTEM_PROMPT).unwrap_or(system_prompt).trim();
    if notes.is_empty() { prompt.to_string() } else { format!("{prompt}\n\n---\nNotes from the runner of this task:\n{notes}") }
}

/// What one run of an external agent is given, besides the [`Answerer`].
pub struct Run<'a> {
    /// The agent.
    pub agent: &'a ExternalAgent,
    /// Where it works.
    pub workdir: &'a Path,
    /// The task's command environment (allowlisted, secrets out, the task's TMPDIR).
    pub env: &'a BTreeMap<String, String>,
    /// The task's TMPDIR: the agent's scratch HOME is made in it.
    pub tmp_dir: &'a Path,
    /// The sandbox of the task's commands, widened here to reach the endpoint and read the
    /// agent's installation.
    pub confine: Option<&'a dracode_sandbox::Policy>,
    /// The model name the agent is told.
    pub model: &'a str,
    /// How long the agent may run at most (the attempt's time left).
    pub time_left: Duration,
    /// Bytes of the agent's own output kept (head and tail), for the error when it fails.
    pub output_limit: usize,
    /// Where the sandbox's reports about the agent's process tree go (refused connections,
    /// limits reached), as for the built-in agent's commands.
    pub reports: &'a dracode_sandbox::incidents::ReportSink,
    /// Names the running agent in refused connections (`network.denied`, phase `agent`).
    pub network_log: &'a dracode_sandbox::egress::NetworkLog,
}

/// The endpoint's side of the channel: each call goes to the attempt's loop, which answers it.
struct Channel(mpsc::Sender<(Call, oneshot::Sender<Result<LlmResponse, Refusal>>)>);

impl dracode_gateway::Backend for Channel {
    fn call(&self, call: Call) -> BoxFuture<'_, Result<LlmResponse, Refusal>> {
        Box::pin(async move {
            let gone = || Refusal { status: calls::REFUSED_STATUS, message: "dracode: the task has ended".into() };
            let (reply, answer) = oneshot::channel();
            self.0.send((call, reply)).await.map_err(|_| gone())?;
            answer.await.map_err(|_| gone())?
        })
    }
}

impl Run<'_> {
    /// Runs the agent on `text` (a repair with `resume`: continues its session) until it exits
    /// or a limit ends it; what it did is in `state`.
    pub async fn run(&self, answerer: &Answerer<'_>, text: &str, resume: bool, state: &mut AgentState) -> AgentEnd {
        match self.run_checked(answerer, text, resume, state).await {
            Ok(end) => end,
            Err(error) => AgentEnd::Failed(error),
        }
    }

    async fn run_checked(&self, answerer: &Answerer<'_>, text: &str, resume: bool, state: &mut AgentState) -> Result<AgentEnd, TaskError> {
        let (program, lead) = self.agent.resolve(self.env.get("PATH").map(String::as_str)).map_err(not_configured)?;
        let home = self.tmp_dir.join("agent-home");
        std::fs::create_dir_all(&home).map_err(|e| TaskError::internal(format!("cannot make the agent's HOME: {e}")))?;
        let token = attempt_token()?;
        let (sender, mut calls) = mpsc::channel(4);
        let gateway = Gateway::start(token.clone(), Arc::new(Channel(sender)))
            .await
            .map_err(|e| TaskError::internal(format!("cannot start the agent's endpoint: {e}")))?;
        let input = LaunchInput { base_url: &gateway.base_url(), token: &token, model: self.model, text, resume };
        let launch = launch::launch(self.agent.kind, &input);
        let home_text = home.display().to_string();
        for (relative, contents) in &launch.files {
            write_config(&home.join(relative), contents)?;
        }
        let mut env = self.env.clone();
        env.insert("HOME".into(), home_text.clone());
        env.extend(launch.env.iter().map(|(k, v)| (k.clone(), v.replace("{HOME}", &home_text))));
        let confine = self.confine.map(|policy| widened(policy, &gateway, &program));
        let args: Vec<String> = lead.into_iter().chain(launch.args).collect();
        let program_text = program.display().to_string();
        let spec = dracode_sandbox::process::Spec {
            program: &program_text,
            args: &args,
            cwd: self.workdir,
            env: &env,
            tmp_dir: Some(self.tmp_dir),
            timeout: self.time_left,
            output_limit: self.output_limit,
            confine: confine.as_ref(),
        };
        let keep_alive = || answerer.emitter.keep_alive();
        let _running = self.network_log.running(self.agent.kind.as_str(), dracode_sandbox::egress::Phase::Agent);
        let process = dracode_sandbox::process::run_observed(&spec, &keep_alive);
        tokio::pin!(process);
        let (mut pending, mut end) = (Pending::new(), None);
        let finished = loop {
            tokio::select! {
                finished = &mut process => break finished,
                Some((call, reply)) = calls.recv() => {
                    let answer = answerer.answer(call, state, &mut pending, &mut end).await;
                    let _ = reply.send(answer);
                    if end.is_some() {
                        // A limit or a provider failure ends the agent: its process group is
                        // stopped when `process` is dropped.
                        return Ok(end.unwrap_or(AgentEnd::Finished));
                    }
                }
            }
        };
        let finished = finished.map_err(|e| TaskError::new(FailureKind::Agent, format!("cannot run {program_text}: {e}")))?;
        self.reports.extend(finished.reports.iter().cloned());
        Ok(ended(self.agent.kind, &finished))
    }
}

/// How an agent that exited on its own ended.
fn ended(kind: AgentKind, finished: &dracode_sandbox::process::Finished) -> AgentEnd {
    if finished.exit_code == Some(0) {
        return AgentEnd::Finished;
    }
    let tail: String = finished.output.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    let status = finished.status_line(Duration::ZERO);
    AgentEnd::Failed(TaskError::new(FailureKind::Agent, format!("{} ended with {status}; its last output:\n{tail}", kind.as_str())))
}

/// `policy` with the endpoint reachable and the agent's installation readable.
fn widened(policy: &dracode_sandbox::Policy, gateway: &Gateway, program: &Path) -> dracode_sandbox::Policy {
    let mut policy = policy.clone();
    policy.endpoint = Some(gateway.addr());
    policy.readable.extend(installation_dirs(program));
    policy
}

/// Writes one of the agent's configuration files, its folders first.
fn write_config(path: &Path, contents: &str) -> Result<(), TaskError> {
    let write = || -> std::io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, contents)
    };
    write().map_err(|e| TaskError::internal(format!("cannot write the agent's {}: {e}", path.display())))
}

/// A fresh random token for one attempt's endpoint (hex of 24 random bytes).
fn attempt_token() -> Result<String, TaskError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new().fill(&mut bytes).map_err(|_| TaskError::internal("no randomness for the agent's token"))?;
    Ok(format!("dracode-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

/// The error of a task whose agent is not installed: it ends `not_configured`.
pub fn not_configured(why: String) -> TaskError {
    TaskError::new(FailureKind::Llm(dracode_llm::ErrorKind::NotConfigured), why)
}
