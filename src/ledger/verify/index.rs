//! The store's two indexes against the blocks, without holding either: each index's
//! entries and the entries the verified blocks imply are reduced to a count and a keyed
//! sum, compared once every chain verified; only a difference costs a second pass,
//! which names the first entry that is wrong.

use super::{IndexFault, StoreError};
use crate::ledger::store;
use crate::limits::VERIFY_BATCH_BYTES;
use rayon::prelude::*;

/// The index entries the verified blocks imply, as a digest of each index's multiset:
/// how many entries, and the sum mod 2^128 of each entry's blake3 keyed with a key drawn
/// at random for this run (a store prepared beforehand cannot aim at a collision; an
/// index is a set, so two different ones collide with probability about 2^-128).
/// Constant memory, whatever the log's length: only a mismatch costs a second pass.
#[derive(Clone, Copy, Default)]
pub(super) struct ExpectedIndex {
    pub(super) key: [u8; 32],
    pub(super) by_challenge: IndexSum,
    pub(super) by_miner: IndexSum,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct IndexSum {
    pub(super) count: u64,
    pub(super) sum: u128,
}

impl IndexSum {
    pub(super) fn add(&mut self, digest: u128) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(digest);
    }

    pub(super) fn merge(&mut self, other: IndexSum) {
        self.count += other.count;
        self.sum = self.sum.wrapping_add(other.sum);
    }
}

impl ExpectedIndex {
    pub(super) fn new() -> Result<ExpectedIndex, StoreError> {
        let mut key = [0u8; 32];
        getrandom::getrandom(&mut key)
            .map_err(|e| StoreError::Engine { doing: "drawing the index check's key", message: e.to_string() })?;
        Ok(ExpectedIndex { key, ..ExpectedIndex::default() })
    }

    pub(super) fn merge(&mut self, other: &ExpectedIndex) {
        self.by_challenge.merge(other.by_challenge);
        self.by_miner.merge(other.by_miner);
    }
}

pub(super) const BY_CHALLENGE_TAG: u8 = 0;
pub(super) const BY_MINER_TAG: u8 = 1;

pub(super) fn entry_digest(key: &[u8; 32], index: u8, entry_key: &[u8], location: &[u8]) -> u128 {
    let mut entries = Entries::default();
    entries.push(entry_key, location);
    entries.digests(key, index)[0]
}

/// Index entries gathered to be digested together, eight at a time where the CPU allows
/// (`hash_many`): each is `len(key) as u64 LE || key || location`, keyed-hashed behind the
/// index's tag byte.
#[derive(Default)]
pub(super) struct Entries {
    pub(super) bytes: Vec<u8>,
    pub(super) ends: Vec<usize>,
}

impl Entries {
    pub(super) fn push(&mut self, entry_key: &[u8], location: &[u8]) {
        self.bytes.extend_from_slice(&(entry_key.len() as u64).to_le_bytes());
        self.bytes.extend_from_slice(entry_key);
        self.bytes.extend_from_slice(location);
        self.ends.push(self.bytes.len());
    }

    pub(super) fn digests(&self, key: &[u8; 32], index: u8) -> Vec<u128> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let inputs: Vec<&[u8]> = starts.zip(&self.ends).map(|(start, &end)| &self.bytes[start..end]).collect();
        let hashes = crate::ledger::hash_many::hash_many(Some(key), &[index], &inputs);
        hashes.iter().map(|h| u128::from_le_bytes(h[..16].try_into().expect("16 bytes"))).collect()
    }

    pub(super) fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
}

/// The count and digest sum of what index `tag` holds, read in one pass; or why it could
/// not be read (a finding, reported only if the chains verify).
pub(super) fn index_sum(
    txn: &redb::ReadTransaction,
    tag: u8,
    key: &[u8; 32],
) -> Result<Result<IndexSum, String>, StoreError> {
    Ok(digest_scan(key, tag, |sink| store::scan_index(txn, tag == BY_MINER_TAG, sink)))
}

/// [`index_sum`] of the challenge index, read in parts side by side (its keys are random,
/// so parts by first byte are about equal): the sum is a sum, so the parts add up.
pub(super) fn challenge_index_sum(
    txn: &redb::ReadTransaction,
    key: &[u8; 32],
) -> Result<Result<IndexSum, String>, StoreError> {
    let parts = (rayon::current_num_threads() * 2).clamp(1, 256);
    let sums: Vec<Result<IndexSum, String>> = (0..parts)
        .into_par_iter()
        .map(|part| {
            digest_scan(key, BY_CHALLENGE_TAG, |sink| store::scan_challenge_index_part(txn, (part, parts), sink))
        })
        .collect();
    let mut total = IndexSum::default();
    for sum in sums {
        match sum {
            Ok(sum) => total.merge(sum),
            Err(why) => return Ok(Err(why)),
        }
    }
    Ok(Ok(total))
}

/// Where a scan hands each index entry: (key, location); false stops it.
type EntrySink<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> bool;

/// Counts and digests every entry a scan hands out, in groups of 4,096 (`hash_many`).
pub(super) fn digest_scan(
    key: &[u8; 32],
    tag: u8,
    scan: impl FnOnce(EntrySink<'_>) -> Result<(), StoreError>,
) -> Result<IndexSum, String> {
    let mut actual = IndexSum::default();
    let mut entries = Entries::default();
    let mut add_all = |entries: &mut Entries| {
        entries.digests(key, tag).into_iter().for_each(|d| actual.add(d));
        entries.clear();
    };
    let scanned = scan(&mut |entry_key, location| {
        entries.push(entry_key, location);
        if entries.ends.len() == 4096 {
            add_all(&mut entries);
        }
        true
    });
    add_all(&mut entries);
    scanned.map(|()| actual).map_err(|error| error.to_string())
}

/// Compares index `tag`'s count and sum with the entries the blocks imply. On a
/// difference, a second pass over that index names the first entry that is wrong.
pub(super) fn compare_index(
    txn: &redb::ReadTransaction,
    tag: u8,
    actual: Result<IndexSum, String>,
    expected: &ExpectedIndex,
) -> Result<Option<IndexFault>, StoreError> {
    let name = if tag == BY_MINER_TAG { "by_miner" } else { "by_challenge" };
    let want = if tag == BY_MINER_TAG { expected.by_miner } else { expected.by_challenge };
    let fault = |kind, message| Some(IndexFault { index: name, kind, message });
    let actual = match actual {
        Ok(actual) => actual,
        Err(error) => return Ok(fault("index_unreadable", error)),
    };
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
pub(super) fn implied_digests(txn: &redb::ReadTransaction, key: &[u8; 32], tag: u8) -> Result<Vec<u128>, StoreError> {
    let mut digests = Vec::new();
    for validator in store::validators_with_blocks(txn)? {
        let mut failed = None;
        // A pruned block implies no entry: its events are not held, so not indexed.
        let from = store::pruned_below(txn, &validator)?;
        store::stream_blocks_from(txn, &validator, from, VERIFY_BATCH_BYTES, &mut |batch| {
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
