//! MCP servers as tools (`[mcp_servers.NAME]` in config or a manifest): each task attempt starts
//! its servers — a stdio server as a child confined like `run_command`, in the workspace, with
//! the task's allowlisted environment plus the server's `env`; or a streamable-HTTP `url` — and
//! offers their tools to the model as `NAME__tool`. A server that cannot start or list its
//! tools fails the attempt (kind `tool`). Everything is stopped when the attempt ends.
//! Servers with `scope = "run"` are started once for the whole run instead ([`run_scope`]).
//!
//! dracode's own client (no SDK): [`session`] speaks the current, stateless revision
//! (2026-07-28) and the `initialize` revisions 2025-03-26 to 2025-11-25 over [`transport`]
//! (stdio) or [`http`] (streamable HTTP, with `headers`, bearer tokens and [`oauth`] client
//! credentials).
#![forbid(unsafe_code)]

pub mod config;
pub mod elicit;
pub mod headers;
pub mod http;
pub mod jsonrpc;
pub mod oauth;
pub mod probe;
pub mod protocol;
pub mod run_scope;
pub mod server;
pub mod session;
pub mod tool;
pub mod transport;

pub use config::{McpElicitation, McpOAuth, McpScope, McpServerConfig};
pub use run_scope::{RUN_DIR_PREFIX, RunScopeError, RunServers, Wanted};
pub use server::{Launch, McpServer, StartError};
pub use tool::{McpCallError, McpTool};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Server `name` did not start (what a task attempt's or a run's failure says).
#[derive(Debug, Clone, thiserror::Error)]
#[error("MCP server {name:?} failed to start: {error}")]
pub struct ServerFailed {
    /// The server's name.
    pub name: String,
    /// Why.
    pub error: StartError,
}

/// The started servers of one task attempt and their tools.
#[derive(Default)]
pub struct McpServers {
    servers: Vec<Arc<McpServer>>,
    tools: Vec<Arc<McpTool>>,
}

impl McpServers {
    /// Starts every server in `configs` (in name order) and lists its tools; tool names that
    /// clash with `builtin` names or each other get a suffix. On the first failure the servers
    /// already started are stopped and the error names the server.
    pub async fn start(
        configs: &BTreeMap<String, McpServerConfig>,
        launch: &Launch<'_>,
        builtin: &[String],
    ) -> Result<McpServers, ServerFailed> {
        let mut started = McpServers::default();
        let mut taken: BTreeSet<String> = builtin.iter().cloned().collect();
        for (name, config) in configs {
            match McpServer::start(name, config, launch).await {
                Ok((server, listed)) => {
                    let server = Arc::new(server);
                    let tools = McpTool::from_listing(server.clone(), listed, config.call_timeout(), &mut taken);
                    tracing::debug!(server = %name, tools = tools.len(), "MCP server started");
                    started.tools.extend(tools.into_iter().map(Arc::new));
                    started.servers.push(server);
                }
                Err(error) => {
                    started.stop().await;
                    return Err(ServerFailed { name: name.clone(), error });
                }
            }
        }
        Ok(started)
    }

    /// The tools of every started server.
    pub fn tools(&self) -> Vec<Arc<McpTool>> {
        self.tools.clone()
    }

    /// Closes every session and stops every server process (also done, less politely, when
    /// the last handle is dropped).
    pub async fn stop(&self) {
        for server in &self.servers {
            server.stop().await;
        }
    }
}
