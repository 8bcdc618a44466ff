//! `report.html` at scale: the page of a real 1,000-task run, opened in headless Chromium
//! (tests/support/browser.rs) on a laptop's screen, and used as a person would use it.
//!
//! The output folder comes from a real run, not a synthesized one: a manifest of 1,000 small
//! tasks played by the offline `replay` provider (one recording shared by all: two turns, a file
//! written and an answer), each on a copy of a two-file project, at `--jobs 4`. Every tenth task
//! has a check that fails (its own id in the output, so each failed row has a reason of its own),
//! and four tasks' recordings end too soon (errors: not judged). The run writes `report.html` as
//! every run does. It takes 35–65 s with the debug binary on a loaded 2-core machine.
//!
//! The test prints the figures docs/src/report.md quotes (the file's size, the overview data's, the
//! page's own render time and the first contentful paint) and asserts only what cannot flake:
//! no timing is asserted.

use crate::support::browser::{Browser, Page, WAIT, file_url};
use crate::support::cli::{dracode, events, read_jsonl};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How many tasks the run has.
const TASKS: usize = 1000;

/// The project's check: fails until `count.txt` reaches 2, naming the task it ran for.
const TEST_SH: &str = "n=$(cat count.txt 2>/dev/null || echo 0)\nif [ \"$n\" -lt 2 ]; then echo \"FAIL ($1): count.txt says $n, expected at least 2\"; exit 1; fi\necho ok\n";

/// One model turn of the recording, with its usage.
fn turn(content: serde_json::Value, stop: &str, input_tokens: u64) -> serde_json::Value {
    let usage = json!({"input_tokens": input_tokens, "cached_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 40,
        "reasoning_output_tokens": 0, "total_tokens": input_tokens + 40, "requests": 1});
    json!({"content": content, "stop_reason": stop, "usage": usage})
}

/// The task id of the `i`-th task (1-based): `task-0001` …
fn task_id(i: usize) -> String {
    format!("task-{i:04}")
}

/// Writes the project, the recordings and the 1,000-task manifest into `dir`.
fn write_batch(dir: &Path) {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("greet.sh"), "echo \"Hello, $1!\"\n").unwrap();
    std::fs::write(ws.join("test.sh"), TEST_SH).unwrap();
    let write = json!([{"type": "text", "text": "The count goes in count.txt."},
        {"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": "count.txt", "content": "1\n"}}]);
    let answer = json!([{"type": "text", "text": "Wrote count.txt with the new count."}]);
    let full = json!([turn(write.clone(), "tool_use", 1200), turn(answer, "end_turn", 1300)]);
    std::fs::write(dir.join("rec.json"), full.to_string()).unwrap();
    std::fs::write(dir.join("short.json"), json!([turn(write, "tool_use", 1200)]).to_string()).unwrap();
    let mut manifest =
        "[defaults]\nprovider = \"replay\"\nreplay = \"rec.json\"\nrepo = \"ws\"\nisolation = \"copy\"\nmax_iterations = 8\n".to_string();
    for i in 1..=TASKS {
        let tag = ["alpha", "beta", "gamma"][i % 3];
        manifest.push_str(&format!("[[tasks]]\nid = \"{}\"\nprompt = \"Task {i}: bump the count.\"\ntags = [\"{tag}\"]\n", task_id(i)));
        if i % 10 == 0 {
            manifest.push_str(&format!("check = \"sh test.sh {}\"\n", task_id(i)));
        }
        if i % 250 == 125 {
            manifest.push_str("replay = \"short.json\"\n");
        }
    }
    std::fs::write(dir.join("tasks.toml"), manifest).unwrap();
}

/// Runs the batch in `dir` and returns its output folder, after checking every task finished.
fn run_batch(dir: &Path) -> PathBuf {
    write_batch(dir);
    let started = Instant::now();
    let run = dracode(dir).args(["run", "tasks.toml", "--out", "out", "--jobs", "4"]).output().unwrap();
    eprintln!("a real run of {TASKS} replay tasks at --jobs 4: {:.1} s", started.elapsed().as_secs_f64());
    // Failed checks and four errors: exit 5 (some task could not be judged).
    assert_eq!(run.status.code(), Some(5), "{}", String::from_utf8_lossy(&run.stderr));
    let out = dir.join("out");
    let all = read_jsonl(&out.join("results.jsonl"));
    assert_eq!(events(&all, "task.finished").len(), TASKS);
    out
}

/// The number a count of the overview shows.
fn count(page: &Page<'_>, key: &str) -> String {
    page.text(&format!("#counts [data-count={key}] .count-value"))
}

/// The ids of the table's rows, in order.
fn row_ids(page: &Page<'_>) -> Vec<String> {
    let ids = page.eval("[...document.querySelectorAll('#task-table tbody tr[data-task-id]')].map(tr => tr.dataset.taskId)");
    serde_json::from_value(ids).unwrap()
}

/// A figure the page set on `<html>` (`data-render-ms`), as a number.
fn html_figure(page: &Page<'_>, attribute: &str) -> f64 {
    let value = page.eval(&format!("document.documentElement.getAttribute('{attribute}')"));
    value.as_str().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{attribute} is not a number: {value}"))
}

#[test]
fn report_page_of_a_thousand_task_run_opens_lazily_and_stays_usable() {
    let Some(browser) = Browser::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = run_batch(tmp.path());
    let report = out.join("report.html");
    let bytes = std::fs::metadata(&report).unwrap().len();
    assert!(bytes < 40 << 20, "a 1,000-task report of {bytes} bytes: too big to open on a laptop");

    let page = browser.new_page();
    page.viewport(1366, 768);
    page.goto(&file_url(&report));
    page.wait_for("document.documentElement.dataset.ready === '1'", WAIT);
    let render_ms = html_figure(&page, "data-render-ms");
    let first_paint_ms = page.first_paint_ms();
    let data = page.eval("document.getElementById('report-data').textContent.length").as_u64().unwrap();
    eprintln!(
        "a {TASKS}-task report.html: {bytes} bytes ({data} of them the overview's data); drawn in {render_ms} ms, first contentful paint at {first_paint_ms} ms"
    );
    assert!(page.eval("document.getElementById('fatal')").is_null(), "{}", page.text("#fatal"));

    // The run at a glance.
    assert_eq!(count(&page, "total"), TASKS.to_string());
    assert_eq!((count(&page, "passed"), count(&page, "failed"), count(&page, "not_judged")), ("896".into(), "100".into(), "4".into()));
    assert_eq!(page.eval("document.querySelector('#timeline svg.timeline').dataset.mode"), "packed", "1,000 bars packed on one screen");
    // Drawn lazily: the first 100 rows, and a button for the next 100.
    let first = row_ids(&page);
    assert_eq!(first.len(), 100, "rows drawn at first, of {TASKS}");
    assert_eq!(first, (1..=100).map(task_id).collect::<Vec<_>>());
    assert_eq!(page.text("#table-more"), "show 100 more (900 left)");
    page.click("#table-more");
    assert_eq!(row_ids(&page), (1..=200).map(task_id).collect::<Vec<_>>());
    // It fits a laptop's width: no sideways scrolling.
    assert_eq!(page.eval("document.documentElement.scrollWidth <= innerWidth"), true);

    // Typing narrows the table to the matching tasks.
    page.click("#filter-text");
    page.type_text("task-099");
    page.wait_for("document.querySelectorAll('#task-table tbody tr[data-task-id]').length === 10", WAIT);
    assert_eq!(row_ids(&page), (990..1000).map(task_id).collect::<Vec<_>>());
    assert!(page.text("#table-summary").starts_with("10 matching tasks"), "{}", page.text("#table-summary"));

    // A failed task opens from the table and shows its check's output; Escape goes back.
    let failed = task_id(990);
    assert_eq!(page.eval(&format!("document.querySelector('#task-table tr[data-task-id=\"{failed}\"]').dataset.group")), "failed");
    page.click(&format!("#task-table tr[data-task-id=\"{failed}\"] a"));
    page.wait_for(&format!("document.querySelector('#task-view')?.dataset.taskId === '{failed}'"), WAIT);
    let check = page.text("#task-view .check-output");
    assert!(check.contains(&format!("FAIL ({failed}): count.txt says 1")), "{check}");
    assert!(page.text("#task-view .task-reason").contains("exited with 1"), "{}", page.text("#task-view .task-reason"));
    page.press_key("Escape");
    page.wait_for("!document.querySelector('#task-view') && !document.getElementById('overview').hidden", WAIT);
    assert_eq!(row_ids(&page).len(), 10, "back to the table as it was left");

    assert_eq!(page.requests(), [file_url(&report)], "the page loaded nothing but itself");
    let console = page.console();
    assert!(
        !console.iter().any(|m| m.contains("Content Security Policy") || m.starts_with("exception") || m.contains("error")),
        "{console:#?}"
    );
}
