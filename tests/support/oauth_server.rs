//! An OAuth authorization server and an MCP server behind it, on 127.0.0.1 (one origin): the
//! MCP endpoint `/mcp` (2025-11-25, JSON answers) wants a bearer token it issued, points at its
//! protected resource metadata in its 401s, and answers 403 `insufficient_scope` to the tool
//! `write` without scope `mcp:write` (its `echo` tool carelessly returns the `Authorization`
//! header it got, as is and in base64); the authorization server publishes RFC 8414 metadata,
//! registers clients (RFC 7591), approves every authorization request at once (a redirect
//! carrying the code, `state` and `iss`: no person needed), checks the PKCE verifier, and
//! issues access tokens good for a few requests and refresh tokens rotated on each use.

use base64::Engine;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// How the authorization server misbehaves, if at all.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub enum Flaw {
    /// It does not.
    #[default]
    None,
    /// Its redirect names another issuer in `iss`.
    WrongIss,
    /// Its redirect carries another `state`.
    WrongState,
    /// It wants a person: `/authorize` answers with a login page, unless the request carries
    /// `x-approve: yes` (what the person's browser sends once they approve).
    LoginPage,
}

/// Everything the servers saw and issued.
#[derive(Default)]
pub struct Seen {
    /// Codes pending: code → (code_challenge, client_id, scope).
    codes: BTreeMap<String, (String, String, String)>,
    /// Access tokens: token → (scope, requests left).
    access: BTreeMap<String, (String, u32)>,
    /// Live refresh tokens: token → (client_id, scope).
    refresh: BTreeMap<String, (String, String)>,
    /// Every token issued, access and refresh.
    pub issued: Vec<String>,
    /// Refresh tokens issued, in order.
    pub refresh_issued: Vec<String>,
    /// One line per notable event: `authorize scope=…`, `pkce ok`, `pkce mismatch`,
    /// `refresh`, `refresh refused`, `register`, `token`, `401`, `403`.
    pub log: Vec<String>,
    serial: u32,
}

struct State {
    base: String,
    flaw: Flaw,
    uses: u32,
    /// The `expires_in` of its access tokens (3600 unless set).
    expires_in: std::sync::atomic::AtomicU64,
    seen: Mutex<Seen>,
}

/// A running authorization server with its MCP server.
pub struct OAuthServer {
    server: MockServer,
    state: Arc<State>,
}

impl OAuthServer {
    /// Starts both; an access token is good for `uses` MCP requests.
    pub async fn start(flaw: Flaw, uses: u32) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let server = MockServer::builder().listener(listener).start().await;
        let expires_in = std::sync::atomic::AtomicU64::new(3600);
        let state = Arc::new(State { base: server.uri(), flaw, uses, expires_in, seen: Mutex::default() });
        Mock::given(any()).respond_with(Responder(state.clone())).mount(&server).await;
        OAuthServer { server, state }
    }

    /// The MCP server's URL.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.server.uri())
    }

    /// A refresh token for client `client` with `scope`, as a login would have left.
    pub fn seed_refresh_token(&self, client: &str, scope: &str) -> String {
        let mut seen = self.state.seen.lock().unwrap();
        issue_refresh(&mut seen, client, scope)
    }

    /// Says its access tokens expire after `secs` (it still honours them for their uses).
    pub fn set_expires_in(&self, secs: u64) {
        self.state.expires_in.store(secs, std::sync::atomic::Ordering::Relaxed);
    }

    /// What it saw, under its lock.
    pub fn seen<T>(&self, read: impl FnOnce(&Seen) -> T) -> T {
        read(&self.state.seen.lock().unwrap())
    }
}

fn issue_refresh(seen: &mut Seen, client: &str, scope: &str) -> String {
    seen.serial += 1;
    let token = format!("rt-{}-Kq7vW2mZ9xLp", seen.serial);
    seen.refresh.insert(token.clone(), (client.into(), scope.into()));
    seen.issued.push(token.clone());
    seen.refresh_issued.push(token.clone());
    token
}

fn s256(verifier: &str) -> String {
    use base64::Engine;
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

fn form(text: &str) -> BTreeMap<String, String> {
    let url = reqwest::Url::parse(&format!("http://x/?{text}")).unwrap();
    url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

struct Responder(Arc<State>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let base = &self.0.base;
        match (request.method.as_str(), request.url.path()) {
            ("GET", "/.well-known/oauth-protected-resource/mcp") => ResponseTemplate::new(200).set_body_json(
                json!({"resource": format!("{base}/mcp"), "authorization_servers": [base], "scopes_supported": ["mcp:read"]}),
            ),
            ("GET", "/.well-known/oauth-authorization-server") => ResponseTemplate::new(200).set_body_json(json!({
                "issuer": base, "authorization_endpoint": format!("{base}/authorize"), "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"), "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"], "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"], "authorization_response_iss_parameter_supported": true,
                "scopes_supported": ["mcp:read", "mcp:write", "offline_access"],
            })),
            ("GET", "/authorize") => self.authorize(request),
            ("POST", "/token") => self.token(&form(&String::from_utf8_lossy(&request.body))),
            ("POST", "/register") => {
                let mut seen = self.0.seen.lock().unwrap();
                seen.serial += 1;
                seen.log.push("register".into());
                let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
                let id = format!("dyn-client-{}", seen.serial);
                ResponseTemplate::new(201)
                    .set_body_json(json!({"client_id": id, "redirect_uris": body["redirect_uris"], "token_endpoint_auth_method": "none"}))
            }
            ("POST", "/mcp") => self.mcp(request),
            _ => ResponseTemplate::new(405),
        }
    }
}

impl Responder {
    fn authorize(&self, request: &Request) -> ResponseTemplate {
        let q: BTreeMap<String, String> = request.url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        let get = |k: &str| q.get(k).cloned().unwrap_or_default();
        let mut seen = self.0.seen.lock().unwrap();
        seen.log.push(format!("authorize scope={} resource={}", get("scope"), get("resource")));
        let approved = request.headers.get("x-approve").is_some_and(|v| v == "yes");
        if self.0.flaw == Flaw::LoginPage && !approved {
            return ResponseTemplate::new(200).set_body_string("<form>Log in to approve dracode</form>");
        }
        if get("code_challenge_method") != "S256" || get("code_challenge").is_empty() {
            return ResponseTemplate::new(400).set_body_string("PKCE S256 required");
        }
        seen.serial += 1;
        let code = format!("code-{}", seen.serial);
        seen.codes.insert(code.clone(), (get("code_challenge"), get("client_id"), get("scope")));
        let (state, iss) = match self.0.flaw {
            Flaw::WrongState => ("forged".to_string(), self.0.base.clone()),
            Flaw::WrongIss => (get("state"), "http://evil.example".to_string()),
            Flaw::None | Flaw::LoginPage => (get("state"), self.0.base.clone()),
        };
        let mut back = reqwest::Url::parse(&get("redirect_uri")).unwrap();
        back.query_pairs_mut().append_pair("code", &code).append_pair("state", &state).append_pair("iss", &iss);
        ResponseTemplate::new(302).insert_header("location", back.as_str())
    }

    fn token(&self, f: &BTreeMap<String, String>) -> ResponseTemplate {
        let get = |k: &str| f.get(k).cloned().unwrap_or_default();
        let mut seen = self.0.seen.lock().unwrap();
        let refused = |why: &str| ResponseTemplate::new(400).set_body_json(json!({"error": why}));
        let (client, scope) = match get("grant_type").as_str() {
            "authorization_code" => {
                let Some((challenge, client, scope)) = seen.codes.remove(&get("code")) else { return refused("invalid_grant") };
                if s256(&get("code_verifier")) != challenge || client != get("client_id") {
                    seen.log.push("pkce mismatch".into());
                    return refused("invalid_grant");
                }
                seen.log.push("pkce ok".into());
                (client, scope)
            }
            "refresh_token" => match seen.refresh.remove(&get("refresh_token")) {
                Some((client, scope)) if client == get("client_id") => {
                    seen.log.push("refresh".into());
                    (client, scope)
                }
                _ => {
                    seen.log.push("refresh refused".into());
                    return refused("invalid_grant");
                }
            },
            _ => return refused("unsupported_grant_type"),
        };
        if get("resource") != format!("{}/mcp", self.0.base) {
            return refused("invalid_target");
        }
        seen.serial += 1;
        let access = format!("at-{}-Vb3nQ8sYt5Hc", seen.serial);
        seen.access.insert(access.clone(), (scope.clone(), self.0.uses));
        seen.issued.push(access.clone());
        let refresh = issue_refresh(&mut seen, &client, &scope);
        seen.log.push("token".into());
        ResponseTemplate::new(200).set_body_json(
            json!({"access_token": access, "token_type": "Bearer", "expires_in": self.0.expires_in.load(std::sync::atomic::Ordering::Relaxed), "refresh_token": refresh, "scope": scope}),
        )
    }

    fn mcp(&self, request: &Request) -> ResponseTemplate {
        let base = &self.0.base;
        let metadata = format!("{base}/.well-known/oauth-protected-resource/mcp");
        let bearer =
            request.headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
        let message: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let mut seen = self.0.seen.lock().unwrap();
        let scope = match seen.access.get_mut(bearer) {
            Some((scope, left)) if *left > 0 => {
                *left -= 1;
                scope.clone()
            }
            _ => {
                seen.log.push("401".into());
                return ResponseTemplate::new(401).insert_header(
                    "www-authenticate",
                    format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\"").as_str(),
                );
            }
        };
        let id = message["id"].clone();
        let result = match message["method"].as_str().unwrap_or("") {
            "initialize" => {
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "guarded", "version": "1"}})
            }
            "tools/list" => {
                let tools = ["whoami", "write", "echo"].map(|name| json!({"name": name, "inputSchema": {"type": "object"}}));
                json!({ "tools": tools })
            }
            "tools/call" if message["params"]["name"] == "write" && !scope.split(' ').any(|s| s == "mcp:write") => {
                seen.log.push("403".into());
                let challenge = format!("Bearer error=\"insufficient_scope\", scope=\"mcp:write\", resource_metadata=\"{metadata}\"");
                return ResponseTemplate::new(403).insert_header("www-authenticate", challenge.as_str());
            }
            "tools/call" if message["params"]["name"] == "echo" => {
                // A careless server: the credentials it got, as sent and in base64.
                let header = format!("Authorization: Bearer {bearer}");
                let encoded = base64::engine::general_purpose::STANDARD.encode(&header);
                json!({"content": [{"type": "text", "text": format!("you sent {header} ({encoded})")}]})
            }
            "tools/call" => {
                json!({"content": [{"type": "text", "text": format!("{} done with scope {scope}", message["params"]["name"].as_str().unwrap_or(""))}]})
            }
            _ if id.is_null() => return ResponseTemplate::new(202),
            _ => {
                return ResponseTemplate::new(200)
                    .set_body_json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}}));
            }
        };
        ResponseTemplate::new(200).set_body_json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }
}
