//! The on-disk block store, on redb: every validator's chain (our own and verified
//! copies of peers'), the tip of each, and indexes from challenge id and miner hotkey
//! to where their transcripts sit.
//!
//! One append is one redb write transaction with `Durability::Immediate`: when
//! [`Store::append`] returns, the block and its index entries are fsync'd. The store
//! re-checks the link to the stored tip inside that transaction, so it can never hold
//! a chain with a gap or a fork, whoever calls it. Layout: ledger-spec/05-store.md.

use super::block::{check_link, decode_block, BlockError, BlockHeader, SealedBlock, Tip};
use crate::bytes::{ChallengeId, Hash32, SignatureBytes, ValidatorKey};
use redb::{
    Database, MultimapTableDefinition, ReadTransaction, ReadableDatabase, ReadableMultimapTable, ReadableTable,
    TableDefinition,
};
use std::path::{Path, PathBuf};

/// `validator (32) || height (u64 BE) || chunk (u16 BE)` -> the block's next piece of
/// canonical bytes, its length as [`chunk_lengths`] says.
pub const BLOCKS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("blocks_v2");
/// Schema 1 kept each block as one value. redb gives a value larger than a page a run of
/// pages rounded up to a power of two (a 42 kB block took 64 kB), so a store was 1.4 to
/// 1.6x its blocks after compaction. A writer's open moves these into [`BLOCKS`].
const BLOCKS_V1: TableDefinition<&[u8], &[u8]> = TableDefinition::new("blocks_v1");
/// The piece sizes, largest first: each with its key and redb's leaf header (54 bytes)
/// fills a run of 256, 128, ... 2 or 1 pages of 4 KiB exactly, so only a block's last
/// piece under a page wastes anything. A 1 MB block is 6 pieces, a 32 MiB one 33: each
/// piece is one read, and 64 KiB pieces at most made reading out of the store 1.5x slower.
pub const CHUNK_SIZES: [usize; 9] = [1_048_512, 524_224, 262_080, 131_008, 65_472, 32_704, 16_320, 8_128, 4_032];
// A block's header and signature sit in its first piece, and every piece has a number.
const _: () = assert!(super::block::EVENTS_OFFSET + 8 <= CHUNK_SIZES[8]);
const _: () = assert!(crate::limits::MAX_BLOCK_BYTES as usize / CHUNK_SIZES[0] + 8 < u16::MAX as usize);

/// The lengths of the pieces a block of `len` bytes is stored in, in order: each is the
/// largest of [`CHUNK_SIZES`] that fits in what is left, else all that is left.
pub fn chunk_lengths(len: usize) -> impl Iterator<Item = usize> {
    let mut left = len;
    std::iter::from_fn(move || {
        let piece = CHUNK_SIZES.iter().copied().find(|s| *s <= left).unwrap_or(left);
        left -= piece;
        (piece > 0).then_some(piece)
    })
}
/// `validator (32)` -> `height (u64 LE) || block hash (32) || time_ms (u64 LE)`.
pub const TIPS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("tips_v1");
/// `challenge_id (32)` -> locations (44 bytes each, see [`Location::encode`]).
pub const BY_CHALLENGE: MultimapTableDefinition<&[u8], &[u8]> = MultimapTableDefinition::new("by_challenge_v1");
/// miner hotkey -> locations.
pub const BY_MINER: MultimapTableDefinition<&str, &[u8]> = MultimapTableDefinition::new("by_miner_v1");
/// Store-level facts: `schema` -> u32 LE.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

pub const SCHEMA_VERSION: u32 = 2;
pub const STORE_FILE: &str = "ledger.redb";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no ledger store at {0} (run `af ledger init --data DIR` first)")]
    Missing(PathBuf),
    #[error("cannot open ledger store {path}: {message}")]
    Open { path: PathBuf, message: String },
    /// Another process (a running `af validate` or `af node`) holds the store for writing.
    #[error(
        "ledger store {0} is locked: a running validator or node holds it for writing (stop it, read a copy, or read it over HTTP)"
    )]
    Locked(PathBuf),
    #[error("no permission to read ledger store {path}: {message}")]
    Permission { path: PathBuf, message: String },
    #[error("ledger store {0} was opened read-only and cannot be written")]
    ReadOnly(PathBuf),
    #[error(
        "ledger store {path} has schema version {found}, this build reads {SCHEMA_VERSION}{}",
        if *found < SCHEMA_VERSION { " (a writer's open upgrades it: `af ledger compact --data DIR` with the validator stopped, or start the validator)" } else { "" }
    )]
    Schema { path: PathBuf, found: u32 },
    #[error("storage engine error while {doing}: {message}")]
    Engine { doing: &'static str, message: String },
    /// The file system holding the store has no room left (ENOSPC): redb's commit failed
    /// whole, so what was durable before stays so.
    #[error(
        "the disk holding the ledger store is full (while {doing}): nothing already recorded is lost; free space, then run the same command to go on"
    )]
    DiskFull { doing: &'static str },
    /// An earlier write to this open store failed (a full disk, say): redb refuses every
    /// write from then on, until the store is opened again.
    #[error(
        "the ledger store refuses writes (while {doing}) since an earlier write failed: nothing already recorded is lost; fix the cause, then run the same command to go on"
    )]
    EarlierWriteFailed { doing: &'static str },
    #[error("block {height} of validator {validator} rejected: {source}")]
    Rejected {
        validator: ValidatorKey,
        height: u64,
        #[source]
        source: BlockError,
    },
    /// A different block is already stored at this height: the validator equivocated.
    #[error(
        "validator {validator} signed two different blocks at height {height}: stored {stored}, offered {offered}"
    )]
    Conflict { validator: ValidatorKey, height: u64, stored: Hash32, offered: Hash32 },
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A block's chunks are not the one layout the store writes (ledger-spec/05).
    #[error("block {height} of validator {validator} is stored in bad chunks: {why}")]
    BadChunks { validator: ValidatorKey, height: u64, why: String },
}

impl StoreError {
    /// Whether this error is a check that ran and found the store's bytes wrong (exit 3),
    /// as opposed to a store that could not be read at all (exit 1).
    pub fn is_integrity_fault(&self) -> bool {
        matches!(self, StoreError::Corrupt(_) | StoreError::Rejected { .. } | StoreError::BadChunks { .. })
    }
}

fn engine(doing: &'static str) -> impl Fn(redb::Error) -> StoreError {
    move |e| match e {
        // A page that fails its checksum while read: damage, said plainly (as at open).
        redb::Error::Corrupted(_) => StoreError::Corrupt(format!(
            "the store file is damaged: a page read while {doing} fails its checksum; restore it from a backup, \
             or fetch the logs again (af mirror, af ledger import)"
        )),
        redb::Error::Io(io) if is_disk_full(&io) => StoreError::DiskFull { doing },
        // redb refuses every write after one failed until the store is opened again.
        redb::Error::PreviousIo => StoreError::EarlierWriteFailed { doing },
        other => StoreError::Engine { doing, message: other.to_string() },
    }
}

/// ENOSPC, and the quota form of it (EDQUOT), by kind or by number.
fn is_disk_full(error: &std::io::Error) -> bool {
    matches!(error.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
        || matches!(error.raw_os_error(), Some(28 | 122))
}

macro_rules! eng {
    ($doing:expr) => {
        |e| engine($doing)(redb::Error::from(e))
    };
}

/// Where one event sits: validator, block height, index in the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Location {
    pub validator: ValidatorKey,
    pub height: u64,
    pub event_idx: u32,
}

impl Location {
    pub fn encode(&self) -> [u8; 44] {
        let mut out = [0u8; 44];
        out[..32].copy_from_slice(&self.validator.0);
        out[32..40].copy_from_slice(&self.height.to_be_bytes());
        out[40..].copy_from_slice(&self.event_idx.to_be_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        if bytes.len() != 44 {
            return Err(StoreError::Corrupt(format!("index entry of {} bytes, expected 44", bytes.len())));
        }
        Ok(Location {
            validator: ValidatorKey(bytes[..32].try_into().expect("32")),
            height: u64::from_be_bytes(bytes[32..40].try_into().expect("8")),
            event_idx: u32::from_be_bytes(bytes[40..].try_into().expect("4")),
        })
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "validator {} height {} event {}", self.validator, self.height, self.event_idx)
    }
}

/// Runs a read of redb's tables that decodes keys as UTF-8 (`by_miner`): redb unwraps
/// that decoding, so a crafted file with valid checksums could panic it. Caught, it is
/// reported as corruption.
fn guarded<T>(doing: &'static str, read: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read))
        .unwrap_or_else(|_| Err(StoreError::Corrupt(format!("the storage engine failed while {doing}"))))
}

/// Every entry of one index (`by_miner` if `by_miner`, else `by_challenge`) as
/// (key bytes, location bytes), in key order; stops early when `sink` returns false.
pub fn scan_index(
    txn: &ReadTransaction,
    by_miner: bool,
    sink: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<(), StoreError> {
    guarded("scanning an index", || {
        macro_rules! scan {
            ($table:expr, $as_bytes:ident) => {{
                let table = txn.open_multimap_table($table).map_err(eng!("opening an index"))?;
                for entry in table.iter().map_err(eng!("scanning an index"))? {
                    let (key, values) = entry.map_err(eng!("scanning an index"))?;
                    for value in values {
                        let value = value.map_err(eng!("scanning an index"))?;
                        if !sink(key.value().$as_bytes(), value.value()) {
                            return Ok(());
                        }
                    }
                }
            }};
        }
        if by_miner {
            scan!(BY_MINER, as_bytes);
        } else {
            scan!(BY_CHALLENGE, as_ref);
        }
        Ok(())
    })
}

/// The key of chunk `chunk` of block `height` of `validator` in [`BLOCKS`].
pub fn chunk_key(validator: &ValidatorKey, height: u64, chunk: u16) -> [u8; 42] {
    let mut key = [0u8; 42];
    key[..32].copy_from_slice(&validator.0);
    key[32..40].copy_from_slice(&height.to_be_bytes());
    key[40..].copy_from_slice(&chunk.to_be_bytes());
    key
}

fn split_chunk_key(key: &[u8]) -> Result<(ValidatorKey, u64, u16), StoreError> {
    if key.len() != 42 {
        return Err(StoreError::Corrupt(format!("block chunk key of {} bytes, expected 42", key.len())));
    }
    Ok((
        ValidatorKey(key[..32].try_into().expect("32")),
        u64::from_be_bytes(key[32..40].try_into().expect("8")),
        u16::from_be_bytes(key[40..].try_into().expect("2")),
    ))
}

/// Writes `bytes` as block `height` of `validator` in chunks, replacing whatever chunks
/// were stored there (the store's appends never replace; tests that tamper do).
pub fn put_block(
    blocks: &mut redb::Table<&[u8], &[u8]>,
    validator: &ValidatorKey,
    height: u64,
    bytes: &[u8],
) -> Result<(), StoreError> {
    remove_block(blocks, validator, height)?;
    insert_chunks(blocks, validator, height, bytes)
}

/// Writes the chunks of a block where none is stored (appends write above the tip, the
/// upgrade into an empty table): a chunk already there is a damaged store.
fn insert_chunks(
    blocks: &mut redb::Table<&[u8], &[u8]>,
    validator: &ValidatorKey,
    height: u64,
    bytes: &[u8],
) -> Result<(), StoreError> {
    let mut at = 0;
    for (chunk, len) in chunk_lengths(bytes.len()).enumerate() {
        let piece = &bytes[at..at + len];
        at += len;
        let key = chunk_key(validator, height, chunk as u16);
        if blocks.insert(key.as_slice(), piece).map_err(eng!("writing a block"))?.is_some() {
            return Err(StoreError::Corrupt(format!(
                "block {height} of validator {validator} was already stored where the tip says none is"
            )));
        }
    }
    Ok(())
}

/// Removes every chunk of block `height` of `validator`; whether there was any.
pub fn remove_block(
    blocks: &mut redb::Table<&[u8], &[u8]>,
    validator: &ValidatorKey,
    height: u64,
) -> Result<bool, StoreError> {
    let (start, end) = (chunk_key(validator, height, 0), chunk_key(validator, height, u16::MAX));
    let mut removed = false;
    for entry in blocks
        .extract_from_if::<&[u8], _>(start.as_slice()..=end.as_slice(), |_, _| true)
        .map_err(eng!("removing a block"))?
    {
        entry.map_err(eng!("removing a block"))?;
        removed = true;
    }
    Ok(removed)
}

/// Block `height` of `validator`, joined from its chunks (checked as [`Joiner`] does).
pub fn get_block(
    blocks: &impl ReadableTable<&'static [u8], &'static [u8]>,
    validator: &ValidatorKey,
    height: u64,
) -> Result<Option<Vec<u8>>, StoreError> {
    let mut found = None;
    for_each_block(blocks, validator, height, Some(height), &mut |_, bytes| {
        found = Some(bytes);
        false
    })?;
    Ok(found)
}

/// Calls `sink` with each block of `validator` from `from` to `to` (or its last) in
/// height order, joined from its chunks; stops when `sink` returns false.
fn for_each_block(
    blocks: &impl ReadableTable<&'static [u8], &'static [u8]>,
    validator: &ValidatorKey,
    from: u64,
    to: Option<u64>,
    sink: &mut dyn FnMut(u64, Vec<u8>) -> bool,
) -> Result<(), StoreError> {
    let start = chunk_key(validator, from, 0);
    let end = chunk_key(validator, to.unwrap_or(u64::MAX), u16::MAX);
    let mut joiner = Joiner::default();
    for entry in blocks.range::<&[u8]>(start.as_slice()..=end.as_slice()).map_err(eng!("reading blocks"))? {
        let (key, value) = entry.map_err(eng!("reading blocks"))?;
        let (_, height, chunk) = split_chunk_key(key.value())?;
        if let Some((done, bytes)) = joiner.done_before(validator, height)? {
            if !sink(done, bytes) {
                return Ok(());
            }
        }
        joiner.push(validator, height, chunk, value)?;
    }
    if let Some((height, bytes)) = joiner.finish(validator)? {
        sink(height, bytes);
    }
    Ok(())
}

/// Joins a chain's pieces, in key order, back into blocks, refusing every layout but the
/// one [`put_block`] writes: pieces numbered from 0 with no gap, of the lengths
/// [`chunk_lengths`] gives for the block's length. So a block has one stored form, and a
/// lost, short or extra piece is a fault of that block. It holds a block's pieces as
/// redb hands them out (no copy) and copies them once, into a buffer of the block's size.
#[derive(Default)]
struct Joiner<'a> {
    /// The block being joined: its height and its pieces, as redb hands them out (their
    /// pages stay shared until the block is joined).
    current: Option<(u64, Vec<redb::AccessGuard<'a, &'static [u8]>>)>,
    /// The bytes of those pieces.
    len: usize,
}

impl<'a> Joiner<'a> {
    /// The block joined so far, if a piece of `height` cannot belong to it.
    fn done_before(&mut self, validator: &ValidatorKey, height: u64) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
        match &self.current {
            Some((at, _)) if *at != height => self.finish(validator),
            _ => Ok(None),
        }
    }

    /// Adds one piece, after [`Joiner::done_before`] handed out the block before it.
    fn push(
        &mut self,
        validator: &ValidatorKey,
        height: u64,
        chunk: u16,
        piece: redb::AccessGuard<'a, &'static [u8]>,
    ) -> Result<(), StoreError> {
        let bad = |why: String| Err(StoreError::BadChunks { validator: *validator, height, why });
        let n = piece.value().len();
        if n == 0 || n > CHUNK_SIZES[0] {
            return bad(format!("chunk {chunk} holds {n} bytes"));
        }
        match &mut self.current {
            Some((_, pieces)) => {
                if usize::from(chunk) != pieces.len() {
                    return bad(format!("chunk {chunk} follows chunk {}", pieces.len() - 1));
                }
                // A crafted store cannot make a reader hold more than the largest block.
                if (self.len + n) as u64 > crate::limits::MAX_BLOCK_BYTES {
                    let limit = crate::limits::MAX_BLOCK_BYTES;
                    return bad(format!("its pieces hold more than the largest block, {limit} bytes"));
                }
                pieces.push(piece);
            }
            None if chunk != 0 => return bad(format!("its first chunk is numbered {chunk}")),
            None => self.current = Some((height, vec![piece])),
        }
        self.len += n;
        Ok(())
    }

    /// The last block, once every piece was pushed: its pieces must be the ones its
    /// length gives.
    fn finish(&mut self, validator: &ValidatorKey) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
        let Some((height, pieces)) = self.current.take() else { return Ok(None) };
        let len = std::mem::take(&mut self.len);
        if !pieces.iter().map(|p| p.value().len()).eq(chunk_lengths(len)) {
            let have: Vec<usize> = pieces.iter().map(|p| p.value().len()).collect();
            let want: Vec<usize> = chunk_lengths(len).collect();
            return Err(StoreError::BadChunks {
                validator: *validator,
                height,
                why: format!("pieces of {have:?} bytes, where a block of {len} bytes has {want:?}"),
            });
        }
        let mut bytes = Vec::with_capacity(len);
        for piece in &pieces {
            bytes.extend_from_slice(piece.value());
        }
        Ok(Some((height, bytes)))
    }
}

pub fn encode_tip(tip: &Tip) -> [u8; 48] {
    let mut out = [0u8; 48];
    out[..8].copy_from_slice(&tip.height.to_le_bytes());
    out[8..40].copy_from_slice(&tip.hash.0);
    out[40..].copy_from_slice(&tip.time_ms.to_le_bytes());
    out
}

pub fn decode_tip(bytes: &[u8]) -> Result<Tip, StoreError> {
    if bytes.len() != 48 {
        return Err(StoreError::Corrupt(format!("tip record of {} bytes, expected 48", bytes.len())));
    }
    Ok(Tip {
        height: u64::from_le_bytes(bytes[..8].try_into().expect("8")),
        hash: Hash32(bytes[8..40].try_into().expect("32")),
        time_ms: u64::from_le_bytes(bytes[40..].try_into().expect("8")),
    })
}

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
        let mut store = Store { db, path, read_only: false, recovery: None, upgraded: 0 };
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
        let mut store = Store { db, path, read_only: false, recovery: None, upgraded: 0 };
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
            let found = meta.get("schema").map_err(eng!("reading the schema version"))?;
            found.map(|bytes| bytes.value().to_vec())
        };
        if found.as_deref() != Some(1u32.to_le_bytes().as_slice()) {
            return Ok(0);
        }
        let txn = self.db.begin_write().map_err(eng!("starting the schema upgrade"))?;
        let mut moved = 0u64;
        {
            let old = txn.open_table(BLOCKS_V1).map_err(eng!("opening schema 1's blocks"))?;
            let mut blocks = txn.open_table(BLOCKS).map_err(eng!("opening blocks"))?;
            for entry in old.iter().map_err(eng!("reading schema 1's blocks"))? {
                let (key, value) = entry.map_err(eng!("reading schema 1's blocks"))?;
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
        txn.delete_table(BLOCKS_V1).map_err(eng!("dropping schema 1's blocks"))?;
        {
            let mut meta = txn.open_table(META).map_err(eng!("opening the store's meta table"))?;
            meta.insert("schema", SCHEMA_VERSION.to_le_bytes().as_slice()).map_err(eng!("writing schema"))?;
        }
        txn.commit().map_err(eng!("committing the schema upgrade"))?;
        Ok(moved)
    }

    /// Opens an existing store in `dir` for reading only: the file is opened read-only
    /// (a read-only copy works), never written, and shared with other readers. Before any
    /// table is read, redb's header and the checksum of every page of the committed trees
    /// are verified, so no byte of the file can make a later read panic, hang or allocate
    /// without bound. A store held by a running writer is [`StoreError::Locked`].
    pub fn open_read_only(dir: &Path) -> Result<Store, StoreError> {
        let path = existing_store_file(dir)?;
        let file = std::fs::File::open(&path).map_err(|e| io_open_error(&path, e))?;
        // The magic never changes, so it is checked before the open (redb would call a
        // file without it "not a redb database", which is a damaged store here); the commit
        // slots are checked after, under the open's lock.
        super::readonly::check_magic(&read_header(&path)?)
            .map_err(|why| StoreError::Corrupt(format!("{}: {why}", path.display())))?;
        let backend = super::readonly::ReadOnlyFile::new(file).map_err(|e| io_open_error(&path, e))?;
        let torn = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen_torn = torn.clone();
        let db = open_database(&path, crate::limits::STORE_READ_CACHE_BYTES, move |builder| {
            builder
                .set_check_integrity_on_open(true)
                .set_repair_callback(move |session| {
                    // redb reports progress 0.3 only when the newest commit fails its
                    // checksums and it falls back to the previous one, as its recovery after
                    // a crash does; the writes of that recovery stay in the overlay.
                    if session.progress() > 0.0 && session.progress() < 0.5 {
                        seen_torn.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                })
                .create_with_backend(backend)
        })?;
        // Read once the open holds its shared lock, so no writer can be mid-commit.
        let header = read_header(&path)?;
        let left_open = super::readonly::check_header(&header)
            .map_err(|why| StoreError::Corrupt(format!("{}: {why}", path.display())))?;
        let recovery = match (left_open, torn.load(std::sync::atomic::Ordering::SeqCst)) {
            (Some(why), true) => Some(format!(
                "{why}; its newest commit fails its page checksums (a write cut short), so the commit before it is read"
            )),
            (Some(why), false) => Some(why),
            // A file closed cleanly keeps no torn commit: a failing one there is a change.
            (None, true) => {
                return Err(StoreError::Corrupt(format!(
                    "{}: the newest commit fails its page checksums, in a file its writer closed",
                    path.display()
                )))
            }
            (None, false) => None,
        };
        let store = Store { db, path, read_only: true, recovery, upgraded: 0 };
        store.check_schema()?;
        Ok(store)
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

    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn writable(&self) -> Result<(), StoreError> {
        if self.read_only {
            return Err(StoreError::ReadOnly(self.path.clone()));
        }
        Ok(())
    }

    fn init_tables(&self) -> Result<(), StoreError> {
        let txn = self.db.begin_write().map_err(eng!("starting the init transaction"))?;
        {
            txn.open_table(BLOCKS).map_err(eng!("creating tables"))?;
            txn.open_table(TIPS).map_err(eng!("creating tables"))?;
            txn.open_multimap_table(BY_CHALLENGE).map_err(eng!("creating tables"))?;
            txn.open_multimap_table(BY_MINER).map_err(eng!("creating tables"))?;
            let mut meta = txn.open_table(META).map_err(eng!("creating tables"))?;
            let existing = meta.get("schema").map_err(eng!("reading the schema version"))?.map(|v| v.value().to_vec());
            match existing {
                None => {
                    meta.insert("schema", SCHEMA_VERSION.to_le_bytes().as_slice()).map_err(eng!("writing schema"))?;
                }
                Some(bytes) => check_schema_bytes(&self.path, &bytes)?,
            }
        }
        txn.commit().map_err(eng!("committing the init transaction"))
    }

    fn check_schema(&self) -> Result<(), StoreError> {
        let txn = self.read()?;
        let meta =
            txn.open_table(META).map_err(|e| StoreError::Open { path: self.path.clone(), message: e.to_string() })?;
        let found = meta.get("schema").map_err(eng!("reading the schema version"))?;
        match found {
            Some(bytes) => check_schema_bytes(&self.path, bytes.value()),
            None => Err(StoreError::Corrupt("no schema version recorded".into())),
        }
    }

    pub fn read(&self) -> Result<ReadTransaction, StoreError> {
        self.db.begin_read().map_err(eng!("starting a read transaction"))
    }

    /// Appends a sealed (decoded, signed) block to its validator's chain, durably.
    /// The link to the stored tip is checked inside the write transaction.
    pub fn append(&self, sealed: &SealedBlock) -> Result<Appended, StoreError> {
        self.writable()?;
        let txn = self.db.begin_write().map_err(eng!("starting an append"))?;
        let appended = Self::append_in(&txn, sealed)?;
        txn.commit().map_err(eng!("committing an append"))?;
        Ok(appended)
    }

    /// Appends consecutive blocks in one durable transaction (one fsync for all: what
    /// makes catching up on a long log fast). Stops at the first block refused as a
    /// `Conflict` or `Rejected`, keeping those before it; returns what was appended and
    /// the refused block's index and error. Any other error aborts the whole batch.
    pub fn append_batch(&self, sealed: &[SealedBlock]) -> Result<BatchAppended, StoreError> {
        self.writable()?;
        let txn = self.db.begin_write().map_err(eng!("starting an append"))?;
        let mut appended = Vec::with_capacity(sealed.len());
        let mut refused = None;
        for (index, block) in sealed.iter().enumerate() {
            match Self::append_in(&txn, block) {
                Ok(done) => appended.push(done),
                // Both are refused before anything is written: what came before stands.
                Err(error @ (StoreError::Conflict { .. } | StoreError::Rejected { .. })) => {
                    refused = Some((index, error));
                    break;
                }
                Err(other) => return Err(other),
            }
        }
        txn.commit().map_err(eng!("committing an append"))?;
        Ok((appended, refused))
    }

    fn append_in(txn: &redb::WriteTransaction, sealed: &SealedBlock) -> Result<Appended, StoreError> {
        let block = &sealed.decoded.block;
        let header = &block.header;
        let validator = header.validator;
        let appended = {
            let mut tips = txn.open_table(TIPS).map_err(eng!("opening tips"))?;
            let mut blocks = txn.open_table(BLOCKS).map_err(eng!("opening blocks"))?;
            let tip = match tips.get(validator.0.as_slice()).map_err(eng!("reading a tip"))? {
                Some(bytes) => Some(decode_tip(bytes.value())?),
                None => None,
            };
            let already_covered = tip.is_some_and(|tip| header.height <= tip.height);
            if already_covered {
                // At or below our tip: the same block again, or a second block at a
                // stored height (equivocation, if it is validly signed).
                // The header is in the first chunk.
                let first = chunk_key(&validator, header.height, 0);
                let stored = blocks.get(first.as_slice()).map_err(eng!("reading a block"))?.ok_or_else(|| {
                    StoreError::Corrupt(format!("tip is past height {} but no block is stored there", header.height))
                })?;
                let stored_hash = stored_header_hash(stored.value())?;
                if stored_hash == sealed.decoded.hash {
                    Appended::AlreadyStored
                } else {
                    return Err(StoreError::Conflict {
                        validator,
                        height: header.height,
                        stored: stored_hash,
                        offered: sealed.decoded.hash,
                    });
                }
            } else {
                check_link(&validator, tip.as_ref(), header).map_err(|source| StoreError::Rejected {
                    validator,
                    height: header.height,
                    source,
                })?;
                insert_chunks(&mut blocks, &validator, header.height, &sealed.bytes)?;
                let new_tip = sealed.tip();
                tips.insert(validator.0.as_slice(), encode_tip(&new_tip).as_slice()).map_err(eng!("writing a tip"))?;
                let mut by_challenge = txn.open_multimap_table(BY_CHALLENGE).map_err(eng!("opening an index"))?;
                let mut by_miner = txn.open_multimap_table(BY_MINER).map_err(eng!("opening an index"))?;
                // In key order: consecutive inserts then land in the same B-tree pages.
                let mut entries: Vec<(&[u8; 32], &str, [u8; 44])> = block
                    .events
                    .iter()
                    .enumerate()
                    .filter_map(|(event_idx, event)| {
                        let (challenge_id, hotkey) = event.index_keys()?;
                        let location = Location { validator, height: header.height, event_idx: event_idx as u32 };
                        Some((&challenge_id.0, hotkey, location.encode()))
                    })
                    .collect();
                entries.sort_unstable_by(|a, b| (a.0, &a.2).cmp(&(b.0, &b.2)));
                for (challenge_id, _, location) in &entries {
                    by_challenge.insert(challenge_id.as_slice(), location.as_slice()).map_err(eng!("indexing"))?;
                }
                entries.sort_unstable_by(|a, b| (a.1, &a.2).cmp(&(b.1, &b.2)));
                for (_, hotkey, location) in &entries {
                    by_miner.insert(*hotkey, location.as_slice()).map_err(eng!("indexing"))?;
                }
                Appended::New(new_tip)
            }
        };
        Ok(appended)
    }

    /// Drops both indexes and rebuilds them from the stored blocks, in one durable
    /// transaction; returns the number of transcripts indexed. Callers verify first.
    pub fn rebuild_indexes(&self) -> Result<u64, StoreError> {
        self.writable()?;
        let validators = {
            let txn = self.read()?;
            validators_with_blocks(&txn)?
        };
        let txn = self.db.begin_write().map_err(eng!("starting a reindex"))?;
        txn.delete_multimap_table(BY_CHALLENGE).map_err(eng!("dropping an index"))?;
        txn.delete_multimap_table(BY_MINER).map_err(eng!("dropping an index"))?;
        let mut n_entries = 0u64;
        {
            let blocks = txn.open_table(BLOCKS).map_err(eng!("opening blocks"))?;
            let mut by_challenge = txn.open_multimap_table(BY_CHALLENGE).map_err(eng!("opening an index"))?;
            let mut by_miner = txn.open_multimap_table(BY_MINER).map_err(eng!("opening an index"))?;
            for validator in validators {
                let mut failed = None;
                for_each_block(&blocks, &validator, 0, None, &mut |height, bytes| {
                    let indexed = (|| {
                        let (_, events) = super::block::decode_block_borrowed(&bytes)
                            .map_err(|source| StoreError::Rejected { validator, height, source })?;
                        for (event_idx, event) in events.iter().enumerate() {
                            if let Some((challenge_id, hotkey)) = event.index_keys() {
                                let location = Location { validator, height, event_idx: event_idx as u32 }.encode();
                                by_challenge
                                    .insert(challenge_id.0.as_slice(), location.as_slice())
                                    .map_err(eng!("indexing"))?;
                                by_miner.insert(hotkey, location.as_slice()).map_err(eng!("indexing"))?;
                                n_entries += 1;
                            }
                        }
                        Ok(())
                    })();
                    failed = indexed.err();
                    failed.is_none()
                })?;
                if let Some(error) = failed {
                    return Err(error);
                }
            }
        }
        txn.commit().map_err(eng!("committing a reindex"))?;
        Ok(n_entries)
    }

    pub fn tip(&self, validator: &ValidatorKey) -> Result<Option<Tip>, StoreError> {
        let txn = self.read()?;
        let tips = txn.open_table(TIPS).map_err(eng!("opening tips"))?;
        let tip = tips.get(validator.0.as_slice()).map_err(eng!("reading a tip"))?;
        tip.map(|bytes| decode_tip(bytes.value())).transpose()
    }

    /// Every validator with a chain in the store and its tip, ordered by key.
    pub fn tips(&self) -> Result<Vec<(ValidatorKey, Tip)>, StoreError> {
        let txn = self.read()?;
        tips_in(&txn)
    }

    pub fn block_bytes(&self, validator: &ValidatorKey, height: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let txn = self.read()?;
        let blocks = txn.open_table(BLOCKS).map_err(eng!("opening blocks"))?;
        get_block(&blocks, validator, height)
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
        let blocks = txn.open_table(BLOCKS).map_err(eng!("opening blocks"))?;
        let mut headers = Vec::new();
        for height in from..=to {
            let Some(value) =
                blocks.get(chunk_key(validator, height, 0).as_slice()).map_err(eng!("reading a block"))?
            else {
                break;
            };
            headers.push(stored_header(value.value())?);
        }
        Ok(headers)
    }

    /// The decoded block at `height`, re-checked: stored bytes are never trusted.
    pub fn block(
        &self,
        validator: &ValidatorKey,
        height: u64,
    ) -> Result<Option<super::block::DecodedBlock>, StoreError> {
        let Some(bytes) = self.block_bytes(validator, height)? else {
            return Ok(None);
        };
        let decoded =
            decode_block(&bytes).map_err(|source| StoreError::Rejected { validator: *validator, height, source })?;
        Ok(Some(decoded))
    }

    pub fn locate_challenge(&self, challenge_id: &ChallengeId) -> Result<Vec<Location>, StoreError> {
        let txn = self.read()?;
        let table = txn.open_multimap_table(BY_CHALLENGE).map_err(eng!("opening an index"))?;
        let values = table.get(challenge_id.0.as_slice()).map_err(eng!("reading an index"))?;
        let mut out = Vec::new();
        for value in values {
            out.push(Location::decode(value.map_err(eng!("reading an index"))?.value())?);
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
        let table = txn.open_multimap_table(BY_CHALLENGE).map_err(eng!("opening an index"))?;
        let mut out = Vec::new();
        for item in table.range(low.0.as_slice()..=high.0.as_slice()).map_err(eng!("reading an index"))? {
            let (key, _) = item.map_err(eng!("reading an index"))?;
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
            let table = txn.open_multimap_table(BY_MINER).map_err(eng!("opening an index"))?;
            let (mut kept, mut out) = (0usize, Vec::new());
            for value in table.get(hotkey).map_err(eng!("reading an index"))? {
                let location = Location::decode(value.map_err(eng!("reading an index"))?.value())?;
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
            let table = txn.open_multimap_table(BY_MINER).map_err(eng!("opening an index"))?;
            let values = table.get(hotkey).map_err(eng!("reading an index"))?;
            let total = values.len();
            let mut out = Vec::new();
            for value in values.skip(offset).take(limit) {
                out.push(Location::decode(value.map_err(eng!("reading an index"))?.value())?);
            }
            Ok((total, out))
        })
    }
}

/// The first bytes of the store file (redb's header), fewer if the file is shorter.
fn read_header(path: &Path) -> Result<Vec<u8>, StoreError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| io_open_error(path, e))?;
    let mut header = Vec::with_capacity(super::readonly::REDB_HEADER_BYTES);
    file.take(super::readonly::REDB_HEADER_BYTES as u64)
        .read_to_end(&mut header)
        .map_err(|e| io_open_error(path, e))?;
    Ok(header)
}

fn existing_store_file(dir: &Path) -> Result<PathBuf, StoreError> {
    let path = dir.join(STORE_FILE);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => Ok(path),
        Ok(_) => Err(StoreError::Open { path, message: "not a regular file".into() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing(path)),
        Err(e) => Err(io_open_error(&path, e)),
    }
}

fn io_open_error(path: &Path, error: std::io::Error) -> StoreError {
    match error.kind() {
        std::io::ErrorKind::PermissionDenied => {
            StoreError::Permission { path: path.to_owned(), message: error.to_string() }
        }
        std::io::ErrorKind::NotFound => StoreError::Missing(path.to_owned()),
        _ => StoreError::Open { path: path.to_owned(), message: error.to_string() },
    }
}

/// Runs one redb open with a page cache of `cache_bytes` and sorts its failure: locked, no permission,
/// corrupt (a check that ran and failed) or other. The engine is not ours, so a panic in
/// it is caught and reported as corruption rather than ending the process.
fn open_database(
    path: &Path,
    cache_bytes: usize,
    open: impl FnOnce(&mut redb::Builder) -> Result<Database, redb::DatabaseError>,
) -> Result<Database, StoreError> {
    let mut builder = redb::Builder::new();
    builder.set_cache_size(cache_bytes);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| open(&mut builder)));
    let error = match result {
        Ok(Ok(db)) => return Ok(db),
        Ok(Err(error)) => error,
        Err(_) => return Err(StoreError::Corrupt(format!("{}: the storage engine failed reading it", path.display()))),
    };
    use redb::{DatabaseError, StorageError};
    Err(match error {
        DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch => StoreError::Locked(path.to_owned()),
        // redb's own wording ("Primary is corrupted despite 2-phase commit") names its
        // internals; what it means for the operator is said instead.
        DatabaseError::Storage(StorageError::Corrupted(_)) => StoreError::Corrupt(format!(
            "{}: the file is damaged: its committed pages fail their checksums, so none of it can be trusted; \
             restore it from a backup, or fetch the logs again (af mirror, af ledger import)",
            path.display()
        )),
        DatabaseError::Storage(StorageError::Io(io)) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            StoreError::Corrupt(format!("{}: the file is shorter than its header says", path.display()))
        }
        DatabaseError::Storage(StorageError::Io(io)) => io_open_error(path, io),
        other => StoreError::Open { path: path.to_owned(), message: other.to_string() },
    })
}

fn check_schema_bytes(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let found = <[u8; 4]>::try_from(bytes)
        .map(u32::from_le_bytes)
        .map_err(|_| StoreError::Corrupt("schema version record is not 4 bytes".into()))?;
    if found != SCHEMA_VERSION {
        return Err(StoreError::Schema { path: path.to_owned(), found });
    }
    Ok(())
}

/// The hash of a stored block's header, without decoding its events.
fn stored_header_hash(bytes: &[u8]) -> Result<Hash32, StoreError> {
    let header_bytes = bytes
        .get(..super::block::HEADER_BYTES)
        .ok_or_else(|| StoreError::Corrupt("stored block shorter than a header".into()))?;
    Ok(Hash32(*blake3::hash(header_bytes).as_bytes()))
}

/// Header and signature of a stored block, decoded without its events (for evidence).
pub fn stored_header(bytes: &[u8]) -> Result<(BlockHeader, SignatureBytes), StoreError> {
    use super::block::{EVENTS_OFFSET, HEADER_BYTES};
    if bytes.len() < EVENTS_OFFSET {
        return Err(StoreError::Corrupt("stored block shorter than header and signature".into()));
    }
    let header = super::codec::decode_canonical(&bytes[..HEADER_BYTES], "block header", HEADER_BYTES as u64)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok((header, SignatureBytes(bytes[HEADER_BYTES..EVENTS_OFFSET].try_into().expect("64"))))
}

pub fn tips_in(txn: &ReadTransaction) -> Result<Vec<(ValidatorKey, Tip)>, StoreError> {
    let tips = txn.open_table(TIPS).map_err(eng!("opening tips"))?;
    let mut out = Vec::new();
    for entry in tips.iter().map_err(eng!("listing tips"))? {
        let (key, value) = entry.map_err(eng!("listing tips"))?;
        let validator = <[u8; 32]>::try_from(key.value())
            .map_err(|_| StoreError::Corrupt(format!("tip key of {} bytes", key.value().len())))?;
        out.push((ValidatorKey(validator), decode_tip(value.value())?));
    }
    Ok(out)
}

/// Every validator that has at least one block stored, found by skipping from one
/// validator's key range to the next (cheap even for long chains).
pub fn validators_with_blocks(txn: &ReadTransaction) -> Result<Vec<ValidatorKey>, StoreError> {
    let blocks = txn.open_table(BLOCKS).map_err(eng!("opening blocks"))?;
    let mut out = Vec::new();
    let mut from = [0u8; 42].to_vec();
    loop {
        let mut range = blocks.range::<&[u8]>(from.as_slice()..).map_err(eng!("scanning blocks"))?;
        let Some(entry) = range.next() else { break };
        let (key, _) = entry.map_err(eng!("scanning blocks"))?;
        let (validator, _, _) = split_chunk_key(key.value())?;
        out.push(validator);
        match next_key_prefix(&validator.0) {
            Some(next) => {
                from = next.to_vec();
                from.extend_from_slice(&[0u8; 10]);
            }
            None => break,
        }
    }
    Ok(out)
}

/// The smallest 32-byte string greater than every string starting with `prefix`.
fn next_key_prefix(prefix: &[u8; 32]) -> Option<[u8; 32]> {
    let mut next = *prefix;
    for i in (0..32).rev() {
        if next[i] == 0xff {
            next[i] = 0;
        } else {
            next[i] += 1;
            return Some(next);
        }
    }
    None
}

/// Streams every stored block of `validator` in height order to `sink`, in batches of
/// about `batch_bytes`, as (height, bytes). Stops early if `sink` returns false.
pub fn stream_blocks(
    txn: &ReadTransaction,
    validator: &ValidatorKey,
    batch_bytes: usize,
    sink: &mut dyn FnMut(Vec<(u64, Vec<u8>)>) -> bool,
) -> Result<(), StoreError> {
    stream_blocks_from(txn, validator, 0, batch_bytes, sink)
}

/// [`stream_blocks`] from `from_height` on (incremental replay starts past a snapshot).
pub fn stream_blocks_from(
    txn: &ReadTransaction,
    validator: &ValidatorKey,
    from_height: u64,
    batch_bytes: usize,
    sink: &mut dyn FnMut(Vec<(u64, Vec<u8>)>) -> bool,
) -> Result<(), StoreError> {
    let blocks = txn.open_table(BLOCKS).map_err(eng!("opening blocks"))?;
    let mut batch = Vec::new();
    let mut size = 0;
    let mut stopped = false;
    let read = for_each_block(&blocks, validator, from_height, None, &mut |height, bytes| {
        size += bytes.len();
        batch.push((height, bytes));
        if size >= batch_bytes || batch.len() >= crate::limits::VERIFY_BATCH_BLOCKS {
            size = 0;
            stopped = !sink(std::mem::take(&mut batch));
        }
        !stopped
    });
    // The blocks joined before a fault are delivered first, so a verifier checks them
    // and names the fault's height as the first bad one.
    if !batch.is_empty() && !stopped {
        sink(batch);
    }
    read
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
}
