//! Task manifests: TOML, YAML or JSON with one schema.
//!
//! Loading is two steps: the file is parsed into a neutral JSON tree (syntax errors carry the
//! format's own line and column), then typed from that tree, collecting *every* problem —
//! unknown fields with a did-you-mean, wrong types, duplicate ids, missing prompts — each
//! named by file, line, task and field ([`ManifestError`]).

mod fields;
mod locate;

pub use fields::{Isolation, TaskFields};

use crate::duration;
use fields::{FIELD_NAMES, ManifestFile};
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The on-disk format of a manifest, chosen by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.toml`
    Toml,
    /// `.yaml` / `.yml`
    Yaml,
    /// `.json`
    Json,
}

impl Format {
    /// The format for `path`'s extension.
    pub fn of(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "toml" => Some(Format::Toml),
            "yaml" | "yml" => Some(Format::Yaml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

/// One problem in a manifest, located as precisely as the format allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    /// The manifest file.
    pub file: PathBuf,
    /// 1-based line and column, when known.
    pub position: Option<(usize, usize)>,
    /// The task id (or `#N` for a task without a valid id).
    pub task: Option<String>,
    /// The field at fault.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        write!(f, ": ")?;
        if let Some(task) = &self.task {
            if task.starts_with('#') {
                write!(f, "task {task}: ")?;
            } else {
                write!(f, "task {task:?}: ")?;
            }
        }
        write!(f, "{}", self.message)
    }
}

/// Every problem found in one or more manifests.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
pub struct ManifestErrors(pub Vec<ManifestError>);

/// A task with its manifest defaults merged in and its paths resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Unique id, `[A-Za-z0-9._-]+`.
    pub id: String,
    /// Position in the run (manifest order, then task order).
    pub index: usize,
    /// The manifest it came from (as given on the command line).
    pub manifest: PathBuf,
    /// The prompt text (from `prompt` or `prompt_file`).
    pub prompt: String,
    /// Every other setting, defaults merged, relative paths made absolute.
    pub fields: TaskFields,
}

impl Task {
    /// The per-task wall-clock limit.
    pub fn timeout(&self) -> Option<Duration> {
        self.fields.timeout.as_deref().and_then(|t| duration::parse(t).ok())
    }
}

/// A loaded manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The file.
    pub path: PathBuf,
    /// Its tasks, defaults merged.
    pub tasks: Vec<Task>,
}

/// Loads a manifest, returning every problem in it.
pub fn load(path: &Path) -> Result<Manifest, ManifestErrors> {
    load_with(path, &TaskFields::default())
}

/// Loads a manifest whose tasks inherit `base` (config-file defaults) under the manifest's own
/// `[defaults]`.
pub fn load_with(path: &Path, base: &TaskFields) -> Result<Manifest, ManifestErrors> {
    let error = |message: String| {
        ManifestErrors(vec![ManifestError { file: path.to_path_buf(), position: None, task: None, field: None, message }])
    };
    let format = Format::of(path).ok_or_else(|| error("unknown manifest format: use a .toml, .yaml, .yml or .json file".to_string()))?;
    let text = std::fs::read_to_string(path).map_err(|e| error(format!("cannot read: {e}")))?;
    parse(path, &text, format, base)
}

/// Parses manifest `text` (the contents of `path`) in `format`.
pub fn parse(path: &Path, text: &str, format: Format, base: &TaskFields) -> Result<Manifest, ManifestErrors> {
    let tree = locate::parse_tree(path, text, format).map_err(|e| ManifestErrors(vec![e]))?;
    let ctx = locate::Locator { path, text, format, tree: &tree };
    let mut errors = Vec::new();

    let mut unknown = Vec::new();
    let typed: Result<ManifestFile, _> = {
        let mut on_unknown = |p: serde_ignored::Path<'_>| unknown.push(p.to_string());
        let de = serde_ignored::Deserializer::new(&tree, &mut on_unknown);
        serde_path_to_error::deserialize(de)
    };
    for key in &unknown {
        errors.push(ctx.unknown_field(key));
    }
    let file = match typed {
        Ok(file) => file,
        Err(e) => {
            let key = e.path().to_string();
            errors.push(ctx.at_key(&key, e.into_inner().to_string()));
            return Err(ManifestErrors(errors));
        }
    };

    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let defaults = base.clone().overlay(fields::resolve_paths(file.defaults.clone(), dir));
    for field in ["id", "prompt", "prompt_file"] {
        if file.defaults.is_set(field) {
            errors.push(ctx.at_key(&format!("defaults.{field}"), format!("`{field}` cannot be set in [defaults]; set it per task")));
        }
    }
    check_fields(&ctx, "defaults", &file.defaults, None, &mut errors);
    if file.tasks.is_empty() {
        errors.push(ManifestError {
            file: path.to_path_buf(),
            position: None,
            task: None,
            field: Some("tasks".into()),
            message: "no tasks: add at least one [[tasks]] entry with an id and a prompt".into(),
        });
    }

    let mut seen = HashSet::new();
    let mut tasks = Vec::with_capacity(file.tasks.len());
    for (i, raw) in file.tasks.iter().enumerate() {
        let key = format!("tasks[{i}]");
        let label = raw.id.clone().unwrap_or_else(|| format!("#{}", i + 1));
        let id_ok = match raw.id.as_deref() {
            None => {
                errors.push(ctx.task_error(i, &label, "id", "missing field \"id\"".into()));
                false
            }
            Some(id) if !valid_id(id) => {
                errors.push(ctx.task_error(i, &label, "id", format!("invalid id {id:?}: use letters, digits, '.', '_' and '-' only")));
                false
            }
            Some(id) if !seen.insert(id.to_string()) => {
                errors.push(ctx.task_error(i, &label, "id", format!("duplicate id {id:?}: task ids must be unique")));
                false
            }
            Some(_) => true,
        };
        check_fields(&ctx, &key, raw, Some((i, &label)), &mut errors);
        let merged = defaults.clone().overlay(fields::resolve_paths(raw.clone(), dir));
        let prompt = match (&raw.prompt, &merged.prompt_file) {
            (Some(_), Some(_)) if raw.prompt_file.is_some() => {
                errors.push(ctx.task_error(i, &label, "prompt_file", "set either `prompt` or `prompt_file`, not both".into()));
                None
            }
            (Some(p), _) if p.trim().is_empty() => {
                errors.push(ctx.task_error(i, &label, "prompt", "the prompt is empty".into()));
                None
            }
            (Some(p), _) => Some(p.clone()),
            (None, Some(file)) => match std::fs::read_to_string(file) {
                Ok(p) => Some(p),
                Err(e) => {
                    errors.push(ctx.task_error(i, &label, "prompt_file", format!("cannot read {}: {e}", file.display())));
                    None
                }
            },
            (None, None) => {
                errors.push(ctx.task_error(i, &label, "prompt", "missing field \"prompt\" (or \"prompt_file\")".into()));
                None
            }
        };
        if let (true, Some(prompt), Some(id)) = (id_ok, prompt, raw.id.clone()) {
            tasks.push(Task { id, index: i, manifest: path.to_path_buf(), prompt, fields: merged });
        }
    }
    if errors.is_empty() { Ok(Manifest { path: path.to_path_buf(), tasks }) } else { Err(ManifestErrors(errors)) }
}

/// Value checks serde cannot express: durations, tool names, numeric ranges.
fn check_fields(ctx: &locate::Locator<'_>, key: &str, fields: &TaskFields, task: Option<(usize, &str)>, errors: &mut Vec<ManifestError>) {
    let mut push = |field: &str, message: String| {
        errors.push(match task {
            Some((i, label)) => ctx.task_error(i, label, field, message),
            None => ctx.at_key(&format!("{key}.{field}"), message),
        })
    };
    for (field, value) in [("timeout", &fields.timeout), ("check_timeout", &fields.check_timeout), ("idle_timeout", &fields.idle_timeout)] {
        if let Some(value) = value
            && let Err(e) = duration::parse(value)
        {
            push(field, e);
        }
    }
    if let Some(tools) = &fields.tools {
        let known: Vec<&str> = crate::tools::builtin().iter().map(|t| t.name()).collect();
        for tool in tools {
            if !known.contains(&tool.as_str()) {
                push("tools", format!("unknown tool {tool:?}{}; known: {}", did_you_mean(tool, &known), known.join(", ")));
            }
        }
    }
    if fields.max_iterations == Some(0) {
        push("max_iterations", "must be at least 1".into());
    }
    if let Some(provider) = &fields.provider
        && provider.trim().is_empty()
    {
        push("provider", "is empty".into());
    }
}

/// `[A-Za-z0-9._-]+`
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// ` (did you mean "x"?)` when one of `candidates` is close to `word`, else empty.
pub fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(word, c), *c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| format!(" (did you mean {c:?}?)"))
        .unwrap_or_default()
}

/// The manifest's field names, for error messages and `dracode schema`.
pub fn field_names() -> &'static [&'static str] {
    FIELD_NAMES
}

/// The JSON Schema of a manifest file.
pub fn json_schema() -> serde_json::Value {
    schemars::schema_for!(ManifestFile).to_value()
}

/// Loads every manifest, numbering tasks across them in order; ids must be unique across files.
pub fn load_all(paths: &[PathBuf], base: &TaskFields) -> Result<Vec<Manifest>, ManifestErrors> {
    let mut manifests = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match load_with(path, base) {
            Ok(m) => manifests.push(m),
            Err(ManifestErrors(e)) => errors.extend(e),
        }
    }
    let mut owner: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut index = 0;
    for manifest in &mut manifests {
        for task in &mut manifest.tasks {
            task.index = index;
            index += 1;
            if let Some(first) = owner.insert(task.id.clone(), manifest.path.clone()) {
                errors.push(ManifestError {
                    file: manifest.path.clone(),
                    position: None,
                    task: Some(task.id.clone()),
                    field: Some("id".into()),
                    message: format!("duplicate id: already used in {}", first.display()),
                });
            }
        }
    }
    if errors.is_empty() { Ok(manifests) } else { Err(ManifestErrors(errors)) }
}

#[cfg(test)]
mod tests;
