//! Streams of a chain's stored blocks in height order, one at a time or in batches:
//! what verification, replays, exports and reindexing read. A stream that would start
//! below a chain's pruned height (ledger-spec/05) is refused as pruned rather than
//! skipping to the blocks it holds; `Store::stream_blocks_fetching` reads pruned bodies
//! back from the log's archive first.

use super::layout::*;
use super::prune::pruned_below;
use super::{eng, Store, StoreError};
use crate::bytes::ValidatorKey;
use redb::ReadTransaction;

/// Hands every stored block of `validator` from `from` to `to` (both included) to `sink`
/// one at a time, in height order, each joined from its pieces; stops early if `sink`
/// returns false. Several of these run at once over one read transaction in a parallel
/// verify, each holding one block at a time.
pub fn for_each_block_in(
    txn: &ReadTransaction,
    validator: &ValidatorKey,
    from: u64,
    to: u64,
    sink: &mut dyn FnMut(u64, &[u8]) -> bool,
) -> Result<(), StoreError> {
    let blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
    for_each_block(&blocks, validator, from, Some(to), &mut |height, bytes| sink(height, bytes))
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
    let below = pruned_below(txn, validator)?;
    if from_height < below {
        return Err(StoreError::Pruned { validator: *validator, height: from_height });
    }
    let blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
    let mut batch = Vec::new();
    let mut size = 0;
    let mut stopped = false;
    let read = for_each_block(&blocks, validator, from_height, None, &mut |height, bytes| {
        size += bytes.len();
        batch.push((height, std::mem::take(bytes)));
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

impl Store {
    /// Every block of `validator` from `from` on, in height order, to `send` (false:
    /// stop): pruned bodies (ledger-spec/05) fetched back from the log's archive a bundle
    /// at a time, each checked against its kept record, then the stored blocks in
    /// batches of about `batch_bytes` ([`stream_blocks_from`]). What a replay, an export
    /// or a publish of a pruned store reads.
    pub fn stream_blocks_fetching(
        &self,
        txn: &ReadTransaction,
        validator: &ValidatorKey,
        from: u64,
        batch_bytes: usize,
        send: &mut dyn FnMut(Vec<(u64, Vec<u8>)>) -> bool,
    ) -> Result<(), StoreError> {
        let pruned_below = pruned_below(txn, validator)?;
        let mut at = from;
        while at < pruned_below {
            let to = (at / super::PRUNED_FETCH_BLOCKS * super::PRUNED_FETCH_BLOCKS + super::PRUNED_FETCH_BLOCKS - 1)
                .min(pruned_below - 1);
            if !send(self.fetch_pruned_range(validator, at, to)?) {
                return Ok(());
            }
            at = to + 1;
        }
        stream_blocks_from(txn, validator, at, batch_bytes, send)
    }
}
