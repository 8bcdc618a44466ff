//! Shared helpers for the integration scenarios.
#![allow(dead_code)]

pub mod agents;
pub mod anthropic_server;
pub mod browser;
pub mod cli;
pub mod docs;
pub mod gemini_server;
pub mod github_api;
pub mod github_server;
pub mod in_process;
pub mod oauth_server;
pub mod ollama_server;
pub mod openai_server;
pub mod provider;
pub mod responses_server;
pub mod sandbox;
pub mod sse;
pub mod trickle_server;
pub mod workload_idp;
pub mod xmllint;
