//! Integration scenarios, one file per capability.

mod anthropic_provider;
mod apply_patch;
mod attacks;
mod change_record;
mod ci_native;
mod context_window;
mod copilot_auth;
mod first_run;
mod gemini_provider;
mod git_isolation;
mod git_process_tools;
mod github_action;
mod honest_record;
mod manifest_errors;
mod mcp_conformance;
mod mcp_protocol;
mod mcp_servers;
mod ollama_provider;
mod openai_provider;
#[cfg(feature = "otel")]
mod otel_export;
mod provider_matrix;
mod run_batch;
mod run_openai;
mod run_quickstart;
mod sandbox_egress;
mod sandbox_files;
mod sandbox_limits;
mod sandbox_network;
mod sandbox_processes;
mod sandbox_reads;
mod sandbox_sockets;
mod streaming;
mod structured_output;
mod tool_policy;
mod verdicts;
