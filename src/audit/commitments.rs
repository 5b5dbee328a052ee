//! The commitment audit: a log's own commitment records must name its own blocks, and
//! each validator's commitment on chain must name the block our copy holds at that
//! height (or be ahead of our copy, which is reported, not blamed).

use crate::chain::{CommitmentRecord, LedgerCommitment};
use crate::ledger::{Store, StoreError};
use crate::replay::fold::ChainFold;
use crate::replay::records::{Discrepancy, DiscrepancyKind};
use crate::replay::ReplayError;
use serde::Serialize;

/// What the audit found on chain.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CommitmentAudit {
    pub checked: bool,
    pub note: String,
    /// Per hotkey with an af commitment: its ledger key and what our copy says of it.
    pub rows: Vec<CommitmentRow>,
    pub discrepancies: Vec<Discrepancy>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CommitmentRow {
    pub hotkey: String,
    pub chain_block: u64,
    pub commitment: LedgerCommitment,
    /// `matches`, `ahead_of_our_copy`, `not_in_our_copy` or `mismatch`.
    pub status: &'static str,
}

/// What the chain holds, read by the caller: its endpoint (for the note) and every
/// hotkey's latest commitment.
pub struct OnChain<'a> {
    pub endpoint: &'a str,
    pub records: Vec<CommitmentRecord>,
}

/// Checks every commitment a log records against its own chain, and, given the chain's
/// records, every on-chain commitment against the logs we hold.
pub fn audit_commitments(
    folds: &[ChainFold],
    store: &Store,
    on_chain: Option<OnChain<'_>>,
) -> Result<CommitmentAudit, ReplayError> {
    let mut audit = CommitmentAudit::default();
    // A log's own commitment records must name its own blocks.
    for fold in folds {
        for c in fold.commitments.iter() {
            let c = c?;
            if fold.tip.is_some_and(|t| c.committed_height <= t.height) {
                let hash = header_hash(store, &fold.validator, c.committed_height)?;
                if hash != Some(c.committed_hash) {
                    audit.discrepancies.push(Discrepancy {
                        validator: fold.validator,
                        kind: DiscrepancyKind::FalseCommitment,
                        height: c.committed_height,
                        event_idx: None,
                        detail: format!(
                            "its log records committing {} for height {}, which is not its block there",
                            c.committed_hash, c.committed_height
                        ),
                    });
                }
            }
        }
    }
    let Some(OnChain { endpoint, records }) = on_chain else {
        audit.note = "skipped: no --chain given, so on-chain commitments were not checked".into();
        return Ok(audit);
    };
    audit.checked = true;
    for record in records {
        let Some(c) = record.ledger() else { continue };
        let status = match store.tip(&c.ledger_key)? {
            None => "not_in_our_copy",
            Some(tip) if tip.height < c.tip_height => "ahead_of_our_copy",
            Some(_) => {
                let hash = header_hash(store, &c.ledger_key, c.tip_height)?;
                if hash == Some(c.tip_hash) {
                    "matches"
                } else {
                    audit.discrepancies.push(Discrepancy {
                        validator: c.ledger_key,
                        kind: DiscrepancyKind::FalseCommitment,
                        height: c.tip_height,
                        event_idx: None,
                        detail: format!(
                            "hotkey {} committed hash {} for height {} at chain block {}, but its log has {} there",
                            record.hotkey,
                            c.tip_hash,
                            c.tip_height,
                            record.block,
                            hash.map_or("no block".into(), |h| h.to_string())
                        ),
                    });
                    "mismatch"
                }
            }
        };
        audit.rows.push(CommitmentRow {
            hotkey: record.hotkey.clone(),
            chain_block: record.block,
            commitment: c,
            status,
        });
    }
    let matched = audit.rows.iter().filter(|r| r.status == "matches").count();
    audit.note = format!(
        "checked {} af commitment(s) on {}: {matched} match our copy, {} mismatch",
        audit.rows.len(),
        endpoint,
        audit.rows.iter().filter(|r| r.status == "mismatch").count()
    );
    Ok(audit)
}

/// The hash of block `height` of `validator` from its header alone: a pruned block
/// (ledger-spec/05) keeps it, and the replay that named the block verified its chain.
fn header_hash(
    store: &Store,
    validator: &crate::bytes::ValidatorKey,
    height: u64,
) -> Result<Option<crate::bytes::Hash32>, StoreError> {
    Ok(store.signed_headers(validator, height, height)?.first().map(|(header, _)| header.hash()))
}
