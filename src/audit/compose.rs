//! `af audit`'s report, composed from a replay and, where one was read, the chain: the
//! logs' commitments, weights and block hashes compared with it, every finding proven.

use super::blocks::audit_blocks;
use super::chain_view::{weights_audit, ChainView};
use super::checkpoint_start::CheckpointStart;
use super::commitments::{audit_commitments, OnChain};
use super::{findings, match_rows, skip_rows, AuditReport};
use crate::ledger::Store;
use crate::replay::{Replay, ReplayError};

/// `af audit`'s report of `replayed`, the replay of `store`, with `view` of the chain the
/// logs commit to where one was read: commitments, weights and block hashes compared
/// with it, every finding with its proof. `from_checkpoint`: how the replay started,
/// where it started logs from fold checkpoints. `seconds` is what the audit took so far.
pub fn audit_report(
    store: &Store,
    replayed: &Replay,
    view: Option<&ChainView>,
    from_checkpoint: Option<CheckpointStart>,
    seconds: f64,
) -> Result<AuditReport, ReplayError> {
    let on_chain = view.map(|v| OnChain { endpoint: &v.endpoint, records: v.records.clone() });
    let chain = audit_commitments(&replayed.folds, store, on_chain)?;
    let weights = weights_audit(replayed, &chain, view);
    let blocks = audit_blocks(&replayed.folds, view.map(|v| (v.endpoint.as_str(), &v.block_hashes)))?;
    let on_chain: Vec<_> =
        chain.discrepancies.iter().chain(&weights.discrepancies).chain(&blocks.discrepancies).cloned().collect();
    let findings = findings(store, replayed, &on_chain)?;
    let started = from_checkpoint.as_ref().map(CheckpointStart::started).unwrap_or_default();
    let checkpoint_claims = crate::replay::fold_checkpoints::check_claims(&replayed.folds, &started);
    let awaiting_upgrade: Vec<super::AwaitingUpgrade> = replayed
        .folds
        .iter()
        .filter_map(|f| f.awaiting_upgrade.map(|(height, version)| (f.validator, height, version)))
        .map(|(validator, height, version)| super::AwaitingUpgrade { validator, height, version })
        .collect();
    let identities = crate::replay::identities::Identities::of(&replayed.folds);
    let rotations = replayed
        .folds
        .iter()
        .filter_map(|f| f.succeeds.map(|s| (f.validator, s)))
        .map(|(new_key, s)| {
            let why_not = identities.unlinked.iter().find(|(k, _)| *k == new_key).map(|(_, why)| why.to_string());
            super::RotationRow {
                old_key: s.old_key,
                new_key,
                old_height: s.old_height,
                linked: why_not.is_none(),
                first_key: identities.root(&new_key),
                why_not,
            }
        })
        .collect();
    Ok(AuditReport {
        rotations,
        // Not clean while a block was not judged: a check not made is never passed.
        clean: findings.is_empty()
            && checkpoint_claims.false_claims.is_empty()
            && checkpoint_claims.disputed.is_empty()
            && awaiting_upgrade.is_empty(),
        awaiting_upgrade,
        af_version: env!("CARGO_PKG_VERSION").to_string(),
        generated_at_ms: crate::clock::unix_ms(),
        state_hash: replayed.state_hash,
        from_genesis: replayed.n_chains_from_snapshot == 0,
        n_chains: replayed.folds.len(),
        n_chains_from_snapshot: replayed.n_chains_from_snapshot,
        n_blocks_folded: replayed.n_blocks_folded,
        n_bytes_folded: replayed.n_bytes_folded,
        seconds,
        matches: match_rows(replayed)?,
        skipped: skip_rows(replayed)?,
        // Shares the replay's file: the state's matches are read from it as they are drawn.
        state: replayed.state.clone(),
        chain,
        weights,
        blocks,
        findings,
        checkpoint_claims,
        from_checkpoint,
    })
}
