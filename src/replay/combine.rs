//! The network's state from every validator's folded chain: each validator's vTrust,
//! the vTrust-weighted verdict on every match, the champion and its history, the ratio
//! to beat, and the winner-takes-all weights. Pure and cheap: it reads only the folds.
//!
//! vTrust's formula is `vtrust`'s; this module gathers its inputs.
//!
//! A match is "the same match" across validators when it has the same contender and
//! champion hotkeys: each validator derives its own match id and challenge schedule.

use super::departures::Departures;
use super::fold::{ChainFold, MAX_CHAIN_DISCREPANCIES};
use super::identities::Identities;
use super::match_table::MatchTable;
pub(super) use super::ratio_walk::RatioWalk;
pub use super::ratio_walk::{each_ratio_finding, plan_ratio_params, ratio_findings, walk_log};
use super::records::{
    Discrepancy, DiscrepancyKind, FindingCounts, HeldMiner, MatchFold, Name, NetworkMatch, NetworkVerdict, Vote,
};
use super::sorted_scratch::Bag;
use super::spill_file::{CacheSize, SpillFile, SpillFileError};
pub use super::state_matches::NetworkMatches;
use super::vtrust;
use crate::bytes::{Hash32, MatchId, ValidatorKey};
use crate::evaluation::ratio::{RatioParams, RatioToBeat};
use redb::WriteTransaction;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidatorSummary {
    pub validator: ValidatorKey,
    pub tip_height: Option<u64>,
    /// The hash of the block at `tip_height`: the state names the very logs it was made from.
    pub tip_hash: Option<Hash32>,
    pub n_events: u64,
    pub n_transcripts: u64,
    pub n_matches: u64,
    pub invalid_at: Option<u64>,
    pub equivocated: bool,
    /// Proofs of misreporting: false scores, tallies, evidence, bad ids, schedule faults.
    pub n_false_reports: u64,
    /// Those proofs by kind (each kind found at least once, in kind order), the log's own
    /// and the combine's ratio findings together.
    pub proofs_by_kind: Vec<(DiscrepancyKind, u64)>,
    pub n_compared: u64,
    pub n_disagreements: u64,
    pub vtrust_ppm: u32,
}

/// What a match that crowned its contender sets: the network's ratio to beat (the lower
/// median of the ratios the winning votes of validators with vTrust above zero set; none
/// without such a vote), at the earliest chain block and time among those votes.
pub struct Crowning {
    pub set_ppm: Option<u32>,
    pub at_block: u64,
    pub at_ms: u64,
}

/// The [`Crowning`] of `m` under `vtrust`: the combine's, and the history chart's.
pub fn crowning(m: &NetworkMatch, vtrust: impl Fn(&ValidatorKey) -> u32) -> Crowning {
    let winners: Vec<&Vote> = m.votes.iter().filter(|v| v.contender_won && vtrust(&v.validator) > 0).collect();
    let mut ratios: Vec<u32> = winners.iter().map(|v| v.new_ratio_to_beat_ppm).collect();
    ratios.sort_unstable();
    Crowning {
        set_ppm: ratios.get((ratios.len().max(1) - 1) / 2).copied(),
        // Chain time, as each validator's log proves it: the earliest start block among
        // the winning votes (ledger-spec/06).
        at_block: winners.iter().map(|v| v.chain_block).min().unwrap_or(0),
        at_ms: winners.iter().map(|v| v.decided_time_ms).min().unwrap_or(m.first_started_ms),
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChampionChange {
    pub champion: HeldMiner,
    /// (Contender, champion) hotkeys of the match that crowned it (none for the first champion).
    pub by_match: Option<(Name, Name)>,
    pub at_time_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NetworkState {
    pub validators: Vec<ValidatorSummary>,
    /// Shared by the replays that recount this one (`recount`): a tip move that changes
    /// only counts copies no match. Encoded as the list it is.
    pub matches: NetworkMatches,
    pub champion: Option<HeldMiner>,
    pub champion_history: Vec<ChampionChange>,
    pub ratio_set_ppm: u32,
    pub ratio_set_at_block: u64,
    /// (uid, weight) pairs: winner takes all.
    pub weights: Vec<(u16, u16)>,
    pub discrepancies: Vec<Discrepancy>,
    /// Findings past the most each chain's fold keeps (`fold::MAX_CHAIN_DISCREPANCIES`):
    /// counted in their validator's `n_false_reports`, not listed.
    pub n_discrepancies_omitted: u64,
}

/// Combines folded chains (in any order; they are sorted here) into the network's state,
/// with its working sets and the state's matches in `spill_file`'s file: what it holds in
/// memory past the file's cache is one pair's matches, whatever the logs hold. The
/// state's matches are read back through the snapshot its transaction committed.
pub fn combine(
    folds: &[ChainFold],
    ratio_params: &RatioParams,
    cold: &SpillFile,
) -> Result<NetworkState, SpillFileError> {
    let txn = cold.begin_combine()?;
    let mut folds: Vec<&ChainFold> = folds.iter().collect();
    folds.sort_by_key(|f| f.validator);

    // Each fold keeps its own first findings; the state lists, per validator, at most
    // as many again of those the combine finds, and counts the rest.
    let mut discrepancies = Findings::default();
    for fold in &folds {
        discrepancies.kept.extend(fold.discrepancies.iter().cloned());
    }
    // Keys linked by rotations are one validator, named by its first key (ledger-spec/16).
    let identities = Identities::of(folds.iter().copied());
    let retired: BTreeSet<ValidatorKey> = folds.iter().filter(|f| f.rotated.is_some()).map(|f| f.validator).collect();
    // Proven equivocation, wherever it was recorded; one finding per accused and height.
    // A key its own log retired by a rotation signs no history after it and none against
    // it: its second header is a forgery with that key, which zeroes no one.
    let mut equivocated: BTreeSet<ValidatorKey> = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for fold in &folds {
        for found in fold.equivocations.iter() {
            let found = found?;
            let forged = retired.contains(&found.accused);
            if !forged {
                equivocated.insert(found.accused);
            }
            if seen.insert((found.accused, found.height)) {
                discrepancies.push(Discrepancy {
                    validator: found.accused,
                    kind: DiscrepancyKind::Equivocation,
                    height: found.height,
                    event_idx: None,
                    detail: format!(
                        "two signed headers at height {}: {} and {} (evidence in the log of {} at height {} event {}){}",
                        found.height,
                        found.hash_a,
                        found.hash_b,
                        fold.validator,
                        found.recorded_at.0,
                        found.recorded_at.1,
                        if forged { "; the key was retired by its rotation: a forgery with it, which zeroes no one" } else { "" }
                    ),
                });
            }
        }
    }

    // The ratio each validator played at and set, against the ratio parameters: one walk
    // through its logs in rotation order, each log's findings its own.
    let by_key: BTreeMap<ValidatorKey, &ChainFold> = folds.iter().map(|f| (f.validator, *f)).collect();
    let mut ratio_false: BTreeMap<ValidatorKey, u64> = BTreeMap::new();
    for root in folds.iter().map(|f| f.validator).filter(|k| identities.root(k) == *k) {
        let mut walk = RatioWalk::default();
        for fold in identities.chain(&root).iter().filter_map(|k| by_key.get(k)) {
            let n = walk_log(&mut walk, fold, ratio_params, &mut |found| discrepancies.push(found))?;
            ratio_false.insert(fold.validator, n);
        }
    }

    // Each log's findings by kind, its ratio findings among its false decisions.
    let proofs: BTreeMap<ValidatorKey, FindingCounts> = folds
        .iter()
        .map(|f| {
            let mut counts = f.findings.clone();
            counts.add(DiscrepancyKind::FalseDecision, ratio_false[&f.validator]);
            (f.validator, counts)
        })
        .collect();
    // Pass 1: vTrust from proofs alone, a validator's logs together.
    let mut zeroed_proofs: BTreeMap<ValidatorKey, (bool, u64)> = BTreeMap::new();
    for f in &folds {
        let entry = zeroed_proofs.entry(identities.root(&f.validator)).or_default();
        entry.0 |= f.invalid_at.is_some() || equivocated.contains(&f.validator);
        entry.1 = entry.1.saturating_add(proofs[&f.validator].proofs());
    }
    let base: BTreeMap<ValidatorKey, u32> =
        zeroed_proofs.iter().map(|(root, &(zeroed, n))| (*root, vtrust::from_proofs(zeroed, n))).collect();

    // Every log's matches grouped by pair (contender, champion), each validator's in id
    // order: its first of a pair dates a disagreement, its last decided one is its vote.
    // A validator votes under its first key, whichever of its logs played.
    let voters: BTreeMap<ValidatorKey, Arc<ValidatorKey>> =
        folds.iter().map(|f| (f.validator, Arc::new(identities.root(&f.validator)))).collect();
    // Kept in the file with the state's list: the pages read which logs played a pair.
    let mut plays: Bag<'_, PlayKey, Play> = Bag::kept(&txn, cold, super::spill_layout::STATE_PLAYS);
    for entry in play_entries(folds.iter().copied()) {
        let (key, play) = entry?;
        plays.put(key, play)?;
    }

    // Pass 2, a pair at a time: disagreement with the majority of the other validators
    // still trusted. Each pair then waits, keyed by its place in the state, for vTrust.
    let mut compared: BTreeMap<ValidatorKey, (u64, u64)> = BTreeMap::new();
    let mut pairs: Bag<'_, PairOrder, NetworkMatch> = Bag::scratch(&txn, cold, PAIRS);
    let mut pair: Option<PairPlays> = None;
    plays.drain(&mut |(contender, champion, validator, match_id), play| {
        if pair.as_ref().is_some_and(|p| p.key != (contender.clone(), champion.clone())) {
            let done = pair.take().expect("checked above");
            let m = done.compare(&base, &mut compared, &mut discrepancies);
            pairs.put((m.first_started_ms, m.contender.hotkey.clone(), m.champion.hotkey.clone()), m)?;
        }
        let entry = pair.get_or_insert_with(|| PairPlays::new((contender, champion), &play));
        entry.add(&voters[&validator], match_id, play);
        Ok(())
    })?;
    if let Some(done) = pair.take() {
        let m = done.compare(&base, &mut compared, &mut discrepancies);
        pairs.put((m.first_started_ms, m.contender.hotkey.clone(), m.champion.hotkey.clone()), m)?;
    }
    let vtrust: BTreeMap<ValidatorKey, u32> = base
        .iter()
        .map(|(validator, &ppm)| {
            let (n, bad) = compared.get(validator).copied().unwrap_or((0, 0));
            (*validator, vtrust::after_disagreement(ppm, n, bad))
        })
        .collect();

    // In the state's order (earliest start first): verdicts, weighted by vTrust (a tie
    // keeps the champion: the incumbent is the older registration); and the champion:
    // the first match's champion, replaced by each contender the network says beat the
    // champion of the moment.
    let mut champion: Option<HeldMiner> = None;
    let mut history = Vec::new();
    let mut ratio = ratio_params.initial();
    let mut list = StateList { cold, txn: &txn, n: 0, batch: Vec::new() };
    // Champions that left the crown without a match (ledger-spec/13): more than half of
    // the trust said so during their tenure. A departed hotkey holds the crown again only
    // by winning it.
    let departures = Departures::of(folds.iter().map(|f| (identities.root(&f.validator), f.champion_left.as_slice())));
    let trusted_total: u64 = vtrust.values().map(|v| u64::from(*v)).sum();
    let mut departed: BTreeSet<Name> = BTreeSet::new();
    // When the tenure that began at `since_ms` ends by departure: read once per tenure,
    // not once per match (a log may name the champion thousands of times).
    let tenure_end = |champion: &HeldMiner, since_ms: u64| {
        departures.left_at(&champion.hotkey, since_ms, &|v| vtrust.get(v).copied().unwrap_or(0), trusted_total)
    };
    let mut leaves_at: Option<u64> = None;
    pairs.drain(&mut |_, mut m| {
        m.for_ppm = m.votes.iter().filter(|v| v.contender_won).map(|v| u64::from(vtrust[&*v.validator])).sum();
        m.against_ppm = m.votes.iter().filter(|v| !v.contender_won).map(|v| u64::from(vtrust[&*v.validator])).sum();
        m.verdict = match (m.votes.is_empty(), m.for_ppm > m.against_ppm) {
            (true, _) => None,
            (false, true) => Some(NetworkVerdict::ContenderWon),
            (false, false) => Some(NetworkVerdict::ChampionStays),
        };
        if leaves_at.is_some_and(|t| t <= m.first_started_ms) {
            departed.extend(champion.take().map(|c| c.hotkey));
            leaves_at = None;
        }
        if champion.is_none() && !departed.contains(&m.champion.hotkey) {
            champion = Some(m.champion.clone());
            leaves_at = tenure_end(&m.champion, m.first_started_ms);
            history.push(ChampionChange {
                champion: m.champion.clone(),
                by_match: None,
                at_time_ms: m.first_started_ms,
            });
        }
        let current = champion.as_ref().map(|c| c.hotkey.clone());
        if m.verdict == Some(NetworkVerdict::ContenderWon) && current.as_ref() == Some(&m.champion.hotkey) {
            let crowned = crowning(&m, |v| vtrust[v]);
            if let Some(set_ppm) = crowned.set_ppm {
                ratio = RatioToBeat { set_ppm, set_at_block: crowned.at_block };
            }
            let at_ms = crowned.at_ms;
            champion = Some(m.contender.clone());
            leaves_at = tenure_end(&m.contender, at_ms);
            departed.remove(&m.contender.hotkey);
            history.push(ChampionChange {
                champion: m.contender.clone(),
                by_match: Some((m.contender.hotkey.clone(), m.champion.hotkey.clone())),
                at_time_ms: at_ms,
            });
        }
        list.push(m)
    })?;
    // A champion that left after the last match holds nothing: no weights.
    if leaves_at.is_some() {
        champion = None;
    }
    let len = list.close()?;
    let (snapshot, combine) = cold.commit_combine(txn, &[PAIRS])?;
    let matches = NetworkMatches::stored(snapshot, len, combine);
    let weights = champion.as_ref().map(|c| vec![(c.uid, u16::MAX)]).unwrap_or_default();

    let validators = folds
        .iter()
        .map(|f| {
            let root = identities.root(&f.validator);
            let (n_compared, n_disagreements) = compared.get(&root).copied().unwrap_or((0, 0));
            let proofs = &proofs[&f.validator];
            ValidatorSummary {
                validator: f.validator,
                tip_height: f.tip.map(|t| t.height),
                tip_hash: f.tip.map(|t| t.hash),
                n_events: f.n_events,
                n_transcripts: f.n_transcripts,
                n_matches: f.matches.len() as u64,
                invalid_at: f.invalid_at,
                equivocated: equivocated.contains(&f.validator),
                n_false_reports: proofs.proofs(),
                proofs_by_kind: proofs.nonzero().filter(|(kind, _)| kind.is_proof()).collect(),
                n_compared,
                n_disagreements,
                vtrust_ppm: vtrust[&root],
            }
        })
        .collect();
    let Findings { kept: mut discrepancies, omitted, .. } = discrepancies;
    discrepancies.sort();
    Ok(NetworkState {
        validators,
        matches,
        champion,
        champion_history: history,
        ratio_set_ppm: ratio.set_ppm,
        ratio_set_at_block: ratio.set_at_block,
        weights,
        discrepancies,
        n_discrepancies_omitted: folds.iter().map(|f| f.n_discrepancies_omitted).sum::<u64>() + omitted,
    })
}

/// The state's findings: each fold's own (each keeps at most
/// `fold::MAX_CHAIN_DISCREPANCIES`), then, per validator, the first as many again of those
/// the combine finds (equivocations, ratio findings in log order, disagreements in pair
/// order), the rest counted. A log of a million false matches lists a thousand.
#[derive(Default)]
struct Findings {
    kept: Vec<Discrepancy>,
    found: BTreeMap<ValidatorKey, usize>,
    omitted: u64,
}

impl Findings {
    fn push(&mut self, found: Discrepancy) {
        let n = self.found.entry(found.validator).or_default();
        if *n < MAX_CHAIN_DISCREPANCIES {
            *n += 1;
            self.kept.push(found);
        } else {
            self.omitted += 1;
        }
    }
}

/// The combine's scratch table in the spill file.
const PAIRS: &str = "combine_pairs";

/// (contender, champion, validator, match id): a log's match, grouped by pair.
pub(super) type PlayKey = (Name, Name, ValidatorKey, MatchId);
/// (earliest start, contender, champion): a pair's place in the state.
type PairOrder = (u64, Name, Name);

/// What the combine reads of a log's match.
#[derive(Serialize, Deserialize)]
pub(super) struct Play {
    contender: HeldMiner,
    champion: HeldMiner,
    started_time_ms: u64,
    pub(super) chain_block: u64,
    /// (height, contender won, new ratio to beat, time).
    pub(super) decided: Option<(u64, bool, u32, u64)>,
}

/// Every match of `folds` as the combine keys its plays (also what the vTrust history
/// reads when the state's list is held).
pub(super) fn play_entries<'f>(
    folds: impl Iterator<Item = &'f ChainFold> + 'f,
) -> impl Iterator<Item = Result<(PlayKey, Play), SpillFileError>> + 'f {
    folds.flat_map(|fold| {
        fold.matches.iter().map(move |read| {
            let (id, m) = read?;
            Ok(((m.contender.hotkey.clone(), m.champion.hotkey.clone(), fold.validator, id), Play::of(&m)))
        })
    })
}

impl Play {
    pub(super) fn of(m: &MatchFold) -> Play {
        Play {
            contender: m.contender.clone(),
            champion: m.champion.clone(),
            started_time_ms: m.started_time_ms,
            chain_block: m.chain_block,
            // A match not played by the network's rules of its protocol version is a
            // finding (`fold`) and no vote: it counts as undecided here.
            decided: m
                .decided
                .as_ref()
                .filter(|_| m.network_rules)
                .map(|d| (d.height, d.contender_won, d.new_ratio_to_beat_ppm, d.time_ms)),
        }
    }
}

/// One pair's matches, as the combine gathers them.
struct PairPlays {
    key: (Name, Name),
    m: NetworkMatch,
    /// Where each validator's first match of the pair (in id order) was decided (0 if
    /// it was not): a disagreement's height; with that match's id.
    decided_at: BTreeMap<ValidatorKey, (MatchId, u64)>,
    /// The id of the match each validator's vote is from: its decided match of the pair
    /// with the greatest id, across its logs (ledger-spec/16).
    voted_with: BTreeMap<ValidatorKey, MatchId>,
}

impl PairPlays {
    fn new(key: (Name, Name), first: &Play) -> PairPlays {
        let m = NetworkMatch {
            contender: first.contender.clone(),
            champion: first.champion.clone(),
            first_started_ms: first.started_time_ms,
            votes: Vec::new(),
            for_ppm: 0,
            against_ppm: 0,
            verdict: None,
        };
        PairPlays { key, m, decided_at: BTreeMap::new(), voted_with: BTreeMap::new() }
    }

    /// Takes a play of `voter`'s (a validator's first key), in key order: each log's plays
    /// in id order, a validator's logs one after the other.
    fn add(&mut self, voter: &Arc<ValidatorKey>, match_id: MatchId, play: Play) {
        let first = self.decided_at.entry(**voter).or_insert((match_id, play.decided.map_or(0, |d| d.0)));
        if match_id < first.0 {
            *first = (match_id, play.decided.map_or(0, |d| d.0));
        }
        self.m.first_started_ms = self.m.first_started_ms.min(play.started_time_ms);
        if let Some((_, contender_won, new_ratio_to_beat_ppm, decided_time_ms)) = play.decided {
            // A validator that played the same pair twice counts once: its last word.
            if self.voted_with.get(&**voter).is_some_and(|id| *id > match_id) {
                return;
            }
            self.voted_with.insert(**voter, match_id);
            self.m.votes.retain(|v| v.validator != *voter);
            self.m.votes.push(Vote {
                validator: voter.clone(),
                contender_won,
                new_ratio_to_beat_ppm,
                decided_time_ms,
                chain_block: play.chain_block,
            });
        }
    }

    /// Counts each vote against the others of validators still trusted (`base`), and
    /// finds each that went against their majority; gives the pair's match.
    fn compare(
        mut self,
        base: &BTreeMap<ValidatorKey, u32>,
        compared: &mut BTreeMap<ValidatorKey, (u64, u64)>,
        discrepancies: &mut Findings,
    ) -> NetworkMatch {
        // In validator order (a successor's log sorts by its own key, its votes by the
        // first key); held for as long as the state is: at its size, not at a growing
        // vector's capacity (four votes' room for two validators' votes).
        self.m.votes.sort_by(|a, b| a.validator.cmp(&b.validator));
        self.m.votes.shrink_to_fit();
        let votes: Vec<(ValidatorKey, bool)> = self.m.votes.iter().map(|v| (*v.validator, v.contender_won)).collect();
        against_others(&votes, &|v| base[v] > 0, &mut |validator, contender_won, same, opposite| {
            let counts = compared.entry(*validator).or_default();
            counts.0 += 1;
            if opposite > same {
                counts.1 += 1;
                discrepancies.push(Discrepancy {
                    validator: *validator,
                    kind: DiscrepancyKind::Disagreement,
                    height: self.decided_at[validator].1,
                    event_idx: None,
                    detail: format!(
                        "match {} vs {}: said the contender {}, {opposite} of {} other validators said otherwise",
                        self.key.0,
                        self.key.1,
                        if contender_won { "won" } else { "did not win" },
                        same + opposite
                    ),
                });
            }
        });
        self.m
    }
}

/// For each of a pair's `votes` (validator, contender won) that validators still
/// `trusted` other than its own also cast: its validator and word, and how many of
/// theirs were the same and the opposite.
pub(super) fn against_others(
    votes: &[(ValidatorKey, bool)],
    trusted: &dyn Fn(&ValidatorKey) -> bool,
    each: &mut dyn FnMut(&ValidatorKey, bool, u64, u64),
) {
    for (validator, contender_won) in votes {
        let others = votes.iter().filter(|(other, _)| other != validator && trusted(other));
        let (same, opposite) =
            others.fold((0u64, 0u64), |(s, o), (_, won)| if won == contender_won { (s + 1, o) } else { (s, o + 1) });
        if same + opposite > 0 {
            each(validator, *contender_won, same, opposite);
        }
    }
}

/// The state's list of matches as the combine writes it to the file, in batches.
struct StateList<'t> {
    cold: &'t SpillFile,
    txn: &'t WriteTransaction,
    n: u64,
    batch: Vec<NetworkMatch>,
}

/// Matches the state's list buffers before it writes them.
const LIST_BATCH: usize = 256;

impl StateList<'_> {
    fn push(&mut self, m: NetworkMatch) -> Result<(), SpillFileError> {
        self.batch.push(m);
        if self.batch.len() >= LIST_BATCH {
            self.cold.append_state_matches(self.txn, self.n, &self.batch)?;
            self.n += self.batch.len() as u64;
            self.batch.clear();
        }
        Ok(())
    }

    /// Writes what is left; gives how many were written (the list is the transaction's,
    /// to be read once it is committed).
    fn close(self) -> Result<usize, SpillFileError> {
        self.cold.append_state_matches(self.txn, self.n, &self.batch)?;
        Ok(self.n as usize + self.batch.len())
    }
}

/// What [`combine`] gives for `folds` when it gave `previous` for the folds they grew
/// from, and folding changed nothing it reads but counts (each fold's
/// `combine_changes` unchanged): `previous`, with each validator's tip, events and
/// transcripts taken from `folds`. No match is read.
pub fn recount(previous: &NetworkState, folds: &[ChainFold]) -> NetworkState {
    let mut state = previous.clone();
    for summary in &mut state.validators {
        if let Some(fold) = folds.iter().find(|f| f.validator == summary.validator) {
            summary.tip_height = fold.tip.map(|t| t.height);
            summary.tip_hash = fold.tip.map(|t| t.hash);
            summary.n_events = fold.n_events;
            summary.n_transcripts = fold.n_transcripts;
        }
    }
    state
}

/// Each validator's vTrust as the logs stood at each of `blocks`: [`combine`] over every
/// log cut back to its matches started at or before the block, and its findings at or
/// before the last of them. This is the definition `vtrust_history::vtrust_history`
/// computes in one pass; it costs a combine per block (in a temporary file), and holds
/// the cut logs' matches.
pub fn vtrust_by_combines(
    folds: &[ChainFold],
    legacy: &RatioParams,
    blocks: &[u64],
) -> Result<Vec<vtrust::VtrustPoint>, SpillFileError> {
    let cold = SpillFile::temporary(CacheSize::AUDIT)?;
    blocks
        .iter()
        .map(|&block| {
            let cut: Vec<ChainFold> = folds.iter().map(|f| fold_at_block(f, block)).collect::<Result<_, _>>()?;
            let state = combine(&cut, legacy, &cold)?;
            Ok((block, state.validators.iter().map(|v| (v.validator, v.vtrust_ppm)).collect()))
        })
        .collect()
}

/// `fold` as it stood once its last match started at or before chain `block` was
/// decided: those matches, and the findings at or before that height.
fn fold_at_block(fold: &ChainFold, block: u64) -> Result<ChainFold, SpillFileError> {
    let mut matches = Vec::new();
    for read in fold.matches.iter() {
        let (id, m) = read?;
        if m.chain_block <= block {
            matches.push((id, m));
        }
    }
    // (The cut fold folds nothing more, so it needs no last match to share names with.)
    let height = matches.iter().map(|(_, m)| m.decided.as_ref().map_or(m.started_height, |d| d.height)).max();
    let n_decided = matches.iter().filter(|(_, m)| m.decided.is_some()).count() as u64;
    let matches: MatchTable = matches.into_iter().collect();
    let within = |h: u64| height.is_some_and(|cut| h <= cut);
    let mut equivocations = Vec::new();
    for found in fold.equivocations.iter() {
        let found = found?;
        if within(found.recorded_at.0) {
            equivocations.push(found);
        }
    }
    Ok(ChainFold {
        validator: fold.validator,
        tip: None,
        invalid_at: fold.invalid_at.filter(|h| within(*h)),
        awaiting_upgrade: fold.awaiting_upgrade.filter(|(h, _)| within(*h)),
        chain_block_seen: 0,
        n_events: 0,
        n_transcripts: 0,
        n_bytes: 0,
        n_decided,
        combine_changes: 0,
        matches,
        last_started: None,
        discrepancies: fold.discrepancies.iter().filter(|d| within(d.height)).cloned().collect(),
        // Past the first omitted finding the kept ones already number the most a fold
        // keeps: vTrust is zero there with any count, so the whole count stands in.
        n_discrepancies_omitted: if fold.first_omitted_height.is_some_and(within) {
            fold.n_discrepancies_omitted
        } else {
            0
        },
        first_omitted_height: fold.first_omitted_height.filter(|h| within(*h)),
        findings: findings_within(fold, &within),
        equivocations: equivocations.into(),
        commitments: Default::default(),
        last_weights: None,
        skipped: Default::default(),
        checkpoints: Default::default(),
        succeeds: fold.succeeds,
        rotated: fold.rotated.filter(|r| r.chain_block <= block),
        champion_left: fold.champion_left.iter().filter(|l| l.chain_block <= block).cloned().collect(),
    })
}

/// `fold`'s finding counts at or before a cut: its listed findings there, and, once the
/// cut is past its first unlisted one, each kind's unlisted ones too.
fn findings_within(fold: &ChainFold, within: &dyn Fn(u64) -> bool) -> FindingCounts {
    let mut listed = FindingCounts::default();
    for d in &fold.discrepancies {
        listed.add(d.kind, 1);
    }
    let mut counts = FindingCounts::default();
    for d in fold.discrepancies.iter().filter(|d| within(d.height)) {
        counts.add(d.kind, 1);
    }
    if fold.first_omitted_height.is_some_and(within) {
        for (kind, n) in fold.findings.nonzero() {
            counts.add(kind, n.saturating_sub(listed.get(kind)));
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    use crate::replay::records::tests_support::played;

    /// A log whose every match is played at a ratio no win set, and sets one its win
    /// rates do not give: two findings a match, each counted, a thousand listed.
    #[test]
    fn a_log_of_false_ratios_lists_a_thousand_findings_and_counts_every_one() {
        let mut fold = ChainFold::new(ValidatorKey([9; 32]));
        for i in 0..1_500u64 {
            fold.matches.insert(Hash32(*blake3::hash(&i.to_le_bytes()).as_bytes()), played(i));
        }
        let mut n = 0u64;
        each_ratio_finding(&fold, &DEFAULT_RATIO_PARAMS, &mut |_| n += 1).unwrap();
        assert!(n > 1_500, "{n} findings");
        let cold = SpillFile::temporary(CacheSize::AUDIT).unwrap();
        let state = combine(std::slice::from_ref(&fold), &DEFAULT_RATIO_PARAMS, &cold).unwrap();
        assert_eq!(state.discrepancies.len(), MAX_CHAIN_DISCREPANCIES);
        assert_eq!(state.n_discrepancies_omitted, n - MAX_CHAIN_DISCREPANCIES as u64);
        assert_eq!(state.validators[0].n_false_reports, n);
        assert_eq!(state.validators[0].vtrust_ppm, 0);
    }
}
