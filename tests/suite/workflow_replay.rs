//! The shipped workflows (examples/workflows/*.yml, the README's workflow snippets) replayed step
//! by step against a git checkout, each step doing what its action documents for files: the
//! checkout is the fixture, `actions/cache` restores what a job saved (dotfiles included),
//! `actions/upload-artifact` drops dotfiles unless `include-hidden-files: true`,
//! `actions/download-artifact` writes each matching artifact into `path/<name>` (the workspace
//! when `path` is not given), `${{ runner.temp }}` is a folder outside the checkout, the action
//! (`OWNER/dracode@…`) runs its own composite steps from action.yml (its install steps write into
//! the runner's tool cache, its run step is the real run.sh with the real dracode), and `run:`
//! steps run with bash as the runner would. `actions/create-github-app-token` hands out a token
//! of a fake GitHub (`tests/support/github_api.rs`, checked against GitHub's OpenAPI
//! description), which `GITHUB_API_URL` names, with a local bare repository as the checkout's
//! `origin`: a `dracode publish` step pushes there and opens its pull requests on the fake.
//! After every step `git status` must show nothing a pull request step would commit besides
//! what a step staged on purpose (`git apply --index`): no untracked and no unstaged change.

use super::github_action::{quickstart_copy, yaml};
use crate::support::cli::{crate_root, git};
use crate::support::github_api::{GithubApi, Issue};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One simulated runner machine: the fixture checkout, the stores of artifacts and caches, and
/// the folders outside the checkout.
struct Runner {
    root: PathBuf,
    fixture: PathBuf,
    manifest: String,
    artifacts: PathBuf,
    caches: PathBuf,
    steps_run: usize,
    /// The fake GitHub the workflow's `dracode publish` talks to, and the runtime it runs on.
    github: Option<GithubApi>,
    runtime: tokio::runtime::Runtime,
}

/// The token the replayed `actions/create-github-app-token` hands out.
const APP_TOKEN: &str = "ghs_replayed-app-token";

/// The repository the replayed workflows run in (`GITHUB_REPOSITORY`).
const REPOSITORY: &str = "octo/fixture";

/// The manifest that stands for a workflow's `examples/issues.toml`, beside the quickstart's.
const ISSUES_MANIFEST: &str = "issues.toml";

/// Its text: the quickstart's project and check, tasks from the issues labelled `dracode`.
const ISSUES_TOML: &str = "[defaults]\nprovider = \"replay\"\nreplay = \"quickstart/replay\"\nrepo = \"quickstart/project\"\n\
    isolation = \"copy\"\ncheck = \"sh test.sh\"\n\n[issues]\nlabel = \"dracode\"\n";

impl Drop for Runner {
    fn drop(&mut self) {
        // The fake's server ends inside its runtime.
        let _inside = self.runtime.enter();
        drop(self.github.take());
    }
}

/// The state of one job (or of one composite action inside it): expression values and whether
/// a step failed.
struct Scope {
    ctx: BTreeMap<String, String>,
    failed: bool,
    action_path: Option<PathBuf>,
}

/// A job's machine: its checkout, `runner.temp`, HOME, and the PATH entries steps added.
struct Job {
    name: String,
    workspace: PathBuf,
    temp: PathBuf,
    home: PathBuf,
    tool_cache: PathBuf,
    path: Vec<PathBuf>,
    saves: Vec<(String, Vec<String>)>,
}

fn copy_tree(from: &Path, to: &Path, hidden: bool) {
    let Ok(entries) = std::fs::read_dir(from) else { return };
    std::fs::create_dir_all(to).unwrap();
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !hidden && name.to_string_lossy().starts_with('.') {
            continue;
        }
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&entry.path(), &to.join(&name), hidden);
        } else {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

/// `*` matches any run of characters (download-artifact's `pattern`, as far as the workflows
/// use it).
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return pattern == name;
    }
    let Some(mut rest) = name.strip_prefix(first) else { return false };
    for part in &parts[1..parts.len() - 1] {
        let Some(at) = rest.find(part) else { return false };
        rest = &rest[at + part.len()..];
    }
    rest.ends_with(last)
}

/// `${{ … }}` replaced by the scope's values; secrets are empty, unknown names fail the test.
fn subst(text: &str, ctx: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").unwrap() + start;
        let name = rest[start + 3..end].trim();
        let value = match ctx.get(name) {
            Some(v) => v.clone(),
            None if name.starts_with("secrets.") || name.starts_with("vars.") || name.starts_with("steps.") => String::new(),
            None => panic!("the replay knows no value for ${{{{ {name} }}}} in {text:?}"),
        };
        out.push_str(&value);
        rest = &rest[end + 2..];
    }
    out + rest
}

/// A step's `if:` as the runner evaluates the forms the workflows use (`&&`, `||`, `==`, `!=`,
/// the status functions); without a status function the step runs only if none failed before.
fn condition(expr: Option<&str>, scope: &Scope) -> bool {
    let Some(expr) = expr else { return !scope.failed };
    let expr = expr.trim().trim_start_matches("${{").trim_end_matches("}}").trim();
    let status = ["always()", "cancelled()", "failure()", "success()"].iter().any(|f| expr.contains(f));
    let atom = |atom: &str| -> bool {
        match atom {
            "always()" | "!cancelled()" => true,
            "cancelled()" => false,
            "success()" => !scope.failed,
            "failure()" => scope.failed,
            _ => {
                let (lhs, equal, rhs) = match atom.split_once("!=") {
                    Some((l, r)) => (l, false, r),
                    None => atom.split_once("==").map(|(l, r)| (l, true, r)).unwrap_or_else(|| panic!("condition {atom:?}")),
                };
                let lhs = scope.ctx.get(lhs.trim()).cloned().unwrap_or_default();
                (lhs == rhs.trim().trim_matches('\'')) == equal
            }
        }
    };
    let value = expr.split("||").any(|alt| alt.split("&&").all(|a| atom(a.trim())));
    value && (status || !scope.failed)
}

fn with_values(step: &Value, ctx: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let with = step["with"].as_object().cloned().unwrap_or_default();
    with.iter()
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), subst(&text, ctx))
        })
        .collect()
}

impl Job {
    /// A path from a step, as the action resolves it: `~` is HOME, relative is in the workspace.
    fn resolve(&self, path: &str) -> PathBuf {
        let path = path.trim();
        match path.strip_prefix("~/") {
            Some(rest) => self.home.join(rest),
            None => self.workspace.join(path),
        }
    }

    /// Nothing a pull request step would commit: no untracked file, no unstaged change.
    fn assert_clean(&self, after: &str) {
        let status = git(&self.workspace, &["status", "--porcelain", "--untracked-files=all"]);
        let dirty: Vec<&str> = status.lines().filter(|l| l.starts_with("??") || l.as_bytes().get(1).is_some_and(|c| *c != b' ')).collect();
        assert!(
            dirty.is_empty(),
            "job {}: after step {after} the checkout holds what a pull request would commit:\n{}",
            self.name,
            dirty.join("\n")
        );
    }
}

impl Runner {
    fn new() -> (tempfile::TempDir, Runner) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let fixture = root.join("fixture");
        let manifest = quickstart_copy(&fixture, "sh test.sh");
        // What stands for a workflow's examples/issues.toml: the quickstart's project, its tasks
        // from the issues labelled `dracode`, issue #1's recording the greeting's fix.
        std::fs::write(fixture.join("ex").join(ISSUES_MANIFEST), ISSUES_TOML).unwrap();
        let replay = fixture.join("ex/quickstart/replay");
        std::fs::copy(replay.join("fix-greeting.json"), replay.join("issue-1.json")).unwrap();
        git(&fixture, &["init", "-q", "-b", "main"]);
        git(&fixture, &["add", "-A"]);
        git(&fixture, &["commit", "-qm", "base"]);
        // The repository on the fake GitHub: every job's checkout has it as `origin`.
        let remote = root.join("remote.git");
        std::fs::create_dir(&remote).unwrap();
        git(&remote, &["init", "-q", "--bare", "-b", "main"]);
        git(&fixture, &["remote", "add", "origin", remote.to_str().unwrap()]);
        git(&fixture, &["push", "-q", "origin", "main"]);
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let github = runtime.block_on(GithubApi::start(APP_TOKEN, REPOSITORY, &remote));
        github.set_permission("maintainer", "admin");
        github.add_issue(Issue {
            number: 1,
            title: "The greeting is misspelled".into(),
            body: "greet.sh says it wrong; `sh test.sh` fails.".into(),
            author: "a-user".into(),
            labels: vec!["dracode".into()],
            labelled_by: vec![("dracode".into(), "maintainer".into())],
            state: "open".into(),
        });
        let github = Some(github);
        let (artifacts, caches) = (root.join("artifacts"), root.join("caches"));
        let runner = Runner { artifacts, caches, root, fixture, manifest, steps_run: 0, github, runtime };
        (dir, runner)
    }

    /// Every job of `workflow` in `needs` order, each matrix value once.
    fn workflow(&mut self, file: &str, workflow: &Value) {
        let jobs = workflow["jobs"].as_object().unwrap();
        let mut done: Vec<String> = Vec::new();
        while done.len() < jobs.len() {
            let ready = jobs.iter().find(|(name, job)| {
                let needs: Vec<String> = match &job["needs"] {
                    Value::String(s) => vec![s.clone()],
                    Value::Array(a) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
                    _ => Vec::new(),
                };
                !done.contains(name) && needs.iter().all(|n| done.contains(n))
            });
            let (name, job) = ready.unwrap_or_else(|| panic!("{file}: a cycle in needs"));
            let matrix = job["strategy"]["matrix"].as_object().cloned().unwrap_or_default();
            let mut combos: Vec<BTreeMap<String, String>> = vec![BTreeMap::new()];
            for (key, values) in &matrix {
                let values: Vec<String> =
                    values.as_array().unwrap().iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect();
                combos = combos
                    .iter()
                    .flat_map(|c| values.iter().map(move |v| c.clone().into_iter().chain([(format!("matrix.{key}"), v.clone())]).collect()))
                    .collect();
            }
            for (i, combo) in combos.into_iter().enumerate() {
                self.job(&format!("{file}: {name} #{i}"), job, combo);
            }
            done.push(name.clone());
        }
    }

    fn job(&mut self, name: &str, job: &Value, matrix: BTreeMap<String, String>) {
        let machine = self.root.join(format!("machine-{}", self.steps_run));
        let job_state = Job {
            name: name.to_string(),
            workspace: machine.join("work/repo"),
            temp: machine.join("_temp"),
            home: machine.join("home"),
            tool_cache: machine.join("_tool"),
            path: Vec::new(),
            saves: Vec::new(),
        };
        std::fs::create_dir_all(machine.join("work")).unwrap();
        assert!(Command::new("cp").arg("-a").arg(&self.fixture).arg(&job_state.workspace).status().unwrap().success());
        for dir in [&job_state.temp, &job_state.home, &job_state.tool_cache] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let mut ctx = matrix;
        ctx.insert("runner.temp".into(), job_state.temp.display().to_string());
        ctx.insert("runner.os".into(), "Linux".into());
        ctx.insert("runner.arch".into(), "X64".into());
        ctx.insert("github.run_id".into(), "42".into());
        ctx.insert("github.token".into(), APP_TOKEN.into());
        ctx.insert("github.workspace".into(), job_state.workspace.display().to_string());
        let mut job_state = job_state;
        let mut scope = Scope { ctx, failed: false, action_path: None };
        job_state.assert_clean("actions/checkout");
        self.steps(job["steps"].as_array().unwrap(), &mut job_state, &mut scope);
        assert!(!scope.failed, "job {name}: a step failed (see above)");
        for (key, paths) in std::mem::take(&mut job_state.saves) {
            for (i, path) in paths.iter().enumerate() {
                copy_tree(&job_state.resolve(path), &self.caches.join(&key).join(i.to_string()), true);
            }
        }
    }

    fn steps(&mut self, steps: &[Value], job: &mut Job, scope: &mut Scope) {
        for step in steps {
            self.steps_run += 1;
            let label = step["name"].as_str().or(step["uses"].as_str()).or(step["id"].as_str()).unwrap_or("run").to_string();
            if !condition(step["if"].as_str(), scope) {
                continue;
            }
            let ok = match step["uses"].as_str() {
                Some(uses) => self.uses(uses, step, job, scope),
                None => self.run(step, job, scope),
            };
            scope.failed |= !ok;
            job.assert_clean(&label);
        }
    }

    /// A `uses:` step: what the action documents for files.
    fn uses(&mut self, uses: &str, step: &Value, job: &mut Job, scope: &mut Scope) -> bool {
        let with = with_values(step, &scope.ctx);
        let action = uses.split('@').next().unwrap();
        match action {
            "actions/checkout" | "mikepenz/action-junit-report" | "peter-evans/create-pull-request" => {}
            // An installation token of the fake GitHub, as the action's `token` output.
            "actions/create-github-app-token" => {
                if let Some(id) = step["id"].as_str() {
                    scope.ctx.insert(format!("steps.{id}.outputs.token"), APP_TOKEN.to_string());
                }
            }
            "actions/cache" => {
                let paths: Vec<String> = with["path"].lines().filter(|l| !l.trim().is_empty()).map(str::to_string).collect();
                let restore: Vec<String> =
                    with.get("restore-keys").map(|k| k.lines().map(|l| l.trim().to_string()).collect()).unwrap_or_default();
                let saved: Vec<String> = std::fs::read_dir(&self.caches)
                    .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
                    .unwrap_or_default();
                let hit = saved
                    .iter()
                    .find(|k| **k == with["key"])
                    .or_else(|| restore.iter().filter(|p| !p.is_empty()).find_map(|p| saved.iter().find(|k| k.starts_with(p.as_str()))));
                if let Some(hit) = hit {
                    for (i, path) in paths.iter().enumerate() {
                        copy_tree(&self.caches.join(hit).join(i.to_string()), &job.resolve(path), true);
                    }
                }
                job.saves.push((with["key"].clone(), paths));
            }
            "actions/upload-artifact" => {
                let hidden = with.get("include-hidden-files").is_some_and(|v| v == "true");
                let name = with.get("name").cloned().unwrap_or_else(|| "artifact".into());
                copy_tree(&job.resolve(&with["path"]), &self.artifacts.join(name), hidden);
            }
            "actions/download-artifact" => {
                let into = with.get("path").map_or_else(|| job.workspace.clone(), |p| job.resolve(p));
                let pattern = with.get("pattern").or(with.get("name")).cloned().unwrap_or_else(|| "*".into());
                let merge = with.get("merge-multiple").is_some_and(|v| v == "true") || with.contains_key("name");
                for entry in std::fs::read_dir(&self.artifacts).unwrap().flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if glob(&pattern, &name) {
                        copy_tree(&entry.path(), &if merge { into.clone() } else { into.join(&name) }, true);
                    }
                }
            }
            _ if action.ends_with("/dracode") || action == "." => return self.action(step, with, job, scope),
            _ => panic!("the replay does not know what {uses} writes: teach it"),
        }
        true
    }

    /// The action's composite steps, its inputs from `with` over their defaults; the fixture's
    /// manifest and its replay provider stand for the workflow's.
    fn action(&mut self, step: &Value, with: BTreeMap<String, String>, job: &mut Job, outer: &Scope) -> bool {
        let action = yaml(&crate_root().join("action.yml"));
        let mut ctx: BTreeMap<String, String> =
            outer.ctx.iter().filter(|(k, _)| !k.starts_with("steps.")).map(|(k, v)| (k.clone(), v.clone())).collect();
        for (name, input) in action["inputs"].as_object().unwrap() {
            ctx.insert(format!("inputs.{name}"), input["default"].as_str().unwrap_or_default().to_string());
        }
        for (name, value) in with {
            ctx.insert(format!("inputs.{name}"), value);
        }
        if !ctx["inputs.manifest"].is_empty() {
            let issues = if ctx["inputs.manifest"].contains("issues.toml") { format!(" ex/{ISSUES_MANIFEST}") } else { String::new() };
            ctx.insert("inputs.manifest".into(), format!("{}{issues}", self.manifest));
            ctx.insert("inputs.provider".into(), String::new());
        }
        ctx.insert("github.action_ref".into(), "v0.1.0".into());
        ctx.insert("github.action_repository".into(), "OWNER/dracode".into());
        let env = step["env"].as_object().cloned().unwrap_or_default();
        let mut scope = Scope { ctx, failed: outer.failed, action_path: Some(crate_root()) };
        for (k, v) in env {
            scope.ctx.insert(format!("env.{k}"), subst(v.as_str().unwrap_or_default(), &outer.ctx));
        }
        self.steps(action["runs"]["steps"].as_array().unwrap(), job, &mut scope);
        !scope.failed
    }

    /// A `run:` step with bash; the action's install script is stood in for by what it
    /// documents: the release's binary in the runner's tool cache, on PATH.
    fn run(&mut self, step: &Value, job: &mut Job, scope: &mut Scope) -> bool {
        let script = step["run"].as_str().unwrap();
        let env: BTreeMap<String, String> = step["env"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), subst(v.as_str().unwrap_or(&v.to_string()), &scope.ctx))).collect())
            .unwrap_or_default();
        let id = step["id"].as_str().unwrap_or_default();
        let mut outputs = BTreeMap::new();
        if script.contains("install.sh") {
            let dir = job.tool_cache.join("dracode/v0.1.0/x86_64-unknown-linux-gnu");
            if script.contains(" resolve") {
                outputs = BTreeMap::from([("method", "release"), ("version", "v0.1.0"), ("target", "x86_64-unknown-linux-gnu")])
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                outputs.insert("dir".into(), dir.display().to_string());
            } else {
                let dir = env.get("DIR").map_or(dir, PathBuf::from);
                std::fs::create_dir_all(dir.join("bin")).unwrap();
                let _ = std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_dracode"), dir.join("bin/dracode"));
                job.path.push(dir.join("bin"));
                outputs.insert("method".into(), "release".into());
            }
        } else {
            let (github_output, summary) = (job.temp.join(format!("output-{}", self.steps_run)), job.temp.join("step_summary"));
            std::fs::write(&github_output, "").unwrap();
            let mut path: Vec<String> = job.path.iter().map(|p| p.display().to_string()).collect();
            path.push(std::env::var("PATH").unwrap_or_default());
            let mut cmd = Command::new("bash");
            cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &subst(script, &scope.ctx)])
                .current_dir(&job.workspace)
                .env_clear();
            cmd.env("PATH", path.join(":")).env("HOME", &job.home).env("GITHUB_ACTIONS", "true").env("RUNNER_TEMP", &job.temp);
            cmd.env("RUNNER_TOOL_CACHE", &job.tool_cache).env("GITHUB_WORKSPACE", &job.workspace);
            cmd.env("GITHUB_OUTPUT", &github_output).env("GITHUB_STEP_SUMMARY", &summary);
            cmd.env("GITHUB_REPOSITORY", REPOSITORY).env("GITHUB_API_URL", self.github.as_ref().map(GithubApi::url).unwrap_or_default());
            cmd.envs(&env);
            for (k, v) in scope.ctx.iter().filter_map(|(k, v)| Some((k.strip_prefix("env.")?, v))) {
                cmd.env(k, v);
            }
            if let Some(action_path) = &scope.action_path {
                cmd.env("GITHUB_ACTION_PATH", action_path);
            }
            let out = cmd.output().unwrap();
            let ok = out.status.success();
            if !ok {
                eprintln!(
                    "job {}: step {:?} exited {:?}:\n{}{}",
                    job.name,
                    step["name"],
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            outputs = super::github_action::parse_outputs(&std::fs::read_to_string(&github_output).unwrap());
            if !id.is_empty() {
                for (k, v) in outputs {
                    scope.ctx.insert(format!("steps.{id}.outputs.{k}"), v);
                }
            }
            return ok;
        }
        for (k, v) in outputs {
            scope.ctx.insert(format!("steps.{id}.outputs.{k}"), v);
        }
        true
    }
}

impl Runner {
    /// A workflow that publishes (a `dracode publish` step, the action's `publish` input) opened
    /// its pull requests on the fake GitHub, every request one the spec allows; one that does not
    /// sent it nothing.
    fn published(&self, name: &str, workflow: &Value) {
        let github = self.github.as_ref().unwrap();
        assert_eq!(github.violations(), Vec::<String>::new(), "{name}: requests the GitHub spec refuses");
        let text = serde_json::to_string(workflow).unwrap();
        // A `dracode publish` step, or the action's `publish` input.
        if text.contains("dracode publish") || text.contains(r#""publish":"tasks""#) || text.contains(r#""publish":"combined""#) {
            let heads: Vec<String> = github.pulls().iter().map(|p| p.head.clone()).collect();
            assert!(!heads.is_empty() && heads.iter().all(|h| h.starts_with("dracode/")), "{name}: pull requests {heads:?}");
            if text.contains("issues.toml") {
                // The labelled issue was a task: its pull request closes it, and it got one comment.
                let pull = github.pulls().into_iter().find(|p| p.head == "dracode/issue-1");
                assert!(pull.is_some_and(|p| p.body.contains("Closes octo/fixture#1.")), "{name}: issue #1's pull request: {heads:?}");
                let comments: Vec<(u64, String)> = github.comments().into_iter().filter(|(n, _)| *n == 1).collect();
                assert_eq!(comments.len(), 1, "{name}: one comment on issue #1: {comments:?}");
                assert!(comments[0].1.contains("**passed**") && comments[0].1.contains("opened by this run"), "{name}: {comments:?}");
            }
        } else {
            assert!(github.requests().is_empty(), "{name} has no publish step but talked to GitHub");
        }
    }
}

/// The YAML blocks of the README and the book that are whole workflows (they have `jobs:`),
/// each named by its page.
fn documented_workflows() -> Vec<(String, Value)> {
    let mut workflows = Vec::new();
    for page in crate::support::docs::all_pages() {
        for block in crate::support::docs::code_blocks(&page.text, "yaml") {
            if let Ok(doc) = serde_saphyr::from_str::<Value>(&block)
                && doc["jobs"].is_object()
            {
                workflows.push((page.name(), doc));
            }
        }
    }
    workflows
}

#[test]
fn the_shipped_workflows_leave_the_checkout_clean_at_every_step() {
    let mut replayed = 0;
    let dir = crate_root().join("examples/workflows");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    for file in files.iter().filter(|f| f.extension().is_some_and(|e| e == "yml" || e == "yaml")) {
        let (_dir, mut runner) = Runner::new();
        let workflow = yaml(file);
        runner.workflow(&file.display().to_string(), &workflow);
        runner.published(&file.display().to_string(), &workflow);
        replayed += 1;
    }
    for (i, (page, workflow)) in documented_workflows().iter().enumerate() {
        let (_dir, mut runner) = Runner::new();
        let name = format!("{page} workflow #{i}");
        runner.workflow(&name, workflow);
        runner.published(&name, workflow);
        replayed += 1;
    }
    assert!(replayed >= 3, "the nightly workflow and the documentation's were replayed");
}
