//! The dominance crown of `score` plans: a second way to be crowned, read on the decisive
//! games alone, for a contender that (almost) never loses to the champion. The bar is a
//! score, and a score is diluted by draws: against a champion right 90% of the time, a
//! model that is never worse and better on every remaining challenge scores at most
//! 0.55, so a bar above that shut out every strictly better successor (issue 54). A win
//! rate on the challenges where the two differ is not diluted: such a model wins all of
//! them, whatever the champion's headroom.
//!
//! The crown bets on the decisive games only, so draws (however a contender places them)
//! leave its capital as it is: eight bets `lambda_k = 2^-k / R` (k = 0..7) on `x - R`, `x`
//! 1 for a win and 0 for a loss. For a contender that wins at most `R` of the decisive
//! games, each factor has expectation at most 1 whatever it does, so the average of the
//! eight is a nonnegative supermartingale and Ville's inequality bounds a wrong crown by
//! `alpha` (`alpha_ppm / 10^6`). The k = 0 bet stakes everything: a loss takes it to 0, an
//! unbroken run of wins multiplies it by `1 / R` each, so a contender that never loses is
//! crowned after `ln(8 / alpha) / ln(1 / R)` wins (144 at the network's numbers).
//!
//! The plan's "not better" stops (the score rule's and its futility stop) must also find
//! the dominance crown out of reach: the contender has lost more than `1 - R` of its
//! decisive games so far, or its wins are shown to be rarer than `share` of the
//! challenges (eight bets likewise, on `share - x`, at level `share_alpha`). A
//! contender that never loses is only ever given up on by the second, whose chance is at
//! most `share_alpha` for one that wins at least `share` of the challenges.
//!
//! The `dominance-reach` clause (protocol version 4, issue 76) bounds what a contender
//! can cost while it keeps the crown in reach: half of each average's weight is on the
//! all-in bet (so a contender that never loses is crowned after 114 wins instead of 144,
//! and a copy is given up on in 72 challenges instead of 121), and the crown is also out
//! of reach once even winning `share` of the challenges left, with no further loss, would
//! not reach it (after one loss, that is nearly always at once).

use serde::Serialize;

/// The dominance crown's numbers (ledger-spec/02, "The score plan").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Dominance {
    /// `R`: the share of decisive games the contender must be shown to win, in ppm.
    pub rate_ppm: u32,
    /// The crown's level, in ppm.
    pub alpha_ppm: u32,
    /// The share of challenges won below which the crown is out of reach, in ppm.
    pub share_ppm: u32,
    /// The level of the test that the wins are rarer than `share_ppm`, in ppm.
    pub share_alpha_ppm: u32,
    /// `Some(challenges)` for the `dominance-reach` clause: the plan's challenges per env,
    /// which the reach condition counts the challenges left from; `None` for `dominance`.
    pub reach_over: Option<u64>,
}

/// How many bets the dominance crown averages (k = 0..7).
pub const DOMINANCE_BETS: i32 = 8;

/// `count * ln(factor)`: 0 when the count is 0, `-inf` when the factor is 0 (the all-in
/// bet's after a loss; `0 * ln 0` is a NaN in binary64).
fn term(count: u64, factor: f64) -> f64 {
    if count == 0 {
        0.0
    } else if factor == 0.0 {
        f64::NEG_INFINITY
    } else {
        count as f64 * libm::log(factor)
    }
}

/// `ln` of the mean of `exp(logs)`, without overflow; `-inf` if every entry is. With
/// `all_in_half`, the first entry (the all-in bet) weighs 1/2 and the seven others 1/14
/// each (`dominance-reach`); else each weighs 1/8.
fn log_mean_exp(logs: &[f64], all_in_half: bool) -> f64 {
    let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if top == f64::NEG_INFINITY {
        return top;
    }
    if all_in_half {
        let rest: f64 = logs[1..].iter().map(|l| libm::exp(l - top)).sum();
        return top + libm::log(libm::exp(logs[0] - top) / 2.0 + rest / 14.0);
    }
    top + libm::log(logs.iter().map(|l| libm::exp(l - top)).sum::<f64>()) - libm::log(logs.len() as f64)
}

impl Dominance {
    /// The plan text's clause, after the score rule's numbers.
    pub fn describe(&self) -> String {
        format!(
            "{} rate_ppm={} alpha_ppm={} share_ppm={} share_alpha_ppm={}",
            self.clause(),
            self.rate_ppm,
            self.alpha_ppm,
            self.share_ppm,
            self.share_alpha_ppm
        )
    }

    /// The clause's word: `dominance-reach` with the reach condition, else `dominance`.
    pub fn clause(&self) -> &'static str {
        if self.reach_over.is_some() {
            "dominance-reach"
        } else {
            "dominance"
        }
    }

    /// Whether the numbers lie where they mean something: `R` in `[500000, 999999]` (a
    /// dominance crown below an even split would crown a worse model), the others in
    /// `[1, 999999]`.
    pub fn is_sane(&self) -> bool {
        (500_000..1_000_000).contains(&self.rate_ppm)
            && (1..1_000_000).contains(&self.alpha_ppm)
            && (1..1_000_000).contains(&self.share_ppm)
            && (1..1_000_000).contains(&self.share_alpha_ppm)
    }

    /// `ln` of the crown's average capital after `wins` and `losses` decisive games.
    pub fn log_capital(&self, wins: u64, losses: u64) -> f64 {
        let r = f64::from(self.rate_ppm) / 1e6;
        let logs: Vec<f64> = (0..DOMINANCE_BETS)
            .map(|k| {
                // lambda_k (1 - R) and lambda_k R, the latter 2^-k exactly (so the all-in
                // bet's loss factor is 0, not a rounding error either side of it).
                let stake = libm::exp2(-f64::from(k));
                term(wins, 1.0 + stake * (1.0 - r) / r) + term(losses, 1.0 - stake)
            })
            .collect();
        log_mean_exp(&logs, self.reach_over.is_some())
    }

    /// The crown: more than `R` of the decisive games won (in integers) and the capital
    /// at `ln(10^6 / alpha_ppm)`, moved by `slack` as the score rule's threshold is.
    pub fn crowns(&self, wins: u64, losses: u64, slack: f64) -> bool {
        u128::from(wins) * 1_000_000 > u128::from(wins + losses) * u128::from(self.rate_ppm)
            && self.log_capital(wins, losses) >= libm::log(1e6 / f64::from(self.alpha_ppm)) + slack
    }

    /// `ln` of the average capital of the bets that the share of challenges won is below
    /// `S = share`: eight bets `mu_k = 2^-k / (1 - S)` (k = 0..7) on `S - x`, `x` 1 for a
    /// win; the all-in one grows by `1 / (1 - S)` a challenge not won, so a copy is
    /// given up on in about 124 challenges.
    pub fn log_share_capital(&self, wins: u64, n: u64) -> f64 {
        let s = f64::from(self.share_ppm) / 1e6;
        let logs: Vec<f64> = (0..DOMINANCE_BETS)
            .map(|k| {
                let stake = libm::exp2(-f64::from(k));
                term(n - wins, 1.0 + stake * s / (1.0 - s)) + term(wins, 1.0 - stake)
            })
            .collect();
        log_mean_exp(&logs, self.reach_over.is_some())
    }

    /// Whether the crown is out of reach, so a "not better" stop may end the env: the
    /// contender has won less than `R` of its decisive games (at least one played), or
    /// its share of wins is below `share` and the bets against it reach
    /// `ln(10^6 / share_alpha_ppm)` (moved by `slack`); with `dominance-reach`, also when
    /// winning `floor((challenges - n) * share)` more, with no further loss, would not
    /// crown (the crown's own test at `-slack`: a slack that eases "out of reach" eases
    /// this too).
    pub fn is_out(&self, wins: u64, losses: u64, draws: u64, slack: f64) -> bool {
        let decisive = wins + losses;
        let n = decisive + draws;
        if decisive > 0 && u128::from(wins) * 1_000_000 < u128::from(decisive) * u128::from(self.rate_ppm) {
            return true;
        }
        if let Some(challenges) = self.reach_over {
            let more = u128::from(challenges.saturating_sub(n)) * u128::from(self.share_ppm) / 1_000_000;
            if !self.crowns(wins + more as u64, losses, -slack) {
                return true;
            }
        }
        n > 0
            && u128::from(wins) * 1_000_000 < u128::from(n) * u128::from(self.share_ppm)
            && self.log_share_capital(wins, n) >= libm::log(1e6 / f64::from(self.share_alpha_ppm)) + slack
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Dominance =
        Dominance { rate_ppm: 950_000, alpha_ppm: 5_000, share_ppm: 40_000, share_alpha_ppm: 50_000, reach_over: None };

    #[test]
    fn an_unbeaten_run_is_crowned_after_the_wins_its_numbers_need_and_one_loss_costs_the_all_in_bet() {
        let first = (1..1000u64).find(|&w| D.crowns(w, 0, 0.0)).unwrap();
        // (1/8) * (1/0.95)^w >= 200: 144 (the other bets add too little to move it).
        assert_eq!(first, 144);
        // Two losses: 336 wins (ledger-spec/02's vectors).
        assert!(!D.crowns(335, 2, 0.0) && D.crowns(336, 2, 0.0));
        assert!(!D.crowns(first - 1, 0, 0.0));
        // One loss zeroes the all-in bet: the same wins no longer crown.
        assert!(!D.crowns(first, 1, 0.0));
        assert!(D.log_capital(first, 1).is_finite());
        // Below R won: never, whatever the capital.
        assert!(!D.crowns(18, 1, 0.0) && !D.crowns(0, 0, 0.0));
    }

    #[test]
    fn the_crown_is_out_of_reach_after_losses_or_too_few_wins() {
        assert!(!D.is_out(0, 0, 0, 0.0));
        assert!(!D.is_out(10, 0, 500, 0.0), "wins 10 of 510 (2%): not yet shown rare");
        assert!(D.is_out(18, 1, 0, 0.0), "18 of 19 is below 0.95");
        assert!(!D.is_out(19, 1, 0, 0.0), "19 of 20 is exactly 0.95");
        // A copy: every challenge drawn; out once the bets against a 4% share pay 20.
        let copy = (1..2000u64).find(|&n| D.is_out(0, 0, n, 0.0)).unwrap();
        assert!((100..150).contains(&copy), "{copy}");
        // A contender winning 5% of challenges and never losing is not out at 4,000.
        assert!(!D.is_out(200, 0, 3800, 0.0));
    }

    /// Version 4's `dominance-reach` (ledger-spec/02's worked values): half the weight on
    /// the all-in bet crowns an unbeaten run at 114 wins and gives up on a copy at 72; one
    /// loss puts the crown out of reach unless the wins already won and 4% of the
    /// challenges left would still reach it.
    #[test]
    fn the_reach_clause_crowns_sooner_and_gives_up_once_the_crown_is_past_reach() {
        let (rule, _) = crate::evaluation::plan::parse_plan(crate::protocol::PLAN_V4).expect("a plan");
        let d = rule.dominance().expect("a dominance clause");
        assert_eq!((1..1000u64).find(|&w| d.crowns(w, 0, 0.0)), Some(114));
        assert_eq!(format!("{:.6} {:.6}", d.log_capital(114, 0), d.log_capital(113, 0)), "5.166863 5.115980");
        assert_eq!((1..1000u64).find(|&w| d.crowns(w, 1, 0.0)), Some(325));
        assert_eq!((1..2000u64).find(|&n| d.is_out(0, 0, n, 0.0)), Some(72), "a copy");
        assert_eq!(format!("{:.6}", d.log_share_capital(0, 72)), "2.335289");
        // One loss at 400 challenges: 19 + 144 more wins are far from 325.
        assert!(d.is_out(19, 1, 380, 0.0));
        // With one loss, in reach from 205 wins at 1,000 challenges (205 + 120 = 325).
        assert_eq!((0..1000u64).find(|&w| !d.is_out(w, 1, 999 - w, 0.0)), Some(205));
        // With no loss: at 3,000 challenges, 89 wins and 40 more reach 114 (88 do not).
        assert!(!d.is_out(89, 0, 2911, 0.0) && d.is_out(88, 0, 2912, 0.0));
        // Version 2's clause has no reach condition: the one loss at 400 leaves it in reach.
        assert!(!D.is_out(19, 1, 380, 0.0));
    }
}
