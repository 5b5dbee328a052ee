//! The newest replay of a store this process writes, shared by everything in the process
//! that needs one (the anchoring loop's champion, the HTTP API's state and pages), so a
//! validator holds one set of folds, not one per reader: the folds of every match are
//! what grows with history. A validator's replays spill them to its spill file as they
//! pile up (`spill`), so what stays in memory does not.

use super::fold::ChainFold;
use super::spill_file::{CacheSize, SpillFile, SpillFileError};
use super::{replay_in, FoldSource, Replay, ReplayError, Snapshot, REPLAY_VERSION};
use crate::bytes::ValidatorKey;
use crate::evaluation::ratio::RatioParams;
use crate::ledger::{Store, Tip};
use std::sync::{Arc, Mutex, OnceLock};

/// Every chain's tip, as the store lists them.
type Tips = Vec<(ValidatorKey, Tip)>;

/// The last replay and the tips it was folded to.
#[derive(Default)]
pub struct LatestReplay {
    last: Mutex<Option<(Tips, Arc<Replay>)>>,
    /// Where what the replays derive past the cache goes; made at the first need when
    /// the default (a temporary file with a validator's cache).
    cold: OnceLock<Arc<SpillFile>>,
    /// The folds a kept file held at the start ([`LatestReplay::kept`]), for the first
    /// replay: each reused only if its chain verifies afresh to its tip.
    kept: Mutex<Vec<ChainFold>>,
    /// Whether the file holds fold heads ([`LatestReplay::keep`]): they are taken out,
    /// durably, before the next replay writes to it, so a file never holds heads that
    /// its rows have moved past.
    heads_in: std::sync::atomic::AtomicBool,
    /// Whether each replay is kept as it is made ([`LatestReplay::kept`]'s).
    keep_each: bool,
    /// The protocol table the replays judge by (the network's unless a devnet names one),
    /// with what the chain announced since the start.
    protocol: Mutex<crate::protocol::Protocol>,
}

impl LatestReplay {
    /// Replays that keep what they derive past `cache` in a file at `path` (created
    /// afresh): a validator's, beside its store.
    pub fn create(path: &std::path::Path, cache: CacheSize) -> Result<LatestReplay, SpillFileError> {
        let cold = Arc::new(SpillFile::create(path, cache)?).into();
        Ok(LatestReplay { cold, ..LatestReplay::default() })
    }

    /// A validator's replays, kept across restarts in `dir`'s kept file
    /// (`kept_file::PROJECTION_FILE`, as `af audit --snapshot` keeps it): each replay
    /// ends by keeping its folds there (its matches spilled first, the heads put back
    /// last), and the folds the last run's last replay kept are this run's first start,
    /// each reused only if its chain verifies afresh to the fold's tip, so a restart,
    /// after a crash too, does not fold (or fetch back, where bodies are pruned) every
    /// log from genesis. A run stopped before its first replay ended left none: every
    /// chain then folds from genesis, said to `note`. Its replays keep each log's fold
    /// at its checkpoint heights in `dir/folds` (`checkpoint`), which the node serves.
    pub fn kept(dir: &std::path::Path, note: &mut dyn FnMut(&str)) -> Result<LatestReplay, SpillFileError> {
        let mut kept = super::kept_file::open_with_cache(dir, CacheSize::VALIDATOR, note)?;
        kept.cold.clear_sets()?;
        kept.cold.keep_fold_points_in(dir.join(super::fold_checkpoints::FOLDS_DIR));
        if kept.folds.is_empty() {
            note("no folds were kept by the last run (a first start, or a run stopped before its first replay ended): every log folds from genesis");
        }
        Ok(LatestReplay {
            cold: Arc::new(kept.cold).into(),
            kept: Mutex::new(kept.folds),
            keep_each: true,
            ..LatestReplay::default()
        })
    }

    /// The same replays, judging by `protocol` (ledger-spec/15).
    pub fn with_protocol(self, protocol: crate::protocol::Protocol) -> LatestReplay {
        *self.protocol.lock().unwrap_or_else(|e| e.into_inner()) = protocol;
        self
    }

    pub fn protocol(&self) -> crate::protocol::Protocol {
        self.protocol.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A later version the chain announced (ledger-spec/15): the next replay judges every
    /// block from its activation on as waiting for an upgrade, and none is reused from
    /// before (a cache never stands in for a check).
    pub fn announce(&self, (version, block): (u32, u64)) {
        let mut protocol = self.protocol.lock().unwrap_or_else(|e| e.into_inner());
        let told = protocol.clone().with_announced(version, block);
        if told != *protocol {
            *protocol = told;
            *self.last.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }

    /// Keeps the last replay's folds in the file for the next start
    /// (`kept_file::save`), unless it was kept as it ended; whether there was one to
    /// keep. A validator calls it as it stops (its last save may have failed); a replay
    /// after it takes the heads out again first.
    pub fn keep(&self) -> Result<bool, SpillFileError> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, replayed)) = last.as_ref() else { return Ok(false) };
        if self.heads_in.load(std::sync::atomic::Ordering::SeqCst) {
            // The last replay was kept as it ended: nothing has moved since.
            return Ok(true);
        }
        let cold = self.cold()?;
        let mut folds = replayed.folds.clone();
        super::kept_file::save(&cold, &mut folds)?;
        self.heads_in.store(true, std::sync::atomic::Ordering::SeqCst);
        Ok(true)
    }

    /// Replays with a temporary file (a test's, or a process that serves a store it does
    /// not write for long).
    pub fn temporary(cache: CacheSize) -> Result<LatestReplay, SpillFileError> {
        let cold = Arc::new(SpillFile::temporary(cache)?).into();
        Ok(LatestReplay { cold, ..LatestReplay::default() })
    }

    /// The file its replays keep their state in: where the validator's other sets that
    /// grow with its log go too (`spilled_key_set::KeySet`).
    pub fn cold(&self) -> Result<Arc<SpillFile>, SpillFileError> {
        if let Some(cold) = self.cold.get() {
            return Ok(cold.clone());
        }
        let made = Arc::new(SpillFile::temporary(CacheSize::VALIDATOR)?);
        Ok(self.cold.get_or_init(|| made).clone())
    }

    /// The file for a validator's sets of its own log (`spill_file`), or, where it cannot be
    /// made, none, said as a warning: the sets then stay in memory, and grow with the
    /// log, which an operator must hear of rather than find in a graph.
    pub fn sets_file(&self) -> Option<Arc<SpillFile>> {
        match self.cold() {
            Ok(cold) => Some(cold),
            Err(error) => {
                tracing::warn!(
                    event = "replay_file_failed",
                    error = %error,
                    "the replay's file could not be made: our own log's sets stay in memory and grow with it"
                );
                None
            }
        }
    }

    /// The replay of `store` as its tips are now: the last one when no tip moved since,
    /// else one that folds only the new blocks onto the last one's folds. `store` must be
    /// the one this process holds open for writing (its folds are reused as
    /// [`FoldSource::ThisProcess`]). One caller replays at a time; the others wait for it
    /// and then share its result.
    pub fn get(&self, store: &Store, ratio_params: &RatioParams) -> Result<Arc<Replay>, ReplayError> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        // The tips before the replay: a block appended meanwhile moves them again.
        let tips = store.tips()?;
        if let Some((_, replayed)) = last.as_ref().filter(|(folded, _)| *folded == tips) {
            return Ok(replayed.clone());
        }
        let snapshot = match last.as_ref() {
            Some((_, previous)) => Some((
                Snapshot { replay_version: REPLAY_VERSION, folds: previous.folds.clone() },
                FoldSource::ThisProcess,
            )),
            None => {
                let kept = std::mem::take(&mut *self.kept.lock().unwrap_or_else(|e| e.into_inner()));
                (!kept.is_empty())
                    .then(|| (Snapshot { replay_version: REPLAY_VERSION, folds: kept }, FoldSource::Untrusted))
            }
        };
        let registry = crate::envs::registry().with_protocol(self.protocol());
        let previous = last.as_ref().map(|(_, previous)| previous.clone());
        let progress = &mut |_: &_, _, _| {};
        let cold = self.cold()?;
        if self.heads_in.swap(false, std::sync::atomic::Ordering::SeqCst) {
            cold.take_heads()?;
        }
        let fresh = replay_in(&cold, store, &registry, snapshot, ratio_params, progress, previous.as_deref());
        let fresh = match fresh {
            Ok(mut fresh) => {
                // A kept file is kept after every replay, not only at a clean stop: a
                // start after a crash then folds only what came after the last replay.
                if self.keep_each {
                    match super::kept_file::save(&cold, &mut fresh.folds) {
                        Ok(()) => self.heads_in.store(true, std::sync::atomic::Ordering::SeqCst),
                        Err(error) => tracing::warn!(
                            event = "replay_not_kept",
                            error = %error,
                            "the replay was not kept: a start before the next one folds every log from genesis"
                        ),
                    }
                }
                Arc::new(fresh)
            }
            Err(e) => {
                // A match the file failed to give back may be missing from the last folds
                // too: the next replay starts from genesis.
                if matches!(e, ReplayError::SpillRead(_)) {
                    *last = None;
                }
                return Err(e);
            }
        };
        *last = Some((tips, fresh.clone()));
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    use crate::ledger::{LedgerKey, OwnLog};

    #[test]
    fn a_kept_file_starts_each_run_with_empty_key_sets() {
        use crate::replay::spilled_key_set::KeySet;
        let dir = tempfile::tempdir().unwrap();
        let keys: Vec<Vec<u8>> = (0..1_000u32).map(|i| i.to_le_bytes().to_vec()).collect();
        {
            let latest = LatestReplay::kept(dir.path(), &mut |_| {}).unwrap();
            let mut set = KeySet::spilling_to(latest.sets_file().unwrap());
            keys.iter().for_each(|k| assert!(set.insert(k)));
            assert!(set.contains(&keys[0]), "past the cache, in the file");
        }
        let latest = LatestReplay::kept(dir.path(), &mut |_| {}).unwrap();
        let set = KeySet::spilling_to(latest.sets_file().unwrap());
        assert!(keys.iter().all(|k| !set.contains(k)), "the last run's set is not this run's");
    }

    #[test]
    fn readers_share_one_replay_until_a_tip_moves_and_then_fold_to_what_genesis_gives() {
        let dir = tempfile::tempdir().unwrap();
        let log = OwnLog::new(Store::create(dir.path()).unwrap(), LedgerKey::from_seed([5; 32]));
        let append = |height: u64| {
            log.append(crate::ledger::demo::demo_events(&log.validator(), height, 4, 600), 1_000 + height).unwrap();
        };
        append(0);
        let latest = LatestReplay::temporary(CacheSize::VALIDATOR).unwrap();
        let first = latest.get(&log.store, &DEFAULT_RATIO_PARAMS).unwrap();
        let again = latest.get(&log.store, &DEFAULT_RATIO_PARAMS).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "no tip moved: the same replay");
        append(1);
        let moved = latest.get(&log.store, &DEFAULT_RATIO_PARAMS).unwrap();
        assert!(!Arc::ptr_eq(&first, &moved));
        assert_eq!(moved.n_chains_from_snapshot, 1, "the new block is folded onto the last folds");
        assert_eq!(moved.n_blocks_folded, 1);
        let genesis =
            crate::replay::replay(&log.store, &crate::envs::registry(), None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {})
                .unwrap();
        assert_eq!(moved.state_hash, genesis.state_hash);
        assert_eq!(moved.folds, genesis.folds);
    }
}
