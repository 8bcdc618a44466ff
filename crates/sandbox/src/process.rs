//! Running a child process the way CI needs it: its own process group (so a timeout kills
//! grandchildren too), SIGTERM then SIGKILL after a grace period, the group killed when the call
//! returns or is cancelled (nothing a command started outlives it), an environment given
//! explicitly (secrets already removed), no stdin, and stdout/stderr interleaved as they arrive,
//! capped to a head and a tail. Used by the `run_command` tool and by `check` commands.
//!
//! With a [`Policy`] in [`Spec::confine`] (any mode but `off`) the command runs under the
//! sandbox supervisor ([`crate::supervisor`]): dracode spawns and signals the
//! supervisor's group exactly as it would the command's, and the supervisor confines the
//! command, forwards the stop request, and kills whatever the command left — including
//! processes that left its process group with `setsid`.

use crate::incidents::ReportFile;
use crate::{Policy, supervisor};
use std::collections::{BTreeMap, VecDeque};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// Between SIGTERM and SIGKILL on a timeout.
pub const TERM_GRACE: Duration = Duration::from_secs(2);
// The supervisor's own grace ends first, so it is done before dracode escalates.
const _: () = assert!((supervisor::GRACE_SECS as u64) < TERM_GRACE.as_secs());
/// How long to keep reading after the command exited, for output still in flight from
/// processes it left behind.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// What to run.
#[derive(Debug, Clone)]
pub struct Spec<'a> {
    /// The program (looked up on the child's `PATH`).
    pub program: &'a str,
    /// Its arguments.
    pub args: &'a [String],
    /// The working directory.
    pub cwd: &'a Path,
    /// The whole environment of the child.
    pub env: &'a BTreeMap<String, String>,
    /// `TMPDIR` for the child, when set.
    pub tmp_dir: Option<&'a Path>,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Bytes of output kept (half head, half tail).
    pub output_limit: usize,
    /// The OS confinement, when the command must run sandboxed (`None`, or a policy with mode
    /// `off`, runs it as is).
    pub confine: Option<&'a Policy>,
}

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The exit code, when it exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// stdout and stderr, in arrival order, capped with a `[... N bytes omitted ...]` marker.
    pub output: String,
    /// Total bytes of output produced.
    pub output_bytes: usize,
    /// True when the timeout ended it.
    pub timed_out: bool,
    /// What the sandbox reported about the command (refused connections, limits reached);
    /// empty for an unconfined command.
    pub reports: Vec<crate::incidents::Report>,
}

impl Finished {
    /// `exit code: N`, `exit code: none (killed by signal N)`, or `timed out after …`.
    pub fn status_line(&self, timeout: Duration) -> String {
        match (self.timed_out, self.exit_code, self.signal) {
            (true, ..) => format!("timed out after {}; the process group was killed", humantime::format_duration(timeout)),
            (false, Some(code), _) => format!("exit code: {code}"),
            (false, None, Some(signal)) => format!("exit code: none (killed by signal {signal})"),
            (false, None, None) => "exit code: unknown".to_string(),
        }
    }
}

/// Runs `spec` to its end or its timeout. `Err` only when the program could not start or be
/// waited for — for a confined command also when the machine cannot confine it
/// (`ErrorKind::Unsupported`, the message from [`Policy::check_supported`]).
pub async fn run(spec: &Spec<'_>) -> std::io::Result<Finished> {
    run_observed(spec, &|| {}).await
}

/// [`run`], calling `on_output` each time the command prints something: a command that keeps
/// printing is alive (`run_command` resets the task's `idle_timeout` with it, through
/// the emitter's `keep_alive`).
pub async fn run_observed(spec: &Spec<'_>, on_output: &(dyn Fn() + Send + Sync)) -> std::io::Result<Finished> {
    let report = match spec.confine.filter(|p| p.is_enforced()) {
        Some(_) => Some(ReportFile::create()?),
        None => None,
    };
    let (mut cmd, confined) = command(spec, report.as_ref().map(ReportFile::path).as_deref())?;
    // A supervisor must not be SIGKILLed: it would leave the command's orphans behind.
    cmd.kill_on_drop(!confined);
    let mut child = cmd.spawn()?;
    let pgid = child.id().and_then(|id| libc::pid_t::try_from(id).ok()).unwrap_or(0);
    let group = ProcessGroup { pgid, on_drop: if confined { libc::SIGTERM } else { libc::SIGKILL } };
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let mut output = HeadTail::new(spec.output_limit.max(2));
    let ending = {
        let pump = pump(stdout, stderr, &mut output, on_output);
        supervise(&mut child, &group, pump, Instant::now() + spec.timeout).await?
    };
    drop(group);
    let (status, timed_out) = match ending {
        Ending::Exited(status) => (Some(status), false),
        Ending::TimedOut => (None, true),
    };
    Ok(Finished {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        output: output.render(),
        output_bytes: output.total(),
        timed_out,
        reports: report.map(|r| r.read()).unwrap_or_default(),
    })
}

/// Starts `spec`'s program as a long-lived service that talks over its pipes (an MCP server):
/// confined, in its own process group and with its environment exactly as [`run`] starts a
/// command, but with stdin, stdout and stderr piped to the caller and no time limit
/// (`spec.timeout` and `spec.output_limit` are unused). The returned [`ProcessGroup`] stops the
/// whole group when dropped.
pub fn spawn_service(spec: &Spec<'_>) -> std::io::Result<(Child, ProcessGroup)> {
    let (mut cmd, confined) = command(spec, None)?;
    cmd.stdin(Stdio::piped()).kill_on_drop(!confined);
    let child = cmd.spawn()?;
    let pgid = child.id().and_then(|id| libc::pid_t::try_from(id).ok()).unwrap_or(0);
    Ok((child, ProcessGroup { pgid, on_drop: if confined { libc::SIGTERM } else { libc::SIGKILL } }))
}

/// The command that runs `spec`: under the sandbox supervisor when its policy is enforced
/// (then `true`), in a process group of its own, with no stdin, stdout and stderr piped, and
/// exactly `spec`'s environment (and TMPDIR); the supervisor appends its reports to `report`.
/// Also used for background processes (the `background` tools).
pub fn command(spec: &Spec<'_>, report: Option<&Path>) -> std::io::Result<(Command, bool)> {
    let confined = spec.confine.filter(|p| p.is_enforced());
    let mut cmd = match confined {
        Some(policy) => supervisor::command(&supervisor::Confined {
            policy,
            program: spec.program,
            args: spec.args,
            path: spec.env.get("PATH").map(String::as_str),
            cwd: spec.cwd,
            report,
        })?,
        None => {
            let mut cmd = Command::new(spec.program);
            cmd.args(spec.args);
            cmd
        }
    };
    cmd.current_dir(spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .envs(spec.env)
        .process_group(0);
    if let Some(tmp) = spec.tmp_dir {
        cmd.env("TMPDIR", tmp);
    }
    Ok((cmd, confined.is_some()))
}

/// The command's process group; killed with SIGKILL when dropped, so a cancelled call or a
/// command's leftover background processes cannot outlive the call. A supervisor's group gets
/// SIGTERM instead: the supervisor then kills everything the command started, and exits.
pub struct ProcessGroup {
    pgid: libc::pid_t,
    on_drop: libc::c_int,
}

impl ProcessGroup {
    fn signal(&self, signal: libc::c_int) {
        // pgid 0 or 1 would mean our own group or init's; a spawned child never has either.
        if self.pgid > 1 {
            // SAFETY: killpg only sends a signal; it touches no memory of this process. The
            // group is the child's own (process_group(0)), so it never includes dracode. The
            // group id stays reserved while any member lives; the only race is reuse after the
            // whole group is gone, within the microseconds between reaping and this call.
            unsafe {
                libc::killpg(self.pgid, signal);
            }
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.signal(self.on_drop);
    }
}

/// Keeps the first and last `limit / 2` bytes of a stream and counts what is dropped between.
struct HeadTail {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    omitted: usize,
}

impl HeadTail {
    fn new(limit: usize) -> Self {
        let head_cap = limit / 2;
        HeadTail { head_cap, tail_cap: limit - head_cap, head: Vec::new(), tail: VecDeque::new(), omitted: 0 }
    }

    fn push(&mut self, mut data: &[u8]) {
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let take = room.min(data.len());
            self.head.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        self.tail.extend(data);
        let excess = self.tail.len().saturating_sub(self.tail_cap);
        self.tail.drain(..excess);
        self.omitted += excess;
    }

    fn total(&self) -> usize {
        self.head.len() + self.omitted + self.tail.len()
    }

    fn render(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.omitted > 0 {
            out.push_str(&format!("\n[... {} bytes omitted ...]\n", self.omitted));
        }
        let (a, b) = self.tail.as_slices();
        out.push_str(&String::from_utf8_lossy(&[a, b].concat()));
        out
    }
}

/// Reads up to `buf.len()` bytes from a stream that may already be closed.
async fn read_some<R: AsyncRead + Unpin>(stream: &mut Option<R>, buf: &mut [u8]) -> std::io::Result<usize> {
    match stream {
        Some(s) => s.read(buf).await,
        None => Ok(0),
    }
}

/// Copies stdout and stderr into `sink` in arrival order until both are closed, calling
/// `on_output` after each piece.
async fn pump(
    mut stdout: Option<impl AsyncRead + Unpin>,
    mut stderr: Option<impl AsyncRead + Unpin>,
    sink: &mut HeadTail,
    on_output: &(dyn Fn() + Send + Sync),
) {
    let mut out_buf = vec![0u8; 32 * 1024];
    let mut err_buf = vec![0u8; 32 * 1024];
    loop {
        tokio::select! {
            // When both have data, stdout first: it is usually the one written first, and a
            // fixed order keeps `echo a; echo b >&2` stable. Neither starves: a writer blocked
            // on a full pipe stops producing on the other.
            biased;
            n = read_some(&mut stdout, &mut out_buf), if stdout.is_some() => match n {
                Ok(n) if n > 0 => {
                    sink.push(&out_buf[..n]);
                    on_output();
                }
                _ => stdout = None,
            },
            n = read_some(&mut stderr, &mut err_buf), if stderr.is_some() => match n {
                Ok(n) if n > 0 => {
                    sink.push(&err_buf[..n]);
                    on_output();
                }
                _ => stderr = None,
            },
            else => break,
        }
    }
}

/// How a run ended.
enum Ending {
    Exited(ExitStatus),
    TimedOut,
}

/// Waits for the child while `pump` collects its output; on `deadline` stops the group
/// (SIGTERM, grace, SIGKILL).
async fn supervise(child: &mut Child, group: &ProcessGroup, pump: impl Future<Output = ()>, deadline: Instant) -> std::io::Result<Ending> {
    tokio::pin!(pump);
    let mut pumped = false;
    let exited = loop {
        tokio::select! {
            _ = &mut pump, if !pumped => pumped = true,
            status = child.wait() => break Some(status?),
            _ = tokio::time::sleep_until(deadline) => break None,
        }
    };
    if let Some(status) = exited {
        if !pumped {
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut pump).await;
        }
        return Ok(Ending::Exited(status));
    }
    group.signal(libc::SIGTERM);
    let grace_end = Instant::now() + TERM_GRACE;
    let mut leader_done = false;
    while !(leader_done && pumped) {
        tokio::select! {
            _ = &mut pump, if !pumped => pumped = true,
            _ = child.wait(), if !leader_done => leader_done = true,
            _ = tokio::time::sleep_until(grace_end) => break,
        }
    }
    group.signal(libc::SIGKILL);
    if !leader_done {
        let _ = tokio::time::timeout(DRAIN_GRACE, child.wait()).await;
    }
    if !pumped {
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut pump).await;
    }
    Ok(Ending::TimedOut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        BTreeMap::from([("PATH".to_string(), std::env::var("PATH").unwrap_or_default())])
    }

    async fn sh(script: &str, timeout: Duration, limit: usize) -> Finished {
        let args = vec!["-c".to_string(), script.to_string()];
        let env = env();
        let dir = std::env::temp_dir();
        run(&Spec { program: "sh", args: &args, cwd: &dir, env: &env, tmp_dir: None, timeout, output_limit: limit, confine: None })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn captures_output_and_exit_code() {
        let f = sh("echo out; echo err >&2; exit 3", Duration::from_secs(10), 1024).await;
        assert_eq!(f.exit_code, Some(3));
        assert!(f.output.contains("out") && f.output.contains("err"), "{}", f.output);
        assert!(!f.timed_out);
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("pid");
        let script = format!("sleep 30 & echo $! > {}; wait", marker.display());
        let started = std::time::Instant::now();
        let f = sh(&script, Duration::from_millis(500), 1024).await;
        assert!(f.timed_out);
        assert!(started.elapsed() < Duration::from_secs(5));
        let pid: i32 = std::fs::read_to_string(&marker).unwrap().trim().parse().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // A killed grandchild may linger as a zombie until something reaps it: that is dead.
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
            .unwrap_or(false);
        assert!(!alive, "grandchild {pid} survived the timeout");
    }

    #[tokio::test]
    async fn output_keeps_head_and_tail() {
        let f = sh("i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done", Duration::from_secs(10), 200).await;
        assert!(f.output.starts_with("line0\n"));
        assert!(f.output.trim_end().ends_with("line1999"));
        assert!(f.output.contains("bytes omitted"));
        assert!(f.output_bytes > 10_000);
    }

    #[tokio::test]
    async fn on_output_is_called_as_the_command_prints_not_only_at_its_end() {
        let env = env();
        let dir = std::env::temp_dir();
        let calls = std::sync::Mutex::new(Vec::new());
        let started = std::time::Instant::now();
        let record = || calls.lock().unwrap().push(started.elapsed());
        let args = vec!["-c".to_string(), "for i in 1 2 3 4; do echo $i; sleep 0.3; done".to_string()];
        let spec = Spec {
            program: "sh",
            args: &args,
            cwd: &dir,
            env: &env,
            tmp_dir: None,
            timeout: Duration::from_secs(30),
            output_limit: 1024,
            confine: None,
        };
        let f = run_observed(&spec, &record).await.unwrap();
        assert_eq!(f.output, "1\n2\n3\n4\n");
        let calls = calls.lock().unwrap();
        assert!(calls.len() >= 2, "{calls:?}");
        // The first call came while the command still ran (it takes ≥ 0.9 s in all).
        assert!(calls[0] < calls[calls.len() - 1], "{calls:?}");
    }

    #[tokio::test]
    async fn a_missing_program_is_an_error() {
        let env = env();
        let dir = std::env::temp_dir();
        let spec = Spec {
            program: "no-such-program-xyz",
            args: &[],
            cwd: &dir,
            env: &env,
            tmp_dir: None,
            timeout: Duration::from_secs(1),
            output_limit: 10,
            confine: None,
        };
        assert!(run(&spec).await.is_err());
    }
}
