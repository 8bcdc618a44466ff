//! The GitHub Action's scripts (`.github/action/`), run here with bash as the runner would:
//! fake `GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY`, `GITHUB_PATH` and `GITHUB_ACTIONS=true`, the real
//! dracode binary, and a release folder served over `file://` for the install step.

use crate::support::cli::crate_root;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script(name: &str) -> PathBuf {
    crate_root().join(".github/action").join(name)
}

/// `bash script args…` with a clean environment plus `env`, in `cwd`.
fn bash(cwd: &Path, name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(script(name)).args(args).current_dir(cwd).env_clear();
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default()).env("HOME", cwd);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn split(text: &str) -> (Option<i32>, Vec<String>) {
    let out = bash(Path::new("."), "args.sh", &[text], &[]);
    let words = String::from_utf8(out.stdout).unwrap();
    let words = words.strip_suffix('\0').map(|w| w.split('\0').map(str::to_string).collect()).unwrap_or_default();
    (out.status.code(), words)
}

#[test]
fn args_are_split_like_a_shell_and_nothing_is_expanded() {
    let cases: &[(&str, &[&str])] = &[
        (r#"--filter "tag:docs" --jobs 2"#, &["--filter", "tag:docs", "--jobs", "2"]),
        (r#"--filter 'a b' x\ y "q\"z" '' "#, &["--filter", "a b", "x y", "q\"z", ""]),
        (
            "--jobs 4\n# a comment line\n--timeout 10m  # and a trailing one\n--filter \"tag:x y\"",
            &["--jobs", "4", "--timeout", "10m", "--filter", "tag:x y"],
        ),
        ("$HOME $(touch pwned) `id` * ~", &["$HOME", "$(touch", "pwned)", "`id`", "*", "~"]),
        ("--task \"line one\nline two\"", &["--task", "line one\nline two"]),
        ("a#b 'c d'#e", &["a#b", "c d#e"]),
        ("", &[]),
    ];
    for (text, want) in cases {
        let (code, words) = split(text);
        assert_eq!(code, Some(0), "{text:?}");
        assert_eq!(words, *want, "{text:?}");
    }
    assert!(!Path::new("pwned").exists());
    let (code, words) = split(r#"--filter "tag:docs"#);
    assert_eq!(code, Some(2), "an unmatched quote is an error");
    assert!(words.is_empty(), "and nothing is printed before it: {words:?}");
}

/// What one run of the action's run step left: its exit code, stderr, the outputs it wrote and
/// the step summary.
struct Step {
    code: Option<i32>,
    stderr: String,
    outputs: BTreeMap<String, String>,
    summary: String,
}

fn run_step(dir: &Path, inputs: &[(&str, &str)]) -> Step {
    let github_output = dir.join("github_output");
    let step_summary = dir.join("step_summary");
    for f in [&github_output, &step_summary] {
        std::fs::write(f, "").unwrap();
    }
    let (go, ss, tmp) = (github_output.to_str().unwrap(), step_summary.to_str().unwrap(), dir.to_str().unwrap());
    let mut env = vec![
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_OUTPUT", go),
        ("GITHUB_STEP_SUMMARY", ss),
        ("GITHUB_WORKSPACE", tmp),
        ("RUNNER_TEMP", tmp),
        ("DRACODE_BIN", env!("CARGO_BIN_EXE_dracode")),
    ];
    env.extend_from_slice(inputs);
    let out = bash(dir, "run.sh", &[], &env);
    Step {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout),
        outputs: parse_outputs(&std::fs::read_to_string(&github_output).unwrap()),
        summary: std::fs::read_to_string(&step_summary).unwrap(),
    }
}

/// `$GITHUB_OUTPUT` as the runner reads it: `name=value` and `name<<DELIMITER` blocks.
pub(super) fn parse_outputs(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((name, delimiter)) = line.split_once("<<") {
            let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delimiter).collect();
            map.insert(name.to_string(), value.join("\n"));
        } else if let Some((name, value)) = line.split_once('=') {
            assert!(!map.contains_key(name), "output {name} written twice:\n{text}");
            map.insert(name.to_string(), value.to_string());
        }
    }
    map
}

pub(super) fn quickstart_copy(dir: &Path, check: &str) -> String {
    let ex = dir.join("ex");
    std::fs::create_dir_all(&ex).unwrap();
    assert!(Command::new("cp").arg("-R").arg(crate_root().join("examples/quickstart")).arg(&ex).status().unwrap().success());
    let manifest = std::fs::read_to_string(crate_root().join("examples/quickstart.toml")).unwrap();
    std::fs::write(ex.join("quick start.toml"), manifest.replace("check = \"sh test.sh\"", &format!("check = \"{check}\""))).unwrap();
    // A path with a blank, quoted as a shell would.
    "'ex/quick start.toml'".to_string()
}

#[test]
fn a_passing_batch_with_a_quoted_filter_in_args_writes_every_output() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = quickstart_copy(tmp.path(), "sh test.sh");
    let step = run_step(tmp.path(), &[("INPUT_MANIFEST", &manifest), ("INPUT_ARGS", "--jobs 2\n--filter \"tag:docs\"")]);
    assert_eq!(step.code, Some(0), "{}", step.stderr);
    let o = &step.outputs;
    assert_eq!((o["exit-code"].as_str(), o["total"].as_str(), o["passed"].as_str(), o["failed"].as_str()), ("0", "1", "1", "0"), "{o:?}");
    assert_eq!(o["artifact-name"], "dracode-out");
    assert!(o["input-tokens"].parse::<u64>().unwrap() > 0 && o["output-tokens"].parse::<u64>().unwrap() > 0, "{o:?}");
    assert!(Path::new(&o["results"]).is_file() && Path::new(&o["junit"]).is_file() && Path::new(&o["summary"]).is_file(), "{o:?}");
    assert!(o["out"].ends_with("dracode-out"), "{o:?}");
    assert!(step.summary.contains("1 of 1 task passed"), "the step summary:\n{}", step.summary);
    assert!(!step.stderr.contains("::error"), "{}", step.stderr);

    // Filters one per line, blanks around them trimmed.
    let step = run_step(tmp.path(), &[("INPUT_MANIFEST", &manifest), ("INPUT_FILTER", "tag:docs\n   fix-*  \n\n")]);
    assert_eq!((step.code, step.outputs["total"].as_str()), (Some(0), "2"), "{}", step.stderr);
}

#[test]
fn a_failing_batch_is_annotated_and_fail_on_decides_the_step() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = quickstart_copy(tmp.path(), "false");
    let step = run_step(tmp.path(), &[("INPUT_MANIFEST", &manifest), ("INPUT_SHARD", "1/1")]);
    assert_eq!(step.code, Some(1), "fail-on any: {}", step.stderr);
    let o = &step.outputs;
    assert_eq!((o["exit-code"].as_str(), o["total"].as_str(), o["passed"].as_str(), o["failed"].as_str()), ("1", "2", "1", "1"), "{o:?}");
    assert_eq!(o["artifact-name"], "dracode-out-shard-1-of-1");
    assert!(
        step.stderr.contains("::error file=ex/quick start.toml,line=17,title=dracode fix-greeting%3A failed::check `false` exited with 1"),
        "{}",
        step.stderr
    );

    let step = run_step(tmp.path(), &[("INPUT_MANIFEST", &manifest), ("INPUT_FAIL_ON", "error")]);
    assert_eq!((step.code, step.outputs["exit-code"].as_str()), (Some(0), "1"), "fail-on error: a failed task leaves the step green");

    let none = [("INPUT_MANIFEST", manifest.as_str()), ("INPUT_ARGS", "--filter 'tag:nothing'")];
    let step = run_step(tmp.path(), &[none[0], none[1], ("INPUT_FAIL_ON", "error")]);
    assert_eq!((step.code, step.outputs["exit-code"].as_str()), (Some(4), "4"), "no task selected is an error: {}", step.stderr);
    let step = run_step(tmp.path(), &[none[0], none[1], ("INPUT_FAIL_ON", "never")]);
    assert_eq!((step.code, step.outputs["exit-code"].as_str()), (Some(0), "4"), "{}", step.stderr);

    // A run that could not be judged (no key for the provider: exit 5) fails the step under
    // `error`, unlike a failed task.
    let step = run_step(tmp.path(), &[("INPUT_MANIFEST", &manifest), ("INPUT_PROVIDER", "openai"), ("INPUT_FAIL_ON", "error")]);
    assert_eq!((step.code, step.outputs["exit-code"].as_str()), (Some(5), "5"), "a missing key fails the step: {}", step.stderr);
    assert!(step.stderr.contains("OPENAI_API_KEY"), "{}", step.stderr);

    let step = run_step(tmp.path(), &[("INPUT_MANIFEST", &manifest), ("INPUT_ARGS", "--filter \"tag:docs")]);
    assert_eq!(step.code, Some(2), "an unmatched quote stops the step before dracode runs");
    assert!(step.stderr.contains("::error title=dracode action::cannot parse args"), "{}", step.stderr);
    assert!(step.outputs.is_empty());
}

/// A release folder as GitHub serves it (`download/<tag>/<asset>`), holding a stand-in binary.
fn fake_release(dir: &Path, tag: &str, target: &str) -> PathBuf {
    let root = dir.join("releases");
    let assets = root.join("download").join(tag);
    let staging = dir.join("staging");
    std::fs::create_dir_all(&assets).unwrap();
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::write(staging.join("dracode"), format!("#!/bin/sh\necho 'dracode {tag} (fake, target {target})'\n")).unwrap();
    assert!(Command::new("chmod").args(["+x"]).arg(staging.join("dracode")).status().unwrap().success());
    let tarball = assets.join(format!("dracode-{target}.tar.gz"));
    assert!(Command::new("tar").arg("-czf").arg(&tarball).arg("-C").arg(&staging).arg("dracode").status().unwrap().success());
    let sum = Command::new("sh").arg("-c").arg("sha256sum \"$0\" 2>/dev/null || shasum -a 256 \"$0\"").arg(&tarball).output().unwrap();
    let hash = String::from_utf8_lossy(&sum.stdout).split_whitespace().next().unwrap().to_string();
    std::fs::write(assets.join(format!("dracode-{target}.tar.gz.sha256")), format!("{hash}  dracode-{target}.tar.gz\n")).unwrap();
    root
}

fn install(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, BTreeMap<String, String>) {
    let github_output = dir.join("install_output");
    std::fs::write(&github_output, "").unwrap();
    let mut all = vec![("GITHUB_OUTPUT", github_output.to_str().unwrap()), ("RUNNER_OS", "Linux"), ("RUNNER_ARCH", "X64")];
    all.extend_from_slice(env);
    let out = bash(dir, "install.sh", args, &all);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text, parse_outputs(&std::fs::read_to_string(&github_output).unwrap()))
}

#[test]
fn install_downloads_the_release_for_the_runner_verifies_it_and_falls_back_to_cargo() {
    let tmp = tempfile::tempdir().unwrap();
    let target = "x86_64-unknown-linux-musl";
    let releases = fake_release(tmp.path(), "v9.9.9", target);
    let url = format!("file://{}", releases.display());
    let tool_cache = tmp.path().join("tool cache");
    let tc = tool_cache.to_str().unwrap();

    let (code, text, o) = install(
        tmp.path(),
        &["resolve"],
        &[("INPUT_VERSION", "v9.9.9"), ("RUNNER_TOOL_CACHE", tc), ("DRACODE_ACTION_REPOSITORY", "acme/dracode")],
    );
    assert_eq!(code, Some(0), "{text}");
    assert_eq!((o["version"].as_str(), o["target"].as_str(), o["method"].as_str()), ("v9.9.9", target, "release"), "{o:?}");
    let dir = o["dir"].clone();
    assert_eq!(dir, format!("{tc}/dracode/v9.9.9/{target}"));
    for (os, arch, want) in [
        ("Linux", "ARM64", "aarch64-unknown-linux-musl"),
        ("macOS", "ARM64", "aarch64-apple-darwin"),
        ("macOS", "X64", "x86_64-apple-darwin"),
    ] {
        let (_, _, o) = install(tmp.path(), &["resolve"], &[("INPUT_VERSION", "v1.0.0"), ("RUNNER_OS", os), ("RUNNER_ARCH", arch)]);
        assert_eq!(o["target"], want);
    }
    // Used at a branch (or as `./`) and no version asked: built from the action's source.
    let (_, _, o) = install(tmp.path(), &["resolve"], &[("GITHUB_ACTION_REF", "main")]);
    assert_eq!((o["version"].as_str(), o["method"].as_str()), ("source", "cargo"));
    let (_, _, o) = install(tmp.path(), &["resolve"], &[("DRACODE_ACTION_REF", "v2.1.0")]);
    assert_eq!((o["version"].as_str(), o["method"].as_str()), ("v2.1.0", "release"), "the action's own tag");
    // GitHub left the ref empty (composite actions): the checkout path names it.
    let (_, _, o) =
        install(tmp.path(), &["resolve"], &[("DRACODE_ACTION_REF", ""), ("GITHUB_ACTION_PATH", "/runner/_actions/acme/dracode/v3.0.1")]);
    assert_eq!(o["version"], "v3.0.1");

    let github_path = tmp.path().join("github_path");
    let gp = github_path.to_str().unwrap();
    let started = std::time::Instant::now();
    let (code, text, o) = install(tmp.path(), &["fetch", "v9.9.9", target, &dir], &[("DRACODE_RELEASE_URL", &url), ("GITHUB_PATH", gp)]);
    eprintln!("install from a file:// release took {:?}", started.elapsed());
    assert_eq!(code, Some(0), "{text}");
    assert!(!o.contains_key("method"), "no fallback: {o:?}");
    assert!(text.contains("dracode v9.9.9 (fake"), "the installed binary ran: {text}");
    assert_eq!(std::fs::read_to_string(&github_path).unwrap(), format!("{dir}/bin\n"));

    // Restored from the cache: nothing is downloaded (the release is gone).
    std::fs::rename(&releases, tmp.path().join("gone")).unwrap();
    let (code, text, _) = install(tmp.path(), &["fetch", "v9.9.9", target, &dir], &[("DRACODE_RELEASE_URL", &url)]);
    assert_eq!(code, Some(0), "{text}");
    std::fs::rename(tmp.path().join("gone"), &releases).unwrap();

    // A tampered download is refused, never installed and never replaced by a build.
    let other = format!("{tc}/other");
    let tarball = releases.join(format!("download/v9.9.9/dracode-{target}.tar.gz"));
    let mut bytes = std::fs::read(&tarball).unwrap();
    bytes.extend_from_slice(b"tampered");
    std::fs::write(&tarball, bytes).unwrap();
    let (code, text, o) = install(tmp.path(), &["fetch", "v9.9.9", target, &other], &[("DRACODE_RELEASE_URL", &url)]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("::error title=dracode action::checksum mismatch"), "{text}");
    assert!(!Path::new(&other).join("bin/dracode").exists() && !o.contains_key("method"));

    // A release without an asset for this runner: build from source instead.
    let (code, text, o) = install(tmp.path(), &["fetch", "v0.0.1", target, &other], &[("DRACODE_RELEASE_URL", &url)]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(o["method"], "cargo", "{text}");
}

/// GitHub as the action sees it, on disk and served over `file://`: `GITHUB_SERVER_URL` with
/// `acme/dracode/releases/download/<tag>/…` assets, `GITHUB_API_URL` with the
/// `repos/acme/dracode/releases` list (drafts and prereleases included, as a token would see
/// them), and the action's checkout at `_actions/acme/dracode/<ref>` with its Cargo.toml.
struct FakeGithub {
    root: PathBuf,
    server_url: String,
    api_url: String,
}

impl FakeGithub {
    /// Releases `tags` (each `(tag, draft, prerelease)`), with assets for the runner's target.
    fn new(root: &Path, tags: &[(&str, bool, bool)]) -> FakeGithub {
        let server = root.join("github");
        let repo = server.join("acme/dracode");
        std::fs::create_dir_all(&repo).unwrap();
        let mut list = Vec::new();
        for (i, (tag, draft, prerelease)) in tags.iter().enumerate() {
            let staging = root.join(format!("staging-{i}"));
            std::fs::create_dir_all(&staging).unwrap();
            let assets = fake_release(&staging, tag, "x86_64-unknown-linux-musl").join("download").join(tag);
            let into = repo.join("releases/download").join(tag);
            std::fs::create_dir_all(into.parent().unwrap()).unwrap();
            std::fs::rename(assets, &into).unwrap();
            list.push(serde_json::json!({"tag_name": tag, "name": tag, "draft": draft, "prerelease": prerelease, "id": i}));
        }
        let api = root.join("api");
        std::fs::create_dir_all(api.join("repos/acme/dracode")).unwrap();
        // The API answers minified JSON on one line.
        std::fs::write(api.join("repos/acme/dracode/releases"), serde_json::to_string(&list).unwrap()).unwrap();
        FakeGithub {
            root: root.to_path_buf(),
            server_url: format!("file://{}", server.display()),
            api_url: format!("file://{}", api.display()),
        }
    }

    /// The action checked out at `git_ref` with `version` in its Cargo.toml.
    fn checkout(&self, git_ref: &str, version: &str) -> String {
        let path = self.root.join("_actions/acme/dracode").join(git_ref);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("Cargo.toml"), format!("[package]\nname = \"dracode\"\nversion = \"{version}\"\n")).unwrap();
        path.to_str().unwrap().to_string()
    }

    /// `install.sh args…` as the action runs it at `git_ref` (version `version` in its
    /// Cargo.toml), with `more` variables.
    fn install(
        &self,
        args: &[&str],
        git_ref: &str,
        version: &str,
        more: &[(&str, &str)],
    ) -> (Option<i32>, String, BTreeMap<String, String>) {
        let path = self.checkout(git_ref, version);
        let mut env = vec![
            ("GITHUB_SERVER_URL", self.server_url.as_str()),
            ("GITHUB_API_URL", self.api_url.as_str()),
            ("GITHUB_ACTION_PATH", path.as_str()),
            ("DRACODE_ACTION_REF", git_ref),
        ];
        env.extend_from_slice(more);
        install(&self.root, args, &env)
    }
}

/// Lines that say the binary is built from source.
fn build_notices(text: &str) -> usize {
    text.lines().filter(|l| l.contains("building from") || l.contains("built from")).count()
}

/// Pinned to a commit SHA (what security linters demand), the action installs the release of
/// its own version, checksum-verified, instead of building; a commit whose version has no
/// release yet is built, said in one line.
#[test]
fn install_at_a_commit_pin_downloads_the_release_of_the_actions_own_version() {
    let tmp = tempfile::tempdir().unwrap();
    let github = FakeGithub::new(tmp.path(), &[("v0.3.1", false, false), ("v0.2.0", false, false)]);
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let (code, text, o) = github.install(&["resolve"], sha, "0.3.1", &[("DRACODE_ACTION_REPOSITORY", "acme/dracode")]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!((o["version"].as_str(), o["method"].as_str()), ("v0.3.1", "release"), "{text}");
    assert!(text.contains("pinned to commit 0123456789ab") && text.contains("release v0.3.1"), "{text}");
    let target = o["target"].clone();
    let (code, text, o) = github.install(&["fetch", "v0.3.1", &target, &o["dir"]], sha, "0.3.1", &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(!o.contains_key("method"), "no build: {text}");
    assert!(text.contains("dracode v0.3.1 (fake"), "the release binary ran: {text}");

    // The repository comes from the checkout path when GitHub leaves it empty.
    let next = "fedcba9876543210fedcba9876543210fedcba98";
    let (_, text, o) = github.install(&["resolve"], next, "0.4.0", &[]);
    assert_eq!((o["version"].as_str(), o["method"].as_str()), ("v0.4.0", "release"), "{text}");
    let (code, text, o) = github.install(&["fetch", "v0.4.0", &target, &o["dir"]], next, "0.4.0", &[]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(o["method"], "cargo", "v0.4.0 is not released: built from source");
    assert_eq!(build_notices(&text), 1, "said in one line: {text}");
}

/// `@v0` (or `version: v0.2`) is the newest matching release, numerically, skipping drafts
/// and prereleases; a major version with no release is built from source, said in one line.
#[test]
fn install_at_a_major_tag_picks_the_newest_matching_release() {
    let tmp = tempfile::tempdir().unwrap();
    let github = FakeGithub::new(
        tmp.path(),
        &[
            ("v1.0.0", false, false),
            ("v0.12.0", true, false),
            ("v0.11.0-rc.1", false, true),
            ("v0.11.0", false, true),
            ("v0.10.1", false, false),
            ("v0.9.9", false, false),
            ("v0.2.3", false, false),
        ],
    );
    for (asked, input, want) in [("v0", "", "v0.10.1"), ("v1", "", "v1.0.0"), ("main", "v0.9", "v0.9.9"), ("main", "v0", "v0.10.1")] {
        let (code, text, o) = github.install(&["resolve"], asked, "0.10.1", &[("INPUT_VERSION", input)]);
        assert_eq!(code, Some(0), "{text}");
        assert_eq!((o["version"].as_str(), o["method"].as_str()), (want, "release"), "{asked} {input}: {text}");
    }
    let (_, _, o) = github.install(&["resolve"], "v0", "0.10.1", &[]);
    let (code, text, _) = github.install(&["fetch", &o["version"], &o["target"], &o["dir"]], "v0", "0.10.1", &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("dracode v0.10.1 (fake"), "{text}");

    let (code, text, o) = github.install(&["resolve"], "v7", "7.0.0", &[]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!((o["version"].as_str(), o["method"].as_str()), ("source", "cargo"), "{text}");
    assert_eq!(build_notices(&text), 1, "said in one line: {text}");
}

/// A version that is not released is refused, unless the action's own source is that version
/// (its release not published yet): then it is built, said in one line.
#[test]
fn install_of_an_unknown_version_fails_unless_the_source_is_that_version() {
    let tmp = tempfile::tempdir().unwrap();
    let github = FakeGithub::new(tmp.path(), &[("v0.3.1", false, false)]);
    let (_, _, o) = github.install(&["resolve"], "v0.3.1", "0.3.1", &[("INPUT_VERSION", "v0.9.8")]);
    assert_eq!((o["version"].as_str(), o["method"].as_str()), ("v0.9.8", "release"));
    let (code, text, o) = github.install(&["fetch", "v0.9.8", &o["target"], &o["dir"]], "v0.3.1", "0.3.1", &[]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("::error title=dracode action::no release v0.9.8 of dracode") && text.contains("the action's source is v0.3.1"),
        "{text}"
    );
    assert!(!o.contains_key("method"), "not built: {text}");

    let (_, _, o) = github.install(&["resolve"], "v0.3.2", "0.3.2", &[]);
    let (code, text, o) = github.install(&["fetch", "v0.3.2", &o["target"], &o["dir"]], "v0.3.2", "0.3.2", &[]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(o["method"], "cargo");
    assert_eq!(build_notices(&text), 1, "said in one line: {text}");
}

/// An HTTP server on 127.0.0.1 answering every request with `404 Not Found`, for as long as
/// the test runs; its base URL.
fn not_found_server() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nNot Found");
        }
    });
    url
}

/// A network failure is not a missing release: it fails the step naming the network (nothing
/// built); a 404 is a missing asset, built from source as before.
#[test]
fn install_tells_a_network_failure_from_a_missing_release_asset() {
    let tmp = tempfile::tempdir().unwrap();
    let target = "x86_64-unknown-linux-musl";
    let dir = tmp.path().join("tool").display().to_string();
    // A port nothing listens on: bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let unreachable = format!("http://{closed}/releases");
    let (code, text, o) = install(tmp.path(), &["fetch", "v9.9.9", target, &dir], &[("DRACODE_RELEASE_URL", &unreachable)]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("::error title=dracode action::cannot download"), "{text}");
    assert!(text.contains("network"), "{text}");
    assert!(!text.contains("no release asset") && !o.contains_key("method"), "not taken for a missing asset: {text}");

    let (code, text, o) = install(tmp.path(), &["fetch", "v9.9.9", target, &dir], &[("DRACODE_RELEASE_URL", &not_found_server())]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("no release asset") && text.contains("HTTP 404"), "{text}");
    assert_eq!(o["method"], "cargo", "{text}");
}

pub(super) fn yaml(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", path.display()))
}

/// Every `uses:` of a workflow or composite action, anywhere in it.
fn uses(value: &serde_json::Value, found: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                match v {
                    serde_json::Value::String(s) if key == "uses" => found.push(s.clone()),
                    _ => uses(v, found),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| uses(v, found)),
        _ => {}
    }
}

#[test]
fn workflows_and_the_action_parse_pin_their_actions_and_read_only_by_default() {
    let root = crate_root();
    let files = [
        ".github/workflows/ci.yml",
        ".github/workflows/release.yml",
        ".github/workflows/bench-gate.yml",
        "examples/workflows/nightly.yml",
        "action.yml",
    ];
    for file in files {
        let doc = yaml(&root.join(file));
        if file != "action.yml" {
            assert_eq!(doc["permissions"]["contents"], "read", "{file}: top-level permissions");
            assert!(doc["jobs"].as_object().is_some_and(|j| !j.is_empty()), "{file}");
        }
        let mut found = Vec::new();
        uses(&doc, &mut found);
        for action in found {
            if action.starts_with("./") || action == "./" || action.starts_with("OWNER/dracode@") {
                continue;
            }
            let (_, reference) = action.split_once('@').unwrap_or_else(|| panic!("{file}: {action} has no @ref"));
            assert!(
                reference.len() == 40 && reference.chars().all(|c| c.is_ascii_hexdigit()),
                "{file}: {action} is not pinned to a commit SHA"
            );
        }
    }
    // No placeholder owner of a made-up organisation: the docs name OWNER and say what it is.
    for file in ["README.md", "CHANGELOG.md", "action.yml", "examples/workflows/nightly.yml", ".github/action/install.sh"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(!text.contains("your-org") && !text.contains("dracode/dracode"), "{file} names a placeholder repository");
    }
    for file in ["LICENSE-MIT", "LICENSE-APACHE", "CHANGELOG.md"] {
        assert!(root.join(file).is_file(), "{file} is missing (Cargo.toml says MIT OR Apache-2.0)");
    }
    let action = yaml(&root.join("action.yml"));
    let inputs: Vec<&str> = action["inputs"].as_object().unwrap().keys().map(String::as_str).collect();
    for name in [
        "manifest",
        "provider",
        "model",
        "jobs",
        "shard",
        "filter",
        "args",
        "out",
        "version",
        "upload-artifacts",
        "fail-on",
        "publish",
        "publish-args",
    ] {
        assert!(inputs.contains(&name), "input {name} missing: {inputs:?}");
    }
    let outputs: Vec<&str> = action["outputs"].as_object().unwrap().keys().map(String::as_str).collect();
    let expected = [
        "exit-code",
        "total",
        "passed",
        "failed",
        "cost-usd",
        "input-tokens",
        "output-tokens",
        "results",
        "junit",
        "summary",
        "report",
        "out",
    ];
    let mut sorted = outputs.clone();
    sorted.sort_unstable();
    let mut want = expected.to_vec();
    want.sort_unstable();
    assert_eq!(sorted, want, "the outputs docs/src/github-actions.md documents");
    let text = std::fs::read_to_string(root.join("action.yml")).unwrap();
    for line in text.lines().filter(|l| l.trim_start().starts_with("run:")) {
        assert!(!line.contains("${{"), "no expression is pasted into a script: {line}");
    }
    for name in &inputs {
        assert!(!["key", "token", "secret", "password"].iter().any(|w| name.contains(w)), "secrets come through env:, not input {name}");
    }
    assert!(!text.contains("secrets."), "the action reads no secret itself");
}

/// The shipped nightly workflow's merge step, run as the runner would (bash, `set -e`, the real
/// dracode on PATH) over shard folders where one is missing: the step fails with exit 5 and the
/// summary still reaches the step summary; a merge whose tasks merely failed leaves it green.
#[test]
fn the_nightly_merge_step_fails_the_job_on_a_missing_shard_but_not_on_a_failed_task() {
    let workflow = yaml(&crate_root().join("examples/workflows/nightly.yml"));
    let shard_step = workflow["jobs"]["shard"]["steps"].as_array().unwrap().iter().find(|s| s["with"]["shard"].is_string()).unwrap();
    assert_eq!(shard_step["with"]["fail-on"], "error", "a shard with a missing key (exit 5) fails its job");
    let steps = workflow["jobs"]["merge"]["steps"].as_array().unwrap();
    let script = steps.iter().find(|s| s["name"] == "Merge the shards").unwrap()["run"].as_str().unwrap().to_string();

    let tmp = tempfile::tempdir().unwrap();
    quickstart_copy(tmp.path(), "false");
    for k in 1..=2 {
        let shard = format!("{k}/2");
        let out = format!("shards/dracode-out-shard-{k}-of-2");
        let args = ["run", "ex/quick start.toml", "--shard", shard.as_str(), "--out", out.as_str()];
        let ran = crate::support::cli::dracode(tmp.path()).args(args).output().unwrap();
        assert!(matches!(ran.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&ran.stderr));
    }
    let merge_step = |shards: &[&str]| {
        let work = tempfile::tempdir_in(tmp.path()).unwrap();
        std::fs::create_dir(work.path().join("shards")).unwrap();
        for shard in shards {
            let from = tmp.path().join("shards").join(shard);
            assert!(Command::new("cp").arg("-R").arg(&from).arg(work.path().join("shards")).status().unwrap().success());
        }
        let summary = work.path().join("step_summary");
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_dracode")).parent().unwrap().to_path_buf();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        let out = Command::new("bash")
            .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
            .current_dir(work.path())
            .env_clear()
            .env("PATH", path)
            .env("HOME", work.path())
            .env("RUNNER_TEMP", work.path())
            .env("GITHUB_STEP_SUMMARY", &summary)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        (out.status.code(), text, std::fs::read_to_string(&summary).unwrap_or_default())
    };
    let (code, text, summary) = merge_step(&["dracode-out-shard-1-of-2", "dracode-out-shard-2-of-2"]);
    assert_eq!(code, Some(0), "a failed task is for the report, not the job: {text}");
    assert!(summary.contains("dracode:"), "{summary}");
    let (code, text, summary) = merge_step(&["dracode-out-shard-1-of-2"]);
    assert_eq!(code, Some(5), "a missing shard fails the job: {text}");
    assert!(text.contains("shard 2/2 is missing"), "{text}");
    assert!(summary.contains("shard 2/2 is missing"), "the summary is still published: {summary}");
}

/// The action's `cache` input: a second step over an unchanged, committed project reuses the
/// passes of the first (summary `passed (cached)`), and keeps the cache folder out of git.
#[test]
fn the_cache_input_reuses_the_passes_of_an_earlier_step() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = quickstart_copy(tmp.path(), "sh test.sh");
    crate::support::cli::git(tmp.path(), &["init", "-q", "-b", "main"]);
    crate::support::cli::git(tmp.path(), &["add", "ex"]);
    crate::support::cli::git(tmp.path(), &["commit", "-qm", "base"]);
    let inputs = [("INPUT_MANIFEST", manifest.as_str()), ("INPUT_CACHE", ".dracode-cache")];
    let first = run_step(tmp.path(), &inputs);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    assert!(!first.summary.contains("(cached)"), "{}", first.summary);
    let second = run_step(tmp.path(), &inputs);
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert!(second.summary.contains("passed (cached)"), "{}", second.summary);
    assert_eq!(second.outputs["input-tokens"], "0", "nothing was sent: {:?}", second.outputs);
    assert!(tmp.path().join(".dracode-cache/.gitignore").is_file());
}

#[test]
fn the_step_summary_names_the_artifact_that_holds_report_html() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = quickstart_copy(tmp.path(), "sh test.sh");
    let step = run_step(tmp.path(), &[("INPUT_MANIFEST", &manifest), ("INPUT_SHARD", "1/2")]);
    assert_eq!(step.code, Some(0), "{}", step.stderr);
    assert!(Path::new(&step.outputs["report"]).is_file(), "{:?}", step.outputs);
    assert!(
        step.summary.contains("download the artifact `dracode-out-shard-1-of-2` of this run and open `report.html` in it"),
        "the step summary:\n{}",
        step.summary
    );
    let tmp = tempfile::tempdir().unwrap();
    let manifest = quickstart_copy(tmp.path(), "sh test.sh");
    let step = run_step(tmp.path(), &[("INPUT_MANIFEST", &manifest), ("INPUT_UPLOAD_ARTIFACTS", "false")]);
    assert!(step.summary.contains("**Report:** `dracode-out/report.html`"), "the step summary:\n{}", step.summary);
}

/// The action's `publish` input: after a batch whose tasks passed, one pull request per task on
/// the fake GitHub (its token from the step's env, as a workflow passes an app token); a bad
/// value fails the step before anything runs.
#[tokio::test(flavor = "multi_thread")]
async fn the_publish_input_opens_a_pull_request_per_passed_task() {
    use crate::support::cli::git;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let manifest = quickstart_copy(&dir, "sh test.sh");
    let remote = dir.join("remote.git");
    std::fs::create_dir(&remote).unwrap();
    git(&remote, &["init", "-q", "--bare", "-b", "main"]);
    git(&dir, &["init", "-q", "-b", "main"]);
    git(&dir, &["add", "ex"]);
    git(&dir, &["commit", "-qm", "base"]);
    git(&dir, &["remote", "add", "origin", remote.to_str().unwrap()]);
    git(&dir, &["push", "-q", "origin", "main"]);
    let api = crate::support::github_api::GithubApi::start("ghs_app", "octo/quick", &remote).await;
    let url = api.url();
    let env = [("GITHUB_TOKEN", "ghs_app"), ("GITHUB_REPOSITORY", "octo/quick"), ("GITHUB_API_URL", url.as_str())];
    let step = run_step(&dir, &[&[("INPUT_MANIFEST", manifest.as_str()), ("INPUT_PUBLISH", "pulls")][..], &env[..]].concat());
    assert_eq!(step.code, Some(2), "{}", step.stderr);
    assert!(step.stderr.contains("publish must be tasks, combined or empty"), "{}", step.stderr);

    let inputs = [("INPUT_MANIFEST", manifest.as_str()), ("INPUT_PUBLISH", "tasks"), ("INPUT_PUBLISH_ARGS", "--base-branch main")];
    let step = run_step(&dir, &[&inputs[..], &env[..]].concat());
    assert_eq!(step.code, Some(0), "{}", step.stderr);
    let heads: Vec<String> = api.pulls().iter().map(|p| p.head.clone()).collect();
    assert_eq!(heads, ["dracode/fix-greeting", "dracode/add-readme"], "{}", step.stderr);
    assert_eq!(api.violations(), Vec::<String>::new());
    assert!(step.summary.contains("## dracode publish"), "{}", step.summary);

    // GitHub refusing the pull request fails the step, unless fail-on is never.
    let other = crate::support::github_api::GithubApi::start("ghs_app", "octo/quick", &remote).await;
    other.refuse_creation(403, crate::support::github_api::actions_not_permitted());
    let url = other.url();
    let env = [("GITHUB_TOKEN", "ghs_app"), ("GITHUB_REPOSITORY", "octo/quick"), ("GITHUB_API_URL", url.as_str())];
    let step = run_step(&dir, &[&inputs[..], &env[..]].concat());
    assert_eq!(step.code, Some(3), "{}", step.stderr);
    assert!(step.stderr.contains("::error title=dracode publish::exit code 3"), "{}", step.stderr);
    let never = [("INPUT_MANIFEST", manifest.as_str()), ("INPUT_PUBLISH", "tasks"), ("INPUT_FAIL_ON", "never")];
    assert_eq!(run_step(&dir, &[&never[..], &env[..]].concat()).code, Some(0));
}

/// The rows of the table whose header row begins `| {first} |` on `page`: each row's cells.
fn table_rows(page: &str, first: &str) -> Vec<Vec<String>> {
    let header = format!("| {first} |");
    let lines: Vec<&str> = page.lines().skip_while(|l| !l.starts_with(&header)).skip(2).take_while(|l| l.starts_with('|')).collect();
    lines.iter().map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect()).collect()
}

#[test]
fn the_actions_page_lists_every_input_and_output_of_action_yml_and_no_other() {
    let root = crate_root();
    let page = std::fs::read_to_string(root.join("docs/src/github-actions.md")).unwrap();
    let action = yaml(&root.join("action.yml"));
    let code = |cell: &str| cell.trim_matches('`').to_string();
    let inputs = action["inputs"].as_object().unwrap();
    let rows = table_rows(&page, "input");
    let documented: Vec<String> = rows.iter().map(|r| code(&r[0])).collect();
    let declared: Vec<String> = inputs.keys().cloned().collect();
    let (mut a, mut b) = (documented.clone(), declared.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "the inputs on the page and in action.yml");
    for row in &rows {
        let default = inputs[&code(&row[0])]["default"].as_str().unwrap_or_default();
        let shown = if default.is_empty() { "none".to_string() } else { format!("`{default}`") };
        assert!(row[1].starts_with(&shown), "input {}: the page says {:?}, action.yml's default is {default:?}", row[0], row[1]);
    }
    let outputs: Vec<String> = action["outputs"].as_object().unwrap().keys().cloned().collect();
    let mut documented: Vec<String> = table_rows(&page, "output").iter().map(|r| code(&r[0])).collect();
    let mut declared = outputs;
    documented.sort();
    declared.sort();
    assert_eq!(documented, declared, "the outputs on the page and in action.yml");
}

/// `agents.sh` with stand-ins for npm (which records its arguments and "installs" the program)
/// on PATH: exit code, output, the npm command lines.
fn install_agents(input: &str) -> (Option<i32>, String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let npm = format!(
        "#!/bin/sh\necho \"$*\" >> {log}\nfor p in claude codex gemini opencode; do printf '#!/bin/sh\\necho \"%s 9.9.9\"\\n' $p > {bin}/$p; chmod +x {bin}/$p; done\n",
        log = dir.path().join("npm.log").display(),
        bin = bin.display()
    );
    std::fs::write(bin.join("npm"), npm).unwrap();
    assert!(Command::new("chmod").arg("+x").arg(bin.join("npm")).status().unwrap().success());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = bash(dir.path(), "agents.sh", &[input], &[("PATH", &path)]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let log = std::fs::read_to_string(dir.path().join("npm.log")).unwrap_or_default();
    (out.status.code(), text, log.lines().map(str::to_string).collect())
}

#[test]
fn the_agents_input_installs_the_named_agents_at_the_tested_versions_and_nothing_else() {
    let (code, text, npm) = install_agents("claude-code, codex@0.200.0");
    assert_eq!(code, Some(0), "{text}");
    let claude = crate::support::agents::pinned("claude-code");
    assert_eq!(
        npm,
        [
            format!("install -g --no-audit --no-fund --loglevel=error {}@{}", claude.1, claude.2),
            "install -g --no-audit --no-fund --loglevel=error @openai/codex@0.200.0".to_string()
        ]
    );
    assert!(text.contains("claude-code: claude 9.9.9"), "{text}");
    let (code, _, npm) = install_agents("");
    assert_eq!((code, npm.len()), (Some(0), 0), "an empty input installs nothing");
    let (code, text, npm) = install_agents("claude-code goose");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("unknown agent 'goose'; the agents are: claude-code codex gemini-cli opencode"), "{text}");
    assert_eq!(npm.len(), 0, "nothing is installed when a name is unknown: {npm:?}");
}
