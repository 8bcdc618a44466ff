//! The fields a task (or `[defaults]`) may set. Every field is optional so that layers —
//! config defaults, manifest defaults, the task, the command line — overlay one another.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How a task's workspace is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// A fresh git worktree of `repo` at `base`.
    Worktree,
    /// A temporary copy of `repo` (honouring .gitignore).
    Copy,
    /// In place, in `repo`.
    None,
}

impl Isolation {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Worktree => "worktree",
            Isolation::Copy => "copy",
            Isolation::None => "none",
        }
    }
}

pub use dracode_sandbox::SandboxMode;

/// Every setting of a task. In `[defaults]` all but `id`, `prompt` and `prompt_file` apply to
/// every task; a task's own value wins.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskFields {
    /// Unique id, `[A-Za-z0-9._-]+`; the JUnit testcase name and artifact file name.
    pub id: Option<String>,
    /// What the agent is asked to do.
    pub prompt: Option<String>,
    /// A file holding the prompt, relative to the manifest.
    pub prompt_file: Option<PathBuf>,
    /// Provider name (a `[providers.NAME]` table, or a type such as `openai`).
    pub provider: Option<String>,
    /// Model, overriding the provider's.
    pub model: Option<String>,
    /// LLM calls allowed before the task ends as `max_iterations` (default 10).
    pub max_iterations: Option<u32>,
    /// Wall-clock limit for each attempt of the task, e.g. `10m` (default `30m`).
    pub timeout: Option<String>,
    /// Silence for this long — no event, no byte from the model, no output from a command —
    /// ends the task as `stalled` (default `5m`).
    pub idle_timeout: Option<String>,
    /// Attempts after the first, each in a fresh workspace.
    pub retries: Option<u32>,
    /// Which statuses are retried (default `error`, `timeout`, `stalled`; `failed` may be
    /// added). `not_configured` and quota/auth errors are never retried.
    pub retry_on: Option<Vec<dracode_results::Status>>,
    /// `worktree`, `copy` or `none`.
    pub isolation: Option<Isolation>,
    /// The folder (git repository) the task works on, relative to the manifest.
    pub repo: Option<PathBuf>,
    /// The commit-ish a worktree starts at.
    pub base: Option<String>,
    /// Where tools run, relative to the workspace root.
    pub workdir: Option<PathBuf>,
    /// The tools offered to the agent.
    pub tools: Option<Vec<String>>,
    /// The tool policy: per tool `allow` (true/false, or command rules), `deny`,
    /// `allowed_hosts` (`web_fetch`), and `on_denied`; merged per tool over `[defaults]`.
    pub policy: Option<crate::tools::policy::PolicyFields>,
    /// A command run after the agent; the task passes only if it exits 0.
    pub check: Option<String>,
    /// Also run `check` before the agent, to record red-to-green.
    pub check_before: Option<bool>,
    /// Time limit of the check command (default 10m).
    pub check_timeout: Option<String>,
    /// Times a failed check's exit code and output tail are given back to the agent, in the same
    /// conversation, to repair its work before the check runs again (default 0).
    pub check_repairs: Option<u32>,
    /// Independent attempts of the task, each in a fresh workspace (default 1): its
    /// `task.finished` gets a `pass_rate` and a `verdict` (`stable_pass`, `stable_fail`, `flaky`).
    pub repeat: Option<u32>,
    /// Give the task's commands their own empty `HOME` (besides their own `TMPDIR`, always).
    pub isolate_home: Option<bool>,
    /// Commit a passed task's changes on a branch `dracode/<run-id>/<task-id>` (worktree
    /// isolation), ready to push or open a pull request from.
    pub commit: Option<bool>,
    /// Fail the task when the agent changed no file.
    pub require_change: Option<bool>,
    /// Globs (relative to the workspace root) of paths the agent may not change: its file tools
    /// refuse them, and they are put back before the check; added to `[defaults].protect`.
    pub protect: Option<Vec<String>>,
    /// Globs (relative to the workspace root) of gitignored paths the agent made or changed that
    /// the check's world gets from the workspace (`["node_modules/**", ".venv/**"]`); nothing
    /// else the change record does not hold reaches a check. Kept paths are listed in
    /// `task.finished` (`kept_ignored`); a protected path is never kept. Replaces
    /// `[defaults].keep_ignored`.
    pub keep_ignored: Option<Vec<String>>,
    /// Labels for `--filter tag:NAME`; added to `[defaults].tags` (a task cannot drop an
    /// inherited tag: put the tag on the tasks that have it instead of in `[defaults]`).
    pub tags: Option<Vec<String>>,
    /// Canned answers for `ask_user`, by question (`"*"` answers any).
    pub answers: Option<BTreeMap<String, String>>,
    /// For the `replay` provider: a recording file, or a folder of `<id>.json` recordings.
    pub replay: Option<PathBuf>,
    /// Text appended to the system prompt.
    pub system_prompt: Option<String>,
    /// Output token limit per LLM call.
    pub max_output_tokens: Option<u32>,
    /// How hard the model thinks (`low`, `medium`, `high`); overrides the provider's.
    pub reasoning: Option<dracode_llm::ReasoningEffort>,
    /// Token budget of the task.
    pub max_tokens: Option<u64>,
    /// Cost budget of the task in USD.
    pub max_cost_usd: Option<f64>,
    /// A cap on the context window the task uses, in tokens (below the model's own).
    pub max_context_tokens: Option<u64>,
    /// The fraction of the window at which the conversation is compacted (default 0.85).
    pub compact_at: Option<f64>,
    /// How far the task's commands are confined (default `workspace-write`).
    pub sandbox: Option<SandboxMode>,
    /// The network of the task's commands and check: `false` (none, the default), `true`
    /// (everything), or an egress allowlist of host patterns — a list, or `{ allow = [...],
    /// deny = [...] }` — reached through dracode's proxy.
    pub network: Option<dracode_sandbox::egress::NetworkField>,
    /// Resource limits of the task's commands (`memory`, `processes`, `open_files`,
    /// `file_size`, `cpu_time`); merged per limit over `[defaults]`.
    pub limits: Option<dracode_sandbox::LimitFields>,
    /// Variables set for the task's commands and check.
    pub env: Option<BTreeMap<String, String>>,
    /// Names of extra variables of dracode's environment a command may see.
    pub env_passthrough: Option<Vec<String>>,
    /// Unix socket files outside the workspace and TMPDIR the task's commands may connect to
    /// (absolute, or relative to the manifest). Dangerous: `docker.sock` is root on the machine.
    pub unix_sockets: Option<Vec<PathBuf>>,
    /// Extra files and folders the task's commands may read (relative to the manifest, or
    /// absolute), besides the system, the toolchains, the workspace and the TMPDIR.
    pub read_paths: Option<Vec<PathBuf>>,
    /// A JSON Schema (inline table) the task's final answer must be valid against; the answer
    /// is `structured_output` in `task.finished` and `outputs/<id>.json`.
    pub output_schema: Option<serde_json::Value>,
    /// A JSON file holding the schema, relative to the manifest (instead of `output_schema`).
    pub output_schema_file: Option<PathBuf>,
    /// Repairs allowed after an invalid or missing final answer (default 2).
    pub output_retries: Option<u32>,
    /// A built-in answer shape: `findings` (review findings, also `findings.sarif`).
    pub output: Option<crate::structured::OutputPreset>,
    /// MCP servers whose tools the task is offered as `NAME__tool`, by name; merged by name
    /// with the ones of `[defaults]`, the manifest's top-level `[mcp_servers]` and config.
    pub mcp_servers: Option<BTreeMap<String, dracode_mcp::McpServerConfig>>,
}

/// The names of [`TaskFields`], for did-you-mean suggestions.
pub const FIELD_NAMES: &[&str] = &[
    "id",
    "prompt",
    "prompt_file",
    "provider",
    "model",
    "max_iterations",
    "timeout",
    "idle_timeout",
    "retries",
    "retry_on",
    "isolation",
    "repo",
    "base",
    "workdir",
    "tools",
    "policy",
    "check",
    "check_before",
    "check_timeout",
    "check_repairs",
    "repeat",
    "commit",
    "isolate_home",
    "require_change",
    "protect",
    "keep_ignored",
    "tags",
    "answers",
    "replay",
    "system_prompt",
    "max_output_tokens",
    "reasoning",
    "max_tokens",
    "max_cost_usd",
    "max_context_tokens",
    "compact_at",
    "sandbox",
    "network",
    "limits",
    "env",
    "env_passthrough",
    "unix_sockets",
    "read_paths",
    "output_schema",
    "output_schema_file",
    "output_retries",
    "output",
    "mcp_servers",
];

macro_rules! overlay_fields {
    ($base:ident, $top:ident; $($f:ident),*) => {
        TaskFields { $($f: $top.$f.or($base.$f)),* }
    };
}

impl TaskFields {
    /// `self` with every field that `top` sets replaced by `top`'s value.
    pub fn overlay(mut self, mut top: TaskFields) -> TaskFields {
        let policy = crate::tools::policy::PolicyFields::overlay(self.policy.take(), top.policy.take());
        let limits = dracode_sandbox::LimitFields::overlay(self.limits.take(), top.limits.take());
        let mcp_servers = match (self.mcp_servers.take(), top.mcp_servers.take()) {
            (Some(mut below), Some(above)) => {
                below.extend(above);
                Some(below)
            }
            (below, above) => above.or(below),
        };
        let protect = union(self.protect.take(), top.protect.take());
        let tags = union(self.tags.take(), top.tags.take());
        let base = self;
        let mut merged = overlay_fields!(base, top; id, prompt, prompt_file, provider, model, max_iterations, timeout,
            idle_timeout, retries, retry_on, isolation, repo, base, workdir, tools, check, check_before,
            check_timeout, check_repairs, repeat, commit, isolate_home, require_change, protect, keep_ignored, tags, answers, replay, system_prompt, max_output_tokens,
            reasoning,
            max_tokens, max_cost_usd, max_context_tokens, compact_at, sandbox, network, env, env_passthrough,
            unix_sockets, read_paths, output_schema, output_schema_file, output_retries, output, policy, mcp_servers, limits);
        merged.policy = policy;
        merged.limits = limits;
        merged.mcp_servers = mcp_servers;
        merged.protect = protect;
        merged.tags = tags;
        merged
    }

    /// True when the named field has a value.
    pub fn is_set(&self, field: &str) -> bool {
        serde_json::to_value(self).ok().and_then(|v| v.get(field).map(|v| !v.is_null())).unwrap_or(false)
    }
}

/// A list field that adds up (`protect`, `tags`): `below`'s entries, then `above`'s new ones.
fn union(below: Option<Vec<String>>, above: Option<Vec<String>>) -> Option<Vec<String>> {
    match (below, above) {
        (Some(mut below), Some(above)) => {
            below.extend(above.into_iter().filter(|p| !below.contains(p)).collect::<Vec<_>>());
            Some(below)
        }
        (below, above) => above.or(below),
    }
}

/// The top level of a manifest file.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct ManifestFile {
    /// MCP servers every task is offered (`[mcp_servers.NAME]`), below `[defaults]`.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, dracode_mcp::McpServerConfig>,
    /// Settings every task inherits.
    #[serde(default)]
    pub defaults: TaskFields,
    /// Commands run once per batch before any agent (`[setup]`).
    #[serde(default)]
    pub setup: Option<SetupFields>,
    /// The tasks, in run order.
    #[serde(default)]
    pub tasks: Vec<TaskFields>,
}

/// The manifest's `[setup]` table: a command run once, before any agent, on the base every task
/// of the manifest starts from; what it makes (dependency folders, build caches, virtualenvs)
/// is copied into each task's workspace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SetupFields {
    /// Run by `sh -c` at the root of a workspace made like the tasks' (required).
    pub command: Option<String>,
    /// Time limit of the command, e.g. `20m` (default `30m`).
    pub timeout: Option<String>,
    /// The command's network, as a task's `network` (default: the tasks' own).
    pub network: Option<dracode_sandbox::egress::NetworkField>,
    /// Variables set for the command, over the tasks' `env`.
    pub env: Option<BTreeMap<String, String>>,
}

/// Makes the manifest-relative paths of `fields` absolute against `dir`.
pub fn resolve_paths(mut fields: TaskFields, dir: &Path) -> TaskFields {
    let abs = |p: Option<PathBuf>| p.map(|p| if p.is_absolute() { p } else { dir.join(p) });
    fields.prompt_file = abs(fields.prompt_file);
    fields.repo = abs(fields.repo);
    fields.replay = abs(fields.replay);
    fields.output_schema_file = abs(fields.output_schema_file);
    fields.unix_sockets = fields.unix_sockets.map(|paths| paths.into_iter().map(|p| dir.join(p)).collect());
    let keep_empty = |p: PathBuf| if p.is_absolute() || p.as_os_str().is_empty() { p } else { dir.join(p) };
    fields.read_paths = fields.read_paths.map(|paths| paths.into_iter().map(keep_empty).collect());
    fields
}

impl TaskFields {
    /// The fields that make the task's output contract.
    pub fn output_fields(&self) -> crate::structured::OutputFields {
        crate::structured::OutputFields {
            output_schema: self.output_schema.clone(),
            output_schema_file: self.output_schema_file.clone(),
            output: self.output,
            output_retries: self.output_retries,
        }
    }
}
