//! How large a text is once gzipped (GitHub limits SARIF uploads by that size), measured with
//! `flate2` over the zlib already linked for libgit2.

use std::io::Write;

/// The size of `bytes` gzipped at zlib's default level (as `gzip` and Node's `zlib.gzipSync`
/// compress), or `None` when zlib fails.
pub fn compressed_len(bytes: &[u8]) -> Option<usize> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).ok()?;
    encoder.finish().ok().map(|gzipped| gzipped.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetitive_text_shrinks_and_the_size_matches_a_gzip_of_it() {
        let text = "{\"ruleId\": \"unwrap\", \"message\": {\"text\": \"may panic\"}}\n".repeat(10_000);
        let gzipped = compressed_len(text.as_bytes()).unwrap();
        assert!(gzipped < text.len() / 20, "{gzipped} of {}", text.len());
        let Ok(mut child) =
            std::process::Command::new("gzip").arg("-c").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn()
        else {
            return;
        };
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        // gzip's header may carry a file name or not; the deflate stream is the same size.
        assert!(out.stdout.len().abs_diff(gzipped) <= 2, "gzip: {}, ours: {gzipped}", out.stdout.len());
    }
}
