//! A task's `check` command: run by `sh -c` in the task's working directory after the agent
//! (and before it, with `check_before`); the task passes only if it exits 0.

use crate::events::CheckRecord;
use crate::process::{self, Spec};
use crate::sandbox::Policy;
use crate::secrets::Redactor;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Bytes of check output kept in the record (the tail matters most: where the error is).
const CHECK_OUTPUT_LIMIT: usize = 8 * 1024;

/// Where and how a check runs: the task's command environment, TMPDIR and confinement.
#[derive(Clone, Copy)]
pub struct CheckContext<'a> {
    /// The whole environment of the command.
    pub env: &'a BTreeMap<String, String>,
    /// The task's TMPDIR.
    pub tmp_dir: Option<&'a Path>,
    /// The task's sandbox (`None`: unconfined).
    pub confine: Option<&'a Policy>,
    /// Masks secrets in the recorded output.
    pub redactor: &'a Redactor,
    /// Where the sandbox's reports about the check go (the task's sink).
    pub reports: Option<&'a crate::sandbox::report::ReportSink>,
}

/// `output` with the temporary folder the check ran in (`/tmp/dracode-workspace-…/ws/`) taken
/// out of its paths, so they read as in the user's repository (`tests/test_calc.py`).
fn relative_paths(output: &str, cwd: &Path) -> String {
    let mut text = output.to_string();
    let real = cwd.canonicalize().ok();
    for dir in std::iter::once(cwd).chain(real.as_deref()) {
        let dir = dir.to_string_lossy();
        if dir.len() > 1 {
            text = text.replace(&format!("{dir}/"), "").replace(dir.as_ref(), ".");
        }
    }
    text
}

/// Runs `command` in `cwd` and records how it ended.
pub async fn run(command: &str, cwd: &Path, timeout: Duration, ctx: CheckContext<'_>) -> CheckRecord {
    let args = vec!["-c".to_string(), command.to_string()];
    let CheckContext { env, tmp_dir, confine, redactor, reports } = ctx;
    let spec = Spec { program: "sh", args: &args, cwd, env, tmp_dir, timeout, output_limit: CHECK_OUTPUT_LIMIT, confine };
    match process::run(&spec).await {
        Ok(finished) => {
            if let Some(sink) = reports {
                sink.extend(finished.reports.iter().cloned());
            }
            let mut tail = relative_paths(&redactor.redact(&finished.output), cwd);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_folder_is_taken_out_of_output_paths() {
        let cwd = Path::new("/tmp/dracode-workspace-1-x/ws");
        let output = "File \"/tmp/dracode-workspace-1-x/ws/tests/test_calc.py\", line 3\nin /tmp/dracode-workspace-1-x/ws\n";
        assert_eq!(relative_paths(output, cwd), "File \"tests/test_calc.py\", line 3\nin .\n");
    }
}
