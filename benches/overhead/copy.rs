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

/// What a batch's setup made, copied into a task's workspace ([`dracode::batch::carry`]) against
/// `cp -a` of the same folder: a build folder of 3,000 files (1,000 of 64 KiB objects, 2,000
/// small text files of which a tenth name the setup's folder, as dep-info files do).
pub fn carry_outputs(root: &Path) {
    let from = root.join("setup-ws");
    let made = from.join("target");
    for i in 0..1_000 {
        let dir = made.join(format!("deps/d{}", i % 50));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("lib{i}.rlib")), vec![0u8; 64 * 1024]).unwrap();
    }
    for i in 0..2_000 {
        let dir = made.join(format!("fingerprint/f{}", i % 100));
        std::fs::create_dir_all(&dir).unwrap();
        let text =
            if i % 10 == 0 { format!("{}/src/lib.rs: {}/src/m.rs\n", from.display(), from.display()) } else { format!("hash {i:016x}\n") };
        std::fs::write(dir.join(format!("dep-{i}.d")), text).unwrap();
    }
    let (mut cp_times, mut our_times) = (Vec::new(), Vec::new());
    for n in 0..9 {
        let target = root.join(format!("carry-cp{n}"));
        std::fs::create_dir_all(&target).unwrap();
        let t = Instant::now();
        assert!(Command::new("cp").arg("-a").arg(&made).arg(&target).status().unwrap().success());
        cp_times.push(t.elapsed());
        std::fs::remove_dir_all(&target).unwrap();

        let to = root.join(format!("carry-ws{n}"));
        std::fs::create_dir_all(&to).unwrap();
        let t = Instant::now();
        let copied = dracode::batch::carry::copy_outputs(&from, &to, &["target".to_string()]).unwrap();
        our_times.push(t.elapsed());
        assert_eq!((copied.files, copied.rewritten), (3_000, 200));
        std::fs::remove_dir_all(&to).unwrap();
    }
    let (cp, ours) = (median_of(cp_times), median_of(our_times));
    println!(
        "setup outputs into a task's workspace, 3,000 files (64 MiB, 200 rewritten): dracode {:.1} ms vs `cp -a` {:.1} ms ({})",
        ms(ours),
        ms(cp),
        ratio(ours, cp, "`cp -a`")
    );
}
