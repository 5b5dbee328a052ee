//! Full verification of a store: every chain from genesis to tip, every byte, every
//! signature, every link, with nothing taken from the store on trust (not even its tip
//! records), and then the indexes against the blocks. Chains are cut into runs of
//! heights checked side by side, each run in order, and the runs joined in height order,
//! so the report does not depend on the thread count.
//!
//! The store must have been opened with [`Store::open_read_only`] or a writer's checked
//! open, so that redb has verified every page checksum before these logical checks run;
//! or with [`Store::open_read_only_overlapped`], whose page check runs beside them and
//! must pass before anything they found is reported.

use super::block::{check_block_with, check_link, check_signature, BlockError, Tip};
use super::pruned::PrunedBlock;
use super::store::{self, Store, StoreError};
use crate::bytes::ValidatorKey;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

mod index;
use index::*;

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
    /// Of `n_blocks_ok` and `n_events`, those kept pruned (header, signature and leaf
    /// hashes; ledger-spec/05): verified as far as that goes, their events not held.
    pub n_blocks_pruned: u64,
    pub n_events_pruned: u64,
    /// Where the pruned bodies were published, as the store records it.
    pub pruned_from: Option<String>,
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
    /// Of those, blocks and events kept pruned (their bodies not held, not checked).
    pub n_blocks_pruned: u64,
    pub n_events_pruned: u64,
}

impl StoreReport {
    /// `af ledger verify --json`: the report with its rates over `seconds`, and the
    /// recovery the store's writer will make on opening it, if any.
    pub fn json(&self, seconds: f64, recovery_needed: Option<String>) -> Result<serde_json::Value, serde_json::Error> {
        let mut value = serde_json::to_value(self)?;
        value["seconds"] = serde_json::json!(seconds);
        value["events_per_second"] = serde_json::json!(self.n_events as f64 / seconds);
        value["mib_per_second"] = serde_json::json!(self.n_bytes as f64 / 1048576.0 / seconds);
        value["recovery_needed"] = serde_json::json!(recovery_needed);
        Ok(value)
    }

    /// `af ledger verify`'s report in words: a line per chain and for the indexes, then
    /// the totals and the rate over `seconds`.
    pub fn lines(&self, seconds: f64) -> Vec<String> {
        let mut out: Vec<String> = self
            .chains
            .iter()
            .map(|chain| match &chain.fault {
                None => format!(
                    "ok    validator {}: {} blocks, {} events, tip {}{}",
                    chain.validator,
                    chain.n_blocks_ok,
                    chain.n_events,
                    chain.verified_tip.map_or("(empty)".into(), |t| format!("height {} hash {}", t.height, t.hash)),
                    match chain.n_blocks_pruned {
                        0 => String::new(),
                        n => format!(
                            "; heights 0..{n} pruned: {} events checked by their leaf hashes only, bodies in {}",
                            chain.n_events_pruned,
                            chain.pruned_from.as_deref().unwrap_or("(no archive recorded)")
                        ),
                    }
                ),
                Some(fault) => format!(
                    "FAIL  validator {}: first bad height {} ({}): {}",
                    chain.validator, fault.height, fault.kind, fault.message
                ),
            })
            .collect();
        if self.n_blocks_pruned > 0 {
            out.push(format!(
                "note  {} of the {} blocks ({} events) are pruned: links, signatures and Merkle roots verified; \
                 their events are not held here, so not checked against the bounds of 02 nor indexed",
                self.n_blocks_pruned, self.n_blocks, self.n_events_pruned
            ));
        }
        out.push(match (&self.indexes.fault, self.indexes.checked) {
            (Some(fault), _) => format!("FAIL  index {} ({}): {}", fault.index, fault.kind, fault.message),
            (None, true) => {
                format!("ok    indexes: {} transcripts, each indexed by challenge and by miner", self.indexes.n_entries)
            }
            (None, false) => "skip  indexes: not compared, a chain failed".into(),
        });
        let mib = self.n_bytes as f64 / 1048576.0;
        out.push(format!(
            "{} {} chain(s), {} blocks, {} events, {mib:.1} MiB in {seconds:.2} s ({:.0} events/s, {:.0} MiB/s)",
            if self.ok { "verified" } else { "FAILED:" },
            self.chains.len(),
            self.n_blocks,
            self.n_events,
            self.n_events as f64 / seconds,
            mib / seconds
        ));
        out
    }
}

/// Progress after each block, from any worker: (blocks verified so far, bytes so far),
/// over the whole store.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

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
        BlockError::NewerEventKind { .. } => "newer_event_kind",
        BlockError::PastRotation { .. } => "past_rotation",
    }
}

/// Verifies every chain in the store. Errors only if the store cannot be read at all;
/// a bad chain is a [`ChainFault`] in the report. Uses every thread of the current rayon
/// pool: chains are cut into runs of heights checked side by side, and the two indexes
/// are read while the blocks are checked.
pub fn verify_store(store: &Store, progress: Progress<'_>) -> Result<StoreReport, StoreError> {
    // A damaged page can make the store engine panic (in this thread or any worker, whose
    // panic rayon carries here): a finding about the file, not a crash of the verifier.
    // On a store whose page check runs beside this one (`Store::open_read_only_overlapped`)
    // the pages are not yet known to be sound.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| verify_store_inner(store, progress))).unwrap_or_else(
        |_| {
            Err(StoreError::Corrupt(
                "the store engine failed reading the store: a damaged page (or a fault of af or redb)".into(),
            ))
        },
    )
}

fn verify_store_inner(store: &Store, progress: Progress<'_>) -> Result<StoreReport, StoreError> {
    let txn = store.read()?;
    let tips = store::tips_in(&txn)?;
    let mut validators: BTreeSet<ValidatorKey> = tips.iter().map(|(v, _)| *v).collect();
    validators.extend(store::validators_with_blocks(&txn)?);
    validators.extend(store::validators_with_pruned(&txn)?);
    let chains: Vec<(ValidatorKey, Option<Tip>, Option<u64>)> = validators
        .into_iter()
        .map(|validator| (validator, tips.iter().find(|(v, _)| *v == validator).map(|(_, t)| *t), None))
        .collect();
    let mut expected = ExpectedIndex::new()?;
    let key = expected.key;
    // The indexes are read and digested while the blocks are checked; their sums are
    // compared only once every chain has verified.
    let (chains, (by_challenge, by_miner)) = rayon::join(
        || verify_chains(&txn, &chains, &mut expected, progress),
        || rayon::join(|| challenge_index_sum(&txn, &key), || index_sum(&txn, BY_MINER_TAG, &key)),
    );
    let chains = chains?;
    let chains_ok = chains.iter().all(|c| c.fault.is_none());
    let n_entries = expected.by_challenge.count;
    let indexes = if chains_ok {
        let challenge_fault = compare_index(&txn, BY_CHALLENGE_TAG, by_challenge?, &expected)?;
        let miner_fault = compare_index(&txn, BY_MINER_TAG, by_miner?, &expected)?;
        IndexReport { checked: true, n_entries, fault: challenge_fault.or(miner_fault) }
    } else {
        IndexReport { checked: false, n_entries, fault: None }
    };
    Ok(StoreReport {
        ok: chains_ok && indexes.fault.is_none(),
        indexes,
        n_blocks: chains.iter().map(|c| c.n_blocks_ok).sum(),
        n_events: chains.iter().map(|c| c.n_events).sum(),
        n_bytes: chains.iter().map(|c| c.n_bytes).sum(),
        n_blocks_pruned: chains.iter().map(|c| c.n_blocks_pruned).sum(),
        n_events_pruned: chains.iter().map(|c| c.n_events_pruned).sum(),
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
    let mut reports = verify_chains(txn, &[(*validator, None, Some(height))], &mut expected, &|_, _| {})?;
    let report = reports.pop().expect("one chain asked, one report");
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

/// What one worker found in one run of consecutive heights of a chain: counts and index
/// sums of the blocks that checked out (each against the one before it in the run), the
/// first block's header (its link to the run before is checked when the runs are joined),
/// and the first fault in the run.
struct RunReport {
    /// The height after the last block that checked out (the run's start if none did).
    next_height: u64,
    /// The first block that checked out (on its own; its link is the join's).
    first: Option<crate::ledger::block::BlockHeader>,
    last: Option<Tip>,
    n_blocks_ok: u64,
    n_events: u64,
    n_bytes: u64,
    n_blocks_pruned: u64,
    n_events_pruned: u64,
    index: ExpectedIndex,
    fault: Option<ChainFault>,
    /// The lowest height with a piece in the run, if any (names the next stored block
    /// when an earlier run ends short).
    first_stored: Option<u64>,
}

/// One block on its own: canonical bytes, Merkle root, signature, and the index entries
/// its transcripts imply, digested under `key`.
fn check_one(
    validator: &ValidatorKey,
    height: u64,
    bytes: &[u8],
    key: &[u8; 32],
    index: &mut ExpectedIndex,
) -> Result<(Tip, crate::ledger::block::BlockHeader, u64), BlockError> {
    let (mut by_challenge, mut by_miner) = (Entries::default(), Entries::default());
    let mut event_idx = 0u32;
    let checked = check_block_with(bytes, &mut |event| {
        if let Some(t) = event.transcript() {
            let location = store::Location { validator: *validator, height, event_idx }.encode();
            by_challenge.push(&t.challenge_id.0, &location);
            by_miner.push(t.miner.hotkey.as_bytes(), &location);
        }
        event_idx += 1;
    })?;
    let header = checked.header;
    check_signature(&header, &checked.hash, &checked.signature)?;
    by_challenge.digests(key, BY_CHALLENGE_TAG).into_iter().for_each(|d| index.by_challenge.add(d));
    by_miner.digests(key, BY_MINER_TAG).into_iter().for_each(|d| index.by_miner.add(d));
    let tip = Tip { height: header.height, hash: checked.hash, time_ms: header.time_ms };
    Ok((tip, header, checked.leaf_hashes.len() as u64))
}

/// Checks the blocks of `validator` from `from` to `to` in order, each read and checked
/// by this worker alone (one block held at a time), each linked to the one before it in
/// the run: below `pruned_below` the kept records of pruned blocks (header, signature,
/// leaf hashes), from there the stored blocks. Stops at the first fault, or when `stop`
/// is set.
fn check_run(
    txn: &redb::ReadTransaction,
    (chain, validator, pruned_below): (usize, &ValidatorKey, u64),
    (from, to): (u64, u64),
    key: &[u8; 32],
    done: &Done<'_>,
) -> Result<RunReport, StoreError> {
    let mut run = RunReport {
        next_height: from,
        first: None,
        last: None,
        n_blocks_ok: 0,
        n_events: 0,
        n_bytes: 0,
        n_blocks_pruned: 0,
        n_events_pruned: 0,
        index: ExpectedIndex { key: *key, ..ExpectedIndex::default() },
        fault: None,
        first_stored: None,
    };
    if done.past_fault(chain, from) {
        return Ok(run);
    }
    // One block that checked out on its own (or did not), linked and counted.
    let take = |run: &mut RunReport,
                height: u64,
                checked: Result<(Tip, crate::ledger::block::BlockHeader, u64), BlockError>,
                index: ExpectedIndex,
                n_bytes: u64,
                pruned: bool| {
        run.first_stored.get_or_insert(height);
        let fault = |kind: &'static str, message: String| ChainFault { height: run.next_height, kind, message };
        if height != run.next_height {
            let what = if pruned { "pruned" } else { "stored" };
            run.fault = Some(fault(
                "missing_block",
                format!("no block {what} at height {} (next {what} is {height})", run.next_height),
            ));
            return false;
        }
        let linked = checked.and_then(|(tip, header, n_events)| {
            if run.last.is_some() {
                check_link(validator, run.last.as_ref(), &header)?;
            }
            Ok((tip, header, n_events))
        });
        match linked {
            Ok((tip, header, n_events)) => {
                run.first.get_or_insert(header);
                run.index.merge(&index);
                run.last = Some(tip);
                run.n_blocks_ok += 1;
                run.n_events += n_events;
                run.n_bytes += n_bytes;
                if pruned {
                    run.n_blocks_pruned += 1;
                    run.n_events_pruned += n_events;
                }
                run.next_height += 1;
                done.add(n_bytes);
                !done.past_fault(chain, run.next_height)
            }
            Err(error) => {
                run.fault = Some(fault(fault_kind(&error), error.to_string()));
                false
            }
        }
    };
    if from < pruned_below {
        let mut going = true;
        let read = store::for_each_pruned_in(txn, validator, from, to.min(pruned_below - 1), &mut |height, record| {
            let checked = PrunedBlock::decode(record).and_then(|kept| {
                let tip = kept.check()?;
                Ok((tip, kept.header, kept.leaf_hashes.len() as u64))
            });
            let index = ExpectedIndex { key: *key, ..ExpectedIndex::default() };
            going = take(&mut run, height, checked, index, 0, true);
            going
        });
        match read {
            // A group whose pieces or records are not the store's layout: a fault of
            // the chain where its records stop making sense.
            Err(StoreError::BadChunks { why, .. }) if run.fault.is_none() => {
                run.fault = Some(ChainFault { height: run.next_height, kind: "bad_chunks", message: why });
                going = false;
            }
            Err(StoreError::BadChunks { .. }) => going = false,
            other => other?,
        }
        // The records end before the run's pruned part does: a gap, named at its height.
        if going && run.fault.is_none() && run.next_height <= to.min(pruned_below - 1) {
            let missing = run.next_height;
            run.fault = Some(ChainFault {
                height: missing,
                kind: "missing_block",
                message: format!(
                    "no block pruned or stored at height {missing}, below the pruned height {pruned_below}"
                ),
            });
        }
        if run.fault.is_some() || !going || to < pruned_below {
            if let Some(fault) = &run.fault {
                done.fault_at(chain, fault.height);
            }
            return Ok(run);
        }
    }
    let read = store::for_each_block_in(txn, validator, from.max(pruned_below), to, &mut |height, bytes| {
        let mut index = ExpectedIndex { key: *key, ..ExpectedIndex::default() };
        let checked = check_one(validator, height, bytes, key, &mut index);
        take(&mut run, height, checked, index, bytes.len() as u64, false)
    });
    match read {
        // Pieces that are not the store's layout: a fault of the chain at that height.
        Err(StoreError::BadChunks { height, why, .. }) if run.fault.is_none() => {
            // Pieces are stored at that height, though they join into no block.
            run.first_stored.get_or_insert(height);
            run.fault = Some(match height == run.next_height {
                true => ChainFault { height, kind: "bad_chunks", message: why },
                // A gap comes first, as it would across runs.
                false => ChainFault {
                    height: run.next_height,
                    kind: "missing_block",
                    message: format!("no block stored at height {} (next stored is {height})", run.next_height),
                },
            });
        }
        Err(StoreError::BadChunks { .. }) => {}
        other => other?,
    }
    if let Some(fault) = &run.fault {
        done.fault_at(chain, fault.height);
    }
    Ok(run)
}

/// Blocks and bytes checked so far by every worker, for the progress line, and each
/// chain's lowest fault found so far: a run past it is not read (the chain's report ends
/// at its first fault), while the runs before it go on to their end.
struct Done<'a> {
    blocks: AtomicU64,
    bytes: AtomicU64,
    faults: Vec<AtomicU64>,
    progress: Progress<'a>,
}

impl Done<'_> {
    fn add(&self, n_bytes: u64) {
        let blocks = self.blocks.fetch_add(1, Relaxed) + 1;
        let bytes = self.bytes.fetch_add(n_bytes, Relaxed) + n_bytes;
        (self.progress)(blocks, bytes);
    }

    fn fault_at(&self, chain: usize, height: u64) {
        self.faults[chain].fetch_min(height, Relaxed);
    }

    fn past_fault(&self, chain: usize, height: u64) -> bool {
        height > self.faults[chain].load(Relaxed)
    }
}

/// The heights each worker takes: every chain from 0 to its last stored height, cut into
/// runs so that every thread of the pool has several (a chain's blocks then spread over
/// every core, and one long chain does not leave the others idle).
fn runs(chains: &[(ValidatorKey, Option<u64>)], threads: usize) -> Vec<(usize, u64, u64)> {
    let total: u64 = chains.iter().filter_map(|(_, last)| last.map(|l| l.saturating_add(1))).sum();
    let span = total.div_ceil(threads.max(1) as u64 * RUNS_PER_THREAD).max(1);
    let mut out = Vec::new();
    for (i, (_, last)) in chains.iter().enumerate() {
        let Some(last) = *last else { continue };
        let mut from = 0u64;
        loop {
            let to = from.saturating_add(span - 1).min(last);
            out.push((i, from, to));
            if to == last {
                break;
            }
            from = to + 1;
        }
    }
    out
}

/// Runs per thread of the pool: enough that a slow run (big blocks) does not leave the
/// other threads idle at the end.
const RUNS_PER_THREAD: u64 = 8;

/// Verifies the chains of `chains` (each with the height to stop at, if any) in
/// parallel runs over every thread of the current rayon pool, then joins each chain's
/// runs in height order: the link between runs, the first fault, and the tip record.
fn verify_chains(
    txn: &redb::ReadTransaction,
    chains: &[(ValidatorKey, Option<Tip>, Option<u64>)],
    expected: &mut ExpectedIndex,
    progress: Progress<'_>,
) -> Result<Vec<ChainReport>, StoreError> {
    let mut lasts = Vec::with_capacity(chains.len());
    let mut pruned = Vec::with_capacity(chains.len());
    for (validator, _, until) in chains {
        let below = store::pruned_below(txn, validator)?;
        // Pieces below the pruned height: a block both pruned and stored, or a gap the
        // records skip; either way the chain is wrong from there.
        let stored_below = store::first_stored_height(txn, validator)?.filter(|first| *first < below);
        pruned.push((below, stored_below, store::pruned_from(txn, validator)?));
        let last = store::last_stored_height(txn, validator)?.max(below.checked_sub(1));
        lasts.push((
            *validator,
            match until {
                Some(until) => last.map(|l| l.min(*until)),
                None => last,
            },
        ));
    }
    let runs = runs(&lasts, rayon::current_num_threads());
    let done = Done {
        blocks: 0.into(),
        bytes: 0.into(),
        faults: chains.iter().map(|_| AtomicU64::new(u64::MAX)).collect(),
        progress,
    };
    let key = expected.key;
    // Each run holds one block at a time: the bytes held are one block per thread.
    let reports: Vec<Result<RunReport, StoreError>> = runs
        .par_iter()
        .map(|&(chain, from, to)| check_run(txn, (chain, &lasts[chain].0, pruned[chain].0), (from, to), &key, &done))
        .collect();
    let mut reports = reports.into_iter();
    let mut out = Vec::with_capacity(chains.len());
    let mut run_chains = runs.iter().map(|(chain, _, _)| *chain).peekable();
    for (i, (validator, recorded_tip, until)) in chains.iter().enumerate() {
        let mut chain_runs = Vec::new();
        while run_chains.next_if(|c| *c == i).is_some() {
            chain_runs.push(reports.next().expect("one report per run")?);
        }
        let mut report = join_runs(validator, chain_runs, expected);
        let (_, stored_below, pruned_from) = &pruned[i];
        report.pruned_from = pruned_from.clone();
        if let Some(height) = *stored_below {
            if report.fault.as_ref().is_none_or(|f| f.height > height) && until.is_none_or(|u| height <= u) {
                report.fault = Some(ChainFault {
                    height,
                    kind: "pruned_and_stored",
                    message: format!(
                        "pieces of a block are stored at height {height}, below the pruned height {}",
                        pruned[i].0
                    ),
                });
            }
        }
        if report.fault.is_none() && until.is_none() {
            report.fault = tip_fault(*recorded_tip, report.verified_tip);
        }
        out.push(report);
    }
    Ok(out)
}

/// A chain's runs, in height order, joined into its report: each run's first block must
/// link to the previous run's last, a run that ended short is a missing block unless it
/// is the chain's end, and the first fault ends the chain.
fn join_runs(validator: &ValidatorKey, runs: Vec<RunReport>, expected: &mut ExpectedIndex) -> ChainReport {
    let mut report = ChainReport {
        validator: *validator,
        n_blocks_ok: 0,
        n_events: 0,
        n_bytes: 0,
        n_blocks_pruned: 0,
        n_events_pruned: 0,
        pruned_from: None,
        verified_tip: None,
        fault: None,
    };
    let next_stored: Vec<Option<u64>> =
        (0..runs.len()).map(|i| runs[i + 1..].iter().find_map(|r| r.first_stored)).collect();
    let mut next_height = 0u64;
    for (i, run) in runs.into_iter().enumerate() {
        if let Some(header) = &run.first {
            if let Err(error) = check_link(validator, report.verified_tip.as_ref(), header) {
                report.fault =
                    Some(ChainFault { height: next_height, kind: fault_kind(&error), message: error.to_string() });
                return report;
            }
            expected.merge(&run.index);
            report.n_blocks_ok += run.n_blocks_ok;
            report.n_events += run.n_events;
            report.n_bytes += run.n_bytes;
            report.n_blocks_pruned += run.n_blocks_pruned;
            report.n_events_pruned += run.n_events_pruned;
            report.verified_tip = run.last;
            next_height = run.next_height;
        }
        if run.fault.is_some() {
            report.fault = run.fault;
            return report;
        }
        // The run stopped before its end with no fault: its later heights hold nothing,
        // so the next block stored (in a later run) is past a gap.
        if let Some(next) = next_stored[i] {
            if next != next_height {
                report.fault = Some(ChainFault {
                    height: next_height,
                    kind: "missing_block",
                    message: format!("no block stored at height {next_height} (next stored is {next})"),
                });
                return report;
            }
        }
    }
    report
}

/// Whether the tip record names exactly the last verified block.
fn tip_fault(recorded_tip: Option<Tip>, verified: Option<Tip>) -> Option<ChainFault> {
    match (recorded_tip, verified) {
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
    }
}
