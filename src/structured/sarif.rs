//! `findings.sarif`: SARIF 2.1.0 with one run of tool `dracode`, as GitHub code scanning
//! ingests it (`github/codeql-action/upload-sarif`; checked with the SARIF multitool's `Gh`
//! rules): every rule with a full description and help, every result with message text,
//! `partialFingerprints` and its columns when known, `automationDetails.id` naming the
//! category, at most 25,000 results per run and a warning when the file is over 10 MB gzipped.

use super::findings::Finding;
use serde_json::{Value, json};
use std::hash::Hasher;

/// The `$schema` a SARIF 2.1.0 log names.
pub const SCHEMA_URI: &str = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// One finding ready for the log: its task and its repository-relative path.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    /// The task that reported it.
    pub task_id: String,
    /// What the model reported.
    pub finding: Finding,
    /// The file relative to the repository root, `/`-separated.
    pub path: String,
}

/// Results GitHub code scanning accepts in one run; a larger run is refused whole.
pub const MAX_RESULTS: usize = 25_000;
/// GitHub's upload limit: the gzipped file's size.
pub const MAX_GZIPPED_BYTES: usize = 10 * 1024 * 1024;
/// The category part of `automationDetails.id` (`dracode/findings/RUN_ID`).
pub const CATEGORY: &str = "dracode/findings";

/// The SARIF log of `findings` from run `run_id`: rules de-duplicated in order of first use,
/// at most [`MAX_RESULTS`] results — the most severe, in order; the count left out is the
/// run's `properties.dracodeFindingsLeftOut` (see [`left_out`]).
pub fn log(findings: &[Located], run_id: &str) -> Value {
    let kept = most_severe(findings.iter().collect(), |l| l.finding.severity.as_str());
    let mut fingerprints = Fingerprints::default();
    let results: Vec<Value> = kept.iter().map(|located| result(located, &mut fingerprints)).collect();
    assemble(results, &format!("{CATEGORY}/{run_id}"), (findings.len() - kept.len()) as u64)
}

/// One log of the results of every log in `logs` (each as [`log`] writes it), rules
/// de-duplicated again, every `ruleIndex` renumbered and the cap of [`MAX_RESULTS`] applied
/// again (what the inputs left out is counted too). The automation id is the first input's.
pub fn merge(logs: &[Value]) -> Value {
    let runs: Vec<&Value> = logs.iter().filter_map(|l| l["runs"].as_array()).flatten().collect();
    let results: Vec<&Value> = runs.iter().flat_map(|run| run["results"].as_array().into_iter().flatten()).collect();
    let total = results.len();
    let kept = most_severe(results, |r| r["level"].as_str().unwrap_or("warning"));
    let earlier: u64 = logs.iter().map(left_out).sum();
    let id =
        runs.iter().find_map(|run| run["automationDetails"]["id"].as_str()).map_or_else(|| format!("{CATEGORY}/merged"), str::to_string);
    let dropped = (total - kept.len()) as u64;
    assemble(kept.into_iter().cloned().collect(), &id, earlier + dropped)
}

/// Findings a log left out to stay within [`MAX_RESULTS`].
pub fn left_out(log: &Value) -> u64 {
    log["runs"].as_array().into_iter().flatten().filter_map(|run| run["properties"]["dracodeFindingsLeftOut"].as_u64()).sum()
}

/// The log around `results` (their `ruleIndex` set here), with the rules they use.
fn assemble(mut results: Vec<Value>, automation_id: &str, left_out: u64) -> Value {
    let mut rules: Vec<String> = Vec::new();
    for result in &mut results {
        let id = result["ruleId"].as_str().unwrap_or_default().to_string();
        let index = rules.iter().position(|r| *r == id).unwrap_or_else(|| {
            rules.push(id);
            rules.len() - 1
        });
        result["ruleIndex"] = json!(index);
    }
    let mut run = json!({
        "tool": {"driver": {
            "name": "dracode",
            "version": env!("CARGO_PKG_VERSION"),
            "rules": rules.iter().map(|id| rule(id)).collect::<Vec<_>>(),
        }},
        "automationDetails": {"id": automation_id},
        "originalUriBaseIds": {"%SRCROOT%": {"description": {"text": "The repository root."}}},
        "results": results,
    });
    if left_out > 0 {
        run["properties"] = json!({"dracodeFindingsLeftOut": left_out});
    }
    let var = |name: &str| std::env::var(name).ok();
    if let Some(uri) = information_uri(var("GITHUB_SERVER_URL").as_deref(), var("DRACODE_ACTION_REPOSITORY").as_deref()) {
        run["tool"]["driver"]["informationUri"] = json!(uri);
    }
    json!({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]})
}

/// Where dracode is documented, for the driver's `informationUri`: its repository on the GitHub
/// server, when the action ran it (`GITHUB_SERVER_URL` and the action's own repository, which it
/// passes as `DRACODE_ACTION_REPOSITORY`). Elsewhere no real address is known, and there is none.
fn information_uri(server: Option<&str>, repository: Option<&str>) -> Option<String> {
    let server = server.filter(|s| s.starts_with("https://") || s.starts_with("http://"))?.trim_end_matches('/');
    let name_part = |part: &str| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    let repository = repository.filter(|r| r.split_once('/').is_some_and(|(owner, name)| name_part(owner) && name_part(name)))?;
    Some(format!("{server}/{repository}"))
}

/// At most [`MAX_RESULTS`] of `items`: errors, then warnings, then notes, each in their order.
fn most_severe<T>(mut items: Vec<T>, level: impl Fn(&T) -> &str) -> Vec<T> {
    if items.len() > MAX_RESULTS {
        items.sort_by_key(|item| match level(item) {
            "error" => 0,
            "warning" => 1,
            _ => 2,
        });
        items.truncate(MAX_RESULTS);
    }
    items
}

/// The `reportingDescriptor` of a rule the model named: GitHub requires a full description and
/// help, which dracode can only write in general terms (the model chose the id).
fn rule(id: &str) -> Value {
    json!({
        "id": id,
        "name": rule_name(id),
        "shortDescription": {"text": id},
        "fullDescription": {"text": format!(
            "Findings a dracode review task (output = \"findings\") reported under the id \"{id}\". \
             The model chose this id; each result's message says what is wrong at its location."
        )},
        "help": {
            "text": "Read the result's message and the code it points to. The task that reported it is the result's \
                     dracodeTask property; its prompt is in the task manifest and the whole conversation in the run's \
                     transcripts/ folder.",
        },
    })
}

/// The rule's `name`: SARIF wants a readable, PascalCase identifier distinct from the id (the
/// multitool's SARIF1001 warns when they are equal, ignoring case): `unsafe-block` is
/// `UnsafeBlock`, and an id that already is its own name (`unwrap`) gets `Finding` after it.
fn rule_name(id: &str) -> String {
    let mut name = String::new();
    for word in id.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            name.push(first.to_ascii_uppercase());
            name.extend(chars);
        }
    }
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert_str(0, "Rule");
    }
    if name.eq_ignore_ascii_case(id) {
        name.push_str("Finding");
    }
    name
}

/// Fingerprints given so far, to tell apart findings at the same place.
#[derive(Default)]
struct Fingerprints(std::collections::HashMap<u64, u32>);

impl Fingerprints {
    /// `partialFingerprints` of a finding: a hash of its rule, file and region, then how many
    /// findings had that hash before it (`HASH:N`, as GitHub numbers its line hashes).
    fn of(&mut self, rule: &str, path: &str, region: &Value) -> Value {
        let mut hasher = fnv::FnvHasher::default();
        hasher.write(format!("{rule}\0{path}\0{region}").as_bytes());
        let hash = hasher.finish();
        let seen = self.0.entry(hash).or_insert(0);
        *seen += 1;
        json!({"dracodeFindingHash/v1": format!("{hash:016x}:{seen}")})
    }
}

/// One SARIF `result`; a blank rule id or message (a schema without `pattern` lets one
/// through) is replaced, since GitHub refuses a result without message text.
fn result(located: &Located, fingerprints: &mut Fingerprints) -> Value {
    let f = &located.finding;
    let rule = if f.rule_id.trim().is_empty() { "unnamed-finding" } else { f.rule_id.trim() };
    let message = if f.message.trim().is_empty() { format!("{rule} (the model gave no message)") } else { f.message.clone() };
    let region = region(f);
    let uri = uri_path(&located.path);
    json!({
        "ruleId": rule,
        "level": f.severity.as_str(),
        "message": {"text": message},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                "region": region,
            }
        }],
        "partialFingerprints": fingerprints.of(rule, &located.path, &region),
        "properties": {"dracodeTask": located.task_id},
    })
}

/// A finding's `region`: its lines, and its columns when the model gave them (an end column
/// not after the start column on a one-line finding is dropped).
fn region(f: &super::findings::Finding) -> Value {
    let end_line = f.end_line.unwrap_or(f.start_line).max(f.start_line);
    let mut region = json!({"startLine": f.start_line});
    if let Some(column) = f.start_column {
        region["startColumn"] = json!(column);
    }
    region["endLine"] = json!(end_line);
    let starts = f.start_column.unwrap_or(1);
    if let Some(column) = f.end_column.filter(|&c| end_line > f.start_line || c > starts) {
        region["endColumn"] = json!(column);
    }
    region
}

/// The text of `log` to write, and a warning when GitHub would refuse its size: pretty-printed
/// up to [`MAX_GZIPPED_BYTES`] (so certainly under the limit gzipped), compact above that, and
/// then measured gzipped.
pub fn render(log: &Value) -> (String, Option<String>) {
    let pretty = serde_json::to_string_pretty(log).unwrap_or_default() + "\n";
    if pretty.len() <= MAX_GZIPPED_BYTES {
        return (pretty, None);
    }
    let compact = serde_json::to_string(log).unwrap_or_default() + "\n";
    let warning = match super::gzip::compressed_len(compact.as_bytes()) {
        Some(gzipped) if gzipped <= MAX_GZIPPED_BYTES => None,
        gzipped => Some(format!(
            "findings.sarif is {} gzipped ({} uncompressed), over the 10 MB GitHub code scanning accepts: \
             its findings' messages are too long or too many; narrow the review (fewer files or rules per task) to upload it",
            gzipped.map_or("of unknown size".to_string(), megabytes),
            megabytes(compact.len())
        )),
    };
    (compact, warning)
}

fn megabytes(bytes: usize) -> String {
    format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
}

/// `path` as a relative URI reference: bytes other than unreserved characters and `/`
/// percent-encoded (a space, `#` or `?` would otherwise change what the URI means).
fn uri_path(path: &str) -> String {
    const ENCODED: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~').remove(b'/');
    percent_encoding::utf8_percent_encode(path, ENCODED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_information_uri_is_the_actions_repository_or_nothing() {
        let uri = |server, repository| information_uri(server, repository);
        assert_eq!(uri(Some("https://github.com/"), Some("acme/dracode")).as_deref(), Some("https://github.com/acme/dracode"));
        assert_eq!(uri(Some("https://github.com"), None), None, "outside the action");
        assert_eq!(uri(Some("https://github.com"), Some("")), None, "an empty action_repository");
        assert_eq!(uri(Some("javascript:x"), Some("acme/dracode")), None);
        assert_eq!(uri(Some("https://github.com"), Some("acme/dra code")), None);
    }
    use crate::structured::findings::Severity;

    fn located(rule: &str, path: &str) -> Located {
        let finding = Finding {
            rule_id: rule.into(),
            message: "m".into(),
            file: path.into(),
            start_line: 5,
            end_line: None,
            start_column: None,
            end_column: None,
            severity: Severity::Note,
        };
        Located { task_id: "t".into(), finding, path: path.into() }
    }

    #[test]
    fn rules_are_deduplicated_and_indexed_and_paths_encoded() {
        let log = log(&[located("a", "src/x y.rs"), located("b", "b.rs"), located("a", "c#.rs")], "r1");
        assert_eq!(log["runs"][0]["automationDetails"]["id"], "dracode/findings/r1");
        let run = &log["runs"][0];
        assert_eq!(run["tool"]["driver"]["name"], "dracode");
        let rules: Vec<&str> = run["tool"]["driver"]["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(rules, ["a", "b"]);
        let results = run["results"].as_array().unwrap();
        assert_eq!(results.iter().map(|r| r["ruleIndex"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 0]);
        let location = &results[0]["locations"][0]["physicalLocation"];
        assert_eq!(location["artifactLocation"]["uri"], "src/x%20y.rs");
        assert_eq!(location["region"], json!({"startLine": 5, "endLine": 5}));
        assert_eq!(results[2]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], "c%23.rs");
    }

    #[test]
    fn merged_logs_keep_every_result_with_rules_renumbered() {
        let merged = merge(&[log(&[located("a", "x.rs")], "r1"), log(&[located("b", "y.rs"), located("a", "z.rs")], "r2")]);
        assert_eq!(merged["runs"][0]["automationDetails"]["id"], "dracode/findings/r1");
        let run = &merged["runs"][0];
        let ids: Vec<&str> = run["tool"]["driver"]["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["a", "b"]);
        let indexes: Vec<u64> = run["results"].as_array().unwrap().iter().map(|r| r["ruleIndex"].as_u64().unwrap()).collect();
        assert_eq!(indexes, [0, 1, 0]);
    }

    #[test]
    fn a_blank_message_or_rule_is_replaced_and_columns_kept() {
        let mut blank = located(" ", "a.rs");
        blank.finding.message = " \n".into();
        blank.finding.start_column = Some(4);
        blank.finding.end_column = Some(4);
        let result = &log(&[blank], "r")["runs"][0]["results"][0];
        assert_eq!(result["ruleId"], "unnamed-finding");
        assert_eq!(result["message"]["text"], "unnamed-finding (the model gave no message)");
        assert_eq!(result["locations"][0]["physicalLocation"]["region"], json!({"startLine": 5, "startColumn": 4, "endLine": 5}));
    }

    #[test]
    fn merged_logs_over_the_limit_keep_the_most_severe_and_count_the_rest() {
        let many = |n: usize, severity: Severity| {
            let items: Vec<Located> = (0..n)
                .map(|_| {
                    let mut l = located("r", "a.rs");
                    l.finding.severity = severity;
                    l
                })
                .collect();
            log(&items, "r")
        };
        let merged = merge(&[many(MAX_RESULTS - 10, Severity::Note), many(20, Severity::Error)]);
        let results = merged["runs"][0]["results"].as_array().unwrap();
        assert_eq!(results.len(), MAX_RESULTS);
        assert_eq!(results.iter().filter(|r| r["level"] == "error").count(), 20);
        assert_eq!(left_out(&merged), 10);
        let errors = many(20, Severity::Error);
        assert_eq!(results[0]["partialFingerprints"], errors["runs"][0]["results"][0]["partialFingerprints"], "fingerprints are kept");
    }

    /// `count` findings whose messages are `size` characters of pseudo-random text (as good as
    /// incompressible) or of one repeated word.
    fn bulky(count: usize, size: usize, random: bool) -> Value {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut text = || -> String {
            (0..size)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if random { char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[(state % 36) as usize]) } else { 'a' }
                })
                .collect()
        };
        let items: Vec<Located> = (0..count)
            .map(|_| {
                let mut l = located("r", "a.rs");
                l.finding.message = text();
                l
            })
            .collect();
        log(&items, "r")
    }

    #[test]
    fn a_large_log_is_written_compact_and_one_over_the_gzipped_limit_says_so() {
        let (small, warning) = render(&log(&[located("r", "a.rs")], "r"));
        assert!(small.contains("\n  \"runs\"") && warning.is_none(), "small logs are pretty-printed");
        let (compressible, warning) = render(&bulky(1_200, 10_000, false));
        assert!(compressible.len() > MAX_GZIPPED_BYTES && !compressible.contains("\n  "), "compact above 10 MB");
        assert_eq!(warning, None, "12 MB of repeated text is far under 10 MB gzipped");
        let (_, warning) = render(&bulky(2_000, 10_000, true));
        let warning = warning.expect("20 MB of random text (5.2 bits a character) stays over 10 MB gzipped");
        assert!(
            warning.starts_with("findings.sarif is ") && warning.contains("MB gzipped") && warning.contains("over the 10 MB"),
            "{warning}"
        );
    }
}
