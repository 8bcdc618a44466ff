//! The record of one task attempt's refused connections: each becomes a `network.denied` event
//! at once (up to [`MAX_DENIAL_EVENTS`]), and their count and hosts go into `task.finished`.
//! Refusals come from the egress proxy, from `web_fetch`, and from the sandbox supervisor (a
//! direct connection, a datagram socket), whose reports reach it through the task's
//! [`crate::sandbox::report::ReportSink`].

use crate::events::{Emitter, EventKind};
use std::sync::Mutex;
pub use crate::results::Denials;

/// `network.denied` events one attempt emits at most; later refusals are only counted (a
/// command retrying in a loop must not flood `results.jsonl`).
pub const MAX_DENIAL_EVENTS: u64 = 1000;
/// Distinct `host:port`s kept for `task.finished` and summary.md.
pub const MAX_HOSTS: usize = 10;

/// One attempt's refused connections.
pub struct NetworkLog {
    emitter: Emitter,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    count: u64,
    hosts: Vec<String>,
    /// The commands running now, innermost last (a `check`, a `run_command`).
    running: Vec<(u64, String)>,
    next_id: u64,
}

/// Marks a command as running until dropped (see [`NetworkLog::running`]).
pub struct Running<'a> {
    log: &'a NetworkLog,
    id: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.log.lock().running.retain(|(id, _)| *id != self.id);
    }
}

impl Default for NetworkLog {
    /// A log whose events go nowhere (tests, tools used outside a task).
    fn default() -> Self {
        NetworkLog::new(Emitter::discard())
    }
}

impl NetworkLog {
    /// A log that emits through `emitter` (the attempt's).
    pub fn new(emitter: Emitter) -> NetworkLog {
        NetworkLog { emitter, state: Mutex::new(State::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Names `command` as the one running until the guard is dropped: the proxy's refusals
    /// meanwhile are reported as its.
    pub fn running(&self, command: &str) -> Running<'_> {
        let mut state = self.lock();
        state.next_id += 1;
        let id = state.next_id;
        state.running.push((id, command.to_string()));
        Running { log: self, id }
    }

    /// The command running now (the innermost), or `unknown` (a background process, an MCP
    /// server).
    pub fn current_command(&self) -> String {
        self.lock().running.last().map_or_else(|| "unknown".to_string(), |(_, c)| c.clone())
    }

    /// Records one refused connection to `host`:`port` by `command` (`None`: the command
    /// running now), and emits `network.denied`.
    pub fn denied(&self, host: &str, port: u16, command: Option<&str>, reason: Option<&str>) {
        let command = command.map_or_else(|| self.current_command(), str::to_string);
        let emit = {
            let mut state = self.lock();
            state.count += 1;
            let endpoint = if port == 0 { host.to_string() } else { format!("{host}:{port}") };
            if state.hosts.len() < MAX_HOSTS && !state.hosts.contains(&endpoint) {
                state.hosts.push(endpoint);
            }
            state.count <= MAX_DENIAL_EVENTS
        };
        if emit {
            self.emitter.emit(EventKind::NetworkDenied { host: host.to_string(), port, command, reason: reason.map(str::to_string) });
        }
    }

    /// The count and hosts so far.
    pub fn totals(&self) -> Denials {
        let state = self.lock();
        Denials { count: state.count, hosts: state.hosts.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, EventBus, Reporter};
    use std::sync::Arc;

    struct Collect(Arc<Mutex<Vec<Event>>>);
    impl Reporter for Collect {
        fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
            self.0.lock().unwrap().push(event.clone());
            Ok(())
        }
    }

    #[test]
    fn refusals_are_counted_and_named_after_the_running_command() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let bus = EventBus::new(vec![Box::new(Collect(seen.clone()))]);
        let log = NetworkLog::new(Emitter::run(bus.clone()).task("t", 1));
        log.denied("a.example", 443, None, Some("not listed"));
        {
            let _outer = log.running("npm ci");
            let _inner = log.running("curl x");
            log.denied("b.example", 80, None, None);
        }
        log.denied("10.0.0.1", 53, Some("dig x"), None);
        log.denied("a.example", 443, Some("again"), None);
        assert_eq!(log.totals(), Denials { count: 4, hosts: vec!["a.example:443".into(), "b.example:80".into(), "10.0.0.1:53".into()] });
        assert!(bus.flush(std::time::Duration::from_secs(5)));
        let commands: Vec<String> = seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::NetworkDenied { command, .. } => Some(command.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(commands, ["unknown", "curl x", "dig x", "again"]);
    }
}
