//! Issue 17: no socket paths out, nothing inherited, a session of its own. Unix sockets only
//! inside the command's folders or named in `unix_sockets`; TCP only to the task's proxy; no
//! descriptor of dracode's, no controlling terminal, no `TIOCSTI`.
//!
//! The listeners are the test's own (bound to 127.0.0.1 or in a folder outside the sandbox);
//! the commands run under the real supervisor (`Scratch`) or the real binary with a scripted
//! model (`replay`). Without python3 the tests that need it print why and return.

use crate::support::cli::{finished, git_repo, read_jsonl};
use crate::support::sandbox::{Scratch, supported};
use dracode_sandbox::SandboxMode;
use dracode_sandbox::incidents::Report;
use serde_json::Value;
use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn python() -> bool {
    let found = std::process::Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success());
    if !found {
        eprintln!("skipping: python3 is not installed");
    }
    found
}

/// A listener recording every byte it receives, one `<connection>` marker per connection.
fn recorder<L: Send + 'static, S: Read + Send + 'static>(listener: L, accept: fn(&L) -> Option<S>) -> Arc<Mutex<Vec<u8>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = got.clone();
    std::thread::spawn(move || {
        while let Some(mut stream) = accept(&listener) {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = stream.read_to_end(&mut buf);
                let mut seen = seen.lock().unwrap();
                seen.extend_from_slice(b"<connection>");
                seen.extend(buf);
            });
        }
    });
    got
}

fn unix_recorder(path: &Path) -> Arc<Mutex<Vec<u8>>> {
    let listener = UnixListener::bind(path).unwrap();
    recorder(listener, |l| l.accept().ok().map(|(s, _)| s))
}

fn tcp_recorder() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (port, recorder(listener, |l| l.accept().ok().map(|(s, _)| s)))
}

/// What `got` holds once the listener threads had a moment.
fn received(got: &Arc<Mutex<Vec<u8>>>) -> String {
    std::thread::sleep(Duration::from_millis(300));
    String::from_utf8_lossy(&got.lock().unwrap()).into_owned()
}

/// What `got` holds once it is `expected`, or after 5 s (a loaded machine delays the threads).
fn received_eventually(got: &Arc<Mutex<Vec<u8>>>, expected: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let text = String::from_utf8_lossy(&got.lock().unwrap()).into_owned();
        if text == expected || std::time::Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A python3 snippet that connects a Unix stream socket to `path` and sends `data`, printing
/// `ok` or the error.
fn py_unix_send(path: &Path, data: &str) -> String {
    format!(
        "python3 -c 'import socket\ns=socket.socket(socket.AF_UNIX)\ntry:\n  s.connect(\"{}\"); s.sendall(b\"{data}\"); print(\"{data}-ok\")\nexcept OSError as e: print(\"{data}-error\", e)'",
        path.display()
    )
}

fn denied_hosts(reports: &[Report]) -> Vec<(String, u16)> {
    reports
        .iter()
        .filter_map(|r| match r {
            Report::NetworkDenied { host, port, .. } => Some((host.clone(), *port)),
            Report::LimitReached { .. } => None,
        })
        .collect()
}

#[tokio::test]
async fn sandbox_a_unix_socket_outside_the_workspace_receives_nothing() {
    if !supported() || !python() {
        return;
    }
    let s = Scratch::new();
    let socket = s.outside.join("docker.sock");
    let got = unix_recorder(&socket);
    // Directly, and through a symlink in the workspace (the real location decides).
    std::os::unix::fs::symlink(&socket, s.ws.join("link.sock")).unwrap();
    let mut script = format!("{}; {}", py_unix_send(&socket, "stolen"), py_unix_send(Path::new("link.sock"), "linked"));
    script.push_str(&format!(
        "; if command -v curl >/dev/null; then curl -s -m 3 --unix-socket {} -d stolen-curl http://x/containers/create; echo curl-rc=$?; fi",
        socket.display()
    ));
    let f = s.sh(&s.policy(SandboxMode::WorkspaceWrite), &script).await;
    assert!(f.output.contains("stolen-error [Errno 13] Permission denied"), "{}", f.output);
    assert!(f.output.contains("linked-error [Errno 13] Permission denied"), "{}", f.output);
    assert!(!f.output.contains("curl-rc=0"), "{}", f.output);
    assert_eq!(received(&got), "", "the outside socket received data");
    let denied = denied_hosts(&f.reports);
    assert!(denied.contains(&(socket.display().to_string(), 0)), "{:?}", f.reports);
    let Report::NetworkDenied { command, .. } = &f.reports[0] else { panic!("{:?}", f.reports) };
    assert!(command.contains("python3"), "{command}");
}

#[tokio::test]
async fn sandbox_unix_sockets_of_the_workspace_tmpdir_and_unix_sockets_work() {
    if !supported() || !python() {
        return;
    }
    let s = Scratch::new();
    let listed = s.outside.join("listed.sock");
    let got = unix_recorder(&listed);
    let mut policy = s.policy(SandboxMode::WorkspaceWrite);
    policy.unix_sockets = vec![listed.clone()];
    // A server and a client, both confined: one socket in the workspace (by a relative path),
    // one in TMPDIR; then the listed socket outside; then a socket pair.
    let server = "import socket,sys\nl=socket.socket(socket.AF_UNIX); l.bind(sys.argv[1]); l.listen()\nfor _ in range(1):\n  c,_=l.accept(); print(\"server got\", c.recv(100).decode(), flush=True)";
    let script = format!(
        "python3 -c '{server}' ws.sock & python3 -c '{server}' $TMPDIR/t.sock & \
         for i in $(seq 100); do [ -S ws.sock ] && [ -S $TMPDIR/t.sock ] && break; sleep 0.1; done; {}; {}; {}; \
         python3 -c 'import socket\na,b=socket.socketpair(); a.send(b\"x\"); print(\"pair\", b.recv(1).decode())'; wait",
        py_unix_send(Path::new("ws.sock"), "in-ws"),
        py_unix_send(&s.tmp.join("t.sock"), "in-tmp"),
        py_unix_send(&listed, "listed"),
    );
    let f = s.sh(&policy, &script).await;
    for expected in ["in-ws-ok", "in-tmp-ok", "server got in-ws", "server got in-tmp", "listed-ok", "pair x"] {
        assert!(f.output.contains(expected), "{expected} missing:\n{}", f.output);
    }
    assert_eq!(received_eventually(&got, "<connection>listed"), "<connection>listed");
    assert_eq!(f.reports, []);
}

#[tokio::test]
async fn sandbox_posix_semaphores_work_for_multiprocessing() {
    if !supported() || !python() {
        return;
    }
    let s = Scratch::new();
    let script = "python3 -c 'import multiprocessing\nl=multiprocessing.Lock()\nwith l: print(\"locked\")' 2>&1";
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let f = s.sh(&s.policy(mode), script).await;
        assert!(f.output.contains("locked"), "{mode:?}: {}", f.output);
    }
}

#[tokio::test]
async fn sandbox_tcp_reaches_only_the_proxy_and_refusals_are_reported() {
    if !supported() || !python() {
        return;
    }
    let s = Scratch::new();
    let (proxy, proxy_got) = tcp_recorder();
    let (other, other_got) = tcp_recorder();
    let send = |port: u16| {
        format!(
            "python3 -c 'import socket\ntry:\n  socket.create_connection((\"127.0.0.1\", {port}), 3).sendall(b\"to-{port}\"); print(\"{port}-ok\")\nexcept OSError as e: print(\"{port}-error\", e)'"
        )
    };
    let udp = "python3 -c 'import socket\ntry:\n  socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"q\", (\"127.0.0.1\", 53)); print(\"udp-ok\")\nexcept OSError as e: print(\"udp-error\", e)'";
    let script = format!("{}; {}; {udp}", send(proxy), send(other));

    let mut policy = s.policy(SandboxMode::WorkspaceWrite);
    let f = s.sh(&policy, &script).await;
    assert!(f.output.contains(&format!("{proxy}-error")) && f.output.contains(&format!("{other}-error")), "{}", f.output);
    assert!(f.output.contains("udp-error"), "{}", f.output);

    policy.proxy = Some(format!("127.0.0.1:{proxy}").parse().unwrap());
    let f = s.sh(&policy, &script).await;
    assert!(f.output.contains(&format!("{proxy}-ok")), "{}", f.output);
    assert!(f.output.contains(&format!("{other}-error [Errno 13] Permission denied")), "{}", f.output);
    assert!(f.output.contains("udp-error [Errno 13]"), "{}", f.output);
    let expected = format!("<connection>to-{proxy}");
    assert_eq!(received_eventually(&proxy_got, &expected), expected);
    assert_eq!(received(&other_got), "");
    assert_eq!(denied_hosts(&f.reports), [("127.0.0.1".to_string(), other), ("udp".to_string(), 0)]);
}

#[tokio::test]
async fn sandbox_refuses_unix_datagrams_tcp_fast_open_and_sctp() {
    if !supported() || !python() {
        return;
    }
    let s = Scratch::new();
    let (port, got) = tcp_recorder();
    let mut policy = s.policy(SandboxMode::WorkspaceWrite);
    policy.proxy = Some(format!("127.0.0.1:{port}").parse().unwrap());
    let script = format!(
        "python3 -c 'import socket\nfor name, make in [(\"dgram\", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)), \
         (\"dgram-pair\", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)), \
         (\"fastopen\", lambda: socket.socket().sendto(b\"x\", 0x20000000, (\"127.0.0.1\", {port}))), \
         (\"sctp\", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132))]:\n  \
         try:\n    make(); print(name, \"allowed\")\n  except OSError as e: print(name, \"error\", e.errno)'"
    );
    let f = s.sh(&policy, &script).await;
    for name in ["dgram", "dgram-pair", "fastopen", "sctp"] {
        assert!(f.output.contains(&format!("{name} error 1\n")), "{name}: {}", f.output);
    }
    assert_eq!(received(&got), "");
}

/// A client whose threads flip the address of a pending `connect` between an allowed socket
/// and a denied one, then a symlink in the workspace between the two: the broker reads the
/// address once and connects through the file it checked, so the denied listener never gets a
/// connection.
#[tokio::test]
async fn sandbox_connect_address_races_never_reach_a_denied_socket() {
    if !supported() || !python() {
        return;
    }
    let s = Scratch::new();
    let allowed = s.ws.join("a.sock");
    let denied = s.outside.join("d.sock");
    let allowed_got = unix_recorder(&allowed);
    let denied_got = unix_recorder(&denied);
    let client = format!(
        "import ctypes, socket, struct, threading\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         paths = [{allowed:?}.encode(), {denied:?}.encode()]\n\
         buf = ctypes.create_string_buffer(110)\n\
         addrs = [struct.pack(\"H\", socket.AF_UNIX) + p + bytes(108 - len(p)) for p in paths]\n\
         stop = False\n\
         def flip():\n  i = 0\n  while not stop:\n    ctypes.memmove(buf, addrs[i % 2], 110); i += 1\n\
         threads = [threading.Thread(target=flip) for _ in range(2)]\n\
         [t.start() for t in threads]\n\
         ok = 0\n\
         for _ in range(300):\n  s = socket.socket(socket.AF_UNIX)\n  ok += libc.connect(s.fileno(), buf, 110) == 0\n  s.close()\n\
         stop = True\n\
         [t.join() for t in threads]\n\
         import os\n\
         def swap():\n  i = 0\n  while not stop:\n    os.symlink(paths[i % 2], \"next.sock\"); os.replace(\"next.sock\", \"flip.sock\"); i += 1\n\
         os.symlink(paths[0], \"flip.sock\"); stop = False; swapper = threading.Thread(target=swap); swapper.start()\n\
         for _ in range(300):\n  s = socket.socket(socket.AF_UNIX)\n  try: s.connect(\"flip.sock\"); ok += 1\n  except OSError: pass\n  s.close()\n\
         stop = True; swapper.join()\n\
         print(\"connected\", ok)",
        allowed = allowed.display().to_string(),
        denied = denied.display().to_string(),
    );
    let f = s.sh(&s.policy(SandboxMode::WorkspaceWrite), &format!("python3 -c '{client}'")).await;
    assert!(f.output.contains("connected"), "{}", f.output);
    assert_eq!(received(&denied_got), "", "a flipped address reached the denied socket:\n{}", f.output);
    assert!(received(&allowed_got).contains("<connection>"), "no connection at all: {}", f.output);
}

/// A repository, a manifest whose one task `t` runs `commands` with a scripted model, and the
/// events of `dracode run` started by `sh -c "<prefix>; exec dracode run …"`.
fn run_replay(root: &Path, commands: &[String], fields: &str, prefix: &str) -> Vec<Value> {
    git_repo(&root.join("repo"), &[("README.md", "project\n")]);
    let turns = crate::support::cli::shell_turns(commands, 20, "done");
    std::fs::write(root.join("replay.json"), turns.to_string()).unwrap();
    let manifest = format!(
        "[defaults]\nprovider = \"replay\"\nreplay = \"replay.json\"\nrepo = \"repo\"\nisolation = \"copy\"\nrequire_change = false\n{fields}\n\
         [[tasks]]\nid = \"t\"\nprompt = \"x\"\n"
    );
    std::fs::write(root.join("m.toml"), manifest).unwrap();
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{prefix}; exec \"$0\" run m.toml --out out"))
        .arg(env!("CARGO_BIN_EXE_dracode"))
        .current_dir(root)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root)
        .status()
        .unwrap();
    assert!(status.code().is_some(), "dracode was killed: {status:?}");
    read_jsonl(&root.join("out/results.jsonl"))
}

fn outputs(events: &[Value]) -> Vec<String> {
    events.iter().filter(|e| e["type"] == "tool.completed").map(|e| e["output"].as_str().unwrap_or("").to_string()).collect()
}

#[test]
fn attack_inherited_descriptors_the_session_and_the_terminal() {
    if !supported() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::write(root.join("secret.txt"), "wrapper-secret-5521\n").unwrap();
    let commands = [
        "cat <&7; echo read-rc=$?".to_string(),
        "echo written-through-8 >&8; echo write-rc=$?".to_string(),
        "echo stat: $(cut -d' ' -f6,7 /proc/self/stat)".to_string(),
        "python3 -c 'import fcntl, termios\ntry:\n  fcntl.ioctl(0, termios.TIOCSTI, b\"x\"); print(\"tiocsti-ok\")\nexcept OSError as e: print(\"tiocsti-error\", e.errno)' 2>&1 || echo no-python".to_string(),
    ];
    let events = run_replay(&root, &commands, "", "exec 7<secret.txt 8>>outside.txt");
    assert_eq!(finished(&events, "t")["status"], "passed", "{events:?}");
    let out = outputs(&events);
    assert!(!out[0].contains("wrapper-secret") && !out[0].contains("read-rc=0"), "{}", out[0]);
    assert!(out[0].contains("Bad file descriptor") && out[1].contains("Bad file descriptor"), "{}\n{}", out[0], out[1]);
    assert_eq!(std::fs::read_to_string(root.join("outside.txt")).unwrap(), "", "fd 8 was written");
    // SAFETY: getsid(0) only returns a number. dracode runs in the test's session (sh does not
    // start a new one).
    let ours = unsafe { libc::getsid(0) };
    let stat = out[2].split("stat: ").nth(1).and_then(|rest| rest.lines().next()).unwrap_or("").split_whitespace().collect::<Vec<_>>();
    assert_eq!(stat.len(), 2, "{}", out[2]);
    assert_ne!(stat[0], ours.to_string(), "the command shares dracode's session");
    assert_eq!(stat[1], "0", "the command has a controlling terminal");
    assert!(out[3].contains("tiocsti-error 1") || out[3].contains("no-python"), "{}", out[3]);
}

#[test]
fn attack_unix_sockets_field_lets_exactly_the_listed_socket_through() {
    if !supported() || !python() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let listed_got = unix_recorder(&root.join("listed.sock"));
    let other_got = unix_recorder(&root.join("other.sock"));
    let commands = [py_unix_send(&root.join("listed.sock"), "listed"), py_unix_send(&root.join("other.sock"), "other")];
    let events = run_replay(&root, &commands, "unix_sockets = [\"listed.sock\"]", "true");
    assert_eq!(finished(&events, "t")["status"], "passed", "{events:?}");
    let out = outputs(&events);
    assert!(out[0].contains("listed-ok"), "{}", out[0]);
    assert!(out[1].contains("other-error [Errno 13]"), "{}", out[1]);
    assert_eq!(received_eventually(&listed_got, "<connection>listed"), "<connection>listed");
    assert_eq!(received(&other_got), "");
}

#[test]
fn validate_names_a_bad_unix_sockets_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = "[[tasks]]\nid = \"a\"\nprompt = \"x\"\nunix_sockets = [\"/run/*.sock\"]\n";
    std::fs::write(tmp.path().join("m.toml"), manifest).unwrap();
    let output = crate::support::cli::dracode(tmp.path()).args(["validate", "m.toml"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    for part in ["m.toml:4:", "task \"a\"", "\"unix_sockets\"", "wildcards are not supported"] {
        assert!(stderr.contains(part), "{part} in {stderr}");
    }
}
