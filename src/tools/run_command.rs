//! The `run_command` tool: runs a program in the workspace and returns its output.
//!
//! Arguments become an argv (no shell unless `shell` is true); running it — process group,
//! timeout with SIGTERM then SIGKILL, cleaned environment, capped output — is
//! [`dracode_sandbox::process`].

use super::policy::CommandLine;
use super::shell_words::split_words;
use super::{ErrorCode, Tool, ToolContext, ToolError, parse_args, schema_of};
use dracode_llm::BoxFuture;
use dracode_sandbox::process::{self, Spec};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// The `run_command` tool.
pub struct RunCommand;

// The arguments of `run_command`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Program to run, e.g. cargo (or, with shell=true, a shell command line). It runs in the workspace root.
    command: String,
    /// Arguments, split into words like a shell does (single/double quotes and backslashes honoured; no globbing, variables or pipes unless shell is true).
    #[serde(default)]
    arguments: String,
    /// Stop the command after this many seconds.
    #[serde(default = "default_timeout")]
    timeout_seconds: f64,
    /// Run "command arguments" with sh -c, for pipes, redirection, && and globs.
    #[serde(default)]
    shell: bool,
}

fn default_timeout() -> f64 {
    120.0
}

impl Tool for RunCommand {
    fn name(&self) -> &'static str {
        "run_command"
    }
    fn description(&self) -> &'static str {
        "Run a command in the workspace root and return its combined stdout/stderr followed by \
         'exit code: N'. Long output is cut in the middle; processes it leaves running are stopped."
    }
    fn schema(&self) -> serde_json::Value {
        schema_of::<Args>()
    }
    fn call<'a>(&'a self, ctx: &'a ToolContext, input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move { run(ctx, parse_args(input)?).await })
    }
    fn runs_commands(&self) -> bool {
        true
    }
    fn command_line(&self, input: &serde_json::Value) -> Option<CommandLine> {
        let args: Args = parse_args(input.clone()).ok()?;
        policy_command_line(&args.command, &args.arguments, args.shell)
    }
}

/// What the policy judges of a call that runs `command` `arguments` (with `shell`, the line `sh
/// -c` runs); `None` when the arguments name no command (the tool refuses them itself). Shared
/// with `run_persistent`.
pub(crate) fn policy_command_line(command: &str, arguments: &str, shell: bool) -> Option<CommandLine> {
    match command_line(command, arguments, shell).ok()? {
        argv if shell => argv.into_iter().nth(2).map(CommandLine::Shell),
        argv => Some(CommandLine::Exec(argv)),
    }
}

/// The program and its arguments.
fn argv(args: &Args) -> Result<Vec<String>, ToolError> {
    command_line(&args.command, &args.arguments, args.shell)
}

/// The argv of `command` and `arguments` as the model gave them: split into words like a shell
/// does, or with `shell` run by `sh -c` (shared with `run_persistent`).
pub(crate) fn command_line(command: &str, arguments: &str, shell: bool) -> Result<Vec<String>, ToolError> {
    let invalid = |msg: String| ToolError::new(ErrorCode::InvalidArguments, msg);
    if command.trim().is_empty() {
        return Err(invalid("command is empty".to_string()));
    }
    if shell {
        let line = match arguments.trim() {
            "" => command.to_string(),
            rest => format!("{command} {rest}"),
        };
        return Ok(vec!["sh".to_string(), "-c".to_string(), line]);
    }
    // Models often put the whole command line in `command`; its words are split too.
    let mut argv = split_words(command).map_err(|e| invalid(format!("command: {e}")))?;
    argv.extend(split_words(arguments).map_err(|e| invalid(format!("arguments: {e}")))?);
    if argv.is_empty() {
        return Err(invalid("command is empty".to_string()));
    }
    Ok(argv)
}

/// How `network.denied` names a command: `sh -c`'s line, or the argv joined by spaces.
fn display_line(argv: &[String]) -> String {
    match argv {
        [sh, c, line] if sh == "sh" && c == "-c" => line.clone(),
        _ => argv.join(" "),
    }
}

/// The run time allowed: the requested one, capped by the task's limit.
fn time_limit(args: &Args, ctx: &ToolContext) -> Result<Duration, ToolError> {
    let requested = Duration::try_from_secs_f64(args.timeout_seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| ToolError::new(ErrorCode::InvalidArguments, "timeout_seconds must be a positive number of seconds"))?;
    Ok(requested.min(ctx.max_command_timeout))
}

async fn run(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
    let argv = argv(&args)?;
    let limit = time_limit(&args, ctx)?;
    // A command that keeps printing (a long build) keeps the task from `stalled`.
    let keep_alive = || ctx.emitter.keep_alive();
    let spec = Spec {
        program: &argv[0],
        args: &argv[1..],
        cwd: ctx.sandbox.root(),
        env: &ctx.child_env,
        tmp_dir: ctx.tmp_dir.as_deref(),
        timeout: limit,
        output_limit: ctx.output_limit,
        confine: ctx.confine.as_deref(),
    };
    let _running = ctx.network_log.running(&display_line(&argv), dracode_sandbox::egress::Phase::Agent);
    let finished = process::run_observed(&spec, &keep_alive).await.map_err(|e| spawn_error(&e, &argv[0], args.shell))?;
    ctx.reports.extend(finished.reports.iter().cloned());
    let mut text = finished.output.clone();
    if finished.timed_out {
        let capped = if limit < Duration::try_from_secs_f64(args.timeout_seconds).unwrap_or(limit) {
            " (the task's limit for one command)"
        } else {
            ""
        };
        return Err(ToolError::new(
            ErrorCode::Timeout,
            format!("command timed out after {}{capped} and was stopped; output so far:\n{text}", humantime::format_duration(limit)),
        ));
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&finished.status_line(limit));
    text.push_str(&network_note(&finished.reports));
    Ok(text)
}

/// A line telling the model the sandbox refused the command's network access, naming what (a
/// UDP socket is how a name lookup starts: with the network off a DNS failure is this), or
/// nothing.
pub(crate) fn network_note(reports: &[dracode_sandbox::incidents::Report]) -> String {
    let mut refused: Vec<String> = Vec::new();
    for report in reports {
        if let dracode_sandbox::incidents::Report::NetworkDenied { host, port, .. } = report {
            let what = match (host.as_str(), port) {
                ("udp", 0) => "a UDP socket (a name lookup)".to_string(),
                (host, 0) => host.to_string(),
                (host, port) => format!("{host}:{port}"),
            };
            if !refused.contains(&what) {
                refused.push(what);
            }
        }
    }
    if refused.is_empty() {
        return String::new();
    }
    format!(
        "\n[dracode: the sandbox refused this command's network access ({}): the task's `network` setting decides what commands may reach, and without network a name lookup (DNS) fails too]",
        refused.join(", ")
    )
}

pub(crate) fn spawn_error(err: &std::io::Error, program: &str, shell: bool) -> ToolError {
    let message = if err.kind() == std::io::ErrorKind::NotFound && !shell {
        format!("command not found: {program} (set shell to true for shell syntax)")
    } else {
        format!("could not start {program}: {err}")
    };
    ToolError::new(ErrorCode::CommandFailed, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::test_context;
    use serde_json::json;
    use std::sync::Arc;

    async fn call(ctx: &ToolContext, input: serde_json::Value) -> Result<String, ToolError> {
        RunCommand.call(ctx, input).await
    }

    use crate::tools::test_pid_gone as gone;

    #[tokio::test]
    async fn captures_output_and_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({"command": "echo", "arguments": "hello 'big world'"}), "hello big world\nexit code: 0"),
            (json!({"command": "echo hello"}), "hello\nexit code: 0"),
            (json!({"command": "printf", "arguments": "no-newline"}), "no-newline\nexit code: 0"),
            (json!({"command": "exit 3", "shell": true}), "exit code: 3"),
            (json!({"command": "echo out; echo err >&2; exit 1", "shell": true}), "out\nerr\nexit code: 1"),
            (json!({"command": "echo", "arguments": "$HOME | x"}), "$HOME | x\nexit code: 0"),
            (json!({"command": "kill -9 $$", "shell": true}), "exit code: none (killed by signal 9)"),
        ];
        for (input, want) in cases {
            assert_eq!(call(&ctx, input.clone()).await.unwrap(), want, "{input}");
        }
        let pwd = call(&ctx, json!({"command": "pwd"})).await.unwrap();
        assert_eq!(pwd, format!("{}\nexit code: 0", ctx.sandbox.root().display()));
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let started = std::time::Instant::now();
        let err =
            call(&ctx, json!({"command": "sh", "arguments": "-c 'sleep 30 & echo $!; sleep 30'", "timeout_seconds": 1})).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
        assert_eq!(err.code, ErrorCode::Timeout, "{err}");
        let pid = err.message.lines().last().unwrap().trim().to_string();
        assert!(pid.parse::<u32>().is_ok(), "partial output kept: {err}");
        assert!(gone(&pid).await, "grandchild {pid} survived");
    }

    #[tokio::test]
    async fn a_term_ignoring_command_is_killed_after_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = test_context(dir.path());
        ctx.max_command_timeout = Duration::from_millis(300);
        let started = std::time::Instant::now();
        let err = call(&ctx, json!({"command": "trap '' TERM; echo $$; sleep 30", "shell": true})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::Timeout);
        assert!(err.message.contains("task's limit"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
        let pid = err.message.lines().last().unwrap().trim().to_string();
        assert!(gone(&pid).await, "{pid} survived");
    }

    #[tokio::test]
    async fn background_leftovers_are_stopped_when_the_command_returns() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let started = std::time::Instant::now();
        let out = call(&ctx, json!({"command": "sleep 30 & echo $!", "shell": true})).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
        let pid = out.lines().next().unwrap().to_string();
        assert!(gone(&pid).await, "{pid} survived");
    }

    #[tokio::test]
    async fn cancelling_the_call_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let input = json!({"command": "sleep 30 & echo $! > pid; wait", "shell": true});
        let result = tokio::time::timeout(Duration::from_millis(500), call(&ctx, input)).await;
        assert!(result.is_err(), "the call should still be running");
        let pid = std::fs::read_to_string(dir.path().join("pid")).unwrap().trim().to_string();
        assert!(gone(&pid).await, "{pid} survived cancellation");
    }

    #[tokio::test]
    async fn environment_is_the_cleaned_one() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let mut ctx = test_context(dir.path());
        let parent = [
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("OPENAI_API_KEY", "sk-should-not-leak-1234".to_string()),
            ("VISIBLE_VAR", "yes".to_string()),
        ];
        // The environment is an allowlist: a variable of its own reaches commands when passed through.
        ctx.child_env =
            Arc::new(dracode_secrets::child_env(parent.map(|(k, v)| (k.to_string(), v)), &["VISIBLE_VAR"], &Default::default()));
        ctx.tmp_dir = Some(tmp.path().to_path_buf());
        let out = call(&ctx, json!({"command": "env"})).await.unwrap();
        assert!(out.contains("VISIBLE_VAR=yes"), "{out}");
        assert!(out.contains(&format!("TMPDIR={}", tmp.path().display())), "{out}");
        assert!(!out.contains("OPENAI_API_KEY") && !out.contains("sk-should-not-leak"), "{out}");
    }

    #[tokio::test]
    async fn long_output_keeps_head_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = test_context(dir.path());
        ctx.output_limit = 100;
        let out = call(&ctx, json!({"command": "seq", "arguments": "1 10000"})).await.unwrap();
        assert!(out.starts_with("1\n2\n3\n"), "{out}");
        assert!(out.ends_with("9999\n10000\nexit code: 0"), "{out}");
        let total: usize = (1..=10000).map(|n: u32| n.to_string().len() + 1).sum();
        assert!(out.contains(&format!("[... {} bytes omitted ...]", total - 100)), "{out}");
    }

    #[tokio::test]
    async fn each_error_has_its_code() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let cases = [
            (json!({"command": "definitely-not-a-program-xyz"}), ErrorCode::CommandFailed),
            (json!({"command": "echo", "arguments": "'unclosed"}), ErrorCode::InvalidArguments),
            (json!({"command": "  "}), ErrorCode::InvalidArguments),
            (json!({"command": "echo", "timeout_seconds": -1}), ErrorCode::InvalidArguments),
            (json!({"command": "echo", "timeout_seconds": 0}), ErrorCode::InvalidArguments),
            (json!({"command": "echo", "cwd": "/"}), ErrorCode::InvalidArguments),
        ];
        for (input, want) in cases {
            let err = call(&ctx, input.clone()).await.expect_err(&input.to_string());
            assert_eq!(err.code, want, "{input}: {err}");
        }
    }
}
