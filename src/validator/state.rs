//! What our own log says, as a pure fold over its events: the champion, the ratio to
//! beat and when it was set, the matches decided, and the match left open by a stop
//! (with every recorded challenge pair), so a restarted validator resumes from the
//! ledger rather than from memory.
//!
//! Chain time is the chain blocks the log names (ledger-spec/06): the ratio is dated by
//! its winning match's start block and read at the newest block the log names.

use super::discovery::{identity_recorded, PlayedModels, SkipsRecorded};
use crate::bytes::MatchId;
use crate::chain::miner::ModelIdentity;
use crate::evaluation::matchplay::GameOutcome;
use crate::evaluation::ratio::{RatioParams, RatioToBeat};
use crate::ledger::event::{
    ChainCommitment, EnvDecision, EnvOutcome, MatchDecided, MatchStarted, MinerRef, WeightsSet,
};
use crate::ledger::{Event, Store, StoreError, ValidatorKey};
use crate::replay::spill_file::SpillFile;
use crate::replay::spilled_key_set::KeySet;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// How many of the last chain records (commitments, weights) the state keeps.
pub const RECENT_ANCHORS: usize = 10;

/// Rewards recorded for one challenge: (contender, champion).
pub type PairRewards = (Option<i32>, Option<i32>);

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpenMatch {
    pub started: MatchStarted,
    /// (env name, challenge index) -> rewards recorded so far.
    pub pairs: BTreeMap<(String, u64), PairRewards>,
    pub env_decisions: Vec<EnvDecision>,
}

/// One env of the open match so far: the contender's wins, losses and draws over the
/// complete pairs recorded, in schedule order up to the first gap, and the env's
/// decision once recorded (whose own tally then stands).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EnvSoFar {
    pub env: String,
    pub wins: u32,
    pub losses: u32,
    pub draws: u32,
    pub n_challenges: u64,
    pub decision: Option<EnvOutcome>,
}

impl OpenMatch {
    pub fn tallies(&self) -> Vec<EnvSoFar> {
        self.started
            .envs
            .iter()
            .map(|env| {
                if let Some(d) = self.env_decisions.iter().find(|d| d.env.name == env.name) {
                    return EnvSoFar {
                        env: env.name.clone(),
                        wins: d.wins,
                        losses: d.losses,
                        draws: d.draws,
                        n_challenges: d.n_challenges,
                        decision: Some(d.outcome),
                    };
                }
                let mut tally =
                    EnvSoFar { env: env.name.clone(), wins: 0, losses: 0, draws: 0, n_challenges: 0, decision: None };
                for index in 0u64.. {
                    let Some((Some(contender), Some(champion))) = self.pairs.get(&(env.name.clone(), index)) else {
                        break;
                    };
                    match GameOutcome::of_rewards(*contender, *champion) {
                        GameOutcome::Win => tally.wins += 1,
                        GameOutcome::Loss => tally.losses += 1,
                        GameOutcome::Draw => tally.draws += 1,
                    }
                    tally.n_challenges += 1;
                }
                tally
            })
            .collect()
    }
}

/// A chain record of our own log, with the time of the block that holds it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Anchor {
    Commitment { block_time_ms: u64, height: u64, record: ChainCommitment },
    Weights { block_time_ms: u64, height: u64, record: WeightsSet },
    WeightsCommitted { block_time_ms: u64, height: u64, record: crate::ledger::event::WeightsCommitted },
}

/// What our log says played, and the skips it recorded: each only grows, by a key or two
/// a match, so a validator keeps them in its spill file past a few hundred
/// (`replay::spilled_key_set`); a one-shot reader keeps them in memory.
#[derive(Debug, Default)]
pub struct Played {
    /// Hotkeys that have played a match as contender.
    contenders: KeySet,
    /// (hotkey, recorded model) of every miner that has played a match, either side: a
    /// miner from the chain plays each model and revision once (ledger-spec/13).
    models: KeySet,
    /// (hotkey, commitment block) of every `MinerSkipped` in our log: each skip of a
    /// commitment is recorded once.
    skips: KeySet,
}

/// `hotkey` then `rest`, unambiguously: the hotkey's length first.
fn key(hotkey: &str, rest: &[u8]) -> Vec<u8> {
    let mut key = (hotkey.len() as u64).to_be_bytes().to_vec();
    key.extend_from_slice(hotkey.as_bytes());
    key.extend_from_slice(rest);
    key
}

impl Played {
    /// Sets whose keys go to `spill_file`'s file past its cache size each (`CacheSize::keys_per_set`).
    pub fn spilling_to(cold: Arc<SpillFile>) -> Played {
        Played {
            contenders: KeySet::spilling_to(cold.clone()),
            models: KeySet::spilling_to(cold.clone()),
            skips: KeySet::spilling_to(cold),
        }
    }

    pub fn add_match(&mut self, contender: &MinerRef, champion: &MinerRef) {
        self.contenders.insert(contender.hotkey.as_bytes());
        self.models.insert(&key(&contender.hotkey, contender.model.as_bytes()));
        self.models.insert(&key(&champion.hotkey, champion.model.as_bytes()));
    }

    /// Whether `hotkey` has played a match as contender.
    pub fn contender(&self, hotkey: &str) -> bool {
        self.contenders.contains(hotkey.as_bytes())
    }

    /// Whether `hotkey` has played a match with the recorded model `model`.
    pub fn model(&self, hotkey: &str, model: &str) -> bool {
        self.models.contains(&key(hotkey, model.as_bytes()))
    }

    /// Keys held in memory, of all three sets.
    pub fn held_in_memory(&self) -> usize {
        self.contenders.held_in_memory() + self.models.held_in_memory() + self.skips.held_in_memory()
    }
}

impl PlayedModels for Played {
    fn played(&self, hotkey: &str, identity: &ModelIdentity) -> bool {
        identity_recorded(identity).is_some_and(|model| self.model(hotkey, &model))
    }
}

impl SkipsRecorded for Played {
    fn record(&mut self, hotkey: &str, commit_block: u64) -> bool {
        self.skips.insert(&key(hotkey, &commit_block.to_be_bytes()))
    }
}

#[derive(Debug)]
pub struct ValidatorState {
    pub champion: Option<MinerRef>,
    pub ratio: RatioToBeat,
    pub ratio_set_by: Option<MatchId>,
    /// Matches our log holds decided, and the last of them: a count, not a list, so a
    /// state kept for weeks (the node's own state) does not grow with the matches.
    pub n_decided: u64,
    /// Of those, the ones the current log holds (after a key rotation, the new log's
    /// alone): a new match's id derives from this count (ledger-spec/06).
    pub log_decided: u64,
    pub last_decided: Option<MatchDecided>,
    pub open: Option<OpenMatch>,
    /// Whether `open` was started by a log this one succeeds (ledger-spec/16): it is not
    /// this log's to continue, so the validator starts it again under its new key.
    pub open_from_predecessor: bool,
    /// Who played and what was skipped: sets that grow with the log.
    pub played: Played,
    pub n_events: u64,
    /// The last `RECENT_ANCHORS` commitments and weights, oldest first.
    pub recent_anchors: VecDeque<Anchor>,
    /// The next height of our chain to fold (the chain's size so far).
    pub next_height: u64,
    /// The newest chain block any event of the log names (0 if none): "now" in chain
    /// time for a reader without a chain of its own.
    pub latest_chain_block: u64,
    /// The plan (a match's rule text) the ratio to beat was set under, and the newest
    /// plan the log records: where a reader takes the ratio's decay from, never its own
    /// configuration ([`ValidatorState::logged_ratio_params`]).
    pub ratio_plan: Option<String>,
    pub newest_plan: Option<String>,
}

impl ValidatorState {
    fn remember(&mut self, anchor: Anchor) {
        if self.recent_anchors.len() == RECENT_ANCHORS {
            self.recent_anchors.pop_front();
        }
        self.recent_anchors.push_back(anchor);
    }

    /// [`Self::new`], with its sets of who played kept in the replay's spill file past a few
    /// hundred keys when there is one (a validator's: its run and its HTTP server).
    pub fn spilling_to(params: &RatioParams, cold: Option<Arc<SpillFile>>) -> ValidatorState {
        let mut state = ValidatorState::new(params);
        if let Some(cold) = cold {
            state.played = Played::spilling_to(cold);
        }
        state
    }

    /// The state of a validator that follows the network (a node's pages: what such a
    /// validator would queue): the network's champion, and every miner model that played
    /// a match in any log as played.
    pub fn following(
        network: &crate::replay::combine::NetworkState,
        params: &RatioParams,
    ) -> Result<ValidatorState, crate::replay::spill_file::SpillFileError> {
        let mut state = ValidatorState::new(params);
        state.champion = network.champion.as_ref().map(|c| c.to_owned_strings());
        for m in network.matches.iter() {
            let m = m?;
            state.played.add_match(&m.contender.to_owned_strings(), &m.champion.to_owned_strings());
        }
        Ok(state)
    }

    pub fn new(params: &RatioParams) -> ValidatorState {
        ValidatorState {
            champion: None,
            ratio: params.initial(),
            ratio_set_by: None,
            n_decided: 0,
            log_decided: 0,
            open_from_predecessor: false,
            last_decided: None,
            open: None,
            played: Played::default(),
            n_events: 0,
            recent_anchors: VecDeque::new(),
            next_height: 0,
            latest_chain_block: 0,
            ratio_plan: None,
            newest_plan: None,
        }
    }

    /// The ratio to beat now (at the newest chain block the log names), decayed by the
    /// plan the log records ([`Self::logged_ratio_params`]), by `legacy` with none.
    pub fn ratio_now(&self, legacy: &RatioParams) -> u32 {
        let (params, ratio) = self.logged_ratio_params(legacy).unwrap_or((*legacy, self.ratio));
        params.current_ppm(&ratio, self.latest_chain_block)
    }

    /// The ratio parameters as the log records them: those of the plan the ratio was set
    /// under, else of the newest plan (a log whose contenders never won), with the ratio
    /// then the initial one of that plan; `None` for a log that records no match. A plan
    /// with no ratio parameters of its own (an older `mixture` plan) takes `legacy`'s.
    pub fn logged_ratio_params(&self, legacy: &RatioParams) -> Option<(RatioParams, RatioToBeat)> {
        let plan = self.ratio_plan.as_ref().or(self.newest_plan.as_ref())?;
        let params = crate::replay::combine::plan_ratio_params(plan, legacy);
        let ratio = if self.ratio_plan.is_some() { self.ratio } else { params.initial() };
        Some((params, ratio))
    }

    /// Folds one event of our log, recorded in block `height` sealed at `time_ms`.
    pub fn apply(&mut self, height: u64, time_ms: u64, event: &Event) {
        self.n_events += 1;
        if let Some(block) = event.chain_block() {
            self.latest_chain_block = self.latest_chain_block.max(block);
        }
        match event {
            Event::MatchStarted(started) => {
                if self.champion.is_none() {
                    self.champion = Some(started.champion.clone());
                }
                self.played.add_match(&started.contender, &started.champion);
                self.newest_plan = Some(started.rule.clone());
                self.open_from_predecessor = false;
                self.open =
                    Some(OpenMatch { started: started.clone(), pairs: BTreeMap::new(), env_decisions: Vec::new() });
            }
            Event::Transcript(t) | Event::TranscriptCut(crate::ledger::event::TranscriptCut { transcript: t, .. }) => {
                let Some(open) = self.open.as_mut().filter(|o| o.started.match_id == t.match_id) else { return };
                let slot = open.pairs.entry((t.env.name.clone(), t.challenge_index)).or_default();
                if t.miner.hotkey == open.started.contender.hotkey {
                    slot.0 = Some(t.reward_milli);
                } else if t.miner.hotkey == open.started.champion.hotkey {
                    slot.1 = Some(t.reward_milli);
                }
            }
            Event::EnvDecision(decision) => {
                if let Some(open) = self.open.as_mut().filter(|o| o.started.match_id == decision.match_id) {
                    open.env_decisions.push(decision.clone());
                }
            }
            Event::MatchDecided(decided) => {
                let open = self.open.take_if(|o| o.started.match_id == decided.match_id);
                if decided.contender_won {
                    // Dated by the match's start block: the chain time the log proves.
                    let set_at_block = open.as_ref().map_or(0, |o| o.started.chain_block);
                    if let Some(open) = open {
                        self.ratio_plan = Some(open.started.rule);
                        self.champion = Some(open.started.contender);
                    }
                    self.ratio = RatioToBeat { set_ppm: decided.new_ratio_to_beat_ppm, set_at_block };
                    self.ratio_set_by = Some(decided.match_id);
                }
                self.n_decided += 1;
                self.log_decided += 1;
                self.last_decided = Some(decided.clone());
            }
            Event::WeightsSet(record) => {
                self.remember(Anchor::Weights { block_time_ms: time_ms, height, record: record.clone() })
            }
            Event::WeightsCommitted(record) => {
                self.remember(Anchor::WeightsCommitted { block_time_ms: time_ms, height, record: record.clone() })
            }
            Event::ChainCommitment(record) => {
                self.remember(Anchor::Commitment { block_time_ms: time_ms, height, record: record.clone() })
            }
            // The champion left without a match: the queue's first miner holds the crown
            // until a match says otherwise (ledger-spec/13).
            Event::ChampionLeft(left) => {
                if self.champion.as_ref().is_some_and(|c| c.hotkey == left.champion.hotkey) {
                    self.champion = None;
                }
            }
            Event::MinerSkipped(skipped) => {
                self.played.record(&skipped.hotkey, skipped.commit_block);
            }
            // A rotation moves the log, not the state: a successor's state is folded
            // from its predecessors' logs first (`own_state`).
            Event::Evidence(_) | Event::FoldCheckpoint(_) | Event::KeyRotated(_) | Event::KeySucceeded(_) => {}
        }
    }
}

/// Why the validator whose data directory it is could not be folded.
#[derive(Debug, thiserror::Error)]
pub enum OwnStateError {
    #[error(transparent)]
    Key(#[from] crate::ledger::keys::KeyError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The validator whose data directory `dir` is, and its own log folded from `store` (its
/// champion and what it played); `None` when `dir` has no ledger key.
pub fn own_state(
    dir: &std::path::Path,
    store: &Store,
) -> Result<Option<(ValidatorKey, ValidatorState)>, OwnStateError> {
    let key_path = dir.join(crate::ledger::keys::KEY_FILE);
    if !key_path.exists() {
        return Ok(None);
    }
    let validator = crate::ledger::LedgerKey::load(&key_path)?.validator();
    let state = load(store, &validator, &crate::evaluation::ratio::DEFAULT_RATIO_PARAMS)?;
    Ok(Some((validator, state)))
}

/// Folds our whole chain from the store.
pub fn load(store: &Store, validator: &ValidatorKey, params: &RatioParams) -> Result<ValidatorState, StoreError> {
    load_into(ValidatorState::new(params), store, validator)
}

/// Folds our whole chain from the store onto `state` (a new one, such as one whose sets
/// spill: [`Played::spilling_to`]).
pub fn load_into(
    mut state: ValidatorState,
    store: &Store,
    validator: &ValidatorKey,
) -> Result<ValidatorState, StoreError> {
    // A log that succeeds others by key rotation (ledger-spec/16) continues their state:
    // the champion, the ratio and who played, folded oldest log first.
    let mut before = Vec::new();
    let mut at = *validator;
    while let Some(previous) = store.predecessor(&at)? {
        if before.contains(&previous) || before.len() >= MAX_PREDECESSORS {
            break;
        }
        before.push(previous);
        at = previous;
    }
    for previous in before.iter().rev() {
        state.next_height = 0;
        fold_new_blocks(&mut state, store, previous)?;
    }
    if !before.is_empty() {
        state.next_height = 0;
        state.log_decided = 0;
        state.open_from_predecessor = state.open.is_some();
    }
    fold_new_blocks(&mut state, store, validator)?;
    Ok(state)
}

/// Most rotations a validator's own state is folded back through.
const MAX_PREDECESSORS: usize = 64;

/// Folds the blocks of our chain appended since `state` was last folded: a running
/// node keeps one state and pays only for what is new.
pub fn fold_new_blocks(state: &mut ValidatorState, store: &Store, validator: &ValidatorKey) -> Result<(), StoreError> {
    let Some(tip) = store.tip(validator)? else { return Ok(()) };
    for height in state.next_height..=tip.height {
        let block = store
            .block(validator, height)?
            .ok_or_else(|| StoreError::Corrupt(format!("block {height} below the tip is missing")))?;
        for event in &block.block.events {
            state.apply(height, block.block.header.time_ms, event);
        }
        state.next_height = height + 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;
    use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    use crate::ledger::event::EnvRef;

    fn miner(hotkey: &str, uid: u16) -> MinerRef {
        MinerRef { hotkey: hotkey.into(), uid, model: format!("m/{hotkey}@1") }
    }

    fn started(id: u8, chain_block: u64) -> Event {
        Event::MatchStarted(MatchStarted {
            match_id: Hash32([id; 32]),
            contender: miner("5New", 2),
            champion: miner("5Old", 1),
            envs: vec![EnvRef { name: "mult".into(), version: 1 }],
            rule: "r".into(),
            ratio_to_beat_ppm: 510_000,
            chain_block,
            chain_block_hash: Hash32([7; 32]),
        })
    }

    fn decided(id: u8, contender_won: bool) -> Event {
        Event::MatchDecided(MatchDecided {
            match_id: Hash32([id; 32]),
            contender_won,
            champion_hotkey: if contender_won { "5New" } else { "5Old" }.into(),
            win_rates: Vec::new(),
            new_ratio_to_beat_ppm: 800_000,
        })
    }

    #[test]
    fn the_ratio_is_dated_by_its_match_start_block_and_read_at_the_newest_block_named() {
        let params = DEFAULT_RATIO_PARAMS;
        let mut state = ValidatorState::new(&params);
        // Block times far from any chain block: nothing may be estimated from them.
        state.apply(0, 1_790_000_000_000, &started(1, 5_000));
        assert_eq!(state.latest_chain_block, 5_000);
        state.apply(1, 1_790_000_900_000, &decided(1, true));
        assert_eq!(state.ratio, RatioToBeat { set_ppm: 800_000, set_at_block: 5_000 });
        assert_eq!(params.current_ppm(&state.ratio, state.latest_chain_block), 800_000);
        // A weights call one half-life later moves "now": the excess over the floor halves.
        state.apply(
            2,
            1_790_000_000_000,
            &Event::WeightsSet(WeightsSet {
                netuid: 1,
                uids: vec![2],
                weights: vec![65_535],
                version_key: 0,
                chain_block: 5_000 + params.half_life_blocks,
            }),
        );
        assert_eq!(state.latest_chain_block, 5_000 + params.half_life_blocks);
        let floor = params.floor_ppm();
        assert_eq!(params.current_ppm(&state.ratio, state.latest_chain_block), floor + (800_000 - floor) / 2);
        // A lost match keeps the ratio and its date; an older block never moves "now" back.
        state.apply(3, 0, &started(2, 6_000));
        state.apply(4, 0, &decided(2, false));
        assert_eq!(state.ratio.set_at_block, 5_000);
        assert_eq!(state.latest_chain_block, 5_000 + params.half_life_blocks);
    }

    /// Who played, kept past its cache size in a spill file, answers as the set in memory
    /// does, for hotkeys, recorded models, model identities and skips, and holds few keys.
    #[test]
    fn who_played_answers_the_same_from_the_match_file() {
        use crate::replay::spill_file::CacheSize;
        let dir = tempfile::tempdir().unwrap();
        let cold = Arc::new(SpillFile::create(&dir.path().join("cold.redb"), CacheSize::VALIDATOR).unwrap());
        let (mut spilling, mut held) = (Played::spilling_to(cold), Played::default());
        let miner = |i: u32| MinerRef { hotkey: format!("5M{i}"), uid: 0, model: format!("org/m{i}@rev{}", i % 3) };
        for i in 0..600 {
            spilling.add_match(&miner(i), &miner(0));
            held.add_match(&miner(i), &miner(0));
            assert_eq!(spilling.record(&format!("5S{}", i % 400), 7), held.record(&format!("5S{}", i % 400), 7));
            assert!(spilling.held_in_memory() <= 3 * CacheSize::VALIDATOR.keys_per_set);
        }
        for i in 0..700 {
            let m = miner(i);
            assert_eq!(spilling.contender(&m.hotkey), i < 600);
            assert_eq!(held.contender(&m.hotkey), i < 600);
            assert_eq!(spilling.model(&m.hotkey, &m.model), i < 600);
            assert!(!spilling.model(&m.hotkey, "org/other@rev0"));
            let identity = ModelIdentity { model: format!("org/m{i}"), revision: format!("rev{}", i % 3) };
            assert_eq!(spilling.played(&m.hotkey, &identity), i < 600);
            assert_eq!(held.played(&m.hotkey, &identity), i < 600);
        }
        assert!(!spilling.record("5S3", 7) && spilling.record("5S3", 8));
        // A revision holding '@' was never recorded as itself: it never played.
        let odd = ModelIdentity { model: "org/m1".into(), revision: "a@b".into() };
        assert!(!held.played("5M1", &odd));
    }
}
