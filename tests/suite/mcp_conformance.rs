//! The MCP conformance suite (modelcontextprotocol/conformance, from npm, pinned) run against
//! dracode's MCP client: for each client scenario the suite starts its own server and launches
//! `tests/fixtures/mcp/conformance_client.py URL`, which drives `dracode mcp-probe`. Every
//! scenario listed here passes today; one that stops passing fails this test. The suite needs
//! Node 22, installed from npm (the `node` package) beside it in the test cache on first use.
//! Without npm or the registry the test is skipped — unless `DRACODE_REQUIRE_MCP_CONFORMANCE`
//! is set (CI), which makes that a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

const SUITE_PACKAGE: &str = "@modelcontextprotocol/conformance";
const SUITE_VERSION: &str = "0.2.0-alpha.12";
const NODE_VERSION: &str = "22.23.3";

/// `(scenario, protocol version)`: the current revision's scenarios, and those the suite runs
/// at 2025-11-25 too (`None`: an extension, run at the suite's default).
const SCENARIOS: &[(&str, Option<&str>)] = &[
    ("tools_call", Some("2026-07-28")),
    ("request-metadata", Some("2026-07-28")),
    ("sep-2322-client-request-state", Some("2026-07-28")),
    ("http-standard-headers", Some("2026-07-28")),
    ("http-custom-headers", Some("2026-07-28")),
    ("http-invalid-tool-headers", Some("2026-07-28")),
    ("json-schema-ref-no-deref", Some("2026-07-28")),
    ("json-schema-2020-12-preservation", Some("2026-07-28")),
    ("auth/pre-registration", Some("2026-07-28")),
    ("auth/metadata-default", Some("2026-07-28")),
    ("auth/metadata-var1", Some("2026-07-28")),
    ("auth/metadata-var2", Some("2026-07-28")),
    ("auth/metadata-var3", Some("2026-07-28")),
    ("auth/basic-cimd", Some("2026-07-28")),
    ("auth/scope-from-www-authenticate", Some("2026-07-28")),
    ("auth/scope-from-scopes-supported", Some("2026-07-28")),
    ("auth/scope-omitted-when-undefined", Some("2026-07-28")),
    ("auth/scope-step-up", Some("2026-07-28")),
    ("auth/scope-retry-limit", Some("2026-07-28")),
    ("auth/token-endpoint-auth-basic", Some("2026-07-28")),
    ("auth/token-endpoint-auth-post", Some("2026-07-28")),
    ("auth/token-endpoint-auth-none", Some("2026-07-28")),
    ("auth/resource-mismatch", Some("2026-07-28")),
    ("auth/offline-access-scope", Some("2026-07-28")),
    ("auth/offline-access-not-supported", Some("2026-07-28")),
    ("auth/authorization-server-migration", Some("2026-07-28")),
    ("auth/iss-supported", Some("2026-07-28")),
    ("auth/iss-not-advertised", Some("2026-07-28")),
    ("auth/iss-supported-missing", Some("2026-07-28")),
    ("auth/iss-wrong-issuer", Some("2026-07-28")),
    ("auth/iss-unexpected", Some("2026-07-28")),
    ("auth/iss-normalized", Some("2026-07-28")),
    ("auth/metadata-issuer-mismatch", Some("2026-07-28")),
    ("auth/client-credentials-basic", None),
    ("auth/client-credentials-jwt", None),
    ("auth/wif-jwt-bearer", None),
    ("auth/enterprise-managed-authorization", None),
    ("auth/dpop", None),
    ("auth/dpop-nonce", None),
    ("initialize", Some("2025-11-25")),
    ("tools_call", Some("2025-11-25")),
    ("sse-retry", Some("2025-11-25")),
    ("elicitation-sep1034-client-defaults", Some("2025-11-25")),
    ("json-schema-2020-12-preservation", Some("2025-11-25")),
    ("auth/pre-registration", Some("2025-11-25")),
    ("auth/metadata-default", Some("2025-11-25")),
    ("auth/metadata-var1", Some("2025-11-25")),
    ("auth/metadata-var2", Some("2025-11-25")),
    ("auth/metadata-var3", Some("2025-11-25")),
    ("auth/basic-cimd", Some("2025-11-25")),
    ("auth/scope-from-www-authenticate", Some("2025-11-25")),
    ("auth/scope-from-scopes-supported", Some("2025-11-25")),
    ("auth/scope-omitted-when-undefined", Some("2025-11-25")),
    ("auth/scope-step-up", Some("2025-11-25")),
    ("auth/scope-retry-limit", Some("2025-11-25")),
    ("auth/token-endpoint-auth-basic", Some("2025-11-25")),
    ("auth/token-endpoint-auth-post", Some("2025-11-25")),
    ("auth/token-endpoint-auth-none", Some("2025-11-25")),
    ("auth/2025-03-26-oauth-metadata-backcompat", Some("2025-03-26")),
    ("auth/2025-03-26-oauth-endpoint-fallback", Some("2025-03-26")),
];

/// The suite's entry point and the Node to run it with, installed on first use.
fn suite() -> Option<(PathBuf, PathBuf)> {
    let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-conformance-{SUITE_VERSION}-node-{NODE_VERSION}"));
    let entry = prefix.join("node_modules").join(SUITE_PACKAGE).join("dist/index.js");
    let node = prefix.join("node_modules/node/bin/node");
    if !(entry.is_file() && node.is_file()) {
        let installed = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
            .arg(&prefix)
            .arg(format!("{SUITE_PACKAGE}@{SUITE_VERSION}"))
            .arg(format!("node@{NODE_VERSION}"))
            .output();
        let why = match installed {
            Ok(out) if out.status.success() && entry.is_file() && node.is_file() => None,
            Ok(out) => Some(format!(
                "npm install {SUITE_PACKAGE}@{SUITE_VERSION} node@{NODE_VERSION} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )),
            Err(e) => Some(format!("cannot run npm: {e}")),
        };
        if let Some(why) = why {
            assert!(std::env::var_os("DRACODE_REQUIRE_MCP_CONFORMANCE").is_none(), "{why}");
            eprintln!("skipping the MCP conformance suite: {why}");
            return None;
        }
    }
    Some((entry, node))
}

/// Runs one scenario; `Err` with the suite's output when it did not pass.
fn run_scenario(entry: &Path, node: &Path, scenario: &str, version: Option<&str>) -> Result<(), String> {
    let work = tempfile::tempdir().unwrap();
    let client = crate::support::cli::crate_root().join("tests/fixtures/mcp/conformance_client.py");
    let mut cmd = Command::new(node);
    cmd.arg(entry).args(["client", "--scenario", scenario, "--timeout", "60000", "--command"]);
    cmd.arg(format!("python3 {}", client.display()));
    if let Some(version) = version {
        cmd.args(["--spec-version", version]);
    }
    let path = format!("{}:{}", node.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    cmd.current_dir(work.path()).env("PATH", path).env("DRACODE_BIN", assert_cmd::cargo::cargo_bin("dracode"));
    let output = cmd.output().map_err(|e| format!("cannot run the suite: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let passed = text.lines().find(|l| l.starts_with("Passed: ")).unwrap_or("");
    let all_passed = passed
        .split_whitespace()
        .nth(1)
        .map(|n| n.trim_end_matches(','))
        .and_then(|n| n.split_once('/'))
        .is_some_and(|(a, b)| a == b && a != "0");
    if output.status.success() && all_passed && text.contains("OVERALL: PASSED") {
        Ok(())
    } else {
        Err(format!("{scenario} at {}: {passed}\n{text}", version.unwrap_or("the suite's default")))
    }
}

#[test]
fn the_mcp_conformance_suite_client_scenarios_pass_at_both_protocol_versions() {
    let Some((entry, node)) = suite() else { return };
    let failures: Vec<String> = std::thread::scope(|scope| {
        let chunks: Vec<Vec<(&str, Option<&str>)>> = (0..3).map(|i| SCENARIOS.iter().skip(i).step_by(3).copied().collect()).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let (entry, node) = (&entry, &node);
                scope.spawn(move || chunk.into_iter().filter_map(|(s, v)| run_scenario(entry, node, s, v).err()).collect::<Vec<_>>())
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(failures.is_empty(), "{} of {} scenarios failed:\n{}", failures.len(), SCENARIOS.len(), failures.join("\n\n"));
}
