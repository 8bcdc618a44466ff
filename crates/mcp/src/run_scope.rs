//! `scope = "run"` servers: each distinct server (name and settings) that some task declares is
//! started once, before the first task, confined like a task's commands but in a fresh folder
//! owned by the run (its working directory; it may write only there and in its own TMPDIR,
//! never in the user's repository). Its tools are shared by every task that declares it. A
//! server that cannot start or list its tools fails each of those tasks (kind `tool`), never
//! the whole run. [`RunServers::stop`] stops them all after the last task.

use super::{Launch, McpServerConfig, McpServers, McpTool, ServerFailed};
use dracode_sandbox::{Policy, SandboxError, SandboxMode};
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// What a task asks of one run-scope server: its name, settings, and how its commands are
/// confined (the server gets the loosest mode and network any of its tasks has).
#[derive(Debug, Clone)]
pub struct Wanted {
    /// `[mcp_servers.NAME]`.
    pub name: String,
    /// Its settings.
    pub config: McpServerConfig,
    /// The task's `sandbox` mode.
    pub sandbox: SandboxMode,
    /// The task's `network`.
    pub network: bool,
    /// The task's `read_paths` (the server reads those of every task that uses it).
    pub read_paths: Vec<std::path::PathBuf>,
}

/// Why a run-scope server's tools are not there.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunScopeError {
    /// The run's folder for its servers could not be made.
    #[error("cannot make the run's folder for MCP servers: {0}")]
    RunFolder(Arc<std::io::Error>),
    /// This machine cannot confine the server as its tasks ask.
    #[error("MCP server {name:?} failed to start: {reason}")]
    Unconfinable {
        /// The server's name.
        name: String,
        /// What the machine lacks.
        reason: Arc<SandboxError>,
    },
    /// The server failed to start.
    #[error(transparent)]
    Failed(#[from] ServerFailed),
    /// No task of the run declared it (so it was not started).
    #[error("MCP server {name:?} (scope \"run\") was not started for this run")]
    NotStarted {
        /// The server's name.
        name: String,
    },
}

/// The run's servers, started or with the reason they did not start.
#[derive(Default)]
pub struct RunServers {
    servers: Vec<RunServer>,
    /// The run's folder for them (`work/` and `tmp/`), removed by [`RunServers::stop`].
    dir: Mutex<Option<tempfile::TempDir>>,
}

struct RunServer {
    name: String,
    config: McpServerConfig,
    started: Result<McpServers, RunScopeError>,
}

impl RunServers {
    /// Starts every distinct server of `wanted` (in order) with `env` (the allowlisted
    /// environment; a server's own `env` is added) and TMPDIR in the run's folder.
    pub async fn start(wanted: &[Wanted], env: &BTreeMap<String, String>, http: reqwest::Client, redactor: &Redactor) -> RunServers {
        let mut distinct: Vec<Wanted> = Vec::new();
        for want in wanted {
            match distinct.iter_mut().find(|d| d.name == want.name && d.config == want.config) {
                Some(known) => {
                    known.network |= want.network;
                    known.read_paths.extend(want.read_paths.iter().filter(|p| !known.read_paths.contains(p)).cloned().collect::<Vec<_>>());
                    if want.sandbox == SandboxMode::WorkspaceWrite || known.sandbox == SandboxMode::Off {
                        known.sandbox = want.sandbox;
                    }
                }
                None => distinct.push(want.clone()),
            }
        }
        if distinct.is_empty() {
            return RunServers::default();
        }
        let dir = match run_folder() {
            Ok(dir) => dir,
            Err(e) => {
                let why = RunScopeError::RunFolder(Arc::new(e));
                let servers = distinct.into_iter().map(|w| RunServer { name: w.name, config: w.config, started: Err(why.clone()) });
                return RunServers { servers: servers.collect(), dir: Mutex::new(None) };
            }
        };
        let (work, tmp) = (dir.path().join("work"), dir.path().join("tmp"));
        let mut env = env.clone();
        env.insert("TMPDIR".into(), tmp.display().to_string());
        let mut servers = Vec::with_capacity(distinct.len());
        for want in distinct {
            let mut policy = Policy::for_workspace(want.sandbox, &work, Some(&tmp));
            policy.network = want.network;
            policy.readable.extend(want.read_paths.iter().cloned());
            let mut env = env.clone();
            if want.sandbox != SandboxMode::Off {
                env.extend(dracode_sandbox::cache_env(&tmp, &env, want.network).unwrap_or_default());
                env.extend(dracode_sandbox::git_config_env(&tmp, &env).ok());
            }
            let redactor = redactor.clone();
            let launch = Launch { cwd: &work, env: &env, tmp_dir: Some(&tmp), confine: Some(&policy), http: http.clone(), redactor };
            let started = match policy.check_supported() {
                Ok(()) => {
                    let one = BTreeMap::from([(want.name.clone(), want.config.clone())]);
                    McpServers::start(&one, &launch, &[]).await.map_err(RunScopeError::from)
                }
                Err(e) => Err(RunScopeError::Unconfinable { name: want.name.clone(), reason: Arc::new(e) }),
            };
            servers.push(RunServer { name: want.name, config: want.config, started });
        }
        RunServers { servers, dir: Mutex::new(Some(dir)) }
    }

    /// The tools of run-scope server `name` with settings `config`, or why it did not start.
    pub fn tools(&self, name: &str, config: &McpServerConfig) -> Result<Vec<Arc<McpTool>>, RunScopeError> {
        let server = self.servers.iter().find(|s| s.name == name && &s.config == config);
        match server.map(|s| &s.started) {
            Some(Ok(started)) => Ok(started.tools()),
            Some(Err(e)) => Err(e.clone()),
            None => Err(RunScopeError::NotStarted { name: name.to_string() }),
        }
    }

    /// Stops every server and removes the run's folder.
    pub async fn stop(&self) {
        for server in &self.servers {
            if let Ok(started) = &server.started {
                started.stop().await;
            }
        }
        let dir = self.dir.lock().map(|mut d| d.take()).unwrap_or_default();
        drop(dir);
    }
}

/// The prefix of the run's MCP folder in the temp dir (hidden from tasks' commands).
pub const RUN_DIR_PREFIX: &str = "dracode-mcp-run-";

/// A fresh folder with `work/` (the servers' working directory) and `tmp/` (their TMPDIR).
fn run_folder() -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new().prefix(RUN_DIR_PREFIX).tempdir()?;
    std::fs::create_dir(dir.path().join("work"))?;
    std::fs::create_dir(dir.path().join("tmp"))?;
    Ok(dir)
}
