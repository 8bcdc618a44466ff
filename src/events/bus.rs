//! The bus: [`EventBus`] queues every event and hands it, in order and stamped ([`Stamp`]), to
//! every reporter on a thread of its own; [`Emitter`] is a task's (or the run's) handle on it.

use super::{Attachment, Event, Reporter, RetryScope, RunEnd, WireEvent};
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
    /// An event to hand to every reporter (boxed: a record is some hundred bytes, a flush 16).
    Event(Box<Event>),
    /// Answer on this channel once every earlier event has been handed over.
    Flush(SyncSender<()>),
    /// An artifact the run could not write, counted by `run.finished` as the reporters' own.
    Failure(String),
}

/// What the bus writes into every event's header, once, before any reporter sees it: `seq` (1,
/// 2, … in delivery order), `ts` (the event's time, RFC 3339 UTC with milliseconds), `run_id`
/// and, when the run is sharded, `shard` (else a `run.started`'s own shard stays). Every
/// reporter of a bus — `results.jsonl` and a `--jsonl` stream alike — so gets the same line.
#[derive(Debug, Clone)]
pub struct Stamp {
    run_id: String,
    shard: Option<String>,
    seq: u64,
}

impl Stamp {
    /// The stamp of the run `run_id` (shard `K/N` when sharded); the first event gets `seq` 1.
    pub fn new(run_id: &str, shard: Option<&str>) -> Self {
        Stamp { run_id: run_id.to_string(), shard: shard.map(str::to_string), seq: 0 }
    }

    /// Stamps `event` as the next one.
    pub fn stamp(&mut self, event: &mut Event) {
        self.seq += 1;
        let header = event.record.header_mut();
        header.seq = self.seq;
        header.ts = humantime::format_rfc3339_millis(event.ts).to_string();
        header.run_id.clone_from(&self.run_id);
        if self.shard.is_some() {
            header.shard.clone_from(&self.shard);
        }
    }

    /// Stamps `line`, a line kept as it was read (`dracode merge` keeps its inputs' lines
    /// whole), as the next one: its `seq` and `run_id`; its own `ts` and `shard` stay.
    pub fn restamp_line(&mut self, line: &mut serde_json::Value) {
        self.seq += 1;
        if let Some(fields) = line.as_object_mut() {
            fields.insert("seq".into(), self.seq.into());
            fields.insert("run_id".into(), self.run_id.clone().into());
        }
    }
}

/// Hands every event to every reporter, in emission order, on a thread of its own.
///
/// [`EventBus::emit`] only times the event and queues it (a bounded channel, see
/// [`QUEUE_BOUND`]); a dispatcher thread stamps it ([`Stamp`]) and feeds the reporters, so a slow
/// disk or terminal never holds a task's thread. Timing and queueing happen under one lock, so
/// the queue's order is the order of the timestamps, and every reporter sees the same order
/// (which is what `results.jsonl`'s `seq` counts). [`EventBus::finish`] closes the queue, waits
/// until the dispatcher has delivered everything, then lets every reporter write its whole-run
/// files.
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
    /// A bus feeding `reporters` from a dispatcher thread (none when there are no reporters),
    /// every event stamped with `stamp` first.
    pub fn new(stamp: Stamp, reporters: Vec<Box<dyn Reporter>>) -> Arc<Self> {
        if reporters.is_empty() {
            return Arc::new(EventBus { sender: Mutex::new(None), dispatcher: Mutex::new(None) });
        }
        let (sender, receiver) = std::sync::mpsc::sync_channel(QUEUE_BOUND);
        let dispatcher = std::thread::Builder::new().name("dracode-reporters".into()).spawn(move || dispatch(receiver, stamp, reporters));
        match dispatcher {
            Ok(handle) => Arc::new(EventBus { sender: Mutex::new(Some(sender)), dispatcher: Mutex::new(Some(handle)) }),
            // No thread to be had: nothing can be reported, which `finish` says.
            Err(e) => {
                tracing::error!("cannot start the reporter thread: {e}");
                Arc::new(EventBus { sender: Mutex::new(None), dispatcher: Mutex::new(None) })
            }
        }
    }

    /// Times `event` (now) and queues it for the reporters; waits only while the queue is full.
    /// After [`EventBus::finish`] events are dropped.
    pub fn emit(&self, mut event: Event) {
        let sender = lock(&self.sender);
        if let Some(sender) = sender.as_ref() {
            event.ts = SystemTime::now();
            let _ = sender.send(Queued::Event(Box::new(event)));
        }
    }

    /// Counts `message` (an artifact of the run that could not be written) among the run's
    /// failures: a later `run.finished` says exit code 3, as for a reporter's own failure.
    pub fn fail(&self, message: String) {
        if let Some(sender) = lock(&self.sender).as_ref() {
            let _ = sender.send(Queued::Failure(message));
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

/// The dispatcher thread: every event, stamped, to every reporter, in queue order, until the
/// queue closes; then every reporter's `finish`. Returns the I/O failures seen and what the
/// record got.
fn dispatch(receiver: Receiver<Queued>, mut stamp: Stamp, mut reporters: Vec<Box<dyn Reporter>>) -> Ending {
    let mut failures = Vec::new();
    let mut recorded = None;
    let mut finished = vec![false; reporters.len()];
    for message in receiver {
        match message {
            Queued::Event(mut event) if matches!(event.record, WireEvent::RunFinished { .. }) => {
                stamp.stamp(&mut event);
                recorded = Some(run_finished(&mut reporters, &mut finished, *event, &mut failures));
            }
            Queued::Event(mut event) => {
                stamp.stamp(&mut event);
                for reporter in &mut reporters {
                    if let Err(e) = reporter.on_event(&event) {
                        failures.push(e.to_string());
                    }
                }
            }
            Queued::Flush(ack) => {
                let _ = ack.send(());
            }
            Queued::Failure(message) => failures.push(message),
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
/// stays), so the record never claims a success its own files do not have; each group gets the
/// failures so far beside it ([`Attachment::ArtifactFailures`]). Returns the exit code the record
/// got and the failures it counted.
fn run_finished(reporters: &mut [Box<dyn Reporter>], finished: &mut [bool], mut event: Event, failures: &mut Vec<String>) -> (i32, usize) {
    let mut recorded = (0, 0);
    for group in [RunEnd::WritesFiles, RunEnd::Shows, RunEnd::ReadsFolder, RunEnd::Records] {
        if let WireEvent::RunFinished { exit_code, .. } = &mut event.record {
            *exit_code = dracode_results::exit_codes::after_artifacts(*exit_code, failures.len());
            recorded = (*exit_code, failures.len());
        }
        event.attachment = Some(Box::new(Attachment::ArtifactFailures(failures.len())));
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
        self.emit(Event::retry(RetryScope::Http, notice.reason, notice.delay, notice.attempt));
    }

    fn on_bytes(&self) {
        self.keep_alive();
    }
}

/// Which task and attempt an emitter's events belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TaskRef {
    /// The task's id.
    task_id: Arc<str>,
    /// 1-based attempt number.
    attempt: u32,
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

    /// Counts an artifact the run could not write among its failures ([`EventBus::fail`]).
    pub fn fail(&self, message: String) {
        self.bus.fail(message);
    }

    /// Emits `event` (a record with an unstamped header, or an [`Event`] made with what lives
    /// beside it) for this emitter's task ([`Event::of_task`]).
    pub fn emit(&self, event: impl Into<Event>) {
        let mut event = event.into();
        if let Some(task) = &self.task {
            event = event.of_task(&task.task_id, task.attempt);
        }
        if let Some(activity) = &self.activity {
            activity.touch();
        }
        self.bus.emit(event);
    }

    /// An emitter that drops everything (for unit tests of tools, and the setups of `combine`).
    pub fn discard() -> Self {
        Emitter::run(EventBus::new(Stamp::new("", None), Vec::new()))
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
    use crate::events::{Header, RunTotals};
    use std::sync::mpsc::Sender;

    /// Records the message text of every event; sleeps `delay` on each; fails on "fail".
    struct Record {
        seen: Sender<String>,
        delay: Duration,
    }

    impl Reporter for Record {
        fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
            std::thread::sleep(self.delay);
            let WireEvent::AgentMessage { text, .. } = &event.record else { return Ok(()) };
            let _ = self.seen.send(text.clone());
            if text == "fail" { Err(std::io::Error::other("disk full")) } else { Ok(()) }
        }
        fn finish(&mut self) -> std::io::Result<()> {
            let _ = self.seen.send("finished".into());
            Ok(())
        }
    }

    fn message(text: &str) -> WireEvent {
        WireEvent::AgentMessage { header: Header::unstamped(None), text: text.to_string() }
    }

    /// A bus of `reporters` for the run `r`.
    fn bus(reporters: Vec<Box<dyn Reporter>>) -> Arc<EventBus> {
        EventBus::new(Stamp::new("r", None), reporters)
    }

    /// The stamp numbers, times and names every event once; a task's emitter names the task and
    /// attempt (but on a retry, whose own `attempt` is the next); an unsharded stamp leaves a
    /// `run.started`'s own shard.
    #[test]
    fn the_stamp_numbers_times_and_names_every_event_and_the_emitter_its_task() {
        struct Headers(Arc<Mutex<Vec<Header>>>);
        impl Reporter for Headers {
            fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
                assert_eq!(event.record.header().ts, humantime::format_rfc3339_millis(event.ts).to_string());
                lock(&self.0).push(event.record.header().clone());
                Ok(())
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let bus = bus(vec![Box::new(Headers(seen.clone()))]);
        let (run, task) = (Emitter::run(bus.clone()), Emitter::run(bus.clone()).task("t", 2));
        let started = WireEvent::RunStarted {
            header: Header { shard: Some("1/2".into()), ..Header::unstamped(None) },
            version: "0".into(),
            manifests: Vec::new(),
            task_count: 1,
            jobs: 1,
            warnings: Vec::new(),
            config_files: None,
            merged_from: None,
        };
        run.emit(started);
        task.emit(message("x"));
        task.emit(Event::retry(RetryScope::Http, "429".into(), Duration::ZERO, 3));
        assert!(bus.finish().is_empty());
        let headers = lock(&seen);
        let ids: Vec<String> =
            headers.iter().map(|h| format!("{} {} {:?} {:?} {:?}", h.seq, h.run_id, h.task_id, h.attempt, h.shard)).collect();
        assert_eq!(ids, [r#"1 r None None Some("1/2")"#, r#"2 r Some("t") Some(2) None"#, r#"3 r Some("t") None None"#]);
    }

    #[test]
    fn a_slow_reporter_does_not_hold_the_emitter_and_finish_drains_in_order() {
        let (seen, received) = std::sync::mpsc::channel();
        let bus = bus(vec![Box::new(Record { seen, delay: Duration::from_millis(20) })]);
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
        let bus = bus(vec![Box::new(Times(times.clone()))]);
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
            if let Some(totals) = event.as_run_finished() {
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
        let bus = bus(reporters);
        let totals = RunTotals::of(&[], Duration::ZERO);
        assert_eq!(totals.exit_code, dracode_results::exit_codes::OK);
        bus.emit(Event::run_finished(&totals));
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
        let bus = bus(vec![Box::new(Record { seen, delay: Duration::from_millis(5) })]);
        bus.emit(message("fail").into());
        bus.emit(message("ok").into());
        assert!(bus.flush(Duration::from_secs(5)));
        assert_eq!(received.try_iter().collect::<Vec<_>>(), ["fail", "ok"]);
        assert_eq!(bus.finish(), ["disk full"]);
        assert!(bus.finish().is_empty());
    }
}
