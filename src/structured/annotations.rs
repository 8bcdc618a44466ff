//! GitHub Actions annotations for findings (with `GITHUB_ACTIONS=true`) — `::error`, `::warning`
//! or `::notice` as the finding's severity says —, escaped as
//! the runner unescapes workflow commands: in data `%`, `\r`, `\n`; in properties also `:` and
//! `,` (actions/toolkit `command.ts`).

use super::findings::Severity;
use super::sarif::Located;

/// Findings annotated per run at most; GitHub shows only so many per step anyway.
pub const MAX_ANNOTATIONS: usize = 50;

/// The `::error|warning|notice file=…,line=…,endLine=…,title=…::message` line of one finding:
/// its severity's level (`error`, `warning`, `note` → `notice`).
pub fn annotation(located: &Located) -> String {
    let f = &located.finding;
    let level = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "notice",
    };
    let end_line = f.end_line.unwrap_or(f.start_line).max(f.start_line);
    let title = format!("{} ({}) [dracode task {}]", f.rule_id, f.severity.as_str(), located.task_id);
    format!(
        "::{level} file={},line={},endLine={end_line},title={}::{}",
        escape_property(&located.path),
        f.start_line,
        escape_property(&title),
        escape_data(&f.message)
    )
}

/// A workflow command's message.
pub fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// A workflow command's property value.
pub fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::structured::findings::Finding;

    #[test]
    fn properties_and_data_are_escaped_so_no_command_can_be_injected() {
        let finding = Finding {
            rule_id: "r,1:x".into(),
            message: "100% bad\r\n::error::injected".into(),
            file: "a.rs".into(),
            start_line: 3,
            end_line: Some(4),
            start_column: None,
            end_column: None,
            severity: Severity::Error,
        };
        let line = annotation(&Located { task_id: "t".into(), finding, path: "dir,x/a:b.rs".into() });
        assert_eq!(
            line,
            "::error file=dir%2Cx/a%3Ab.rs,line=3,endLine=4,title=r%2C1%3Ax (error) [dracode task t]::100%25 bad%0D%0A::error::injected"
        );
        assert!(!line.contains('\n'));
    }
}
