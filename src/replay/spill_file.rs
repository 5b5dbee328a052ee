//! The replay's file: where a replay keeps what it derives from the logs past what its
//! cache holds (match folds and listed records past a few per log, the sets a validator
//! keeps of its own log, the combine's working sets, the network state's matches and its
//! plays by pair). Every replay has one: a validator's beside its store with a small
//! cache, a one-shot audit's in the temporary directory with a large one ([`CacheSize`]),
//! so the same code runs in both and only the cache size differs. The file is derived
//! (made afresh by every process, never read by another) and read through snapshots, so a
//! replay that readers still hold keeps seeing exactly the matches it was combined from
//! while the next one spills more (`spill_snapshot`). Its tables are `spill_layout`'s.

use super::records::{MatchFold, NetworkMatch};
use super::spill_layout::{
    id_key, index_key, list_table, of_validator, place_key, BY_ID, BY_PLACE, MAX_FOLD_BYTES, STATE_LIST, STATE_PLAYS,
};
pub use super::spill_layout::{Record, SpillFileError, RECORD_TABLES};
use super::spill_snapshot::SpillSnapshot;
use crate::bytes::{MatchId, ValidatorKey};
use crate::ledger::codec;
use redb::{Database, ReadableDatabase, Table, TableDefinition, WriteTransaction};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Members of the sets a validator keeps of what its own log holds (`spilled_key_set::KeySet`):
/// (set, key) -> nothing.
const KEY_SETS: TableDefinition<&[u8], ()> = TableDefinition::new("key_sets");
/// A kept file's fold heads (`kept_file`): written last, in a transaction of its own,
/// and taken out before anything else is written, so heads in the file always describe
/// the matches and records beside them.
const HEADS: TableDefinition<&str, &[u8]> = TableDefinition::new("fold_heads");
/// The one key of [`HEADS`].
const HEADS_KEY: &str = "heads";
/// Largest heads entry written or read back (`kept_file`).
pub const MAX_HEADS_BYTES: u64 = 1 << 30;
/// A validator's file, beside the store it is derived from.
pub const SPILL_FILE: &str = "replay-cold.redb";

/// How much of what a replay derives stays in memory; the rest is in the file. The one
/// setting that tells a validator's replay from an audit's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheSize {
    /// Match folds a log holds in memory before they are spilled (those the fold touched
    /// last, and open ones, are spilled too: folding a block that names one reads it back).
    pub matches_per_log: usize,
    /// Records of one kind a log holds in memory before they are spilled (its last stays).
    pub records_per_log: usize,
    /// Keys one of a validator's sets of its own log holds before they go to the file.
    pub keys_per_set: usize,
    /// Entries one of the combine's working sets (`sorted_scratch::Bag`) holds before it goes to the
    /// file: one that never does is never encoded, and a scratch one never written.
    pub combine_entries: usize,
    /// redb's cache for the file: all it may hold in memory, reads and (up to half of it)
    /// writes not yet in the file, which are written without fsync (but every
    /// `DURABLE_EVERY`th commit).
    pub page_bytes: usize,
}

impl CacheSize {
    /// A running validator's: small, so that its memory stops growing with its logs, and
    /// full early (in a soak a 4 MiB page cache was still filling an hour in, heaptrack;
    /// the file's pages are in the OS's page cache anyway).
    pub const VALIDATOR: CacheSize = CacheSize {
        matches_per_log: 64,
        records_per_log: 256,
        keys_per_set: 256,
        combine_entries: 1024,
        page_bytes: 1024 * 1024,
    };
    /// A one-shot audit's: every match of a log of up to a million matches in memory, as
    /// the fold reads them back most; the combine's sets and the state's list through
    /// 1 MiB of pages, like a validator's (in `scripts/bench-fold-memory.sh` a 64 MiB page
    /// cache held 17.6 kB of heap per state match and combined no faster: encoding and
    /// the B-tree cost the time, not reads). What is past that is in the temporary file.
    pub const AUDIT: CacheSize = CacheSize {
        matches_per_log: 1 << 20,
        records_per_log: 1 << 20,
        keys_per_set: 1 << 20,
        combine_entries: 1 << 20,
        page_bytes: 1024 * 1024,
    };
}
/// One transaction in this many on the file is committed with fsync (`durability`).
const DURABLE_EVERY: u64 = 16;
/// The file matches and records are spilled to, open for this process alone.
pub struct SpillFile {
    pub(super) db: Arc<Database>,
    path: PathBuf,
    /// The snapshot the last spill made.
    newest: std::sync::Mutex<Option<Arc<SpillSnapshot>>>,
    cache: CacheSize,
    /// The directory of a temporary file, removed with it.
    _temporary: Option<tempfile::TempDir>,
    /// Kept after this process (`open_kept`): not removed when dropped.
    kept: bool,
    /// The last key set made.
    sets: std::sync::atomic::AtomicU64,
    /// Transactions begun, for `durability`.
    commits: std::sync::atomic::AtomicU64,
    /// Combines committed: the state's list in the file is the one of this number.
    combines: std::sync::atomic::AtomicU64,
    /// Where a fold's encoding is kept at each checkpoint height (`checkpoint`): a
    /// validator's, which serves them; a replay without one hashes them only.
    fold_points: Option<PathBuf>,
}

impl std::fmt::Debug for SpillFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillFile").field("path", &self.path).finish()
    }
}

fn set_key(set: u64, key: &[u8]) -> Vec<u8> {
    let mut out = set.to_be_bytes().to_vec();
    out.extend_from_slice(key);
    out
}

/// Makes every table, so any snapshot can open them all.
fn make_tables(db: &Database) -> Result<(), redb::Error> {
    let txn = db.begin_write()?;
    txn.open_table(BY_ID)?;
    txn.open_table(BY_PLACE)?;
    txn.open_table(STATE_LIST)?;
    txn.open_table(KEY_SETS)?;
    txn.open_table(HEADS)?;
    txn.open_table(list_table(STATE_PLAYS))?;
    for name in RECORD_TABLES {
        txn.open_table(list_table(name))?;
    }
    txn.commit()?;
    Ok(())
}

impl SpillFile {
    /// Creates the file at `path`, replacing one an earlier run left.
    pub fn create(path: &Path, cache: CacheSize) -> Result<SpillFile, SpillFileError> {
        SpillFile::make(path, cache, None)
    }

    /// A file of its own in the temporary directory (`TMPDIR`), removed when it is
    /// dropped and no snapshot of it is held: a one-shot replay's.
    pub fn temporary(cache: CacheSize) -> Result<SpillFile, SpillFileError> {
        let dir = tempfile::Builder::new().prefix("af-replay-").tempdir().map_err(|e| SpillFileError::Engine {
            path: std::env::temp_dir().display().to_string(),
            message: format!("making a temporary directory: {e}"),
        })?;
        SpillFile::make(&dir.path().join(SPILL_FILE), cache, Some(dir))
    }

    fn make(path: &Path, cache: CacheSize, temporary: Option<tempfile::TempDir>) -> Result<SpillFile, SpillFileError> {
        let fail = |message: String| SpillFileError::Engine { path: path.display().to_string(), message };
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(format!("removing the last run's copy: {e}"))),
        }
        let db = Database::builder()
            .set_cache_size(cache.page_bytes)
            .create(path)
            .map_err(|e| fail(redb::Error::from(e).to_string()))?;
        make_tables(&db).map_err(|e| fail(e.to_string()))?;
        Ok(SpillFile::make_from(db, path, cache, temporary))
    }

    fn make_from(db: Database, path: &Path, cache: CacheSize, temporary: Option<tempfile::TempDir>) -> SpillFile {
        SpillFile {
            db: Arc::new(db),
            path: path.to_owned(),
            cache,
            _temporary: temporary,
            kept: false,
            newest: Default::default(),
            sets: Default::default(),
            commits: Default::default(),
            combines: Default::default(),
            fold_points: None,
        }
    }

    /// Keeps each fold's encoding at its checkpoint heights in `dir` (`checkpoint`).
    pub fn keep_fold_points_in(&mut self, dir: PathBuf) {
        self.fold_points = Some(dir);
    }

    /// Where folds at checkpoint heights are kept, if anywhere.
    pub fn fold_points_dir(&self) -> Option<&Path> {
        self.fold_points.as_deref()
    }

    /// Opens the file at `path` kept by an earlier run (`kept_file`), or makes it: every
    /// page's checksum is checked on open, so a file changed since it was written is
    /// refused, by name, rather than read. It stays after this process.
    pub fn open_kept(path: &Path, cache: CacheSize) -> Result<SpillFile, SpillFileError> {
        let fail = |message: String| SpillFileError::Engine { path: path.display().to_string(), message };
        let damaged = |message: String| SpillFileError::Damaged { path: path.display().to_string(), message };
        let db = Database::builder().set_cache_size(cache.page_bytes).set_check_integrity_on_open(true).create(path);
        let db = db.map_err(|e| match e {
            redb::DatabaseError::Storage(redb::StorageError::Io(e))
                if !matches!(e.kind(), std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof) =>
            {
                fail(e.to_string())
            }
            redb::DatabaseError::Storage(_)
            | redb::DatabaseError::RepairAborted
            | redb::DatabaseError::UpgradeRequired(_) => damaged(redb::Error::from(e).to_string()),
            e => fail(redb::Error::from(e).to_string()),
        })?;
        make_tables(&db).map_err(|e| fail(e.to_string()))?;
        let mut store = SpillFile::make_from(db, path, cache, None);
        store.kept = true;
        Ok(store)
    }

    /// Takes the heads out of a kept file, durably, before anything else is written to
    /// it: the matches and records they describe may change from here on.
    pub fn take_heads(&self) -> Result<Option<Vec<u8>>, SpillFileError> {
        let fail = |e: &dyn std::fmt::Display| self.fail("reading the fold heads", e);
        let txn = self.db.begin_write().map_err(|e| fail(&e))?;
        let (heads, oversize) = {
            let mut table = txn.open_table(HEADS).map_err(|e| fail(&e))?;
            let taken = table.remove(HEADS_KEY).map_err(|e| fail(&e))?;
            // Measured before it is copied: a file is read back, not trusted to be small.
            let kept = match taken {
                Some(value) if value.value().len() as u64 > MAX_HEADS_BYTES => (None, Some(value.value().len())),
                Some(value) => (Some(value.value().to_vec()), None),
                None => (None, None),
            };
            kept
        };
        txn.commit().map_err(|e| fail(&e))?;
        match oversize {
            Some(n) => Err(SpillFileError::Damaged {
                path: self.path.display().to_string(),
                message: format!("its fold heads are {n} bytes, over the {MAX_HEADS_BYTES} read back"),
            }),
            None => Ok(heads),
        }
    }

    /// Writes `heads` durably: what the next run of a kept file starts from.
    pub fn put_heads(&self, heads: &[u8]) -> Result<(), SpillFileError> {
        let fail = |e: &dyn std::fmt::Display| self.fail("writing the fold heads", e);
        let txn = self.db.begin_write().map_err(|e| fail(&e))?;
        txn.open_table(HEADS).map_err(|e| fail(&e))?.insert(HEADS_KEY, heads).map_err(|e| fail(&e))?;
        txn.commit().map_err(|e| fail(&e))
    }

    /// Removes every match and record of `validators` from the file, in one transaction:
    /// their folds start over from genesis, and must find none of an earlier fold's there.
    pub fn clear_validators(&self, validators: &[ValidatorKey]) -> Result<(), SpillFileError> {
        if validators.is_empty() {
            return Ok(());
        }
        let fail = |e: &dyn std::fmt::Display| self.fail("clearing a log's matches", e);
        let mut txn = self.db.begin_write().map_err(|e| fail(&e))?;
        txn.set_durability(self.durability()).map_err(|e| fail(&e))?;
        let names = [BY_ID, BY_PLACE].into_iter().chain(RECORD_TABLES.iter().map(|name| list_table(name)));
        for definition in names {
            let mut table = txn.open_table(definition).map_err(|e| fail(&e))?;
            for validator in validators {
                let (from, to) = of_validator(validator);
                match to {
                    Some(to) => table.retain_in::<&[u8], _>(&from[..]..&to[..], |_, _| false),
                    None => table.retain_in::<&[u8], _>(&from[..].., |_, _| false),
                }
                .map_err(|e| fail(&e))?;
            }
        }
        txn.commit().map_err(|e| fail(&e))
    }

    /// Empties every key set (`spilled_key_set::KeySet`): a set lives as long as the run that
    /// made it, and a kept file outlives its run (a new run numbers its sets from 0).
    pub fn clear_sets(&self) -> Result<(), SpillFileError> {
        let fail = |e: &dyn std::fmt::Display| self.fail("clearing the key sets", e);
        let txn = self.db.begin_write().map_err(|e| fail(&e))?;
        txn.delete_table(KEY_SETS).map_err(|e| fail(&e))?;
        txn.open_table(KEY_SETS).map_err(|e| fail(&e))?;
        txn.commit().map_err(|e| fail(&e))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How much stays in memory.
    pub fn cache(&self) -> CacheSize {
        self.cache
    }

    /// Writes one spill (`spill::spill`) in one transaction, without fsync (but every
    /// `DURABLE_EVERY`th); returns what `write` gave and the snapshot that shows it, now
    /// the newest.
    pub fn write_spill<R>(
        &self,
        write: impl FnOnce(&mut SpillWriter<'_>) -> Result<R, SpillFileError>,
    ) -> Result<(R, Arc<SpillSnapshot>), SpillFileError> {
        let fail = |e: &dyn std::fmt::Display| self.fail("spilling matches", e);
        let mut txn = self.db.begin_write().map_err(|e| fail(&e))?;
        // Derived and deleted at every start: a crash loses nothing the logs do not hold.
        txn.set_durability(self.durability()).map_err(|e| fail(&e))?;
        let written = {
            let lists = RECORD_TABLES.iter().map(|name| txn.open_table(list_table(name))).collect::<Result<_, _>>();
            let mut writer = SpillWriter {
                by_id: txn.open_table(BY_ID).map_err(|e| fail(&e))?,
                by_place: txn.open_table(BY_PLACE).map_err(|e| fail(&e))?,
                lists: lists.map_err(|e| fail(&e))?,
                store: self,
            };
            write(&mut writer)?
        };
        txn.commit().map_err(|e| fail(&e))?;
        let snapshot = Arc::new(self.snapshot().map_err(|e| fail(&e))?);
        *self.newest.lock().unwrap_or_else(|e| e.into_inner()) = Some(snapshot.clone());
        Ok((written, snapshot))
    }

    /// The snapshot the last spill or combine made, if any.
    pub fn newest(&self) -> Option<Arc<SpillSnapshot>> {
        self.newest.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A transaction for a combine: its working sets (`sorted_scratch::Bag`) and the state's new list
    /// of matches (`append_state_matches`), with the last list gone. Written without fsync,
    /// as spills are.
    pub(super) fn begin_combine(&self) -> Result<WriteTransaction, SpillFileError> {
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
    ) -> Result<(), SpillFileError> {
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
    ) -> Result<(Arc<SpillSnapshot>, u64), SpillFileError> {
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
    pub(super) fn newest_for(&self, combine: u64) -> Option<Arc<SpillSnapshot>> {
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
    pub(super) fn add_keys<'k>(&self, set: u64, keys: impl Iterator<Item = &'k [u8]>) -> Result<(), SpillFileError> {
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
    pub(super) fn has_key(&self, set: u64, key: &[u8]) -> Result<bool, SpillFileError> {
        let txn = self.db.begin_read().map_err(|e| self.fail("reading a set", e))?;
        let table = txn.open_table(KEY_SETS).map_err(|e| self.fail("reading a set", e))?;
        let found = table.get(&set_key(set, key)[..]).map_err(|e| self.fail("reading a set", e))?;
        Ok(found.is_some())
    }

    fn fail(&self, doing: &str, e: impl std::fmt::Display) -> SpillFileError {
        SpillFileError::Engine { path: self.path.display().to_string(), message: format!("{doing}: {e}") }
    }

    pub(super) fn snapshot(&self) -> Result<SpillSnapshot, redb::Error> {
        SpillSnapshot::open(&self.db, &self.path)
    }
}

/// The tables one spill writes, open in its transaction.
pub struct SpillWriter<'t> {
    by_id: Table<'t, &'static [u8], &'static [u8]>,
    by_place: Table<'t, &'static [u8], &'static [u8]>,
    /// One per kind of listed record, by `Record::SLOT`.
    lists: Vec<Table<'t, &'static [u8], &'static [u8]>>,
    store: &'t SpillFile,
}

impl SpillWriter<'_> {
    /// Writes `validator`'s match `id`, found by id and by its place in the log.
    pub fn put_match(&mut self, validator: &ValidatorKey, id: &MatchId, m: &MatchFold) -> Result<(), SpillFileError> {
        let fail = |e: &dyn std::fmt::Display| self.store.fail("spilling matches", e);
        let place = place_key(validator, m.started_height, m.started_event_idx);
        let mut value = id.0.to_vec();
        codec::encode_into(m, &mut value, "match fold", MAX_FOLD_BYTES).map_err(|e| fail(&e))?;
        self.by_id.insert(&id_key(validator, id)[..], &place[32..]).map_err(|e| fail(&e))?;
        self.by_place.insert(&place[..], &value[..]).map_err(|e| fail(&e))?;
        Ok(())
    }

    /// Writes `validator`'s `T` record at `index` of its list.
    pub fn put_record<T: Record>(
        &mut self,
        validator: &ValidatorKey,
        index: u64,
        record: &T,
    ) -> Result<(), SpillFileError> {
        let fail = |e: &dyn std::fmt::Display| self.store.fail("spilling records", e);
        let value = codec::encode(record, "listed record", MAX_FOLD_BYTES).map_err(|e| fail(&e))?;
        self.lists[T::SLOT].insert(&index_key(validator, index)[..], &value[..]).map_err(|e| fail(&e))?;
        Ok(())
    }
}

impl Drop for SpillFile {
    /// The file is of no use to anyone once its process is done with it. Snapshots still
    /// held keep reading their open file; removal only unlinks it.
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
