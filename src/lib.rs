//! dracode — a headless runner for batches of LLM coding-agent tasks in CI.
//!
//! The pieces, one module per concept:
//! - [`manifest`] and [`config`] turn files, environment and flags into [`manifest::Task`]s;
//! - [`dracode_llm`] holds the conversation model, the [`dracode_llm::Provider`] trait and one file per wire format;
//! - [`tools`] are what the agent may call, each confined to its workspace by [`dracode_sandbox`];
//! - [`agent`] is the loop that alternates LLM calls and tool calls for one task;
//! - [`batch`] schedules tasks and prepares their workspaces;
//! - [`events`] is the one seam: everything that happens is an [`events::Event`], and every
//!   artifact in [`report`] is an independent reporter of that stream;
//! - [`disk`] keeps those artifacts whole, and grading honest, when a task fills the disk;
//! - [`publish`] turns a run's output folder into pull requests through [`github`]'s REST client.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod agent;
pub mod batch;
pub mod budget;
pub mod cli;
pub mod config;
pub mod context;
pub mod deadline;
pub mod disk;
pub mod engine;
pub mod events;
pub mod external;
pub mod github;
pub mod instructions;
pub mod manifest;
pub mod publish;
pub mod report;
pub mod shard;
pub mod structured;
pub mod tools;
