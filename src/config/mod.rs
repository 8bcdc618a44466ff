//! Configuration layering (docs/src/reference/configuration.md), lowest to highest: built-in defaults →
//! `dracode.toml` (or `$DRACODE_CONFIG`, or `--config`) → `dracode.local.toml` → `DRACODE_*`
//! environment (nested with `__`) → manifest `[defaults]` → task fields → command-line flags.
//! This module owns the first four; the manifest and the command line add the rest.
//! `dracode.toml` is found as git and cargo find theirs ([`find_config_dir`]).

mod layers;
mod literal;
mod provider;

pub use provider::ProviderSettings;

use crate::manifest::TaskFields;
use dracode_input::expand_vars;
use dracode_llm::preset::{ProviderType, ResolvedProvider};
use dracode_llm::prices::Price;
use layers::Layers;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The default config file, looked up from the current directory up ([`find_config_dir`]).
pub const CONFIG_FILE: &str = "dracode.toml";
/// The personal, gitignored overlay.
pub const LOCAL_CONFIG_FILE: &str = "dracode.local.toml";
/// The top-level keys `DRACODE_*` variables may set; other `DRACODE_*` variables (`LOG`,
/// `SHARD`, `GITHUB_URL`, …) are settings of their own, not config.
const CONFIG_ENV_ROOTS: &[&str] = &["provider", "providers", "prices", "models", "defaults", "mcp_servers", "run"];

/// Everything read from config files and the environment.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The provider used when a task names none.
    pub provider: Option<String>,
    /// Named providers.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSettings>,
    /// Prices per million tokens, by model; override the built-in table.
    #[serde(default)]
    pub prices: BTreeMap<String, Price>,
    /// Model settings other than price, by exact model name (`[models."NAME"]`).
    #[serde(default)]
    pub models: BTreeMap<String, ModelSettings>,
    /// Task defaults below the manifest's own `[defaults]`.
    #[serde(default)]
    pub defaults: TaskFields,
    /// MCP servers every task is offered (`[mcp_servers.NAME]`); folded into `defaults` when
    /// loaded, below its own `mcp_servers`.
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, dracode_mcp::McpServerConfig>,
    /// Where the external agents' programs are (`[agents.NAME] command = [...]`), by the name a
    /// task's `agent` field gives.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentSettings>,
    /// Settings of `dracode run` itself (`[run]`).
    #[serde(default)]
    pub run: RunSettings,
    /// The config files read, lowest layer first, as absolute paths; empty when none was
    /// (built-in defaults and `DRACODE_*` variables only).
    #[serde(skip)]
    pub files: Vec<PathBuf>,
}

/// `[run]`: defaults of `dracode run`'s own options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSettings {
    /// The cache folder (`--cache`), relative to the current folder.
    pub cache: Option<PathBuf>,
}

/// `[agents.NAME]`: how an external agent is started — for `claude-code`, `codex`,
/// `gemini-cli` and `opencode` only where its program is (`command`); for any other name, an
/// agent that speaks the Agent Client Protocol (`protocol = "acp"`) and how it is pointed at
/// dracode's endpoint (`endpoint`, `env`, `files`; see [`crate::external::AcpAgent`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSettings {
    /// The program and its leading arguments (`["/opt/claude/bin/claude"]`, `["goose", "acp"]`),
    /// instead of the agent's program looked up on `PATH`.
    pub command: Option<Vec<String>>,
    /// `acp`: the agent speaks the Agent Client Protocol on its stdin and stdout.
    pub protocol: Option<String>,
    /// The wire format the agent speaks to its model, which dracode's endpoint serves it:
    /// `anthropic-messages`, `openai-responses`, `chat-completions` or `gemini`.
    pub endpoint: Option<String>,
    /// Variables set for the agent (`{endpoint}`, `{token}`, `{model}` and `{home}` filled in).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Files written in the agent's HOME before it starts, by path relative to it (the same
    /// placeholders filled in).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

/// What config says about one model besides its price.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSettings {
    /// The model's context window in tokens; overrides the built-in table (a provider's own
    /// `context_window` wins over this).
    pub context_window: Option<u64>,
}

/// A config that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `--config FILE` (or `$DRACODE_CONFIG`) does not exist.
    #[error("config file {0} does not exist")]
    Missing(PathBuf),
    /// A file or variable did not parse, or has an unknown key or a value of the wrong type;
    /// names the file or variable, and the key.
    #[error("{0}")]
    Invalid(crate::manifest::ManifestError),
    /// A provider name is neither configured nor a type.
    #[error("{0}")]
    UnknownProvider(String),
    /// `[defaults]` sets a key that is not a task field, or a value a manifest would refuse.
    #[error(transparent)]
    Defaults(#[from] crate::manifest::ManifestErrors),
}

impl Config {
    /// [`Config::load_for`] with no manifest: the config found from `dir` up.
    pub fn load(dir: &Path, explicit: Option<&Path>, env: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        Config::load_for(dir, &[], explicit, env)
    }

    /// Loads the layers for a command run in `dir` (the current directory) on `manifests`:
    /// `explicit` (from `--config`, else `$DRACODE_CONFIG`) replaces `dracode.toml`; without
    /// it, `dracode.toml` is looked up by [`find_config_dir`] from `dir`, else from each
    /// manifest's folder. `dracode.local.toml` is read beside the `dracode.toml` found (in `dir`
    /// with `explicit` or when none is found); `env` is the process environment.
    pub fn load_for(
        dir: &Path,
        manifests: &[PathBuf],
        explicit: Option<&Path>,
        env: &BTreeMap<String, String>,
    ) -> Result<Config, ConfigError> {
        let dir = &dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let (main, local_dir) = match explicit.map(Path::to_path_buf).or_else(|| env.get("DRACODE_CONFIG").map(PathBuf::from)) {
            Some(path) if !dir.join(&path).is_file() => return Err(ConfigError::Missing(path)),
            Some(path) => (dir.join(&path).canonicalize().unwrap_or_else(|_| dir.join(path)), dir.clone()),
            None => {
                let home = env.get("HOME").map(|h| Path::new(h).canonicalize().unwrap_or_else(|_| PathBuf::from(h)));
                let mut starts =
                    std::iter::once(dir.clone()).chain(manifests.iter().filter_map(|m| dir.join(m).parent()?.canonicalize().ok()));
                let found = starts.find_map(|start| find_config_dir(&start, home.as_deref()));
                let folder = found.unwrap_or_else(|| dir.clone());
                (folder.join(CONFIG_FILE), folder)
            }
        };
        let local = local_dir.join(LOCAL_CONFIG_FILE);
        let mut layers = Layers::default();
        layers.add_file(&main, dir)?;
        layers.add_file(&local, dir)?;
        layers.add_env(env, "DRACODE_", CONFIG_ENV_ROOTS);
        let mut config: Config = layers.extract()?;
        check_defaults(&layers)?;
        provider::check_wire_apis(&layers, &config.providers)?;
        config.expand(env);
        config.fold_mcp_servers(main.strip_prefix(dir).unwrap_or(&main))?;
        config.files = [main, local].into_iter().filter(|f| f.is_file()).collect();
        Ok(config)
    }

    /// Checks the top-level `[mcp_servers]` (errors name `file`) and moves them into
    /// `defaults`, below the servers `[defaults]` names itself.
    fn fold_mcp_servers(&mut self, file: &Path) -> Result<(), crate::manifest::ManifestErrors> {
        if self.mcp_servers.is_empty() {
            return Ok(());
        }
        let errors: Vec<crate::manifest::ManifestError> = self
            .mcp_servers
            .iter()
            .flat_map(|(name, server)| server.problems(name))
            .map(|(field, message)| crate::manifest::ManifestError {
                file: file.to_path_buf(),
                position: None,
                task: None,
                field: Some(field),
                message,
            })
            .collect();
        if !errors.is_empty() {
            return Err(crate::manifest::ManifestErrors(errors));
        }
        let servers = TaskFields { mcp_servers: Some(std::mem::take(&mut self.mcp_servers)), ..TaskFields::default() };
        self.defaults = servers.overlay(std::mem::take(&mut self.defaults));
        Ok(())
    }

    /// Expands `${VAR}` in every string a user may template.
    fn expand(&mut self, env: &BTreeMap<String, String>) {
        for settings in self.providers.values_mut() {
            settings.expand(env);
        }
        for server in self.mcp_servers.values_mut() {
            for value in server.env.values_mut().chain(server.url.as_mut()) {
                *value = expand_vars(value, env);
            }
        }
    }

    /// The provider to use for a task: `cli` (the `--provider` flag) wins over the task's, which
    /// wins over the config's default; with none at all, `openai`.
    pub fn provider_name<'a>(&'a self, cli: Option<&'a str>, task: Option<&'a str>) -> &'a str {
        cli.or(task).or(self.provider.as_deref()).unwrap_or("openai")
    }

    /// Resolves provider `name` with every default filled in from its type and environment.
    pub fn resolve_provider(
        &self,
        name: &str,
        model: Option<&str>,
        env: &BTreeMap<String, String>,
    ) -> Result<ResolvedProvider, ConfigError> {
        let settings = self.providers.get(name);
        let kind = settings.and_then(|s| s.kind).or_else(|| ProviderType::from_name(name)).ok_or_else(|| {
            let mut known: Vec<&str> = self.providers.keys().map(String::as_str).collect();
            known.extend(ProviderType::ALL.iter().map(|t| t.as_str()));
            ConfigError::UnknownProvider(format!(
                "unknown provider {name:?}{}: configure [providers.{name}] with a `type`, or use one of: {}",
                dracode_input::did_you_mean(name, &known),
                known.join(", ")
            ))
        })?;
        let empty = ProviderSettings::default();
        Ok(provider::resolve(name, kind, settings.unwrap_or(&empty), model, env))
    }

    /// Every provider worth listing: the configured ones, then each type not configured by name.
    pub fn provider_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.providers.keys().cloned().collect();
        for kind in ProviderType::ALL {
            if !self.providers.contains_key(kind.as_str()) {
                names.push(kind.as_str().to_string());
            }
        }
        names
    }
}

/// The folder whose `dracode.toml` a command started in `start` (an absolute path) uses, as
/// git and cargo find theirs: `start`, then each folder above it, up to the repository's root
/// (the first folder holding `.git`, included); outside a repository up to `home` or the
/// filesystem's root (neither included, unless the search starts there; it never goes above
/// `home`). `None` when no folder on the way holds one.
pub fn find_config_dir(start: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let mut folder = start;
    loop {
        if folder.join(CONFIG_FILE).is_file() {
            return Some(folder.to_path_buf());
        }
        if folder.join(".git").exists() || Some(folder) == home {
            return None;
        }
        let parent = folder.parent()?;
        if Some(parent) == home || parent.parent().is_none() {
            return None;
        }
        folder = parent;
    }
}

/// Gives config `[defaults]` the checks a manifest's get (typing into [`TaskFields`] alone
/// ignores unknown keys), each key's errors naming the file or variable that set it.
fn check_defaults(layers: &Layers) -> Result<(), crate::manifest::ManifestErrors> {
    let Some(toml::Value::Table(defaults)) = layers.get(&["defaults"]) else { return Ok(()) };
    let mut by_source: BTreeMap<PathBuf, serde_json::Map<String, serde_json::Value>> = BTreeMap::new();
    for (key, value) in defaults {
        let source = layers.source_of(&["defaults".to_string(), key.clone()]).unwrap_or_else(|| PathBuf::from(CONFIG_FILE));
        let Ok(value) = serde_json::to_value(value) else { continue };
        by_source.entry(source).or_default().insert(key.clone(), value);
    }
    let mut errors = Vec::new();
    for (source, fields) in by_source {
        if let Err(crate::manifest::ManifestErrors(found)) =
            crate::manifest::check_config_defaults(&source, &serde_json::Value::Object(fields))
        {
            errors.extend(found);
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(crate::manifest::ManifestErrors(errors)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_type_name_works_with_no_table() {
        let config = Config::default();
        let p = config.resolve_provider("openai", None, &env(&[("OPENAI_API_KEY", "sk-abc")])).unwrap();
        assert_eq!(p.kind, ProviderType::Openai);
        assert_eq!(p.base_url.as_deref(), Some("https://api.openai.com/v1"));
        assert_eq!(p.api_key.as_deref(), Some("sk-abc"));
        assert!(p.not_configured_reason().is_none());
        let bare = config.resolve_provider("openai", None, &env(&[])).unwrap();
        assert!(bare.not_configured_reason().unwrap().contains("OPENAI_API_KEY"));
    }

    #[test]
    fn files_layer_and_local_overrides_and_vars_expand() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "provider = \"local\"\n[providers.local]\ntype = \"llamacpp\"\nmodel = \"m1\"\napi_key = \"${MY_KEY}\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join(LOCAL_CONFIG_FILE), "[providers.local]\nmodel = \"m2\"\n").unwrap();
        let vars = env(&[("MY_KEY", "secret-value-1")]);
        let config = Config::load(dir.path(), None, &vars).unwrap();
        assert_eq!(config.provider_name(None, None), "local");
        let p = config.resolve_provider("local", None, &vars).unwrap();
        assert_eq!(p.model.as_deref(), Some("m2"));
        assert_eq!(p.api_key.as_deref(), Some("secret-value-1"));
        assert_eq!(p.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        let p = config.resolve_provider("local", Some("m3"), &vars).unwrap();
        assert_eq!(p.model.as_deref(), Some("m3"));
    }

    #[test]
    fn mcp_servers_merge_by_name_from_config_to_manifest_to_task() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            "[mcp_servers.fs]\ncommand = \"a\"\nenv = { TOKEN = \"${T}\" }\n[mcp_servers.web]\nurl = \"http://127.0.0.1:1/mcp\"\n",
        )
        .unwrap();
        let config = Config::load(dir.path(), None, &env(&[("T", "tok")])).unwrap();
        let manifest = dir.path().join("tasks.toml");
        std::fs::write(
            &manifest,
            "[mcp_servers.fs]\ncommand = \"b\"\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n[tasks.mcp_servers.own]\ncommand = \"c\"\n",
        )
        .unwrap();
        let loaded = crate::manifest::load_with(&manifest, &config.defaults).unwrap();
        let servers = loaded.tasks[0].fields.mcp_servers.clone().unwrap();
        assert_eq!(servers.keys().collect::<Vec<_>>(), ["fs", "own", "web"]);
        assert_eq!(servers["fs"].command.as_deref(), Some("b"), "the manifest's server replaces config's of the same name");
        assert_eq!(servers["web"].url.as_deref(), Some("http://127.0.0.1:1/mcp"));
        let from_config = config.defaults.mcp_servers.unwrap();
        assert_eq!(from_config["fs"].env["TOKEN"], "tok", "${{VAR}} expands in config");
    }

    #[test]
    fn a_bad_mcp_server_in_config_names_the_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), "[mcp_servers.fs]\nargs = [\".\"]\n").unwrap();
        let err = Config::load(dir.path(), None, &env(&[])).unwrap_err().to_string();
        assert!(err.contains(CONFIG_FILE) && err.contains("`mcp_servers.fs.command`: set `command`"), "{err}");
    }

    #[test]
    fn unknown_keys_and_missing_explicit_file_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), "[providers.x]\ntype = \"openai\"\nmodle = \"m\"\n").unwrap();
        let err = Config::load(dir.path(), None, &env(&[])).unwrap_err().to_string();
        assert!(err.contains("modle"), "{err}");
        let err = Config::load(dir.path(), Some(Path::new("/nonexistent/dracode.toml")), &env(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::Missing(_)));
    }

    /// Issue 7/9: a provider `timeout` that does not parse (or is not positive) used to become
    /// 600 s silently; `[defaults]` get the manifest's field checks.
    #[test]
    fn bad_provider_timeouts_and_defaults_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["soon", "-1s", "0s"] {
            std::fs::write(dir.path().join(CONFIG_FILE), format!("[providers.x]\ntype = \"openai\"\ntimeout = \"{bad}\"\n")).unwrap();
            let err = Config::load(dir.path(), None, &env(&[])).unwrap_err().to_string();
            assert!(err.contains("providers.x.timeout") && err.contains("dracode.toml"), "{bad}: {err}");
        }
        std::fs::write(dir.path().join(CONFIG_FILE), "[defaults]\nfoo = 1\nmax_iterations = 0\n").unwrap();
        let err = Config::load(dir.path(), None, &env(&[])).unwrap_err().to_string();
        assert!(err.contains("dracode.toml: [defaults] unknown field \"foo\""), "{err}");
        assert!(err.contains("dracode.toml: [defaults] field \"max_iterations\": must be at least 1"), "{err}");
    }

    /// A key set in `dracode.local.toml` is named by that file, not by `dracode.toml`; keys of
    /// the same table set by each file merge.
    #[test]
    fn errors_name_the_local_file_that_set_the_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), "[providers.x]\ntype = \"vllm\"\nmodel = \"m\"\n").unwrap();
        std::fs::write(dir.path().join(LOCAL_CONFIG_FILE), "[providers.x]\nmax_tokens = \"many\"\n").unwrap();
        let err = Config::load(dir.path(), None, &env(&[])).unwrap_err().to_string();
        assert!(err.contains(LOCAL_CONFIG_FILE) && err.contains("providers.x.max_tokens"), "{err}");
        std::fs::write(dir.path().join(LOCAL_CONFIG_FILE), "[providers.x]\nwire_api = \"chat\"\n").unwrap();
        let err = Config::load(dir.path(), None, &env(&[])).unwrap_err().to_string();
        assert!(err.contains(&format!("{LOCAL_CONFIG_FILE}: `providers.x.wire_api`")), "{err}");
        std::fs::write(dir.path().join(LOCAL_CONFIG_FILE), "[providers.x]\nmax_tokens = 5\n").unwrap();
        let config = Config::load(dir.path(), None, &env(&[])).unwrap();
        assert_eq!((config.providers["x"].model.as_deref(), config.providers["x"].max_tokens), (Some("m"), Some(5)));
    }

    /// A file that is not TOML names itself with the line and column of the fault.
    #[test]
    fn a_syntax_error_names_the_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), "provider = \"a\"\n[providers.x\n").unwrap();
        let err = Config::load(dir.path(), None, &env(&[])).unwrap_err().to_string();
        assert!(err.contains(&format!("{CONFIG_FILE}:2:")), "{err}");
        std::fs::write(dir.path().join(CONFIG_FILE), "provider = \"a\"\n").unwrap();
        std::fs::write(dir.path().join(LOCAL_CONFIG_FILE), "\n\nprovider = \n").unwrap();
        let err = Config::load(dir.path(), None, &env(&[])).unwrap_err().to_string();
        assert!(err.contains(&format!("{LOCAL_CONFIG_FILE}:3:")), "{err}");
    }

    #[test]
    fn azure_takes_an_entra_token_when_there_is_no_key() {
        let vars = env(&[("AZURE_OPENAI_ENDPOINT", "https://r.openai.azure.com"), ("AZURE_OPENAI_AD_TOKEN", "eyJ-entra")]);
        let mut config = Config::default();
        config.providers.insert("azure".into(), ProviderSettings { model: Some("dep".into()), ..Default::default() });
        let p = config.resolve_provider("azure", None, &vars).unwrap();
        assert_eq!(p.headers.get("Authorization").map(String::as_str), Some("Bearer eyJ-entra"));
        assert!(p.not_configured_reason().is_none());
        let none = config.resolve_provider("azure", None, &env(&[("AZURE_OPENAI_ENDPOINT", "https://r")])).unwrap();
        assert!(none.not_configured_reason().unwrap().contains("AZURE_OPENAI_API_KEY"));
    }

    #[test]
    fn unknown_provider_suggests_a_name() {
        let err = Config::default().resolve_provider("opnai", None, &env(&[])).unwrap_err().to_string();
        assert!(err.contains("did you mean \"openai\""), "{err}");
    }
}
