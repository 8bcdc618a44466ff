//! A unified diff (`git diff`'s, as a task's patch is recorded) cut into pieces `git apply` takes
//! one at a time — a file's header with one of its hunks, or a whole file section that has no
//! hunk (a binary patch, a mode change, a rename) — and put together again.

/// One piece of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The file it changes (its name after the change).
    pub file: String,
    /// The file's header (`diff --git` to the line before the first hunk).
    header: String,
    /// One hunk (`@@` and its lines); empty for a section without hunks.
    hunk: String,
}

impl Piece {
    /// The piece as a patch of its own.
    pub fn patch(&self) -> String {
        format!("{}{}", self.header, self.hunk)
    }
}

/// The pieces of `patch`, in order.
pub fn split(patch: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    for section in sections(patch) {
        let (header, hunks) = match section.find("\n@@") {
            Some(at) => section.split_at(at + 1),
            None => (section, ""),
        };
        let file = file_name(header);
        if hunks.is_empty() {
            pieces.push(Piece { file, header: header.to_string(), hunk: String::new() });
            continue;
        }
        let mut starts: Vec<usize> = hunks.match_indices("\n@@").map(|(at, _)| at + 1).collect();
        starts.insert(0, 0);
        starts.push(hunks.len());
        for pair in starts.windows(2) {
            pieces.push(Piece { file: file.clone(), header: header.to_string(), hunk: hunks[pair[0]..pair[1]].to_string() });
        }
    }
    pieces
}

/// `pieces` as one patch: consecutive pieces of one file under its header once.
pub fn join(pieces: &[&Piece]) -> String {
    let mut patch = String::new();
    let mut last_header: Option<&str> = None;
    for piece in pieces {
        if last_header != Some(piece.header.as_str()) || piece.hunk.is_empty() {
            patch.push_str(&piece.header);
        }
        patch.push_str(&piece.hunk);
        last_header = Some(&piece.header);
    }
    patch
}

/// The file sections of `patch`, each from its `diff --git` line.
fn sections(patch: &str) -> Vec<&str> {
    let mut starts: Vec<usize> = patch.match_indices("\ndiff --git ").map(|(at, _)| at + 1).collect();
    if patch.starts_with("diff --git ") {
        starts.insert(0, 0);
    }
    starts.push(patch.len());
    starts.windows(2).map(|pair| &patch[pair[0]..pair[1]]).collect()
}

/// The file a section's header names: its `+++ b/…` line, else its `diff --git a/… b/…` line.
fn file_name(header: &str) -> String {
    if let Some(name) = header.lines().find_map(|l| l.strip_prefix("+++ b/")) {
        return name.trim_end().to_string();
    }
    let first = header.lines().next().unwrap_or_default();
    let names = first.strip_prefix("diff --git ").unwrap_or(first);
    names.rsplit_once(" b/").map_or(names, |(_, b)| b).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n@@ -9 +9 @@\n-x\n+y\n\
        diff --git a/i.png b/i.png\nindex 3..4 100644\nGIT binary patch\nliteral 1\nIcmZo\n\n\
        diff --git a/n.txt b/n.txt\nnew file mode 100644\n--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+new\n";

    #[test]
    fn a_patch_splits_into_hunks_under_their_headers_and_joins_back() {
        let pieces = split(PATCH);
        let files: Vec<&str> = pieces.iter().map(|p| p.file.as_str()).collect();
        assert_eq!(files, ["a.txt", "a.txt", "i.png", "n.txt"]);
        assert_eq!(pieces[1].patch(), "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -9 +9 @@\n-x\n+y\n");
        assert!(pieces[2].patch().ends_with("IcmZo\n\n"), "{:?}", pieces[2]);
        assert_eq!(join(&pieces.iter().collect::<Vec<_>>()), PATCH);
        assert_eq!(join(&[&pieces[1], &pieces[3]]), format!("{}{}", pieces[1].patch(), pieces[3].patch()));
    }
}
