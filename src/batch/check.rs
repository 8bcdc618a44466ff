//! A task's `check` command: run by `sh -c` in the task's working directory after the agent
//! (and before it, with `check_before`); the task passes only if it exits 0.

use crate::events::CheckRecord;
use crate::process::{self, Spec};
use crate::secrets::Redactor;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Bytes of check output kept in the record (the tail matters most: where the error is).
const CHECK_OUTPUT_LIMIT: usize = 8 * 1024;

/// Runs `command` in `cwd` and records how it ended.
pub async fn run(command: &str, cwd: &Path, timeout: Duration, env: &BTreeMap<String, String>, redactor: &Redactor) -> CheckRecord {
    let args = vec!["-c".to_string(), command.to_string()];
    let spec = Spec { program: "sh", args: &args, cwd, env, tmp_dir: None, timeout, output_limit: CHECK_OUTPUT_LIMIT, confine: None };
    match process::run(&spec).await {
        Ok(finished) => {
            let mut tail = redactor.redact(&finished.output).into_owned();
            if finished.timed_out || finished.exit_code.is_none() {
                tail.push_str(&format!("\n[{}]", finished.status_line(timeout)));
            }
            CheckRecord { command: command.to_string(), exit_code: finished.exit_code, output_tail: tail, before: None }
        }
        Err(e) => {
            CheckRecord { command: command.to_string(), exit_code: None, output_tail: format!("could not start `sh`: {e}"), before: None }
        }
    }
}
