//! `output = "findings"`: the built-in answer shape of review tasks, and where its file paths
//! point in the repository.

use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Component, Path, PathBuf};

/// How serious a finding is (SARIF's `level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A defect.
    Error,
    /// A likely problem.
    Warning,
    /// Worth a look.
    Note,
}

impl Severity {
    /// The lowercase name (also SARIF's `level` value).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// One finding as the model reports it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Finding {
    /// A short stable id of the kind of problem, e.g. `unsafe-block`.
    pub rule_id: String,
    /// What is wrong here.
    pub message: String,
    /// The file, relative to the task's working directory.
    pub file: String,
    /// First line, 1-based.
    pub start_line: u64,
    /// Last line, 1-based (the start line when absent).
    pub end_line: Option<u64>,
    /// First column, 1-based, when the model gives it.
    #[serde(default)]
    pub start_column: Option<u64>,
    /// The column after the problem's last character on its last line (SARIF's `endColumn`),
    /// when the model gives it.
    #[serde(default)]
    pub end_column: Option<u64>,
    /// How serious it is.
    pub severity: Severity,
}

/// The JSON Schema of a findings answer.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "findings": {
                "type": "array",
                "description": "Every problem found; empty when there is none.",
                "items": {
                    "type": "object",
                    "properties": {
                        "rule_id": {"type": "string", "minLength": 1, "pattern": "\\S", "description": "A short stable id of the kind of problem, e.g. unsafe-block"},
                        "message": {"type": "string", "minLength": 1, "pattern": "\\S", "description": "What is wrong here and why (not blank)"},
                        "file": {"type": "string", "minLength": 1, "description": "The file's path, relative to the working directory (as the tools take it)"},
                        "start_line": {"type": "integer", "minimum": 1, "description": "First line, 1-based"},
                        "end_line": {"type": "integer", "minimum": 1, "description": "Last line, 1-based"},
                        "start_column": {"type": "integer", "minimum": 1, "description": "First column, 1-based, when the problem is part of a line"},
                        "end_column": {"type": "integer", "minimum": 1, "description": "The column just after the problem's last character on its last line"},
                        "severity": {"type": "string", "enum": ["error", "warning", "note"]}
                    },
                    "required": ["rule_id", "message", "file", "start_line", "severity"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["findings"],
        "additionalProperties": false
    })
}

/// The findings of an answer already valid against [`schema`] (anything else gives none).
pub fn parse(answer: &Value) -> Vec<Finding> {
    answer.get("findings").and_then(|f| serde_json::from_value(f.clone()).ok()).unwrap_or_default()
}

/// Where a task's paths point: its working directory inside the workspace, and where the
/// workspace sits in its git repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathBase {
    /// The task's `workdir`, relative to the workspace root (empty: the root).
    pub workdir: PathBuf,
    /// The task's `repo` relative to the root of the git repository around it (empty when it
    /// is that root, or not in a repository).
    pub repo_in_git: PathBuf,
    /// The absolute working directory of the attempt, when known (`task.started`), so an
    /// absolute path inside it is accepted too.
    pub absolute_workdir: Option<PathBuf>,
}

impl PathBase {
    /// The base of a task working on `repo` with `workdir`.
    pub fn new(repo: &Path, workdir: &Path) -> Self {
        let repo_in_git = git2::Repository::discover(repo)
            .ok()
            .and_then(|r| r.workdir().and_then(|w| w.canonicalize().ok()))
            .and_then(|root| repo.canonicalize().ok().and_then(|repo| repo.strip_prefix(&root).ok().map(Path::to_path_buf)))
            .unwrap_or_default();
        PathBase { workdir: workdir.to_path_buf(), repo_in_git, absolute_workdir: None }
    }

    /// `file` (as the model gave it) relative to the repository root with `/` separators, or
    /// `None` when it is outside the workspace.
    pub fn repo_path(&self, file: &str) -> Option<String> {
        let path = Path::new(file);
        let relative = match (&self.absolute_workdir, path.is_absolute()) {
            (Some(root), true) => path.strip_prefix(root).ok()?.to_path_buf(),
            (None, true) => return None,
            (_, false) => path.to_path_buf(),
        };
        let in_workspace = normalize(&self.workdir.join(relative))?;
        if in_workspace.as_os_str().is_empty() {
            return None;
        }
        let full = self.repo_in_git.join(in_workspace);
        let parts: Vec<String> = full.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        Some(parts.join("/"))
    }
}

/// `path` without `.` and `..`, or `None` when it climbs above where it starts or is absolute.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_made_repository_relative_and_escapes_refused() {
        let base =
            PathBase { workdir: "crates/core".into(), repo_in_git: "sub".into(), absolute_workdir: Some("/tmp/ws/crates/core".into()) };
        assert_eq!(base.repo_path("src/lib.rs").as_deref(), Some("sub/crates/core/src/lib.rs"));
        assert_eq!(base.repo_path("./src/../src/a.rs").as_deref(), Some("sub/crates/core/src/a.rs"));
        assert_eq!(base.repo_path("../../README.md").as_deref(), Some("sub/README.md"));
        assert_eq!(base.repo_path("/tmp/ws/crates/core/x.rs").as_deref(), Some("sub/crates/core/x.rs"));
        for outside in ["../../../etc/passwd", "/etc/passwd", "../../..", "../.."] {
            assert_eq!(base.repo_path(outside), None, "{outside}");
        }
        let plain = PathBase::default();
        assert_eq!(plain.repo_path("a b/c.rs").as_deref(), Some("a b/c.rs"));
        assert_eq!(plain.repo_path("/abs.rs"), None);
    }

    #[test]
    fn a_valid_answer_parses_into_findings() {
        let answer = json!({"findings": [
            {"rule_id": "r1", "message": "m", "file": "a.rs", "start_line": 3, "severity": "warning"},
            {"rule_id": "r2", "message": "m2", "file": "b.rs", "start_line": 1, "end_line": 4, "severity": "error"}
        ]});
        assert!(jsonschema::is_valid(&schema(), &answer));
        let found = parse(&answer);
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].end_line, found[1].end_line, found[1].severity), (None, Some(4), Severity::Error));
        assert!(!jsonschema::is_valid(
            &schema(),
            &json!({"findings": [{"rule_id": "r", "message": "m", "file": "a", "start_line": 0, "severity": "bad"}]})
        ));
        let blank = json!({"findings": [{"rule_id": "r", "message": " \n\t", "file": "a", "start_line": 1, "severity": "note"}]});
        assert!(!jsonschema::is_valid(&schema(), &blank), "a blank message is refused");
    }
}
