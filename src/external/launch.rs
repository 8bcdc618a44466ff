//! How each external agent is started: its program, its non-interactive command line, the
//! environment that points it at dracode's endpoint, and the configuration files written in its
//! scratch HOME. Everything here was seen working with the versions `docs/src/agents.md` names;
//! what each line is for is said where it is.

use dracode_gateway::Format;
use std::path::PathBuf;

/// An agent dracode can run besides its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentKind {
    /// Claude Code (`claude`, npm `@anthropic-ai/claude-code`).
    ClaudeCode,
    /// OpenAI's Codex CLI (`codex`, npm `@openai/codex`).
    Codex,
    /// Google's Gemini CLI (`gemini`, npm `@google/gemini-cli`).
    GeminiCli,
    /// opencode (`opencode`, npm `opencode-ai`).
    Opencode,
}

impl AgentKind {
    /// Every external agent, in the order the docs list them.
    pub const ALL: [AgentKind; 4] = [AgentKind::ClaudeCode, AgentKind::Codex, AgentKind::GeminiCli, AgentKind::Opencode];

    /// The name a manifest's `agent` field gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "claude-code",
            AgentKind::Codex => "codex",
            AgentKind::GeminiCli => "gemini-cli",
            AgentKind::Opencode => "opencode",
        }
    }

    /// The agent named `name`, if it is one.
    pub fn parse(name: &str) -> Option<AgentKind> {
        AgentKind::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The program looked up on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "claude",
            AgentKind::Codex => "codex",
            AgentKind::GeminiCli => "gemini",
            AgentKind::Opencode => "opencode",
        }
    }

    /// The npm package that installs it.
    pub fn package(self) -> &'static str {
        match self {
            AgentKind::ClaudeCode => "@anthropic-ai/claude-code",
            AgentKind::Codex => "@openai/codex",
            AgentKind::GeminiCli => "@google/gemini-cli",
            AgentKind::Opencode => "opencode-ai",
        }
    }

    /// The wire format it speaks to its model.
    pub fn format(self) -> Format {
        match self {
            AgentKind::ClaudeCode => Format::AnthropicMessages,
            AgentKind::Codex => Format::OpenAiResponses,
            AgentKind::GeminiCli => Format::Gemini,
            AgentKind::Opencode => Format::ChatCompletions,
        }
    }
}

/// What a launch depends on.
pub struct LaunchInput<'a> {
    /// dracode's endpoint for this attempt, `http://127.0.0.1:PORT`.
    pub base_url: &'a str,
    /// The attempt's token: the only credential the agent gets.
    pub token: &'a str,
    /// The model name the agent is told (the endpoint answers with the task's model whatever
    /// the agent asks for).
    pub model: &'a str,
    /// The text of this turn: the task (with the runner's notes), or a repair's message.
    pub text: &'a str,
    /// True for a repair: the agent continues its last session in this HOME.
    pub resume: bool,
}

/// A command line, its environment and its configuration files.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Launch {
    /// The arguments after the program.
    pub args: Vec<String>,
    /// Variables set over the task's command environment.
    pub env: Vec<(String, String)>,
    /// Files written in the agent's HOME first: (path relative to HOME, contents).
    pub files: Vec<(PathBuf, String)>,
}

/// The model name Codex is told when the task's model is not one of OpenAI's: Codex chooses its
/// tools by model name, and for a name it does not know it drops `apply_patch`.
pub const CODEX_FALLBACK_MODEL: &str = "gpt-5.5";

/// How `kind` is started for `input`.
pub fn launch(kind: AgentKind, input: &LaunchInput<'_>) -> Launch {
    let quiet = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect::<Vec<_>>();
    let mut launch = match kind {
        AgentKind::ClaudeCode => claude(input),
        AgentKind::Codex => codex(input),
        AgentKind::GeminiCli => gemini(input),
        AgentKind::Opencode => opencode(input),
    };
    // The endpoint is on loopback: never through a proxy the task's environment names.
    launch.env.extend(quiet(&[("NO_PROXY", "127.0.0.1,localhost"), ("no_proxy", "127.0.0.1,localhost")]));
    launch
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_string()).collect()
}

/// Claude Code: `claude -p` with its stream of events; the key as `x-api-key`; permissions
/// bypassed (dracode's sandbox is the boundary), which as root needs `IS_SANDBOX=1` — the
/// variable Claude Code checks to know it runs in a sandbox; its non-essential traffic,
/// updater, telemetry and error reports off.
fn claude(input: &LaunchInput<'_>) -> Launch {
    let mut args = strings(&["-p", input.text, "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]);
    args.extend(["--model".to_string(), input.model.to_string()]);
    if input.resume {
        args.push("--continue".into());
    }
    let env = [
        ("ANTHROPIC_BASE_URL", input.base_url),
        ("ANTHROPIC_API_KEY", input.token),
        ("IS_SANDBOX", "1"),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ("DISABLE_AUTOUPDATER", "1"),
        ("DISABLE_TELEMETRY", "1"),
        ("DISABLE_ERROR_REPORTING", "1"),
    ];
    Launch { args, env: env.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect(), files: Vec::new() }
}

/// Codex: `codex exec --json` with a provider of its own config pointing at the endpoint
/// (Codex ignores `OPENAI_BASE_URL`; it speaks only the Responses API); its sandbox and
/// approvals off (dracode's sandbox is the boundary); plugins, apps, update checks and
/// analytics off.
fn codex(input: &LaunchInput<'_>) -> Launch {
    let model = if input.model.starts_with("gpt-") || input.model.starts_with('o') { input.model } else { CODEX_FALLBACK_MODEL };
    let config = format!(
        "model = {model:?}\nmodel_provider = \"dracode\"\ncheck_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n\
         [model_providers.dracode]\nname = \"dracode\"\nbase_url = \"{}/v1\"\nenv_key = \"DRACODE_AGENT_TOKEN\"\nwire_api = \"responses\"\n",
        input.base_url
    );
    let mut args = strings(&["exec"]);
    if input.resume {
        args.extend(strings(&["resume", "--last"]));
    }
    args.extend(strings(&[
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--disable",
        "plugins",
        "--disable",
        "remote_plugin",
        "--disable",
        "apps",
        "--disable",
        "in_app_updates",
        input.text,
    ]));
    Launch {
        args,
        env: vec![("DRACODE_AGENT_TOKEN".into(), input.token.into()), ("CODEX_HOME".into(), "{HOME}/.codex".into())],
        files: vec![(PathBuf::from(".codex/config.toml"), config)],
    }
}

/// Gemini CLI: `gemini -p` with its stream of events; the key as `x-goog-api-key` (API-key
/// auth must be selected in its settings); the workspace trusted and tools approved; updates
/// and usage statistics off; its shell without a terminal (the sandbox opens no PTY).
fn gemini(input: &LaunchInput<'_>) -> Launch {
    let settings = r#"{
  "security": { "auth": { "selectedType": "gemini-api-key" } },
  "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false },
  "tools": { "shell": { "enableInteractiveShell": false } }
}
"#;
    let mut args = strings(&["-p", input.text, "--output-format", "stream-json", "--approval-mode", "yolo", "-m", input.model]);
    if input.resume {
        args.extend(strings(&["--resume", "latest"]));
    }
    let env = vec![
        ("GEMINI_API_KEY".into(), input.token.into()),
        ("GOOGLE_GEMINI_BASE_URL".into(), input.base_url.into()),
        ("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into()),
    ];
    Launch { args, env, files: vec![(PathBuf::from(".gemini/settings.json"), settings.to_string())] }
}

/// opencode: `opencode run --format json` with a provider of its config pointing at the
/// endpoint (Chat Completions); every permission allowed; updates, sharing and the models
/// fetch off.
fn opencode(input: &LaunchInput<'_>) -> Launch {
    let model = serde_json::Value::String(input.model.to_string());
    let config = serde_json::json!({
        "model": format!("dracode/{}", input.model),
        "small_model": format!("dracode/{}", input.model),
        "autoupdate": false,
        "share": "disabled",
        "permission": { "*": "allow" },
        "provider": { "dracode": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "dracode",
            "options": { "baseURL": format!("{}/v1", input.base_url), "apiKey": "{env:DRACODE_AGENT_TOKEN}" },
            "models": { input.model: { "name": model, "tool_call": true } }
        } }
    });
    let mut args = strings(&["run", "--pure", "--format", "json"]);
    if input.resume {
        args.push("--continue".into());
    }
    args.push(input.text.to_string());
    let env = vec![
        ("DRACODE_AGENT_TOKEN".into(), input.token.into()),
        ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
        ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
    ];
    Launch { args, env, files: vec![(PathBuf::from(".config/opencode/opencode.json"), format!("{config:#}\n"))] }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(resume: bool) -> LaunchInput<'static> {
        LaunchInput { base_url: "http://127.0.0.1:9", token: "tok", model: "m-1", text: "fix it", resume }
    }

    #[test]
    fn every_agent_gets_the_endpoint_and_only_the_attempt_token() {
        for kind in AgentKind::ALL {
            let launch = launch(kind, &input(false));
            let text = format!("{launch:?}");
            assert!(text.contains("http://127.0.0.1:9"), "{kind:?}: {text}");
            assert!(text.contains("tok"), "{kind:?}");
            assert!(launch.env.iter().any(|(k, v)| k == "NO_PROXY" && v.contains("127.0.0.1")), "{kind:?}");
            assert_eq!(AgentKind::parse(kind.as_str()), Some(kind));
        }
    }

    #[test]
    fn a_repair_continues_the_session() {
        assert!(launch(AgentKind::ClaudeCode, &input(true)).args.contains(&"--continue".to_string()));
        let codex = launch(AgentKind::Codex, &input(true)).args;
        assert_eq!(&codex[..3], ["exec", "resume", "--last"]);
        assert!(!launch(AgentKind::Codex, &input(false)).args.contains(&"resume".to_string()));
    }

    #[test]
    fn codex_is_told_a_model_it_knows() {
        let config = &launch(AgentKind::Codex, &input(false)).files[0].1;
        assert!(config.contains("model = \"gpt-5.5\""), "{config}");
        let gpt = LaunchInput { model: "gpt-5.1-codex", ..input(false) };
        assert!(launch(AgentKind::Codex, &gpt).files[0].1.contains("model = \"gpt-5.1-codex\""));
    }
}
