//! What `dracode publish` writes for people: a pull request's title and body, a commit's
//! message (with the trailers that mark it dracode's: [`crate::batch::trailers`]), and the
//! comment that reports a whole run.
//!
//! Everything a task recorded (its id, the agent's summary, a check's output, file names) is
//! shown as code — in code spans and fenced blocks sized past any backtick or tilde run inside —
//! so none of it renders as Markdown: no `@mention` pings anyone, no image loads, no table
//! breaks. A body is cut to [`MAX_BODY`] characters (GitHub takes 65,536).

use crate::batch::combine::CombineReport;
use crate::batch::trailers;
use crate::report::{failure_line, human_cost, short_reason, thousands};
use dracode_results::output_folder::{FinishedTask, OutputFolder};
use dracode_results::records::WireOutcome;
use std::fmt::Write as _;

/// The longest body written; GitHub refuses more than 65,536 characters.
pub const MAX_BODY: usize = 60_000;

/// The most of the agent's summary a body quotes.
const MAX_SUMMARY: usize = 3_000;

/// The most files a body lists.
const MAX_FILES: usize = 100;

/// A task's pull request title.
pub fn task_title(id: &str) -> String {
    format!("dracode: {}", one_line(id))
}

/// The combined pull request's title.
pub fn combined_title(report: &CombineReport) -> String {
    format!("dracode: {} task(s) of run {}", report.applied.len(), one_line(&report.run_id))
}

/// The commit of a task: its title, the first paragraph of the agent's summary, the trailers.
pub fn task_commit_message(task: &FinishedTask, run_id: &str) -> String {
    let summary = task.outcome.result.as_deref().unwrap_or_default().trim().split("\n\n").next().unwrap_or_default();
    let summary: String = summary.chars().take(1_000).collect();
    let message = format!("{}\n\n{summary}", task_title(&task.task_id));
    trailers::append(&message, &[(trailers::TASK, &task.task_id), (trailers::RUN, run_id)])
}

/// The commit of the union: the tasks it holds, one trailer each, and the run.
pub fn combined_commit_message(report: &CombineReport) -> String {
    let mut message = format!("{}\n\n", combined_title(report));
    for id in &report.applied {
        let _ = writeln!(message, "- {id}");
    }
    let mut pairs: Vec<(&str, &str)> = report.applied.iter().map(|id| (trailers::TASK, id.as_str())).collect();
    pairs.push((trailers::RUN, &report.run_id));
    trailers::append(&message, &pairs)
}

/// A passed task's pull request body: the verdict, the check before and after (with the line
/// that said why it failed before), tokens and cost, the agent's summary, the files, and a link
/// to the task in the run's report.
pub fn task_body(task: &FinishedTask, run_id: &str, branch: &str, report_url: Option<&str>) -> String {
    let o = &task.outcome;
    let mut md = format!("**dracode** task {} **{}**{}.\n\n", code(&task.task_id), o.status.as_str(), check_story(o));
    if let Some(issue) = &task.issue {
        // GitHub closes the issue when this pull request is merged into the default branch.
        let _ = write!(md, "Closes {}#{}.\n\n", one_line(&issue.repository), issue.number);
    }
    md.push_str("| | |\n|---|---|\n");
    for (label, value) in facts(task, run_id, report_url) {
        let _ = writeln!(md, "| {label} | {value} |");
    }
    md.push('\n');
    if let Some(summary) = o.result.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        let _ = write!(md, "**What the agent said**\n\n{}\n", fenced(&cut(summary, MAX_SUMMARY)));
    }
    md.push_str(&files(&o.files_changed));
    let _ = write!(
        md,
        "\n---\n<sub>Opened by `dracode publish` from the branch {}. Each run updates this pull request and moves the \
         branch while its tip is a commit dracode made (trailers `{}: …` and `{}: …`, committer `dracode`); push a commit \
         of your own to the branch and dracode leaves it alone.</sub>\n",
        code(branch),
        trailers::TASK,
        trailers::RUN,
    );
    cut(&md, MAX_BODY)
}

/// The combined pull request's body: the tasks in the union (each with its check and summary),
/// the ones left out, the check on the union, the files.
pub fn combined_body(report: &CombineReport, run: &OutputFolder, branch: &str, report_url: Option<&str>) -> String {
    let mut md = format!(
        "**dracode**: the passed tasks of run {} applied together onto {}.\n\n",
        code(&report.run_id),
        code(short_sha(&report.base_commit))
    );
    md.push_str("| Task | Check before → after | What the agent said |\n|---|---|---|\n");
    for id in &report.applied {
        let Some(task) = run.tasks.iter().find(|t| &t.task_id == id) else { continue };
        let summary = task.outcome.result.as_deref().and_then(|r| r.lines().map(str::trim).find(|l| !l.is_empty()));
        let _ =
            writeln!(md, "| {} | {} | {} |", task_link(id, report_url), before_after(&task.outcome), summary.map_or(String::new(), code));
    }
    if !report.conflicts.is_empty() {
        md.push_str("\n**Left out** (their patches conflict with the ones above)\n\n");
        for c in &report.conflicts {
            let _ = writeln!(md, "- {} — on {} (with {})", code(&c.task_id), code_list(&c.files), code_list(&c.with));
        }
    }
    if let Some(check) = &report.check {
        let exit = check.exit_code.map_or("no exit code".to_string(), |c| format!("exit {c}"));
        let _ = writeln!(md, "\nThe check on the union, {}: {exit}.", code(&check.command));
    }
    md.push('\n');
    md.push_str(&files(&report.files_changed));
    let _ = write!(
        md,
        "\n---\n<sub>Opened by `dracode publish --combined` from the branch {}, made from `dracode combine`'s union. \
         Each run updates it while the branch's tip is a commit dracode made (trailer `{}: …`).</sub>\n",
        code(branch),
        trailers::RUN
    );
    cut(&md, MAX_BODY)
}

/// The hidden line that marks the comment dracode keeps on an issue for task `task_id`, so that
/// the next publish updates it instead of adding another.
pub fn issue_marker(task_id: &str) -> String {
    format!("<!-- dracode: the report of task {} -->", one_line(task_id).replace("--", "-"))
}

/// The comment on the issue task `task` was made from: its verdict and check, `pull` (a line
/// that says what became of its pull request), the agent's summary and a link to the report.
pub fn issue_comment(task: &FinishedTask, run_id: &str, pull: &str, report_url: Option<&str>) -> String {
    let o = &task.outcome;
    let mut md = format!(
        "{}\n**dracode** worked on this issue as task {}: **{}**{}.\n\n",
        issue_marker(&task.task_id),
        code(&task.task_id),
        o.status.as_str(),
        check_story(o)
    );
    let _ = writeln!(md, "{pull}\n");
    if !o.status.is_pass() {
        let why = short_reason(o);
        if !why.is_empty() {
            let _ = writeln!(md, "Why it did not pass: {}\n", code(&why));
        }
    }
    if let Some(summary) = o.result.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        let _ = write!(md, "**What the agent said**\n\n{}\n", fenced(&cut(summary, MAX_SUMMARY)));
    }
    let _ = write!(md, "Run {} · {} · {}", code(run_id), tokens(o), cost(o));
    if let Some(url) = report_url {
        let _ = write!(md, " · [the task in the run's report]({})", task_target(url, &task.task_id));
    }
    md.push_str("\n\n<sub>Kept up to date by `dracode publish`: each run edits this comment.</sub>\n");
    cut(&md, MAX_BODY)
}

/// What became of a task's pull request, as its issue's comment says it.
pub fn pull_line(action: &super::Action) -> String {
    use super::Action;
    match action {
        Action::Created { number, url } => format!("Its pull request: [#{number}]({}), opened by this run.", link_target(url)),
        Action::Updated { number, url } => format!("Its pull request: [#{number}]({}), updated by this run.", link_target(url)),
        Action::WouldUpdate { number, url } => format!("Its pull request: [#{number}]({}) (would be updated).", link_target(url)),
        Action::WouldCreate | Action::NotLookedUp => "A pull request would be opened.".to_string(),
        Action::NotPublished { reason } => format!("No pull request: {}.", code(reason)),
        Action::Skipped { reason } => format!("Its branch was left alone: {}.", code(reason)),
        Action::Failed { error } => format!("Its pull request could not be published: {}.", code(error)),
        Action::Commented { .. } | Action::CommentUpdated { .. } | Action::WouldComment | Action::WouldUpdateComment { .. } => {
            String::new()
        }
    }
}

/// The comment that reports a whole run: each task's verdict, its check before and after, and
/// why it failed or what the agent said.
pub fn run_comment(run: &OutputFolder, report_url: Option<&str>) -> String {
    let passed = run.tasks.iter().filter(|t| t.outcome.status.is_pass()).count();
    let mut md = format!("**dracode** run {}: {passed} of {} task(s) passed.\n\n", code(&run.run_id), run.tasks.len());
    md.push_str("| Task | Verdict | Check before → after | Why, or what the agent said |\n|---|---|---|---|\n");
    for task in &run.tasks {
        let o = &task.outcome;
        let why = if o.status.is_pass() {
            o.result.as_deref().and_then(|r| r.lines().map(str::trim).find(|l| !l.is_empty())).unwrap_or_default().to_string()
        } else {
            short_reason(o)
        };
        let why = if why.is_empty() { String::new() } else { code(&why) };
        let _ = writeln!(md, "| {} | {} | {} | {why} |", task_link(&task.task_id, report_url), o.status.as_str(), before_after(o));
    }
    if let Some(url) = report_url {
        let _ = writeln!(md, "\n[The run's report]({})", link_target(url));
    }
    cut(&md, MAX_BODY)
}

/// `, its check going from exit 1 to exit 0` — what the check says about the change.
fn check_story(o: &WireOutcome) -> String {
    match &o.check {
        Some(check) => match check.before {
            Some(before) => format!(" — its check went from {} to {}", exit(before), exit(check.exit_code)),
            None => format!(" — its check ended with {}", exit(check.exit_code)),
        },
        None => String::new(),
    }
}

/// The facts of the table: label and Markdown value.
fn facts(task: &FinishedTask, run_id: &str, report_url: Option<&str>) -> Vec<(&'static str, String)> {
    let o = &task.outcome;
    let mut rows = vec![("Verdict", verdict(o))];
    match &o.check {
        Some(check) => {
            rows.push(("Check", code(&check.command)));
            let before = match (check.before, check.before_output_tail.as_deref().and_then(failure_line)) {
                (None, _) => "not run (`check_before` is off)".to_string(),
                (Some(code_before), Some(line)) if code_before != Some(0) => format!("{}: {}", exit(code_before), code(&line)),
                (Some(code_before), _) => exit(code_before),
            };
            rows.push(("Before the agent", before));
            rows.push(("After", exit(check.exit_code)));
        }
        None => rows.push(("Check", "none: graded by its change or its answer".to_string())),
    }
    rows.push(("Tokens", tokens(o)));
    rows.push(("Cost", cost(o)));
    rows.push(("Model", format!("{} / {}", code(&o.provider), code(&o.model))));
    let base = task.base_commit.as_deref().map_or(String::new(), |b| format!(" on {}", code(short_sha(b))));
    rows.push(("Run", format!("{}{base}", code(run_id))));
    if let Some(url) = report_url {
        rows.push(("Report", format!("[{} in the run's report]({})", escape_link_text(&task.task_id), task_target(url, &task.task_id))));
    }
    rows
}

fn verdict(o: &WireOutcome) -> String {
    let mut text = format!("**{}**", o.status.as_str());
    if o.attempts > 1 {
        let _ = write!(text, " on attempt {}", o.attempts);
    }
    if o.flaky {
        text.push_str(" (flaky: an earlier attempt did not pass)");
    }
    if let Some(rate) = o.pass_rate {
        let _ = write!(text, ", pass rate {:.0}%", rate * 100.0);
    }
    if o.cached {
        text.push_str(", reused from the cache");
    }
    text
}

fn tokens(o: &WireOutcome) -> String {
    let u = &o.usage;
    let mut text = format!("{} in · {} out", thousands(u.input_tokens), thousands(u.output_tokens));
    if u.cached_input_tokens > 0 {
        let _ = write!(text, " ({} in from the cache)", thousands(u.cached_input_tokens));
    }
    let _ = write!(text, " · {} call(s)", o.num_turns);
    text
}

fn cost(o: &WireOutcome) -> String {
    match o.total_cost_usd {
        Some(usd) => human_cost(usd),
        None => "unknown (no price for the model)".to_string(),
    }
}

/// `exit 1 → exit 0`, or `exit 0` without a check before, or `no check`.
fn before_after(o: &WireOutcome) -> String {
    match &o.check {
        Some(check) => match check.before {
            Some(before) => format!("{} → {}", exit(before), exit(check.exit_code)),
            None => exit(check.exit_code),
        },
        None => "no check".to_string(),
    }
}

fn exit(code: Option<i32>) -> String {
    code.map_or("no exit code (killed, or it could not start)".to_string(), |c| format!("exit {c}"))
}

/// The list of files, at most [`MAX_FILES`].
fn files(files: &[String]) -> String {
    let mut md = format!("**Files changed** ({})\n\n", files.len());
    for file in files.iter().take(MAX_FILES) {
        let _ = writeln!(md, "- {}", code(file));
    }
    if files.len() > MAX_FILES {
        let _ = writeln!(md, "- … and {} more", files.len() - MAX_FILES);
    }
    md
}

fn task_link(id: &str, report_url: Option<&str>) -> String {
    match report_url {
        Some(url) => format!("[{}]({})", escape_link_text(id), task_target(url, id)),
        None => code(id),
    }
}

/// `URL#<id>`: the task's view in the run's report page.
fn task_target(url: &str, id: &str) -> String {
    let base = url.split('#').next().unwrap_or(url);
    link_target(&format!("{base}{}", dracode_report_page::data::task_fragment(id)))
}

/// A link target as Markdown takes it: in angle brackets when it has a blank or a parenthesis.
fn link_target(url: &str) -> String {
    let url: String = url.chars().filter(|c| !c.is_control() && !matches!(c, '<' | '>')).collect();
    if url.contains([' ', '(', ')']) { format!("<{url}>") } else { url }
}

/// Link text with Markdown's punctuation escaped.
fn escape_link_text(text: &str) -> String {
    let mut out = String::new();
    for c in one_line(text).chars() {
        if "\\`*_{}[]()<>#+-.!|@~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `text` as one inline code span, safe in a table cell: on one line, `|` escaped, fenced by
/// more backticks than any run inside.
fn code(text: &str) -> String {
    let line = one_line(text).replace('|', "\\|");
    let fence = "`".repeat(longest_run(&line, '`') + 1);
    let pad = if line.starts_with('`') || line.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{line}{pad}{fence}")
}

fn code_list(items: &[String]) -> String {
    if items.is_empty() { "none".to_string() } else { items.iter().map(|i| code(i)).collect::<Vec<_>>().join(", ") }
}

/// `text` as a fenced block of plain text, the fence longer than any tilde run inside.
fn fenced(text: &str) -> String {
    let fence = "~".repeat((longest_run(text, '~') + 1).max(3));
    format!("{fence}text\n{}\n{fence}\n", text.trim_end())
}

fn longest_run(text: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for ch in text.chars() {
        run = if ch == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

/// `text` on one line: control characters and line breaks as blanks.
fn one_line(text: &str) -> String {
    let text: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn short_sha(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// At most `max` characters of `text`, with a line that says it was cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}\n\n… (cut at {max} characters)\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_text_is_shown_as_code_and_never_as_markdown() {
        assert_eq!(code("a|b"), "`a\\|b`");
        assert_eq!(code("use `x`\nnow"), "``use `x` now``");
        assert_eq!(code("`x`"), "`` `x` ``");
        assert_eq!(fenced("~~~ inside @someone"), "~~~~text\n~~~ inside @someone\n~~~~\n");
        assert_eq!(escape_link_text("fix-it_[1]"), "fix\\-it\\_\\[1\\]");
        assert_eq!(task_target("https://x/r.html#old", "a b"), "https://x/r.html#a%20b");
        assert_eq!(link_target("https://x/a (1).html"), "<https://x/a (1).html>");
        assert!(cut(&"x".repeat(10), 4).starts_with("xxxx\n\n… (cut at 4 characters)"));
    }
}
