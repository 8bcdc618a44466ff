//! `dracode sandbox --task ID MANIFEST…`: what one task's commands may read, write and reach,
//! resolved as `dracode run` would resolve it — so a user can see what a task gets before
//! running it.
//!
//! # Output (plain text, stable)
//! A few `key: value` lines (`task`, `mode`, `network`, `workspace`, `tmpdir`), then one section
//! per list — `read:`, `write:`, `hidden:`, `unix-sockets:`, `limits:`, `env:` — each followed by
//! its entries (`env:` holds the cache variables and `GIT_CONFIG_GLOBAL`), one a line, indented by two spaces, sorted;
//! each `read:` entry is followed by two spaces and its reason in parentheses (`/usr  (the
//! system)`, `/opt/x/lib  (the toolchain layout beside /opt/x/bin on PATH)`). A `warning:` line
//! before the lists says what a PATH entry opens, as `dracode run` warns. The workspace (except with
//! `isolation = "none"`) and the TMPDIR are made when the task runs: their names here hold the
//! placeholder `<pid>-<random>`, and the lines that mention them say so.

use super::owned_dir::{TASK_DIR_PREFIX, TASK_TEMP_PREFIX};
use super::spec::TaskSpec;
use super::task::{CommandLayout, SharedPaths, command_policy};
use super::workspace::SandboxPaths;
use crate::manifest::Isolation;
use dracode_sandbox::Policy;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The placeholder for the parts of a folder name only known when the task runs.
const PLACEHOLDER: &str = "<pid>-<random>";

/// The report for `spec`, run with dracode's environment `env` and `--out out`.
pub fn describe(spec: &TaskSpec, env: &BTreeMap<String, String>, out: &Path) -> String {
    let temp = std::env::temp_dir();
    let tmp_dir = temp.join(format!("{TASK_TEMP_PREFIX}{PLACEHOLDER}")).join("tmp");
    let made_later = spec.workspace.isolation != Isolation::None;
    let root = if made_later { temp.join(format!("{TASK_DIR_PREFIX}{PLACEHOLDER}")).join("ws") } else { spec.workspace.repo.clone() };
    let paths = SandboxPaths::planned(&spec.workspace.repo, spec.workspace.isolation, &root);
    let workspace = paths.writable.first().cloned().unwrap_or(root);
    let git_data = paths.readable.clone();
    let layout = CommandLayout { workspace: workspace.clone(), tmp_dir: tmp_dir.clone(), paths, proxy: None };
    let allowed = dracode_secrets::child_env(env.iter().map(|(k, v)| (k.clone(), v.clone())), &spec.env_passthrough, &spec.env);
    let policy = command_policy(spec, &layout, &allowed, &SharedPaths::new(Some(out), env));
    let mut caches = BTreeMap::new();
    if policy.is_enforced() {
        caches = dracode_sandbox::cache_vars(&tmp_dir, &allowed, spec.network.is_on());
        caches.insert(dracode_sandbox::GIT_CONFIG_VAR.into(), dracode_sandbox::git_config_path(&tmp_dir).display().to_string());
    }
    let runner_temp = env.get("RUNNER_TEMP").filter(|v| !v.is_empty()).map(PathBuf::from);
    let reads = dracode_sandbox::ReadSet::resolve(&allowed, runner_temp.as_deref());
    let mut why = reads.reasons;
    why.extend(git_data.into_iter().map(|p| (p, "the repository's objects the workspace borrows".to_string())));
    why.extend(spec.read_paths.iter().map(|p| (p.clone(), "read_paths".to_string())));
    why.insert(workspace.clone(), "the workspace".into());
    why.insert(tmp_dir, "the task's TMPDIR".into());
    let view = View { workspace: &workspace, made_later, caches: &caches, why: &why, warnings: &reads.warnings };
    render(spec, &policy, &view)
}

/// What [`render`] shows besides the policy.
struct View<'a> {
    workspace: &'a Path,
    made_later: bool,
    caches: &'a BTreeMap<String, String>,
    /// The reason of each readable path.
    why: &'a BTreeMap<PathBuf, String>,
    warnings: &'a [String],
}

fn render(spec: &TaskSpec, policy: &Policy, view: &View<'_>) -> String {
    let (workspace, made_later, caches) = (view.workspace, view.made_later, view.caches);
    let later = " (made when the task runs)";
    let mut text = String::new();
    let _ = writeln!(text, "task: {} ({})", spec.id, spec.manifest.display());
    let _ = writeln!(text, "mode: {}", policy.mode.as_str());
    let _ = writeln!(text, "network: {}", network(policy));
    let _ = writeln!(text, "workspace: {}{}", workspace.display(), if made_later { later } else { "" });
    let _ = writeln!(text, "tmpdir: {}{later}", policy.tmp_dir.as_deref().unwrap_or(Path::new("")).display());
    if !policy.is_enforced() {
        let _ = writeln!(text, "note: sandbox = \"off\": commands run unconfined, the lists below are not enforced");
    }
    for warning in view.warnings {
        let _ = writeln!(text, "warning: {warning}");
    }
    let writable: Vec<PathBuf> = policy.writable_roots().into_iter().map(Path::to_path_buf).collect();
    let reason = |p: &PathBuf| view.why.get(p).map_or("writable", String::as_str).to_string();
    section(&mut text, "read", policy.readable.iter().chain(&writable).map(|p| format!("{}  ({})", p.display(), reason(p))));
    section(&mut text, "write", policy.writable_roots().iter().map(|p| p.display().to_string()));
    section(&mut text, "hidden", policy.hidden.iter().map(|p| p.display().to_string()));
    section(&mut text, "unix-sockets", policy.unix_sockets.iter().map(|p| p.display().to_string()));
    section(&mut text, "limits", limits(&policy.limits));
    section(&mut text, "env", caches.iter().map(|(k, v)| format!("{k}={v}")));
    text
}

/// The network line: what the commands may reach.
fn network(policy: &Policy) -> String {
    match (policy.network, policy.proxy) {
        (true, _) => "all (network = true)".into(),
        (false, Some(proxy)) => format!("only through dracode's proxy at {proxy}"),
        (false, None) => "none".into(),
    }
}

/// One line per limit kind: its value, or `none`.
fn limits(limits: &dracode_sandbox::Limits) -> Vec<String> {
    let show = |v: Option<u64>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
    vec![
        format!("cpu_time_seconds={}", show(limits.cpu_time)),
        format!("file_size_bytes={}", show(limits.file_size)),
        format!("memory_bytes={}", show(limits.memory)),
        format!("open_files={}", show(limits.open_files)),
        format!("processes={}", show(limits.processes)),
    ]
}

/// `name:` and its entries, sorted, without duplicates, two spaces in.
fn section(text: &mut String, name: &str, entries: impl IntoIterator<Item = String>) {
    let mut entries: Vec<String> = entries.into_iter().collect();
    entries.sort();
    entries.dedup();
    let _ = writeln!(text, "{name}:");
    for entry in entries {
        let _ = writeln!(text, "  {entry}");
    }
}
