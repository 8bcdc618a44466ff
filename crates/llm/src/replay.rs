//! Offline playback: answers each call with the next response of a recording, so examples and
//! tests run with no key and no network. Recordings are what `--record DIR` writes
//! ([`super::recording`]), or written by hand.
//!
//! Accepted shapes: a folder holding `<task-id>.json` per task; a file holding one task's
//! recording; or a file `{"tasks": {"<id>": recording, …}}` for a whole manifest. A recording is
//! `{"responses": [LlmResponse, …]}` (extra keys ignored) or a bare array of responses.

use super::preset::{ResolvedProvider, TaskBinding};
use super::{BoxFuture, ErrorKind, LlmError, LlmRequest, LlmResponse, Provider, RetryObserver};
use serde::Deserialize;
use std::path::Path;
use std::sync::Mutex;

/// Plays back recorded responses in order.
pub struct Replay {
    model: String,
    source: String,
    responses: Vec<LlmResponse>,
    next: Mutex<usize>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Recording {
    Wrapped {
        responses: Vec<LlmResponse>,
        /// The model the recorded provider sent (`--record` writes it).
        #[serde(default)]
        model: Option<String>,
    },
    Bare(Vec<LlmResponse>),
}

impl Recording {
    /// The responses, and the model that gave them when the recording says.
    fn into_parts(self) -> (Vec<LlmResponse>, Option<String>) {
        match self {
            Recording::Wrapped { responses, model } => (responses, model),
            Recording::Bare(responses) => (responses, None),
        }
    }
}

fn bad(message: String) -> LlmError {
    LlmError::new(ErrorKind::BadResponse, message)
}

impl Replay {
    /// Loads `task`'s recording from the provider's `replay_path`.
    pub fn load(resolved: &ResolvedProvider, task: &TaskBinding) -> Result<Self, LlmError> {
        let path = resolved
            .replay_path
            .as_deref()
            .ok_or_else(|| LlmError::not_configured("the replay provider needs `replay` (a recording file or folder)"))?;
        let (file, by_task) = if path.is_dir() {
            (path.join(format!("{}.json", dracode_results::file_names::file_stem(&task.task_id))), false)
        } else {
            (path.to_path_buf(), true)
        };
        let (responses, recorded) = read_recording(&file, by_task.then_some(task.task_id.as_str()))?;
        // The recorded model answered: a replayed run is priced as the recorded one was.
        let recorded = recorded.filter(|m| !m.is_empty() && m != "replay");
        Ok(Replay {
            model: recorded.or_else(|| resolved.model.clone()).unwrap_or_else(|| "replay".into()),
            source: file.display().to_string(),
            responses,
            next: Mutex::new(0),
        })
    }

    /// A player over `responses` (for tests and embedding).
    pub fn from_responses(responses: Vec<LlmResponse>) -> Self {
        Replay { model: "replay".into(), source: "memory".into(), responses, next: Mutex::new(0) }
    }
}

/// Reads a recording file (its responses, and its model when it names one); with `task_id`, a
/// `{"tasks": {…}}` file is indexed by it.
fn read_recording(file: &Path, task_id: Option<&str>) -> Result<(Vec<LlmResponse>, Option<String>), LlmError> {
    // Only a regular file of at most 1 MiB: a FIFO would block the task for ever and
    // `/dev/zero` would grow until memory runs out.
    let text = dracode_input::read_input(file).map_err(|e| LlmError::not_configured(format!("replay recording: {e}")))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("replay recording {}: {e}", file.display())))?;
    let value = match (task_id, value.get("tasks")) {
        (Some(id), Some(tasks)) => tasks
            .get(id)
            .cloned()
            .ok_or_else(|| LlmError::not_configured(format!("replay recording {} has no entry for task {id:?}", file.display())))?,
        _ => value,
    };
    serde_json::from_value::<Recording>(value)
        .map(Recording::into_parts)
        .map_err(|e| bad(format!("replay recording {}: not a list of responses: {e}", file.display())))
}

impl Provider for Replay {
    fn complete<'a>(&'a self, _request: LlmRequest<'a>, _on_retry: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>> {
        let mut next = self.next.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = match self.responses.get(*next) {
            Some(response) => {
                *next += 1;
                Ok(response.clone())
            }
            None => {
                Err(bad(format!("replay recording {} has no response #{} (it holds {})", self.source, *next + 1, self.responses.len())))
            }
        };
        Box::pin(async move { result })
    }

    fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ContentBlock, StopReason, Usage};

    fn answer(text: &str) -> LlmResponse {
        LlmResponse {
            content: vec![ContentBlock::text(text)],
            stop_reason: StopReason::EndTurn,
            usage: Usage::from_counts(3, 2),
            model: None,
        }
    }

    #[tokio::test]
    async fn plays_in_order_then_fails_clearly() {
        let replay = Replay::from_responses(vec![answer("one"), answer("two")]);
        let req = LlmRequest { system: "", messages: &[], tools: &[], max_tokens: None };
        let noop = |_| {};
        assert_eq!(replay.complete(req, &noop).await.unwrap().content, vec![ContentBlock::text("one")]);
        assert_eq!(replay.complete(req, &noop).await.unwrap().content, vec![ContentBlock::text("two")]);
        let err = replay.complete(req, &noop).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::BadResponse);
        assert!(err.message.contains("no response #3"), "{}", err.message);
    }

    #[test]
    fn reads_all_three_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let one = serde_json::to_string(&vec![answer("a")]).unwrap();
        std::fs::write(dir.path().join("bare.json"), &one).unwrap();
        std::fs::write(dir.path().join("wrapped.json"), format!("{{\"model\":\"x\",\"responses\":{one}}}")).unwrap();
        std::fs::write(dir.path().join("all.json"), format!("{{\"tasks\":{{\"t1\":{one}}}}}")).unwrap();
        assert_eq!(read_recording(&dir.path().join("bare.json"), None).unwrap().0.len(), 1);
        assert_eq!(read_recording(&dir.path().join("wrapped.json"), Some("t1")).unwrap().0.len(), 1);
        assert_eq!(read_recording(&dir.path().join("wrapped.json"), Some("t1")).unwrap().1.as_deref(), Some("x"), "its model is read");
        assert_eq!(read_recording(&dir.path().join("all.json"), Some("t1")).unwrap().0.len(), 1);
        let err = read_recording(&dir.path().join("all.json"), Some("t2")).unwrap_err();
        assert_eq!(err.kind, ErrorKind::NotConfigured);
    }

    #[test]
    fn a_fifo_a_device_or_an_oversize_file_is_refused_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let big = dir.path().join("big.json");
        std::fs::write(&big, format!("[{}]", " ".repeat(1024 * 1024))).unwrap();
        // Each of these would block or never end if it were read.
        for (path, want) in
            [(fifo.as_path(), "not a regular file"), (Path::new("/dev/zero"), "not a regular file"), (big.as_path(), "1024 KiB limit")]
        {
            let err = read_recording(path, None).unwrap_err();
            assert_eq!(err.kind, ErrorKind::NotConfigured, "{path:?}");
            assert!(err.message.contains(want) && err.message.contains(&path.display().to_string()), "{path:?}: {}", err.message);
        }
    }
}
