//! The replay's records: what a fold keeps of a log (matches and their env tallies,
//! skips, equivocations, weights, findings) and what the combine keeps of the network
//! (matches with their votes). Plain data with no storage and no folding logic, so the
//! rooms that store them (`matches`, `lists`, `spill_file`), fold them (`fold`) and combine
//! them (`network`) all import this one module and none imports another for a type.

use crate::bytes::{Hash32, ValidatorKey};
use crate::ledger::event::{EnvOutcome, EnvRef, MinerRef};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a log proves against a validator. Ordered from worst to mildest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscrepancyKind {
    /// A stored block that does not decode, verify or link: the chain is cut there.
    InvalidBlock,
    /// Two different signed headers at one height (from evidence in any log).
    Equivocation,
    /// An evidence event whose two headers do not prove an equivocation.
    FalseEvidence,
    /// A recorded reward that re-scoring the recorded conversation does not give.
    FalseScore,
    /// A challenge id that is not the one derived from (env, version, validator, match, index).
    BadChallengeId,
    /// A match id that is not the one derived from (validator, contestants, matches
    /// decided before, chain block and hash) (ledger-spec/06).
    BadMatchId,
    /// A match's recorded chain block hash that is not that block's hash on chain. Found
    /// by the audit, which reads the chain.
    FalseBlockHash,
    /// A challenge index past the next one due: an index was skipped.
    ScheduleGap,
    /// A challenge index already played by that miner in that match and env.
    ScheduleRepeat,
    /// An environment decision whose wins, losses or draws are not what the validator's
    /// own recorded rewards give.
    FalseTally,
    /// A match decision against the majority of the other validators on the same match.
    Disagreement,
    /// A tip commitment (on chain, or recorded in the log) naming a hash that is not the
    /// validator's block at that height. Found by the audit, which reads the chain.
    FalseCommitment,
    /// An environment decision its recorded rule (and futility stop) does not give at its
    /// recorded counts and ratio to beat.
    FalseDecision,
    /// Weights on chain for a validator's uid, past their reveal, that are not the weights
    /// its log says it last set or committed. Found by the audit, which reads the chain.
    FalseWeights,
}

impl DiscrepancyKind {
    /// Every kind, in its order (its tag in the state's bytes, ledger-spec/14).
    pub const ALL: [DiscrepancyKind; 14] = [
        DiscrepancyKind::InvalidBlock,
        DiscrepancyKind::Equivocation,
        DiscrepancyKind::FalseEvidence,
        DiscrepancyKind::FalseScore,
        DiscrepancyKind::BadChallengeId,
        DiscrepancyKind::BadMatchId,
        DiscrepancyKind::FalseBlockHash,
        DiscrepancyKind::ScheduleGap,
        DiscrepancyKind::ScheduleRepeat,
        DiscrepancyKind::FalseTally,
        DiscrepancyKind::Disagreement,
        DiscrepancyKind::FalseCommitment,
        DiscrepancyKind::FalseDecision,
        DiscrepancyKind::FalseWeights,
    ];

    /// Whether a finding of this kind is a proof of misreporting (each costs vTrust,
    /// ledger-spec/14). An invalid block zeroes vTrust on its own; a disagreement is
    /// weighed as a share, not counted as a proof.
    pub fn is_proof(self) -> bool {
        !matches!(self, DiscrepancyKind::InvalidBlock | DiscrepancyKind::Disagreement)
    }

    pub fn name(self) -> &'static str {
        match self {
            DiscrepancyKind::InvalidBlock => "invalid_block",
            DiscrepancyKind::Equivocation => "equivocation",
            DiscrepancyKind::FalseEvidence => "false_evidence",
            DiscrepancyKind::FalseScore => "false_score",
            DiscrepancyKind::BadChallengeId => "bad_challenge_id",
            DiscrepancyKind::BadMatchId => "bad_match_id",
            DiscrepancyKind::FalseBlockHash => "false_block_hash",
            DiscrepancyKind::ScheduleGap => "schedule_gap",
            DiscrepancyKind::ScheduleRepeat => "schedule_repeat",
            DiscrepancyKind::FalseTally => "false_tally",
            DiscrepancyKind::Disagreement => "disagreement",
            DiscrepancyKind::FalseCommitment => "false_commitment",
            DiscrepancyKind::FalseDecision => "false_decision",
            DiscrepancyKind::FalseWeights => "false_weights",
        }
    }
}

/// How many findings of each kind a log proved, listed or not: what vTrust counts, so
/// the bound on the findings a fold lists (`fold::MAX_CHAIN_DISCREPANCIES`) changes no
/// count.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FindingCounts([u64; DiscrepancyKind::ALL.len()]);

impl FindingCounts {
    /// One count per kind, in kind order (ledger-spec/14, section 4).
    pub fn counts(&self) -> &[u64] {
        &self.0
    }

    /// Counts listed one per kind, in kind order; `None` for a list of another length.
    pub fn from_counts(counts: &[u64]) -> Option<FindingCounts> {
        Some(FindingCounts(counts.try_into().ok()?))
    }

    pub fn add(&mut self, kind: DiscrepancyKind, n: u64) {
        let count = &mut self.0[kind as usize];
        *count = count.saturating_add(n);
    }

    pub fn get(&self, kind: DiscrepancyKind) -> u64 {
        self.0[kind as usize]
    }

    /// The proofs of misreporting among them (`DiscrepancyKind::is_proof`).
    pub fn proofs(&self) -> u64 {
        self.nonzero().filter(|(kind, _)| kind.is_proof()).fold(0u64, |sum, (_, n)| sum.saturating_add(n))
    }

    /// (kind, count) for each kind found at least once, in kind order.
    pub fn nonzero(&self) -> impl Iterator<Item = (DiscrepancyKind, u64)> + '_ {
        DiscrepancyKind::ALL.into_iter().map(|kind| (kind, self.get(kind))).filter(|(_, n)| *n > 0)
    }
}

/// One finding, located in the offending validator's log where it has a place there.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Discrepancy {
    pub validator: ValidatorKey,
    pub kind: DiscrepancyKind,
    pub height: u64,
    pub event_idx: Option<u32>,
    pub detail: String,
}

/// A name a fold holds (a hotkey, model, env or plan). Shared: a match's names are the
/// match before it's where equal (a champion plays match after match, every match names
/// the same envs and plan), and the network state's matches share their folds' names.
pub type Name = Arc<str>;

/// A miner as a fold holds it.
pub type HeldMiner = MinerRef<Name>;

/// `text` as one of `held`'s names if one is equal to it, else a new name.
pub(super) fn shared(text: &str, held: &[&Name]) -> Name {
    held.iter().copied().find(|name| &***name == text).map_or_else(|| Name::from(text), Name::clone)
}

/// `name` made one of `held`'s if one is equal to it; left as it is (not copied) if none is.
fn share(name: &mut Name, held: &[&Name]) {
    if let Some(same) = held.iter().copied().find(|h| **h == *name) {
        *name = Name::clone(same);
    }
}

/// Proven equivocation, as found in some validator's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EquivocationFound {
    pub accused: ValidatorKey,
    pub height: u64,
    pub hash_a: Hash32,
    pub hash_b: Hash32,
    /// Where the evidence event is: (reporting validator's height, event index).
    pub recorded_at: (u64, u32),
}

/// One env of one match, as its transcripts and decision fold. A validator holds one of
/// these per env of every match of every log for as long as it runs, so it is kept small:
/// the two contestants' next indexes inline, and no map node left behind when its last
/// entry goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvFold {
    /// Next challenge index due from the contender, and from the champion.
    pub next_contender: u64,
    pub next_champion: u64,
    /// Next index due from any other miner (a log that names one is already wrong). A
    /// map, not a list: a log naming a new miner in each of n transcripts must not cost
    /// n^2 / 2 comparisons. Boxed, and only there once a log names one: every env of
    /// every match pays 8 bytes for it, not a map's 24.
    #[allow(clippy::box_collection)]
    pub next_other: Option<Box<BTreeMap<String, u64>>>,
    /// Rewards of challenges whose pair is not complete yet: index -> (contender, champion).
    /// Boxed, and dropped when emptied: a decided env holds none, for good.
    #[allow(clippy::box_collection)]
    pub pending: Option<Box<Pending>>,
    pub wins: u32,
    pub losses: u32,
    pub draws: u32,
    pub decision: Option<EnvOutcome>,
    /// (wins, losses, draws) as the env's decision recorded them: the tally its rate is of.
    pub decided_tally: Option<(u32, u32, u32)>,
}

/// Rewards of challenges whose pair is not complete yet: index -> (contender, champion).
pub type Pending = BTreeMap<u64, (Option<i32>, Option<i32>)>;

impl EnvFold {
    pub(super) fn next_index(&mut self, hotkey: &str, is_contender: bool, is_champion: bool) -> &mut u64 {
        if is_contender {
            return &mut self.next_contender;
        }
        if is_champion {
            return &mut self.next_champion;
        }
        let others = self.next_other.get_or_insert_with(Default::default);
        if !others.contains_key(hotkey) {
            others.insert(hotkey.to_string(), 0);
        }
        others.get_mut(hotkey).expect("inserted above")
    }
}

/// Most envs a match's folds hold in their sorted vector. A log naming more in one match
/// is already wrong (a match has a handful); past this its folds move to a map, so a log
/// naming a new env in each of n transcripts costs log n per transcript, not a shift and
/// a reallocation of everything held.
const ENV_FOLDS_INLINE: usize = 16;

/// A match's env folds by env name, in name order: a sorted vector rather than a map,
/// because a map's node holds room for eleven envs where a match has a handful. Which
/// of the two holds them depends only on how many there are, so equal folds compare equal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvFolds {
    inline: Vec<(Name, EnvFold)>,
    // Boxed so that every match pays 8 bytes for the rare spill, not a map's 24.
    #[allow(clippy::box_collection)]
    spilled: Option<Box<BTreeMap<Name, EnvFold>>>,
}

impl EnvFolds {
    pub fn get(&self, env: &str) -> Option<&EnvFold> {
        if let Some(map) = &self.spilled {
            return map.get(env);
        }
        let at = self.inline.binary_search_by(|(name, _)| (**name).cmp(env)).ok()?;
        Some(&self.inline[at].1)
    }

    /// The env's fold, made empty if the env had none (its name then one of `held`'s
    /// where equal: the match's own env names; only the first few are looked at, so a
    /// match naming thousands of envs costs no more per transcript than one with a few).
    pub fn entry(&mut self, env: &str, held: &[EnvRef<Name>]) -> &mut EnvFold {
        let name = || shared(env, &held.iter().take(ENV_FOLDS_INLINE).map(|e| &e.name).collect::<Vec<_>>());
        if self.spilled.is_none() && self.inline.len() >= ENV_FOLDS_INLINE && self.get(env).is_none() {
            self.spilled = Some(Box::new(std::mem::take(&mut self.inline).into_iter().collect()));
        }
        if let Some(map) = &mut self.spilled {
            if !map.contains_key(env) {
                map.insert(name(), EnvFold::default());
            }
            return map.get_mut(env).expect("inserted above");
        }
        let at = match self.inline.binary_search_by(|(name, _)| (**name).cmp(env)) {
            Ok(at) => at,
            Err(at) => {
                self.inline.insert(at, (name(), EnvFold::default()));
                self.inline.shrink_to_fit();
                at
            }
        };
        &mut self.inline[at].1
    }

    pub fn get_mut(&mut self, env: &str) -> Option<&mut EnvFold> {
        if let Some(map) = &mut self.spilled {
            return map.get_mut(env);
        }
        let at = self.inline.binary_search_by(|(name, _)| (**name).cmp(env)).ok()?;
        Some(&mut self.inline[at].1)
    }

    /// (env name, fold) in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&Name, &EnvFold)> {
        // At most one of the two holds anything.
        self.inline.iter().map(|(name, fold)| (name, fold)).chain(self.spilled.iter().flat_map(|map| map.iter()))
    }

    pub fn values(&self) -> impl Iterator<Item = &EnvFold> {
        self.iter().map(|(_, fold)| fold)
    }

    /// Each env's name as one of `held`'s where equal (the match's own env names).
    pub(super) fn share_names(&mut self, held: &[EnvRef<Name>]) {
        let held: Vec<&Name> = held.iter().take(ENV_FOLDS_INLINE).map(|e| &e.name).collect();
        for (name, _) in &mut self.inline {
            share(name, &held);
        }
        if let Some(map) = &mut self.spilled {
            **map = std::mem::take(&mut **map)
                .into_iter()
                .map(|(mut name, fold)| {
                    share(&mut name, &held);
                    (name, fold)
                })
                .collect();
        }
    }
}

impl<'a> IntoIterator for &'a EnvFolds {
    type Item = (&'a Name, &'a EnvFold);
    type IntoIter = Box<dyn Iterator<Item = (&'a Name, &'a EnvFold)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl FromIterator<(Name, EnvFold)> for EnvFolds {
    fn from_iter<I: IntoIterator<Item = (Name, EnvFold)>>(items: I) -> EnvFolds {
        let mut folds = EnvFolds::default();
        for (name, fold) in items {
            *folds.entry(&name, &[EnvRef { name: name.clone(), version: 0 }]) = fold;
        }
        folds
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecidedFold {
    pub contender_won: bool,
    pub new_ratio_to_beat_ppm: u32,
    pub win_rates_ppm: Vec<u32>,
    pub height: u64,
    pub time_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchFold {
    pub contender: HeldMiner,
    pub champion: HeldMiner,
    /// Shared with the match before it when they name the same envs.
    pub envs: Arc<[EnvRef<Name>]>,
    pub rule: Name,
    pub ratio_to_beat_ppm: u32,
    pub started_height: u64,
    /// The `MatchStarted` event's index in its block: with the height, its place in the log.
    pub started_event_idx: u32,
    pub started_time_ms: u64,
    /// The chain block (and its hash) the match id derives from; 0 without a chain.
    pub chain_block: u64,
    pub chain_block_hash: crate::bytes::Hash32,
    pub env_folds: EnvFolds,
    pub decided: Option<DecidedFold>,
    pub n_transcripts: u64,
    /// Whether the match plays by the network's rules of the protocol version active at
    /// its chain block: that version's plan, exactly, and only its environments
    /// (ledger-spec/15). Only such a match votes.
    pub network_rules: bool,
}

impl MatchFold {
    /// Shares this match's names with `last`'s where they are equal: the players'
    /// hotkeys and models, the env list and the plan (the match its log started before).
    pub(super) fn share_names_with(&mut self, last: &MatchFold) {
        let names = [&last.contender.hotkey, &last.contender.model, &last.champion.hotkey, &last.champion.model];
        for name in
            [&mut self.contender.hotkey, &mut self.contender.model, &mut self.champion.hotkey, &mut self.champion.model]
        {
            share(name, &names);
        }
        if self.envs == last.envs {
            self.envs = last.envs.clone();
        }
        share(&mut self.rule, &[&last.rule]);
    }

    /// (envs the recorded env decisions say the contender was better in, the majority of
    /// the match's envs it needs to win).
    pub fn better_and_needed(&self) -> (usize, usize) {
        let better = self.env_folds.values().filter(|e| e.decision == Some(EnvOutcome::ContenderBetter)).count();
        (better, crate::evaluation::matchplay::majority_of(self.envs.len()))
    }

    /// Why the match was decided as it was, in words (`None` while it is open): how many
    /// envs the contender was better in, of how many, against the majority it needed.
    pub fn verdict_reason(&self) -> Option<String> {
        let decided = self.decided.as_ref()?;
        let (better, needed) = self.better_and_needed();
        Some(format!(
            "contender {}: better in {better} of {} envs, {needed} needed",
            if decided.contender_won { "won" } else { "lost" },
            self.envs.len()
        ))
    }
}

/// A `MinerSkipped` event at `height` of a log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipFold {
    pub height: u64,
    pub hotkey: String,
    pub uid: u16,
    pub model: String,
    pub revision: String,
    pub commit_block: u64,
    pub reason: crate::ledger::event::SkipReason,
    pub kept_by: String,
    pub kept_block: u64,
}

/// Weights a validator's log says it sent: a `WeightsSet`, or a `WeightsCommitted` with
/// its timelock (`commit`), at `height` of the log. The weights audit compares them with
/// the chain (`audit::weights`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedWeights {
    pub height: u64,
    pub netuid: u16,
    pub uids: Vec<u16>,
    pub weights: Vec<u16>,
    pub version_key: u64,
    pub chain_block: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<LoggedCommit>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoggedCommit {
    pub reveal_round: u64,
    pub reveal_block: u64,
    pub ciphertext_hash: crate::bytes::Hash32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkVerdict {
    ContenderWon,
    ChampionStays,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    /// One copy per validator, shared by all its votes: a state of many matches holds a
    /// vote per validator per match. Encoded as the key itself.
    pub validator: Arc<ValidatorKey>,
    pub contender_won: bool,
    pub new_ratio_to_beat_ppm: u32,
    pub decided_time_ms: u64,
    /// The chain block this validator's match started at (0 without a chain).
    pub chain_block: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkMatch {
    /// The names are the folds': shared, not copied.
    pub contender: HeldMiner,
    pub champion: HeldMiner,
    /// Earliest start over every validator that played it: orders matches.
    pub first_started_ms: u64,
    pub votes: Vec<Vote>,
    /// Sums of vTrust (ppm) for and against the contender.
    pub for_ppm: u64,
    pub against_ppm: u64,
    pub verdict: Option<NetworkVerdict>,
}

#[cfg(test)]
pub(super) mod tests_support {
    use super::*;

    pub fn played(i: u64) -> MatchFold {
        let miner =
            |hotkey: String| MinerRef { hotkey: hotkey.into(), uid: i as u16, model: format!("model{}", i % 3).into() };
        MatchFold {
            contender: miner(format!("5Contender{i}")),
            champion: miner("5Champion".into()),
            envs: Vec::new().into(),
            rule: "score".into(),
            ratio_to_beat_ppm: 500_000,
            started_height: i / 2,
            started_event_idx: (i % 2) as u32,
            started_time_ms: 1_000 * i,
            chain_block: 10 * i,
            chain_block_hash: Hash32([1; 32]),
            env_folds: Default::default(),
            decided: (!i.is_multiple_of(5)).then(|| DecidedFold {
                contender_won: i.is_multiple_of(3),
                new_ratio_to_beat_ppm: 600_000,
                win_rates_ppm: vec![700_000],
                height: i / 2 + 1,
                time_ms: 1_000 * i + 500,
            }),
            n_transcripts: i,
            network_rules: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_folds_past_the_inline_count_move_to_a_map_and_keep_name_order() {
        let names: Vec<String> = (0..40u32).map(|i| format!("env{:02}", (i * 17) % 40)).collect();
        let mut folds = EnvFolds::default();
        for (i, name) in names.iter().enumerate() {
            folds.entry(name, &[]).wins = i as u32;
            // Looked up again, it is the same fold.
            assert_eq!(folds.get(name).map(|f| f.wins), Some(i as u32));
        }
        assert!(folds.spilled.is_some() && folds.inline.is_empty());
        let listed: Vec<&str> = folds.iter().map(|(name, _)| &**name).collect();
        let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
        sorted.sort();
        assert_eq!(listed, sorted, "name order, as with a handful");
        // Built in another order, the same content is the same value.
        let again: EnvFolds = names.iter().rev().map(|n| (Name::from(&**n), folds.get(n).unwrap().clone())).collect();
        assert_eq!(again, folds);
        // A handful stays in the vector.
        let few: EnvFolds = names[..ENV_FOLDS_INLINE].iter().map(|n| (Name::from(&**n), EnvFold::default())).collect();
        assert!(few.spilled.is_none() && few.inline.len() == ENV_FOLDS_INLINE);
    }
}
