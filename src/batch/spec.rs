//! A task fully resolved: every setting typed, every default filled in, every path checked.
//! `plan.rs` builds it; everything after planning (runner, attempt, reporters) reads only
//! this, never the manifest's optional fields.

use crate::budget::Budget;
use crate::events::{Status, TaskOutcome};
use crate::manifest::{Isolation, SandboxMode, SetupFields};
use dracode_llm::preset::ResolvedProvider;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// One task, ready to run.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    /// Unique id, `[A-Za-z0-9._-]+`, at most 200 bytes.
    pub id: String,
    /// Position in the run (manifest order, then task order).
    pub index: usize,
    /// The manifest it came from (as given on the command line; `--task` for ad-hoc tasks).
    pub manifest: PathBuf,
    /// The manifest's stable name (`<repository>/<path in it>`), when it is a file.
    pub manifest_name: Option<String>,
    /// Its `tags`.
    pub tags: Vec<String>,
    /// The GitHub issue it was made from (a manifest's `[issues]`).
    pub issue: Option<dracode_results::IssueOrigin>,
    /// The 1-based line where the task begins in its manifest, when the format gives one.
    pub line: Option<usize>,
    /// What the agent is asked to do.
    pub prompt: String,
    /// The system prompt as planned: dracode's own, the limits, how the work is graded, the
    /// task's `system_prompt`; the repository's `AGENTS.md` files are added when the workspace is
    /// made ([`crate::instructions`]).
    pub system_prompt: String,
    /// Whether the repository's `AGENTS.md` files are added to the system prompt (`agents_md`).
    pub agents_md: bool,
    /// Its provider, model and limits.
    pub provider: ResolvedProvider,
    /// An external agent (`agent = "codex"`, …); `None`: dracode's own.
    pub agent: Option<crate::external::ExternalAgent>,
    /// Where it works.
    pub workspace: WorkspaceSpec,
    /// LLM calls allowed.
    pub max_iterations: u32,
    /// Wall-clock limit of an attempt (the plan always sets one: default 30 minutes); `None`:
    /// no limit.
    pub timeout: Option<Duration>,
    /// Silence for this long ends the attempt as `stalled` (the plan always sets one: default
    /// 5 minutes); `None`: never.
    pub idle_timeout: Option<Duration>,
    /// The command that decides whether the task passed, if any.
    pub check: Option<CheckSpec>,
    /// How often a failed attempt is tried again.
    pub retry: RetrySpec,
    /// How many independent attempts the task gets, and the share that must pass.
    pub repeat: RepeatSpec,
    /// Token and cost limits of an attempt.
    pub budget: Budget,
    /// The provider's configured `context_window` (else the built-in table's, looked up when the
    /// task runs).
    pub context_window: Option<u64>,
    /// The task's `max_context_tokens`: a cap below the model's window.
    pub max_context_tokens: Option<u64>,
    /// The fraction of the window at which the conversation is compacted.
    pub compact_at: f64,
    /// Enabled tool names.
    pub tools: Vec<String>,
    /// The tool policy (`policy`), compiled.
    pub policy: std::sync::Arc<crate::tools::policy::Policy>,
    /// Canned answers for `ask_user`, by question (`"*"` answers any).
    pub answers: BTreeMap<String, String>,
    /// Whether the task fails when the agent changed no file, and why.
    pub require_change: RequireChange,
    /// Globs of paths the agent may not change (`protect`), relative to the workspace root.
    pub protect: Vec<String>,
    /// Globs of gitignored paths that stay for the check (`keep_ignored`), relative to the
    /// workspace root.
    pub keep_ignored: Vec<String>,
    /// A passed task's changes are committed on a branch (worktree isolation only).
    pub commit: bool,
    /// The task's commands get their own empty `HOME`.
    pub isolate_home: bool,
    /// How far the task's commands are to be confined (carried, not yet applied).
    pub sandbox: SandboxMode,
    /// The network of the task's commands: none, all, or an egress allowlist.
    pub network: dracode_sandbox::egress::Network,
    /// Resource limits of the task's commands: its `limits` over [`dracode_sandbox::Limits::defaults`].
    pub limits: dracode_sandbox::Limits,
    /// Variables set for the task's commands and check (carried, not yet applied).
    pub env: BTreeMap<String, String>,
    /// Extra variables of dracode's environment a command may see (carried, not yet applied).
    pub env_passthrough: Vec<String>,
    /// Unix socket files outside the workspace the task's commands may connect to (absolute).
    pub unix_sockets: Vec<std::path::PathBuf>,
    /// Extra files and folders the task's commands may read (`read_paths`), absolute.
    pub read_paths: Vec<PathBuf>,
    /// The schema the final answer must match (`output_schema`, `output = "findings"`), if any.
    pub output: Option<crate::structured::OutputContract>,
    /// MCP servers whose tools the task is offered, by name.
    pub mcp_servers: BTreeMap<String, dracode_mcp::McpServerConfig>,
    /// Its manifest's `[setup]`, run once for every task of the same manifest, repository and
    /// base before any of them starts.
    pub setup: Option<std::sync::Arc<SetupSpec>>,
    /// Its fields as the layers set them (config and manifest defaults, the task, the flags),
    /// those that are inputs of a `--cache` key ([`crate::manifest::TaskFields::cache_text`]).
    pub cache_fields: String,
}

/// Whether a task must change a file to pass (`require_change`), and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequireChange {
    /// It need not: `require_change = false`.
    No,
    /// The default for a task that something else grades (a check, a structured answer) or that
    /// cannot write (`sandbox = "read-only"`): it need not — unless its check passed before the
    /// agent ran too (`check_before`), when the check graded nothing.
    Unset,
    /// The manifest says `require_change = true`.
    Set,
    /// The default for a task with no check, no structured output and a sandbox that can
    /// write: a change is the only evidence that it did its work.
    NoOtherEvidence,
}

impl RequireChange {
    /// The effective setting: an explicit `require_change` wins; without one, true only when
    /// nothing else would grade the task.
    pub fn resolve(explicit: Option<bool>, has_check: bool, has_output: bool, sandbox: SandboxMode) -> Self {
        match explicit {
            Some(true) => RequireChange::Set,
            Some(false) => RequireChange::No,
            None if !has_check && !has_output && sandbox != SandboxMode::ReadOnly => RequireChange::NoOtherEvidence,
            None => RequireChange::Unset,
        }
    }

    /// True when a task that changed no file fails (whatever its check said before the agent).
    pub fn applies(self) -> bool {
        matches!(self, RequireChange::Set | RequireChange::NoOtherEvidence)
    }
}

/// Where a task works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceSpec {
    /// The folder (usually a git repository) the workspace is made from.
    pub repo: PathBuf,
    /// How the workspace is made.
    pub isolation: Isolation,
    /// The commit-ish a worktree starts at.
    pub base: String,
    /// Where tools run, relative to the workspace root (empty: the root); never leaves it.
    pub workdir: PathBuf,
}

/// The command that decides whether a task passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckSpec {
    /// Run by `sh -c` in the task's working directory; the task passes only if it exits 0.
    pub command: String,
    /// Also run it before the agent, to record red-to-green.
    pub before: bool,
    /// Its time limit.
    pub timeout: Duration,
    /// Times a failed check's output goes back to the agent to repair (`check_repairs`).
    pub repairs: u32,
}

impl CheckSpec {
    /// The check `command` with the task's `check_before`, time limit and `check_repairs`
    /// (default [`DEFAULT_CHECK_REPAIRS`]).
    pub fn new(command: String, before: Option<bool>, timeout: Duration, repairs: Option<u32>) -> Self {
        CheckSpec { command, before: before == Some(true), timeout, repairs: repairs.unwrap_or(DEFAULT_CHECK_REPAIRS) }
    }
}

/// How a task is retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySpec {
    /// Attempts after the first, each in a fresh workspace.
    pub retries: u32,
    /// The statuses that are tried again.
    pub retry_on: Vec<Status>,
}

/// How often a task is run independently (`repeat`, `--repeat`) and the share of its attempts
/// that must pass (`--min-pass-rate`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepeatSpec {
    /// Independent attempts, each in a fresh workspace (at least 1).
    pub count: u32,
    /// The pass rate at or above which the task is `passed` (default 1.0: every attempt).
    pub min_pass_rate: f64,
}

impl Default for RepeatSpec {
    fn default() -> Self {
        RepeatSpec { count: 1, min_pass_rate: 1.0 }
    }
}

impl TaskSpec {
    /// A blank outcome of this task with `status`: nothing run yet.
    pub fn outcome(&self, status: Status) -> TaskOutcome {
        let model = self.provider.model.as_deref().unwrap_or_default();
        let mut outcome = TaskOutcome::new(&self.id, &self.manifest, self.index, status, &self.provider.name, model);
        outcome.record.line = self.line;
        outcome.record.manifest_name = self.manifest_name.clone();
        outcome.record.tags = self.tags.clone();
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_change_defaults_to_true_only_when_nothing_else_grades_the_task() {
        use RequireChange::{No, NoOtherEvidence, Set, Unset};
        let (write, read_only, off) = (SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly, SandboxMode::Off);
        #[rustfmt::skip]
        let table = [
            // explicit, check, structured output, sandbox → effective
            (None, false, false, write, NoOtherEvidence),
            (None, false, false, off, NoOtherEvidence),
            (None, true, false, write, Unset),
            (None, false, true, write, Unset),
            (None, false, false, read_only, Unset),
            (Some(false), false, false, write, No),
            (Some(true), true, true, read_only, Set),
        ];
        for (explicit, check, output, sandbox, want) in table {
            let got = RequireChange::resolve(explicit, check, output, sandbox);
            assert_eq!(got, want, "{explicit:?} check={check} output={output} {sandbox:?}");
            assert_eq!(got.applies(), want == Set || want == NoOtherEvidence);
        }
    }
}

/// Repairs after a failed check when nothing says otherwise: none. A repair spends turns and
/// tokens, and shows the agent the check's output — which may be a hidden test's expectations —
/// so it is asked for, per task (`check_repairs`).
pub const DEFAULT_CHECK_REPAIRS: u32 = 0;

/// The time limit of a setup command unless `timeout` says otherwise.
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A manifest's `[setup]`, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupSpec {
    /// Run by `sh -c`.
    pub command: String,
    /// Its time limit.
    pub timeout: Duration,
    /// Its network (`None`: the tasks' own).
    pub network: Option<dracode_sandbox::egress::Network>,
    /// Variables set for it, over the tasks' `env`.
    pub env: BTreeMap<String, String>,
}

impl SetupSpec {
    /// The setup of `fields` (checked when the manifest was loaded).
    pub fn resolve(fields: &SetupFields) -> Arc<SetupSpec> {
        Arc::new(SetupSpec {
            command: fields.command.clone().unwrap_or_default(),
            timeout: fields.timeout.as_deref().and_then(|t| dracode_input::duration::parse(t).ok()).unwrap_or(DEFAULT_SETUP_TIMEOUT),
            network: fields.network.as_ref().and_then(|n| dracode_sandbox::egress::Network::from_field(Some(n)).ok()),
            env: fields.env.clone().unwrap_or_default(),
        })
    }

    /// What a `--cache` key includes of the setup: everything that can change what it makes.
    pub fn cache_text(&self) -> String {
        format!("setup {:?} network {:?} env {:?}", self.command, self.network.as_ref().map(|n| format!("{n:?}")), self.env)
    }

    /// The task spec the command runs under: `task`'s, with the setup's network and variables.
    pub(crate) fn as_task(&self, task: &TaskSpec) -> TaskSpec {
        let mut spec = task.clone();
        if let Some(network) = &self.network {
            spec.network = network.clone();
        }
        spec.env.extend(self.env.clone());
        spec.check = None;
        spec
    }
}
