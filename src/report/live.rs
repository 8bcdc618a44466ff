//! The live progress display for a terminal: a bar with N/total, the running task ids, tokens
//! and cost, above which the same lines [`ProgressReporter`] writes for CI logs scroll by.
//! Chosen only when stderr is a terminal and `CI` is not set; logs get plain lines.

use super::progress::{ProgressReporter, Verbosity};
use super::{human_cost, thousands};
use crate::events::{Event, Reporter, WireEvent};
use dracode_secrets::Redactor;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

/// A progress bar on stderr with the plain progress lines printed above it.
pub struct LiveReporter {
    lines: ProgressReporter,
    bar: ProgressBar,
    running: BTreeSet<String>,
    tokens: u64,
    cost: f64,
}

impl LiveReporter {
    /// A live display for a run of `total_tasks`, its labels coloured when `colour`.
    pub fn new(verbosity: Verbosity, total_tasks: usize, redactor: Arc<Redactor>, colour: bool) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total_tasks as u64), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{spinner} [{pos}/{len}] {elapsed_precise} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        let writer = BarWriter { bar: bar.clone(), pending: Vec::new() };
        let lines = ProgressReporter::new(Box::new(writer), verbosity, total_tasks).with_redactor(redactor).with_colour(colour);
        LiveReporter { lines, bar, running: BTreeSet::new(), tokens: 0, cost: 0.0 }
    }

    fn refresh(&self) {
        let running: Vec<&str> = self.running.iter().map(String::as_str).take(6).collect();
        let more = self.running.len().saturating_sub(running.len());
        let more = if more > 0 { format!(" +{more}") } else { String::new() };
        self.bar.set_message(format!(
            "{} tok  {}  running: {}{more}",
            thousands(self.tokens),
            human_cost(self.cost),
            if running.is_empty() { "-".to_string() } else { running.join(", ") }
        ));
    }
}

impl Reporter for LiveReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        self.lines.on_event(event)?;
        match &event.record {
            WireEvent::TaskStarted { .. } => {
                if let Some(task_id) = event.task_id() {
                    self.running.insert(task_id.to_string());
                }
            }
            WireEvent::TurnCompleted { usage, .. } => self.tokens += usage.total_tokens,
            WireEvent::TaskFinished { header, outcome } => {
                if let Some(task_id) = &header.task_id {
                    self.running.remove(task_id);
                }
                self.cost += outcome.total_cost_usd.unwrap_or(0.0);
                self.bar.inc(1);
            }
            WireEvent::RunFinished { .. } => {
                self.bar.finish_and_clear();
                return Ok(());
            }
            _ => return Ok(()),
        }
        self.refresh();
        Ok(())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.bar.finish_and_clear();
        self.lines.finish()
    }
}

/// Hands complete lines to the bar, which prints them above itself.
struct BarWriter {
    bar: ProgressBar,
    pending: Vec<u8>,
}

impl Write for BarWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=pos).collect();
            self.bar.println(String::from_utf8_lossy(&line[..line.len() - 1]));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
