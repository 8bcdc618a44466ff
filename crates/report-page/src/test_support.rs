//! Small `results.jsonl` files for the unit tests, written line by line as dracode writes them.

use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The run's clock: 2026-01-01T00:00:00Z.
pub const EPOCH_SECS: u64 = 1_767_225_600;

/// `ms` after [`EPOCH_SECS`] as an RFC 3339 `ts`.
pub fn ts(ms: u64) -> String {
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH_SECS) + Duration::from_millis(ms);
    humantime::format_rfc3339_millis(at).to_string()
}

/// The lines of one run.
pub struct Log {
    /// Its `run_id`.
    pub run_id: String,
    /// The lines so far.
    pub lines: Vec<Value>,
}

impl Log {
    /// A run `run_id` whose `run.started` is at `started_ms`.
    pub fn new(run_id: &str, started_ms: u64) -> Log {
        let mut log = Log { run_id: run_id.to_string(), lines: Vec::new() };
        let fields = json!({"version": "0.0.0", "manifests": ["tasks.toml"], "task_count": 1, "jobs": 2});
        log.event(started_ms, "run.started", None, fields);
        log
    }

    /// Adds one line of `kind` at `ms`, of `task` (id, attempt) when given, with `fields`.
    pub fn event(&mut self, ms: u64, kind: &str, task: Option<(&str, u32)>, fields: Value) -> &mut Log {
        let mut line = json!({"type": kind, "schema_version": 1, "seq": self.lines.len() + 1, "ts": ts(ms), "run_id": self.run_id});
        if let Some((id, attempt)) = task {
            line["task_id"] = json!(id);
            line["attempt"] = json!(attempt);
        }
        for (key, value) in fields.as_object().into_iter().flatten() {
            line[key] = value.clone();
        }
        self.lines.push(line);
        self
    }

    /// `task.started` of `id`'s `attempt` at `ms`.
    pub fn started(&mut self, ms: u64, id: &str, attempt: u32, workspace_ms: Option<u64>) -> &mut Log {
        let mut fields = json!({"provider": "replay", "model": "m", "isolation": "none", "workdir": "/w", "base_commit": null});
        if let Some(w) = workspace_ms {
            fields["workspace_ms"] = json!(w);
        }
        self.event(ms, "task.started", Some((id, attempt)), fields)
    }

    /// `turn.completed` of `id`'s `attempt` at `ms`, the call having taken `duration_ms`.
    pub fn turn(&mut self, ms: u64, id: &str, attempt: u32, duration_ms: u64) -> &mut Log {
        let fields = json!({"turn": 1, "stop_reason": "end_turn", "usage": {}, "duration_ms": duration_ms});
        self.event(ms, "turn.completed", Some((id, attempt)), fields)
    }

    /// `task.finished` of `id`'s `attempt` at `ms` with `outcome` (see [`outcome`]).
    pub fn finished(&mut self, ms: u64, id: &str, attempt: u32, outcome: Value) -> &mut Log {
        self.event(ms, "task.finished", Some((id, attempt)), outcome)
    }

    /// `run.finished` at `ms`.
    pub fn run_finished(&mut self, ms: u64) -> &mut Log {
        let counts = json!({"passed": 0, "failed": 0, "error": 0, "not_configured": 0, "max_iterations": 0, "timeout": 0,
            "stalled": 0, "budget_exceeded": 0, "cancelled": 0, "skipped": 0});
        let fields = json!({"counts": counts, "usage": {}, "total_cost_usd": 0.5, "duration_ms": ms, "exit_code": 1});
        self.event(ms, "run.finished", None, fields)
    }

    /// The lines as `results.jsonl` text.
    pub fn text(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// Writes `dir/results.jsonl`.
    pub fn write(&self, dir: &Path) {
        std::fs::write(dir.join("results.jsonl"), self.text()).unwrap();
    }

    /// A new folder holding `results.jsonl`.
    pub fn folder(&self) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        self.write(dir.path());
        dir
    }
}

/// The fields of a `task.finished` of the task at `index` that ended `status`.
pub fn outcome(index: usize, status: &str) -> Value {
    json!({
        "status": status, "is_error": status != "passed", "num_turns": 1, "duration_ms": 1000, "usage": {},
        "total_cost_usd": 0.25, "result": null, "files_changed": [], "diff_path": null, "check": null, "error": null,
        "attempts": 1, "flaky": false, "manifest": "tasks.toml", "index": index, "provider": "replay", "model": "m",
        "prior_attempts": []
    })
}

/// `outcome`'s `error` set to `kind` with `message`.
pub fn with_error(mut outcome: Value, kind: &str, message: &str) -> Value {
    outcome["error"] = json!({"kind": kind, "message": message});
    outcome
}
