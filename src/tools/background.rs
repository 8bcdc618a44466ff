//! The background processes of one task (`run_persistent`, `read_process_output`,
//! `kill_process`): started like `run_command` (same argv rules, cleaned environment, the
//! task's TMPDIR, confined by the sandbox supervisor, a process group of their own) but
//! outliving the tool call. Their output goes to a capped ring buffer (the newest bytes are
//! kept). At most [`MAX_RUNNING`] run at once.
//!
//! Every one is stopped when the task's agent ends, however it ended ([`Background::stop_all`],
//! called by the task runner: SIGTERM to the group, then SIGKILL after
//! [`dracode_sandbox::process::TERM_GRACE`]); dropping the table (a panic unwinding the task) kills the
//! groups too. Under the sandbox the supervisor also kills what a process left with `setsid`,
//! and dies with dracode (`PR_SET_PDEATHSIG`); with `sandbox = "off"` a process that leaves its
//! group escapes, as with `run_command`.

use dracode_sandbox::process::{self, Spec};
use std::collections::{BTreeMap, VecDeque};
use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::sync::watch;

/// How many background processes of one task may run at once.
pub const MAX_RUNNING: usize = 4;

/// The task's background processes, by id.
#[derive(Default)]
pub struct Background {
    procs: Mutex<BTreeMap<String, Arc<Proc>>>,
    started: Mutex<u32>,
}

/// One background process.
pub struct Proc {
    /// The command line, as shown to the model.
    pub command: String,
    /// The process group id (the pid of the process dracode started).
    pub pgid: libc::pid_t,
    confined: bool,
    started: Instant,
    state: Mutex<ProcState>,
    /// Bumped on every change (output, exit), for readers that wait.
    version: watch::Sender<u64>,
}

#[derive(Default)]
struct ProcState {
    ring: Ring,
    /// `exit code: N`, `killed by signal N`: set when the process exited.
    exit: Option<String>,
}

/// The newest `cap` bytes of a stream and how many were dropped before them.
#[derive(Default)]
struct Ring {
    cap: usize,
    bytes: VecDeque<u8>,
    dropped: usize,
}

impl Ring {
    fn push(&mut self, data: &[u8]) {
        self.bytes.extend(data);
        let excess = self.bytes.len().saturating_sub(self.cap);
        self.bytes.drain(..excess);
        self.dropped += excess;
    }

    fn render(&self) -> String {
        let (a, b) = self.bytes.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        if self.dropped == 0 { text } else { format!("[... {} earlier bytes dropped ...]\n{text}", self.dropped) }
    }
}

/// Why a process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The id is taken by a process still running.
    #[error("a process with id {0:?} is already running; kill_process it first or choose another id")]
    IdTaken(String),
    /// [`MAX_RUNNING`] already run.
    #[error("at most {MAX_RUNNING} background processes may run at once per task (running: {0}); stop one with kill_process")]
    TooMany(String),
    /// The program could not start.
    #[error(transparent)]
    Spawn(#[from] std::io::Error),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Background {
    /// An id for a process the model did not name: `p1`, `p2`, …
    pub fn next_id(&self) -> String {
        let procs = lock(&self.procs);
        let mut n = lock(&self.started);
        loop {
            *n += 1;
            let id = format!("p{n}");
            if !procs.contains_key(&id) {
                return id;
            }
        }
    }

    /// Starts `spec` (its timeout is not used) as process `id`; `command` is how it is shown.
    pub fn start(&self, id: &str, command: String, spec: &Spec<'_>) -> Result<Arc<Proc>, StartError> {
        let mut procs = lock(&self.procs);
        if procs.get(id).is_some_and(|p| p.running()) {
            return Err(StartError::IdTaken(id.to_string()));
        }
        let running: Vec<&str> = procs.iter().filter(|(_, p)| p.running()).map(|(id, _)| id.as_str()).collect();
        if running.len() >= MAX_RUNNING {
            return Err(StartError::TooMany(running.join(", ")));
        }
        let (mut cmd, confined) = process::command(spec, None)?;
        cmd.kill_on_drop(false);
        let mut child = cmd.spawn()?;
        let pgid = child.id().and_then(|id| libc::pid_t::try_from(id).ok()).unwrap_or(0);
        let state = ProcState { ring: Ring { cap: spec.output_limit.max(1), ..Ring::default() }, exit: None };
        let proc =
            Arc::new(Proc { command, pgid, confined, started: Instant::now(), state: Mutex::new(state), version: watch::Sender::new(0) });
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        tokio::spawn(follow(proc.clone(), child, stdout, stderr));
        procs.insert(id.to_string(), proc.clone());
        Ok(proc)
    }

    /// The process `id`, if one was started.
    pub fn get(&self, id: &str) -> Option<Arc<Proc>> {
        lock(&self.procs).get(id).cloned()
    }

    /// The ids of every process started, in order of id.
    pub fn ids(&self) -> Vec<String> {
        lock(&self.procs).keys().cloned().collect()
    }

    /// Stops every process (SIGTERM, then SIGKILL after the grace) and waits for them; the
    /// table is empty afterwards.
    pub async fn stop_all(&self) {
        let procs: Vec<Arc<Proc>> = std::mem::take(&mut *lock(&self.procs)).into_values().collect();
        for proc in &procs {
            proc.signal(libc::SIGTERM);
        }
        for proc in &procs {
            proc.wait_exit(process::TERM_GRACE).await;
            proc.finish();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        for proc in lock(&self.procs).values() {
            // A supervisor gets SIGTERM: it kills everything its command started, then exits.
            proc.signal(if proc.confined { libc::SIGTERM } else { libc::SIGKILL });
        }
    }
}

impl Proc {
    /// True until the process exited.
    pub fn running(&self) -> bool {
        lock(&self.state).exit.is_none()
    }

    /// `running for 3s` or `exited after 3s: exit code: 0`, and the output kept so far.
    pub fn report(&self) -> (String, String) {
        let state = lock(&self.state);
        let elapsed = humantime::format_duration(Duration::from_secs(self.started.elapsed().as_secs()));
        let status = match &state.exit {
            None => format!("running for {elapsed} (pid {})", self.pgid),
            Some(exit) => format!("exited ({exit})"),
        };
        (status, state.ring.render())
    }

    /// Waits until the process exits or produces output, at most `limit`.
    pub async fn wait_change(&self, limit: Duration) {
        let mut rx = self.version.subscribe();
        let _ = tokio::time::timeout(limit, rx.changed()).await;
    }

    /// Waits until the process exited, at most `limit`; true when it did.
    pub async fn wait_exit(&self, limit: Duration) -> bool {
        let mut rx = self.version.subscribe();
        let exited = async {
            while self.running() {
                if rx.changed().await.is_err() {
                    break;
                }
            }
        };
        tokio::time::timeout(limit, exited).await.is_ok() && !self.running()
    }

    /// Stops it: SIGTERM to its group, SIGKILL after the grace; true when it had been running.
    pub async fn stop(&self) -> bool {
        let was_running = self.running();
        self.signal(libc::SIGTERM);
        self.wait_exit(process::TERM_GRACE).await;
        self.finish();
        was_running
    }

    /// After the grace: SIGKILL to what is left of the group. A process that left the group
    /// (possible only unconfined) and a supervisor that already exited are not signalled.
    fn finish(&self) {
        if !self.confined || self.running() {
            self.signal(libc::SIGKILL);
        }
    }

    fn signal(&self, signal: libc::c_int) {
        dracode_sandbox::signals::signal_group(self.pgid, signal);
    }

    fn push(&self, data: &[u8]) {
        lock(&self.state).ring.push(data);
        self.version.send_modify(|v| *v += 1);
    }

    fn exited(&self, status: Option<std::process::ExitStatus>) {
        let exit = match status {
            Some(s) => match (s.code(), s.signal()) {
                (Some(code), _) => format!("exit code: {code}"),
                (None, Some(signal)) => format!("killed by signal {signal}"),
                (None, None) => "exit status unknown".to_string(),
            },
            None => "exit status unknown".to_string(),
        };
        lock(&self.state).exit = Some(exit);
        self.version.send_modify(|v| *v += 1);
    }
}

/// Copies the process's output into its ring until both pipes close, and records its exit.
async fn follow(proc: Arc<Proc>, mut child: Child, mut stdout: Option<impl AsyncRead + Unpin>, mut stderr: Option<impl AsyncRead + Unpin>) {
    let (mut out_buf, mut err_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let mut waited = false;
    loop {
        tokio::select! {
            biased;
            n = read_some(&mut stdout, &mut out_buf), if stdout.is_some() => match n {
                Ok(n) if n > 0 => proc.push(&out_buf[..n]),
                _ => stdout = None,
            },
            n = read_some(&mut stderr, &mut err_buf), if stderr.is_some() => match n {
                Ok(n) if n > 0 => proc.push(&err_buf[..n]),
                _ => stderr = None,
            },
            status = child.wait(), if !waited => {
                waited = true;
                proc.exited(status.ok());
            }
            else => break,
        }
    }
}

async fn read_some<R: AsyncRead + Unpin>(stream: &mut Option<R>, buf: &mut [u8]) -> std::io::Result<usize> {
    match stream {
        Some(s) => s.read(buf).await,
        None => Ok(0),
    }
}
