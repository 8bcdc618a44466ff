//! Percent-decoding (`%XX` → the byte), shared by URI fragments of JSON Schema `$ref`s and the
//! `OTEL_EXPORTER_OTLP_HEADERS` list.

/// `text` with its `%XX` escapes decoded; a `%` not followed by two hex digits stays as it is,
/// and invalid UTF-8 is replaced.
pub fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_decode_and_a_bare_percent_stays() {
        assert_eq!(super::decode("a%25b%2Fc"), "a%b/c");
        assert_eq!(super::decode("100%"), "100%");
        assert_eq!(super::decode("%zz"), "%zz");
    }
}
