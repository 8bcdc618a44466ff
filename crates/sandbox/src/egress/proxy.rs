//! The egress proxy of one task (`network = [hosts]`): an HTTP proxy on `127.0.0.1:<random>`
//! in dracode's own runtime, the only network address the task's commands may connect to.
//!
//! It speaks `CONNECT host:port` (then relays bytes blindly: TLS stays end to end) and plain
//! HTTP requests in absolute form (`GET http://host/path HTTP/1.1`, forwarded in origin form
//! with `Connection: close`). Each target goes through [`permitted_addresses`]: refused → `403`
//! with a one-line reason, and a `network.denied` event through the task's [`NetworkLog`].
//! Guards: request heads up to [`MAX_HEAD_BYTES`] within [`HEAD_TIMEOUT`], at most
//! [`MAX_CONNECTIONS`] at a time, a relay closed after [`IDLE_TIMEOUT`] without a byte either
//! way. Dropping the [`EgressProxy`] closes the listener and every connection.

use super::allowlist::{Allowlist, Host, endpoint};
use super::log::NetworkLog;
use super::resolve::{Blocked, permitted_addresses};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::timeout;

/// The largest request head (request line and header fields) read.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// Header fields per request at most.
const MAX_HEADERS: usize = 100;
/// Time a client has to send its request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// Time allowed to connect to the target (all of its addresses).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// A relay with no byte in either direction for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Connections served at once; more are answered `503` and closed.
pub const MAX_CONNECTIONS: usize = 256;

/// A running proxy; stopped (listener and connections) when dropped.
pub struct EgressProxy {
    addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

impl EgressProxy {
    /// Starts a proxy for `rules` on `127.0.0.1:0`, reporting refusals to `log`.
    pub async fn start(rules: Arc<Allowlist>, log: Arc<NetworkLog>) -> std::io::Result<EgressProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let gate = Arc::new(Gate { rules, log, slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)) });
        let accept = tokio::spawn(accept_loop(listener, gate));
        Ok(EgressProxy { addr, accept })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, the value of the proxy variables.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        // The accept loop owns the connections' JoinSet: aborting it aborts them all.
        self.accept.abort();
    }
}

/// What every connection of one proxy shares.
struct Gate {
    rules: Arc<Allowlist>,
    log: Arc<NetworkLog>,
    slots: Arc<Semaphore>,
}

async fn accept_loop(listener: TcpListener, gate: Arc<Gate>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => match gate.slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        connections.spawn(serve(stream, gate.clone(), slot));
                    }
                    // Over the limit: a best-effort answer, never a wait.
                    Err(_) => {
                        let _ = stream.try_write(&response(503, "too many connections through the egress proxy"));
                    }
                },
                // Out of descriptors, or a connection reset before it was accepted: try again.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// A complete `HTTP/1.1` response with a plain-text body and `Connection: close`.
fn response(status: u16, body: &str) -> Vec<u8> {
    let phrase = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    };
    let body = format!("dracode egress proxy: {body}\n");
    format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn reply(client: &mut TcpStream, status: u16, body: &str) {
    let _ = timeout(Duration::from_secs(5), client.write_all(&response(status, body))).await;
    let _ = client.shutdown().await;
}

/// One request as read: its head parsed, and the bytes that followed it.
struct Request {
    method: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    rest: Vec<u8>,
}

/// Why no request could be read.
enum HeadError {
    Closed,
    TooLarge,
    Malformed(String),
}

/// Reads one request head (and whatever arrived after it).
async fn read_head(client: &mut TcpStream) -> Result<Request, HeadError> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).await.map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(request) = parse_head(&buf)? {
            return Ok(request);
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Err(HeadError::TooLarge);
        }
    }
}

/// The request in `buf`, `None` while its head is incomplete.
fn parse_head(buf: &[u8]) -> Result<Option<Request>, HeadError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD_BYTES => len,
        Ok(httparse::Status::Complete(_)) | Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HeadError::Malformed(format!("not an HTTP request ({e})"))),
    };
    let (Some(method), Some(target)) = (parsed.method, parsed.path) else {
        return Err(HeadError::Malformed("not an HTTP request".into()));
    };
    Ok(Some(Request {
        method: method.to_string(),
        target: target.to_string(),
        headers: parsed.headers.iter().map(|h| (h.name.to_string(), h.value.to_vec())).collect(),
        rest: buf[len..].to_vec(),
    }))
}

/// Where a request goes: its host as asked, parsed, its port, and (plain HTTP) the path.
struct Target {
    asked: String,
    host: Host,
    port: u16,
    path: Option<String>,
}

/// Why a request's target was refused (answered `400` with these words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum TargetError {
    /// An `https://` URL without `CONNECT`.
    #[error("an https URL needs CONNECT (set HTTPS_PROXY to this proxy)")]
    HttpsWithoutConnect,
    /// Neither `CONNECT` nor an absolute `http://` URL.
    #[error("this is a proxy: send CONNECT host:port, or a request for an absolute http:// URL")]
    NotProxyForm,
    /// `user:password@host`.
    #[error("credentials in the URL are not supported")]
    Credentials,
    /// `[` without `]`.
    #[error("a '[' without its ']'")]
    UnclosedBracket,
    /// An IPv6 address without brackets.
    #[error("an IPv6 address needs brackets: [::1]:443")]
    UnbracketedIpv6,
    /// A port that is not 1 to 65535.
    #[error("bad port {0:?}")]
    BadPort(String),
    /// `CONNECT` without a port.
    #[error("CONNECT needs host:port")]
    NoPort,
    /// Neither a host name nor an IP address.
    #[error("{0:?} is not a host name or an IP address")]
    NotAHost(String),
}

/// The target of `request`: `host:port` for `CONNECT`, an `http://` URL otherwise.
fn target(request: &Request) -> Result<Target, TargetError> {
    if request.method.eq_ignore_ascii_case("CONNECT") {
        let (asked, host, port) = authority(&request.target, None)?;
        return Ok(Target { asked, host, port, path: None });
    }
    let lower = request.target.to_ascii_lowercase();
    let Some(rest) = lower.strip_prefix("http://").map(|_| &request.target["http://".len()..]) else {
        return Err(if lower.starts_with("https://") { TargetError::HttpsWithoutConnect } else { TargetError::NotProxyForm });
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority_text, path) = rest.split_at(split);
    let (asked, host, port) = authority(authority_text, Some(80))?;
    let path = path.split('#').next().unwrap_or_default();
    let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    Ok(Target { asked, host, port, path: Some(path) })
}

/// Parses `host:port` (`[v6]:port`); without a port, `default` (or an error).
fn authority(text: &str, default: Option<u16>) -> Result<(String, Host, u16), TargetError> {
    if text.contains('@') {
        return Err(TargetError::Credentials);
    }
    let (host_text, port_text) = match text.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) = rest.split_once(']').ok_or(TargetError::UnclosedBracket)?;
            (inside, after.strip_prefix(':'))
        }
        None => match text.rsplit_once(':') {
            Some((_, _)) if text.matches(':').count() > 1 => return Err(TargetError::UnbracketedIpv6),
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        },
    };
    let port = match (port_text, default) {
        (Some(p), _) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| TargetError::BadPort(p.to_string()))?,
        (None, Some(d)) => d,
        (None, None) => return Err(TargetError::NoPort),
    };
    let host = Host::parse(host_text).ok_or_else(|| TargetError::NotAHost(host_text.to_string()))?;
    Ok((host.to_string(), host, port))
}

/// Serves one client connection: one request, then a relay.
async fn serve(mut client: TcpStream, gate: Arc<Gate>, _slot: OwnedSemaphorePermit) {
    let _ = client.set_nodelay(true);
    let request = match timeout(HEAD_TIMEOUT, read_head(&mut client)).await {
        Ok(Ok(request)) => request,
        Ok(Err(HeadError::Closed)) => return,
        Ok(Err(HeadError::TooLarge)) => return reply(&mut client, 431, "the request head is too large").await,
        Ok(Err(HeadError::Malformed(why))) => return reply(&mut client, 400, &why).await,
        Err(_) => return reply(&mut client, 408, "no complete request in time").await,
    };
    let target = match target(&request) {
        Ok(target) => target,
        Err(why) => return reply(&mut client, 400, &why.to_string()).await,
    };
    let mut upstream = match open(&gate, &target).await {
        Ok(stream) => stream,
        Err((status, why)) => return reply(&mut client, status, &why).await,
    };
    let sent = match &target.path {
        None => client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await,
        Some(path) => upstream.write_all(&origin_form(&request, &target, path)).await,
    };
    if sent.is_err() || upstream.write_all(&request.rest).await.is_err() {
        return;
    }
    relay(client, upstream).await;
}

/// Connects to `target` if the allowlist permits it; a refusal is logged and answered `403`.
async fn open(gate: &Gate, target: &Target) -> Result<TcpStream, (u16, String)> {
    let addrs = match permitted_addresses(&gate.rules, &target.host, target.port).await {
        Ok(addrs) => addrs,
        Err(Blocked::Refused(why)) => {
            gate.log.denied(&target.asked, target.port, None, Some(&why.0));
            return Err((403, why.0));
        }
        Err(Blocked::Unresolved(why)) => return Err((502, why)),
    };
    let connect = async {
        let mut last = None;
        for addr in &addrs {
            match TcpStream::connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(format!("cannot connect to {addr}: {e}")),
            }
        }
        Err(last.unwrap_or_default())
    };
    match timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        Ok(Err(why)) => Err((502, why)),
        Err(_) => Err((504, format!("connecting to {}:{} took longer than {}s", target.asked, target.port, CONNECT_TIMEOUT.as_secs()))),
    }
}

/// Hop-by-hop fields, which a proxy does not forward.
const HOP_BY_HOP: [&str; 8] =
    ["connection", "proxy-connection", "keep-alive", "proxy-authorization", "proxy-authenticate", "te", "trailer", "upgrade"];

/// The head of `request` as the origin server gets it: origin-form target, `Host` from the
/// URL (RFC 9112 §3.2.2: a proxy replaces it), hop-by-hop fields dropped, `Connection: close`.
fn origin_form(request: &Request, target: &Target, path: &str) -> Vec<u8> {
    let named_in_connection: Vec<String> = request
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| String::from_utf8_lossy(v).split(',').map(|t| t.trim().to_ascii_lowercase()).collect::<Vec<_>>())
        .collect();
    let mut head = format!("{} {path} HTTP/1.1\r\n", request.method).into_bytes();
    let host = match endpoint(&target.host, target.port) {
        with_port if target.port != 80 => with_port,
        with_port => with_port.trim_end_matches(":80").to_string(),
    };
    head.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    for (name, value) in &request.headers {
        let lower = name.to_ascii_lowercase();
        if lower == "host" || HOP_BY_HOP.contains(&lower.as_str()) || named_in_connection.contains(&lower) {
            continue;
        }
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// When either direction last moved a byte, in milliseconds since `start`.
struct Clock {
    start: Instant,
    last_ms: AtomicU64,
}

impl Clock {
    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// Time left before the relay counts as idle.
    fn remaining(&self) -> Duration {
        let last = self.start + Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        IDLE_TIMEOUT.saturating_sub(last.elapsed())
    }
}

/// Copies bytes both ways until both sides are done or nothing moves for [`IDLE_TIMEOUT`]; an
/// end of stream on one side is passed on as a half-close.
async fn relay(mut client: TcpStream, mut upstream: TcpStream) {
    let clock = Clock { start: Instant::now(), last_ms: AtomicU64::new(0) };
    let (client_read, client_write) = client.split();
    let (upstream_read, upstream_write) = upstream.split();
    tokio::join!(pump(client_read, upstream_write, &clock), pump(upstream_read, client_write, &clock));
}

async fn pump(mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin, clock: &Clock) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let left = clock.remaining();
        if left.is_zero() {
            break;
        }
        let n = match timeout(left, from.read(&mut buf)).await {
            Err(_) => continue,
            Ok(Ok(0) | Err(_)) => break,
            Ok(Ok(n)) => n,
        };
        clock.touch();
        if !matches!(timeout(IDLE_TIMEOUT, to.write_all(&buf[..n])).await, Ok(Ok(()))) {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests;
