//! What our own log says, as a pure fold over its events: the champion, the ratio to
//! beat and when it was set, the matches decided, and the match left open by a stop
//! (with every recorded challenge pair), so a restarted validator resumes from the
//! ledger rather than from memory.
//!
//! Chain blocks are not known here yet: a block's time is turned into a nominal chain
//! block of 12 s (`time_ms / 12_000`) for the ratio's decay.

use crate::bytes::MatchId;
use crate::evaluation::ratio::{RatioParams, RatioToBeat};
use crate::ledger::event::{EnvDecision, MatchDecided, MatchStarted, MinerRef};
use crate::ledger::{Event, Store, StoreError, ValidatorKey};
use serde::Serialize;
use std::collections::BTreeMap;

pub const NOMINAL_BLOCK_MS: u64 = 12_000;

pub fn nominal_chain_block(time_ms: u64) -> u64 {
    time_ms / NOMINAL_BLOCK_MS
}

/// Rewards recorded for one challenge: (contender, champion).
pub type PairRewards = (Option<i32>, Option<i32>);

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpenMatch {
    pub started: MatchStarted,
    /// (env name, challenge index) -> rewards recorded so far.
    pub pairs: BTreeMap<(String, u64), PairRewards>,
    pub env_decisions: Vec<EnvDecision>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValidatorState {
    pub champion: Option<MinerRef>,
    pub ratio: RatioToBeat,
    pub ratio_set_by: Option<MatchId>,
    pub decided: Vec<MatchDecided>,
    pub open: Option<OpenMatch>,
    /// Hotkeys that have played a match as contender.
    pub played_contenders: std::collections::BTreeSet<String>,
    pub n_events: u64,
}

impl ValidatorState {
    pub fn new(params: &RatioParams) -> ValidatorState {
        ValidatorState {
            champion: None,
            ratio: params.initial(),
            ratio_set_by: None,
            decided: Vec::new(),
            open: None,
            played_contenders: Default::default(),
            n_events: 0,
        }
    }

    /// Folds one event of our log, recorded in a block sealed at `time_ms`.
    pub fn apply(&mut self, time_ms: u64, event: &Event) {
        self.n_events += 1;
        match event {
            Event::MatchStarted(started) => {
                if self.champion.is_none() {
                    self.champion = Some(started.champion.clone());
                }
                self.played_contenders.insert(started.contender.hotkey.clone());
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
                    if let Some(open) = open {
                        self.champion = Some(open.started.contender);
                    }
                    self.ratio = RatioToBeat {
                        set_ppm: decided.new_ratio_to_beat_ppm,
                        set_at_block: nominal_chain_block(time_ms),
                    };
                    self.ratio_set_by = Some(decided.match_id);
                }
                self.decided.push(decided.clone());
            }
            Event::WeightsSet(_) | Event::ChainCommitment(_) | Event::Evidence(_) => {}
        }
    }
}

/// Folds our whole chain from the store.
pub fn load(store: &Store, validator: &ValidatorKey, params: &RatioParams) -> Result<ValidatorState, StoreError> {
    let mut state = ValidatorState::new(params);
    let Some(tip) = store.tip(validator)? else { return Ok(state) };
    for height in 0..=tip.height {
        let block = store
            .block(validator, height)?
            .ok_or_else(|| StoreError::Corrupt(format!("block {height} below the tip is missing")))?;
        for event in &block.block.events {
            state.apply(block.block.header.time_ms, event);
        }
    }
    Ok(state)
}
