//! One validator's chain folded into what the network needs from it: its matches with
//! the tallies its own transcripts imply, its decisions, the evidence it recorded, its
//! chain commitments, and every discrepancy its log proves against it.
//!
//! The fold is pure and sequential per chain (height order, event order). The expensive,
//! independent work on each block (decoding, hashing, re-scoring, re-deriving challenge
//! ids) happens before it in parallel, in [`check_block_events`]; the fold only consumes
//! those results, so the outcome does not depend on how many threads did that work.

use super::checkpoint_points::Checkpoints;
use super::decisions::{match_decision_error, rederive_decision};
use super::departures::{LeftRecord, MAX_LEFT_RECORDS};
use super::match_table::MatchTable;
use super::record_lists::{CommitmentList, EquivocationList, SkipList};
use super::records::{
    DecidedFold, Discrepancy, DiscrepancyKind, EnvFolds, EquivocationFound, FindingCounts, HeldMiner, LoggedCommit,
    LoggedWeights, MatchFold, SkipFold,
};
use crate::bytes::{ChallengeId, Hash32, MatchId, ValidatorKey};
use crate::envs::{self, Registry};
use crate::evaluation::matchplay::GameOutcome;
use crate::ledger::block::{check_header_rules, check_signature, BlockHeader, Tip};
use crate::ledger::event::{EnvRef, Event, Evidence, MinerRef, Transcript};
use crate::ledger::rotation::{KeySucceeded, RotatedAt, RotationRole};
use crate::protocol::Protocol;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What the protocol says of a block before it is folded ([`ChainFold::protocol_check`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolCheck {
    Valid,
    /// An event kind its version does not have: the block is invalid.
    Refused(String),
    /// A version this build does not apply: the log waits for an upgrade.
    Unknown(u32),
}

/// Results of the per-event checks done in parallel before the fold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventCheck {
    NotATranscript,
    Transcript {
        /// The challenge id the schedule gives for this (env, version, match, index).
        expected_challenge_id: ChallengeId,
        /// The reward the env gives the recorded conversation, or why it could not score it.
        rescored: Result<i32, String>,
    },
    Evidence {
        /// `Err` says why the two headers are not a proof of equivocation.
        proven: Result<(), String>,
    },
}

/// Re-derives what can be re-derived of each event of a decoded block. Pure and
/// independent per block, so callers run it on many blocks at once.
pub fn check_block_events<S: AsRef<str>>(
    registry: &Registry,
    validator: &ValidatorKey,
    events: &[Event<S>],
) -> Vec<EventCheck> {
    events.iter().map(|event| check_event(registry, validator, event)).collect()
}

fn check_event<S: AsRef<str>>(registry: &Registry, validator: &ValidatorKey, event: &Event<S>) -> EventCheck {
    match event {
        Event::Transcript(t) | Event::TranscriptCut(crate::ledger::event::TranscriptCut { transcript: t, .. }) => {
            EventCheck::Transcript {
                expected_challenge_id: envs::derive_challenge_id(
                    t.env.name.as_ref(),
                    t.env.version,
                    validator,
                    &t.match_id,
                    t.challenge_index,
                ),
                rescored: rescore(registry, t),
            }
        }
        Event::Evidence(evidence) => EventCheck::Evidence { proven: check_evidence(evidence) },
        _ => EventCheck::NotATranscript,
    }
}

/// The reward the environment gives the recorded conversation.
pub fn rescore<S: AsRef<str>>(registry: &Registry, t: &Transcript<S>) -> Result<i32, String> {
    let name = t.env.name.as_ref();
    let env = registry.get(name).ok_or_else(|| format!("unknown environment {name:?}"))?;
    if env.spec().version != t.env.version {
        return Err(format!(
            "environment {name} version {} is not known to this build (it has version {})",
            t.env.version,
            env.spec().version
        ));
    }
    envs::score_transcript(env, &t.challenge_id, &t.messages).map(|s| s.reward_milli).map_err(|e| e.to_string())
}

/// `m` as a fold holds it.
fn held_miner<S: AsRef<str>>(m: &MinerRef<S>) -> HeldMiner {
    MinerRef { hotkey: m.hotkey.as_ref().into(), uid: m.uid, model: m.model.as_ref().into() }
}

/// Two validly signed, different headers of the accused validator at one height.
pub fn check_evidence(evidence: &Evidence) -> Result<(), String> {
    let (a, b) = (&evidence.header_a, &evidence.header_b);
    if a.validator != evidence.validator || b.validator != evidence.validator {
        return Err("a header is not the accused validator's".into());
    }
    if a.height != evidence.height || b.height != evidence.height {
        return Err("a header is not at the accused height".into());
    }
    let (hash_a, hash_b) = (a.hash(), b.hash());
    if hash_a == hash_b {
        return Err("the two headers are the same".into());
    }
    check_header_rules(a).map_err(|e| format!("header a: {e}"))?;
    check_header_rules(b).map_err(|e| format!("header b: {e}"))?;
    check_signature(a, &hash_a, &evidence.signature_a).map_err(|e| format!("header a: {e}"))?;
    check_signature(b, &hash_b, &evidence.signature_b).map_err(|e| format!("header b: {e}"))?;
    Ok(())
}

/// Most findings one chain's fold keeps as records. A chain's log comes from outside:
/// its findings are bounded like everything else it can make a replay hold. Five
/// proofs already take a validator's vTrust to zero, so the count past this many
/// changes no verdict.
pub const MAX_CHAIN_DISCREPANCIES: usize = 1_000;

/// Everything one validator's chain says, folded up to `tip`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainFold {
    pub validator: ValidatorKey,
    pub tip: Option<Tip>,
    /// Set at the first block that did not verify; nothing from there on is folded.
    pub invalid_at: Option<u64>,
    /// The first block of a protocol version this build does not apply (ledger-spec/15):
    /// (its height, the version, 0 for an event kind no version of this build has).
    /// Nothing from there on is folded, and it is no finding: the log waits for an upgrade.
    pub awaiting_upgrade: Option<(u64, u32)>,
    /// The greatest chain block the log's events have recorded so far: its blocks'
    /// protocol version is the one active there.
    pub chain_block_seen: u64,
    pub n_events: u64,
    pub n_transcripts: u64,
    pub n_bytes: u64,
    pub matches: MatchTable,
    /// The match this log started last: a new match shares its names where equal.
    pub last_started: Option<MatchId>,
    /// How many of `matches` are decided: a new match's id derives from it, and
    /// counting them at every start made a log of n matches cost n^2 / 2 steps.
    pub n_decided: u64,
    /// How many times folding changed what `combine::combine` reads from this fold
    /// besides its counts (tip, events, transcripts): a match started or decided, a
    /// finding, an equivocation. A replay whose folds all show the number the last
    /// replay's did reuses its state and recounts only those counts
    /// (`combine::recount`): most blocks hold transcripts alone, and a combine reads
    /// every match held.
    pub combine_changes: u64,
    /// The first [`MAX_CHAIN_DISCREPANCIES`] findings (and always an invalid block's).
    pub discrepancies: Vec<Discrepancy>,
    /// Findings past that many: counted (each is a proof of misreporting), not kept, so
    /// a log of a million bad events costs a replay a count, not a million records.
    pub n_discrepancies_omitted: u64,
    /// The height of the first finding not kept.
    pub first_omitted_height: Option<u64>,
    /// Every finding of this log by kind, kept or not: what vTrust and the state count.
    pub findings: FindingCounts,
    pub equivocations: EquivocationList,
    pub commitments: CommitmentList,
    /// The last weights this log says it sent to the chain (set, or committed timelocked).
    pub last_weights: Option<LoggedWeights>,
    /// The miners this validator recorded not playing, and why (ledger-spec/13).
    pub skipped: SkipList,
    /// This log's fold at its checkpoint heights, and what its checkpoints claim of others.
    pub checkpoints: Checkpoints,
    /// The predecessor this log's block 0 names (ledger-spec/16): the combine links the
    /// two when the predecessor's rotation names this key at that block.
    pub succeeds: Option<KeySucceeded>,
    /// This log's rotation block, its last: nothing past it is folded (ledger-spec/16).
    pub rotated: Option<RotatedAt>,
    /// The champions this log says left the crown without a match (ledger-spec/13), in
    /// log order, at most [`MAX_LEFT_RECORDS`].
    pub champion_left: Vec<LeftRecord>,
}

impl ChainFold {
    pub fn new(validator: ValidatorKey) -> ChainFold {
        ChainFold {
            validator,
            tip: None,
            invalid_at: None,
            awaiting_upgrade: None,
            chain_block_seen: 0,
            n_events: 0,
            n_transcripts: 0,
            n_bytes: 0,
            matches: MatchTable::default(),
            last_started: None,
            n_decided: 0,
            combine_changes: 0,
            discrepancies: Vec::new(),
            n_discrepancies_omitted: 0,
            first_omitted_height: None,
            findings: FindingCounts::default(),
            equivocations: Default::default(),
            commitments: CommitmentList::default(),
            last_weights: None,
            skipped: SkipList::default(),
            checkpoints: Checkpoints::default(),
            succeeds: None,
            rotated: None,
            champion_left: Vec::new(),
        }
    }

    /// Shares each match's names with the match its log started before it where equal,
    /// as folding does: a fold decoded from a snapshot holds a copy of every name.
    pub fn share_names(&mut self) {
        // A failed read faults the snapshot, which the replay asks before handing it out.
        let order: Vec<MatchId> = self.matches.in_log_order().map_while(Result::ok).map(|(id, _)| id).collect();
        let mut last: Option<Arc<MatchFold>> = None;
        for id in order {
            let Some(m) = self.matches.update(&id) else { continue };
            if let Some(last) = &last {
                m.share_names_with(last);
            }
            m.env_folds.share_names(&m.envs);
            last = self.matches.get_or_fault(&id);
        }
    }

    /// Whether reading back anything this fold spilled to the spill file failed: what
    /// was made from it is incomplete.
    pub(super) fn spill_faulted(&self) -> bool {
        self.matches.faulted() || self.commitments.faulted() || self.skipped.faulted() || self.equivocations.faulted()
    }

    /// The height the next block must have.
    pub fn next_height(&self) -> u64 {
        self.tip.map_or(0, |t| t.height + 1)
    }

    /// Records that the block at `height` failed verification; the chain ends there.
    pub fn mark_invalid(&mut self, height: u64, why: String) {
        if self.invalid_at.is_none() {
            self.invalid_at = Some(height);
            self.push(DiscrepancyKind::InvalidBlock, height, None, why);
        }
    }

    fn push(&mut self, kind: DiscrepancyKind, height: u64, event_idx: Option<u32>, detail: String) {
        self.combine_changes += 1;
        self.findings.add(kind, 1);
        if self.discrepancies.len() >= MAX_CHAIN_DISCREPANCIES && kind != DiscrepancyKind::InvalidBlock {
            self.n_discrepancies_omitted += 1;
            self.first_omitted_height.get_or_insert(height);
            return;
        }
        self.discrepancies.push(Discrepancy { validator: self.validator, kind, height, event_idx, detail });
    }

    /// Folds one verified block (signature and link already checked by the caller) with
    /// the results of [`check_block_events`] on its events.
    /// What `protocol` says of a verified block's `events` before it is folded: valid,
    /// or why it is refused (a kind its version does not have: an invalid block), or the
    /// version this build does not apply that it belongs to.
    pub fn protocol_check<S: AsRef<str>>(&self, protocol: &Protocol, events: &[Event<S>]) -> ProtocolCheck {
        let mut seen = self.chain_block_seen;
        for event in events {
            seen = seen.max(event.chain_block().unwrap_or(0));
            if let Some(version) = protocol.unknown_at(seen) {
                return ProtocolCheck::Unknown(version);
            }
            // A kind or an environment no version of this build has belongs to a later
            // one: not judged here (0: the version is not known).
            if !protocol.has_kind(event.tag()) {
                return ProtocolCheck::Unknown(0);
            }
            if let Event::MatchStarted(started) = event {
                if started.envs.iter().any(|e| !protocol.has_env(e.name.as_ref(), e.version)) {
                    return ProtocolCheck::Unknown(0);
                }
            }
            let rules = protocol.version_at(seen);
            if let Some(why) = rules.refuses_kind(event.tag()) {
                return ProtocolCheck::Refused(format!("{why}, active at chain block {seen}"));
            }
        }
        ProtocolCheck::Valid
    }

    /// Records that the block at `height` belongs to protocol `version`, which this build
    /// does not apply (0: an event kind no version of it has); the fold waits there.
    pub fn mark_awaiting_upgrade(&mut self, height: u64, version: u32) {
        if self.awaiting_upgrade.is_none() && self.invalid_at.is_none() {
            self.awaiting_upgrade = Some((height, version));
            self.combine_changes += 1;
        }
    }

    /// Whether more blocks can be folded: none past an invalid block or a version this
    /// build does not apply.
    pub fn folds_on(&self) -> bool {
        self.invalid_at.is_none() && self.awaiting_upgrade.is_none()
    }

    /// Whether a block past the tip would be folded: not past an invalid block, a version
    /// this build does not apply, or the log's rotation (its old key signs nothing more
    /// that counts; a store refuses such a block, ledger-spec/16).
    pub fn takes_more(&self) -> bool {
        self.folds_on() && self.rotated.is_none()
    }

    /// Records what a verified block at `height` with `hash` is to a key rotation; the
    /// caller checked the rules ([`crate::ledger::rotation::role`]).
    pub fn note_rotation(&mut self, height: u64, hash: Hash32, role: RotationRole) {
        match role {
            RotationRole::None => return,
            RotationRole::Rotated(r) => {
                self.rotated = Some(RotatedAt { height, hash, new_key: r.new_key, chain_block: r.chain_block })
            }
            RotationRole::Succeeded(s) => self.succeeds = Some(s),
        }
        self.combine_changes += 1;
    }

    pub fn apply_block<S: AsRef<str>>(
        &mut self,
        protocol: &Protocol,
        header: &BlockHeader,
        hash: Hash32,
        n_bytes: usize,
        events: &[Event<S>],
        checks: &[EventCheck],
    ) {
        assert!(self.folds_on(), "nothing is folded past an invalid block or an unknown version");
        assert_eq!(header.height, self.next_height(), "blocks are folded in height order");
        assert_eq!(checks.len(), events.len(), "one check per event");
        for (event_idx, (event, check)) in events.iter().zip(checks).enumerate() {
            self.chain_block_seen = self.chain_block_seen.max(event.chain_block().unwrap_or(0));
            self.apply_event(protocol, header.height, header.time_ms, event_idx as u32, event, check);
        }
        self.n_events += events.len() as u64;
        self.n_bytes += n_bytes as u64;
        self.tip = Some(Tip { height: header.height, hash, time_ms: header.time_ms });
    }

    /// Folds one event. What it may change of what the combine reads is counted in
    /// `combine_changes` by its kind ([`changes_combine`]) and by every finding
    /// ([`Self::push`]), in these two places only.
    fn apply_event<S: AsRef<str>>(
        &mut self,
        protocol: &Protocol,
        height: u64,
        time_ms: u64,
        event_idx: u32,
        event: &Event<S>,
        check: &EventCheck,
    ) {
        let at = Some(event_idx);
        if changes_combine(event) {
            self.combine_changes += 1;
        }
        match (event, check) {
            (Event::MatchStarted(started), _) => {
                let n_decided = self.n_decided;
                let expected = crate::envs::derive_match_id(
                    &self.validator,
                    started.contender.hotkey.as_ref(),
                    started.champion.hotkey.as_ref(),
                    n_decided,
                    started.chain_block,
                    &started.chain_block_hash,
                );
                if started.match_id != expected && !self.matches.contains(&started.match_id) {
                    self.push(
                        DiscrepancyKind::BadMatchId,
                        height,
                        at,
                        format!(
                            "match {} is not the id derived from its contestants, {n_decided} decided before and chain block {} ({})",
                            started.match_id, started.chain_block, expected
                        ),
                    );
                }
                if self.matches.contains(&started.match_id) {
                    return;
                }
                let mut fold = MatchFold {
                    contender: held_miner(&started.contender),
                    champion: held_miner(&started.champion),
                    envs: started
                        .envs
                        .iter()
                        .map(|e| EnvRef { name: e.name.as_ref().into(), version: e.version })
                        .collect(),
                    rule: started.rule.as_ref().into(),
                    ratio_to_beat_ppm: started.ratio_to_beat_ppm,
                    started_height: height,
                    started_event_idx: event_idx,
                    started_time_ms: time_ms,
                    chain_block: started.chain_block,
                    chain_block_hash: started.chain_block_hash,
                    env_folds: EnvFolds::default(),
                    decided: None,
                    n_transcripts: 0,
                    network_rules: protocol.is_network_match(
                        started.chain_block,
                        started.rule.as_ref(),
                        started.envs.iter().map(|e| (e.name.as_ref(), e.version)),
                    ),
                };
                if let Some(last) = self.last_started.and_then(|id| self.matches.get_or_fault(&id)) {
                    fold.share_names_with(&last);
                }
                self.matches.insert(started.match_id, fold);
                self.last_started = Some(started.match_id);
            }
            (
                Event::Transcript(t) | Event::TranscriptCut(crate::ledger::event::TranscriptCut { transcript: t, .. }),
                EventCheck::Transcript { expected_challenge_id, rescored },
            ) => {
                self.n_transcripts += 1;
                let env_name = t.env.name.as_ref();
                if t.challenge_id != *expected_challenge_id {
                    self.push(
                        DiscrepancyKind::BadChallengeId,
                        height,
                        at,
                        format!(
                            "challenge {} of {env_name} index {} is not the derived id {}",
                            t.challenge_id, t.challenge_index, expected_challenge_id
                        ),
                    );
                }
                match rescored {
                    Ok(reward) if *reward == t.reward_milli => {}
                    Ok(reward) => self.push(
                        DiscrepancyKind::FalseScore,
                        height,
                        at,
                        format!(
                            "challenge {} ({env_name} index {}, miner {}): recorded reward {} but the answer scores {}",
                            t.challenge_id,
                            t.challenge_index,
                            t.miner.hotkey.as_ref(),
                            t.reward_milli,
                            reward
                        ),
                    ),
                    Err(why) => self.push(
                        DiscrepancyKind::FalseScore,
                        height,
                        at,
                        format!("challenge {} ({env_name}): the transcript cannot be re-scored: {why}", t.challenge_id),
                    ),
                }
                self.apply_transcript(height, event_idx, t);
            }
            (Event::EnvDecision(decision), _) => {
                let env_name = decision.env.name.as_ref();
                let Some(m) = self.matches.update(&decision.match_id) else {
                    let detail = format!("decision for match {} which was never started", decision.match_id);
                    self.push(DiscrepancyKind::FalseTally, height, at, detail);
                    return;
                };
                let rederived = rederive_decision(&m.rule, m.ratio_to_beat_ppm, decision);
                let fold = m.env_folds.entry(env_name, &m.envs);
                let recorded = (decision.wins, decision.losses, decision.draws);
                let own = (fold.wins, fold.losses, fold.draws);
                fold.decision = Some(decision.outcome);
                fold.decided_tally = Some((decision.wins, decision.losses, decision.draws));
                // Nothing is tallied past a decision, so unpaired rewards are dropped.
                fold.pending = None;
                if recorded != own {
                    self.push(
                        DiscrepancyKind::FalseTally,
                        height,
                        at,
                        format!(
                            "match {} env {env_name}: decision says {}/{}/{} wins/losses/draws, its transcripts give {}/{}/{}",
                            decision.match_id, recorded.0, recorded.1, recorded.2, own.0, own.1, own.2
                        ),
                    );
                }
                if let Err(why) = rederived {
                    let detail = format!("match {} env {env_name}: {why}", decision.match_id);
                    self.push(DiscrepancyKind::FalseDecision, height, at, detail);
                }
            }
            (Event::MatchDecided(decided), _) => {
                let Some(m) = self.matches.get_or_fault(&decided.match_id) else {
                    let detail = format!("match {} was decided but never started", decided.match_id);
                    self.push(DiscrepancyKind::FalseDecision, height, at, detail);
                    return;
                };
                if let Some(why) = match_decision_error(&m, decided) {
                    self.push(DiscrepancyKind::FalseDecision, height, at, format!("match {}: {why}", decided.match_id));
                }
                // Not played by the network's rules of its protocol version: one finding
                // per match, naming each plan field that differs and each env outside the
                // version; the match casts no vote (`Play::of`).
                if !m.network_rules {
                    let rules = protocol.version_at(m.chain_block);
                    let mut differences = crate::evaluation::network_plan::plan_differences_from(rules.plan, &m.rule);
                    differences.extend(m.envs.iter().filter(|e| !rules.envs.contains(&(&*e.name, e.version))).map(
                        |e| format!("env {} version {} (not in protocol version {})", e.name, e.version, rules.version),
                    ));
                    let detail = format!(
                        "match {}: played by rules that are not the network's of protocol version {} (ledger-spec/15): {}",
                        decided.match_id,
                        rules.version,
                        differences.join(", ")
                    );
                    self.push(DiscrepancyKind::FalseDecision, height, at, detail);
                }
                if let Some(m) = self.matches.update(&decided.match_id) {
                    if m.decided.is_none() {
                        self.n_decided += 1;
                    }
                    m.decided = Some(DecidedFold {
                        contender_won: decided.contender_won,
                        new_ratio_to_beat_ppm: decided.new_ratio_to_beat_ppm,
                        win_rates_ppm: decided.win_rates.iter().map(|r| r.win_rate_ppm).collect(),
                        height,
                        time_ms,
                    });
                }
            }
            (Event::Evidence(evidence), EventCheck::Evidence { proven }) => match proven {
                Ok(()) => self.equivocations.push(EquivocationFound {
                    accused: evidence.validator,
                    height: evidence.height,
                    hash_a: evidence.header_a.hash(),
                    hash_b: evidence.header_b.hash(),
                    recorded_at: (height, event_idx),
                }),
                Err(why) => self.push(
                    DiscrepancyKind::FalseEvidence,
                    height,
                    at,
                    format!("evidence against {} at height {}: {why}", evidence.validator, evidence.height),
                ),
            },
            (Event::ChainCommitment(commitment), _) => self.commitments.push(commitment.clone()),
            (Event::WeightsSet(w), _) => {
                self.last_weights = Some(LoggedWeights {
                    height,
                    netuid: w.netuid,
                    uids: w.uids.clone(),
                    weights: w.weights.clone(),
                    version_key: w.version_key,
                    chain_block: w.chain_block,
                    commit: None,
                })
            }
            // A timelocked commit is not weights on chain until revealed; the weights
            // audit compares the chain's reveal with it.
            (Event::WeightsCommitted(w), _) => {
                self.last_weights = Some(LoggedWeights {
                    height,
                    netuid: w.netuid,
                    uids: w.uids.clone(),
                    weights: w.weights.clone(),
                    version_key: w.version_key,
                    chain_block: w.chain_block,
                    commit: Some(LoggedCommit {
                        reveal_round: w.reveal_round,
                        reveal_block: w.reveal_block,
                        ciphertext_hash: w.ciphertext_hash,
                    }),
                })
            }
            (Event::MinerSkipped(m), _) => self.skipped.push(SkipFold {
                height,
                hotkey: m.hotkey.as_ref().into(),
                uid: m.uid,
                model: m.model.as_ref().into(),
                revision: m.revision.as_ref().into(),
                commit_block: m.commit_block,
                reason: m.reason,
                kept_by: m.kept_by.as_ref().into(),
                kept_block: m.kept_block,
            }),
            (Event::FoldCheckpoint(c), _) => self.checkpoints.claim(height, c),
            // The block's role, not the event's: `note_rotation`.
            (Event::KeyRotated(_) | Event::KeySucceeded(_), _) => {}
            (Event::ChampionLeft(left), _) => {
                if self.champion_left.len() < MAX_LEFT_RECORDS {
                    self.champion_left.push(LeftRecord {
                        hotkey: left.champion.hotkey.as_ref().into(),
                        reason: left.reason,
                        chain_block: left.chain_block,
                        time_ms,
                        height,
                    });
                }
            }
            (event, check) => unreachable!("check {check:?} does not belong to a {} event", event.kind_name()),
        }
    }

    /// The schedule check and the tally of this validator's own recorded rewards.
    fn apply_transcript<S: AsRef<str>>(&mut self, height: u64, event_idx: u32, t: &Transcript<S>) {
        let Some(m) = self.matches.update(&t.match_id) else {
            let detail = format!("transcript for match {} which was never started", t.match_id);
            self.push(DiscrepancyKind::ScheduleGap, height, Some(event_idx), detail);
            return;
        };
        m.n_transcripts += 1;
        let (hotkey, env_name) = (t.miner.hotkey.as_ref(), t.env.name.as_ref());
        let is_contender = hotkey == &*m.contender.hotkey;
        let is_champion = hotkey == &*m.champion.hotkey;
        let fold = m.env_folds.entry(env_name, &m.envs);
        let next = fold.next_index(hotkey, is_contender, is_champion);
        let schedule = match t.challenge_index.cmp(next) {
            std::cmp::Ordering::Equal => {
                *next += 1;
                None
            }
            std::cmp::Ordering::Greater => {
                let skipped = *next;
                *next = t.challenge_index + 1;
                Some((DiscrepancyKind::ScheduleGap, format!("index {skipped} was skipped")))
            }
            std::cmp::Ordering::Less => Some((DiscrepancyKind::ScheduleRepeat, "that index was already played".into())),
        };
        // A skipped index is the offence, not the game played in its place: that game
        // counts. A repeated index would count one challenge twice: it does not.
        let repeated = matches!(schedule, Some((DiscrepancyKind::ScheduleRepeat, _)));
        if fold.decision.is_none() && !repeated && (is_contender || is_champion) {
            let pending = fold.pending.get_or_insert_with(Default::default);
            let slot = pending.entry(t.challenge_index).or_default();
            if is_contender {
                slot.0 = Some(t.reward_milli);
            } else {
                slot.1 = Some(t.reward_milli);
            }
            if let (Some(contender), Some(champion)) = *slot {
                pending.remove(&t.challenge_index);
                if pending.is_empty() {
                    // An emptied map keeps its node and its box: neither is held for good.
                    fold.pending = None;
                }
                match GameOutcome::of_rewards(contender, champion) {
                    GameOutcome::Win => fold.wins += 1,
                    GameOutcome::Loss => fold.losses += 1,
                    GameOutcome::Draw => fold.draws += 1,
                }
            }
        }
        if let Some((kind, why)) = schedule {
            let detail = format!(
                "match {} env {env_name} miner {hotkey}: challenge index {}: {why}",
                t.match_id, t.challenge_index
            );
            self.push(kind, height, Some(event_idx), detail);
        }
    }
}

/// Whether folding `event` may change what the combine reads of a fold (its matches and
/// their decisions, the equivocations it proves; findings are counted where they are
/// pushed, whatever the event): a replay whose folds changed nothing the combine reads
/// recounts the last state instead of combining again (`combine::recount`), so a kind
/// wrongly called `false` here would leave the state stale. Exhaustive on purpose: a new
/// event kind does not compile until it is decided here.
fn changes_combine<S>(event: &Event<S>) -> bool {
    match event {
        Event::MatchStarted(_) | Event::MatchDecided(_) | Event::Evidence(_) | Event::ChampionLeft(_) => true,
        // Tallies, rewards and anchors: the combine reads none of them (their false
        // values are findings, pushed and counted).
        Event::Transcript(_)
        | Event::TranscriptCut(_)
        | Event::EnvDecision(_)
        | Event::WeightsSet(_)
        | Event::WeightsCommitted(_)
        | Event::ChainCommitment(_)
        | Event::MinerSkipped(_)
        | Event::FoldCheckpoint(_) => false,
        // Counted where the block is noted (`note_rotation`): the link is the block's.
        Event::KeyRotated(_) | Event::KeySucceeded(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_must_meet_the_header_rules_and_be_signed_by_the_accused() {
        use ed25519_dalek::Signer;
        let key = crate::ledger::LedgerKey::from_seed([3; 32]);
        let header = |time_ms, format_version| BlockHeader {
            format_version,
            validator: key.validator(),
            height: 5,
            prev_hash: Hash32([1; 32]),
            time_ms,
            events_root: Hash32([2; 32]),
            n_events: 1,
        };
        let sign = |h: &BlockHeader| {
            crate::bytes::SignatureBytes(
                key.signing_key().sign(&crate::ledger::block::signing_message(&h.hash())).to_bytes(),
            )
        };
        let evidence = |a: BlockHeader, b: BlockHeader| Evidence {
            validator: key.validator(),
            height: 5,
            signature_a: sign(&a),
            signature_b: sign(&b),
            header_a: a,
            header_b: b,
        };
        let version = crate::ledger::block::FORMAT_VERSION;
        assert_eq!(check_evidence(&evidence(header(1, version), header(2, version))), Ok(()));
        // Validly signed, but a header no block could have: not evidence.
        let bad = check_evidence(&evidence(header(1, version), header(2, version + 1)));
        assert!(bad.as_ref().is_err_and(|why| why.starts_with("header b")), "{bad:?}");
        let mut forged = evidence(header(1, version), header(2, version));
        forged.signature_b = forged.signature_a;
        assert!(check_evidence(&forged).is_err());
    }
}
