//! The record of one task attempt's refused connections: each is handed at once (up to
//! [`MAX_DENIAL_EVENTS`]) to the attempt's listener, which makes it a `network.denied` event, and
//! their count and hosts go into `task.finished`.
//! Refusals come from the egress proxy, from `web_fetch`, and from the sandbox supervisor (a
//! direct connection, a datagram socket), whose reports reach it through the task's
//! [`crate::incidents::ReportSink`].

pub use dracode_results::Denials;
use std::sync::Mutex;

/// `network.denied` events one attempt emits at most; later refusals are only counted (a
/// command retrying in a loop must not flood `results.jsonl`).
pub const MAX_DENIAL_EVENTS: u64 = 1000;
/// Distinct `host:port`s kept for `task.finished` and summary.md.
pub const MAX_HOSTS: usize = 10;

/// When a refused connection was asked for: by the agent (its commands, `web_fetch`, its MCP
/// servers, a background process), by the check, or by the batch's setup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Phase {
    /// The agent's work.
    #[default]
    Agent,
    /// The task's check (before or after the agent).
    Check,
    /// The batch's setup command.
    Setup,
}

impl Phase {
    /// `agent`, `check` or `setup`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Agent => "agent",
            Phase::Check => "check",
            Phase::Setup => "setup",
        }
    }
}

/// One refused connection, as the listener of a [`NetworkLog`] gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The host (or address) that was refused; empty for a name lookup, whose name the sandbox
    /// does not see.
    pub host: String,
    /// Its port (0 when the refusal names no port).
    pub port: u16,
    /// The command that asked for it (`unknown` when none was running).
    pub command: String,
    /// Why, when the refusal says.
    pub reason: Option<String>,
    /// Who asked: the agent, the check or the setup (the phase of the command running).
    pub phase: Phase,
    /// A name lookup (a datagram socket, as DNS opens), not a connection to a host.
    pub lookup: bool,
}

/// What a [`NetworkLog`] calls for each refusal it reports.
type Listener = Box<dyn Fn(Denial) + Send + Sync>;

/// One attempt's refused connections.
pub struct NetworkLog {
    listener: Listener,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    count: u64,
    hosts: Vec<String>,
    /// The commands running now and their phase, innermost last (a `check`, a `run_command`).
    running: Vec<(u64, String, Phase)>,
    next_id: u64,
}

/// Marks a command as running until dropped (see [`NetworkLog::running`]).
pub struct Running<'a> {
    log: &'a NetworkLog,
    id: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.log.lock().running.retain(|(id, _, _)| *id != self.id);
    }
}

impl Default for NetworkLog {
    /// A log whose refusals go nowhere but its totals (tests, tools used outside a task).
    fn default() -> Self {
        NetworkLog::new(|_| {})
    }
}

impl NetworkLog {
    /// A log that hands each reported refusal to `listener` (the attempt's, which emits it).
    pub fn new(listener: impl Fn(Denial) + Send + Sync + 'static) -> NetworkLog {
        NetworkLog { listener: Box::new(listener), state: Mutex::new(State::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Names `command`, of `phase`, as the one running until the guard is dropped: the proxy's
    /// refusals meanwhile are reported as its.
    pub fn running(&self, command: &str, phase: Phase) -> Running<'_> {
        let mut state = self.lock();
        state.next_id += 1;
        let id = state.next_id;
        state.running.push((id, command.to_string(), phase));
        Running { log: self, id }
    }

    /// The command running now (the innermost) and its phase, or `unknown` of the agent (a
    /// background process, an MCP server).
    pub fn current(&self) -> (String, Phase) {
        self.lock().running.last().map_or_else(|| ("unknown".to_string(), Phase::Agent), |(_, c, p)| (c.clone(), *p))
    }

    /// Records one refused connection to `host`:`port` by `command` (`None`: the command
    /// running now), and hands it to the listener.
    pub fn denied(&self, host: &str, port: u16, command: Option<&str>, reason: Option<&str>) {
        self.record(host, port, command, reason, false);
    }

    /// Records one refused name lookup (a datagram socket) by `command` (`None`: the command
    /// running now): counted, but no host is named (the sandbox does not see the name).
    pub fn lookup_denied(&self, command: Option<&str>, reason: Option<&str>) {
        self.record("", 0, command, reason, true);
    }

    fn record(&self, host: &str, port: u16, command: Option<&str>, reason: Option<&str>, lookup: bool) {
        let (current, phase) = self.current();
        let command = command.map_or(current, str::to_string);
        let emit = {
            let mut state = self.lock();
            state.count += 1;
            let endpoint = if port == 0 { host.to_string() } else { format!("{host}:{port}") };
            if !lookup && state.hosts.len() < MAX_HOSTS && !state.hosts.contains(&endpoint) {
                state.hosts.push(endpoint);
            }
            state.count <= MAX_DENIAL_EVENTS
        };
        if emit {
            let reason = reason.map(str::to_string);
            (self.listener)(Denial { host: host.to_string(), port, command, reason, phase, lookup });
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
    use std::sync::Arc;

    #[test]
    fn refusals_are_counted_and_named_after_the_running_command() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let heard = seen.clone();
        let log = NetworkLog::new(move |denial: Denial| heard.lock().unwrap().push(denial.command));
        log.denied("a.example", 443, None, Some("not listed"));
        {
            let _outer = log.running("npm ci", Phase::Check);
            let _inner = log.running("curl x", Phase::Check);
            log.denied("b.example", 80, None, None);
        }
        log.denied("10.0.0.1", 53, Some("dig x"), None);
        log.denied("a.example", 443, Some("again"), None);
        assert_eq!(log.totals(), Denials { count: 4, hosts: vec!["a.example:443".into(), "b.example:80".into(), "10.0.0.1:53".into()] });
        assert_eq!(*seen.lock().unwrap(), ["unknown", "curl x", "dig x", "again"]);
    }

    #[test]
    fn a_refusal_says_whose_phase_it_was_and_a_lookup_names_no_host() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let heard = seen.clone();
        let log = NetworkLog::new(move |d: Denial| heard.lock().unwrap().push((d.host, d.phase, d.lookup)));
        {
            let _check = log.running("npm test", Phase::Check);
            log.lookup_denied(Some("npm test"), Some("a name lookup"));
        }
        log.denied("b.example", 80, None, None);
        assert_eq!(*seen.lock().unwrap(), [(String::new(), Phase::Check, true), ("b.example".to_string(), Phase::Agent, false)]);
        assert_eq!(log.totals(), Denials { count: 2, hosts: vec!["b.example:80".into()] }, "a lookup names no host");
    }
}
