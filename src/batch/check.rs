//! A task's `check` command: run by `sh -c` in the task's working directory after the agent
//! (and before it, with `check_before`); the task passes only if it exits 0.

use crate::events::CheckRecord;
use dracode_sandbox::Policy;
use dracode_sandbox::process::{self, Spec};
use dracode_secrets::Redactor;
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
    pub reports: Option<&'a dracode_sandbox::incidents::ReportSink>,
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
            if finished.exit_code != Some(0) {
                // A check that failed where the sandbox refused it the network says so, as a
                // command of the agent's does (a name lookup included).
                tail.push_str(&crate::tools::run_command::network_note(&finished.reports));
            }
            CheckRecord {
                command: command.to_string(),
                exit_code: finished.exit_code,
                output_tail: tail,
                before: None,
                ..Default::default()
            }
        }
        Err(e) => CheckRecord {
            command: command.to_string(),
            exit_code: None,
            output_tail: format!("could not start `sh`: {e}"),
            before: None,
            ..Default::default()
        },
    }
}

/// Why `record` says nothing about the work it checked, if so: the disk the task's commands
/// write to (`confine`'s workspace and TMPDIR) is full now, as the check ends — whatever it
/// said, passed included, it ran where writes fail ([`crate::disk::full`]); or the check failed
/// because it could not run — a read the sandbox refused (`confine`), its command not found
/// (exit 127) or not executable (exit 126) — rather than because the work fell short. A refused
/// read counts only for a path its output names that exists, that dracode itself can open, and
/// that `confine` does not let commands read: printing a "Permission denied" line about a
/// readable path changes nothing.
pub fn could_not_run(record: &CheckRecord, confine: Option<&Policy>) -> Option<String> {
    if let Some(full) = confine.and_then(|policy| crate::disk::full(policy.writable.iter().chain(&policy.tmp_dir))) {
        return Some(format!("{full} when it ended, so what it found proves nothing"));
    }
    let code = record.exit_code.filter(|c| *c != 0)?;
    if let Some(path) = confine.and_then(|policy| refused_read(&record.output_tail, policy)) {
        return Some(path);
    }
    let named = |suffixes: &[&str]| shell_complaint(&record.output_tail, suffixes).map(|name| format!("`{name}`"));
    match code {
        127 => {
            // dash says `Permission denied` when a folder on PATH could not be searched.
            let name = named(&[": not found", ": command not found", ": No such file or directory", ": Permission denied"]);
            Some(format!("{} not found (exit 127)", name.unwrap_or_else(|| format!("a command of `{}`", record.command))))
        }
        126 => {
            let name = named(&[": Permission denied", ": cannot execute binary file", ": Is a directory"]);
            Some(format!("{} is not executable (exit 126)", name.unwrap_or_else(|| format!("a command of `{}`", record.command))))
        }
        _ => None,
    }
}

/// The program a shell's last complaint ending in one of `suffixes` names: `pytest` of
/// `sh: 1: pytest: not found` (dash) or `sh: line 1: pytest: command not found` (bash).
fn shell_complaint(output: &str, suffixes: &[&str]) -> Option<String> {
    output.lines().rev().find_map(|line| {
        let head = suffixes.iter().find_map(|s| line.trim_end().strip_suffix(s))?;
        let name = head.rsplit(": ").next()?.trim();
        (!name.is_empty()).then(|| name.to_string())
    })
}

/// How many of the check's last non-empty output lines are searched for a refused read.
const REFUSAL_LINES: usize = 20;

/// The message for the first absolute path that a "Permission denied" line among the last
/// [`REFUSAL_LINES`] of `output` names and that the sandbox really refuses: it exists, dracode
/// (unconfined) can open it, and `policy` does not let commands read it. Also said of an MCP
/// server that failed to start (its stderr is in `output`).
pub fn refused_read(output: &str, policy: &Policy) -> Option<String> {
    if !policy.is_enforced() {
        return None;
    }
    let denied = |line: &str| {
        let lower = line.to_ascii_lowercase();
        lower.contains("permission denied") || lower.contains("eacces") || lower.contains("permissionerror")
    };
    // Where the error that ended the check is: a refused read warned about earlier (git's
    // `unable to access '~/.config/git/ignore'`) did not stop the check.
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = &lines[lines.len().saturating_sub(REFUSAL_LINES)..];
    let path = (0..last.len()).filter(|&i| denied(last[i])).flat_map(|i| refused_paths(last, i)).find(|p| {
        // Devices are not what `read_paths` is for.
        !p.starts_with("/dev/") && openable(p) && !policy.may_read(p)
    })?;
    let folder = if path.is_dir() { path.clone() } else { path.parent().map_or(path.clone(), Path::to_path_buf) };
    let hidden = policy.hidden.iter().any(|h| path.starts_with(h) || h.canonicalize().is_ok_and(|h| path.starts_with(h)));
    Some(if hidden {
        format!("the sandbox refused it a read of `{}`, a path hidden from the task's commands", path.display())
    } else {
        format!(
            "the sandbox refused it a read of `{}`, outside what the task's commands may read (add `{}` to the task's `read_paths`)",
            path.display(),
            folder.display()
        )
    })
}

/// The paths a "Permission denied" line (`lines[at]`) is about: those it names, else — an error
/// chain, as cargo prints one (`error: failed to read `/x/Cargo.toml``, `Caused by:`, `Permission
/// denied (os error 13)`) — those of the nearest of the [`CHAIN_LINES`] lines before it that names one.
fn refused_paths(lines: &[&str], at: usize) -> Vec<std::path::PathBuf> {
    (at.saturating_sub(CHAIN_LINES)..=at).rev().map(|i| absolute_paths(lines[i])).find(|paths| !paths.is_empty()).unwrap_or_default()
}

/// How far back (in non-empty lines) a "Permission denied" line that names no path looks for the
/// path its error chain is about.
const CHAIN_LINES: usize = 3;

/// The absolute paths in `line`: each `/…` that starts the line or follows a space, a quote or
/// `(`, up to a space, a quote, `:`, `,` or `)`.
fn absolute_paths(line: &str) -> Vec<std::path::PathBuf> {
    let mut paths = Vec::new();
    let bytes = line.as_bytes();
    for (i, _) in line.match_indices('/') {
        if i > 0 && !matches!(bytes[i - 1], b' ' | b'\'' | b'"' | b'`' | b'(' | b'\t') {
            continue;
        }
        let rest = &line[i..];
        let end = rest.find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ':' | ',' | ')')).unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches('.');
        if path.len() > 1 {
            paths.push(std::path::PathBuf::from(path));
        }
    }
    paths
}

/// Whether dracode, unconfined, can open `path` for reading (a regular file or a folder): then
/// what refused the check was the sandbox, not the file's mode.
fn openable(path: &Path) -> bool {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => std::fs::read_dir(path).is_ok(),
        Ok(m) if m.is_file() => std::fs::File::open(path).is_ok(),
        _ => false,
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

    fn record(exit_code: i32, output: &str) -> CheckRecord {
        CheckRecord {
            command: "pytest -q".into(),
            exit_code: Some(exit_code),
            output_tail: output.into(),
            before: None,
            ..Default::default()
        }
    }

    #[test]
    fn a_command_not_found_or_not_executable_is_named_by_the_shell_line() {
        let dash = record(127, "sh: 1: pytest: not found\n");
        assert_eq!(could_not_run(&dash, None).as_deref(), Some("`pytest` not found (exit 127)"));
        let bash = record(127, "sh: line 1: pytest: command not found\n");
        assert_eq!(could_not_run(&bash, None).as_deref(), Some("`pytest` not found (exit 127)"));
        let unsearchable = record(127, "/usr/bin/sh: 1: pytest: Permission denied\n");
        assert_eq!(could_not_run(&unsearchable, None).as_deref(), Some("`pytest` not found (exit 127)"));
        let silent = record(127, "");
        assert_eq!(could_not_run(&silent, None).as_deref(), Some("a command of `pytest -q` not found (exit 127)"));
        let script = record(126, "sh: 1: ./run.sh: Permission denied\n");
        assert_eq!(could_not_run(&script, None).as_deref(), Some("`./run.sh` is not executable (exit 126)"));
        for ran in [record(1, "sh: 1: pytest: not found\n"), record(0, ""), record(2, "Permission denied: /x")] {
            assert_eq!(could_not_run(&ran, None), None, "{ran:?}");
        }
    }

    #[test]
    fn a_refused_read_counts_only_for_an_existing_path_the_policy_does_not_grant() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (ws, outside) = (root.join("ws"), root.join("venv"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(outside.join("lib")).unwrap();
        std::fs::write(outside.join("lib/site.py"), "").unwrap();
        let mut policy = Policy::for_workspace(dracode_sandbox::SandboxMode::WorkspaceWrite, &ws, None);
        let site = outside.join("lib/site.py").display().to_string();
        let python = record(1, &format!("PermissionError: [Errno 13] Permission denied: '{site}'\n"));
        let why = could_not_run(&python, Some(&policy)).expect("a refused read");
        assert!(
            why.contains(&format!("`{site}`"))
                && why.contains(&format!("add `{}` to the task's `read_paths`", outside.join("lib").display())),
            "{why}"
        );
        let cat = record(1, &format!("cat: {site}: Permission denied\n"));
        assert!(could_not_run(&cat, Some(&policy)).is_some());
        for other in ["/usr/bin/env", &outside.join("missing.py").display().to_string()] {
            let fake = record(1, &format!("PermissionError: [Errno 13] Permission denied: '{other}'\n"));
            assert_eq!(could_not_run(&fake, Some(&policy)), None, "{other}");
        }
        let cargo = record(101, &format!("error: failed to read `{site}`\n\nCaused by:\n  Permission denied (os error 13)\n"));
        assert!(could_not_run(&cargo, Some(&policy)).is_some_and(|w| w.contains(&format!("`{site}`"))), "cargo's error chain");
        let far = record(101, &format!("error: failed to read `{site}`\na\nb\nc\nPermission denied (os error 13)\n"));
        assert_eq!(could_not_run(&far, Some(&policy)), None, "a path four lines before is another error's");
        let early = record(1, &format!("cat: {site}: Permission denied\n{}", "FAILED test_x\n".repeat(REFUSAL_LINES)));
        assert_eq!(could_not_run(&early, Some(&policy)), None, "a refusal long before the end did not stop the check");
        policy.readable.push(outside.clone());
        assert_eq!(could_not_run(&python, Some(&policy)), None, "granted by read_paths");
        policy.hidden.push(outside.join("lib"));
        assert!(could_not_run(&python, Some(&policy)).is_some_and(|w| w.contains("hidden")), "hidden inside a granted tree");
        policy.mode = dracode_sandbox::SandboxMode::Off;
        assert_eq!(could_not_run(&python, Some(&policy)), None, "nothing is refused without a sandbox");
    }
}
