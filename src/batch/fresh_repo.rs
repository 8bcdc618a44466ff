//! Fresh git repositories for task folders (a `copy` workspace's own `.git`, every task's change
//! record), made with as few file-system operations as git needs: at 1,000 tasks they add up.
//!
//! libgit2's init writes a dozen sample hooks and other template files, probes the file system
//! (a symlink and a file mode test file) and rewrites `config` once per key — each time a lock
//! file renamed over the previous `config`, which ext4 forces to disk. Here the first repository
//! of each kind (bare or not) is made by libgit2 without templates in the temp folder, where
//! task folders live; every later one gets that repository's `HEAD` and `config` written fresh,
//! plus the `objects/pack` and `refs` folders: the same repository, five entries instead of forty.

use git2::{Repository, RepositoryInitOptions};
use std::path::Path;
use std::sync::OnceLock;

/// What libgit2 wrote into a fresh repository of one kind.
#[derive(Debug)]
struct Template {
    head: Vec<u8>,
    config: Vec<u8>,
}

/// Templates made on first use: `[non-bare, bare]`; `None` when one could not be made or names
/// its own folder (then every repository of that kind is made by libgit2).
static TEMPLATES: [OnceLock<Option<Template>>; 2] = [OnceLock::new(), OnceLock::new()];

/// A new repository at `dir` (its git directory `dir/.git`, or `dir` itself when `bare`), for a
/// folder in the temp folder (the file system the template was probed on).
pub fn init(dir: &Path, bare: bool) -> Result<Repository, git2::Error> {
    let Some(template) = TEMPLATES[usize::from(bare)].get_or_init(|| make_template(bare)) else { return init_once(dir, bare) };
    let git_dir = if bare { dir.to_path_buf() } else { dir.join(".git") };
    let io = |e: std::io::Error| git2::Error::from_str(&format!("{}: {e}", git_dir.display()));
    // `objects/pack` must exist before the repository is opened: libgit2 only looks for packs
    // (those `snapshot::packed` writes) in a pack folder it saw at open.
    std::fs::create_dir_all(git_dir.join("objects/pack")).map_err(io)?;
    std::fs::create_dir_all(git_dir.join("refs/heads")).map_err(io)?;
    std::fs::create_dir(git_dir.join("refs/tags")).map_err(io)?;
    std::fs::write(git_dir.join("HEAD"), &template.head).map_err(io)?;
    std::fs::write(git_dir.join("config"), &template.config).map_err(io)?;
    if bare { Repository::open_bare(dir) } else { Repository::open(dir) }
}

/// A repository at `dir` made by libgit2's own init, without template files: for one made
/// once per run (a copy base, the records' store), where learning the template for [`init`]
/// would cost more than it saves.
pub fn init_once(dir: &Path, bare: bool) -> Result<Repository, git2::Error> {
    let mut opts = RepositoryInitOptions::new();
    opts.external_template(false).bare(bare);
    Repository::init_opts(dir, &opts)
}

/// A repository of the kind made by libgit2 in the temp folder, read and removed; `None` when
/// that fails or its config names its folder (a path that would be wrong anywhere else).
fn make_template(bare: bool) -> Option<Template> {
    let scratch = tempfile::Builder::new().prefix("dracode-git-template-").tempdir().ok()?;
    let repo = init_once(scratch.path(), bare).ok()?;
    let git_dir = repo.path().to_path_buf();
    drop(repo);
    let template = Template { head: std::fs::read(git_dir.join("HEAD")).ok()?, config: std::fs::read(git_dir.join("config")).ok()? };
    let folder = scratch.path().file_name()?.to_string_lossy().into_owned();
    let names_itself = String::from_utf8_lossy(&template.config).contains(&folder);
    (!names_itself).then_some(template)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::batch::test_git as git;

    /// Commits every file of `repo`'s working folder with libgit2.
    fn commit_all(repo: &Repository) {
        let mut index = repo.index().unwrap();
        index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None).unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@x").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "first", &tree, &[]).unwrap();
    }

    #[test]
    fn repositories_after_the_first_are_what_libgit2_makes_and_git_reads_them() {
        let temp = tempfile::tempdir().unwrap();
        let (first, second, by_libgit2) = (temp.path().join("a"), temp.path().join("b"), temp.path().join("c"));
        for dir in [&first, &second, &by_libgit2] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("f.txt"), "hello\n").unwrap();
        }
        init(&first, false).unwrap();
        let repo = init(&second, false).unwrap();
        init_once(&by_libgit2, false).unwrap();
        let read = |dir: &Path, file: &str| std::fs::read_to_string(dir.join(".git").join(file)).unwrap();
        assert_eq!(read(&second, "config"), read(&by_libgit2, "config"));
        assert_eq!(read(&second, "HEAD"), read(&by_libgit2, "HEAD"));
        assert_eq!(repo.workdir().unwrap().canonicalize().unwrap(), second.canonicalize().unwrap());
        commit_all(&repo);
        assert!(git(&second, &["status", "--porcelain"]).is_empty());
        assert_eq!(git(&second, &["log", "--format=%s"]), "first\n");
        git(&second, &["fsck", "--strict"]);
        // git's own commands work in it as in any repository.
        std::fs::write(second.join("g.txt"), "more\n").unwrap();
        git(&second, &["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qam", "second", "--allow-empty"]);
        git(&second, &["tag", "v1"]);
        git(&second, &["gc", "-q"]);
        assert_eq!(git(&second, &["log", "--format=%s"]), "second\nfirst\n");
    }

    #[test]
    fn a_bare_repository_gets_a_working_folder_and_records_trees() {
        let temp = tempfile::tempdir().unwrap();
        let work = temp.path().join("work");
        std::fs::create_dir(&work).unwrap();
        std::fs::write(work.join("f.txt"), "hello\n").unwrap();
        for name in ["r1.git", "r2.git"] {
            let repo = init(&temp.path().join(name), true).unwrap();
            assert!(repo.is_bare());
            repo.set_workdir(&work, false).unwrap();
            let mut index = git2::Index::new().unwrap();
            repo.set_index(&mut index).unwrap();
            index.add_all(["*"].iter(), git2::IndexAddOption::DEFAULT, None).unwrap();
            let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
            assert!(tree.get_name("f.txt").is_some());
        }
        git(&temp.path().join("r2.git"), &["fsck"]);
    }
}
