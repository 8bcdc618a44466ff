//! The results contract: what `dracode run` writes and a pipeline reads back.
//!
//! The JSONL records of `results.jsonl` and `--jsonl` ([`records`]), the values they carry
//! ([`Status`], [`TaskError`], [`Usage`], …), their JSON Schema, the process exit codes
//! ([`exit_codes`]), the file names of per-task artifacts ([`file_names`]), the HTML escaping every artifact
//! shares ([`html`]) and a reader of an output folder ([`output_folder`]). Nothing here
//! runs a task: everything else depends on this module, and it depends on nothing of dracode's.
#![forbid(unsafe_code)]

pub mod exit_codes;
mod failure;
mod fields;
pub mod file_names;
pub mod html;
pub mod output_folder;
pub mod records;
#[cfg(test)]
mod roundtrip_tests;
mod status;
#[cfg(test)]
mod strategies;

pub use failure::{ErrorKind, FailureKind, TaskError};
pub use fields::{
    AgentOrigin, CacheHit, CheckRecord, CompactionMethod, Denials, DeniedCall, IssueOrigin, Limit, RegradedFrom, RetryScope, Usage,
};
pub use status::{RepeatVerdict, Status};
