//! Structured results (issue #12): a task whose answer must be JSON valid against a schema.
//!
//! A task with `output_schema`, `output_schema_file` or `output = "findings"` is offered one more
//! tool, [`ANSWER_TOOL`], whose parameters are the schema — the same on every provider, since
//! each wire format already renders tool schemas its own way (Gemini's subset included). What
//! the model passes to it is validated here with the `jsonschema` crate ([`schema`]):
//!
//! - valid: the value is the task's `structured_output` and the loop ends at once;
//! - invalid: the tool answers with an error naming every failing path and why, and the model
//!   may call it again — `output_retries` times (default 2) — before the task ends `failed`,
//!   kind `agent`, with the validation errors in `error.message`;
//! - the model ends its turn with plain text and no valid answer yet: that costs a repair too;
//!   dracode sends one user message asking it to call [`ANSWER_TOOL`] (text is never parsed as
//!   the answer, so what counts is always what the schema validated).
//!
//! Repair turns are ordinary LLM calls: they count against `max_iterations` and the budgets.
//! A schema whose top level is not an object is wrapped as `{"value": SCHEMA}` for the tool
//! (tool parameters must be objects on every provider) and unwrapped before validation; local
//! `$ref`s are inlined into the tool's copy (Gemini's schema subset has no `$ref`), while
//! validation always uses the schema as written.

pub mod annotations;
pub mod findings;
pub mod gzip;
pub mod sarif;
pub mod schema;

use crate::events::{FailureKind, TaskError};
use dracode_llm::{ContentBlock, ToolSpec};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// The name of the tool the model gives its final answer with.
pub const ANSWER_TOOL: &str = "final_answer";
/// Repairs allowed after an invalid (or missing) answer when the task does not say.
pub const DEFAULT_OUTPUT_RETRIES: u32 = 2;
/// Validation errors listed to the model and in `error.message`; more are counted.
const MAX_LISTED_ERRORS: usize = 10;

/// What the system prompt adds for a task with a schema (the base prompt asks for a text
/// summary, which such a task must not end with).
pub const SYSTEM_PROMPT_ADDITION: &str = "\
This task needs a structured answer. When the work is done, call the final_answer tool with \
the answer as its arguments (they must match its schema) instead of replying with text. If the \
tool reports errors, fix the answer and call it again.";

/// A built-in answer shape chosen with `output = "…"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutputPreset {
    /// Review findings (rule id, message, file, start/end line, severity); they also become
    /// `findings.sarif` and, under GitHub Actions, `::warning` annotations.
    Findings,
}

/// A task's answer contract: the schema, its compiled validator and the repairs allowed.
#[derive(Debug, Clone)]
pub struct OutputContract {
    /// The schema as the user wrote it.
    pub schema: Value,
    /// Repairs allowed after an invalid or missing answer.
    pub retries: u32,
    /// `output = "findings"`: the answer is a findings report.
    pub findings: bool,
    validator: Arc<schema::JsonSchema>,
    /// The tool's parameters wrap the schema as `{"value": SCHEMA}`.
    wrapped: bool,
}

/// How far a task's answer has got: kept by the agent loop across turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnswerProgress {
    /// The accepted answer.
    pub value: Option<Value>,
    /// Repairs used so far.
    pub repairs: u32,
}

/// Why a task's schema cannot make an answer contract.
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    /// The boolean schema `false`: no answer could ever be valid.
    #[error("the schema `false` accepts no answer: the task could never pass")]
    AcceptsNothing,
    /// The schema is neither an object nor a boolean.
    #[error("the schema must be a JSON object or a boolean, not {0}")]
    NotAnObject(&'static str),
    /// The schema does not compile ([`schema::JsonSchema::compile`]).
    #[error("not a valid JSON Schema: {0}")]
    Invalid(schema::SchemaError),
    /// `output_schema_file` could not be read ([`dracode_input::read_input`]'s reason).
    #[error("{0}")]
    Unreadable(dracode_input::InputFileError),
    /// `output_schema_file` is not JSON.
    #[error("{}:{}:{}: not JSON: {source}", path.display(), source.line(), source.column())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// The parser's complaint, with its line and column.
        #[source]
        source: serde_json::Error,
    },
}

/// Why an answer (the arguments of a call of [`ANSWER_TOOL`]) is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The schema was wrapped for the tool, and the answer lacks its `value`.
    #[error("at /: missing property \"value\" (the answer goes in \"value\")")]
    MissingValue,
    /// The answer fails its schema: every failing path and why, one a line (the first
    /// [`MAX_LISTED_ERRORS`] shown, the rest counted).
    #[error("{}", listed(.0))]
    Invalid(Vec<String>),
}

/// The first [`MAX_LISTED_ERRORS`] of `errors`, one a line, and how many more there are.
fn listed(errors: &[String]) -> String {
    let mut listed = errors.iter().take(MAX_LISTED_ERRORS).cloned().collect::<Vec<_>>().join("\n");
    if errors.len() > MAX_LISTED_ERRORS {
        listed.push_str(&format!("\n… and {} more", errors.len() - MAX_LISTED_ERRORS));
    }
    listed
}

/// What the loop does after a turn the contract looked at.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing decided: go on with the next turn.
    Continue,
    /// A valid answer was accepted: the task is finished.
    Accept,
    /// Ask the model again with this user message.
    Repair(String),
    /// No repair left: the task fails with this error.
    GiveUp(TaskError),
}

/// A task's fields that make its output contract, as the manifest gives them.
#[derive(Debug, Clone, Default)]
pub struct OutputFields {
    /// `output_schema`: the schema inline.
    pub output_schema: Option<Value>,
    /// `output_schema_file`: the schema in a file (an absolute path).
    pub output_schema_file: Option<PathBuf>,
    /// `output`: a preset contract (`findings`).
    pub output: Option<OutputPreset>,
    /// `output_retries`: how many invalid answers the model may correct.
    pub output_retries: Option<u32>,
}

impl OutputContract {
    /// A contract for `schema`; an error says why the schema is not a usable JSON Schema.
    pub fn new(schema: Value, retries: u32, findings: bool) -> Result<Self, ContractError> {
        // The boolean schemas: `true` accepts anything (the same as `{}`, which every provider
        // takes in a tool); `false` accepts nothing, so a task with it could never pass.
        let schema = match schema {
            Value::Bool(true) => json!({}),
            Value::Bool(false) => return Err(ContractError::AcceptsNothing),
            other => other,
        };
        if !schema.is_object() {
            return Err(ContractError::NotAnObject(type_name(&schema)));
        }
        let validator = schema::JsonSchema::compile(&schema).map_err(ContractError::Invalid)?;
        let wrapped = schema.get("type").and_then(Value::as_str) != Some("object");
        Ok(OutputContract { schema, retries, findings, validator: Arc::new(validator), wrapped })
    }

    /// The task's contract from its fields, `None` without one; an error names the field at
    /// fault and what is wrong. Reads `output_schema_file` (already made absolute).
    pub fn from_fields(fields: &OutputFields) -> Result<Option<Self>, (&'static str, String)> {
        let retries = fields.output_retries.unwrap_or(DEFAULT_OUTPUT_RETRIES);
        let schema = match (&fields.output_schema, &fields.output_schema_file, fields.output) {
            (Some(_), Some(_), _) => {
                return Err(("output_schema_file", "set either `output_schema` or `output_schema_file`, not both".into()));
            }
            (Some(_), None, Some(_)) | (None, Some(_), Some(_)) => {
                return Err(("output", "`output = \"findings\"` brings its own schema: drop `output_schema`/`output_schema_file`".into()));
            }
            (None, None, Some(OutputPreset::Findings)) => findings::schema(),
            (Some(schema), None, None) => schema.clone(),
            (None, Some(path), None) => read_schema_file(path).map_err(|e| ("output_schema_file", e.to_string()))?,
            (None, None, None) if fields.output_retries.is_some() => {
                return Err(("output_retries", "needs `output_schema`, `output_schema_file` or `output`".into()));
            }
            (None, None, None) => return Ok(None),
        };
        let field = if fields.output_schema_file.is_some() { "output_schema_file" } else { "output_schema" };
        OutputContract::new(schema, retries, fields.output.is_some()).map(Some).map_err(|e| (field, e.to_string()))
    }

    /// The final-answer tool offered to the model.
    pub fn tool_spec(&self) -> ToolSpec {
        let mut parameters = self.schema.clone();
        if let Some(map) = parameters.as_object_mut() {
            // Meta keywords no provider needs in a tool (and some reject).
            map.remove("$schema");
            map.remove("$id");
        }
        if self.wrapped {
            parameters = wrap(parameters);
        }
        let parameters = inline_refs(parameters);
        ToolSpec {
            name: ANSWER_TOOL.to_string(),
            description: "Give the task's final answer, once the work is done. The arguments are the answer and must \
                match this schema; if they do not, the reply lists what is wrong and you call it again."
                .to_string(),
            parameters,
        }
    }

    /// Checks one answer (the tool's arguments): the value when it is valid, else every failing
    /// path and why.
    pub fn check(&self, input: &Value) -> Result<Value, AnswerError> {
        let value = if self.wrapped {
            match input.get("value") {
                Some(value) => value.clone(),
                None => return Err(AnswerError::MissingValue),
            }
        } else {
            input.clone()
        };
        let errors: Vec<String> = self.validator.errors(&value).iter().map(ToString::to_string).collect();
        if errors.is_empty() { Ok(value) } else { Err(AnswerError::Invalid(errors)) }
    }

    /// Answers a call of [`ANSWER_TOOL`]: the tool result for the model, and what the loop does.
    pub fn answer(&self, id: &str, input: &Value, progress: &mut AnswerProgress) -> (ContentBlock, Step) {
        let result = |content: String, is_error: bool| ContentBlock::ToolResult { tool_use_id: id.to_string(), content, is_error };
        if progress.value.is_some() {
            return (result("Ignored: an answer was already accepted.".into(), false), Step::Accept);
        }
        match self.check(input) {
            Ok(value) => {
                progress.value = Some(value);
                (result("Answer accepted.".into(), false), Step::Accept)
            }
            Err(errors) if progress.repairs < self.retries => {
                progress.repairs += 1;
                let left = self.retries - progress.repairs;
                let message = format!(
                    "The answer does not match the schema:\n{errors}\nFix it and call {ANSWER_TOOL} again ({left} more attempt(s) after this one)."
                );
                (result(message, true), Step::Continue)
            }
            Err(errors) => {
                let error = self.give_up(format!("the final answer does not match the output schema:\n{errors}"));
                (result(format!("The answer does not match the schema:\n{errors}"), true), error)
            }
        }
    }

    /// The model ended its turn with text and no valid answer yet.
    pub fn on_plain_end(&self, progress: &mut AnswerProgress) -> Step {
        if progress.value.is_some() {
            return Step::Accept;
        }
        if progress.repairs < self.retries {
            progress.repairs += 1;
            return Step::Repair(format!(
                "You ended without giving the answer. Call the {ANSWER_TOOL} tool now with the answer as its arguments; plain text is not accepted."
            ));
        }
        self.give_up(format!("the agent ended its turn without calling {ANSWER_TOOL}"))
    }

    fn give_up(&self, why: String) -> Step {
        let message = format!("{why}\n(no valid answer after {} repair(s); output_retries = {})", self.retries, self.retries);
        Step::GiveUp(TaskError::new(FailureKind::Agent, message))
    }
}

/// Reads and parses a schema file (JSON), refusing what [`dracode_input::read_input`] refuses
/// (not a regular file, larger than its limit).
fn read_schema_file(path: &std::path::Path) -> Result<Value, ContractError> {
    let text = dracode_input::read_input(path).map_err(ContractError::Unreadable)?;
    serde_json::from_str(&text).map_err(|source| ContractError::NotJson { path: path.to_path_buf(), source })
}

/// `{"type":"object","properties":{"value":SCHEMA},"required":["value"]}`, with the schema's
/// `$defs`/`definitions` lifted to the top so its local `$ref`s still resolve.
fn wrap(mut schema: Value) -> Value {
    let mut outer = json!({"type": "object", "properties": {}, "required": ["value"]});
    for key in ["$defs", "definitions"] {
        if let Some(defs) = schema.as_object_mut().and_then(|m| m.remove(key)) {
            outer[key] = defs;
        }
    }
    outer["properties"]["value"] = schema;
    outer
}

/// How deep `$ref`s are followed when inlined; a deeper (or recursive) schema keeps its refs.
const MAX_REF_DEPTH: usize = 8;

/// `schema` with its local `$ref`s (`#/$defs/…`, `#/definitions/…`) replaced by what they point
/// to and the definitions dropped, so a provider that does not take `$ref` (Gemini's schema
/// subset drops it) still sees the whole shape; unchanged when a ref is remote, unknown or
/// recursive.
fn inline_refs(schema: Value) -> Value {
    let defs = |key: &str| schema.get(key).and_then(Value::as_object).cloned().unwrap_or_default();
    let (defs_2020, defs_07) = (defs("$defs"), defs("definitions"));
    if defs_2020.is_empty() && defs_07.is_empty() {
        return schema;
    }
    let lookup = |reference: &str| match reference.split_once('/').map(|(_, rest)| rest.split_once('/')) {
        Some(Some(("$defs", name))) if reference.starts_with("#/") => defs_2020.get(name).cloned(),
        Some(Some(("definitions", name))) if reference.starts_with("#/") => defs_07.get(name).cloned(),
        _ => None,
    };
    let mut inlined = schema.clone();
    if let Some(map) = inlined.as_object_mut() {
        map.remove("$defs");
        map.remove("definitions");
    }
    substitute(&inlined, &lookup, MAX_REF_DEPTH).unwrap_or(schema)
}

/// `value` with every `$ref` replaced through `lookup`, `None` when one cannot be.
fn substitute(value: &Value, lookup: &dyn Fn(&str) -> Option<Value>, depth: usize) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                let target = lookup(reference).filter(|_| depth > 0)?;
                return substitute(&target, lookup, depth - 1);
            }
            let entries = map.iter().map(|(k, v)| substitute(v, lookup, depth).map(|v| (k.clone(), v)));
            Some(Value::Object(entries.collect::<Option<_>>()?))
        }
        Value::Array(items) => Some(Value::Array(items.iter().map(|v| substitute(v, lookup, depth)).collect::<Option<_>>()?)),
        other => Some(other.clone()),
    }
}

/// The JSON type of `value`, for messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;
