//! What carrying a batch's setup outputs into a task's (or a check's) workspace costs
//! ([`dracode::batch::carry::copy_outputs`]), against `cp -a` of the same tree, in one run.
//!
//! `cargo bench --bench carry` makes three trees in a temporary folder and brings each into a
//! workspace of its own, in interleaved rounds (the order turning from round to round, the file
//! system synced after each copy, untimed; every copy kept until the end, as ext4 without a
//! journal makes each new file slower for ~30 s after many were removed):
//! - `venv`: a 26 MB, 3,000-file virtualenv (`bin/` scripts and `.pth` files naming the
//!   setup's folder, `.py` sources, `.so` extension modules, `dist-info`s, links), two copies
//!   at once as `--jobs 2` makes them: the figure is the time until both are in;
//! - `target`: a Rust `target/` (`deps/` rlibs and rmetas, dep-info files naming the setup's
//!   folder, `.fingerprint/`, `incremental/`, `build/`, test binaries) of 256 MiB, a size
//!   `DRACODE_BENCH_CARRY_TARGET_MIB` changes (the 1 GiB: `=1024`; the cost grows
//!   linearly with it on ext4);
//! - `node_modules`: 20,000 files (80 MB) in 800 packages, `.bin/` links, native addons.
//!
//! Each is timed as `dracode` (the current copy), `before` (the copy as it was before it was made
//! faster, [`before`], kept for this A/B), `cp -a`, and `cp -a --attributes-only` (the same
//! folders and empty files with their modes and times: what any copy pays on this file system
//! before it moves a byte). Every figure is a median, every comparison printed as
//! `ratio X.XX against <baseline>`, for the wall time and for the CPU time (the bench's and its
//! `cp`s', user and system: steadier than the wall time on a busy machine). Before timing, the
//! bench checks once that `dracode` and `before` make the same tree (bytes, modes, times,
//! links). At 256 MiB it needs ~8 GB of disk (the copies are kept).
//!
//! `cargo bench --bench carry -- venv` runs one tree. `DRACODE_BENCH_CARRY_DIR=/some/folder` puts
//! the trees there instead of the temporary folder (to measure another file system: Btrfs or XFS
//! clone files); the file system's type (for ext4, whether it has a journal) and the load
//! average are printed first. `DRACODE_BENCH_CARRY_KEEP=1` keeps the trees for a profiler.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, clippy::print_stderr)] // a bench: a panic is the report

#[path = "carry/before.rs"]
mod before;
#[path = "carry/trees.rs"]
mod trees;

use dracode::batch::carry::Copied;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The ways a tree is brought in, in the order of the first round.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Dracode,
    Before,
    CpA,
    AttributesOnly,
}

const WAYS: [Way; 4] = [Way::Dracode, Way::Before, Way::CpA, Way::AttributesOnly];

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let wants = |tree: &str| only.as_deref().is_none_or(|o| tree.contains(o));
    let tmp = match std::env::var_os("DRACODE_BENCH_CARRY_DIR") {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .expect("temp dir");
    // Kept for a profiler's later runs (`strace -c`, `perf`) when asked.
    let root = &if std::env::var_os("DRACODE_BENCH_CARRY_KEEP").is_some() { tmp.keep() } else { tmp.path().to_path_buf() };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split(' ').next().unwrap_or("?");
    println!("carry bench in {} ({}), {cores} cores, load average {load}", root.display(), fs_type(root));
    let target_mib: u64 = std::env::var("DRACODE_BENCH_CARRY_TARGET_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    if wants("venv") {
        let tree = trees::venv(&root.join("venv"));
        measure(&tree, 2, 9, "venv, 2 copies at once (--jobs 2)");
    }
    if wants("target") {
        let tree = trees::target(&root.join("target"), target_mib);
        measure(&tree, 1, 7, &format!("target/ ({target_mib} MiB)"));
    }
    if wants("node_modules") {
        let tree = trees::node_modules(&root.join("node_modules"));
        measure(&tree, 1, 7, "node_modules");
    }
}

/// Times `rounds` interleaved rounds of each [`Way`] bringing `tree` into `copies` workspaces at
/// once, and prints the medians.
fn measure(tree: &trees::Tree, copies: usize, rounds: usize, what: &str) {
    let made = trees::Made::of(tree);
    println!(
        "{what}: {} files, {} links, {} folders, {:.1} MB, {} files naming the setup's folder",
        made.files,
        made.links,
        made.dirs,
        made.bytes as f64 / 1e6,
        tree.naming_root
    );
    same_tree(tree);
    let mut times: Vec<Vec<Took>> = vec![Vec::new(); WAYS.len()];
    for round in 0..rounds {
        for turn in 0..WAYS.len() {
            let way = (round + turn) % WAYS.len();
            times[way].push(timed(tree, WAYS[way], copies, round));
        }
    }
    let wall: Vec<Duration> = times.iter().map(|t| median_of(t.iter().map(|t| t.wall).collect())).collect();
    let cpu: Vec<Duration> = times.iter().map(|t| median_of(t.iter().map(|t| t.cpu).collect())).collect();
    for (figure, d) in [("wall", &wall), ("CPU", &cpu)] {
        let [ours, before, cp, floor] = [0, 1, 2, 3].map(|i| d[i]);
        println!(
            "  {figure}: dracode {:.0} ms ({}; {}) | before {:.0} ms ({}) | `cp -a` {:.0} ms | `cp -a --attributes-only` {:.0} ms ({})",
            ms(ours),
            ratio(ours, cp, "`cp -a`"),
            ratio(ours, before, "before"),
            ms(before),
            ratio(before, cp, "`cp -a`"),
            ms(cp),
            ms(floor),
            ratio(floor, cp, "`cp -a`"),
        );
    }
}

/// One timed round of `way`: `copies` workspaces at once, each made anew; the time until all
/// are in. The file system is synced afterwards, untimed. The copies stay until the bench ends:
/// ext4 without a journal skips inodes freed in the last 30 s or so at every file it makes, and
/// a copy made right after another was removed can take ten times as long (see the module doc).
fn timed(tree: &trees::Tree, way: Way, copies: usize, round: usize) -> Took {
    let tasks: Vec<PathBuf> = (0..copies).map(|n| tree.setup.with_file_name(format!("r{round}-{}-{n}", way as u8)).join("ws")).collect();
    for task in &tasks {
        std::fs::create_dir_all(task).unwrap();
    }
    let cpu = cpu_time();
    let t = Instant::now();
    std::thread::scope(|scope| {
        for task in &tasks {
            scope.spawn(move || bring(tree, way, task));
        }
    });
    let took = Took { wall: t.elapsed(), cpu: cpu_time() - cpu };
    assert!(Command::new("sync").status().unwrap().success());
    took
}

/// What a round took: wall time, and the CPU time (user and system) of the bench and of the
/// `cp`s it waited for.
#[derive(Clone, Copy)]
struct Took {
    wall: Duration,
    cpu: Duration,
}

/// The CPU time used so far by this process and its waited-for children.
fn cpu_time() -> Duration {
    let of = |who| {
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid rusage to fill.
        assert_eq!(unsafe { libc::getrusage(who, &mut usage) }, 0);
        let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        tv(usage.ru_utime) + tv(usage.ru_stime)
    };
    of(libc::RUSAGE_SELF) + of(libc::RUSAGE_CHILDREN)
}

/// Brings `tree` into the workspace `task` as `way` does.
fn bring(tree: &trees::Tree, way: Way, task: &Path) {
    let paths = [tree.name.to_string()];
    let check = |copied: Copied| assert_eq!((copied.files, copied.rewritten), (tree.files, tree.naming_root), "{copied:?}");
    match way {
        Way::Dracode => check(dracode::batch::carry::copy_outputs(&tree.setup, task, &paths).unwrap()),
        Way::Before => check(before::copy_outputs(&tree.setup, task, &paths).unwrap()),
        Way::CpA | Way::AttributesOnly => {
            let mut cp = Command::new("cp");
            cp.arg("-a");
            if way == Way::AttributesOnly {
                cp.arg("--attributes-only");
            }
            assert!(cp.arg(tree.setup.join(tree.name)).arg(task).status().unwrap().success());
        }
    }
}

/// Asserts that the current copy and the one before make the same tree (bytes, modes, times,
/// links), in the same workspace one after the other.
fn same_tree(tree: &trees::Tree) {
    let task = tree.setup.with_file_name("same").join("ws");
    std::fs::create_dir_all(&task).unwrap();
    bring(tree, Way::Before, &task);
    let was = task.with_file_name("before");
    std::fs::rename(task.join(tree.name), &was).unwrap();
    bring(tree, Way::Dracode, &task);
    trees::assert_same(&was, &task.join(tree.name));
}

/// The file system `path` is on, by name where known.
fn fs_type(path: &Path) -> String {
    #[allow(clippy::unnecessary_cast)] // `f_type` is not an i64 on every target
    let kind = rustix::fs::statfs(path).map_or(0, |s| s.f_type as i64);
    match kind {
        0xEF53 => match ext4_journal(path) {
            Some(true) => "ext4 with a journal".to_string(),
            Some(false) => "ext4 without a journal".to_string(),
            None => "ext4".to_string(),
        },
        0x5846_5342 => "XFS".to_string(),
        0x9123_683E => "Btrfs".to_string(),
        0x0102_1994 => "tmpfs".to_string(),
        _ => format!("file system type {kind:#x}"),
    }
}

/// Whether the ext4 file system `path` is on has a journal (`/sys/fs/ext4/DEV/journal_task`
/// is `<none>` without one); `None` when that cannot be read.
fn ext4_journal(path: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let device = std::fs::read_link(format!("/sys/dev/block/{}:{}", rustix::fs::major(dev), rustix::fs::minor(dev))).ok()?;
    let task = std::fs::read_to_string(Path::new("/sys/fs/ext4").join(device.file_name()?).join("journal_task")).ok()?;
    Some(task.trim() != "<none>")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The median of `times`.
fn median_of(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// `ratio X.XX against BASELINE`, as every bench prints a comparison.
fn ratio(ours: Duration, baseline: Duration, against: &str) -> String {
    format!("ratio {:.2} against {against}", ours.as_secs_f64() / baseline.as_secs_f64())
}
