//! Issue 27: cargo's configuration can carry credentials (`[registry] token`, a
//! `[registries.NAME]` token or `credential-provider`, a URL with a password). A confined
//! command cannot read the user's file when it does; it gets a copy without those keys, in
//! its task's own cargo home — with the network and without.

use super::attacks::Scenario;
use super::sandbox_reads::usable_cargo;
use crate::support::sandbox::supported;

/// The user's cargo configuration: secrets, and settings a build needs.
const CONFIG: &str = "[registry]\ntoken = \"cargo-token-SECRET\"\n\
    [registries.private]\nindex = \"sparse+https://user:cargo-url-SECRET@registry.invalid/index/\"\n\
    token = \"cargo-token2-SECRET\"\ncredential-provider = [\"cargo:token-from-stdout\", \"echo\", \"cargo-provider-SECRET\"]\n\
    [net]\nretry = 7\n[alias]\nhello = \"version\"\n";

/// The secrets in [`CONFIG`].
const SECRETS: [&str; 4] = ["cargo-token-SECRET", "cargo-url-SECRET", "cargo-token2-SECRET", "cargo-provider-SECRET"];

fn reads_no_cargo_secret(fields: &str) {
    let s = Scenario::new();
    std::fs::create_dir_all(s.home.join(".cargo")).unwrap();
    std::fs::write(s.home.join(".cargo/config.toml"), CONFIG).unwrap();
    let cargo = usable_cargo();
    let rustup: Vec<(String, String)> = cargo.iter().flatten().filter(|(k, _)| k == "RUSTUP_HOME").cloned().collect();
    let vars: Vec<(&str, &str)> = rustup.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let home = s.home.display();
    let commands = [
        format!("cat {home}/.cargo/config.toml 2>&1; echo rc=$?"),
        "cat \"$CARGO_HOME/config.toml\" 2>&1; echo rc=$?; echo cargo-home=$CARGO_HOME".to_string(),
        format!("grep -rlsE 'cargo-[a-z0-9]+-SECRE[T]' {home}/.cargo \"$CARGO_HOME\" \"$TMPDIR\"; echo grep-done"),
        "if command -v cargo >/dev/null; then cargo hello 2>&1; else echo cargo-absent; fi".to_string(),
    ];
    let r = s.run("cargo-config", &commands, fields, &vars, &[]);
    r.assert_finished("passed");
    let out = r.outputs();
    assert!(out[0].contains("Permission denied") && !out[0].contains("rc=0"), "the user's config.toml is readable: {}", out[0]);
    assert!(out[1].contains("retry = 7") && out[1].contains("hello = \"version\"") && out[1].contains("rc=0"), "{}", out[1]);
    assert!(out[1].contains("dracode-task-"), "CARGO_HOME is not the task's own: {}", out[1]);
    assert!(out[2].starts_with("grep-done"), "a readable file holds a secret: {}", out[2]);
    if cargo.is_ok() && !out[3].contains("cargo-absent") {
        assert!(out[3].contains("cargo 1."), "cargo does not run with the copy: {}", out[3]);
    }
    for secret in SECRETS {
        r.assert_nowhere(secret);
        assert!(!r.all_output().contains(secret), "{}", r.all_output());
    }
}

#[test]
fn attack_cargo_config_tokens_are_not_readable_without_network() {
    if !supported() {
        return;
    }
    reads_no_cargo_secret("");
}

#[test]
fn attack_cargo_config_tokens_are_not_copied_with_network() {
    if !supported() {
        return;
    }
    reads_no_cargo_secret("network = true");
}
