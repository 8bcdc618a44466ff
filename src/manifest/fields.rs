//! The fields a task (or `[defaults]`) may set. Every field is optional so that layers —
//! config defaults, manifest defaults, the task, the command line — overlay one another.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
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

/// Declares [`TaskFields`] from one list: per field its doc, its type (every field is an
/// `Option` of it), how a layer above overlays it (`replace`: the upper value wins; `union`,
/// `by_name` and the tables' own `overlay` merge), and whether it is an input of a `--cache` key
/// (`key`) or, with the reason, not (`skip "why"`). [`FIELD_NAMES`], [`FIELD_CACHE_ROLES`],
/// [`TaskFields::overlay`] and [`TaskFields::cache_text`] all come from that one list, so a new
/// field reaches each of them (and says where it stands in the cache key) or does not compile.
macro_rules! task_fields {
    (@why key) => { None };
    (@why skip $why:literal) => { Some($why) };
    (@key $text:ident, $fields:ident, $name:ident, key) => { push_key(&mut $text, stringify!($name), &$fields.$name) };
    (@key $text:ident, $fields:ident, $name:ident, skip) => {};
    (
        $(#[$struct_attr:meta])*
        pub struct TaskFields {
            $(
                $(#[$attr:meta])*
                $name:ident: $ty:ty => $merge:path, $cache:ident $($why:literal)?,
            )*
        }
    ) => {
        $(#[$struct_attr])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        pub struct TaskFields {
            $(
                $(#[$attr])*
                pub $name: Option<$ty>,
            )*
        }

        /// The names of [`TaskFields`], for did-you-mean suggestions.
        pub const FIELD_NAMES: &[&str] = &[$(stringify!($name)),*];

        /// Each field of [`TaskFields`] with, when it is no input of a `--cache` key, why not
        /// (`None`: its value is one, [`TaskFields::cache_text`]).
        pub const FIELD_CACHE_ROLES: &[(&str, Option<&str>)] = &[$((stringify!($name), task_fields!(@why $cache $($why)?))),*];

        impl TaskFields {
            /// `self` with every field that `top` sets replaced by `top`'s value; `policy` and
            /// `limits` are merged per tool and per limit, `mcp_servers` by name, and `protect`
            /// and `tags` add up.
            pub fn overlay(self, top: TaskFields) -> TaskFields {
                TaskFields { $($name: $merge(self.$name, top.$name),)* }
            }

            /// The fields that are inputs of a `--cache` key, one `name = JSON` line for each
            /// that is set (so a field added later, unset, leaves earlier keys as they were).
            pub fn cache_text(&self) -> String {
                let mut text = String::new();
                $(task_fields!(@key text, self, $name, $cache);)*
                text
            }
        }
    };
}

task_fields! {
    /// Every setting of a task. In `[defaults]` all but `id`, `prompt` and `prompt_file` apply to
    /// every task; a task's own value wins.
    pub struct TaskFields {
        /// Unique id, `[A-Za-z0-9._-]+`; the JUnit testcase name and artifact file name.
        id: String => replace, skip "the task's name, not an input of its result: a renamed task still hits",
        /// What the agent is asked to do.
        prompt: String => replace, key,
        /// A file holding the prompt, relative to the manifest.
        prompt_file: PathBuf => replace, skip "a path of this machine: the prompt it holds is in the key",
        /// The task's agent: `dracode` (the built-in agent, the default), or an installed coding
        /// agent run in the task's sandbox against dracode's endpoint: `claude-code`, `codex`,
        /// `gemini-cli` or `opencode` (see `[agents.NAME]` in the config for its program).
        agent: String => replace, key,
        /// Provider name (a `[providers.NAME]` table, or a type such as `openai`).
        provider: String => replace, key,
        /// Model, overriding the provider's.
        model: String => replace, key,
        /// LLM calls allowed before the task ends as `max_iterations` (default 10).
        max_iterations: u32 => replace, key,
        /// Wall-clock limit for each attempt of the task, e.g. `10m` (default `30m`).
        timeout: String => replace, key,
        /// Silence for this long — no event, no byte from the model, no output from a command —
        /// ends the task as `stalled` (default `5m`).
        idle_timeout: String => replace, key,
        /// Attempts after the first, each in a fresh workspace.
        retries: u32 => replace, skip "how often a failed attempt runs again: a recorded pass is a pass",
        /// Which statuses are retried (default `error`, `timeout`, `stalled`; `failed` may be
        /// added). `not_configured` and quota/auth errors are never retried.
        retry_on: Vec<dracode_results::Status> => replace, skip "which failures run again: a recorded pass is a pass",
        /// `worktree`, `copy` or `none`.
        isolation: Isolation => replace, skip "`worktree` and `copy` start from the same tree, which is in the key (`none` is never cached)",
        /// The folder (git repository) the task works on, relative to the manifest.
        repo: PathBuf => replace, skip "a path of this machine: its tree is in the key",
        /// The commit-ish a worktree starts at.
        base: String => replace, skip "a commit-ish: the tree it names is in the key (a rebase that changes nothing still hits)",
        /// Where tools run, relative to the workspace root.
        workdir: PathBuf => replace, key,
        /// The tools offered to the agent.
        tools: Vec<String> => replace, key,
        /// The tool policy: per tool `allow` (true/false, or command rules), `deny`,
        /// `allowed_hosts` (`web_fetch`), and `on_denied`; merged per tool over `[defaults]`.
        policy: crate::tools::policy::PolicyFields => crate::tools::policy::PolicyFields::overlay, key,
        /// A command run after the agent; the task passes only if it exits 0.
        check: String => replace, key,
        /// Also run `check` before the agent, to record red-to-green.
        check_before: bool => replace, key,
        /// Time limit of the check command (default 10m).
        check_timeout: String => replace, key,
        /// Times a failed check's exit code and output tail are given back to the agent, in the same
        /// conversation, to repair its work before the check runs again (default 0).
        check_repairs: u32 => replace, key,
        /// Independent attempts of the task, each in a fresh workspace (default 1): its
        /// `task.finished` gets a `pass_rate` and a `verdict` (`stable_pass`, `stable_fail`, `flaky`).
        repeat: u32 => replace, key,
        /// Give the task's commands their own empty `HOME` (besides their own `TMPDIR`, always).
        isolate_home: bool => replace, key,
        /// Commit a passed task's changes on a branch `dracode/<run-id>/<task-id>` (worktree
        /// isolation), ready to push or open a pull request from.
        commit: bool => replace, skip "a task with `commit = true` is never cached",
        /// Fail the task when the agent changed no file.
        require_change: bool => replace, key,
        /// Globs (relative to the workspace root) of paths the agent may not change: its file tools
        /// refuse them, and they are put back before the check; added to `[defaults].protect`.
        protect: Vec<String> => union, key,
        /// Globs (relative to the workspace root) of gitignored paths the agent made or changed that
        /// the check's world gets from the workspace (`["node_modules/**", ".venv/**"]`); nothing
        /// else the change record does not hold reaches a check. Kept paths are listed in
        /// `task.finished` (`kept_ignored`); a protected path is never kept. Replaces
        /// `[defaults].keep_ignored`.
        keep_ignored: Vec<String> => replace, key,
        /// Labels for `--filter tag:NAME`; added to `[defaults].tags` (a task cannot drop an
        /// inherited tag: put the tag on the tasks that have it instead of in `[defaults]`).
        tags: Vec<String> => union, skip "labels for `--filter`; they change no result",
        /// Canned answers for `ask_user`, by question (`"*"` answers any).
        answers: BTreeMap<String, String> => replace, key,
        /// For the `replay` provider: a recording file, or a folder of `<id>.json` recordings.
        replay: PathBuf => replace, skip "a path of this machine: the recording's contents are in the key",
        /// Text appended to the system prompt.
        system_prompt: String => replace, key,
        /// Give the agent the repository's `AGENTS.md` files — the workspace root's and those of the
        /// folders down to `workdir`, nearest last, each cut at 32 KiB — as instructions (default true).
        agents_md: bool => replace, key,
        /// Tell the agent the `check` command it is graded by (default true; `false` keeps a hidden
        /// test's command hidden).
        tell_check: bool => replace, key,
        /// Tell the agent the `protect` globs it may not change (default true).
        tell_protect: bool => replace, key,
        /// Output token limit per LLM call.
        max_output_tokens: u32 => replace, key,
        /// How hard the model thinks (`low`, `medium`, `high`); overrides the provider's.
        reasoning: dracode_llm::ReasoningEffort => replace, key,
        /// Token budget of the task.
        max_tokens: u64 => replace, key,
        /// Cost budget of the task in USD.
        max_cost_usd: f64 => replace, key,
        /// A cap on the context window the task uses, in tokens (below the model's own).
        max_context_tokens: u64 => replace, key,
        /// The fraction of the window at which the conversation is compacted (default 0.85).
        compact_at: f64 => replace, key,
        /// How far the task's commands are confined (default `workspace-write`).
        sandbox: SandboxMode => replace, key,
        /// The network of the task's commands and check: `false` (none, the default), `true`
        /// (everything), or an egress allowlist of host patterns — a list, or `{ allow = [...],
        /// deny = [...] }` — reached through dracode's proxy.
        network: dracode_sandbox::egress::NetworkField => replace, key,
        /// Resource limits of the task's commands (`memory`, `processes`, `open_files`,
        /// `file_size`, `cpu_time`); merged per limit over `[defaults]`.
        limits: dracode_sandbox::LimitFields => dracode_sandbox::LimitFields::overlay, key,
        /// Variables set for the task's commands and check.
        env: BTreeMap<String, String> => replace, key,
        /// Names of extra variables of dracode's environment a command may see.
        env_passthrough: Vec<String> => replace, key,
        /// Unix socket files outside the workspace and TMPDIR the task's commands may connect to
        /// (absolute, or relative to the manifest). Dangerous: `docker.sock` is root on the machine.
        unix_sockets: Vec<PathBuf> => replace, key,
        /// Extra files and folders the task's commands may read (relative to the manifest, or
        /// absolute), besides the system, the toolchains, the workspace and the TMPDIR.
        read_paths: Vec<PathBuf> => replace, key,
        /// A JSON Schema (inline table) the task's final answer must be valid against; the answer
        /// is `structured_output` in `task.finished` and `outputs/<id>.json`.
        output_schema: serde_json::Value => replace, key,
        /// A JSON file holding the schema, relative to the manifest (instead of `output_schema`).
        output_schema_file: PathBuf => replace, skip "a path of this machine: the schema it holds is in the key",
        /// Repairs allowed after an invalid or missing final answer (default 2).
        output_retries: u32 => replace, key,
        /// A built-in answer shape: `findings` (review findings, also `findings.sarif`).
        output: crate::structured::OutputPreset => replace, key,
        /// MCP servers whose tools the task is offered as `NAME__tool`, by name; merged by name
        /// with the ones of `[defaults]`, the manifest's top-level `[mcp_servers]` and config.
        mcp_servers: BTreeMap<String, dracode_mcp::McpServerConfig> => by_name, key,
    }
}

/// One `name = JSON` line of [`TaskFields::cache_text`] when `value` is set.
fn push_key<T: Serialize + std::fmt::Debug>(text: &mut String, name: &str, value: &Option<T>) {
    let Some(value) = value else { return };
    let shown = serde_json::to_string(value).unwrap_or_else(|_| format!("{value:?}"));
    let _ = writeln!(text, "{name} = {shown}");
}

impl TaskFields {
    /// True when the named field has a value.
    pub fn is_set(&self, field: &str) -> bool {
        serde_json::to_value(self).ok().and_then(|v| v.get(field).map(|v| !v.is_null())).unwrap_or(false)
    }
}

/// The overlay of a plain field: the upper layer's value when it sets one.
fn replace<T>(below: Option<T>, above: Option<T>) -> Option<T> {
    above.or(below)
}

/// The overlay of a table of named entries (`mcp_servers`): `above`'s entries over `below`'s.
fn by_name<V>(below: Option<BTreeMap<String, V>>, above: Option<BTreeMap<String, V>>) -> Option<BTreeMap<String, V>> {
    match (below, above) {
        (Some(mut below), Some(above)) => {
            below.extend(above);
            Some(below)
        }
        (below, above) => above.or(below),
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
    /// Tasks from a GitHub repository's labelled issues (`[issues]`), after `tasks`.
    #[serde(default)]
    pub issues: Option<IssuesFields>,
}

/// The `[issues]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct IssuesFields {
    /// The label that queues an issue (required). An open issue carrying it is a task when the
    /// person who last put it on may push to the repository.
    pub label: Option<String>,
    /// More qualifiers of GitHub's issue search (`milestone:v2 -label:wontfix`): only the
    /// labelled issues that search also finds.
    pub query: Option<String>,
    /// The repository, `OWNER/NAME` (default `$GITHUB_REPOSITORY`).
    pub repository: Option<String>,
    /// The variable holding the GitHub token (default `GITHUB_TOKEN`; it needs issues: read).
    pub token_env: Option<String>,
    /// At most this many issues per run, oldest first (default 20).
    pub max: Option<u32>,
    /// Settings of one issue's task, by issue number (`[issues.overrides.42]`): any task field
    /// but `id`, `prompt` and `prompt_file`, over `[defaults]`.
    #[serde(default)]
    pub overrides: BTreeMap<String, TaskFields>,
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
