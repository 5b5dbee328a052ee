//! A miner's transcript entry as `af transcripts` prints it, and its offline check: every
//! shown field is derived from proven bytes, or sits under `unproven` (ledger-spec/09).
//!
//! Proven: the transcript itself (an inclusion proof to a chain of signed headers), the
//! opponent's hotkey and score and the outcome (an inclusion proof of the opponent's
//! transcript in the same block), and the commitment (an inclusion proof of the
//! validator's own `ChainCommitment` event whose committed tip the headers reach).
//! Whether that commitment is on chain is a separate check against the chain.

use super::event::{ChainCommitment, EnvOutcome, Event, Transcript};
use super::proof::{verify_inclusion_proof, InclusionError, InclusionProof};
use super::Tip;
use crate::bytes::ValidatorKey;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Opponent {
    pub hotkey: String,
    pub reward_milli: i32,
    /// The opponent's final answer to the same challenge, for a side-by-side view.
    pub answer: String,
}

/// What replay says about the transcript's match: useful context that no proof in the
/// entry covers (it depends on other events of the log), shown as such.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unproven {
    /// `contender`, `champion` or `unknown`, from the match's `MatchStarted` event; any
    /// other value is refused (ledger-spec/09: unproven, but still of its schema).
    #[serde(deserialize_with = "known_role")]
    pub role: String,
    pub env_decision: Option<EnvOutcome>,
    pub match_contender_won: Option<bool>,
    /// The contender's wins, losses and draws in this env so far (all of them once the
    /// env is decided: the decision's n is their sum).
    pub env_tally: Option<EnvTallyShown>,
    /// The stopping rule the match was started with (`MatchStarted.rule`).
    pub rule: Option<String>,
    /// Why the match ended as it did, e.g. "contender better in 2 of 3 envs, 2 needed".
    pub match_reason: Option<String>,
}

/// The roles an entry may name.
pub const ROLES: [&str; 3] = ["contender", "champion", "unknown"];

fn known_role<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let role = String::deserialize(deserializer)?;
    if !ROLES.contains(&role.as_str()) {
        return Err(serde::de::Error::custom(format!("role {role:?} is not one of {ROLES:?}")));
    }
    Ok(role)
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvTallyShown {
    pub wins: u32,
    pub losses: u32,
    pub draws: u32,
    pub n_challenges: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryProof {
    /// The transcript, with headers from its block up to the committed tip (or the tip).
    pub inclusion: InclusionProof,
    /// The opponent's transcript of the same challenge, in the same block.
    pub opponent: Option<InclusionProof>,
    /// The validator's `ChainCommitment` event whose committed tip `inclusion` reaches.
    pub commitment: Option<InclusionProof>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptEntry {
    pub validator: ValidatorKey,
    pub height: u64,
    pub event_idx: u32,
    pub transcript: Transcript,
    pub opponent: Option<Opponent>,
    /// `win`, `loss` or `draw` for this miner, from the two rewards.
    pub outcome: Option<String>,
    pub unproven: Unproven,
    pub proof: EntryProof,
}

/// What a verified entry establishes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifiedEntry {
    pub validator: ValidatorKey,
    pub height: u64,
    pub event_idx: u32,
    /// The tip the transcript's headers reach.
    pub tip: Tip,
    /// The validator's own record of committing that tip, proven from its log.
    pub commitment: Option<ChainCommitment>,
}

#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    #[error("transcript proof: {0}")]
    Inclusion(InclusionError),
    #[error("opponent proof: {0}")]
    Opponent(InclusionError),
    #[error("commitment proof: {0}")]
    Commitment(InclusionError),
    #[error("the entry's `{field}` differs from what the proven bytes say")]
    Differs { field: &'static str },
    #[error("{0}")]
    Invalid(String),
}

/// The outcome for a miner with `reward` against an opponent with `opponent`.
pub fn outcome(reward: i32, opponent: i32) -> &'static str {
    match reward.cmp(&opponent) {
        std::cmp::Ordering::Greater => "win",
        std::cmp::Ordering::Less => "loss",
        std::cmp::Ordering::Equal => "draw",
    }
}

fn same<T: PartialEq>(field: &'static str, shown: &T, proven: &T) -> Result<(), EntryError> {
    if shown != proven {
        return Err(EntryError::Differs { field });
    }
    Ok(())
}

/// Checks an entry offline: each proof verifies, and every shown field outside `unproven`
/// equals what the proven bytes say.
pub fn verify_entry(entry: &TranscriptEntry) -> Result<VerifiedEntry, EntryError> {
    let proof = &entry.proof;
    let tip = verify_inclusion_proof(&proof.inclusion).map_err(EntryError::Inclusion)?;
    let inclusion = &proof.inclusion;
    same("validator", &entry.validator, &inclusion.validator)?;
    same("height", &entry.height, &inclusion.height)?;
    same("event_idx", &entry.event_idx, &inclusion.event_idx)?;
    let Some(transcript) = inclusion.event.transcript() else {
        return Err(EntryError::Invalid("the proven event is not a transcript".into()));
    };
    same("transcript", &entry.transcript, transcript)?;

    match (&entry.opponent, &proof.opponent, &entry.outcome) {
        (None, None, None) => {}
        (Some(shown), Some(opponent_proof), Some(shown_outcome)) => {
            // The block's own header and no other (ledger-spec/09): checked before the
            // proof's work, so a proof padded with headers costs nothing.
            if opponent_proof.headers.len() != 1 {
                return Err(EntryError::Invalid(format!(
                    "the opponent's proof holds {} headers; it holds its block's header only",
                    opponent_proof.headers.len()
                )));
            }
            verify_inclusion_proof(opponent_proof).map_err(EntryError::Opponent)?;
            let block_header = &inclusion.headers[0];
            if opponent_proof.validator != inclusion.validator || opponent_proof.headers.first() != Some(block_header) {
                return Err(EntryError::Invalid("the opponent's transcript is not in the same block".into()));
            }
            let Some(theirs) = opponent_proof.event.transcript() else {
                return Err(EntryError::Invalid("the opponent's proven event is not a transcript".into()));
            };
            if theirs.challenge_id != transcript.challenge_id
                || theirs.match_id != transcript.match_id
                || theirs.miner.hotkey == transcript.miner.hotkey
            {
                return Err(EntryError::Invalid(
                    "the opponent's transcript is not another miner's answer to the same challenge".into(),
                ));
            }
            let proven = Opponent {
                hotkey: theirs.miner.hotkey.clone(),
                reward_milli: theirs.reward_milli,
                answer: theirs.answer.clone(),
            };
            same("opponent", shown, &proven)?;
            same("outcome", &shown_outcome.as_str(), &outcome(transcript.reward_milli, theirs.reward_milli))?;
        }
        _ => {
            return Err(EntryError::Invalid(
                "opponent, its proof and the outcome must be given together or not at all".into(),
            ))
        }
    }

    let commitment = match &proof.commitment {
        None => None,
        Some(commitment_proof) => {
            verify_inclusion_proof(commitment_proof).map_err(EntryError::Commitment)?;
            if commitment_proof.validator != inclusion.validator {
                return Err(EntryError::Invalid("the commitment is another validator's".into()));
            }
            let Event::ChainCommitment(c) = &commitment_proof.event else {
                return Err(EntryError::Invalid("the commitment proof's event is not a chain commitment".into()));
            };
            if c.committed_height != tip.height || c.committed_hash != tip.hash {
                return Err(EntryError::Invalid(format!(
                    "the headers reach height {} hash {}, the commitment names height {} hash {}",
                    tip.height, tip.hash, c.committed_height, c.committed_hash
                )));
            }
            Some(c.clone())
        }
    };
    Ok(VerifiedEntry {
        validator: inclusion.validator,
        height: inclusion.height,
        event_idx: inclusion.event_idx,
        tip,
        commitment,
    })
}

/// The entries of a file as `af transcripts` writes them: one entry object, a JSON array
/// of them (`--json`), or one per line (`--jsonl`).
pub fn read_entries(text: &str) -> Result<Vec<TranscriptEntry>, serde_json::Error> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        return serde_json::from_str(text);
    }
    let mut entries = Vec::new();
    for item in serde_json::Deserializer::from_str(text).into_iter::<TranscriptEntry>() {
        entries.push(item?);
    }
    Ok(entries)
}
