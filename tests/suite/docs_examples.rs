//! Every TOML example of the README and the book is accepted by the binary, as a user would
//! paste it: a manifest (or a manifest's table, completed with one task) passes `dracode validate
//! --offline`, a config file passes `dracode config --config`. Files a manifest names
//! (`prompt_file`, `output_schema_file`, `replay`) are made empty beside it first.

use crate::support::cli::{dracode, git};
use crate::support::docs::{all_pages, code_blocks};

/// What a block is: a manifest, a manifest's table shown alone (completed with a task), or a
/// config file.
enum Example {
    Manifest(String),
    Config(String),
}

fn classify(block: &str) -> Example {
    let tables: Vec<&str> = block.lines().map(str::trim_start).filter(|l| l.starts_with('[')).collect();
    let manifest_only =
        |t: &&str| t.starts_with("[[tasks]]") || t.starts_with("[tasks.") || t.starts_with("[setup]") || t.starts_with("[issues");
    if block.contains("[[tasks]]") {
        Example::Manifest(block.to_string())
    } else if tables.first().is_some_and(|t| t.starts_with("[tasks.")) {
        Example::Manifest(format!("[[tasks]]\nid = \"t\"\nprompt = \"p\"\n\n{block}"))
    } else if tables.iter().any(manifest_only) {
        Example::Manifest(format!("{block}\n\n[[tasks]]\nid = \"t\"\nprompt = \"p\"\n"))
    } else {
        Example::Config(block.to_string())
    }
}

/// The string values of `key = "…"` in `text`.
fn values_of<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix(key)?.trim_start().strip_prefix('=')?.trim().strip_prefix('"')?.split('"').next())
        .collect()
}

#[test]
fn every_toml_example_of_the_readme_and_the_book_is_accepted_by_the_binary() {
    let mut checked = (0, 0);
    let mut refused = Vec::new();
    for page in all_pages() {
        for (i, block) in code_blocks(&page.text, "toml").iter().enumerate() {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            git(dir, &["init", "-q"]);
            let (file, args): (&str, Vec<&str>) = match classify(block) {
                Example::Manifest(text) => {
                    for key in ["prompt_file", "output_schema_file", "replay"] {
                        for name in values_of(&text, key) {
                            let path = dir.join(name);
                            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                            std::fs::write(&path, if name.ends_with(".json") { "{}" } else { "" }).unwrap();
                        }
                    }
                    std::fs::write(dir.join("tasks.toml"), text).unwrap();
                    checked.0 += 1;
                    ("tasks.toml", vec!["validate", "--offline", "tasks.toml"])
                }
                Example::Config(text) => {
                    std::fs::write(dir.join("dracode.toml"), text).unwrap();
                    checked.1 += 1;
                    ("dracode.toml", vec!["config", "--config", "dracode.toml"])
                }
            };
            let out = dracode(dir).args(&args).output().unwrap();
            if !out.status.success() {
                let why = String::from_utf8_lossy(&out.stderr);
                refused.push(format!("{} (TOML block {} as {file}): {}", page.name(), i + 1, why.trim()));
            }
        }
    }
    assert!(checked.0 >= 5 && checked.1 >= 3, "only {} manifests and {} configs found: is the scan broken?", checked.0, checked.1);
    assert!(refused.is_empty(), "examples the binary refuses:\n{}", refused.join("\n"));
}
