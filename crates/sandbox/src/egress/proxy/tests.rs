//! The proxy against real sockets on 127.0.0.1: what passes, what is refused, and garbage.

use super::*;
use std::io::{Read, Write};

/// A listener on 127.0.0.1 that records what each connection sends (until it pauses) and
/// answers `reply`; returns its port and the recorded requests.
fn upstream(reply: &'static [u8]) -> (u16, Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let record = record.clone();
            std::thread::spawn(move || {
                stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                }
                record.lock().unwrap().push(got);
                let _ = stream.write_all(reply);
            });
        }
    });
    (port, seen)
}

async fn proxy(allow: &[&str]) -> (EgressProxy, Arc<NetworkLog>) {
    let allow: Vec<String> = allow.iter().map(|t| (*t).to_string()).collect();
    let rules = Arc::new(Allowlist::parse(&allow, &[], "network", "network.deny").unwrap());
    let log = Arc::new(NetworkLog::default());
    (EgressProxy::start(rules, log.clone()).await.unwrap(), log)
}

/// Sends `bytes` to the proxy and returns everything it answers until it closes.
async fn exchange(proxy: &EgressProxy, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    let _ = timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn connect_to_a_listed_address_opens_a_blind_tunnel() {
    let (port, seen) = upstream(b"pong");
    let (proxy, log) = proxy(&[&format!("127.0.0.1:{port}")]).await;
    let answer = exchange(&proxy, format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\nping-early").as_bytes()).await;
    assert_eq!(answer, "HTTP/1.1 200 Connection established\r\n\r\npong");
    assert_eq!(seen.lock().unwrap().as_slice(), [b"ping-early".to_vec()], "bytes sent with the head are relayed too");
    assert_eq!(log.totals().count, 0);
}

#[tokio::test]
async fn a_plain_request_is_forwarded_in_origin_form_with_connection_close() {
    let (port, seen) = upstream(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    let (proxy, _log) = proxy(&[&format!("127.0.0.1:{port}")]).await;
    let request = format!(
        "POST http://127.0.0.1:{port}/path?q=1 HTTP/1.1\r\nHost: elsewhere.example\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nX-Keep: yes\r\nContent-Length: 4\r\n\r\nbody"
    );
    let answer = exchange(&proxy, request.as_bytes()).await;
    assert!(answer.ends_with("\r\n\r\nok"), "{answer}");
    let sent = String::from_utf8(seen.lock().unwrap()[0].clone()).unwrap();
    assert_eq!(
        sent,
        format!("POST /path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Keep: yes\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody")
    );
}

#[tokio::test]
async fn unlisted_hosts_ports_and_names_of_loopback_are_refused_with_403_and_logged() {
    let (port, seen) = upstream(b"never");
    let (proxy, log) = proxy(&[&format!("127.0.0.1:{port}"), &format!("localhost:{port}"), "*.example.org"]).await;
    let cases = [
        (format!("CONNECT 127.0.0.1:{} HTTP/1.1\r\n\r\n", port + 1), "is not in the task's network allowlist"),
        (format!("GET http://localhost:{port}/ HTTP/1.1\r\n\r\n"), "loopback address"),
        (format!("CONNECT localhost:{port} HTTP/1.1\r\n\r\n"), "loopback address"),
        ("CONNECT unlisted.example:443 HTTP/1.1\r\n\r\n".to_string(), "unlisted.example:443 is not in the task's network allowlist"),
        (format!("CONNECT [::ffff:127.0.0.1]:{} HTTP/1.1\r\n\r\n", port + 1), "not in the task's network allowlist"),
    ];
    for (request, reason) in &cases {
        let answer = exchange(&proxy, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{request}: {answer}");
        assert!(answer.contains(reason), "{request}: {answer}");
    }
    let totals = log.totals();
    assert_eq!(totals.count, cases.len() as u64);
    assert!(
        totals.hosts.contains(&"unlisted.example:443".to_string()) && totals.hosts.contains(&format!("localhost:{port}")),
        "{totals:?}"
    );
    assert!(seen.lock().unwrap().is_empty(), "the target was never connected to");
}

#[tokio::test]
async fn garbage_and_oversized_heads_get_an_error_and_the_proxy_keeps_serving() {
    let (port, _seen) = upstream(b"pong");
    let (proxy, log) = proxy(&[&format!("127.0.0.1:{port}")]).await;
    let mut noise: Vec<u8> = (0..4000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    noise.extend_from_slice(b"\r\n\r\n");
    let bad = [
        (noise, "400"),
        (b"GET / HTTP/1.1\r\n\r\n".to_vec(), "400"),
        (b"GET https://127.0.0.1/ HTTP/1.1\r\n\r\n".to_vec(), "needs CONNECT"),
        (b"CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n".to_vec(), "host:port"),
        (b"CONNECT a..b:443 HTTP/1.1\r\n\r\n".to_vec(), "400"),
        (b"CONNECT ::1:443 HTTP/1.1\r\n\r\n".to_vec(), "brackets"),
        (b"GET http://user:pw@127.0.0.1/ HTTP/1.1\r\n\r\n".to_vec(), "credentials"),
        (format!("GET http://x/ HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD_BYTES)).into_bytes(), "431"),
        ((0..200).map(|i| format!("H{i}: v\r\n")).fold("GET http://x/ HTTP/1.1\r\n".to_string(), |a, h| a + &h).into_bytes(), "431"),
    ];
    for (bytes, want) in &bad {
        let answer = exchange(&proxy, bytes).await;
        assert!(answer.contains(want), "{:?}: {answer}", String::from_utf8_lossy(&bytes[..bytes.len().min(60)]));
    }
    assert_eq!(log.totals().count, 0, "malformed requests are not refused connections");
    let fine = exchange(&proxy, format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes()).await;
    assert!(fine.starts_with("HTTP/1.1 200"), "{fine}");
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_listener_and_its_tunnels() {
    let (port, _seen) = upstream(b"");
    let (proxy, _log) = proxy(&[&format!("127.0.0.1:{port}")]).await;
    let addr = proxy.addr();
    let mut open = TcpStream::connect(addr).await.unwrap();
    open.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
    let mut head = [0u8; 39];
    open.read_exact(&mut head).await.unwrap();
    drop(proxy);
    let mut rest = Vec::new();
    let closed = timeout(Duration::from_secs(5), open.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the tunnel is closed with the proxy");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(TcpStream::connect(addr).await.is_err(), "nothing listens any more");
}

#[tokio::test]
async fn connections_over_the_limit_are_answered_503_at_once() {
    let (proxy, _log) = proxy(&["127.0.0.1:1"]).await;
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        held.push(TcpStream::connect(proxy.addr()).await.unwrap());
    }
    let answer = timeout(Duration::from_secs(5), exchange(&proxy, b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n")).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    drop(held);
    let mut freed = String::new();
    for _ in 0..50 {
        freed = exchange(&proxy, b"CONNECT unlisted.example:1 HTTP/1.1\r\n\r\n").await;
        if freed.starts_with("HTTP/1.1 403") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed.starts_with("HTTP/1.1 403"), "slots come back when connections close: {freed}");
}
