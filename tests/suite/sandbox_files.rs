//! Issue 8: what a confined command may read and write.

use crate::support::sandbox::{Scratch, supported};
use dracode_sandbox::SandboxMode;

#[tokio::test]
async fn sandbox_writes_only_inside_the_writable_roots() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let policy = s.policy(SandboxMode::WorkspaceWrite);
    let script = format!(
        "echo in > inside.txt && mkdir -p sub/deep && echo x > sub/deep/f && echo t > \"$TMPDIR/t\" && echo ok-inside; \
         echo x > {out}/new.txt; echo x >> {out}/existing.txt; rm {out}/existing.txt; echo x > /etc/dracode-test; \
         echo x > $HOME/planted; echo discard > /dev/null && echo ok-devnull; echo to-stderr >&2; echo via-dev-stderr > /dev/stderr",
        out = s.outside.display()
    );
    let f = s.sh(&policy, &script).await;
    assert!(f.output.contains("ok-inside") && f.output.contains("ok-devnull") && f.output.contains("to-stderr"), "{}", f.output);
    assert!(f.output.contains("via-dev-stderr"), "{}", f.output);
    assert_eq!(std::fs::read_to_string(s.ws.join("sub/deep/f")).unwrap(), "x\n");
    assert!(s.tmp.join("t").exists());
    assert!(!s.outside.join("new.txt").exists(), "{}", f.output);
    assert_eq!(std::fs::read_to_string(s.outside.join("existing.txt")).unwrap(), "outside");
    assert!(!std::path::Path::new("/etc/dracode-test").exists());
    assert!(!s.home.join("planted").exists());
    assert_eq!(f.output.matches("Permission denied").count(), 5, "{}", f.output);
}

#[tokio::test]
async fn sandbox_hides_credentials_but_not_the_system() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let policy = s.policy(SandboxMode::WorkspaceWrite);
    let f = s
        .sh(
            &policy,
            "cat $HOME/.ssh/id_rsa; cat $HOME/.git-credentials; cat $HOME/.cargo/credentials.toml; \
             cat $HOME/.cargo/config.toml; test -x /usr/bin/env && echo usr-ok; head -c 4 /etc/passwd; echo; \
             cat $HOME/notes.txt; ls $HOME",
        )
        .await;
    // Reads are an allowlist: HOME is neither readable nor listable, only its toolchain folders
    // (`.cargo`) are, and the credentials inside those stay hidden.
    for secret in ["PRIVATE KEY", "TOKEN", "public notes"] {
        assert!(!f.output.contains(secret), "{secret} leaked:\n{}", f.output);
    }
    assert_eq!(f.output.matches("Permission denied").count(), 5, "{}", f.output);
    assert!(f.output.contains("[build]") && f.output.contains("usr-ok"), "{}", f.output);
    assert!(f.output.contains("root"), "/etc/passwd is readable: {}", f.output);
    assert!(!f.output.contains("notes.txt\n"), "HOME cannot be listed: {}", f.output);
}

#[tokio::test]
async fn sandbox_read_only_mode_cannot_create_in_the_workspace() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    std::fs::write(s.ws.join("kept.txt"), "kept").unwrap();
    let policy = s.policy(SandboxMode::ReadOnly);
    let f = s.sh(&policy, "echo x > new.txt; echo y > kept.txt; rm kept.txt; cat kept.txt; echo t > \"$TMPDIR/t\" && echo tmp-ok").await;
    assert!(!s.ws.join("new.txt").exists(), "{}", f.output);
    assert_eq!(std::fs::read_to_string(s.ws.join("kept.txt")).unwrap(), "kept");
    assert!(f.output.contains("kept") && f.output.contains("tmp-ok"), "{}", f.output);
}

#[tokio::test]
async fn sandbox_git_works_inside_the_workspace() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let policy = s.policy(SandboxMode::WorkspaceWrite);
    let f = s
        .sh(
            &policy,
            "git init -q . && echo hello > a.txt && git add a.txt && \
             git -c user.name=t -c user.email=t@example.com commit -q -m first && git log --oneline | wc -l",
        )
        .await;
    assert_eq!(f.exit_code, Some(0), "{}", f.output);
    assert_eq!(f.output.trim(), "1");
}

#[tokio::test]
async fn sandbox_protects_a_hidden_git_dir_but_not_the_objects_put_back() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let git = s.outside.join("repo/.git");
    for dir in ["objects/ab", "hooks", "refs/heads"] {
        std::fs::create_dir_all(git.join(dir)).unwrap();
    }
    std::fs::write(git.join("config"), "[http]\n\textraheader = AUTHORIZATION: basic SECRET\n").unwrap();
    let mut policy = s.policy(SandboxMode::WorkspaceWrite);
    policy.hidden.push(git.clone());
    policy.readable.push(git.join("objects"));
    policy.writable.push(git.join("objects"));
    let script = format!(
        "cat {g}/config; echo evil > {g}/hooks/pre-commit; echo x > {g}/refs/heads/main; echo obj > {g}/objects/ab/cd && cat {g}/objects/ab/cd",
        g = git.display()
    );
    let f = s.sh(&policy, &script).await;
    assert!(!f.output.contains("SECRET"), "{}", f.output);
    assert!(!git.join("hooks/pre-commit").exists() && !git.join("refs/heads/main").exists(), "{}", f.output);
    assert_eq!(std::fs::read_to_string(git.join("objects/ab/cd")).unwrap(), "obj\n");
    assert!(f.output.contains("obj"), "{}", f.output);
}

#[tokio::test]
async fn sandbox_off_is_not_confined() {
    let s = Scratch::new();
    let policy = s.policy(SandboxMode::Off);
    let f = s.sh(&policy, &format!("echo x > {}/new.txt && cat $HOME/.ssh/id_rsa", s.outside.display())).await;
    assert_eq!(f.exit_code, Some(0), "{}", f.output);
    assert!(f.output.contains("PRIVATE KEY"));
}
