//! The offline audit's findings, from a replay of every log in a store: the replay's own
//! discrepancies, tip records that are not the end of a verified chain, commitments that
//! do not name their log's blocks (and, given the chain, on-chain commitments that differ
//! from our copy and weights that differ from what a log says it sent), each with an
//! inclusion proof of the offending event where it has one, plus every validator's matches
//! as their logs recorded them. Pure over the store and the replay; the CLI does the IO
//! (opening, the chain, printing, the HTML file).

pub mod blocks;
pub mod chain_view;
pub mod checkpoint_start;
pub mod commitments;
pub mod compose;
pub mod miner_status;
pub mod report;
pub mod text;
pub mod transcript_text;
pub mod weights;

use crate::bytes::{Hash32, MatchId, ValidatorKey};
use crate::ledger::event::EnvOutcome;
use crate::ledger::proof::{prove_in_block, signed_headers, InclusionProof, SignedHeader};
use crate::ledger::{Store, StoreError};
use crate::limits::MAX_PROOF_HEADERS;
use crate::replay::combine::NetworkState;
use crate::replay::records::{Discrepancy, DiscrepancyKind, HeldMiner, Name};
use crate::replay::spill_file::SpillFileError;
use crate::replay::Replay;
pub use commitments::{audit_commitments, CommitmentAudit, CommitmentRow};
use serde::Serialize;
pub use weights::{audit_weights, WeightsAudit, WeightsOnChain, WeightsRow};

/// Discrepancies that get an inclusion proof; the rest are listed without one.
pub const MAX_PROOFS: usize = 1000;
/// Most signed headers all of an audit's proofs hold together (about 50 MB in memory): a
/// proof runs from its block to the tip, so a thousand proofs into a long chain would
/// otherwise hold that chain's headers a thousand times. Past it, findings get no proof.
pub const MAX_PROOF_HEADERS_TOTAL: usize = 262_144;

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    #[serde(flatten)]
    pub discrepancy: Discrepancy,
    /// Inclusion proof of the offending event in the offender's own log, where it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof: Option<InclusionProof>,
}

/// One env of one validator's match, as its log recorded the pairs and the decision.
#[derive(Clone, Debug, Serialize)]
pub struct EnvRow {
    pub env: Name,
    pub wins: u32,
    pub losses: u32,
    pub draws: u32,
    pub decision: Option<EnvOutcome>,
}

/// One match as one validator played it.
#[derive(Clone, Debug, Serialize)]
pub struct MatchRow {
    pub validator: ValidatorKey,
    pub match_id: MatchId,
    pub contender: HeldMiner,
    pub champion: HeldMiner,
    pub started_time_ms: u64,
    /// The ratio the contender had to beat.
    pub ratio_to_beat_ppm: u32,
    pub rule: Name,
    pub envs: Vec<EnvRow>,
    /// `None` while the match is open in this log.
    pub contender_won: Option<bool>,
    pub new_ratio_to_beat_ppm: Option<u32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct AuditReport {
    pub clean: bool,
    pub af_version: String,
    pub generated_at_ms: u64,
    pub state_hash: Hash32,
    pub from_genesis: bool,
    pub n_chains: usize,
    pub n_chains_from_snapshot: usize,
    pub n_blocks_folded: u64,
    pub n_bytes_folded: u64,
    pub seconds: f64,
    pub state: NetworkState,
    pub matches: Vec<MatchRow>,
    pub chain: CommitmentAudit,
    pub weights: WeightsAudit,
    pub blocks: blocks::BlockAudit,
    /// Every miner a validator recorded not playing (sybil duplicates, the champion's
    /// model), as each log recorded it.
    pub skipped: Vec<SkipRow>,
    pub findings: Vec<Finding>,
    /// The logs' fold checkpoints compared with this replay (a false one is a finding).
    pub checkpoint_claims: crate::replay::fold_checkpoints::ClaimsChecked,
    /// How `--from-checkpoint` started each log, and what that trusts; `None` otherwise.
    pub from_checkpoint: Option<checkpoint_start::CheckpointStart>,
    /// Logs whose blocks from some height on belong to a protocol version this build does
    /// not apply (ledger-spec/15): not judged past it, so the audit is not clean, and
    /// no finding is held against them.
    pub awaiting_upgrade: Vec<AwaitingUpgrade>,
    /// Each log that names a predecessor by key rotation (ledger-spec/16): whether the two
    /// are linked into one validator, and why not where they are not.
    pub rotations: Vec<RotationRow>,
}

/// A log that continues another by key rotation, as the audit found it.
#[derive(Clone, Debug, Serialize)]
pub struct RotationRow {
    pub old_key: ValidatorKey,
    pub new_key: ValidatorKey,
    /// The old log's rotation block.
    pub old_height: u64,
    /// One validator (both keys signed the link), named by `first_key`; or not, and why.
    pub linked: bool,
    pub first_key: ValidatorKey,
    pub why_not: Option<String>,
}

/// A log the audit could not judge past `height`: its blocks there are of protocol
/// `version` (0: one this build has no number for), which this build does not apply.
#[derive(Clone, Debug, Serialize)]
pub struct AwaitingUpgrade {
    pub validator: ValidatorKey,
    pub height: u64,
    pub version: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct SkipRow {
    pub validator: ValidatorKey,
    #[serde(flatten)]
    pub skip: crate::replay::records::SkipFold,
}

/// Every `MinerSkipped` in every log, by validator then height.
pub fn skip_rows(replayed: &Replay) -> Result<Vec<SkipRow>, SpillFileError> {
    replayed
        .folds
        .iter()
        .flat_map(|fold| fold.skipped.iter().map(|skip| Ok(SkipRow { validator: fold.validator, skip: skip? })))
        .collect()
}

/// Every validator's matches from the replay's folds, each match's rows together.
pub fn match_rows(replayed: &Replay) -> Result<Vec<MatchRow>, SpillFileError> {
    let rows: Vec<MatchRow> = replayed
        .folds
        .iter()
        .flat_map(|fold| {
            fold.matches.iter().map(|read| {
                let (match_id, m) = read?;
                Ok(MatchRow {
                    validator: fold.validator,
                    match_id,
                    contender: m.contender.clone(),
                    champion: m.champion.clone(),
                    started_time_ms: m.started_time_ms,
                    ratio_to_beat_ppm: m.ratio_to_beat_ppm,
                    rule: m.rule.clone(),
                    envs: m
                        .envs
                        .iter()
                        .map(|env| {
                            let fold = m.env_folds.get(&env.name);
                            EnvRow {
                                env: env.name.clone(),
                                wins: fold.map_or(0, |f| f.wins),
                                losses: fold.map_or(0, |f| f.losses),
                                draws: fold.map_or(0, |f| f.draws),
                                decision: fold.and_then(|f| f.decision),
                            }
                        })
                        .collect(),
                    contender_won: m.decided.as_ref().map(|d| d.contender_won),
                    new_ratio_to_beat_ppm: m.decided.as_ref().map(|d| d.new_ratio_to_beat_ppm),
                })
            })
        })
        .collect::<Result<_, SpillFileError>>()?;
    // Each match's rows together (the same contender and champion: every log that played
    // it), matches in the order they first started, then the logs in start order.
    let mut first_start: std::collections::BTreeMap<(&str, &str), u64> = std::collections::BTreeMap::new();
    for r in &rows {
        let first = first_start.entry((&r.contender.hotkey, &r.champion.hotkey)).or_insert(u64::MAX);
        *first = (*first).min(r.started_time_ms);
    }
    let keys: Vec<(u64, String, String)> = rows
        .iter()
        .map(|r| {
            (
                first_start[&(&*r.contender.hotkey, &*r.champion.hotkey)],
                r.contender.hotkey.to_string(),
                r.champion.hotkey.to_string(),
            )
        })
        .collect();
    let mut keyed: Vec<_> = keys.into_iter().zip(rows).collect();
    keyed.sort_by(|(a, x), (b, y)| {
        (a, x.started_time_ms, x.validator, x.match_id).cmp(&(b, y.started_time_ms, y.validator, y.match_id))
    });
    Ok(keyed.into_iter().map(|(_, row)| row).collect())
}

/// Everything the audit found: the replay's discrepancies, tip records past the end of
/// what verified, and the commitment audit's, each proven where it names an event.
/// Every finding: the replay's discrepancies, tip records that are not the end of what
/// verified, and `on_chain` (the commitment and weights audits' discrepancies).
pub fn findings(store: &Store, replayed: &Replay, on_chain: &[Discrepancy]) -> Result<Vec<Finding>, StoreError> {
    let mut discrepancies = replayed.state.discrepancies.clone();
    // The tip each chain's record names must be the end of what verified.
    for (validator, recorded) in store.tips()? {
        let fold = replayed.folds.iter().find(|f| f.validator == validator);
        let folded = fold.and_then(|f| f.tip);
        // (A chain that waits at a later protocol version's block ends there on purpose:
        // its blocks past it were not judged, which the report says apart.)
        if fold.is_some_and(|f| f.folds_on()) && folded != Some(recorded) {
            discrepancies.push(Discrepancy {
                validator,
                kind: DiscrepancyKind::InvalidBlock,
                height: recorded.height,
                event_idx: None,
                detail: format!(
                    "the store's tip record (height {}, hash {}) is not the end of the verified chain",
                    recorded.height, recorded.hash
                ),
            });
        }
    }
    let mut findings: Vec<Finding> = Vec::new();
    let mut prover = Prover { store, block: None, headers: None, budget: MAX_PROOF_HEADERS_TOTAL };
    for discrepancy in discrepancies.into_iter().chain(on_chain.iter().cloned()) {
        let proof = match discrepancy.event_idx {
            Some(event_idx) if findings.len() < MAX_PROOFS => {
                prover.prove(&discrepancy.validator, discrepancy.height, event_idx)
            }
            _ => None,
        };
        findings.push(Finding { discrepancy, proof });
    }
    Ok(findings)
}

/// Proofs of many findings, reading each block and each header once: findings cluster
/// in a few blocks of a few chains, and a header is read by reading its whole block.
struct Prover<'a> {
    store: &'a Store,
    /// The block proven from last, decoded (and checked) once for all its findings.
    block: Option<(ValidatorKey, u64, crate::ledger::block::DecodedBlock)>,
    /// The signed headers read so far of the chain proven from last, by height.
    headers: Option<(ValidatorKey, std::collections::BTreeMap<u64, SignedHeader>)>,
    /// Headers the proofs may still hold (`MAX_PROOF_HEADERS_TOTAL`).
    budget: usize,
}

impl Prover<'_> {
    /// The proof of one event, to the tip as [`prove`] makes it; `None` when the event or
    /// its block cannot be proven or the header budget is spent.
    fn prove(&mut self, validator: &ValidatorKey, height: u64, event_idx: u32) -> Option<InclusionProof> {
        let tip = self.store.tip(validator).ok()??;
        let last = tip.height.min(height.saturating_add(MAX_PROOF_HEADERS as u64 - 1));
        let needed = usize::try_from(last.checked_sub(height)? + 1).ok()?;
        if needed > self.budget {
            return None;
        }
        if self.block.as_ref().is_none_or(|(v, h, _)| (v, *h) != (validator, height)) {
            let decoded = self.store.block(validator, height).ok()??;
            self.block = Some((*validator, height, decoded));
        }
        if self.headers.as_ref().is_none_or(|(v, _)| v != validator) {
            self.headers = Some((*validator, std::collections::BTreeMap::new()));
        }
        let (_, cached) = self.headers.as_mut().expect("just set");
        let mut from = height;
        while from <= last {
            if cached.contains_key(&from) {
                from += 1;
                continue;
            }
            // The run of heights not read yet, read in one pass.
            let to = cached.range(from..=last).next().map_or(last, |(h, _)| h - 1);
            for (at, header) in (from..).zip(signed_headers(self.store, validator, from, to).ok()?) {
                cached.insert(at, header);
            }
            from = to + 1;
        }
        let headers: Vec<SignedHeader> = cached.range(height..=last).map(|(_, h)| h.clone()).collect();
        let (_, _, decoded) = self.block.as_ref().expect("just set");
        let proof = prove_in_block(decoded, event_idx, headers).ok()?;
        self.budget -= needed;
        Some(proof)
    }
}
