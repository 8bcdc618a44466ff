//! `dracode regrade`: a prepared regrade ([`crate::batch::regrade::Regrade`]) run into its own
//! output folder with the same set-up, signals and exit code as a batch ([`super::Batch`]).

use super::{EngineError, RunFolder, RunSummary, signals};
use crate::batch::regrade::{Regrade, RegradeOptions};
use crate::events::{Emitter, EventBus, Reporter, RunTotals, Stamp};
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Grades `job`'s recorded patches again into `opts.out` (prepared first), feeding `reporters`
/// (the caller's displays) too. Interrupted, the tasks end and the results are written; the
/// exit code is then 130/143.
pub fn execute(
    job: Regrade,
    opts: &RegradeOptions,
    env: &BTreeMap<String, String>,
    reporters: Vec<Box<dyn Reporter>>,
) -> Result<RunSummary, EngineError> {
    let redactor = Arc::new(Redactor::from_env(env.clone(), Vec::new()));
    let run_id = super::run_id();
    let mut folder = RunFolder::open(&opts.out, &Default::default(), &redactor, env, None)?;
    folder.reporters.extend(reporters);
    let bus = EventBus::new(Stamp::new(&run_id, None), std::mem::take(&mut folder.reporters));
    crate::batch::owned_dir::sweep_killed_runs();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(EngineError::Runtime)?;
    let emitter = Emitter::run(bus.clone());
    let totals = runtime.block_on(async {
        tokio::select! {
            biased;
            code = signals::interrupted() => Err(code),
            totals = job.run(opts, env, &redactor, &emitter) => Ok(totals),
        }
    });
    drop(emitter);
    let mut ending = bus.finish_run();
    if ending.recorded.is_none() {
        // Interrupted: no `run.finished` reached the page's reporter; the page shows what was.
        if let Err(e) = crate::report::page::write(&opts.out, &[], None) {
            ending.failures.push(e.to_string());
        }
    }
    let (code, totals) = match totals {
        Ok(totals) => (totals.exit_code, totals),
        Err(code) => (code, RunTotals::of(&[], std::time::Duration::ZERO)),
    };
    let exit_code = match ending.recorded {
        // Interrupted before `run.finished`: the signal's code, whatever the files say.
        None => dracode_results::exit_codes::after_artifacts(code, ending.failures.len()),
        Some(_) => ending.exit_code(code),
    };
    Ok(RunSummary { exit_code, totals, failures: ending.failures, notes: Vec::new() })
}
