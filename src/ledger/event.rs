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

pub(crate) use super::event_bounds::at_most;
pub use super::event_bounds::BoundError;
use super::event_bounds::{bound, cut_error, name, text};
use super::header::BlockHeader;
use crate::bytes::{ChallengeId, Hash32, MatchId, SignatureBytes, ValidatorKey};
use crate::limits::{
    MAX_CUTS_PER_TRANSCRIPT, MAX_LIST_ITEMS, MAX_MESSAGES_PER_TRANSCRIPT, MAX_RECORDED_TEXT_BYTES,
    MAX_TRANSCRIPT_TEXT_BYTES,
};
use serde::{Deserialize, Serialize};

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
    /// Tag 10: this validator's replay of other logs at stated heights (ledger-spec/02,
    /// "Fold checkpoints"): each point is the hash of one log's fold at one of its
    /// blocks. Points equal to another validator's are its countersignature.
    FoldCheckpoint(FoldCheckpoint),
    /// Tag 11 (protocol version 3): the old key's last event, naming the key its identity
    /// continues under (ledger-spec/16).
    KeyRotated(KeyRotated),
    /// Tag 12 (protocol version 3): the new key's first event, naming the old log's
    /// rotation block (ledger-spec/16).
    KeySucceeded(KeySucceeded),
    /// Tag 13 (protocol version 3): the champion this validator defended left the crown
    /// without a match, as the chain showed it (ledger-spec/13, "The champion's life").
    ChampionLeft(ChampionLeft<S>),
}

/// One log's fold at one of its blocks, as a replay computed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FoldPoint {
    /// Whose log.
    pub validator: ValidatorKey,
    /// The block the fold ends at (a checkpoint height: one less than a multiple of 360).
    pub height: u64,
    /// That block's hash.
    pub block_hash: Hash32,
    /// blake3 of the fold's encoding in the fold format `fold_version`.
    pub fold_hash: Hash32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FoldCheckpoint {
    /// The fold format the hashes are of: points compare only within one format.
    pub fold_version: u32,
    /// At most one per log, in ascending order of validator key.
    #[serde(deserialize_with = "at_most::<_, _, MAX_LIST_ITEMS>")]
    pub points: Vec<FoldPoint>,
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

/// Why a champion left the crown without a match (`ChampionLeft.reason`, ledger-spec/13).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaveReason {
    /// Wire 0: its hotkey is not registered on the subnet (deregistered, or swapped away).
    Deregistered,
    /// Wire 1: its hotkey's commitment no longer names the model and revision it won with.
    Recommitted,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChampionLeft<S = String> {
    /// The champion as this validator's log recorded it.
    pub champion: MinerRef<S>,
    pub reason: LeaveReason,
    /// The chain block whose metagraph and commitments showed it.
    pub chain_block: u64,
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
    #[serde(deserialize_with = "at_most::<_, _, MAX_LIST_ITEMS>")]
    pub uids: Vec<u16>,
    #[serde(deserialize_with = "at_most::<_, _, MAX_LIST_ITEMS>")]
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
    #[serde(deserialize_with = "at_most::<_, _, MAX_CUTS_PER_TRANSCRIPT>")]
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
    #[serde(deserialize_with = "at_most::<_, _, MAX_LIST_ITEMS>")]
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
    #[serde(deserialize_with = "at_most::<_, _, MAX_MESSAGES_PER_TRANSCRIPT>")]
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
    #[serde(deserialize_with = "at_most::<_, _, MAX_LIST_ITEMS>")]
    pub win_rates: Vec<EnvWinRate<S>>,
    pub new_ratio_to_beat_ppm: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightsSet {
    pub netuid: u16,
    #[serde(deserialize_with = "at_most::<_, _, MAX_LIST_ITEMS>")]
    pub uids: Vec<u16>,
    #[serde(deserialize_with = "at_most::<_, _, MAX_LIST_ITEMS>")]
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

/// Tag 11: the last event the old key signs. Its block holds it alone, and the log has
/// no block after it: a block the old key signs later is a forgery (ledger-spec/16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRotated {
    /// The key the identity continues under.
    pub new_key: ValidatorKey,
    /// The chain block at which the rotation was signed (the protocol version's clock).
    pub chain_block: u64,
}

/// Tag 12: the first event the new key signs, alone in block 0 of its log: the old log's
/// block that holds the matching [`KeyRotated`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySucceeded {
    pub old_key: ValidatorKey,
    /// The height of the old log's rotation block.
    pub old_height: u64,
    /// That block's hash.
    pub old_hash: Hash32,
    /// The rotation's chain block, as the old log recorded it.
    pub chain_block: u64,
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

/// The recording rules of ledger-spec/02 ("Texts recorded in part"), checked over the
/// miner's texts (the `assistant` messages) as the recorder cut them: each is at most
/// its cap, the smaller of 256 KiB and what remains of the transcript's 1 MiB budget; a
/// cut text is the longest prefix within its cap, so fewer than 4 bytes (one UTF-8
/// character) short of it, and its full text was longer than the cap. Only the miner's
/// texts are cut; the answer's cut, if any, repeats the last miner text's, since the
/// answer is that text. A tag-1 transcript passes with no cuts, so none of its miner
/// texts may be over its cap.
fn check_miner_texts<S: AsRef<str>>(t: &Transcript<S>, cuts: &[TextCut]) -> Result<(), BoundError> {
    let mut previous: Option<u64> = None;
    for cut in cuts {
        // Messages by index, the answer (none) last: as a number, u32::MAX + 1.
        let position = cut.message_idx.map_or(u64::from(u32::MAX) + 1, u64::from);
        if previous.is_some_and(|p| p >= position) {
            return Err(cut_error("cuts.message_idx", position as usize, "cuts are in order, each text at most once"));
        }
        previous = Some(position);
        if let Some(i) = cut.message_idx.filter(|i| *i as usize >= t.messages.len()) {
            return Err(cut_error("cuts.message_idx", i as usize, "a cut names an existing message"));
        }
    }
    let mut budget = MAX_TRANSCRIPT_TEXT_BYTES;
    let mut message_cuts = cuts.iter().filter(|c| c.message_idx.is_some()).peekable();
    let mut last_miner_text: Option<(&str, Option<&TextCut>)> = None;
    for (i, message) in t.messages.iter().enumerate() {
        let cut = message_cuts.next_if(|c| c.message_idx == Some(i as u32));
        if message.role.as_ref() != "assistant" {
            if cut.is_some() {
                return Err(cut_error("cuts.message_idx", i, "only miner texts (`assistant` messages) are cut"));
            }
            continue;
        }
        let cap = MAX_RECORDED_TEXT_BYTES.min(budget);
        let recorded = message.content.as_ref().len();
        check_recorded(recorded, cap, cut)?;
        budget -= recorded;
        last_miner_text = Some((message.content.as_ref(), cut));
    }
    // The answer is a miner text: never longer than a text is recorded.
    bound("answer", t.answer.as_ref().len(), MAX_RECORDED_TEXT_BYTES, "bytes (a miner text, over its recording cap)")?;
    // The answer that is the last miner text, cut, is cut too: its cut is recorded.
    let answer_cut = cuts.last().filter(|c| c.message_idx.is_none());
    if let (Some((text, Some(_))), None) = (last_miner_text, answer_cut) {
        if text == t.answer.as_ref() {
            return Err(cut_error(
                "cuts.message_idx",
                cuts.len(),
                "the answer is the last miner text, which was cut: the answer's cut is recorded too",
            ));
        }
    }
    if let Some(answer_cut) = answer_cut {
        match last_miner_text {
            Some((text, Some(cut)))
                if text == t.answer.as_ref()
                    && cut.full_bytes == answer_cut.full_bytes
                    && cut.full_blake3 == answer_cut.full_blake3 => {}
            _ => {
                return Err(cut_error(
                    "cuts.message_idx",
                    cuts.len() - 1,
                    "the answer's cut repeats the last miner text's, and the answer is that text",
                ))
            }
        }
    }
    Ok(())
}

/// One miner text against its cap: uncut, within it; cut, the longest prefix within it.
fn check_recorded(recorded: usize, cap: usize, cut: Option<&TextCut>) -> Result<(), BoundError> {
    bound("messages.content", recorded, cap, "bytes (a miner text, over its recording cap)")?;
    let Some(cut) = cut else { return Ok(()) };
    if cut.full_bytes <= cap as u64 {
        return Err(cut_error("cuts.full_bytes", cut.full_bytes as usize, "a cut full text is longer than its cap"));
    }
    // The next character (at most 4 bytes) did not fit, or a longer prefix was possible.
    if recorded + 4 <= cap {
        return Err(cut_error(
            "messages.content",
            recorded,
            "a cut text is the longest prefix within its cap (fewer than 4 bytes short)",
        ));
    }
    Ok(())
}

impl<S: AsRef<str>> MinerRef<S> {
    /// The same miner with its names as owned strings.
    pub fn to_owned_strings(&self) -> MinerRef {
        MinerRef { hotkey: self.hotkey.as_ref().into(), uid: self.uid, model: self.model.as_ref().into() }
    }

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

    /// How many kinds this build decodes: tags `0..N_KINDS`. A greater tag is a kind of
    /// a later protocol version (ledger-spec/15), not a malformed event.
    pub const N_KINDS: u32 = 14;

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
            Event::FoldCheckpoint(_) => 10,
            Event::KeyRotated(_) => 11,
            Event::KeySucceeded(_) => 12,
            Event::ChampionLeft(_) => 13,
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
            Event::KeyRotated(r) => Some(r.chain_block),
            Event::KeySucceeded(s) => Some(s.chain_block),
            Event::ChampionLeft(l) => Some(l.chain_block),
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
            Event::FoldCheckpoint(_) => "fold_checkpoint",
            Event::KeyRotated(_) => "key_rotated",
            Event::KeySucceeded(_) => "key_succeeded",
            Event::ChampionLeft(_) => "champion_left",
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
                if cut.cuts.is_empty() {
                    return Err(cut_error("cuts", 0, "a TranscriptCut has at least one cut"));
                }
                bound("cuts", cut.cuts.len(), MAX_CUTS_PER_TRANSCRIPT, "items")?;
                check_miner_texts(&cut.transcript, &cut.cuts)
            }
            Event::Transcript(t) => {
                Event::<&str>::check_transcript(t)?;
                check_miner_texts(t, &[])
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
            Event::FoldCheckpoint(c) => {
                bound("points", c.points.len(), MAX_LIST_ITEMS, "items")?;
                match c.points.windows(2).position(|w| w[0].validator >= w[1].validator) {
                    Some(at) => Err(BoundError::Rule {
                        field: "points",
                        at: at + 1,
                        rule: "one point per log, in ascending order of validator key",
                    }),
                    None => Ok(()),
                }
            }
            Event::ChampionLeft(l) => l.champion.check(),
            Event::ChainCommitment(_) | Event::Evidence(_) | Event::KeyRotated(_) | Event::KeySucceeded(_) => Ok(()),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript(miner_texts: &[String]) -> Transcript {
        let mut messages = vec![ChatMessage { role: "user".into(), content: "go".into() }];
        for text in miner_texts {
            messages.push(ChatMessage { role: "assistant".into(), content: text.clone() });
            messages.push(ChatMessage { role: "user".into(), content: "more".into() });
        }
        Transcript {
            match_id: Hash32([1; 32]),
            env: EnvRef { name: "mult".into(), version: 1 },
            challenge_id: Hash32([2; 32]),
            challenge_index: 0,
            invocation_id: Hash32([3; 32]),
            miner: MinerRef { hotkey: "5H".into(), uid: 0, model: "m".into() },
            messages,
            answer: miner_texts.last().cloned().unwrap_or_default(),
            reward_milli: 0,
            latency_ms: 0,
            error: None,
        }
    }

    fn cut(message_idx: Option<u32>) -> TextCut {
        TextCut { message_idx, full_bytes: 2_000_000, full_blake3: Hash32([9; 32]) }
    }

    #[test]
    fn the_transcript_budget_caps_later_miner_texts() {
        let full = "a".repeat(MAX_RECORDED_TEXT_BYTES);
        // Four full texts spend the 1 MiB budget: a fifth must be empty, or cut to nothing.
        let mut texts = vec![full.clone(); 4];
        texts.push("b".into());
        let over = transcript(&texts);
        assert!(Event::Transcript(over.clone()).check_bounds().is_err(), "a miner text past the budget, uncut");
        texts[4] = String::new();
        let spent = transcript(&texts);
        Event::Transcript(spent.clone()).check_bounds().unwrap();
        let cut_to_nothing = TranscriptCut { transcript: spent.clone(), cuts: vec![cut(Some(9)), cut(None)] };
        // The answer is the last text: empty, cut as the message is.
        Event::TranscriptCut(cut_to_nothing).check_bounds().unwrap();
        // A cut of a text within its cap is refused: the third text had the full cap.
        let within = TranscriptCut { transcript: spent, cuts: vec![TextCut { full_bytes: 10, ..cut(Some(5)) }] };
        assert!(Event::TranscriptCut(within).check_bounds().is_err(), "a cut whose full text fits its cap");
    }

    /// The answer is the miner's last text: recorded within 256 KiB like any, and, when that
    /// text was cut, cut with it (the vector a verifier asked about: a cut of the last
    /// message without the answer's, and a 300,000-byte answer).
    #[test]
    fn the_answer_is_a_recorded_miner_text() {
        let full = "a".repeat(MAX_RECORDED_TEXT_BYTES);
        let texts = transcript(std::slice::from_ref(&full));
        let both = TranscriptCut { transcript: texts.clone(), cuts: vec![cut(Some(1)), cut(None)] };
        Event::TranscriptCut(both).check_bounds().unwrap();
        let message_only = TranscriptCut { transcript: texts.clone(), cuts: vec![cut(Some(1))] };
        assert!(Event::TranscriptCut(message_only).check_bounds().is_err(), "the answer's cut is missing");
        let mut long = transcript(&["short".into()]);
        long.answer = "a".repeat(300_000);
        assert!(Event::Transcript(long).check_bounds().is_err(), "a 300,000-byte answer");
        // An answer that is not the last text (a miner that failed) needs no cut.
        let mut failed = texts;
        failed.answer = String::new();
        Event::TranscriptCut(TranscriptCut { transcript: failed, cuts: vec![cut(Some(1))] }).check_bounds().unwrap();
    }

    #[test]
    fn a_cut_text_must_be_the_longest_prefix_within_what_the_budget_left() {
        // Three full texts leave 256 KiB; after 100 more bytes the fourth's cap is 262,044.
        let full = "a".repeat(MAX_RECORDED_TEXT_BYTES);
        let cap = MAX_RECORDED_TEXT_BYTES - 100;
        let texts = |last: usize| {
            let mut t = vec![full.clone(); 3];
            t.push("c".repeat(100));
            t.push("d".repeat(last));
            transcript(&t)
        };
        let with = |last: usize| TranscriptCut { transcript: texts(last), cuts: vec![cut(Some(9)), cut(None)] };
        Event::TranscriptCut(with(cap)).check_bounds().unwrap();
        Event::TranscriptCut(with(cap - 3)).check_bounds().unwrap();
        assert!(Event::TranscriptCut(with(cap - 4)).check_bounds().is_err(), "4 bytes short: not the longest prefix");
        assert!(Event::TranscriptCut(with(cap + 1)).check_bounds().is_err(), "over the budget left");
    }
}

#[cfg(test)]
mod bounded_list_tests {
    #[derive(Debug, serde::Deserialize)]
    struct Two {
        #[serde(deserialize_with = "super::at_most::<_, _, 2>")]
        items: Vec<u8>,
    }

    #[test]
    fn a_bounded_list_is_refused_at_the_item_past_its_bound_without_a_length_prefix() {
        assert_eq!(serde_json::from_str::<Two>(r#"{"items":[1,2]}"#).unwrap().items, vec![1, 2]);
        let error = serde_json::from_str::<Two>(r#"{"items":[1,2,3]}"#).unwrap_err().to_string();
        assert!(error.contains("at most 2 items"), "{error}");
    }
}
