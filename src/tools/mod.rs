//! What the agent may call. Each tool is one file; [`Registry`] holds the enabled ones and
//! turns a model's tool call into a result string, never a fatal error: a failure goes back to
//! the model as `Error [CODE]: message` (see [`ToolError`]).

use crate::events::Emitter;
use dracode_llm::{BoxFuture, ToolSpec};
use dracode_sandbox::Sandbox;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub mod apply_patch;
pub mod ask_user;
pub mod background;
pub mod create_directory;
pub mod delete_file;
pub mod display_text;
pub mod edit_file;
pub mod git_branch;
pub mod git_commit;
pub mod git_diff;
pub mod git_log;
mod git_repo;
pub use git_repo::PinnedGit;
pub mod git_show;
pub mod git_status;
pub mod html_text;
pub mod kill_process;
pub mod list_files;
pub mod move_file;
pub mod policy;
pub mod read_file;
pub mod read_process_output;
pub mod render;
pub mod run_command;
pub mod run_persistent;
pub mod search_code;
pub mod shell_words;
pub mod web_fetch;
pub mod write_file;

/// A machine-readable tool failure code (the codes of the tool-system specs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The file does not exist.
    FileNotFound,
    /// The directory does not exist.
    DirectoryNotFound,
    /// The path resolves outside the workspace.
    PathOutsideWorkspace,
    /// Arguments missing, of the wrong type, or invalid.
    InvalidArguments,
    /// The operation took too long and was stopped.
    Timeout,
    /// The file is larger than the tool will handle.
    FileTooLarge,
    /// An `edit_file` search string matched zero or several times.
    NoMatch,
    /// An `edit_file` search string matched more than once.
    AmbiguousMatch,
    /// The target already exists.
    AlreadyExists,
    /// The model named a tool that does not exist or is not enabled.
    UnknownTool,
    /// A command could not be started.
    CommandFailed,
    /// Any other I/O failure.
    IoError,
    /// The workspace is not in a git repository, or git failed.
    GitError,
    /// The task's tool policy refused the call ([`policy`]).
    Denied,
    /// An MCP server's tool answered with an error result.
    McpToolError,
    /// The path is protected (`protect`): the task may not change it.
    Protected,
}

impl ErrorCode {
    /// The SCREAMING_SNAKE_CASE code shown to the model.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::FileNotFound => "FILE_NOT_FOUND",
            ErrorCode::DirectoryNotFound => "DIRECTORY_NOT_FOUND",
            ErrorCode::PathOutsideWorkspace => "PATH_OUTSIDE_WORKSPACE",
            ErrorCode::InvalidArguments => "INVALID_ARGUMENTS",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::FileTooLarge => "FILE_TOO_LARGE",
            ErrorCode::NoMatch => "NO_MATCH",
            ErrorCode::AmbiguousMatch => "AMBIGUOUS_MATCH",
            ErrorCode::AlreadyExists => "ALREADY_EXISTS",
            ErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ErrorCode::CommandFailed => "COMMAND_FAILED",
            ErrorCode::IoError => "IO_ERROR",
            ErrorCode::GitError => "GIT_ERROR",
            ErrorCode::Denied => "DENIED",
            ErrorCode::McpToolError => "MCP_TOOL_ERROR",
            ErrorCode::Protected => "PROTECTED_PATH",
        }
    }
}

/// A tool failure the model is told about; it can recover from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Error [{code}]: {message}", code = code.as_str())]
pub struct ToolError {
    /// The machine-readable code.
    pub code: ErrorCode,
    /// What went wrong, naming the path or argument.
    pub message: String,
    /// The workspace-relative path a `PROTECTED_PATH` refusal is about (for the task's record).
    pub protected: Option<String>,
}

impl ToolError {
    /// A failure with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError { code, message: message.into(), protected: None }
    }

    /// Maps an I/O error on `path` to the closest code; a lookup the sandbox refused because it
    /// led outside the root (a symlink swapped in after the check) is `PATH_OUTSIDE_WORKSPACE`.
    pub fn io(err: &std::io::Error, path: &str) -> Self {
        if dracode_sandbox::is_escape(err) {
            return dracode_sandbox::PathError::Outside(path.to_string()).into();
        }
        match err.kind() {
            std::io::ErrorKind::NotFound => Self::new(ErrorCode::FileNotFound, format!("not found: {path}")),
            std::io::ErrorKind::AlreadyExists => Self::new(ErrorCode::AlreadyExists, format!("already exists: {path}")),
            _ => Self::new(ErrorCode::IoError, format!("{path}: {err}")),
        }
    }
}

impl From<dracode_sandbox::PathError> for ToolError {
    fn from(err: dracode_sandbox::PathError) -> Self {
        use dracode_sandbox::PathError;
        let code = match &err {
            PathError::Outside(_) => ErrorCode::PathOutsideWorkspace,
            PathError::NotFound(_) => ErrorCode::FileNotFound,
            PathError::Nul(_) => ErrorCode::InvalidArguments,
            PathError::SymlinkLoop(_) => ErrorCode::IoError,
            PathError::Protected { path, .. } => {
                return ToolError { protected: Some(path.clone()), ..ToolError::new(ErrorCode::Protected, err.to_string()) };
            }
            PathError::Io { path, source } => return ToolError::io(source, path),
        };
        ToolError::new(code, err.to_string())
    }
}

/// Parses a tool's arguments into its typed argument struct, or an `INVALID_ARGUMENTS` error
/// naming the field.
pub fn parse_args<T: serde::de::DeserializeOwned>(input: serde_json::Value) -> Result<T, ToolError> {
    let input = if input.is_null() { serde_json::Value::Object(Default::default()) } else { input };
    serde_path_to_error::deserialize(input).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = if path == "." { inner.to_string() } else { format!("{path}: {inner}") };
        ToolError::new(ErrorCode::InvalidArguments, message)
    })
}

/// Makes sure `path`'s parent folder exists, creating it when `create` is set; otherwise a
/// `DIRECTORY_NOT_FOUND` error that says how to get it created.
pub(crate) fn ensure_parent(sandbox: &Sandbox, path: &std::path::Path, create: bool) -> Result<(), ToolError> {
    let Some(parent) = path.parent().filter(|p| !p.is_dir()) else { return Ok(()) };
    if !create {
        return Err(ToolError::new(
            ErrorCode::DirectoryNotFound,
            format!("directory does not exist: {}; set create_directories to true to create it", sandbox.relative(parent)),
        ));
    }
    // Each level is created with mkdirat in its parent opened beneath the root: a directory
    // swapped for a symlink meanwhile cannot redirect the creation outside.
    sandbox.create_dir_all(parent).map_err(|e| ToolError::io(&e, &sandbox.relative(parent)))
}

/// Everything a tool may use while it runs: the sandboxed workspace and the task's settings.
#[derive(Clone)]
pub struct ToolContext {
    /// The workspace; every path argument goes through it.
    pub sandbox: Sandbox,
    /// The environment given to commands (secrets already removed).
    pub child_env: Arc<BTreeMap<String, String>>,
    /// The task's TMPDIR for commands.
    pub tmp_dir: Option<PathBuf>,
    /// How commands are confined (`None`: not at all, as in unit tests).
    pub confine: Option<Arc<dracode_sandbox::Policy>>,
    /// Canned answers for `ask_user`, keyed by question (or `*` for any).
    pub answers: Arc<BTreeMap<String, String>>,
    /// Upper bound on any one command's run time.
    pub max_command_timeout: Duration,
    /// Bytes of command output kept (head and tail).
    pub output_limit: usize,
    /// Where `display_text` sends its text.
    pub emitter: Emitter,
    /// The task's tool policy, checked before every call (and by `web_fetch` on redirects).
    pub policy: Arc<policy::Policy>,
    /// Whether `git_commit` and `git_branch` create may write to the workspace's repository:
    /// only when it is the task's own (not with `isolation = "none"`).
    pub git_writes: bool,
    /// The task's background processes (`run_persistent`); the task runner stops them all
    /// when the agent ends.
    pub processes: Arc<background::Background>,
    /// What the sandbox reported about the task's commands (refused connections, limits).
    pub reports: Arc<dracode_sandbox::incidents::ReportSink>,
    /// The repository the git tools work on (`None`: the workspace is not in one).
    pub git: Option<git_repo::PinnedGit>,
    /// The task's network (`web_fetch` obeys its allowlist too).
    pub network: dracode_sandbox::egress::Network,
    /// Where refused connections are recorded; knows which command is running.
    pub network_log: Arc<dracode_sandbox::egress::NetworkLog>,
}

/// One callable tool.
pub trait Tool: Send + Sync {
    /// The snake_case name the model calls it by.
    fn name(&self) -> &'static str;
    /// What it does, for the model.
    fn description(&self) -> &'static str;
    /// JSON Schema of its arguments (derived from the argument type so the two cannot drift).
    fn schema(&self) -> serde_json::Value;
    /// Runs it. `Ok` is the text the model sees; `Err` is shown as `Error [CODE]: message`.
    fn call<'a>(&'a self, ctx: &'a ToolContext, input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>>;
    /// True for tools that run commands: their calls are judged by the policy's command rules.
    fn runs_commands(&self) -> bool {
        false
    }
    /// The command a call of a command-running tool would run (`None` when its arguments do not
    /// name one; the tool then refuses them itself).
    fn command_line(&self, _input: &serde_json::Value) -> Option<policy::CommandLine> {
        None
    }
    /// True for tools that reach hosts on the network: only they take a policy's `allowed_hosts`.
    fn reaches_hosts(&self) -> bool {
        false
    }
    /// True when it only reads (the workspace, its repository, a process's output): a turn whose
    /// calls are all read-only runs them concurrently.
    fn read_only(&self) -> bool {
        false
    }
}

/// A tool whose work is blocking (file system, git): its typed arguments and one synchronous
/// function. The blanket [`Tool`] impl parses the arguments (an `INVALID_ARGUMENTS` error
/// naming the field), derives the schema from them, and runs the function off the async
/// threads ([`run_blocking`]).
pub(crate) trait BlockingTool: Send + Sync + 'static {
    /// The snake_case name the model calls it by.
    const NAME: &'static str;
    /// What it does, for the model.
    const DESCRIPTION: &'static str;
    /// Its arguments; field docs become the schema descriptions.
    type Args: serde::de::DeserializeOwned + schemars::JsonSchema + Send + 'static;
    /// True when it changes nothing (see [`Tool::read_only`]).
    const READ_ONLY: bool = false;
    /// Does the work, on a blocking thread.
    fn run(ctx: &ToolContext, args: Self::Args) -> Result<String, ToolError>;
}

impl<T: BlockingTool> Tool for T {
    fn name(&self) -> &'static str {
        T::NAME
    }
    fn description(&self) -> &'static str {
        T::DESCRIPTION
    }
    fn schema(&self) -> serde_json::Value {
        schema_of::<T::Args>()
    }
    fn read_only(&self) -> bool {
        T::READ_ONLY
    }
    fn call<'a>(&'a self, ctx: &'a ToolContext, input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let args: T::Args = parse_args(input)?;
            let ctx = ctx.clone();
            run_blocking(move || T::run(&ctx, args)).await
        })
    }
}

/// Derives a tool's argument schema from its argument type, as a plain JSON Schema object
/// without the `$schema`/`title` noise providers reject.
pub fn schema_of<T: schemars::JsonSchema>() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft07().with(|s| s.inline_subschemas = true).into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        obj.entry("properties").or_insert_with(|| serde_json::json!({}));
    }
    value
}

/// Every built-in tool, in the order they are offered.
pub fn builtin() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(list_files::ListFiles),
        Arc::new(read_file::ReadFile),
        Arc::new(write_file::WriteFile),
        Arc::new(edit_file::EditFile),
        Arc::new(delete_file::DeleteFile),
        Arc::new(create_directory::CreateDirectory),
        Arc::new(apply_patch::ApplyPatch),
        Arc::new(move_file::MoveFile),
        Arc::new(search_code::SearchCode),
        Arc::new(run_command::RunCommand),
        Arc::new(run_persistent::RunPersistent),
        Arc::new(read_process_output::ReadProcessOutput),
        Arc::new(kill_process::KillProcess),
        Arc::new(git_diff::GitDiff),
        Arc::new(git_status::GitStatus),
        Arc::new(git_log::GitLog),
        Arc::new(git_show::GitShow),
        Arc::new(git_commit::GitCommit),
        Arc::new(git_branch::GitBranch),
        Arc::new(ask_user::AskUser),
        Arc::new(display_text::DisplayText),
        Arc::new(web_fetch::WebFetch),
    ]
}

/// The names of the tools enabled when a task does not list its own: DraCode's five plus
/// `edit_file`, `display_text` and `ask_user`.
pub const DEFAULT_TOOLS: [&str; 8] =
    ["list_files", "read_file", "write_file", "edit_file", "search_code", "run_command", "display_text", "ask_user"];

/// The tools of a task that lists none: [`DEFAULT_TOOLS`], plus `apply_patch` for OpenAI's own
/// models (GPT, o-series, codex; any Azure deployment), which are trained to edit files with it.
pub fn default_tools(kind: dracode_llm::preset::ProviderType, model: Option<&str>) -> Vec<String> {
    let mut tools: Vec<String> = DEFAULT_TOOLS.iter().map(|t| (*t).to_string()).collect();
    if is_openai_model(kind, model) {
        tools.insert(4, apply_patch::ApplyPatch.name().to_string());
    }
    tools
}

/// Whether `model` (on a provider of type `kind`) is one of OpenAI's models.
fn is_openai_model(kind: dracode_llm::preset::ProviderType, model: Option<&str>) -> bool {
    use dracode_llm::preset::ProviderType;
    let Some(model) = model else { return kind == ProviderType::Azure };
    let model = model.to_ascii_lowercase();
    let model = model.strip_prefix("openai/").unwrap_or(&model);
    kind == ProviderType::Azure || ["gpt-", "o1", "o3", "o4", "codex"].iter().any(|p| model.starts_with(p))
}

/// A tool name that is not one of dracode's built-in tools.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool {0:?}")]
pub struct UnknownTool(pub String);

/// The enabled tools of one task.
#[derive(Clone)]
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
    /// Tools of the task's MCP servers, offered after the built-in ones.
    mcp: Vec<Arc<dracode_mcp::McpTool>>,
}

impl Registry {
    /// The registry of the named tools; the first unknown name is the `Err`.
    pub fn with_names<S: AsRef<str>>(names: &[S]) -> Result<Self, UnknownTool> {
        let all = builtin();
        let mut tools = Vec::with_capacity(names.len());
        for name in names {
            let name = name.as_ref();
            match all.iter().find(|t| t.name() == name) {
                Some(tool) => tools.push(tool.clone()),
                None => return Err(UnknownTool(name.to_string())),
            }
        }
        Ok(Registry { tools, mcp: Vec::new() })
    }

    /// Every built-in tool.
    pub fn all() -> Self {
        Registry { tools: builtin(), mcp: Vec::new() }
    }

    /// This registry with the tools of the task's MCP servers added.
    pub fn with_mcp(mut self, tools: Vec<Arc<dracode_mcp::McpTool>>) -> Self {
        self.mcp.extend(tools);
        self
    }

    /// The names of the enabled tools, built-in ones first.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_string()).chain(self.mcp.iter().map(|t| t.name().to_string())).collect()
    }

    /// The specs offered to the model.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|t| ToolSpec { name: t.name().to_string(), description: t.description().to_string(), parameters: t.schema() })
            .chain(self.mcp.iter().map(|t| t.spec()))
            .collect()
    }

    /// True when `name` is an enabled tool that only reads.
    pub fn is_read_only(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.name() == name && t.read_only())
    }

    /// A registry of exactly `tools`, for tests of the agent loop.
    #[cfg(test)]
    pub(crate) fn from_tools(tools: Vec<Arc<dyn Tool>>) -> Self {
        Registry { tools, mcp: Vec::new() }
    }

    /// Runs the tool `name`; an unknown tool is an error the model sees, not a crash.
    pub async fn call(&self, ctx: &ToolContext, name: &str, input: serde_json::Value) -> Result<String, ToolError> {
        if let Some(tool) = self.tools.iter().find(|t| t.name() == name) {
            ctx.policy.check(name, tool.command_line(&input).as_ref())?;
            return tool.call(ctx, input).await;
        }
        match self.mcp.iter().find(|t| t.name() == name) {
            Some(tool) => {
                ctx.policy.check(name, None)?;
                tool.call(input, ctx.output_limit).await.map_err(mcp_error)
            }
            None => Err(ToolError::new(ErrorCode::UnknownTool, format!("no tool named {name:?}; available: {}", self.names().join(", ")))),
        }
    }
}

/// An MCP call's failure as the model sees it: a tool's own error result is `MCP_TOOL_ERROR`, a
/// dead server `COMMAND_FAILED`, the time limit `TIMEOUT`.
fn mcp_error(error: dracode_mcp::McpCallError) -> ToolError {
    use dracode_mcp::McpCallError;
    match error {
        McpCallError::InvalidArguments(m) => ToolError::new(ErrorCode::InvalidArguments, m),
        McpCallError::ServerFailed(m) => ToolError::new(ErrorCode::CommandFailed, m),
        McpCallError::TimedOut(m) => ToolError::new(ErrorCode::Timeout, m),
        McpCallError::ToolError(m) => ToolError::new(ErrorCode::McpToolError, m),
    }
}

/// Runs blocking file-system work off the async threads; a panicked or cancelled job becomes an
/// `IO_ERROR` the model sees rather than a crash.
pub(crate) async fn run_blocking<T, F>(job: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(job).await.unwrap_or_else(|e| Err(ToolError::new(ErrorCode::IoError, format!("tool task failed: {e}"))))
}

/// A walker over `dir` as the model should see the workspace: `.gitignore`/`.ignore` rules
/// honoured (with or without a git repository), hidden files shown, `.git` skipped, symlinks not
/// followed (so the walk never leaves the workspace); only `dir`'s own entries unless
/// `recursive`.
pub(crate) fn workspace_walker(dir: &std::path::Path, recursive: bool) -> ignore::WalkBuilder {
    let mut builder = ignore::WalkBuilder::new(dir);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(if recursive { None } else { Some(1) })
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

/// For unit tests of tools that start processes: true once `pid` has exited (no process, or
/// only a zombie awaiting its reaper), polled for up to 5 seconds.
#[cfg(test)]
pub(crate) async fn test_pid_gone(pid: &str) -> bool {
    for _ in 0..100 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) if stat.rsplit(") ").next().is_some_and(|s| s.starts_with('Z')) => return true,
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    false
}

/// A context for unit tests of tools: workspace `root`, no secrets, 64 KiB output, 600 s
/// command limit, events discarded.
#[cfg(test)]
pub(crate) fn test_context(root: &std::path::Path) -> ToolContext {
    ToolContext {
        confine: None,
        sandbox: Sandbox::new(root).expect("test workspace exists"),
        child_env: Arc::new(dracode_secrets::child_env(std::env::vars(), &[] as &[&str], &BTreeMap::new())),
        tmp_dir: None,
        answers: Arc::new(BTreeMap::new()),
        max_command_timeout: Duration::from_secs(600),
        output_limit: 64 * 1024,
        emitter: Emitter::discard(),
        policy: Arc::new(policy::Policy::default()),
        git_writes: true,
        processes: Default::default(),
        reports: Default::default(),
        git: git2::Repository::discover(root).ok().and_then(|r| git_repo::PinnedGit::new(r.path(), r.workdir()?)),
        network: Default::default(),
        network_log: Default::default(),
    }
}

/// The race the file tools must withstand, for their tests.
#[cfg(test)]
#[cfg(target_os = "linux")]
pub(crate) mod race {
    /// Calls `body(i)` while another thread keeps exchanging the directory `root/d` with a
    /// symlink to `outside` (`renameat2` with `RENAME_EXCHANGE`, so `d` always exists, as a
    /// directory or as the link): the race a process of the agent could run against a file tool.
    /// `body` says whether the tool went through (`true`) or refused the path (`false`). Bounded:
    /// 2,000 calls, or more until both outcomes were seen (a loaded machine may starve the
    /// swapper), but never past 3 s; fails if the race was not exercised.
    pub(crate) fn with_swapping_dir(root: &std::path::Path, outside: &std::path::Path, mut body: impl FnMut(usize) -> bool) {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        std::os::unix::fs::symlink(outside, root.join("d-link")).unwrap();
        let stop = AtomicBool::new(false);
        let swaps = AtomicU64::new(0);
        let (d, link) = (root.join("d"), root.join("d-link"));
        std::thread::scope(|scope| {
            let swapper = scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let (cwd, exchange) = (rustix::fs::CWD, rustix::fs::RenameFlags::EXCHANGE);
                    rustix::fs::renameat_with(cwd, &d, cwd, &link, exchange).unwrap();
                    swaps.fetch_add(1, Ordering::Relaxed);
                }
            });
            let start = std::time::Instant::now();
            let in_time = || start.elapsed() < std::time::Duration::from_secs(3);
            while swaps.load(Ordering::Relaxed) == 0 && in_time() {
                std::thread::yield_now();
            }
            let (mut through, mut refused) = (0u64, 0u64);
            // The swapper is stopped even when an assertion in `body` fails.
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut i = 0;
                while in_time() && (i < 2_000 || through == 0 || refused == 0) {
                    if body(i) {
                        through += 1;
                    } else {
                        refused += 1;
                    }
                    i += 1;
                }
            }));
            stop.store(true, Ordering::Relaxed);
            swapper.join().unwrap();
            if let Err(panic) = outcome {
                std::panic::resume_unwind(panic);
            }
            assert!(through > 0 && refused > 0, "the race was not exercised: {through} went through, {refused} refused");
        });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_path_refusal_names_its_code_and_the_path_as_given() {
        let root = tempfile::tempdir().unwrap();
        let sandbox = dracode_sandbox::Sandbox::new(root.path()).unwrap();
        let err = super::ToolError::from(sandbox.resolve("../x").unwrap_err());
        assert!(err.to_string().starts_with("Error [PATH_OUTSIDE_WORKSPACE]: \"../x\""), "{err}");
    }

    use super::*;

    #[test]
    fn every_tool_schema_describes_each_parameter() {
        for tool in builtin() {
            let schema = tool.schema();
            assert_eq!(schema["type"], "object", "{}", tool.name());
            assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
            let props = schema["properties"].as_object().expect("properties is an object");
            for (name, prop) in props {
                let description = prop["description"].as_str().unwrap_or_default();
                assert!(!description.is_empty() && !description.contains('\n'), "{}.{name}", tool.name());
                // Gemini accepts only int32/int64/float/double formats for numbers.
                let format = prop["format"].as_str().unwrap_or("int64");
                assert!(["int32", "int64", "float", "double"].contains(&format), "{}.{name}: {format}", tool.name());
            }
            assert!(!tool.description().is_empty() && tool.description() != "not built yet", "{}", tool.name());
        }
    }
}
