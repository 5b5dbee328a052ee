//! Which fold checkpoints a quorum of validators agrees on, read from the ends of their
//! logs without replaying them: what `af audit --from-checkpoint` starts from. Only the
//! validators the reader names may countersign (the chain's permit holders, or a list
//! the auditor gives): a key anyone can make for free is no vote (ledger-spec/02). Each
//! block read is checked (decoded canonically with its events' Merkle root, and linked
//! by hash to the block above it up to the chain's stored tip, whose signature is
//! checked strictly), so a claim counts only as its validator signed it: a block's hash
//! in the signed block above it authenticates it as its own signature would.

use super::fold_checkpoints::{is_checkpoint_height, CHECKPOINT_EVERY, FOLD_VERSION};
use crate::bytes::{Hash32, ValidatorKey};
use crate::ledger::block::{check_signature, decode_block_borrowed};
use crate::ledger::event::{Event, FoldPoint};
use crate::ledger::store::{Store, StoreError};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// How far back from its tip each log is read for claims, in blocks: two checkpoint
/// intervals, so a log's claims of two successive points of a log are both read even
/// where it holds a single log (a validator records every 30 s the points its replay
/// newly passed: with many logs, its newest claims are a few blocks below its tip).
pub const SCAN_BLOCKS: u64 = 2 * CHECKPOINT_EVERY;

/// A log's end is read until it has named this many points of every log held (its
/// newest two: a claimer a little behind the others still meets them at the older one),
/// or for `SCAN_BLOCKS`.
pub const POINTS_PER_LOG: usize = 2;

/// A point enough validators claimed, and who.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Agreed {
    pub point: FoldPoint,
    /// Every validator whose log claims exactly this point, in key order.
    pub countersigners: Vec<ValidatorKey>,
}

/// Who may countersign a checkpoint, and how many must.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Countersigners {
    pub keys: BTreeSet<ValidatorKey>,
    /// Distinct countersigners a point needs, at least 1.
    pub quorum: usize,
    /// Where the list came from, in words (the chain and its block, or the auditor's list).
    pub named_by: String,
}

impl Countersigners {
    /// `keys` named by `named_by`; the quorum `quorum`, or by default a majority of the keys.
    pub fn new(keys: BTreeSet<ValidatorKey>, quorum: Option<usize>, named_by: impl Into<String>) -> Countersigners {
        let quorum = quorum.unwrap_or_else(|| majority(keys.len())).max(1);
        Countersigners { keys, quorum, named_by: named_by.into() }
    }
}

/// Ledger keys in hex as an auditor lists them, one a line, `#` starting a comment; an
/// empty list, or a line that is not a key, is refused by name.
pub fn parse_key_list(text: &str) -> Result<BTreeSet<ValidatorKey>, String> {
    let mut keys = BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let word = line.split('#').next().unwrap_or("").trim();
        if !word.is_empty() {
            let key = ValidatorKey::from_hex(word)
                .map_err(|e| format!("item {} ({word:?}) is not a ledger key (64 hex digits): {e}", n + 1))?;
            keys.insert(key);
        }
    }
    if keys.is_empty() {
        return Err("no ledger key in the list".into());
    }
    Ok(keys)
}

/// What the ends of the logs say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Agreement {
    /// Validators who may countersign.
    pub n_countersigners: usize,
    /// Of them, those whose logs the store holds and were read.
    pub n_logs: usize,
    /// Logs held whose validator may not countersign: their claims were not read.
    pub n_not_listed: usize,
    /// Distinct claimers a point needs.
    pub quorum: usize,
    /// Per log, its points with the quorum, newest first: a start uses the first whose
    /// fold it can get.
    pub agreed: BTreeMap<ValidatorKey, Vec<Agreed>>,
    /// Logs whose end could not be read as claims, and why (their claims do not count).
    pub unreadable: Vec<(ValidatorKey, String)>,
}

/// The default quorum: a majority of the validators who may countersign.
pub fn majority(n: usize) -> usize {
    n / 2 + 1
}

/// Reads the newest claims of each log whose validator may countersign, and keeps, per
/// log claimed, the points at least the quorum of distinct countersigners claimed.
pub fn agreement(store: &Store, who: &Countersigners) -> Result<Agreement, StoreError> {
    let tips = store.tips()?;
    let quorum = who.quorum;
    let mut claimers: BTreeMap<FoldPoint, BTreeSet<ValidatorKey>> = BTreeMap::new();
    let mut unreadable = Vec::new();
    let logs: BTreeSet<ValidatorKey> = tips.iter().map(|(v, _)| *v).collect();
    let n_not_listed = tips.iter().filter(|(v, _)| !who.keys.contains(v)).count();
    for (validator, tip) in tips.iter().filter(|(v, _)| who.keys.contains(v)) {
        match claims_at_end(store, validator, (tip.height, tip.hash), &logs)? {
            Ok(points) => points.into_iter().for_each(|p| {
                claimers.entry(p).or_default().insert(*validator);
            }),
            Err(why) => unreadable.push((*validator, why)),
        }
    }
    let mut agreed: BTreeMap<ValidatorKey, Vec<Agreed>> = BTreeMap::new();
    for (point, who) in claimers {
        if who.len() >= quorum {
            agreed
                .entry(point.validator)
                .or_default()
                .push(Agreed { point, countersigners: who.into_iter().collect() });
        }
    }
    for points in agreed.values_mut() {
        points.sort_by(|a, b| {
            b.point.height.cmp(&a.point.height).then(b.countersigners.len().cmp(&a.countersigners.len()))
        });
    }
    Ok(Agreement {
        n_countersigners: who.keys.len(),
        n_logs: tips.len() - n_not_listed,
        n_not_listed,
        quorum,
        agreed,
        unreadable,
    })
}

/// The points `validator`'s newest checkpoints name, read down from its tip until they
/// name `POINTS_PER_LOG` points of each of `logs` or for `SCAN_BLOCKS`, or why its end
/// does not read (a block that fails its checks, or a pruned one).
fn claims_at_end(
    store: &Store,
    validator: &ValidatorKey,
    (tip, tip_hash): (u64, Hash32),
    logs: &BTreeSet<ValidatorKey>,
) -> Result<Result<Vec<FoldPoint>, String>, StoreError> {
    let mut points = Vec::new();
    let mut named: BTreeMap<ValidatorKey, usize> = BTreeMap::new();
    // The hash the block at `height` must have: the tip's, then each block's prev_hash.
    let mut expected = tip_hash;
    for height in (tip.saturating_sub(SCAN_BLOCKS - 1)..=tip).rev() {
        let Some(bytes) = store.block_bytes(validator, height)? else {
            // A pruned block ends the read (old claims are not needed); a missing one
            // below the tip is a damaged store.
            return Ok(match points.is_empty() {
                true => Err(format!("block {height} is not held whole (pruned or missing)")),
                false => Ok(points),
            });
        };
        let (checked, events) = match decode_block_borrowed(&bytes) {
            Ok(decoded) => decoded,
            Err(e) => return Ok(Err(format!("block {height}: {e}"))),
        };
        if checked.header.validator != *validator || checked.header.height != height || checked.hash != expected {
            return Ok(Err(format!("block {height} is not the one the chain above it links to")));
        }
        if height == tip {
            if let Err(e) = check_signature(&checked.header, &checked.hash, &checked.signature) {
                return Ok(Err(format!("block {height}: {e}")));
            }
        }
        expected = checked.header.prev_hash;
        for event in &events {
            let Event::FoldCheckpoint(c) = event else { continue };
            if c.fold_version == FOLD_VERSION {
                // A point at a height no replay hashes is ignored, as the fold ignores it.
                for point in c.points.iter().filter(|p| is_checkpoint_height(p.height)) {
                    *named.entry(point.validator).or_default() += 1;
                    points.push(*point);
                }
            }
        }
        if logs.iter().all(|log| named.get(log).is_some_and(|n| *n >= POINTS_PER_LOG)) {
            break;
        }
    }
    Ok(Ok(points))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_key_list_is_one_key_a_line_and_anything_else_is_refused_by_its_item() {
        let (a, b) = ("aa".repeat(32), "bb".repeat(32));
        let keys = super::parse_key_list(&format!("# countersigners\n{a}\n\n{b}  # the second\n")).unwrap();
        assert_eq!(keys.len(), 2);
        let two_on_a_line = super::parse_key_list(&format!("{a},{b}\n")).unwrap_err();
        assert!(two_on_a_line.starts_with("item 1 "), "{two_on_a_line}");
        assert!(super::parse_key_list(&format!("{a}\nnot-a-key\n")).unwrap_err().starts_with("item 2 "));
        assert_eq!(super::parse_key_list("# none\n").unwrap_err(), "no ledger key in the list");
    }
}
