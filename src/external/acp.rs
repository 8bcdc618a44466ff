//! Agents that speak the Agent Client Protocol (ACP): JSON-RPC 2.0 over the agent's stdin and
//! stdout, one message a line; dracode is the client. [`AcpSession::start`] initializes the
//! connection (protocol version 1, no file system and no terminal offered) and opens one session
//! in the workspace; [`AcpSession::prompt`] runs one turn. While a turn runs, the agent's
//! permission requests are granted (dracode's sandbox is the boundary, not the agent's
//! questions), its `session/update` notifications are kept by kind, and any other request it
//! makes is answered `-32601` (method not found).
//!
//! The connection is the `agent-client-protocol` crate's, which is runtime-agnostic: the agent's
//! pipes are tokio's, seen as `futures` byte streams through `tokio-util`'s compat layer. Its
//! whole connection is one future held by the session and polled only while [`AcpSession::start`]
//! or [`AcpSession::prompt`] is awaited, so no task is spawned: dropping a call, or the session,
//! drops everything (the agent's stdin closes with it), which is what dracode does on a timeout.
//!
//! The notifications and the permission requests are read untyped and then parsed, so an update
//! of a kind this schema does not know, or a malformed request, does not end the connection (the
//! crate ends it when a typed handler fails to parse); the turn's answer is read untyped too, so
//! a stop reason newer than the schema still comes through as its string.

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, Implementation, InitializeRequest, NewSessionRequest, PermissionOptionKind, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome, SessionId, TextContent,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, Handled, UntypedMessage};
use serde_json::Value;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The connection's future: it runs the dispatch loop and the session's commands.
type Driver = Pin<Box<dyn Future<Output = Result<(), agent_client_protocol::Error>> + Send>>;

/// What a call waits for: the outcome the connection sends back.
/// Why a session with an ACP agent could not start or run a turn: the method that failed and
/// the agent's error, or that the agent closed its output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AcpError(pub String);

type Reply<T> = oneshot::Receiver<Result<T, AcpError>>;

/// One turn to run: the prompt's text and where its stop reason goes.
struct Turn {
    text: String,
    reply: oneshot::Sender<Result<String, AcpError>>,
}

/// A session with an ACP agent over its stdin/stdout.
pub struct AcpSession {
    /// The connection; `None` once it has ended.
    driver: Option<Driver>,
    /// Why it ended, once it has.
    ended: Option<String>,
    /// The turns for the connection to run.
    turns: mpsc::UnboundedSender<Turn>,
    /// The `sessionUpdate` kinds received so far.
    updates: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for AcpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpSession").field("ended", &self.ended).field("updates", &self.updates()).finish_non_exhaustive()
    }
}

impl AcpSession {
    /// `initialize` (protocol version 1; client capabilities: no fs, no terminal), then
    /// `session/new` with `cwd` and no MCP servers. Errors name what failed (the agent's error
    /// message, or "the agent closed its output").
    pub async fn start(stdin: ChildStdin, stdout: ChildStdout, cwd: &Path) -> Result<AcpSession, AcpError> {
        let updates = Arc::new(Mutex::new(Vec::new()));
        let (started_tx, started) = oneshot::channel();
        let (turns, turns_rx) = mpsc::unbounded_channel();
        let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
        let driver = connection(transport, Arc::clone(&updates), cwd.to_path_buf(), started_tx, turns_rx);
        let mut session = AcpSession { driver: Some(driver), ended: None, turns, updates };
        session.run_until(started).await?;
        Ok(session)
    }

    /// `session/prompt` with one text block; resolves with the `stopReason` string (`end_turn`,
    /// `max_tokens`, `max_turn_requests`, `refusal`, `cancelled`) when the agent answers.
    /// Meanwhile `session/request_permission` requests are answered by selecting the first option
    /// of kind `allow_always`, else `allow_once` (dracode's sandbox is the boundary), else
    /// cancelled; `session/update` notifications are kept (see [`AcpSession::updates`]); any
    /// other request from the agent gets JSON-RPC error -32601. Can be called again on the same
    /// session (a follow-up turn). Dropping the call does not cancel the turn in the agent: the
    /// next call's turn is sent once the agent has answered it (dracode kills the agent instead).
    pub async fn prompt(&mut self, text: &str) -> Result<String, AcpError> {
        let (reply, answer) = oneshot::channel();
        if self.turns.send(Turn { text: text.to_string(), reply }).is_err() {
            return Err(AcpError(self.ended_reason()));
        }
        self.run_until(answer).await
    }

    /// The `sessionUpdate` kinds received so far, in order (e.g. `agent_message_chunk`,
    /// `tool_call`, `tool_call_update`), for tests and diagnostics.
    pub fn updates(&self) -> Vec<String> {
        self.updates.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Why the connection can no longer answer.
    fn ended_reason(&self) -> String {
        self.ended.clone().unwrap_or_else(|| "the connection to the agent has ended".to_string())
    }

    /// Polls the connection until `answer` comes; an error if the connection ends first.
    async fn run_until<T>(&mut self, mut answer: Reply<T>) -> Result<T, AcpError> {
        let Some(driver) = self.driver.as_mut() else {
            return Err(AcpError(self.ended_reason()));
        };
        let end = tokio::select! {
            biased;
            reply = &mut answer => return reply.unwrap_or_else(|_| Err(AcpError("the connection to the agent has ended".to_string()))),
            end = driver => end,
        };
        self.driver = None;
        let reason = match end {
            Ok(()) => "the agent closed its output".to_string(),
            Err(e) => format!("the connection to the agent failed: {}", describe(&e)),
        };
        self.ended = Some(reason.clone());
        // The last thing the connection did may have been to answer.
        answer.try_recv().unwrap_or(Err(AcpError(reason)))
    }
}

/// The connection over `transport`: the handlers of what the agent sends, then `initialize` and
/// `session/new` (their outcome to `started`), then each turn from `turns`.
fn connection(
    transport: ByteStreams<Compat<ChildStdin>, Compat<ChildStdout>>,
    updates: Arc<Mutex<Vec<String>>>,
    cwd: PathBuf,
    started: oneshot::Sender<Result<(), AcpError>>,
    mut turns: mpsc::UnboundedReceiver<Turn>,
) -> Driver {
    let builder = Client
        .v1()
        .name("dracode")
        .on_receive_notification(
            async move |message: UntypedMessage, cx: ConnectionTo<Agent>| {
                if message.method() != "session/update" {
                    return Ok(Handled::No { message: (message, cx), retry: false });
                }
                let kind = message.params().pointer("/update/sessionUpdate").and_then(Value::as_str).unwrap_or("unknown");
                updates.lock().unwrap_or_else(PoisonError::into_inner).push(kind.to_string());
                Ok(Handled::Yes)
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async |request: UntypedMessage, responder: Responder<Value>, _cx: ConnectionTo<Agent>| {
                if request.method() != "session/request_permission" {
                    return Ok(Handled::No { message: (request, responder), retry: false });
                }
                answer_permission(request.params(), responder)?;
                Ok(Handled::Yes)
            },
            agent_client_protocol::on_receive_request!(),
        );
    Box::pin(builder.connect_with(transport, async move |cx: ConnectionTo<Agent>| {
        let session = match open(&cx, cwd).await {
            Ok(session) => session,
            Err(e) => {
                let _ = started.send(Err(e));
                return Ok(());
            }
        };
        let _ = started.send(Ok(()));
        while let Some(turn) = turns.recv().await {
            let outcome = run_turn(&cx, &session, turn.text).await;
            let _ = turn.reply.send(outcome);
        }
        Ok(())
    }))
}

/// `initialize`, then `session/new` in `cwd`: the session's id.
async fn open(cx: &ConnectionTo<Agent>, cwd: PathBuf) -> Result<SessionId, AcpError> {
    // The default capabilities offer neither file system nor terminal methods.
    let init = InitializeRequest::new(ProtocolVersion::V1).client_info(Implementation::new("dracode", env!("CARGO_PKG_VERSION")));
    let answer = cx.send_request(init).block_task().await.map_err(|e| failed("initialize", &e))?;
    if answer.protocol_version != ProtocolVersion::V1 {
        return Err(AcpError(format!("initialize: the agent speaks ACP version {}, not 1", answer.protocol_version)));
    }
    let session = cx.send_request(NewSessionRequest::new(cwd)).block_task().await.map_err(|e| failed("session/new", &e))?;
    Ok(session.session_id)
}

/// One `session/prompt`: the stop reason the agent answers with.
async fn run_turn(cx: &ConnectionTo<Agent>, session: &SessionId, text: String) -> Result<String, AcpError> {
    let request = PromptRequest::new(session.clone(), vec![ContentBlock::Text(TextContent::new(text))]);
    let message = UntypedMessage::new("session/prompt", request).map_err(|e| failed("session/prompt", &e))?;
    let answer = cx.send_request(message).block_task().await.map_err(|e| failed("session/prompt", &e))?;
    match answer.get("stopReason").and_then(Value::as_str) {
        Some(reason) => Ok(reason.to_string()),
        None => Err(AcpError(format!("session/prompt: the agent's answer has no stopReason: {}", clip(&answer.to_string())))),
    }
}

/// Answers a `session/request_permission`: the first `allow_always` option, else the first
/// `allow_once`, else cancelled; `-32602` if the request is not one.
fn answer_permission(params: &Value, responder: Responder<Value>) -> Result<(), agent_client_protocol::Error> {
    let request = match serde_json::from_value::<RequestPermissionRequest>(params.clone()) {
        Ok(request) => request,
        Err(e) => {
            return responder.respond_with_error(agent_client_protocol::Error::invalid_params().data(e.to_string()));
        }
    };
    let option = [PermissionOptionKind::AllowAlways, PermissionOptionKind::AllowOnce]
        .iter()
        .find_map(|kind| request.options.iter().find(|option| option.kind == *kind));
    let outcome = match option {
        Some(option) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option.option_id.clone())),
        None => RequestPermissionOutcome::Cancelled,
    };
    let answer =
        serde_json::to_value(RequestPermissionResponse::new(outcome)).map_err(agent_client_protocol::Error::into_internal_error)?;
    responder.respond(answer)
}

/// `method` failed: the agent's error, or that it closed its output.
fn failed(method: &str, error: &agent_client_protocol::Error) -> AcpError {
    AcpError(format!("{method}: {}", describe(error)))
}

/// An error of the connection, in words.
fn describe(error: &agent_client_protocol::Error) -> String {
    if agent_client_protocol::is_incoming_transport_closed(error) {
        return "the agent closed its output".to_string();
    }
    match error.data.as_ref().filter(|d| !d.is_null()) {
        Some(data) => format!("{} (error {}: {})", error.message, error.code.value(), clip(&data.to_string())),
        None => format!("{} (error {})", error.message, error.code.value()),
    }
}

/// At most 500 characters of `text`.
fn clip(text: &str) -> String {
    match text.char_indices().nth(500) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;
    use std::time::Duration;
    use tokio::process::{Child, Command};

    /// The fake agent (tests/fixtures/acp/fake_agent.py) in `cwd`, with `env`.
    fn fake_agent(cwd: &Path, env: &[(&str, &str)]) -> Child {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp/fake_agent.py");
        let mut command = Command::new("python3");
        command.arg(script).current_dir(cwd).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).kill_on_drop(true);
        command.envs(env.iter().copied());
        command.spawn().unwrap()
    }

    async fn start(child: &mut Child, cwd: &Path) -> Result<AcpSession, String> {
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        tokio::time::timeout(Duration::from_secs(20), AcpSession::start(stdin, stdout, cwd)).await.unwrap().map_err(|e| e.0)
    }

    async fn prompt(session: &mut AcpSession, text: &str) -> Result<String, String> {
        tokio::time::timeout(Duration::from_secs(20), session.prompt(text)).await.unwrap().map_err(|e| e.0)
    }

    fn observed(cwd: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(cwd.join("observed.json")).unwrap()).unwrap()
    }

    #[tokio::test]
    async fn two_turns_permission_granted_and_unknown_requests_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = fake_agent(dir.path(), &[]);
        let mut session = start(&mut child, dir.path()).await.unwrap();
        assert_eq!(prompt(&mut session, "Write out.txt").await.unwrap(), "end_turn");
        assert_eq!(session.updates(), ["agent_message_chunk", "tool_call", "tool_call_update"]);
        let seen = observed(dir.path());
        assert_eq!(seen["permission"], serde_json::json!({"outcome": "selected", "optionId": "always"}));
        assert_eq!(seen["unknown"]["code"], -32601, "{seen}");
        assert_eq!(prompt(&mut session, "And again").await.unwrap(), "max_turn_requests");
        assert_eq!(session.updates().len(), 4);
        assert_eq!(session.updates()[3], "agent_message_chunk");
        drop(session);
        let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.unwrap().unwrap();
        assert!(status.success(), "the agent ends on its stdin's end: {status}");
    }

    #[tokio::test]
    async fn no_allow_option_cancels() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = fake_agent(dir.path(), &[("FAKE_ACP_OPTIONS", "reject")]);
        let mut session = start(&mut child, dir.path()).await.unwrap();
        assert_eq!(prompt(&mut session, "Write out.txt").await.unwrap(), "end_turn");
        assert_eq!(observed(dir.path())["permission"], serde_json::json!({"outcome": "cancelled"}));
    }

    #[tokio::test]
    async fn errors_name_what_failed() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = fake_agent(dir.path(), &[("FAKE_ACP_MODE", "error_on_new")]);
        let error = start(&mut child, dir.path()).await.unwrap_err();
        assert!(error.starts_with("session/new: no sessions today (error -32603"), "{error}");

        let mut child = fake_agent(dir.path(), &[("FAKE_ACP_MODE", "close_on_new")]);
        let error = start(&mut child, dir.path()).await.unwrap_err();
        assert_eq!(error, "session/new: the agent closed its output");
    }

    #[tokio::test]
    async fn a_closed_agent_fails_the_turn_and_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = fake_agent(dir.path(), &[("FAKE_ACP_MODE", "hang")]);
        let mut session = start(&mut child, dir.path()).await.unwrap();
        // A turn dropped on a timeout: nothing panics, and the session still answers.
        assert!(tokio::time::timeout(Duration::from_millis(300), session.prompt("hang")).await.is_err());
        child.start_kill().unwrap();
        let error = prompt(&mut session, "again").await.unwrap_err();
        assert!(error.contains("the agent closed its output"), "{error}");
        let error = prompt(&mut session, "and again").await.unwrap_err();
        assert!(error.contains("the agent closed its output"), "{error}");
    }

    /// The real Gemini CLI in ACP mode against the gateway's scripted example, by hand:
    /// `DRACODE_ACP_GEMINI=path/to/gemini DRACODE_ACP_SCRIPTED=target/debug/examples/scripted
    /// cargo test --lib external::acp -- --ignored --nocapture` (build the example first:
    /// `cargo build -p dracode-gateway --example scripted`). `DRACODE_ACP_ARGS` adds arguments
    /// (e.g. `--approval-mode yolo`).
    #[tokio::test]
    #[ignore = "needs the Gemini CLI and the gateway's scripted example"]
    async fn real_gemini_cli() {
        use tokio::io::AsyncBufReadExt;
        let (gemini, scripted) = (std::env::var("DRACODE_ACP_GEMINI").unwrap(), std::env::var("DRACODE_ACP_SCRIPTED").unwrap());
        let mut gateway = Command::new(scripted).arg("TOKEN").stdout(Stdio::piped()).kill_on_drop(true).spawn().unwrap();
        let mut lines = tokio::io::BufReader::new(gateway.stdout.take().unwrap()).lines();
        let port = lines.next_line().await.unwrap().unwrap().strip_prefix("PORT ").unwrap().to_string();
        let (home, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::create_dir(home.path().join(".gemini")).unwrap();
        let settings = r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"enableAutoUpdate":false,"enableAutoUpdateNotification":false},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false}}"#;
        std::fs::write(home.path().join(".gemini/settings.json"), settings).unwrap();
        let extra = std::env::var("DRACODE_ACP_ARGS").unwrap_or_default();
        let mut child = Command::new(gemini)
            .args(["--acp", "-m", "gemini-2.5-pro"])
            .args(extra.split_whitespace())
            .current_dir(work.path())
            .env("HOME", home.path())
            .env("GEMINI_API_KEY", "TOKEN")
            .env("GOOGLE_GEMINI_BASE_URL", format!("http://127.0.0.1:{port}"))
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let cwd = work.path().canonicalize().unwrap();
        let mut session = tokio::time::timeout(Duration::from_secs(60), AcpSession::start(stdin, stdout, &cwd)).await.unwrap().unwrap();
        let first =
            tokio::time::timeout(Duration::from_secs(120), session.prompt("Write hi into out.txt with the shell.")).await.unwrap().unwrap();
        let written = std::fs::read_to_string(cwd.join("out.txt"));
        println!("turn 1: {first}; out.txt: {written:?}; updates: {:?}", session.updates());
        let second = tokio::time::timeout(Duration::from_secs(120), session.prompt("Thanks. Anything else?")).await.unwrap().unwrap();
        println!("turn 2: {second}; updates: {:?}", session.updates());
        assert_eq!(first, "end_turn");
        assert_eq!(written.unwrap().trim(), "hi");
        assert_eq!(second, "end_turn");
    }
}
