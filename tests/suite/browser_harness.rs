//! The headless-browser harness (`support/browser.rs`) checked on small pages of its own: each
//! thing the report tests rely on it to see (a script's text, a request, a refusal by the
//! Content-Security-Policy, a click and a key, a screenshot, the dark colour scheme) is shown
//! here to be seen, so an assertion over it elsewhere can fail. Skipped without Chromium (see
//! the harness's module doc).

use crate::support::browser::{Browser, Shot, WAIT, file_url, png_size};
use base64::Engine as _;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// `html` written to `name` in `dir`.
fn page_file(dir: &tempfile::TempDir, name: &str, html: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, html).unwrap();
    path
}

/// A server on 127.0.0.1 answering every request with a 1×1 GIF; the request lines it got.
fn pixel_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;";
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = [0u8; 4096];
            let n = stream.read(&mut head).unwrap_or(0);
            let line = String::from_utf8_lossy(&head[..n]).lines().next().unwrap_or_default().to_string();
            log.lock().unwrap().push(line);
            let answer =
                format!("HTTP/1.1 200 OK\r\nContent-Type: image/gif\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", GIF.len());
            let _ = stream.write_all(answer.as_bytes()).and_then(|()| stream.write_all(GIF));
        }
    });
    (port, seen)
}

#[test]
fn browser_reads_the_text_a_script_wrote() {
    let Some(browser) = Browser::shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let html = "<!doctype html><title>t</title><p id=out>not yet</p><p id=hidden style='display:none'>hidden</p><details><summary>more</summary>folded</details>
        <script>document.getElementById('out').textContent = 'written ' + 'by the script';</script>";
    let page = browser.open(page_file(&dir, "text.html", html));
    assert_eq!(page.text("#out"), "written by the script");
    assert_eq!(page.text("#hidden"), "", "what a person sees: nothing of a hidden element");
    assert_eq!(page.text("details"), "more", "nor of a closed <details>");
    assert_eq!(page.eval("1 + 2"), 3);
    assert_eq!(page.eval("Promise.resolve({a: [1, 'b']})"), serde_json::json!({"a": [1, "b"]}));
    assert!(page.console().is_empty(), "{:#?}", page.console());
}

/// The message `f` panics with; panics when it does not.
fn panic_message(f: impl FnOnce()) -> String {
    let payload = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("it should have panicked");
    payload.downcast_ref::<String>().cloned().or_else(|| payload.downcast_ref::<&str>().map(ToString::to_string)).unwrap_or_default()
}

#[test]
fn browser_eval_of_a_throwing_script_fails_with_its_message() {
    let Some(browser) = Browser::shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let page = browser.open(page_file(&dir, "empty.html", "<!doctype html><p>empty</p>"));
    let message = panic_message(|| drop(page.eval("nowhere.to_be_found")));
    assert!(message.contains("ReferenceError: nowhere is not defined"), "{message}");
}

#[test]
fn browser_sees_every_request_a_page_makes() {
    let Some(browser) = Browser::shared() else { return };
    let (port, seen) = pixel_server();
    let dir = tempfile::tempdir().unwrap();
    let quiet = page_file(&dir, "quiet.html", "<!doctype html><p>nothing to fetch</p>");
    let page = browser.open(&quiet);
    assert_eq!(page.requests(), [file_url(&quiet)], "a page that fetches nothing: its own file only");
    drop(page);

    let pixel = format!("http://127.0.0.1:{port}/pixel.gif");
    let html = format!("<!doctype html><p>a picture from a server: <img src='{pixel}'></p>");
    let loud = page_file(&dir, "loud.html", &html);
    let page = browser.open(&loud);
    page.wait_for("document.images[0].complete", WAIT);
    assert_eq!(page.requests(), [file_url(&loud), pixel], "{:#?}", page.console());
    assert_eq!(seen.lock().unwrap().as_slice(), ["GET /pixel.gif HTTP/1.1"], "the server got the request");
}

#[test]
fn browser_sees_what_the_content_security_policy_refuses() {
    let Some(browser) = Browser::shared() else { return };
    let allowed = "document.getElementById('ok').textContent = 'hashed script ran';";
    let hash = base64::engine::general_purpose::STANDARD.encode(ring::digest::digest(&ring::digest::SHA256, allowed.as_bytes()));
    let html = format!(
        "<!doctype html><meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; script-src 'sha256-{hash}'\">
        <title>untouched</title><p id=ok>hashed script did not run</p><script>{allowed}</script>
        <p>model text: <script>document.title = 'inline script ran'</script><img src='x.png' onerror=\"document.title = 'onerror ran'\"></p>"
    );
    let dir = tempfile::tempdir().unwrap();
    let page = browser.open(page_file(&dir, "csp.html", &html));
    assert_eq!(page.text("#ok"), "hashed script ran", "the page's own script, allowed by its hash, runs");
    page.wait_for("[...document.images].every(i => i.complete)", WAIT);
    assert_eq!(page.eval("document.title"), "untouched", "neither the inline script nor onerror ran");
    let console = page.console();
    let refused = |what: &str| {
        console.iter().any(|line| line.starts_with(&format!("error (security): {what}")) && line.contains("Content Security Policy"))
    };
    assert!(refused("Executing inline script"), "no refusal of the inline script in {console:#?}");
    assert!(refused("Executing inline event handler"), "no refusal of onerror in {console:#?}");
    assert!(refused("Loading the image"), "no refusal of the image in {console:#?}");
    let blocked = file_url(&dir.path().join("x.png"));
    assert_eq!(page.requests(), [file_url(&dir.path().join("csp.html")), blocked], "a refused load is still seen");
}

#[test]
fn browser_click_and_keys_reach_the_page() {
    let Some(browser) = Browser::shared() else { return };
    let html = "<!doctype html><style>body { height: 3000px } #b { margin-top: 2000px }</style>
        <button id=b onclick=\"this.dataset.clicks = (+this.dataset.clicks || 0) + 1\">press</button>
        <input id=box>
        <script>window.keys = []; addEventListener('keydown', e => keys.push((e.shiftKey ? 'Shift+' : '') + e.key));</script>";
    let dir = tempfile::tempdir().unwrap();
    let page = browser.open(page_file(&dir, "input.html", html));
    page.click("#b"); // below the fold: scrolled into view first
    assert_eq!(page.eval("b.dataset.clicks"), "1");
    page.press_key("Escape");
    page.press_key("Tab");
    assert_eq!(page.eval("document.activeElement.id"), "box", "Tab moved the focus from the clicked button");
    page.type_text("typed");
    page.press_key("Shift+Tab");
    page.press_key("Enter");
    assert_eq!(page.eval("keys"), serde_json::json!(["Escape", "Tab", "Shift+Tab", "Enter"]));
    assert_eq!(page.eval("[box.value, document.activeElement.id, b.dataset.clicks]"), serde_json::json!(["typed", "b", "2"]));
}

#[test]
fn browser_click_on_a_covered_or_hidden_element_fails() {
    let Some(browser) = Browser::shared() else { return };
    let html = "<!doctype html><button id=under>under</button><button id=gone style='display: none'>gone</button>
        <div id=over style='position: fixed; inset: 0; background: white'>a dialog over everything</div>";
    let dir = tempfile::tempdir().unwrap();
    let page = browser.open(page_file(&dir, "covered.html", html));
    let message = panic_message(|| page.click("#under"));
    assert!(message.contains("cannot click #under: it is covered there by <div id=\"over\""), "{message}");
    let message = panic_message(|| page.click("#gone"));
    assert!(message.contains("cannot click #gone: it has no size"), "{message}");
    assert_eq!(page.text("#over"), "a dialog over everything");
}

#[test]
fn browser_screenshots_are_pngs_of_the_size_asked() {
    let Some(browser) = Browser::shared() else { return };
    let html = "<!doctype html><style>body { margin: 0; height: 2000px } #box { width: 120px; height: 80px; background: teal }</style><div id=box></div>";
    let dir = tempfile::tempdir().unwrap();
    let page = browser.new_page();
    page.viewport(640, 480);
    page.goto(&file_url(&page_file(&dir, "tall.html", html)));
    for (shot, name, size) in
        [(Shot::Viewport, "viewport", (640, 480)), (Shot::FullPage, "full", (640, 2000)), (Shot::Element("#box"), "box", (120, 80))]
    {
        let path = dir.path().join(format!("shots/{name}.png"));
        let png = page.screenshot(&path, shot);
        assert_eq!(std::fs::read(&path).unwrap(), png);
        assert_eq!(png_size(&png), Some(size), "{name}");
        assert!(png.ends_with(b"IEND\xaeB`\x82"), "{name}: a whole PNG, ending with its IEND chunk");
    }
}

#[test]
fn browser_emulates_the_dark_colour_scheme() {
    let Some(browser) = Browser::shared() else { return };
    let html = "<!doctype html><style>body { background: white } @media (prefers-color-scheme: dark) { body { background: black } }</style><p>text";
    let dir = tempfile::tempdir().unwrap();
    let path = page_file(&dir, "scheme.html", html);
    let seen = "[matchMedia('(prefers-color-scheme: dark)').matches, getComputedStyle(document.body).backgroundColor]";
    let light = browser.open(&path);
    light.color_scheme("light");
    assert_eq!(light.eval(seen), serde_json::json!([false, "rgb(255, 255, 255)"]));
    let dark = browser.new_page();
    dark.color_scheme("dark");
    dark.goto(&file_url(&path));
    assert_eq!(dark.eval(seen), serde_json::json!([true, "rgb(0, 0, 0)"]));
    assert!(dark.first_paint_ms() > 0.0, "a first contentful paint, timed");
}

#[test]
fn browser_pages_share_no_storage() {
    let Some(browser) = Browser::shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = page_file(&dir, "store.html", "<!doctype html><p>storage");
    let first = browser.open(&path);
    first.eval("localStorage.setItem('filter', 'failed')");
    assert_eq!(first.eval("localStorage.getItem('filter')"), "failed");
    let second = browser.open(&path);
    assert_eq!(second.eval("localStorage.getItem('filter')"), serde_json::Value::Null, "each page a fresh profile");
}
