//! The bus: [`EventBus`] stamps and queues every event and hands it, in order, to every
//! reporter on a thread of its own; [`Emitter`] is a task's (or the run's) handle on it.

use super::{Event, EventKind, Reporter, RetryScope, RunEnd, TaskRef};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

/// Events that may wait for the dispatcher. When the queue is full an emitter waits (it never
/// drops an event: `results.jsonl` promises every one); 1,024 events is seconds of a busy run,
/// so only a reporter that is stuck — a full disk, a stderr nobody reads — ever slows a task.
pub const QUEUE_BOUND: usize = 1024;

/// What travels to the dispatcher thread.
enum Queued {
    /// An event to hand to every reporter.
    Event(Event),
    /// Answer on this channel once every earlier event has been handed over.
    Flush(SyncSender<()>),
}

/// Hands every event to every reporter, in emission order, on a thread of its own.
///
/// [`EventBus::emit`] only stamps the event and queues it (a bounded channel, see
/// [`QUEUE_BOUND`]); a dispatcher thread feeds the reporters, so a slow disk or terminal never
/// holds a task's thread. Stamping and queueing happen under one lock, so the queue's order is
/// the order of the timestamps, and every reporter sees the same order (which is what
/// `results.jsonl`'s `seq` counts). [`EventBus::finish`] closes the queue, waits until the
/// dispatcher has delivered everything, then lets every reporter write its whole-run files.
pub struct EventBus {
    sender: Mutex<Option<SyncSender<Queued>>>,
    dispatcher: Mutex<Option<JoinHandle<Ending>>>,
}

/// How the reporting of a run ended: every I/O failure seen, and the exit code `run.finished`
/// carried to the record (none when the run never finished).
#[derive(Debug, Default)]
pub struct Ending {
    /// Every artifact failure, in order.
    pub failures: Vec<String>,
    /// `run.finished.exit_code` as the record got it, and how many failures it had counted.
    pub recorded: Option<(i32, usize)>,
}

impl Ending {
    /// The process's exit code: the one the record holds, unless an artifact failed after it was
    /// decided (the record's own write) — then what [`dracode_results::exit_codes::after_artifacts`]
    /// makes of it. `unrecorded` is the tasks' code of a run that never got to `run.finished`.
    pub fn exit_code(&self, unrecorded: i32) -> i32 {
        let (code, counted) = self.recorded.unwrap_or((unrecorded, 0));
        dracode_results::exit_codes::after_artifacts(code, self.failures.len() - counted.min(self.failures.len()))
    }
}

impl EventBus {
    /// A bus feeding `reporters` from a dispatcher thread (none when there are no reporters).
    pub fn new(reporters: Vec<Box<dyn Reporter>>) -> Arc<Self> {
        if reporters.is_empty() {
            return Arc::new(EventBus { sender: Mutex::new(None), dispatcher: Mutex::new(None) });
        }
        let (sender, receiver) = std::sync::mpsc::sync_channel(QUEUE_BOUND);
        let dispatcher = std::thread::Builder::new().name("dracode-reporters".into()).spawn(move || dispatch(receiver, reporters));
        match dispatcher {
            Ok(handle) => Arc::new(EventBus { sender: Mutex::new(Some(sender)), dispatcher: Mutex::new(Some(handle)) }),
            // No thread to be had: nothing can be reported, which `finish` says.
            Err(e) => {
                tracing::error!("cannot start the reporter thread: {e}");
                Arc::new(EventBus { sender: Mutex::new(None), dispatcher: Mutex::new(None) })
            }
        }
    }

    /// Stamps `kind` and queues it for the reporters; waits only while the queue is full. After
    /// [`EventBus::finish`] events are dropped.
    pub fn emit(&self, task: Option<TaskRef>, kind: EventKind) {
        let sender = lock(&self.sender);
        if let Some(sender) = sender.as_ref() {
            let _ = sender.send(Queued::Event(Event { ts: SystemTime::now(), task, kind }));
        }
    }

    /// Waits (at most `timeout`) until every event emitted so far has reached every reporter.
    /// For a process about to exit without [`EventBus::finish`], and for tests.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (ack, done) = std::sync::mpsc::sync_channel(1);
        let queued = lock(&self.sender).as_ref().is_some_and(|s| s.send(Queued::Flush(ack)).is_ok());
        !queued || done.recv_timeout(timeout).is_ok()
    }

    /// Delivers every queued event, lets every reporter write its whole-run files, and returns
    /// every I/O failure seen. Later calls return nothing.
    pub fn finish(&self) -> Vec<String> {
        self.finish_run().failures
    }

    /// [`EventBus::finish`], with the exit code the record got ([`Ending`]).
    pub fn finish_run(&self) -> Ending {
        drop(lock(&self.sender).take());
        let Some(handle) = lock(&self.dispatcher).take() else { return Ending::default() };
        handle
            .join()
            .unwrap_or_else(|_| Ending { failures: vec!["a reporter panicked; artifacts may be incomplete".to_string()], recorded: None })
    }
}

impl Drop for EventBus {
    fn drop(&mut self) {
        // Artifacts are complete even when the caller never called `finish`.
        self.finish();
    }
}

/// The dispatcher thread: every event to every reporter, in queue order, until the queue
/// closes; then every reporter's `finish`. Returns the I/O failures seen and what the record got.
fn dispatch(receiver: Receiver<Queued>, mut reporters: Vec<Box<dyn Reporter>>) -> Ending {
    let mut failures = Vec::new();
    let mut recorded = None;
    let mut finished = vec![false; reporters.len()];
    for message in receiver {
        match message {
            Queued::Event(event) if matches!(event.kind, EventKind::RunFinished(_)) => {
                recorded = Some(run_finished(&mut reporters, &mut finished, event, &mut failures));
            }
            Queued::Event(event) => {
                for reporter in &mut reporters {
                    if let Err(e) = reporter.on_event(&event) {
                        failures.push(e.to_string());
                    }
                }
            }
            Queued::Flush(ack) => {
                let _ = ack.send(());
            }
        }
    }
    for (reporter, done) in reporters.iter_mut().zip(finished) {
        if !done && let Err(e) = reporter.finish() {
            failures.push(e.to_string());
        }
    }
    Ending { failures, recorded }
}

/// Hands `run.finished` to the reporters in [`RunEnd`] order. The whole-run files are written
/// (and their reporters finished) first; before each later group the event's exit code becomes
/// [`dracode_results::exit_codes::ARTIFACTS_FAILED`] if anything failed so far (an interrupt's code
/// stays), so the record never claims a success its own files do not have. Returns the exit
/// code the record got and the failures it counted.
fn run_finished(reporters: &mut [Box<dyn Reporter>], finished: &mut [bool], mut event: Event, failures: &mut Vec<String>) -> (i32, usize) {
    let mut recorded = (0, 0);
    for group in [RunEnd::WritesFiles, RunEnd::Shows, RunEnd::ReadsFolder, RunEnd::Records] {
        if let EventKind::RunFinished(totals) = &mut event.kind {
            totals.exit_code = dracode_results::exit_codes::after_artifacts(totals.exit_code, failures.len());
            totals.artifact_failures = failures.len();
            recorded = (totals.exit_code, failures.len());
        }
        for (reporter, done) in reporters.iter_mut().zip(finished.iter_mut()).filter(|(r, _)| r.run_end() == group) {
            let result = reporter.on_event(&event);
            if let Err(e) = result {
                failures.push(e.to_string());
            }
            if group == RunEnd::WritesFiles {
                *done = true;
                if let Err(e) = reporter.finish() {
                    failures.push(e.to_string());
                }
            }
        }
    }
    recorded
}

/// `mutex`'s contents; a panic elsewhere while it was held does not stop the reporting.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A task's emitter watches its model calls: each HTTP retry becomes a `retry` event, and
/// each arrival of bytes (a streamed answer, a keep-alive) restarts the idle clock.
impl dracode_llm::CallObserver for Emitter {
    fn on_retry(&self, notice: dracode_llm::RetryNotice) {
        self.emit(EventKind::Retry { scope: RetryScope::Http, reason: notice.reason, delay: notice.delay, next_attempt: notice.attempt });
    }

    fn on_bytes(&self) {
        self.keep_alive();
    }
}

/// A handle that emits events on behalf of one task attempt (or of the run).
#[derive(Clone)]
pub struct Emitter {
    bus: Arc<EventBus>,
    task: Option<TaskRef>,
    activity: Option<Arc<Activity>>,
}

impl Emitter {
    /// An emitter for run-level events.
    pub fn run(bus: Arc<EventBus>) -> Self {
        Emitter { bus, task: None, activity: None }
    }

    /// An emitter for one attempt of one task.
    pub fn task(&self, task_id: &str, attempt: u32) -> Self {
        Emitter { bus: self.bus.clone(), task: Some(TaskRef { task_id: task_id.into(), attempt }), activity: None }
    }

    /// This emitter, also recording the time of each event in `activity`.
    pub fn with_activity(&self, activity: Arc<Activity>) -> Self {
        Emitter { activity: Some(activity), ..self.clone() }
    }

    /// Restarts the task's idle clock without an event: the task is alive (bytes arrived on a
    /// model stream, a command printed output). Does nothing without an activity clock.
    pub fn keep_alive(&self) {
        if let Some(activity) = &self.activity {
            activity.touch();
        }
    }

    /// Emits `kind` for this emitter's task.
    pub fn emit(&self, kind: EventKind) {
        if let Some(activity) = &self.activity {
            activity.touch();
        }
        self.bus.emit(self.task.clone(), kind);
    }

    /// An emitter that drops everything (for unit tests of tools).
    pub fn discard() -> Self {
        Emitter::run(EventBus::new(Vec::new()))
    }
}

/// When a task last showed life — an event, or [`Emitter::keep_alive`] (for `idle_timeout`).
#[derive(Debug)]
pub struct Activity(Mutex<std::time::Instant>);

impl Activity {
    /// A clock that starts now.
    pub fn new() -> Arc<Self> {
        Arc::new(Activity(Mutex::new(std::time::Instant::now())))
    }

    /// Time since the last event.
    pub fn idle(&self) -> Duration {
        lock(&self.0).elapsed()
    }

    fn touch(&self) {
        *lock(&self.0) = std::time::Instant::now();
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::RunTotals;
    use std::sync::mpsc::Sender;

    /// Records the message text of every event; sleeps `delay` on each; fails on "fail".
    struct Record {
        seen: Sender<String>,
        delay: Duration,
    }

    impl Reporter for Record {
        fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
            std::thread::sleep(self.delay);
            let EventKind::AgentMessage { text } = &event.kind else { return Ok(()) };
            let _ = self.seen.send(text.clone());
            if text == "fail" { Err(std::io::Error::other("disk full")) } else { Ok(()) }
        }
        fn finish(&mut self) -> std::io::Result<()> {
            let _ = self.seen.send("finished".into());
            Ok(())
        }
    }

    fn message(text: &str) -> EventKind {
        EventKind::AgentMessage { text: text.to_string() }
    }

    #[test]
    fn a_slow_reporter_does_not_hold_the_emitter_and_finish_drains_in_order() {
        let (seen, received) = std::sync::mpsc::channel();
        let bus = EventBus::new(vec![Box::new(Record { seen, delay: Duration::from_millis(20) })]);
        let emitter = Emitter::run(bus.clone());
        let started = std::time::Instant::now();
        for i in 0..20 {
            emitter.emit(message(&i.to_string()));
        }
        assert!(started.elapsed() < Duration::from_millis(200), "emitting waited for the reporter: {:?}", started.elapsed());
        assert!(bus.finish().is_empty());
        let got: Vec<String> = received.try_iter().collect();
        let want: Vec<String> = (0..20).map(|i| i.to_string()).chain(["finished".to_string()]).collect();
        assert_eq!(got, want);
        emitter.emit(message("late"));
        assert!(received.try_recv().is_err(), "nothing is delivered after finish");
    }

    #[test]
    fn events_from_many_threads_arrive_with_rising_timestamps() {
        struct Times(Arc<Mutex<Vec<SystemTime>>>);
        impl Reporter for Times {
            fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
                lock(&self.0).push(event.ts);
                Ok(())
            }
        }
        let times = Arc::new(Mutex::new(Vec::new()));
        let bus = EventBus::new(vec![Box::new(Times(times.clone()))]);
        std::thread::scope(|s| {
            for t in 0..4 {
                let emitter = Emitter::run(bus.clone()).task(&format!("t{t}"), 1);
                s.spawn(move || (0..QUEUE_BOUND).for_each(|_| emitter.emit(message("x"))));
            }
        });
        bus.finish();
        let times = lock(&times);
        assert_eq!(times.len(), 4 * QUEUE_BOUND, "a full queue makes emitters wait, it never drops");
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "queue order is timestamp order");
    }

    /// Fails its whole-run file on `finish`, or records the exit code of `run.finished`.
    struct EndReporter {
        role: RunEnd,
        codes: Sender<(RunEnd, i32, usize)>,
    }

    impl Reporter for EndReporter {
        fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
            if let EventKind::RunFinished(totals) = &event.kind {
                let _ = self.codes.send((self.role, totals.exit_code, totals.artifact_failures));
            }
            Ok(())
        }
        fn finish(&mut self) -> std::io::Result<()> {
            let _ = self.codes.send((self.role, -1, 0));
            if self.role == RunEnd::WritesFiles { Err(std::io::Error::other("cannot write junit.xml: disk full")) } else { Ok(()) }
        }
        fn run_end(&self) -> RunEnd {
            self.role
        }
    }

    #[test]
    fn run_finished_reaches_the_record_last_with_the_exit_code_the_files_left() {
        let (codes, received) = std::sync::mpsc::channel();
        // Listed record first: the order of the list must not matter.
        let reporters: Vec<Box<dyn Reporter>> = [RunEnd::Records, RunEnd::Shows, RunEnd::WritesFiles]
            .into_iter()
            .map(|role| Box::new(EndReporter { role, codes: codes.clone() }) as Box<dyn Reporter>)
            .collect();
        let bus = EventBus::new(reporters);
        let totals = RunTotals::of(&[], Duration::ZERO);
        assert_eq!(totals.exit_code, dracode_results::exit_codes::OK);
        bus.emit(None, EventKind::RunFinished(totals));
        assert_eq!(bus.finish(), ["cannot write junit.xml: disk full"]);
        let seen: Vec<(RunEnd, i32, usize)> = received.try_iter().collect();
        let failed = dracode_results::exit_codes::ARTIFACTS_FAILED;
        assert_eq!(
            seen,
            [
                (RunEnd::WritesFiles, 0, 0),
                (RunEnd::WritesFiles, -1, 0),
                (RunEnd::Shows, failed, 1),
                (RunEnd::Records, failed, 1),
                (RunEnd::Records, -1, 0),
                (RunEnd::Shows, -1, 0),
            ],
            "files written and finished first; then the display and the record see exit code 3"
        );
    }

    #[test]
    fn reporter_failures_come_back_from_finish_and_flush_waits_for_delivery() {
        let (seen, received) = std::sync::mpsc::channel();
        let bus = EventBus::new(vec![Box::new(Record { seen, delay: Duration::from_millis(5) })]);
        bus.emit(None, message("fail"));
        bus.emit(None, message("ok"));
        assert!(bus.flush(Duration::from_secs(5)));
        assert_eq!(received.try_iter().collect::<Vec<_>>(), ["fail", "ok"]);
        assert_eq!(bus.finish(), ["disk full"]);
        assert!(bus.finish().is_empty());
    }
}
