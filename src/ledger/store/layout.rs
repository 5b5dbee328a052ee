//! The store's layout on redb (ledger-spec/05-store.md): its tables, the keys of a
//! block's pieces, the tip and location codecs, and the reads and writes of whole blocks
//! over them, used by `Store` and by the readers that hold a transaction of their own.

use super::error::{eng, StoreError, SCHEMA_VERSION};

use crate::bytes::{Hash32, SignatureBytes, ValidatorKey};
use crate::ledger::block::{BlockHeader, Tip};
use redb::{Database, MultimapTableDefinition, ReadTransaction, ReadableMultimapTable, ReadableTable, TableDefinition};
use std::path::{Path, PathBuf};

/// `validator (32) || height (u64 BE) || chunk (u16 BE)` -> the block's next piece of
/// canonical bytes, its length as [`chunk_lengths`] says.
pub const BLOCKS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("blocks_v2");
/// Schema 1 kept each block as one value. redb gives a value larger than a page a run of
/// pages rounded up to a power of two (a 42 kB block took 64 kB), so a store was 1.4 to
/// 1.6x its blocks after compaction. A writer's open moves these into [`BLOCKS`].
pub(super) const BLOCKS_V1: TableDefinition<&[u8], &[u8]> = TableDefinition::new("blocks_v1");
/// The piece sizes, largest first: each with its key and redb's leaf header (54 bytes)
/// fills a run of 256, 128, ... 2 or 1 pages of 4 KiB exactly, so only a block's last
/// piece under a page wastes anything. A 1 MB block is 6 pieces, a 32 MiB one 33: each
/// piece is one read, and 64 KiB pieces at most made reading out of the store 1.5x slower.
pub const CHUNK_SIZES: [usize; 9] = [1_048_512, 524_224, 262_080, 131_008, 65_472, 32_704, 16_320, 8_128, 4_032];
// A block's header and signature sit in its first piece, and every piece has a number.
const _: () = assert!(crate::ledger::block::EVENTS_OFFSET + 8 <= CHUNK_SIZES[8]);
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
/// `validator (32)` -> its log's rotation block (`RotatedAt::encode`, ledger-spec/16): no
/// block of the log is stored past it. Absent in stores no rotation has reached.
pub const ROTATIONS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("rotations_v1");
/// `validator (32)` -> the key its log's block 0 names as its predecessor
/// (`KeySucceeded.old_key`, ledger-spec/16), for logs whose block 0 is one.
pub const SUCCESSIONS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("successions_v1");
/// Store-level facts: `schema` -> u32 LE.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

pub const STORE_FILE: &str = "ledger.redb";

/// The lowest height of `validator` with a piece stored.
pub fn first_stored_height(txn: &ReadTransaction, validator: &ValidatorKey) -> Result<Option<u64>, StoreError> {
    edge_height(&txn.open_table(BLOCKS).map_err(eng("opening blocks"))?, validator, Edge::First)
}

/// Which end of a chain's key range [`edge_height`] reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Edge {
    First,
    Last,
}

/// The height in the first or last key of `validator`'s range in `table`, a table keyed
/// as [`BLOCKS`] is (the pruned groups' is too); `None` if the chain has no key there.
pub(super) fn edge_height(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    validator: &ValidatorKey,
    edge: Edge,
) -> Result<Option<u64>, StoreError> {
    let (start, end) = (chunk_key(validator, 0, 0), chunk_key(validator, u64::MAX, u16::MAX));
    let mut range = table.range::<&[u8]>(start.as_slice()..=end.as_slice()).map_err(eng("reading blocks"))?;
    let entry = match edge {
        Edge::First => range.next(),
        Edge::Last => range.next_back(),
    };
    match entry {
        None => Ok(None),
        Some(entry) => {
            let (key, _) = entry.map_err(eng("reading blocks"))?;
            Ok(Some(split_chunk_key(key.value())?.1))
        }
    }
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
pub(super) fn guarded<T>(doing: &'static str, read: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
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
                let table = txn.open_multimap_table($table).map_err(eng("opening an index"))?;
                for entry in table.iter().map_err(eng("scanning an index"))? {
                    let (key, values) = entry.map_err(eng("scanning an index"))?;
                    for value in values {
                        let value = value.map_err(eng("scanning an index"))?;
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

/// The entries of the challenge index whose key's first byte falls in part `part` of
/// `parts` equal ranges of 0..=255 (the first part also holds the empty key), as
/// [`scan_index`] hands them out: challenge ids are uniformly random, so the parts are
/// about equal and can be scanned side by side. `parts` is 1 to 256.
pub fn scan_challenge_index_part(
    txn: &ReadTransaction,
    (part, parts): (usize, usize),
    sink: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<(), StoreError> {
    assert!((1..=256).contains(&parts) && part < parts, "part {part} of {parts}");
    let bound = |i: usize| [(i * 256 / parts) as u8];
    let (low, high) = (bound(part), bound(part + 1));
    guarded("scanning an index", || {
        let table = txn.open_multimap_table(BY_CHALLENGE).map_err(eng("opening an index"))?;
        let range = match (part == 0, part + 1 == parts) {
            (true, true) => table.iter(),
            (true, false) => table.range::<&[u8]>(..high.as_slice()),
            (false, true) => table.range::<&[u8]>(low.as_slice()..),
            (false, false) => table.range::<&[u8]>(low.as_slice()..high.as_slice()),
        };
        for entry in range.map_err(eng("scanning an index"))? {
            let (key, values) = entry.map_err(eng("scanning an index"))?;
            for value in values {
                let value = value.map_err(eng("scanning an index"))?;
                if !sink(key.value(), value.value()) {
                    return Ok(());
                }
            }
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

pub(super) fn split_chunk_key(key: &[u8]) -> Result<(ValidatorKey, u64, u16), StoreError> {
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
pub(super) fn insert_chunks(
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
        if blocks.insert(key.as_slice(), piece).map_err(eng("writing a block"))?.is_some() {
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
        .map_err(eng("removing a block"))?
    {
        entry.map_err(eng("removing a block"))?;
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
    // Its length first, so the bytes are copied into one buffer of that size a piece at a
    // time: a reader holds the block once, not its pieces' pages beside their copy.
    let Some(len) = block_len(blocks, validator, height)? else { return Ok(None) };
    let mut bytes = Vec::with_capacity(len);
    for entry in block_range(blocks, validator, height)? {
        let (_, piece) = entry.map_err(eng("reading blocks"))?;
        if bytes.len() + piece.value().len() > len {
            return Err(StoreError::Corrupt(format!("block {height} of validator {validator} grew while read")));
        }
        bytes.extend_from_slice(piece.value());
    }
    if bytes.len() != len {
        return Err(StoreError::Corrupt(format!("block {height} of validator {validator} changed while read")));
    }
    Ok(Some(bytes))
}

/// The pieces of one block, in order.
fn block_range<'t>(
    blocks: &'t impl ReadableTable<&'static [u8], &'static [u8]>,
    validator: &ValidatorKey,
    height: u64,
) -> Result<redb::Range<'t, &'static [u8], &'static [u8]>, StoreError> {
    let (start, end) = (chunk_key(validator, height, 0), chunk_key(validator, height, u16::MAX));
    blocks.range::<&[u8]>(start.as_slice()..=end.as_slice()).map_err(eng("reading blocks"))
}

/// The length of a stored block (None: not stored), its pieces checked as
/// [`for_each_block`] checks them, one piece held at a time: what a reader reserves
/// before it reads the block.
pub fn block_len(
    blocks: &impl ReadableTable<&'static [u8], &'static [u8]>,
    validator: &ValidatorKey,
    height: u64,
) -> Result<Option<usize>, StoreError> {
    let bad = |why: String| Err(StoreError::BadChunks { validator: *validator, height, why });
    let (mut lengths, mut len) = (Vec::new(), 0usize);
    for entry in block_range(blocks, validator, height)? {
        let (key, piece) = entry.map_err(eng("reading blocks"))?;
        let (_, _, chunk) = split_chunk_key(key.value())?;
        let n = piece.value().len();
        if usize::from(chunk) != lengths.len() {
            return bad(format!("chunk {chunk} where chunk {} belongs", lengths.len()));
        }
        if n == 0 || n > CHUNK_SIZES[0] {
            return bad(format!("chunk {chunk} holds {n} bytes"));
        }
        lengths.push(n);
        len += n;
        if len as u64 > crate::limits::MAX_BLOCK_BYTES {
            let limit = crate::limits::MAX_BLOCK_BYTES;
            return bad(format!("its pieces hold more than the largest block, {limit} bytes"));
        }
    }
    if lengths.is_empty() {
        return Ok(None);
    }
    if !lengths.iter().copied().eq(chunk_lengths(len)) {
        let want: Vec<usize> = chunk_lengths(len).collect();
        return bad(format!("pieces of {lengths:?} bytes, where a block of {len} bytes has {want:?}"));
    }
    Ok(Some(len))
}

/// Calls `sink` with each block of `validator` from `from` to `to` (or its last) in
/// height order, joined from its chunks; stops when `sink` returns false.
pub(super) fn for_each_block(
    blocks: &impl ReadableTable<&'static [u8], &'static [u8]>,
    validator: &ValidatorKey,
    from: u64,
    to: Option<u64>,
    sink: &mut dyn FnMut(u64, &mut Vec<u8>) -> bool,
) -> Result<(), StoreError> {
    let start = chunk_key(validator, from, 0);
    let end = chunk_key(validator, to.unwrap_or(u64::MAX), u16::MAX);
    let mut joiner = Joiner::default();
    // One buffer for every block the sink does not keep: the next block is joined into
    // memory the core has just read, not into a fresh allocation.
    let mut buffer = Vec::new();
    for entry in blocks.range::<&[u8]>(start.as_slice()..=end.as_slice()).map_err(eng("reading blocks"))? {
        let (key, value) = entry.map_err(eng("reading blocks"))?;
        let (_, height, chunk) = split_chunk_key(key.value())?;
        if let Some(done) = joiner.done_before(validator, height, &mut buffer)? {
            if !sink(done, &mut buffer) {
                return Ok(());
            }
        }
        joiner.push(validator, height, chunk, value)?;
    }
    if let Some(height) = joiner.finish(validator, &mut buffer)? {
        sink(height, &mut buffer);
    }
    Ok(())
}

/// Joins a chain's pieces, in key order, back into blocks, refusing every layout but the
/// one [`put_block`] writes: pieces numbered from 0 with no gap, of the lengths
/// [`chunk_lengths`] gives for the block's length. So a block has one stored form, and a
/// lost, short or extra piece is a fault of that block. It holds a block's pieces as
/// redb hands them out (no copy) and copies them once, into the caller's buffer.
#[derive(Default)]
pub(super) struct Joiner<'a> {
    /// The block being joined: its height and its pieces, as redb hands them out (their
    /// pages stay shared until the block is joined).
    current: Option<(u64, Vec<redb::AccessGuard<'a, &'static [u8]>>)>,
    /// The bytes of those pieces.
    len: usize,
}

impl<'a> Joiner<'a> {
    /// The block joined so far, if a piece of `height` cannot belong to it.
    pub(super) fn done_before(
        &mut self,
        validator: &ValidatorKey,
        height: u64,
        into: &mut Vec<u8>,
    ) -> Result<Option<u64>, StoreError> {
        match &self.current {
            Some((at, _)) if *at != height => self.finish(validator, into),
            _ => Ok(None),
        }
    }

    /// Adds one piece, after [`Joiner::done_before`] handed out the block before it.
    pub(super) fn push(
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
    /// length gives. The block's bytes replace what `into` held; its height is returned.
    pub(super) fn finish(&mut self, validator: &ValidatorKey, into: &mut Vec<u8>) -> Result<Option<u64>, StoreError> {
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
        into.clear();
        into.reserve(len);
        for piece in &pieces {
            into.extend_from_slice(piece.value());
        }
        Ok(Some(height))
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

/// The first bytes of the store file (redb's header), fewer if the file is shorter.
pub(super) fn read_header(path: &Path) -> Result<Vec<u8>, StoreError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| io_open_error(path, e))?;
    let mut header = Vec::with_capacity(crate::ledger::readonly::REDB_HEADER_BYTES);
    file.take(crate::ledger::readonly::REDB_HEADER_BYTES as u64)
        .read_to_end(&mut header)
        .map_err(|e| io_open_error(path, e))?;
    Ok(header)
}

pub(super) fn existing_store_file(dir: &Path) -> Result<PathBuf, StoreError> {
    let path = dir.join(STORE_FILE);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_file() => Ok(path),
        Ok(_) => Err(StoreError::Open { path, message: "not a regular file".into() }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(StoreError::Missing(path)),
        Err(e) => Err(io_open_error(&path, e)),
    }
}

pub(super) fn io_open_error(path: &Path, error: std::io::Error) -> StoreError {
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
pub(super) fn open_database(
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

pub(super) fn check_schema_bytes(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let found = <[u8; 4]>::try_from(bytes)
        .map(u32::from_le_bytes)
        .map_err(|_| StoreError::Corrupt("schema version record is not 4 bytes".into()))?;
    if found != SCHEMA_VERSION && found != super::PRUNED_SCHEMA_VERSION {
        return Err(StoreError::Schema { path: path.to_owned(), found });
    }
    Ok(())
}

/// Header and signature of a stored block, decoded without its events (for evidence).
pub fn stored_header(bytes: &[u8]) -> Result<(BlockHeader, SignatureBytes), StoreError> {
    use crate::ledger::block::{EVENTS_OFFSET, HEADER_BYTES};
    if bytes.len() < EVENTS_OFFSET {
        return Err(StoreError::Corrupt("stored block shorter than header and signature".into()));
    }
    let header = crate::ledger::codec::decode_canonical(&bytes[..HEADER_BYTES], "block header", HEADER_BYTES as u64)
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok((header, SignatureBytes(bytes[HEADER_BYTES..EVENTS_OFFSET].try_into().expect("64"))))
}

pub fn tips_in(txn: &ReadTransaction) -> Result<Vec<(ValidatorKey, Tip)>, StoreError> {
    let tips = txn.open_table(TIPS).map_err(eng("opening tips"))?;
    let mut out = Vec::new();
    for entry in tips.iter().map_err(eng("listing tips"))? {
        let (key, value) = entry.map_err(eng("listing tips"))?;
        let validator = <[u8; 32]>::try_from(key.value())
            .map_err(|_| StoreError::Corrupt(format!("tip key of {} bytes", key.value().len())))?;
        out.push((ValidatorKey(validator), decode_tip(value.value())?));
    }
    Ok(out)
}

/// Every validator that has at least one block stored, found by skipping from one
/// validator's key range to the next (cheap even for long chains).
pub fn validators_with_blocks(txn: &ReadTransaction) -> Result<Vec<ValidatorKey>, StoreError> {
    validators_in(&txn.open_table(BLOCKS).map_err(eng("opening blocks"))?)
}

/// Every validator with a key in `table`, a table keyed as [`BLOCKS`] is (the pruned
/// groups' is too), one range step per validator.
pub(super) fn validators_in(
    blocks: &impl ReadableTable<&'static [u8], &'static [u8]>,
) -> Result<Vec<ValidatorKey>, StoreError> {
    let mut out = Vec::new();
    let mut from = [0u8; 42].to_vec();
    loop {
        let mut range = blocks.range::<&[u8]>(from.as_slice()..).map_err(eng("scanning blocks"))?;
        let Some(entry) = range.next() else { break };
        let (key, _) = entry.map_err(eng("scanning blocks"))?;
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
pub(super) fn next_key_prefix(prefix: &[u8; 32]) -> Option<[u8; 32]> {
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

/// The highest height of `validator` with a piece stored, read from the last key of its
/// range (nothing is taken from the tip record): where a parallel verify splits a chain.
pub fn last_stored_height(txn: &ReadTransaction, validator: &ValidatorKey) -> Result<Option<u64>, StoreError> {
    edge_height(&txn.open_table(BLOCKS).map_err(eng("opening blocks"))?, validator, Edge::Last)
}
