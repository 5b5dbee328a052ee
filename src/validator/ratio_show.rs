//! `af ratio show`: the ratio a contender must beat now, derived from a validator's own
//! log alone (never this machine's settings), so every reader of one log says the same.

use super::state::ValidatorState;
use crate::bytes::MatchId;
use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use serde::Serialize;

/// The ratio to beat and where each of its inputs came from.
#[derive(Clone, Debug, Serialize)]
pub struct RatioShow {
    pub current_ppm: u32,
    pub current: f64,
    pub set_ppm: u32,
    pub set_at_block: u64,
    pub set_by_match: Option<MatchId>,
    pub floor_ppm: u32,
    pub half_life_blocks: u64,
    pub now_block: u64,
    /// "chain" (the head read now) or "log" (the newest chain block the log names).
    pub now_block_from: &'static str,
    /// "log" (the plan the log records) or "network" (ledger-spec/02, no match yet).
    pub plan_from: &'static str,
    pub plan: Option<String>,
    pub champion: Option<String>,
    pub matches_decided: u64,
}

impl RatioShow {
    /// The ratio of the log folded to `loaded`, decayed to `chain_head` where the chain
    /// was read, else to the newest chain block the log names (what the validator itself
    /// last saw). The decay is the plan's the log records, else the network's.
    pub fn of(mut loaded: ValidatorState, chain_head: Option<u64>) -> RatioShow {
        let legacy = DEFAULT_RATIO_PARAMS;
        let (params, plan_from) = match loaded.logged_ratio_params(&legacy) {
            Some((params, ratio)) => {
                loaded.ratio = ratio;
                (params, "log")
            }
            None => (legacy, "network"),
        };
        let (now_block, now_block_from) = match chain_head {
            Some(head) => (head, "chain"),
            None => (loaded.latest_chain_block, "log"),
        };
        let current_ppm = params.current_ppm(&loaded.ratio, now_block);
        RatioShow {
            current_ppm,
            current: f64::from(current_ppm) / 1e6,
            set_ppm: loaded.ratio.set_ppm,
            set_at_block: loaded.ratio.set_at_block,
            set_by_match: loaded.ratio_set_by,
            floor_ppm: params.floor_ppm(),
            half_life_blocks: params.half_life_blocks,
            now_block,
            now_block_from,
            plan_from,
            plan: loaded.ratio_plan.clone().or(loaded.newest_plan.clone()),
            champion: loaded.champion.map(|c| c.hotkey.to_string()),
            matches_decided: loaded.n_decided,
        }
    }

    /// The ratio in words.
    pub fn lines(&self) -> Vec<String> {
        let ratio = |ppm: u32| format!("{:.4}", f64::from(ppm) / 1e6);
        let set = match self.set_by_match {
            Some(id) => {
                format!("set to        {} at chain block {} by match {id}", ratio(self.set_ppm), self.set_at_block)
            }
            None => format!("set to        {} (initial: no contender has won yet)", ratio(self.set_ppm)),
        };
        let now = match self.now_block_from {
            "chain" => format!("now chain block {}, the chain's head", self.now_block),
            _ if self.now_block == 0 => "no chain block in the log: a validator without a chain never decays".into(),
            _ => format!("now chain block {}, the newest the log names; --chain reads the head", self.now_block),
        };
        let plan = match self.plan_from {
            "log" => "the plan the log records",
            _ => "no match in the log: the network's plan (ledger-spec/02)",
        };
        vec![
            format!("ratio to beat  {}", ratio(self.current_ppm)),
            set,
            format!(
                "decay          toward {}, half-life {} chain blocks ({now}; {plan})",
                ratio(self.floor_ppm),
                self.half_life_blocks
            ),
            format!("champion       {}", self.champion.as_deref().unwrap_or("(none yet)")),
        ]
    }
}
