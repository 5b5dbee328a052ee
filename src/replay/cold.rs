//! Logs' matches and records off the heap: a running validator moves the match folds and
//! listed records it holds into a redb file of its own, so what it keeps in memory stops
//! growing with what its logs hold. The file is derived (rebuilt from the logs at every start, never read by
//! anything else) and read through snapshots, so a replay that readers still hold keeps
//! seeing exactly the matches it was combined from while the next one spills more.

use super::fold::{ChainFold, MatchFold};
use super::lists::{Record, RecordList, RECORD_TABLES};
use super::network::NetworkMatch;
use crate::bytes::{MatchId, ValidatorKey};
use crate::ledger::codec;
use redb::{Database, ReadOnlyTable, ReadableDatabase, TableDefinition, WriteTransaction};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// (validator, match id) -> the match's place in its log: started height (big-endian),
/// then event index. Keys sort as the ids do, so a scan walks a log's matches in id order.
const BY_ID: TableDefinition<&[u8], &[u8]> = TableDefinition::new("match_place_by_id");
/// (validator, started height, event index) -> match id, then the fold's encoding.
const BY_PLACE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("match_by_place");
/// The network state's matches, in the state's order, as the last combine wrote them
/// (each combine replaces the list; replays still held read theirs through their snapshot).
const STATE_LIST: TableDefinition<u64, &[u8]> = TableDefinition::new("network_matches");
/// The last combine's plays by pair (`network::PlayKey` as `bag::SortKey` bytes -> the
/// play): which logs played each of the state's matches, for the pages.
pub(super) const STATE_PLAYS: &str = "state_plays";
/// Members of the sets a validator keeps of what its own log holds (`key_set::KeySet`):
/// (set, key) -> nothing.
const KEY_SETS: TableDefinition<&[u8], ()> = TableDefinition::new("key_sets");
/// Each kind of listed record (`lists::RECORD_TABLES`): (validator, place in the log's
/// list, big-endian) -> the record.
fn list_table(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

/// The file beside the store it is derived from.
pub const COLD_FILE: &str = "replay-cold.redb";
/// redb's cache for the file: all it may hold in memory, reads and (up to half of it)
/// writes not yet in the file, which are written without fsync (but every
/// `DURABLE_EVERY`th commit). Small, so that it is full early: in a soak a 4 MiB cache
/// was still filling an hour in (heaptrack), and the file's pages are in the OS's
/// page cache anyway.
pub const COLD_CACHE_BYTES: usize = 1024 * 1024;
/// Matches a log holds in memory before they are spilled (those the fold touched last,
/// and open ones, are spilled too: folding a block that names one reads it back).
pub const HOT_MATCHES: usize = 64;
/// Records of one kind a log holds in memory before they are spilled (its last stays).
pub const HOT_RECORDS: usize = 256;
/// One transaction in this many on the file is committed with fsync (`durability`).
const DURABLE_EVERY: u64 = 16;
/// Largest encoded match fold read back (a fold's own writes, bounded the same way).
const MAX_FOLD_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ColdError {
    #[error("the replay's match file {path}: {message}")]
    Engine { path: String, message: String },
}

/// The file matches and records are spilled to, open for this process alone.
pub struct ColdStore {
    db: Arc<Database>,
    path: PathBuf,
    /// The snapshot the last spill made.
    newest: std::sync::Mutex<Option<Arc<ColdSnapshot>>>,
    /// The last key set made.
    sets: std::sync::atomic::AtomicU64,
    /// Transactions begun, for `durability`.
    commits: std::sync::atomic::AtomicU64,
    /// Combines committed: the state's list in the file is the one of this number.
    combines: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for ColdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdStore").field("path", &self.path).finish()
    }
}

/// One committed view of the file: what the folds that hold it read their spilled
/// matches from. A read that fails marks it faulted (the reader then sees fewer
/// matches), and whoever publishes a result made from it must check [`Self::faulted`].
pub struct ColdSnapshot {
    /// redb stops serving reads once its database is dropped: a snapshot keeps it open.
    _db: Arc<Database>,
    by_id: ReadOnlyTable<&'static [u8], &'static [u8]>,
    by_place: ReadOnlyTable<&'static [u8], &'static [u8]>,
    /// One per kind of listed record, by `Record::SLOT`.
    lists: Vec<ReadOnlyTable<&'static [u8], &'static [u8]>>,
    state_list: ReadOnlyTable<u64, &'static [u8]>,
    state_plays: ReadOnlyTable<&'static [u8], &'static [u8]>,
    fault: AtomicBool,
    path: PathBuf,
}

impl std::fmt::Debug for ColdSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdSnapshot").field("path", &self.path).field("faulted", &self.faulted()).finish()
    }
}

fn id_key(validator: &ValidatorKey, id: &MatchId) -> [u8; 64] {
    let mut key = [0; 64];
    key[..32].copy_from_slice(&validator.0);
    key[32..].copy_from_slice(&id.0);
    key
}

fn place_key(validator: &ValidatorKey, height: u64, event_idx: u32) -> [u8; 44] {
    let mut key = [0; 44];
    key[..32].copy_from_slice(&validator.0);
    key[32..40].copy_from_slice(&height.to_be_bytes());
    key[40..].copy_from_slice(&event_idx.to_be_bytes());
    key
}

fn index_key(validator: &ValidatorKey, index: u64) -> [u8; 40] {
    let mut key = [0; 40];
    key[..32].copy_from_slice(&validator.0);
    key[32..].copy_from_slice(&index.to_be_bytes());
    key
}

fn set_key(set: u64, key: &[u8]) -> Vec<u8> {
    let mut out = set.to_be_bytes().to_vec();
    out.extend_from_slice(key);
    out
}

/// Every key of `validator` in a table keyed by validator first.
fn of_validator(validator: &ValidatorKey) -> ([u8; 32], Option<[u8; 32]>) {
    let mut next = validator.0;
    // The next validator key up, if any: the end of this one's range.
    for byte in next.iter_mut().rev() {
        if *byte == u8::MAX {
            *byte = 0;
        } else {
            *byte += 1;
            return (validator.0, Some(next));
        }
    }
    (validator.0, None)
}

impl ColdStore {
    /// Creates the file at `path`, replacing one an earlier run left.
    pub fn create(path: &Path) -> Result<ColdStore, ColdError> {
        ColdStore::with_cache(path, COLD_CACHE_BYTES)
    }

    /// [`Self::create`] with a page cache of `cache_bytes` (a benchmark fills a small one
    /// to measure what grows past it).
    pub fn with_cache(path: &Path, cache_bytes: usize) -> Result<ColdStore, ColdError> {
        let fail = |message: String| ColdError::Engine { path: path.display().to_string(), message };
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(format!("removing the last run's copy: {e}"))),
        }
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .create(path)
            .map_err(|e| fail(redb::Error::from(e).to_string()))?;
        // Every table exists from the start, so any snapshot can open them all.
        let made = (|| -> Result<(), redb::Error> {
            let txn = db.begin_write()?;
            txn.open_table(BY_ID)?;
            txn.open_table(BY_PLACE)?;
            txn.open_table(STATE_LIST)?;
            txn.open_table(KEY_SETS)?;
            txn.open_table(list_table(STATE_PLAYS))?;
            for name in RECORD_TABLES {
                txn.open_table(list_table(name))?;
            }
            txn.commit()?;
            Ok(())
        })();
        made.map_err(|e| fail(e.to_string()))?;
        Ok(ColdStore {
            db: Arc::new(db),
            path: path.to_owned(),
            newest: Default::default(),
            sets: Default::default(),
            commits: Default::default(),
            combines: Default::default(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Moves every match `fold` holds in memory into the file, but the one its log
    /// started last (the next match shares its names), and every listed record but the
    /// last of each kind, when it holds more than `HOT_MATCHES` matches or `HOT_RECORDS`
    /// records of a kind. Returns whether it spilled.
    pub fn spill_if_due(&self, fold: &mut ChainFold) -> Result<bool, ColdError> {
        let records = fold
            .commitments
            .held_in_memory()
            .max(fold.skipped.held_in_memory())
            .max(fold.equivocations.held_in_memory());
        if fold.matches.held_in_memory() <= HOT_MATCHES && records <= HOT_RECORDS {
            return Ok(false);
        }
        self.spill(std::slice::from_mut(fold))?;
        Ok(true)
    }

    /// Moves the matches the folds hold in memory (but each log's last started) and their
    /// listed records (but each log's last of each kind) into the file, in one
    /// transaction; each fold then reads them from the new snapshot.
    pub fn spill(&self, folds: &mut [ChainFold]) -> Result<(), ColdError> {
        let fail = |e: &dyn std::fmt::Display| self.fail("spilling matches", e);
        let mut txn = self.db.begin_write().map_err(|e| fail(&e))?;
        // Derived and deleted at every start: a crash loses nothing the logs do not hold.
        txn.set_durability(self.durability()).map_err(|e| fail(&e))?;
        let mut spilled: Vec<Vec<MatchId>> = Vec::with_capacity(folds.len());
        let mut records_spilled: Vec<(usize, usize, usize)> = Vec::with_capacity(folds.len());
        {
            let mut by_id = txn.open_table(BY_ID).map_err(|e| fail(&e))?;
            let mut by_place = txn.open_table(BY_PLACE).map_err(|e| fail(&e))?;
            for fold in folds.iter() {
                let commitments = write_records(&txn, &fold.validator, &fold.commitments).map_err(|e| fail(&e))?;
                let skips = write_records(&txn, &fold.validator, &fold.skipped).map_err(|e| fail(&e))?;
                let equivocations = write_records(&txn, &fold.validator, &fold.equivocations).map_err(|e| fail(&e))?;
                records_spilled.push((commitments, skips, equivocations));
                let mut ids = Vec::new();
                for (id, m) in fold.matches.in_memory() {
                    if Some(id) == fold.last_started {
                        continue;
                    }
                    let place = place_key(&fold.validator, m.started_height, m.started_event_idx);
                    let mut value = id.0.to_vec();
                    codec::encode_into(&**m, &mut value, "match fold", MAX_FOLD_BYTES).map_err(|e| fail(&e))?;
                    by_id.insert(&id_key(&fold.validator, &id)[..], &place[32..]).map_err(|e| fail(&e))?;
                    by_place.insert(&place[..], &value[..]).map_err(|e| fail(&e))?;
                    ids.push(id);
                }
                spilled.push(ids);
            }
        }
        txn.commit().map_err(|e| fail(&e))?;
        let snapshot = Arc::new(self.snapshot().map_err(|e| fail(&e))?);
        for ((fold, ids), (commitments, skips, equivocations)) in folds.iter_mut().zip(spilled).zip(records_spilled) {
            fold.matches.spilled(&ids, fold.validator, snapshot.clone());
            fold.commitments.spilled(commitments, fold.validator, snapshot.clone());
            fold.skipped.spilled(skips, fold.validator, snapshot.clone());
            fold.equivocations.spilled(equivocations, fold.validator, snapshot.clone());
        }
        *self.newest.lock().unwrap_or_else(|e| e.into_inner()) = Some(snapshot);
        Ok(())
    }

    /// Points every fold that has spilled matches at the newest snapshot. Only this
    /// store's spills write a log's matches, each spill writing those of the folds it is
    /// given: a fold's matches in the newest snapshot are those its own shows.
    pub fn read_newest(&self, folds: &mut [ChainFold]) {
        let Some(newest) = self.newest.lock().unwrap_or_else(|e| e.into_inner()).clone() else { return };
        for fold in folds {
            fold.matches.read_from(&newest);
            fold.commitments.read_from(&newest);
            fold.skipped.read_from(&newest);
            fold.equivocations.read_from(&newest);
        }
    }

    /// A transaction for a combine: its working sets (`bag::Bag`) and the state's new list
    /// of matches (`append_state_matches`), with the last list gone. Written without fsync,
    /// as spills are.
    pub(super) fn begin_combine(&self) -> Result<WriteTransaction, ColdError> {
        let mut txn = self.db.begin_write().map_err(|e| self.fail("combining", e))?;
        txn.set_durability(self.durability()).map_err(|e| self.fail("combining", e))?;
        txn.delete_table(STATE_LIST).map_err(|e| self.fail("combining", e))?;
        txn.open_table(STATE_LIST).map_err(|e| self.fail("combining", e))?;
        txn.delete_table(list_table(STATE_PLAYS)).map_err(|e| self.fail("combining", e))?;
        txn.open_table(list_table(STATE_PLAYS)).map_err(|e| self.fail("combining", e))?;
        Ok(txn)
    }

    /// Writes `matches` at the end of the state's list in `txn`, the first at place `at`.
    pub(super) fn append_state_matches(
        &self,
        txn: &WriteTransaction,
        at: u64,
        matches: &[NetworkMatch],
    ) -> Result<(), ColdError> {
        let mut table = txn.open_table(STATE_LIST).map_err(|e| self.fail("writing the state", e))?;
        for (place, m) in (at..).zip(matches) {
            let value =
                codec::encode(m, "network match", MAX_FOLD_BYTES).map_err(|e| self.fail("writing the state", e))?;
            table.insert(place, &value[..]).map_err(|e| self.fail("writing the state", e))?;
        }
        Ok(())
    }

    /// Commits a combine's `txn` without its working sets (the tables named `scratch`):
    /// the snapshot it returns is the one its state's list reads from, and the newest; with it,
    /// the combine's number (`newest_for`).
    pub(super) fn commit_combine(
        &self,
        txn: WriteTransaction,
        scratch: &[&str],
    ) -> Result<(Arc<ColdSnapshot>, u64), ColdError> {
        for name in scratch {
            txn.delete_table(list_table(name)).map_err(|e| self.fail("combining", e))?;
        }
        txn.commit().map_err(|e| self.fail("combining", e))?;
        let combine = self.combines.fetch_add(1, Ordering::Relaxed) + 1;
        let snapshot = Arc::new(self.snapshot().map_err(|e| self.fail("combining", e))?);
        *self.newest.lock().unwrap_or_else(|e| e.into_inner()) = Some(snapshot.clone());
        Ok((snapshot, combine))
    }

    /// The newest snapshot, if the state's list it holds is still that of combine number
    /// `combine`: a state recounted from it may read its list there, and no older
    /// snapshot need be kept for it.
    pub(super) fn newest_for(&self, combine: u64) -> Option<Arc<ColdSnapshot>> {
        let newest = self.newest.lock().unwrap_or_else(|e| e.into_inner()).clone();
        newest.filter(|_| self.combines.load(Ordering::Relaxed) == combine)
    }

    /// Without fsync, but every `DURABLE_EVERY`th: the file is derived, so a crash loses
    /// nothing, but redb tracks in memory every page that commits without fsync wrote
    /// and freed until one with fsync, which a validator running for weeks must not grow.
    fn durability(&self) -> redb::Durability {
        match self.commits.fetch_add(1, Ordering::Relaxed) % DURABLE_EVERY {
            0 => redb::Durability::Immediate,
            _ => redb::Durability::None,
        }
    }

    /// A new, empty key set's number.
    pub(super) fn new_set(&self) -> u64 {
        self.sets.fetch_add(1, Ordering::Relaxed)
    }

    /// Adds `keys` to set `set`.
    pub(super) fn add_keys<'k>(&self, set: u64, keys: impl Iterator<Item = &'k [u8]>) -> Result<(), ColdError> {
        let mut txn = self.db.begin_write().map_err(|e| self.fail("adding to a set", e))?;
        txn.set_durability(self.durability()).map_err(|e| self.fail("adding to a set", e))?;
        {
            let mut table = txn.open_table(KEY_SETS).map_err(|e| self.fail("adding to a set", e))?;
            for key in keys {
                table.insert(&set_key(set, key)[..], ()).map_err(|e| self.fail("adding to a set", e))?;
            }
        }
        txn.commit().map_err(|e| self.fail("adding to a set", e))
    }

    /// Whether set `set` holds `key`, as the file stands now.
    pub(super) fn has_key(&self, set: u64, key: &[u8]) -> Result<bool, ColdError> {
        let txn = self.db.begin_read().map_err(|e| self.fail("reading a set", e))?;
        let table = txn.open_table(KEY_SETS).map_err(|e| self.fail("reading a set", e))?;
        let found = table.get(&set_key(set, key)[..]).map_err(|e| self.fail("reading a set", e))?;
        Ok(found.is_some())
    }

    fn fail(&self, doing: &str, e: impl std::fmt::Display) -> ColdError {
        ColdError::Engine { path: self.path.display().to_string(), message: format!("{doing}: {e}") }
    }

    fn snapshot(&self) -> Result<ColdSnapshot, redb::Error> {
        let txn = self.db.begin_read()?;
        Ok(ColdSnapshot {
            _db: self.db.clone(),
            by_id: txn.open_table(BY_ID)?,
            by_place: txn.open_table(BY_PLACE)?,
            lists: RECORD_TABLES.iter().map(|name| txn.open_table(list_table(name))).collect::<Result<_, _>>()?,
            state_list: txn.open_table(STATE_LIST)?,
            state_plays: txn.open_table(list_table(STATE_PLAYS))?,
            fault: AtomicBool::new(false),
            path: self.path.clone(),
        })
    }
}

/// Writes `list`'s records held in memory but its last; returns how many.
fn write_records<T: Record>(
    txn: &redb::WriteTransaction,
    validator: &ValidatorKey,
    list: &RecordList<T>,
) -> Result<usize, String> {
    let mut table = txn.open_table(list_table(T::TABLE)).map_err(|e| e.to_string())?;
    let mut count = 0;
    for (place, record) in list.to_spill() {
        let value = codec::encode(record, "listed record", MAX_FOLD_BYTES).map_err(|e| e.to_string())?;
        table.insert(&index_key(validator, place)[..], &value[..]).map_err(|e| e.to_string())?;
        count += 1;
    }
    Ok(count)
}

impl Drop for ColdStore {
    /// The file is of no use to anyone once its process is done with it. Snapshots still
    /// held keep reading their open file; removal only unlinks it.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl ColdSnapshot {
    /// Whether a read from this snapshot failed: results made from it are incomplete.
    pub fn faulted(&self) -> bool {
        self.fault.load(Ordering::Relaxed)
    }

    fn fault<T>(&self, why: impl std::fmt::Display) -> Option<T> {
        if !self.fault.swap(true, Ordering::Relaxed) {
            tracing::error!(target: "af::replay", event = "cold_read_failed", path = %self.path.display(), "{why}");
        }
        None
    }

    pub(super) fn contains(&self, validator: &ValidatorKey, id: &MatchId) -> bool {
        match self.by_id.get(&id_key(validator, id)[..]) {
            Ok(found) => found.is_some(),
            Err(e) => self.fault(e).unwrap_or(false),
        }
    }

    pub(super) fn get(&self, validator: &ValidatorKey, id: &MatchId) -> Option<MatchFold> {
        let place = match self.by_id.get(&id_key(validator, id)[..]) {
            Ok(found) => found?.value().to_vec(),
            Err(e) => return self.fault(e),
        };
        let mut key = validator.0.to_vec();
        key.extend_from_slice(&place);
        match self.by_place.get(&key[..]) {
            Ok(Some(value)) => self.decode(value.value()).map(|(_, m)| m),
            Ok(None) => self.fault(format!("match {id} is indexed but not stored")),
            Err(e) => self.fault(e),
        }
    }

    fn decode(&self, value: &[u8]) -> Option<(MatchId, MatchFold)> {
        let Some((id, encoded)) = value.split_first_chunk::<32>() else {
            return self.fault("a stored match is shorter than its id");
        };
        match codec::decode_canonical(encoded, "match fold", MAX_FOLD_BYTES) {
            Ok(m) => Some((crate::bytes::Hash32(*id), m)),
            Err(e) => self.fault(e),
        }
    }

    /// `validator`'s spilled match ids, in id order.
    pub(super) fn ids(&self, validator: &ValidatorKey) -> impl Iterator<Item = MatchId> + '_ {
        self.scan(&self.by_id, validator, |key, _| key.last_chunk::<32>().map(|id| crate::bytes::Hash32(*id)))
    }

    /// Every entry of `validator` in `table` (keyed by validator first), in key order,
    /// through `read` (key, value); the first failed read or decode ends it, faulted.
    fn scan<'s, T: 's>(
        &'s self,
        table: &'s ReadOnlyTable<&'static [u8], &'static [u8]>,
        validator: &ValidatorKey,
        read: impl Fn(&[u8], &[u8]) -> Option<T> + 's,
    ) -> impl Iterator<Item = T> + 's {
        let (from, to) = of_validator(validator);
        let range = match to {
            Some(to) => table.range::<&[u8]>(&from[..]..&to[..]),
            None => table.range::<&[u8]>(&from[..]..),
        };
        let range = range.map_err(|e| self.fault::<()>(e)).ok();
        range.into_iter().flatten().map_while(move |entry| match entry {
            Ok((key, value)) => read(key.value(), value.value()),
            Err(e) => self.fault(e),
        })
    }

    /// The table of `T` records.
    fn list<T: Record>(&self) -> &ReadOnlyTable<&'static [u8], &'static [u8]> {
        &self.lists[T::SLOT]
    }

    /// `validator`'s `T` record at `index` of its list.
    pub(super) fn record<T: Record>(&self, validator: &ValidatorKey, index: u64) -> Option<T> {
        match self.list::<T>().get(&index_key(validator, index)[..]) {
            Ok(Some(value)) => self.decode_record(value.value()),
            Ok(None) => self.fault(format!("{} record {index} is not stored", T::TABLE)),
            Err(e) => self.fault(e),
        }
    }

    fn decode_record<T: Record>(&self, value: &[u8]) -> Option<T> {
        codec::decode_canonical(value, "listed record", MAX_FOLD_BYTES).map_err(|e| self.fault::<()>(e)).ok()
    }

    /// `validator`'s spilled `T` records, in log order.
    pub(super) fn records<T: Record>(&self, validator: &ValidatorKey) -> impl Iterator<Item = T> + '_ {
        self.scan(self.list::<T>(), validator, |_, value| self.decode_record(value))
    }

    /// The state's list of matches from place `from` on, in order.
    pub(super) fn state_matches(&self, from: u64) -> impl Iterator<Item = NetworkMatch> + '_ {
        let range = self.state_list.range(from..).map_err(|e| self.fault::<()>(e)).ok();
        range.into_iter().flatten().map_while(move |entry| match entry {
            Ok((_, value)) => codec::decode_canonical(value.value(), "network match", MAX_FOLD_BYTES)
                .map_err(|e| self.fault::<()>(e))
                .ok(),
            Err(e) => self.fault(e),
        })
    }

    /// The (validator, match id) of every play whose key starts with `pair` (a pair's
    /// `SortKey` bytes), in key order.
    pub(super) fn state_plays(&self, pair: &[u8]) -> Vec<(ValidatorKey, MatchId)> {
        let mut end = pair.to_vec();
        // A pair's bytes end in the name terminator 0 0: one past it bounds the range.
        if let Some(last) = end.last_mut() {
            *last = last.saturating_add(1);
        }
        let range = self.state_plays.range::<&[u8]>(pair..&end[..]).map_err(|e| self.fault::<()>(e)).ok();
        range
            .into_iter()
            .flatten()
            .map_while(|entry| match entry {
                Ok((key, _)) => match key.value().last_chunk::<64>() {
                    Some(tail) => {
                        let (validator, id) = tail.split_at(32);
                        Some((ValidatorKey(validator.try_into().ok()?), crate::bytes::Hash32(id.try_into().ok()?)))
                    }
                    None => self.fault("a play's key is shorter than its validator and id"),
                },
                Err(e) => self.fault(e),
            })
            .collect()
    }

    /// Every play of the state's combine, in key order: entries as its bag wrote them
    /// (`bag::Bag`), decoded as `T`.
    pub(super) fn state_play_entries<T: serde::de::DeserializeOwned + serde::Serialize>(
        &self,
    ) -> impl Iterator<Item = T> + '_ {
        let range = redb::ReadableTable::iter(&self.state_plays).map_err(|e| self.fault::<()>(e)).ok();
        range.into_iter().flatten().map_while(move |entry| match entry {
            Ok((_, value)) => codec::decode_canonical(value.value(), "combine entry", super::bag::MAX_ENTRY_BYTES)
                .map_err(|e| self.fault::<()>(e))
                .ok(),
            Err(e) => self.fault(e),
        })
    }

    /// The error a reader gives once this snapshot is faulted.
    pub(super) fn faulted_error(&self) -> ColdError {
        ColdError::Engine { path: self.path.display().to_string(), message: "a read failed (logged)".into() }
    }

    /// `validator`'s spilled matches in log order.
    pub(super) fn in_log_order(&self, validator: &ValidatorKey) -> impl Iterator<Item = (MatchId, MatchFold)> + '_ {
        self.scan(&self.by_place, validator, |_, value| self.decode(value))
    }
}

#[cfg(test)]
pub(super) mod tests_support {
    use super::*;
    use crate::bytes::Hash32;
    use crate::ledger::event::MinerRef;
    use crate::replay::fold::DecidedFold;

    pub fn played(i: u64) -> MatchFold {
        let miner =
            |hotkey: String| MinerRef { hotkey: hotkey.into(), uid: i as u16, model: format!("model{}", i % 3).into() };
        MatchFold {
            contender: miner(format!("5Contender{i}")),
            champion: miner("5Champion".into()),
            envs: Vec::new().into(),
            rule: "score".into(),
            ratio_to_beat_ppm: 500_000,
            started_height: i / 2,
            started_event_idx: (i % 2) as u32,
            started_time_ms: 1_000 * i,
            chain_block: 10 * i,
            chain_block_hash: Hash32([1; 32]),
            env_folds: Default::default(),
            decided: (!i.is_multiple_of(5)).then(|| DecidedFold {
                contender_won: i.is_multiple_of(3),
                new_ratio_to_beat_ppm: 600_000,
                win_rates_ppm: vec![700_000],
                height: i / 2 + 1,
                time_ms: 1_000 * i + 500,
            }),
            n_transcripts: i,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::played;
    use super::*;
    use crate::bytes::Hash32;

    /// A fold of `n` matches whose ids do not follow their log order.
    fn fold_of(n: u64) -> ChainFold {
        let mut fold = ChainFold::new(ValidatorKey([7; 32]));
        for i in 0..n {
            let id = Hash32(*blake3::hash(&i.to_le_bytes()).as_bytes());
            fold.matches.insert(id, played(i));
            fold.last_started = Some(id);
        }
        fold
    }

    fn listed(fold: &ChainFold) -> (Vec<MatchId>, Vec<MatchId>) {
        (fold.matches.ids().collect(), fold.matches.in_log_order().map(|(id, _)| id).collect())
    }

    #[test]
    fn spilled_matches_read_back_as_the_same_table_in_both_orders_and_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(COLD_FILE), b"a file the last run left").unwrap();
        let cold = ColdStore::create(&dir.path().join(COLD_FILE)).unwrap();
        let plain = fold_of(100);
        let mut fold = plain.clone();
        assert!(cold.spill_if_due(&mut fold).unwrap());
        assert_eq!(fold.matches.held_in_memory(), 1, "only the match started last stays");
        assert_eq!(fold.matches.len(), 100);
        assert_eq!(fold, plain);
        assert_eq!(listed(&fold), listed(&plain));
        let (ids, _) = listed(&plain);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for id in &ids {
            assert_eq!(fold.matches.get(id), plain.matches.get(id));
        }
        assert!(!fold.matches.contains(&Hash32([9; 32])));
        let encoded = |f: &ChainFold| codec::encode(f, "fold", u64::MAX).unwrap();
        assert_eq!(encoded(&fold), encoded(&plain), "a snapshot of spilled folds has the same bytes");
        for block in [0, 5, 10, 455, 2_000] {
            assert_eq!(fold.matches.until_block(block), plain.matches.until_block(block));
            let n = (0..100).filter(|i| i * 10 <= block).count();
            assert_eq!(fold.matches.until_block(block).len(), n);
        }
        assert!(!fold.matches.faulted());
        drop(cold);
        assert!(!dir.path().join(COLD_FILE).exists(), "the file goes with its process");
        assert_eq!(fold, plain, "tables made from it still read it");
    }

    #[test]
    fn a_spilled_match_that_changes_is_read_back_shadows_its_copy_and_is_spilled_again() {
        let dir = tempfile::tempdir().unwrap();
        let cold = ColdStore::create(&dir.path().join(COLD_FILE)).unwrap();
        let mut plain = fold_of(80);
        let mut fold = plain.clone();
        cold.spill(std::slice::from_mut(&mut fold)).unwrap();
        let (ids, _) = listed(&plain);
        let before = fold.clone();
        let original = plain.matches.get(&ids[3]).unwrap().n_transcripts;
        for table in [&mut fold, &mut plain] {
            table.matches.update(&ids[3]).unwrap().n_transcripts = 1_000;
        }
        assert_eq!(fold.matches.held_in_memory(), 2);
        assert_eq!(fold.matches.len(), 80, "the copy read back is not counted twice");
        assert_eq!(fold, plain);
        assert_eq!(fold.matches.get(&ids[3]).unwrap().n_transcripts, 1_000);
        assert_ne!(before, fold, "the earlier table still sees the match as it was spilled");
        assert_eq!(before.matches.get(&ids[3]).unwrap().n_transcripts, original);
        // A new match, then everything spilled again: counted once each.
        let new_id = Hash32([3; 32]);
        for table in [&mut fold, &mut plain] {
            table.matches.insert(new_id, played(500));
        }
        cold.spill(std::slice::from_mut(&mut fold)).unwrap();
        assert_eq!(fold.matches.len(), 81);
        assert_eq!(fold.matches.held_in_memory(), 1);
        assert_eq!(fold, plain);
        assert_eq!(listed(&fold), listed(&plain));
        assert_ne!(before, fold);
    }

    #[test]
    fn a_stored_match_that_does_not_decode_faults_the_snapshot_and_is_never_passed_off_as_whole() {
        let dir = tempfile::tempdir().unwrap();
        let cold = ColdStore::create(&dir.path().join(COLD_FILE)).unwrap();
        let mut fold = fold_of(70);
        cold.spill(std::slice::from_mut(&mut fold)).unwrap();
        let (_, in_order) = listed(&fold);
        let m = fold.matches.get(&in_order[10]).unwrap();
        let txn = cold.db.begin_write().unwrap();
        {
            let mut by_place = txn.open_table(BY_PLACE).unwrap();
            let mut damaged = in_order[10].0.to_vec();
            damaged.extend_from_slice(b"not a fold");
            let key = place_key(&fold.validator, m.started_height, m.started_event_idx);
            by_place.insert(&key[..], &damaged[..]).unwrap();
        }
        txn.commit().unwrap();
        assert!(!fold.matches.faulted(), "the fold's snapshot predates the damage");
        cold.spill(std::slice::from_mut(&mut fold)).unwrap();
        assert!(fold.matches.get(&in_order[10]).is_none());
        assert!(fold.matches.faulted());
        assert!(fold.matches.iter().count() < fold.matches.len());
    }

    /// A combine over spilled matches writes the state's list to the file, where it
    /// reads back as the list a combine in memory holds; a damaged entry faults the list,
    /// and a state holding it has no hash.
    #[test]
    fn the_state_list_in_the_file_reads_back_as_the_held_one_and_a_damaged_entry_faults_it() {
        use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
        use crate::replay::network::{combine, combine_stored};
        use crate::replay::network_list::NetworkMatches;
        let dir = tempfile::tempdir().unwrap();
        let cold = ColdStore::create(&dir.path().join(COLD_FILE)).unwrap();
        let held = combine(&[fold_of(700)], &DEFAULT_RATIO_PARAMS);
        let mut fold = fold_of(700);
        cold.spill_if_due(&mut fold).unwrap();
        let stored = combine_stored(std::slice::from_ref(&fold), &DEFAULT_RATIO_PARAMS, &cold).unwrap();
        assert_eq!(stored.matches.held_in_memory(), 0);
        assert_eq!(stored.matches.len(), 700);
        assert_eq!(stored, held);
        assert_eq!(crate::replay::state_hash(&stored).unwrap(), crate::replay::state_hash(&held).unwrap());
        // The combine's scratch tables are not left in the file.
        let txn = cold.db.begin_read().unwrap();
        assert!(txn.list_tables().unwrap().all(|t| !redb::TableHandle::name(&t).starts_with("combine_")));

        let txn = cold.db.begin_write().unwrap();
        txn.open_table(STATE_LIST).unwrap().insert(300, &b"not a match"[..]).unwrap();
        txn.commit().unwrap();
        assert!(!stored.matches.faulted(), "the state's snapshot predates the damage");
        let mut damaged = stored.clone();
        damaged.matches = NetworkMatches::stored(Arc::new(cold.snapshot().unwrap()), 700, 1);
        assert_eq!(damaged.matches.iter().count(), 300);
        assert!(damaged.matches.faulted());
        assert!(crate::replay::state_hash(&damaged).is_err());
        assert_ne!(damaged, held);
    }
}

#[cfg(test)]
mod records {
    use super::*;
    use crate::bytes::Hash32;
    use crate::ledger::event::{ChainCommitment, SkipReason};
    use crate::replay::fold::SkipFold;

    fn skip(i: u64) -> SkipFold {
        SkipFold {
            height: i,
            hotkey: format!("5Sybil{i}"),
            uid: i as u16,
            model: "perfect".into(),
            revision: "r1".into(),
            commit_block: 10 * i,
            reason: SkipReason::Duplicate,
            kept_by: "5Kept".into(),
            kept_block: 1,
        }
    }

    fn record(i: u64) -> ChainCommitment {
        ChainCommitment {
            netuid: 7,
            chain_block: 100 + 12 * i,
            committed_height: 3 * i,
            committed_hash: Hash32([i as u8; 32]),
        }
    }

    fn equivocation(i: u64) -> crate::replay::fold::EquivocationFound {
        crate::replay::fold::EquivocationFound {
            accused: ValidatorKey([i as u8; 32]),
            height: i,
            hash_a: Hash32([1; 32]),
            hash_b: Hash32([2; 32]),
            recorded_at: (i, 0),
        }
    }

    #[test]
    fn listed_records_spill_alone_and_read_back_in_order_with_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let cold = ColdStore::create(&dir.path().join(COLD_FILE)).unwrap();
        let mut fold = ChainFold::new(ValidatorKey([9; 32]));
        // Another log's records in the same file, keyed apart.
        let mut other = ChainFold::new(ValidatorKey([8; 32]));
        let mut plain = fold.clone();
        for i in 0..600 {
            for f in [&mut fold, &mut plain, &mut other] {
                f.commitments.push(record(i));
                if i % 2 == 0 {
                    f.skipped.push(skip(i));
                }
                f.equivocations.push(equivocation(i));
            }
            // An idle validator's log: records and no matches, spilled all the same.
            cold.spill_if_due(&mut fold).unwrap();
        }
        cold.spill(std::slice::from_mut(&mut other)).unwrap();
        assert!(fold.commitments.held_in_memory() <= HOT_RECORDS, "{}", fold.commitments.held_in_memory());
        assert!(fold.commitments.held_in_memory() < 600);
        cold.spill(std::slice::from_mut(&mut fold)).unwrap();
        assert_eq!(fold.commitments.held_in_memory(), 1, "the last stays");
        assert_eq!((fold.skipped.held_in_memory(), fold.skipped.len()), (1, 300));
        assert!(fold.skipped.iter().eq((0..600).step_by(2).map(skip)));
        assert_eq!(fold.skipped.last(), Some(skip(598)));
        assert_eq!((fold.equivocations.held_in_memory(), fold.equivocations.len()), (1, 600));
        assert!(fold.equivocations.iter().eq((0..600).map(equivocation)));
        assert_eq!(fold.commitments.len(), 600);
        assert_eq!(fold, plain);
        assert_eq!(fold.commitments.last(), Some(record(599)));
        assert!(fold.commitments.iter().eq((0..600).map(record)));
        let found = fold.commitments.iter().find(|c| c.committed_height >= 1_000);
        assert_eq!(found, Some(record(334)));
        let encoded = |f: &ChainFold| codec::encode(f, "fold", u64::MAX).unwrap();
        assert_eq!(encoded(&fold), encoded(&plain), "a snapshot of spilled records has the same bytes");
        // More records after a spill follow the spilled ones.
        for f in [&mut fold, &mut plain] {
            f.commitments.push(record(600));
        }
        assert_eq!(fold, plain);
        assert!(!fold.commitments.faulted() && !fold.skipped.faulted() && !fold.equivocations.faulted());
    }
}

#[cfg(test)]
mod growth {
    use super::tests_support::played;
    use super::*;

    /// A validator spills every few matches for weeks, each spill a commit with no
    /// fsync: the pages each commit frees must be reused, or the file would grow with
    /// the commits rather than with the matches.
    #[test]
    fn a_match_file_written_by_thousands_of_spills_stays_near_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(COLD_FILE);
        let cold = ColdStore::create(&path).unwrap();
        let mut fold = ChainFold::new(ValidatorKey([7; 32]));
        let mut held_back = None;
        for i in 0..3_000u64 {
            let id = crate::bytes::Hash32(*blake3::hash(&i.to_le_bytes()).as_bytes());
            fold.matches.insert(id, played(i));
            cold.spill(std::slice::from_mut(&mut fold)).unwrap();
            // LatestReplay holds the last replay (and its snapshot) while the next spills.
            held_back = Some(fold.clone());
        }
        assert_eq!(fold.matches.len(), 3_000);
        assert_eq!(held_back.map(|f| f.matches.len()), Some(3_000));
        // Each match's encoding, its two keys and its place.
        let data: u64 = fold.matches.values().map(|m| codec::encoded_len(&*m) + 32 + 44 + 64 + 12).sum();
        let file = std::fs::metadata(&path).unwrap().len();
        assert!(file <= 3 * data + (1 << 20), "{file} bytes of file for {data} bytes of data");
    }
}
