//! The block export format: a log as the exact block bytes of ledger-spec/03, framed so
//! that any verifier can read it without `af`'s store (ledger-spec/08-export.md).
//!
//! ```text
//! file   = MAGIC || record*
//! record = u32 LE n_bytes || block bytes     (n_bytes <= MAX_BLOCK_BYTES)
//! ```
//! Each validator's blocks are written from height 0 in height order; validators in key
//! order. Reading is bounded: a length is checked before anything is allocated for it.

use super::block::{check_link, BlockError, SealedBlock, Tip};
use super::store::{self, Store, StoreError};
use crate::bytes::ValidatorKey;
use crate::limits::MAX_BLOCK_BYTES;
use std::collections::BTreeMap;
use std::io::{Read, Write};

/// The first bytes of a block export.
pub const MAGIC: &[u8; 20] = b"af-ledger-blocks/v1\n";

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("writing the export: {0}")]
    Write(std::io::Error),
    #[error("reading the export: {0}")]
    Read(std::io::Error),
    #[error("not a block export: it does not start with {:?}", String::from_utf8_lossy(MAGIC))]
    Magic,
    #[error("record {record} (at byte {offset}) ends early: the export is truncated")]
    Truncated { record: u64, offset: u64 },
    #[error("record {record} (at byte {offset}) claims {n_bytes} bytes, over the block limit of {MAX_BLOCK_BYTES}")]
    TooLarge { record: u64, offset: u64, n_bytes: u64 },
    #[error("record {record}: block {height} of validator {validator}: {source}")]
    Block {
        record: u64,
        validator: ValidatorKey,
        height: u64,
        #[source]
        source: BlockError,
    },
    #[error("record {record}: {source}")]
    Undecodable {
        record: u64,
        #[source]
        source: BlockError,
    },
    #[error("validator {validator} is missing block {height} in the store")]
    Missing { validator: ValidatorKey, height: u64 },
}

/// Writes every event of `validators`' chains as JSON lines (`af ledger export`'s
/// default format): validator, height, event index, block hash and the event
/// (ledger-spec/10). A missing block is an error, said after the lines before it.
pub fn write_events_jsonl(store: &Store, validators: &[ValidatorKey], out: &mut dyn Write) -> Result<(), ExportError> {
    for validator in validators {
        let Some(tip) = store.tip(validator)? else { continue };
        for height in 0..=tip.height {
            let block =
                store.block(validator, height)?.ok_or(ExportError::Missing { validator: *validator, height })?;
            for (event_idx, event) in block.block.events.iter().enumerate() {
                let line = serde_json::json!({
                    "validator": validator, "height": height, "event_idx": event_idx,
                    "block_hash": block.hash, "event": event,
                });
                serde_json::to_writer(&mut *out, &line).map_err(|e| ExportError::Write(e.into()))?;
                out.write_all(b"\n").map_err(ExportError::Write)?;
            }
        }
    }
    Ok(())
}

/// Writes every block of `validators` (each from height 0 to its tip), reading through
/// the store: returns the number of blocks written.
pub fn write_blocks(store: &Store, validators: &[ValidatorKey], out: &mut dyn Write) -> Result<u64, ExportError> {
    out.write_all(MAGIC).map_err(ExportError::Write)?;
    let txn = store.read()?;
    let mut n_blocks = 0u64;
    for validator in validators {
        let Some(tip) = store.tip(validator)? else { continue };
        let mut next = 0u64;
        let mut failed = None;
        // Pruned bodies (ledger-spec/05) come back from the log's archive, as a replay
        // reads them.
        store.stream_blocks_fetching(&txn, validator, 0, crate::limits::VERIFY_BATCH_BYTES, &mut |batch| {
            for (height, bytes) in batch {
                if height != next || height > tip.height {
                    failed = Some(ExportError::Missing { validator: *validator, height: next });
                    return false;
                }
                let written = out
                    .write_all(&(bytes.len() as u32).to_le_bytes())
                    .and_then(|()| out.write_all(&bytes))
                    .map_err(ExportError::Write);
                if let Err(error) = written {
                    failed = Some(error);
                    return false;
                }
                next += 1;
                n_blocks += 1;
            }
            true
        })?;
        if let Some(error) = failed {
            return Err(error);
        }
        if next != tip.height + 1 {
            return Err(ExportError::Missing { validator: *validator, height: next });
        }
    }
    Ok(n_blocks)
}

/// Reads records one at a time from a block export, checking each block's bytes and
/// signature (the rules of ledger-spec/03 that need no other block).
pub struct BlockReader<R> {
    input: R,
    record: u64,
    offset: u64,
}

impl<R: Read> BlockReader<R> {
    /// Checks the magic; the reader is then at the first record.
    pub fn new(mut input: R) -> Result<BlockReader<R>, ExportError> {
        let mut magic = [0u8; MAGIC.len()];
        read_full(&mut input, &mut magic).map_err(ExportError::Read)?.then_some(()).ok_or(ExportError::Magic)?;
        if &magic != MAGIC {
            return Err(ExportError::Magic);
        }
        Ok(BlockReader { input, record: 0, offset: MAGIC.len() as u64 })
    }

    /// The next block, or `None` at the end of the export.
    pub fn next_block(&mut self) -> Result<Option<SealedBlock>, ExportError> {
        let (record, offset) = (self.record, self.offset);
        let mut length = [0u8; 4];
        let mut first = [0u8; 1];
        // A clean end is only possible between records.
        if !read_full(&mut self.input, &mut first).map_err(ExportError::Read)? {
            return Ok(None);
        }
        length[0] = first[0];
        if !read_full(&mut self.input, &mut length[1..]).map_err(ExportError::Read)? {
            return Err(ExportError::Truncated { record, offset });
        }
        let n_bytes = u64::from(u32::from_le_bytes(length));
        if n_bytes > MAX_BLOCK_BYTES {
            return Err(ExportError::TooLarge { record, offset, n_bytes });
        }
        let mut bytes = Vec::new();
        let read = (&mut self.input).take(n_bytes).read_to_end(&mut bytes).map_err(ExportError::Read)?;
        if read as u64 != n_bytes {
            return Err(ExportError::Truncated { record, offset });
        }
        self.record += 1;
        self.offset += 4 + n_bytes;
        let sealed = SealedBlock::from_bytes(bytes).map_err(|source| ExportError::Undecodable { record, source })?;
        Ok(Some(sealed))
    }

    pub fn records_read(&self) -> u64 {
        self.record
    }
}

/// Fills `buf` completely; `false` if the input ended before the first byte.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) if n == 0 => return Ok(false),
            Ok(0) => return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the input ends mid-record")),
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// What an export held, chain by chain, once every block and link was checked.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ExportSummary {
    pub n_blocks: u64,
    pub tips: BTreeMap<ValidatorKey, Tip>,
}

/// Checks the links between consecutive blocks of one export, as a verifier holding only
/// the export does: each validator's blocks start at height 0 and follow ledger-spec/03.
#[derive(Default)]
pub struct LinkChecker {
    summary: ExportSummary,
}

impl LinkChecker {
    pub fn check(&mut self, record: u64, block: &SealedBlock) -> Result<(), ExportError> {
        let header = &block.decoded().block.header;
        let prev = self.summary.tips.get(&header.validator);
        check_link(&header.validator, prev, header).map_err(|source| ExportError::Block {
            record,
            validator: header.validator,
            height: header.height,
            source,
        })?;
        self.summary.tips.insert(header.validator, block.tip());
        self.summary.n_blocks += 1;
        Ok(())
    }

    pub fn finish(self) -> ExportSummary {
        self.summary
    }
}

/// What an import did: the export's chains as verified, the blocks stored and already
/// held, and why it stopped early, if it did (the verified blocks before that are kept).
#[derive(Clone, Debug, Default)]
pub struct Imported {
    pub summary: ExportSummary,
    pub n_new: u64,
    pub n_known: u64,
    pub error: Option<String>,
}

/// Verifies every record of an export (ledger-spec/08) and stores the verified blocks in
/// batches, one durable transaction each, the link to the stored tip re-checked inside
/// it. On a bad record it stops and keeps the verified blocks before it: each is a valid
/// prefix of its chain. `progress` is told the records read so far.
pub fn import<R: Read>(
    store: &Store,
    reader: &mut BlockReader<R>,
    progress: &mut dyn FnMut(u64),
) -> Result<Imported, StoreError> {
    let mut links = LinkChecker::default();
    let mut done = Imported::default();
    let (mut pending, mut pending_bytes) = (Vec::new(), 0usize);
    let flush = |pending: &mut Vec<SealedBlock>, done: &mut Imported| -> Result<Option<String>, StoreError> {
        let (appended, refused) = store.append_batch(pending)?;
        for result in appended {
            match result {
                store::Appended::New(_) => done.n_new += 1,
                store::Appended::AlreadyStored => done.n_known += 1,
            }
        }
        pending.clear();
        Ok(refused.map(|(_, error)| error.to_string()))
    };
    let stopped: Option<String> = loop {
        let record = reader.records_read();
        let block = match reader.next_block() {
            Ok(Some(block)) => block,
            Ok(None) => break None,
            Err(error) => break Some(error.to_string()),
        };
        if let Err(error) = links.check(record, &block) {
            break Some(error.to_string());
        }
        pending_bytes += block.bytes().len();
        pending.push(block);
        if pending.len() >= 256 || pending_bytes >= crate::limits::VERIFY_BATCH_BYTES {
            pending_bytes = 0;
            if let Some(why) = flush(&mut pending, &mut done)? {
                break Some(why);
            }
        }
        progress(record + 1);
    };
    let refused = flush(&mut pending, &mut done)?;
    done.error = stopped.or(refused);
    done.summary = links.finish();
    Ok(done)
}
