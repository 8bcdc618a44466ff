//! A headless Chromium (Debian's `chromium` package) driven over the Chrome DevTools Protocol,
//! for tests that look at a page as a person does: what it shows, what a click or a key does,
//! what it requests, what its console and its Content-Security-Policy say, how it looks.
//!
//! The browser is an outside program a fresh machine may lack. Without it [`Browser::shared`]
//! and [`Browser::launch`] return `None` and the test returns early, the first time with one
//! note on stderr; with `DRACODE_REQUIRE_CHROMIUM=1` (set by `.ci/run`) a missing browser fails
//! the test instead. `DRACODE_CHROMIUM` names another binary (default: `chromium` on `PATH`).
//!
//! The protocol runs over a pipe (`--remote-debugging-pipe`: file descriptors 3 and 4, which
//! `sh` sets up, so no `unsafe` here), not a socket: the browser opens no port, and when the
//! test process ends, however it ends, the browser reads the end of its pipe and quits, so even
//! the shared browser (a static, never dropped) cannot outlive the tests. Each [`Page`] is a
//! tab in a browser context of its own (no storage, cache or cookies shared with another page),
//! so tests sharing the browser run side by side. Every wait has a deadline ([`WAIT`]): a hung
//! browser fails the test with what it was waiting for, and never hangs CI.
//!
//! ```ignore
//! use crate::support::browser::{Browser, Shot, WAIT, file_url};
//! let Some(browser) = Browser::shared() else { return }; // no chromium here: skipped
//! let report = out.join("report.html");
//! let page = browser.new_page();
//! page.viewport(1366, 768); // a laptop
//! page.goto(&file_url(&report));
//! page.wait_for("document.querySelectorAll('[data-task]').length === 3", WAIT);
//! assert!(page.text("#task-fix-typo").contains("failed"));
//! page.click("#task-fix-typo summary");
//! page.press_key("Escape");
//! assert_eq!(page.requests(), [file_url(&report)], "the page loaded nothing but itself");
//! assert!(!page.console().iter().any(|m| m.contains("Refused")), "{:#?}", page.console());
//! page.screenshot(&out.join("overview.png"), Shot::FullPage);
//! ```

use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// The longest any one wait may take (an answer, a page load, a condition): long enough for a
/// loaded 2-core CI machine, short enough that a hung browser is a failure, not a hang.
pub const WAIT: Duration = Duration::from_secs(30);

/// Flags for a quiet, private browser: nothing is fetched on its own account (no updates, sync,
/// translation, first-run pages), nothing outside the profile folder is written.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox", // CI runs as root, where Chromium's own sandbox refuses to start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-features=Translate,MediaRouter,OptimizationHints",
    "--mute-audio",
    "--hide-scrollbars", // screenshots without a scrollbar's stripe, full-page ones as wide as the viewport
    "--password-store=basic",
    "--use-mock-keychain",
    "--remote-debugging-pipe",
];

/// Runs the browser (`$0`, its flags `$@`) with the protocol pipe on descriptors 3 (commands in)
/// and 4 (answers out), then removes its folder (profile and temporary files).
const WRAPPER: &str = r#""$0" "$@" 3<&0 4>&1 </dev/null >/dev/null; code=$?; rm -rf -- "$DRACODE_CHROMIUM_HOME"; exit $code"#;

/// A running headless Chromium. Dropping it closes the browser and every process it started.
pub struct Browser {
    wire: Arc<Wire>,
    child: Mutex<Child>,
    home: PathBuf,
}

/// One tab, in a browser context of its own; closed when dropped. Everything it emitted since it
/// was opened (requests, console messages, exceptions) is kept and can be read at any time.
pub struct Page<'b> {
    browser: &'b Browser,
    target: String,
    context: String,
    session: String,
    events: Arc<Events>,
}

/// What [`Page::screenshot`] captures.
#[derive(Debug, Clone, Copy)]
pub enum Shot<'a> {
    /// What the viewport shows now.
    Viewport,
    /// The whole document, as tall as it is.
    FullPage,
    /// The box of the first element matching this CSS selector.
    Element(&'a str),
}

impl Browser {
    /// One browser for the whole test binary, each test opening its own pages in it (a launch
    /// costs far more than a page). `None` when there is no Chromium (see the module doc).
    pub fn shared() -> Option<&'static Browser> {
        static SHARED: OnceLock<Option<Browser>> = OnceLock::new();
        SHARED.get_or_init(Browser::launch).as_ref()
    }

    /// A browser of the test's own; `None` when there is no Chromium (see the module doc).
    /// Panics when the browser is there but does not start.
    pub fn launch() -> Option<Browser> {
        let binary = chromium_binary()?;
        Some(Browser::start(&binary).unwrap_or_else(|e| panic!("{e}")))
    }

    fn start(binary: &Path) -> Result<Browser, String> {
        let home = tempfile::Builder::new().prefix("dracode-chromium-").tempdir().map_err(|e| format!("a temporary folder: {e}"))?.keep();
        // Its own temporary files and home too (the profile's lock socket, crash reports), so the
        // wrapper removes everything it wrote.
        std::fs::create_dir(home.join("tmp")).map_err(|e| format!("{}: {e}", home.display()))?;
        let spawned = Command::new("sh")
            .arg("-c")
            .arg(WRAPPER)
            .arg(binary)
            .args(FLAGS)
            .arg(format!("--user-data-dir={}", home.join("profile").display()))
            .arg("about:blank")
            .env("DRACODE_CHROMIUM_HOME", &home)
            .env("TMPDIR", home.join("tmp"))
            .env("HOME", &home) // crash reports and dconf's cache, otherwise written to the user's own
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn();
        let mut child = spawned.map_err(|e| format!("could not start {}: {e}", binary.display()))?;
        let (to_browser, answers, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let wire = Arc::new(Wire::new(to_browser));
        let reader = Arc::clone(&wire);
        std::thread::spawn(move || reader.read_answers(answers));
        let tail = Arc::clone(&wire.stderr);
        std::thread::spawn(move || keep_tail(stderr, &tail));
        let browser = Browser { wire, child: Mutex::new(child), home };
        match browser.wire.try_call(None, "Browser.getVersion", json!({}), WAIT) {
            Ok(_) => Ok(browser),
            Err(e) => Err(format!("{} did not start: {e}", binary.display())),
        }
    }

    /// The browser's product and version (`Chrome/156.0…`).
    pub fn version(&self) -> String {
        self.wire.call(None, "Browser.getVersion", json!({}))["product"].as_str().unwrap_or_default().to_string()
    }

    /// A blank tab, for setting the viewport or colour scheme before [`Page::goto`].
    pub fn new_page(&self) -> Page<'_> {
        let context = self.wire.call(None, "Target.createBrowserContext", json!({"disposeOnDetach": true}));
        let context = context["browserContextId"].as_str().unwrap_or_default().to_string();
        let target = self.wire.call(None, "Target.createTarget", json!({"url": "about:blank", "browserContextId": context}));
        let target = target["targetId"].as_str().unwrap_or_default().to_string();
        let session = self.wire.call(None, "Target.attachToTarget", json!({"targetId": target, "flatten": true}));
        let session = session["sessionId"].as_str().unwrap_or_default().to_string();
        let events = self.wire.events(&session);
        let page = Page { browser: self, target, context, session, events };
        for method in ["Page.enable", "Runtime.enable", "Network.enable", "Log.enable"] {
            page.call(method, json!({}));
        }
        page.call("Page.setLifecycleEventsEnabled", json!({"enabled": true}));
        // Tabs side by side each behave as the focused one (focus events, `:focus-visible`).
        page.call("Emulation.setFocusEmulationEnabled", json!({"enabled": true}));
        page
    }

    /// A new tab showing the file at `path`, after its `load` event.
    pub fn open(&self, path: impl AsRef<Path>) -> Page<'_> {
        self.open_url(&file_url(path.as_ref()))
    }

    /// A new tab showing `url`, after its `load` event.
    pub fn open_url(&self, url: &str) -> Page<'_> {
        let page = self.new_page();
        page.goto(url);
        page
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The end of its pipe makes the browser quit (and the wrapper remove its profile).
        drop(self.wire.to_browser.lock().map(|mut w| w.take()));
        let child = match self.child.get_mut() {
            Ok(child) => child,
            Err(poisoned) => poisoned.into_inner(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if matches!(child.try_wait(), Ok(None)) {
            // Still there: the whole process group (the wrapper, the browser and its helpers).
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

impl Page<'_> {
    /// Goes to `url` and waits for its `load` event; panics with the browser's reason when the
    /// page cannot be opened (a missing file, say).
    pub fn goto(&self, url: &str) {
        let from = self.events.len();
        let navigated = self.call("Page.navigate", json!({"url": url}));
        if let Some(error) = navigated["errorText"].as_str() {
            panic!("could not open {url}: {error}");
        }
        let Some(loader) = navigated["loaderId"].as_str() else {
            return; // a move within the same document (`#fragment`): nothing loads
        };
        let loaded = |e: &Value| e["method"] == "Page.lifecycleEvent" && e["params"]["name"] == "load" && e["params"]["loaderId"] == loader;
        if self.events.wait(from, WAIT, &self.browser.wire.gone, loaded).is_none() {
            panic!("{url} did not finish loading within {WAIT:?}{}", self.browser.wire.gone_note());
        }
    }

    /// The value of the JavaScript expression `js` (a promise is awaited), as JSON: `null` for
    /// `undefined`, `{}` for a DOM node. Panics with the exception's text when `js` throws.
    pub fn eval(&self, js: &str) -> Value {
        let answer =
            self.call("Runtime.evaluate", json!({"expression": js, "returnByValue": true, "awaitPromise": true, "userGesture": true}));
        if let Some(exception) = answer.get("exceptionDetails") {
            panic!("the page threw on `{js}`: {}", exception_text(exception));
        }
        answer["result"].get("value").cloned().unwrap_or(Value::Null)
    }

    /// Evaluates `js` every 25 ms until its value is truthy, and returns that value; panics after
    /// `timeout` with the last value and the console.
    pub fn wait_for(&self, js: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.eval(js);
            if truthy(&value) {
                return value;
            }
            if Instant::now() >= deadline {
                panic!("waited {timeout:?} for `{js}`; its last value: {value}; console: {:#?}", self.console());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The text a person sees in the first element matching the CSS `selector`: its `innerText`
    /// (hidden descendants leave nothing, CSS `text-transform` applies), or `""` when it is not
    /// shown at all (`display: none`, `visibility: hidden`, in a closed `<details>`). Panics when
    /// none matches.
    pub fn text(&self, selector: &str) -> String {
        let js = format!(
            "(el => el ? (el.checkVisibility({{visibilityProperty: true}}) ? el.innerText : '') : null)(document.querySelector({0}))",
            json!(selector)
        );
        match self.eval(&js) {
            Value::String(text) => text,
            _ => panic!("no element matches {selector}"),
        }
    }

    /// A left click with the mouse at the centre of the first element matching the CSS
    /// `selector`, scrolled into view first. Panics when there is none, it has no size, or
    /// something else lies on top of it there: what a person could not click.
    pub fn click(&self, selector: &str) {
        let (x, y) = self.centre_of(selector);
        for (kind, button, buttons) in [("mouseMoved", "none", 0), ("mousePressed", "left", 1), ("mouseReleased", "left", 0)] {
            let event = json!({"type": kind, "x": x, "y": y, "button": button, "buttons": buttons, "clickCount": 1});
            self.call("Input.dispatchMouseEvent", event);
        }
    }

    fn centre_of(&self, selector: &str) -> (f64, f64) {
        let js = format!(
            "(() => {{ const el = document.querySelector({0}); if (!el) return 'no element matches it';
              el.scrollIntoView({{block: 'center', inline: 'center'}});
              const r = el.getBoundingClientRect();
              if (r.width === 0 || r.height === 0) return 'it has no size (not displayed)';
              const x = r.left + r.width / 2, y = r.top + r.height / 2, hit = document.elementFromPoint(x, y);
              if (!hit || !(hit === el || el.contains(hit)))
                return 'it is covered there by ' + (hit ? hit.outerHTML.slice(0, 200) : 'nothing (outside the viewport)');
              return [x, y]; }})()",
            json!(selector)
        );
        match self.eval(&js) {
            Value::Array(xy) if xy.len() == 2 => (xy[0].as_f64().unwrap_or_default(), xy[1].as_f64().unwrap_or_default()),
            why => panic!("cannot click {selector}: {}", why.as_str().unwrap_or_default()),
        }
    }

    /// Presses and releases a key, as the keyboard would, on the focused element: a key name
    /// (`Escape`, `Tab`, `Enter`, `Space`, `Backspace`, `Delete`, `ArrowUp`/`Down`/`Left`/`Right`,
    /// `Home`, `End`, `PageUp`, `PageDown`) or one character, after optional modifiers
    /// (`Shift+Tab`, `Control+a`, `Alt+`, `Meta+`).
    pub fn press_key(&self, combo: &str) {
        let (modifiers, key) = split_modifiers(combo);
        let (code, key_code, text) = key_info(key).unwrap_or_else(|| panic!("press_key: unknown key {key:?} in {combo:?}"));
        let text = if modifiers & !8 == 0 { text } else { String::new() }; // Control+a types nothing
        let key = if key == "Space" { " " } else { key };
        let down = if text.is_empty() { "rawKeyDown" } else { "keyDown" };
        for kind in [down, "keyUp"] {
            let text = if kind == "keyUp" { "" } else { text.as_str() };
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": key_code, "nativeVirtualKeyCode": key_code,
                       "modifiers": modifiers, "text": text, "unmodifiedText": text}),
            );
        }
    }

    /// Types `text` into the focused element, as an input method would (`input` events fire).
    pub fn type_text(&self, text: &str) {
        self.call("Input.insertText", json!({"text": text}));
    }

    /// Every URL the page requested, in order, starting with its own (`file:///…`), including
    /// requests the browser then refused (by the Content-Security-Policy, say).
    pub fn requests(&self) -> Vec<String> {
        let events = self.events.snapshot();
        let requests = events.iter().filter(|e| e["method"] == "Network.requestWillBeSent");
        requests.filter_map(|e| e["params"]["request"]["url"].as_str().map(str::to_string)).collect()
    }

    /// What the page said, in order: `console.log: …` (and `.warn`, `.error`, …), `exception: …`
    /// for an uncaught one, and the browser's own log: `error (security): Executing inline script
    /// violates the following Content Security Policy directive …` (older versions said `Refused
    /// to …`; match on `Content Security Policy`), `warning (network): …` and so on.
    pub fn console(&self) -> Vec<String> {
        self.events.snapshot().iter().filter_map(console_line).collect()
    }

    /// Makes the viewport `width` × `height` CSS pixels at one device pixel each (1366 × 768: a
    /// laptop); set it before [`Page::goto`] to have the page load at that size.
    pub fn viewport(&self, width: u32, height: u32) {
        self.call("Emulation.setDeviceMetricsOverride", json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}));
    }

    /// Makes the page see `prefers-color-scheme: scheme` (`dark` or `light`).
    pub fn color_scheme(&self, scheme: &str) {
        self.call("Emulation.setEmulatedMedia", json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}));
    }

    /// Writes a PNG of `shot` to `path` (folders made as needed) and returns its bytes.
    pub fn screenshot(&self, path: &Path, shot: Shot<'_>) -> Vec<u8> {
        let clip = match shot {
            Shot::Viewport => None,
            Shot::FullPage => {
                let size = &self.call("Page.getLayoutMetrics", json!({}))["cssContentSize"];
                Some([0.0, 0.0, size["width"].as_f64().unwrap_or_default(), size["height"].as_f64().unwrap_or_default()])
            }
            Shot::Element(selector) => Some(self.box_of(selector)),
        };
        let mut params = json!({"format": "png"});
        if let Some([x, y, width, height]) = clip {
            params["clip"] = json!({"x": x, "y": y, "width": width.ceil(), "height": height.ceil(), "scale": 1});
            params["captureBeyondViewport"] = json!(true);
        }
        let data = self.call("Page.captureScreenshot", params)["data"].as_str().unwrap_or_default().to_string();
        let png = base64::engine::general_purpose::STANDARD.decode(data).unwrap_or_else(|e| panic!("a screenshot that is not base64: {e}"));
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
        }
        std::fs::write(path, &png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        png
    }

    /// The page-coordinate box (x, y, width, height) of the first element matching `selector`.
    fn box_of(&self, selector: &str) -> [f64; 4] {
        let js = format!(
            "(() => {{ const el = document.querySelector({0}); if (!el) return null; const r = el.getBoundingClientRect();
              return [r.left + scrollX, r.top + scrollY, r.width, r.height]; }})()",
            json!(selector)
        );
        let found = self.eval(&js);
        let Some(numbers) = found.as_array().filter(|a| a.len() == 4) else {
            panic!("no element matches {selector}");
        };
        std::array::from_fn(|i| numbers[i].as_f64().unwrap_or_default())
    }

    /// Milliseconds from the start of navigation to the first contentful paint (the first text
    /// or image drawn), as the page's own performance timeline records it.
    pub fn first_paint_ms(&self) -> f64 {
        let js = "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null";
        self.wait_for(js, WAIT).as_f64().unwrap_or_default()
    }

    /// Sends a protocol command to this tab (for what the helpers above lack) and returns its
    /// result; panics with the browser's error.
    pub fn call(&self, method: &str, params: Value) -> Value {
        self.browser.wire.call(Some(&self.session), method, params)
    }
}

impl Drop for Page<'_> {
    fn drop(&mut self) {
        let wire = &self.browser.wire;
        let quick = Duration::from_secs(5);
        let _ = wire.try_call(None, "Target.closeTarget", json!({"targetId": self.target}), quick);
        let _ = wire.try_call(None, "Target.disposeBrowserContext", json!({"browserContextId": self.context}), quick);
        if let Ok(mut sessions) = wire.sessions.lock() {
            sessions.remove(&self.session);
        }
    }
}

/// `file:///…` for `path` (made absolute), each byte outside `A-Z a-z 0-9 - . _ ~ /`
/// percent-encoded: the URL a page opened with [`Browser::open`] has.
pub fn file_url(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut url = String::from("file://");
    for &byte in absolute.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            url.push(char::from(byte));
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url
}

/// The width and height a PNG's header gives, `None` when `png` is not a PNG.
pub fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    let header = png.get(..24)?;
    let number = |at: usize| u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]);
    (header.starts_with(b"\x89PNG\r\n\x1a\n") && &header[12..16] == b"IHDR").then(|| (number(16), number(20)))
}

/// The browser binary, `None` (after a note, or a panic under `DRACODE_REQUIRE_CHROMIUM=1`)
/// when there is none.
fn chromium_binary() -> Option<PathBuf> {
    let named = std::env::var_os("DRACODE_CHROMIUM").map(PathBuf::from);
    let name = named.clone().unwrap_or_else(|| PathBuf::from("chromium"));
    let found = if name.components().count() > 1 {
        Some(name.clone()).filter(|p| p.is_file())
    } else {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).map(|dir| dir.join(&name)).find(|p| p.is_file())
    };
    if found.is_none() {
        assert!(named.is_none(), "DRACODE_CHROMIUM={} is not a program here", name.display());
        skipped();
    }
    found
}

fn skipped() {
    if std::env::var_os("DRACODE_REQUIRE_CHROMIUM").is_some_and(|v| v == "1") {
        panic!(
            "chromium not found and DRACODE_REQUIRE_CHROMIUM=1: install it (apt-get install -y chromium) or name it in DRACODE_CHROMIUM"
        );
    }
    static SAID: Once = Once::new();
    SAID.call_once(|| {
        // Straight to the process's stderr: the test harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            std::io::stderr(),
            "note: chromium not found, so the tests in a headless browser were skipped; install it (apt-get install -y chromium) to run them"
        );
    });
}

/// The protocol connection: commands written to the browser, a thread reading its answers and
/// events and handing them out, answers to their callers and events to their tab's list.
struct Wire {
    to_browser: Mutex<Option<ChildStdin>>,
    next_id: AtomicU64,
    waiting: Mutex<HashMap<u64, mpsc::Sender<Value>>>,
    sessions: Mutex<HashMap<String, Arc<Events>>>,
    gone: AtomicBool,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Wire {
    fn new(to_browser: Option<ChildStdin>) -> Wire {
        Wire {
            to_browser: Mutex::new(to_browser),
            next_id: AtomicU64::new(1),
            waiting: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            gone: AtomicBool::new(false),
            stderr: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn call(&self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.try_call(session, method, params, WAIT).unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_call(&self, session: Option<&str>, method: &str, params: Value, timeout: Duration) -> Result<Value, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (answer, answered) = mpsc::channel();
        {
            let mut waiting = self.waiting.lock().map_err(|_| "a poisoned lock".to_string())?;
            if self.gone.load(Ordering::SeqCst) {
                return Err(format!("{method}: the browser is gone{}", self.gone_note()));
            }
            waiting.insert(id, answer);
        }
        self.send(&message).map_err(|e| format!("{method}: could not write to the browser: {e}{}", self.gone_note()))?;
        let reply = match answered.recv_timeout(timeout) {
            Ok(reply) => reply,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.waiting.lock().map(|mut w| w.remove(&id)).ok();
                return Err(format!("the browser did not answer {method} within {timeout:?}"));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(format!("{method}: the browser is gone{}", self.gone_note())),
        };
        match reply.get("error") {
            Some(error) => Err(format!("{method} {}: {error}", message["params"])),
            None => Ok(reply.get("result").cloned().unwrap_or(Value::Null)),
        }
    }

    fn send(&self, message: &Value) -> std::io::Result<()> {
        let mut bytes = message.to_string().into_bytes();
        bytes.push(0);
        let mut writer = self.to_browser.lock().map_err(|_| std::io::Error::other("a poisoned lock"))?;
        let writer = writer.as_mut().ok_or_else(|| std::io::Error::other("closed"))?;
        writer.write_all(&bytes)?;
        writer.flush()
    }

    /// The event list of `session`, made on first sight (its first events may come before its
    /// tab has asked for it).
    fn events(&self, session: &str) -> Arc<Events> {
        let mut sessions = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(sessions.entry(session.to_string()).or_default())
    }

    /// The reading thread: one NUL-terminated JSON message at a time, until the pipe ends.
    fn read_answers(&self, answers: Option<std::process::ChildStdout>) {
        if let Some(answers) = answers {
            let mut reader = BufReader::new(answers);
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                if message.last() == Some(&0) {
                    message.pop();
                }
                if let Ok(message) = serde_json::from_slice::<Value>(&message) {
                    self.hand_out(message);
                }
                message.clear();
            }
        }
        self.gone.store(true, Ordering::SeqCst);
        self.waiting.lock().map(|mut w| w.clear()).ok(); // each caller's channel ends: "gone"
        for events in self.sessions.lock().map(|s| s.values().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            let _held = events.list.lock(); // not between a waiter's look at `gone` and its wait
            events.arrived.notify_all();
        }
    }

    fn hand_out(&self, message: Value) {
        if let Some(id) = message.get("id").and_then(Value::as_u64) {
            if let Some(caller) = self.waiting.lock().ok().and_then(|mut w| w.remove(&id)) {
                let _ = caller.send(message);
            }
        } else if let Some(session) = message.get("sessionId").and_then(Value::as_str) {
            self.events(session).push(message);
        }
    }

    /// After the browser has gone: the end of what it printed on stderr.
    fn gone_note(&self) -> String {
        if !self.gone.load(Ordering::SeqCst) {
            return String::new();
        }
        let tail = self.stderr.lock().map(|t| String::from_utf8_lossy(&t).into_owned()).unwrap_or_default();
        format!(" (the browser has exited; the end of its stderr:\n{tail})")
    }
}

/// Keeps the last 16 KiB the browser wrote to stderr, for the message when it dies.
fn keep_tail(stderr: Option<std::process::ChildStderr>, tail: &Mutex<Vec<u8>>) {
    let Some(mut stderr) = stderr else { return };
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = stderr.read(&mut chunk) {
        if let Ok(mut tail) = tail.lock() {
            tail.extend_from_slice(&chunk[..n]);
            let excess = tail.len().saturating_sub(16 * 1024);
            tail.drain(..excess);
        }
    }
}

/// The events of one tab, in the order they came, and a signal for each new one.
#[derive(Default)]
struct Events {
    list: Mutex<Vec<Value>>,
    arrived: Condvar,
}

impl Events {
    fn push(&self, event: Value) {
        self.list.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(event);
        self.arrived.notify_all();
    }

    fn len(&self) -> usize {
        self.list.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    fn snapshot(&self) -> Vec<Value> {
        self.list.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The first event from index `from` on that `wanted` accepts, waiting up to `timeout`;
    /// `None` on timeout or when the browser is `gone`.
    fn wait(&self, from: usize, timeout: Duration, gone: &AtomicBool, wanted: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        let mut list = self.list.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if let Some(found) = list.iter().skip(from).find(|e| wanted(e)) {
                return Some(found.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || gone.load(Ordering::SeqCst) {
                return None;
            }
            list = self.arrived.wait_timeout(list, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
    }
}

/// One line of [`Page::console`] for a console call, an uncaught exception or a log entry.
fn console_line(event: &Value) -> Option<String> {
    let params = &event["params"];
    match event["method"].as_str()? {
        "Runtime.consoleAPICalled" => {
            let args = params["args"].as_array().map(Vec::as_slice).unwrap_or_default();
            let words: Vec<String> = args.iter().map(|a| a["value"].as_str().map_or_else(|| remote_text(a), str::to_string)).collect();
            Some(format!("console.{}: {}", params["type"].as_str().unwrap_or("log"), words.join(" ")))
        }
        "Runtime.exceptionThrown" => Some(format!("exception: {}", exception_text(&params["exceptionDetails"]))),
        "Log.entryAdded" => {
            let entry = &params["entry"];
            Some(format!("{} ({}): {}", entry["level"].as_str()?, entry["source"].as_str()?, entry["text"].as_str()?))
        }
        _ => None,
    }
}

/// A remote object as the console would print it.
fn remote_text(object: &Value) -> String {
    match object.get("value") {
        Some(value) => value.to_string(),
        None => object["description"].as_str().or(object["type"].as_str()).unwrap_or_default().to_string(),
    }
}

/// An exception's message and stack (`ReferenceError: x is not defined\n    at …`).
fn exception_text(details: &Value) -> String {
    let described = details["exception"]["description"].as_str();
    described.or(details["text"].as_str()).unwrap_or("an exception").to_string()
}

/// JavaScript's truthiness of a JSON value.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `Shift+Tab` → (the modifier bits, `Tab`): Alt 1, Control 2, Meta 4, Shift 8.
fn split_modifiers(combo: &str) -> (u32, &str) {
    let mut modifiers = 0;
    let mut rest = combo;
    while let Some((name, after)) = rest.split_once('+').filter(|(_, after)| !after.is_empty()) {
        modifiers |= match name {
            "Alt" => 1,
            "Control" | "Ctrl" => 2,
            "Meta" => 4,
            "Shift" => 8,
            _ => panic!("press_key: unknown modifier {name:?} in {combo:?}"),
        };
        rest = after;
    }
    (modifiers, rest)
}

/// A key's `code`, its Windows key code and the text it types.
fn key_info(key: &str) -> Option<(String, u32, String)> {
    let named = |code: &str, key_code: u32, text: &str| Some((code.to_string(), key_code, text.to_string()));
    match key {
        "Escape" => named("Escape", 27, ""),
        "Tab" => named("Tab", 9, ""),
        "Enter" => named("Enter", 13, "\r"),
        "Space" | " " => named("Space", 32, " "),
        "Backspace" => named("Backspace", 8, ""),
        "Delete" => named("Delete", 46, ""),
        "ArrowLeft" => named("ArrowLeft", 37, ""),
        "ArrowUp" => named("ArrowUp", 38, ""),
        "ArrowRight" => named("ArrowRight", 39, ""),
        "ArrowDown" => named("ArrowDown", 40, ""),
        "Home" => named("Home", 36, ""),
        "End" => named("End", 35, ""),
        "PageUp" => named("PageUp", 33, ""),
        "PageDown" => named("PageDown", 34, ""),
        _ => {
            let mut chars = key.chars();
            let c = chars.next().filter(|c| c.is_ascii_graphic() && chars.next().is_none())?;
            let code = if c.is_ascii_alphabetic() {
                format!("Key{}", c.to_ascii_uppercase())
            } else if c.is_ascii_digit() {
                format!("Digit{c}")
            } else {
                String::new()
            };
            Some((code, u32::from(c.to_ascii_uppercase()), c.to_string()))
        }
    }
}
