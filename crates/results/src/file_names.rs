//! Names safe on a file system, shared by everything that writes per-task files (reports,
//! recordings, replay lookups) so they agree on one name per task.

/// A task id made safe as a file name: `[A-Za-z0-9._-]` kept, anything else `_`; never empty,
/// `.` or `..`.
pub fn file_stem(task_id: &str) -> String {
    let stem: String = task_id.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }).collect();
    match stem.as_str() {
        "" | "." | ".." => format!("_{stem}"),
        _ => stem,
    }
}

/// The output folder's folder of recordings (`dracode run --record`): `recordings/<file_stem>.json`.
pub const RECORDINGS_DIR: &str = "recordings";

/// Where a task's patch is written, relative to the output folder: `diffs/<file_stem>.patch`.
pub fn diff_path(task_id: &str) -> String {
    format!("diffs/{}.patch", file_stem(task_id))
}

/// Where the patch of repeat `repeat` of a task is written: `diffs/<file_stem>@<repeat>.patch`
/// (`@` is never in a task id, so no task's own file is named so).
pub fn repeat_diff_path(task_id: &str, repeat: u32) -> String {
    format!("diffs/{}@{repeat}.patch", file_stem(task_id))
}

/// Where the conversation of repeat `repeat` of a task is written:
/// `transcripts/<file_stem>@<repeat>.json`.
pub fn repeat_transcript_path(task_id: &str, repeat: u32) -> String {
    format!("transcripts/{}@{repeat}.json", file_stem(task_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_stem_keeps_safe_ids_and_replaces_the_rest() {
        let cases = [
            ("fix-clippy", "fix-clippy"),
            ("a.b_c-1", "a.b_c-1"),
            ("src/lib.rs", "src_lib.rs"),
            ("../etc/passwd", ".._etc_passwd"),
            ("héllo wörld", "h_llo_w_rld"),
            ("", "_"),
            (".", "_."),
            ("..", "_.."),
            ("a\\b:c", "a_b_c"),
        ];
        for (id, stem) in cases {
            assert_eq!(file_stem(id), stem, "id {id:?}");
        }
    }
}
