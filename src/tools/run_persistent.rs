//! The `run_persistent` tool: starts a long-running command (a dev server, a database) in the
//! background and returns at once; see [`super::background`] for how it runs and is stopped.

use super::{ErrorCode, Tool, ToolContext, ToolError, parse_args, schema_of};
use crate::tools::background::StartError;
use dracode_llm::BoxFuture;
use dracode_sandbox::process::Spec;
use schemars::JsonSchema;
use serde::Deserialize;

/// The `run_persistent` tool.
pub struct RunPersistent;

// The arguments of `run_persistent`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// Program to run, e.g. npm (or, with shell=true, a shell command line). It runs in the workspace root.
    command: String,
    /// Arguments, split into words like a shell does (quotes honoured; no globbing, variables or pipes unless shell is true).
    #[serde(default)]
    arguments: String,
    /// Run "command arguments" with sh -c.
    #[serde(default)]
    shell: bool,
    /// A name to refer to it by (letters, digits, '-', '_', '.'); default: p1, p2, ...
    #[serde(default)]
    process_id: Option<String>,
}

impl Tool for RunPersistent {
    fn name(&self) -> &'static str {
        "run_persistent"
    }
    fn description(&self) -> &'static str {
        "Start a long-running command (dev server, database, watcher) in the background and return at once with its \
         process_id. Read its output with read_process_output, stop it with kill_process; all are stopped when the task ends. \
         At most 4 run at once."
    }
    fn schema(&self) -> serde_json::Value {
        schema_of::<Args>()
    }
    fn call<'a>(&'a self, ctx: &'a ToolContext, input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move { start(ctx, parse_args(input)?) })
    }
    fn runs_commands(&self) -> bool {
        true
    }
    fn command_line(&self, input: &serde_json::Value) -> Option<super::policy::CommandLine> {
        let args: Args = parse_args(input.clone()).ok()?;
        super::run_command::policy_command_line(&args.command, &args.arguments, args.shell)
    }
}

/// True for an id of 1 to 64 letters, digits, `-`, `_` or `.`.
fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn start(ctx: &ToolContext, args: Args) -> Result<String, ToolError> {
    let argv = super::run_command::command_line(&args.command, &args.arguments, args.shell)?;
    let id = match args.process_id {
        Some(id) if !valid_id(&id) => {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!("process_id {id:?}: use 1 to 64 letters, digits, '-', '_' or '.'"),
            ));
        }
        Some(id) => id,
        None => ctx.processes.next_id(),
    };
    let spec = Spec {
        program: &argv[0],
        args: &argv[1..],
        cwd: ctx.sandbox.root(),
        env: &ctx.child_env,
        tmp_dir: ctx.tmp_dir.as_deref(),
        timeout: ctx.max_command_timeout,
        output_limit: ctx.output_limit,
        confine: ctx.confine.as_deref(),
    };
    let shown = if args.shell { argv[2].clone() } else { argv.join(" ") };
    let proc = ctx.processes.start(&id, shown, &spec).map_err(|e| match e {
        StartError::Spawn(e) => super::run_command::spawn_error(&e, &argv[0], args.shell),
        StartError::IdTaken(_) => ToolError::new(ErrorCode::AlreadyExists, e.to_string()),
        StartError::TooMany(_) => ToolError::new(ErrorCode::CommandFailed, e.to_string()),
    })?;
    Ok(format!(
        "Started process {id:?} (pid {}): {}\nRead its output with read_process_output, stop it with kill_process.",
        proc.pgid, proc.command
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::kill_process::KillProcess;
    use crate::tools::read_process_output::ReadProcessOutput;
    use crate::tools::test_context;
    use serde_json::json;

    use crate::tools::test_pid_gone as gone;

    /// Reads `id`'s output, waiting (up to ~20 s in all) until it contains `want`.
    async fn output_with(ctx: &ToolContext, id: &str, want: &str) -> String {
        let mut out = String::new();
        for _ in 0..20 {
            out = ReadProcessOutput.call(ctx, json!({"process_id": id, "wait_seconds": 1})).await.unwrap();
            let (head, output) = out.split_once("--- output ---").unwrap();
            if head.lines().next().unwrap().contains(want) || output.contains(want) {
                return out;
            }
        }
        panic!("{want:?} never appeared: {out}");
    }

    /// The pid a `echo $!`-style line printed (the last number of the output).
    fn last_pid(out: &str) -> String {
        out.lines().rev().find(|l| l.trim().parse::<u32>().is_ok()).unwrap().trim().to_string()
    }

    #[tokio::test]
    async fn starts_reads_and_kills_a_process_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let cmd = "sleep 300 & echo child $!; echo ready; echo oops >&2; wait";
        let started = RunPersistent.call(&ctx, json!({"command": cmd, "shell": true, "process_id": "srv"})).await.unwrap();
        assert!(started.starts_with("Started process \"srv\" (pid "), "{started}");
        let out = output_with(&ctx, "srv", "oops").await;
        assert!(out.starts_with("process \"srv\": running for"), "{out}");
        assert!(out.contains("ready\n") && out.contains("--- output ---\nchild "), "{out}");
        let child = out.lines().find_map(|l| l.strip_prefix("child ")).unwrap().to_string();
        let leader = started.split("(pid ").nth(1).unwrap().split(')').next().unwrap().to_string();
        let killed = KillProcess.call(&ctx, json!({"process_id": "srv"})).await.unwrap();
        assert!(killed.starts_with("process \"srv\" stopped: exited (killed by signal 15)"), "{killed}");
        assert!(gone(&child).await && gone(&leader).await, "{child} or {leader} survived");
        let again = KillProcess.call(&ctx, json!({"process_id": "srv"})).await.unwrap();
        assert!(again.contains("had already exited"), "{again}");
        let unknown = ReadProcessOutput.call(&ctx, json!({"process_id": "nope"})).await.unwrap_err();
        assert!(unknown.message.contains("known: srv"), "{unknown}");
    }

    #[tokio::test]
    async fn a_finished_process_reports_its_exit_and_its_id_can_be_reused() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        RunPersistent.call(&ctx, json!({"command": "echo", "arguments": "done here", "process_id": "x"})).await.unwrap();
        let out = output_with(&ctx, "x", "exited").await;
        assert!(out.contains("exited (exit code: 0)") && out.ends_with("done here\n"), "{out}");
        RunPersistent.call(&ctx, json!({"command": "sleep 30", "process_id": "x"})).await.unwrap();
        let taken = RunPersistent.call(&ctx, json!({"command": "sleep 30", "process_id": "x"})).await.unwrap_err();
        assert_eq!(taken.code, ErrorCode::AlreadyExists, "{taken}");
        ctx.processes.stop_all().await;
    }

    #[tokio::test]
    async fn at_most_four_run_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        for n in 1..=4 {
            let out = RunPersistent.call(&ctx, json!({"command": "sleep 300"})).await.unwrap();
            assert!(out.starts_with(&format!("Started process \"p{n}\"")), "{out}");
        }
        let err = RunPersistent.call(&ctx, json!({"command": "sleep 300"})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::CommandFailed);
        assert!(err.message.contains("at most 4") && err.message.contains("running: p1, p2, p3, p4"), "{err}");
        KillProcess.call(&ctx, json!({"process_id": "p2"})).await.unwrap();
        RunPersistent.call(&ctx, json!({"command": "sleep 300"})).await.unwrap();
        ctx.processes.stop_all().await;
    }

    #[tokio::test]
    async fn stop_all_and_drop_leave_nothing_running() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = test_context(dir.path());
        let ignores_term = "trap '' TERM; sleep 300 & echo $!; wait";
        for id in ["a", "b"] {
            RunPersistent.call(&ctx, json!({"command": ignores_term, "shell": true, "process_id": id})).await.unwrap();
        }
        let pids = [last_pid(&output_with(&ctx, "a", "\n").await), last_pid(&output_with(&ctx, "b", "\n").await)];
        ctx.processes.stop_all().await;
        for pid in &pids {
            assert!(gone(pid).await, "{pid} survived stop_all");
        }
        assert!(ctx.processes.ids().is_empty());
        // Dropping the table (a task that panicked) kills the groups too.
        let other = test_context(dir.path());
        RunPersistent.call(&other, json!({"command": "sleep 300 & echo $!; wait", "shell": true, "process_id": "c"})).await.unwrap();
        let pid = last_pid(&output_with(&other, "c", "\n").await);
        drop(other);
        assert!(gone(&pid).await, "{pid} survived the drop");
    }

    #[tokio::test]
    async fn output_is_a_ring_of_the_newest_bytes_and_bad_arguments_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = test_context(dir.path());
        ctx.output_limit = 100;
        RunPersistent.call(&ctx, json!({"command": "seq", "arguments": "1 10000", "process_id": "s"})).await.unwrap();
        let out = output_with(&ctx, "s", "exited").await;
        assert!(out.contains("earlier bytes dropped ...]\n") && out.ends_with("9999\n10000\n"), "{out}");
        for input in
            [json!({"command": ""}), json!({"command": "sleep 1", "process_id": "a b"}), json!({"command": "definitely-not-a-program-xyz"})]
        {
            assert!(RunPersistent.call(&ctx, input.clone()).await.is_err(), "{input}");
        }
        let err = ReadProcessOutput.call(&ctx, json!({"process_id": "s", "wait_seconds": 61})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArguments);
    }
}
