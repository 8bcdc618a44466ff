//! A fake of GitHub's REST API on 127.0.0.1 for `dracode publish`, strict where GitHub is, and
//! checked against GitHub's own OpenAPI description
//! (`tests/fixtures/schemas/github-rest-publish.json`, reduced from github/rest-api-description):
//!
//! - a request whose method and path are not an operation there, whose query names a parameter
//!   the operation does not have (or a value its schema refuses), or whose JSON body does not
//!   validate against the operation's `requestBody` schema is answered 422 (as GitHub answers a
//!   body it refuses) and recorded as a violation;
//! - every request needs `Authorization: Bearer <token>` (or `token <token>`; else 401 "Bad
//!   credentials"), `Accept: application/vnd.github+json` and a `User-Agent` (else 403, GitHub's
//!   words);
//! - answers are built as GitHub's and validated against the operation's response schema for
//!   their status before they are sent (a fake that drifts from the spec fails the test too);
//! - a pull request is opened only when its head branch exists in the remote (a local bare
//!   repository), and only once per open head, as GitHub does.
//!
//! [`GithubApi::refuse_creation`] makes `pulls/create` answer as GitHub does when the
//! repository does not allow GitHub Actions to create pull requests.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// GitHub's answer to a pull request GitHub Actions' token may not create (as users report it).
pub fn actions_not_permitted() -> Value {
    json!({
        "message": "GitHub Actions is not permitted to create or approve pull requests.",
        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
        "status": "403"
    })
}

/// A pull request the fake holds.
#[derive(Debug, Clone)]
pub struct Pull {
    /// Its number.
    pub number: u64,
    /// Its head branch.
    pub head: String,
    /// Its base branch.
    pub base: String,
    /// Its title.
    pub title: String,
    /// Its body.
    pub body: String,
    /// `open` or `closed`.
    pub state: String,
}

/// A request as received: method, path, query and body.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path.
    pub path: String,
    /// The query string.
    pub query: String,
    /// The JSON body (`null` without one).
    pub body: Value,
}

#[derive(Default)]
struct Data {
    pulls: Vec<Pull>,
    comments: Vec<(u64, String)>,
    requests: Vec<Seen>,
    violations: Vec<String>,
    refusal: Option<(u16, Value)>,
}

struct State {
    token: String,
    owner: String,
    name: String,
    remote: PathBuf,
    base_url: OnceLock<String>,
    data: Mutex<Data>,
}

/// A running fake of GitHub's REST API for one repository.
pub struct GithubApi {
    server: MockServer,
    state: Arc<State>,
}

impl GithubApi {
    /// Serves repository `repository` (`OWNER/NAME`) to `token`; `remote` is the bare repository
    /// the branches are pushed to.
    pub async fn start(token: &str, repository: &str, remote: &Path) -> GithubApi {
        let (owner, name) = repository.split_once('/').expect("OWNER/NAME");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let server = MockServer::builder().listener(listener).start().await;
        let state = Arc::new(State {
            token: token.into(),
            owner: owner.into(),
            name: name.into(),
            remote: remote.to_path_buf(),
            base_url: OnceLock::new(),
            data: Mutex::new(Data::default()),
        });
        let _ = state.base_url.set(server.uri());
        Mock::given(any()).respond_with(Responder(state.clone())).mount(&server).await;
        GithubApi { server, state }
    }

    /// For `GITHUB_API_URL`.
    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// The pull requests, in order of their numbers.
    pub fn pulls(&self) -> Vec<Pull> {
        self.state.data.lock().unwrap().pulls.clone()
    }

    /// The comments: (issue number, body).
    pub fn comments(&self) -> Vec<(u64, String)> {
        self.state.data.lock().unwrap().comments.clone()
    }

    /// Every request received.
    pub fn requests(&self) -> Vec<Seen> {
        self.state.data.lock().unwrap().requests.clone()
    }

    /// Requests the spec refuses and answers the spec does not allow: empty when all was well.
    pub fn violations(&self) -> Vec<String> {
        self.state.data.lock().unwrap().violations.clone()
    }

    /// Makes every `pulls/create` answer `status` with `body`.
    pub fn refuse_creation(&self, status: u16, body: Value) {
        self.state.data.lock().unwrap().refusal = Some((status, body));
    }
}

struct Responder(Arc<State>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value =
            if request.body.is_empty() { Value::Null } else { serde_json::from_slice(&request.body).unwrap_or(json!("<not JSON>")) };
        let seen = Seen {
            method: request.method.to_string(),
            path: request.url.path().to_string(),
            query: request.url.query().unwrap_or_default().to_string(),
            body: body.clone(),
        };
        self.0.data.lock().unwrap().requests.push(seen);
        let (status, answer, operation) = match self.check(request, &body) {
            Err((status, answer)) => (status, answer, None),
            Ok((operation, params)) => {
                let (status, answer) = self.answer(&operation, &params, &body);
                (status, answer, Some(operation))
            }
        };
        if let Some(operation) = operation
            && let Err(why) = check_response(&operation, status, &answer)
        {
            self.violation(format!("the fake's own {status} answer to {} breaks the spec: {why}", request.url.path()));
        }
        ResponseTemplate::new(status).set_body_json(answer).insert_header("content-type", "application/json; charset=utf-8")
    }
}

/// A refusal: the status and GitHub's error body.
type Refusal = (u16, Value);

/// An operation of the spec and the request's parameters (path, then query) by name.
type Matched = (Value, Vec<(String, String)>);

/// GitHub's validation failure, as the `validation-error` schema has it.
fn invalid(message: &str, errors: Value) -> Refusal {
    (422, json!({"message": message, "documentation_url": "https://docs.github.com/rest", "errors": errors}))
}

impl Responder {
    fn violation(&self, what: String) {
        self.0.data.lock().unwrap().violations.push(what);
    }

    /// The headers, then the operation the spec has for the method and path, its parameters and
    /// its body; the operation and the path's parameters, or the refusal to send.
    fn check(&self, request: &Request, body: &Value) -> Result<Matched, Refusal> {
        let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        if header("user-agent").is_empty() {
            self.violation(format!("{} {}: no User-Agent", request.method, request.url.path()));
            return Err((
                403,
                json!({"message": "Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required)."}),
            ));
        }
        let auth = header("authorization");
        if auth != format!("Bearer {}", self.0.token) && auth != format!("token {}", self.0.token) {
            return Err((401, json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"})));
        }
        if !header("accept").split(',').any(|a| a.trim() == "application/vnd.github+json") {
            self.violation(format!(
                "{} {}: Accept is {:?}, not application/vnd.github+json",
                request.method,
                request.url.path(),
                header("accept")
            ));
            return Err(invalid("Accept must be application/vnd.github+json", json!([])));
        }
        let method = request.method.to_string().to_lowercase();
        let Some((operation, params)) = operation_for(&method, request.url.path()) else {
            self.violation(format!("{} {} is not an operation of the spec", request.method, request.url.path()));
            return Err(invalid("Not an operation of GitHub's REST API", json!([])));
        };
        let query: Vec<(String, String)> = request.url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        if let Err(why) = check_parameters(&operation, &params, &query).and_then(|()| check_body(&operation, body)) {
            self.violation(format!("{} {}: {why}", request.method, request.url.path()));
            return Err(invalid("Invalid request.", json!([{"code": "invalid", "message": why}])));
        }
        if params.iter().any(|(k, v)| (k == "owner" && *v != self.0.owner) || (k == "repo" && *v != self.0.name)) {
            return Err((404, json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"})));
        }
        let mut all = params;
        all.extend(query);
        Ok((operation, all))
    }

    /// What GitHub would answer to a valid request.
    fn answer(&self, operation: &Value, params: &[(String, String)], body: &Value) -> (u16, Value) {
        let param = |name: &str| params.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let mut data = self.0.data.lock().unwrap();
        match operation["operationId"].as_str().unwrap_or_default() {
            "pulls/list" => {
                let state = param("state").unwrap_or_else(|| "open".into());
                let head = param("head");
                let prefix = format!("{}:", self.0.owner);
                let pulls: Vec<Value> = data
                    .pulls
                    .iter()
                    .filter(|p| state == "all" || p.state == state)
                    .filter(|p| head.as_deref().is_none_or(|h| h.strip_prefix(&prefix) == Some(p.head.as_str())))
                    .map(|p| self.pull_json(p))
                    .collect();
                (200, Value::Array(pulls))
            }
            "pulls/create" => {
                if let Some(refusal) = data.refusal.clone() {
                    return refusal;
                }
                let head = body["head"].as_str().unwrap_or_default().to_string();
                if self.head_sha(&head).is_none() {
                    return invalid("Validation Failed", json!([{"resource": "PullRequest", "field": "head", "code": "invalid"}]));
                }
                if data.pulls.iter().any(|p| p.head == head && p.state == "open") {
                    let message = format!("A pull request already exists for {}:{head}.", self.0.owner);
                    return invalid("Validation Failed", json!([{"resource": "PullRequest", "code": "custom", "message": message}]));
                }
                let pull = Pull {
                    number: data.pulls.len() as u64 + 1,
                    head,
                    base: body["base"].as_str().unwrap_or_default().into(),
                    title: body["title"].as_str().unwrap_or_default().into(),
                    body: body["body"].as_str().unwrap_or_default().into(),
                    state: "open".into(),
                };
                data.pulls.push(pull.clone());
                (201, self.pull_json(&pull))
            }
            "pulls/update" | "pulls/get" => {
                let number: u64 = param("pull_number").and_then(|n| n.parse().ok()).unwrap_or(0);
                let Some(pull) = data.pulls.iter_mut().find(|p| p.number == number) else {
                    return (404, json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"}));
                };
                for (key, field) in
                    [("title", &mut pull.title), ("body", &mut pull.body), ("state", &mut pull.state), ("base", &mut pull.base)]
                {
                    if let Some(value) = body[key].as_str() {
                        *field = value.to_string();
                    }
                }
                let pull = pull.clone();
                (200, self.pull_json(&pull))
            }
            "issues/create-comment" => {
                let number: u64 = param("issue_number").and_then(|n| n.parse().ok()).unwrap_or(0);
                data.comments.push((number, body["body"].as_str().unwrap_or_default().to_string()));
                let id = data.comments.len() as u64;
                (201, self.comment_json(number, id, body["body"].as_str().unwrap_or_default()))
            }
            other => (422, json!({"message": format!("the fake does not serve {other}"), "documentation_url": ""})),
        }
    }

    /// The commit a branch of the remote points at.
    fn head_sha(&self, branch: &str) -> Option<String> {
        let out = std::process::Command::new("git")
            .args(["rev-parse", "--verify", "--quiet", &format!("refs/heads/{branch}")])
            .current_dir(&self.0.remote)
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    fn base(&self) -> String {
        self.0.base_url.get().cloned().unwrap_or_default()
    }

    fn user(&self) -> Value {
        let base = self.base();
        let u = |path: &str| format!("{base}/users/dracode-bot{path}");
        json!({
            "login": "dracode-bot", "id": 41, "node_id": "U_41", "avatar_url": u("/avatar"), "gravatar_id": "",
            "url": u(""), "html_url": format!("{base}/dracode-bot"), "followers_url": u("/followers"),
            "following_url": u("/following{/other_user}"), "gists_url": u("/gists{/gist_id}"),
            "starred_url": u("/starred{/owner}{/repo}"), "subscriptions_url": u("/subscriptions"),
            "organizations_url": u("/orgs"), "repos_url": u("/repos"), "events_url": u("/events{/privacy}"),
            "received_events_url": u("/received_events"), "type": "Bot", "site_admin": false
        })
    }

    /// A `pull-request` as GitHub answers it.
    fn pull_json(&self, p: &Pull) -> Value {
        let base = self.base();
        let repo = format!("{}/{}", self.0.owner, self.0.name);
        let api = format!("{base}/repos/{repo}");
        let n = p.number;
        let side = |branch: &str| {
            json!({"label": format!("{}:{branch}", self.0.owner), "ref": branch, "repo": {"full_name": repo},
                   "sha": self.head_sha(branch).unwrap_or_default(), "user": self.user()})
        };
        let link = |href: String| json!({"href": href});
        let links = json!({
            "self": link(format!("{api}/pulls/{n}")), "html": link(format!("{base}/{repo}/pull/{n}")),
            "issue": link(format!("{api}/issues/{n}")), "comments": link(format!("{api}/issues/{n}/comments")),
            "review_comments": link(format!("{api}/pulls/{n}/comments")), "review_comment": link(format!("{api}/pulls/comments{{/number}}")),
            "commits": link(format!("{api}/pulls/{n}/commits")), "statuses": link(format!("{api}/statuses/x"))
        });
        let urls = json!({
            "url": format!("{api}/pulls/{n}"), "html_url": format!("{base}/{repo}/pull/{n}"), "diff_url": format!("{base}/{repo}/pull/{n}.diff"),
            "patch_url": format!("{base}/{repo}/pull/{n}.patch"), "issue_url": format!("{api}/issues/{n}"),
            "commits_url": format!("{api}/pulls/{n}/commits"), "review_comments_url": format!("{api}/pulls/{n}/comments"),
            "review_comment_url": format!("{api}/pulls/comments{{/number}}"), "comments_url": format!("{api}/issues/{n}/comments"),
            "statuses_url": format!("{api}/statuses/{}", self.head_sha(&p.head).unwrap_or_default())
        });
        let fields = json!({
            "id": 1000 + n, "node_id": format!("PR_{n}"), "number": n, "state": p.state, "locked": false, "title": p.title,
            "user": self.user(), "body": p.body, "labels": [], "milestone": null, "active_lock_reason": null,
            "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:05Z", "closed_at": null, "merged_at": null,
            "merge_commit_sha": null, "assignee": null, "assignees": [], "requested_reviewers": [], "requested_teams": [],
            "head": side(&p.head), "base": side(&p.base), "_links": links
        });
        let state = json!({
            "author_association": "NONE", "auto_merge": null, "draft": false, "merged": false, "mergeable": null,
            "rebaseable": null, "mergeable_state": "unknown", "merged_by": null, "comments": 0, "review_comments": 0,
            "maintainer_can_modify": true, "commits": 1, "additions": 1, "deletions": 1, "changed_files": 1
        });
        let mut pull = serde_json::Map::new();
        for part in [urls, fields, state] {
            if let Value::Object(map) = part {
                pull.extend(map);
            }
        }
        Value::Object(pull)
    }

    /// An `issue-comment` as GitHub answers it.
    fn comment_json(&self, number: u64, id: u64, body: &str) -> Value {
        let base = self.base();
        let repo = format!("{}/{}", self.0.owner, self.0.name);
        json!({
            "id": id, "node_id": format!("IC_{id}"), "url": format!("{base}/repos/{repo}/issues/comments/{id}"),
            "body": body, "html_url": format!("{base}/{repo}/pull/{number}#issuecomment-{id}"), "user": self.user(),
            "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:05Z",
            "issue_url": format!("{base}/repos/{repo}/issues/{number}"), "author_association": "NONE"
        })
    }
}

/// The spec, loaded once, `nullable` rewritten into JSON Schema.
fn spec() -> &'static Value {
    static SPEC: OnceLock<Value> = OnceLock::new();
    SPEC.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/schemas/github-rest-publish.json");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut spec: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        super::openai_server::rewrite_nullable(&mut spec);
        spec
    })
}

/// `#/components/...` resolved.
fn resolve(value: &Value) -> &Value {
    match value["$ref"].as_str() {
        Some(reference) => spec().pointer(reference.trim_start_matches('#')).unwrap_or(&Value::Null),
        None => value,
    }
}

/// The operation for `method` and `path`, with the path's parameters by name.
fn operation_for(method: &str, path: &str) -> Option<(Value, Vec<(String, String)>)> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    for (template, item) in spec()["paths"].as_object()? {
        let parts: Vec<&str> = template.split('/').collect();
        if parts.len() != segments.len() {
            continue;
        }
        let mut params = Vec::new();
        let matched = parts.iter().zip(&segments).all(|(part, segment)| match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            Some(name) => {
                params.push((name.to_string(), percent_decode(segment)));
                !segment.is_empty()
            }
            None => part == segment,
        });
        if matched && let Some(operation) = item.get(method) {
            return Some((operation.clone(), params));
        }
    }
    None
}

fn percent_decode(segment: &str) -> String {
    percent_encoding::percent_decode_str(segment).decode_utf8_lossy().into_owned()
}

/// Path and query parameters against the operation's: each known, each valid for its schema.
fn check_parameters(operation: &Value, path: &[(String, String)], query: &[(String, String)]) -> Result<(), String> {
    let declared: Vec<&Value> = operation["parameters"].as_array().map(|all| all.iter().map(resolve).collect()).unwrap_or_default();
    let find = |name: &str, place: &str| declared.iter().find(|p| p["name"] == name && p["in"] == place).copied();
    for (name, value, place) in path.iter().map(|(k, v)| (k, v, "path")).chain(query.iter().map(|(k, v)| (k, v, "query"))) {
        let parameter = find(name, place).ok_or_else(|| format!("{place} parameter {name:?} is not one of the operation's"))?;
        let typed = match parameter["schema"]["type"].as_str() {
            Some("integer") => value.parse::<i64>().map(Value::from).map_err(|_| format!("{name}={value:?} is not an integer"))?,
            _ => Value::String(value.clone()),
        };
        validate(&parameter["schema"], &typed).map_err(|e| format!("{name}={value:?}: {e}"))?;
    }
    for required in declared.iter().filter(|p| p["required"] == true && p["in"] == "query") {
        let name = required["name"].as_str().unwrap_or_default();
        if !query.iter().any(|(k, _)| k == name) {
            return Err(format!("the required query parameter {name:?} is missing"));
        }
    }
    Ok(())
}

/// The body against the operation's `requestBody`.
fn check_body(operation: &Value, body: &Value) -> Result<(), String> {
    let request_body = &operation["requestBody"];
    if request_body.is_null() {
        return if body.is_null() { Ok(()) } else { Err("a body, where the operation takes none".into()) };
    }
    if body.is_null() {
        return if request_body["required"] == true { Err("no body, where the operation requires one".into()) } else { Ok(()) };
    }
    validate(&request_body["content"]["application/json"]["schema"], body)
        .map_err(|e| format!("the body is not the operation's requestBody: {e}"))
}

/// The answer against the operation's response schema for its status (a status the operation
/// does not list is a violation, but for 401, which GitHub may answer anywhere).
fn check_response(operation: &Value, status: u16, answer: &Value) -> Result<(), String> {
    let response = resolve(&operation["responses"][status.to_string()]);
    if response.is_null() {
        return if status == 401 { Ok(()) } else { Err(format!("status {status} is not one of the operation's responses")) };
    }
    match response["content"]["application/json"]["schema"] {
        Value::Null => Ok(()),
        ref schema => validate(schema, answer),
    }
}

/// `value` against `schema`, the spec's components at hand for its `$ref`s.
fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    let mut root = schema.clone();
    if let Value::Object(map) = &mut root {
        map.insert("components".into(), spec()["components"].clone());
    }
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(false)
        .build(&root)
        .map_err(|e| format!("the spec's schema does not compile: {e}"))?;
    let errors: Vec<String> = validator.iter_errors(value).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) }
}
