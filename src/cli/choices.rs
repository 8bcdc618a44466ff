//! Flags whose values name an engine's enum. The engines know nothing of clap: each list here
//! pairs a value's name and `--help` line with the engine's value.

use crate::batch::options::NoTasks;
use crate::manifest::{Isolation, SandboxMode};
use crate::tools::render::ToolFormat;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};

/// One value of a flag: its name, its `--help` line and what it means to the engine.
pub type Choice<T> = (&'static str, &'static str, T);

/// `--isolation`.
pub const ISOLATIONS: &[Choice<Isolation>] = &[
    ("worktree", "A fresh git worktree of `repo` at `base`", Isolation::Worktree),
    ("copy", "A temporary copy of `repo` (honouring .gitignore)", Isolation::Copy),
    ("none", "In place, in `repo`", Isolation::None),
];

/// `--sandbox`, described in the user's terms.
pub const SANDBOX_MODES: &[Choice<SandboxMode>] = &[
    ("workspace-write", "Commands write only the workspace and the task's TMPDIR (the default)", SandboxMode::WorkspaceWrite),
    ("read-only", "Commands write only the task's TMPDIR", SandboxMode::ReadOnly),
    ("off", "No confinement (a warning on stderr and in summary.md)", SandboxMode::Off),
];

/// `--no-tasks`.
pub const NO_TASKS: &[Choice<NoTasks>] =
    &[("fail", "Exit 4", NoTasks::Fail), ("warn", "Exit 0 with a warning on stderr", NoTasks::Warn), ("pass", "Exit 0", NoTasks::Pass)];

/// `dracode tools --format`.
pub const TOOL_FORMATS: &[Choice<ToolFormat>] = &[
    ("openai", "OpenAI Chat Completions `tools` (also Azure, Copilot, vLLM, …)", ToolFormat::Openai),
    (
        "responses",
        "OpenAI Responses API `tools` (`wire_api = \"responses\"`): `apply_patch` as a free-form `custom` tool with its grammar, the others as flat `function` tools",
        ToolFormat::Responses,
    ),
    ("anthropic", "Anthropic Messages `tools`", ToolFormat::Anthropic),
    ("gemini", "Gemini `tools[].functionDeclarations`", ToolFormat::Gemini),
    ("mcp", "MCP `tools/list` result entries", ToolFormat::Mcp),
];

/// The parser of a flag taking one of `values`: `--help` lists each with its line.
pub fn choices<T: Copy + Send + Sync + 'static>(values: &'static [Choice<T>]) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(values.iter().map(|(name, help, _)| PossibleValue::new(*name).help(*help))).try_map(move |name| {
        values.iter().find(|(n, ..)| *n == name).map(|(.., value)| *value).ok_or_else(|| format!("unknown value {name:?}"))
    })
}
