//! The neutral tree of a manifest typed part by part, so that one pass names every problem: a
//! wrong type in one task (or one field of it) does not hide another task's, `[setup]`'s or
//! `[defaults]`'s. A table of fields (`[defaults]`, each task, `[setup]`, `[issues]`) is typed
//! whole when it can be, else key by key to find each of its wrong fields; a task that does not
//! type is kept (its id, when it has one, for the id checks) and marked broken.

use super::ManifestError;
use super::fields::{IssuesFields, ManifestFile, SetupFields, TaskFields};
use super::locate::Locator;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeSet;

/// A manifest typed: what typed, and the tasks (by index) that did not.
pub(super) struct Typed {
    /// The file; a broken task holds only its id.
    pub file: ManifestFile,
    /// The indexes of the tasks that did not type.
    pub broken_tasks: BTreeSet<usize>,
}

/// Types `tree`, pushing every unknown key and every wrong type; `None` when the tree is not a
/// table at all.
pub(super) fn typed_file(ctx: &Locator<'_>, tree: &Value, errors: &mut Vec<ManifestError>) -> Option<Typed> {
    let Some(top) = tree.as_object() else {
        errors.push(ctx.at_key("", "a manifest is a table of `[defaults]`, `[[tasks]]`, … at its top level".into()));
        return None;
    };
    let mut typed = Typed { file: ManifestFile::default(), broken_tasks: BTreeSet::new() };
    for (key, value) in top {
        let file = &mut typed.file;
        match key.as_str() {
            "defaults" => file.defaults = table(ctx, "defaults", value, errors).unwrap_or_default(),
            "setup" => file.setup = table::<SetupFields>(ctx, "setup", value, errors).map(Some).unwrap_or_default(),
            "issues" => file.issues = table::<IssuesFields>(ctx, "issues", value, errors).map(Some).unwrap_or_default(),
            "mcp_servers" => file.mcp_servers = whole(ctx, "mcp_servers", value, errors).unwrap_or_default(),
            "tasks" => match value.as_array() {
                Some(tasks) => {
                    for (i, task) in tasks.iter().enumerate() {
                        let typed_task = table::<TaskFields>(ctx, &format!("tasks[{i}]"), task, errors);
                        if typed_task.is_none() {
                            typed.broken_tasks.insert(i);
                        }
                        let id = task.get("id").and_then(Value::as_str).map(str::to_string);
                        typed.file.tasks.push(typed_task.unwrap_or(TaskFields { id, ..TaskFields::default() }));
                    }
                }
                None => errors.push(ctx.at_key("tasks", "`tasks` is a list of task tables (`[[tasks]]`)".into())),
            },
            _ => errors.push(ctx.unknown_field(key)),
        }
    }
    Some(typed)
}

/// A table of fields at `prefix`: typed whole, else each key on its own to name every wrong
/// field. Unknown keys are pushed either way.
fn table<T: DeserializeOwned>(ctx: &Locator<'_>, prefix: &str, value: &Value, errors: &mut Vec<ManifestError>) -> Option<T> {
    let Some(keys) = value.as_object() else { return whole(ctx, prefix, value, errors) };
    let mut unknown = Vec::new();
    if let Ok(typed) = deserialize::<T>(value, &mut unknown) {
        push_unknown(ctx, prefix, &unknown, errors);
        return Some(typed);
    }
    for (key, field) in keys {
        let mut unknown = Vec::new();
        let one = serde_json::json!({ key: field });
        if let Err(e) = deserialize::<T>(&one, &mut unknown) {
            errors.push(ctx.at_key(&join(prefix, &e.path().to_string()), e.into_inner().to_string()));
        }
        push_unknown(ctx, prefix, &unknown, errors);
    }
    None
}

/// A value at `prefix` typed whole: its first wrong type and every unknown key are pushed.
fn whole<T: DeserializeOwned>(ctx: &Locator<'_>, prefix: &str, value: &Value, errors: &mut Vec<ManifestError>) -> Option<T> {
    let mut unknown = Vec::new();
    let typed = deserialize::<T>(value, &mut unknown);
    push_unknown(ctx, prefix, &unknown, errors);
    match typed {
        Ok(typed) => Some(typed),
        Err(e) => {
            errors.push(ctx.at_key(&join(prefix, &e.path().to_string()), e.into_inner().to_string()));
            None
        }
    }
}

/// `value` as `T`, the paths of keys `T` does not know added to `unknown`.
fn deserialize<T: DeserializeOwned>(value: &Value, unknown: &mut Vec<String>) -> Result<T, serde_path_to_error::Error<serde_json::Error>> {
    let mut on_unknown = |p: serde_ignored::Path<'_>| unknown.push(p.to_string());
    serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut on_unknown))
}

fn push_unknown(ctx: &Locator<'_>, prefix: &str, unknown: &[String], errors: &mut Vec<ManifestError>) {
    for key in unknown {
        errors.push(ctx.unknown_field(&join(prefix, key)));
    }
}

/// `prefix.path`, or either alone (serde's path of the value itself is `.`).
fn join(prefix: &str, path: &str) -> String {
    match path.trim_matches('.') {
        "" => prefix.to_string(),
        path if path.starts_with('[') => format!("{prefix}{path}"),
        path => format!("{prefix}.{path}"),
    }
}
