//! What users write, read the same way everywhere: durations (`90s`, `1h30m`), `${VAR}` in
//! config strings, input files (bounded, regular files only), did-you-mean suggestions and
//! paths as shown (folded lexically).
//! The manifest, the config, the MCP server table, the sandbox's limits and the replay
//! provider all read through here; it depends on nothing of dracode's.
#![forbid(unsafe_code)]

pub mod duration;
mod env;
mod files;
mod names;
mod paths;

pub use duration::DurationError;
pub use env::{expand_vars, process_env, why_empty};
pub use files::{InputFileError, MAX_INPUT_BYTES, read_input};
pub use names::did_you_mean;
pub use paths::lexical;
