//! The value of a `DRACODE_*` config variable, read as a loose TOML-like literal (the grammar
//! figment gave these variables): `true`/`false`; a number (`5`, `-2`; with a `.`, a float such
//! as `1.5`, while `gpt-4.1` stays text); a `"quoted"` string with TOML escapes; an array
//! `[a, "b", 3]`; a table `{key = value, "other key" = [x]}`; anything else is the text itself,
//! trimmed. A value that does not parse whole is the variable's text, untouched.

use toml::{Table, Value};

/// `text` as a config value (see the module doc).
pub fn parse(text: &str) -> Value {
    let mut cursor = Cursor { rest: text };
    match cursor.value() {
        Some(value) if cursor.rest.is_empty() => value,
        _ => Value::String(text.to_string()),
    }
}

/// Characters that end a bare word: the separators of arrays and tables.
fn is_separator(c: char) -> bool {
    matches!(c, ',' | '{' | '}' | '[' | ']')
}

/// Characters of a bare table key.
fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// What is left to read.
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    /// Consumes `prefix` when the rest starts with it.
    fn eat(&mut self, prefix: &str) -> bool {
        match self.rest.strip_prefix(prefix) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    /// Consumes and returns the longest start whose characters all satisfy `keep`.
    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> &'a str {
        let end = self.rest.find(|c: char| !keep(c)).unwrap_or(self.rest.len());
        let (taken, rest) = self.rest.split_at(end);
        self.rest = rest;
        taken
    }

    /// Consumes the ASCII whitespace at the start.
    fn skip_whitespace(&mut self) {
        self.take_while(|c| c.is_ascii_whitespace());
    }

    /// One value with the whitespace around it.
    fn value(&mut self) -> Option<Value> {
        self.skip_whitespace();
        let value = if self.eat("true") {
            Value::Boolean(true)
        } else if self.eat("false") {
            Value::Boolean(false)
        } else if self.rest.starts_with('{') {
            Value::Table(self.table()?)
        } else if self.rest.starts_with('[') {
            Value::Array(self.array()?)
        } else if self.rest.starts_with('"') {
            Value::String(self.quoted()?)
        } else if self.eat("'") {
            let c = self.rest.chars().next()?;
            self.rest = &self.rest[c.len_utf8()..];
            self.eat("'").then(|| Value::String(c.to_string()))?
        } else {
            bare(self.take_while(|c| !is_separator(c)).trim())
        };
        self.skip_whitespace();
        Some(value)
    }

    /// A `"…"` string, its escapes read as TOML reads them.
    fn quoted(&mut self) -> Option<String> {
        let body = self.rest.get(1..)?;
        let mut escaped = false;
        let end = body.find(|c: char| {
            let ends = !escaped && c == '"';
            escaped = !escaped && c == '\\';
            ends
        })?;
        let literal = &self.rest[..end + 2];
        self.rest = &self.rest[end + 2..];
        match literal.parse::<Value>().ok()? {
            Value::String(text) => Some(text),
            _ => None,
        }
    }

    /// `[value, …]`, a trailing comma allowed.
    fn array(&mut self) -> Option<Vec<Value>> {
        self.eat("[");
        let mut items = Vec::new();
        while !self.eat("]") {
            items.push(self.value()?);
            if !self.eat(",") {
                return self.eat("]").then_some(items);
            }
        }
        Some(items)
    }

    /// `{key = value, …}`, a trailing comma allowed.
    fn table(&mut self) -> Option<Table> {
        self.eat("{");
        let mut table = Table::new();
        while !self.eat("}") {
            self.skip_whitespace();
            let key = if self.rest.starts_with('"') { self.quoted()? } else { self.take_while(is_key_char).to_string() };
            self.skip_whitespace();
            if key.is_empty() || !self.eat("=") {
                return None;
            }
            table.insert(key, self.value()?);
            if !self.eat(",") {
                return self.eat("}").then_some(table);
            }
        }
        Some(table)
    }
}

/// A bare word: a float when it has a `.` and reads as one, an integer, or else text.
fn bare(word: &str) -> Value {
    if word.contains('.')
        && let Ok(float) = word.parse::<f64>()
    {
        return Value::Float(float);
    }
    match word.parse::<i64>() {
        Ok(integer) => Value::Integer(integer),
        Err(_) => Value::String(word.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use toml::Value;

    fn text(s: &str) -> Value {
        Value::String(s.to_string())
    }

    #[test]
    fn scalars_are_typed_and_other_words_are_text() {
        assert_eq!(parse("true"), Value::Boolean(true));
        assert_eq!(parse(" false "), Value::Boolean(false));
        assert_eq!(parse("5"), Value::Integer(5));
        assert_eq!(parse("-2"), Value::Integer(-2));
        assert_eq!(parse("1.5"), Value::Float(1.5));
        assert_eq!(parse("gpt-4.1"), text("gpt-4.1"));
        assert_eq!(parse("1e5"), text("1e5"));
        assert_eq!(parse("  a b "), text("a b"));
        assert_eq!(parse("http://127.0.0.1:8080/v1"), text("http://127.0.0.1:8080/v1"));
        assert_eq!(parse(""), text(""));
        assert_eq!(parse("\"5\""), text("5"));
        assert_eq!(parse("\"a\\tb \\\"q\\\"\""), text("a\tb \"q\""));
        assert_eq!(parse("'x'"), text("x"));
    }

    #[test]
    fn arrays_and_tables_nest() {
        let parsed = parse("[read_file, \"list files\", 3, [true],]");
        assert_eq!(
            parsed,
            Value::Array(vec![text("read_file"), text("list files"), Value::Integer(3), Value::Array(vec![Value::Boolean(true)])])
        );
        let parsed = parse("{X-Team = \"a, b\", n = 2, \"k k\" = {x = []}}");
        let table = parsed.as_table().unwrap();
        assert_eq!(table["X-Team"], text("a, b"));
        assert_eq!(table["n"], Value::Integer(2));
        assert_eq!(table["k k"]["x"], Value::Array(vec![]));
    }

    #[test]
    fn what_does_not_parse_whole_is_the_text_untouched() {
        for raw in ["trueish", "a,b", " [a, b", "{a}", "\"open", "\"a\" b", "x]", "{=1}", "'ab'"] {
            assert_eq!(parse(raw), text(raw), "{raw}");
        }
    }
}
