//! The on-disk block store, on redb: every validator's chain (our own and verified
//! copies of peers'), the tip of each, and indexes from challenge id and miner hotkey
//! to where their transcripts sit.
//!
//! One append is one redb write transaction with `Durability::Immediate`: when
//! [`Store::append`] returns, the block and its index entries are fsync'd. The store
//! re-checks the link to the stored tip inside that transaction, so it can never hold
//! a chain with a gap or a fork, whoever calls it. Layout: ledger-spec/05-store.md.

mod error;
mod layout;
mod prune;
mod read_open;
mod rotations;
mod streams;
mod writes;

pub use error::*;
pub use layout::*;
pub use prune::*;
pub use read_open::PageCheck;
pub use streams::*;

use crate::bytes::{ChallengeId, Hash32, SignatureBytes, ValidatorKey};
use crate::ledger::block::{check_link, decode_block, BlockHeader, SealedBlock, Tip};
use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable};
use std::path::{Path, PathBuf};

/// What an append did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appended {
    /// The block is the new tip.
    New(Tip),
    /// The very same block was already stored (gossip delivers duplicates).
    AlreadyStored,
}

/// What [`Store::append_batch`] did: each appended block's result, and the index and
/// error of the block it stopped at, if any.
pub type BatchAppended = (Vec<Appended>, Option<(usize, StoreError)>);

pub struct Store {
    db: Database,
    path: PathBuf,
    read_only: bool,
    /// A read-only open of a store its writer left without closing: why it needs the
    /// recovery a writer's next open makes (the reader made it in memory only).
    recovery: Option<String>,
    /// Blocks this open moved from schema 1 into pieces (see [`Store::upgrade`]).
    upgraded: u64,
    /// Whence [`Store::block`] fetches a pruned body back (none: it is refused as pruned).
    bodies: Option<std::sync::Arc<dyn BodySource>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    /// Opens the store in `dir` for writing, creating the directory and an empty store if
    /// needed. An existing file is checked page by page first (see [`open_database`]).
    pub fn create(dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Open { path: dir.to_owned(), message: e.to_string() })?;
        let path = dir.join(STORE_FILE);
        let existed = path.exists();
        let db = open_database(&path, crate::limits::STORE_WRITE_CACHE_BYTES, |builder| {
            // A new file has nothing to check; an existing one is checked like any other.
            builder.set_check_integrity_on_open(existed).create(&path)
        })?;
        let mut store = Store { db, path, read_only: false, recovery: None, upgraded: 0, bodies: None };
        store.upgraded = store.upgrade()?;
        store.init_tables()?;
        Ok(store)
    }

    /// Opens an existing store in `dir` for writing; a missing store is an error, never
    /// created. Every page checksum is verified first; redb rolls back a last commit torn
    /// by a power loss, as its crash recovery does.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let path = existing_store_file(dir)?;
        let db = open_database(&path, crate::limits::STORE_WRITE_CACHE_BYTES, |builder| {
            builder.set_check_integrity_on_open(true).open(&path)
        })?;
        let mut store = Store { db, path, read_only: false, recovery: None, upgraded: 0, bodies: None };
        store.upgraded = store.upgrade()?;
        store.check_schema()?;
        Ok(store)
    }

    /// A writer's open of a schema 1 store moves each block into chunks ([`BLOCKS`]) and
    /// records schema 2, in one durable transaction: a crash leaves schema 1 whole, to be
    /// upgraded at the next open. The file holds both copies until the commit frees the
    /// old pages (`af ledger compact` then returns them). Returns the blocks moved.
    fn upgrade(&self) -> Result<u64, StoreError> {
        let found = {
            let txn = self.read()?;
            let meta = match txn.open_table(META) {
                Ok(meta) => meta,
                // A new file: `init_tables` writes the current schema.
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
                Err(e) => return Err(engine("opening the store's meta table")(e.into())),
            };
            let found = meta.get("schema").map_err(eng("reading the schema version"))?;
            found.map(|bytes| bytes.value().to_vec())
        };
        if found.as_deref() != Some(1u32.to_le_bytes().as_slice()) {
            return Ok(0);
        }
        let txn = self.db.begin_write().map_err(eng("starting the schema upgrade"))?;
        let mut moved = 0u64;
        {
            let old = txn.open_table(BLOCKS_V1).map_err(eng("opening schema 1's blocks"))?;
            let mut blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
            for entry in old.iter().map_err(eng("reading schema 1's blocks"))? {
                let (key, value) = entry.map_err(eng("reading schema 1's blocks"))?;
                let key = key.value();
                if key.len() != 40 {
                    return Err(StoreError::Corrupt(format!(
                        "a schema 1 block key of {} bytes, expected 40",
                        key.len()
                    )));
                }
                let validator = ValidatorKey(key[..32].try_into().expect("32"));
                let height = u64::from_be_bytes(key[32..].try_into().expect("8"));
                insert_chunks(&mut blocks, &validator, height, value.value())?;
                moved += 1;
            }
        }
        txn.delete_table(BLOCKS_V1).map_err(eng("dropping schema 1's blocks"))?;
        {
            let mut meta = txn.open_table(META).map_err(eng("opening the store's meta table"))?;
            meta.insert("schema", SCHEMA_VERSION.to_le_bytes().as_slice()).map_err(eng("writing schema"))?;
        }
        txn.commit().map_err(eng("committing the schema upgrade"))?;
        Ok(moved)
    }

    /// Opens an existing store in `dir` for reading only: the file is opened read-only
    /// (a read-only copy works), never written, and shared with other readers. Before any
    /// table is read, redb's header and the checksum of every page of the committed trees
    /// are verified, so no byte of the file can make a later read panic, hang or allocate
    /// without bound. A store held by a running writer is [`StoreError::Locked`].
    pub fn open_read_only(dir: &Path) -> Result<Store, StoreError> {
        Store::open_read_only_checked(dir, true, crate::limits::STORE_READ_CACHE_BYTES)
    }

    /// [`Store::open_read_only`] with redb's page-checksum pass moved off the caller's
    /// path: the store returned is opened without the pass, and the pass runs at once on
    /// its own thread, as a second checked read-only open of the same file. Both hold
    /// the file's shared lock, so no writer commits between them and both read the same
    /// commit. A full verification checks the blocks meanwhile and reports nothing as
    /// verified unless [`PageCheck::finish`] passes too. A file its writer left open needs
    /// redb's recovery, which only the checked open does: it is opened that way, with no
    /// overlap.
    pub fn open_read_only_overlapped(dir: &Path) -> Result<(Store, PageCheck), StoreError> {
        let store = match Store::open_read_only_checked(dir, false, crate::limits::FULL_READ_CACHE_BYTES) {
            Ok(store) => store,
            // The checked open is the authority on a file the quick one could not open.
            Err(StoreError::Corrupt(_)) => return Ok((Store::open_read_only(dir)?, PageCheck::passed())),
            Err(error) => return Err(error),
        };
        if store.recovery_needed().is_some() {
            drop(store);
            return Ok((Store::open_read_only(dir)?, PageCheck::passed()));
        }
        let check = PageCheck::start(dir).map_err(|e| io_open_error(store.path(), e))?;
        Ok((store, check))
    }

    /// Lets go of a store whose pages failed their check without closing it: redb's close
    /// writes its allocator state (for a read-only open, into memory only) and can trip
    /// over the damage. The handle and its shared lock go when the process exits.
    pub fn abandon(self) {
        std::mem::forget(self);
    }

    /// A read-only open of a damaged store for salvage (`ledger::salvage`) only: redb's
    /// page-checksum pass is skipped, so a damaged page is met when read (as an error or a
    /// caught panic) instead of refusing the whole file. Nothing read through it is
    /// trusted: salvage re-verifies every block it hands out.
    pub fn open_for_salvage(dir: &Path) -> Result<Store, StoreError> {
        Store::open_read_only_checked(dir, false, crate::limits::STORE_READ_CACHE_BYTES)
    }

    fn open_read_only_checked(dir: &Path, checked: bool, cache_bytes: usize) -> Result<Store, StoreError> {
        let pass = if checked { read_open::Pass::Full } else { read_open::Pass::Skip };
        let (db, path, recovery) = read_open::open_read_only(dir, pass, cache_bytes)?;
        let db = db.expect("an open that runs the whole pass, or none, keeps its database");
        let store = Store { db, path, read_only: true, recovery, upgraded: 0, bodies: None };
        store.check_schema()?;
        Ok(store)
    }

    /// The validators whose blocks the block table holds, in key order, as far as its keys
    /// can be read (salvage's way to find chains when the tips table is unreadable).
    pub fn chains_in_blocks(&self) -> Result<Vec<ValidatorKey>, StoreError> {
        let txn = self.read()?;
        let blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
        let mut found: Vec<ValidatorKey> = Vec::new();
        for entry in blocks.iter().map_err(eng("reading blocks"))? {
            let Ok((key, _)) = entry else { break };
            let Some(validator) = key.value().get(..32).and_then(|k| <[u8; 32]>::try_from(k).ok()) else { break };
            if found.last() != Some(&ValidatorKey(validator)) {
                found.push(ValidatorKey(validator));
            }
        }
        Ok(found)
    }

    /// Whether a running writer (`af validate`, `af node`) holds the store in `dir`, told
    /// by the file's lock alone: no page is read, so asking costs nothing on a large store.
    pub fn held_by_writer(dir: &Path) -> Result<bool, StoreError> {
        use redb::StorageBackend;
        use std::ops::Bound::Unbounded;
        let path = existing_store_file(dir)?;
        let file = std::fs::File::open(&path).map_err(|e| io_open_error(&path, e))?;
        let backend =
            redb::backends::FileBackend::new(file).map_err(|e| io_open_error(&path, std::io::Error::other(e)))?;
        let engine =
            |e: redb::BackendError| StoreError::Engine { doing: "reading the store's lock", message: e.to_string() };
        let free = backend.try_lock_shared_range(Unbounded, Unbounded).map_err(engine)?;
        if free {
            backend.unlock_range(Unbounded, Unbounded).map_err(engine)?;
        }
        Ok(!free)
    }

    /// Rewrites the store in `dir` so its file holds no free pages (redb's compaction),
    /// for a validator that is stopped: redb grows its file in doubling regions and keeps
    /// pages freed by older commits for reuse, so a long-running store can be up to twice
    /// its data. Every page checksum is verified by the open first, and a schema 1 store
    /// is upgraded by it. Returns the file's size (before, after) in bytes and the blocks
    /// the upgrade moved.
    pub fn compact(dir: &Path) -> Result<(u64, u64, u64), StoreError> {
        let path = existing_store_file(dir)?;
        let size = |path: &Path| std::fs::metadata(path).map(|m| m.len()).map_err(|e| io_open_error(path, e));
        let before = size(&path)?;
        let mut store = Store::open(dir)?;
        // Each call frees what it can; redb says when nothing more can move.
        while store.db.compact().map_err(|e| StoreError::Engine { doing: "compacting", message: e.to_string() })? {}
        let upgraded = store.upgraded;
        drop(store);
        Ok((before, size(&path)?, upgraded))
    }

    /// How many blocks this open moved from a schema 1 store into pieces (0 if none).
    pub fn upgraded_blocks(&self) -> u64 {
        self.upgraded
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Set when a read-only open found the store left by a writer that did not close it:
    /// what redb's recovery (made in memory, the file untouched) had to do. The next
    /// writer's open makes the same recovery on disk. Not a fault: nothing acknowledged is
    /// lost by a crash.
    pub fn recovery_needed(&self) -> Option<&str> {
        self.recovery.as_deref()
    }

    fn writable(&self) -> Result<(), StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly(self.path.clone()));
        }
        Ok(())
    }

    fn init_tables(&self) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(eng("starting the init transaction"))?;
        {
            txn.open_table(BLOCKS).map_err(eng("creating tables"))?;
            txn.open_table(TIPS).map_err(eng("creating tables"))?;
            txn.open_table(ROTATIONS).map_err(eng("creating tables"))?;
            txn.open_multimap_table(BY_CHALLENGE).map_err(eng("creating tables"))?;
            txn.open_multimap_table(BY_MINER).map_err(eng("creating tables"))?;
            let mut meta = txn.open_table(META).map_err(eng("creating tables"))?;
            let existing = meta.get("schema").map_err(eng("reading the schema version"))?.map(|v| v.value().to_vec());
            match existing {
                None => {
                    meta.insert("schema", SCHEMA_VERSION.to_le_bytes().as_slice()).map_err(eng("writing schema"))?;
                }
                Some(bytes) => check_schema_bytes(&self.path, &bytes)?,
            }
        }
        txn.commit().map_err(eng("committing the init transaction"))
    }

    fn check_schema(&self) -> Result<(), StoreError> {
        let txn = self.read()?;
        let meta =
            txn.open_table(META).map_err(|e| StoreError::Open { path: self.path.clone(), message: e.to_string() })?;
        let found = meta.get("schema").map_err(eng("reading the schema version"))?;
        match found {
            Some(bytes) => check_schema_bytes(&self.path, bytes.value()),
            None => Err(StoreError::Corrupt("no schema version recorded".into())),
        }
    }

    pub fn read(&self) -> Result<ReadTransaction, StoreError> {
        self.db.begin_read().map_err(eng("starting a read transaction"))
    }

    pub fn tip(&self, validator: &ValidatorKey) -> Result<Option<Tip>, StoreError> {
        let txn = self.read()?;
        let tips = txn.open_table(TIPS).map_err(eng("opening tips"))?;
        let tip = tips.get(validator.0.as_slice()).map_err(eng("reading a tip"))?;
        tip.map(|bytes| decode_tip(bytes.value())).transpose()
    }

    /// Every validator with a chain in the store and its tip, ordered by key.
    pub fn tips(&self) -> Result<Vec<(ValidatorKey, Tip)>, StoreError> {
        let txn = self.read()?;
        tips_in(&txn)
    }

    /// The stored bytes of block `height` (None: not stored). A pruned block is
    /// [`StoreError::Pruned`]: its body is not here, and this never fetches it (what
    /// peers and HTTP readers ask for is served from what is stored only).
    pub fn block_bytes(&self, validator: &ValidatorKey, height: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let txn = self.read()?;
        let blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
        match get_block(&blocks, validator, height)? {
            Some(bytes) => Ok(Some(bytes)),
            None if height < pruned_below(&txn, validator)? => {
                Err(StoreError::Pruned { validator: *validator, height })
            }
            None => Ok(None),
        }
    }

    /// A stored block's length (None: not stored), read without holding the block: what
    /// a reader reserves before [`Store::block_bytes`].
    pub fn block_len(&self, validator: &ValidatorKey, height: u64) -> Result<Option<usize>, StoreError> {
        let txn = self.read()?;
        let blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
        layout::block_len(&blocks, validator, height)
    }

    /// The signed headers at heights `from..=to` (decoded without the events, in one read
    /// transaction, from each block's first chunk); stops at the first missing height.
    pub fn signed_headers(
        &self,
        validator: &ValidatorKey,
        from: u64,
        to: u64,
    ) -> Result<Vec<(BlockHeader, SignatureBytes)>, StoreError> {
        let txn = self.read()?;
        let blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
        let pruned = pruned_table(&txn)?;
        let mut headers = Vec::new();
        for height in from..=to {
            let Some(signed) = header_in(&blocks, pruned.as_ref(), validator, height)? else { break };
            headers.push(signed);
        }
        Ok(headers)
    }

    /// The decoded block at `height`, re-checked: stored bytes are never trusted. A
    /// pruned block's body is fetched back from its archive where this store reads
    /// through a [`BodySource`] ([`Store::set_bodies`]), and taken only if it is that block.
    pub fn block(
        &self,
        validator: &ValidatorKey,
        height: u64,
    ) -> Result<Option<super::block::DecodedBlock>, StoreError> {
        let bytes = match self.block_bytes(validator, height) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(None),
            Err(StoreError::Pruned { .. }) => self.fetch_pruned(validator, height)?,
            Err(other) => return Err(other),
        };
        let decoded =
            decode_block(&bytes).map_err(|source| StoreError::Rejected { validator: *validator, height, source })?;
        Ok(Some(decoded))
    }

    pub fn locate_challenge(&self, challenge_id: &ChallengeId) -> Result<Vec<Location>, StoreError> {
        let txn = self.read()?;
        let table = txn.open_multimap_table(BY_CHALLENGE).map_err(eng("opening an index"))?;
        let values = table.get(challenge_id.0.as_slice()).map_err(eng("reading an index"))?;
        let mut out = Vec::new();
        for value in values {
            out.push(Location::decode(value.map_err(eng("reading an index"))?.value())?);
        }
        Ok(out)
    }

    /// The challenge ids in the index between `low` and `high` (inclusive), at most
    /// `limit` of them: a prefix search, for resolving a short id. Only a lookup key;
    /// what is found is then confirmed against the blocks by [`Store::find_challenge`].
    pub fn challenge_ids_between(
        &self,
        low: &ChallengeId,
        high: &ChallengeId,
        limit: usize,
    ) -> Result<Vec<ChallengeId>, StoreError> {
        let txn = self.read()?;
        let table = txn.open_multimap_table(BY_CHALLENGE).map_err(eng("opening an index"))?;
        let mut out = Vec::new();
        for item in table.range(low.0.as_slice()..=high.0.as_slice()).map_err(eng("reading an index"))? {
            let (key, _) = item.map_err(eng("reading an index"))?;
            let bytes: [u8; 32] = key
                .value()
                .try_into()
                .map_err(|_| StoreError::Corrupt("a challenge index key is not 32 bytes".into()))?;
            out.push(Hash32(bytes));
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// Where the transcripts of `challenge_id` are, each location confirmed against its
    /// block: the index is a cache of the blocks and never answers on its own.
    pub fn find_challenge(&self, challenge_id: &ChallengeId) -> Result<Vec<Location>, StoreError> {
        let locations = self.locate_challenge(challenge_id)?;
        self.confirm(&locations, "challenge", &|t| t.challenge_id == *challenge_id)?;
        Ok(locations)
    }

    /// Where the transcripts of miner `hotkey` are, each confirmed against its block.
    pub fn find_miner(&self, hotkey: &str) -> Result<Vec<Location>, StoreError> {
        let locations = self.locate_miner(hotkey)?;
        self.confirm(&locations, "miner", &|t| t.miner.hotkey == hotkey)?;
        Ok(locations)
    }

    /// Checks that each location holds a transcript that `matches`, reading each block once.
    fn confirm(
        &self,
        locations: &[Location],
        index: &str,
        matches: &dyn Fn(&super::event::Transcript<&str>) -> bool,
    ) -> Result<(), StoreError> {
        let mut sorted = locations.to_vec();
        sorted.sort();
        let mut i = 0;
        while i < sorted.len() {
            let (validator, height) = (sorted[i].validator, sorted[i].height);
            let bytes = self.block_bytes(&validator, height)?.ok_or_else(|| {
                StoreError::Corrupt(format!("the {index} index points at {}, which is not stored", sorted[i]))
            })?;
            let (_, events) = super::block::decode_block_borrowed(&bytes).map_err(|source| StoreError::Rejected {
                validator,
                height,
                source,
            })?;
            while i < sorted.len() && sorted[i].validator == validator && sorted[i].height == height {
                let ok = match events.get(sorted[i].event_idx as usize) {
                    Some(event) => event.transcript().is_some_and(matches),
                    _ => false,
                };
                if !ok {
                    return Err(StoreError::Corrupt(format!(
                        "the {index} index points at {}, which is not such a transcript (run `af ledger verify`)",
                        sorted[i]
                    )));
                }
                i += 1;
            }
        }
        Ok(())
    }

    /// Every miner hotkey the miner index names, in byte order (what a published site
    /// writes transcript pages for).
    pub fn miner_hotkeys(&self) -> Result<Vec<String>, StoreError> {
        guarded("reading the miner index", || {
            let txn = self.read()?;
            let table = txn.open_multimap_table(BY_MINER).map_err(eng("opening an index"))?;
            let mut out = Vec::new();
            for item in redb::ReadableMultimapTable::iter(&table).map_err(eng("reading an index"))? {
                out.push(item.map_err(eng("reading an index"))?.0.value().to_string());
            }
            Ok(out)
        })
    }

    /// Every transcript the miner index lists for `hotkey`, unconfirmed.
    pub fn locate_miner(&self, hotkey: &str) -> Result<Vec<Location>, StoreError> {
        Ok(self.locate_miner_page(hotkey, 0, usize::MAX)?.1)
    }

    /// How many of the transcripts the miner index lists for `hotkey` are at locations
    /// `keep` takes, and the `limit` of those after the first `offset`, unconfirmed. Reads
    /// the miner's index entries, one at a time, and holds only the page.
    pub fn locate_miner_where(
        &self,
        hotkey: &str,
        keep: &dyn Fn(&Location) -> bool,
        offset: usize,
        limit: usize,
    ) -> Result<(usize, Vec<Location>), StoreError> {
        guarded("reading the miner index", || {
            let txn = self.read()?;
            let table = txn.open_multimap_table(BY_MINER).map_err(eng("opening an index"))?;
            let (mut kept, mut out) = (0usize, Vec::new());
            for value in table.get(hotkey).map_err(eng("reading an index"))? {
                let location = Location::decode(value.map_err(eng("reading an index"))?.value())?;
                if keep(&location) {
                    if kept >= offset && out.len() < limit {
                        out.push(location);
                    }
                    kept += 1;
                }
            }
            Ok((kept, out))
        })
    }

    /// How many transcripts the miner index lists for `hotkey`, and the `limit` after
    /// the first `offset` of them (in index order: validator, height, event), unconfirmed:
    /// a reader confirms each against its block. Reads `offset + limit` index entries at
    /// most, whatever the miner's count.
    pub fn locate_miner_page(
        &self,
        hotkey: &str,
        offset: usize,
        limit: usize,
    ) -> Result<(u64, Vec<Location>), StoreError> {
        guarded("reading the miner index", || {
            let txn = self.read()?;
            let table = txn.open_multimap_table(BY_MINER).map_err(eng("opening an index"))?;
            let values = table.get(hotkey).map_err(eng("reading an index"))?;
            let total = values.len();
            let mut out = Vec::new();
            for value in values.skip(offset).take(limit) {
                out.push(Location::decode(value.map_err(eng("reading an index"))?.value())?);
            }
            Ok((total, out))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_named_and_other_io_errors_are_not() {
        let full = engine("committing an append")(redb::Error::Io(std::io::Error::from_raw_os_error(28)));
        assert!(matches!(full, StoreError::DiskFull { doing: "committing an append" }), "{full:?}");
        assert!(full.to_string().contains("nothing already recorded is lost"), "{full}");
        let quota = engine("x")(redb::Error::Io(std::io::ErrorKind::QuotaExceeded.into()));
        assert!(matches!(quota, StoreError::DiskFull { .. }), "{quota:?}");
        let after = engine("starting an append")(redb::Error::PreviousIo);
        assert!(matches!(after, StoreError::EarlierWriteFailed { .. }), "{after:?}");
        let other = engine("x")(redb::Error::Io(std::io::Error::from_raw_os_error(5)));
        assert!(matches!(other, StoreError::Engine { .. }), "{other:?}");
    }

    #[test]
    fn a_block_is_cut_into_pieces_that_each_fill_whole_pages_but_the_last() {
        let page_runs = [256, 128, 64, 32, 16, 8, 4, 2, 1];
        for (size, pages) in CHUNK_SIZES.iter().zip(page_runs) {
            // redb's leaf: a 4-byte header, two 4-byte offsets, the 42-byte key, the value.
            assert!(4 + 4 + 4 + 42 + size <= pages * 4096, "{size} fits {pages} pages");
            assert!(4 + 4 + 4 + 42 + size + 64 > pages * 4096, "{size} nearly fills {pages} pages");
        }
        for len in [1, 299, 4_031, 4_032, 4_033, 42_000, 65_471, 65_472, 130_944, 1_000_000, 32 << 20] {
            let pieces: Vec<usize> = chunk_lengths(len).collect();
            assert_eq!(pieces.iter().sum::<usize>(), len, "{len}");
            assert!(pieces.iter().all(|p| *p > 0), "{len}: {pieces:?}");
            // Only the last piece may be smaller than a page, and sizes never grow.
            assert!(pieces[..pieces.len() - 1].iter().all(|p| CHUNK_SIZES.contains(p)), "{len}: {pieces:?}");
            assert!(pieces.windows(2).all(|w| w[0] >= w[1]), "{len}: {pieces:?}");
            assert!(pieces.len() < usize::from(u16::MAX), "{len}");
        }
        assert_eq!(chunk_lengths(42_000).collect::<Vec<_>>(), [32_704, 8_128, 1_168]);
        assert_eq!(chunk_lengths(1_000_000).count(), 6);
        assert_eq!(chunk_lengths(32 << 20).count(), 33);
        assert_eq!(chunk_lengths(0).count(), 0);
    }

    /// A closed store of a few blocks whose events carry `marker` bytes, and its file.
    fn store_with(marker: u8) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let log = crate::ledger::OwnLog::new(
            Store::create(dir.path()).unwrap(),
            crate::ledger::LedgerKey::from_seed([6; 32]),
        );
        for height in 0..4 {
            let mut events = crate::ledger::demo::demo_events(&log.validator(), height, 4, 3000);
            if let crate::ledger::Event::Transcript(t) = &mut events[1] {
                t.messages[0].content = String::from_utf8(vec![marker; 2000]).unwrap();
            }
            log.append(events, 1_000 + height).unwrap();
        }
        drop(log);
        let file = dir.path().join(STORE_FILE);
        (dir, file)
    }

    #[test]
    fn the_pass_alone_stops_after_the_checksums_and_still_finds_a_changed_page() {
        let (dir, file) = store_with(b'q');
        // Stopped at redb's "checksums verified" point: no database kept. A redb whose
        // repair no longer reports that point would keep one (and read every page twice).
        let (db, _, recovery) = read_open::open_read_only(dir.path(), read_open::Pass::ChecksumsOnly, 1 << 20).unwrap();
        assert!(db.is_none(), "the pass ran to the allocator's rebuild");
        assert_eq!(recovery, None);
        // The same file with one byte of a transcript changed: the pass alone refuses it,
        // as the whole checked open does.
        let mut bytes = std::fs::read(&file).unwrap();
        let at = bytes.windows(64).position(|w| w.iter().all(|b| *b == b'q')).expect("the marker is in the file");
        bytes[at + 10] = b'r';
        std::fs::write(&file, &bytes).unwrap();
        for pass in [read_open::Pass::ChecksumsOnly, read_open::Pass::Full] {
            let error =
                read_open::open_read_only(dir.path(), pass, 1 << 20).err().unwrap_or_else(|| panic!("{pass:?} passed"));
            assert!(matches!(error, StoreError::Corrupt(_)), "{pass:?}: {error}");
        }
        // Unchecked, the open itself goes through: the pass is what found the change.
        assert!(read_open::open_read_only(dir.path(), read_open::Pass::Skip, 1 << 20).is_ok());
    }
}
