//! The `web_fetch` tool: GETs a URL and returns its text (HTML converted to Markdown-ish text by
//! [`super::html_text`]). Only for tasks with a network (`true` or an egress allowlist) that
//! name the tool in `tools` and list hosts in `policy.web_fetch.allowed_hosts` (planning refuses
//! the task otherwise); every URL, and every redirect target before it is followed, must be on
//! that list — anything else is a `DENIED` call. With an egress allowlist it must also pass the
//! checks a command's connection does ([`dracode_sandbox::egress::resolve`]): a refusal is `DENIED` and a
//! `network.denied` event, and the request goes to the very addresses that were checked.
//! Bodies are read up to [`MAX_BODY_BYTES`], within [`FETCH_TIMEOUT`].

use super::policy::Denial;
use super::{ErrorCode, Tool, ToolContext, ToolError, parse_args, schema_of};
use dracode_llm::BoxFuture;
use dracode_sandbox::egress::Host;
use dracode_sandbox::egress::resolve::{Blocked, permitted_addresses};
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;

/// The tool's name.
pub const NAME: &str = "web_fetch";
/// Bytes of a response body read at most; the rest is cut off (and the cut reported).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Time limit of a whole fetch, redirects included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed at most.
const MAX_REDIRECTS: usize = 5;

/// The `web_fetch` tool.
pub struct WebFetch;

// The arguments of `web_fetch`; field docs become the schema descriptions.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The http or https URL to fetch (only hosts the task allows).
    url: String,
}

impl Tool for WebFetch {
    fn name(&self) -> &'static str {
        NAME
    }
    fn description(&self) -> &'static str {
        "Fetch a web page (GET) from a host the task allows and return its text; HTML is converted \
         to Markdown-like text. Large pages are cut."
    }
    fn schema(&self) -> serde_json::Value {
        schema_of::<Args>()
    }
    fn reaches_hosts(&self) -> bool {
        true
    }
    fn call<'a>(&'a self, ctx: &'a ToolContext, input: serde_json::Value) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            let args: Args = parse_args(input)?;
            let fetch = fetch(ctx, &args.url);
            tokio::time::timeout(FETCH_TIMEOUT, fetch).await.unwrap_or_else(|_| {
                Err(ToolError::new(ErrorCode::Timeout, format!("{} took longer than {}s", args.url, FETCH_TIMEOUT.as_secs())))
            })
        })
    }
}

/// The URL `text`, if it is http(s) to an allowed host.
fn checked_url(ctx: &ToolContext, text: &str, what: &str) -> Result<Url, ToolError> {
    let url = Url::parse(text).map_err(|e| ToolError::new(ErrorCode::InvalidArguments, format!("{what} {text:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ToolError::new(ErrorCode::InvalidArguments, format!("{what} {text:?}: only http and https URLs can be fetched")));
    }
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(80);
    if !Host::parse(host).is_some_and(|parsed| ctx.policy.allows_host(NAME, &parsed, port)) {
        let reason = format!("{what} {url} is on host {host:?}, which the task does not allow");
        return Err(Denial { rule: format!("policy.{NAME}.allowed_hosts"), reason }.into());
    }
    Ok(url)
}

/// With an egress allowlist, the addresses `url` may be fetched from (`None` without one); a
/// refusal is recorded as a refused connection of `web_fetch`.
async fn egress_addresses(ctx: &ToolContext, url: &Url) -> Result<Option<Vec<SocketAddr>>, ToolError> {
    let Some(list) = ctx.network.allowlist() else { return Ok(None) };
    let port = url.port_or_known_default().unwrap_or(80);
    let Some(host) = url.host_str().and_then(Host::parse) else {
        return Err(ToolError::new(ErrorCode::InvalidArguments, format!("{url}: not a host name or an IP address")));
    };
    match permitted_addresses(list, &host, port).await {
        Ok(addrs) => Ok(Some(addrs)),
        Err(Blocked::Refused(why)) => {
            ctx.network_log.denied(&host.to_string(), port, Some(NAME), Some(&why.0));
            Err(Denial { rule: "network".to_string(), reason: format!("{url}: {why}") }.into())
        }
        Err(Blocked::Unresolved(why)) => Err(ToolError::new(ErrorCode::IoError, format!("fetching {url}: {why}"))),
    }
}

/// GETs `url`, following redirects to allowed hosts only, and returns the page as text.
async fn fetch(ctx: &ToolContext, url: &str) -> Result<String, ToolError> {
    let mut url = checked_url(ctx, url, "URL")?;
    let failed = |url: &Url, e: reqwest::Error| ToolError::new(ErrorCode::IoError, format!("fetching {url}: {e}"));
    for _ in 0..=MAX_REDIRECTS {
        let pinned = egress_addresses(ctx, &url).await?;
        let client = client(&url, pinned.as_deref())?;
        let response = client.get(url.clone()).send().await.map_err(|e| failed(&url, e))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok());
            let Some(target) = location.and_then(|l| url.join(l).ok()) else {
                return Err(ToolError::new(ErrorCode::IoError, format!("{url} answered {status} without a usable Location")));
            };
            url = checked_url(ctx, target.as_str(), "redirect to")?;
            continue;
        }
        if !status.is_success() {
            return Err(ToolError::new(ErrorCode::IoError, format!("{url} answered HTTP {status}")));
        }
        return read_page(ctx, &url, response).await;
    }
    Err(ToolError::new(ErrorCode::IoError, format!("more than {MAX_REDIRECTS} redirects fetching {url}")))
}

/// A client that follows no redirect by itself (each is checked first); with `pinned`
/// addresses (an egress allowlist) it connects to those only, directly, for `url`'s host.
fn client(url: &Url, pinned: Option<&[SocketAddr]>) -> Result<reqwest::Client, ToolError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("dracode/", env!("CARGO_PKG_VERSION"), " web_fetch"));
    if let Some(addrs) = pinned {
        builder = builder.no_proxy();
        if let Some(name) = url.domain() {
            builder = builder.resolve_to_addrs(name, addrs);
        }
    }
    builder.build().map_err(|e| ToolError::new(ErrorCode::IoError, format!("cannot make an HTTP client: {e}")))
}

/// The body of `response` (at most [`MAX_BODY_BYTES`]) as text, headed by the final URL.
async fn read_page(ctx: &ToolContext, url: &Url, mut response: reqwest::Response) -> Result<String, ToolError> {
    let content_type = response.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let textual = ["text/", "json", "xml", "javascript"].iter().any(|t| content_type.contains(t)) || content_type.is_empty();
    if !textual {
        return Err(ToolError::new(ErrorCode::InvalidArguments, format!("{url} is {content_type}, not text")));
    }
    let mut body = Vec::new();
    let mut cut = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| ToolError::new(ErrorCode::IoError, format!("reading {url}: {e}")))? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            body.extend_from_slice(&chunk[..MAX_BODY_BYTES - body.len()]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let raw = String::from_utf8_lossy(&body);
    let looks_html = content_type.contains("html") || (content_type.is_empty() && raw.trim_start().starts_with('<'));
    let mut text = if looks_html { super::html_text::to_text(&raw) } else { raw.into_owned() };
    if text.len() > ctx.output_limit {
        let mut end = ctx.output_limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        cut = true;
    }
    let note = if cut { "\n\n[dracode: the page was cut here: it is larger than web_fetch returns]" } else { "" };
    Ok(format!("URL: {url}\n\n{text}{note}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::policy::{Policy, PolicyFields, ToolRuleFields};
    use std::sync::Arc;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// A context whose policy lets `web_fetch` reach `hosts`.
    fn context(root: &std::path::Path, hosts: &[&str]) -> ToolContext {
        let rule = ToolRuleFields { allowed_hosts: Some(hosts.iter().map(|h| (*h).to_string()).collect()), ..Default::default() };
        let fields = PolicyFields { on_denied: None, tools: [(NAME.to_string(), rule)].into() };
        ToolContext { policy: Arc::new(Policy::compile(&fields).unwrap()), ..crate::tools::test_context(root) }
    }

    async fn fetch_url(ctx: &ToolContext, url: &str) -> Result<String, ToolError> {
        WebFetch.call(ctx, serde_json::json!({ "url": url })).await
    }

    #[test]
    fn the_mcp_listing_shows_one_url_argument() {
        let listed = crate::tools::render::mcp_tool(&crate::tools::Registry::with_names(&[NAME]).unwrap().specs()[0]);
        assert_eq!(
            listed["inputSchema"],
            serde_json::json!({"type": "object", "additionalProperties": false, "required": ["url"], "properties": {
                "url": {"type": "string", "description": "The http or https URL to fetch (only hosts the task allows)."}}})
        );
        assert_eq!(listed["name"], NAME);
    }

    #[tokio::test]
    async fn an_allowed_page_is_fetched_as_text_and_other_hosts_are_denied() {
        let server = MockServer::start().await;
        let html = "<html><head><title>x</title></head><body><h2>Install</h2><p>Run <code>cargo add</code>, see <a href=\"/docs\">docs</a>.</p></body></html>";
        Mock::given(method("GET"))
            .and(path("/page"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(html, "text/html; charset=utf-8"))
            .mount(&server)
            .await;
        let tmp = tempfile::tempdir().unwrap();
        let ctx = context(tmp.path(), &["127.0.0.1"]);
        let text = fetch_url(&ctx, &format!("{}/page", server.uri())).await.unwrap();
        assert_eq!(text, format!("URL: {}/page\n\n## Install\n\nRun `cargo add`, see [docs](/docs).", server.uri()));

        let other = format!("http://localhost:{}/page", server.address().port());
        let denied = fetch_url(&ctx, &other).await.unwrap_err();
        assert_eq!(denied.code, ErrorCode::Denied);
        assert!(
            denied.message.contains("\"localhost\"") && denied.message.contains("policy rule policy.web_fetch.allowed_hosts"),
            "{denied}"
        );
        let none = context(tmp.path(), &[]);
        assert_eq!(fetch_url(&none, &format!("{}/page", server.uri())).await.unwrap_err().code, ErrorCode::Denied);
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1, "denied URLs are never requested");
        assert_eq!(fetch_url(&ctx, "file:///etc/passwd").await.unwrap_err().code, ErrorCode::InvalidArguments);
    }

    /// `context` with the task's network an egress allowlist of `allow`.
    fn with_allowlist(ctx: ToolContext, allow: &[String]) -> ToolContext {
        let list = dracode_sandbox::egress::Allowlist::parse(allow, &[], "network", "network.deny").unwrap();
        ToolContext { network: dracode_sandbox::egress::Network::Allow(Arc::new(list)), ..ctx }
    }

    #[tokio::test]
    async fn with_an_egress_allowlist_only_its_hosts_are_fetched_and_refusals_are_recorded() {
        let server = MockServer::start().await;
        let port = server.address().port();
        Mock::given(path("/page")).respond_with(ResponseTemplate::new(200).set_body_raw("listed", "text/plain")).mount(&server).await;
        let tmp = tempfile::tempdir().unwrap();
        let tool_allows = context(tmp.path(), &["127.0.0.1", "localhost"]);
        let listed = with_allowlist(tool_allows.clone(), &[format!("127.0.0.1:{port}")]);
        assert_eq!(fetch_url(&listed, &format!("{}/page", server.uri())).await.unwrap(), format!("URL: {}/page\n\nlisted", server.uri()));

        let other_port = with_allowlist(tool_allows.clone(), &[format!("127.0.0.1:{}", port + 1)]);
        let denied = fetch_url(&other_port, &format!("{}/page", server.uri())).await.unwrap_err();
        assert_eq!(denied.code, ErrorCode::Denied, "{denied}");
        assert!(denied.message.contains("not in the task's network allowlist"), "{denied}");
        assert_eq!(other_port.network_log.totals().count, 1, "the refusal is recorded");

        let by_name = with_allowlist(tool_allows, &[format!("localhost:{port}")]);
        let denied = fetch_url(&by_name, &format!("http://localhost:{port}/page")).await.unwrap_err();
        assert!(denied.code == ErrorCode::Denied && denied.message.contains("loopback"), "{denied}");
        assert_eq!(server.received_requests().await.unwrap().len(), 1, "refused URLs are never requested");
    }

    #[tokio::test]
    async fn redirects_are_checked_against_the_allowed_hosts() {
        let server = MockServer::start().await;
        let port = server.address().port();
        let to = |target: String| ResponseTemplate::new(302).insert_header("location", target);
        Mock::given(path("/away")).respond_with(to(format!("http://localhost:{port}/secret"))).mount(&server).await;
        Mock::given(path("/home")).respond_with(to("/final".to_string())).mount(&server).await;
        Mock::given(path("/final")).respond_with(ResponseTemplate::new(200).set_body_raw("plain text", "text/plain")).mount(&server).await;
        let tmp = tempfile::tempdir().unwrap();
        let ctx = context(tmp.path(), &["127.0.0.1"]);
        let denied = fetch_url(&ctx, &format!("{}/away", server.uri())).await.unwrap_err();
        assert_eq!(denied.code, ErrorCode::Denied, "{denied}");
        assert!(denied.message.contains(&format!("redirect to http://localhost:{port}/secret")), "{denied}");
        let followed = fetch_url(&ctx, &format!("{}/home", server.uri())).await.unwrap();
        assert_eq!(followed, format!("URL: {}/final\n\nplain text", server.uri()));
    }

    #[tokio::test]
    async fn a_large_page_is_cut_at_the_size_cap() {
        let server = MockServer::start().await;
        let big = "x".repeat(3 * MAX_BODY_BYTES);
        Mock::given(path("/big")).respond_with(ResponseTemplate::new(200).set_body_raw(big, "text/plain")).mount(&server).await;
        let tmp = tempfile::tempdir().unwrap();
        let ctx = ToolContext { output_limit: 10_000, ..context(tmp.path(), &["127.0.0.1"]) };
        let text = fetch_url(&ctx, &format!("{}/big", server.uri())).await.unwrap();
        assert!(text.ends_with("[dracode: the page was cut here: it is larger than web_fetch returns]"), "{}", &text[text.len() - 100..]);
        assert!(text.len() < 10_200, "{}", text.len());
        let ctx = ToolContext { output_limit: 4 * MAX_BODY_BYTES, ..ctx };
        let text = fetch_url(&ctx, &format!("{}/big", server.uri())).await.unwrap();
        assert_eq!(text.matches('x').count(), MAX_BODY_BYTES, "the body is read up to the cap only");
        assert!(text.contains("was cut here"));
    }
}
