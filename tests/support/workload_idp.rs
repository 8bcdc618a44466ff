//! A fake workload-identity world on 127.0.0.1, in one server (the code-flow authorization
//! server is `oauth_server`): GitHub Actions' OIDC endpoint
//! (`/oidc/token?api-version=2.0&audience=AUD`, which requires `Authorization: bearer
//! <request token>` and answers `{"value": "<jwt>"}`), an authorization server (RFC 8414
//! metadata, a token endpoint taking the JWT-bearer grant and token exchange, and accepting only
//! assertions its OIDC endpoint issued for its issuer), and an MCP server at `/mcp` (the
//! `initialize` revision, with a session) behind it: its protected resource metadata, a 401
//! challenge, and — with DPoP — a check of every request's proof (signature, `htm`, `htu`,
//! `ath`, the bound key, the nonce; a replayed `jti` is refused). Its `echo` tool carelessly
//! returns the `Authorization` header it got.

use base64::Engine;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;
/// The nonce the authorization server and the MCP server demand with `nonces`.
pub const AS_NONCE: &str = "as-nonce-7";
/// The MCP server's nonce.
pub const RS_NONCE: &str = "rs-nonce-9";

/// What the world demands.
#[derive(Clone, Default)]
pub struct Demands {
    /// DPoP: metadata offers ES256, tokens are `token_type: DPoP`, the MCP server checks proofs.
    pub dpop: bool,
    /// Both servers first answer `use_dpop_nonce`.
    pub nonces: bool,
    /// The challenge uses the `DPoP` scheme (else `Bearer`).
    pub dpop_challenge: bool,
    /// An access token expires after this many requests to the MCP server.
    pub token_uses: Option<usize>,
}

#[derive(Default)]
struct State {
    base: String,
    request_token: String,
    demands: Demands,
    /// Assertions the OIDC endpoint issued.
    issued: Mutex<BTreeSet<String>>,
    /// Access tokens issued, with the key (jwk `x`) bound to each.
    tokens: Mutex<BTreeMap<String, Option<String>>>,
    jtis: Mutex<BTreeSet<String>>,
    /// Requests the MCP server accepted, by token.
    uses: Mutex<BTreeMap<String, usize>>,
    /// The `Authorization` and `DPoP` headers of the last POST the MCP server accepted.
    last: Mutex<Option<(String, String)>>,
    events: Mutex<Vec<String>>,
}

/// A running fake world.
pub struct OAuthWorld {
    server: MockServer,
    state: Arc<State>,
}

impl OAuthWorld {
    /// Starts it; the OIDC endpoint accepts `request_token`.
    pub async fn start(request_token: &str, demands: Demands) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let server = MockServer::builder().listener(listener).start().await;
        let state = Arc::new(State { base: server.uri(), request_token: request_token.into(), demands, ..State::default() });
        Mock::given(any()).respond_with(Responder(state.clone())).mount(&server).await;
        OAuthWorld { server, state }
    }

    /// The MCP server's URL.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.server.uri())
    }

    /// The authorization server's issuer.
    pub fn issuer(&self) -> String {
        self.server.uri()
    }

    /// `ACTIONS_ID_TOKEN_REQUEST_URL`.
    pub fn oidc_url(&self) -> String {
        format!("{}/oidc/token?api-version=2.0", self.server.uri())
    }

    /// An assertion issued for `audience` (as a platform would project into a file).
    pub fn issue(&self, audience: &str) -> String {
        self.state.issue(audience)
    }

    /// What happened, in order: `oidc AUD`, `token GRANT ok|refused`, `mcp METHOD …`.
    pub fn events(&self) -> Vec<String> {
        self.state.events.lock().unwrap().clone()
    }

    /// Sends the last accepted POST's `Authorization` and DPoP proof again (a replay); returns
    /// the status the MCP server answers.
    pub async fn replay_last(&self) -> u16 {
        let (auth, proof) = self.state.last.lock().unwrap().clone().expect("a request was accepted");
        let client = dracode_llm::http::HttpClient::default().get().clone();
        let body = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/list"});
        let sent = client.post(self.mcp_url()).header("authorization", auth).header("dpop", proof).body(body.to_string()).send().await;
        sent.unwrap().status().as_u16()
    }

    /// Every assertion and access token issued.
    pub fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = self.state.issued.lock().unwrap().iter().cloned().collect();
        out.extend(self.state.tokens.lock().unwrap().keys().cloned());
        out
    }
}

struct Responder(Arc<State>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let state = &self.0;
        let base = &state.base;
        match request.url.path() {
            "/oidc/token" => state.oidc(request),
            "/.well-known/oauth-protected-resource/mcp" | "/.well-known/oauth-protected-resource" => {
                ResponseTemplate::new(200).set_body_json(json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}))
            }
            "/.well-known/oauth-authorization-server" => {
                let mut meta = json!({"issuer": base, "token_endpoint": format!("{base}/token"),
                    "grant_types_supported": ["urn:ietf:params:oauth:grant-type:jwt-bearer", "urn:ietf:params:oauth:grant-type:token-exchange"],
                    "token_endpoint_auth_methods_supported": ["none"]});
                if state.demands.dpop {
                    meta["dpop_signing_alg_values_supported"] = json!(["ES256"]);
                }
                ResponseTemplate::new(200).set_body_json(meta)
            }
            "/token" => state.token(request),
            "/idp/token" => state.idp(request),
            "/mcp" => state.mcp(request),
            _ => ResponseTemplate::new(404),
        }
    }
}

impl State {
    fn log(&self, event: String) {
        self.events.lock().unwrap().push(event);
    }

    fn issue(&self, audience: &str) -> String {
        let header = B64.encode(r#"{"alg":"RS256","typ":"JWT","kid":"fake"}"#);
        let n = self.issued.lock().unwrap().len();
        let claims = json!({"iss": format!("{}/oidc", self.base), "sub": "repo:acme/app:ref:refs/heads/main", "aud": audience,
            "jti": format!("oidc-{n}-{}", std::process::id())});
        let jwt = format!("{header}.{}.{}", B64.encode(claims.to_string()), B64.encode(format!("signature-{n}-of-the-fake-oidc")));
        self.issued.lock().unwrap().insert(jwt.clone());
        jwt
    }

    fn oidc(&self, request: &Request) -> ResponseTemplate {
        let query: BTreeMap<String, String> = request.url.query_pairs().into_owned().collect();
        let auth = header(request, "authorization");
        if auth != format!("bearer {}", self.request_token) || query.get("api-version").map(String::as_str) != Some("2.0") {
            self.log("oidc refused".into());
            return ResponseTemplate::new(401).set_body_json(json!({"message": "bad request token"}));
        }
        let audience = query.get("audience").cloned().unwrap_or_default();
        self.log(format!("oidc {audience}"));
        ResponseTemplate::new(200).set_body_json(json!({"count": 1, "value": self.issue(&audience)}))
    }

    /// The enterprise identity provider: exchanges an ID token it issued (audience `idp-client`)
    /// for an ID-JAG for this world's authorization server and MCP server.
    fn idp(&self, request: &Request) -> ResponseTemplate {
        let form = form_of(&request.body);
        let get = |k: &str| form.get(k).map(String::as_str).unwrap_or_default();
        let claims = get("subject_token").split('.').nth(1).and_then(|c| B64.decode(c).ok());
        let aud = claims.and_then(|c| serde_json::from_slice::<Value>(&c).ok()).map(|c| c["aud"].clone()).unwrap_or_default();
        let expected = [
            get("grant_type") == "urn:ietf:params:oauth:grant-type:token-exchange",
            get("requested_token_type") == "urn:ietf:params:oauth:token-type:id-jag",
            get("subject_token_type") == "urn:ietf:params:oauth:token-type:id_token",
            self.issued.lock().unwrap().contains(get("subject_token")) && aud == "idp-client",
            get("audience") == self.base && get("resource") == format!("{}/mcp", self.base) && get("client_id") == "idp-client",
        ];
        if expected.contains(&false) {
            self.log(format!("idp refused: {expected:?}"));
            return ResponseTemplate::new(400).set_body_json(json!({"error": "invalid_request"}));
        }
        self.log("idp exchange ok".into());
        let jag = self.issue(&self.base);
        let issued = "urn:ietf:params:oauth:token-type:id-jag";
        ResponseTemplate::new(200).set_body_json(json!({"access_token": jag, "issued_token_type": issued, "token_type": "N_A"}))
    }

    /// Whether `jwt` is an assertion this world issued for its issuer.
    fn accepts(&self, jwt: &str) -> bool {
        let issued = self.issued.lock().unwrap().contains(jwt);
        let claims = jwt.split('.').nth(1).and_then(|c| B64.decode(c).ok()).and_then(|c| serde_json::from_slice::<Value>(&c).ok());
        issued && claims.is_some_and(|c| c["aud"] == self.base.as_str())
    }

    fn token(&self, request: &Request) -> ResponseTemplate {
        let form = form_of(&request.body);
        let grant = form.get("grant_type").cloned().unwrap_or_default();
        let short = grant.rsplit(':').next().unwrap_or_default().to_string();
        let refuse = |why: &str| {
            self.log(format!("token {short} refused: {why}"));
            ResponseTemplate::new(400).set_body_json(json!({"error": "invalid_grant", "error_description": why}))
        };
        if form.get("resource").map(String::as_str) != Some(&format!("{}/mcp", self.base)) {
            return refuse("resource is not the MCP server");
        }
        let presented = match short.as_str() {
            "jwt-bearer" => form.get("assertion"),
            "token-exchange" if form.get("subject_token_type").map(String::as_str) == Some("urn:ietf:params:oauth:token-type:jwt") => {
                form.get("subject_token")
            }
            _ => return refuse("unsupported grant or subject_token_type"),
        };
        if !presented.is_some_and(|a| self.accepts(a)) {
            return refuse("the assertion was not issued for this server");
        }
        let key = match self.token_proof(request, &short) {
            Ok(key) => key,
            Err(answer) => return *answer,
        };
        let n = self.tokens.lock().unwrap().len();
        let token = format!("at-{n}-{}-issued-by-the-fake-as", std::process::id());
        self.tokens.lock().unwrap().insert(token.clone(), key);
        let mut details = form.get("audience").map(|a| format!(" audience={a}")).unwrap_or_default();
        let basic = header(request, "authorization")
            .strip_prefix("Basic ")
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok().map(|d| String::from_utf8_lossy(&d).into_owned()));
        if let Some((id, _)) = basic.as_deref().and_then(|b| b.split_once(':')) {
            details.push_str(&format!(" client={id}"));
        }
        self.log(format!("token {short} ok{details}"));
        let token_type = if self.demands.dpop { "DPoP" } else { "Bearer" };
        ResponseTemplate::new(200).set_body_json(json!({"access_token": token, "token_type": token_type, "expires_in": 300}))
    }

    /// With DPoP, the key of the token request's proof (`Err`: the answer refusing it).
    fn token_proof(&self, request: &Request, short: &str) -> Result<Option<String>, Box<ResponseTemplate>> {
        if !self.demands.dpop {
            return Ok(None);
        }
        match self.check_proof(request, None, self.demands.nonces.then_some(AS_NONCE)) {
            Ok(key) => Ok(Some(key)),
            Err(why) if why == "nonce" => {
                self.log(format!("token {short} asked for a nonce"));
                Err(Box::new(
                    ResponseTemplate::new(400).insert_header("DPoP-Nonce", AS_NONCE).set_body_json(json!({"error": "use_dpop_nonce"})),
                ))
            }
            Err(why) => {
                self.log(format!("token {short} refused: {why}"));
                Err(Box::new(ResponseTemplate::new(400).set_body_json(json!({"error": "invalid_dpop_proof", "error_description": why}))))
            }
        }
    }

    /// Checks the request's DPoP proof: its signature by its own `jwk`, `typ`, `htm`, `htu`, a
    /// fresh `jti`, `iat`, `ath` of `token` and `nonce`; returns the key's `x`. `Err("nonce")`
    /// when only the nonce is missing.
    fn check_proof(&self, request: &Request, token: Option<&str>, nonce: Option<&str>) -> Result<String, String> {
        let proof = header(request, "dpop");
        let parts: Vec<&str> = proof.split('.').collect();
        let [head, body, signature] = parts[..] else { return Err("no DPoP proof".into()) };
        let decode = |part: &str| B64.decode(part).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok()).unwrap_or_default();
        let (head_json, claims) = (decode(head), decode(body));
        if head_json["typ"] != "dpop+jwt" || head_json["alg"] != "ES256" || head_json["jwk"].get("d").is_some() {
            return Err("bad proof header".into());
        }
        let x = head_json["jwk"]["x"].as_str().unwrap_or_default();
        let y = head_json["jwk"]["y"].as_str().unwrap_or_default();
        let point = [vec![4u8], B64.decode(x).unwrap_or_default(), B64.decode(y).unwrap_or_default()].concat();
        let key = ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, point);
        let signed = format!("{head}.{body}");
        if key.verify(signed.as_bytes(), &B64.decode(signature).unwrap_or_default()).is_err() {
            return Err("the proof's signature does not verify".into());
        }
        let htu = format!("{}{}", self.base, request.url.path());
        if claims["htm"] != request.method.as_str() || claims["htu"] != htu.as_str() {
            return Err(format!("htm/htu {} {} do not match {} {htu}", claims["htm"], claims["htu"], request.method));
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        if claims["iat"].as_u64().is_none_or(|iat| iat.abs_diff(now) > 60) {
            return Err("iat".into());
        }
        if let Some(token) = token {
            let ath = B64.encode(ring::digest::digest(&ring::digest::SHA256, token.as_bytes()));
            if claims["ath"] != ath.as_str() {
                return Err("ath does not match the token".into());
            }
        }
        if nonce.is_some_and(|n| claims["nonce"] != n) {
            return Err("nonce".into());
        }
        let jti = claims["jti"].as_str().unwrap_or_default().to_string();
        if jti.is_empty() || !self.jtis.lock().unwrap().insert(jti) {
            return Err("replayed jti".into());
        }
        Ok(x.to_string())
    }

    fn mcp(&self, request: &Request) -> ResponseTemplate {
        let method = request.method.to_string();
        let auth = header(request, "authorization");
        let scheme = if self.demands.dpop { "DPoP" } else { "Bearer" };
        let token = auth.strip_prefix(&format!("{scheme} ")).unwrap_or_default().to_string();
        let used = *self.uses.lock().unwrap().entry(token.clone()).and_modify(|n| *n += 1).or_insert(1);
        let expired = self.demands.token_uses.is_some_and(|limit| used > limit);
        let bound = self.tokens.lock().unwrap().get(&token).cloned().filter(|_| !expired);
        let challenge_scheme = if self.demands.dpop_challenge { "DPoP" } else { "Bearer" };
        let metadata = format!("{}/.well-known/oauth-protected-resource/mcp", self.base);
        let Some(bound) = bound else {
            self.log(format!("mcp {method} unauthorized"));
            return ResponseTemplate::new(401)
                .insert_header("WWW-Authenticate", format!("{challenge_scheme} resource_metadata=\"{metadata}\"").as_str());
        };
        if self.demands.dpop {
            let nonce = self.demands.nonces.then_some(RS_NONCE);
            match self.check_proof(request, Some(&token), nonce) {
                Ok(key) if Some(&key) == bound.as_ref() => {}
                Ok(_) => return self.refuse_proof(&method, "the proof's key is not the token's"),
                Err(why) if why == "nonce" => {
                    self.log(format!("mcp {method} asked for a nonce"));
                    return ResponseTemplate::new(401)
                        .insert_header(
                            "WWW-Authenticate",
                            format!("DPoP error=\"use_dpop_nonce\", resource_metadata=\"{metadata}\"").as_str(),
                        )
                        .insert_header("DPoP-Nonce", RS_NONCE);
                }
                Err(why) => return self.refuse_proof(&method, &why),
            }
        }
        match method.as_str() {
            "GET" => {
                self.log("mcp GET ok".into());
                ResponseTemplate::new(405)
            }
            "DELETE" => {
                self.log("mcp DELETE ok".into());
                ResponseTemplate::new(200)
            }
            _ => {
                *self.last.lock().unwrap() = Some((auth.clone(), header(request, "dpop")));
                self.rpc(request, &auth)
            }
        }
    }

    fn refuse_proof(&self, method: &str, why: &str) -> ResponseTemplate {
        self.log(format!("mcp {method} refused: {why}"));
        ResponseTemplate::new(401).insert_header("WWW-Authenticate", "DPoP error=\"invalid_dpop_proof\"")
    }

    fn rpc(&self, request: &Request, auth: &str) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let rpc = body["method"].as_str().unwrap_or_default().to_string();
        self.log(format!("mcp POST {rpc}"));
        let result = match rpc.as_str() {
            "initialize" => {
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}})
            }
            "tools/list" => json!({"tools": [{"name": "echo", "description": "Echoes text.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}),
            "tools/call" => {
                let text = body["params"]["arguments"]["text"].as_str().unwrap_or_default();
                json!({"content": [{"type": "text", "text": format!("echo: {text} [Authorization: {auth}]")}], "isError": false})
            }
            _ if body.get("id").is_none() => return ResponseTemplate::new(202),
            _ => {
                let error = json!({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32601, "message": "no such method"}});
                return ResponseTemplate::new(200).set_body_json(error);
            }
        };
        let answer = json!({"jsonrpc": "2.0", "id": body["id"], "result": result});
        ResponseTemplate::new(200).insert_header("Mcp-Session-Id", "session-1").set_body_json(answer)
    }
}

/// An `application/x-www-form-urlencoded` body.
fn form_of(body: &[u8]) -> BTreeMap<String, String> {
    let decode = |s: &str| percent_encoding::percent_decode_str(&s.replace('+', " ")).decode_utf8_lossy().into_owned();
    let text = String::from_utf8_lossy(body);
    text.split('&').filter_map(|pair| pair.split_once('=')).map(|(k, v)| (decode(k), decode(v))).collect()
}

fn header(request: &Request, name: &str) -> String {
    request.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}
