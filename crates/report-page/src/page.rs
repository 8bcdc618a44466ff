//! The HTML file: one page holding its style, its script and its data, under a
//! Content-Security-Policy that lets only that style and that script run.
//!
//! The policy names the script and the style by their SHA-256 (nothing else inline or from
//! elsewhere runs or applies), allows no connection, frame, font or form, images only as `data:`
//! URLs, and requires Trusted Types with no policy: a string can never become markup
//! (`innerHTML` and its kin throw), so the script builds the page from elements and text nodes.
//! Data sits in `<script type="application/json">` elements, which never run, with every `<`
//! written `\u003c` so no text can close them.

use base64::Engine as _;

/// The page's style.
const STYLE: &str = include_str!("../assets/report.css");
/// The page's script.
const SCRIPT: &str = include_str!("../assets/report.js");

/// The whole file: `report` (the overview's JSON) and `details` (each task's JSON, the N-th in
/// `detail-N`), with `title` in the tab.
pub fn html(title: &str, report: &str, details: &[String]) -> String {
    let mut out = String::with_capacity(STYLE.len() + SCRIPT.len() + report.len() + details.iter().map(String::len).sum::<usize>() + 4096);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str(&format!("<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n", policy()));
    out.push_str("<meta name=\"color-scheme\" content=\"light dark\">\n");
    out.push_str(&format!("<title>{}</title>\n", dracode_results::html::escape(title)));
    out.push_str(&format!("<style>{STYLE}</style>\n</head>\n<body>\n"));
    out.push_str(
        "<noscript>This report draws itself with JavaScript; the same results are in summary.md and results.jsonl beside it.</noscript>\n",
    );
    push_data(&mut out, "report-data", report);
    for (n, detail) in details.iter().enumerate() {
        push_data(&mut out, &format!("detail-{n}"), detail);
    }
    out.push_str(&format!("<script>{SCRIPT}</script>\n</body>\n</html>\n"));
    out
}

/// The Content-Security-Policy of every report.
pub fn policy() -> String {
    format!(
        "default-src 'none'; script-src '{}'; style-src '{}'; img-src data:; base-uri 'none'; form-action 'none'; \
         require-trusted-types-for 'script'; trusted-types 'none'",
        sha256(SCRIPT),
        sha256(STYLE)
    )
}

/// `sha256-<base64>` of `text`, as CSP names an inline element.
fn sha256(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(digest.as_ref()))
}

/// `<script type="application/json" id="ID">JSON</script>`, with `<` as `\u003c` (the same
/// JSON to a parser; no `</script>` or `<!--` inside).
fn push_data(out: &mut String, id: &str, json: &str) {
    out.push_str(&format!("<script type=\"application/json\" id=\"{id}\">"));
    out.push_str(&json.replace('<', "\\u003c"));
    out.push_str("</script>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_close_its_element_and_still_parses_to_the_same_value() {
        let value = serde_json::json!({"text": "</script><script>alert(1)</script><!--"});
        let page = html("t", &value.to_string(), &[]);
        let start = page.find("id=\"report-data\">").map(|i| i + "id=\"report-data\">".len()).unwrap_or_default();
        let end = start + page[start..].find("</script>").unwrap_or_default();
        let back: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap_or_default();
        assert_eq!(back, value);
    }

    #[test]
    fn the_policy_names_exactly_the_inline_script_and_style() {
        let p = policy();
        assert!(p.contains(&sha256(SCRIPT)) && p.contains(&sha256(STYLE)), "{p}");
        assert!(!p.contains("unsafe"), "{p}");
    }
}
