//! Artifacts, each an independent [`crate::events::Reporter`] of the event stream.
//! TODO(helper): jsonl, junit, summary, transcript, diff, progress.
