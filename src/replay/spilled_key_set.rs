//! A set of byte keys that only grows, for what a validator must remember of its own log
//! for as long as it runs (the miners that played, the commitments it recorded skipping):
//! held in memory up to the file's `CacheSize::keys_per_set`, and past that in the replay's file, so that a
//! validator's memory does not grow with its matches.

use super::spill_file::SpillFile;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Keys added since the last move to the file, and the file's part of the set.
#[derive(Default)]
pub struct KeySet {
    hot: BTreeSet<Box<[u8]>>,
    cold: Option<(Arc<SpillFile>, u64)>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet").field("in_memory", &self.hot.len()).field("in_file", &self.cold.is_some()).finish()
    }
}

impl KeySet {
    /// An empty set whose keys past `spill_file`'s cache size go to its file.
    pub fn spilling_to(cold: Arc<SpillFile>) -> KeySet {
        let set = cold.new_set();
        KeySet { hot: BTreeSet::new(), cold: Some((cold, set)) }
    }

    /// Whether the set holds `key`. A key the file cannot be read for counts as held,
    /// the side that never acts twice (a miner is not played again, a skip not recorded
    /// twice); the failure is logged.
    pub fn contains(&self, key: &[u8]) -> bool {
        if self.hot.contains(key) {
            return true;
        }
        match &self.cold {
            None => false,
            Some((cold, set)) => cold.has_key(*set, key).unwrap_or_else(|e| {
                tracing::error!(target: "af::replay", event = "key_set_read_failed", "{e}");
                true
            }),
        }
    }

    /// Adds `key`; returns whether it was new.
    pub fn insert(&mut self, key: &[u8]) -> bool {
        if self.contains(key) {
            return false;
        }
        self.hot.insert(key.into());
        if let Some((cold, set)) = self.cold.as_ref().filter(|(cold, _)| self.hot.len() > cold.cache().keys_per_set) {
            // Kept in memory if the file refuses them: the set stays whole.
            match cold.add_keys(*set, self.hot.iter().map(|k| &**k)) {
                Ok(()) => self.hot.clear(),
                Err(e) => tracing::error!(target: "af::replay", event = "key_set_write_failed", "{e}"),
            }
        }
        true
    }

    /// Keys held in memory.
    pub fn held_in_memory(&self) -> usize {
        self.hot.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::spill_file::CacheSize;

    #[test]
    fn a_spilling_set_answers_as_a_set_in_memory_and_holds_few_keys() {
        let dir = tempfile::tempdir().unwrap();
        let cold = Arc::new(SpillFile::create(&dir.path().join("cold.redb"), CacheSize::VALIDATOR).unwrap());
        let (mut spilling, mut other, mut held) =
            (KeySet::spilling_to(cold.clone()), KeySet::spilling_to(cold), KeySet::default());
        for i in 0..2_000u32 {
            let key = (i % 1_500).to_be_bytes();
            assert_eq!(spilling.insert(&key), held.insert(&key), "{i}");
            assert!(spilling.held_in_memory() <= CacheSize::VALIDATOR.keys_per_set);
        }
        assert!(other.insert(&7u32.to_be_bytes()), "sets in one file are apart");
        for i in 0..1_600u32 {
            let key = i.to_be_bytes();
            assert_eq!(spilling.contains(&key), i < 1_500, "{i}");
            assert_eq!(held.contains(&key), i < 1_500);
            assert_eq!(other.contains(&key), i == 7);
        }
        assert_eq!(held.held_in_memory(), 1_500);
    }
}
