//! How the binary is linked, beyond rustc's defaults: each flag only when a probe link with the
//! same compiler, target, flags and linker takes it, so a build never fails on a linker that
//! lacks one (it is only larger in memory).
//!
//! - Hot code first: `link/hot-symbols.txt` lists the functions a typical run executes (made by
//!   `scripts/hot-symbols.sh`); the linker places them together at the start of `.text`, so a
//!   run maps ~1.5 MB of code instead of pages scattered over all of it. Symbol names carry
//!   hashes of the compiler version, `Cargo.lock` and the release profile: with another
//!   compiler the names do not match and nothing moves (no error).
//! - Packed relative relocations (DT_RELR) in a native build on a glibc 2.36+ machine: the loader's
//!   relocation table shrinks from ~0.5 MB to a few KB. Such a binary needs glibc 2.36 or later
//!   where it runs; release binaries are static musl builds and are not affected.
//! - `DRACODE_LINK_MAP=FILE` writes the linker's map (what `scripts/hot-symbols.sh` reads).
//!
//! `DRACODE_PLAIN_LINK=1` turns all of it off.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The list of hot functions, relative to the crate root.
const HOT_SYMBOLS: &str = "link/hot-symbols.txt";

/// Prints the `cargo:` lines for the binary's link flags.
pub fn configure(target: &str) {
    for var in ["DRACODE_PLAIN_LINK", "DRACODE_LINK_MAP", "RUSTC_LINKER", "CARGO_ENCODED_RUSTFLAGS"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed={HOT_SYMBOLS}");
    if std::env::var_os("DRACODE_PLAIN_LINK").is_some() || !target.ends_with("-linux-gnu") {
        return;
    }
    let Some(probe) = Probe::new(target) else { return };
    let mut flags = Vec::new();
    let hot = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join(HOT_SYMBOLS);
    if hot.is_file() {
        let ordering = [format!("-Wl,--symbol-ordering-file={}", hot.display()), "-Wl,--no-warn-symbol-ordering".to_string()];
        if probe.links_with(&ordering) {
            flags.extend(ordering);
        }
    }
    let relr = ["-Wl,-z,pack-relative-relocs".to_string()];
    // The C library checked is the build machine's: only for a binary built to run on it.
    let native = std::env::var("HOST").is_ok_and(|host| host == target);
    if native && glibc_loads_relr() && probe.links_with(&relr) {
        flags.extend(relr);
    }
    if let Some(map) = std::env::var_os("DRACODE_LINK_MAP") {
        flags.push(format!("-Wl,-Map={}", PathBuf::from(map).display()));
    }
    for flag in flags {
        println!("cargo:rustc-link-arg-bins={flag}");
    }
}

/// A tiny program linked the way the binary will be.
struct Probe {
    rustc: String,
    target: String,
    dir: PathBuf,
}

impl Probe {
    fn new(target: &str) -> Option<Probe> {
        let dir = PathBuf::from(std::env::var_os("OUT_DIR")?).join("link-probe");
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(dir.join("probe.rs"), "fn main() {}\n").ok()?;
        let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
        Some(Probe { rustc, target: target.to_string(), dir })
    }

    /// Whether a link with `args` added succeeds without a warning.
    fn links_with(&self, args: &[String]) -> bool {
        let mut cmd = Command::new(&self.rustc);
        cmd.args(["--crate-type", "bin", "--edition", "2021", "--target", &self.target])
            .arg(self.dir.join("probe.rs"))
            .arg("-o")
            .arg(self.dir.join("probe"));
        let encoded = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
        cmd.args(encoded.split('\x1f').filter(|f| !f.is_empty()));
        if let Ok(linker) = std::env::var("RUSTC_LINKER") {
            cmd.arg(format!("-Clinker={linker}"));
        }
        cmd.arg("-Clink-arg=-Wl,--fatal-warnings");
        for arg in args {
            cmd.arg(format!("-Clink-arg={arg}"));
        }
        cmd.output().is_ok_and(|o| o.status.success())
    }
}

/// `getconf GNU_LIBC_VERSION` says `glibc 2.36` or later: its loader reads DT_RELR.
fn glibc_loads_relr() -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else { return false };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.trim().trim_start_matches("glibc ").split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (2, 36)
}
