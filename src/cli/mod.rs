//! The command line (docs/src/reference/cli.md): the binary's edge. It parses the flags
//! (clap lives here only: the engines take plain options), dispatches each command, and is the
//! one place that prints to the terminal and turns errors into words and exit codes.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod choices;
mod inspect;
mod login;
mod publish;
mod results;
mod run;
mod run_args;

use crate::batch::plan;
use crate::report;
use crate::tools::render::ToolFormat;
use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use dracode_results::exit_codes;
pub use publish::PublishArgs;
pub use run_args::RunArgs;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// dracode — run batches of LLM coding-agent tasks headlessly, with machine-readable results.
#[derive(Debug, Parser)]
#[command(name = "dracode", version = env!("DRACODE_LONG_VERSION"), about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the tasks of one or more manifests (or ad-hoc `--task`s); the main job.
    #[command(
        after_help = "Examples:\n  dracode run examples/quickstart.toml\n  dracode run tasks.toml --provider openai --jobs 4 --out dracode-out\n  dracode run --task \"Add a README\" --provider openai\n\nExit codes:\n  0 every task passed\n  1 a task did not pass: the agents' work fell short (failed check, no change, timeout, budget, ...)\n  2 usage/config/manifest error: nothing ran\n  3 dracode could not write its results (an artifact in --out, --jsonl or $GITHUB_STEP_SUMMARY)\n  4 no task selected (see --no-tasks)\n  5 a task could not be judged: its provider is not configured, or it ended `error` for an\n    infrastructure reason (auth, quota, rate_limit, network, server, bad_response, sandbox, internal)\n  130/143 interrupted (SIGINT/SIGTERM)\nWhen several apply: 130/143, then 3, then 5, then 1 (2 and 4 end a run before any task starts).\nWith --dry-run: 5 when a selected task's provider is not configured (--offline skips that check)."
    )]
    Run(Box<RunArgs>),
    /// Parse and check manifests, and that every task's provider has its credentials and
    /// endpoint; print every problem (exit 0 when all is well, 2 for a manifest or config
    /// error, 5 when a provider is not configured).
    #[command(
        after_help = "Examples:\n  dracode validate examples/quickstart.toml\n  dracode validate tasks.toml --offline   # on a machine without the keys\n\nThe provider check sends no request: it finds what `run` would report as not_configured\n(a missing key, an unset ${VAR} in the config, no endpoint or model)."
    )]
    Validate {
        /// Manifest files (TOML, YAML or JSON).
        #[arg(required = true)]
        manifests: Vec<PathBuf>,
        /// Skip the provider check (keys and endpoints): only the manifests and config.
        #[arg(long)]
        offline: bool,
        /// Config file instead of the dracode.toml found (see `dracode config --help`).
        #[arg(long, env = "DRACODE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Print the tasks that would run, one per line.
    #[command(
        after_help = "Examples:\n  dracode list tasks.toml --filter 'tag:nightly'\n  dracode list tasks.toml --format json\n\nJSON lines carry id, manifest, tags, and the provider and model `run` would use.\nExit codes: 0, 2 (bad manifest, config or flag), 4 no task selected (an empty shard: a\nwarning, exit 0), as `run`."
    )]
    List {
        /// Manifest files.
        #[arg(required = true)]
        manifests: Vec<PathBuf>,
        /// Task id glob or `tag:NAME`; repeatable (any match selects).
        #[arg(long)]
        filter: Vec<String>,
        /// Only shard K of N (as `run --shard`; also `DRACODE_SHARD`).
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ListFormat::Text)]
        format: ListFormat,
        /// Config file instead of the dracode.toml found (see `dracode config --help`).
        #[arg(long, env = "DRACODE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Merge the output folders of sharded runs into one results.jsonl / junit.xml / summary.md.
    #[command(
        after_help = "Example (after `dracode run tasks.toml --shard K/3 --out out-K` in three CI jobs):\n  dracode merge out-1 out-2 out-3 --out dracode-out\n\nExit codes: 5 (could not be judged, named on stderr) when a shard is missing (a K of the\nsplit's K/N absent among the inputs) or unfinished (no run.finished), or a task could not be\njudged; the rest is still merged and published. Also 5 when an input's results.jsonl cannot\nbe read (nothing is merged then). Else 1 when a task did not pass. A duplicated shard, mixed\nshard counts, a task in two shards or twice in one input is an error (exit 2); a task in\nseveral unsharded runs (a run and its reruns) takes the attempt of the run that started last; merged files that cannot be\nwritten are exit 3."
    )]
    Merge {
        /// The shard output folders.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Where the merged artifacts go.
        #[arg(long)]
        out: PathBuf,
    },
    /// Write OUT/report.html again: the run drawn as one self-contained page (every run, regrade,
    /// merge and combine writes it already).
    #[command(
        after_help = "Examples:\n  dracode report dracode-out\n  dracode report dracode-out --history last-night/dracode-out --history .dracode-cache\n\nEach --history DIR is an earlier output folder or a --cache folder (where every run with\n--cache keeps its results in history/): the page then shows each task's last results and\nthe cost over the nights. --save-history DIR keeps this run's record in DIR/history/ too\n(after reading the history: a folder can be both).\n\nExit codes: 0 written, 2 OUT is not a run's output or a --history folder cannot be read,\n3 the page could not be written."
    )]
    Report {
        /// The output folder of a run (or of `dracode merge`).
        out: PathBuf,
        /// An earlier output folder, or a `--cache` folder; repeat for more.
        #[arg(long, value_name = "DIR")]
        history: Vec<PathBuf>,
        /// Also keep this run's record in DIR/history/ (read by a later `--history DIR`): for a
        /// merged nightly whose shards each keep their own cache.
        #[arg(long, value_name = "DIR")]
        save_history: Option<PathBuf>,
    },
    /// Apply the passed tasks' patches of a run, in manifest order, onto one working tree of the
    /// base; report the patches that conflict; optionally check the union and commit it.
    #[command(
        after_help = "Examples:\n  dracode combine dracode-out --check 'make test'\n  dracode combine dracode-out --base origin/main --branch dracode/nightly\n\nWrites OUT/combined.patch, OUT/combine.json and OUT/combine.md (also appended to\n$GITHUB_STEP_SUMMARY). The working tree is a temporary one, removed afterwards; with\n--branch the union is committed onto a new branch of the repository (only when the check,\nif any, passed).\n\nExit codes:\n  0 every passed task's patch combined (and the check passed)\n  1 a patch conflicts with those before it, or the check failed\n  2 bad input: OUT is not a run's output, not in a git repository, a bad --base, an existing\n    --branch without --force\n  3 the report could not be written\n  4 no passed task has a patch: nothing to combine\n  130/143 interrupted"
    )]
    Combine(CombineArgs),
    /// Run the checks again on a run's recorded patches, in fresh sandboxed workspaces of their
    /// base, without calling a model; write a new results set.
    #[command(
        after_help = "Examples:\n  dracode regrade dracode-out --out regraded\n  dracode regrade dracode-out --check 'pytest -q' --filter 'tag:py' --out regraded\n\nRegrades the tasks that ended passed or failed (the others are carried over as they were),\neach patch on the commit its attempt started from, with the task's check from its manifest\n(or --check). Every regraded task.finished names the attempt it grades (`regraded_from`).\nExit codes as `dracode run` (0 all passed, 1 a task did not pass, 2 bad input, 3 results\nnot written, 4 nothing selected)."
    )]
    Regrade(RegradeArgs),
    /// Turn a run's output folder into review on GitHub: one pull request per passed task
    /// (branch `dracode/<task-id>`), or one with `dracode combine`'s union, or a comment.
    #[command(
        after_help = "Examples:\n  dracode publish dracode-out --report-url https://example.com/nightly/report.html\n  dracode publish dracode-out --dry-run\n  dracode combine dracode-out --check 'make test' && dracode publish dracode-out --combined\n  dracode publish dracode-out --comment-on 42\n\nThe token is read from $GITHUB_TOKEN (--token-env names another variable); the repository\nfrom --repository or $GITHUB_REPOSITORY; the API from $GITHUB_API_URL. Branches are pushed\nwith git to --remote. A task's branch is created, or moved only while its tip is a commit\ndracode made (trailers Dracode-Task and Dracode-Run); a branch someone else pushed to is\nleft alone and the task reported skipped. An open pull request of the branch is updated,\nnever duplicated. Pull requests opened with GitHub Actions' GITHUB_TOKEN start no\n`on: pull_request` workflow: see docs/src/recipes/pull-requests.md.\n\nExit codes:\n  0 everything that passed is published (or nothing was to be)\n  2 bad input: OUT is not a run's output, no token, no repository, not in a git repository,\n    no such remote, --combined without dracode combine's report\n  3 a publication failed (a push, or GitHub refused: each named on stderr)"
    )]
    Publish(Box<PublishArgs>),
    /// Sign in to a provider that needs an interactive login.
    #[command(after_help = "Example:\n  dracode auth copilot   # prints a URL and a code; stores the token (mode 0600)")]
    Auth {
        /// Which provider.
        #[command(subcommand)]
        target: AuthTarget,
    },
    /// Work with the MCP servers of the config (`[mcp_servers.NAME]`).
    #[command(after_help = "Example:\n  dracode mcp login docs   # authorize once; prints the refresh token to store as a CI secret")]
    Mcp {
        /// What to do.
        #[command(subcommand)]
        action: McpAction,
    },
    /// Print the tool schemas in a provider's format, or (`--task`) one task's tools and policy.
    #[command(after_help = "Examples:\n  dracode tools --format anthropic\n  dracode tools --task fix-lint tasks.toml")]
    Tools {
        /// The provider format.
        #[arg(long, value_parser = choices::choices(choices::TOOL_FORMATS), default_value = "openai")]
        format: ToolFormat,
        /// Show the tools this task is offered, with their policy rules, instead.
        #[arg(long, requires = "manifests")]
        task: Option<String>,
        /// The manifest(s) holding the task.
        #[arg(requires = "task")]
        manifests: Vec<PathBuf>,
        /// Config file instead of the dracode.toml found (see `dracode config --help`).
        #[arg(long, env = "DRACODE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Print what one task's commands may read, write and reach, resolved as `run` would.
    #[command(
        after_help = "Example:\n  dracode sandbox --task fix-lint tasks.toml\n\nPlain text: key lines, then the sections read:, write:, hidden:, unix-sockets:, limits:, env:\n(one entry a line, sorted). Folders made when the task runs show <pid>-<random>.\nExit 2 when the task is unknown or a manifest is invalid."
    )]
    Sandbox {
        /// The task's id.
        #[arg(long, required = true)]
        task: String,
        /// The manifest(s) holding the task.
        #[arg(required = true)]
        manifests: Vec<PathBuf>,
        /// The `--out` folder of the run (hidden from every task's commands).
        #[arg(long, default_value = "dracode-out")]
        out: PathBuf,
        /// Config file instead of the dracode.toml found (see `dracode config --help`).
        #[arg(long, env = "DRACODE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// List every provider: type, model, endpoint, and whether it is configured (and why not).
    #[command(after_help = "Example:\n  OPENAI_API_KEY=... dracode providers")]
    Providers {
        /// Config file instead of the dracode.toml found (see `dracode config --help`).
        #[arg(long, env = "DRACODE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Print the config files in use and the default provider and model they give.
    #[command(
        after_help = "Examples:\n  dracode config\n  dracode config ci/nightly.toml --format json\n\n`dracode.toml` is looked up from the current folder up to the repository's root (the\nfolder holding .git; outside a repository up to, not including, $HOME), else from each\nmanifest's folder up; --config or $DRACODE_CONFIG replaces it. `dracode.local.toml` is read\nbeside the dracode.toml in use."
    )]
    Config {
        /// Manifests whose folders are searched when the current folder's are not.
        manifests: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ConfigFormat::Text)]
        format: ConfigFormat,
        /// Config file instead of the one found.
        #[arg(long, env = "DRACODE_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Connect to one MCP server, list its tools and call some: a probe for testing dracode's
    /// MCP client (the conformance suite launches it); not a user command.
    #[command(hide = true)]
    McpProbe {
        /// The server's settings as JSON (`[mcp_servers.NAME]`'s fields).
        #[arg(long)]
        server: String,
        /// Its name.
        #[arg(long, default_value = "probe")]
        name: String,
        /// A call to make after listing: `TOOL=ARGUMENTS_JSON`; repeatable.
        #[arg(long)]
        call: Vec<String>,
        /// Call every listed tool with these arguments (JSON).
        #[arg(long)]
        call_each: Option<String>,
        /// List each tool with its input schema, not only its name.
        #[arg(long)]
        schemas: bool,
    },
    /// Print a JSON Schema: of the manifest, or of one results.jsonl event.
    #[command(after_help = "Example:\n  dracode schema manifest > manifest.schema.json")]
    Schema {
        /// Which schema.
        #[arg(value_enum)]
        which: SchemaKind,
    },
}

/// `dracode combine` options.
#[derive(Debug, Clone, Args)]
pub struct CombineArgs {
    /// The output folder of the run (`dracode run --out`).
    pub out: PathBuf,
    /// The commit-ish to apply the patches to (default: the commit the tasks started from).
    #[arg(long, value_name = "REV")]
    pub base: Option<String>,
    /// A command run (by `sh -c`, sandboxed like a task's check) in the combined tree.
    #[arg(long, value_name = "CMD")]
    pub check: Option<String>,
    /// The check's time limit.
    #[arg(long, default_value = "10m", value_name = "DURATION")]
    pub check_timeout: String,
    /// Commit the union onto this new branch of the repository.
    #[arg(long, value_name = "NAME")]
    pub branch: Option<String>,
    /// With --branch: move the branch when it exists already.
    #[arg(long, requires = "branch")]
    pub force: bool,
    /// A folder in the git repository the tasks ran on (default: the current folder).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
}

/// `dracode regrade` options.
#[derive(Debug, Clone, Args)]
pub struct RegradeArgs {
    /// The output folder of the run to regrade.
    pub results: PathBuf,
    /// The command that grades every regraded task instead of its own check.
    #[arg(long, value_name = "CMD")]
    pub check: Option<String>,
    /// Task id glob or `tag:NAME`; repeatable (any match selects).
    #[arg(long)]
    pub filter: Vec<String>,
    /// Where the new results go (default: `<RESULTS>-regraded`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Tasks regraded at once; by default (and with 0) the number of CPUs, as for `run`.
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub jobs: usize,
    /// Config file instead of the dracode.toml found (see `dracode config --help`).
    #[arg(long, env = "DRACODE_CONFIG")]
    pub config: Option<PathBuf>,
}

/// `dracode auth` targets.
#[derive(Debug, Subcommand)]
pub enum AuthTarget {
    /// GitHub Copilot, by GitHub's device flow.
    Copilot,
}

/// `dracode mcp` actions.
#[derive(Debug, Subcommand)]
pub enum McpAction {
    /// Authorize dracode for a `url` server once, as a person (OAuth authorization code flow
    /// with PKCE, in a browser or headless where the server approves at once); prints the
    /// refresh token to store as a CI secret and the config lines that use it.
    Login {
        /// The server's name in `[mcp_servers.NAME]`.
        server: String,
        /// Print the URL instead of opening a browser.
        #[arg(long)]
        no_browser: bool,
        /// Config file instead of the dracode.toml found (see `dracode config --help`).
        #[arg(long, env = "DRACODE_CONFIG")]
        config: Option<PathBuf>,
    },
}

/// `dracode list` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// One task id per line.
    Text,
    /// One JSON object per line.
    Json,
}

/// `dracode config` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConfigFormat {
    /// One `key: value` line each.
    Text,
    /// One JSON object.
    Json,
}

/// `dracode schema` targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaKind {
    /// The task manifest.
    Manifest,
    /// One line of results.jsonl.
    Events,
}

/// The `dracode` program: parses the command line, runs the command, and returns its exit code.
pub fn main() -> ExitCode {
    dracode_sandbox::close_inherited_descriptors();
    if let Some(code) = dracode_sandbox::supervisor::run_if_requested() {
        return ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX));
    }
    let code = match Cli::try_parse() {
        Ok(cli) => {
            if !matches!(&cli.command, Command::Run(args) if !args.dry_run) {
                quiet_on_closed_stdout();
            }
            execute(cli)
        }
        Err(e) => clap_exit(&e),
    };
    ExitCode::from(code as u8)
}

/// One `dracode` command line (`args` without the program name) run inside the calling
/// process, as the binary runs it: the same output on its standard streams and the same exit
/// code. What only a whole process may do is left to [`main`]: marking inherited descriptors
/// close-on-exec, dispatching the sandbox's supervisor, and ending quietly on a closed stdout.
/// The current directory and the environment are the process's own. Its confined commands need
/// the supervisor program named first ([`dracode_sandbox::use_supervisor_program`]) when the
/// calling program is not `dracode`.
pub fn run<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = std::iter::once(std::ffi::OsString::from("dracode")).chain(args.into_iter().map(Into::into));
    match Cli::try_parse_from(args) {
        Ok(cli) => execute(cli),
        Err(e) => clap_exit(&e),
    }
}

/// What clap's own exit would do for `e` (help and `--version` on stdout with 0, a usage error on
/// stderr with 2), as an exit code instead of an exit.
fn clap_exit(e: &clap::Error) -> i32 {
    let _ = e.print();
    e.exit_code()
}

/// Runs a parsed command line with the process-wide settings its command needs.
fn execute(cli: Cli) -> i32 {
    dracode_sandbox::mark_non_dumpable();
    init_tracing();
    // The commands that run confined commands adopt the orphans of a supervisor that died, for
    // the sweep to find ([`dracode_sandbox::sweep`]).
    let runs_commands =
        matches!(&cli.command, Command::Run(args) if !args.dry_run) || matches!(&cli.command, Command::Regrade(_) | Command::Combine(_));
    if runs_commands {
        dracode_sandbox::sweep::become_subreaper();
        // A command can point a descriptor's SIGIO at dracode (`F_SETOWN`; Landlock scopes
        // that only from ABI 6), whose default action would end the run. The supervisor
        // restores the default for the commands it confines.
        dracode_sandbox::signals::ignore(libc::SIGIO);
    }
    let code = match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit_codes::USAGE
        }
    };
    if runs_commands {
        dracode_sandbox::sweep::sweep_all();
    }
    code
}

/// Commands that only print (`list`, `tools`, `schema`, `run --dry-run`, …) end quietly when
/// their reader goes away (`dracode tools | head`), as Unix tools do, rather than panic on the
/// broken pipe. `run` keeps ignoring SIGPIPE: a closed `--jsonl -` is an artifact failure it reports (exit 3) after
/// finishing its tasks and cleaning up.
fn quiet_on_closed_stdout() {
    dracode_sandbox::signals::restore_default(libc::SIGPIPE);
}

/// Log lines (`DRACODE_LOG`, dracode's warnings by default) on stderr, coloured only on a terminal and
/// without `NO_COLOR`: a CI log or a file never gets escape codes.
fn init_tracing() {
    // By default only dracode's own warnings: no library's log line reaches the terminal.
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("DRACODE_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("dracode=warn"));
    let colour = report::progress::colour_wanted(std::io::stderr().is_terminal(), &dracode_input::process_env());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colour).without_time().try_init();
}

/// Runs one parsed command.
fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let env = dracode_input::process_env();
    match cli.command {
        Command::Run(args) => run::run_batch(*args, &cwd, env),
        Command::Validate { manifests, config, offline } => match plan::validate(&manifests, config.as_deref(), &cwd, &env) {
            Ok((tasks, with_issues)) => {
                if !offline && !preflight_passes(&tasks) {
                    return Ok(exit_codes::NOT_JUDGED);
                }
                let skipped = if offline { " (providers not checked: --offline)" } else { "" };
                let issues = if with_issues > 0 { " and the tasks of [issues] (read from GitHub when a run starts)" } else { "" };
                println!("ok: {} manifest(s), {} task(s){issues}{skipped}", manifests.len(), tasks.len());
                Ok(exit_codes::OK)
            }
            Err(e) => usage_error(&e),
        },
        Command::List { manifests, filter, shard, format, config } => {
            inspect::list(&manifests, &filter, shard.as_deref(), format, config.as_deref(), &cwd, &env)
        }
        Command::Merge { inputs, out } => results::merge(&inputs, &out, &env),
        Command::Report { out, history, save_history } => results::write_report(&out, &history, save_history.as_deref()),
        Command::Combine(args) => results::combine(&args, &cwd, &env),
        Command::Regrade(args) => results::regrade(&args, &cwd, &env),
        Command::Publish(args) => publish::publish(&args, &cwd, &env),
        Command::Auth { target: AuthTarget::Copilot } => login::auth_copilot(&env),
        Command::Mcp { action: McpAction::Login { server, no_browser, config } } => {
            login::mcp_login(&server, no_browser, config.as_deref(), &cwd, &env)
        }
        Command::Tools { task: Some(id), manifests, config, .. } => inspect::task_tools(&id, &manifests, config.as_deref(), &cwd, &env),
        Command::Tools { format, .. } => {
            let specs = crate::tools::Registry::all().specs();
            let rendered = crate::tools::render::render(&specs, format);
            println!("{}", serde_json::to_string_pretty(&rendered)?);
            Ok(exit_codes::OK)
        }
        Command::McpProbe { server, name, call, call_each, schemas } => {
            login::mcp_probe(&server, &name, &call, call_each.as_deref(), schemas, &cwd)
        }
        Command::Providers { config } => inspect::providers(config.as_deref(), &cwd, &env),
        Command::Config { manifests, format, config } => inspect::show_config(&manifests, format, config.as_deref(), &cwd, &env),
        Command::Sandbox { task, manifests, out, config } => inspect::task_sandbox(&task, &manifests, &out, config.as_deref(), &cwd, &env),
        Command::Schema { which } => {
            let schema = match which {
                SchemaKind::Manifest => crate::manifest::json_schema(),
                SchemaKind::Events => dracode_results::records::events_schema(),
            };
            println!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(exit_codes::OK)
        }
    }
}

/// Prints an input error and returns exit code 2.
fn usage_error(e: &dyn std::fmt::Display) -> anyhow::Result<i32> {
    for line in e.to_string().lines() {
        eprintln!("error: {line}");
    }
    Ok(exit_codes::USAGE)
}

/// The pre-flight of `validate` and `run --dry-run` ([`plan::preflight`]): prints every task
/// whose provider is not configured; true when there is none.
fn preflight_passes(tasks: &[crate::batch::spec::TaskSpec]) -> bool {
    let problems = plan::preflight(tasks);
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    if !problems.is_empty() {
        eprintln!(
            "error: {} task(s) would end not_configured (exit code {}): fix what is named above, or pass --offline to \
             check only the manifests",
            problems.len(),
            exit_codes::NOT_JUDGED
        );
    }
    problems.is_empty()
}

/// The config files read, as one line: `none (built-in defaults)` when there is none.
fn config_files_line(files: &[PathBuf]) -> String {
    if files.is_empty() {
        return "none (built-in defaults)".to_string();
    }
    files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
}
