//! Pruned bodies (ledger-spec/05): dropping the events of old blocks of other validators'
//! logs while keeping what verifies them (header, signature, leaf hashes), and reading
//! such a block back through a [`BodySource`] that fetches its body from the log's
//! archive and takes it only if it is that very block. A pruned body is never served to
//! peers from here: only the store's own readers fetch it back.

use super::{eng, layout::*, Store, StoreError, PRUNED_SCHEMA_VERSION};
use crate::bytes::{SignatureBytes, ValidatorKey};
use crate::ledger::block::{check_block_with, BlockHeader};
use crate::ledger::pruned::PrunedBlock;
use redb::{ReadTransaction, ReadableTable, TableDefinition};
use serde::Serialize;

/// Blocks kept without their events (ledger-spec/05, "Pruned bodies"), in groups of
/// consecutive heights: `validator (32) || height of the group's last block (u64 BE) ||
/// piece (u16 BE)` -> the group's [`crate::ledger::pruned::PrunedBlock`] records laid end
/// to end, stored in pieces as a block is (one record alone would take a B-tree entry
/// of a few hundred bytes, and redb's leaves, split as a chain grows, hold such entries
/// at about half their room: 2.4x the records' bytes, measured). A chain's pruned
/// heights are `0..p` without a gap, and none of them has pieces in [`BLOCKS`].
pub const PRUNED: TableDefinition<&[u8], &[u8]> = TableDefinition::new("pruned_v1");

/// A group holds at most this many blocks; the store prunes whole groups only.
pub const PRUNED_GROUP_BLOCKS: u64 = 256;
/// A group ends early once its records reach this many bytes (blocks of many events).
pub const PRUNED_GROUP_BYTES: usize = 1 << 20;

/// Pruned bodies a replay fetches back at a time: an archive bundle's worth (ledger-spec/11),
/// so each fetch reads one bundle, and at most 16 blocks are held.
pub const PRUNED_FETCH_BLOCKS: u64 = 16;

/// Where the bodies of a chain's pruned blocks were published when they were pruned:
/// `validator (32)` -> the archive's URL (UTF-8), whence readers fetch them back.
pub const PRUNED_FROM: TableDefinition<&[u8], &str> = TableDefinition::new("pruned_from_v1");

/// A read-only table of bytes to bytes, as [`PRUNED`] is.
pub type BytesTable = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The pruned table of a read transaction, where the store has one (schema 2 has none).
pub fn pruned_table(txn: &ReadTransaction) -> Result<Option<BytesTable>, StoreError> {
    match txn.open_table(PRUNED) {
        Ok(table) => Ok(Some(table)),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(eng("opening pruned blocks")(e)),
    }
}

/// The height below which `validator`'s blocks are pruned (0: none is), from the key of
/// its last group. A store without the table (schema 2) has none.
pub fn pruned_below(txn: &ReadTransaction, validator: &ValidatorKey) -> Result<u64, StoreError> {
    let Some(table) = pruned_table(txn)? else { return Ok(0) };
    Ok(edge_height(&table, validator, Edge::Last)?.map_or(0, |last| last.saturating_add(1)))
}

/// The archive a chain's pruned bodies were published to, if any is recorded.
pub fn pruned_from(txn: &ReadTransaction, validator: &ValidatorKey) -> Result<Option<String>, StoreError> {
    let table = match txn.open_table(PRUNED_FROM) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(eng("opening pruned blocks")(e)),
    };
    let url = table.get(validator.0.as_slice()).map_err(eng("reading pruned blocks"))?;
    Ok(url.map(|url| url.value().to_owned()))
}

/// A group's records, each `header || signature || leaf hashes` as long as its header's
/// `n_events` says, with the height its header names (checked by the readers: verify
/// links them, a fetched body must match its record).
pub fn group_records<'a>(
    validator: &ValidatorKey,
    last: u64,
    bytes: &'a [u8],
) -> Result<Vec<(u64, &'a [u8])>, StoreError> {
    PrunedBlock::split_records(bytes).map_err(|why| StoreError::BadChunks {
        validator: *validator,
        height: last,
        why: format!("a pruned group: {why}"),
    })
}

/// The record of pruned block `height` of `validator`, if the store keeps one.
pub fn pruned_record(
    txn: &ReadTransaction,
    validator: &ValidatorKey,
    height: u64,
) -> Result<Option<Vec<u8>>, StoreError> {
    let Some(table) = pruned_table(txn)? else { return Ok(None) };
    pruned_record_in(&table, validator, height)
}

/// [`pruned_record`] in an open table (a reader's or a writer's).
pub fn pruned_record_in(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    validator: &ValidatorKey,
    height: u64,
) -> Result<Option<Vec<u8>>, StoreError> {
    // The group holding `height` is the first whose last height is at least it.
    let (start, end) = (chunk_key(validator, height, 0), chunk_key(validator, u64::MAX, u16::MAX));
    let mut range = table.range::<&[u8]>(start.as_slice()..=end.as_slice()).map_err(eng("reading pruned blocks"))?;
    let Some(entry) = range.next() else { return Ok(None) };
    let (key, _) = entry.map_err(eng("reading pruned blocks"))?;
    let last = split_chunk_key(key.value())?.1;
    drop(range);
    let Some(group) = get_block(table, validator, last)? else { return Ok(None) };
    let records = group_records(validator, last, &group)?;
    Ok(records.into_iter().find(|(at, _)| *at == height).map(|(_, record)| record.to_vec()))
}

/// Hands each pruned record of `validator` from `from` to `to` (both included) to `sink`
/// in order, as (the height its header names, record bytes); stops when `sink` returns
/// false.
pub fn for_each_pruned_in(
    txn: &ReadTransaction,
    validator: &ValidatorKey,
    from: u64,
    to: u64,
    sink: &mut dyn FnMut(u64, &[u8]) -> bool,
) -> Result<(), StoreError> {
    let Some(table) = pruned_table(txn)? else { return Ok(()) };
    let mut failed = None;
    let mut going = true;
    for_each_block(&table, validator, from, None, &mut |last, group| {
        match group_records(validator, last, group) {
            Ok(records) => {
                for (height, record) in records {
                    if height < from {
                        continue;
                    }
                    if height > to || !sink(height, record) {
                        going = false;
                        break;
                    }
                }
            }
            Err(error) => {
                failed = Some(error);
                going = false;
            }
        }
        going && last < to
    })?;
    failed.map_or(Ok(()), Err)
}

/// Every validator with a pruned block (a chain whose blocks are all pruned has no
/// pieces, so [`validators_with_blocks`] does not list it).
pub fn validators_with_pruned(txn: &ReadTransaction) -> Result<Vec<ValidatorKey>, StoreError> {
    let Some(table) = pruned_table(txn)? else { return Ok(Vec::new()) };
    validators_in(&table)
}

/// Where a reader fetches pruned bodies back from: an archive of ledger-spec/11's layout
/// (`http::bodies`). The store names the archive each chain's bodies were published to.
pub trait BodySource: Send + Sync {
    /// Blocks `from..=to` of `validator` as the archive at `archive` holds them, in
    /// height order (fewer when the archive ends first). Unchecked: the store checks
    /// each against its kept record.
    fn fetch(&self, archive: &str, validator: &ValidatorKey, from: u64, to: u64)
        -> Result<Vec<(u64, Vec<u8>)>, String>;
}

/// The header and signature of block `height` of `validator`, whether its body is kept
/// (`blocks`) or pruned (`pruned`, where the store has the table).
pub fn header_in(
    blocks: &impl ReadableTable<&'static [u8], &'static [u8]>,
    pruned: Option<&impl ReadableTable<&'static [u8], &'static [u8]>>,
    validator: &ValidatorKey,
    height: u64,
) -> Result<Option<(BlockHeader, SignatureBytes)>, StoreError> {
    if let Some(value) = blocks.get(chunk_key(validator, height, 0).as_slice()).map_err(eng("reading a block"))? {
        return stored_header(value.value()).map(Some);
    }
    let Some(pruned) = pruned else { return Ok(None) };
    let Some(record) = pruned_record_in(pruned, validator, height)? else { return Ok(None) };
    let kept = PrunedBlock::decode(&record).map_err(|source| StoreError::Rejected {
        validator: *validator,
        height,
        source,
    })?;
    Ok(Some((kept.header, kept.signature)))
}

/// What [`Store::prune`] did to one chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pruned {
    pub validator: ValidatorKey,
    /// Heights below this are pruned now (0: none).
    pub below: u64,
    /// Blocks and events pruned by this call, and the block bytes they held.
    pub n_blocks: u64,
    pub n_events: u64,
    pub n_bytes: u64,
    /// Bytes the pruned records take (headers, signatures, leaf hashes).
    pub n_record_bytes: u64,
}

/// Block bytes pruned in one durable transaction: a long prune commits (and can be
/// stopped) as it goes, each step whole or not at all.
const PRUNE_STEP_BYTES: u64 = 256 * 1024 * 1024;

/// What of a store is pruned to headers ([`Store::pruned_summary`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrunedSummary {
    pub blocks: u64,
    pub logs: usize,
    pub archives: std::collections::BTreeSet<String>,
}

impl Store {
    /// Reads pruned bodies back through `source` from here on.
    pub fn set_bodies(&mut self, source: std::sync::Arc<dyn BodySource>) {
        self.bodies = Some(source);
    }

    /// The height below which `validator`'s blocks are pruned (0: none is).
    pub fn pruned_below(&self, validator: &ValidatorKey) -> Result<u64, StoreError> {
        pruned_below(&self.read()?, validator)
    }

    /// The archive `validator`'s pruned bodies were published to, if any is recorded.
    pub fn pruned_from(&self, validator: &ValidatorKey) -> Result<Option<String>, StoreError> {
        pruned_from(&self.read()?, validator)
    }

    /// What of this store is pruned to headers: how many blocks of how many logs, and
    /// the archives their bodies are in (sorted, once each), for read commands to say.
    pub fn pruned_summary(&self) -> Result<PrunedSummary, StoreError> {
        let mut summary = PrunedSummary::default();
        for (validator, _) in self.tips()? {
            let below = self.pruned_below(&validator)?;
            if below > 0 {
                summary.blocks += below;
                summary.logs += 1;
                summary.archives.insert(self.pruned_from(&validator)?.unwrap_or_else(|| "no archive recorded".into()));
            }
        }
        Ok(summary)
    }

    /// The bytes of block `height`, fetching a pruned body back from its archive when
    /// this store reads through a [`BodySource`]: taken only if it is the kept block
    /// (same header, signature and leaf hashes, and valid on its own).
    pub(super) fn fetch_pruned(&self, validator: &ValidatorKey, height: u64) -> Result<Vec<u8>, StoreError> {
        let mut bodies = self.fetch_pruned_range(validator, height, height)?;
        Ok(bodies.pop().expect("one height asked, one body").1)
    }

    /// Bodies of pruned blocks `from..=to` of `validator`, each checked against its kept
    /// record; an error unless every one of them came back.
    pub fn fetch_pruned_range(
        &self,
        validator: &ValidatorKey,
        from: u64,
        to: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let txn = self.read()?;
        let (Some(source), Some(archive)) = (&self.bodies, pruned_from(&txn, validator)?) else {
            return Err(StoreError::Pruned { validator: *validator, height: from });
        };
        let failed = |height: u64, why: String| StoreError::BodyFetch {
            validator: *validator,
            height,
            archive: archive.clone(),
            why,
        };
        // The kept records of the range, read once (a group holds up to 256 of them).
        let mut records = std::collections::BTreeMap::new();
        for_each_pruned_in(&txn, validator, from, to, &mut |height, record| {
            records.insert(height, record.to_vec());
            true
        })?;
        let fetched = source.fetch(&archive, validator, from, to).map_err(|why| failed(from, why))?;
        let mut out = Vec::with_capacity(fetched.len());
        for (expected, (height, bytes)) in (from..=to).zip(fetched) {
            if height != expected {
                return Err(failed(expected, format!("the archive answered height {height}")));
            }
            let record = records.remove(&height).ok_or(StoreError::Pruned { validator: *validator, height })?;
            let kept = PrunedBlock::decode(&record).map_err(|source| StoreError::Rejected {
                validator: *validator,
                height,
                source,
            })?;
            kept.check_body(&bytes).map_err(|why| failed(height, why.to_string()))?;
            out.push((height, bytes));
        }
        if out.len() as u64 != to - from + 1 {
            return Err(failed(from + out.len() as u64, "the archive does not hold it".into()));
        }
        Ok(out)
    }

    /// Prunes the blocks of `validator` below `below`, rounded down to a whole group of
    /// [`PRUNED_GROUP_BLOCKS`] (the chain's last block is never pruned), recording
    /// `archive` as where their bodies are: each becomes its header, signature and leaf
    /// hashes, its pieces and its index entries go. Re-checks each block first, so
    /// nothing invalid is kept in a form that hides it. Durable in steps of about 256 MiB
    /// of blocks, each whole groups and whole or not at all; `progress` after each step.
    /// The caller decides what may go (not its own log; only what the archive holds).
    pub fn prune(
        &self,
        validator: &ValidatorKey,
        below: u64,
        archive: &str,
        progress: &mut dyn FnMut(&Pruned),
    ) -> Result<Pruned, StoreError> {
        self.prune_in_groups(validator, below, archive, PRUNED_GROUP_BLOCKS, progress)
    }

    /// [`Store::prune`] in groups of `group_blocks` (1 to [`PRUNED_GROUP_BLOCKS`]): a
    /// simulation whose days hold fewer blocks than the subnet's (`benches/prune.rs`)
    /// scales its groups with them. Readers take groups of any size.
    pub fn prune_in_groups(
        &self,
        validator: &ValidatorKey,
        below: u64,
        archive: &str,
        group_blocks: u64,
        progress: &mut dyn FnMut(&Pruned),
    ) -> Result<Pruned, StoreError> {
        self.writable()?;
        let group_blocks = group_blocks.clamp(1, PRUNED_GROUP_BLOCKS);
        let (mut next, tip) = {
            let txn = self.read()?;
            (pruned_below(&txn, validator)?, self.tip(validator)?)
        };
        let below = below.min(tip.map_or(0, |t| t.height));
        let mut done =
            Pruned { validator: *validator, below: next, n_blocks: 0, n_events: 0, n_bytes: 0, n_record_bytes: 0 };
        // Whole groups only: each group's first height, up to the last one that fits.
        let group_end = |from: u64| from + group_blocks;
        while group_end(next) <= below {
            let txn = self.db.begin_write().map_err(eng("starting a prune"))?;
            {
                let mut meta = txn.open_table(META).map_err(eng("opening meta"))?;
                meta.insert("schema", PRUNED_SCHEMA_VERSION.to_le_bytes().as_slice()).map_err(eng("writing schema"))?;
                let mut from = txn.open_table(PRUNED_FROM).map_err(eng("opening pruned blocks"))?;
                from.insert(validator.0.as_slice(), archive).map_err(eng("writing pruned blocks"))?;
                let mut pruned = txn.open_table(PRUNED).map_err(eng("opening pruned blocks"))?;
                let mut blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
                let mut by_challenge = txn.open_multimap_table(BY_CHALLENGE).map_err(eng("opening an index"))?;
                let mut by_miner = txn.open_multimap_table(BY_MINER).map_err(eng("opening an index"))?;
                let mut step = 0u64;
                while group_end(next) <= below && step < PRUNE_STEP_BYTES {
                    let mut group = Vec::new();
                    let first = next;
                    while next < group_end(first) && group.len() < PRUNED_GROUP_BYTES {
                        let height = next;
                        let bytes = get_block(&blocks, validator, height)?
                            .ok_or_else(|| StoreError::Corrupt(format!("block {height} of {validator} is missing")))?;
                        let mut keys = Vec::new();
                        let mut event_idx = 0u32;
                        let checked = check_block_with(&bytes, &mut |event| {
                            if let Some((challenge_id, hotkey)) = event.index_keys() {
                                keys.push((challenge_id.0, hotkey.to_owned(), event_idx));
                            }
                            event_idx += 1;
                        })
                        .map_err(|source| StoreError::Rejected {
                            validator: *validator,
                            height,
                            source,
                        })?;
                        let record = PrunedBlock::of(&checked).encode();
                        remove_block(&mut blocks, validator, height)?;
                        for (challenge_id, hotkey, event_idx) in keys {
                            let location = Location { validator: *validator, height, event_idx }.encode();
                            by_challenge
                                .remove(challenge_id.as_slice(), location.as_slice())
                                .map_err(eng("pruning"))?;
                            by_miner.remove(hotkey.as_str(), location.as_slice()).map_err(eng("pruning"))?;
                        }
                        group.extend_from_slice(&record);
                        done.n_blocks += 1;
                        done.n_events += u64::from(checked.header.n_events);
                        done.n_bytes += bytes.len() as u64;
                        done.n_record_bytes += record.len() as u64;
                        step += bytes.len() as u64;
                        next += 1;
                    }
                    insert_chunks(&mut pruned, validator, next - 1, &group)?;
                }
            }
            txn.commit().map_err(eng("committing a prune"))?;
            done.below = next;
            progress(&done);
        }
        Ok(done)
    }
}
