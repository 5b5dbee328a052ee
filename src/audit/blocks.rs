//! The chain-block audit: every match id derives from the chain block at its start and
//! that block's hash (ledger-spec/06); replay checks the derivation, and this checks each
//! recorded hash against the chain. Pure over the folds and the hashes the caller read.

use crate::bytes::Hash32;
use crate::replay::fold::ChainFold;
use crate::replay::records::{Discrepancy, DiscrepancyKind};
use crate::replay::spill_file::SpillFileError;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The most distinct blocks one audit looks up (each is one chain read).
pub const MAX_BLOCK_LOOKUPS: usize = 10_000;

#[derive(Clone, Debug, Default, Serialize)]
pub struct BlockAudit {
    pub checked: bool,
    pub note: String,
    pub n_matches_checked: usize,
    pub discrepancies: Vec<Discrepancy>,
}

/// The chain blocks the folds' matches name (a match with the zero hash ran without a
/// chain and names none), at most `MAX_BLOCK_LOOKUPS` of them, lowest first.
pub fn blocks_to_check(folds: &[ChainFold]) -> Result<Vec<u64>, SpillFileError> {
    let mut blocks = BTreeSet::new();
    for m in folds.iter().flat_map(|f| f.matches.values()) {
        let m = m?;
        if m.chain_block_hash != Hash32([0; 32]) {
            blocks.insert(m.chain_block);
        }
    }
    Ok(blocks.into_iter().take(MAX_BLOCK_LOOKUPS).collect())
}

/// Compares each match's recorded hash with the chain's (`hashes`: block -> the chain's
/// hash, `None` for a block the chain does not have). Blocks not in `hashes` were not
/// looked up and are counted as unchecked, never as fine.
pub fn audit_blocks(
    folds: &[ChainFold],
    hashes: Option<(&str, &BTreeMap<u64, Option<Hash32>>)>,
) -> Result<BlockAudit, SpillFileError> {
    let mut audit = BlockAudit::default();
    let Some((endpoint, hashes)) = hashes else {
        audit.note = "skipped: no --chain given, so match block hashes were not checked".into();
        return Ok(audit);
    };
    audit.checked = true;
    let (mut unchecked, mut without_chain) = (0usize, 0usize);
    for fold in folds {
        for read in fold.matches.iter() {
            let (match_id, m) = read?;
            if m.chain_block_hash == Hash32([0; 32]) {
                without_chain += 1;
                continue;
            }
            let Some(on_chain) = hashes.get(&m.chain_block) else {
                unchecked += 1;
                continue;
            };
            audit.n_matches_checked += 1;
            if *on_chain != Some(m.chain_block_hash) {
                audit.discrepancies.push(Discrepancy {
                    validator: fold.validator,
                    kind: DiscrepancyKind::FalseBlockHash,
                    height: m.started_height,
                    event_idx: None,
                    detail: format!(
                        "match {match_id} names block {} with hash {}, but the chain has {}",
                        m.chain_block,
                        m.chain_block_hash,
                        on_chain.map_or("no such block".into(), |h| h.to_string())
                    ),
                });
            }
        }
    }
    audit.note = format!(
        "checked the start block of {} match(es) on {endpoint}: {} differ{}{}",
        audit.n_matches_checked,
        audit.discrepancies.len(),
        if unchecked > 0 {
            format!("; {unchecked} not looked up (over {MAX_BLOCK_LOOKUPS} blocks)")
        } else {
            String::new()
        },
        if without_chain > 0 { format!("; {without_chain} ran without a chain") } else { String::new() }
    );
    Ok(audit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::ValidatorKey;
    use crate::ledger::event::MinerRef;
    use crate::replay::records::MatchFold;

    fn fold_with(blocks: &[(u64, Hash32)]) -> ChainFold {
        let mut fold = ChainFold::new(ValidatorKey([1; 32]));
        for (i, &(chain_block, chain_block_hash)) in blocks.iter().enumerate() {
            let miner = MinerRef { hotkey: "m".into(), uid: 0, model: "x".into() };
            fold.matches.insert(
                Hash32([i as u8; 32]),
                MatchFold {
                    contender: miner.clone(),
                    champion: miner,
                    envs: Vec::new().into(),
                    rule: "".into(),
                    ratio_to_beat_ppm: 0,
                    started_height: i as u64,
                    started_event_idx: 0,
                    started_time_ms: 0,
                    chain_block,
                    chain_block_hash,
                    env_folds: Default::default(),
                    decided: None,
                    n_transcripts: 0,
                    network_rules: false,
                },
            );
        }
        fold
    }

    #[test]
    fn recorded_hashes_are_compared_with_the_chain_and_unlooked_blocks_are_never_fine() {
        let folds =
            [fold_with(&[(10, Hash32([7; 32])), (11, Hash32([8; 32])), (0, Hash32([0; 32])), (12, Hash32([9; 32]))])];
        assert_eq!(blocks_to_check(&folds).unwrap(), [10, 11, 12]);
        let chain = BTreeMap::from([(10, Some(Hash32([7; 32]))), (11, Some(Hash32([1; 32])))]);
        let audit = audit_blocks(&folds, Some(("local:x", &chain))).unwrap();
        assert_eq!(audit.n_matches_checked, 2);
        assert_eq!(audit.discrepancies.len(), 1);
        assert_eq!(audit.discrepancies[0].kind, DiscrepancyKind::FalseBlockHash);
        assert!(audit.discrepancies[0].detail.contains("block 11"));
        assert!(
            audit.note.contains("1 not looked up") && audit.note.contains("1 ran without a chain"),
            "{}",
            audit.note
        );
        // A block the chain does not have is a false hash too.
        let missing = BTreeMap::from([(10, None), (11, Some(Hash32([8; 32]))), (12, Some(Hash32([9; 32])))]);
        assert_eq!(audit_blocks(&folds, Some(("local:x", &missing))).unwrap().discrepancies.len(), 1);
        assert!(!audit_blocks(&folds, None).unwrap().checked);
    }
}
