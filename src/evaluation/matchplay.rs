//! One match as a pure state machine: contender and champion answer the same
//! challenges, each pair of rewards is a win, loss or draw for the contender, each
//! environment's stopping rule runs on its scores (or, for the `mixture` plans of older
//! logs, its decisive games), and the match is decided by
//! majority: the contender needs more than half of the environments. Play in an
//! environment stops once it is decided, or once the match is decided either way.
//!
//! No IO and no clock: the validator loop feeds it game results and asks what to do.

use super::futility::Futility;
use super::stopping::{StoppingRule, Verdict};
use serde::Serialize;

/// Environments the contender must be better in to win a match over `n_envs`: a strict
/// majority.
pub fn majority_of(n_envs: usize) -> usize {
    n_envs / 2 + 1
}

/// The contender's result on one challenge against the champion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GameOutcome {
    Win,
    Loss,
    Draw,
}

impl GameOutcome {
    /// Compares the two rewards of one challenge.
    pub fn of_rewards(contender_milli: i32, champion_milli: i32) -> GameOutcome {
        match contender_milli.cmp(&champion_milli) {
            std::cmp::Ordering::Greater => GameOutcome::Win,
            std::cmp::Ordering::Less => GameOutcome::Loss,
            std::cmp::Ordering::Equal => GameOutcome::Draw,
        }
    }
}

/// How one environment ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvResult {
    Better,
    NotBetter,
    /// The cap on decisive games was reached: counts against the contender.
    Inconclusive,
    /// Stopped because the match was already decided.
    Abandoned,
    /// Stopped by the futility rule: the contender is shown not meaningfully better.
    /// Counts as not better.
    Futile,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EnvTally {
    pub wins: u32,
    pub losses: u32,
    pub draws: u32,
    /// Challenges played: the next challenge index of this env's schedule.
    pub n_challenges: u64,
    pub result: Option<EnvResult>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchVerdict {
    ContenderWins,
    ChampionStays,
    Undecided,
}

#[derive(Clone, Debug, Serialize)]
pub struct MatchState {
    pub rule: StoppingRule,
    /// Cap on decisive games per environment.
    pub cap: u32,
    /// Cap on challenges per environment, draws included: two equal miners can draw
    /// forever, and draws do not count toward `cap`.
    pub max_challenges: u64,
    /// Ratio to beat, as a probability.
    pub p0: f64,
    /// The futility stop, if the match uses one.
    pub futility: Option<Futility>,
    pub envs: Vec<EnvTally>,
    /// Per env, the advantage futility's win-rate bound at the (decisive, wins) it was
    /// computed for: it changes only with a decisive game, and computing it is the costly
    /// part.
    #[serde(skip)]
    win_rate_upper: Vec<Option<(u32, u32, f64)>>,
}

impl MatchState {
    /// Each env (named by `names`, in order) with its wins, losses and draws:
    /// `tictactoe 3W/1L/0D, mult ...`, as a decided match is logged.
    pub fn tallies(&self, names: &[String]) -> String {
        let parts: Vec<String> = names
            .iter()
            .zip(&self.envs)
            .map(|(name, t)| format!("{name} {}W/{}L/{}D", t.wins, t.losses, t.draws))
            .collect();
        parts.join(", ")
    }

    /// One line for a terminal: each env (named by `names`, in order) with its tally, or
    /// its result once it has one.
    pub fn progress_line(&self, names: &[String]) -> String {
        let parts: Vec<String> = names
            .iter()
            .zip(&self.envs)
            .map(|(name, tally)| match tally.result {
                Some(EnvResult::Better) => format!("{name} better"),
                Some(EnvResult::NotBetter) => format!("{name} not better"),
                Some(EnvResult::Futile) => format!("{name} not better (futility)"),
                Some(EnvResult::Inconclusive) => format!("{name} inconclusive"),
                Some(EnvResult::Abandoned) => format!("{name} -"),
                None => format!("{name} {}W/{}L/{}D", tally.wins, tally.losses, tally.draws),
            })
            .collect();
        parts.join(" · ")
    }

    pub fn new(n_envs: usize, rule: StoppingRule, cap: u32, max_challenges: u64, p0: f64) -> MatchState {
        assert!(n_envs > 0 && cap > 0 && max_challenges > 0);
        let tally = EnvTally { wins: 0, losses: 0, draws: 0, n_challenges: 0, result: None };
        MatchState {
            rule,
            cap,
            max_challenges,
            p0,
            futility: None,
            envs: vec![tally; n_envs],
            win_rate_upper: vec![None; n_envs],
        }
    }

    /// The same match with a futility stop (or none).
    pub fn with_futility(mut self, futility: Option<Futility>) -> MatchState {
        self.futility = futility;
        self
    }

    /// Environments the contender must win: more than half.
    pub fn needed(&self) -> usize {
        majority_of(self.envs.len())
    }

    pub fn verdict(&self) -> MatchVerdict {
        let better = self.envs.iter().filter(|e| e.result == Some(EnvResult::Better)).count();
        let open = self.envs.iter().filter(|e| e.result.is_none()).count();
        if better >= self.needed() {
            MatchVerdict::ContenderWins
        } else if better + open < self.needed() {
            MatchVerdict::ChampionStays
        } else {
            MatchVerdict::Undecided
        }
    }

    /// Whether to play another challenge in environment `env`.
    pub fn wants_more(&self, env: usize) -> bool {
        self.envs[env].result.is_none() && self.verdict() == MatchVerdict::Undecided
    }

    /// Records one challenge's outcome in `env`; returns the env's result if this ended it.
    /// Once the match is decided, every still-open env is marked abandoned.
    pub fn record(&mut self, env: usize, outcome: GameOutcome) -> Option<EnvResult> {
        assert!(self.wants_more(env), "env {env} is not being played");
        let (rule, cap, max_challenges, p0, futility) =
            (self.rule, self.cap, self.max_challenges, self.p0, self.futility);
        let tally = &mut self.envs[env];
        tally.n_challenges += 1;
        match outcome {
            GameOutcome::Win => tally.wins += 1,
            GameOutcome::Loss => tally.losses += 1,
            GameOutcome::Draw => tally.draws += 1,
        }
        let decisive = tally.wins + tally.losses;
        let result = match rule.verdict_on(tally.wins, tally.losses, tally.draws, p0) {
            Verdict::Better => Some(EnvResult::Better),
            Verdict::NotBetter => Some(EnvResult::NotBetter),
            Verdict::Continue
                if futility.is_some_and(|f| match f {
                    Futility::Advantage(f) => {
                        let cached = &mut self.win_rate_upper[env];
                        let p_up = match *cached {
                            Some((d, w, p_up)) if (d, w) == (decisive, tally.wins) => p_up,
                            _ => {
                                let p_up = f.win_rate_upper(decisive, tally.wins);
                                *cached = Some((decisive, tally.wins, p_up));
                                p_up
                            }
                        };
                        f.is_futile_given(tally.n_challenges, decisive, p_up)
                    }
                    Futility::Bar(_) => f.is_futile(tally.wins, tally.losses, tally.draws, p0),
                }) && rule.dismissable(tally.wins, tally.losses, tally.draws, 0.0) =>
            {
                Some(EnvResult::Futile)
            }
            // A score rule counts every challenge; the others cap decisive games too.
            Verdict::Continue if (!rule.counts_draws() && decisive >= cap) || tally.n_challenges >= max_challenges => {
                Some(EnvResult::Inconclusive)
            }
            Verdict::Continue => None,
        };
        tally.result = result;
        if self.verdict() != MatchVerdict::Undecided {
            for other in self.envs.iter_mut().filter(|e| e.result.is_none()) {
                other.result = Some(EnvResult::Abandoned);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::stopping::{DEFAULT_RULE, MIXTURE_RULE};

    #[test]
    fn a_match_is_shown_as_its_tallies_and_results() {
        let mut state = MatchState::new(2, DEFAULT_RULE, 10, 20, 0.5);
        state.envs[0] = EnvTally { wins: 3, losses: 1, draws: 2, n_challenges: 6, result: None };
        state.envs[1].result = Some(EnvResult::Futile);
        let names = ["sat".to_string(), "mult".to_string()];
        assert_eq!(state.tallies(&names), "sat 3W/1L/2D, mult 0W/0L/0D");
        assert_eq!(state.progress_line(&names), "sat 3W/1L/2D · mult not better (futility)");
    }

    fn play(state: &mut MatchState, env: usize, outcomes: &[GameOutcome]) {
        for outcome in outcomes {
            if state.wants_more(env) {
                state.record(env, *outcome);
            }
        }
    }

    #[test]
    fn rewards_compare_into_outcomes() {
        assert_eq!(GameOutcome::of_rewards(1000, 0), GameOutcome::Win);
        assert_eq!(GameOutcome::of_rewards(-1000, 0), GameOutcome::Loss);
        assert_eq!(GameOutcome::of_rewards(0, 0), GameOutcome::Draw);
    }

    #[test]
    fn majority_of_three_decides_early() {
        let mut state = MatchState::new(3, DEFAULT_RULE, 1000, 4000, 0.51);
        play(&mut state, 0, &[GameOutcome::Win; 60]);
        assert_eq!(state.envs[0].result, Some(EnvResult::Better));
        assert_eq!(state.verdict(), MatchVerdict::Undecided);
        play(&mut state, 1, &[GameOutcome::Win; 60]);
        assert_eq!(state.verdict(), MatchVerdict::ContenderWins);
        // The third env is no longer played.
        assert!(!state.wants_more(2));
        assert_eq!(state.envs[2].result, Some(EnvResult::Abandoned));
    }

    #[test]
    fn champion_stays_once_the_majority_is_out_of_reach() {
        let mut state = MatchState::new(4, DEFAULT_RULE, 1000, 4000, 0.51);
        play(&mut state, 0, &[GameOutcome::Loss; 60]);
        play(&mut state, 1, &[GameOutcome::Loss; 60]);
        // 4 envs need 3 wins; with 2 lost, 2 open can reach at most 2.
        assert_eq!(state.verdict(), MatchVerdict::ChampionStays);
        assert!(!state.wants_more(3));
    }

    #[test]
    fn mixture_plans_drop_draws_and_the_cap_is_inconclusive() {
        let mut state = MatchState::new(1, MIXTURE_RULE, 20, 600, 0.51);
        play(&mut state, 0, &[GameOutcome::Draw; 500]);
        assert_eq!(state.envs[0].result, None, "draws alone never decide");
        assert_eq!(state.envs[0].draws, 500);
        let alternating: Vec<GameOutcome> =
            (0..40).map(|i| if i % 2 == 0 { GameOutcome::Win } else { GameOutcome::Loss }).collect();
        play(&mut state, 0, &alternating);
        assert_eq!(state.envs[0].result, Some(EnvResult::Inconclusive));
        assert_eq!(state.envs[0].wins + state.envs[0].losses, 20);
        assert_eq!(state.verdict(), MatchVerdict::ChampionStays);
        // Endless draws end at the challenge cap.
        let mut draws = MatchState::new(1, MIXTURE_RULE, 20, 50, 0.51);
        play(&mut draws, 0, &[GameOutcome::Draw; 80]);
        assert_eq!(draws.envs[0].result, Some(EnvResult::Inconclusive));
        assert_eq!(draws.envs[0].n_challenges, 50);
    }

    #[test]
    fn score_plans_count_draws_as_half_and_cap_challenges_only() {
        // All draws score exactly 1/2: below a bar of 0.51, so the env ends not better.
        let mut state = MatchState::new(1, DEFAULT_RULE, 20, 100_000, 0.51);
        play(&mut state, 0, &[GameOutcome::Draw; 100_000]);
        assert_eq!(state.envs[0].result, Some(EnvResult::NotBetter));
        assert!(state.envs[0].n_challenges < 100_000);
        // One win in four, the rest drawn: a score of 0.625 crowns at a bar of 0.51, and the
        // decisive cap of 20 does not end a score rule's env.
        let mut patch = MatchState::new(1, DEFAULT_RULE, 20, 4000, 0.51);
        let games: Vec<GameOutcome> =
            (0..4000).map(|i| if i % 4 == 0 { GameOutcome::Win } else { GameOutcome::Draw }).collect();
        play(&mut patch, 0, &games);
        assert_eq!(patch.envs[0].result, Some(EnvResult::Better));
        assert!(patch.envs[0].wins > 20);
        // Alternating wins and losses score 1/2 and end at the challenge cap.
        let mut even = MatchState::new(1, DEFAULT_RULE, 20, 60, 0.5);
        let alternating: Vec<GameOutcome> =
            (0..60).map(|i| if i % 2 == 0 { GameOutcome::Win } else { GameOutcome::Loss }).collect();
        play(&mut even, 0, &alternating);
        assert_eq!(even.envs[0].result, Some(EnvResult::Inconclusive));
        assert_eq!(even.envs[0].n_challenges, 60);
    }
}
