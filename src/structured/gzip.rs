//! How large a text is once gzipped (GitHub limits SARIF uploads by that size), measured with
//! the zlib already linked for libgit2.

/// Bytes a gzip header and trailer add around the deflate stream (10 + 8), less what zlib's
/// own wrapper adds (2 + 4).
const GZIP_OVER_ZLIB: usize = 12;

/// The size of `bytes` gzipped at zlib's default level (as `gzip` and Node's `zlib.gzipSync`
/// compress), or `None` when zlib fails.
pub fn compressed_len(bytes: &[u8]) -> Option<usize> {
    let source_len = libz_sys::uLong::try_from(bytes.len()).ok()?;
    // SAFETY: compressBound only computes a number.
    let bound = unsafe { libz_sys::compressBound(source_len) };
    let mut out = vec![0u8; usize::try_from(bound).ok()?];
    let mut out_len = bound;
    // SAFETY: `out` has `bound` writable bytes, as compress2 requires, and `bytes` is
    // `source_len` readable bytes; both outlive the call.
    let status =
        unsafe { libz_sys::compress2(out.as_mut_ptr(), &mut out_len, bytes.as_ptr(), source_len, libz_sys::Z_DEFAULT_COMPRESSION) };
    (status == libz_sys::Z_OK).then(|| usize::try_from(out_len).ok()).flatten().map(|len| len + GZIP_OVER_ZLIB)
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
