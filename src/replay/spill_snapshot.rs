//! One committed view of the replay's spill file, as the folds and states made from it
//! read it: every read returns its error (a failed one also faults the snapshot, for the
//! fold's own check), so a reader faces the file's faults by type.

use super::records::{MatchFold, NetworkMatch};
use super::spill_layout::{
    id_key, index_key, list_table, of_validator, Record, SpillFileError, BY_ID, BY_PLACE, MAX_ENTRY_BYTES,
    MAX_FOLD_BYTES, RECORD_TABLES, STATE_LIST, STATE_PLAYS,
};
use crate::bytes::{MatchId, ValidatorKey};
use crate::ledger::codec;
use redb::{Database, ReadOnlyTable, ReadableDatabase};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One committed view of the file: what the folds that hold it read their spilled
/// matches from. Every read returns its error; a failed one also marks the snapshot
/// faulted, for the fold's own steps (`replay` asks before handing a replay out).
pub struct SpillSnapshot {
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

impl std::fmt::Debug for SpillSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillSnapshot").field("path", &self.path).field("faulted", &self.faulted()).finish()
    }
}

/// `reads`, ending after the first failed one: a reader never sees items past a gap.
pub(super) fn until_failed<T>(
    reads: impl Iterator<Item = Result<T, SpillFileError>>,
) -> impl Iterator<Item = Result<T, SpillFileError>> {
    let mut ended = false;
    reads.map_while(move |item| {
        let last = ended;
        ended |= item.is_err();
        (!last).then_some(item)
    })
}

/// `reads` as a debug list, a failed read shown as its error.
pub(super) fn debug_reads<T: std::fmt::Debug>(
    f: &mut std::fmt::Formatter<'_>,
    reads: impl Iterator<Item = Result<T, SpillFileError>>,
) -> std::fmt::Result {
    let mut list = f.debug_list();
    for read in reads {
        match read {
            Ok(item) => list.entry(&item),
            Err(e) => list.entry(&e.to_string()),
        };
    }
    list.finish()
}

/// Whether two reads hand back the same items, each read whole.
pub(super) fn same_reads<T: PartialEq>(
    mut a: impl Iterator<Item = Result<T, SpillFileError>>,
    mut b: impl Iterator<Item = Result<T, SpillFileError>>,
) -> bool {
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(Ok(x)), Some(Ok(y))) if x == y => continue,
            _ => return false,
        }
    }
}

impl SpillSnapshot {
    /// The file as `db`'s last commit left it.
    pub(super) fn open(db: &Arc<Database>, path: &Path) -> Result<SpillSnapshot, redb::Error> {
        let txn = db.begin_read()?;
        Ok(SpillSnapshot {
            _db: db.clone(),
            by_id: txn.open_table(BY_ID)?,
            by_place: txn.open_table(BY_PLACE)?,
            lists: RECORD_TABLES.iter().map(|name| txn.open_table(list_table(name))).collect::<Result<_, _>>()?,
            state_list: txn.open_table(STATE_LIST)?,
            state_plays: txn.open_table(list_table(STATE_PLAYS))?,
            fault: AtomicBool::new(false),
            path: path.to_path_buf(),
        })
    }

    /// The file this snapshot reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a read from this snapshot failed. Readers get the error itself; the flag
    /// is for the fold, whose steps cannot stop on one, and which asks it when done.
    pub(super) fn faulted(&self) -> bool {
        self.fault.load(Ordering::Relaxed)
    }

    /// The error of a failed read, logged once per snapshot, which it marks faulted.
    pub(super) fn failed(&self, why: impl std::fmt::Display) -> SpillFileError {
        if !self.fault.swap(true, Ordering::Relaxed) {
            tracing::error!(target: "af::replay", event = "cold_read_failed", path = %self.path.display(), "{why}");
        }
        SpillFileError::Engine { path: self.path.display().to_string(), message: format!("a read failed: {why}") }
    }

    pub(super) fn contains(&self, validator: &ValidatorKey, id: &MatchId) -> Result<bool, SpillFileError> {
        self.by_id.get(&id_key(validator, id)[..]).map(|found| found.is_some()).map_err(|e| self.failed(e))
    }

    pub(super) fn get(&self, validator: &ValidatorKey, id: &MatchId) -> Result<Option<MatchFold>, SpillFileError> {
        let place = match self.by_id.get(&id_key(validator, id)[..]).map_err(|e| self.failed(e))? {
            Some(found) => found.value().to_vec(),
            None => return Ok(None),
        };
        let mut key = validator.0.to_vec();
        key.extend_from_slice(&place);
        match self.by_place.get(&key[..]).map_err(|e| self.failed(e))? {
            Some(value) => self.decode(value.value()).map(|(_, m)| Some(m)),
            None => Err(self.failed(format!("match {id} is indexed but not stored"))),
        }
    }

    fn decode(&self, value: &[u8]) -> Result<(MatchId, MatchFold), SpillFileError> {
        let Some((id, encoded)) = value.split_first_chunk::<32>() else {
            return Err(self.failed("a stored match is shorter than its id"));
        };
        let m = codec::decode_canonical(encoded, "match fold", MAX_FOLD_BYTES).map_err(|e| self.failed(e))?;
        Ok((crate::bytes::Hash32(*id), m))
    }

    /// `validator`'s spilled match ids, in id order.
    pub(super) fn ids(&self, validator: &ValidatorKey) -> impl Iterator<Item = Result<MatchId, SpillFileError>> + '_ {
        self.scan(&self.by_id, validator, |key, _| match key.last_chunk::<32>() {
            Some(id) => Ok(crate::bytes::Hash32(*id)),
            None => Err(self.failed("a stored match id is short")),
        })
    }

    /// Every entry of `validator` in `table` (keyed by validator first), in key order,
    /// through `read` (key, value); the first failed read or decode is the last item.
    fn scan<'s, T: 's>(
        &'s self,
        table: &'s ReadOnlyTable<&'static [u8], &'static [u8]>,
        validator: &ValidatorKey,
        read: impl Fn(&[u8], &[u8]) -> Result<T, SpillFileError> + 's,
    ) -> impl Iterator<Item = Result<T, SpillFileError>> + 's {
        let (from, to) = of_validator(validator);
        let range = match to {
            Some(to) => table.range::<&[u8]>(&from[..]..&to[..]),
            None => table.range::<&[u8]>(&from[..]..),
        };
        self.entries(range, move |key, value| read(key.value(), value.value()))
    }

    /// The entries of a table's `range`, each through `read`, ending after the first error.
    fn entries<'s, K: redb::Key + 's, V: redb::Value + 's, T: 's>(
        &'s self,
        range: Result<redb::Range<'s, K, V>, redb::StorageError>,
        read: impl Fn(redb::AccessGuard<'_, K>, redb::AccessGuard<'_, V>) -> Result<T, SpillFileError> + 's,
    ) -> impl Iterator<Item = Result<T, SpillFileError>> + 's {
        let (range, opened) = match range {
            Ok(range) => (Some(range), None),
            Err(e) => (None, Some(Err(self.failed(e)))),
        };
        let read = range.into_iter().flatten().map(move |entry| match entry {
            Ok((key, value)) => read(key, value),
            Err(e) => Err(self.failed(e)),
        });
        until_failed(opened.into_iter().chain(read))
    }

    /// The table of `T` records.
    fn list<T: Record>(&self) -> &ReadOnlyTable<&'static [u8], &'static [u8]> {
        &self.lists[T::SLOT]
    }

    /// `validator`'s `T` record at `index` of its list.
    pub(super) fn record<T: Record>(&self, validator: &ValidatorKey, index: u64) -> Result<T, SpillFileError> {
        match self.list::<T>().get(&index_key(validator, index)[..]).map_err(|e| self.failed(e))? {
            Some(value) => self.decode_record(value.value()),
            None => Err(self.failed(format!("{} record {index} is not stored", T::TABLE))),
        }
    }

    fn decode_record<T: Record>(&self, value: &[u8]) -> Result<T, SpillFileError> {
        codec::decode_canonical(value, "listed record", MAX_FOLD_BYTES).map_err(|e| self.failed(e))
    }

    /// How many `T` records of `validator` the snapshot holds (keys only, nothing decoded).
    pub(super) fn n_records<T: Record>(&self, validator: &ValidatorKey) -> Result<usize, SpillFileError> {
        self.scan(self.list::<T>(), validator, |_, _| Ok(())).try_fold(0, |n, read| read.map(|()| n + 1))
    }

    /// `validator`'s spilled `T` records, in log order.
    pub(super) fn records<T: Record>(
        &self,
        validator: &ValidatorKey,
    ) -> impl Iterator<Item = Result<T, SpillFileError>> + '_ {
        self.scan(self.list::<T>(), validator, |_, value| self.decode_record(value))
    }

    /// The state's list of matches from place `from` on, in order.
    pub(super) fn state_matches(&self, from: u64) -> impl Iterator<Item = Result<NetworkMatch, SpillFileError>> + '_ {
        self.entries(self.state_list.range(from..), |_, value| {
            codec::decode_canonical(value.value(), "network match", MAX_FOLD_BYTES).map_err(|e| self.failed(e))
        })
    }

    /// The (validator, match id) of every play whose key starts with `pair` (a pair's
    /// `SortKey` bytes), in key order.
    pub(super) fn state_plays(&self, pair: &[u8]) -> Result<Vec<(ValidatorKey, MatchId)>, SpillFileError> {
        let mut end = pair.to_vec();
        // A pair's bytes end in the name terminator 0 0: one past it bounds the range.
        if let Some(last) = end.last_mut() {
            *last = last.saturating_add(1);
        }
        let range = self.state_plays.range::<&[u8]>(pair..&end[..]);
        self.entries(range, |key, _| match key.value().last_chunk::<64>() {
            Some(tail) => {
                let (validator, id) = tail.split_at(32);
                let validator = ValidatorKey(validator.try_into().expect("32 of 64 bytes"));
                Ok((validator, crate::bytes::Hash32(id.try_into().expect("32 of 64 bytes"))))
            }
            None => Err(self.failed("a play's key is shorter than its validator and id")),
        })
        .collect()
    }

    /// Every play of the state's combine, in key order: entries as its bag wrote them
    /// (`sorted_scratch::Bag`), decoded as `T`.
    pub(super) fn state_play_entries<'s, T: DeserializeOwned + Serialize + 's>(
        &'s self,
    ) -> impl Iterator<Item = Result<T, SpillFileError>> + 's {
        self.entries(redb::ReadableTable::iter(&self.state_plays), |_, value| {
            codec::decode_canonical(value.value(), "combine entry", MAX_ENTRY_BYTES).map_err(|e| self.failed(e))
        })
    }

    /// `validator`'s spilled matches in log order.
    pub(super) fn in_log_order(
        &self,
        validator: &ValidatorKey,
    ) -> impl Iterator<Item = Result<(MatchId, MatchFold), SpillFileError>> + '_ {
        self.scan(&self.by_place, validator, |_, value| self.decode(value))
    }
}
