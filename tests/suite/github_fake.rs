//! The fake GitHub of `dracode publish`'s tests (`tests/support/github_api.rs`) itself: its issue,
//! search, event, permission and comment operations answer as GitHub's description says, and it
//! still refuses what the description refuses.

use crate::support::cli::{git, git_repo};
use crate::support::github_api::{GithubApi, Issue};
use serde_json::{Value, json};

const TOKEN: &str = "ghs_fake-installation-token";

/// A fake for `octo/widgets` whose remote has `main` and `feature`, with three issues (#1 open
/// and labelled `bug` and `needs triage`, #2 open and labelled `bug`, #4 closed), then pull
/// request #5 opened on `feature`.
async fn fake(dir: &std::path::Path) -> GithubApi {
    let remote = dir.join("remote");
    git_repo(&remote, &[("a.txt", "a\n")]);
    git(&remote, &["branch", "feature"]);
    let api = GithubApi::start(TOKEN, "octo/widgets", &remote).await;
    let issue = |number: u64, title: &str, body: &str, labels: &[(&str, &str)], state: &str| Issue {
        number,
        title: title.into(),
        body: body.into(),
        author: "alice".into(),
        labels: labels.iter().map(|(label, _)| (*label).into()).collect(),
        labelled_by: labels.iter().map(|(label, who)| ((*label).into(), (*who).into())).collect(),
        state: state.into(),
    };
    api.add_issue(issue(
        1,
        "Crash on start",
        "It CRASHES when the config is empty.",
        &[("bug", "maint"), ("needs triage", "stranger")],
        "open",
    ));
    api.add_issue(issue(2, "Slow build", "The build takes an hour.", &[("bug", "maint")], "open"));
    api.add_issue(issue(4, "Old request", "Done long ago.", &[], "closed"));
    api
}

/// A plain client of the fake, with the headers GitHub asks for.
struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn new(api: &GithubApi) -> Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client { http: reqwest::Client::new(), base: api.url() }
    }

    /// `method path` with `body`: (status, JSON answer).
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("accept", "application/vnd.github+json")
            .header("user-agent", "dracode-tests")
            .header("x-github-api-version", "2022-11-28");
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }
}

/// The numbers of a list of issues (or of a search's items).
fn numbers(list: &Value) -> Vec<u64> {
    list.as_array().unwrap().iter().map(|item| item["number"].as_u64().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_fake_github_serves_issues_search_events_permissions_and_comments() {
    let dir = tempfile::tempdir().unwrap();
    let api = fake(dir.path()).await;
    let client = Client::new(&api);
    let repo = "/repos/octo/widgets";

    // A pull request takes the number after the highest issue's.
    let (status, pull) = client
        .send(
            reqwest::Method::POST,
            &format!("{repo}/pulls"),
            Some(json!({"head": "feature", "base": "main", "title": "Fix the crash", "body": "b"})),
        )
        .await;
    assert_eq!((status, pull["number"].as_u64()), (201, Some(5)), "{pull}");
    assert_eq!(api.pulls()[0].number, 5);

    // issues/list-for-repo: open by default, newest first, pull requests among them.
    let (status, list) = client.get(&format!("{repo}/issues")).await;
    assert_eq!(status, 200);
    assert_eq!(numbers(&list), [5, 2, 1]);
    assert!(list[0]["pull_request"]["url"].as_str().unwrap().ends_with("/pulls/5") && list[1].get("pull_request").is_none());
    assert_eq!(list[2]["labels"][1]["name"], "needs triage");
    assert_eq!(list[2]["user"]["login"], "alice");
    assert_eq!(numbers(&client.get(&format!("{repo}/issues?state=all&sort=created&direction=asc")).await.1), [1, 2, 4, 5]);
    assert_eq!(numbers(&client.get(&format!("{repo}/issues?state=closed")).await.1), [4]);
    assert_eq!(numbers(&client.get(&format!("{repo}/issues?labels=bug,needs%20triage")).await.1), [1], "every label");
    assert_eq!(numbers(&client.get(&format!("{repo}/issues?labels=bug")).await.1), [2, 1]);
    assert_eq!(numbers(&client.get(&format!("{repo}/issues?state=all&direction=asc&per_page=2&page=2")).await.1), [4, 5]);
    assert_eq!(numbers(&client.get(&format!("{repo}/issues?state=all&per_page=2&page=3")).await.1), Vec::<u64>::new());

    // search/issues-and-pull-requests.
    let search = |q: &str| format!("/search/issues?q={}", percent_encoding::utf8_percent_encode(q, percent_encoding::NON_ALPHANUMERIC));
    let (status, found) = client.get(&search("repo:octo/widgets is:issue is:open label:bug")).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!((found["total_count"].as_u64(), found["incomplete_results"].as_bool()), (Some(2), Some(false)));
    assert_eq!(numbers(&found["items"]), [2, 1]);
    assert_eq!(numbers(&client.get(&search("repo:octo/widgets label:\"needs triage\" label:bug")).await.1["items"]), [1]);
    assert_eq!(numbers(&client.get(&search("repo:octo/widgets crashes EMPTY")).await.1["items"]), [1], "words, whatever their case");
    assert_eq!(numbers(&client.get(&search("repo:octo/widgets is:pr state:open")).await.1["items"]), [5]);
    assert_eq!(numbers(&client.get(&search("repo:octo/widgets is:issue")).await.1["items"]), [4, 2, 1]);
    let (_, asc) = client.get(&format!("{}&sort=created&order=asc&per_page=2", search("repo:octo/widgets"))).await;
    assert_eq!((asc["total_count"].as_u64(), numbers(&asc["items"])), (Some(4), vec![1, 2]));
    assert_eq!(client.get(&search("repo:other/repo label:bug")).await.1["total_count"], 0);
    assert_eq!(client.get(&search("repo:octo/widgets author:alice")).await.1["total_count"], 0, "an unknown qualifier");

    // issues/list-events: the labeled events, oldest first, with who added each label.
    let (status, events) = client.get(&format!("{repo}/issues/1/events")).await;
    assert_eq!(status, 200);
    let who: Vec<(&str, &str, &str)> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["event"].as_str().unwrap(), e["label"]["name"].as_str().unwrap(), e["actor"]["login"].as_str().unwrap()))
        .collect();
    assert_eq!(who, [("labeled", "bug", "maint"), ("labeled", "needs triage", "stranger")]);
    assert_eq!(client.get(&format!("{repo}/issues/1/events?per_page=1&page=2")).await.1[0]["actor"]["login"], "stranger");
    assert_eq!(client.get(&format!("{repo}/issues/9/events")).await.0, 404);

    // repos/get-collaborator-permission-level.
    for (login, role) in [("maint", "maintain"), ("boss", "admin"), ("helper", "triage"), ("dev", "write")] {
        api.set_permission(login, role);
    }
    let permission = |login: &str| {
        let client = &client;
        let path = format!("{repo}/collaborators/{login}/permission");
        async move {
            let (status, answer) = client.get(&path).await;
            assert_eq!(status, 200, "{answer}");
            (answer["permission"].as_str().unwrap().to_string(), answer["role_name"].as_str().unwrap().to_string())
        }
    };
    assert_eq!(permission("maint").await, ("write".to_string(), "maintain".to_string()));
    assert_eq!(permission("boss").await, ("admin".to_string(), "admin".to_string()));
    assert_eq!(permission("helper").await, ("read".to_string(), "triage".to_string()));
    assert_eq!(permission("dev").await, ("write".to_string(), "write".to_string()));
    assert_eq!(permission("stranger").await, ("read".to_string(), "read".to_string()), "no role on a public repository");
    let (_, boss) = client.get(&format!("{repo}/collaborators/boss/permission")).await;
    assert_eq!(boss["user"]["permissions"], json!({"pull": true, "triage": true, "push": true, "maintain": true, "admin": true}));

    // Comments: dracode's own, and one by someone else.
    let foreign = api.add_foreign_comment(1, "stranger", "me too");
    let (status, mine) = client.send(reqwest::Method::POST, &format!("{repo}/issues/1/comments"), Some(json!({"body": "first"}))).await;
    assert_eq!(status, 201);
    let mine = mine["id"].as_u64().unwrap();
    for body in ["second", "third"] {
        assert_eq!(client.send(reqwest::Method::POST, &format!("{repo}/issues/1/comments"), Some(json!({"body": body}))).await.0, 201);
    }
    let (status, listed) = client.get(&format!("{repo}/issues/1/comments")).await;
    assert_eq!(status, 200);
    let listed: Vec<(&str, &str)> =
        listed.as_array().unwrap().iter().map(|c| (c["user"]["login"].as_str().unwrap(), c["body"].as_str().unwrap())).collect();
    assert_eq!(listed, [("stranger", "me too"), ("dracode-bot", "first"), ("dracode-bot", "second"), ("dracode-bot", "third")]);
    let (_, second_page) = client.get(&format!("{repo}/issues/1/comments?per_page=3&page=2")).await;
    assert_eq!(second_page.as_array().unwrap().len(), 1);
    assert_eq!(second_page[0]["body"], "third");
    let (_, list) = client.get(&format!("{repo}/issues?state=all&sort=comments")).await;
    assert_eq!((list[0]["number"].as_u64(), list[0]["comments"].as_u64()), (Some(1), Some(4)));

    // issues/update-comment: any comment, as a token with issues: write may on GitHub.
    let edit = |id: u64, body: &str| {
        let (client, path, body) = (&client, format!("{repo}/issues/comments/{id}"), json!({"body": body}));
        async move { client.send(reqwest::Method::PATCH, &path, Some(body)).await }
    };
    let (status, edited) = edit(mine, "first, edited").await;
    assert_eq!((status, edited["body"].as_str()), (200, Some("first, edited")));
    let (status, edited) = edit(foreign, "not yours").await;
    assert_eq!((status, edited["user"]["login"].as_str()), (200, Some("stranger")), "{edited}");
    assert_eq!(edit(999, "x").await.0, 404);

    // users/get-authenticated: an installation token is no user.
    let (status, refused) = client.get("/user").await;
    assert_eq!((status, refused["message"].as_str()), (403, Some("Resource not accessible by integration")));
    assert_eq!(api.comment_edits(), 2);
    let list = api.comment_list();
    assert_eq!(list[0], (foreign, 1, "not yours".to_string()));
    assert_eq!(list[1], (mine, 1, "first, edited".to_string()));
    assert_eq!(api.comments()[1], (1, "first, edited".to_string()), "comments() still gives (number, body)");

    assert_eq!(api.violations(), Vec::<String>::new());
}

/// The new operations check their queries and bodies against the description too: an unknown
/// parameter, a value outside an enum or a body the operation does not take is a violation.
#[tokio::test(flavor = "multi_thread")]
async fn the_fake_github_refuses_what_the_spec_refuses_of_the_new_operations() {
    let dir = tempfile::tempdir().unwrap();
    let api = fake(dir.path()).await;
    let client = Client::new(&api);
    let repo = "/repos/octo/widgets";
    let refused = [
        client.get(&format!("{repo}/issues?colour=red")).await,
        client.get(&format!("{repo}/issues?state=merged")).await,
        client.get("/search/issues?q=bug&colour=red").await,
        client.get("/search/issues?sort=created").await,
        client.get(&format!("{repo}/issues/1/events?colour=red")).await,
        client.get(&format!("{repo}/collaborators/alice/permission?colour=red")).await,
        client.get(&format!("{repo}/issues/1/comments?colour=red")).await,
        client.get(&format!("{repo}/issues/1/comments?per_page=many")).await,
        client.send(reqwest::Method::PATCH, &format!("{repo}/issues/comments/1?colour=red"), Some(json!({"body": "x"}))).await,
        client.send(reqwest::Method::PATCH, &format!("{repo}/issues/comments/1"), Some(json!({"text": "x"}))).await,
    ];
    for (i, (status, answer)) in refused.iter().enumerate() {
        assert_eq!(*status, 422, "request {i}: {answer}");
    }
    let violations = api.violations();
    assert_eq!(violations.len(), refused.len(), "{violations:#?}");
    assert!(violations[0].contains("query parameter \"colour\" is not one of the operation's"), "{violations:#?}");
    assert!(violations[3].contains("the required query parameter \"q\" is missing"), "{violations:#?}");
}
