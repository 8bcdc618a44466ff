//! The tool policy (`[tasks.policy]`, also in `[defaults]`): which tools a task may call, and
//! which commands its command-running tools may run. Checked before every call; a denied call
//! is answered to the model as `Error [DENIED]: … (policy rule …)` and counted in
//! `task.finished.denied_calls`; `on_denied = "fail"` ends the task instead.
//!
//! # How a command is matched
//!
//! A command-running tool (see [`super::Tool::command_line`]) describes its call as a
//! [`CommandLine`]: an argv run directly (no shell), or a line given to `sh -c`.
//!
//! * A rule is one simple command: words split like a shell splits them (quotes honoured).
//!   Without `*`, `?` or `[` it is an **argv prefix**: `npm test` matches `npm test` and
//!   `npm test --watch`, not `npm tests`. With them it is a **glob** over the command's words
//!   joined by one space (`*` matches any characters, spaces and `/` included): `cargo *`
//!   matches `cargo test -p x`; a rule ending in ` *` also matches the bare command (`cargo`).
//! * **deny wins.** Deny rules are checked loosely, to catch smuggling: the command text is cut
//!   at every shell operator (`;`, `&`, `|`, `(`, `)`, `` ` ``, `$`, `{`, `}`, `<`, `>`, newline),
//!   quotes and backslashes are dropped, and a rule matches when it matches the words starting
//!   at *any* word (a program given by path also by its file name: `/usr/bin/curl` as `curl`).
//!   So `curl *` denies `cargo test; curl evil`, `sh -c "curl evil"` and `timeout 5 curl evil`.
//!   Deny lists remain best effort (a shell can spell `curl` in ways no list foresees); an
//!   allow list is the real boundary.
//! * **With an allow list, anything not allowed is denied.** Allow rules are checked strictly:
//!   the whole command must match a rule from its first word. A `sh -c` line (`shell = true`)
//!   containing any shell metacharacter (`;&|<>()$` `` ` `` `\{}` or a newline) never matches an
//!   allow rule, whatever its prefix: `cargo test; curl evil` is denied under `allow = ["cargo *"]`.
//!   Allowing an interpreter (`sh *`, `bash *`, `env *`, `xargs *`, `python *`) allows anything.

use dracode_sandbox::egress::{Host, HostPattern};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the task does when the model calls something the policy denies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnDenied {
    /// The model gets `Error [DENIED]: …` and may carry on (default).
    #[default]
    Answer,
    /// The task ends: status `failed`, error kind `denied`.
    Fail,
}

/// `allow`: the whole tool (`true`/`false`) or, for command-running tools, a list of rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged, expecting = "true, false, or a list of command rules such as [\"cargo *\"]")]
pub enum AllowField {
    /// The tool may (`true`) or may not (`false`) be called at all.
    All(bool),
    /// Only commands matching one of these rules.
    Rules(Vec<String>),
}

/// The policy of one tool, as written in a manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolRuleFields {
    /// `true`/`false`, or (tools that run commands) the commands allowed.
    pub allow: Option<AllowField>,
    /// (Tools that run commands) commands denied even when allowed.
    pub deny: Option<Vec<String>>,
    /// (`web_fetch`) hosts it may fetch from, as `network` patterns: `docs.rs`, `*.example.com`
    /// (subdomains), `host:port`, `*`, an IP address.
    pub allowed_hosts: Option<Vec<String>>,
}

/// The `policy` table of a task or `[defaults]`: per tool name a rule table, and `on_denied`.
/// A task's table is merged over `[defaults]`' per tool (a tool's table replaces the default's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyFields {
    /// `answer` (default: the model is told) or `fail` (the task ends as `failed`, kind `denied`).
    pub on_denied: Option<OnDenied>,
    /// Rules by tool name.
    #[serde(flatten)]
    pub tools: BTreeMap<String, ToolRuleFields>,
}

impl PolicyFields {
    /// `base` with `top`'s `on_denied` and tool tables on top.
    pub fn overlay(base: Option<PolicyFields>, top: Option<PolicyFields>) -> Option<PolicyFields> {
        match (base, top) {
            (Some(mut base), Some(top)) => {
                base.on_denied = top.on_denied.or(base.on_denied);
                base.tools.extend(top.tools);
                Some(base)
            }
            (base, top) => top.or(base),
        }
    }
}

/// A call of a command-running tool, as the policy judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandLine {
    /// A program and its arguments, run without a shell.
    Exec(Vec<String>),
    /// A line run by `sh -c`.
    Shell(String),
}

impl CommandLine {
    /// The command as one line, for messages and the `denied` record.
    pub fn text(&self) -> String {
        match self {
            CommandLine::Exec(argv) => argv.join(" "),
            CommandLine::Shell(line) => line.clone(),
        }
    }
}

/// Why a command rule (`allow` or `deny` text) is not usable.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RuleError {
    /// The rule holds a character that joins or redirects commands.
    #[error("rule {text:?} contains {found:?}: a rule matches one simple command")]
    Separator {
        /// The rule as written.
        text: String,
        /// The first such character.
        found: char,
    },
    /// The rule's words cannot be split (an unclosed quote).
    #[error("rule {text:?}: {why}")]
    Words {
        /// The rule as written.
        text: String,
        /// What the word splitter said.
        why: super::shell_words::SplitError,
    },
    /// The rule has no words.
    #[error("a rule is empty")]
    Empty,
    /// The rule has glob characters but is not a valid glob.
    #[error("rule {text:?} is not a valid glob: {}", source.kind())]
    Glob {
        /// The rule as written.
        text: String,
        /// What globset said.
        #[source]
        source: globset::Error,
    },
}

/// One command rule, compiled.
#[derive(Debug, Clone)]
pub struct CommandRule {
    /// As written.
    pub text: String,
    matcher: RuleMatcher,
}

#[derive(Debug, Clone)]
enum RuleMatcher {
    Prefix(Vec<String>),
    Glob(globset::GlobMatcher),
}

/// Characters after which a `sh -c` line is more than one simple command (or expands something).
/// The tool whose command rules also bind command-running tools without rules of their own.
const COMMAND_TOOL: &str = "run_command";

const SHELL_META: &[char] = &[';', '&', '|', '<', '>', '(', ')', '$', '`', '\\', '{', '}', '\n', '\r'];
/// Where [`deny_words`] cuts a command into pieces.
const SEPARATORS: &[char] = &[';', '&', '|', '<', '>', '(', ')', '$', '`', '{', '}', '\n', '\r'];

impl CommandRule {
    /// Compiles `text`; the error says why it is not a usable rule.
    pub fn new(text: &str) -> Result<CommandRule, RuleError> {
        if let Some(found) = text.chars().find(|c| SEPARATORS.contains(c)) {
            return Err(RuleError::Separator { text: text.to_string(), found });
        }
        let words = super::shell_words::split_words(text).map_err(|why| RuleError::Words { text: text.to_string(), why })?;
        if words.is_empty() {
            return Err(RuleError::Empty);
        }
        let joined = words.join(" ");
        let matcher = if joined.contains(['*', '?', '[']) {
            let glob = globset::GlobBuilder::new(&joined)
                .literal_separator(false)
                .build()
                .map_err(|source| RuleError::Glob { text: text.to_string(), source })?;
            RuleMatcher::Glob(glob.compile_matcher())
        } else {
            RuleMatcher::Prefix(words)
        };
        Ok(CommandRule { text: text.to_string(), matcher })
    }

    /// True when the rule matches the command `words` from their first.
    fn matches(&self, words: &[String]) -> bool {
        match &self.matcher {
            RuleMatcher::Prefix(prefix) => words.starts_with(prefix),
            RuleMatcher::Glob(glob) => {
                let line = words.join(" ");
                glob.is_match(&line) || glob.is_match(format!("{line} "))
            }
        }
    }

    /// True when the rule matches the words starting at any of `words`, the first of them
    /// also taken by its file name (`/usr/bin/curl` as `curl`).
    fn matches_anywhere(&self, words: &[String]) -> bool {
        (0..words.len()).any(|i| {
            let tail = &words[i..];
            let program = tail[0].rsplit('/').next().filter(|name| !name.is_empty() && *name != tail[0]);
            self.matches(tail) || program.is_some_and(|name| self.matches(&[&[name.to_string()], &tail[1..]].concat()))
        })
    }
}

/// Whether a tool may be called.
#[derive(Debug, Clone)]
pub enum Allow {
    /// Every call (the default).
    All,
    /// No call.
    Nothing,
    /// Only commands matching one of these.
    Rules(Vec<CommandRule>),
}

/// One tool's policy, compiled.
#[derive(Debug, Clone)]
pub struct ToolRule {
    /// What is allowed.
    pub allow: Allow,
    /// Commands denied.
    pub deny: Vec<CommandRule>,
    /// Hosts `web_fetch` may reach (the host patterns of `network`).
    pub allowed_hosts: Vec<HostPattern>,
}

/// A refused call: why, and which rule said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The rule, e.g. `policy.run_command.deny "curl *"`.
    pub rule: String,
    /// What was refused and why.
    pub reason: String,
}

impl From<Denial> for super::ToolError {
    fn from(d: Denial) -> Self {
        super::ToolError::new(super::ErrorCode::Denied, format!("{} (policy rule {})", d.reason, d.rule))
    }
}

/// A task's whole policy, compiled; the default allows everything.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// What a denial does.
    pub on_denied: OnDenied,
    /// Rules by tool name; a tool not named is allowed.
    pub tools: BTreeMap<String, ToolRule>,
}

impl Policy {
    /// Compiles `fields`, checking tool names against the built-in tools; every problem is
    /// returned as (key path below `policy`, message).
    pub fn compile(fields: &PolicyFields) -> Result<Policy, Vec<(String, String)>> {
        let tools = super::builtin();
        let known: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        let hosts_tools: Vec<&str> = tools.iter().filter(|t| t.reaches_hosts()).map(|t| t.name()).collect();
        let mut errors = Vec::new();
        let mut compiled = BTreeMap::new();
        for (name, rule) in &fields.tools {
            let Some(tool) = tools.iter().find(|t| t.name() == name) else {
                let hint = dracode_input::did_you_mean(name, &known);
                errors.push((name.clone(), format!("unknown tool {name:?}{hint}; known: {}", known.join(", "))));
                continue;
            };
            match compile_tool(name, rule, tool.as_ref(), &hosts_tools) {
                Ok(r) => {
                    compiled.insert(name.clone(), r);
                }
                Err(mut e) => errors.append(&mut e),
            }
        }
        if errors.is_empty() { Ok(Policy { on_denied: fields.on_denied.unwrap_or_default(), tools: compiled }) } else { Err(errors) }
    }

    /// Whether tool `name` may run `command` (its command line, for tools that run commands).
    pub fn check(&self, name: &str, command: Option<&CommandLine>) -> Result<(), Denial> {
        // A tool that runs commands with no rules of its own (`run_persistent`) obeys
        // `run_command`'s: another way to start a command is no way around them.
        let (name, rule) = match self.tools.get(name) {
            Some(rule) => (name, rule),
            None => match self.tools.get(COMMAND_TOOL).filter(|_| command.is_some()) {
                Some(rule) => (COMMAND_TOOL, rule),
                None => return Ok(()),
            },
        };
        let denial = |rule: String, reason: String| Err(Denial { rule, reason });
        if let Allow::Nothing = rule.allow {
            return denial(format!("policy.{name}.allow = false"), format!("{name} may not be called in this task"));
        }
        let Some(command) = command else { return Ok(()) };
        let text = command.text();
        let loose = deny_words(&text);
        if let Some(hit) = rule.deny.iter().find(|r| loose.iter().any(|words| r.matches_anywhere(words))) {
            return denial(format!("policy.{name}.deny {:?}", hit.text), format!("command `{text}` is denied"));
        }
        let Allow::Rules(allowed) = &rule.allow else { return Ok(()) };
        let rule_name = format!("policy.{name}.allow");
        let words = match command {
            CommandLine::Exec(argv) => argv.clone(),
            CommandLine::Shell(line) if line.contains(SHELL_META) => {
                let reason = format!("command `{text}` uses shell operators; allow rules match only simple commands");
                return denial(rule_name, reason);
            }
            CommandLine::Shell(line) => super::shell_words::split_words(line).unwrap_or_default(),
        };
        if allowed.iter().any(|r| r.matches(&words)) {
            Ok(())
        } else {
            let list = allowed.iter().map(|r| format!("{:?}", r.text)).collect::<Vec<_>>().join(", ");
            denial(rule_name, format!("command `{text}` matches none of the allowed commands [{list}]"))
        }
    }

    /// The hosts `tool` may reach (empty: none).
    pub fn allowed_hosts(&self, tool: &str) -> &[HostPattern] {
        self.tools.get(tool).map_or(&[], |r| r.allowed_hosts.as_slice())
    }

    /// Whether `tool` may reach `host` on `port`: one of its allowed hosts matches, as a
    /// `network` pattern does.
    pub fn allows_host(&self, tool: &str, host: &Host, port: u16) -> bool {
        self.allowed_hosts(tool).iter().any(|p| p.matches(host, port))
    }

    /// The policy as shown by `dracode tools --task`: per tool `allow` (true, false or rules),
    /// `deny` and `allowed_hosts`.
    pub fn describe(&self, tool: &str) -> serde_json::Value {
        let Some(rule) = self.tools.get(tool) else { return serde_json::json!({ "allow": true }) };
        let texts = |rules: &[CommandRule]| rules.iter().map(|r| r.text.clone()).collect::<Vec<_>>();
        let allow = match &rule.allow {
            Allow::All => serde_json::json!(true),
            Allow::Nothing => serde_json::json!(false),
            Allow::Rules(rules) => serde_json::json!(texts(rules)),
        };
        let mut v = serde_json::json!({ "allow": allow });
        if !rule.deny.is_empty() {
            v["deny"] = serde_json::json!(texts(&rule.deny));
        }
        if !rule.allowed_hosts.is_empty() {
            v["allowed_hosts"] = serde_json::json!(rule.allowed_hosts.iter().map(ToString::to_string).collect::<Vec<_>>());
        }
        v
    }
}

/// Compiles one tool's table; errors keyed `tool.field[i]`. `hosts_tools` are the tools that
/// take `allowed_hosts`.
fn compile_tool(
    name: &str,
    fields: &ToolRuleFields,
    tool: &dyn super::Tool,
    hosts_tools: &[&str],
) -> Result<ToolRule, Vec<(String, String)>> {
    let runs_commands = tool.runs_commands();
    let mut errors = Vec::new();
    let mut rules = |field: &str, list: &[String]| -> Vec<CommandRule> {
        if !runs_commands {
            errors.push((format!("{name}.{field}"), format!("{name} runs no commands: use allow = true or false")));
            return Vec::new();
        }
        let mut out = Vec::new();
        for (i, text) in list.iter().enumerate() {
            match CommandRule::new(text) {
                Ok(rule) => out.push(rule),
                Err(e) => errors.push((format!("{name}.{field}[{i}]"), e.to_string())),
            }
        }
        out
    };
    let allow = match &fields.allow {
        None | Some(AllowField::All(true)) => Allow::All,
        Some(AllowField::All(false)) => Allow::Nothing,
        Some(AllowField::Rules(list)) => Allow::Rules(rules("allow", list)),
    };
    let deny = fields.deny.as_deref().map(|list| rules("deny", list)).unwrap_or_default();
    if fields.allowed_hosts.is_some() && !tool.reaches_hosts() {
        errors.push((format!("{name}.allowed_hosts"), format!("only {} takes allowed_hosts", hosts_tools.join(", "))));
    }
    let mut allowed_hosts = Vec::new();
    for (i, host) in fields.allowed_hosts.iter().flatten().enumerate() {
        match HostPattern::parse(host) {
            Ok(pattern) => allowed_hosts.push(pattern),
            Err(e) => errors.push((format!("{name}.allowed_hosts[{i}]"), e.to_string())),
        }
    }
    if errors.is_empty() { Ok(ToolRule { allow, deny, allowed_hosts }) } else { Err(errors) }
}

/// The words of every piece of `text` cut at shell operators, quotes and backslashes dropped:
/// what deny rules are matched against.
fn deny_words(text: &str) -> Vec<Vec<String>> {
    text.split(SEPARATORS)
        .map(|piece| {
            let plain: String = piece.chars().filter(|c| !matches!(c, '\'' | '"' | '\\')).collect();
            plain.split_whitespace().map(str::to_string).collect::<Vec<_>>()
        })
        .filter(|words| !words.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> Policy {
        let rule = ToolRuleFields {
            allow: (!allow.is_empty()).then(|| AllowField::Rules(allow.iter().map(|s| (*s).to_string()).collect())),
            deny: Some(deny.iter().map(|s| (*s).to_string()).collect()),
            allowed_hosts: None,
        };
        let fields = PolicyFields { on_denied: None, tools: [("run_command".to_string(), rule)].into() };
        Policy::compile(&fields).unwrap()
    }

    #[test]
    fn other_command_tools_obey_run_commands_rules_unless_they_have_their_own() {
        let p = policy(&["cargo *"], &["curl *"]);
        let d = p.check("run_persistent", Some(&exec("curl evil"))).unwrap_err();
        assert_eq!(d.rule, "policy.run_command.deny \"curl *\"");
        assert!(p.check("run_persistent", Some(&exec("python -m http.server"))).is_err(), "not on the allow list");
        assert!(p.check("run_persistent", Some(&exec("cargo run"))).is_ok());
        assert!(p.check("read_file", None).is_ok(), "a tool that runs nothing is not judged by command rules");
        let mut fields = PolicyFields { on_denied: None, tools: BTreeMap::new() };
        let own = ToolRuleFields { allow: Some(AllowField::Rules(vec!["npm start".into()])), deny: None, allowed_hosts: None };
        fields.tools.insert("run_persistent".into(), own);
        fields.tools.insert(
            "run_command".into(),
            ToolRuleFields { allow: Some(AllowField::Rules(vec!["cargo *".into()])), deny: None, allowed_hosts: None },
        );
        let p = Policy::compile(&fields).unwrap();
        assert!(p.check("run_persistent", Some(&exec("npm start"))).is_ok());
        assert!(p.check("run_persistent", Some(&exec("cargo run"))).is_err(), "its own rules replace run_command's");
    }

    fn shell(line: &str) -> CommandLine {
        CommandLine::Shell(line.to_string())
    }

    fn exec(line: &str) -> CommandLine {
        CommandLine::Exec(line.split(' ').map(str::to_string).collect())
    }

    #[test]
    fn allow_rules_are_argv_prefixes_or_globs() {
        let p = policy(&["cargo *", "npm test"], &[]);
        for ok in ["cargo test -p x", "cargo", "npm test", "npm test --watch"] {
            assert!(p.check("run_command", Some(&exec(ok))).is_ok(), "{ok}");
            assert!(p.check("run_command", Some(&shell(ok))).is_ok(), "{ok}");
        }
        for denied in ["npm tests", "npm install", "cargox build", "make"] {
            let d = p.check("run_command", Some(&exec(denied))).unwrap_err();
            assert_eq!(d.rule, "policy.run_command.allow", "{denied}");
        }
    }

    #[test]
    fn shell_operators_never_match_an_allow_rule() {
        let p = policy(&["cargo *"], &[]);
        for line in
            ["cargo test; curl evil", "cargo test && rm -rf /", "cargo $(curl x)", "cargo `id`", "cargo test | sh", "cargo x\ncurl y"]
        {
            let d = p.check("run_command", Some(&shell(line))).unwrap_err();
            assert!(d.reason.contains("shell operators"), "{line}: {d:?}");
        }
        // Without a shell the same text is one program's arguments: harmless, and allowed.
        assert!(p.check("run_command", Some(&exec("cargo test; curl evil"))).is_ok());
    }

    #[test]
    fn deny_wins_and_sees_through_operators_and_shells() {
        let p = policy(&["cargo *", "sh *", "timeout *"], &["curl *", "git push*"]);
        for line in [
            "cargo test; curl evil",
            "sh -c \"curl evil\"",
            "sh -c 'c''url' x",
            "timeout 5 curl x",
            "git push origin main",
            "/usr/bin/curl x",
        ] {
            let d = p.check("run_command", Some(&shell(line))).unwrap_err();
            assert!(d.rule.starts_with("policy.run_command.deny"), "{line}: {d:?}");
        }
        let d = p.check("run_command", Some(&exec("sh -c curl evil"))).unwrap_err();
        assert_eq!(d.rule, "policy.run_command.deny \"curl *\"");
        assert!(p.check("run_command", Some(&shell("cargo build --release"))).is_ok());
        // A deny list alone allows the rest.
        let only_deny = policy(&[], &["rm *"]);
        assert!(only_deny.check("run_command", Some(&shell("make test"))).is_ok());
        assert!(only_deny.check("run_command", Some(&shell("make; rm -rf x"))).is_err());
    }

    #[test]
    fn a_whole_tool_can_be_denied_and_unnamed_tools_are_allowed() {
        let fields = PolicyFields {
            on_denied: Some(OnDenied::Fail),
            tools: [("delete_file".to_string(), ToolRuleFields { allow: Some(AllowField::All(false)), ..Default::default() })].into(),
        };
        let p = Policy::compile(&fields).unwrap();
        assert_eq!(p.on_denied, OnDenied::Fail);
        assert_eq!(p.check("delete_file", None).unwrap_err().rule, "policy.delete_file.allow = false");
        assert!(p.check("read_file", None).is_ok());
    }

    #[test]
    fn bad_policies_name_the_rule() {
        let rules = |allow: &[&str]| ToolRuleFields {
            allow: Some(AllowField::Rules(allow.iter().map(|s| (*s).to_string()).collect())),
            ..Default::default()
        };
        let fields = PolicyFields {
            on_denied: None,
            tools: [
                ("run_comand".to_string(), ToolRuleFields::default()),
                ("run_command".to_string(), rules(&["cargo *", "cargo [", "a; b", ""])),
                ("read_file".to_string(), rules(&["x"])),
            ]
            .into(),
        };
        let errors = Policy::compile(&fields).unwrap_err();
        let keys: Vec<&str> = errors.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["read_file.allow", "run_comand", "run_command.allow[1]", "run_command.allow[2]", "run_command.allow[3]"]);
        assert!(errors[1].1.contains("did you mean \"run_command\""), "{errors:?}");
        assert!(errors[2].1.contains("not a valid glob"), "{errors:?}");
    }

    fn fetch_policy(hosts: &[&str]) -> Result<Policy, Vec<(String, String)>> {
        let rule = ToolRuleFields { allowed_hosts: Some(hosts.iter().map(|h| (*h).to_string()).collect()), ..Default::default() };
        Policy::compile(&PolicyFields { on_denied: None, tools: [("web_fetch".to_string(), rule)].into() })
    }

    #[test]
    fn hosts_match_exactly_or_by_subdomain() {
        let p = fetch_policy(&["docs.rs", "*.github.com"]).unwrap();
        let allowed = |host: &str| p.allows_host("web_fetch", &Host::parse(host).unwrap(), 443);
        assert!(allowed("docs.rs") && allowed("DOCS.RS."));
        assert!(allowed("api.github.com"));
        assert!(!allowed("github.com") && !allowed("evildocs.rs"));
        assert!(!allowed("docs.rs.evil.com"));
        assert_eq!(fetch_policy(&["https://docs.rs"]).unwrap_err()[0].0, "web_fetch.allowed_hosts[0]");
    }

    #[test]
    fn allowed_hosts_are_network_patterns_with_the_same_meaning() {
        // A port narrows the pattern to that port, as in `network`.
        let p = fetch_policy(&["docs.rs:443", "127.0.0.1", "[::1]:8080"]).unwrap();
        let allowed = |host: &str, port| p.allows_host("web_fetch", &Host::parse(host).unwrap(), port);
        assert!(allowed("docs.rs", 443) && !allowed("docs.rs", 80));
        assert!(allowed("127.0.0.1", 1) && allowed("::ffff:127.0.0.1", 1));
        assert!(allowed("[::1]", 8080) && !allowed("[::1]", 8081));
        assert_eq!(p.describe("web_fetch")["allowed_hosts"], serde_json::json!(["docs.rs:443", "127.0.0.1", "[::1]:8080"]));
        // What `network` refuses, `allowed_hosts` refuses: names that read as addresses, empty labels.
        let errors = fetch_policy(&["127.1", "a..b", "*.1.2.3.4", "a.*.b", "docs.rs/x", "ok.example"]).unwrap_err();
        let keys: Vec<String> = errors.into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, (0..5).map(|i| format!("web_fetch.allowed_hosts[{i}]")).collect::<Vec<_>>());
        for text in ["127.1", "a..b", "docs.rs:443", "*", "_srv.example", "::1", "https://x"] {
            assert_eq!(fetch_policy(&[text]).is_ok(), HostPattern::parse(text).is_ok(), "{text}: the same verdict as in network");
        }
    }
}
