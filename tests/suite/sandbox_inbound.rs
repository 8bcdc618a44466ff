//! Issue 27: inbound connections. With the network off or an egress allowlist a command may
//! listen only on loopback: a bind to the wildcard address (or a `listen` on an unbound socket)
//! lands on 127.0.0.1/::1, a bind to another address is refused and reported, and the command's
//! own clients reach its own listeners — no other local port. Every connection these tests make
//! is to 127.0.0.0/8 or ::1.

use super::attacks::{Scenario, exfiltration_target};
use crate::support::cli::events;
use crate::support::sandbox::{Scratch, supported};
use dracode_sandbox::SandboxMode;
use dracode_sandbox::incidents::Report;
use std::io::Read;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn python() -> bool {
    let found = std::process::Command::new("python3").arg("-c").arg("pass").status().is_ok_and(|s| s.success());
    if !found {
        eprintln!("skipping: python3 is not installed");
    }
    found
}

/// A server on all interfaces, as a test suite or a dev server starts one: its bound address
/// seen from inside (`getsockname`) and in `/proc/net/tcp` (the listening row's local address,
/// as the kernel prints it), then a round trip from the command's own client. Then an unbound
/// socket that listens (the kernel would bind it to the wildcard address), the IPv6 wildcard,
/// a bind to an address that is not loopback, and a connect to `foreign` (a listener of the
/// test's, not the command's).
fn server_script(foreign: u16) -> String {
    format!(
        r#"python3 - <<'EOF'
import socket, threading
def row(port, table):
    for line in open("/proc/net/" + table).read().splitlines()[1:]:
        f = line.split()
        if int(f[1].split(":")[1], 16) == port and f[3] == "0A":
            return f[1].split(":")[0]
    return "none"
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen()
a = s.getsockname(); print("wildcard", a[0], row(a[1], "tcp"))
def serve():
    c, _ = s.accept(); c.sendall(b"pong:" + c.recv(4)); c.close()
t = threading.Thread(target=serve); t.start()
k = socket.create_connection(("127.0.0.1", a[1]), 5); k.sendall(b"ping"); print("roundtrip", k.recv(20).decode()); t.join()
s.close()
try:
    socket.create_connection(("127.0.0.1", a[1]), 3); print("closed-connect ok")
except OSError as e:
    print("closed-connect error", e.errno)
u = socket.socket(); u.listen()
b = u.getsockname(); print("unbound", b[0], row(b[1], "tcp"))
try:
    w = socket.socket(socket.AF_INET6); w.bind(("::", 0)); w.listen(); c = w.getsockname(); print("v6", c[0], row(c[1], "tcp6"))
except OSError as e:
    print("v6-unavailable", e.errno)
try:
    x = socket.socket(); x.bind(("192.0.2.1", 0)); print("foreign-bind bound")
except OSError as e:
    print("foreign-bind error", e.errno)
try:
    socket.create_connection(("127.0.0.1", {foreign}), 3).sendall(b"stolen"); print("foreign-connect ok")
except OSError as e:
    print("foreign-connect error", e.errno)
EOF"#
    )
}

/// Runs [`server_script`] as one task with `fields`, and checks what holds in both modes.
fn listens_only_on_loopback(fields: &str) {
    let s = Scenario::new();
    let (foreign, got) = exfiltration_target();
    let r = s.run("inbound", &[server_script(foreign)], fields, &[], &[]);
    r.assert_finished("passed");
    let out = r.all_output();
    assert!(out.contains("wildcard 127.0.0.1 0100007F"), "the server listens beyond loopback:\n{out}");
    assert!(out.contains("roundtrip pong:ping"), "the command cannot reach its own server:\n{out}");
    assert!(out.contains("closed-connect error 111"), "a closed server's port is not refused as by the kernel:\n{out}");
    assert!(out.contains("unbound 127.0.0.1 0100007F"), "{out}");
    assert!(out.contains("v6 ::1 00000000000000000000000001000000") || out.contains("v6-unavailable"), "{out}");
    assert!(out.contains("foreign-bind error 13"), "{out}");
    assert!(out.contains("foreign-connect error 13"), "{out}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(got.lock().unwrap().is_empty(), "the test's listener got {:?}", String::from_utf8_lossy(&got.lock().unwrap()));
    let denied: Vec<(String, u64)> = events(&r.events, "network.denied")
        .iter()
        .map(|e| (e["host"].as_str().unwrap_or("").to_string(), e["port"].as_u64().unwrap_or(0)))
        .collect();
    assert!(denied.contains(&("192.0.2.1".to_string(), 0)), "the refused bind is reported: {denied:?}");
    assert!(denied.contains(&("127.0.0.1".to_string(), u64::from(foreign))), "the refused connect is reported: {denied:?}");
}

#[test]
fn attack_inbound_listener_under_an_egress_allowlist() {
    if !supported() || !python() {
        return;
    }
    listens_only_on_loopback("network = [\"allowed.example\"]");
}

#[test]
fn sandbox_a_test_server_on_loopback_works_without_network() {
    if !supported() || !python() {
        return;
    }
    listens_only_on_loopback("");
}

/// A port the command's listener had, taken by another process once the listener closed, is
/// not the command's any more: the command cannot reach whoever listens there now.
#[tokio::test]
async fn attack_a_port_the_command_gave_up_reaches_nobody_else() {
    if !supported() || !python() {
        return;
    }
    let s = Scratch::new();
    let ws = s.ws.clone();
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = got.clone();
    // Takes the port the command names in `port`, then says `go`.
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(15);
        let port: u16 = loop {
            if let Some(port) = std::fs::read_to_string(ws.join("port")).ok().and_then(|t| t.trim().parse().ok()) {
                break port;
            }
            if Instant::now() > deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        std::fs::write(ws.join("go"), "").unwrap();
        for mut stream in listener.incoming().flatten() {
            let mut buf = Vec::new();
            let _ = stream.set_read_timeout(Some(Duration::from_secs(3)));
            let _ = stream.read_to_end(&mut buf);
            seen.lock().unwrap().extend(b"<connection>".iter().chain(&buf));
        }
    });
    let script = r#"python3 - <<'EOF'
import os, socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); p = s.getsockname()[1]; s.close()
open("port.tmp", "w").write("%d\n" % p); os.rename("port.tmp", "port")
for _ in range(500):
    if os.path.exists("go"): break
    time.sleep(0.02)
try:
    socket.create_connection(("127.0.0.1", p), 3).sendall(b"stolen"); print("reused ok")
except OSError as e:
    print("reused error", e.errno)
EOF"#;
    let f = s.sh(&s.policy(SandboxMode::WorkspaceWrite), script).await;
    assert!(f.output.contains("reused error 13"), "{}", f.output);
    std::thread::sleep(Duration::from_millis(200));
    assert!(got.lock().unwrap().is_empty(), "the new owner of the port got {:?}", String::from_utf8_lossy(&got.lock().unwrap()));
    let port: u16 = std::fs::read_to_string(s.ws.join("port")).unwrap().trim().parse().unwrap();
    let reported = |r: &Report| matches!(r, Report::NetworkDenied { host, port: p, .. } if host == "127.0.0.1" && *p == port);
    assert!(f.reports.iter().any(reported), "{:?}", f.reports);
}
