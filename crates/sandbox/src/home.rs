//! A `HOME` for confined commands that keeps the user's tools: a folder of the command's own
//! holding links to what the sandbox lets it read of the user's home (toolchain folders such as
//! `~/.rustup` or `~/.pyenv`, `read_paths` under it) and git's global configuration as the
//! reduced copy ([`super::git_config_env`]).
//!
//! Why not the user's home itself: git reads `$HOME/.gitconfig` whenever `GIT_CONFIG_GLOBAL` is
//! not set, and stops ("unknown error occurred while reading the configuration files") when that
//! file exists and the sandbox refuses it. Tools that clear git's variables before they run git
//! — setuptools-scm and hatch-vcs drop every `GIT_*` but a few, as pre-commit does — lose the
//! `GIT_CONFIG_GLOBAL` that points at the copy, so `pip install -e .` of such a project failed
//! with "setuptools-scm was unable to detect version". In this home git finds the copy under its
//! usual name; nothing readable changes: the links lead to the user's folders, which the sandbox
//! still confines by their real paths (their credentials stay hidden, nothing there is writable).

use std::path::{Path, PathBuf};

/// The name of the folder made in the task's TMPDIR.
const FOLDER: &str = "home";

/// Makes `dir/home`: a link for each path of `readable` that lies in the user's `home` (at the
/// same place under it, a link inside a linked folder left out) and, unless one of them is
/// `~/.gitconfig`, `.gitconfig` linking to `git_config` (the reduced copy). Returns its path.
pub fn home_view(dir: &Path, home: &Path, readable: &[PathBuf], git_config: Option<&Path>) -> std::io::Result<PathBuf> {
    let view = dir.join(FOLDER);
    std::fs::create_dir(&view)?;
    let homes: Vec<PathBuf> = std::iter::once(home.to_path_buf()).chain(home.canonicalize().ok()).collect();
    let mut inside: Vec<(PathBuf, &PathBuf)> = readable
        .iter()
        .filter_map(|path| homes.iter().find_map(|h| path.strip_prefix(h).ok()).map(|rel| (rel.to_path_buf(), path)))
        .filter(|(rel, path)| !rel.as_os_str().is_empty() && std::fs::symlink_metadata(path).is_ok())
        .collect();
    // Shortest first, so a folder is linked before anything inside it is considered.
    inside.sort_by_key(|(rel, _)| rel.components().count());
    let mut linked: Vec<PathBuf> = Vec::new();
    for (rel, target) in inside {
        if linked.iter().any(|done| rel.starts_with(done)) {
            continue;
        }
        let at = view.join(&rel);
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(target, &at)?;
        linked.push(rel);
    }
    if let Some(copy) = git_config.filter(|_| !linked.iter().any(|rel| rel == Path::new(".gitconfig"))) {
        std::os::unix::fs::symlink(copy, view.join(".gitconfig"))?;
    }
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_links_what_is_readable_in_home_and_the_reduced_git_config() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("user");
        for dir in [".rustup/toolchains", ".local/lib", ".ssh", "notes"] {
            std::fs::create_dir_all(home.join(dir)).unwrap();
        }
        std::fs::write(home.join(".gitconfig"), "[http]\n\textraheader = token\n").unwrap();
        std::fs::write(home.join(".npmrc"), "registry=x\n").unwrap();
        let copy = tmp.path().join("gitconfig");
        std::fs::write(&copy, "[user]\n\tname = U\n").unwrap();
        let task = tmp.path().join("task");
        std::fs::create_dir(&task).unwrap();
        let readable =
            [home.join(".rustup"), home.join(".rustup/toolchains"), home.join(".local/lib"), home.join(".npmrc"), home.join(".absent")];
        let readable: Vec<PathBuf> = readable.into_iter().chain([PathBuf::from("/usr")]).collect();
        let view = home_view(&task, &home, &readable, Some(&copy)).unwrap();
        assert_eq!(view, task.join("home"));
        assert_eq!(std::fs::read_link(view.join(".rustup")).unwrap(), home.join(".rustup"));
        assert_eq!(std::fs::read_link(view.join(".local/lib")).unwrap(), home.join(".local/lib"));
        assert_eq!(std::fs::read_link(view.join(".npmrc")).unwrap(), home.join(".npmrc"));
        assert_eq!(std::fs::read_to_string(view.join(".gitconfig")).unwrap(), "[user]\n\tname = U\n", "the copy, not the user's");
        let mut names: Vec<String> =
            std::fs::read_dir(&view).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        assert_eq!(names, [".gitconfig", ".local", ".npmrc", ".rustup"], "nothing unreadable, nothing missing");
    }

    #[test]
    fn a_granted_gitconfig_is_the_users_own() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("user");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join(".gitconfig"), "[user]\n\tname = Mine\n").unwrap();
        let copy = tmp.path().join("gitconfig");
        std::fs::write(&copy, "").unwrap();
        let view = home_view(tmp.path(), &home, &[home.join(".gitconfig")], Some(&copy)).unwrap();
        assert_eq!(std::fs::read_link(view.join(".gitconfig")).unwrap(), home.join(".gitconfig"));
    }
}
