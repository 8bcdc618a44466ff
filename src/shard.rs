//! Splitting a batch across CI matrix jobs: `--shard K/N` picks a stable, disjoint subset.
//!
//! By default (`hash:K/N`) tasks are placed by a stable hash of their ids, balanced: the shards
//! of a batch differ by at most one task, and adding or removing a task moves few others.
//! Each shard has room for `T / N` tasks (the first `T % N` shards one more); the tasks, taken in
//! the order of `fnv1a(id)`, each go to the first shard with room in their own order of
//! preference (the shards ranked by `fnv1a(id, shard)`, rendezvous hashing). Every job of a
//! matrix sees the same task list, so each computes the same placement. `slice:K/N` takes every
//! N-th task by position instead.

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

    /// Which of the tasks `ids` (in run order) belong here.
    pub fn selects(&self, ids: &[&str]) -> Vec<bool> {
        let here = self.index - 1;
        match self.scheme {
            Scheme::Slice => (0..ids.len()).map(|position| position as u64 % u64::from(self.count) == u64::from(here)).collect(),
            Scheme::Hash => placement(ids, self.count).into_iter().map(|shard| shard == here).collect(),
        }
    }
}

impl Shard {
    /// True when task `id` belongs here by its id alone (`fnv1a(id) % N`), whatever the other
    /// tasks: for tasks that the shards of a matrix may not all see (issues read by each job at
    /// its own moment), so none runs twice or never. Not balanced.
    pub fn selects_alone(&self, id: &str) -> bool {
        fnv1a(id.as_bytes()) % u64::from(self.count) == u64::from(self.index - 1)
    }
}

/// The 0-based shard of each of `ids` among `count`, balanced and stable (the module's doc).
fn placement(ids: &[&str], count: u32) -> Vec<u32> {
    let n = count as usize;
    let mut room: Vec<usize> = (0..n).map(|k| ids.len() / n + usize::from(k < ids.len() % n)).collect();
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| (fnv1a(ids[i].as_bytes()), ids[i], i));
    let mut shard_of = vec![0u32; ids.len()];
    for i in order {
        let mut preference: Vec<u32> = (0..count).collect();
        preference.sort_by_key(|&k| std::cmp::Reverse(fnv1a(format!("{}\u{0}{k}", ids[i]).as_bytes())));
        let chosen = preference.into_iter().find(|&k| room[k as usize] > 0).unwrap_or(0);
        room[chosen as usize] = room[chosen as usize].saturating_sub(1);
        shard_of[i] = chosen;
    }
    shard_of
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

    fn sizes(scheme: &str, ids: &[&str], n: u32) -> Vec<usize> {
        (1..=n).map(|k| Shard::parse(&format!("{scheme}{k}/{n}")).unwrap().selects(ids).iter().filter(|&&x| x).count()).collect()
    }

    #[test]
    fn shards_are_disjoint_and_cover_every_task() {
        let owned: Vec<String> = (0..200).map(|i| format!("task-{i}")).collect();
        let ids: Vec<&str> = owned.iter().map(String::as_str).collect();
        for scheme in ["", "slice:"] {
            let mut seen = vec![0; ids.len()];
            for k in 1..=3 {
                let shard = Shard::parse(&format!("{scheme}{k}/3")).unwrap();
                for (pos, picked) in shard.selects(&ids).into_iter().enumerate() {
                    seen[pos] += usize::from(picked);
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "{scheme}: every task exactly once");
        }
    }

    #[test]
    fn hash_shards_of_a_batch_differ_by_at_most_one_task() {
        // The batch a user split 6 ways into 2 shards got 1 and 5.
        let six = ["fix-clippy", "add-docs", "replace-deprecated", "bump-deps", "fix-typos", "format"];
        assert_eq!(sizes("", &six, 2), [3, 3]);
        for total in 0..40 {
            let owned: Vec<String> = (0..total).map(|i| format!("t{i}")).collect();
            let ids: Vec<&str> = owned.iter().map(String::as_str).collect();
            for n in 1..=7 {
                let got = sizes("", &ids, n);
                let (lo, hi) = (got.iter().min().unwrap(), got.iter().max().unwrap());
                assert!(hi - lo <= 1 && got.iter().sum::<usize>() == total, "{total} tasks in {n}: {got:?}");
            }
        }
    }

    #[test]
    fn hash_placement_ignores_order_and_an_added_task_moves_few_others() {
        let owned: Vec<String> = (0..60).map(|i| format!("task-{i}")).collect();
        let ids: Vec<&str> = owned.iter().map(String::as_str).collect();
        let before = placement(&ids, 4);
        let mut reversed = ids.clone();
        reversed.reverse();
        let mut again = placement(&reversed, 4);
        again.reverse();
        assert_eq!(before, again, "the run order does not matter");
        let mut more = ids.clone();
        more.push("a-new-task");
        let after = placement(&more, 4);
        let moved = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        assert!(moved <= 6, "adding one task of 61 moved {moved} others");
        // Pinned: the same ids land on the same shards across versions and machines.
        assert_eq!(placement(&["a", "b", "c", "d"], 2), [1, 0, 1, 0]);
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
