//! `copy` workspace creation against `cp -r` of the same folder: a git repository of 2,000
//! source files with a `.gitignore`d `junk/` of 1,000 files (a build folder). dracode copies the
//! 2,000 files (leaving `junk/` and `.git` out) and records its baseline; `cp -r` copies the
//! whole folder as it is, `junk/` and `.git` included.

use super::{median_of, ms, ratio};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// Files in the repository; files in its ignored `junk/`.
const FILES: usize = 2_000;
const JUNK: usize = 1_000;

/// Interleaved rounds of both, medians, and the ratio against `cp -r`.
pub fn copy_creation(root: &Path) {
    let repo = root.join("copy-src");
    super::make_repo(&repo, FILES);
    std::fs::write(repo.join(".gitignore"), "junk/\n").unwrap();
    super::git(&repo, &["add", ".gitignore"]);
    super::git(&repo, &["commit", "-qm", "ignore junk"]);
    std::fs::create_dir_all(repo.join("junk")).unwrap();
    for i in 0..JUNK {
        std::fs::write(repo.join(format!("junk/o{i}.o")), vec![b'x'; 4096]).unwrap();
    }
    let (mut cp_times, mut our_times) = (Vec::new(), Vec::new());
    // Interleaved, so page-cache and disk effects hit both alike.
    for n in 0..9 {
        let target = root.join(format!("cp{n}"));
        let t = Instant::now();
        assert!(Command::new("cp").arg("-r").arg(&repo).arg(&target).status().unwrap().success());
        cp_times.push(t.elapsed());
        std::fs::remove_dir_all(&target).unwrap();

        let t = Instant::now();
        let ws = dracode::batch::workspace::Workspace::prepare(&repo, dracode::manifest::Isolation::Copy, "HEAD", None).unwrap();
        our_times.push(t.elapsed());
        assert!(ws.root.join("src/m0/f0.rs").exists() && !ws.root.join("junk").exists());
        drop(ws);
    }
    let (cp, ours) = (median_of(cp_times), median_of(our_times));
    println!(
        "copy workspace creation, {FILES} files + {JUNK} gitignored in junk/: dracode {:.1} ms (the {FILES} files, its own baseline \
         repository) vs `cp -r` {:.1} ms (everything: junk/ and .git too) ({})",
        ms(ours),
        ms(cp),
        ratio(ours, cp, "`cp -r`")
    );
}
