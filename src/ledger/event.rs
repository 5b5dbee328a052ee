//! The typed events a validator records: the ledger's vocabulary.
//!
//! Versioning rule (see ledger-spec/02-events.md): the wire tag of an event kind is its
//! position in [`Event`] and never changes; a kind's fields are frozen once released.
//! New kinds are appended at the end, and a changed kind is a new variant
//! (`TranscriptV2`), so every old log decodes forever with newer code. A tag this build
//! does not know is a decode error that names the tag, never a guess.

use super::block::BlockHeader;
use crate::bytes::{ChallengeId, Hash32, MatchId, SignatureBytes, ValidatorKey};
use crate::limits::{MAX_LIST_ITEMS, MAX_MESSAGES_PER_TRANSCRIPT, MAX_NAME_BYTES, MAX_TEXT_BYTES};
use serde::{Deserialize, Serialize};

/// Number of event kinds this build knows; tags `0..N_EVENT_KINDS`.
pub const N_EVENT_KINDS: u32 = 7;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// Tag 0.
    MatchStarted(MatchStarted),
    /// Tag 1.
    Transcript(Transcript),
    /// Tag 2.
    EnvDecision(EnvDecision),
    /// Tag 3.
    MatchDecided(MatchDecided),
    /// Tag 4.
    WeightsSet(WeightsSet),
    /// Tag 5.
    ChainCommitment(ChainCommitment),
    /// Tag 6.
    Evidence(Evidence),
}

/// A miner as the validator addressed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinerRef {
    /// ss58 hotkey on chain.
    pub hotkey: String,
    /// uid on the subnet when the match started.
    pub uid: u16,
    /// Model name sent in requests.
    pub model: String,
}

/// An environment and the version whose task generator and scorer were used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvRef {
    pub name: String,
    pub version: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchStarted {
    pub match_id: MatchId,
    pub contender: MinerRef,
    pub champion: MinerRef,
    pub envs: Vec<EnvRef>,
    /// The stopping rule and its parameters, as text (`mixture alpha=0.05 prior=4,4`).
    pub rule: String,
    /// Win rate the contender must beat, in parts per million.
    pub ratio_to_beat_ppm: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// One miner's whole interaction with one challenge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    pub match_id: MatchId,
    pub env: EnvRef,
    pub challenge_id: ChallengeId,
    /// Position of this challenge in the match's schedule for this env (0, 1, 2, ...).
    pub challenge_index: u64,
    /// Unique per request sent, so a duplicated query is visible.
    pub invocation_id: Hash32,
    pub miner: MinerRef,
    /// Every message, prompts and answers, in order.
    pub messages: Vec<ChatMessage>,
    /// The final answer text the score was computed from.
    pub answer: String,
    /// Reward in thousandths (1000 = 1.0, -1000 = -1.0): integers keep replay exact.
    pub reward_milli: i32,
    pub latency_ms: u64,
    /// Transport or protocol failure; the reward is then 0 or the env's invalid reward.
    pub error: Option<String>,
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
pub struct EnvDecision {
    pub match_id: MatchId,
    pub env: EnvRef,
    pub outcome: EnvOutcome,
    pub wins: u32,
    pub losses: u32,
    pub draws: u32,
    /// Challenges played, indices `0..n_challenges` of the schedule.
    pub n_challenges: u64,
    pub rule: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvWinRate {
    pub env: EnvRef,
    pub win_rate_ppm: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchDecided {
    pub match_id: MatchId,
    pub contender_won: bool,
    /// Hotkey of the champion after the match.
    pub champion_hotkey: String,
    pub win_rates: Vec<EnvWinRate>,
    pub new_ratio_to_beat_ppm: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightsSet {
    pub netuid: u16,
    pub uids: Vec<u16>,
    pub weights: Vec<u16>,
    pub version_key: u64,
    pub chain_block: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainCommitment {
    pub netuid: u16,
    pub chain_block: u64,
    /// The block of our own log whose hash was committed.
    pub committed_height: u64,
    pub committed_hash: Hash32,
}

/// Two different signed headers of one validator at one height: proof of equivocation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

fn name(field: &'static str, value: &str) -> Result<(), BoundError> {
    bound(field, value.len(), MAX_NAME_BYTES, "bytes")
}

fn text(field: &'static str, value: &str) -> Result<(), BoundError> {
    bound(field, value.len(), MAX_TEXT_BYTES, "bytes")
}

fn bound(field: &'static str, actual: usize, limit: usize, unit: &'static str) -> Result<(), BoundError> {
    if actual > limit {
        return Err(BoundError { field, actual, limit, unit });
    }
    Ok(())
}

impl MinerRef {
    fn check(&self) -> Result<(), BoundError> {
        name("miner.hotkey", &self.hotkey)?;
        name("miner.model", &self.model)
    }
}

impl Event {
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
            Event::Transcript(t) => {
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
            Event::ChainCommitment(_) | Event::Evidence(_) => Ok(()),
        }
    }

    /// The challenge id and miner hotkey this event is indexed under, if any.
    pub fn index_keys(&self) -> Option<(&ChallengeId, &str)> {
        match self {
            Event::Transcript(t) => Some((&t.challenge_id, t.miner.hotkey.as_str())),
            _ => None,
        }
    }
}
