//! Reading a file a user names as input (`prompt_file`, `--task FILE`, a replay script, a
//! schema file): whole, bounded, and only when it is a regular file.

use std::path::{Path, PathBuf};

/// The largest file dracode reads as input (`prompt_file`, `--task FILE`): a prompt, not a
/// data set; anything bigger is a mistake (or `/dev/zero`).
pub const MAX_INPUT_BYTES: u64 = 1024 * 1024;

/// Why an input file was not read; it prints `cannot read PATH: why`.
#[derive(Debug, thiserror::Error)]
pub enum InputFileError {
    /// The file could not be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A folder, a FIFO, a device: not a regular file.
    #[error("cannot read {}: not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// Larger than [`MAX_INPUT_BYTES`].
    #[error("cannot read {}: larger than the {} KiB limit", path.display(), MAX_INPUT_BYTES / 1024)]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
}

/// Reads an input file whole, refusing what is not a regular file (a FIFO would block, a
/// device never end) or is larger than [`MAX_INPUT_BYTES`].
pub fn read_input(path: &Path) -> Result<String, InputFileError> {
    use std::io::Read;
    let io = |source| InputFileError::Io { path: path.to_path_buf(), source };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(InputFileError::NotAFile { path: path.to_path_buf() });
    }
    let too_big = || InputFileError::TooLarge { path: path.to_path_buf() };
    if meta.len() > MAX_INPUT_BYTES {
        return Err(too_big());
    }
    let mut text = String::new();
    // The file may grow between the check and the read: never take more than the limit.
    std::fs::File::open(path).and_then(|f| f.take(MAX_INPUT_BYTES + 1).read_to_string(&mut text)).map_err(io)?;
    if text.len() as u64 > MAX_INPUT_BYTES { Err(too_big()) } else { Ok(text) }
}
