//! `--cache DIR`: a task whose inputs match a recorded pass is not run again; its patch and
//! results are reused (`task.finished.cached = true`, no usage, no cost; the pass's own figures
//! under `cached_from`).
//!
//! The key is a hash of every input a task's result depends on ([`key_inputs`]): dracode's
//! version, the tree of the base commit (not the commit: a rebase that changes nothing else
//! still hits), the prompt (a `prompt_file`'s contents), the whole system prompt, the provider
//! as resolved (and a `replay` recording's contents), the resolved settings, the setup — and
//! every task field that is set, but those [`crate::manifest::FIELD_CACHE_ROLES`] leaves out
//! with its reason (`id`, `tags`, `retries`, the paths of the machine, …). The fields are
//! declared once (`manifest/fields.rs`), each saying whether it is an input, so none can be
//! forgotten; a test sets each in turn and wants a new key. Cached are `worktree` tasks (their base
//! is exactly a commit's tree) and `copy` tasks whose folder has no uncommitted change (the key
//! holds the folder's tree at `HEAD`; ignored files, which a copy also takes, are not part of
//! it); never `none` tasks (a reused result would not change the folder they work in), nor
//! `commit = true` ones (their branch is a side effect a reused result would not make).
//! Only passes are recorded; a failed task is never cached.
//!
//! The folder fits `actions/cache`: plain files, one per key, `v1/<key[..2]>/<key>.json`, each
//! written to a temporary file beside it and renamed, so tasks running at once (`--jobs`) and
//! readers never see half an entry; two writers of one key write the same result.

use super::spec::TaskSpec;
use crate::events::{CacheHit, Status, TaskOutcome};
use crate::manifest::Isolation;
use dracode_results::records::WireOutcome;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The cache folder of a run.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
    /// Whether a recorded pass is reused (`--no-cache`: no, but new passes are still recorded).
    read: bool,
}

/// One cache file.
#[derive(Serialize, Deserialize)]
struct Entry {
    /// The run that recorded the pass.
    run_id: String,
    /// The task that passed.
    task_id: String,
    /// Its `task.finished` fields.
    outcome: WireOutcome,
    /// Its patch.
    patch: Option<String>,
}

impl Cache {
    /// The cache in `dir`; `read = false` records passes but reuses none.
    pub fn new(dir: &Path, read: bool) -> Cache {
        Cache { dir: dir.to_path_buf(), read }
    }

    /// The key of `spec`, or `None` when the task cannot be cached.
    pub fn key(spec: &TaskSpec) -> Option<String> {
        if spec.commit {
            return None;
        }
        let tree = match spec.workspace.isolation {
            Isolation::Worktree => {
                let repo = git2::Repository::open(&spec.workspace.repo).ok()?;
                repo.revparse_single(&spec.workspace.base).ok()?.peel_to_tree().ok()?.id()
            }
            Isolation::Copy => clean_folder_tree(&spec.workspace.repo)?,
            Isolation::None => return None,
        };
        let inputs = key_inputs(spec, &tree.to_string());
        git2::Oid::hash_object(git2::ObjectType::Blob, inputs.as_bytes()).ok().map(|id| id.to_string())
    }

    /// The commit `spec`'s workspace starts from (its `base`, or `HEAD` of a `copy` task's
    /// repository): what a reused result's `task.started.base_commit` names.
    pub fn base_commit(spec: &TaskSpec) -> Option<String> {
        let commit = match spec.workspace.isolation {
            Isolation::Worktree => {
                git2::Repository::open(&spec.workspace.repo).ok()?.revparse_single(&spec.workspace.base).ok()?.peel_to_commit().ok()?.id()
            }
            _ => git2::Repository::discover(&spec.workspace.repo).ok()?.head().ok()?.peel_to_commit().ok()?.id(),
        };
        Some(commit.to_string())
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join("v1").join(&key[..2]).join(format!("{key}.json"))
    }

    /// The recorded pass of `spec` under `key`, as this run's result of the task.
    pub fn lookup(&self, spec: &TaskSpec, key: &str) -> Option<TaskOutcome> {
        if !self.read {
            return None;
        }
        let text = std::fs::read_to_string(self.path(key)).ok()?;
        let entry: Entry = serde_json::from_str(&text).ok()?;
        if entry.outcome.status != Status::Passed {
            return None;
        }
        let original = entry.outcome;
        let hit = CacheHit {
            run_id: entry.run_id,
            key: key.to_string(),
            num_turns: original.num_turns,
            usage: original.usage,
            total_cost_usd: original.total_cost_usd,
            duration_ms: original.duration_ms,
        };
        let mut fresh = spec.outcome(Status::Passed);
        fresh.record = WireOutcome {
            files_changed: original.files_changed,
            check: original.check,
            result: original.result,
            structured_output: original.structured_output,
            protected: original.protected,
            kept_ignored: original.kept_ignored,
            total_cost_usd: Some(0.0),
            cached_from: Some(hit),
            ..fresh.record
        };
        fresh.attachments.diff = entry.patch;
        Some(fresh)
    }

    /// Records `outcome` under `key` when it passed (and was not itself reused).
    pub fn store(&self, key: &str, outcome: &TaskOutcome, run_id: &str) -> std::io::Result<()> {
        if outcome.record.status != Status::Passed || outcome.record.cached_from.is_some() {
            return Ok(());
        }
        let entry = Entry {
            run_id: run_id.to_string(),
            task_id: outcome.task_id.clone(),
            outcome: outcome.record.clone(),
            patch: outcome.attachments.diff.clone().filter(|d| !d.is_empty()),
        };
        let text = serde_json::to_string(&entry).map_err(std::io::Error::other)?;
        let gitignore = self.dir.join(".gitignore");
        if !gitignore.exists() {
            // Ignored by git wherever it lies, as the output folder: a cache in the checkout
            // is not an uncommitted change (which would keep `copy` tasks from being cached).
            crate::report::write_atomic(&gitignore, b"# Written by dracode: its cache of passed tasks.\n*\n")?;
        }
        crate::report::write_atomic(&self.path(key), text.as_bytes())
    }
}

/// The tree a `copy` workspace of `folder` starts from: its `HEAD` tree (at the folder's path
/// in the repository) when nothing in the folder is uncommitted; else `None` (not cached).
/// Ignored files, which a copy also takes, are left out of the key.
fn clean_folder_tree(folder: &Path) -> Option<git2::Oid> {
    let repo = git2::Repository::discover(folder).ok()?;
    let root = repo.workdir()?.canonicalize().ok()?;
    let prefix = folder.canonicalize().ok()?.strip_prefix(&root).ok()?.to_path_buf();
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true).include_ignored(false);
    if !prefix.as_os_str().is_empty() {
        opts.pathspec(&prefix);
    }
    if !repo.statuses(Some(&mut opts)).ok()?.is_empty() {
        return None;
    }
    let tree = repo.head().ok()?.peel_to_tree().ok()?;
    if prefix.as_os_str().is_empty() {
        return Some(tree.id());
    }
    tree.get_path(&prefix).ok().map(|entry| entry.id())
}

/// Every input of `spec` its result depends on, one `name: value` line each (what is hashed):
/// the task as resolved (what config, flags and defaults made of it) and its fields as set.
/// Paths of the machine (the repository's, the replay file's) are left out: the tree and the
/// recording's contents stand for them, so a cache restored on another runner still hits.
fn key_inputs(spec: &TaskSpec, tree: &str) -> String {
    let p = &spec.provider;
    let replay = p.replay_path.as_ref().map(|path| replay_digest(path));
    let check = spec.check.as_ref().map(|c| (&c.command, c.before, c.timeout, c.repairs));
    let output = spec.output.as_ref().map(|o| format!("{o:?}"));
    let mut lines: Vec<(&str, String)> = vec![
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("tree", tree.to_string()),
        ("workdir", spec.workspace.workdir.display().to_string()),
        ("prompt", spec.prompt.clone()),
        ("system_prompt", spec.system_prompt.clone()),
        ("provider", format!("{:?} {:?} {:?} {:?} {:?} {replay:?}", p.kind, p.wire(), p.model, p.reasoning, p.max_tokens)),
        ("tools", format!("{:?} {:?}", spec.tools, spec.policy)),
        ("check", format!("{check:?}")),
        ("protect", format!("{:?} {:?}", spec.protect, spec.keep_ignored)),
        ("require_change", format!("{:?}", spec.require_change)),
        ("limits", format!("{} {:?} {:?} {:?}", spec.max_iterations, spec.timeout, spec.idle_timeout, spec.budget)),
        ("context", format!("{:?} {:?} {}", spec.context_window, spec.max_context_tokens, spec.compact_at)),
        ("answers", format!("{:?}", spec.answers)),
        ("sandbox", format!("{:?} {:?} {:?} {}", spec.sandbox, spec.network, spec.limits, spec.isolate_home)),
        ("env", format!("{:?} {:?} {:?} {:?}", spec.env, spec.env_passthrough, spec.unix_sockets, spec.read_paths)),
        ("mcp_servers", format!("{:?}", spec.mcp_servers)),
        ("output", format!("{output:?}")),
        ("repeat", format!("{} {}", spec.repeat.count, spec.repeat.min_pass_rate)),
    ];
    // Every field the task's layers set that is an input (`manifest::FIELD_CACHE_ROLES`): a new
    // field reaches the key by its declaration alone.
    lines.push(("fields", spec.cache_fields.clone()));
    // What the setup makes is part of every workspace of its tasks: its inputs are the task's.
    if let Some(setup) = &spec.setup {
        lines.push(("setup", setup.cache_text()));
    }
    lines.into_iter().map(|(name, value)| format!("{name}: {value}\n")).collect()
}

/// The git hash of a replay recording (a file, or a folder's `<task>.json` files): the scripted
/// model's answers are its behaviour.
fn replay_digest(path: &Path) -> String {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(path) {
        Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
        Err(_) => vec![path.to_path_buf()],
    };
    files.sort();
    let mut bytes = Vec::new();
    for file in files {
        bytes.extend(std::fs::read(&file).unwrap_or_default());
    }
    git2::Oid::hash_object(git2::ObjectType::Blob, &bytes).map(|id| id.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// `dir/repo`: a repository with one commit holding `a.txt`.
    fn base_repo(dir: &Path) {
        std::fs::create_dir(dir.join("repo")).unwrap();
        git(&dir.join("repo"), &["init", "-q"]);
        std::fs::write(dir.join("repo/a.txt"), "one\n").unwrap();
        git(&dir.join("repo"), &["add", "-A"]);
        git(&dir.join("repo"), &["commit", "-qm", "base"]);
    }

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git").args(["-c", "user.name=t", "-c", "user.email=t@e"]).args(args).current_dir(dir).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// The keys of the tasks of `manifest` in `dir`, planned as `run` plans them.
    fn keys(dir: &Path, manifest: &str, model: Option<&str>) -> Vec<Option<String>> {
        std::fs::write(dir.join("tasks.toml"), manifest).unwrap();
        let args = crate::batch::options::RunOptions {
            manifests: vec![dir.join("tasks.toml")],
            model: model.map(str::to_string),
            out: dir.join("out"),
            ..Default::default()
        };
        let plan = super::super::plan::plan(&args, dir, &BTreeMap::new()).unwrap();
        plan.tasks.iter().map(Cache::key).collect()
    }

    use std::collections::BTreeMap;

    /// A manifest field's name and its value as TOML.
    type Setting = (&'static str, &'static str);

    /// A value other than the default of each field that is an input of the key, and a field it
    /// needs (set with and without it): the test below sets each in turn and wants a new key. A
    /// field added without one fails it.
    const SAMPLES: &[(&str, &str, Option<Setting>)] = &[
        ("prompt", "\"q\"", None),
        ("provider", "\"anthropic\"", None),
        ("agent", "\"codex\"", None),
        ("model", "\"m2\"", None),
        ("max_iterations", "3", None),
        ("timeout", "\"5m\"", None),
        ("idle_timeout", "\"1m\"", None),
        ("workdir", "\".\"", None),
        ("tools", "[\"read_file\"]", None),
        ("policy", "{ run_command = { deny = [\"curl *\"] } }", None),
        ("check", "\"exit 0\"", None),
        ("check_before", "true", None),
        ("check_timeout", "\"1m\"", None),
        ("check_repairs", "1", None),
        ("repeat", "2", None),
        ("isolate_home", "true", None),
        ("require_change", "true", None),
        ("protect", "[\"a.txt\"]", None),
        ("keep_ignored", "[\"node_modules/**\"]", None),
        ("answers", "{ \"*\" = \"yes\" }", None),
        ("system_prompt", "\"be brief\"", None),
        ("agents_md", "false", None),
        ("tell_check", "false", None),
        ("tell_protect", "false", Some(("protect", "[\"a.txt\"]"))),
        ("max_output_tokens", "100", None),
        ("reasoning", "\"high\"", None),
        ("max_tokens", "1000", None),
        ("max_cost_usd", "1.5", None),
        ("max_context_tokens", "5000", None),
        ("compact_at", "0.5", None),
        ("sandbox", "\"read-only\"", None),
        ("network", "true", None),
        ("limits", "{ processes = 64 }", None),
        ("env", "{ A = \"1\" }", None),
        ("env_passthrough", "[\"LANG_EXTRA\"]", None),
        ("unix_sockets", "[\"/tmp/x.sock\"]", None),
        ("read_paths", "[\"/usr\"]", None),
        ("output_schema", "{ type = \"object\" }", None),
        ("output_retries", "1", Some(("output_schema", "{ type = \"object\" }"))),
        ("output", "\"findings\"", None),
        ("mcp_servers", "{ s = { command = \"true\" } }", None),
    ];

    #[test]
    fn every_task_field_reaches_the_key_or_says_why_not() {
        use crate::manifest::{FIELD_CACHE_ROLES, FIELD_NAMES};
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        base_repo(dir);
        let manifest = |set: &[Option<(&str, &str)>]| {
            let mut fields: BTreeMap<&str, &str> = [
                ("id", "\"t\""),
                ("prompt", "\"p\""),
                ("provider", "\"openai\""),
                ("model", "\"gpt-5-mini\""),
                ("repo", "\"repo\""),
                ("check", "\"true\""),
            ]
            .into();
            fields.extend(set.iter().flatten().copied());
            let lines: String = fields.iter().map(|(name, value)| format!("{name} = {value}\n")).collect();
            format!("[[tasks]]\n{lines}")
        };
        assert!(keys(dir, &manifest(&[]), None)[0].is_some());
        assert_eq!(FIELD_CACHE_ROLES.iter().map(|(name, _)| *name).collect::<Vec<_>>(), FIELD_NAMES);
        for (name, why_not) in FIELD_CACHE_ROLES {
            if let Some(why) = why_not {
                assert!(!why.is_empty() && !SAMPLES.iter().any(|(n, ..)| n == name), "{name}");
                continue;
            }
            let (_, sample, with) = SAMPLES
                .iter()
                .find(|(n, ..)| n == name)
                .unwrap_or_else(|| panic!("`{name}` has no sample value here: add one, so this test sees the field reach the cache key"));
            let base = keys(dir, &manifest(&[*with]), None);
            let key = keys(dir, &manifest(&[*with, Some((name, sample))]), None);
            assert!(key[0].is_some() && key != base, "{name} = {sample} leaves the cache key as it was");
        }
    }

    #[test]
    fn the_key_follows_the_tree_the_prompt_and_the_model_not_the_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        base_repo(dir);
        let task = |prompt: &str, extra: &str| {
            format!("[[tasks]]\nid = \"t\"\nprompt = \"{prompt}\"\nprovider = \"openai\"\nmodel = \"m\"\nrepo = \"repo\"\n{extra}")
        };
        let base = keys(dir, &task("p", ""), None);
        assert!(base[0].is_some());
        assert_eq!(keys(dir, &task("p", ""), None), base, "the same inputs, the same key");
        assert_ne!(keys(dir, &task("q", ""), None), base, "the prompt");
        assert_ne!(keys(dir, &task("p", ""), Some("other")), base, "the model");
        assert_ne!(keys(dir, &task("p", "reasoning = \"high\"\n"), None), base, "the reasoning setting");
        assert_ne!(keys(dir, &task("p", "check = \"true\"\n"), None), base, "the check");
        assert_ne!(keys(dir, &task("p", "protect = [\"a.txt\"]\n"), None), base, "protected paths");
        assert_eq!(keys(dir, &task("p", "commit = true\n"), None), [None], "commit = true is not cached");
        assert_eq!(keys(dir, &task("p", "isolation = \"none\"\n"), None), [None], "nor isolation = none");
        git(&dir.join("repo"), &["commit", "-q", "--allow-empty", "-m", "nothing"]);
        assert_eq!(keys(dir, &task("p", ""), None), base, "a new commit of the same tree");
        std::fs::write(dir.join("repo/a.txt"), "two\n").unwrap();
        git(&dir.join("repo"), &["commit", "-qam", "change"]);
        assert_ne!(keys(dir, &task("p", ""), None), base, "a changed tree");
        // A copy of a committed folder is cached by its tree; an uncommitted change stops that.
        let copy = keys(dir, &task("p", "isolation = \"copy\"\n"), None);
        assert!(copy[0].is_some());
        std::fs::write(dir.join("repo/b.txt"), "new\n").unwrap();
        assert_eq!(keys(dir, &task("p", "isolation = \"copy\"\n"), None), [None]);
    }
}
