//! Running shell scripts confined by the real supervisor (the built `dracode` binary) in a
//! scratch layout: a workspace, a TMPDIR, a HOME holding fake credentials, and a folder outside.

use dracode_sandbox::process::{self, Finished, Spec};
use dracode_sandbox::{Policy, SandboxMode};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A scratch layout for one test.
pub struct Scratch {
    _dir: tempfile::TempDir,
    /// The writable workspace.
    pub ws: PathBuf,
    /// The task's TMPDIR.
    pub tmp: PathBuf,
    /// The fake HOME, with `.ssh/id_rsa`, `.git-credentials`, `.cargo/credentials.toml`,
    /// `.cargo/config.toml` and `notes.txt`.
    pub home: PathBuf,
    /// A folder outside every writable root.
    pub outside: PathBuf,
}

impl Scratch {
    /// Creates the layout.
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical temp dir");
        let (ws, tmp, home, outside) = (root.join("ws"), root.join("tmp"), root.join("home"), root.join("outside"));
        for d in [&ws, &tmp, &outside, &home.join(".ssh"), &home.join(".cargo")] {
            std::fs::create_dir_all(d).expect("scratch folder");
        }
        for (file, text) in [
            (".ssh/id_rsa", "PRIVATE KEY"),
            (".git-credentials", "https://user:TOKEN@github.com"),
            (".cargo/credentials.toml", "token = \"CARGO TOKEN\""),
            (".cargo/config.toml", "[build]"),
            ("notes.txt", "public notes"),
        ] {
            std::fs::write(home.join(file), text).expect("scratch file");
        }
        std::fs::write(outside.join("existing.txt"), "outside").expect("scratch file");
        Scratch { _dir: dir, ws, tmp, home, outside }
    }

    /// The default policy for this layout, as a task whose commands get [`Scratch::env`] has
    /// it: the scratch HOME unreadable but its toolchain folders (`.cargo`), whose credentials
    /// stay hidden.
    pub fn policy(&self, mode: SandboxMode) -> Policy {
        Policy::for_env(mode, &self.ws, Some(&self.tmp), &self.env(), None)
    }

    /// Runs `sh -c script` in the workspace, confined by `policy`, with a 20 s timeout.
    pub async fn sh(&self, policy: &Policy, script: &str) -> Finished {
        self.sh_with_timeout(policy, script, Duration::from_secs(20)).await
    }

    /// Runs `sh -c script` in the workspace, confined by `policy`.
    pub async fn sh_with_timeout(&self, policy: &Policy, script: &str, timeout: Duration) -> Finished {
        use_real_supervisor();
        let args = vec!["-c".to_string(), script.to_string()];
        let env = self.env();
        let spec = Spec {
            program: "sh",
            args: &args,
            cwd: &self.ws,
            env: &env,
            tmp_dir: Some(&self.tmp),
            timeout,
            output_limit: 64 * 1024,
            confine: Some(policy),
        };
        process::run(&spec).await.expect("the supervisor starts")
    }

    /// The child environment: PATH and the scratch HOME.
    pub fn env(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("PATH".to_string(), std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())),
            ("HOME".to_string(), self.home.display().to_string()),
        ])
    }
}

/// Points the library at the built `dracode` binary (a test binary is not one).
pub fn use_real_supervisor() {
    dracode_sandbox::use_supervisor_program(PathBuf::from(env!("CARGO_BIN_EXE_dracode")));
}

/// Whether this machine can confine at all; when not, prints why (the test then checks only
/// that the refusal is explicit).
pub fn supported() -> bool {
    match Policy::for_workspace(SandboxMode::WorkspaceWrite, Path::new("/"), None).check_supported() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("skipping: {e}");
            false
        }
    }
}

/// Whether process `pid` is alive (a zombie counts as dead).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        .unwrap_or(false)
}

/// Whether this test runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid only returns a number.
    unsafe { libc::geteuid() == 0 }
}
