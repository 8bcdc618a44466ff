//! Config layers merged key by key: TOML files and `DRACODE_*` variables become one tree
//! (tables merge recursively, any other value replaces), each key remembering the file or
//! variable that set it, so an error names that source and the key path.

use super::{ConfigError, literal};
use crate::manifest::ManifestError;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// The keys from the root to a value (array indexes as numbers).
pub(super) type KeyPath = Vec<String>;

/// What set a key.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    /// A config file.
    File(PathBuf),
    /// A variable, with its text as set and the key it names.
    Var { name: String, text: String, key: KeyPath },
}

impl Source {
    /// The file or variable name, as an error names it.
    fn name(&self) -> PathBuf {
        match self {
            Source::File(path) => path.clone(),
            Source::Var { name, .. } => PathBuf::from(name),
        }
    }
}

/// Config trees merged in order, each value remembering its source.
#[derive(Debug, Default)]
pub(super) struct Layers {
    /// Every layer merged so far.
    tree: Table,
    /// The source of every value that is not a table, and of every empty table.
    sources: BTreeMap<KeyPath, Source>,
}

impl Layers {
    /// Merges the TOML file at `path` over what is there; a file that does not exist adds
    /// nothing. Errors name the file relative to `dir` (the current folder) when it is in it; a
    /// syntax error names its line and column too.
    pub(super) fn add_file(&mut self, path: &Path, dir: &Path) -> Result<(), ConfigError> {
        if !path.is_file() {
            return Ok(());
        }
        let shown = path.strip_prefix(dir).unwrap_or(path).to_path_buf();
        let error = |position, message| ConfigError::Invalid(invalid(shown.clone(), position, None, message));
        let text = std::fs::read_to_string(path).map_err(|e| error(None, format!("cannot read: {e}")))?;
        let table: Table = toml::from_str(&text).map_err(|e| {
            let position = e.span().map(|span| crate::manifest::line_col(&text, span.start));
            error(position, e.message().trim_end().to_string())
        })?;
        self.merge(table, &Source::File(shown));
        Ok(())
    }

    /// Merges every variable of `env` named `prefix` (any case) + a key path whose parts are
    /// joined by `__` and whose first part is one of `roots`: `DRACODE_PROVIDERS__OPENAI__MODEL`
    /// sets `providers.openai.model` (keys lower-cased); the value is read by [`literal::parse`].
    /// Variables merge in name order.
    pub(super) fn add_env(&mut self, env: &BTreeMap<String, String>, prefix: &str, roots: &[&str]) {
        for (name, text) in env {
            let Some(path) = env_key_path(name, prefix, roots) else { continue };
            let mut value = literal::parse(text);
            for key in path.iter().rev() {
                value = Value::Table(Table::from_iter([(key.clone(), value)]));
            }
            if let Value::Table(table) = value {
                self.merge(table, &Source::Var { name: name.clone(), text: text.clone(), key: path });
            }
        }
    }

    /// Merges `table` over the tree, noting `source` for every value it sets.
    fn merge(&mut self, table: Table, source: &Source) {
        merge_table(&mut self.tree, table, &mut Vec::new(), source, &mut self.sources);
    }

    /// The value at `path`, if set.
    pub(super) fn get(&self, path: &[&str]) -> Option<&Value> {
        let (last, parents) = path.split_last()?;
        let mut table = &self.tree;
        for key in parents {
            table = table.get(*key)?.as_table()?;
        }
        table.get(*last)
    }

    /// The file or variable that set `path` (or, for a table, the first key in it); `None`
    /// when nothing did.
    pub(super) fn source_of(&self, path: &[String]) -> Option<PathBuf> {
        self.find_source(path).map(Source::name)
    }

    /// The source of the recorded key at or above `path`, else of the first one below it.
    fn find_source(&self, path: &[String]) -> Option<&Source> {
        let above = (0..=path.len()).rev().find_map(|n| self.sources.get(&path[..n]));
        above.or_else(|| self.sources.iter().find(|(key, _)| key.starts_with(path)).map(|(_, source)| source))
    }

    /// Types the merged tree as `T`. An error names the source and the key path. A number or
    /// boolean a variable set where the field wants text is taken as the text it was written
    /// as (`DRACODE_PROVIDERS__X__HEADERS__X_ID=0123` sets the header to `"0123"`).
    pub(super) fn extract<T: DeserializeOwned>(&mut self) -> Result<T, ConfigError> {
        loop {
            let error = match serde_path_to_error::deserialize(Value::Table(self.tree.clone())) {
                Ok(typed) => return Ok(typed),
                Err(error) => error,
            };
            let message = error.inner().message().trim_end().to_string();
            let mut path = key_path(error.path());
            if let Some(field) = message.strip_prefix("unknown field `").and_then(|m| m.split('`').next())
                && path.last().is_none_or(|last| last != field)
            {
                path.push(field.to_string());
            }
            if message.contains("expected a string") && self.retype_as_text(&path) {
                continue;
            }
            let source = self.source_of(&path).unwrap_or_else(|| PathBuf::from(super::CONFIG_FILE));
            let shown = if path.is_empty() { message } else { format!("`{}`: {message}", path.join(".")) };
            return Err(ConfigError::Invalid(invalid(source, None, Some(path.join(".")), shown)));
        }
    }

    /// Replaces the number or boolean at `path` by its text when a variable set it; true when
    /// it did.
    fn retype_as_text(&mut self, path: &[String]) -> bool {
        let Some(Source::Var { text, key, .. }) = self.find_source(path) else { return false };
        let as_written = (key.as_slice() == path).then(|| text.clone());
        let Some(value) = value_mut(&mut self.tree, path) else { return false };
        if !matches!(value, Value::Integer(_) | Value::Float(_) | Value::Boolean(_)) {
            return false;
        }
        *value = Value::String(as_written.unwrap_or_else(|| value.to_string()));
        true
    }
}

/// The config error of `file` (a path or a variable's name).
fn invalid(file: PathBuf, position: Option<(usize, usize)>, field: Option<String>, message: String) -> ManifestError {
    ManifestError { file, position, task: None, field, message }
}

/// The key path of a config variable `name`, or `None` when it is not one (see
/// [`Layers::add_env`]; an empty part, as in `A____B`, makes it none).
fn env_key_path(name: &str, prefix: &str, roots: &[&str]) -> Option<KeyPath> {
    let name = name.trim();
    name.get(..prefix.len()).filter(|start| start.eq_ignore_ascii_case(prefix))?;
    let path: KeyPath = name[prefix.len()..].split("__").map(str::to_ascii_lowercase).collect();
    (roots.contains(&path[0].as_str()) && path.iter().all(|key| !key.is_empty())).then_some(path)
}

/// Merges `from` into `into` at `at`, recording `source` for each value set.
fn merge_table(into: &mut Table, from: Table, at: &mut KeyPath, source: &Source, sources: &mut BTreeMap<KeyPath, Source>) {
    for (key, value) in from {
        at.push(key.clone());
        match (into.get_mut(&key), value) {
            (Some(Value::Table(old)), Value::Table(new)) => merge_table(old, new, at, source, sources),
            (_, value) => {
                sources.retain(|path, _| !path.starts_with(at));
                record(&value, at, source, sources);
                into.insert(key, value);
            }
        }
        at.pop();
    }
}

/// Records `source` for `value` at `at` and for every value in it.
fn record(value: &Value, at: &mut KeyPath, source: &Source, sources: &mut BTreeMap<KeyPath, Source>) {
    match value {
        Value::Table(table) if !table.is_empty() => {
            for (key, inner) in table {
                at.push(key.clone());
                record(inner, at, source, sources);
                at.pop();
            }
        }
        _ => {
            sources.insert(at.clone(), source.clone());
        }
    }
}

/// The value at `path` in `tree`, for changing.
fn value_mut<'a>(tree: &'a mut Table, path: &[String]) -> Option<&'a mut Value> {
    let (first, rest) = path.split_first()?;
    let mut value = tree.get_mut(first)?;
    for key in rest {
        value = match value {
            Value::Table(table) => table.get_mut(key)?,
            Value::Array(items) => items.get_mut(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(value)
}

/// The path serde stopped at, as keys.
fn key_path(path: &serde_path_to_error::Path) -> KeyPath {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|segment| match segment {
            Segment::Map { key } => Some(key.clone()),
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Enum { variant } => Some(variant.clone()),
            Segment::Unknown => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(files: &[(&str, &str)], env: &[(&str, &str)]) -> Layers {
        let mut layers = Layers::default();
        for (name, text) in files {
            layers.merge(toml::from_str(text).unwrap(), &Source::File(PathBuf::from(name)));
        }
        let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        layers.add_env(&env, "DRACODE_", &["providers", "defaults"]);
        layers
    }

    fn path(keys: &str) -> KeyPath {
        keys.split('.').map(str::to_string).collect()
    }

    #[test]
    fn tables_merge_and_other_values_replace_remembering_who_set_them() {
        let layers = layers(
            &[
                ("a.toml", "[providers.x]\nmodel = \"m\"\nheaders = { A = \"1\" }\ntools = [1]\n"),
                ("b.toml", "[providers.x]\ntools = [2]\n"),
            ],
            &[("DRACODE_PROVIDERS__X__HEADERS", "{B = 2}"), ("dracode_providers__y__model", "n"), ("DRACODE_LOG", "debug")],
        );
        assert_eq!(layers.get(&["providers", "x", "model"]).and_then(Value::as_str), Some("m"));
        assert_eq!(layers.get(&["providers", "x", "tools"]), Some(&Value::Array(vec![Value::Integer(2)])));
        assert_eq!(layers.get(&["providers", "x", "headers", "A"]).and_then(Value::as_str), Some("1"), "tables merge");
        assert_eq!(layers.get(&["providers", "y", "model"]).and_then(Value::as_str), Some("n"), "any case, keys lower-cased");
        assert!(layers.get(&["log"]).is_none(), "not a config root");
        let named = |keys: &str| layers.source_of(&path(keys)).unwrap().display().to_string();
        assert_eq!(named("providers.x.model"), "a.toml");
        assert_eq!(named("providers.x.tools"), "b.toml");
        assert_eq!(named("providers.x.headers.B"), "DRACODE_PROVIDERS__X__HEADERS");
        assert_eq!(named("providers.x.tools.0"), "b.toml", "inside an array, the array's source");
        assert_eq!(named("providers.y"), "dracode_providers__y__model", "a table: the first key set in it");
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Root {
        providers: Small,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Small {
        name: Option<String>,
        on: Option<bool>,
        #[serde(default)]
        tags: BTreeMap<String, String>,
    }

    #[test]
    fn numbers_a_variable_set_where_text_is_wanted_are_text_as_written() {
        let vars =
            [("DRACODE_PROVIDERS__NAME", "4.10"), ("DRACODE_PROVIDERS__TAGS", "{a = 1, b = true}"), ("DRACODE_PROVIDERS__ON", "true")];
        let root: Root = layers(&[], &vars).extract().unwrap();
        assert_eq!((root.providers.name.as_deref(), root.providers.on), (Some("4.10"), Some(true)));
        assert_eq!(root.providers.tags, BTreeMap::from([("a".into(), "1".into()), ("b".into(), "true".into())]));
    }

    #[test]
    fn extraction_errors_name_the_source_and_the_key_path() {
        let error = |files: &[(&str, &str)], env: &[(&str, &str)]| layers(files, env).extract::<Root>().unwrap_err().to_string();
        assert_eq!(
            error(&[("a.toml", "[providers]\nname = \"n\"\n")], &[("DRACODE_PROVIDERS__ON", "5")]),
            "DRACODE_PROVIDERS__ON: `providers.on`: invalid type: integer `5`, expected a boolean"
        );
        let unknown = error(&[("a.toml", "[providers]\nname = \"n\"\n"), ("b.toml", "[providers]\nnmae = 1\n")], &[]);
        assert!(unknown.starts_with("b.toml: `providers.nmae`: unknown field `nmae`"), "{unknown}");
        assert!(error(&[], &[]).starts_with("dracode.toml: missing field `providers`"), "nothing set it: the default file");
    }

    #[test]
    fn variable_names_that_are_not_key_paths_are_skipped() {
        let roots = ["providers"];
        assert_eq!(env_key_path("DRACODE_PROVIDERS__A__B", "DRACODE_", &roots), Some(path("providers.a.b")));
        assert_eq!(env_key_path("DRACODE_PROVIDERS___A", "DRACODE_", &roots), Some(vec!["providers".into(), "_a".into()]));
        for name in ["DRACODE_PROVIDERS____A", "DRACODE_PROVIDERS__", "DRACODE_SHARD", "OTHER_PROVIDERS__A", "DRACODE", "DRACODÉ_X"] {
            assert_eq!(env_key_path(name, "DRACODE_", &roots), None, "{name}");
        }
    }
}
