//! Exact per-environment figures of a `score` plan, by dynamic programs over the state
//! the rule reads: `(n, h)`, challenges played and half-points (2 wins + draws). No
//! sampling noise: these are the numbers ledger-spec/02 and the decisions benchmark print.
//!
//! For each `n` the rule stops on two intervals of `h`: a crown at `h >= up(n)`, and "not
//! better" at `h <= down(n)`. The futility stop reads wins and draws apart, and only ever
//! ends a path as "not better", so the false-crown figures over `(n, h)` bound every plan
//! with futility from above; [`env_figures_with_futility`] gives a plan's own figures
//! over `(n, w, d)`. The mixture's
//! log statistic is convex in the score for fixed `n` (a sum of log-gamma terms), so each
//! side is one interval, found by bisection; [`Boundaries::check`] confirms the intervals
//! against the rule state by state for the caps tests use.
//!
//! [`worst_false_crown`] is the adaptive case: a contender not better than the bar (mean
//! score at most `p0`) that picks its outcome distribution at every challenge from
//! everything seen so far, to maximise the chance of a crown. The best such strategy is a
//! Markov decision process over `(n, h)`; its value is linear in the distribution, so the
//! maximum is at a vertex of the set of allowed distributions (for `p0 >= 1/2`: win `p0`
//! or lose; win `2 p0 - 1` or draw; always lose; always draw).

use super::stopping::{StoppingRule, Verdict};

/// Where a `score` plan stops at each `n` up to its cap.
pub struct Boundaries {
    /// Per `n`: the smallest `h` that crowns (`2n + 1` if none).
    up: Vec<u64>,
    /// Per `n`: the largest `h` that stops as not better, or -1 if none.
    down: Vec<i64>,
}

impl Boundaries {
    /// The stopping intervals of `rule` (a `score` rule) against `p0`, for `n` in
    /// `0..=cap`.
    pub fn new(rule: &StoppingRule, cap: u64, p0: f64) -> Boundaries {
        assert!(rule.counts_draws(), "exact figures are for score rules");
        let rule = &score_rule_alone(rule);
        let crowns = |n: u64, h: u64| verdict(rule, n, h, p0) == Verdict::Better;
        let stops_low = |n: u64, h: u64| verdict(rule, n, h, p0) == Verdict::NotBetter;
        let mut up = Vec::with_capacity(cap as usize + 1);
        let mut down = Vec::with_capacity(cap as usize + 1);
        for n in 0..=cap {
            // Crowns form an upper interval: bisect for its lowest point.
            let (mut low, mut high) = (0u64, 2 * n + 1); // !crowns(low - 1) boundary; crowns(high) or past the end
            if n == 0 || !crowns(n, 2 * n) {
                up.push(2 * n + 1);
            } else {
                while high - low > 1 {
                    let mid = low + (high - low) / 2;
                    if crowns(n, mid) {
                        high = mid;
                    } else {
                        low = mid;
                    }
                }
                up.push(if crowns(n, low) { low } else { high });
            }
            // Low stops form a lower interval: bisect for its highest point.
            if n == 0 || !stops_low(n, 0) {
                down.push(-1);
            } else {
                down.push(highest_where(2 * n + 1, |h| stops_low(n, h)) as i64);
            }
        }
        Boundaries { up, down }
    }

    /// Whether the intervals are exactly the rule's stops at every state up to the cap
    /// (a state-by-state check, O(cap^2) rule evaluations).
    pub fn check(&self, rule: &StoppingRule, p0: f64) -> Result<(), String> {
        let rule = &score_rule_alone(rule);
        for n in 1..self.up.len() as u64 {
            for h in 0..=2 * n {
                let verdict = verdict(rule, n, h, p0);
                let (want_up, want_low) = (verdict == Verdict::Better, verdict == Verdict::NotBetter);
                if want_up != (h >= self.up[n as usize]) || want_low != (h as i64 <= self.down[n as usize]) {
                    return Err(format!("n {n} h {h}: rule says {verdict:?}, intervals disagree"));
                }
            }
        }
        Ok(())
    }

    fn stop(&self, n: usize, h: usize) -> Option<bool> {
        if h as u64 >= self.up[n] {
            Some(true)
        } else if (h as i64) <= self.down[n] {
            Some(false)
        } else {
            None
        }
    }
}

/// A `score` rule without its dominance crown: what reads `(n, h)` alone.
pub fn score_rule_alone(rule: &StoppingRule) -> StoppingRule {
    rule.with_dominance(None)
}

fn verdict(rule: &StoppingRule, n: u64, h: u64, p0: f64) -> Verdict {
    // Only (n, h) matters to a score rule: any split of h into wins and draws will do.
    let (wins, draws) = (h / 2, h % 2);
    rule.verdict_on(wins as u32, (n - wins - draws) as u32, draws as u32, p0)
}

/// Exact outcome figures of one env.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct EnvFigures {
    pub better: f64,
    pub not_better: f64,
    /// Reached the challenge cap undecided.
    pub inconclusive: f64,
    pub expected_challenges: f64,
    /// The smallest `n` by which the env has stopped with probability at least 1/2.
    pub median_challenges: u64,
}

/// One env played to `cap` challenges, each a win with probability `win` and a loss with
/// `loss` (a draw otherwise), under the precomputed `bounds`.
pub fn env_figures(bounds: &Boundaries, cap: u64, win: f64, loss: f64) -> EnvFigures {
    let draw = 1.0 - win - loss;
    let mut mass = vec![0.0f64; 2 * cap as usize + 3];
    mass[0] = 1.0;
    let (mut better, mut not_better, mut expected) = (0.0, 0.0, 0.0);
    let mut median = None;
    for n in 1..=cap as usize {
        expected += mass[..=2 * (n - 1)].iter().sum::<f64>();
        for h in (0..=2 * (n - 1)).rev() {
            let m = mass[h];
            mass[h] = m * loss;
            mass[h + 1] += m * draw;
            mass[h + 2] += m * win;
        }
        for (h, m) in mass[..=2 * n].iter_mut().enumerate() {
            match bounds.stop(n, h) {
                Some(true) => better += *m,
                Some(false) => not_better += *m,
                None => continue,
            }
            *m = 0.0;
        }
        if median.is_none() && better + not_better >= 0.5 {
            median = Some(n as u64);
        }
    }
    EnvFigures {
        better,
        not_better,
        inconclusive: (1.0 - better - not_better).max(0.0),
        expected_challenges: expected,
        median_challenges: median.unwrap_or(cap),
    }
}

/// [`env_figures`] with the plan's futility stop too, exact: the futility stop reads wins
/// and draws apart, so this runs over `(n, w, d)`. The rule's stop comes first at the same
/// counts (a crown wins over futility, ledger-spec/02). For fixed `n` and `d` the bets'
/// capital falls as wins grow, so futility holds on a lower interval of `w`, found by
/// bisection once per `(n, d)` reached. Cells whose probability falls under `PRUNE` are
/// dropped (at most `pruned` of the mass, reported), which keeps the live region to the
/// few standard deviations around the mean, so a cap of 4,000 takes seconds.
pub fn env_figures_with_futility(
    bounds: &Boundaries,
    futility: &super::futility::BarFutility,
    p0_ppm: u32,
    cap: u64,
    win: f64,
    loss: f64,
) -> (EnvFigures, f64) {
    let futile = |w: u64, l: u64, d: u64| futility.is_futile(w, l, d, p0_ppm, 0.0);
    env_figures_with_stop(bounds, &futile, cap, win, loss)
}

/// [`env_figures_with_futility`] for any futility stop `futile(wins, losses, draws)` that,
/// for fixed challenges and draws, holds on a lower interval of wins (a candidate plan's,
/// for the decisions benchmark).
pub fn env_figures_with_stop(
    bounds: &Boundaries,
    futile: &dyn Fn(u64, u64, u64) -> bool,
    cap: u64,
    win: f64,
    loss: f64,
) -> (EnvFigures, f64) {
    let crowns = |w: u64, l: u64, d: u64| bounds.stop((w + l + d) as usize, (2 * w + d) as usize) == Some(true);
    let dismisses = |w: u64, l: u64, d: u64| {
        bounds.stop((w + l + d) as usize, (2 * w + d) as usize) == Some(false) || futile(w, l, d)
    };
    env_figures_of(&crowns, &dismisses, cap, win, loss)
}

/// The exact per-env figures of a whole plan: its rule (the score rule and a dominance
/// crown), its futility stop, and the dominance crown's hold on every "not better" stop,
/// over `(n, w, d)`. `futility` None for a plan without one.
pub fn plan_env_figures(
    rule: &StoppingRule,
    futility: Option<&super::futility::BarFutility>,
    bounds: &Boundaries,
    p0_ppm: u32,
    cap: u64,
    win: f64,
    loss: f64,
) -> (EnvFigures, f64) {
    let stops = PlanStops::new(rule, futility, bounds, p0_ppm);
    env_figures_of(&|w, l, d| stops.crowns(w, l, d), &|w, l, d| stops.dismisses(w, l, d), cap, win, loss)
}

/// One env over `(n, w, d)` with any stop that, for fixed challenges and draws, crowns on
/// an upper interval of wins (`crowns(w, l, d)`) and dismisses on a lower one
/// (`dismisses`); a crown comes first at the same counts.
pub fn env_figures_of(
    crowns: &dyn Fn(u64, u64, u64) -> bool,
    dismisses: &dyn Fn(u64, u64, u64) -> bool,
    cap: u64,
    win: f64,
    loss: f64,
) -> (EnvFigures, f64) {
    const PRUNE: f64 = 1e-22;
    let draw = 1.0 - win - loss;
    let side = cap as usize + 2;
    // mass[w * side + d] for the current n; updated in place, highest indexes first.
    let mut mass = vec![0.0f64; side * side];
    mass[0] = 1.0;
    let (mut w_hi, mut d_hi, mut w_lo, mut d_lo) = (0usize, 0usize, 0usize, 0usize);
    let (mut better, mut not_better, mut expected, mut pruned) = (0.0, 0.0, 0.0, 0.0);
    let mut median = None;
    for n in 1..=cap as usize {
        for w in (w_lo..=w_hi + 1).rev() {
            for d in (d_lo..=d_hi + 1).rev() {
                let here = if w <= w_hi && d <= d_hi { mass[w * side + d] } else { 0.0 };
                let from_draw = if d > d_lo && w <= w_hi { mass[w * side + d - 1] } else { 0.0 };
                let from_win = if w > w_lo && d <= d_hi { mass[(w - 1) * side + d] } else { 0.0 };
                let m = here * loss + from_draw * draw + from_win * win;
                mass[w * side + d] = m;
            }
        }
        expected += 1.0 - better - not_better - pruned; // challenge n is played
        w_hi += 1;
        d_hi += 1;
        // Stops at n, and the box of what lives on.
        let (mut new_w_lo, mut new_w_hi, mut new_d_lo, mut new_d_hi) = (usize::MAX, 0, usize::MAX, 0);
        for d in d_lo..=d_hi.min(n) {
            // Dismissed for w <= low, crowned for w >= up (None: for no w), among w + d <= n.
            let (n_u, d_u) = (n as u64, d as u64);
            let low = futility_threshold(dismisses, n_u, d_u);
            let up = crown_threshold(crowns, n_u, d_u);
            for w in w_lo..=w_hi.min(n - d) {
                let cell = &mut mass[w * side + d];
                let m = *cell;
                if m == 0.0 {
                    continue;
                }
                match () {
                    _ if up.is_some_and(|t| w as u64 >= t) => better += m,
                    _ if low.is_some_and(|t| w as u64 <= t) => not_better += m,
                    _ if m < PRUNE => pruned += m,
                    _ => {
                        (new_w_lo, new_w_hi) = (new_w_lo.min(w), new_w_hi.max(w));
                        (new_d_lo, new_d_hi) = (new_d_lo.min(d), new_d_hi.max(d));
                        continue;
                    }
                }
                *cell = 0.0;
            }
        }
        if median.is_none() && better + not_better >= 0.5 {
            median = Some(n as u64);
        }
        if new_w_lo == usize::MAX {
            break;
        }
        (w_lo, w_hi, d_lo, d_hi) = (new_w_lo, new_w_hi, new_d_lo, new_d_hi);
    }
    let figures = EnvFigures {
        better,
        not_better,
        inconclusive: (1.0 - better - not_better - pruned).max(0.0),
        expected_challenges: expected,
        median_challenges: median.unwrap_or(cap),
    };
    (figures, pruned)
}

/// The largest `w` (with `w + d <= n`) at which the futility stop holds after `n`
/// challenges of which `d` are draws, or None: it holds on a lower interval of `w`.
fn futility_threshold(futile: &dyn Fn(u64, u64, u64) -> bool, n: u64, d: u64) -> Option<u64> {
    let futile = |w: u64| futile(w, n - d - w, d);
    if d > n || !futile(0) {
        return None;
    }
    Some(highest_where(n - d + 1, futile))
}

/// The smallest `w` (with `w + d <= n`) at which `crowns` holds after `n` challenges of
/// which `d` are draws, or None: it holds on an upper interval of `w`.
fn crown_threshold(crowns: &dyn Fn(u64, u64, u64) -> bool, n: u64, d: u64) -> Option<u64> {
    if d > n || !crowns(n - d, 0, d) {
        return None;
    }
    // The lowest w that crowns: past the highest that does not.
    let (mut low, mut high) = (0u64, n - d); // crowns(high); low is below or fails
    if crowns(0, n - d, d) {
        return Some(0);
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if crowns(mid, n - d - mid, d) {
            high = mid;
        } else {
            low = mid;
        }
    }
    Some(high)
}

/// The chance that a dominance crown is ever reached within `cap` decisive games by a
/// contender winning each with probability `rate` (its `R` for the worst case): draws
/// leave the crown's capital as it is, so no placing of draws does better than none, and
/// winning more often only helps. Exact, over `(decisive games, wins)`.
pub fn dominance_crown_chance(dominance: &super::dominance::Dominance, cap: u64, rate: f64) -> f64 {
    let cap = cap as usize;
    let mut mass = vec![0.0f64; cap + 2];
    mass[0] = 1.0;
    let mut crowned = 0.0;
    for m in 1..=cap {
        for w in (0..=m).rev() {
            let from_win = if w > 0 { mass[w - 1] } else { 0.0 };
            mass[w] = mass[w] * (1.0 - rate) + from_win * rate;
        }
        // Crowns on an upper interval of wins at m decisive games.
        let m_u = m as u64;
        let mut first = None;
        for w in (0..=m_u).rev() {
            if !dominance.crowns(w, m_u - w, 0.0) {
                break;
            }
            first = Some(w);
        }
        if let Some(first) = first {
            for cell in &mut mass[first as usize..=m] {
                crowned += *cell;
                *cell = 0.0;
            }
        }
    }
    crowned
}

/// The highest `x` below `end` where `holds`, for a predicate that holds on a lower
/// interval starting at 0 (the caller has seen it hold at 0): by bisection.
fn highest_where(end: u64, holds: impl Fn(u64) -> bool) -> u64 {
    let (mut low, mut high) = (0u64, end); // holds(low); high is past the end or fails
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if holds(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

/// The vertices of the outcome odds `(win, draw, loss)` a contender that is **not
/// better** than the bar `p0` may play at one challenge (mean score at most `p0`, at most
/// `rate` of the decisive games won): always lose; always draw; win `p0` or lose; and win
/// `b`, lose `b (1 - rate) / rate`, draw the rest, with the mean at `p0`. The expected
/// cost is linear in the odds, so the worst adaptive strategy plays one of them at each
/// state (issue 76).
pub fn not_better_vertices(p0: f64, rate: f64) -> [(f64, f64, f64); 4] {
    let lose_per_win = (1.0 - rate) / rate;
    let b = (p0 - 0.5) / (1.0 - (1.0 + lose_per_win) / 2.0);
    [(0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (p0, 0.0, 1.0 - p0), (b, 1.0 - b - b * lose_per_win, b * lose_per_win)]
}

/// The most challenges, in expectation, any contender can make one env last by choosing
/// its odds at every challenge from `actions` after everything seen (issue 76's bound on
/// what a contender not better than the bar costs), and the same for the first action
/// played throughout. Backward induction over `(n, w, d)` under any stop that, for fixed
/// challenges and draws, crowns on an upper interval of wins and dismisses on a lower one
/// (as [`env_figures_of`]); O(cap^3) states, each row of a layer in parallel.
pub fn worst_expected_challenges(
    crowns: &(dyn Fn(u64, u64, u64) -> bool + Sync),
    dismisses: &(dyn Fn(u64, u64, u64) -> bool + Sync),
    cap: u64,
    actions: &[(f64, f64, f64)],
) -> (f64, f64) {
    use rayon::prelude::*;
    let cap = cap as usize;
    // Per (n, d): wins that go on lie strictly between `low` (dismissed at or below) and
    // `up` (crowned at or above).
    let at = |n: usize, d: usize| n * (n + 1) / 2 + d;
    let bounds: Vec<(i64, i64)> = (0..=cap)
        .into_par_iter()
        .flat_map_iter(|n| {
            (0..=n).map(move |d| {
                if n == 0 {
                    return (-1, 1);
                }
                let (n_u, d_u) = (n as u64, d as u64);
                let low = futility_threshold(dismisses, n_u, d_u).map_or(-1, |w| w as i64);
                let up = crown_threshold(crowns, n_u, d_u).map_or(n_u as i64 - d_u as i64 + 1, |w| w as i64);
                (low, up)
            })
        })
        .collect();
    let goes_on = |n: usize, w: usize, d: usize| {
        let (low, up) = bounds[at(n, d)];
        (w as i64) > low && (w as i64) < up
    };
    let side = cap + 2;
    // value[d * side + w]: expected challenges still to play after n, at n + 1 then n.
    let (mut next, mut here) = (vec![0.0f64; side * side], vec![0.0f64; side * side]);
    let (mut next_first, mut here_first) = (next.clone(), next.clone());
    for n in (0..cap).rev() {
        let rows: Vec<(usize, Vec<f64>, Vec<f64>)> = (0..=n)
            .into_par_iter()
            .map(|d| {
                let value = |layer: &[f64], w: usize, d: usize| {
                    if goes_on(n + 1, w, d) {
                        layer[d * side + w]
                    } else {
                        0.0
                    }
                };
                let (mut row, mut row_first) = (vec![0.0; n - d + 1], vec![0.0; n - d + 1]);
                for w in 0..=n - d {
                    if !goes_on(n, w, d) {
                        continue;
                    }
                    let step = |layer: &[f64], &(win, draw, loss): &(f64, f64, f64)| {
                        1.0 + win * value(layer, w + 1, d) + draw * value(layer, w, d + 1) + loss * value(layer, w, d)
                    };
                    row[w] = actions.iter().map(|a| step(&next, a)).fold(0.0, f64::max);
                    row_first[w] = step(&next_first, &actions[0]);
                }
                (d, row, row_first)
            })
            .collect();
        for (d, row, row_first) in rows {
            here[d * side..d * side + row.len()].copy_from_slice(&row);
            here_first[d * side..d * side + row_first.len()].copy_from_slice(&row_first);
        }
        std::mem::swap(&mut next, &mut here);
        std::mem::swap(&mut next_first, &mut here_first);
    }
    (next[0], next_first[0])
}

/// The crown and dismissal of a whole `score` plan at one env's counts against the bar
/// `p0_ppm`: the score rule's stops read from its precomputed `bounds` (built from the
/// same score rule), then the dominance crown, the futility stop and the crown's hold on
/// every dismissal. What [`plan_env_figures`] and [`worst_expected_challenges`] read.
pub struct PlanStops<'a> {
    rule: &'a StoppingRule,
    futility: Option<&'a super::futility::BarFutility>,
    bounds: &'a Boundaries,
    p0_ppm: u32,
}

impl<'a> PlanStops<'a> {
    pub fn new(
        rule: &'a StoppingRule,
        futility: Option<&'a super::futility::BarFutility>,
        bounds: &'a Boundaries,
        p0_ppm: u32,
    ) -> Self {
        PlanStops { rule, futility, bounds, p0_ppm }
    }

    fn score(&self, w: u64, l: u64, d: u64) -> Option<bool> {
        self.bounds.stop((w + l + d) as usize, (2 * w + d) as usize)
    }

    /// A crown, by the score rule or the dominance crown.
    pub fn crowns(&self, w: u64, l: u64, d: u64) -> bool {
        self.score(w, l, d) == Some(true) || self.rule.dominance().is_some_and(|dom| dom.crowns(w, l, 0.0))
    }

    /// A "not better" stop (the rule's or the futility stop's) with the dominance crown
    /// out of reach.
    pub fn dismisses(&self, w: u64, l: u64, d: u64) -> bool {
        (self.score(w, l, d) == Some(false) || self.futility.is_some_and(|f| f.is_futile(w, l, d, self.p0_ppm, 0.0)))
            && self.rule.dominance().is_none_or(|dom| dom.is_out(w, l, d, 0.0))
    }
}

/// The highest chance of a crown any contender whose mean score never exceeds `p0`
/// (`1/2 <= p0 < 1`) can reach in one env within `cap` challenges, choosing its outcome
/// odds adaptively, and that strategy's figure against a contender that never draws
/// (`(worst, no_draws)`). Backward induction over `(n, h)`.
pub fn worst_false_crown(bounds: &Boundaries, cap: u64, p0: f64) -> (f64, f64) {
    assert!((0.5..1.0).contains(&p0));
    // (win, draw, loss) vertices of the null set.
    let actions = [(p0, 0.0, 1.0 - p0), (2.0 * p0 - 1.0, 2.0 - 2.0 * p0, 0.0), (0.0, 0.0, 1.0), (0.0, 1.0, 0.0)];
    let cap = cap as usize;
    let mut next = vec![0.0f64; 2 * cap + 1]; // value at n + 1
    let mut next_plain = vec![0.0f64; 2 * cap + 1];
    for (h, (v, plain)) in next.iter_mut().zip(next_plain.iter_mut()).enumerate() {
        let value = if bounds.stop(cap, h) == Some(true) { 1.0 } else { 0.0 };
        (*v, *plain) = (value, value);
    }
    for n in (0..cap).rev() {
        let mut here = vec![0.0f64; 2 * n + 1];
        let mut here_plain = vec![0.0f64; 2 * n + 1];
        for h in 0..=2 * n {
            if n > 0 {
                if let Some(crowned) = bounds.stop(n, h) {
                    let value = if crowned { 1.0 } else { 0.0 };
                    (here[h], here_plain[h]) = (value, value);
                    continue;
                }
            }
            here[h] =
                actions.iter().map(|&(w, d, l)| w * next[h + 2] + d * next[h + 1] + l * next[h]).fold(0.0, f64::max);
            here_plain[h] = p0 * next_plain[h + 2] + (1.0 - p0) * next_plain[h];
        }
        next = here;
        next_plain = here_plain;
    }
    (next[0], next_plain[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::futility::BarFutility;
    use crate::evaluation::stopping::DEFAULT_RULE;

    #[test]
    fn intervals_are_the_rules_stops_state_by_state() {
        for p0 in [0.51, 0.7, 0.9] {
            let bounds = Boundaries::new(&DEFAULT_RULE, 300, p0);
            bounds.check(&DEFAULT_RULE, p0).unwrap();
        }
    }

    /// P(crowned) and P(not better) of one env by a plain walk of every `(w, d)` state, no
    /// pruning: the rule's own verdict first, then the futility stop where the rule lets
    /// a dismissal end the env.
    fn walk(rule: &StoppingRule, futility: &BarFutility, p0: f64, cap: u64, win: f64, loss: f64) -> (f64, f64) {
        let p0_ppm = (p0 * 1e6).round() as u32;
        let draw = 1.0 - win - loss;
        let mut mass = std::collections::BTreeMap::from([((0u64, 0u64), 1.0f64)]);
        let (mut better, mut not_better) = (0.0, 0.0);
        for n in 1..=cap {
            let mut next = std::collections::BTreeMap::new();
            for ((w, d), m) in mass {
                for (dw, dd, p) in [(1, 0, win), (0, 1, draw), (0, 0, loss)] {
                    *next.entry((w + dw, d + dd)).or_insert(0.0) += m * p;
                }
            }
            mass = std::collections::BTreeMap::new();
            for ((w, d), m) in next {
                let (w32, l32, d32) = (w as u32, (n - w - d) as u32, d as u32);
                let verdict = rule.verdict_on(w32, l32, d32, p0);
                let futile = futility.is_futile(w, n - w - d, d, p0_ppm, 0.0) && rule.dismissable(w32, l32, d32, 0.0);
                if verdict == Verdict::Better {
                    better += m;
                } else if verdict == Verdict::NotBetter || futile {
                    not_better += m;
                } else {
                    mass.insert((w, d), m);
                }
            }
        }
        (better, not_better)
    }

    /// The futility program (version 1's rule, no dominance crown) and the whole plan's
    /// program (a dominance crown with numbers that decide within a small cap, its hold on
    /// every dismissal, the futility stop) against the walk: the same figures.
    #[test]
    fn the_programs_agree_with_a_walk_of_every_state() {
        use crate::evaluation::dominance::Dominance;
        use crate::evaluation::futility::{Futility, DEFAULT_FUTILITY};
        let Futility::Bar(futility) = DEFAULT_FUTILITY else { panic!("a bar futility") };
        let cap = 150u64;
        let v1 = score_rule_alone(&DEFAULT_RULE);
        let bounds = Boundaries::new(&v1, cap, 0.6);
        for (win, loss) in [(0.55, 0.35), (0.3, 0.1), (0.7, 0.3)] {
            let (figures, pruned) = env_figures_with_futility(&bounds, &futility, 600_000, cap, win, loss);
            let (better, not_better) = walk(&v1, &futility, 0.6, cap, win, loss);
            assert!(pruned < 1e-15, "{pruned}");
            assert!((figures.better - better).abs() < 1e-12, "{figures:?} against {better}");
            assert!((figures.not_better - not_better).abs() < 1e-12, "{figures:?} against {not_better}");
        }
        let dominance = Dominance {
            rate_ppm: 800_000,
            alpha_ppm: 50_000,
            share_ppm: 100_000,
            share_alpha_ppm: 50_000,
            reach_over: None,
        };
        let rule = DEFAULT_RULE.with_max_challenges(cap).with_dominance(Some(dominance));
        let bounds = Boundaries::new(&rule, cap, 0.7);
        for (win, loss) in [(0.2, 0.0), (0.3, 0.05), (0.05, 0.0), (0.6, 0.3)] {
            let (figures, pruned) = plan_env_figures(&rule, Some(&futility), &bounds, 700_000, cap, win, loss);
            let (better, not_better) = walk(&rule, &futility, 0.7, cap, win, loss);
            assert!(pruned < 1e-15, "{pruned}");
            if win >= 0.2 && loss == 0.0 {
                assert!(better > 0.5, "an unbeaten contender is crowned by dominance: {better}");
            }
            assert!((figures.better - better).abs() < 1e-12, "{win} {loss}: {figures:?} against {better}");
            assert!((figures.not_better - not_better).abs() < 1e-12, "{figures:?} against {not_better}");
        }
    }

    /// The dominance crown's worst case: a contender winning exactly `R` of its decisive
    /// games is crowned at most `alpha` of the time (Ville), and far less at 0.95 and
    /// 0.5% (ledger-spec/02: 0.001630); one that never loses always is.
    #[test]
    fn the_dominance_crowns_worst_case_is_below_its_level() {
        use crate::evaluation::stopping::DEFAULT_DOMINANCE as D;
        let worst = dominance_crown_chance(&D, 4000, 0.95);
        assert_eq!(format!("{worst:.6}"), "0.001630");
        assert!(dominance_crown_chance(&D, 4000, 0.9) < worst);
        assert!((dominance_crown_chance(&D, 200, 1.0) - 1.0).abs() < 1e-12);
        assert_eq!(dominance_crown_chance(&D, 143, 1.0), 0.0);
    }

    /// Two cells of ledger-spec/02's table, at the plan's cap of 4,000 (no draws, so the
    /// program runs on one line of draws and is quick even unoptimised).
    #[test]
    fn the_specs_table_figures_without_draws() {
        use crate::evaluation::futility::{Futility, DEFAULT_FUTILITY};
        let Futility::Bar(futility) = DEFAULT_FUTILITY else { panic!("a bar futility") };
        let above = Boundaries::new(&DEFAULT_RULE, 4000, 0.51);
        let (f, pruned) = env_figures_with_futility(&above, &futility, 510_000, 4000, 0.61, 0.39);
        assert_eq!(format!("{:.6}", f.better), "0.997981", "{f:?} (pruned {pruned})");
        let at = Boundaries::new(&DEFAULT_RULE, 4000, 0.9);
        let (f, _) = env_figures_with_futility(&at, &futility, 900_000, 4000, 0.9, 0.1);
        assert_eq!(f.median_challenges, 173, "{f:?}");
    }

    /// The worst adaptive cost against the plain programs: played with one action only it
    /// is that contender's expected challenges (`env_figures_of`), and the best of the
    /// four vertices adaptively is at least each of them played throughout.
    #[test]
    fn the_worst_adaptive_cost_is_at_least_every_fixed_contenders_and_equal_to_one_played_alone() {
        let cap = 120u64;
        let (rule, futility) = crate::evaluation::plan::parse_plan(crate::protocol::PLAN_V4).expect("a plan");
        let rule = rule.with_max_challenges(cap);
        let Some(crate::evaluation::futility::Futility::Bar(bar)) = futility else { panic!("a bar futility") };
        let bar = BarFutility { rise: bar.rise.map(|r| crate::evaluation::futility::Rise { over: cap, ..r }), ..bar };
        for p0 in [0.51, 0.7, 0.95] {
            let bounds = Boundaries::new(&rule, cap, p0);
            let stops = PlanStops::new(&rule, Some(&bar), &bounds, (p0 * 1e6).round() as u32);
            let (crowns, dismisses) = (|w, l, d| stops.crowns(w, l, d), |w, l, d| stops.dismisses(w, l, d));
            let vertices = not_better_vertices(p0, 0.95);
            let (worst, _) = worst_expected_challenges(&crowns, &dismisses, cap, &vertices);
            for vertex in vertices {
                let (alone, first) = worst_expected_challenges(&crowns, &dismisses, cap, &[vertex]);
                assert!((alone - first).abs() < 1e-9);
                let (figures, pruned) = env_figures_of(&crowns, &dismisses, cap, vertex.0, vertex.2);
                assert!(pruned < 1e-12);
                assert!((alone - figures.expected_challenges).abs() < 1e-6, "{p0} {vertex:?}: {alone} {figures:?}");
                assert!(worst >= alone - 1e-9, "{p0}: {worst} < {alone}");
                let (win, draw, loss) = vertex;
                assert!((win + draw + loss - 1.0).abs() < 1e-12 && win + draw / 2.0 <= p0 + 1e-12);
                assert!(win * 0.05 <= loss * 0.95 + 1e-12, "at most 95% of decisive games won");
            }
        }
    }

    #[test]
    fn figures_add_up_and_adaptive_play_is_at_least_fixed_play() {
        let p0 = 0.7;
        let bounds = Boundaries::new(&DEFAULT_RULE, 400, p0);
        let fixed = env_figures(&bounds, 400, p0, 1.0 - p0);
        assert!((fixed.better + fixed.not_better + fixed.inconclusive - 1.0).abs() < 1e-9);
        let (worst, plain) = worst_false_crown(&bounds, 400, p0);
        assert!((plain - fixed.better).abs() < 1e-12, "the no-draw strategy is the fixed one: {plain} {fixed:?}");
        assert!(worst >= plain - 1e-15 && worst <= 1.0);
    }
}
