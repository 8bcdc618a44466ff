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

/// Surefire's test-report schema (Debian's surefire 2.22.3 source package).
pub const SUREFIRE_XSD: &str = "surefire-test-report-2.22.3.xsd";

/// The attributes of `<testsuite>` that the Ant schema requires and Surefire's rejects.
const ANT_ONLY_ATTRIBUTES: [&str; 4] = ["package", "id", "hostname", "timestamp"];

/// Each `<testsuite>` of the `junit.xml` `file` as a document of its own, as Surefire writes one
/// file per suite and its schema's root is `<testsuite>`, less what the Ant schema requires and
/// Surefire's has no place for: the `package`, `id`, `hostname` and `timestamp` attributes and
/// the suite's own (empty) `<system-out>`/`<system-err>`. Written beside `file` as
/// `<stem>.surefire-<n>.xml`.
pub fn surefire_suites(file: &Path) -> Vec<PathBuf> {
    let xml = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let suite = regex::Regex::new(r"(?s)<testsuite\b.*?</testsuite>").expect("suite pattern");
    let ant_only = regex::Regex::new(&format!(r#" (?:{})="[^"]*""#, ANT_ONLY_ATTRIBUTES.join("|"))).expect("attribute pattern");
    let suite_output = regex::Regex::new(r"(?s)\s*<system-(?:out|err)>\s*</system-(?:out|err)>(\s*</testsuite>)$").expect("output pattern");
    let stem = file.file_stem().map_or_else(|| "junit".into(), |s| s.to_string_lossy().into_owned());
    let mut files = Vec::new();
    for (n, found) in suite.find_iter(&xml).enumerate() {
        let text = found.as_str();
        let start_end = text.find('>').expect("a start tag");
        let mut doc = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{}", ant_only.replace_all(&text[..start_end], ""));
        let mut rest = text[start_end..].to_string();
        while suite_output.is_match(&rest) {
            rest = suite_output.replace(&rest, "$1").into_owned();
        }
        doc.push_str(&rest);
        let path = file.with_file_name(format!("{stem}.surefire-{n}.xml"));
        std::fs::write(&path, doc).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        files.push(path);
    }
    files
}

/// Panics unless every suite of `file` is valid against Surefire's schema (see
/// [`surefire_suites`]); returns how many suites were checked.
pub fn assert_surefire_valid(file: &Path) -> usize {
    let suites = surefire_suites(file);
    for suite in &suites {
        assert_valid(SUREFIRE_XSD, suite);
    }
    suites.len()
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
