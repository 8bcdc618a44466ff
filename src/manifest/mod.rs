//! Task manifests: TOML, YAML or JSON with one schema.
//!
//! Loading is two steps: the file is parsed into a neutral JSON tree (syntax errors carry the
//! format's own line and column), then typed from that tree, collecting *every* problem —
//! unknown fields with a did-you-mean, wrong types, duplicate ids, missing prompts — each
//! named by file, line, task and field ([`ManifestError`]).

mod fields;
pub mod issues;
mod locate;
mod typing;

pub use fields::{FIELD_CACHE_ROLES, FIELD_NAMES, Isolation, IssuesFields, SandboxMode, SetupFields, TaskFields};
pub(crate) use locate::line_col;

use dracode_input::duration;
use dracode_input::{did_you_mean, read_input};
use fields::ManifestFile;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

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

/// The longest task id: ids become file names (patches, transcripts), which most file systems
/// cap at 255 bytes, and a suffix such as `.patch` must still fit.
pub const MAX_ID_BYTES: usize = 200;

/// A task with its manifest defaults merged in and its paths resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Unique id, `[A-Za-z0-9._-]+`.
    pub id: String,
    /// Position in the run (manifest order, then task order).
    pub index: usize,
    /// The manifest it came from (as given on the command line).
    pub manifest: PathBuf,
    /// The 1-based line where the task begins in its manifest, when the format gives one.
    pub line: Option<usize>,
    /// The prompt text (from `prompt` or `prompt_file`).
    pub prompt: String,
    /// Every other setting, defaults merged, relative paths made absolute.
    pub fields: TaskFields,
    /// Its manifest's `[setup]`, shared by every task of the manifest.
    pub setup: Option<std::sync::Arc<SetupFields>>,
    /// The GitHub issue it was made from (a manifest's `[issues]`); `None` for a task written in
    /// the manifest.
    pub issue: Option<dracode_results::IssueOrigin>,
}

/// A loaded manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The file.
    pub path: PathBuf,
    /// Its tasks, defaults merged.
    pub tasks: Vec<Task>,
    /// Its `[issues]`: more tasks, read from GitHub when the run is planned.
    pub issues: Option<issues::IssueSource>,
}

/// Loads a manifest whose tasks inherit `base` (config-file defaults) under the manifest's own
/// `[defaults]`.
pub fn load_with(path: &Path, base: &TaskFields) -> Result<Manifest, ManifestErrors> {
    let error = |message: String| {
        ManifestErrors(vec![ManifestError { file: path.to_path_buf(), position: None, task: None, field: None, message }])
    };
    let format = Format::of(path).ok_or_else(|| error("unknown manifest format: use a .toml, .yaml, .yml or .json file".to_string()))?;
    let text = read_input(path).map_err(|e| error(e.to_string()))?;
    parse(path, &text, format, base)
}

/// Parses manifest `text` (the contents of `path`) in `format`.
pub fn parse(path: &Path, text: &str, format: Format, base: &TaskFields) -> Result<Manifest, ManifestErrors> {
    let (manifest, errors) = parse_partial(path, text, format, base);
    match manifest {
        Some(manifest) if errors.is_empty() => Ok(manifest),
        _ => Err(ManifestErrors(errors)),
    }
}

/// [`parse`], keeping what it can: the manifest with only its tasks that have no problem of
/// their own (`None` when it is not a table of fields at all), and every problem found.
pub fn parse_partial(path: &Path, text: &str, format: Format, base: &TaskFields) -> (Option<Manifest>, Vec<ManifestError>) {
    let tree = match locate::parse_tree(path, text, format) {
        Ok(tree) => tree,
        Err(e) => return (None, vec![e]),
    };
    let ctx = locate::Locator::new(path, text, format, &tree);
    let mut errors = Vec::new();
    // The neutral tree has no NaN or infinity (they become null), so look for them in the text.
    for (key, value) in locate::non_finite_numbers(text, format) {
        errors.push(ctx.at_key(&key, format!("{value} is not a finite amount of 0 or more")));
    }
    let Some(typing::Typed { file, broken_tasks }) = typed_file(&ctx, &tree, &mut errors) else { return (None, errors) };
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let top_servers = TaskFields { mcp_servers: Some(file.mcp_servers.clone()), ..TaskFields::default() };
    let defaults = base.clone().overlay(top_servers).overlay(fields::resolve_paths(file.defaults.clone(), dir));
    if file.tasks.is_empty() && file.issues.is_none() {
        errors.push(ManifestError {
            file: path.to_path_buf(),
            position: None,
            task: None,
            field: Some("tasks".into()),
            message: "no tasks: add at least one [[tasks]] entry with an id and a prompt (or an [issues] table)".into(),
        });
    }
    let setup = file.setup.clone().map(std::sync::Arc::new);
    let issues = file.issues.clone().map(|table| {
        let mut push =
            |field: &str, message: String| errors.push(ctx.at_key(&format!("issues.{field}"), format!("[issues] {field}: {message}")));
        issues::check(&table, &mut push);
        for (number, own) in &table.overrides {
            check_fields(own, &mut |field: &str, message: String| push(&format!("overrides.{number}.{field}"), message));
        }
        let line = ctx.at_key("issues", String::new()).position.map(|(line, _)| line);
        issues::IssueSource { manifest: path.to_path_buf(), line, fields: table, defaults: defaults.clone(), setup: setup.clone() }
    });
    if let Some(setup) = &setup {
        let mut push =
            |field: &str, message: String| errors.push(ctx.at_key(&format!("setup.{field}"), format!("[setup] {field}: {message}")));
        check_setup(setup, &mut push);
    }
    let mut seen = HashSet::new();
    let mut tasks = Vec::with_capacity(file.tasks.len());
    for (i, raw) in file.tasks.iter().enumerate() {
        let label = raw.id.clone().unwrap_or_else(|| format!("#{}", i + 1));
        let before = errors.len();
        let mut push = |field: &str, message: String| errors.push(ctx.task_error(i, &label, field, message));
        let id_ok = check_id(raw.id.as_deref(), &mut seen, &mut push);
        if broken_tasks.contains(&i) {
            // Its wrong types are named; its other checks wait for a task that types.
            continue;
        }
        check_fields(raw, &mut push);
        let merged = defaults.clone().overlay(fields::resolve_paths(raw.clone(), dir));
        check_input_paths(&merged, dir, &mut push);
        if let Err((field, message)) = crate::structured::OutputContract::from_fields(&merged.output_fields()) {
            push(field, message);
        }
        if let Some(id) = raw.id.as_deref().filter(|_| id_ok) {
            check_replay_recording(&merged, id, &mut push);
        }
        let prompt = task_prompt(raw, &merged, &mut push);
        if let (true, Some(prompt), Some(id), true) = (id_ok, prompt, raw.id.clone(), errors.len() == before) {
            let (manifest, line, setup) = (path.to_path_buf(), ctx.task_line(i), setup.clone());
            tasks.push(Task { id, index: i, manifest, line, prompt, fields: merged, setup, issue: None });
        }
    }
    (Some(Manifest { path: path.to_path_buf(), tasks, issues }), errors)
}

/// Types the neutral tree part by part ([`typing`]), pushing every unknown key, every wrong type
/// and the `[defaults]` problems; `None` when the tree is not a table.
fn typed_file(ctx: &locate::Locator<'_>, tree: &serde_json::Value, errors: &mut Vec<ManifestError>) -> Option<typing::Typed> {
    let typed = typing::typed_file(ctx, tree, errors)?;
    let file = &typed.file;
    for field in ["id", "prompt", "prompt_file"] {
        if file.defaults.is_set(field) {
            errors.push(ctx.at_key(&format!("defaults.{field}"), format!("`{field}` cannot be set in [defaults]; set it per task")));
        }
    }
    check_fields(&file.defaults, &mut |field: &str, message: String| errors.push(ctx.at_key(&format!("defaults.{field}"), message)));
    for (name, server) in &file.mcp_servers {
        for (key, message) in server.problems(name) {
            errors.push(ctx.at_key(&key, message));
        }
    }
    Some(typed)
}

/// Checks a config file's `[defaults]` (given as a JSON tree) like a manifest's: unknown keys,
/// identity fields and every value check. Errors name `file`; the config format gives no lines.
pub fn check_config_defaults(file: &Path, defaults: &serde_json::Value) -> Result<(), ManifestErrors> {
    let tree = serde_json::json!({ "defaults": defaults });
    let ctx = locate::Locator::new(file, "", Format::Json, &tree);
    let mut errors = Vec::new();
    typed_file(&ctx, &tree, &mut errors);
    for error in &mut errors {
        if !error.message.starts_with("[defaults]") {
            error.message = format!("[defaults] {}", error.message);
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ManifestErrors(errors)) }
}

/// Checks `[setup]`: a command that is not empty, a duration and a network that parse.
fn check_setup(setup: &SetupFields, push: &mut impl FnMut(&str, String)) {
    match setup.command.as_deref() {
        None => push("command", "missing: the command the setup runs once before the agents".into()),
        Some(command) if command.trim().is_empty() => push("command", "the setup command is empty".into()),
        Some(_) => {}
    }
    if let Some(Err(e)) = setup.timeout.as_deref().map(duration::parse_positive) {
        push("timeout", e.to_string());
    }
    if let Err(problems) = dracode_sandbox::egress::Network::from_field(setup.network.as_ref()) {
        for (field, message) in problems {
            push(&field, message.to_string());
        }
    }
}

/// Checks a task's id (present, well-formed, short enough, unique); true when it is usable.
fn check_id(id: Option<&str>, seen: &mut HashSet<String>, push: &mut impl FnMut(&str, String)) -> bool {
    let problem = match id {
        None => "missing field \"id\"".to_string(),
        Some(id) if !valid_id(id) => format!("invalid id {id:?}: use letters, digits, '.', '_' and '-' only"),
        Some(id) if id.len() > MAX_ID_BYTES => format!("the id is {} bytes; ids name files and may have at most {MAX_ID_BYTES}", id.len()),
        Some(id) if !seen.insert(id.to_string()) => format!("duplicate id {id:?}: task ids must be unique"),
        Some(_) => return true,
    };
    push("id", problem);
    false
}

/// The task's prompt, from `prompt` or `prompt_file`.
fn task_prompt(raw: &TaskFields, merged: &TaskFields, push: &mut impl FnMut(&str, String)) -> Option<String> {
    match (&raw.prompt, &merged.prompt_file) {
        (Some(_), Some(_)) if raw.prompt_file.is_some() => {
            push("prompt_file", "set either `prompt` or `prompt_file`, not both".into());
            None
        }
        (Some(p), _) if p.trim().is_empty() => {
            push("prompt", "the prompt is empty".into());
            None
        }
        (Some(p), _) => Some(p.clone()),
        (None, Some(file)) => read_input(file).map_err(|e| push("prompt_file", e.to_string())).ok(),
        (None, None) => {
            push("prompt", "missing field \"prompt\" (or \"prompt_file\")".into());
            None
        }
    }
}

/// Input files a task names (`prompt_file`, `replay`, `output_schema_file`) must be inside the manifest's folder
/// `dir` or the task's repo, so a shared manifest cannot make dracode read (and send to a
/// model) any file of the machine. Symlinks are followed before the comparison.
fn check_input_paths(fields: &TaskFields, dir: &Path, push: &mut impl FnMut(&str, String)) {
    if let Some(repo) = &fields.repo
        && !repo.is_dir()
    {
        push("repo", format!("{} is not a folder", repo.display()));
    }
    let roots: Vec<PathBuf> = [Some(dir), fields.repo.as_deref()].into_iter().flatten().filter_map(|r| r.canonicalize().ok()).collect();
    let inputs = [("prompt_file", &fields.prompt_file), ("replay", &fields.replay), ("output_schema_file", &fields.output_schema_file)];
    for (field, path) in inputs {
        let Some(path) = path else { continue };
        match path.canonicalize() {
            Ok(real) if !roots.iter().any(|root| real.starts_with(root)) => {
                push(field, format!("{} is outside the manifest's folder and the task's repo", path.display()));
            }
            Ok(real) if field == "replay" && !real.is_dir() => {
                if let Err(e) = read_input(&real) {
                    push(field, e.to_string());
                }
            }
            Ok(_) => {}
            Err(e) if field == "replay" => push(field, format!("cannot read {}: {e}", path.display())),
            Err(_) => {} // a missing prompt or schema file is reported when it is read
        }
    }
}

/// When `replay` is a folder, the task's own recording in it (`<id>.json`), if present, must be
/// a regular file within the size limit, as `run` will require when it reads it. A missing one
/// is not an error here: the task then ends `not_configured`, as documented.
fn check_replay_recording(fields: &TaskFields, id: &str, push: &mut impl FnMut(&str, String)) {
    let Some(folder) = fields.replay.as_deref().filter(|p| p.is_dir()) else { return };
    let file = folder.join(format!("{}.json", dracode_results::file_names::file_stem(id)));
    if std::fs::symlink_metadata(&file).is_ok()
        && let Err(e) = read_input(&file)
    {
        push("replay", e.to_string());
    }
}

/// Value checks serde cannot express: durations, tool names, numeric ranges, paths.
fn check_fields(fields: &TaskFields, push: &mut impl FnMut(&str, String)) {
    for (field, value) in [("timeout", &fields.timeout), ("check_timeout", &fields.check_timeout), ("idle_timeout", &fields.idle_timeout)] {
        if let Some(value) = value
            && let Err(e) = duration::parse_positive(value)
        {
            push(field, e.to_string());
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
    for (limit, message) in fields.limits.as_ref().map(dracode_sandbox::LimitFields::problems).unwrap_or_default() {
        push("limits", format!("{limit}: {message}"));
    }
    if let Some(policy) = &fields.policy
        && let Err(errors) = crate::tools::policy::Policy::compile(policy)
    {
        for (key, message) in errors {
            push("policy", format!("{key}: {message}"));
        }
    }
    for (name, server) in fields.mcp_servers.iter().flatten() {
        for (key, message) in server.problems(name) {
            push(&key, message);
        }
    }
    if fields.max_iterations == Some(0) {
        push("max_iterations", "must be at least 1".into());
    }
    if let Some(cost) = fields.max_cost_usd
        && !(cost.is_finite() && cost >= 0.0)
    {
        push("max_cost_usd", format!("{cost} is not a finite amount of 0 or more"));
    }
    if fields.max_context_tokens == Some(0) {
        push("max_context_tokens", "must be at least 1".into());
    }
    if let Some(fraction) = fields.compact_at
        && !(fraction > 0.0 && fraction <= 1.0)
    {
        push("compact_at", format!("{fraction} is not a fraction of the window in (0, 1]"));
    }
    if let Some(provider) = &fields.provider
        && provider.trim().is_empty()
    {
        push("provider", "is empty".into());
    }
    if let Some(workdir) = &fields.workdir
        && let Err(e) = check_relative_inside(workdir)
    {
        push("workdir", e);
    }
    for socket in fields.unix_sockets.iter().flatten() {
        if let Err(e) = check_socket_path(socket) {
            push("unix_sockets", e);
        }
    }
    let names = fields.env.iter().flat_map(|e| e.keys()).map(|k| ("env", k));
    for (field, name) in names.chain(fields.env_passthrough.iter().flatten().map(|n| ("env_passthrough", n))) {
        if name.is_empty() || name.contains(['=', '\0']) {
            push(field, format!("{name:?} is not a variable name"));
        }
    }
}

/// A `unix_sockets` entry names one socket file: not empty, no wildcard, not a folder.
fn check_socket_path(path: &Path) -> Result<(), String> {
    let text = path.to_string_lossy();
    if text.trim().is_empty() {
        return Err("an entry is empty: name a socket file".into());
    }
    if text.contains(['*', '?', '[']) {
        return Err(format!("{text:?}: wildcards are not supported; name each socket file"));
    }
    if text.ends_with('/') || path.file_name().is_none() {
        return Err(format!("{text:?} names a folder; name the socket file itself"));
    }
    Ok(())
}

/// `path` is relative and never climbs above where it starts (`a/../b` is fine, `../b` is not).
fn check_relative_inside(path: &Path) -> Result<(), String> {
    use std::path::Component;
    let mut depth = 0usize;
    for part in path.components() {
        match part {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir if depth > 0 => depth -= 1,
            Component::ParentDir => return Err(format!("{} leaves the workspace: it must stay inside it", path.display())),
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("{} is absolute: it must be relative to the workspace root", path.display()));
            }
        }
    }
    Ok(())
}

/// `[A-Za-z0-9._-]+`
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The JSON Schema of a manifest file. Every table with named fields is closed
/// (`additionalProperties: false`): dracode refuses an unknown key at every level, and an editor
/// that validates a manifest against the schema then flags a misspelt one too.
pub fn json_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(ManifestFile).to_value();
    close_tables(&mut schema);
    schema
}

/// Sets `additionalProperties: false` on every object schema with `properties` that says
/// nothing about other keys (maps such as `env` have no `properties` and stay open).
fn close_tables(schema: &mut serde_json::Value) {
    match schema {
        serde_json::Value::Object(map) => {
            if map.contains_key("properties") && !map.contains_key("additionalProperties") {
                map.insert("additionalProperties".into(), serde_json::Value::Bool(false));
            }
            map.values_mut().for_each(close_tables);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(close_tables),
        _ => {}
    }
}

/// Loads every manifest, numbering tasks across them in order; ids must be unique across files.
pub fn load_all(paths: &[PathBuf], base: &TaskFields) -> Result<Vec<Manifest>, ManifestErrors> {
    let (manifests, errors) = load_all_partial(paths, base);
    if errors.is_empty() { Ok(manifests) } else { Err(ManifestErrors(errors)) }
}

/// [`load_all`], keeping what it can: every manifest that parsed, with only its tasks that have
/// no problem of their own (for `validate`, which checks those further), and every problem.
pub fn load_all_partial(paths: &[PathBuf], base: &TaskFields) -> (Vec<Manifest>, Vec<ManifestError>) {
    let mut manifests = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        let error = |message: String| ManifestError { file: path.clone(), position: None, task: None, field: None, message };
        let Some(format) = Format::of(path) else {
            errors.push(error("unknown manifest format: use a .toml, .yaml, .yml or .json file".to_string()));
            continue;
        };
        match read_input(path) {
            Ok(text) => {
                let (manifest, found) = parse_partial(path, &text, format, base);
                manifests.extend(manifest);
                errors.extend(found);
            }
            Err(e) => errors.push(error(e.to_string())),
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
    (manifests, errors)
}

/// The tasks of `manifests`, each manifest's own followed by those of its `[issues]` (read from
/// GitHub with the token and repository `env` names), numbered in that order; and one line per
/// issue left out, for the run's warnings.
pub fn tasks_with_issues(manifests: Vec<Manifest>, env: &BTreeMap<String, String>) -> Result<(Vec<Task>, Vec<String>), ManifestErrors> {
    let own: std::collections::BTreeSet<String> = manifests.iter().flat_map(|m| m.tasks.iter().map(|t| t.id.clone())).collect();
    let (mut tasks, mut left_out, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    for manifest in manifests {
        tasks.extend(manifest.tasks);
        match manifest.issues.as_ref().map(|source| source.read(env, &own)) {
            Some(Ok(read)) => {
                tasks.extend(read.tasks);
                left_out.extend(read.left_out);
            }
            Some(Err(e)) => errors.push(e),
            None => {}
        }
    }
    for (index, task) in tasks.iter_mut().enumerate() {
        task.index = index;
    }
    if errors.is_empty() { Ok((tasks, left_out)) } else { Err(ManifestErrors(errors)) }
}

#[cfg(test)]
mod tests;
