//! The ratio to beat: the win rate a contender must show against the champion. It
//! starts at 1/2 + epsilon; a contender that wins sets it to the geometric mean of its
//! per-environment scores (a `score` plan: draws count half, so a patch that changes a
//! few answers sets a bar near 1/2; a `mixture` plan of older logs: decisive games only);
//! it then decays back toward 1/2 + epsilon with a half-life in chain blocks, so a strong
//! champion cannot freeze the frontier.
//!
//! Blocks are the chain's own block numbers, as the log records them: a winner's ratio
//! is dated by the chain block its match started at (`MatchStarted.chain_block`, whose
//! hash the audit checks on chain), and it is read at the chain block of the next
//! match's start. A validator without a chain records block 0, so its ratio never decays.
//!
//! Values are stored in parts per million (the ledger's unit) and computed in integers
//! (or, for `mixture` plans, binary64 through `libm`), so every replica derives the same
//! number.

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
    pub arithmetic: Arithmetic,
}

/// How the decay and the geometric mean are computed. `Exact` is integer arithmetic any
/// language reproduces bit for bit (ledger-spec/02, "The ratio to beat"); `Float` is the
/// binary64 arithmetic through musl's libm of logs whose matches record a `mixture` plan,
/// kept so those logs replay as they were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arithmetic {
    Float,
    Exact,
}

pub const DEFAULT_RATIO_PARAMS: RatioParams =
    RatioParams { epsilon_ppm: 10_000, half_life_blocks: 7_200, arithmetic: Arithmetic::Exact };

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

    /// The same parameters with the other arithmetic.
    pub fn with_arithmetic(self, arithmetic: Arithmetic) -> RatioParams {
        RatioParams { arithmetic, ..self }
    }

    /// The ratio in force at `block`: the excess over the floor halves every half-life.
    /// Exact: with `q, r = divmod(elapsed, half_life)` and `x = excess >> q`, the excess is
    /// `x - floor(x * r / (2 * half_life))`, halving at each whole half-life and linear in
    /// between. Float: `round(floor + excess * 2^(-elapsed / half_life))`.
    pub fn current_ppm(&self, ratio: &RatioToBeat, block: u64) -> u32 {
        let floor = self.floor_ppm();
        if ratio.set_ppm <= floor || self.half_life_blocks == 0 {
            return floor;
        }
        let elapsed = block.saturating_sub(ratio.set_at_block);
        match self.arithmetic {
            Arithmetic::Exact => {
                let (q, r) = (elapsed / self.half_life_blocks, elapsed % self.half_life_blocks);
                let halved = if q >= 32 { 0 } else { u64::from(ratio.set_ppm - floor) >> q };
                let excess =
                    halved - (u128::from(halved) * u128::from(r) / (2 * u128::from(self.half_life_blocks))) as u64;
                floor + excess as u32
            }
            Arithmetic::Float => {
                let excess = f64::from(ratio.set_ppm) - f64::from(floor);
                let decayed = f64::from(floor) + excess * libm::exp2(-(elapsed as f64) / self.half_life_blocks as f64);
                libm::round(decayed) as u32
            }
        }
    }

    /// The ratio a winner sets: the geometric mean of its per-environment win rates
    /// (ppm), clamped to [floor, `RATIO_MAX_PPM`]. A zero win rate counts as 1 ppm.
    /// Exact: the integer `g` nearest to the k-th root of the product, ties up, that is
    /// the largest `g` with `(2g - 1)^k <= 2^k * product`.
    pub fn after_win(&self, win_rates_ppm: &[u32], block: u64) -> RatioToBeat {
        assert!(!win_rates_ppm.is_empty(), "a match has at least one environment");
        let geometric = match self.arithmetic {
            Arithmetic::Exact => exact_geometric_mean(win_rates_ppm),
            Arithmetic::Float => {
                let mean_ln = win_rates_ppm.iter().map(|&r| libm::log(f64::from(r.max(1)) / 1e6)).sum::<f64>()
                    / win_rates_ppm.len() as f64;
                libm::round(libm::exp(mean_ln) * 1e6) as u32
            }
        };
        RatioToBeat { set_ppm: geometric.clamp(self.floor_ppm(), RATIO_MAX_PPM), set_at_block: block }
    }
}

/// The nearest integer to the geometric mean of `rates` (each at least 1, at most 10^6),
/// ties rounded up, by bisection on big integers.
fn exact_geometric_mean(rates: &[u32]) -> u32 {
    use num_bigint::BigUint;
    let k = rates.len() as u32;
    let twice_product: BigUint =
        rates.iter().fold(BigUint::from(1u8), |acc, &r| acc * BigUint::from(r.clamp(1, 1_000_000))) << k as usize;
    // Invariant: (2 low - 1)^k <= 2^k product < (2 high - 1)^k.
    let (mut low, mut high) = (1u32, 1_000_001u32);
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if BigUint::from(2 * mid - 1).pow(k) <= twice_product {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

/// A score in ppm over every challenge played, a draw counting half a win: the nearest
/// integer to `(2 wins + draws) * 10^6 / (2 n)`, ties up; no challenge is 1/2. What a
/// `score` plan records as each env's win rate.
pub fn score_ppm(wins: u32, losses: u32, draws: u32) -> u32 {
    let n = u64::from(wins) + u64::from(losses) + u64::from(draws);
    if n == 0 {
        return 500_000;
    }
    let half_points = 2 * u64::from(wins) + u64::from(draws);
    ((half_points * 1_000_000 + n) / (2 * n)) as u32
}

/// A win rate in ppm from decisive games (draws do not count); 0 games is 1/2. What a
/// `mixture` plan records.
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
        let params = DEFAULT_RATIO_PARAMS.with_arithmetic(Arithmetic::Float);
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
        let float = params.with_arithmetic(Arithmetic::Float);
        assert_eq!(float.after_win(&[640_000, 810_000], 9).set_ppm, 720_000);
        // sqrt(0.64 * 0.81) = 0.72
        assert_eq!(params.after_win(&[640_000, 810_000], 9).set_ppm, 720_000);
        assert_eq!(params.after_win(&[640_000, 810_000], 9).set_at_block, 9);
        assert_eq!(params.after_win(&[1_000_000, 1_000_000], 0).set_ppm, RATIO_MAX_PPM);
        assert_eq!(params.after_win(&[300_000, 600_000], 0).set_ppm, params.floor_ppm());
        assert_eq!(params.after_win(&[0, 900_000], 0).set_ppm, params.floor_ppm());
    }

    #[test]
    fn exact_decay_halves_each_half_life_and_is_linear_between() {
        let params = DEFAULT_RATIO_PARAMS;
        let ratio = RatioToBeat { set_ppm: 710_000, set_at_block: 1_000 };
        assert_eq!(params.current_ppm(&ratio, 1_000), 710_000);
        // Half a half-life: 200000 - floor(200000 * 3600 / 14400) = 150000.
        assert_eq!(params.current_ppm(&ratio, 1_000 + 3_600), 660_000);
        assert_eq!(params.current_ppm(&ratio, 1_000 + 7_200), 610_000);
        assert_eq!(params.current_ppm(&ratio, 1_000 + 7_199), 610_014); // 200000 - 99986
        assert_eq!(params.current_ppm(&ratio, 1_000 + 14_400), 560_000);
        assert_eq!(params.current_ppm(&ratio, u64::MAX), params.floor_ppm());
        let float = params.with_arithmetic(Arithmetic::Float);
        assert_eq!(float.current_ppm(&ratio, 1_000 + 3_600), 651_421, "2^-1/2 of the excess");
    }

    #[test]
    fn exact_geometric_mean_rounds_to_nearest() {
        assert_eq!(exact_geometric_mean(&[640_000, 810_000]), 720_000);
        // sqrt(2 * 3) = 2.449 -> 2; sqrt(2 * 5) = 3.162 -> 3; the cube root of 12 = 2.289 -> 2.
        assert_eq!(exact_geometric_mean(&[2, 3]), 2);
        assert_eq!(exact_geometric_mean(&[2, 5]), 3);
        assert_eq!(exact_geometric_mean(&[2, 2, 3]), 2);
        // sqrt(12.25) = 3.5 exactly is not an integer product; 3 * 4 = 12 < 12.25 -> 3.
        assert_eq!(exact_geometric_mean(&[3, 4]), 3);
        assert_eq!(exact_geometric_mean(&[1_000_000; 64]), 1_000_000);
        assert_eq!(exact_geometric_mean(&[0, 900_000]), 949, "a zero counts as 1 ppm");
        // The most rates a decision may list.
        let many = vec![999_999; crate::limits::MAX_LIST_ITEMS];
        assert_eq!(exact_geometric_mean(&many), 999_999);
    }

    #[test]
    fn scores_count_draws_as_half() {
        assert_eq!(score_ppm(1, 0, 1), 750_000);
        assert_eq!(score_ppm(0, 0, 10), 500_000);
        assert_eq!(score_ppm(5, 90, 5), 75_000);
        assert_eq!(score_ppm(1, 2, 0), 333_333);
        assert_eq!(score_ppm(2, 1, 0), 666_667);
        assert_eq!(score_ppm(0, 0, 0), 500_000);
    }

    #[test]
    fn win_rates_drop_draws_and_round() {
        assert_eq!(win_rate_ppm(2, 1), 666_667);
        assert_eq!(win_rate_ppm(0, 0), 500_000);
        assert_eq!(win_rate_ppm(5, 0), 1_000_000);
    }
}
