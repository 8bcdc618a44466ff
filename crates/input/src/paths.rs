//! Paths as a user reads them.

use std::path::{Component, Path, PathBuf};

/// `path` with `.` dropped and each `NAME/..` folded, without asking the filesystem (so a
/// symbolic link is not followed): `.dracode/..` is `.`, `a/./b/../c` is `a/c`. A leading `..`
/// stays, as does `/..` (the root's parent is the root). An empty result is `.`. For showing a
/// path; what is opened stays the path as given.
pub fn lexical(path: &Path) -> PathBuf {
    let mut parts: Vec<Component<'_>> = Vec::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => parts.push(part),
            },
            _ => parts.push(part),
        }
    }
    if parts.is_empty() { PathBuf::from(".") } else { parts.iter().collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_dots_lexically() {
        for (given, shown) in [
            (".dracode/..", "."),
            ("a/./b/../c", "a/c"),
            ("../.dracode/..", ".."),
            ("../../x", "../../x"),
            ("/tmp/a/../b", "/tmp/b"),
            ("/..", "/"),
            ("", "."),
            ("a/b/", "a/b"),
        ] {
            assert_eq!(lexical(Path::new(given)), Path::new(shown), "{given}");
        }
    }
}
