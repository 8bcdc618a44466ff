//! Keeping secrets out of everything dracode writes and everything the agent runs.
//!
//! Two defences. First, by construction: commands the agent runs get an *allowlisted*
//! environment ([`child_env`]: [`ALLOWED_ENV`], `LC_*`, and what the task names), so a variable
//! nobody thought of (`DATABASE_URL`, `MY_CRED`) never reaches them. Second, by masking: every
//! artifact and every line on stdout/stderr passes through a [`Redactor`] that replaces the
//! configured keys and every removed value that may be a credential ([`may_be_credential`]) with
//! `[REDACTED]` — also in base64, URL-encoded and JSON-escaped form, and also when an escape
//! sequence or control character was put inside it. Values too short or too common to be
//! secrets ([`is_maskable`]) are never masked, and what must stay exact (a patch, a task id, a
//! file name) is never rewritten: a secret found in a task's changes ends the task instead
//! ([`Redactor::secrets_in`]).
#![forbid(unsafe_code)]

use aho_corasick::{AhoCorasick, MatchKind};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, PoisonError, RwLock};

/// What replaces a secret in any output.
pub const MASK: &str = "[REDACTED]";

/// Shortest value masked: shorter ones (`1`, `dev`, `bytes`, `wrong`) are words, and masking
/// them would mangle every artifact.
pub const MIN_SECRET_LEN: usize = 8;

/// Values that stand in for a key where none is needed (local servers: vLLM's `EMPTY`,
/// Ollama's `ollama`, llama.cpp's `sk-no-key-required`, …) or are too common to be a secret;
/// never masked (compared without case).
pub const PLACEHOLDERS: &[&str] = &[
    "empty",
    "none",
    "null",
    "nil",
    "ollama",
    "dummy",
    "test",
    "token",
    "secret",
    "password",
    "changeme",
    "change-me",
    "placeholder",
    "anything",
    "no-key",
    "nokey",
    "not-needed",
    "not-required",
    "no-key-required",
    "sk-no-key-required",
    "sk-dummy",
    "sk-local",
    "sk-xxx",
    "lm-studio",
    "lmstudio",
    "llamacpp",
    "llama.cpp",
    "your-api-key",
    "your_api_key",
    "dummy-key",
    "dummy_key",
    "fake-key",
    "test-key",
    "local-key",
];

/// Shortest encoded (base64) form masked: a shorter one matches ordinary words.
const MIN_ENCODED_LEN: usize = 6;

/// The variables commands the agent runs may see (besides `LC_*` and what the task's `env` /
/// `env_passthrough` name), when the parent has them:
/// - the basics of a POSIX session: where programs are, who and where the user is, language,
///   terminal, time zone, temporary folder;
/// - CI markers that carry no secret and no path (`CI`, `GITHUB_ACTIONS`, `RUNNER_OS`, …) so
///   tools behave as in CI; not `GITHUB_WORKSPACE` and the like, which point at the user's own
///   checkout rather than the task's workspace;
/// - what toolchains need to find themselves and their caches (Rust, Go, Java, Node, Python,
///   Ruby, .NET, C). Nothing that carries a registry URL or credentials (`PIP_INDEX_URL`,
///   `NPM_CONFIG_*`, `GOPROXY`): a task that needs one passes it with `env_passthrough`.
pub const ALLOWED_ENV: &[&str] = &[
    // Session.
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
    // CI markers.
    "CI",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "BUILDKITE",
    "CIRCLECI",
    "TF_BUILD",
    "RUNNER_OS",
    "RUNNER_ARCH",
    // Rust.
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_TERM_COLOR",
    // Go.
    "GOPATH",
    "GOROOT",
    "GOMODCACHE",
    "GOCACHE",
    "GOFLAGS",
    "GOTOOLCHAIN",
    // Java.
    "JAVA_HOME",
    "MAVEN_HOME",
    "M2_HOME",
    "GRADLE_USER_HOME",
    // Node.
    "NODE_PATH",
    "NVM_DIR",
    "NVM_BIN",
    // Python.
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "PYENV_ROOT",
    "CONDA_PREFIX",
    "PIP_CACHE_DIR",
    "UV_CACHE_DIR",
    // Ruby, .NET.
    "GEM_HOME",
    "GEM_PATH",
    "DOTNET_ROOT",
    // C and native builds.
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "LDFLAGS",
    "PKG_CONFIG_PATH",
    "LD_LIBRARY_PATH",
];

/// Variables removed by exact name, besides the patterns in [`is_secret_name`].
const SECRET_NAMES: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "ZAI_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_COPILOT_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
    "ACTIONS_CACHE_URL",
    "ACTIONS_RESULTS_URL",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "CI_JOB_TOKEN",
    "NPM_TOKEN",
    "CARGO_REGISTRY_TOKEN",
];

/// Name fragments that suggest a credential, though less surely than [`is_secret_name`]: such
/// a variable's value is masked unless it is plainly not a secret (see [`may_be_credential`]).
const CREDENTIAL_WORDS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASS", "CRED", "AUTH", "COOKIE", "PRIVATE", "SIGNATURE", "DSN"];

/// True for a variable that holds (or may hold) a credential: the known provider and CI
/// variables, anything named like `*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`,
/// `*_CREDENTIALS`, and dracode's own `DRACODE_*` (config may carry keys).
pub fn is_secret_name(name: &str) -> bool {
    name.to_ascii_uppercase().starts_with("DRACODE_") || named_as_secret(name)
}

/// [`is_secret_name`] without the `DRACODE_*` rule: names that say "credential" outright.
fn named_as_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str())
        || ["_API_KEY", "_APIKEY", "_TOKEN", "_ACCESS_KEY", "_CREDENTIALS"].iter().any(|suffix| upper.ends_with(suffix))
        || ["SECRET", "PASSWORD", "PRIVATE_KEY"].iter().any(|word| upper.contains(word))
}

/// True for a variable a command may see without being named by the task: one of
/// [`ALLOWED_ENV`] or `LC_*`, and never one named like a secret.
pub fn is_allowed_name(name: &str) -> bool {
    (ALLOWED_ENV.contains(&name) || name.starts_with("LC_")) && !is_secret_name(name)
}

/// The environment for commands the agent runs (and the task's check): the allowlisted
/// variables of `parent` ([`is_allowed_name`]), plus the ones `passthrough` names (even when
/// named like a secret: the task asked; [`Redactor::from_env`] still masks their values), then
/// `task_env` on top.
pub fn child_env<S: AsRef<str>>(
    parent: impl IntoIterator<Item = (String, String)>,
    passthrough: &[S],
    task_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let passed = |name: &str| passthrough.iter().any(|p| p.as_ref() == name);
    let mut env: BTreeMap<String, String> = parent.into_iter().filter(|(k, _)| is_allowed_name(k) || passed(k)).collect();
    env.extend(task_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// True for a value that may be masked at all: [`MIN_SECRET_LEN`] characters or more (trimmed),
/// not one of the [`PLACEHOLDERS`] and not one character repeated (`xxxxxxxx`).
pub fn is_maskable(value: &str) -> bool {
    let value = value.trim();
    let lower = value.to_lowercase();
    let mut chars = value.chars();
    let first = chars.next();
    value.chars().count() >= MIN_SECRET_LEN && !PLACEHOLDERS.contains(&lower.as_str()) && !chars.all(|c| Some(c) == first)
}

/// Whether the value of a variable removed from commands' environment must be masked. The
/// rule, so that masking does not wreck artifacts (`true`, `1` or `/usr/bin` masked everywhere
/// would):
/// - nothing that is not [`is_maskable`] (shorter than [`MIN_SECRET_LEN`], a placeholder);
/// - a name that says "credential" outright ([`is_secret_name`] without `DRACODE_*`): always;
/// - a URL with a password in it (`postgres://u:pw@host`): always;
/// - a name with a credential word (`KEY`, `PASS`, `AUTH`, `CRED`, …): unless the value is
///   plain (a number, a boolean, a path, a URL without credentials);
/// - any other name (`DRACODE_LOG=debug` included): when the value looks generated — 8+ characters, no whitespace, letters
///   and digits alternating at least four times (a token, not a branch name or a host name),
///   not plain, and not a 40/64-digit hex object id (commit SHAs are not secrets and name the
///   base commit in `task.started`).
pub fn may_be_credential(name: &str, value: &str) -> bool {
    let value = value.trim();
    if !is_maskable(value) {
        return false;
    }
    if named_as_secret(name) || url_password(value).is_some() {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    if CREDENTIAL_WORDS.iter().any(|w| upper.contains(w)) {
        return !is_plain(value);
    }
    looks_generated(value)
}

/// A number, a boolean word, a path, or a URL without credentials or query.
fn is_plain(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let url_without_secrets = value.contains("://") && !value.contains('@') && !value.contains('?');
    value.parse::<f64>().is_ok()
        || ["true", "false", "yes", "no", "on", "off"].contains(&lower.as_str())
        || value.starts_with('/')
        || value.starts_with("~/")
        || value.starts_with("./")
        || url_without_secrets
        || std::path::Path::new(value).exists()
}

/// 8+ characters without whitespace whose letters and digits alternate at least four times
/// (`q8Zr2LwX…`, not `feature-123` or `runner42`), not plain, not a hex object id.
fn looks_generated(value: &str) -> bool {
    let hex_id = matches!(value.len(), 40 | 64) && value.bytes().all(|b| b.is_ascii_hexdigit());
    let classes: Vec<bool> = value.bytes().filter(u8::is_ascii_alphanumeric).map(|b| b.is_ascii_digit()).collect();
    let alternations = classes.windows(2).filter(|w| w[0] != w[1]).count();
    value.len() >= 8 && !value.contains(char::is_whitespace) && alternations >= 4 && !hex_id && !is_plain(value)
}

/// The password of a URL with credentials (`scheme://user:password@host…`).
fn url_password(value: &str) -> Option<&str> {
    let (_, rest) = value.split_once("://")?;
    let userinfo = &rest[..rest.find('@')?];
    let password = userinfo.split_once(':')?.1;
    (!password.is_empty() && !userinfo.contains('/')).then_some(password)
}

/// Replaces known secret values with [`MASK`], in one pass over the text.
///
/// Each secret is looked for as it is, JSON-escaped, URL-encoded (`%XX`, either case) and in
/// base64 (standard and URL-safe, at each of the three byte alignments it can have inside a
/// longer encoded text; forms shorter than six characters are left out). Matching sees the
/// text as a reader does once escape sequences and control characters are stripped (as the
/// reports strip them), so a secret with `ESC[0m` or a BEL put inside it is masked too; the rest
/// of the text is left byte for byte. Each secret keeps the names it came by (a variable, a
/// config key), so [`Redactor::secrets_in`] can say which one a text holds without its value.
/// Its clones share its secrets: one learned at run time ([`Redactor::learn`], a token dracode
/// fetched) is masked by every clone from then on.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    patterns: Arc<RwLock<Patterns>>,
}

/// The forms of the secrets, and the automaton finding them.
#[derive(Debug, Default)]
struct Patterns {
    /// Each form, with the names of the secrets it is a form of.
    forms: BTreeMap<String, BTreeSet<String>>,
    automaton: Option<AhoCorasick>,
    /// Per pattern of `automaton`, the names of the secrets it is a form of.
    names: Vec<BTreeSet<String>>,
}

impl Patterns {
    /// Adds the forms of `value` (when [`is_maskable`]) under `name`; `true` when it did.
    fn add(&mut self, name: &str, value: &str) -> bool {
        let value = value.trim();
        if !is_maskable(value) {
            return false;
        }
        for form in encoded_forms(value) {
            self.forms.entry(form).or_default().insert(name.to_string());
        }
        true
    }

    /// Builds the automaton of the forms.
    fn build(&mut self) {
        if self.forms.is_empty() {
            return;
        }
        self.automaton = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(self.forms.keys()).ok();
        self.names = self.forms.values().cloned().collect();
    }
}

impl Redactor {
    /// A redactor for the given values (values that are not [`is_maskable`] are ignored:
    /// masking `1` or `EMPTY` would mangle every artifact).
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        Self::named(secrets.into_iter().map(|s| ("a configured secret".to_string(), s)))
    }

    /// A redactor for `(name, value)` pairs; the name (a variable, `providers.x.api_key`) is
    /// what [`Redactor::secrets_in`] reports, never the value.
    pub fn named(secrets: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut patterns = Patterns::default();
        for (name, value) in secrets {
            patterns.add(&name, &value);
        }
        patterns.build();
        Redactor { patterns: Arc::new(RwLock::new(patterns)) }
    }

    /// Masks `value` too from now on, here and in every clone (a secret known only at run time:
    /// an access token dracode fetched); `name` says where it came from. A value that is not
    /// [`is_maskable`] is ignored.
    pub fn learn(&self, name: &str, value: &str) {
        let mut patterns = self.patterns.write().unwrap_or_else(PoisonError::into_inner);
        if patterns.add(name, value) {
            patterns.build();
        }
    }

    /// A redactor for every value of `env` that [`child_env`] removes by default and that may
    /// be a credential ([`may_be_credential`]; a URL's password also on its own), named by
    /// its variable, plus `extra` `(name, value)` pairs (configured keys).
    pub fn from_env(env: impl IntoIterator<Item = (String, String)>, extra: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut secrets: Vec<(String, String)> = extra.into_iter().collect();
        for (name, value) in env {
            if is_allowed_name(&name) || !may_be_credential(&name, &value) {
                continue;
            }
            if let Some(password) = url_password(&value) {
                secrets.push((name.clone(), password.to_string()));
            }
            secrets.push((name, value));
        }
        Self::named(secrets)
    }

    /// `text` with every secret replaced by [`MASK`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redact_keeping(text, &[])
    }

    /// `text` with every secret replaced by [`MASK`], but where it lies within an occurrence of
    /// one of `keep` (the user's own words: a task id): those are never rewritten.
    pub fn redact_keeping<'a>(&self, text: &'a str, keep: &[&str]) -> Cow<'a, str> {
        let patterns = self.patterns.read().unwrap_or_else(PoisonError::into_inner);
        let Some(automaton) = &patterns.automaton else { return Cow::Borrowed(text) };
        if !text.chars().any(is_stripped) && !automaton.is_match(text) {
            return Cow::Borrowed(text);
        }
        let kept: Vec<(usize, usize)> =
            keep.iter().filter(|k| !k.is_empty()).flat_map(|k| text.match_indices(k).map(|(at, m)| (at, at + m.len()))).collect();
        let spans = spans(automaton, text);
        let masked = spans.into_iter().filter(|(start, end, _)| !kept.iter().any(|(s, e)| s <= start && end <= e));
        let mut out = String::new();
        let mut copied = 0;
        for (start, end, _) in masked {
            out.push_str(&text[copied..start]);
            out.push_str(MASK);
            copied = end;
        }
        if copied == 0 && out.is_empty() {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }

    /// The names of the secrets `text` holds (in any form [`Redactor::redact`] masks), sorted;
    /// empty when it holds none.
    pub fn secrets_in(&self, text: &str) -> Vec<String> {
        let patterns = self.patterns.read().unwrap_or_else(PoisonError::into_inner);
        let Some(automaton) = &patterns.automaton else { return Vec::new() };
        let names: BTreeSet<&String> = spans(automaton, text).into_iter().flat_map(|(_, _, pattern)| &patterns.names[pattern]).collect();
        names.into_iter().cloned().collect()
    }
}

/// Where the secrets `patterns` finds lie in `text` (byte ranges of `text`, and the pattern), as
/// seen once escape sequences and control characters are stripped.
fn spans(patterns: &AhoCorasick, text: &str) -> Vec<(usize, usize, usize)> {
    if !text.chars().any(is_stripped) {
        return patterns.find_iter(text).map(|m| (m.start(), m.end(), m.pattern().as_usize())).collect();
    }
    let (view, origin) = visible(text);
    patterns.find_iter(&view).map(|m| (origin[m.start()], origin[m.end() - 1] + 1, m.pattern().as_usize())).collect()
}

/// True for a character a reader never sees: a control character other than newline and tab.
fn is_stripped(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// `text` without escape sequences (CSI colours, OSC-8 hyperlinks, any other) and control
/// characters other than newline and tab: how every human-facing artifact shows a text (check
/// output is often coloured), and the view a [`Redactor`] masks in — one function, so a secret
/// cut by an escape is masked in exactly the text a reader sees.
pub fn strip_control(text: &str) -> String {
    visible(text).0
}

/// `text` as shown once escape sequences and control characters (but newline and tab) are
/// stripped ([`strip_control`]) and, for each byte of that, the index of the byte of `text` it
/// came from.
fn visible(text: &str) -> (String, Vec<usize>) {
    struct View {
        text: String,
        origin: Vec<usize>,
        at: usize,
    }
    impl vte::Perform for View {
        fn print(&mut self, c: char) {
            // C1 controls and DEL may come through as characters; no reader sees them.
            if c.is_control() {
                return;
            }
            let start = self.at + 1 - c.len_utf8();
            self.text.push(c);
            self.origin.extend(start..=self.at);
        }
        fn execute(&mut self, byte: u8) {
            if byte == b'\n' || byte == b'\t' {
                self.text.push(byte as char);
                self.origin.push(self.at);
            }
        }
    }
    let mut view = View { text: String::with_capacity(text.len()), origin: Vec::with_capacity(text.len()), at: 0 };
    let mut parser = vte::Parser::new();
    for (at, byte) in text.bytes().enumerate() {
        view.at = at;
        parser.advance(&mut view, &[byte]);
    }
    (view.text, view.origin)
}

/// `secret` and the forms it takes inside encoded text: JSON-escaped, URL-encoded and base64.
fn encoded_forms(secret: &str) -> Vec<String> {
    let mut forms = vec![secret.to_string()];
    if let Ok(json) = serde_json::to_string(secret) {
        forms.push(json[1..json.len() - 1].to_string());
    }
    let encoded = percent_encoding::utf8_percent_encode(secret, URL_ENCODED).to_string();
    forms.push(encoded.to_ascii_lowercase());
    forms.push(encoded);
    for engine in [&base64::engine::general_purpose::STANDARD_NO_PAD, &base64::engine::general_purpose::URL_SAFE_NO_PAD] {
        for offset in 0..3 {
            forms.extend(base64_core(engine, secret.as_bytes(), offset).filter(|f| f.len() >= MIN_ENCODED_LEN));
        }
    }
    forms
}

/// The base64 characters that depend only on `secret` when it sits `offset` bytes after a
/// 3-byte boundary of the encoded data: the same in every text that encodes it there.
fn base64_core(engine: &impl base64::Engine, secret: &[u8], offset: usize) -> Option<String> {
    let mut data = vec![0u8; offset];
    data.extend_from_slice(secret);
    let encoded = engine.encode(&data);
    let first = (8 * offset).div_ceil(6);
    let last = 8 * data.len() / 6;
    encoded.get(first..last).map(str::to_string)
}

/// The bytes a secret's URL-encoded form writes `%XX`: every byte but `A-Z a-z 0-9 - . _ ~`.
const URL_ENCODED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    #[test]
    fn child_env_drops_credentials_and_keeps_the_rest() {
        let parent = [
            ("PATH", "/usr/bin"),
            ("OPENAI_API_KEY", "sk-live"),
            ("MY_SERVICE_TOKEN", "t"),
            ("DB_PASSWORD", "p"),
            ("DRACODE_PROVIDERS__OPENAI__API_KEY", "k"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let env = child_env(parent, &[] as &[&str], &BTreeMap::new());
        assert_eq!(env.keys().collect::<Vec<_>>(), ["HOME", "PATH"]);
    }

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn child_env_is_an_allowlist_with_passthrough_and_task_env() {
        let parent = vars(&[
            ("PATH", "/usr/bin"),
            ("LC_ALL", "C.UTF-8"),
            ("CARGO_HOME", "/cargo"),
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_WORKSPACE", "/home/runner/work/repo"),
            ("DATABASE_URL", "postgres://u:hunter22@db/app"),
            ("MY_CRED", "c0ffee-beef-1234"),
            ("NPM_CONFIG_REGISTRY", "https://npm.example"),
            ("DEPLOY_TOKEN", "tok-4242-x"),
            ("TERM", "xterm"),
        ]);
        let task_env = BTreeMap::from([("RUST_BACKTRACE".to_string(), "1".to_string()), ("TERM".to_string(), "dumb".to_string())]);
        let env = child_env(parent.clone(), &["NPM_CONFIG_REGISTRY", "DEPLOY_TOKEN"], &task_env);
        assert_eq!(
            env.keys().collect::<Vec<_>>(),
            ["CARGO_HOME", "DEPLOY_TOKEN", "GITHUB_ACTIONS", "LC_ALL", "NPM_CONFIG_REGISTRY", "PATH", "RUST_BACKTRACE", "TERM"]
        );
        assert_eq!(env["TERM"], "dumb", "the task's env wins");
        // A passed-through secret reaches the command but is still masked in every artifact.
        let r = Redactor::from_env(parent, Vec::new());
        assert_eq!(
            r.redact("tok-4242-x hunter22 c0ffee-beef-1234 https://npm.example"),
            "[REDACTED] [REDACTED] [REDACTED] https://npm.example"
        );
        assert_eq!(r.redact("postgres://u:hunter22@db/app"), "[REDACTED]");
    }

    #[test]
    fn removed_values_are_masked_only_when_they_may_be_credentials() {
        let cases = [
            ("OPENAI_API_KEY", "sk-12345678", true),
            ("OPENAI_API_KEY", "sk-1", false),
            ("OPENAI_API_KEY", "EMPTY", false),
            ("OPENAI_API_KEY", "SK-No-Key-Required", false),
            ("OPENAI_API_KEY", "xxxxxxxxxx", false),
            ("X_TOKEN", "abc", false),
            ("DB_PASSWORD", "12345678", true),
            ("DB_PASSWORD", "changeme", false),
            ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1", false),
            ("DRACODE_LOG", "debug", false),
            ("DRACODE_PROVIDERS__OPENAI__API_KEY", "k-123456", true),
            ("MY_KEYRING", "a1b2c3d4", true),
            ("SHLVL", "1", false),
            ("GITHUB_RUN_ID", "123456789", false),
            ("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567", false),
            ("GITHUB_SERVER_URL", "https://github.com", false),
            ("OLDPWD", "/usr/bin", false),
            ("DEBUG", "yes", false),
            ("RUNNER_NAME", "GitHub Actions 2", false),
            ("HOSTNAME", "fv-az123-456", false),
            ("SOME_ID", "q8Zr2LwX9vKp", true),
            ("WEBHOOK", "https://hooks.example/x?sig=a1b2c3d4e5", true),
            ("GITHUB_HEAD_REF", "dependabot/cargo/serde-1.0.200", false),
            ("BUILD_ID", "550e8400-e29b-41d4-a716-446655440000", true),
            ("DATABASE_URL", "postgres://u:hunter22@db/app", true),
        ];
        for (name, value, masked) in cases {
            assert_eq!(may_be_credential(name, value), masked, "{name}={value}");
        }
    }

    #[test]
    fn an_eight_character_secret_is_masked_in_every_form() {
        let secret = "k3y:5x7z";
        let r = Redactor::new([secret.to_string()]);
        let b64 = |engine: &dyn Fn(&[u8]) -> String, prefix: &str| engine(format!("{prefix}{secret}:tail").as_bytes());
        let std = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
        let url = |d: &[u8]| base64::engine::general_purpose::URL_SAFE.encode(d);
        for prefix in ["", "u", "us", "user:"] {
            for encoded in [b64(&std, prefix), b64(&url, prefix)] {
                let out = r.redact(&encoded);
                assert!(out.contains(MASK), "{prefix:?}: {encoded} -> {out}");
            }
        }
        assert_eq!(r.redact("plain k3y:5x7z."), "plain [REDACTED].");
        assert_eq!(r.redact("q=k3y%3A5x7z&x"), "q=[REDACTED]&x");
        assert_eq!(r.redact("q=k3y%3b5x7z"), "q=k3y%3b5x7z");
        assert_eq!(r.redact("lower k3y%3a5x7z upper"), "lower [REDACTED] upper");
    }

    #[test]
    fn a_secret_learned_at_run_time_is_masked_by_every_clone_from_then_on() {
        let run = Redactor::new(["sk-configured-1234".to_string()]);
        let reporter = run.clone();
        assert_eq!(reporter.redact("at-fetched-Vb3nQ8"), "at-fetched-Vb3nQ8");
        run.learn("a token of mcp_servers.web.oauth", "at-fetched-Vb3nQ8");
        run.learn("too short", "abc");
        assert_eq!(reporter.redact("got at-fetched-Vb3nQ8 and sk-configured-1234, abc"), "got [REDACTED] and [REDACTED], abc");
        let encoded = base64::engine::general_purpose::STANDARD.encode("Bearer at-fetched-Vb3nQ8");
        assert!(reporter.redact(&encoded).contains(MASK), "{encoded}");
        assert_eq!(reporter.secrets_in("at-fetched-Vb3nQ8"), ["a token of mcp_servers.web.oauth"]);
    }

    #[test]
    fn json_escaped_secrets_are_masked() {
        let secret = r#"pa"ss\word"#;
        let r = Redactor::new([secret.to_string()]);
        let json = serde_json::json!({ "password": secret }).to_string();
        assert_eq!(r.redact(&json), r#"{"password":"[REDACTED]"}"#);
    }

    #[test]
    fn a_secret_cut_by_an_escape_sequence_is_masked_and_the_rest_kept() {
        let r = Redactor::new(["sk-live-1234".to_string()]);
        let text = "\x1b[31mred\x1b[0m sk-li\x1b[0mve-12\x0734 \x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\ ö\r\n";
        assert_eq!(r.redact(text), "\x1b[31mred\x1b[0m [REDACTED] \x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\ ö\r\n");
        // The redactor sees the text as strip_control, which the reports show, leaves it.
        let (view, origin) = visible(text);
        assert_eq!(view, strip_control(text));
        assert_eq!(view, "red sk-live-1234 link ö\n");
        assert_eq!(origin.len(), view.len());
    }

    #[test]
    fn strip_control_drops_escapes_and_control_characters_but_newline_and_tab() {
        assert_eq!(strip_control("\x1b[1;31merror\x1b[0m: x\x07\r\n\tok"), "error: x\n\tok");
        let text = "see \x1b]8;;https://example.com/a\x1b\\the docs\x1b]8;;\x1b\\ and \x1b]0;title\x07\x1bMdone\x1b(B\x1b[?25l!";
        assert_eq!(strip_control(text), "see the docs and done!");
        assert_eq!(strip_control("a\u{7f}b\u{85}c\u{9b}d"), "abcd");
    }

    #[test]
    fn many_secrets_are_masked_in_one_pass_longest_first() {
        let r = Redactor::new(["abcdefgh".to_string(), "abcdefghijkl".to_string(), "zzzzyyyy".to_string()]);
        assert_eq!(r.redact("abcdefghijkl abcdefgh zzzzyyyyabcdefgh"), "[REDACTED] [REDACTED] [REDACTED][REDACTED]");
        assert!(matches!(Redactor::default().redact("abcd"), Cow::Borrowed(_)));
    }

    #[test]
    fn redactor_masks_values_and_ignores_short_ones() {
        let r = Redactor::from_env(
            [("OPENAI_API_KEY".to_string(), "sk-test-0123456789".to_string()), ("X_TOKEN".into(), "1".into())],
            [("providers.x.api_key".to_string(), "another-secret-value".to_string())],
        );
        assert_eq!(r.redact("key=sk-test-0123456789 and another-secret-value, 1"), "key=[REDACTED] and [REDACTED], 1");
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn short_and_placeholder_keys_are_never_masked() {
        let keys = ["bytes", "wrong", "EMPTY", "ollama", "dummy", "sk-no-key-required", "Password", "********", " changeme "];
        let r = Redactor::new(keys.map(str::to_string));
        let text = "def int_to_bytes(n): wrong-key EMPTY ollama dummy sk-no-key-required password ******** changeme";
        assert!(matches!(r.redact(text), Cow::Borrowed(_)));
        assert!(r.secrets_in(text).is_empty());
    }

    #[test]
    fn secrets_in_names_what_a_text_holds_never_the_value() {
        let r = Redactor::named([
            ("providers.hosted.api_key".to_string(), "q8Zr2LwX9vKp".to_string()),
            ("HOSTED_KEY".to_string(), "q8Zr2LwX9vKp".to_string()),
            ("DB_PASSWORD".to_string(), "hunter2222".to_string()),
        ]);
        assert_eq!(r.secrets_in("+TOKEN = \"q8Zr2LwX9vKp\"\n"), ["HOSTED_KEY", "providers.hosted.api_key"]);
        let encoded = base64::engine::general_purpose::STANDARD.encode("user:hunter2222");
        assert_eq!(r.secrets_in(&encoded), ["DB_PASSWORD"]);
        assert!(r.secrets_in("+def int_to_bytes(n):\n").is_empty());
    }

    #[test]
    fn words_to_keep_are_never_rewritten_and_the_rest_is_masked() {
        let r = Redactor::new(["staging-key-2026".to_string()]);
        let line = "FAIL rotate-staging-key-2026: leaked staging-key-2026";
        assert_eq!(r.redact_keeping(line, &["rotate-staging-key-2026"]), "FAIL rotate-staging-key-2026: leaked [REDACTED]");
        assert_eq!(r.redact(line), "FAIL rotate-[REDACTED]: leaked [REDACTED]");
    }
}
