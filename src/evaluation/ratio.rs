//! The ratio to beat: the win rate a contender must show against the champion. It
//! starts at 1/2 + epsilon; a contender that wins sets it to the geometric mean of its
//! per-environment win rates; it then decays exponentially back toward 1/2 + epsilon
//! with a half-life in chain blocks, so a strong champion cannot freeze the frontier.
//!
//! Blocks are the chain's own block numbers, as the log records them: a winner's ratio
//! is dated by the chain block its match started at (`MatchStarted.chain_block`, whose
//! hash the audit checks on chain), and it is read at the chain block of the next
//! match's start. A validator without a chain records block 0, so its ratio never decays.
//!
//! Values are stored in parts per million (the ledger's unit) and computed with `libm`,
//! so every replica derives the same number.

use serde::Serialize;

/// Highest ratio ever required. A champion that won every game would otherwise set a
/// bar of 1.0, which no contender can pass.
pub const RATIO_MAX_PPM: u32 = 950_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RatioParams {
    /// epsilon in ppm: the floor is 500_000 + epsilon.
    pub epsilon_ppm: u32,
    /// Blocks for the excess over the floor to halve.
    pub half_life_blocks: u64,
}

pub const DEFAULT_RATIO_PARAMS: RatioParams = RatioParams { epsilon_ppm: 10_000, half_life_blocks: 7_200 };

/// The ratio as set by the last winning match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RatioToBeat {
    pub set_ppm: u32,
    /// Chain block at which it was set: the winning match's start block.
    pub set_at_block: u64,
}

impl RatioParams {
    pub fn floor_ppm(&self) -> u32 {
        500_000 + self.epsilon_ppm
    }

    /// The starting ratio, before any contender has won.
    pub fn initial(&self) -> RatioToBeat {
        RatioToBeat { set_ppm: self.floor_ppm(), set_at_block: 0 }
    }

    /// The ratio in force at `block`: floor + (set - floor) * 2^(-elapsed / half_life).
    pub fn current_ppm(&self, ratio: &RatioToBeat, block: u64) -> u32 {
        let floor = f64::from(self.floor_ppm());
        let excess = f64::from(ratio.set_ppm) - floor;
        if excess <= 0.0 || self.half_life_blocks == 0 {
            return self.floor_ppm();
        }
        let elapsed = block.saturating_sub(ratio.set_at_block) as f64;
        let decayed = floor + excess * libm::exp2(-elapsed / self.half_life_blocks as f64);
        libm::round(decayed) as u32
    }

    /// The ratio a winner sets: the geometric mean of its per-environment win rates
    /// (ppm), clamped to [floor, `RATIO_MAX_PPM`]. A zero win rate counts as 1 ppm.
    pub fn after_win(&self, win_rates_ppm: &[u32], block: u64) -> RatioToBeat {
        assert!(!win_rates_ppm.is_empty(), "a match has at least one environment");
        let mean_ln = win_rates_ppm.iter().map(|&r| libm::log(f64::from(r.max(1)) / 1e6)).sum::<f64>()
            / win_rates_ppm.len() as f64;
        let geometric = libm::round(libm::exp(mean_ln) * 1e6) as u32;
        RatioToBeat { set_ppm: geometric.clamp(self.floor_ppm(), RATIO_MAX_PPM), set_at_block: block }
    }
}

/// A win rate in ppm from decisive games (draws do not count); 0 games is 1/2.
pub fn win_rate_ppm(wins: u32, losses: u32) -> u32 {
    let decisive = u64::from(wins) + u64::from(losses);
    if decisive == 0 {
        return 500_000;
    }
    ((u64::from(wins) * 1_000_000 + decisive / 2) / decisive) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decays_by_half_each_half_life_toward_the_floor() {
        let params = DEFAULT_RATIO_PARAMS;
        let ratio = RatioToBeat { set_ppm: 710_000, set_at_block: 1_000 };
        assert_eq!(params.current_ppm(&ratio, 1_000), 710_000);
        assert_eq!(params.current_ppm(&ratio, 1_000 + 7_200), 610_000);
        assert_eq!(params.current_ppm(&ratio, 1_000 + 14_400), 560_000);
        assert!(params.current_ppm(&ratio, 10_000_000) - params.floor_ppm() <= 1);
        // Before it was set (a replayed clock behind), it is simply the set value.
        assert_eq!(params.current_ppm(&ratio, 0), 710_000);
        assert_eq!(params.current_ppm(&params.initial(), 5_000), 510_000);
    }

    #[test]
    fn winner_sets_the_geometric_mean_clamped() {
        let params = DEFAULT_RATIO_PARAMS;
        // sqrt(0.64 * 0.81) = 0.72
        assert_eq!(params.after_win(&[640_000, 810_000], 9).set_ppm, 720_000);
        assert_eq!(params.after_win(&[640_000, 810_000], 9).set_at_block, 9);
        assert_eq!(params.after_win(&[1_000_000, 1_000_000], 0).set_ppm, RATIO_MAX_PPM);
        assert_eq!(params.after_win(&[300_000, 600_000], 0).set_ppm, params.floor_ppm());
        assert_eq!(params.after_win(&[0, 900_000], 0).set_ppm, params.floor_ppm());
    }

    #[test]
    fn win_rates_drop_draws_and_round() {
        assert_eq!(win_rate_ppm(2, 1), 666_667);
        assert_eq!(win_rate_ppm(0, 0), 500_000);
        assert_eq!(win_rate_ppm(5, 0), 1_000_000);
    }
}
