//! Text made safe for the HTML and Markdown dracode writes (`summary.md`, `report.html`).
//!
//! Written by hand: only `&`, `<` and `>` are replaced (text between tags, never attribute
//! values), three lines no maintained crate in the tree offers (`html-escape`,
//! `v_htmlescape` and `askama_escape` are not dependencies), and one function keeps every
//! artifact escaping alike.

/// The entity that stands for `c` between tags: `&amp;`, `&lt;`, `&gt;`; `None` for every other
/// character, which stays as it is.
pub fn entity(c: char) -> Option<&'static str> {
    match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        _ => None,
    }
}

/// `text` safe between tags: `&`, `<` and `>` as their [`entity`], nothing else changed.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match entity(c) {
            Some(e) => out.push_str(e),
            None => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_three_markup_characters_become_entities() {
        assert_eq!(escape("a < b && c > d \"q\" 'x' ö"), "a &lt; b &amp;&amp; c &gt; d \"q\" 'x' ö");
        assert_eq!(escape("&amp;"), "&amp;amp;");
        assert_eq!(entity('"'), None);
    }
}
