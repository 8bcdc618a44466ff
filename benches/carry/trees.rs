//! The carry bench's synthetic setup outputs: a virtualenv, a Rust `target/` and a
//! `node_modules`, shaped like real ones (sizes, folder depth, text naming the setup's folder,
//! binaries, empty files, links), made the same on every run.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// One tree a setup made.
pub struct Tree {
    /// The setup's workspace; the tree is its entry `name`.
    pub setup: PathBuf,
    /// The tree's name in that workspace.
    pub name: &'static str,
    /// Files and links in it (what `Copied::files` counts).
    pub files: u64,
    /// Files in it whose text names the setup's workspace.
    pub naming_root: u64,
}

/// Writes a tree's files, counting them.
struct Maker {
    setup: PathBuf,
    base: PathBuf,
    root: String,
    files: u64,
    naming_root: u64,
    seed: u64,
}

impl Maker {
    fn new(dir: &Path, name: &str) -> Maker {
        let setup = dir.join("setup");
        let base = setup.join(name);
        fs::create_dir_all(&base).unwrap();
        Maker { root: setup.display().to_string(), setup, base, files: 0, naming_root: 0, seed: 0x9E37_79B9_7F4A_7C15 }
    }

    /// A number in `lo..hi`, the same on every run.
    fn pick(&mut self, lo: usize, hi: usize) -> usize {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        lo + (self.seed % (hi - lo) as u64) as usize
    }

    /// Writes `rel` with `content` and `mode`.
    fn write(&mut self, rel: &str, content: &[u8], mode: u32) {
        let path = self.base.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, content).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        self.files += 1;
    }

    /// A text file of about `len` bytes; naming the setup's folder when `names_root`.
    fn text(&mut self, rel: &str, len: usize, names_root: bool) {
        let mut text = String::with_capacity(len + 200);
        if names_root {
            text.push_str(&format!("#!{}/bin/tool\n# made in {}\n", self.root, self.root));
            self.naming_root += 1;
        }
        let mut line = 0;
        while text.len() < len {
            text.push_str(&format!("def function_{line}(value, other=None):\n    return value + {line}  # {rel}\n"));
            line += 1;
        }
        self.write(rel, text.as_bytes(), if names_root { 0o755 } else { 0o644 });
    }

    /// A binary file of `len` bytes (an ELF header, then bytes that look random).
    fn binary(&mut self, rel: &str, len: usize) {
        let mut bytes = Vec::with_capacity(len + 8);
        bytes.extend_from_slice(b"\x7fELF\x02\x01\x01\0");
        while bytes.len() < len {
            self.pick(0, 2);
            bytes.extend_from_slice(&self.seed.to_le_bytes());
        }
        bytes.truncate(len);
        self.write(rel, &bytes, 0o755);
    }

    /// A link `rel` to `target`.
    fn link(&mut self, rel: &str, target: &str) {
        let path = self.base.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, path).unwrap();
        self.files += 1;
    }

    fn done(self, name: &'static str) -> Tree {
        Tree { setup: self.setup, name, files: self.files, naming_root: self.naming_root }
    }
}

/// A virtualenv of 26 MB in 3,000 files: scripts and `.pth` files naming the setup's folder,
/// 60 packages of `.py` files, 36 extension modules, `dist-info`s, links to the interpreter.
pub fn venv(dir: &Path) -> Tree {
    let mut m = Maker::new(dir, ".venv");
    let root = m.root.clone();
    m.write("pyvenv.cfg", format!("home = /usr/bin\ncommand = /usr/bin/python3 -m venv {root}/.venv\n").as_bytes(), 0o644);
    m.naming_root += 1;
    for script in ["activate", "activate.csh", "activate.fish", "Activate.ps1"] {
        m.text(&format!("bin/{script}"), 2_000, true);
    }
    for n in 0..26 {
        m.text(&format!("bin/tool{n}"), 300, true);
    }
    m.link("bin/python", "/usr/bin/python3");
    m.link("bin/python3", "python");
    m.link("bin/python3.12", "python");
    let site = "lib/python3.12/site-packages";
    for p in 0..60 {
        for f in 0..43 {
            let len = m.pick(500, 10_500);
            m.text(&format!("{site}/pkg{p}/sub{}/mod{f}.py", f % 3), len, false);
        }
        if p % 5 < 3 {
            let len = m.pick(100_000, 560_000);
            m.binary(&format!("{site}/pkg{p}/_speedups.cpython-312-x86_64-linux-gnu.so"), len);
        }
        for file in ["METADATA", "RECORD", "WHEEL", "INSTALLER", "top_level.txt"] {
            let len = m.pick(40, 3_000);
            m.text(&format!("{site}/pkg{p}-1.{p}.dist-info/{file}"), len, false);
        }
        // Editable installs: where the source is.
        m.text(&format!("{site}/pkg{p}-1.{p}.dist-info/direct_url.json"), 100, p % 10 == 0);
    }
    for (n, names_root) in [(0, true), (1, true), (2, false), (3, false)] {
        m.text(&format!("{site}/extra{n}.pth"), 60, names_root);
    }
    m.done(".venv")
}

/// A Rust `target/` of about `mib` MiB: per 256 MiB, 120 crates' rlibs, rmetas and dep-info
/// files (naming the setup's folder), their `.fingerprint/`s (an empty `invoked.timestamp`
/// each), 15 build scripts with their output, 3 incremental sessions, 2 test binaries.
pub fn target(dir: &Path, mib: u64) -> Tree {
    let mut m = Maker::new(dir, "target");
    let scale = |n: u64| ((n * mib).div_ceil(256)) as usize;
    for c in 0..scale(120) {
        let len = m.pick(256 << 10, 1_792 << 10);
        m.binary(&format!("debug/deps/libcrate{c}-0123456789abcdef.rlib"), len);
        let len = m.pick(64 << 10, 448 << 10);
        m.binary(&format!("debug/deps/libcrate{c}-0123456789abcdef.rmeta"), len);
        m.text(&format!("debug/deps/crate{c}-0123456789abcdef.d"), 1_500, true);
        m.binary(&format!("debug/.fingerprint/crate{c}-0123456789abcdef/dep-lib-crate{c}"), 120);
        m.text(&format!("debug/.fingerprint/crate{c}-0123456789abcdef/lib-crate{c}"), 16, false);
        m.text(&format!("debug/.fingerprint/crate{c}-0123456789abcdef/lib-crate{c}.json"), 600, false);
        m.write(&format!("debug/.fingerprint/crate{c}-0123456789abcdef/invoked.timestamp"), b"", 0o644);
    }
    for b in 0..scale(15) {
        m.binary(&format!("debug/build/sys{b}-fedcba9876543210/build-script-build"), 2 << 20);
        m.text(&format!("debug/build/sys{b}-fedcba9876543211/output"), 400, true);
        m.text(&format!("debug/build/sys{b}-fedcba9876543211/root-output"), 80, true);
        m.write(&format!("debug/build/sys{b}-fedcba9876543211/stderr"), b"", 0o644);
        m.text(&format!("debug/build/sys{b}-fedcba9876543211/out/bindings.rs"), 20_000, false);
    }
    for s in 0..scale(3) {
        for o in 0..120 {
            let len = m.pick(32 << 10, 288 << 10);
            m.binary(&format!("debug/incremental/crate{s}-1abc/s-h0-working/{o:02x}.o"), len);
        }
        m.binary(&format!("debug/incremental/crate{s}-1abc/s-h0-working/dep-graph.bin"), 1 << 20);
        m.binary(&format!("debug/incremental/crate{s}-1abc/s-h0-working/query-cache.bin"), 1 << 20);
    }
    for t in 0..scale(2) {
        m.binary(&format!("debug/deps/tests{t}-0123456789abcdef"), 20 << 20);
    }
    m.write("CACHEDIR.TAG", b"Signature: 8a477f597d28d172789f06886806bc55\n", 0o644);
    m.done("target")
}

/// A `node_modules` of 20,000 files (80 MB): 800 packages (200 of them scoped) of 25 files,
/// 5 native addons, 60 `.bin/` links; 20 files naming the setup's folder.
pub fn node_modules(dir: &Path) -> Tree {
    let mut m = Maker::new(dir, "node_modules");
    for p in 0..800 {
        let pkg = if p % 4 == 0 { format!("@scope{}/pkg{p}", p % 10) } else { format!("pkg{p}") };
        m.text(&format!("{pkg}/package.json"), 1_500, p % 40 == 0);
        for (file, lo, hi) in [("README.md", 2_000, 8_000), ("LICENSE", 1_000, 1_200), ("CHANGELOG.md", 1_000, 5_000)] {
            let len = m.pick(lo, hi);
            m.text(&format!("{pkg}/{file}"), len, false);
        }
        for f in 0..12 {
            let len = m.pick(1_000, 8_000);
            m.text(&format!("{pkg}/lib/{}/part{f}.js", f % 2), len, false);
        }
        for f in 0..6 {
            let len = m.pick(500, 3_000);
            m.text(&format!("{pkg}/types/part{f}.d.ts"), len, false);
        }
        for (file, lo, hi) in [("index.js", 5_000, 15_000), ("index.js.map", 10_000, 30_000), ("index.min.js", 3_000, 7_000)] {
            let len = m.pick(lo, hi);
            m.text(&format!("{pkg}/dist/{file}"), len, false);
        }
        if p % 160 == 0 {
            m.binary(&format!("{pkg}/build/Release/addon.node"), 1 << 20);
        }
        if p % 13 == 0 && m.files < 20_000 {
            m.link(&format!(".bin/tool{p}"), &format!("../{pkg}/dist/index.js"));
        }
    }
    m.done("node_modules")
}

/// What a tree holds.
#[derive(Default)]
pub struct Made {
    pub files: u64,
    pub links: u64,
    pub dirs: u64,
    pub bytes: u64,
}

impl Made {
    /// Counts what is in `tree`.
    pub fn of(tree: &Tree) -> Made {
        let mut made = Made::default();
        made.add(&tree.setup.join(tree.name));
        made
    }

    fn add(&mut self, dir: &Path) {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.path().symlink_metadata().unwrap();
            if meta.is_dir() {
                self.dirs += 1;
                self.add(&entry.path());
            } else if meta.is_symlink() {
                self.links += 1;
            } else {
                self.files += 1;
                self.bytes += meta.len();
            }
        }
    }
}

/// Asserts that the trees `a` and `b` hold the same entries with the same bytes, modes,
/// modification times and link targets.
pub fn assert_same(a: &Path, b: &Path) {
    let names = |dir: &Path| {
        let mut names: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        names
    };
    let (here, there) = (names(a), names(b));
    assert_eq!(here, there, "{}", a.display());
    for name in here {
        let (x, y) = (a.join(&name), b.join(&name));
        let (mx, my) = (x.symlink_metadata().unwrap(), y.symlink_metadata().unwrap());
        assert_eq!(mx.mode(), my.mode(), "{}", y.display());
        if mx.is_dir() {
            assert_same(&x, &y);
        } else if mx.is_symlink() {
            assert_eq!(fs::read_link(&x).unwrap(), fs::read_link(&y).unwrap(), "{}", y.display());
        } else {
            assert_eq!((mx.mtime(), mx.mtime_nsec()), (my.mtime(), my.mtime_nsec()), "{}", y.display());
            assert!(fs::read(&x).unwrap() == fs::read(&y).unwrap(), "{} differs", y.display());
        }
    }
}
