//! What the supervisor tells dracode about a confined command, apart from its output: a
//! connection it refused, a limit the command hit. The supervisor appends one JSON object a line
//! to a file dracode made for that command ([`ReportFile`]); dracode reads it when the command
//! has ended. The file is opened by the supervisor before the command is confined and is not
//! among the command's descriptors, and it lives outside every folder the command may read.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One thing the sandbox did to a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Report {
    /// A connection (or a datagram socket) the sandbox refused.
    NetworkDenied {
        /// The host name or address asked for (a socket path for a Unix socket, `udp` for a
        /// datagram socket whose destination is not known yet).
        host: String,
        /// The port (0 for a Unix socket or a datagram socket).
        port: u16,
        /// The command line that asked, as the supervisor started it.
        command: String,
    },
    /// A per-task limit the command reached; the supervisor stopped the command.
    LimitReached {
        /// Which limit (`memory`, `processes`, `open_files`, `file_size`, `cpu_time`).
        limit: String,
        /// The limit's value, as a person reads it (`512`, `256 MiB`).
        value: String,
        /// The command line that hit it.
        command: String,
    },
}

/// Appends `report` to the report file at `path` (one line, one `write`).
pub fn append(path: &Path, report: &Report) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(report).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    file.write_all(&line)
}

/// A command's report file: created empty by dracode, removed when dropped.
pub struct ReportFile {
    file: tempfile::NamedTempFile,
}

impl ReportFile {
    /// A new empty report file in the temp dir (mode 0600).
    pub fn create() -> std::io::Result<ReportFile> {
        Ok(ReportFile { file: tempfile::Builder::new().prefix("dracode-report-").tempfile()? })
    }

    /// Where the supervisor writes.
    pub fn path(&self) -> PathBuf {
        self.file.path().to_path_buf()
    }

    /// Every report written so far; a line that does not parse is skipped.
    pub fn read(&self) -> Vec<Report> {
        let text = std::fs::read_to_string(self.file.path()).unwrap_or_default();
        text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }
}

/// What a [`ReportSink`] tells of each report as it arrives.
type Listener = dyn Fn(&Report) + Send + Sync;

/// The failure that ends a task when `reports` hold a limit a command reached (the first
/// one): kind `resource`, naming the limit, its value and the command.
pub fn limit_failure(reports: &[Report]) -> Option<dracode_results::TaskError> {
    reports.iter().find_map(|report| match report {
        Report::LimitReached { limit, value, command } => Some(dracode_results::TaskError::new(
            dracode_results::FailureKind::Resource,
            format!("the command `{command}` passed the task's {limit} limit ({value}, limits.{limit}); the sandbox killed it"),
        )),
        Report::NetworkDenied { .. } => None,
    })
}

/// Every report of one task's commands (its `run_command` calls and checks), collected as the
/// commands end; the task runner turns them into events and verdicts.
#[derive(Default)]
pub struct ReportSink {
    reports: std::sync::Mutex<Vec<Report>>,
    /// Told of each report as it is added (the task's `network.denied` events).
    listener: std::sync::OnceLock<Box<Listener>>,
}

impl std::fmt::Debug for ReportSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportSink").field("reports", &self.all()).finish_non_exhaustive()
    }
}

impl ReportSink {
    /// Adds what one command's supervisor reported, telling the listener of each.
    pub fn extend(&self, reports: impl IntoIterator<Item = Report>) {
        let reports: Vec<Report> = reports.into_iter().collect();
        if let Some(listener) = self.listener.get() {
            reports.iter().for_each(listener);
        }
        self.reports.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(reports);
    }

    /// Calls `listener` with every report added from now on, as its command ends. Only the
    /// first call has an effect.
    pub fn listen(&self, listener: impl Fn(&Report) + Send + Sync + 'static) {
        let _ = self.listener.set(Box::new(listener));
    }

    /// How many reports have come so far.
    pub fn len(&self) -> usize {
        self.reports.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Whether no report has come yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every report so far, in the order the commands ended.
    pub fn all(&self) -> Vec<Report> {
        self.reports.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_written_by_the_supervisor_are_read_back_in_order() {
        let file = ReportFile::create().unwrap();
        let denied = Report::NetworkDenied { host: "10.0.0.1".into(), port: 53, command: "dig x".into() };
        let limit = Report::LimitReached { limit: "processes".into(), value: "64".into(), command: "sh bomb".into() };
        append(&file.path(), &denied).unwrap();
        append(&file.path(), &limit).unwrap();
        assert_eq!(file.read(), [denied, limit]);
        let line = std::fs::read_to_string(file.path()).unwrap();
        assert!(line.starts_with("{\"kind\":\"network_denied\""), "{line}");
    }

    #[test]
    fn a_listener_hears_each_report_as_it_is_added() {
        let sink = ReportSink::default();
        let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let ear = heard.clone();
        sink.listen(move |r| ear.lock().unwrap().push(r.clone()));
        let denied = Report::NetworkDenied { host: "udp".into(), port: 0, command: "dig".into() };
        sink.extend([denied.clone()]);
        assert_eq!(*heard.lock().unwrap(), std::slice::from_ref(&denied));
        assert_eq!(sink.all(), [denied]);
    }

    #[test]
    fn a_limit_reached_is_a_resource_failure_naming_the_limit() {
        let denied = Report::NetworkDenied { host: "x".into(), port: 1, command: "curl x".into() };
        assert_eq!(limit_failure(std::slice::from_ref(&denied)), None);
        let limit = Report::LimitReached { limit: "memory".into(), value: "200 MiB".into(), command: "python3 hog.py".into() };
        let error = limit_failure(&[denied, limit]).unwrap();
        assert_eq!(error.kind, dracode_results::FailureKind::Resource);
        assert!(error.kind.is_infrastructure());
        for part in ["memory limit", "200 MiB", "python3 hog.py"] {
            assert!(error.message.contains(part), "{part} in {}", error.message);
        }
    }
}
