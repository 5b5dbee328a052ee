//! Full verification of a store: every chain from genesis to tip, every byte, every
//! signature, every link, with nothing taken from the store on trust (not even its tip
//! records), and then the indexes against the blocks. Blocks are checked in parallel
//! batches; links are checked in order.
//!
//! The store must have been opened with [`Store::open_read_only`] or a writer's checked
//! open, so that redb has verified every page checksum before these logical checks run.

use super::block::{check_block_with, check_link, check_signature, BlockError, Tip};
use super::store::{self, Store, StoreError};
use crate::bytes::ValidatorKey;
use crate::limits::VERIFY_BATCH_BYTES;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeSet;

/// The first thing wrong with one validator's chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainFault {
    /// First height at which the chain is wrong.
    pub height: u64,
    /// Short machine-readable name of the fault.
    pub kind: &'static str,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainReport {
    pub validator: ValidatorKey,
    /// Blocks that verified, from genesis on.
    pub n_blocks_ok: u64,
    pub n_events: u64,
    pub n_bytes: u64,
    /// The last verified block.
    pub verified_tip: Option<Tip>,
    pub fault: Option<ChainFault>,
}

/// Whether the challenge and miner indexes hold exactly the entries the blocks imply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IndexReport {
    /// False when a chain failed: its blocks are no basis to compare the indexes with.
    pub checked: bool,
    /// Entries the blocks imply, per index (each transcript is in both).
    pub n_entries: u64,
    pub fault: Option<IndexFault>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IndexFault {
    /// `by_challenge` or `by_miner`.
    pub index: &'static str,
    pub kind: &'static str,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreReport {
    pub ok: bool,
    pub chains: Vec<ChainReport>,
    pub indexes: IndexReport,
    pub n_blocks: u64,
    pub n_events: u64,
    pub n_bytes: u64,
}

/// Progress after each batch: (validator, blocks verified so far, bytes so far).
pub type Progress<'a> = &'a mut dyn FnMut(&ValidatorKey, u64, u64);

fn fault_kind(error: &BlockError) -> &'static str {
    match error {
        BlockError::Decode(_) => "decode",
        BlockError::FormatVersion(_) => "format_version",
        BlockError::Bound(_) => "bound",
        BlockError::EventCount { .. } => "event_count",
        BlockError::TooManyEvents(_) => "too_many_events",
        BlockError::EventsRoot { .. } => "events_root",
        BlockError::WeakKey => "weak_key",
        BlockError::NonCanonicalKey => "non_canonical_key",
        BlockError::BadSignature => "bad_signature",
        BlockError::WrongValidator { .. } => "wrong_validator",
        BlockError::WrongHeight { .. } => "wrong_height",
        BlockError::BrokenLink { .. } => "broken_link",
        BlockError::TimeWentBack { .. } => "time_went_back",
    }
}

/// Verifies every chain in the store. Errors only if the store cannot be read at all;
/// a bad chain is a [`ChainFault`] in the report.
pub fn verify_store(store: &Store, progress: Progress<'_>) -> Result<StoreReport, StoreError> {
    let txn = store.read()?;
    let tips = store::tips_in(&txn)?;
    let mut validators: BTreeSet<ValidatorKey> = tips.iter().map(|(v, _)| *v).collect();
    validators.extend(store::validators_with_blocks(&txn)?);
    let mut chains = Vec::new();
    let mut expected = ExpectedIndex::new()?;
    for validator in validators {
        let recorded_tip = tips.iter().find(|(v, _)| *v == validator).map(|(_, t)| *t);
        chains.push(verify_chain(&txn, &validator, recorded_tip, None, &mut expected, progress)?);
    }
    let chains_ok = chains.iter().all(|c| c.fault.is_none());
    let n_entries = expected.by_challenge.count;
    let indexes = if chains_ok {
        IndexReport { checked: true, n_entries, fault: check_indexes(&txn, expected)? }
    } else {
        IndexReport { checked: false, n_entries, fault: None }
    };
    Ok(StoreReport {
        ok: chains_ok && indexes.fault.is_none(),
        indexes,
        n_blocks: chains.iter().map(|c| c.n_blocks_ok).sum(),
        n_events: chains.iter().map(|c| c.n_events).sum(),
        n_bytes: chains.iter().map(|c| c.n_bytes).sum(),
        chains,
    })
}

/// Verifies `validator`'s chain from genesis up to `height` only, with every rule of a full
/// verification: what a cached fold of that prefix must be checked against before reuse.
/// Returns the verified block at `height`, or the first fault on the way.
pub fn verify_chain_prefix(
    txn: &redb::ReadTransaction,
    validator: &ValidatorKey,
    height: u64,
) -> Result<Result<Tip, ChainFault>, StoreError> {
    let mut expected = ExpectedIndex::default();
    let report = verify_chain(txn, validator, None, Some(height), &mut expected, &mut |_, _, _| {})?;
    Ok(match (report.fault, report.verified_tip) {
        (Some(fault), _) => Err(fault),
        (None, Some(tip)) if tip.height == height => Ok(tip),
        (None, reached) => Err(ChainFault {
            height: reached.map_or(0, |t| t.height + 1),
            kind: "missing_block",
            message: format!("the chain ends before height {height}"),
        }),
    })
}

struct Checked {
    height: u64,
    result: Result<(Tip, crate::ledger::block::BlockHeader, u64), BlockError>,
    n_bytes: u64,
    index: ExpectedIndex,
}

/// The index entries the verified blocks imply, as a digest of each index's multiset:
/// how many entries, and the sum mod 2^128 of each entry's blake3 keyed with a key drawn
/// at random for this run (a store prepared beforehand cannot aim at a collision; an
/// index is a set, so two different ones collide with probability about 2^-128).
/// Constant memory, whatever the log's length: only a mismatch costs a second pass.
#[derive(Clone, Copy, Default)]
struct ExpectedIndex {
    key: [u8; 32],
    by_challenge: IndexSum,
    by_miner: IndexSum,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct IndexSum {
    count: u64,
    sum: u128,
}

impl IndexSum {
    fn add(&mut self, digest: u128) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(digest);
    }

    fn merge(&mut self, other: IndexSum) {
        self.count += other.count;
        self.sum = self.sum.wrapping_add(other.sum);
    }
}

impl ExpectedIndex {
    fn new() -> Result<ExpectedIndex, StoreError> {
        let mut key = [0u8; 32];
        getrandom::getrandom(&mut key)
            .map_err(|e| StoreError::Engine { doing: "drawing the index check's key", message: e.to_string() })?;
        Ok(ExpectedIndex { key, ..ExpectedIndex::default() })
    }

    fn merge(&mut self, other: &ExpectedIndex) {
        self.by_challenge.merge(other.by_challenge);
        self.by_miner.merge(other.by_miner);
    }
}

const BY_CHALLENGE_TAG: u8 = 0;
const BY_MINER_TAG: u8 = 1;

fn entry_digest(key: &[u8; 32], index: u8, entry_key: &[u8], location: &[u8]) -> u128 {
    let mut entries = Entries::default();
    entries.push(entry_key, location);
    entries.digests(key, index)[0]
}

/// Index entries gathered to be digested together, eight at a time where the CPU allows
/// (`hash_many`): each is `len(key) as u64 LE || key || location`, keyed-hashed behind the
/// index's tag byte.
#[derive(Default)]
struct Entries {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Entries {
    fn push(&mut self, entry_key: &[u8], location: &[u8]) {
        self.bytes.extend_from_slice(&(entry_key.len() as u64).to_le_bytes());
        self.bytes.extend_from_slice(entry_key);
        self.bytes.extend_from_slice(location);
        self.ends.push(self.bytes.len());
    }

    fn digests(&self, key: &[u8; 32], index: u8) -> Vec<u128> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let inputs: Vec<&[u8]> = starts.zip(&self.ends).map(|(start, &end)| &self.bytes[start..end]).collect();
        let hashes = crate::ledger::hash_many::hash_many(Some(key), &[index], &inputs);
        hashes.iter().map(|h| u128::from_le_bytes(h[..16].try_into().expect("16 bytes"))).collect()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
}

/// Compares each index with the entries the blocks imply: the same count and sum. On a
/// difference, a second pass over that index names the first entry that is wrong.
fn check_indexes(txn: &redb::ReadTransaction, expected: ExpectedIndex) -> Result<Option<IndexFault>, StoreError> {
    // The two indexes are independent: each is scanned and compared on its own core.
    let (challenge_fault, miner_fault) = std::thread::scope(|scope| {
        let miner = scope.spawn(|| compare_index(txn, "by_miner", BY_MINER_TAG, &expected));
        let challenge = compare_index(txn, "by_challenge", BY_CHALLENGE_TAG, &expected);
        (challenge, miner.join().expect("the index check does not panic"))
    });
    Ok(challenge_fault?.or(miner_fault?))
}

fn compare_index(
    txn: &redb::ReadTransaction,
    name: &'static str,
    tag: u8,
    expected: &ExpectedIndex,
) -> Result<Option<IndexFault>, StoreError> {
    let want = if tag == BY_MINER_TAG { expected.by_miner } else { expected.by_challenge };
    let mut actual = IndexSum::default();
    let mut entries = Entries::default();
    let mut add_all = |entries: &mut Entries| {
        entries.digests(&expected.key, tag).into_iter().for_each(|d| actual.add(d));
        entries.clear();
    };
    let scanned = store::scan_index(txn, tag == BY_MINER_TAG, &mut |key, location| {
        entries.push(key, location);
        if entries.ends.len() == 4096 {
            add_all(&mut entries);
        }
        true
    });
    add_all(&mut entries);
    let fault = |kind, message| Some(IndexFault { index: name, kind, message });
    if let Err(error) = scanned {
        return Ok(fault("index_unreadable", error.to_string()));
    }
    if actual == want {
        return Ok(None);
    }
    // The index is wrong: the entries the blocks imply, each, to name the first wrong one
    // (16 bytes per entry of this index, spent only here).
    let mut implied = implied_digests(txn, &expected.key, tag)?;
    implied.sort_unstable();
    let mut first_extra = None;
    let mut present = Vec::with_capacity(implied.len());
    store::scan_index(txn, tag == BY_MINER_TAG, &mut |key, location| {
        let digest = entry_digest(&expected.key, tag, key, location);
        if implied.binary_search(&digest).is_err() {
            first_extra.get_or_insert_with(|| {
                format!(
                    "entry {} -> {} is not a transcript of the blocks",
                    // Challenge ids are bytes; hotkeys are text unless the entry is garbage.
                    match std::str::from_utf8(key) {
                        Ok(hotkey) if tag == BY_MINER_TAG && !hotkey.chars().any(char::is_control) =>
                            hotkey.to_string(),
                        _ => hex::encode(key),
                    },
                    store::Location::decode(location).map_or_else(|_| hex::encode(location), |l| l.to_string())
                )
            });
        } else {
            present.push(digest);
        }
        true
    })?;
    present.sort_unstable();
    let missing = implied.iter().filter(|d| present.binary_search(d).is_err()).count();
    let detail = first_extra.unwrap_or_else(|| match missing {
        1 => "an entry the blocks imply is missing".to_string(),
        n => format!("{n} entries the blocks imply are missing"),
    });
    Ok(fault(
        "index_mismatch",
        format!(
            "the index holds {} entries, the blocks imply {} ({missing} missing): {detail}; rebuild it with `af ledger reindex`",
            actual.count, want.count
        ),
    ))
}

/// Each entry index `tag` should hold, read again from the stored blocks (already
/// verified in this run, in the same read transaction).
fn implied_digests(txn: &redb::ReadTransaction, key: &[u8; 32], tag: u8) -> Result<Vec<u128>, StoreError> {
    let mut digests = Vec::new();
    for validator in store::validators_with_blocks(txn)? {
        let mut failed = None;
        store::stream_blocks(txn, &validator, VERIFY_BATCH_BYTES, &mut |batch| {
            for (height, bytes) in &batch {
                let events = match crate::ledger::block::decode_block_borrowed(bytes) {
                    Ok((_, events)) => events,
                    Err(error) => {
                        failed = Some(StoreError::Corrupt(format!("block {height} of {validator}: {error}")));
                        return false;
                    }
                };
                for (event_idx, event) in events.iter().enumerate() {
                    if let Some(t) = event.transcript() {
                        let location =
                            store::Location { validator, height: *height, event_idx: event_idx as u32 }.encode();
                        let entry_key = if tag == BY_MINER_TAG { t.miner.hotkey.as_bytes() } else { &t.challenge_id.0 };
                        digests.push(entry_digest(key, tag, entry_key, &location));
                    }
                }
            }
            true
        })?;
        if let Some(error) = failed {
            return Err(error);
        }
    }
    Ok(digests)
}

/// Checks one batch of consecutive stored blocks: the expensive part (decode, hashes,
/// signature) in parallel, then links in height order. Records the first fault.
fn check_batch(
    validator: &ValidatorKey,
    batch: &[(u64, Vec<u8>)],
    report: &mut ChainReport,
    next_height: &mut u64,
    expected: &mut ExpectedIndex,
) {
    let checked: Vec<Checked> = batch
        .par_iter()
        .map(|(height, bytes)| {
            let mut index = ExpectedIndex { key: expected.key, ..ExpectedIndex::default() };
            let (mut by_challenge, mut by_miner) = (Entries::default(), Entries::default());
            let mut event_idx = 0u32;
            let result = check_block_with(bytes, &mut |event| {
                if let Some(t) = event.transcript() {
                    let location = store::Location { validator: *validator, height: *height, event_idx }.encode();
                    by_challenge.push(&t.challenge_id.0, &location);
                    by_miner.push(t.miner.hotkey.as_bytes(), &location);
                }
                event_idx += 1;
            });
            by_challenge.digests(&index.key, BY_CHALLENGE_TAG).into_iter().for_each(|d| index.by_challenge.add(d));
            by_miner.digests(&index.key, BY_MINER_TAG).into_iter().for_each(|d| index.by_miner.add(d));
            let result = result.and_then(|checked| {
                let header = checked.header;
                check_signature(&header, &checked.hash, &checked.signature)?;
                let tip = Tip { height: header.height, hash: checked.hash, time_ms: header.time_ms };
                Ok((tip, header, checked.leaf_hashes.len() as u64))
            });
            Checked { height: *height, n_bytes: bytes.len() as u64, result, index }
        })
        .collect();
    for item in checked {
        let fault = |kind: &'static str, message: String| ChainFault { height: *next_height, kind, message };
        if item.height != *next_height {
            report.fault = Some(fault(
                "missing_block",
                format!("no block stored at height {next_height} (next stored is {})", item.height),
            ));
            return;
        }
        let linked = item.result.and_then(|(tip, header, n_events)| {
            check_link(validator, report.verified_tip.as_ref(), &header)?;
            Ok((tip, n_events))
        });
        match linked {
            Ok((tip, n_events)) => {
                expected.merge(&item.index);
                report.verified_tip = Some(tip);
                report.n_blocks_ok += 1;
                report.n_events += n_events;
                report.n_bytes += item.n_bytes;
                *next_height += 1;
            }
            Err(error) => {
                report.fault = Some(fault(fault_kind(&error), error.to_string()));
                return;
            }
        }
    }
}

fn verify_chain(
    txn: &redb::ReadTransaction,
    validator: &ValidatorKey,
    recorded_tip: Option<Tip>,
    last_height: Option<u64>,
    expected: &mut ExpectedIndex,
    progress: Progress<'_>,
) -> Result<ChainReport, StoreError> {
    let mut report =
        ChainReport { validator: *validator, n_blocks_ok: 0, n_events: 0, n_bytes: 0, verified_tip: None, fault: None };
    let mut next_height = 0u64;
    // A reader thread copies blocks out of the store while the rayon pool checks the
    // previous batch: reading and checking overlap instead of taking turns. One batch
    // waits at most, so block bytes held are three batches whatever the log's length.
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<(u64, Vec<u8>)>>(1);
    let read = std::thread::scope(|scope| -> Result<(), StoreError> {
        let reader = scope.spawn(move || {
            store::stream_blocks(txn, validator, VERIFY_BATCH_BYTES, &mut |mut batch| {
                let Some(last) = last_height else { return sender.send(batch).is_ok() };
                let past = batch.last().is_some_and(|(h, _)| *h >= last);
                batch.retain(|(h, _)| *h <= last);
                sender.send(batch).is_ok() && !past
            })
        });
        for batch in receiver.iter() {
            if report.fault.is_some() {
                break; // Dropping the receiver stops the reader.
            }
            check_batch(validator, &batch, &mut report, &mut next_height, expected);
            progress(validator, report.n_blocks_ok, report.n_bytes);
        }
        drop(receiver);
        reader.join().expect("the block reader does not panic")
    });
    match read {
        // Chunks that are not the store's layout: a fault of the chain at that height.
        Err(StoreError::BadChunks { height, why, .. }) if report.fault.is_none() => {
            report.fault = Some(ChainFault { height, kind: "bad_chunks", message: why });
        }
        Err(StoreError::BadChunks { .. }) => {}
        other => other?,
    }
    if report.fault.is_some() || last_height.is_some() {
        return Ok(report);
    }
    // The tip record must name exactly the last verified block.
    let fault = match (recorded_tip, report.verified_tip) {
        (Some(recorded), Some(verified)) if recorded == verified => None,
        (None, None) => None,
        (Some(recorded), Some(verified)) if recorded.height > verified.height => Some(ChainFault {
            height: verified.height + 1,
            kind: "missing_block",
            message: format!("tip record says height {} but the chain ends at {}", recorded.height, verified.height),
        }),
        (Some(recorded), verified) => Some(ChainFault {
            height: recorded.height,
            kind: "tip_mismatch",
            message: format!(
                "tip record (height {}, hash {}) does not match the verified chain end {}",
                recorded.height,
                recorded.hash,
                verified.map_or("(none)".into(), |t| format!("(height {}, hash {})", t.height, t.hash))
            ),
        }),
        (None, Some(verified)) => Some(ChainFault {
            height: verified.height,
            kind: "tip_mismatch",
            message: "blocks are stored but no tip is recorded".into(),
        }),
    };
    report.fault = fault;
    Ok(report)
}
