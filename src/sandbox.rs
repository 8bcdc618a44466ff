//! Confines every path a tool touches to the task's workspace.
//!
//! TODO(helper): implement.

use std::path::{Path, PathBuf};

/// A workspace root and the rules for resolving paths inside it.
#[derive(Debug, Clone)]
pub struct Sandbox {
    root: PathBuf,
}

impl Sandbox {
    /// A sandbox rooted at `root` (canonicalised).
    pub fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Sandbox { root: root.canonicalize()? })
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
