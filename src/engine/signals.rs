//! SIGINT and SIGTERM (what GitHub Actions sends on cancel), handled in one place for every
//! command that runs something.

use crate::events::EventBus;
use dracode_results::exit_codes;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

/// Resolves with the exit code of the first SIGINT (130) or SIGTERM (143).
pub async fn interrupted() -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => exit_codes::INTERRUPTED,
        _ = term.recv() => exit_codes::TERMINATED,
    }
}

/// What the first signal does to a batch: `which` gets its number, `notice` is called (the
/// command line says what happens now) and `cancel` is sent, so every task ends and the results
/// are written. A second signal means "now": what was emitted so far reaches the record
/// (bounded, so a stuck disk cannot keep dracode alive) and the process exits 130/143.
pub async fn watch(cancel: tokio::sync::watch::Sender<bool>, which: Arc<AtomicI32>, bus: Arc<EventBus>, notice: fn()) {
    let code = interrupted().await;
    which.store(if code == exit_codes::INTERRUPTED { 2 } else { 15 }, Ordering::SeqCst);
    notice();
    let _ = cancel.send(true);
    let code = interrupted().await;
    tokio::task::block_in_place(|| bus.flush(std::time::Duration::from_secs(2)));
    std::process::exit(code)
}
