//! Reading a file a user names as input (`prompt_file`, `--task FILE`, a replay script, a
//! schema file): whole, bounded, and only when it is a regular file.

use std::path::Path;

/// The largest file dracode reads as input (`prompt_file`, `--task FILE`): a prompt, not a
/// data set; anything bigger is a mistake (or `/dev/zero`).
pub const MAX_INPUT_BYTES: u64 = 1024 * 1024;

/// Reads an input file whole, refusing what is not a regular file (a FIFO would block, a
/// device never end) or is larger than [`MAX_INPUT_BYTES`].
pub fn read_input(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("cannot read {}: not a regular file", path.display()));
    }
    let too_big = || format!("cannot read {}: larger than the {} KiB limit", path.display(), MAX_INPUT_BYTES / 1024);
    if meta.len() > MAX_INPUT_BYTES {
        return Err(too_big());
    }
    let mut text = String::new();
    // The file may grow between the check and the read: never take more than the limit.
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_INPUT_BYTES { Err(too_big()) } else { Ok(text) }
}
