//! XSD validation with `xmllint` (libxml2-utils), for the unit tests of the JUnit reporters and the
//! integration scenarios alike (the unit tests include this file by path).
//!
//! `xmllint` is an outside program a fresh machine may lack. Without it a check is skipped, and
//! the first skip says so once on stderr; with `DRACODE_REQUIRE_XMLLINT=1` (set by `.ci/run`) a
//! missing `xmllint` fails the test instead, so in CI the check can always fail.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;

/// The schemas the tests validate against, kept in the repository.
pub fn schema_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schemas").join(name)
}

/// xmllint's complaints (`validity error` lines) about `file` against the schema `xsd` (a file
/// name in `tests/fixtures/schemas/`): `Some(empty)` when valid, `None` when xmllint is missing
/// and the check was skipped.
pub fn complaints(xsd: &str, file: &Path) -> Option<Vec<String>> {
    let output = match Command::new("xmllint").arg("--noout").arg("--schema").arg(schema_path(xsd)).arg(file).output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return skipped(),
        Err(e) => panic!("could not run xmllint: {e}"),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let complaints: Vec<String> = stderr.lines().filter(|l| l.contains("validity error")).map(str::to_string).collect();
    assert_eq!(output.status.success(), complaints.is_empty(), "xmllint on {}:\n{stderr}", file.display());
    Some(complaints)
}

/// Panics with xmllint's complaints when `file` is not valid against `xsd`.
pub fn assert_valid(xsd: &str, file: &Path) {
    if let Some(complaints) = complaints(xsd, file) {
        assert!(
            complaints.is_empty(),
            "{} is not valid against {xsd}:\n{}\n{}",
            file.display(),
            complaints.join("\n"),
            std::fs::read_to_string(file).unwrap_or_default()
        );
    }
}

fn skipped() -> Option<Vec<String>> {
    if std::env::var_os("DRACODE_REQUIRE_XMLLINT").is_some_and(|v| v == "1") {
        panic!("xmllint not found and DRACODE_REQUIRE_XMLLINT=1: install libxml2-utils (apt-get install -y libxml2-utils)");
    }
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        // Straight to the process's stderr: the test harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            std::io::stderr(),
            "note: xmllint not found, so the JUnit XSD checks were skipped; install libxml2-utils (apt-get install -y libxml2-utils) to run them"
        );
    });
    None
}
