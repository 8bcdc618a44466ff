//! The `ask_user` tool. dracode runs unattended, so it never waits for a person: it answers
//! from the task's canned answers, or tells the model to decide for itself.

use super::{Tool, ToolContext, ToolError, parse_args, schema_of};
use dracode_llm::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

/// What the model is told when no canned answer fits.
pub const NO_USER: &str = "No user is present: this is a non-interactive run. Make a reasonable decision yourself and continue.";

/// The `ask_user` tool.
pub struct AskUser;

// The arguments of `ask_user`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The question for the user.
    question: String,
}

impl Tool for AskUser {
    fn name(&self) -> &'static str {
        "ask_user"
    }
    fn description(&self) -> &'static str {
        "Ask the user a question and get their answer as text. In an unattended run there may be \
         no answer, in which case you are told to decide yourself."
    }
    fn schema(&self) -> serde_json::Value {
        schema_of::<Args>()
    }
    fn call<'a>(&'a self, ctx: &'a ToolContext, input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let args: Args = parse_args(input)?;
            let question = args.question.as_str();
            let answer = ctx.answers.get(question).or_else(|| ctx.answers.get(question.trim())).or_else(|| ctx.answers.get("*"));
            Ok(answer.cloned().unwrap_or_else(|| NO_USER.to_string()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ErrorCode, test_context};
    use serde_json::json;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    #[tokio::test]
    async fn answers_exact_then_wildcard_then_no_user() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = test_context(dir.path());
        assert_eq!(AskUser.call(&ctx, json!({"question": "Which DB?"})).await.unwrap(), NO_USER);
        ctx.answers = Arc::new(BTreeMap::from([("Which DB?".to_string(), "Postgres".to_string())]));
        assert_eq!(AskUser.call(&ctx, json!({"question": "Which DB?"})).await.unwrap(), "Postgres");
        assert_eq!(AskUser.call(&ctx, json!({"question": "Other?"})).await.unwrap(), NO_USER);
        ctx.answers = Arc::new(BTreeMap::from([
            ("Which DB?".to_string(), "Postgres".to_string()),
            ("*".to_string(), "Use your judgement".to_string()),
        ]));
        assert_eq!(AskUser.call(&ctx, json!({"question": "Which DB?"})).await.unwrap(), "Postgres");
        assert_eq!(AskUser.call(&ctx, json!({"question": "Other?"})).await.unwrap(), "Use your judgement");
    }

    #[tokio::test]
    async fn missing_question_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let err = AskUser.call(&test_context(dir.path()), json!({})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArguments);
    }
}
