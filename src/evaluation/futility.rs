//! The futility stops: when to give up on a contender in one environment before a
//! verdict, against the bar for `score` plans ([`BarFutility`], with version 4's
//! [`Rise`]) and against 1/2 for the `mixture` plans of older logs
//! ([`AdvantageFutility`]). A "not better" stop never adds a false crown.

use super::stopping::{log_mixture_uniform, mixture_upper, p0_ppm};
use serde::Serialize;

/// The futility stop of `score` plans: defined against the bar, not against 1/2, and
/// adapting to how much the contender's scores vary (a near-copy that mostly draws is
/// dismissed in tens of challenges, a contender that never draws in hundreds).
///
/// With `p1 = min(p0 + margin, (1 + p0) / 2)` (in ppm, integer division), each of eight
/// bets `lambda_k = 2^-k / (1 - p1)`, k = 1..8, grows a capital
/// `K_k = prod (1 + lambda_k (p1 - x_i))` over the challenges' scores `x_i` in {0, 1/2, 1}:
/// `(1 + lambda_k p1)^losses (1 + lambda_k (p1 - 1/2))^draws (1 - lambda_k (1 - p1))^wins`.
/// For any contender whose mean score is at least `p1`, each factor has expectation at
/// most 1 whatever it does, so the average of the eight is a nonnegative supermartingale
/// and Ville's inequality bounds a wrong dismissal by `alpha`. The env stops as "not
/// better" once the average reaches `10^6 / alpha_ppm` and the score sum is below
/// `n (p0 + mean_margin)` (`n p1` in the older spelling, with no `mean_margin_ppm`).
///
/// The mean condition at the bar itself (`mean_margin_ppm=0`, the network's plan) keeps
/// a contender whose scores so far are above the bar from being dismissed: with it at
/// `p1`, one 3 or 5 points above the bar fell inside the margin and was dismissed as n
/// grew (issue 54; `scripts/bench-decisions.sh`, `AF_BENCH_ONLY=candidates`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BarFutility {
    pub margin_ppm: u32,
    pub alpha_ppm: u32,
    /// The mean condition's margin over the bar; `None` in the older spelling, where it
    /// is `margin_ppm` (the condition at `p1`).
    pub mean_margin_ppm: Option<u32>,
    /// A mean condition that rises with the challenges played (protocol version 4): the
    /// bar plus `mean_margin_ppm` at the first challenge, plus `ppm` more at the plan's
    /// last. `None` before version 4.
    pub rise: Option<Rise>,
}

/// How far the futility stop's mean condition rises over an env's challenges: `ppm` over
/// `over` challenges (the plan's cap). A contender scoring just above the bar is given
/// up on once its mean falls below a condition that, near the cap, only a contender
/// that could still be crowned by the cap meets; one a few points above keeps clear of
/// it (ledger-spec/02; issue 76: at the bar, 5% to 11% reached the cap under version 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Rise {
    pub ppm: u32,
    pub over: u64,
}

/// How many bets the bar futility averages.
pub const BAR_FUTILITY_BETS: i32 = 8;

/// A futility stop: [`BarFutility`] for `score` plans, [`AdvantageFutility`] for the
/// `mixture` plans of older logs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "futility")]
pub enum Futility {
    Bar(BarFutility),
    Advantage(AdvantageFutility),
}

/// Defaults of the futility stop of `score` plans (`scripts/bench-decisions.sh` prints what
/// they cost and save; ledger-spec/02 the exact figures).
pub const DEFAULT_FUTILITY: Futility =
    Futility::Bar(BarFutility { margin_ppm: 60_000, alpha_ppm: 50_000, mean_margin_ppm: Some(0), rise: None });
/// The futility stop the `mixture` plans were played with.
pub const DEFAULT_ADVANTAGE_FUTILITY: AdvantageFutility = AdvantageFutility { advantage: 0.1, alpha: 0.05 };

impl Futility {
    pub fn describe(&self) -> String {
        match self {
            Futility::Bar(f) => match (f.mean_margin_ppm, f.rise) {
                (_, Some(rise)) => {
                    format!("futility margin_ppm={} alpha_ppm={} rise_ppm={}", f.margin_ppm, f.alpha_ppm, rise.ppm)
                }
                (None, None) => format!("futility margin_ppm={} alpha_ppm={}", f.margin_ppm, f.alpha_ppm),
                (Some(m), None) => {
                    format!("futility margin_ppm={} alpha_ppm={} mean_margin_ppm={m}", f.margin_ppm, f.alpha_ppm)
                }
            },
            Futility::Advantage(f) => format!("futility advantage={} alpha={}", f.advantage, f.alpha),
        }
    }

    /// Whether the env is futile after these counts, against the ratio to beat `p0`.
    pub fn is_futile(&self, wins: u32, losses: u32, draws: u32, p0: f64) -> bool {
        self.is_futile_with_slack(wins, losses, draws, p0, 0.0)
    }

    /// [`Futility::is_futile`] with a bar futility's threshold moved by `slack` (as
    /// [`StoppingRule::verdict_with_slack`]).
    pub fn is_futile_with_slack(&self, wins: u32, losses: u32, draws: u32, p0: f64, slack: f64) -> bool {
        let n_challenges = u64::from(wins) + u64::from(losses) + u64::from(draws);
        match self {
            Futility::Bar(f) => f.is_futile(u64::from(wins), u64::from(losses), u64::from(draws), p0_ppm(p0), slack),
            Futility::Advantage(f) => f.is_futile(n_challenges, wins + losses, wins),
        }
    }
}

impl BarFutility {
    /// The score `p1` the contender is tested against, in ppm.
    pub fn target_ppm(&self, p0_ppm: u32) -> u32 {
        (p0_ppm.saturating_add(self.margin_ppm)).min((1_000_000 + p0_ppm) / 2)
    }

    /// The score the mean condition compares with, in ppm: `min(p0 + mean_margin, p1)`,
    /// or `p1` in the older spelling.
    pub fn mean_ppm(&self, p0_ppm: u32) -> u32 {
        let p1 = self.target_ppm(p0_ppm);
        self.mean_margin_ppm.map_or(p1, |m| p0_ppm.saturating_add(m).min(p1))
    }

    /// The mean condition, in integers: `h 10^6 < 2 n PM`; with a rise, `h 10^6 < 2 n P1`
    /// and `h 10^6 over < 2 n (PM over + rise n)` (the mean below `PM` plus the rise's
    /// share so far, and below `P1`).
    fn mean_is_below(&self, half_points: u128, n: u128, p0_ppm: u32) -> bool {
        let scaled = half_points * 1_000_000;
        match self.rise {
            None => scaled < 2 * n * u128::from(self.mean_ppm(p0_ppm)),
            Some(rise) => {
                let over = u128::from(rise.over.max(1));
                scaled < 2 * n * u128::from(self.target_ppm(p0_ppm))
                    && scaled * over < 2 * n * (u128::from(self.mean_ppm(p0_ppm)) * over + u128::from(rise.ppm) * n)
            }
        }
    }

    /// `ln` of the average capital of the bets after these counts, against `p1_ppm`.
    pub fn log_capital(wins: u64, losses: u64, draws: u64, p1_ppm: u32) -> f64 {
        let p1 = f64::from(p1_ppm) / 1e6;
        let logs: Vec<f64> = (1..=BAR_FUTILITY_BETS)
            .map(|k| {
                let lambda = libm::exp2(-f64::from(k)) / (1.0 - p1);
                losses as f64 * libm::log(1.0 + lambda * p1)
                    + draws as f64 * libm::log(1.0 + lambda * (p1 - 0.5))
                    + wins as f64 * libm::log(1.0 - lambda * (1.0 - p1))
            })
            .collect();
        // ln of the mean of exp(logs), without overflow.
        let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        top + libm::log(logs.iter().map(|l| libm::exp(l - top)).sum::<f64>()) - libm::log(f64::from(BAR_FUTILITY_BETS))
    }

    /// Whether the env is futile after these counts against the ratio to beat `p0_ppm`,
    /// with the threshold moved by `slack` (as [`StoppingRule::verdict_with_slack`]).
    pub fn is_futile(&self, wins: u64, losses: u64, draws: u64, p0_ppm: u32, slack: f64) -> bool {
        let n = wins + losses + draws;
        let p1_ppm = self.target_ppm(p0_ppm);
        let half_points = u128::from(2 * wins + draws);
        if n == 0 || !self.mean_is_below(half_points, u128::from(n), p0_ppm) {
            return false;
        }
        Self::log_capital(wins, losses, draws, p1_ppm) >= libm::log(1e6 / f64::from(self.alpha_ppm)) + slack
    }
}

/// The futility stop of `mixture` plans: ends an environment as "not better" once the
/// data show the contender is not meaningfully better per challenge, however the games
/// split. Its margin is on the advantage over 1/2, not over the bar, so it does little
/// at a high bar; `score` plans use [`BarFutility`].
///
/// The advantage per challenge is `A = d (2p - 1)`: `d` the share of challenges that are
/// decisive, `p` the contender's win rate among them (an exact copy has `d = 0`, an equal
/// one `p = 1/2`). Two Beta(1, 1)-binomial mixture confidence sequences, each at level
/// `alpha / 2`, bound `d` (over all challenges) and `p` (over decisive games) from above at
/// every time; with probability at least `1 - alpha` both hold forever, so
/// `A <= d_up * max(2 p_up - 1, 0)`. The env stops once that bound is below `advantage`.
/// It only ever says "not better", so the false-crown rate stays the base rule's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AdvantageFutility {
    /// The indifference margin on the advantage per challenge, in (0, 1).
    pub advantage: f64,
    /// Level of the two confidence sequences together, in (0, 1).
    pub alpha: f64,
}

impl AdvantageFutility {
    /// Whether the env is futile after `n_challenges` challenges, `decisive` of them decisive
    /// and `wins` of those won by the contender.
    pub fn is_futile(&self, n_challenges: u64, decisive: u32, wins: u32) -> bool {
        self.is_futile_given(n_challenges, decisive, self.win_rate_upper(decisive, wins))
    }

    /// `p_up`: the upper end of the win-rate sequence at level `alpha / 2` (1 with no
    /// decisive game). It changes only with a decisive game, so callers may keep it.
    pub fn win_rate_upper(&self, decisive: u32, wins: u32) -> f64 {
        if decisive == 0 {
            1.0
        } else {
            mixture_upper(f64::from(decisive), f64::from(wins), self.alpha / 2.0)
        }
    }

    /// [`AdvantageFutility::is_futile`] with `p_up` given. Futile when `p_up <= 1/2`;
    /// otherwise when `d* = advantage / (2 p_up - 1)` lies above the decisive-rate
    /// confidence set, that is `d* > decisive / n` and `log M_n(d*) >= ln(2 / alpha)`:
    /// then `d_up * (2 p_up - 1) < advantage` (one evaluation instead of a second bisection).
    pub fn is_futile_given(&self, n_challenges: u64, decisive: u32, p_up: f64) -> bool {
        if n_challenges == 0 {
            return false;
        }
        let gain = 2.0 * p_up - 1.0;
        if gain <= 0.0 {
            return true;
        }
        let d_star = self.advantage / gain;
        if d_star >= 1.0 {
            return true; // even if every challenge were decisive, the advantage is below the margin
        }
        let (n, s) = (n_challenges as f64, f64::from(decisive));
        d_star > s / n && log_mixture_uniform(n, s, d_star) >= libm::log(2.0 / self.alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Version 4's rising mean condition (ledger-spec/02's worked values): at 2,000 of
    /// 4,000 challenges it stands 1 point above the bar, so a mean of 0.515 against a bar
    /// of 0.51 is given up on where version 2 went on; 0.521 is above it.
    #[test]
    fn the_rising_mean_condition_gives_up_on_a_mean_just_above_the_bar_late_only() {
        let Some((_, Some(Futility::Bar(v4)))) = crate::evaluation::plan::parse_plan(crate::protocol::PLAN_V4) else {
            panic!("version 4's plan has a bar futility")
        };
        let Futility::Bar(v2) = DEFAULT_FUTILITY else { panic!("a bar futility") };
        assert_eq!(format!("{:.6}", BarFutility::log_capital(1030, 970, 0, 570_000)), "9.603737");
        assert!(v4.is_futile(1030, 970, 0, 510_000, 0.0) && !v2.is_futile(1030, 970, 0, 510_000, 0.0));
        // 0.52 at 2,000 is exactly the condition (2,080 half-points of 4,000): not below.
        assert!(!v4.is_futile(1040, 960, 0, 510_000, 0.0) && v4.is_futile(1039, 961, 0, 510_000, 0.0));
        // Early on the condition is the bar's: 0.515 at 200 challenges goes on.
        assert!(!v4.is_futile(103, 97, 0, 510_000, 0.0));
        // Near the bar of 0.99 it stops at p1 = 0.995, not above.
        assert!(!v4.is_futile(3980, 20, 0, 990_000, 0.0));
    }
}
