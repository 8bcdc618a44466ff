//! Why a task did not pass: its [`TaskError`], whose [`FailureKind`] is a task's own kind or an
//! LLM call's [`ErrorKind`], carried through.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The class of an LLM call's failure (a task's own kinds are `events::FailureKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The provider lacks credentials or an endpoint; nothing was sent.
    NotConfigured,
    /// HTTP 429 or a rate-limit error body.
    RateLimit,
    /// The account's quota is exhausted (not transient).
    Quota,
    /// 401/403: the key was refused.
    Auth,
    /// Connection refused, reset, DNS, TLS or a client-side timeout.
    Network,
    /// 5xx from the provider.
    Server,
    /// A response that could not be understood (bad JSON, truncated body, 400 from the API).
    BadResponse,
    /// A bug or I/O failure inside dracode.
    Internal,
    /// The conversation outgrew the model's context window (and compaction could not help).
    /// The task's own failure, not infrastructure; never retried as it is.
    ContextOverflow,
}

impl ErrorKind {
    /// True for infrastructure failures (reported as JUnit `<error>` rather than `<failure>`).
    pub fn is_infrastructure(self) -> bool {
        matches!(
            self,
            ErrorKind::NotConfigured
                | ErrorKind::RateLimit
                | ErrorKind::Quota
                | ErrorKind::Auth
                | ErrorKind::Network
                | ErrorKind::Server
                | ErrorKind::BadResponse
                | ErrorKind::Internal
        )
    }

    /// The snake_case name used in events.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotConfigured => "not_configured",
            ErrorKind::RateLimit => "rate_limit",
            ErrorKind::Quota => "quota",
            ErrorKind::Auth => "auth",
            ErrorKind::Network => "network",
            ErrorKind::Server => "server",
            ErrorKind::BadResponse => "bad_response",
            ErrorKind::Internal => "internal",
            ErrorKind::ContextOverflow => "context_overflow",
        }
    }
}

/// The class of a task's failure: the LLM call's own kinds, carried through, or one that only a
/// task can have. On the wire it is one snake_case string (`"check"`, `"rate_limit"`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub enum FailureKind {
    /// An LLM call failed (infrastructure: rate limit, auth, network, …).
    // Never `Llm(Internal)`: it is written `internal`, which reads back as `Internal` (as `From`
    // makes it), so the wire cannot keep the two apart.
    #[cfg_attr(
        test,
        proptest(strategy = "proptest::strategy::Strategy::prop_map(proptest::prelude::any::<ErrorKind>(), FailureKind::from)")
    )]
    Llm(ErrorKind),
    /// A tool failed in a way that ended the task.
    Tool,
    /// The agent itself failed (refusal, truncated output, malformed tool call, limits).
    Agent,
    /// The task's check command failed.
    Check,
    /// The check could not run (its command not found or not executable, a read the sandbox
    /// refused): nothing is known about the agent's work.
    CheckUnrunnable,
    /// The machine cannot give the promised confinement.
    Sandbox,
    /// The tool policy denied a call and the task has `on_denied = "fail"`.
    Denied,
    /// The task changed a protected path (`protect`).
    Protected,
    /// A command passed one of the task's resource `limits` (memory, processes, CPU time) and
    /// the sandbox killed it.
    Resource,
    /// A configured secret's value appeared in the task's changes: the patch is withheld rather
    /// than masked (a masked patch would not apply).
    Secret,
    /// The batch's setup step (`[setup]`) failed: no agent ran.
    Setup,
    /// A bug or I/O failure inside dracode.
    Internal,
    /// The run was interrupted (SIGINT/SIGTERM) before the task ended: status `cancelled`.
    Cancelled,
}

impl FailureKind {
    /// The kinds only a task has, with their wire names.
    const TASK_KINDS: [(FailureKind, &'static str); 12] = [
        (FailureKind::Tool, "tool"),
        (FailureKind::Agent, "agent"),
        (FailureKind::Check, "check"),
        (FailureKind::CheckUnrunnable, "check_unrunnable"),
        (FailureKind::Sandbox, "sandbox"),
        (FailureKind::Denied, "denied"),
        (FailureKind::Protected, "protected"),
        (FailureKind::Resource, "resource"),
        (FailureKind::Secret, "secret"),
        (FailureKind::Setup, "setup"),
        (FailureKind::Internal, "internal"),
        (FailureKind::Cancelled, "cancelled"),
    ];

    /// True for infrastructure failures (reported as JUnit `<error>` rather than `<failure>`).
    pub fn is_infrastructure(self) -> bool {
        match self {
            FailureKind::Llm(kind) => kind.is_infrastructure(),
            // An interrupted task says nothing about the agent (JUnit `<error>`); the signal's exit
            // code reports it.
            FailureKind::Sandbox
            | FailureKind::Resource
            | FailureKind::Internal
            | FailureKind::CheckUnrunnable
            | FailureKind::Secret
            | FailureKind::Setup
            | FailureKind::Cancelled => true,
            FailureKind::Tool | FailureKind::Agent | FailureKind::Check | FailureKind::Denied | FailureKind::Protected => false,
        }
    }

    /// The snake_case name used in events and JUnit.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Llm(kind) => kind.as_str(),
            own => Self::TASK_KINDS.iter().find(|(k, _)| *k == own).map_or("internal", |(_, name)| name),
        }
    }
}

impl From<ErrorKind> for FailureKind {
    /// An LLM kind as a task kind; dracode's own failures inside an LLM call are `Internal` either way.
    fn from(kind: ErrorKind) -> Self {
        if kind == ErrorKind::Internal { FailureKind::Internal } else { FailureKind::Llm(kind) }
    }
}

impl Serialize for FailureKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::IntoDeserializer;
        let name = String::deserialize(deserializer)?;
        if let Some((kind, _)) = Self::TASK_KINDS.iter().find(|(_, n)| *n == name) {
            return Ok(*kind);
        }
        let llm: Result<ErrorKind, serde::de::value::Error> = ErrorKind::deserialize(name.as_str().into_deserializer());
        llm.map(FailureKind::from).map_err(|_| serde::de::Error::custom(format!("unknown error kind {name:?}")))
    }
}

impl JsonSchema for FailureKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FailureKind".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let own: Vec<&str> = Self::TASK_KINDS.iter().map(|(_, name)| *name).collect();
        schemars::json_schema!({
            "description": "The class of failure: a task kind or an LLM call's kind.",
            "anyOf": [{"type": "string", "enum": own}, generator.subschema_for::<ErrorKind>()]
        })
    }
}

/// Why a task did not pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct TaskError {
    /// The class of failure.
    pub kind: FailureKind,
    /// A human explanation.
    pub message: String,
    /// The HTTP status, when the failure came from a response.
    #[serde(default)]
    pub http_status: Option<u16>,
}

impl TaskError {
    /// A failure of `kind` without an HTTP status.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        TaskError { kind, message: message.into(), http_status: None }
    }

    /// A failure inside dracode (I/O, a panic, an interrupted run).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Internal, message)
    }
}
