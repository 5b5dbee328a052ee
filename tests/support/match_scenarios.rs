//! Seeded scenario simulation of whole matches through the real [`MatchState`]: every
//! env played in turn, each challenge's outcome drawn from the scenario's per-env
//! probabilities, until the match is decided. What it measures is what a validator pays
//! (model calls: two per challenge) and what it decides (crown or not), per rule
//! configuration. Test and benchmark support, outside the library: used by
//! `scripts/bench-decisions.sh`, `benches/stopping.rs` and the stopping tests.

use af::evaluation::futility::Futility;
use af::evaluation::matchplay::{GameOutcome, MatchState, MatchVerdict};
use af::evaluation::stopping::StoppingRule;

/// One environment's outcome probabilities for the contender: win, loss (draw is the rest).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EnvOdds {
    pub win: f64,
    pub loss: f64,
}

impl EnvOdds {
    /// `decisive` share of challenges decisive, won with probability `p` among them.
    pub fn new(decisive: f64, p: f64) -> EnvOdds {
        EnvOdds { win: decisive * p, loss: decisive * (1.0 - p) }
    }

    /// The contender's win rate among decisive games (1/2 with none).
    pub fn win_rate(&self) -> f64 {
        let decisive = self.win + self.loss;
        if decisive == 0.0 {
            0.5
        } else {
            self.win / decisive
        }
    }
}

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    pub envs: Vec<EnvOdds>,
}

/// The rate the bar is measured in for `rule`: the mean score (draws half) for a score
/// rule, the decisive win rate for the others.
pub fn rate_of(odds: &EnvOdds, rule: &StoppingRule) -> f64 {
    if rule.counts_draws() {
        odds.win + (1.0 - odds.win - odds.loss) / 2.0
    } else {
        odds.win_rate()
    }
}

/// A contender that copies the champion and changes a share `changed` of its answers,
/// winning a share `won` of those (the rest of the changed ones lost, all others drawn).
pub fn patch(changed: f64, won: f64) -> EnvOdds {
    EnvOdds { win: changed * won, loss: changed * (1.0 - won) }
}

/// The seven scenarios of the decisions benchmark, over `n_envs` environments.
pub fn scenarios(n_envs: usize) -> Vec<Scenario> {
    let all = |odds: EnvOdds| vec![odds; n_envs];
    let split =
        |first: EnvOdds, rest: EnvOdds, k: usize| (0..n_envs).map(|i| if i < k { first } else { rest }).collect();
    vec![
        Scenario { name: "1 exact copy (all draws)", envs: all(EnvOdds::new(0.0, 0.5)) },
        Scenario { name: "2 equal skill (30% decisive, half won)", envs: all(EnvOdds::new(0.3, 0.5)) },
        Scenario { name: "3 5 points better (50% decisive)", envs: all(EnvOdds::new(0.5, 0.55)) },
        Scenario { name: "4 10 points better (50% decisive)", envs: all(EnvOdds::new(0.5, 0.6)) },
        Scenario {
            name: "5 better on 2 envs, worse on 2",
            envs: split(EnvOdds::new(0.5, 0.6), EnvOdds::new(0.5, 0.4), n_envs / 2),
        },
        Scenario { name: "6 10 points worse", envs: all(EnvOdds::new(0.5, 0.4)) },
        Scenario {
            name: "7 specialist (far better on 1 env)",
            envs: split(EnvOdds::new(0.5, 0.9), EnvOdds::new(0.3, 0.5), 1),
        },
    ]
}

/// What one simulated match cost and decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Played {
    /// Model calls: two per challenge recorded (results past a decision are not counted).
    pub model_calls: u64,
    /// The most challenges any one env played.
    pub max_env_challenges: u64,
    pub crowned: bool,
}

/// splitmix64, so a seed gives the same outcomes on every machine (simulations only;
/// tasks draw from `envs::rng`).
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The rule configuration of a simulated match.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    pub rule: StoppingRule,
    pub futility: Option<Futility>,
    pub cap: u32,
    pub max_challenges: u64,
}

/// Plays one match of `scenario` at ratio to beat `p0`: envs take turns, one challenge
/// each, as a validator's windows interleave them. Each env draws from its own stream
/// (common random numbers): the k-th challenge of an env has the same outcome under every
/// configuration, so configurations are compared on the same games.
pub fn play(scenario: &Scenario, config: &Config, p0: f64, seed: u64) -> Played {
    let mut streams: Vec<SplitMix64> = (0..scenario.envs.len() as u64)
        .map(|env| SplitMix64(seed ^ env.wrapping_add(1).wrapping_mul(0xd1b5_4a32_d192_ed03)))
        .collect();
    let n_envs = scenario.envs.len();
    let mut state =
        MatchState::new(n_envs, config.rule, config.cap, config.max_challenges, p0).with_futility(config.futility);
    while state.verdict() == MatchVerdict::Undecided {
        for (env, odds) in scenario.envs.iter().enumerate() {
            if !state.wants_more(env) {
                continue;
            }
            let u = streams[env].unit();
            let outcome = if u < odds.win {
                GameOutcome::Win
            } else if u < odds.win + odds.loss {
                GameOutcome::Loss
            } else {
                GameOutcome::Draw
            };
            state.record(env, outcome);
        }
    }
    let challenges: Vec<u64> = state.envs.iter().map(|e| e.n_challenges).collect();
    Played {
        model_calls: 2 * challenges.iter().sum::<u64>(),
        max_env_challenges: challenges.iter().copied().max().unwrap_or(0),
        crowned: state.verdict() == MatchVerdict::ContenderWins,
    }
}

/// Summary of `n` seeded matches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub calls_mean: f64,
    pub calls_p50: u64,
    pub calls_p90: u64,
    /// Median over matches of the most challenges one env played.
    pub env_challenges_p50: u64,
    pub p_crowned: f64,
}

/// Summary of `n` (at least one) seeded matches.
pub fn summarize(scenario: &Scenario, config: &Config, p0: f64, n: u64, seed: u64) -> Summary {
    assert!(n > 0, "a summary of no matches");
    let mut calls = Vec::with_capacity(n as usize);
    let mut env_challenges = Vec::with_capacity(n as usize);
    let mut crowned = 0u64;
    for i in 0..n {
        let played = play(scenario, config, p0, seed.wrapping_mul(1_000_003).wrapping_add(i));
        calls.push(played.model_calls);
        env_challenges.push(played.max_env_challenges);
        crowned += u64::from(played.crowned);
    }
    calls.sort_unstable();
    env_challenges.sort_unstable();
    let quantile = |v: &[u64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Summary {
        calls_mean: calls.iter().sum::<u64>() as f64 / n as f64,
        calls_p50: quantile(&calls, 0.5),
        calls_p90: quantile(&calls, 0.9),
        env_challenges_p50: quantile(&env_challenges, 0.5),
        p_crowned: crowned as f64 / n as f64,
    }
}

/// Whether crowning would be right under `rule`'s measure of the bar.
pub fn crown_is_right_for(scenario: &Scenario, rule: &StoppingRule, p0: f64) -> bool {
    // With a dominance crown, an env whose decisive games the contender wins more than R
    // of is better whatever its score.
    let dominant = |odds: &EnvOdds| {
        rule.dominance().is_some_and(|d| odds.win > (odds.win + odds.loss) * f64::from(d.rate_ppm) / 1e6)
    };
    let better = scenario
        .envs
        .iter()
        .filter(|odds| odds.win + odds.loss > 0.0 && (rate_of(odds, rule) > p0 || dominant(odds)))
        .count();
    better > scenario.envs.len() / 2
}

/// Exact outcome probabilities of one env under `config` (futility included) when each
/// challenge is a win with probability `odds.win` and a loss with `odds.loss`: a dynamic
/// program over (challenges, decisive, wins), O(max_challenges^3 / 6). For tests of
/// small caps; the benchmark simulates.
pub fn exact_env_rates(config: &Config, odds: EnvOdds, p0: f64) -> af::evaluation::stopping::Rates {
    use af::evaluation::stopping::Verdict;
    let n_max = config.max_challenges as usize;
    let cap = config.cap as usize;
    let draw = 1.0 - odds.win - odds.loss;
    // mass[d][w]: probability of being still in play with d decisive games, w won.
    let mut mass = vec![vec![0.0f64; n_max + 2]; n_max + 2];
    mass[0][0] = 1.0;
    let mut p_up: Vec<Vec<Option<f64>>> = vec![vec![None; n_max + 2]; n_max + 2];
    let (mut better, mut not_better, mut expected) = (0.0, 0.0, 0.0);
    for t in 1..=n_max {
        expected += mass.iter().map(|row| row.iter().sum::<f64>()).sum::<f64>();
        // Advance one challenge, highest states first so each mass moves once.
        for d in (0..t).rev() {
            for w in (0..=d).rev() {
                let m = mass[d][w];
                if m == 0.0 {
                    continue;
                }
                mass[d][w] = m * draw;
                mass[d + 1][w + 1] += m * odds.win;
                mass[d + 1][w] += m * odds.loss;
            }
        }
        for d in 0..=t.min(n_max) {
            for w in 0..=d {
                let m = mass[d][w];
                if m == 0.0 {
                    continue;
                }
                let (wins, losses, draws) = (w as u32, (d - w) as u32, (t - d) as u32);
                let verdict = config.rule.verdict_on(wins, losses, draws, p0);
                let futile = verdict == Verdict::Continue
                    && config.futility.is_some_and(|f| match f {
                        Futility::Advantage(f) => {
                            let bound = *p_up[d][w].get_or_insert_with(|| f.win_rate_upper(d as u32, w as u32));
                            f.is_futile_given(t as u64, d as u32, bound)
                        }
                        Futility::Bar(_) => f.is_futile(wins, losses, draws, p0),
                    })
                    && config.rule.dismissable(wins, losses, draws, 0.0);
                let stop = match verdict {
                    Verdict::Better => {
                        better += m;
                        true
                    }
                    Verdict::NotBetter => {
                        not_better += m;
                        true
                    }
                    Verdict::Continue if futile => {
                        not_better += m;
                        true
                    }
                    Verdict::Continue => (!config.rule.counts_draws() && d >= cap) || t >= n_max,
                };
                if stop {
                    mass[d][w] = 0.0;
                }
            }
        }
    }
    let inconclusive = 1.0 - better - not_better;
    af::evaluation::stopping::Rates { better, not_better, inconclusive, expected_games: expected }
}
