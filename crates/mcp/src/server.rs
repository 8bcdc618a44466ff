//! One running MCP server: started (a confined child on stdio, or a streamable-HTTP endpoint),
//! its protocol version agreed, asked for its tools, called, and stopped — nothing of it
//! outlives [`McpServer`].

use super::config::{CredentialsError, McpServerConfig};
use super::http::HttpLink;
use super::jsonrpc::{Asked, Failure};
use super::protocol::{ToolDef, ToolOutput};
use super::session::Session;
use super::transport::{StdioLink, Transport};
use dracode_sandbox::Policy;
use dracode_sandbox::process::{self, ProcessGroup};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Bytes of a stdio server's stderr kept to explain a failure.
const STDERR_TAIL: usize = 2048;

/// Where and how a task's servers run: the task's workspace, environment and confinement.
pub struct Launch<'a> {
    /// The working directory of stdio servers (the task's workspace).
    pub cwd: &'a Path,
    /// The task's allowlisted environment; a server's own `env` is added to it.
    pub env: &'a BTreeMap<String, String>,
    /// The task's TMPDIR.
    pub tmp_dir: Option<&'a Path>,
    /// The task's command confinement, applied to stdio servers as to `run_command`.
    pub confine: Option<&'a Policy>,
    /// The run's HTTP client, for `url` servers.
    pub http: reqwest::Client,
    /// The run's masking, which learns the tokens OAuth fetches for `url` servers.
    pub redactor: dracode_secrets::Redactor,
}

/// Why a server did not start, with the end of a stdio server's stderr when it said anything.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{failure}{}", stderr_ending(.stderr))]
pub struct StartError {
    /// What failed.
    pub failure: StartFailure,
    /// The end of a stdio server's stderr (empty for a `url` server).
    pub stderr: String,
}

/// What failed while starting a server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StartFailure {
    /// A `url` server's credentials are configured but unset.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// A stdio server's program could not be started.
    #[error("could not start {program}: {reason}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        reason: Arc<std::io::Error>,
    },
    /// The child has no stdin or stdout to talk to.
    #[error("{program}: no pipes to talk to it")]
    NoPipes {
        /// The program.
        program: String,
    },
    /// The server wants credentials it was not given, or refused those it was (one line saying
    /// what to configure).
    #[error("{0}")]
    Unauthorized(String),
    /// The handshake with a `url` server failed.
    #[error("MCP handshake with {url} failed: {failure}")]
    HttpHandshake {
        /// The server's URL.
        url: String,
        /// Why.
        failure: Box<Failure>,
    },
    /// A stdio server did not complete the handshake.
    #[error("{command} did not complete the MCP handshake: {failure}")]
    StdioHandshake {
        /// The server's program.
        command: String,
        /// Why.
        failure: Box<Failure>,
    },
    /// The handshake did not end within the startup timeout.
    #[error("did not answer the MCP handshake within {}", humantime::format_duration(*.0))]
    HandshakeTimedOut(Duration),
    /// Listing its tools failed.
    #[error("listing its tools failed: {0}")]
    ListTools(Box<Failure>),
    /// Listing its tools did not end within the startup timeout.
    #[error("did not list its tools within {}", humantime::format_duration(*.0))]
    ListToolsTimedOut(Duration),
}

/// A started server.
pub struct McpServer {
    /// Its name in config (`[mcp_servers.NAME]`).
    pub name: String,
    session: Session,
    /// A stdio server's processes: stopped by [`McpServer::stop`] or when dropped.
    process: Mutex<Option<Process>>,
    stderr: Arc<Mutex<String>>,
    /// The task keeping a stdio server's stderr tail; it ends when the server has exited.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
}

impl McpServer {
    /// Starts server `name`, agrees on a protocol version and lists its tools, within its
    /// startup timeout. `Err` says what failed, with the end of a stdio server's stderr.
    pub async fn start(name: &str, config: &McpServerConfig, launch: &Launch<'_>) -> Result<(McpServer, Vec<ToolDef>), StartError> {
        let limit = config.startup_timeout();
        let deadline = tokio::time::Instant::now() + limit;
        let (transport, process, stderr, stderr_reader) =
            connect(name, config, launch).map_err(|failure| StartError { failure, stderr: String::new() })?;
        let mut starting = Starting { process, stderr, stderr_reader };
        let negotiated = tokio::time::timeout_at(deadline, Session::negotiate(transport, config.protocol_version.as_deref(), limit)).await;
        let session = match negotiated {
            Ok(Ok(session)) => session,
            Ok(Err(e)) => return Err(starting.explain_exit(handshake_failure(config, e)).await),
            Err(_) => return Err(starting.explain_exit(StartFailure::HandshakeTimedOut(limit)).await),
        };
        tracing::debug!(server = %name, version = %session.version, "MCP session ready");
        let server = McpServer {
            name: name.to_string(),
            session,
            process: Mutex::new(starting.process.take()),
            stderr: starting.stderr.clone(),
            stderr_reader: starting.stderr_reader.take(),
        };
        match tokio::time::timeout_at(deadline, server.session.list_tools(limit)).await {
            Ok(Ok(tools)) => Ok((server, tools)),
            Ok(Err(e)) => Err(server.explain_exit(StartFailure::ListTools(Box::new(e))).await),
            Err(_) => Err(StartError { failure: StartFailure::ListToolsTimedOut(limit), stderr: server.stderr_tail() }),
        }
    }

    /// The protocol version agreed with the server.
    pub fn protocol_version(&self) -> &str {
        &self.session.version
    }

    /// Calls tool `tool` (the server's own name) with `arguments`, within `limit`; `Err` is a
    /// transport failure or the time limit, not a tool's own error result.
    pub async fn call(&self, tool: &str, arguments: serde_json::Value, limit: Duration) -> Result<ToolOutput, CallError> {
        match self.session.call_tool(tool, arguments, limit).await {
            Ok(output) => Ok(output),
            Err(Failure::TimedOut) => Err(CallError::TimedOut(limit)),
            Err(e) => Err(CallError::Failed(self.explain(e.to_string()))),
        }
    }

    /// Closes the session and stops the server's processes; later calls fail.
    pub async fn stop(&self) {
        match &self.session.transport {
            Transport::Stdio(link) => link.close().await,
            Transport::Http(link) => link.close().await,
        }
        let owned = self.process.lock().map(|mut p| p.take()).unwrap_or_default();
        if let Some(Process { group, mut child }) = owned {
            // Closing stdin asks it to exit; give it a moment before signalling the group.
            let _ = tokio::time::timeout(Duration::from_millis(500), child.wait()).await;
            drop(group);
            // The group was signalled: wait until it is gone (a supervisor kills what is left
            // after its own grace), so nothing outlives the task.
            let _ = tokio::time::timeout(process::TERM_GRACE * 2, child.wait()).await;
        }
    }

    /// `failure` with the server's stderr, once a server whose session just failed has finished
    /// writing it (it is usually exiting), waiting at most a second.
    async fn explain_exit(mut self, failure: StartFailure) -> StartError {
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
        }
        StartError { failure, stderr: self.stderr_tail() }
    }

    /// `message` followed by the end of the server's stderr.
    fn explain(&self, message: String) -> String {
        format!("{message}{}", stderr_ending(&self.stderr_tail()))
    }

    /// The end of a stdio server's stderr so far.
    fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// A server's process and stderr while its handshake runs (dropped: the group is stopped).
struct Starting {
    process: Option<Process>,
    stderr: Arc<Mutex<String>>,
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
}

impl Starting {
    /// `failure` with the server's stderr, once it has finished writing it (at most a second).
    async fn explain_exit(&mut self, failure: StartFailure) -> StartError {
        if let Some(reader) = self.stderr_reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
        }
        let stderr = self.stderr.lock().map(|s| s.clone()).unwrap_or_default();
        StartError { failure, stderr }
    }
}

/// Why the handshake failed, in one line (an authentication failure says what to configure).
fn handshake_failure(config: &McpServerConfig, failure: Failure) -> StartFailure {
    match failure {
        Failure::Auth(message) => StartFailure::Unauthorized(message),
        other => match (&config.url, &config.command) {
            (Some(url), _) => StartFailure::HttpHandshake { url: url.clone(), failure: Box::new(other) },
            (None, command) => StartFailure::StdioHandshake { command: command.clone().unwrap_or_default(), failure: Box::new(other) },
        },
    }
}

/// Why a call did not return a result.
#[derive(Debug)]
pub enum CallError {
    /// The session failed (the server died, sent garbage, or refused the request).
    Failed(String),
    /// The call's time limit passed.
    TimedOut(Duration),
}

/// A stdio server's process and its group.
struct Process {
    /// Stops the group when dropped.
    group: ProcessGroup,
    /// The process dracode started (the sandbox supervisor when confined).
    child: tokio::process::Child,
}

type Connected = (Transport, Option<Process>, Arc<Mutex<String>>, Option<tokio::task::JoinHandle<()>>);

/// Opens the transport: an HTTP link with the server's credentials, or the child process.
fn connect(name: &str, config: &McpServerConfig, launch: &Launch<'_>) -> Result<Connected, StartFailure> {
    let stderr = Arc::new(Mutex::new(String::new()));
    if let Some(url) = &config.url {
        let credentials = config.credentials(name, &dracode_input::process_env())?;
        let asked = Asked::new(config.elicitation.unwrap_or_default());
        let link = HttpLink::new(launch.http.clone(), url, name, credentials, asked, launch.redactor.clone());
        return Ok((Transport::Http(Box::new(link)), None, stderr, None));
    }
    let program = config.command.as_deref().unwrap_or_default();
    let mut env = launch.env.clone();
    env.extend(config.env.clone());
    let spec = process::Spec {
        program,
        args: &config.args,
        cwd: launch.cwd,
        env: &env,
        tmp_dir: launch.tmp_dir,
        timeout: Duration::MAX,
        output_limit: 0,
        confine: launch.confine,
    };
    let (mut child, group) =
        process::spawn_service(&spec).map_err(|e| StartFailure::Spawn { program: program.to_string(), reason: Arc::new(e) })?;
    let reader = child.stderr.take().map(|err| tokio::spawn(keep_tail(err, stderr.clone())));
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(StartFailure::NoPipes { program: program.to_string() });
    };
    Ok((
        Transport::Stdio(StdioLink::new(stdin, stdout, Asked::new(config.elicitation.unwrap_or_default()))),
        Some(Process { group, child }),
        stderr,
        reader,
    ))
}

/// Keeps the last [`STDERR_TAIL`] bytes of a server's stderr in `tail`.
async fn keep_tail(mut stream: tokio::process::ChildStderr, tail: Arc<Mutex<String>>) {
    let mut buf = vec![0u8; 4096];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let Ok(mut kept) = tail.lock() else { break };
        kept.push_str(&String::from_utf8_lossy(&buf[..n]));
        if kept.len() > STDERR_TAIL {
            let mut cut = kept.len() - STDERR_TAIL;
            while !kept.is_char_boundary(cut) {
                cut += 1;
            }
            kept.drain(..cut);
        }
    }
}

/// `; its stderr ends: …` when the server said anything on stderr, else nothing.
fn stderr_ending(stderr: &str) -> String {
    match stderr.trim() {
        "" => String::new(),
        text => format!("; its stderr ends: {text}"),
    }
}
