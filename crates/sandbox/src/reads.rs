//! What a confined command may read: an allowlist, resolved from the environment the command
//! gets ([`ReadSet::resolve`]).
//!
//! - **The system**: [`SYSTEM_READS`] (programs, libraries, configuration, `/proc`, `/sys`), the
//!   targets of symlinks in `/etc` (`/etc/resolv.conf` → `/run/systemd/resolve/…`: that one
//!   file, not its folder), and a few devices ([`READABLE_DEVICES`]).
//! - **Toolchains**: the folders named by [`TOOLCHAIN_VARS`] (`CARGO_HOME`, `RUSTUP_HOME`,
//!   `GOROOT`, `JAVA_HOME`, `PYENV_ROOT`, the runner's tool cache…), the folders on `PATH` — a
//!   `bin` or `shims` folder with its parent when that parent is a toolchain's root (named like
//!   one of [`HOME_TOOLCHAINS`], as `.cargo`, or holding only a toolchain's layout:
//!   [`TOOLCHAIN_LAYOUT`], [`TOOLCHAIN_ROOT`], dotfiles aside; a Python venv, a Go or node
//!   install, a JDK), else with only the parent's [`TOOLCHAIN_LAYOUT`] entries (`DIR/bin`
//!   with `DIR/runs` beside it gives `DIR/bin`, `DIR/lib`, `DIR/share`, never `DIR/runs`), and
//!   only itself when the parent is private or `~/.local` ([`ReadSet::warnings`] says so) —, and the
//!   usual per-user toolchain folders under `$HOME` ([`HOME_TOOLCHAINS`]). A candidate that
//!   is, or holds, one of the [private roots](ReadSet::private) (`/`, `/home`, `/root`, `$HOME`,
//!   `/tmp`, `/var/tmp`, `/run`, `$RUNNER_TEMP`) is never granted: `GOPATH=$HOME` does not open
//!   the home folder; nor is anything inside `$RUNNER_TEMP` (where CI keeps credentials).
//! - The caller adds the workspace, the task's TMPDIR and the task's `read_paths`.
//!
//! Credentials inside granted trees stay hidden: [`super::HOME_CREDENTIALS`], the toolchains'
//! own ([`toolchain_credentials`]) and the system's ([`SYSTEM_CREDENTIALS`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The OS's program, library and configuration folders, plus `/proc` and `/sys` (other
/// processes' private files there stay out of reach: see the module doc of [`super`]).
pub const SYSTEM_READS: &[&str] =
    &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys", "/snap", "/nix/store"];

/// Devices every command may read (besides the writable `/dev/null`, `/dev/zero`, `/dev/full`).
/// Not `/dev` as a whole: a disk's device node is readable by its owner, root, and would bypass
/// every file rule; not `/dev/pts` or `/dev/ptmx`: another terminal must stay out of reach.
pub const READABLE_DEVICES: &[&str] = &["/dev/urandom", "/dev/random"];

/// The variables the read allowlist depends on besides [`TOOLCHAIN_VARS`]: [`ReadSet::resolve`]
/// sees no others.
const READ_VARS: &[&str] = &["HOME", "PATH", "XDG_CONFIG_HOME"];

/// Variables naming a toolchain (or its read-only caches): the folders they name are readable.
/// Colon-separated lists (`GEM_PATH`, `NODE_PATH`) count each entry.
pub const TOOLCHAIN_VARS: &[&str] = &[
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOROOT",
    "GOPATH",
    "GOMODCACHE",
    "JAVA_HOME",
    "MAVEN_HOME",
    "M2_HOME",
    "GRADLE_USER_HOME",
    "NVM_DIR",
    "NODE_PATH",
    "PYENV_ROOT",
    "PYTHONHOME",
    "CONDA_PREFIX",
    "VIRTUAL_ENV",
    "GEM_HOME",
    "GEM_PATH",
    "DOTNET_ROOT",
    "RUNNER_TOOL_CACHE",
    "AGENT_TOOLSDIRECTORY",
];

/// The runner's tool cache on GitHub-hosted machines, readable even when `RUNNER_TOOL_CACHE` is
/// not passed on.
pub const TOOL_CACHE: &str = "/opt/hostedtoolcache";

/// The usual per-user toolchain folders under `$HOME`: readable when they exist.
pub const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".pyenv",
    ".rbenv",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".local/bin",
    ".local/lib",
    ".local/share/uv/python",
    "go",
    ".go",
    ".sdkman",
    ".asdf",
    ".ghcup",
    ".juliaup",
    ".dotnet",
    ".m2/repository",
    ".gradle/wrapper",
    ".gradle/caches",
    ".nuget/packages",
    "miniconda3",
    "anaconda3",
    ".elan",
    ".opam",
];

/// Credential files of the system, hidden although `/etc` is readable when dracode runs as root:
/// the password hashes and the SSH host keys, and a GitLab runner's configuration (its tokens).
/// Only root may read them, and a root command still may (it owns them); for another user the
/// file modes already keep them out. A trailing `*` is a name prefix.
pub const SYSTEM_CREDENTIALS: &[&str] = &["/etc/shadow*", "/etc/gshadow*", "/etc/ssh/ssh_host_*", "/etc/gitlab-runner"];

/// The resolved read allowlist of one command environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSet {
    /// Readable trees (and single files), in a stable order, without duplicates.
    pub readable: Vec<PathBuf>,
    /// Hidden inside them: the credentials of the system, of `$HOME` and of the toolchains,
    /// and `$RUNNER_TEMP`.
    pub hidden: Vec<PathBuf>,
    /// Folders never granted as a whole (and nothing above them).
    pub private: Vec<PathBuf>,
    /// Why each entry of `readable` is there (`the system`, `$CARGO_HOME`, `on PATH`, …).
    pub reasons: BTreeMap<PathBuf, String>,
    /// What the user should know about the grants: a `bin` folder on PATH whose parent holds
    /// more than a toolchain (only its layout is readable), a PATH entry readable as a whole
    /// that holds folders.
    pub warnings: Vec<String>,
}

/// The entries of a toolchain's root (`DIR` of a `DIR/bin` on PATH) a command may read even
/// when `DIR` holds other things: programs, libraries, shared data, headers, a venv's
/// `pyvenv.cfg`, a version manager's `versions`.
pub const TOOLCHAIN_LAYOUT: &[&str] = &[
    "bin",
    "sbin",
    "shims",
    "lib",
    "lib32",
    "lib64",
    "libexec",
    "share",
    "include",
    "etc",
    "man",
    "pyvenv.cfg",
    "versions",
    "version",
    "plugins",
];

/// Other entries of a toolchain's root (a Go install's `src` and `pkg`, a JDK's `conf` and
/// `jmods`, the license and read-me files): a parent holding only these and
/// [`TOOLCHAIN_LAYOUT`] (and dotfiles named `.gitignore`) is granted whole. Compared up to the
/// first `.` (`README.md` is `README`).
pub const TOOLCHAIN_ROOT: &[&str] = &[
    "api",
    "doc",
    "docs",
    "misc",
    "pkg",
    "src",
    "test",
    "conf",
    "jmods",
    "legal",
    "release",
    "go",
    "VERSION",
    "completions",
    "cache",
    "LICENSE",
    "LICENCE",
    "COPYING",
    "COPYRIGHT",
    "NOTICE",
    "PATENTS",
    "README",
    "CHANGELOG",
    "CONTRIBUTING",
    "SECURITY",
    "AUTHORS",
    "codereview",
    "THIRD_PARTY_NOTICES",
];

impl ReadSet {
    /// The read allowlist for a command that runs with `env` (the variables it gets before its
    /// TMPDIR and HOME are set; `HOME` is the user's). `runner_temp` is dracode's own
    /// `$RUNNER_TEMP`, which commands never see.
    ///
    /// Resolved once per process for each environment (its toolchain variables, `HOME`, `PATH`
    /// and `XDG_CONFIG_HOME`) and `runner_temp`:
    /// a run makes several policies per task, and each resolution walks every PATH folder.
    pub fn resolve(env: &BTreeMap<String, String>, runner_temp: Option<&Path>) -> ReadSet {
        type Key = (BTreeMap<String, String>, Option<PathBuf>);
        static RESOLVED: std::sync::Mutex<Vec<(Key, ReadSet)>> = std::sync::Mutex::new(Vec::new());
        let read: BTreeMap<String, String> = env
            .iter()
            .filter(|(name, _)| READ_VARS.contains(&name.as_str()) || TOOLCHAIN_VARS.contains(&name.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let key = (read, runner_temp.map(Path::to_path_buf));
        if let Some((_, set)) = RESOLVED.lock().ok().and_then(|kept| kept.iter().find(|(k, _)| *k == key).cloned()) {
            return set;
        }
        let set = ReadSet::compute(&key.0, runner_temp);
        if let Ok(mut kept) = RESOLVED.lock() {
            kept.push((key, set.clone()));
        }
        set
    }

    /// [`ReadSet::resolve`], uncached: `env` holds only the variables it depends on.
    fn compute(env: &BTreeMap<String, String>, runner_temp: Option<&Path>) -> ReadSet {
        let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = var("HOME").filter(|h| h.is_absolute());
        let private = private_roots(home.as_deref(), runner_temp);
        let mut candidates: Vec<(PathBuf, String)> = SYSTEM_READS.iter().map(|p| (PathBuf::from(p), "the system".into())).collect();
        candidates.extend(etc_link_targets(Path::new("/etc")).into_iter().map(|p| (p, "a file a link in /etc leads to".into())));
        candidates.push((PathBuf::from(TOOL_CACHE), "the runner's tool cache".into()));
        for name in TOOLCHAIN_VARS {
            let dirs = env.get(*name).into_iter().flat_map(|v| std::env::split_paths(v).collect::<Vec<_>>());
            candidates.extend(dirs.map(|d| (d, format!("${name}"))));
        }
        // Resolved once, not once per candidate: each is a chain of readlinks, paid per task.
        let private_real: Vec<PathBuf> = private.iter().map(|root| root.canonicalize().unwrap_or_else(|_| root.clone())).collect();
        let is_private = |p: &Path| opens_private(p, &private, &private_real);
        let on_path: Vec<PathBuf> = env.get("PATH").map(|v| std::env::split_paths(v).collect()).unwrap_or_default();
        let local = home.as_ref().map(|h| h.join(".local"));
        let mut narrowed = Vec::new();
        for dir in on_path.iter().filter(|d| d.is_absolute()) {
            let entry = path_entry(dir, local.as_deref(), &is_private);
            candidates.extend(entry.grants);
            narrowed.extend(entry.left_out);
        }
        if let Some(home) = &home {
            candidates.extend(HOME_TOOLCHAINS.iter().map(|rel| (home.join(rel), "a toolchain folder in $HOME".into())));
        }
        let mut readable: Vec<PathBuf> = Vec::new();
        let mut reasons = BTreeMap::new();
        let in_runner_temp = |p: &Path| runner_temp.is_some_and(|rt| p.starts_with(rt));
        for (path, reason) in candidates {
            // Cheapest test first: most candidates do not exist on a given machine.
            let allowed = path.is_absolute() && path.exists() && !is_private(&path) && !in_runner_temp(&path);
            if allowed && !readable.contains(&path) {
                reasons.insert(path.clone(), reason);
                readable.push(path);
            }
        }
        let nested: Vec<PathBuf> = readable.iter().filter(|p| readable.iter().any(|q| q != *p && p.starts_with(q))).cloned().collect();
        readable.retain(|p| !nested.contains(p));
        reasons.retain(|p, _| readable.contains(p));
        let warnings = path_warnings(&on_path, &narrowed, &readable, &reasons);
        // Only root can read them at all (as their owner, even without capabilities); for
        // anyone else hiding them would only cost rules.
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mut hidden: Vec<PathBuf> = SYSTEM_CREDENTIALS.iter().filter(|_| root).map(PathBuf::from).collect();
        if let Some(home) = &home {
            hidden.extend(super::home_credentials(home));
        }
        if let Some(config) = var("XDG_CONFIG_HOME") {
            hidden.extend(["gh", "hub", "gcloud", "dracode"].map(|name| config.join(name)));
        }
        hidden.extend(toolchain_credentials(env));
        // A cargo home granted by its place (on PATH, under another user's HOME): its tokens.
        hidden.extend(readable.iter().filter(|p| p.file_name().is_some_and(|n| n == ".cargo")).map(|p| p.join("credentials*")));
        hidden.extend(runner_temp.map(Path::to_path_buf));
        hidden.dedup();
        ReadSet { readable, hidden, private, reasons, warnings }
    }
}

/// What one absolute folder on PATH makes readable ([`ReadSet::resolve`]).
struct PathEntry {
    /// The folder, and what of its parent it brings, each with its reason.
    grants: Vec<(PathBuf, String)>,
    /// When only the parent's layout was granted: what was and what was not.
    left_out: Option<Narrowed>,
}

/// A `bin` folder on PATH whose parent holds more than a toolchain.
struct Narrowed {
    dir: PathBuf,
    parent: PathBuf,
    granted: Vec<String>,
    left: Vec<String>,
}

/// `dir` itself; for a `bin` or `shims` folder also its parent when that is a toolchain's root
/// (only [`TOOLCHAIN_LAYOUT`] and [`TOOLCHAIN_ROOT`] entries), else the parent's
/// [`TOOLCHAIN_LAYOUT`] entries alone; nothing of a private parent or of `~/.local`.
fn path_entry(dir: &Path, local: Option<&Path>, is_private: &dyn Fn(&Path) -> bool) -> PathEntry {
    let mut grants = vec![(dir.to_path_buf(), "on PATH".to_string())];
    let toolchain_dir = dir.file_name().is_some_and(|n| n == "bin" || n == "shims");
    let parent = dir.parent().filter(|p| toolchain_dir && local != Some(*p) && !is_private(p));
    let Some((parent, entries)) = parent.and_then(|p| Some((p, std::fs::read_dir(p).ok()?))) else {
        return PathEntry { grants, left_out: None };
    };
    // Dotfiles (a clone's `.git`, a venv's `.gitignore`) neither make nor unmake a root.
    let names: Vec<String> =
        entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| !n.starts_with('.')).collect();
    let layout = |n: &str| TOOLCHAIN_LAYOUT.contains(&n);
    let root_entry = |n: &str| layout(n) || TOOLCHAIN_ROOT.contains(&n.split('.').next().unwrap_or(n));
    let known = parent.file_name().is_some_and(|n| HOME_TOOLCHAINS.iter().any(|t| Path::new(t).as_os_str() == n));
    if known || names.iter().all(|n| root_entry(n)) {
        grants.push((parent.to_path_buf(), format!("the toolchain root of {} on PATH", dir.display())));
        return PathEntry { grants, left_out: None };
    }
    let (mut granted, mut left): (Vec<String>, Vec<String>) = names.into_iter().partition(|n| layout(n));
    granted.sort();
    left.sort();
    let reason = format!("the toolchain layout beside {} on PATH", dir.display());
    grants.extend(granted.iter().map(|n| (parent.join(n), reason.clone())));
    PathEntry { grants, left_out: Some(Narrowed { dir: dir.to_path_buf(), parent: parent.to_path_buf(), granted, left }) }
}

/// The warnings of [`ReadSet::warnings`]: each `bin` folder whose parent was narrowed to its
/// layout (unless the parent is readable anyway), and each PATH entry readable as a whole that
/// holds folders (hidden ones aside).
fn path_warnings(on_path: &[PathBuf], narrowed: &[Narrowed], readable: &[PathBuf], reasons: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let shown = |names: &[String]| {
        let mut text = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
        if names.len() > 5 {
            text.push_str(", …");
        }
        text
    };
    let mut warnings = Vec::new();
    for n in narrowed.iter().filter(|n| !readable.iter().any(|r| n.parent.starts_with(r))) {
        warnings.push(format!(
            "PATH entry {}: {} holds more than a toolchain ({}), so commands may read only its {}; add to read_paths what a tool there needs",
            n.dir.display(),
            n.parent.display(),
            shown(&n.left),
            shown(&n.granted)
        ));
    }
    for dir in on_path.iter().filter(|d| reasons.get(*d).is_some_and(|r| r == "on PATH")) {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        let mut folders: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        folders.sort();
        if !folders.is_empty() {
            warnings.push(format!(
                "PATH entry {} is readable as a whole and holds folders ({}): every command may read them; take it off PATH or keep private files out of it",
                dir.display(),
                shown(&folders)
            ));
        }
    }
    warnings.dedup();
    warnings
}

/// The folders a command never gets as a whole: `/`, `/home`, `/root`, `$HOME`, `/tmp`,
/// `/var/tmp`, `/run`, `/var`, and `$RUNNER_TEMP`.
fn private_roots(home: Option<&Path>, runner_temp: Option<&Path>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> =
        ["/", "/home", "/root", "/tmp", "/var", "/var/tmp", "/run", "/dev", "/mnt", "/media", "/srv"].iter().map(PathBuf::from).collect();
    roots.extend(home.map(Path::to_path_buf));
    roots.extend(runner_temp.map(Path::to_path_buf));
    roots.extend(std::env::temp_dir().canonicalize().ok());
    roots
}

/// Whether granting `path` would open a private root: it is one, or holds one. Compared as
/// given and with symlinks resolved (`private_real`: the roots of `private`, resolved).
fn opens_private(path: &Path, private: &[PathBuf], private_real: &[PathBuf]) -> bool {
    let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    private.iter().zip(private_real).any(|(root, real_root)| root.starts_with(path) || real_root.starts_with(&real))
}

/// The targets of the symlinks directly in `etc` that lead to a file outside the system
/// folders (`/etc/resolv.conf` → `/run/systemd/resolve/stub-resolv.conf`): those files alone.
fn etc_link_targets(etc: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(etc) else { return Vec::new() };
    let system: Vec<&Path> = SYSTEM_READS.iter().map(Path::new).collect();
    let mut targets: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|e| e.path().canonicalize().ok())
        .filter(|t| t.is_file() && !system.iter().any(|s| t.starts_with(s)))
        .collect();
    targets.sort();
    targets
}

/// Credentials kept inside toolchain folders: cargo's registry tokens (and a configuration
/// that holds one: [`super::cargo_config`]), Gradle's properties
/// (signing keys, repository passwords) and Maven's settings (server passwords).
pub fn toolchain_credentials(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let var = |name: &str| env.get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut hidden = Vec::new();
    if let Some(cargo) = var("CARGO_HOME") {
        hidden.push(cargo.join("credentials*"));
    }
    hidden.extend(super::cargo_config::hidden_configs(env));
    if let Some(gradle) = var("GRADLE_USER_HOME") {
        hidden.push(gradle.join("gradle.properties"));
    }
    if let Some(home) = var("HOME") {
        hidden.extend([".gradle/gradle.properties", ".m2/settings.xml", ".m2/settings-security.xml"].map(|rel| home.join(rel)));
    }
    for maven in ["MAVEN_HOME", "M2_HOME"].iter().filter_map(|name| var(name)) {
        hidden.push(maven.join("conf/settings-security.xml"));
    }
    hidden
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn env(pairs: &[(&str, &Path)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.display().to_string())).collect()
    }

    #[test]
    fn the_home_folder_is_not_readable_but_its_toolchains_are() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        for dir in [".cargo/bin", ".rustup", ".pyenv", "notes", ".local/bin"] {
            fs::create_dir_all(home.join(dir)).unwrap();
        }
        let set = ReadSet::resolve(&env(&[("HOME", &home)]), None);
        for granted in [".cargo", ".rustup", ".pyenv", ".local/bin"] {
            assert!(set.readable.contains(&home.join(granted)), "{granted}: {:?}", set.readable);
        }
        assert!(!set.readable.iter().any(|p| p == &home || p.starts_with(home.join("notes"))), "{:?}", set.readable);
        assert!(set.hidden.contains(&home.join(".cargo/credentials*")), "{:?}", set.hidden);
        assert!(set.readable.contains(&PathBuf::from("/usr")) && set.readable.contains(&PathBuf::from("/etc")));
    }

    #[test]
    fn a_toolchain_variable_that_opens_a_private_root_is_ignored() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let rt = tmp.path().join("runner-temp");
        fs::create_dir_all(rt.join("tool")).unwrap();
        fs::create_dir_all(home.join("go")).unwrap();
        let vars = env(&[("HOME", &home), ("GOPATH", &home), ("CARGO_HOME", Path::new("/")), ("JAVA_HOME", tmp.path())]);
        let set = ReadSet::resolve(&vars, Some(&rt));
        assert!(!set.readable.iter().any(|p| p == &home || p == Path::new("/") || p == tmp.path()), "{:?}", set.readable);
        assert!(set.readable.contains(&home.join("go")), "{:?}", set.readable);
        assert!(set.hidden.contains(&rt), "{:?}", set.hidden);
    }

    #[test]
    fn a_resolution_depends_on_its_variables_only_and_is_kept_per_environment() {
        let tmp = tempfile::tempdir().unwrap();
        let (one, two) = (tmp.path().join("one/bin"), tmp.path().join("two/bin"));
        fs::create_dir_all(&one).unwrap();
        fs::create_dir_all(&two).unwrap();
        let mut vars = BTreeMap::from([("PATH".to_string(), one.display().to_string())]);
        let first = ReadSet::resolve(&vars, None);
        vars.insert("UNRELATED_DIR".into(), "/opt".into());
        assert_eq!(ReadSet::resolve(&vars, None), first);
        vars.insert("PATH".into(), two.display().to_string());
        let second = ReadSet::resolve(&vars, None);
        assert!(second.readable.contains(&tmp.path().join("two")) && !second.readable.contains(&tmp.path().join("one")), "{second:?}");
    }

    #[test]
    fn path_entries_are_readable_unless_private() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("tools/bin");
        fs::create_dir_all(&bin).unwrap();
        let home = tmp.path().join("home");
        fs::create_dir_all(home.join(".local/bin")).unwrap();
        fs::create_dir_all(home.join("bin")).unwrap();
        let dirs = [bin.as_path(), Path::new("/tmp"), Path::new("relative/bin"), &home.join(".local/bin"), &home.join("bin")];
        let path = std::env::join_paths(dirs).unwrap();
        let vars = BTreeMap::from([("PATH".to_string(), path.to_string_lossy().into_owned()), ("HOME".into(), home.display().to_string())]);
        let set = ReadSet::resolve(&vars, None);
        assert!(set.readable.contains(&tmp.path().join("tools")), "a bin folder gives its parent: {:?}", set.readable);
        assert!(set.readable.contains(&home.join(".local/bin")) && !set.readable.contains(&home.join(".local")), "{:?}", set.readable);
        assert!(set.readable.contains(&home.join("bin")) && !set.readable.contains(&home), "{:?}", set.readable);
        assert!(!set.readable.iter().any(|p| p == Path::new("/tmp") || p.is_relative()), "{:?}", set.readable);
    }

    #[test]
    fn a_bin_folder_gives_a_toolchain_root_whole_but_only_the_layout_of_a_folder_holding_more() {
        let tmp = tempfile::tempdir().unwrap();
        let (venv, install, wide) = (tmp.path().join("venv"), tmp.path().join("install"), tmp.path().join("wide"));
        for dir in
            [venv.join("bin"), venv.join("lib/python3/site-packages"), install.join("bin"), install.join("lib"), install.join("runs/x")]
        {
            fs::create_dir_all(dir).unwrap();
        }
        fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        fs::write(install.join("secret"), "s").unwrap();
        fs::create_dir_all(wide.join("project")).unwrap();
        let path = std::env::join_paths([venv.join("bin"), install.join("bin"), wide.clone()]).unwrap();
        let vars = BTreeMap::from([("PATH".to_string(), path.to_string_lossy().into_owned())]);
        let set = ReadSet::resolve(&vars, None);
        assert!(set.readable.contains(&venv), "a venv is a toolchain root: {:?}", set.readable);
        assert!(set.readable.contains(&install.join("bin")) && set.readable.contains(&install.join("lib")), "{:?}", set.readable);
        assert!(!set.readable.iter().any(|p| p == &install || p.starts_with(install.join("runs"))), "{:?}", set.readable);
        assert_eq!(set.reasons[&install.join("lib")], format!("the toolchain layout beside {} on PATH", install.join("bin").display()));
        assert_eq!(set.warnings.len(), 2, "{:?}", set.warnings);
        assert!(
            set.warnings[0].contains(&format!("{} holds more than a toolchain (runs, secret)", install.display())),
            "{:?}",
            set.warnings
        );
        assert!(set.warnings[0].contains("read_paths"), "{:?}", set.warnings);
        assert!(set.warnings[1].contains(&format!("PATH entry {} is readable as a whole and holds folders (project)", wide.display())));
    }
}
