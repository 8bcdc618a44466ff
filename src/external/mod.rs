//! Agents other than dracode's own as a task's agent (`agent = "claude-code"`, `"codex"`,
//! `"gemini-cli"`, `"opencode"`, or an `[agents.NAME]` table of an agent that speaks the Agent
//! Client Protocol): the agent's program runs in the task's sandbox, in the workspace, with a
//! scratch HOME of the attempt holding its configuration ([`launch`]); its model is dracode's
//! endpoint on loopback ([`dracode_gateway`]), which it reaches with a token worth nothing
//! outside the attempt. Every call it makes is answered by [`calls`]: limits, the task's
//! provider with the real key, metering and events — so everything after the agent (protect,
//! record, check, repairs, retries, reports) is what it is for the built-in agent.
//!
//! A command-line agent ([`How::Cli`]) runs once per turn: a repair starts it again on its own
//! session (in the same HOME). An ACP agent ([`How::Acp`], [`acp`]) is started once per attempt
//! and kept in [`Sessions`] between its turns.

pub mod acp;
pub mod calls;
pub mod launch;
mod live;

pub use live::Sessions;

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
    /// The `agent` field's name.
    pub name: String,
    /// How it is run.
    pub how: How,
}

/// How an external agent is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum How {
    /// A command-line agent dracode knows ([`launch`]), its program as `[agents.NAME] command`
    /// gives it (`None`: the kind's program on `PATH`).
    Cli {
        /// Which agent.
        kind: AgentKind,
        /// The program and its leading arguments, if configured.
        command: Option<Vec<String>>,
    },
    /// An agent that speaks the Agent Client Protocol, as its `[agents.NAME]` table says.
    Acp(AcpAgent),
}

/// An `[agents.NAME]` table with `protocol = "acp"`: the agent's command, the wire format
/// dracode's endpoint speaks to it, and how it is pointed at that endpoint. In `command`,
/// `env` and `files`, `{endpoint}` is the endpoint's base URL, `{token}` the attempt's token,
/// `{model}` the task's model and `{home}` the agent's scratch HOME.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcpAgent {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The wire format the agent speaks to its model.
    pub format: dracode_gateway::Format,
    /// Variables set for it.
    pub env: BTreeMap<String, String>,
    /// Files written in its HOME first: path relative to HOME, contents.
    pub files: BTreeMap<PathBuf, String>,
}

/// Why an external agent cannot be started: its program is not where it should be (the message
/// says how to install it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotInstalled(pub String);

impl ExternalAgent {
    /// The program and its leading arguments, found: the configured command's first word or
    /// the kind's program, looked up on `path` (the commands' `PATH`). The error says how to
    /// install it.
    pub fn resolve(&self, path: Option<&str>) -> Result<(PathBuf, Vec<String>), NotInstalled> {
        let (program, args) = match &self.how {
            How::Cli { command: Some(words), .. } | How::Acp(AcpAgent { command: words, .. }) if !words.is_empty() => {
                (words[0].clone(), words[1..].to_vec())
            }
            How::Cli { kind, .. } => (kind.program().to_string(), Vec::new()),
            How::Acp(_) => return Err(NotInstalled(format!("agent {:?}: `[agents.{}] command` is empty", self.name, self.name))),
        };
        let found = if program.contains('/') {
            Some(PathBuf::from(&program)).filter(|p| p.is_file())
        } else {
            path.unwrap_or_default().split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(&program)).find(|p| p.is_file())
        };
        let install = match &self.how {
            How::Cli { kind, .. } => format!("install it (`npm install -g {}`) or set `[agents.{}] command`", kind.package(), self.name),
            How::Acp(_) => format!("install it or give its path in `[agents.{}] command`", self.name),
        };
        found
            .map(|p| (p, args))
            .ok_or_else(|| NotInstalled(format!("agent {:?}: its program `{program}` is not on PATH; {install}", self.name)))
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

/// dracode's endpoint for one agent process: the gateway, the calls it hands over, and the
/// attempt's token.
pub(crate) struct Endpoint {
    gateway: Gateway,
    calls: mpsc::Receiver<(Call, oneshot::Sender<Result<LlmResponse, Refusal>>)>,
    token: String,
}

impl Endpoint {
    /// Starts an endpoint with a fresh token.
    async fn start() -> Result<Endpoint, TaskError> {
        let token = attempt_token()?;
        let (sender, calls) = mpsc::channel(4);
        let gateway = Gateway::start(token.clone(), Arc::new(Channel(sender)))
            .await
            .map_err(|e| TaskError::internal(format!("cannot start the agent's endpoint: {e}")))?;
        Ok(Endpoint { gateway, calls, token })
    }

    /// Answers the agent's calls while `work` runs; `Err` with how the agent ended when a limit
    /// or a provider failure ends it first (dropping `work`).
    async fn serve_while<F: std::future::Future>(
        &mut self,
        work: F,
        answerer: &Answerer<'_>,
        state: &mut AgentState,
    ) -> Result<F::Output, AgentEnd> {
        tokio::pin!(work);
        let (mut pending, mut end) = (Pending::new(), None);
        loop {
            tokio::select! {
                done = &mut work => return Ok(done),
                Some((call, reply)) = self.calls.recv() => {
                    let answer = answerer.answer(call, state, &mut pending, &mut end).await;
                    let _ = reply.send(answer);
                    if let Some(end) = end.take() {
                        return Err(end);
                    }
                }
            }
        }
    }
}

impl Run<'_> {
    /// Runs the agent on `text` (a repair with `resume`: continues its session) until it exits
    /// or a limit ends it; what it did is in `state`. An ACP agent's process lives in
    /// `sessions` between its turns.
    pub async fn run(&self, answerer: &Answerer<'_>, sessions: &Sessions, text: &str, resume: bool, state: &mut AgentState) -> AgentEnd {
        let ran = match &self.agent.how {
            How::Cli { kind, .. } => self.run_cli(*kind, answerer, text, resume, state).await,
            How::Acp(acp) => sessions.turn(self, acp, answerer, text, state).await,
        };
        ran.unwrap_or_else(AgentEnd::Failed)
    }

    /// The agent's HOME (made on first use) and its environment: the task's, with HOME there.
    fn home_and_env(&self) -> Result<(PathBuf, BTreeMap<String, String>), TaskError> {
        let home = self.tmp_dir.join("agent-home");
        std::fs::create_dir_all(&home).map_err(|e| TaskError::internal(format!("cannot make the agent's HOME: {e}")))?;
        let mut env = self.env.clone();
        env.insert("HOME".into(), home.display().to_string());
        Ok((home, env))
    }

    /// The spawn of `program` with `args` and `env`, confined to reach `endpoint` and read the
    /// agent's installation.
    fn spec<'s>(
        &'s self,
        program: &'s str,
        args: &'s [String],
        env: &'s BTreeMap<String, String>,
        confine: Option<&'s dracode_sandbox::Policy>,
    ) -> dracode_sandbox::process::Spec<'s> {
        dracode_sandbox::process::Spec {
            program,
            args,
            cwd: self.workdir,
            env,
            tmp_dir: Some(self.tmp_dir),
            timeout: self.time_left,
            output_limit: self.output_limit,
            confine,
        }
    }

    /// One run of a command-line agent, to its exit.
    async fn run_cli(
        &self,
        kind: AgentKind,
        answerer: &Answerer<'_>,
        text: &str,
        resume: bool,
        state: &mut AgentState,
    ) -> Result<AgentEnd, TaskError> {
        let (program, lead) = self.agent.resolve(self.env.get("PATH").map(String::as_str)).map_err(not_configured)?;
        let (home, mut env) = self.home_and_env()?;
        let mut endpoint = Endpoint::start().await?;
        let input = LaunchInput { base_url: &endpoint.gateway.base_url(), token: &endpoint.token, model: self.model, text, resume };
        let launch = launch::launch(kind, &input);
        let home_text = home.display().to_string();
        for (relative, contents) in &launch.files {
            write_config(&home.join(relative), contents)?;
        }
        env.extend(launch.env.iter().map(|(k, v)| (k.clone(), v.replace("{HOME}", &home_text))));
        let confine = self.confine.map(|policy| widened(policy, &endpoint.gateway, &program));
        let args: Vec<String> = lead.into_iter().chain(launch.args).collect();
        let program_text = program.display().to_string();
        let spec = self.spec(&program_text, &args, &env, confine.as_ref());
        let keep_alive = || answerer.emitter.keep_alive();
        let _running = self.network_log.running(&self.agent.name, dracode_sandbox::egress::Phase::Agent);
        let process = dracode_sandbox::process::run_observed(&spec, &keep_alive);
        // A limit or a provider failure ends the agent: its process group is stopped when
        // `process` is dropped.
        let finished = match endpoint.serve_while(process, answerer, state).await {
            Ok(finished) => finished,
            Err(end) => return Ok(end),
        };
        let finished = finished.map_err(|e| TaskError::new(FailureKind::Agent, format!("cannot run {program_text}: {e}")))?;
        self.reports.extend(finished.reports.iter().cloned());
        Ok(ended(&self.agent.name, &finished))
    }
}

/// How an agent that exited on its own ended.
fn ended(name: &str, finished: &dracode_sandbox::process::Finished) -> AgentEnd {
    if finished.exit_code == Some(0) {
        return AgentEnd::Finished;
    }
    let tail: String = finished.output.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    let status = finished.status_line(Duration::ZERO);
    AgentEnd::Failed(TaskError::new(FailureKind::Agent, format!("{name} ended with {status}; its last output:\n{tail}")))
}

/// `policy` with the endpoint reachable and the agent's installation readable.
pub(crate) fn widened(policy: &dracode_sandbox::Policy, gateway: &Gateway, program: &Path) -> dracode_sandbox::Policy {
    let mut policy = policy.clone();
    policy.endpoint = Some(gateway.addr());
    policy.readable.extend(installation_dirs(program));
    policy
}

/// Writes one of the agent's configuration files, its folders first.
pub(crate) fn write_config(path: &Path, contents: &str) -> Result<(), TaskError> {
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
pub fn not_configured(why: NotInstalled) -> TaskError {
    TaskError::new(FailureKind::Llm(dracode_llm::ErrorKind::NotConfigured), why.0)
}
