//! The commands that show what a run would do: `list`, `tools --task`, `sandbox`, `providers`, `config`.

use super::{ConfigFormat, ListFormat, config_files_line, usage_error};
use crate::batch::options::NoTasks;
use crate::batch::plan;
use crate::config::Config;
use dracode_results::exit_codes;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `dracode tools --task ID MANIFEST`: the tools task `ID` is offered, each with its policy
/// (`allow`: true, false or command rules; `deny`; `allowed_hosts`), as JSON.
pub(super) fn task_tools(
    id: &str,
    manifests: &[PathBuf],
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let task = match find_task(id, manifests, config, cwd, env) {
        Ok(task) => task,
        Err(code) => return code,
    };
    let tools: Vec<serde_json::Value> = task
        .tools
        .iter()
        .map(|name| {
            let mut entry = serde_json::json!({ "name": name });
            if let (Some(entry), serde_json::Value::Object(rule)) = (entry.as_object_mut(), task.policy.describe(name)) {
                entry.extend(rule);
            }
            entry
        })
        .collect();
    let shown = serde_json::json!({ "task": task.id, "network": task.network, "on_denied": task.policy.on_denied, "tools": tools });
    println!("{}", serde_json::to_string_pretty(&shown)?);
    Ok(exit_codes::OK)
}

/// `dracode sandbox --task ID`: what the task's commands may read, write and reach.
pub(super) fn task_sandbox(
    id: &str,
    manifests: &[PathBuf],
    out: &Path,
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let task = match find_task(id, manifests, config, cwd, env) {
        Ok(task) => task,
        Err(code) => return code,
    };
    print!("{}", crate::batch::sandbox_view::describe(&task, env, &cwd.join(out)));
    Ok(exit_codes::OK)
}

/// Task `id` of `manifests`, resolved as `validate` resolves it; `Err` holds the exit of a
/// usage error already reported (the manifests are invalid, or no task has that id).
pub(super) fn find_task(
    id: &str,
    manifests: &[PathBuf],
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> Result<crate::batch::spec::TaskSpec, anyhow::Result<i32>> {
    let (tasks, _) = plan::validate(manifests, config, cwd, env).map_err(|e| usage_error(&e))?;
    let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
    tasks
        .into_iter()
        .find(|t| t.id == id)
        .ok_or_else(|| usage_error(&format!("no task {id:?} in the manifest(s); tasks: {}", ids.join(", "))))
}

/// `dracode list`: the tasks that would run, one id a line or one JSON object a line.
pub(super) fn list(
    manifests: &[PathBuf],
    filter: &[String],
    shard: Option<&str>,
    format: ListFormat,
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let listing = match plan::list(manifests, filter, shard, cwd, config, env) {
        Ok(t) => t,
        Err(e) => return usage_error(&e),
    };
    let mut out = std::io::stdout().lock();
    for listed in &listing.tasks {
        let task = &listed.task;
        match format {
            ListFormat::Text => writeln!(out, "{}", task.id)?,
            ListFormat::Json => writeln!(
                out,
                "{}",
                serde_json::json!({
                    "id": task.id,
                    "manifest": task.manifest,
                    "tags": task.fields.tags.clone().unwrap_or_default(),
                    "provider": listed.provider,
                    "model": listed.model,
                })
            )?,
        }
    }
    // As `run` without --no-tasks: an empty selection is exit 4, an empty shard a warning.
    let Some(why) = &listing.selected_nothing else { return Ok(exit_codes::OK) };
    match NoTasks::resolve(None, listing.sharded) {
        NoTasks::Fail => {
            eprintln!("error: no task selected: {why}. Exit code 4");
            Ok(exit_codes::NO_TASKS)
        }
        _ => {
            eprintln!("warning: no task selected: {why}; nothing to list");
            Ok(exit_codes::OK)
        }
    }
}

/// `dracode providers`: each provider, its type, model, endpoint and whether it is configured.
pub(super) fn providers(config: Option<&Path>, cwd: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    let config = match Config::load(cwd, config, env) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    println!("{:<12} {:<10} {:<24} {:<44} STATUS", "NAME", "TYPE", "MODEL", "ENDPOINT");
    for name in config.provider_names() {
        let Ok(p) = config.resolve_provider(&name, None, env) else { continue };
        let status = match p.not_configured_reason() {
            None => "configured".to_string(),
            Some(why) => format!("not configured: {why}"),
        };
        println!(
            "{:<12} {:<10} {:<24} {:<44} {status}",
            name,
            p.kind.as_str(),
            p.model.as_deref().unwrap_or("-"),
            p.base_url.as_deref().unwrap_or("-"),
        );
    }
    Ok(exit_codes::OK)
}

/// `dracode config`: the config files in use (found as [`Config::load_for`] finds them) and
/// the default provider, its type and model.
pub(super) fn show_config(
    manifests: &[PathBuf],
    format: ConfigFormat,
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let config = match Config::load_for(cwd, manifests, config, env) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let name = config.provider_name(None, None);
    let provider = match config.resolve_provider(name, None, env) {
        Ok(p) => p,
        Err(e) => return usage_error(&e),
    };
    match format {
        ConfigFormat::Json => {
            let shown = serde_json::json!({
                "files": config.files,
                "provider": name,
                "type": provider.kind.as_str(),
                "model": provider.model,
            });
            println!("{shown}");
        }
        ConfigFormat::Text => {
            println!("config:   {}", config_files_line(&config.files));
            println!("provider: {name} ({})", provider.kind.as_str());
            println!("model:    {}", provider.model.as_deref().unwrap_or("-"));
        }
    }
    Ok(exit_codes::OK)
}
