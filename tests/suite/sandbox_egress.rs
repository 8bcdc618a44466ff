//! Issue 17, the egress allowlist, end to end: `network = [hosts]` through the real binary, a
//! scripted model (`replay`) whose commands use curl and Python against listeners on
//! 127.0.0.1. What is listed is reachable through dracode's proxy (`CONNECT` and plain HTTP);
//! anything else — another port, a name that resolves to loopback, a direct connection, a DNS
//! query — fails and is reported (`network.denied`, `task.finished.network_denied`, summary.md).

use crate::support::cli::{dracode, events, finished, git_repo, read_jsonl};
use crate::support::sandbox::supported;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the scripted model says once its calls have run.
const FINAL: &str = "done with the network";

/// A scratch layout: `repo/` (a git repository) and `home/`, with manifests and replays next
/// to them.
struct Scenario {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

/// What one run left.
struct Run {
    code: i32,
    stderr: String,
    out: PathBuf,
    events: Vec<Value>,
}

impl Scenario {
    fn new() -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        git_repo(&root.join("repo"), &[("README.md", "project\n")]);
        std::fs::create_dir_all(root.join("home")).unwrap();
        Scenario { _dir: dir, root }
    }

    /// Runs one task `egress` whose model makes `calls` (tool, input), then answers [`FINAL`];
    /// `fields` go into `[defaults]`.
    fn run(&self, name: &str, calls: &[(&str, Value)], fields: &str) -> Run {
        let mut turns: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (tool, input))| {
                json!({"content": [{"type": "tool_use", "id": format!("c{i}"), "name": tool, "input": input}], "stop_reason": "tool_use"})
            })
            .collect();
        turns.push(json!({"content": [{"type": "text", "text": FINAL}], "stop_reason": "end_turn"}));
        std::fs::write(self.root.join(format!("{name}.json")), Value::Array(turns).to_string()).unwrap();
        let manifest = format!(
            "[defaults]\nprovider = \"replay\"\nreplay = \"{name}.json\"\nrepo = \"repo\"\nisolation = \"copy\"\nrequire_change = false\n{fields}\n[[tasks]]\nid = \"egress\"\nprompt = \"use the network\"\n"
        );
        std::fs::write(self.root.join(format!("{name}.toml")), manifest).unwrap();
        let out = self.root.join(format!("out-{name}"));
        let output = dracode(&self.root)
            .env("HOME", self.root.join("home"))
            .arg("run")
            .arg(format!("{name}.toml"))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let results = out.join("results.jsonl");
        Run {
            code: output.status.code().unwrap_or(-1),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            events: if results.exists() { read_jsonl(&results) } else { Vec::new() },
            out,
        }
    }
}

impl Run {
    /// The outputs of the tool calls, in order.
    fn outputs(&self) -> Vec<&str> {
        events(&self.events, "tool.completed").iter().map(|e| e["output"].as_str().unwrap_or("")).collect()
    }

    fn task(&self) -> &Value {
        finished(&self.events, "egress")
    }

    /// The task ended `status` after the model's final words.
    fn assert_finished(&self, status: &str) {
        assert_eq!(self.task()["status"], status, "exit {}\nstderr: {}\noutputs: {:#?}", self.code, self.stderr, self.outputs());
        assert!(events(&self.events, "agent.message").iter().any(|e| e["text"] == FINAL), "no final message");
    }

    /// The `network.denied` events.
    fn denied(&self) -> Vec<&Value> {
        events(&self.events, "network.denied")
    }

    fn summary(&self) -> String {
        std::fs::read_to_string(self.out.join("summary.md")).unwrap()
    }
}

/// A `run_command` call running `line` with `sh -c`.
fn shell(line: &str) -> (&'static str, Value) {
    ("run_command", json!({"command": line, "shell": true, "timeout_seconds": 20}))
}

/// An HTTP origin on 127.0.0.1 answering every request with `hello <path>`; returns its port
/// and the request lines it received.
fn origin() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let record = record.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string();
                let path = line.split_whitespace().nth(1).unwrap_or("?").to_string();
                record.lock().unwrap().push(line);
                let body = format!("hello {path}");
                let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            });
        }
    });
    (port, seen)
}

/// Whether `program` is on PATH; prints why a part is skipped when not.
fn have(program: &str) -> bool {
    let found = std::process::Command::new("sh").arg("-c").arg(format!("command -v {program}")).output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipping the {program} part: {program} is not installed (.ci/run installs it)");
    }
    found
}

#[test]
fn egress_a_listed_address_is_reachable_through_the_proxy_with_curl_and_python() {
    if !supported() {
        return;
    }
    let s = Scenario::new();
    let (port, seen) = origin();
    let mut calls =
        vec![shell("echo \"proxy=$HTTPS_PROXY|$http_proxy|no=[$NO_PROXY]|npm=$npm_config_https_proxy|cargo=$CARGO_HTTP_PROXY\"")];
    let (curl, python) = (have("curl"), have("python3"));
    if curl {
        calls.push(shell(&format!("curl -s -m 10 http://127.0.0.1:{port}/plain; echo \" rc=$?\"")));
        calls.push(shell(&format!("curl -sv -m 10 --proxytunnel http://127.0.0.1:{port}/tunnel 2>&1; echo \" rc=$?\"")));
    }
    if python {
        let script =
            format!("import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/python', timeout=10).read().decode())");
        calls.push(shell(&format!("python3 -c \"{script}\" 2>&1; echo \" rc=$?\"")));
    }
    let r = s.run("listed", &calls, &format!("network = [\"127.0.0.1:{port}\"]"));
    r.assert_finished("passed");
    let out = r.outputs();
    let proxy = out[0].split('|').next().unwrap_or("").trim_start_matches("proxy=").to_string();
    assert!(proxy.starts_with("http://127.0.0.1:") && proxy != format!("http://127.0.0.1:{port}"), "{}", out[0]);
    assert!(out[0].contains(&format!("|{proxy}|no=[]|npm={proxy}|cargo={proxy}")), "{}", out[0]);
    let mut next = 1;
    if curl {
        assert!(out[next].contains("hello /plain rc=0"), "plain HTTP through the proxy: {}", out[next]);
        assert!(
            out[next + 1].contains(&format!("CONNECT 127.0.0.1:{port}")) && out[next + 1].contains("hello /tunnel"),
            "{}",
            out[next + 1]
        );
        next += 2;
    }
    if python {
        assert!(out[next].contains("hello /python"), "urllib through the proxy: {}", out[next]);
    }
    let expected = usize::from(curl) * 2 + usize::from(python);
    assert_eq!(seen.lock().unwrap().len(), expected, "{:?}", seen.lock().unwrap());
    assert!(seen.lock().unwrap().iter().all(|l| l.starts_with("GET /")), "origin-form requests: {:?}", seen.lock().unwrap());
    assert!(r.denied().is_empty(), "{:?}", r.denied());
    assert_eq!(r.task()["network_denied"], 0);
}

#[test]
fn egress_unlisted_ports_and_names_of_loopback_are_refused_and_reported() {
    if !supported() || !have("curl") {
        return;
    }
    let s = Scenario::new();
    let (listed, _) = origin();
    let (unlisted, seen) = origin();
    let calls = [
        shell(&format!("curl -s -m 10 -o /dev/null -w 'plain=%{{http_code}}' http://127.0.0.1:{unlisted}/steal")),
        shell(&format!("curl -s -m 10 -p -o /dev/null -w 'connect=%{{http_connect}}' http://127.0.0.1:{unlisted}/steal; echo \" rc=$?\"")),
        shell(&format!("curl -s -m 10 -w ' named=%{{http_code}}' http://localhost:{listed}/by-name")),
    ];
    let fields = format!("network = [\"127.0.0.1:{listed}\", \"localhost:{listed}\"]");
    let r = s.run("unlisted", &calls, &fields);
    r.assert_finished("passed");
    let out = r.outputs();
    assert!(out[0].contains("plain=403"), "{}", out[0]);
    assert!(out[1].contains("connect=403") && !out[1].contains("rc=0"), "{}", out[1]);
    assert!(out[2].contains("named=403") && out[2].contains("loopback"), "{}", out[2]);
    assert!(seen.lock().unwrap().is_empty(), "the unlisted listener got {:?}", seen.lock().unwrap());

    let denied = r.denied();
    let hosts: Vec<(String, u64)> =
        denied.iter().map(|e| (e["host"].as_str().unwrap_or("").to_string(), e["port"].as_u64().unwrap_or(0))).collect();
    assert_eq!(
        hosts,
        [
            ("127.0.0.1".to_string(), u64::from(unlisted)),
            ("127.0.0.1".to_string(), u64::from(unlisted)),
            ("localhost".to_string(), u64::from(listed))
        ]
    );
    assert!(denied.iter().all(|e| e["command"].as_str().is_some_and(|c| c.starts_with("curl "))), "{denied:?}");
    assert!(denied[2]["reason"].as_str().is_some_and(|r| r.contains("loopback")), "{:?}", denied[2]);
    assert_eq!(r.task()["network_denied"], 3);
    let summary = r.summary();
    assert!(summary.contains("### Refused connections"), "{summary}");
    assert!(summary.contains(&format!("| egress | 3 | 127.0.0.1:{unlisted}, localhost:{listed} |")), "{summary}");
}

/// Needs the supervisor's connect broker (issue 17's other half): the sandbox refuses what
/// bypasses the proxy, and reports it.
#[test]
fn egress_a_direct_connection_and_a_dns_query_fail_and_are_reported() {
    if !supported() || !have("curl") || !have("python3") {
        return;
    }
    let s = Scenario::new();
    let (port, seen) = origin();
    let udp = "import socket\ntry:\n    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'q', ('127.0.0.1', 53)); print('udp-sent')\nexcept OSError as e:\n    print('udp-refused', e)";
    let calls = [
        shell(&format!("curl --noproxy '*' -s -m 5 http://127.0.0.1:{port}/direct; echo \" rc=$?\"")),
        shell(&format!("python3 -c \"{udp}\"")),
    ];
    let r = s.run("direct", &calls, &format!("network = [\"127.0.0.1:{port}\"]"));
    r.assert_finished("passed");
    let out = r.outputs();
    assert!(!out[0].contains("hello") && !out[0].contains("rc=0"), "{}", out[0]);
    assert!(out[1].contains("udp-refused"), "{}", out[1]);
    assert!(seen.lock().unwrap().is_empty(), "the origin got {:?}", seen.lock().unwrap());
    let denied = r.denied();
    assert!(
        denied
            .iter()
            .any(|e| e["host"] == "127.0.0.1" && e["port"] == port && e["command"].as_str().is_some_and(|c| c.contains("--noproxy"))),
        "the direct connection is reported: {denied:?}"
    );
    assert!(
        denied.iter().any(|e| (e["port"] == 53 || e["lookup"] == true) && e["command"].as_str().is_some_and(|c| c.contains("python3"))),
        "the datagram socket is reported: {denied:?}"
    );
    assert!(r.task()["network_denied"].as_u64().unwrap_or(0) >= 2, "{}", r.task());
    assert!(r.summary().contains("### Refused connections"));
}

#[test]
fn egress_web_fetch_obeys_the_allowlist() {
    let s = Scenario::new();
    let (listed, _) = origin();
    let (unlisted, seen) = origin();
    let fetch = |url: String| ("web_fetch", json!({ "url": url }));
    let calls = [
        fetch(format!("http://127.0.0.1:{listed}/page")),
        fetch(format!("http://127.0.0.1:{unlisted}/page")),
        fetch(format!("http://localhost:{listed}/page")),
    ];
    let fields = format!(
        "network = [\"127.0.0.1:{listed}\", \"localhost:{listed}\"]\ntools = [\"web_fetch\"]\npolicy = {{ web_fetch = {{ allowed_hosts = [\"127.0.0.1\", \"localhost\"] }} }}"
    );
    let r = s.run("fetch", &calls, &fields);
    r.assert_finished("passed");
    let out = r.outputs();
    assert!(out[0].contains("hello /page"), "{}", out[0]);
    assert!(out[1].contains("DENIED") && out[1].contains("not in the task's network allowlist"), "{}", out[1]);
    assert!(out[2].contains("DENIED") && out[2].contains("loopback"), "{}", out[2]);
    assert!(seen.lock().unwrap().is_empty(), "{:?}", seen.lock().unwrap());
    let denied = r.denied();
    assert_eq!(denied.len(), 2, "{denied:?}");
    assert!(denied.iter().all(|e| e["command"] == "web_fetch"), "{denied:?}");
    assert_eq!(r.task()["network_denied"], 2);
}

#[test]
fn egress_a_bad_host_pattern_is_a_manifest_error_naming_file_line_task_and_field() {
    let s = Scenario::new();
    let manifest = "[defaults]\nprovider = \"replay\"\nrepo = \"repo\"\n\n[[tasks]]\nid = \"fetcher\"\nprompt = \"x\"\nnetwork = { allow = [\"ok.example\", \"https://bad.example/\"], deny = [\"a.*.example\"] }\n";
    std::fs::write(s.root.join("bad.toml"), manifest).unwrap();
    for command in ["validate", "run"] {
        let output = dracode(&s.root).arg(command).arg("bad.toml").output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains(
                "bad.toml:5:1: task \"fetcher\": field \"network\": network.allow[1]: \"https://bad.example/\" is not a host pattern"
            ),
            "{command}: {stderr}"
        );
        assert!(stderr.contains("network.deny[0]") && stderr.contains("wildcard"), "{command}: {stderr}");
    }
}
