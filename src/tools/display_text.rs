//! The `display_text` tool: shows text to whoever watches the run (the progress output and the
//! event stream) without ending the task.

use super::{Tool, ToolContext, ToolError, parse_args, schema_of};
use crate::events::{Header, WireEvent};
use dracode_llm::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

/// The `display_text` tool.
pub struct DisplayText;

// The arguments of `display_text`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The text to show.
    text: String,
}

impl Tool for DisplayText {
    fn name(&self) -> &'static str {
        "display_text"
    }
    fn description(&self) -> &'static str {
        "Show a message to the person watching the run (progress notes, findings). Returns \"displayed\"."
    }
    fn schema(&self) -> serde_json::Value {
        schema_of::<Args>()
    }
    fn call<'a>(&'a self, ctx: &'a ToolContext, input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let args: Args = parse_args(input)?;
            ctx.emitter.emit(WireEvent::AgentMessage { header: Header::unstamped(None), text: args.text });
            Ok("displayed".to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Emitter, Event, EventBus, Reporter, Stamp};
    use crate::tools::{ErrorCode, test_context};
    use serde_json::json;
    use std::sync::{Arc, Mutex};

    struct Collect(Arc<Mutex<Vec<String>>>);

    impl Reporter for Collect {
        fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
            if let WireEvent::AgentMessage { text, .. } = &event.record {
                self.0.lock().unwrap().push(text.clone());
            }
            Ok(())
        }
    }

    #[tokio::test]
    async fn emits_an_agent_message() {
        let dir = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut ctx = test_context(dir.path());
        let bus = EventBus::new(Stamp::new("run", None), vec![Box::new(Collect(seen.clone()))]);
        ctx.emitter = Emitter::run(bus.clone());
        let out = DisplayText.call(&ctx, json!({"text": "halfway there"})).await.unwrap();
        assert_eq!(out, "displayed");
        // Reporters run on their own thread: wait until it has seen the event.
        assert!(bus.flush(std::time::Duration::from_secs(5)));
        assert_eq!(*seen.lock().unwrap(), vec!["halfway there".to_string()]);
    }

    #[tokio::test]
    async fn missing_text_is_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let err = DisplayText.call(&test_context(dir.path()), json!({"message": "x"})).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArguments);
    }
}
