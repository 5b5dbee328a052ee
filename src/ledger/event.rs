//! The typed events a validator records: the ledger's vocabulary.
//!
//! Versioning rule (see ledger-spec/02-events.md): the wire tag of an event kind is its
//! position in [`Event`] and never changes; a kind's fields are frozen once released.
//! New kinds are appended at the end, and a changed kind is a new variant
//! (`TranscriptV2`), so every old log decodes forever with newer code. A tag this build
//! does not know is a decode error that names the tag, never a guess.
//!
//! Types that carry text are generic over the string type, `String` by default:
//! verification decodes `Event<&str>`, borrowing every text from the block's bytes, with
//! the same schema, the same bytes and the same bounds as the owned form.

use super::block::BlockHeader;
use crate::bytes::{ChallengeId, Hash32, MatchId, SignatureBytes, ValidatorKey};
use crate::limits::{
    MAX_LIST_ITEMS, MAX_MESSAGES_PER_TRANSCRIPT, MAX_NAME_BYTES, MAX_RECORDED_TEXT_BYTES, MAX_TEXT_BYTES,
};
use serde::{Deserialize, Serialize};

/// Number of event kinds this build knows; tags `0..N_EVENT_KINDS`.
pub const N_EVENT_KINDS: u32 = 8;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event<S = String> {
    /// Tag 0.
    MatchStarted(MatchStarted<S>),
    /// Tag 1.
    Transcript(Transcript<S>),
    /// Tag 2.
    EnvDecision(EnvDecision<S>),
    /// Tag 3.
    MatchDecided(MatchDecided<S>),
    /// Tag 4.
    WeightsSet(WeightsSet),
    /// Tag 5.
    ChainCommitment(ChainCommitment),
    /// Tag 6.
    Evidence(Box<Evidence>),
    /// Tag 7: a transcript in which some texts were longer than the recording cap, so
    /// only their prefix is recorded, with each full text's length and hash.
    TranscriptCut(TranscriptCut<S>),
    /// Tag 8: weights committed timelocked (commit-reveal v4); the chain applies them
    /// when it reveals the commit.
    WeightsCommitted(WeightsCommitted),
    /// Tag 9: a miner's commitment this validator will not play, and why (ledger-spec/13):
    /// a sybil duplicate of an older commitment, or the champion's own model.
    MinerSkipped(MinerSkipped<S>),
}

/// Why a committed miner is not played (`MinerSkipped.reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Wire 0: the same model and revision was committed earlier by `kept_by`.
    Duplicate,
    /// Wire 1: the champion serves this model and revision.
    SameAsChampion,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinerSkipped<S = String> {
    pub netuid: u16,
    pub hotkey: S,
    pub uid: u16,
    pub model: S,
    pub revision: S,
    /// The chain block of the skipped commitment.
    pub commit_block: u64,
    pub reason: SkipReason,
    /// Whose commitment keeps the model (the older duplicate, or the champion).
    pub kept_by: S,
    /// The keeper's commitment block (0 when unknown, as for a champion from `[[miners]]`).
    pub kept_block: u64,
    /// The chain block at which this validator read the commitments.
    pub chain_block: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightsCommitted {
    pub netuid: u16,
    /// The plaintext weights inside the ciphertext.
    pub uids: Vec<u16>,
    pub weights: Vec<u16>,
    pub version_key: u64,
    /// The chain block the commit was submitted at.
    pub chain_block: u64,
    /// The drand round whose signature opens it.
    pub reveal_round: u64,
    /// The chain block the reveal is planned for (first block of the reveal epoch).
    pub reveal_block: u64,
    /// blake3 of the ciphertext as sent.
    pub ciphertext_hash: Hash32,
}

/// A text of a transcript recorded only in part: its recorded form is its longest prefix
/// of at most `MAX_RECORDED_TEXT_BYTES` (or what remained of the transcript's budget)
/// that ends on a UTF-8 character boundary; scoring uses the recorded form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextCut {
    /// Index of the message whose content was cut, or none for the `answer` field.
    pub message_idx: Option<u32>,
    /// Length of the full text as the miner sent it, in bytes.
    pub full_bytes: u64,
    /// blake3 of the full text's UTF-8 bytes.
    pub full_blake3: Hash32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptCut<S = String> {
    pub transcript: Transcript<S>,
    /// One per cut text, in order: messages by index, then the answer.
    pub cuts: Vec<TextCut>,
}

/// A miner as the validator addressed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinerRef<S = String> {
    /// ss58 hotkey on chain.
    pub hotkey: S,
    /// uid on the subnet when the match started.
    pub uid: u16,
    /// Model name sent in requests.
    pub model: S,
}

/// An environment and the version whose task generator and scorer were used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvRef<S = String> {
    pub name: S,
    pub version: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchStarted<S = String> {
    pub match_id: MatchId,
    pub contender: MinerRef<S>,
    pub champion: MinerRef<S>,
    pub envs: Vec<EnvRef<S>>,
    /// The stopping rule and its parameters, as text (`mixture alpha=0.05 prior=4,4`).
    pub rule: S,
    /// Win rate the contender must beat, in parts per million.
    pub ratio_to_beat_ppm: u32,
    /// The chain block at the match's start and its hash, from which the match id (and so
    /// every challenge) is derived: nobody can compute a task before that block exists.
    /// 0 and the zero hash when the validator runs with no chain.
    pub chain_block: u64,
    pub chain_block_hash: crate::bytes::Hash32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage<S = String> {
    pub role: S,
    pub content: S,
}

impl<S: AsRef<str>> crate::envs::ChatTurn for ChatMessage<S> {
    fn role(&self) -> &str {
        self.role.as_ref()
    }

    fn content(&self) -> &str {
        self.content.as_ref()
    }
}

/// One miner's whole interaction with one challenge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transcript<S = String> {
    pub match_id: MatchId,
    pub env: EnvRef<S>,
    pub challenge_id: ChallengeId,
    /// Position of this challenge in the match's schedule for this env (0, 1, 2, ...).
    pub challenge_index: u64,
    /// Unique per request sent, so a duplicated query is visible.
    pub invocation_id: Hash32,
    pub miner: MinerRef<S>,
    /// Every message, prompts and answers, in order.
    pub messages: Vec<ChatMessage<S>>,
    /// The final answer text the score was computed from.
    pub answer: S,
    /// Reward in thousandths (1000 = 1.0, -1000 = -1.0): integers keep replay exact.
    pub reward_milli: i32,
    pub latency_ms: u64,
    /// Transport or protocol failure; the reward is then 0 or the env's invalid reward.
    pub error: Option<S>,
}

/// How an environment's stopping rule ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvOutcome {
    ContenderBetter,
    ContenderNotBetter,
    Inconclusive,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvDecision<S = String> {
    pub match_id: MatchId,
    pub env: EnvRef<S>,
    pub outcome: EnvOutcome,
    pub wins: u32,
    pub losses: u32,
    pub draws: u32,
    /// Challenges played, indices `0..n_challenges` of the schedule.
    pub n_challenges: u64,
    pub rule: S,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvWinRate<S = String> {
    pub env: EnvRef<S>,
    pub win_rate_ppm: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchDecided<S = String> {
    pub match_id: MatchId,
    pub contender_won: bool,
    /// Hotkey of the champion after the match.
    pub champion_hotkey: S,
    pub win_rates: Vec<EnvWinRate<S>>,
    pub new_ratio_to_beat_ppm: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightsSet {
    pub netuid: u16,
    pub uids: Vec<u16>,
    pub weights: Vec<u16>,
    pub version_key: u64,
    pub chain_block: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainCommitment {
    pub netuid: u16,
    pub chain_block: u64,
    /// The block of our own log whose hash was committed.
    pub committed_height: u64,
    pub committed_hash: Hash32,
}

/// Two different signed headers of one validator at one height: proof of equivocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    pub validator: ValidatorKey,
    pub height: u64,
    pub header_a: BlockHeader,
    pub signature_a: SignatureBytes,
    pub header_b: BlockHeader,
    pub signature_b: SignatureBytes,
}

/// A field of a decoded event that is over its bound.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("event field `{field}` has {actual} {unit}, more than the limit of {limit}")]
pub struct BoundError {
    pub field: &'static str,
    pub actual: usize,
    pub limit: usize,
    pub unit: &'static str,
}

fn name(field: &'static str, value: &impl AsRef<str>) -> Result<(), BoundError> {
    bound(field, value.as_ref().len(), MAX_NAME_BYTES, "bytes")
}

fn text(field: &'static str, value: &impl AsRef<str>) -> Result<(), BoundError> {
    bound(field, value.as_ref().len(), MAX_TEXT_BYTES, "bytes")
}

fn bound(field: &'static str, actual: usize, limit: usize, unit: &'static str) -> Result<(), BoundError> {
    if actual > limit {
        return Err(BoundError { field, actual, limit, unit });
    }
    Ok(())
}

/// Cuts name existing texts, in order, each once; a cut text is no longer than the cap,
/// and the full text was longer than what is recorded.
fn check_cuts<S: AsRef<str>>(t: &Transcript<S>, cuts: &[TextCut]) -> Result<(), BoundError> {
    bound("cuts", cuts.len(), MAX_MESSAGES_PER_TRANSCRIPT + 1, "items")?;
    if cuts.is_empty() {
        return Err(BoundError { field: "cuts", actual: 0, limit: 1, unit: "items at least" });
    }
    let mut previous: Option<u64> = None;
    for cut in cuts {
        // Messages by index, the answer (none) last: as a number, u32::MAX + 1.
        let position = cut.message_idx.map_or(u64::from(u32::MAX) + 1, u64::from);
        if previous.is_some_and(|p| p >= position) {
            return Err(BoundError {
                field: "cuts.message_idx",
                actual: position as usize,
                limit: 0,
                unit: "out of order",
            });
        }
        previous = Some(position);
        let recorded = match cut.message_idx {
            Some(i) => t.messages.get(i as usize).map(|m| m.content.as_ref().len()).ok_or(BoundError {
                field: "cuts.message_idx",
                actual: i as usize,
                limit: t.messages.len(),
                unit: "(no such message)",
            })?,
            None => t.answer.as_ref().len(),
        };
        bound("cuts.recorded text", recorded, MAX_RECORDED_TEXT_BYTES, "bytes")?;
        if cut.full_bytes <= recorded as u64 {
            return Err(BoundError {
                field: "cuts.full_bytes",
                actual: cut.full_bytes as usize,
                limit: recorded,
                unit: "bytes, not more than recorded",
            });
        }
    }
    Ok(())
}

impl<S: AsRef<str>> MinerRef<S> {
    fn check(&self) -> Result<(), BoundError> {
        name("miner.hotkey", &self.hotkey)?;
        name("miner.model", &self.model)
    }
}

impl<S: AsRef<str>> Event<S> {
    fn check_transcript<T: AsRef<str>>(t: &Transcript<T>) -> Result<(), BoundError> {
        name("env.name", &t.env.name)?;
        t.miner.check()?;
        bound("messages", t.messages.len(), MAX_MESSAGES_PER_TRANSCRIPT, "items")?;
        for message in &t.messages {
            name("messages.role", &message.role)?;
            text("messages.content", &message.content)?;
        }
        text("answer", &t.answer)?;
        if let Some(error) = &t.error {
            text("error", error)?;
        }
        Ok(())
    }

    /// The wire tag of this event's kind.
    pub fn tag(&self) -> u32 {
        match self {
            Event::MatchStarted(_) => 0,
            Event::Transcript(_) => 1,
            Event::EnvDecision(_) => 2,
            Event::MatchDecided(_) => 3,
            Event::WeightsSet(_) => 4,
            Event::ChainCommitment(_) => 5,
            Event::Evidence(_) => 6,
            Event::TranscriptCut(_) => 7,
            Event::WeightsCommitted(_) => 8,
            Event::MinerSkipped(_) => 9,
        }
    }

    /// The chain block at which the validator read the chain for this event (its head
    /// at a match's start, or the block a commitment or weights call landed in); `None`
    /// for events that name no chain time of the validator's own.
    pub fn chain_block(&self) -> Option<u64> {
        match self {
            Event::MatchStarted(m) => Some(m.chain_block),
            Event::WeightsSet(w) => Some(w.chain_block),
            Event::ChainCommitment(c) => Some(c.chain_block),
            Event::WeightsCommitted(w) => Some(w.chain_block),
            _ => None,
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self {
            Event::MatchStarted(_) => "match_started",
            Event::Transcript(_) => "transcript",
            Event::EnvDecision(_) => "env_decision",
            Event::MatchDecided(_) => "match_decided",
            Event::WeightsSet(_) => "weights_set",
            Event::ChainCommitment(_) => "chain_commitment",
            Event::Evidence(_) => "evidence",
            Event::TranscriptCut(_) => "transcript_cut",
            Event::WeightsCommitted(_) => "weights_committed",
            Event::MinerSkipped(_) => "miner_skipped",
        }
    }

    /// Checks every length bound of `limits.rs`; decoders call it on every event.
    pub fn check_bounds(&self) -> Result<(), BoundError> {
        match self {
            Event::MatchStarted(m) => {
                m.contender.check()?;
                m.champion.check()?;
                bound("envs", m.envs.len(), MAX_LIST_ITEMS, "items")?;
                for env in &m.envs {
                    name("envs.name", &env.name)?;
                }
                name("rule", &m.rule)
            }
            Event::TranscriptCut(cut) => {
                Event::<&str>::check_transcript(&cut.transcript)?;
                check_cuts(&cut.transcript, &cut.cuts)
            }
            Event::Transcript(t) => Event::<&str>::check_transcript(t),
            Event::EnvDecision(d) => {
                name("env.name", &d.env.name)?;
                name("rule", &d.rule)
            }
            Event::MatchDecided(d) => {
                name("champion_hotkey", &d.champion_hotkey)?;
                bound("win_rates", d.win_rates.len(), MAX_LIST_ITEMS, "items")?;
                for rate in &d.win_rates {
                    name("win_rates.env.name", &rate.env.name)?;
                }
                Ok(())
            }
            Event::WeightsSet(w) => {
                bound("uids", w.uids.len(), MAX_LIST_ITEMS, "items")?;
                bound("weights", w.weights.len(), MAX_LIST_ITEMS, "items")
            }
            Event::WeightsCommitted(w) => {
                bound("uids", w.uids.len(), MAX_LIST_ITEMS, "items")?;
                bound("weights", w.weights.len(), MAX_LIST_ITEMS, "items")
            }
            Event::MinerSkipped(m) => {
                name("hotkey", &m.hotkey)?;
                name("model", &m.model)?;
                name("revision", &m.revision)?;
                name("kept_by", &m.kept_by)
            }
            Event::ChainCommitment(_) | Event::Evidence(_) => Ok(()),
        }
    }

    /// The challenge id and miner hotkey this event is indexed under, if any.
    pub fn index_keys(&self) -> Option<(&ChallengeId, &str)> {
        match self {
            Event::Transcript(t) | Event::TranscriptCut(TranscriptCut { transcript: t, .. }) => {
                Some((&t.challenge_id, t.miner.hotkey.as_ref()))
            }
            _ => None,
        }
    }

    /// The transcript this event records, whether or not some of its texts were cut.
    pub fn transcript(&self) -> Option<&Transcript<S>> {
        match self {
            Event::Transcript(t) | Event::TranscriptCut(TranscriptCut { transcript: t, .. }) => Some(t),
            _ => None,
        }
    }
}
