//! Splitting a batch across CI matrix jobs: `--shard K/N` picks a stable, disjoint subset.
//!
//! By default a task belongs to shard `fnv1a(id) % N + 1` (as nextest's `hash:K/N`), so adding
//! or removing a task never moves the others; `slice:K/N` takes every N-th task by position
//! instead, which balances counts exactly but moves tasks when the list changes.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::Hasher;

/// How tasks are assigned to shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// By a stable hash of the task id.
    Hash,
    /// By position in the run.
    Slice,
}

/// One shard of N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1-based shard number.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
    /// The assignment scheme.
    pub scheme: Scheme,
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.scheme == Scheme::Slice {
            write!(f, "slice:")?;
        }
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Why a shard could not be read from a flag, a recorded run or the environment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// A `scheme:` prefix other than `hash` or `slice`.
    #[error("unknown shard scheme {0:?}: use hash:K/N or slice:K/N")]
    UnknownScheme(String),
    /// Not `K/N` with 1 ≤ K ≤ N (the text as given, scheme included).
    #[error("invalid shard {0:?}: expected K/N with 1 <= K <= N, e.g. 2/4")]
    Invalid(String),
    /// `JOB_COMPLETION_INDEX` is not a number.
    #[error("JOB_COMPLETION_INDEX {0:?} is not a number")]
    BadJobIndex(String),
    /// `DRACODE_SHARD` is set but not a shard.
    #[error("DRACODE_SHARD: {0}")]
    InShardVariable(Box<ShardError>),
    /// `JOB_COMPLETION_INDEX` and `DRACODE_SHARD_COUNT` do not make a shard.
    #[error("JOB_COMPLETION_INDEX/DRACODE_SHARD_COUNT: {0}")]
    InJobVariables(Box<ShardError>),
}

impl Shard {
    /// Parses `K/N`, `hash:K/N` or `slice:K/N` (1 ≤ K ≤ N).
    pub fn parse(text: &str) -> Result<Shard, ShardError> {
        let (scheme, rest) = match text.split_once(':') {
            Some(("hash", rest)) => (Scheme::Hash, rest),
            Some(("slice", rest)) => (Scheme::Slice, rest),
            Some((other, _)) => return Err(ShardError::UnknownScheme(other.to_string())),
            None => (Scheme::Hash, text),
        };
        let bad = || ShardError::Invalid(text.to_string());
        let (k, n) = rest.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count, scheme })
    }

    /// The shard from the environment: `DRACODE_SHARD=K/N`, or Kubernetes indexed jobs'
    /// 0-based `JOB_COMPLETION_INDEX` with `DRACODE_SHARD_COUNT`.
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Option<Shard>, ShardError> {
        if let Some(value) = env.get("DRACODE_SHARD").filter(|v| !v.is_empty()) {
            return Shard::parse(value).map(Some).map_err(|e| ShardError::InShardVariable(Box::new(e)));
        }
        match (env.get("JOB_COMPLETION_INDEX"), env.get("DRACODE_SHARD_COUNT")) {
            (Some(index), Some(count)) => {
                let index: u32 = index.parse().map_err(|_| ShardError::BadJobIndex(index.clone()))?;
                Shard::parse(&format!("{}/{count}", index + 1)).map(Some).map_err(|e| ShardError::InJobVariables(Box::new(e)))
            }
            _ => Ok(None),
        }
    }

    /// True when the task with `id` at `position` (0-based, in run order) belongs here.
    pub fn selects(&self, id: &str, position: usize) -> bool {
        let bucket = match self.scheme {
            Scheme::Hash => fnv1a(id.as_bytes()) % u64::from(self.count),
            Scheme::Slice => position as u64 % u64::from(self.count),
        };
        bucket == u64::from(self.index - 1)
    }
}

/// FNV-1a, 64 bit (the `fnv` crate's hasher fed the bytes alone): the same on every platform and
/// version (unlike std's hasher).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_forms_and_rejects_nonsense() {
        assert_eq!(Shard::parse("2/3").unwrap(), Shard { index: 2, count: 3, scheme: Scheme::Hash });
        assert_eq!(Shard::parse("slice:1/2").unwrap().scheme, Scheme::Slice);
        for bad in ["0/3", "4/3", "x/3", "3", "mod:1/2", "1/0"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Shard::parse("mod:1/2").unwrap_err().to_string(), "unknown shard scheme \"mod\": use hash:K/N or slice:K/N");
    }

    #[test]
    fn shards_are_disjoint_and_cover_every_task() {
        let ids: Vec<String> = (0..200).map(|i| format!("task-{i}")).collect();
        for scheme in ["", "slice:"] {
            let mut seen = vec![0; ids.len()];
            for k in 1..=3 {
                let shard = Shard::parse(&format!("{scheme}{k}/3")).unwrap();
                for (pos, id) in ids.iter().enumerate() {
                    if shard.selects(id, pos) {
                        seen[pos] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{scheme}: every task exactly once");
        }
    }

    #[test]
    fn hash_assignment_is_stable() {
        // Pinned: a task must not move between shards across versions or machines.
        let shard = Shard::parse("1/2").unwrap();
        assert_eq!(shard.selects("a", 0), shard.selects("a", 99), "position does not matter for hash");
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn env_forms() {
        let env = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(Shard::from_env(&env(&[("DRACODE_SHARD", "1/4")])).unwrap().unwrap().count, 4);
        let k8s = Shard::from_env(&env(&[("JOB_COMPLETION_INDEX", "0"), ("DRACODE_SHARD_COUNT", "3")])).unwrap().unwrap();
        assert_eq!((k8s.index, k8s.count), (1, 3));
        assert_eq!(Shard::from_env(&env(&[])).unwrap(), None);
        let e = Shard::from_env(&env(&[("DRACODE_SHARD", "5/4")])).unwrap_err();
        assert_eq!(e.to_string(), "DRACODE_SHARD: invalid shard \"5/4\": expected K/N with 1 <= K <= N, e.g. 2/4");
        let e = Shard::from_env(&env(&[("JOB_COMPLETION_INDEX", "x"), ("DRACODE_SHARD_COUNT", "3")])).unwrap_err();
        assert_eq!(e.to_string(), "JOB_COMPLETION_INDEX \"x\" is not a number");
    }
}
