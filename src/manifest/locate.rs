//! Finding where in a manifest's text a task or field is, so errors can say `file:line:col`.
//!
//! The typed data has no positions. TOML positions come from the `toml` parser's own spans (so
//! a `[[tasks]]` inside a multi-line string cannot shift them, and inline-table tasks have
//! them too); YAML and JSON positions are recovered from the text: each format's task
//! boundaries (YAML list items, JSON array objects) and then the field's key inside that task.

use super::fields::FIELD_NAMES;
use super::{Format, ManifestError};
use serde_json::Value;
use std::path::Path;

/// Parses `text` into a neutral tree, or a syntax error with the format's own position.
pub(super) fn parse_tree(path: &Path, text: &str, format: Format) -> Result<Value, ManifestError> {
    let syntax = |position: Option<(usize, usize)>, message: String| ManifestError {
        file: path.to_path_buf(),
        position,
        task: None,
        field: None,
        message: format!("syntax error: {message}"),
    };
    match format {
        Format::Toml => toml::from_str::<Value>(text).map_err(|e| {
            let position = e.span().map(|span| line_col(text, span.start));
            syntax(position, e.message().trim().to_string())
        }),
        Format::Json => serde_json::from_str::<UniqueKeys>(text)
            .and_then(|_| serde_json::from_str::<Value>(text))
            .map_err(|e| syntax(Some((e.line(), e.column())), e.to_string())),
        Format::Yaml => {
            if text.trim().is_empty() {
                return Ok(Value::Object(Default::default()));
            }
            // YAML 1.2 booleans only: `prompt: y` is the string "y", not `true`.
            let options = serde_saphyr::options! { strict_booleans: true };
            serde_saphyr::from_str_with_options::<Value>(text, options).map_err(|e| {
                let position = e.location().map(|l| (l.line() as usize, l.column() as usize));
                let message = e.to_string();
                syntax(position, message.lines().next().unwrap_or_default().to_string())
            })
        }
    }
}

/// A JSON document read only to refuse a key given twice in one object: serde_json would keep
/// the last value silently, where TOML and YAML refuse the document.
struct UniqueKeys;

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for UniqueKeys {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
            }
            map.next_value::<UniqueKeys>()?;
        }
        Ok(UniqueKeys)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
}

/// A document seen only for its numbers: the neutral JSON tree turns NaN and infinity into
/// null, so they are looked for in a second pass over the text.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Numbers {
    Float(f64),
    Map(std::collections::BTreeMap<String, Numbers>),
    Seq(Vec<Numbers>),
    Other(serde::de::IgnoredAny),
}

impl Numbers {
    fn non_finite(&self, path: &str, found: &mut Vec<(String, f64)>) {
        match self {
            Numbers::Float(f) if !f.is_finite() => found.push((path.to_string(), *f)),
            Numbers::Map(map) => {
                for (key, value) in map {
                    value.non_finite(&if path.is_empty() { key.clone() } else { format!("{path}.{key}") }, found);
                }
            }
            Numbers::Seq(items) => {
                for (i, value) in items.iter().enumerate() {
                    value.non_finite(&format!("{path}[{i}]"), found);
                }
            }
            Numbers::Float(_) | Numbers::Other(_) => {}
        }
    }
}

/// The key paths (`tasks[2].max_cost_usd`) and values of NaN and infinite numbers in `text`
/// (TOML only: JSON has none, and the YAML parser already refuses them as a syntax error).
pub(super) fn non_finite_numbers(text: &str, format: Format) -> Vec<(String, f64)> {
    let numbers = if format == Format::Toml { toml::from_str::<Numbers>(text).ok() } else { None };
    let mut found = Vec::new();
    if let Some(numbers) = numbers {
        numbers.non_finite("", &mut found);
    }
    found
}

/// 1-based line and column of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Where a table and its keys start in a TOML document (byte offsets from the parser's spans).
#[derive(Debug, Default)]
struct TomlSection {
    /// The table's header (`[defaults]`, `[[tasks]]`) or its `{` when inline.
    start: usize,
    /// Each key and where it is written.
    keys: Vec<(String, usize)>,
}

impl TomlSection {
    fn of(value: &toml::Spanned<toml::de::DeValue<'_>>) -> TomlSection {
        let keys = value.get_ref().as_table().map(|t| t.iter().map(|(k, _)| (k.get_ref().to_string(), k.span().start)).collect());
        TomlSection { start: value.span().start, keys: keys.unwrap_or_default() }
    }

    fn key(&self, name: &str) -> Option<usize> {
        self.keys.iter().find(|(k, _)| k == name).map(|(_, offset)| *offset)
    }
}

/// The positions of a TOML manifest's top-level keys, `[defaults]`, tasks, and the other
/// tables of fields (`[setup]`, `[issues]`).
#[derive(Debug, Default)]
struct TomlLayout {
    top: TomlSection,
    defaults: Option<TomlSection>,
    tasks: Vec<TomlSection>,
    tables: Vec<(String, TomlSection)>,
}

impl TomlLayout {
    /// The layout of `text`, empty when it does not parse (the syntax error is reported elsewhere).
    fn parse(text: &str) -> TomlLayout {
        let Ok(doc) = toml::de::DeTable::parse(text) else { return TomlLayout::default() };
        let mut layout = TomlLayout::default();
        for (key, value) in doc.get_ref() {
            layout.top.keys.push((key.get_ref().to_string(), key.span().start));
            match (key.get_ref().as_ref(), value.get_ref()) {
                ("defaults", _) => layout.defaults = Some(TomlSection::of(value)),
                ("tasks", toml::de::DeValue::Array(tasks)) => layout.tasks = tasks.iter().map(TomlSection::of).collect(),
                (name, toml::de::DeValue::Table(_)) => layout.tables.push((name.to_string(), TomlSection::of(value))),
                _ => {}
            }
        }
        layout
    }
}

/// Locates tasks and fields of one parsed manifest.
pub(super) struct Locator<'a> {
    /// The file.
    pub path: &'a Path,
    /// Its text.
    pub text: &'a str,
    /// Its format.
    pub format: Format,
    /// Its neutral tree.
    pub tree: &'a Value,
    /// The parser's positions, for TOML.
    toml: Option<TomlLayout>,
}

/// A key path such as `tasks[1].promt` or `tasks.1.promt`, split into segments.
fn segments(key: &str) -> Vec<&str> {
    key.split(['.', '[', ']']).filter(|s| !s.is_empty() && *s != "?").collect()
}

impl<'a> Locator<'a> {
    /// A locator for `text` (the contents of `path`), parsed as `tree`.
    pub fn new(path: &'a Path, text: &'a str, format: Format, tree: &'a Value) -> Self {
        let toml = (format == Format::Toml).then(|| TomlLayout::parse(text));
        Locator { path, text, format, tree, toml }
    }

    /// The 1-based line where task `i` (0-based) begins, when known.
    pub fn task_line(&self, i: usize) -> Option<usize> {
        self.task_start(i).map(|o| line_col(self.text, o).0)
    }

    /// An error for an unknown key, with a did-you-mean among the field names.
    pub fn unknown_field(&self, key: &str) -> ManifestError {
        /// The fields of `[setup]`.
        const SETUP_FIELDS: &[&str] = &["command", "timeout", "network", "env"];
        let segs = segments(key);
        let name = segs.last().copied().unwrap_or(key);
        /// The fields of `[issues]`.
        const ISSUES_FIELDS: &[&str] = &["label", "query", "repository", "token_env", "max", "overrides"];
        let hint = if segs.len() <= 1 {
            dracode_input::did_you_mean(name, &["defaults", "tasks", "setup", "mcp_servers", "issues"])
        } else if segs.len() == 2 && segs[0] == "setup" {
            dracode_input::did_you_mean(name, SETUP_FIELDS)
        } else if segs.len() == 2 && segs[0] == "issues" {
            dracode_input::did_you_mean(name, ISSUES_FIELDS)
        } else {
            dracode_input::did_you_mean(name, FIELD_NAMES)
        };
        let mut error = self.at_key(key, format!("unknown field {name:?}{hint}"));
        error.message = format!("unknown field {name:?}{hint}");
        error
    }

    /// An error about the value at `key` (a serde path).
    pub fn at_key(&self, key: &str, message: String) -> ManifestError {
        let segs = segments(key);
        match segs.as_slice() {
            ["tasks", index, field, ..] => {
                if let Ok(i) = index.parse::<usize>() {
                    return self.task_error(i, &self.label(i), field, message);
                }
            }
            ["tasks", index] => {
                if let Ok(i) = index.parse::<usize>() {
                    let position = self.task_start(i).map(|o| line_col(self.text, o));
                    return ManifestError { position, ..self.plain(Some(self.label(i)), None, message) };
                }
            }
            [table @ ("setup" | "issues"), field, ..] => {
                let start = self.top_key(table);
                let position = match &self.toml {
                    Some(layout) => layout.tables.iter().find(|(name, _)| name == table).and_then(|(_, t)| t.key(field)),
                    None => start.and_then(|s| self.find_key(s, self.text.len(), field)),
                }
                .or(start);
                let header = format!("[{table}]");
                let message = if message.starts_with(&header) || message.starts_with("unknown field") {
                    message
                } else {
                    format!("{header} field {field:?}: {message}")
                };
                return ManifestError {
                    position: position.map(|o| line_col(self.text, o)),
                    ..self.plain(None, Some(format!("{table}.{field}")), message)
                };
            }
            ["defaults", field, ..] => {
                let start = self.defaults_start();
                let position = match &self.toml {
                    Some(layout) => layout.defaults.as_ref().and_then(|d| d.key(field)),
                    None => start.and_then(|s| self.find_key(s, self.text.len(), field)),
                }
                .or(start);
                let message = format!("[defaults] field {field:?}: {message}");
                return ManifestError {
                    position: position.map(|o| line_col(self.text, o)),
                    ..self.plain(None, Some(field.to_string()), message)
                };
            }
            _ => {}
        }
        let field = segs.first().map(std::string::ToString::to_string);
        let position = field.as_deref().and_then(|f| match &self.toml {
            Some(layout) => layout.top.key(f),
            None => self.find_key(0, self.text.len(), f),
        });
        ManifestError { position: position.map(|o| line_col(self.text, o)), ..self.plain(None, field, message) }
    }

    /// An error about `field` of task number `i` (0-based), labelled `label`.
    pub fn task_error(&self, i: usize, label: &str, field: &str, message: String) -> ManifestError {
        let start = self.task_start(i);
        let position = match &self.toml {
            Some(layout) => layout.tasks.get(i).and_then(|t| t.key(field)),
            None => start.and_then(|s| self.find_key(s, self.task_start(i + 1).unwrap_or(self.text.len()), field)),
        }
        .or(start);
        let message = if message.contains(&format!("{field:?}")) || message.contains(&format!("`{field}`")) {
            message
        } else {
            format!("field {field:?}: {message}")
        };
        ManifestError {
            position: position.map(|o| line_col(self.text, o)),
            ..self.plain(Some(label.to_string()), Some(field.to_string()), message)
        }
    }

    fn plain(&self, task: Option<String>, field: Option<String>, message: String) -> ManifestError {
        ManifestError { file: self.path.to_path_buf(), position: None, task, field, message }
    }

    /// Task `i`'s id, or `#N` (1-based) when it has none.
    fn label(&self, i: usize) -> String {
        self.tree
            .get("tasks")
            .and_then(|t| t.get(i))
            .and_then(|t| t.get("id"))
            .and_then(Value::as_str)
            .map_or_else(|| format!("#{}", i + 1), str::to_string)
    }

    /// Byte offset where the `[defaults]` section begins.
    /// Byte offset of the top-level key `name` (a table's header, in TOML).
    fn top_key(&self, name: &str) -> Option<usize> {
        match &self.toml {
            Some(layout) => layout.tables.iter().find(|(n, _)| n == name).map(|(_, t)| t.start).or_else(|| layout.top.key(name)),
            None => self.find_key(0, self.text.len(), name),
        }
    }

    fn defaults_start(&self) -> Option<usize> {
        match &self.toml {
            Some(layout) => layout.defaults.as_ref().map(|d| d.start),
            None => self.find_key(0, self.text.len(), "defaults"),
        }
    }

    /// Byte offset where task `i` begins.
    fn task_start(&self, i: usize) -> Option<usize> {
        if let Some(layout) = &self.toml {
            return layout.tasks.get(i).map(|t| t.start);
        }
        match self.format {
            Format::Toml => None,
            Format::Yaml => {
                let tasks_line = self.find_key(0, self.text.len(), "tasks")?;
                let mut indent = None;
                line_offsets(self.text)
                    .filter(|(o, _)| *o > tasks_line)
                    .filter(|(_, line)| {
                        let trimmed = line.trim_start();
                        let this = line.len() - trimmed.len();
                        let is_item = trimmed.starts_with("- ") || trimmed == "-";
                        is_item && *indent.get_or_insert(this) == this
                    })
                    .nth(i)
                    .map(|(o, line)| o + (line.len() - line.trim_start().len()))
            }
            Format::Json => json_task_starts(self.text).into_iter().nth(i),
        }
    }

    /// Byte offset of `key` written as a key (`key =`, `key:`, `"key":`) in `text[start..end]`.
    fn find_key(&self, start: usize, end: usize, key: &str) -> Option<usize> {
        let region = &self.text[start..end.min(self.text.len())];
        let quoted = format!("\"{key}\"");
        let mut pos = 0;
        while pos < region.len() {
            let rest = &region[pos..];
            let (hit, len) = match (rest.find(key), rest.find(&quoted)) {
                (Some(a), Some(b)) if b < a => (b, quoted.len()),
                (Some(a), _) => (a, key.len()),
                (None, Some(b)) => (b, quoted.len()),
                (None, None) => return None,
            };
            let abs = pos + hit;
            let before = region[..abs].chars().next_back();
            let after = region[abs + len..].trim_start_matches([' ', '\t']).chars().next();
            let key_like = before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) && matches!(after, Some('=' | ':'));
            if key_like {
                return Some(start + abs);
            }
            pos = abs + len;
        }
        None
    }
}

/// Each line's byte offset and text.
fn line_offsets(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut offset = 0;
    text.split_inclusive('\n').map(move |line| {
        let start = offset;
        offset += line.len();
        (start, line.trim_end_matches(['\n', '\r']))
    })
}

/// Offsets of the objects directly inside the top-level `"tasks"` array of a JSON document.
fn json_task_starts(text: &str) -> Vec<usize> {
    let Some(key) = text.find("\"tasks\"") else { return Vec::new() };
    let Some(open) = text[key..].find('[').map(|o| key + o) else { return Vec::new() };
    let mut starts = Vec::new();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, c) in text[open..].char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                if depth == 1 && c == '{' {
                    starts.push(open + i);
                }
                depth += 1;
            }
            ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
    }
    starts
}
