//! Where `af audit --from-checkpoint` starts each log: from the newest fold checkpoint a
//! quorum of the named validators countersigned (`replay::checkpoint_quorum`), with the fold's bytes read from
//! a node, an archive or a folder and taken only if they hash to the agreed point; from
//! genesis where there is none, or it cannot be had, or the store's block there is not
//! the agreed one. What such a start trusts is said in the report.

use crate::bytes::ValidatorKey;
use crate::ledger::event::FoldPoint;
use crate::ledger::{Store, StoreError};
use crate::replay::checkpoint_quorum::{agreement, Agreed, Countersigners};
use crate::replay::fold::ChainFold;
use crate::replay::fold_checkpoints::decode_fold;
use serde::Serialize;
use std::collections::BTreeMap;

/// What a start from a checkpoint trusts, in words (the report and docs/auditor.md say it).
pub const TRUSTS: &str = "for each log started from a checkpoint, its blocks up to the checkpoint are not checked \
here: the start trusts that at least one of the point's countersigners replayed them honestly (every one of them \
signed the same fold hash in its own log, and only the validators named may countersign); every block after it is \
checked as a replay from genesis checks it, and a claim that disagrees with a fold started from a checkpoint is a \
dispute, not a false claim: only a replay from genesis tells which side is false. A log's key rotation (ledger-spec/16) is read from its blocks whatever the point, but a champion's leaving that a log recorded below the point (ledger-spec/13) is not counted";

/// The bytes published for a point (`None`: none there), or why they could not be read.
pub type ReadFold<'a> = &'a dyn Fn(&FoldPoint) -> Result<Option<Vec<u8>>, String>;

/// One log's start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainStart {
    pub validator: ValidatorKey,
    /// The point it starts from; `None`: from genesis.
    pub from: Option<Agreed>,
    /// Why points a quorum agreed on were not used, newest first.
    pub passed_over: Vec<String>,
}

/// How an audit from a checkpoint started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckpointStart {
    /// Where the folds were read.
    pub source: String,
    /// Who may countersign (`named_by` says where the list came from), how many of them
    /// a point needed, whose logs were read for claims, and the logs held whose
    /// validators may not countersign (their claims were not read).
    pub named_by: String,
    pub n_countersigners: usize,
    pub quorum: usize,
    pub n_logs: usize,
    pub n_not_listed: usize,
    /// Logs whose claims did not count, and why.
    pub unreadable: Vec<(ValidatorKey, String)>,
    pub chains: Vec<ChainStart>,
    /// Blocks below the start points: not checked by this audit.
    pub n_blocks_trusted: u64,
    pub trusts: &'static str,
}

/// The folds to start from, and how each log starts: from points at least `who.quorum`
/// of `who.keys` countersigned. `read` gives the bytes published for a point (`None`:
/// none there).
pub fn start_folds(
    store: &Store,
    who: &Countersigners,
    source: &str,
    read: ReadFold<'_>,
) -> Result<(Vec<ChainFold>, CheckpointStart), StoreError> {
    let agreement = agreement(store, who)?;
    let mut folds = Vec::new();
    let mut chains = Vec::new();
    let mut n_blocks_trusted = 0;
    for (validator, _) in store.tips()? {
        let mut start = ChainStart { validator, from: None, passed_over: Vec::new() };
        for candidate in agreement.agreed.get(&validator).into_iter().flatten() {
            match fold_for(store, candidate, read)? {
                Ok(mut fold) => {
                    rotation_facts(store, &mut fold)?;
                    n_blocks_trusted += candidate.point.height + 1;
                    folds.push(fold);
                    start.from = Some(candidate.clone());
                    break;
                }
                Err(why) => start.passed_over.push(format!("block {}: {why}", candidate.point.height)),
            }
        }
        if start.from.is_none() && start.passed_over.is_empty() {
            // Said, not silent: why this log folds from genesis.
            start.passed_over.push(match agreement.quorum > agreement.n_logs {
                true => format!(
                    "no point can have {} countersigners: the store holds the logs of only {} of the {} validator(s) \
                     who may countersign ({}); folded from genesis",
                    agreement.quorum, agreement.n_logs, agreement.n_countersigners, who.named_by
                ),
                false => format!(
                    "no point of it has {} countersigners among the {} log(s) of validators who may countersign \
                     ({}); folded from genesis",
                    agreement.quorum, agreement.n_logs, who.named_by
                ),
            });
        }
        chains.push(start);
    }
    let start = CheckpointStart {
        source: source.to_string(),
        named_by: who.named_by.clone(),
        n_countersigners: agreement.n_countersigners,
        quorum: agreement.quorum,
        n_logs: agreement.n_logs,
        n_not_listed: agreement.n_not_listed,
        unreadable: agreement.unreadable,
        chains,
        n_blocks_trusted,
        trusts: TRUSTS,
    };
    Ok((folds, start))
}

impl CheckpointStart {
    /// The logs started from a checkpoint, and the height of each one's point: a claim
    /// about such a log that differs from this replay's fold is a dispute, not a finding.
    pub fn started(&self) -> BTreeMap<ValidatorKey, u64> {
        self.chains.iter().filter_map(|c| c.from.as_ref().map(|a| (c.validator, a.point.height))).collect()
    }
}

/// The fold of `checkpoint_quorum`'s point, or why not.
fn fold_for(store: &Store, agreed: &Agreed, read: ReadFold<'_>) -> Result<Result<ChainFold, String>, StoreError> {
    let point = &agreed.point;
    // The store's block must be the agreed one: another block there is another history
    // (the store's or the claimers'), and only a replay from genesis tells which.
    match store.signed_headers(&point.validator, point.height, point.height)?.as_slice() {
        [(header, _)] if header.hash() == point.block_hash => {}
        [(header, _)] => {
            return Ok(Err(format!(
                "the store's block there has hash {}, not the agreed {}: folded from genesis",
                header.hash(),
                point.block_hash
            )))
        }
        _ => return Ok(Err("the store does not hold that block".into())),
    }
    let bytes = match read(point) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(Err("its fold is not published there".into())),
        Err(e) => return Ok(Err(format!("reading its fold: {e}"))),
    };
    Ok(decode_fold(&bytes, point).map_err(|e| e.to_string()))
}

/// What a fold started from a point lacks of a key rotation (ledger-spec/16; fold format
/// 15 does not carry it): the predecessor its block 0 names, and its rotation block if the
/// point is at it, both read from the store.
fn rotation_facts(store: &Store, fold: &mut ChainFold) -> Result<(), StoreError> {
    if store.predecessor(&fold.validator)?.is_some() {
        if let Some(first) = store.block(&fold.validator, 0)? {
            if let [crate::ledger::Event::KeySucceeded(succeeded)] = first.block.events.as_slice() {
                fold.succeeds = Some(*succeeded);
            }
        }
    }
    if let (Some(at), Some(tip)) = (store.rotation(&fold.validator)?, fold.tip) {
        if at.height == tip.height && at.hash == tip.hash {
            fold.rotated = Some(at);
        }
    }
    Ok(())
}
