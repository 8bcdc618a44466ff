//! `dracode publish` (issue 41, the nightly's last mile): a run's output folder turned into pull
//! requests on a fake of GitHub's REST API that checks every request against GitHub's own
//! OpenAPI description (`tests/support/github_api.rs`), with a local bare repository as the
//! remote the branches are pushed to.

use crate::support::cli::{dracode, files_under, git, repo_with_origin};
use crate::support::github_api::{GithubApi, actions_not_permitted};
use serde_json::json;
use std::path::{Path, PathBuf};

const TOKEN: &str = "ghs_fake-installation-token";
const REPOSITORY: &str = "octo/widgets";

/// A project: `repo/` (a git repository whose `origin` is the bare `remote.git/`), a TMPDIR of
/// its own and the recordings its tasks replay.
struct Scene {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    repo: PathBuf,
    remote: PathBuf,
    tmpdir: PathBuf,
}

/// Three tasks, each with a check that fails before the agent: `fix-a` and `fix-b` pass,
/// `miss-c` writes the wrong thing and fails.
const TASKS: &str = "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\ncheck_before = true\n\
    [[tasks]]\nid = \"fix-a\"\nprompt = \"p\"\nreplay = \"fix-a.json\"\ncheck = \"grep -qx ONE a.txt || { echo 'error: a.txt is not ONE'; exit 1; }\"\n\
    [[tasks]]\nid = \"fix-b\"\nprompt = \"p\"\nreplay = \"fix-b.json\"\ncheck = \"grep -q B b.txt || { echo 'error: no B'; exit 1; }\"\n\
    [[tasks]]\nid = \"miss-c\"\nprompt = \"p\"\nreplay = \"miss-c.json\"\ncheck = \"grep -qx C c.txt || { echo 'error: c.txt is not C'; exit 1; }\"\n";

impl Scene {
    fn new() -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let (repo, remote, tmpdir) = repo_with_origin(&dir, &[("a.txt", "one\n"), ("b.txt", "b\n"), ("c.txt", "c\n")]);
        let scene = Scene { _tmp: tmp, dir, repo, remote, tmpdir };
        std::fs::write(scene.dir.join("tasks.toml"), TASKS).unwrap();
        scene.night("ONE\n", "B\n", "nope\n");
        scene
    }

    /// The recordings of one night: what each task writes.
    fn night(&self, a: &str, b: &str, c: &str) {
        for (name, file, content) in [("fix-a.json", "a.txt", a), ("fix-b.json", "b.txt", b), ("miss-c.json", "c.txt", c)] {
            let turns = json!([
                {"content": [{"type": "tool_use", "id": "c1", "name": "write_file", "input": {"file_path": file, "content": content}}], "stop_reason": "tool_use"},
                {"content": [{"type": "text", "text": format!("Wrote {file}.\n\nIt now says what the check wants. @someone look")}], "stop_reason": "end_turn"}
            ]);
            std::fs::write(self.dir.join(name), turns.to_string()).unwrap();
        }
    }

    /// `dracode run tasks.toml --out out`: exit 1 (one task fails).
    fn run(&self) {
        let out = dracode(&self.dir).env("TMPDIR", &self.tmpdir).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// `dracode publish out --repo repo ARGS` against `api`: (exit code, stdout, stderr).
    fn publish(&self, api: &GithubApi, args: &[&str]) -> (i32, String, String) {
        self.publish_to(&api.url(), args)
    }

    /// `dracode publish out --repo repo ARGS` against the API at `url`.
    fn publish_to(&self, url: &str, args: &[&str]) -> (i32, String, String) {
        let mut cmd = dracode(&self.dir);
        cmd.env("TMPDIR", &self.tmpdir).env("GITHUB_TOKEN", TOKEN).env("GITHUB_REPOSITORY", REPOSITORY).env("GITHUB_API_URL", url);
        let out = cmd.args(["publish", "out", "--repo", "repo"]).args(args).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
    }

    /// The remote's branches and their commits.
    fn branches(&self) -> String {
        git(&self.remote, &["for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads"])
    }

    /// Everything the user's repository holds: its refs and objects, and whether FETCH_HEAD is.
    fn repo_state(&self) -> (String, String, bool) {
        let refs = git(&self.repo, &["for-each-ref"]);
        let objects = git(&self.repo, &["cat-file", "--batch-all-objects", "--batch-check"]);
        (refs, objects, self.repo.join(".git/FETCH_HEAD").exists())
    }

    fn api(&self) -> impl std::future::Future<Output = GithubApi> + '_ {
        GithubApi::start(TOKEN, REPOSITORY, &self.remote)
    }
}

fn message_of(remote: &Path, rev: &str) -> String {
    git(remote, &["log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", rev])
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_opens_one_pull_request_per_passed_task_and_none_for_a_failed_one() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    let (code, stdout, stderr) = scene.publish(&api, &["--report-url", "https://ci.example/nightly/report.html"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(api.violations(), Vec::<String>::new());

    let pulls = api.pulls();
    let heads: Vec<(&str, &str, &str)> = pulls.iter().map(|p| (p.head.as_str(), p.base.as_str(), p.title.as_str())).collect();
    assert_eq!(heads, [("dracode/fix-a", "main", "dracode: fix-a"), ("dracode/fix-b", "main", "dracode: fix-b")]);
    assert!(stdout.contains("miss-c\tnot published: failed: "), "{stdout}");
    assert!(stdout.contains("error: c.txt is not C"), "the failed task's telling line: {stdout}");
    assert!(stdout.contains("fix-a\tbranch created at ") && stdout.contains("pull request #1 opened \"dracode: fix-a\""), "{stdout}");

    // Each branch: the task's patch on the run's base, committed by dracode with its trailers.
    assert_eq!(git(&scene.remote, &["show", "dracode/fix-a:a.txt"]), "ONE\n");
    assert_eq!(git(&scene.remote, &["show", "dracode/fix-b:b.txt"]), "B\n");
    assert_eq!(git(&scene.remote, &["rev-parse", "dracode/fix-a~1"]), git(&scene.remote, &["rev-parse", "main"]));
    let message = message_of(&scene.remote, "dracode/fix-a");
    assert!(message.starts_with("dracode-agent <dracode@localhost>|dracode <dracode@localhost>|dracode: fix-a\n"), "{message}");
    assert!(message.contains("\nDracode-Task: fix-a\nDracode-Run: "), "{message}");
    assert!(!scene.branches().contains("miss-c"), "no branch for a failed task");

    // The body: verdict, the check before and after with the line that said why, the agent's
    // words as text (no @mention), tokens and cost, the files, the link to the task's view.
    let body = &pulls[0].body;
    for want in [
        "task `fix-a` **passed** — its check went from exit 1 to exit 0",
        "| Before the agent | exit 1: `error: a.txt is not ONE` |",
        "| After | exit 0 |",
        "| Tokens | ",
        "| Cost | ",
        "~~~text\nWrote a.txt.\n\nIt now says what the check wants. @someone look\n~~~",
        "**Files changed** (1)\n\n- `a.txt`",
        "[fix\\-a in the run's report](https://ci.example/nightly/report.html#fix-a)",
        "Dracode-Task: …",
    ] {
        assert!(body.contains(want), "missing {want:?} in:\n{body}");
    }
    let requests = api.requests();
    assert!(requests.iter().all(|r| r.path.starts_with("/repos/octo/widgets/")), "{requests:?}");
    assert!(requests.iter().any(|r| r.method == "GET" && r.query.contains("head=octo%3Adracode%2Ffix%2Da")), "{requests:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_a_second_night_updates_the_pull_requests_and_never_duplicates_them() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    let (code, stdout, stderr) = scene.publish(&api, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let first = scene.branches();
    let tip = |name: &str, branches: &str| branches.lines().find(|l| l.starts_with(name)).unwrap().split(' ').nth(1).unwrap().to_string();

    // Night 2: fix-a makes the same change, fix-b another one.
    scene.night("ONE\n", "B\nmore\n", "nope\n");
    scene.run();
    let (code, stdout, stderr) = scene.publish(&api, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(api.violations(), Vec::<String>::new());
    let pulls = api.pulls();
    assert_eq!(pulls.len(), 2, "updated, not duplicated: {pulls:?}");
    let second = scene.branches();
    assert_eq!(tip("dracode/fix-a", &second), tip("dracode/fix-a", &first), "the same change leaves the branch where it is");
    assert_ne!(tip("dracode/fix-b", &second), tip("dracode/fix-b", &first), "dracode's own tip is moved");
    assert_eq!(git(&scene.remote, &["show", "dracode/fix-b:b.txt"]), "B\nmore\n");
    assert_eq!(git(&scene.remote, &["rev-list", "--count", "main..dracode/fix-b"]), "1\n", "force-updated: one commit on the base");
    assert!(stdout.contains("fix-a\tbranch up to date at") && stdout.contains("pull request #1 updated"), "{stdout}");
    assert!(stdout.contains("fix-b\tbranch moved ") && stdout.contains("pull request #2 updated"), "{stdout}");
    let run_id = |out: &str| {
        let lines = std::fs::read_to_string(scene.dir.join(out).join("results.jsonl")).unwrap();
        serde_json::from_str::<serde_json::Value>(lines.lines().next().unwrap()).unwrap()["run_id"].as_str().unwrap().to_string()
    };
    assert!(pulls[1].body.contains(&run_id("out")), "the body tells the latest run");
    let patches = api.requests().iter().filter(|r| r.method == "PATCH").count();
    let posts = api.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!((posts, patches), (2, 2), "two opened the first night, two updated the second");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_pull_request_is_not_opened_again_until_the_change_differs() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    assert_eq!(scene.publish(&api, &[]).0, 0);
    // A reviewer closes fix-a's pull request; the next night the agent makes the same change.
    api.close_pull(1);
    scene.run();
    let (code, stdout, stderr) = scene.publish(&api, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(api.pulls().len(), 2, "none opened again: {stdout}");
    assert!(stdout.contains("fix-a\tbranch up to date at ") && stdout.contains("skipped: pull request #1 was closed"), "{stdout}");
    // Another night, another change: it is proposed anew.
    scene.night("ONE\nand more\n", "B\n", "nope\n");
    scene.run();
    let (code, stdout, stderr) = scene.publish(&api, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let pulls = api.pulls();
    assert_eq!(pulls.len(), 3, "{stdout}");
    assert_eq!((pulls[2].head.as_str(), pulls[2].state.as_str()), ("dracode/fix-a", "open"));
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_leaves_a_branch_with_a_foreign_commit_alone_and_reports_it() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    assert_eq!(scene.publish(&api, &[]).0, 0);

    // A person pushes a commit of their own onto dracode/fix-a.
    let clone = scene.dir.join("person");
    git(&scene.dir, &["clone", "-q", "-b", "dracode/fix-a", scene.remote.to_str().unwrap(), clone.to_str().unwrap()]);
    std::fs::write(clone.join("a.txt"), "ONE, reviewed\n").unwrap();
    git(&clone, &["commit", "-qam", "Reviewed"]);
    git(&clone, &["push", "-q", "origin", "dracode/fix-a"]);
    let theirs = git(&scene.remote, &["rev-parse", "dracode/fix-a"]);

    scene.night("ONE\n", "B\nmore\n", "nope\n");
    scene.run();
    let (code, stdout, stderr) = scene.publish(&api, &[]);
    assert_eq!(code, 0, "a skipped branch is not a failure: {stdout}{stderr}");
    assert!(stdout.contains("fix-a\tskipped: branch has commits not made by dracode (its tip "), "{stdout}");
    assert!(stdout.contains(&format!("(its tip {} is ", &theirs[..12])), "names the commit: {stdout}");
    assert_eq!(git(&scene.remote, &["rev-parse", "dracode/fix-a"]), theirs, "never overwritten");
    let patched: Vec<String> = api.requests().iter().filter(|r| r.method == "PATCH").map(|r| r.path.clone()).collect();
    assert_eq!(patched, ["/repos/octo/widgets/pulls/2"], "fix-a's pull request is left alone too");
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_combined_opens_one_pull_request_with_the_union() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    let (code, _, stderr) = scene.publish(&api, &["--combined"]);
    assert_eq!(code, 2, "--combined needs dracode combine's report first");
    assert!(stderr.contains("combine.json") && stderr.contains("dracode combine"), "{stderr}");

    let out = dracode(&scene.dir).env("TMPDIR", &scene.tmpdir).args(["combine", "out", "--repo", "repo"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, stdout, stderr) = scene.publish(&api, &["--combined", "--branch", "dracode/nightly"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(api.violations(), Vec::<String>::new());
    let pulls = api.pulls();
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    assert_eq!((pulls[0].head.as_str(), pulls[0].base.as_str()), ("dracode/nightly", "main"));
    assert!(pulls[0].title.starts_with("dracode: 2 task(s) of run "), "{}", pulls[0].title);
    for want in ["| `fix-a` | exit 1 → exit 0 | `Wrote a.txt.` |", "| `fix-b` |", "- `a.txt`\n- `b.txt`"] {
        assert!(pulls[0].body.contains(want), "missing {want:?} in:\n{}", pulls[0].body);
    }
    assert_eq!(git(&scene.remote, &["show", "dracode/nightly:a.txt"]), "ONE\n");
    assert_eq!(git(&scene.remote, &["show", "dracode/nightly:b.txt"]), "B\n");
    let message = message_of(&scene.remote, "dracode/nightly");
    assert!(message.contains("Dracode-Task: fix-a\nDracode-Task: fix-b\nDracode-Run: "), "{message}");

    // Again: the same union leaves the branch and updates the pull request.
    let (code, stdout, _) = scene.publish(&api, &["--combined", "--branch", "dracode/nightly"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("combined\tbranch up to date at") && stdout.contains("pull request #1 updated"), "{stdout}");
    assert_eq!(api.pulls().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_explains_a_pull_request_that_github_actions_may_not_create() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    api.refuse_creation(403, actions_not_permitted());
    let (code, stdout, stderr) = scene.publish(&api, &[]);
    assert_eq!(code, 3, "a refused publication is exit 3: {stdout}{stderr}");
    for want in [
        "GitHub Actions is not permitted to create or approve pull requests",
        "\"Allow GitHub Actions to create and approve pull requests\"",
        "actions/create-github-app-token",
        "Contents: write and Pull requests: write",
        "on: pull_request",
    ] {
        assert!(stderr.contains(want), "missing {want:?}: {stderr}");
    }
    assert!(stderr.contains("error: 2 publication(s) failed (exit code 3)"), "{stderr}");
    assert!(api.pulls().is_empty());

    // With a token GitHub refuses outright: exit 3, naming the token.
    let mut cmd = dracode(&scene.dir);
    cmd.env("TMPDIR", &scene.tmpdir).env("GITHUB_TOKEN", "expired").env("GITHUB_REPOSITORY", REPOSITORY).env("GITHUB_API_URL", api.url());
    let out = cmd.args(["publish", "out", "--repo", "repo"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("GitHub refused the token (401 Bad credentials)"), "{stderr}");
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_dry_run_prints_the_plan_and_touches_nothing() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    let before = (scene.repo_state(), scene.branches());
    let listing = |dir: &Path| {
        let mut files: Vec<String> = walk(dir);
        files.sort();
        files
    };
    let out_before = listing(&scene.dir.join("out"));
    let (code, stdout, stderr) = scene.publish(&api, &["--dry-run"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stderr.contains("dry run: nothing is pushed or written"), "{stderr}");
    assert!(
        stdout.contains("fix-a\tbranch would be created at ") && stdout.contains("would open a pull request \"dracode: fix-a\""),
        "{stdout}"
    );
    assert!(stdout.contains("miss-c\tnot published: failed"), "{stdout}");
    assert_eq!((scene.repo_state(), scene.branches()), before, "nothing pushed, nothing written to the repository");
    assert_eq!(listing(&scene.dir.join("out")), out_before);
    assert!(api.requests().iter().all(|r| r.method == "GET"), "{:?}", api.requests());

    // After a real publish and a human's commit, the dry run tells update and skip apart.
    assert_eq!(scene.publish(&api, &[]).0, 0);
    let clone = scene.dir.join("person");
    git(&scene.dir, &["clone", "-q", "-b", "dracode/fix-b", scene.remote.to_str().unwrap(), clone.to_str().unwrap()]);
    git(&clone, &["commit", "-q", "--allow-empty", "-m", "mine"]);
    git(&clone, &["push", "-q", "origin", "dracode/fix-b"]);
    scene.night("ONE\nagain\n", "B\n", "nope\n");
    scene.run();
    let before = (scene.repo_state(), scene.branches(), api.requests().len());
    let (code, stdout, _) = scene.publish(&api, &["--dry-run"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("fix-a\tbranch would be moved ") && stdout.contains("would update pull request #1"), "{stdout}");
    assert!(stdout.contains("fix-b\tskipped: branch has commits not made by dracode"), "{stdout}");
    assert_eq!((scene.repo_state(), scene.branches()), (before.0, before.1));
    assert!(api.requests()[before.2..].iter().all(|r| r.method == "GET"));

    // Without a token a dry run still plans the branches.
    let out = dracode(&scene.dir)
        .env("TMPDIR", &scene.tmpdir)
        .env("GITHUB_REPOSITORY", REPOSITORY)
        .args(["publish", "out", "--repo", "repo", "--dry-run"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("(not looked up: no token)"), "{stdout}");
    assert_eq!(api.violations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_comments_on_an_existing_pull_request() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    let (code, stdout, stderr) = scene.publish(&api, &["--comment-on", "7", "--report-url", "https://ci.example/r/report.html"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(api.violations(), Vec::<String>::new());
    let comments = api.comments();
    assert_eq!(comments.len(), 1);
    let (number, body) = &comments[0];
    assert_eq!(*number, 7);
    assert!(body.contains("2 of 3 task(s) passed"), "{body}");
    assert!(body.contains("| [fix\\-a](https://ci.example/r/report.html#fix-a) | passed | exit 1 → exit 0 | `Wrote a.txt.` |"), "{body}");
    assert!(body.contains("| failed | exit 1 → exit 1 |") && body.contains("error: c.txt is not C"), "{body}");
    assert!(scene.branches().lines().count() == 1, "a comment pushes no branch");
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_names_bad_input_and_exits_2() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (&[], &[("GITHUB_TOKEN", "")], "$GITHUB_TOKEN is not set or empty"),
        (&["--token-env", "NIGHTLY_TOKEN"], &[], "$NIGHTLY_TOKEN is not set or empty"),
        (&["--repository", "not-a-repository"], &[], "repository \"not-a-repository\" is not OWNER/NAME"),
        (&["--remote", "upstream"], &[], "no remote named \"upstream\""),
        (&["--branch-prefix", "bad..prefix/"], &[], "--branch-prefix \"bad..prefix/task\": not a valid branch name"),
    ];
    for (args, env, want) in cases {
        let mut cmd = dracode(&scene.dir);
        cmd.env("TMPDIR", &scene.tmpdir).env("GITHUB_TOKEN", TOKEN).env("GITHUB_REPOSITORY", REPOSITORY).env("GITHUB_API_URL", api.url());
        cmd.envs(env.iter().copied());
        let out = cmd.args(["publish", "out", "--repo", "repo"]).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr}");
    }
    let (code, _, stderr) = {
        let out = dracode(&scene.dir)
            .env("GITHUB_TOKEN", TOKEN)
            .env("GITHUB_REPOSITORY", REPOSITORY)
            .args(["publish", "no-such-out"])
            .output()
            .unwrap();
        (out.status.code(), (), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no-such-out/results.jsonl"), "{stderr}");
    let out = dracode(&scene.dir).env("GITHUB_TOKEN", TOKEN).args(["publish", "out", "--repo", "repo"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --repository OWNER/NAME, or set GITHUB_REPOSITORY"));
    assert!(api.requests().is_empty(), "bad input sends nothing");
}

/// The fake itself refuses what GitHub's description refuses, so a request dracode got wrong
/// cannot pass unnoticed.
#[tokio::test(flavor = "multi_thread")]
async fn the_fake_github_refuses_what_the_spec_refuses() {
    let scene = Scene::new();
    let api = scene.api().await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let send = |method: reqwest::Method, path: &str, body: Option<serde_json::Value>, auth: &str, accept: &str| {
        let mut request = client.request(method, format!("{}{path}", api.url())).header("authorization", auth).header("user-agent", "test");
        request = request.header("accept", accept);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let bearer = format!("Bearer {TOKEN}");
    let json = "application/vnd.github+json";
    let pulls = "/repos/octo/widgets/pulls";
    assert_eq!(send(reqwest::Method::POST, pulls, Some(json!({"head": "x"})), &bearer, json).await, 422, "no base");
    assert_eq!(send(reqwest::Method::POST, pulls, Some(json!({"head": "x", "base": "main", "draft": "yes"})), &bearer, json).await, 422);
    assert_eq!(send(reqwest::Method::DELETE, pulls, None, &bearer, json).await, 422, "not an operation");
    assert_eq!(send(reqwest::Method::GET, &format!("{pulls}?state=merged"), None, &bearer, json).await, 422, "not in the enum");
    assert_eq!(send(reqwest::Method::GET, &format!("{pulls}?colour=red"), None, &bearer, json).await, 422, "no such parameter");
    assert_eq!(send(reqwest::Method::GET, pulls, None, &bearer, "application/json").await, 422, "the wrong Accept");
    assert_eq!(send(reqwest::Method::GET, pulls, None, "Bearer nope", json).await, 401);
    assert_eq!(api.violations().len(), 6, "{:?}", api.violations());
    assert_eq!(send(reqwest::Method::GET, &format!("{pulls}?state=all&head=octo%3Ax"), None, &format!("token {TOKEN}"), json).await, 200);
    assert_eq!(
        send(reqwest::Method::POST, pulls, Some(json!({"head": "no-such-branch", "base": "main", "title": "t"})), &bearer, json).await,
        422
    );
    assert_eq!(api.violations().len(), 6, "valid requests: {:?}", api.violations());
}

/// Every file under `dir`, relative.
fn walk(dir: &Path) -> Vec<String> {
    files_under(dir).iter().map(|path| path.strip_prefix(dir).unwrap().display().to_string()).collect()
}

/// GitHub unreachable: the pull requests cannot be looked up, so no branch is pushed (a branch
/// with no pull request would be left behind), and a dry run still says what it would do when the
/// remote is empty and so names no default branch.
#[tokio::test(flavor = "multi_thread")]
async fn publish_asks_github_again_after_a_bad_moment_but_never_sends_a_creation_twice() {
    let scene = Scene::new();
    scene.run();
    let api = scene.api().await;
    // The first two lookups meet a 502 and a 503: asked again, they are answered.
    api.fail_next("GET", &[502, 503]);
    let (code, stdout, stderr) = scene.publish(&api, &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(api.pulls().len(), 2, "{stdout}");
    let lookups = api.requests().iter().filter(|r| r.method == "GET" && r.path.ends_with("/pulls")).count();
    assert_eq!(lookups, 4, "fix-a's lookup thrice, fix-b's once");

    // A creation that meets a 502 may have been made: it is not sent again, and says so.
    let other = Scene::new();
    other.run();
    let api = other.api().await;
    api.fail_next("POST", &[502]);
    let (code, stdout, stderr) = other.publish(&api, &[]);
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(
        stdout.contains("fix-a	branch created at ") && stdout.contains("FAILED: cannot create a pull request: GitHub answered 502"),
        "{stdout}"
    );
    let creations = api.requests().iter().filter(|r| r.method == "POST" && r.path.ends_with("/pulls")).count();
    assert_eq!(creations, 2, "one per task, none repeated");
    assert_eq!(api.pulls().iter().map(|p| p.head.as_str()).collect::<Vec<_>>(), ["dracode/fix-b"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_pushes_nothing_when_github_cannot_be_asked() {
    let scene = Scene::new();
    scene.run();
    let before = scene.branches();
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let (code, stdout, stderr) = scene.publish_to(&url, &[]);
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(stdout.contains("fix-a\tFAILED: nothing pushed: "), "{stdout}");
    assert_eq!(scene.branches(), before, "no branch without its pull request");

    let empty = scene.dir.join("empty.git");
    std::fs::create_dir(&empty).unwrap();
    git(&empty, &["init", "-q", "--bare"]);
    let out = dracode(&scene.dir)
        .env("TMPDIR", &scene.tmpdir)
        .args(["publish", "out", "--repo", "repo", "--dry-run"])
        .args(["--repository", REPOSITORY, "--remote", empty.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("fix-a\tbranch would be created at "), "{stdout}");
}
