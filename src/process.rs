//! Running a child process the way CI needs it: its own process group (so a timeout kills
//! grandchildren too), SIGTERM then SIGKILL after a grace period, an environment given
//! explicitly (secrets already removed), and output capped to a head and a tail.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// How long a process group gets between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

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
}

impl Finished {
    /// `exit code: N`, `killed by signal N`, or `timed out after …`.
    pub fn status_line(&self, timeout: Duration) -> String {
        match (self.timed_out, self.exit_code, self.signal) {
            (true, ..) => format!("timed out after {}; the process group was killed", humantime::format_duration(timeout)),
            (false, Some(code), _) => format!("exit code: {code}"),
            (false, None, Some(sig)) => format!("killed by signal {sig}"),
            (false, None, None) => "exit status unknown".to_string(),
        }
    }
}

/// Keeps the first and last `limit / 2` bytes of a stream.
#[derive(Debug, Default)]
struct Capped {
    limit: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: usize,
}

impl Capped {
    fn push(&mut self, bytes: &[u8]) {
        self.total += bytes.len();
        let half = self.limit / 2;
        let room = half.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        self.tail.extend(rest);
        while self.tail.len() > self.limit - half {
            self.tail.pop_front();
        }
    }

    fn render(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        let omitted = self.total - self.head.len() - self.tail.len();
        if omitted > 0 {
            out.push_str(&format!("\n[... {omitted} bytes omitted ...]\n"));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

/// Kills the whole process group when dropped (a cancelled task leaves no process behind).
struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    fn signal(&self, sig: i32) {
        if let Some(pgid) = self.pgid {
            // SAFETY: killpg only sends a signal; a stale group id at worst yields ESRCH.
            unsafe {
                libc::killpg(pgid, sig);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
    }
}

/// Runs `spec` to its end or its timeout. `Err` only when the program could not start.
pub async fn run(spec: &Spec<'_>) -> std::io::Result<Finished> {
    let mut cmd = Command::new(spec.program);
    cmd.args(spec.args)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(tmp) = spec.tmp_dir {
        cmd.env("TMPDIR", tmp);
    }
    let mut child = cmd.spawn()?;
    let guard = GroupGuard { pgid: child.id().map(|id| id as i32) };
    let sink = Arc::new(Mutex::new(Capped { limit: spec.output_limit.max(2), ..Capped::default() }));
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        readers.push(tokio::spawn(drain(out, sink.clone())));
    }
    if let Some(err) = child.stderr.take() {
        readers.push(tokio::spawn(drain(err, sink.clone())));
    }

    let (status, timed_out) = match tokio::time::timeout(spec.timeout, child.wait()).await {
        Ok(status) => (status?, false),
        Err(_) => {
            guard.signal(libc::SIGTERM);
            let status = match tokio::time::timeout(KILL_GRACE, child.wait()).await {
                Ok(status) => status?,
                Err(_) => {
                    guard.signal(libc::SIGKILL);
                    child.wait().await?
                }
            };
            (status, true)
        }
    };
    // The leader is gone; whatever it left in its group goes too, so the pipes close.
    guard.signal(libc::SIGKILL);
    for reader in readers {
        let _ = tokio::time::timeout(Duration::from_millis(500), reader).await;
    }
    use std::os::unix::process::ExitStatusExt;
    let sink = sink.lock().unwrap_or_else(|p| p.into_inner());
    Ok(Finished {
        exit_code: status.code(),
        signal: status.signal(),
        output: sink.render(),
        output_bytes: sink.total,
        timed_out,
    })
}

async fn drain(mut pipe: impl tokio::io::AsyncRead + Unpin, sink: Arc<Mutex<Capped>>) {
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        sink.lock().unwrap_or_else(|p| p.into_inner()).push(&buf[..n]);
    }
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
        run(&Spec { program: "sh", args: &args, cwd: &dir, env: &env, tmp_dir: None, timeout, output_limit: limit }).await.unwrap()
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
    async fn a_missing_program_is_an_error() {
        let env = env();
        let dir = std::env::temp_dir();
        let spec = Spec { program: "no-such-program-xyz", args: &[], cwd: &dir, env: &env, tmp_dir: None, timeout: Duration::from_secs(1), output_limit: 10 };
        assert!(run(&spec).await.is_err());
    }
}
