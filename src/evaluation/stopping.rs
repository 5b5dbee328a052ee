//! Stopping rules for a paired match in one environment: after each decisive game,
//! decide whether the contender's win rate is above the ratio to beat `p0`, below it,
//! or whether to keep playing. Each rule depends only on `(n, wins)`, so its exact error
//! rates follow from a dynamic program over `(n, wins)` ([`exact_rates`]), with no
//! sampling noise.
//!
//! The default is the Beta-binomial mixture confidence sequence (Robbins 1970; Howard
//! et al. 2021), valid at every `n` at once: checking it after every game keeps the
//! false "better" rate below `alpha / 2` at `p0 = 1/2`. The seed's Wilson rule checked after
//! every game is not anytime-valid (21-28% false "better"); it is kept, labelled so.
//!
//! Arithmetic goes through `libm` (a pure-Rust port of musl's), not the platform's
//! math library, so a decision replays to the same bits on every machine.

use super::dominance::Dominance;
use serde::Serialize;

/// The stop conditions of a rule at one env's counts: a crown (by any route), the
/// rule's own "not better", and whether a "not better" stop may end the env (a
/// dominance crown out of reach; always for plans without one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conditions {
    pub crown: bool,
    pub not_better: bool,
    pub dismissable: bool,
}

/// What a rule says after `n` decisive games.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    NotBetter,
    Continue,
}

/// A stopping rule and its parameters; every decision records which one made it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "rule")]
pub enum StoppingRule {
    /// The default: the contender's score over every challenge, a draw counting half a
    /// win, against the ratio to beat, by a Beta(a, b) mixture of likelihood ratios at
    /// level `alpha_ppm / 10^6` (ledger-spec/02, "The score rule"). The bar a winner sets
    /// is the geometric mean of the same scores, so a patch that changes a few answers
    /// sets a bar near 1/2 instead of its decisive-only win rate. It also carries the
    /// network's parameters that replay needs, so no auditor reads them from its own
    /// config: the challenge cap per env and the ratio's epsilon and half-life.
    /// With a [`Dominance`] clause, a contender that wins enough of the decisive games is
    /// crowned whatever the bar, and a "not better" stop needs that crown out of reach.
    Score {
        alpha_ppm: u32,
        prior_a: u32,
        prior_b: u32,
        max_challenges: u64,
        epsilon_ppm: u32,
        half_life_blocks: u64,
        dominance: Option<Dominance>,
    },
    /// Beta(a, b)-binomial mixture confidence sequence at level `alpha`. Anytime-valid.
    Mixture { alpha: f64, prior_a: u32, prior_b: u32 },
    /// The seed's rule: a Wilson interval with this `z` checked after every game.
    /// Not anytime-valid: with z = 1.96 it declares an equal contender better 21-28% of
    /// the time for caps of 200-2000 games.
    Wilson { z: f64 },
    /// Wilson with `z` raised so that checking after every game up to `cap` keeps the
    /// false "better" rate at about `alpha / 2`; valid for that cap only.
    WilsonCalibrated { z: f64, cap: u32 },
    /// Wald's sequential probability ratio test of `p0` against `p0 + delta`, with error
    /// targets `alpha` (false "better") and `beta` (missed "better").
    Sprt { delta: f64, alpha: f64, beta: f64 },
}

/// How far replay moves a `score` plan's thresholds (in log units) before it disagrees
/// with a recorded decision: a stop is accepted if the statistic reaches the threshold
/// minus this, a continuation if it stays below the threshold plus this (ledger-spec/02).
/// Far above binary64's error on these sums (lgamma near 1.4e7 at a million challenges
/// has an ulp of 2e-9), far below any effect on the error rates (a factor e^(1e-6)).
pub const SCORE_SLACK: f64 = 1e-6;

/// `p0` (a ratio read from ppm) back in ppm.
pub(super) fn p0_ppm(p0: f64) -> u32 {
    libm::round(p0 * 1e6) as u32
}

/// log M_n(p) of the Beta(a, b) mixture of likelihood ratios for a score sum
/// `T = half_points / 2` over `n` challenges:
/// `lnB(a + T, b + n - T) - lnB(a, b) - T ln p - (n - T) ln(1 - p)`, in binary64 through
/// libm (ledger-spec/02 says how far another implementation may differ).
pub fn log_mixture_score(n: u64, half_points: u64, p: f64, a: u32, b: u32) -> f64 {
    let (n, t) = (n as f64, half_points as f64 / 2.0);
    let (a, b) = (f64::from(a), f64::from(b));
    ln_beta(a + t, b + n - t) - ln_beta(a, b) - t * libm::log(p) - (n - t) * libm::log(1.0 - p)
}

/// log M_n(p) of the Beta(1, 1)-binomial mixture with `s` successes in `n`.
pub(super) fn log_mixture_uniform(n: f64, s: f64, p: f64) -> f64 {
    ln_beta(1.0 + s, 1.0 + n - s) - s * libm::log(p) - (n - s) * libm::log(1.0 - p)
}

/// The upper end of the Beta(1, 1) mixture confidence set `{p : log M_n(p) < ln(1/alpha)}`
/// for `s` successes in `n`: the largest `p >= s/n` still inside, by bisection (60 halvings,
/// all through libm, so every machine finds the same bits).
pub fn mixture_upper(n: f64, s: f64, alpha: f64) -> f64 {
    let threshold = libm::log(1.0 / alpha);
    let (mut inside, mut outside) = (s / n, 1.0);
    if s >= n {
        return 1.0;
    }
    for _ in 0..60 {
        let mid = (inside + outside) / 2.0;
        if log_mixture_uniform(n, s, mid) < threshold {
            inside = mid;
        } else {
            outside = mid;
        }
    }
    outside
}

/// Most challenges per env a `score` plan may name (so a log cannot ask replay for more).
pub const MAX_SCORE_CHALLENGES: u64 = 1_000_000;

/// Default cap on decisive games per environment (`mixture` plans); reaching it is
/// inconclusive.
pub const DEFAULT_CAP: u32 = 1000;
/// Defaults: the score rule, prior Beta(4, 4), alpha 0.05 (at most 2.5% false crowns per
/// env, adaptive draws included: ledger-spec/02), 4000 challenges per env, the ratio's
/// epsilon 1% and half-life 7200 blocks.
pub const DEFAULT_RULE: StoppingRule = StoppingRule::Score {
    alpha_ppm: 50_000,
    prior_a: 4,
    prior_b: 4,
    max_challenges: 4 * DEFAULT_CAP as u64,
    epsilon_ppm: 10_000,
    half_life_blocks: 7_200,
    dominance: Some(DEFAULT_DOMINANCE),
};
/// The dominance crown of the default plan: shown to win more than 95% of the decisive
/// games at level 0.5% (so with the score rule's worst 1.87% a wrong crown stays under
/// 2.5%), out of reach once below 95% or once wins are shown rarer than 4% of challenges
/// (at 5%). A never-worse model better on 5% of challenges is crowned within the cap
/// (ledger-spec/02's table; `scripts/bench-decisions.sh`).
pub const DEFAULT_DOMINANCE: Dominance =
    Dominance { rate_ppm: 950_000, alpha_ppm: 5_000, share_ppm: 40_000, share_alpha_ppm: 50_000, reach_over: None };
/// The rule of `mixture` plans (logs before the score rule): decisive games only.
pub const MIXTURE_RULE: StoppingRule = StoppingRule::Mixture { alpha: 0.05, prior_a: 4, prior_b: 4 };

/// z for which checking a Wilson interval after every game up to `cap` (p0 = 1/2)
/// declares an equal contender better at most 2.5% of the time. From
/// [`calibrate_wilson_z`]; a test recomputes them.
pub const CALIBRATED_WILSON_Z: [(u32, f64); 4] = [(200, 2.84), (500, 2.93), (1000, 3.00), (2000, 3.04)];

impl StoppingRule {
    /// The calibrated Wilson rule for the nearest tabulated cap at or above `cap`.
    pub fn wilson_calibrated(cap: u32) -> StoppingRule {
        let (table_cap, z) =
            CALIBRATED_WILSON_Z.iter().copied().find(|(c, _)| *c >= cap).unwrap_or(CALIBRATED_WILSON_Z[3]);
        StoppingRule::WilsonCalibrated { z, cap: table_cap }
    }

    /// One line for the ledger, e.g. `mixture alpha=0.05 prior=4,4`.
    pub fn describe(&self) -> String {
        match self {
            StoppingRule::Score {
                alpha_ppm,
                prior_a,
                prior_b,
                max_challenges,
                epsilon_ppm,
                half_life_blocks,
                dominance,
            } => {
                let rule = format!(
                    "score alpha_ppm={alpha_ppm} prior={prior_a},{prior_b} challenges={max_challenges} \
                     epsilon_ppm={epsilon_ppm} half_life_blocks={half_life_blocks}"
                );
                match dominance {
                    Some(d) => format!("{rule} {}", d.describe()),
                    None => rule,
                }
            }
            StoppingRule::Mixture { alpha, prior_a, prior_b } => {
                format!("mixture alpha={alpha} prior={prior_a},{prior_b}")
            }
            StoppingRule::Wilson { z } => format!("wilson z={z} (not anytime-valid)"),
            StoppingRule::WilsonCalibrated { z, cap } => format!("wilson-calibrated z={z} cap={cap}"),
            StoppingRule::Sprt { delta, alpha, beta } => format!("sprt delta={delta} alpha={alpha} beta={beta}"),
        }
    }

    /// The same rule with a `score` rule's challenge cap set to `n` (other rules as they are).
    pub fn with_max_challenges(mut self, n: u64) -> StoppingRule {
        match self {
            StoppingRule::Score { ref mut max_challenges, ref mut dominance, .. } => {
                *max_challenges = n;
                if let Some(reach) = dominance.as_mut().and_then(|d| d.reach_over.as_mut()) {
                    *reach = n;
                }
                self
            }
            other => other,
        }
    }

    /// The same rule with a `score` rule's dominance crown set to `dominance` (other
    /// rules as they are): version 1's rule is the network's with `None`.
    pub fn with_dominance(mut self, dominance: Option<Dominance>) -> StoppingRule {
        match self {
            StoppingRule::Score { dominance: ref mut slot, .. } => {
                *slot = dominance;
                self
            }
            other => other,
        }
    }

    /// A `score` rule's dominance crown.
    pub fn dominance(&self) -> Option<Dominance> {
        match self {
            StoppingRule::Score { dominance, .. } => *dominance,
            _ => None,
        }
    }

    /// A `score` rule's challenge cap.
    pub fn max_challenges(&self) -> Option<u64> {
        match self {
            StoppingRule::Score { max_challenges, .. } => Some(*max_challenges),
            _ => None,
        }
    }

    /// The ratio parameters of plans with this rule: those a `score` rule carries (the
    /// network's, the same for every reader), else `legacy` with the binary64 arithmetic
    /// the `mixture` plans of older logs were written with.
    pub fn ratio_params(
        &self,
        legacy: &crate::evaluation::ratio::RatioParams,
    ) -> crate::evaluation::ratio::RatioParams {
        use crate::evaluation::ratio::{Arithmetic, RatioParams};
        match *self {
            StoppingRule::Score { epsilon_ppm, half_life_blocks, .. } => {
                RatioParams { epsilon_ppm, half_life_blocks, arithmetic: Arithmetic::Exact }
            }
            _ => legacy.with_arithmetic(Arithmetic::Float),
        }
    }

    /// Whether the rule reads draws (a `score` rule) or only decisive games.
    pub fn counts_draws(&self) -> bool {
        matches!(self, StoppingRule::Score { .. })
    }

    /// The ratio arithmetic of plans with this rule.
    pub fn arithmetic(&self) -> crate::evaluation::ratio::Arithmetic {
        if self.counts_draws() {
            crate::evaluation::ratio::Arithmetic::Exact
        } else {
            crate::evaluation::ratio::Arithmetic::Float
        }
    }

    /// The rate an env's counts record in `MatchDecided.win_rates` (and a winner's bar is
    /// the geometric mean of): the score for a `score` rule, the decisive win rate else.
    pub fn env_rate_ppm(&self, wins: u32, losses: u32, draws: u32) -> u32 {
        if self.counts_draws() {
            crate::evaluation::ratio::score_ppm(wins, losses, draws)
        } else {
            crate::evaluation::ratio::win_rate_ppm(wins, losses)
        }
    }

    /// The verdict on one env's counts against the ratio to beat `p0`: a `score` rule
    /// reads every challenge, the others only the decisive games.
    pub fn verdict_on(&self, wins: u32, losses: u32, draws: u32, p0: f64) -> Verdict {
        self.verdict_with_slack(wins, losses, draws, p0, 0.0)
    }

    /// [`StoppingRule::verdict_on`] with a `score` rule's threshold moved by `slack` (in
    /// log units): replay accepts a stop at `-SCORE_SLACK` and a continuation at
    /// `+SCORE_SLACK`, so verifiers whose lgamma differs in the last bits agree.
    pub fn verdict_with_slack(&self, wins: u32, losses: u32, draws: u32, p0: f64, slack: f64) -> Verdict {
        let c = self.conditions(wins, losses, draws, p0, slack);
        if c.crown {
            Verdict::Better
        } else if c.not_better && c.dismissable {
            Verdict::NotBetter
        } else {
            Verdict::Continue
        }
    }

    /// Each stop condition of the rule at these counts, thresholds moved by `slack`:
    /// replay judges a recorded stop and a recorded continuation at different slacks, so
    /// it needs them apart ([`Conditions`]).
    pub fn conditions(&self, wins: u32, losses: u32, draws: u32, p0: f64, slack: f64) -> Conditions {
        match *self {
            StoppingRule::Score { alpha_ppm, prior_a, prior_b, dominance, .. } => {
                let (w, l, d) = (u64::from(wins), u64::from(losses), u64::from(draws));
                let score = score_verdict(w + l + d, 2 * w + d, p0, (alpha_ppm, prior_a, prior_b), slack);
                Conditions {
                    crown: score == Verdict::Better || dominance.is_some_and(|dom| dom.crowns(w, l, slack)),
                    not_better: score == Verdict::NotBetter,
                    dismissable: dominance.is_none_or(|dom| dom.is_out(w, l, d, slack)),
                }
            }
            _ => {
                let verdict = self.verdict(wins + losses, wins, p0);
                Conditions {
                    crown: verdict == Verdict::Better,
                    not_better: verdict == Verdict::NotBetter,
                    dismissable: true,
                }
            }
        }
    }

    /// Whether a "not better" stop (the rule's or a futility stop's) may end the env at
    /// these counts: always, unless a dominance crown is still within reach.
    pub fn dismissable(&self, wins: u32, losses: u32, draws: u32, slack: f64) -> bool {
        match *self {
            StoppingRule::Score { dominance: Some(dom), .. } => {
                dom.is_out(u64::from(wins), u64::from(losses), u64::from(draws), slack)
            }
            _ => true,
        }
    }

    /// The verdict after `n` decisive games of which the contender won `wins`, against
    /// the ratio to beat `p0` (0 < p0 < 1). For a `score` rule, `n` challenges without draws.
    pub fn verdict(&self, n: u32, wins: u32, p0: f64) -> Verdict {
        assert!(wins <= n, "wins {wins} > games {n}");
        assert!(p0 > 0.0 && p0 < 1.0, "ratio to beat {p0} outside (0, 1)");
        if n == 0 {
            return Verdict::Continue;
        }
        match *self {
            StoppingRule::Score { .. } => self.verdict_on(wins, n - wins, 0, p0),
            StoppingRule::Mixture { alpha, prior_a, prior_b } => mixture(n, wins, p0, alpha, prior_a, prior_b),
            StoppingRule::Wilson { z } | StoppingRule::WilsonCalibrated { z, .. } => wilson(n, wins, p0, z),
            StoppingRule::Sprt { delta, alpha, beta } => sprt(n, wins, p0, delta, alpha, beta),
        }
    }
}

/// ln Beta(x, y) through libm's lgamma.
fn ln_beta(x: f64, y: f64) -> f64 {
    libm::lgamma(x) + libm::lgamma(y) - libm::lgamma(x + y)
}

/// log M_n(p0) = lnB(a+S, b+n-S) - lnB(a, b) - S ln p0 - (n-S) ln(1-p0); decide once it
/// reaches ln(1/alpha), on the side the wins are on.
fn mixture(n: u32, wins: u32, p0: f64, alpha: f64, a: u32, b: u32) -> Verdict {
    let (n_f, s) = (f64::from(n), f64::from(wins));
    let (a, b) = (f64::from(a), f64::from(b));
    let log_m = ln_beta(a + s, b + n_f - s) - ln_beta(a, b) - s * libm::log(p0) - (n_f - s) * libm::log(1.0 - p0);
    if log_m < libm::log(1.0 / alpha) {
        Verdict::Continue
    } else if s > n_f * p0 {
        Verdict::Better
    } else if s < n_f * p0 {
        Verdict::NotBetter
    } else {
        Verdict::Continue
    }
}

/// The score rule after `n` challenges with `half_points` = 2 wins + draws: decide once
/// log M_n(p0) reaches ln(10^6 / alpha_ppm), on the side the score is on (compared in
/// integers: `half_points * 10^6` against `2 n p0_ppm`).
fn score_verdict(n: u64, half_points: u64, p0: f64, (alpha_ppm, a, b): (u32, u32, u32), slack: f64) -> Verdict {
    if n == 0 {
        return Verdict::Continue;
    }
    let (score, bar) = (u128::from(half_points) * 1_000_000, 2 * u128::from(n) * u128::from(p0_ppm(p0)));
    if score == bar || log_mixture_score(n, half_points, p0, a, b) < libm::log(1e6 / f64::from(alpha_ppm)) + slack {
        Verdict::Continue
    } else if score > bar {
        Verdict::Better
    } else {
        Verdict::NotBetter
    }
}

/// Wilson score interval for wins/n; better if it lies above p0, not better if below.
fn wilson(n: u32, wins: u32, p0: f64, z: f64) -> Verdict {
    let n_f = f64::from(n);
    let p_hat = f64::from(wins) / n_f;
    let z2 = z * z;
    let denominator = 1.0 + z2 / n_f;
    let center = (p_hat + z2 / (2.0 * n_f)) / denominator;
    let half = z / denominator * libm::sqrt(p_hat * (1.0 - p_hat) / n_f + z2 / (4.0 * n_f * n_f));
    if center - half > p0 {
        Verdict::Better
    } else if center + half < p0 {
        Verdict::NotBetter
    } else {
        Verdict::Continue
    }
}

/// Wald's SPRT: log likelihood ratio of p1 = p0 + delta against p0.
fn sprt(n: u32, wins: u32, p0: f64, delta: f64, alpha: f64, beta: f64) -> Verdict {
    let p1 = (p0 + delta).min(1.0 - 1e-9);
    let s = f64::from(wins);
    let f = f64::from(n - wins);
    let llr = s * libm::log(p1 / p0) + f * libm::log((1.0 - p1) / (1.0 - p0));
    if llr >= libm::log((1.0 - beta) / alpha) {
        Verdict::Better
    } else if llr <= libm::log(beta / (1.0 - alpha)) {
        Verdict::NotBetter
    } else {
        Verdict::Continue
    }
}

/// Exact outcome probabilities of a rule played up to `cap` decisive games when the
/// contender's true win rate is `p`, against ratio to beat `p0`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rates {
    pub better: f64,
    pub not_better: f64,
    pub inconclusive: f64,
    /// Expected decisive games played.
    pub expected_games: f64,
}

/// Dynamic program over (games, wins): the probability mass of paths still running is
/// carried forward one game at a time; mass at a state where the rule stops is added to
/// that verdict. O(cap^2) verdicts.
pub fn exact_rates(rule: &StoppingRule, cap: u32, p: f64, p0: f64) -> Rates {
    let mut running = vec![0.0f64; cap as usize + 2];
    running[0] = 1.0;
    let (mut better, mut not_better, mut expected_games) = (0.0, 0.0, 0.0);
    for n in 1..=cap {
        // Advance one game: mass at `wins` moves to `wins + 1` with probability p.
        for wins in (0..n as usize).rev() {
            let mass = running[wins];
            running[wins + 1] += mass * p;
            running[wins] = mass * (1.0 - p);
        }
        expected_games += running[..=n as usize].iter().sum::<f64>();
        for (wins, mass) in running[..=n as usize].iter_mut().enumerate() {
            if *mass == 0.0 {
                continue;
            }
            match rule.verdict(n, wins as u32, p0) {
                Verdict::Better => better += *mass,
                Verdict::NotBetter => not_better += *mass,
                Verdict::Continue => continue,
            }
            *mass = 0.0;
        }
    }
    let inconclusive = running.iter().sum();
    Rates { better, not_better, inconclusive, expected_games }
}

/// The smallest z (to 0.005) for which Wilson checked after every game up to `cap`
/// declares an equal contender (p = p0 = 1/2) better at most `target` of the time.
pub fn calibrate_wilson_z(cap: u32, target: f64) -> f64 {
    let (mut low, mut high) = (1.5f64, 5.0f64);
    while high - low > 0.005 {
        let mid = (low + high) / 2.0;
        if exact_rates(&StoppingRule::Wilson { z: mid }, cap, 0.5, 0.5).better > target {
            low = mid;
        } else {
            high = mid;
        }
    }
    high
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_on_clear_cases() {
        let rule = DEFAULT_RULE;
        assert_eq!(rule.verdict(0, 0, 0.5), Verdict::Continue);
        assert_eq!(rule.verdict(10, 5, 0.5), Verdict::Continue);
        assert_eq!(rule.verdict(100, 90, 0.5), Verdict::Better);
        assert_eq!(rule.verdict(100, 10, 0.5), Verdict::NotBetter);
        // log M_40 at p0 = 1/2 crosses ln 20 = 3.00 between 29 wins (2.61) and 30 (3.47).
        assert_eq!(rule.verdict(40, 29, 0.5), Verdict::Continue);
        assert_eq!(rule.verdict(40, 30, 0.5), Verdict::Better);
        // Against a higher bar, the same record is no longer enough.
        assert_eq!(rule.verdict(40, 30, 0.69), Verdict::Continue);
        assert_eq!(StoppingRule::Wilson { z: 1.96 }.verdict(20, 16, 0.5), Verdict::Better);
        assert_eq!(StoppingRule::Sprt { delta: 0.1, alpha: 0.025, beta: 0.1 }.verdict(60, 50, 0.5), Verdict::Better);
    }

    #[test]
    fn rates_add_up_to_one() {
        for rule in
            [DEFAULT_RULE, StoppingRule::Wilson { z: 1.96 }, StoppingRule::Sprt { delta: 0.1, alpha: 0.025, beta: 0.1 }]
        {
            for p in [0.3, 0.5, 0.7] {
                let r = exact_rates(&rule, 300, p, 0.5);
                assert!((r.better + r.not_better + r.inconclusive - 1.0).abs() < 1e-9, "{rule:?} {p} {r:?}");
                assert!(r.expected_games > 0.0 && r.expected_games <= 300.0);
            }
        }
    }
}
