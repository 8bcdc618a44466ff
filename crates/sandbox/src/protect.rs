//! Protected paths (`protect = ["tests/**", ".github/**", "check.sh"]`): files the agent may not
//! change, so that the check grades its work with the user's own tests. The file tools refuse to
//! write them ([`super::Sandbox::check_changeable`]); whatever changed them anyway (a command)
//! is undone before the check by the task runner, from the task's base tree.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use std::path::{Path, PathBuf};

/// Why `protect` (or `keep_ignored`) globs did not compile: the first bad pattern, and why.
#[derive(Debug, thiserror::Error)]
pub enum ProtectError {
    /// Empty, absolute, or climbing out with `..`.
    #[error("{pattern:?}: must be a glob relative to the workspace root")]
    NotRelative {
        /// The pattern as written.
        pattern: String,
    },
    /// Not a valid glob.
    #[error("{pattern:?}: {source}")]
    Glob {
        /// The pattern as written.
        pattern: String,
        /// What `globset` found wrong.
        #[source]
        source: globset::Error,
    },
    /// The set of globs as a whole did not build.
    #[error(transparent)]
    Set(globset::Error),
}

/// The compiled `protect` globs of one task, relative to its workspace root.
#[derive(Debug, Clone)]
pub struct Protect {
    root: PathBuf,
    set: GlobSet,
}

impl Protect {
    /// Compiles `patterns` (globs relative to the workspace root `root`; `*` stays within one
    /// folder, `**` crosses folders, and a pattern naming a folder covers everything in it).
    /// Error: the first pattern that is not a valid glob, and why.
    pub fn compile(root: &Path, patterns: &[String]) -> Result<Protect, ProtectError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let trimmed = pattern.trim_start_matches("./").trim_end_matches('/');
            if trimmed.is_empty() || trimmed.starts_with('/') || trimmed.split('/').any(|c| c == "..") {
                return Err(ProtectError::NotRelative { pattern: pattern.clone() });
            }
            for glob in [trimmed.to_string(), format!("{trimmed}/**")] {
                let compiled = GlobBuilder::new(&glob)
                    .literal_separator(true)
                    .build()
                    .map_err(|source| ProtectError::Glob { pattern: pattern.clone(), source })?;
                builder.add(compiled);
            }
        }
        let set = builder.build().map_err(ProtectError::Set)?;
        Ok(Protect { root: root.to_path_buf(), set })
    }

    /// Whether the workspace-relative path `rel` (forward slashes) is protected.
    pub fn matches(&self, rel: &str) -> bool {
        self.set.is_match(rel)
    }

    /// Whether the absolute path `abs` (resolved, inside the workspace) is protected.
    pub fn covers(&self, abs: &Path) -> bool {
        abs.strip_prefix(&self.root).is_ok_and(|rel| !rel.as_os_str().is_empty() && self.set.is_match(rel))
    }

    /// Whether no pattern was given.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protect(patterns: &[&str]) -> Protect {
        Protect::compile(Path::new("/ws"), &patterns.iter().map(std::string::ToString::to_string).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn globs_cover_files_and_whole_folders() {
        let p = protect(&["tests/**", ".github", "check.sh", "src/*.test.js"]);
        for yes in ["tests/a.py", "tests/deep/b.py", ".github/workflows/ci.yml", "check.sh", "src/x.test.js"] {
            assert!(p.matches(yes), "{yes}");
        }
        for no in ["src/lib.rs", "tests", "sub/check.sh", "src/deep/x.test.js", "check.sh.bak"] {
            assert!(!p.matches(no), "{no}");
        }
        assert!(p.covers(Path::new("/ws/tests/a.py")));
        assert!(!p.covers(Path::new("/elsewhere/tests/a.py")));
    }

    #[test]
    fn absolute_parent_and_invalid_patterns_are_refused() {
        for bad in ["/etc/passwd", "../x", "a/../../b", "", "[z-a]"] {
            assert!(Protect::compile(Path::new("/ws"), &[bad.to_string()]).is_err(), "{bad}");
        }
    }
}
