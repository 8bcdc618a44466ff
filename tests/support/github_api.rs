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
//!
//! Besides pull requests and comments it holds issues ([`GithubApi::add_issue`]), who may do what
//! ([`GithubApi::set_permission`]) and comments by others ([`GithubApi::add_foreign_comment`]),
//! and serves `issues/list-for-repo`, `search/issues-and-pull-requests`, `issues/list-events`,
//! `repos/get-collaborator-permission-level`, `issues/list-comments` and
//! `issues/update-comment` from them. Issues and pull requests share one space of numbers, as on
//! GitHub; an issue's `created_at` follows from its number (a higher number, a later time), so
//! `sort=created` orders by number.

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

/// An issue the fake holds.
#[derive(Debug, Clone)]
pub struct Issue {
    /// Its number, from the space of numbers it shares with the pull requests, as on GitHub.
    pub number: u64,
    /// Its title.
    pub title: String,
    /// Its body.
    pub body: String,
    /// The login of who opened it.
    pub author: String,
    /// Its labels' names.
    pub labels: Vec<String>,
    /// The `labeled` events, oldest first: (label, login of who added it). A label not named
    /// here has no event.
    pub labelled_by: Vec<(String, String)>,
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

/// A comment on an issue or pull request.
#[derive(Clone)]
struct Comment {
    id: u64,
    number: u64,
    body: String,
    login: String,
    edited: bool,
}

#[derive(Default)]
struct Data {
    pulls: Vec<Pull>,
    issues: Vec<Issue>,
    comments: Vec<Comment>,
    comment_edits: usize,
    permissions: Vec<(String, String)>,
    requests: Vec<Seen>,
    violations: Vec<String>,
    refusal: Option<(u16, Value)>,
    /// The next requests of a method answered with these statuses, as a GitHub having a bad moment.
    outages: Vec<(String, u16)>,
}

impl Data {
    /// The highest number an issue or pull request has, 0 without any.
    fn highest_number(&self) -> u64 {
        self.issues.iter().map(|i| i.number).chain(self.pulls.iter().map(|p| p.number)).max().unwrap_or(0)
    }

    /// The issues and pull requests as `issues/*` sees them, in order of their numbers.
    fn items(&self) -> Vec<Item> {
        let issues = self.issues.iter().map(|i| Item {
            number: i.number,
            title: i.title.clone(),
            body: i.body.clone(),
            author: i.author.clone(),
            labels: i.labels.clone(),
            state: i.state.clone(),
            pull: false,
        });
        let pulls = self.pulls.iter().map(|p| Item {
            number: p.number,
            title: p.title.clone(),
            body: p.body.clone(),
            author: BOT.into(),
            labels: Vec::new(),
            state: p.state.clone(),
            pull: true,
        });
        let mut all: Vec<Item> = issues.chain(pulls).collect();
        all.sort_by_key(|item| item.number);
        all
    }

    /// `login`'s role on the repository, if it was given one (logins are case-insensitive).
    fn role(&self, login: &str) -> Option<&str> {
        self.permissions.iter().rev().find(|(who, _)| who.eq_ignore_ascii_case(login)).map(|(_, role)| role.as_str())
    }
}

/// An issue or a pull request, as the issues' operations answer it.
struct Item {
    number: u64,
    title: String,
    body: String,
    author: String,
    labels: Vec<String>,
    state: String,
    pull: bool,
}

/// The login of the token's user: who opens the pull requests and writes dracode's comments.
const BOT: &str = "dracode-bot";

/// The roles [`GithubApi::set_permission`] takes, highest first.
const ROLES: [&str; 5] = ["admin", "maintain", "write", "triage", "read"];

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

    /// The comments, dracode's and others', in order of their ids: (issue number, body).
    pub fn comments(&self) -> Vec<(u64, String)> {
        self.state.data.lock().unwrap().comments.iter().map(|c| (c.number, c.body.clone())).collect()
    }

    /// The comments, in order of their ids: (comment id, issue number, body), after any edits.
    pub fn comment_list(&self) -> Vec<(u64, u64, String)> {
        self.state.data.lock().unwrap().comments.iter().map(|c| (c.id, c.number, c.body.clone())).collect()
    }

    /// How many times comments were edited (`issues/update-comment` answered 200).
    pub fn comment_edits(&self) -> usize {
        self.state.data.lock().unwrap().comment_edits
    }

    /// Adds a comment by someone else (`login`, a `User`) to issue or pull request `number`;
    /// returns its id. dracode's token may edit it, as a token with issues: write may on GitHub.
    pub fn add_foreign_comment(&self, number: u64, login: &str, body: &str) -> u64 {
        let mut data = self.state.data.lock().unwrap();
        let id = data.comments.len() as u64 + 1;
        data.comments.push(Comment { id, number, body: body.into(), login: login.into(), edited: false });
        id
    }

    /// Adds an issue; its number must be unused (pull requests opened later take numbers after
    /// the highest issue's and pull request's, as on GitHub).
    pub fn add_issue(&self, issue: Issue) {
        let mut data = self.state.data.lock().unwrap();
        let taken = data.issues.iter().any(|i| i.number == issue.number) || data.pulls.iter().any(|p| p.number == issue.number);
        assert!(!taken, "issue or pull request #{} already exists", issue.number);
        assert!(issue.number > 0, "issue numbers start at 1");
        data.issues.push(issue);
    }

    /// Gives `login` a role on the repository: `admin`, `maintain`, `write`, `triage` or `read`.
    ///
    /// `repos/get-collaborator-permission-level` answers it as GitHub's description says: the
    /// role in `role_name`, and in `permission` the legacy base role (`maintain` as `write`,
    /// `triage` as `read`). A login given no role is answered as a user who is no collaborator
    /// of a public repository: `read` (the fake's repository is public; GitHub answers `read`
    /// there to any user, `none` on a private one), not 404, which the description keeps for a
    /// repository or user that is not found.
    pub fn set_permission(&self, login: &str, permission: &str) {
        assert!(ROLES.contains(&permission), "{permission:?} is none of {ROLES:?}");
        self.state.data.lock().unwrap().permissions.push((login.into(), permission.into()));
    }

    /// Every request received.
    pub fn requests(&self) -> Vec<Seen> {
        self.state.data.lock().unwrap().requests.clone()
    }

    /// Requests the spec refuses and answers the spec does not allow: empty when all was well.
    pub fn violations(&self) -> Vec<String> {
        self.state.data.lock().unwrap().violations.clone()
    }

    /// Closes pull request `number`, as a reviewer's "Close pull request" does.
    pub fn close_pull(&self, number: u64) {
        let mut data = self.state.data.lock().unwrap();
        let pull = data.pulls.iter_mut().find(|p| p.number == number).expect("a pull request of that number");
        pull.state = "closed".into();
    }

    /// Makes every `pulls/create` answer `status` with `body`.
    pub fn refuse_creation(&self, status: u16, body: Value) {
        self.state.data.lock().unwrap().refusal = Some((status, body));
    }

    /// Answers the next requests of `method` (`GET`, `POST`, …) with `statuses`, one each, in
    /// order, and an HTML page as GitHub's front end does (`502 Bad Gateway`), before serving
    /// them again.
    pub fn fail_next(&self, method: &str, statuses: &[u16]) {
        self.state.data.lock().unwrap().outages = statuses.iter().map(|s| (method.to_string(), *s)).collect();
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
        {
            let mut data = self.0.data.lock().unwrap();
            data.requests.push(seen);
            if data.outages.first().is_some_and(|(method, _)| *method == request.method.to_string()) {
                let (_, status) = data.outages.remove(0);
                return ResponseTemplate::new(status).set_body_string("<html><body><h1>Bad gateway</h1></body></html>");
            }
        }
        let (status, answer, operation) = match self.check(request, &body) {
            Err((status, answer)) => (status, answer, None),
            Ok((operation, params)) => {
                let (status, answer) = self.answer(&operation, &params, &body);
                (status, answer, Some(operation))
            }
        };
        if let Some(operation) = operation
            && let Err(why) = check_response(&operation, status, &answer).and_then(|()| check_labeled_events(&operation, &answer))
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
                    number: data.highest_number() + 1,
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
                    return not_found();
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
                let id = data.comments.len() as u64 + 1;
                let comment =
                    Comment { id, number, body: body["body"].as_str().unwrap_or_default().into(), login: BOT.into(), edited: false };
                data.comments.push(comment.clone());
                (201, self.comment_json(&data, &comment))
            }
            "users/get-authenticated" if self.0.token.starts_with("ghs_") => {
                // An installation token is no user: GitHub answers 403.
                (
                    403,
                    json!({"message": "Resource not accessible by integration",
                           "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user", "status": "403"}),
                )
            }
            "users/get-authenticated" => (200, self.private_user()),
            "issues/update-comment" => {
                let id: u64 = param("comment_id").and_then(|n| n.parse().ok()).unwrap_or(0);
                let Some(index) = data.comments.iter().position(|c| c.id == id) else {
                    return not_found();
                };
                // As on GitHub, a token with issues: write may edit anyone's comment: what dracode
                // must not edit, it must not try to.
                let comment = &mut data.comments[index];
                comment.body = body["body"].as_str().unwrap_or_default().into();
                comment.edited = true;
                let comment = comment.clone();
                data.comment_edits += 1;
                (200, self.comment_json(&data, &comment))
            }
            "issues/list-comments" => {
                // Like comment creation, listing does not ask that the number be one the fake holds.
                let number: u64 = param("issue_number").and_then(|n| n.parse().ok()).unwrap_or(0);
                let all: Vec<Value> = data.comments.iter().filter(|c| c.number == number).map(|c| self.comment_json(&data, c)).collect();
                (200, Value::Array(page_of(all, &param)))
            }
            "issues/list-for-repo" => {
                let state = param("state").unwrap_or_else(|| "open".into());
                let labels: Vec<String> = param("labels")
                    .map(|l| l.split(',').map(|name| name.trim().to_lowercase()).filter(|name| !name.is_empty()).collect())
                    .unwrap_or_default();
                let creator = param("creator");
                let mut items: Vec<Item> = data
                    .items()
                    .into_iter()
                    .filter(|item| state == "all" || item.state == state)
                    .filter(|item| labels.iter().all(|want| item.labels.iter().any(|l| l.to_lowercase() == *want)))
                    .filter(|item| creator.as_deref().is_none_or(|c| c == item.author))
                    .collect();
                let by_comments = param("sort").as_deref() == Some("comments");
                sort_items(&mut items, &data, by_comments, param("direction").as_deref() != Some("asc"));
                let all: Vec<Value> = items.iter().map(|item| self.issue_json(&data, item)).collect();
                (200, Value::Array(page_of(all, &param)))
            }
            "search/issues-and-pull-requests" => {
                let query = Query::parse(&param("q").unwrap_or_default(), &format!("{}/{}", self.0.owner, self.0.name));
                let mut items: Vec<Item> = data.items().into_iter().filter(|item| query.matches(item)).collect();
                let by_comments = param("sort").as_deref() == Some("comments");
                sort_items(&mut items, &data, by_comments, param("order").as_deref() != Some("asc"));
                let total = items.len();
                let all: Vec<Value> = items
                    .iter()
                    .map(|item| {
                        let mut found = self.issue_json(&data, item);
                        found["score"] = json!(1.0);
                        found
                    })
                    .collect();
                (200, json!({"total_count": total, "incomplete_results": false, "items": page_of(all, &param), "search_type": "lexical"}))
            }
            "issues/list-events" => {
                let number: u64 = param("issue_number").and_then(|n| n.parse().ok()).unwrap_or(0);
                if data.pulls.iter().any(|p| p.number == number) {
                    return (200, json!([]));
                }
                let Some(issue) = data.issues.iter().find(|i| i.number == number) else {
                    return not_found();
                };
                let api = format!("{}/repos/{}/{}", self.base(), self.0.owner, self.0.name);
                let all: Vec<Value> = issue
                    .labelled_by
                    .iter()
                    .enumerate()
                    .map(|(i, (label, login))| {
                        let id = number * 1000 + i as u64 + 1;
                        json!({
                            "id": id, "node_id": format!("LE_{id}"), "url": format!("{api}/issues/events/{id}"),
                            "actor": self.user_for(login), "event": "labeled", "commit_id": null, "commit_url": null,
                            "created_at": timestamp(created_secs(number) + i as u64 + 1), "performed_via_github_app": null,
                            "label": {"name": label, "color": label_color(label)}
                        })
                    })
                    .collect();
                (200, Value::Array(page_of(all, &param)))
            }
            "repos/get-collaborator-permission-level" => {
                let login = param("username").unwrap_or_default();
                let role = data.role(&login).unwrap_or("read").to_string();
                let permission = match role.as_str() {
                    "maintain" => "write",
                    "triage" => "read",
                    other => other,
                };
                let at_least = |wanted: &str| ROLES.iter().position(|r| *r == role.as_str()) <= ROLES.iter().position(|r| *r == wanted);
                let mut user = self.user_for(&login);
                user["permissions"] = json!({
                    "pull": true, "triage": at_least("triage"), "push": at_least("write"),
                    "maintain": at_least("maintain"), "admin": at_least("admin")
                });
                user["role_name"] = json!(role);
                (200, json!({"permission": permission, "role_name": role, "user": user}))
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

    /// The token's user, `dracode-bot`, as a `simple-user`.
    fn user(&self) -> Value {
        self.user_for(BOT)
    }

    /// `login` as a `simple-user`: `dracode-bot` is a `Bot` (id 41), anyone else a `User` whose
    /// id follows from the login.
    fn user_for(&self, login: &str) -> Value {
        let base = self.base();
        let u = |path: &str| format!("{base}/users/{login}{path}");
        let (id, kind) =
            if login == BOT { (41, "Bot") } else { (login.bytes().fold(1000u64, |h, b| (h * 31 + u64::from(b)) % 1_000_000_007), "User") };
        json!({
            "login": login, "id": id, "node_id": format!("U_{id}"), "avatar_url": u("/avatar"), "gravatar_id": "",
            "url": u(""), "html_url": format!("{base}/{login}"), "followers_url": u("/followers"),
            "following_url": u("/following{/other_user}"), "gists_url": u("/gists{/gist_id}"),
            "starred_url": u("/starred{/owner}{/repo}"), "subscriptions_url": u("/subscriptions"),
            "organizations_url": u("/orgs"), "repos_url": u("/repos"), "events_url": u("/events{/privacy}"),
            "received_events_url": u("/received_events"), "type": kind, "site_admin": false
        })
    }

    /// The token's user as `users/get-authenticated` answers it (`private-user`): `dracode-bot`,
    /// here a `User`, as a personal access token's owner is.
    fn private_user(&self) -> Value {
        let mut user = self.user();
        let more = json!({
            "type": "User", "name": "dracode bot", "company": null, "blog": "", "location": null, "email": null,
            "hireable": null, "bio": null, "public_repos": 1, "public_gists": 0, "followers": 0, "following": 0,
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "private_gists": 0,
            "total_private_repos": 0, "owned_private_repos": 0, "disk_usage": 0, "collaborators": 0,
            "two_factor_authentication": true, "user_view_type": "private"
        });
        if let (Value::Object(user), Value::Object(more)) = (&mut user, more) {
            user.extend(more);
        }
        user
    }

    /// How `login` is associated with the repository, as GitHub's `author_association` says it.
    fn association(&self, data: &Data, login: &str) -> &'static str {
        if login == self.0.owner {
            "OWNER"
        } else if data.role(login).is_some() {
            "COLLABORATOR"
        } else {
            "NONE"
        }
    }

    /// An `issue` (with a `pull_request` key for a pull request) as `issues/*` answers it.
    fn issue_json(&self, data: &Data, item: &Item) -> Value {
        let base = self.base();
        let repo = format!("{}/{}", self.0.owner, self.0.name);
        let api = format!("{base}/repos/{repo}");
        let n = item.number;
        let page = if item.pull { "pull" } else { "issues" };
        let labels: Vec<Value> = item
            .labels
            .iter()
            .map(|name| {
                let id = name.bytes().fold(7u64, |h, b| (h * 31 + u64::from(b)) % 1_000_000_007);
                json!({"id": id, "node_id": format!("LA_{id}"), "url": format!("{api}/labels/{}", name.replace(' ', "%20")),
                       "name": name, "description": null, "color": label_color(name), "default": false})
            })
            .collect();
        let created = timestamp(created_secs(n));
        let closed = if item.state == "closed" { json!(timestamp(created_secs(n) + 30)) } else { Value::Null };
        let mut issue = json!({
            "id": 2000 + n, "node_id": format!("I_{n}"), "url": format!("{api}/issues/{n}"), "repository_url": api,
            "labels_url": format!("{api}/issues/{n}/labels{{/name}}"), "comments_url": format!("{api}/issues/{n}/comments"),
            "events_url": format!("{api}/issues/{n}/events"), "html_url": format!("{base}/{repo}/{page}/{n}"),
            "timeline_url": format!("{api}/issues/{n}/timeline"), "number": n, "state": item.state,
            "state_reason": if item.state == "closed" { json!("completed") } else { Value::Null },
            "title": item.title, "body": item.body, "user": self.user_for(&item.author), "labels": labels,
            "assignee": null, "assignees": [], "milestone": null, "locked": false, "active_lock_reason": null,
            "comments": data.comments.iter().filter(|c| c.number == n).count(), "created_at": created,
            "updated_at": created, "closed_at": closed, "author_association": self.association(data, &item.author),
            "performed_via_github_app": null
        });
        if item.pull {
            issue["pull_request"] = json!({
                "url": format!("{api}/pulls/{n}"), "html_url": format!("{base}/{repo}/pull/{n}"),
                "diff_url": format!("{base}/{repo}/pull/{n}.diff"), "patch_url": format!("{base}/{repo}/pull/{n}.patch"),
                "merged_at": null
            });
            issue["draft"] = json!(false);
        }
        issue
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
    fn comment_json(&self, data: &Data, comment: &Comment) -> Value {
        let base = self.base();
        let repo = format!("{}/{}", self.0.owner, self.0.name);
        let (id, number) = (comment.id, comment.number);
        let page = if data.issues.iter().any(|i| i.number == number) { "issues" } else { "pull" };
        let created = created_secs(number) + 600 + id;
        json!({
            "id": id, "node_id": format!("IC_{id}"), "url": format!("{base}/repos/{repo}/issues/comments/{id}"),
            "body": comment.body, "html_url": format!("{base}/{repo}/{page}/{number}#issuecomment-{id}"),
            "user": self.user_for(&comment.login), "created_at": timestamp(created),
            "updated_at": timestamp(if comment.edited { created + 60 } else { created }),
            "issue_url": format!("{base}/repos/{repo}/issues/{number}"),
            "author_association": self.association(data, &comment.login)
        })
    }
}

/// GitHub's 404.
fn not_found() -> Refusal {
    (404, json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest", "status": "404"}))
}

/// The page `page` (from 1) of `per_page` items (30 unless said, at most 100, as GitHub pages).
fn page_of(all: Vec<Value>, param: &dyn Fn(&str) -> Option<String>) -> Vec<Value> {
    let per_page = param("per_page").and_then(|n| n.parse::<usize>().ok()).unwrap_or(30).clamp(1, 100);
    let page = param("page").and_then(|n| n.parse::<usize>().ok()).unwrap_or(1).max(1);
    all.into_iter().skip((page - 1) * per_page).take(per_page).collect()
}

/// Orders `items` by creation (their numbers) or by how many comments they have, newest or most
/// first when `descending`.
fn sort_items(items: &mut [Item], data: &Data, by_comments: bool, descending: bool) {
    let comments = |n: u64| data.comments.iter().filter(|c| c.number == n).count();
    items.sort_by_key(|item| if by_comments { (comments(item.number), item.number) } else { (0, item.number) });
    if descending {
        items.reverse();
    }
}

/// When issue or pull request `number` was opened, in seconds after 2026-01-01T00:00:00Z: a
/// minute per number.
fn created_secs(number: u64) -> u64 {
    number * 60
}

/// `secs` seconds after 2026-01-01T00:00:00Z, as GitHub writes a time.
fn timestamp(secs: u64) -> String {
    // Days to a civil date (H. Hinnant's algorithm), from 2026-01-01, day 20454 of the epoch.
    let days = 20_454 + (secs / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let s = secs % 86_400;
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

/// A label's colour (six hex digits, as GitHub gives it), from its name.
fn label_color(name: &str) -> String {
    format!("{:06x}", name.bytes().fold(0x00ed_eded_u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b))) & 0x00ff_ffff)
}

/// A `q` of `search/issues-and-pull-requests`, as far as the fake understands one: `repo:`,
/// `is:issue`, `is:pr` (`is:pull-request`), `is:open`, `is:closed`, `state:open`, `state:closed`,
/// `label:NAME` (`label:"A NAME"`; every label named must be there), and words, each found in the
/// title or body whatever its case. Any other qualifier makes it match nothing.
struct Query {
    pull: Option<bool>,
    state: Option<String>,
    labels: Vec<String>,
    words: Vec<String>,
    nothing: bool,
}

impl Query {
    /// `q` for repository `full_name` (`OWNER/NAME`), the only one the fake holds.
    fn parse(q: &str, full_name: &str) -> Query {
        let mut query = Query { pull: None, state: None, labels: Vec::new(), words: Vec::new(), nothing: false };
        for token in search_tokens(q) {
            let qualifier =
                token.split_once(':').filter(|(key, _)| !key.is_empty() && key.chars().all(|c| c.is_ascii_alphabetic() || c == '-'));
            match qualifier {
                Some(("repo", value)) => query.nothing |= !value.eq_ignore_ascii_case(full_name),
                Some(("is", "issue")) => query.pull = Some(false),
                Some(("is", "pr" | "pull-request")) => query.pull = Some(true),
                Some(("is" | "state", state @ ("open" | "closed"))) => query.state = Some(state.into()),
                Some(("label", name)) => query.labels.push(name.to_lowercase()),
                Some(_) => query.nothing = true,
                None => query.words.push(token.to_lowercase()),
            }
        }
        query
    }

    fn matches(&self, item: &Item) -> bool {
        let text = format!("{}\n{}", item.title, item.body).to_lowercase();
        !self.nothing
            && self.pull.is_none_or(|pull| pull == item.pull)
            && self.state.as_deref().is_none_or(|state| state == item.state)
            && self.labels.iter().all(|want| item.labels.iter().any(|l| l.to_lowercase() == *want))
            && self.words.iter().all(|word| text.contains(word.as_str()))
    }
}

/// `q` split at spaces outside double quotes, the quotes dropped: `label:"a b" x` is
/// `label:a b` and `x`.
fn search_tokens(q: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let (mut current, mut quoted, mut started) = (String::new(), false, false);
    for c in q.chars() {
        match c {
            '"' => (quoted, started) = (!quoted, true),
            c if c.is_whitespace() && !quoted => {
                if started {
                    tokens.push(std::mem::take(&mut current));
                }
                started = false;
            }
            c => {
                current.push(c);
                started = true;
            }
        }
    }
    if started {
        tokens.push(current);
    }
    tokens
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

/// The answer against the operation's response schema for its status. A status the operation
/// does not list is a violation, but for those GitHub answers to any request whatever an
/// operation lists: 401 (bad credentials), and 403 (not allowed) and 404 (not found, or not to be
/// seen), whose bodies must then be a `basic-error` (`issues/update-comment`, for one, lists
/// only 200 and 422, and `issues/list-events` only 200 and 410).
fn check_response(operation: &Value, status: u16, answer: &Value) -> Result<(), String> {
    let response = resolve(&operation["responses"][status.to_string()]);
    if response.is_null() {
        return match status {
            401 => Ok(()),
            403 | 404 => validate(&json!({"$ref": "#/components/schemas/basic-error"}), answer),
            _ => Err(format!("status {status} is not one of the operation's responses")),
        };
    }
    match response["content"]["application/json"]["schema"] {
        Value::Null => Ok(()),
        ref schema => validate(schema, answer),
    }
}

/// The `labeled` events of an `issues/list-events` answer against `labeled-issue-event`: the
/// spec's `issue-event-for-issue` is an `anyOf` of event kinds whose others are pruned to
/// schemas that take any value, so it alone would let any event through.
fn check_labeled_events(operation: &Value, answer: &Value) -> Result<(), String> {
    if operation["operationId"] != "issues/list-events" {
        return Ok(());
    }
    let labeled = json!({"$ref": "#/components/schemas/labeled-issue-event"});
    answer.as_array().into_iter().flatten().filter(|event| event["event"] == "labeled").try_for_each(|event| validate(&labeled, event))
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
