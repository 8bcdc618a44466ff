//! What a confined command may do: the [`SandboxMode`], the folders it may write, the folders it
//! may read (an allowlist) minus the hidden ones, and whether it has a network. A plain value: it holds no
//! secret and travels to the supervisor as JSON.

use super::reads::ReadSet;
use super::{SandboxError, probe};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How strictly commands are confined (`sandbox = "…"` in a manifest, `--sandbox`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Commands write only the workspace, the task's TMPDIR and the extra writable folders.
    #[default]
    WorkspaceWrite,
    /// Commands write only the task's TMPDIR.
    ReadOnly,
    /// No confinement: today's behaviour (warned in the summary).
    Off,
}

impl SandboxMode {
    /// The name used in manifests and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::Off => "off",
        }
    }
}

/// Credential files and folders under `$HOME` that commands never read unless the caller puts
/// them back. A trailing `*` matches every name with that prefix.
pub const HOME_CREDENTIALS: &[&str] = &[
    ".git-credentials",
    ".config/gh",
    ".config/hub",
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".npmrc",
    ".yarnrc",
    ".pypirc",
    ".netrc",
    ".cargo/credentials*",
    ".config/dracode",
];

/// The confinement of one task's commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// How strictly.
    pub mode: SandboxMode,
    /// Folders writable in [`SandboxMode::WorkspaceWrite`] (the workspace first, then extra
    /// ones such as a worktree's git dir and the repository's `objects/`).
    pub writable: Vec<PathBuf>,
    /// The task's TMPDIR: writable in every mode.
    pub tmp_dir: Option<PathBuf>,
    /// Readable trees and files, an allowlist (see [`ReadSet`]): the system, the toolchains, the
    /// workspace, the task's `read_paths`; also how to put back something inside a hidden path,
    /// such as a repository's `.git/objects` when `.git` is hidden. Writable roots are readable
    /// too.
    pub readable: Vec<PathBuf>,
    /// Paths taken out of `readable` and `writable`: credential files, a repository's `.git`.
    /// A trailing `*` on the last component matches every name with that prefix. A hidden path
    /// inside a writable root splits that root: its other entries stay writable, but nothing new
    /// can be created directly in the folders on the way (Landlock rights are inherited, so they
    /// cannot be granted there without reaching the hidden path).
    pub hidden: Vec<PathBuf>,
    /// Whether commands have the whole network. Without it they get TCP on loopback only: their
    /// own listeners, and the proxy.
    pub network: bool,
    /// Without `network`: the egress proxy dracode runs for this task (`network = [hosts]`),
    /// the one address besides their own listeners that commands may connect to.
    #[serde(default)]
    pub proxy: Option<std::net::SocketAddr>,
    /// The model endpoint dracode serves an external agent (`agent = "codex"`, …) on loopback:
    /// reachable like the proxy, whatever `network` says.
    #[serde(default)]
    pub endpoint: Option<std::net::SocketAddr>,
    /// Unix sockets outside the writable roots that commands may connect to (`unix_sockets`).
    #[serde(default)]
    pub unix_sockets: Vec<PathBuf>,
    /// Resource limits of the task's commands.
    #[serde(default)]
    pub limits: super::Limits,
}

impl Policy {
    /// The default confinement for a command that runs with dracode's own environment: see
    /// [`Policy::for_env`].
    pub fn for_workspace(mode: SandboxMode, workspace: &Path, tmp_dir: Option<&Path>) -> Policy {
        let env: BTreeMap<String, String> =
            std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect();
        let runner_temp = env.get("RUNNER_TEMP").filter(|v| !v.is_empty()).map(PathBuf::from);
        Policy::for_env(mode, workspace, tmp_dir, &env, runner_temp.as_deref())
    }

    /// The default confinement for a task whose commands get `env` (before their TMPDIR and
    /// HOME are set): `mode` (usually [`SandboxMode::default`]), the workspace writable,
    /// `tmp_dir` writable, the [read allowlist](ReadSet) of `env` readable (with the credentials
    /// in it and `runner_temp` hidden), the workspace readable, no network.
    pub fn for_env(
        mode: SandboxMode,
        workspace: &Path,
        tmp_dir: Option<&Path>,
        env: &BTreeMap<String, String>,
        runner_temp: Option<&Path>,
    ) -> Policy {
        let reads = ReadSet::resolve(env, runner_temp);
        let mut readable = reads.readable;
        readable.push(workspace.to_path_buf());
        Policy {
            mode,
            writable: vec![workspace.to_path_buf()],
            tmp_dir: tmp_dir.map(Path::to_path_buf),
            readable,
            hidden: reads.hidden,
            network: false,
            proxy: None,
            endpoint: None,
            unix_sockets: Vec::new(),
            limits: super::Limits::default(),
        }
    }

    /// Whether commands run confined at all (every mode but `off`).
    pub fn is_enforced(&self) -> bool {
        self.mode != SandboxMode::Off
    }

    /// The folders writable in this mode: the TMPDIR, plus `writable` unless read-only.
    pub fn writable_roots(&self) -> Vec<&Path> {
        let extra = match self.mode {
            SandboxMode::WorkspaceWrite => self.writable.as_slice(),
            SandboxMode::ReadOnly | SandboxMode::Off => &[],
        };
        self.tmp_dir.iter().chain(extra).map(PathBuf::as_path).collect()
    }

    /// Whether a confined command may read `path` as the file system is now: it exists and lies
    /// in a readable or writable tree (or is a readable device) and in no hidden path. Under
    /// `off`, whatever exists.
    pub fn may_read(&self, path: &Path) -> bool {
        let Ok(path) = path.canonicalize() else { return false };
        if !self.is_enforced() {
            return true;
        }
        let devices = super::READABLE_DEVICES.iter().map(Path::new);
        let roots: Vec<&Path> = self.readable.iter().map(PathBuf::as_path).chain(self.writable_roots()).chain(devices).collect();
        super::rules::granted(&path, &roots, &super::rules::Hidden::resolve(&self.hidden))
    }

    /// `Ok` when this machine can enforce the policy; otherwise an error that says what is
    /// missing and how to opt out. Never downgrades silently.
    pub fn check_supported(&self) -> Result<(), SandboxError> {
        if !self.is_enforced() {
            return Ok(());
        }
        let found = probe();
        let mut missing = Vec::new();
        if !found.os_supported {
            missing.push(format!("Linux (this is {})", std::env::consts::OS));
        } else {
            if found.landlock_abi.is_none() {
                missing.push(
                    "Landlock (Linux 5.13+ with the `landlock` LSM enabled, and not blocked by a container's seccomp profile)".into(),
                );
            }
            if !found.seccomp {
                missing.push("seccomp filters".into());
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        Err(SandboxError::Unsupported { mode: self.mode, missing: missing.join(" and ") })
    }
}

/// The [`HOME_CREDENTIALS`] under `home`.
pub fn home_credentials(home: &Path) -> Vec<PathBuf> {
    HOME_CREDENTIALS.iter().map(|rel| home.join(rel)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_use_their_manifest_names() {
        for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly, SandboxMode::Off] {
            assert_eq!(serde_json::to_value(mode).unwrap(), serde_json::json!(mode.as_str()));
        }
        assert_eq!(SandboxMode::default(), SandboxMode::WorkspaceWrite);
    }

    #[test]
    fn read_only_keeps_only_the_tmp_dir_writable() {
        let mut policy = Policy::for_workspace(SandboxMode::WorkspaceWrite, Path::new("/ws"), Some(Path::new("/t")));
        assert_eq!(policy.writable_roots(), [Path::new("/t"), Path::new("/ws")]);
        policy.mode = SandboxMode::ReadOnly;
        assert_eq!(policy.writable_roots(), [Path::new("/t")]);
    }

    #[test]
    fn reads_are_an_allowlist_with_the_workspace_in_it() {
        let home = tempfile::tempdir().unwrap();
        let env = BTreeMap::from([("HOME".to_string(), home.path().display().to_string())]);
        let policy = Policy::for_env(SandboxMode::ReadOnly, Path::new("/ws"), Some(Path::new("/t")), &env, Some(Path::new("/rt")));
        assert!(policy.readable.contains(&PathBuf::from("/ws")) && policy.readable.contains(&PathBuf::from("/usr")));
        for never in ["/", "/tmp", "/home", "/root"] {
            assert!(!policy.readable.contains(&PathBuf::from(never)), "{never}: {:?}", policy.readable);
        }
        assert!(!policy.readable.iter().any(|p| p == home.path()), "{:?}", policy.readable);
        assert!(policy.hidden.contains(&PathBuf::from("/rt")) && policy.hidden.contains(&home.path().join(".ssh")));
    }

    #[test]
    fn off_is_always_supported() {
        let policy = Policy::for_workspace(SandboxMode::Off, Path::new("/ws"), None);
        assert!(policy.check_supported().is_ok());
    }
}
