//! Replay: every validator's stored log folded into the network's state (champion and
//! its history, ratio to beat, matches and verdicts, per-validator decisions, vTrust,
//! weights), re-deriving everything that can be re-derived on the way. State is never a
//! second source of truth: it is recomputed from the logs, and a snapshot is only a
//! cache of the per-chain folds at known tips.
//!
//! Work per batch of blocks: decode, hash, re-score transcripts and re-derive challenge
//! ids in parallel (rayon), verify the batch's signatures together (ed25519 batch
//! verification, weak keys refused first), then fold in height order. The fold is the
//! only sequential step, so the state is the same whatever the thread count.

pub mod checkpoint_points;
pub mod checkpoint_quorum;
pub mod checkpoint_record;
pub mod combine;
pub mod decisions;
pub mod departures;
pub mod fold;
pub mod fold_checkpoints;
pub mod identities;
pub mod kept_file;
pub mod latest_replay;
pub mod match_table;
pub mod queries;
pub mod ratio_walk;
pub mod record_lists;
pub mod records;
pub mod sorted_scratch;
pub mod spill;
pub mod spill_file;
pub mod spill_layout;
pub mod spill_snapshot;
pub mod spilled_key_set;
pub mod state_hash;
pub mod state_matches;
pub mod transcript_entries;
pub mod vtrust;
pub mod vtrust_history;

use crate::bytes::{Hash32, ValidatorKey};
use crate::envs::Registry;
use crate::evaluation::ratio::RatioParams;
use crate::ledger::block::{check_link, check_signature, decode_block_borrowed, BlockError, CheckedBlock};
use crate::ledger::store::{self, Store, StoreError};
use crate::ledger::{Event, Tip};
use crate::limits::VERIFY_BATCH_BYTES;
use combine::NetworkState;
use fold::{check_block_events, ChainFold, EventCheck, ProtocolCheck};
use rayon::prelude::*;
use std::collections::BTreeMap;

/// Bumped whenever a change to the fold, the checks or the snapshot layout could make an
/// old snapshot disagree with a replay from genesis; an old snapshot is then ignored.
pub const REPLAY_VERSION: u32 = 15;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    SpillFile(#[from] spill_file::SpillFileError),
    #[error("reading a match back from the replay's file {0} failed (see the log): the replay is incomplete and was dropped")]
    SpillRead(String),
}

/// The folds of every chain, each at its own tip, to fold on from: the last replay's
/// (`latest`) or a kept file's (`kept_file`), read through the replay's file they were
/// made with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub replay_version: u32,
    pub folds: Vec<ChainFold>,
}

/// A finished replay.
#[derive(Clone, Debug)]
pub struct Replay {
    pub folds: Vec<ChainFold>,
    pub state: NetworkState,
    /// blake3 of the state's canonical bytes: equal states, equal hashes.
    pub state_hash: Hash32,
    /// What this run folded (less than the whole log when it started from a snapshot).
    pub n_blocks_folded: u64,
    pub n_bytes_folded: u64,
    /// Chains whose snapshot fold was reused (the rest were folded from genesis).
    pub n_chains_from_snapshot: usize,
    /// What the state was combined with.
    pub ratio_params: RatioParams,
    /// Whether the state was the last replay's, recounted (`combine::recount`).
    pub recounted: bool,
}

/// Whether a read of the replay's file failed for `folds` or the state's `matches`.
fn faulted(folds: &[ChainFold], matches: &combine::NetworkMatches) -> bool {
    folds.iter().any(ChainFold::spill_faulted) || matches.faulted()
}

/// Progress after each batch, from the thread folding that chain: (validator, its height
/// reached, bytes of that chain folded this run).
pub type Progress<'a> = &'a mut (dyn FnMut(&ValidatorKey, u64, u64) + Send);

pub use state_hash::state_hash;

/// Where the folds handed to [`replay`] come from, which decides what must be checked
/// before they are reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoldSource {
    /// A snapshot file, or anything else made outside this process: a fold is reused only
    /// if its chain, verified afresh from genesis to the fold's tip with every rule of
    /// `af ledger verify`, ends at exactly the tip the fold recorded.
    Untrusted,
    /// Folds this process made itself from this store, which it holds open for writing
    /// (no other process can have changed those blocks): reused when the tip's hash still
    /// matches.
    ThisProcess,
    /// Folds at points a quorum of validators agreed on (`checkpoint`), their bytes
    /// checked against the agreed hash: reused when the store's block at the fold's
    /// height has the fold's tip hash. The blocks below are trusted, not checked: that
    /// is what starting from a checkpoint means.
    Checkpoint,
}

/// Folds every chain of `store`, starting each from its fold in `snapshot` when that fold
/// may be reused (see [`FoldSource`]), from genesis otherwise; then combines. What the
/// replay derives past an audit's cache (`CacheSize::AUDIT`) is kept in a temporary
/// file, removed once the replay and its readers are done with it.
pub fn replay(
    store: &Store,
    registry: &Registry,
    snapshot: Option<(Snapshot, FoldSource)>,
    ratio_params: &RatioParams,
    progress: Progress<'_>,
) -> Result<Replay, ReplayError> {
    let cold = spill_file::SpillFile::temporary(spill_file::CacheSize::AUDIT)?;
    replay_in(&cold, store, registry, snapshot, ratio_params, progress, None)
}

/// [`replay`], keeping what it derives past `spill_file`'s cache in `spill_file`'s file: each log's
/// matches spilled as they pile up (`spill::spill_if_due`), the combine's working sets
/// and the state's matches. When `last` is the replay whose folds `snapshot` holds (this
/// process's own) and folding its new blocks changed nothing the state reads but
/// counts, its state is recounted rather than combined again.
pub fn replay_in(
    cold: &spill_file::SpillFile,
    store: &Store,
    registry: &Registry,
    snapshot: Option<(Snapshot, FoldSource)>,
    ratio_params: &RatioParams,
    progress: Progress<'_>,
    last: Option<&Replay>,
) -> Result<Replay, ReplayError> {
    let txn = store.read()?;
    let mut validators: Vec<ValidatorKey> = store::validators_with_blocks(&txn)?;
    validators.sort();
    let mut from_snapshot: BTreeMap<ValidatorKey, ChainFold> = BTreeMap::new();
    if let Some((snapshot, source)) = snapshot.filter(|(s, _)| s.replay_version == REPLAY_VERSION) {
        // Our own writes are the only ones while this process holds the store: a chain
        // whose tip record still names the fold's tip has not moved, and its tip block
        // (up to 32 MiB) need not be read again to say so.
        let tips: BTreeMap<ValidatorKey, Tip> = match source {
            FoldSource::ThisProcess => store::tips_in(&txn)?.into_iter().collect(),
            FoldSource::Untrusted | FoldSource::Checkpoint => BTreeMap::new(),
        };
        for fold in snapshot.folds {
            let Some(tip) = fold.tip else { continue };
            let reusable = match source {
                FoldSource::Untrusted => {
                    crate::ledger::verify::verify_chain_prefix(&txn, &fold.validator, tip.height)? == Ok(tip)
                }
                FoldSource::ThisProcess | FoldSource::Checkpoint => {
                    // Read from the tip block's first piece; any failure folds the chain
                    // again from genesis, where every check runs.
                    tips.get(&fold.validator) == Some(&tip)
                        || matches!(
                            store.signed_headers(&fold.validator, tip.height, tip.height).as_deref(),
                            Ok([(header, _)]) if header.hash() == tip.hash
                        )
                }
            };
            if reusable {
                from_snapshot.insert(fold.validator, fold);
            }
        }
    }
    let n_chains_from_snapshot = from_snapshot.len();
    // A chain that folds from genesis must find none of an earlier fold's matches or
    // records in the file (a kept file's, or this process's when a fold was not reused).
    let fresh: Vec<ValidatorKey> = validators.iter().filter(|v| !from_snapshot.contains_key(v)).copied().collect();
    cold.clear_validators(&fresh)?;
    // Chains fold side by side, each in height order (a fold is a state machine over its
    // own chain only); within each, blocks decode and check in parallel batches. Bytes
    // held: each chain in flight holds up to three batches (one read ahead in the
    // channel, one being read, one folded), and with rayon's work stealing every chain
    // may be in flight at once, so the batch is a share of one full batch per chain:
    // about three full batches in all, or three of the smallest per chain past 32 chains.
    let batch_bytes = (VERIFY_BATCH_BYTES / validators.len().max(1)).max(MIN_FOLD_BATCH_BYTES);
    let progress = std::sync::Mutex::new(progress);
    // Folds are hashed at the checkpoint heights near each stored tip only: the points
    // a fold keeps and claims are compared with.
    let stored_tips: BTreeMap<ValidatorKey, u64> =
        store::tips_in(&txn)?.into_iter().map(|(v, tip)| (v, tip.height)).collect();
    let starts: Vec<ChainFold> = validators
        .iter()
        .map(|validator| from_snapshot.remove(validator).unwrap_or_else(|| ChainFold::new(*validator)))
        .collect();
    let folded: Vec<Result<(ChainFold, u64, u64), ReplayError>> = starts
        .into_par_iter()
        .map(|fold| {
            let hash_from = stored_tips.get(&fold.validator).map_or(u64::MAX, |h| fold_checkpoints::hash_from(*h));
            fold_chain(cold, (store, &txn), registry, (fold, hash_from), batch_bytes, &progress)
        })
        .collect();
    let (mut n_blocks_folded, mut n_bytes_folded) = (0u64, 0u64);
    let mut folds = Vec::with_capacity(validators.len());
    for result in folded {
        let (fold, n_blocks, n_bytes) = result?;
        n_blocks_folded += n_blocks;
        n_bytes_folded += n_bytes;
        folds.push(fold);
    }
    if folds.iter().any(ChainFold::spill_faulted) {
        return Err(ReplayError::SpillRead(cold.path().display().to_string()));
    }
    // Each fold reads the newest snapshot from here on (its own matches there are what
    // its own snapshot shows): an older one held would keep every page the spills since
    // freed.
    spill::read_newest(cold, &mut folds);
    // Logs are append-only: the same chains, each grown with no change counted, give
    // the combine the same matches and findings.
    let unchanged = last.filter(|last| {
        last.ratio_params == *ratio_params
            && last.folds.len() == folds.len()
            && last.folds.iter().zip(&folds).all(|(a, b)| {
                a.validator == b.validator
                    && a.combine_changes == b.combine_changes
                    && a.tip.map(|t| t.height) <= b.tip.map(|t| t.height)
                    && a.invalid_at.is_none()
                    && b.invalid_at.is_none()
            })
    });
    let mut state = match unchanged {
        Some(last) => combine::recount(&last.state, &folds),
        None => combine::combine(&folds, ratio_params, cold)?,
    };
    let state_hash = state_hash(&state);
    if faulted(&folds, &state.matches) {
        return Err(ReplayError::SpillRead(cold.path().display().to_string()));
    }
    // The folds and the state's list read the newest snapshot (the combine's, if this
    // replay combined), so the replay holds one.
    spill::read_newest(cold, &mut folds);
    state.matches.read_newest(cold);
    let state_hash = state_hash.map_err(|_| ReplayError::SpillRead(cold.path().display().to_string()))?;
    Ok(Replay {
        folds,
        state,
        state_hash,
        n_blocks_folded,
        n_bytes_folded,
        n_chains_from_snapshot,
        ratio_params: *ratio_params,
        recounted: unchanged.is_some(),
    })
}

/// The smallest batch a chain folds at a time when many fold at once (a batch is never
/// less than one block): enough blocks for the parallel decode to be worth its hand-off.
const MIN_FOLD_BATCH_BYTES: usize = 1024 * 1024;

/// Folds one chain's stored blocks past `fold`'s tip, in height order: a reader thread
/// copies batches of about `batch_bytes` out of the store while the previous batch is
/// folded (on a pool of one thread, the same thread reads and folds in turn, so
/// `--threads 1` uses one core); the fold is hashed at each checkpoint height from
/// `hash_from` on. Returns the fold, and the blocks and bytes folded this run.
fn fold_chain(
    cold: &spill_file::SpillFile,
    (whole, txn): (&Store, &redb::ReadTransaction),
    registry: &Registry,
    (mut fold, hash_from): (ChainFold, u64),
    batch_bytes: usize,
    progress: &std::sync::Mutex<Progress<'_>>,
) -> Result<(ChainFold, u64, u64), ReplayError> {
    let (mut n_blocks, mut n_bytes) = (0u64, 0u64);
    if !fold.takes_more() {
        return Ok((fold, 0, 0));
    }
    let validator = fold.validator;
    let from = fold.next_height();
    let mut spill_failed = None;
    // Every stored block past `from`, a batch at a time, to `send` (false: stop).
    // (Pruned bodies come back from the log's archive, checked against their kept
    // records; the fold checks them again as any block.)
    let read = move |send: &mut dyn FnMut(Vec<(u64, Vec<u8>)>) -> bool| -> Result<(), StoreError> {
        whole.stream_blocks_fetching(txn, &validator, from, batch_bytes, send)
    };
    let mut consume = |batch: Vec<(u64, Vec<u8>)>| -> bool {
        let before = fold.n_bytes;
        n_blocks += batch.len() as u64;
        // Spilled after each block, so a batch of small matches is never all in memory
        // at once.
        fold_batch(&mut fold, registry, &batch, &mut |fold| match spill::spill_if_due(cold, fold)
            .and_then(|_| fold_checkpoints::take_point(cold, fold, hash_from))
        {
            Err(e) => {
                spill_failed = Some(e);
                false
            }
            Ok(_) => true,
        });
        if spill_failed.is_some() {
            return false;
        }
        n_bytes += fold.n_bytes - before;
        if let Ok(mut progress) = progress.lock() {
            (*progress)(&validator, fold.next_height(), n_bytes);
        }
        fold.takes_more()
    };
    if rayon::current_num_threads() > 1 {
        // A reader thread copies the next batch out of the store while this one folds.
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<(u64, Vec<u8>)>>(1);
        std::thread::scope(|scope| -> Result<(), StoreError> {
            let reader = scope.spawn(move || read(&mut |batch| sender.send(batch).is_ok()));
            for batch in receiver.iter() {
                if !consume(batch) {
                    break;
                }
            }
            drop(receiver);
            reader.join().expect("the block reader does not panic")
        })?;
    } else {
        // One thread asked for, one core used: the reads take turns with the folds.
        read(&mut consume)?;
    }
    if let Some(e) = spill_failed {
        return Err(e.into());
    }
    Ok((fold, n_blocks, n_bytes))
}

/// Folds consecutive stored blocks of one chain: decodes them and checks their
/// signatures in parallel, then links and folds them in height order, calling
/// `after_block` after each (it returns false to stop there).
/// Stops at the first block that fails (recorded as an invalid block).
pub fn fold_batch(
    fold: &mut ChainFold,
    registry: &Registry,
    batch: &[(u64, Vec<u8>)],
    after_block: &mut dyn FnMut(&mut ChainFold) -> bool,
) {
    if !fold.takes_more() {
        return;
    }
    let protocol = registry.protocol();
    let validator = fold.validator;
    let decoded: Vec<(u64, Decoded<'_>)> = batch
        .par_iter()
        .map(|(height, bytes)| {
            // Strict single verification, as `af ledger verify` does: a batch check uses
            // another equation and could pass a crafted signature that verify refuses.
            let result = decode_block_borrowed(bytes)
                .and_then(|(checked, events)| {
                    check_signature(&checked.header, &checked.hash, &checked.signature)?;
                    let checks = check_block_events(registry, &validator, &events);
                    Ok((checked, events, checks, bytes.len()))
                })
                .map_err(|e| match e {
                    BlockError::NewerEventKind { .. } => BlockFault::NewerKind,
                    e => BlockFault::Invalid(e.to_string()),
                });
            (*height, result)
        })
        .collect();
    for (height, result) in decoded {
        // Past a rotation: a block the old key signed later is no history (the store
        // refuses one; a hand-made store may hold it), and no finding either.
        if !fold.takes_more() {
            return;
        }
        if height != fold.next_height() {
            fold.mark_invalid(
                fold.next_height(),
                format!("no block stored at height {} (next is {height})", fold.next_height()),
            );
            return;
        }
        let (checked, events, checks, n_bytes) = match result {
            Ok(ok) => ok,
            Err(BlockFault::NewerKind) => {
                fold.mark_awaiting_upgrade(height, 0);
                return;
            }
            Err(BlockFault::Invalid(why)) => {
                fold.mark_invalid(height, why);
                return;
            }
        };
        let header = &checked.header;
        if let Err(e) = check_link(&validator, fold.tip.as_ref(), header) {
            fold.mark_invalid(height, e.to_string());
            return;
        }
        match fold.protocol_check(protocol, &events) {
            ProtocolCheck::Valid => {}
            ProtocolCheck::Refused(why) => {
                fold.mark_invalid(height, why);
                return;
            }
            ProtocolCheck::Unknown(version) => {
                fold.mark_awaiting_upgrade(height, version);
                return;
            }
        }
        let role = match crate::ledger::rotation::role(&validator, height, &events) {
            Ok(role) => role,
            Err(why) => {
                fold.mark_invalid(height, why);
                return;
            }
        };
        fold.apply_block(protocol, header, checked.hash, n_bytes, &events, &checks);
        fold.note_rotation(height, checked.hash, role);
        if !after_block(fold) {
            return;
        }
    }
}

/// A block decoded and checked in the parallel stage: its derived fields, its events
/// borrowed from the batch's bytes, the per-event checks, its size; or why it failed.
type Decoded<'a> = Result<(CheckedBlock, Vec<Event<&'a str>>, Vec<EventCheck>, usize), BlockFault>;

/// Why a block could not be folded: a rule it breaks, or a kind of a later protocol
/// version (not a fault of its signer's that this build can judge).
enum BlockFault {
    Invalid(String),
    NewerKind,
}
