//! What the run's setups made, by the tasks they serve ([`Setups`]): set by `setup.rs` before
//! the first task starts, read by each task (its workspace, its commands' environment) and by
//! each check's world.

use super::spec::TaskSpec;
use super::workspace::Carried;
use crate::manifest::Isolation;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Which tasks share one run of a setup.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    manifest: PathBuf,
    repo: PathBuf,
    base: String,
    isolation: Isolation,
}

impl Key {
    pub(crate) fn of(spec: &TaskSpec) -> Option<Key> {
        spec.setup.as_ref()?;
        let ws = &spec.workspace;
        let repo = ws.repo.canonicalize().unwrap_or_else(|_| ws.repo.clone());
        Some(Key { manifest: spec.manifest.clone(), repo, base: ws.base.clone(), isolation: ws.isolation })
    }
}

/// What one setup made, for its tasks.
pub(crate) struct Done {
    /// What it made, to copy into each task's workspace.
    pub(crate) carried: Arc<Carried>,
    /// Variables the tasks get: `CARGO_HOME` when cargo downloaded into the setup's own.
    pub(crate) env: BTreeMap<String, String>,
    /// What the tasks may read besides their own: the setup's cargo home.
    pub(crate) readable: Vec<PathBuf>,
    /// The setup's workspace and TMPDIR, removed when the run ends.
    pub(crate) _kept: Mutex<Box<dyn std::any::Any + Send>>,
}

/// The run's setups, by the tasks they serve; set before the first task starts.
#[derive(Default)]
pub struct Setups {
    pub(crate) done: HashMap<Key, Done>,
}

impl Setups {
    /// What `spec`'s setup made, to be copied into its workspace.
    pub fn carried_for(&self, spec: &TaskSpec) -> Option<Arc<Carried>> {
        Some(self.done.get(&Key::of(spec)?)?.carried.clone())
    }

    /// Removes every setup's workspace and TMPDIR (once no task needs them any more: the run's
    /// end, before `run.finished`, so the `TOTAL` line counts the time).
    pub fn remove_kept(&self) {
        for done in self.done.values() {
            let mut kept = done._kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            drop(std::mem::replace(&mut *kept, Box::new(())));
        }
    }

    /// What `spec`'s commands get from its setup: variables, and folders they may read.
    pub fn command_env_for(&self, spec: &TaskSpec) -> Option<(&BTreeMap<String, String>, &[PathBuf])> {
        let done = self.done.get(&Key::of(spec)?)?;
        Some((&done.env, &done.readable))
    }
}
