//! Decisions benchmark: the `mixture` plan that logs were written with ("before": decisive
//! games only, futility on the advantage over 1/2) against the `score` plan ("after": draws
//! count half, futility against the bar), in one run.
//!
//! 1. Seeded whole matches (4 envs, the real `MatchState`) per scenario, with common random
//!    numbers: each env draws from its own stream, so both plans see the same games.
//! 2. Per-env figures of the score plan, exact from the dynamic programs of
//!    `evaluation::exact`: the worst adaptive false crown (the rule alone: futility only
//!    removes crowns) plus the dominance crown's worst, and with the whole plan a
//!    contender exactly at the bar at several decisive shares and one 10 points above it
//!    (ledger-spec/02's table).
//! 3. The plan's power curve, exact: P(crowned) per match against points above the bar,
//!    at decisive shares 0.25, 0.5 and 1, for bars 0.51, 0.7 and 0.9, version 1 (no
//!    dominance crown) against the plan; and never-worse improvers and copies
//!    (`improvers`), exact, at bars 0.51 to 0.95, with and without the dominance crown.
//! 4. Copy-and-patch: the bar a patched champion sets under each plan, and how long a
//!    broadly better model then waits for a crown (before: exact; after: simulated per
//!    env; a match is crowned when at least 3 of 4 envs are).
//! 5. What a contender costs (`costs`, issue 76), exact, version 2's plan against version
//!    4's: expected challenges per env and calls per match of a copy, an equal model, a
//!    stretcher and a never-worse model better on 5%; contenders at the bar (expected
//!    challenges, share reaching the cap); the worst expected challenges over every
//!    adaptive strategy of a contender not better than the bar; the frontier of the
//!    candidates, and the least any plan can spend crowning the 5%-better model.
//! 6. Candidate futility stops (`AF_BENCH_ONLY=candidates`), exact: the bar futility with
//!    its mean condition moved from `bar + margin` to `bar + slack`, over a grid of
//!    margins and slacks, against issue 54's targets for the bar's power.

#[allow(dead_code)] // the benchmarks use part of the tests' support
#[path = "../tests/support/match_scenarios.rs"]
mod match_scenarios;
use af::evaluation::dominance::Dominance;
use af::evaluation::exact::{
    dominance_crown_chance, env_figures_with_futility, plan_env_figures, worst_false_crown, Boundaries,
};
use af::evaluation::futility::{BarFutility, Futility, DEFAULT_ADVANTAGE_FUTILITY, DEFAULT_FUTILITY};
use af::evaluation::ratio::{RatioParams, RatioToBeat, DEFAULT_RATIO_PARAMS};
use af::evaluation::stopping::{exact_rates, DEFAULT_CAP, DEFAULT_RULE, MIXTURE_RULE};
use match_scenarios::{crown_is_right_for, patch, rate_of, scenarios, summarize, Config, EnvOdds, Scenario};
use rayon::prelude::*;
use std::time::Instant;

const MAX_CHALLENGES: u64 = 4 * DEFAULT_CAP as u64;

fn main() {
    // `cargo bench` passes --bench; under `cargo test --all-targets` this is a smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let default_n = if full { 10_000 } else { 2 };
    let n: u64 = std::env::var("AF_BENCH_MATCHES").ok().and_then(|v| v.parse().ok()).unwrap_or(default_n);
    let seed: u64 = std::env::var("AF_BENCH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(20261122);
    let exact_cap = if full { MAX_CHALLENGES } else { 200 };
    let before = Config {
        rule: MIXTURE_RULE,
        futility: Some(Futility::Advantage(DEFAULT_ADVANTAGE_FUTILITY)),
        cap: DEFAULT_CAP,
        max_challenges: MAX_CHALLENGES,
    };
    // AF_BENCH_MARGIN_PPM, AF_BENCH_FUTILITY_ALPHA_PPM and AF_BENCH_MEAN_MARGIN_PPM (a
    // number, or `none` for the older spelling's condition at bar + margin) try other
    // futility parameters: `AF_BENCH_MARGIN_PPM=65000 AF_BENCH_MEAN_MARGIN_PPM=none` is
    // the plan before issue 54.
    let env_u32 = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u32>().ok());
    let futility = match DEFAULT_FUTILITY {
        Futility::Bar(f) => Futility::Bar(BarFutility {
            margin_ppm: env_u32("AF_BENCH_MARGIN_PPM").unwrap_or(f.margin_ppm),
            alpha_ppm: env_u32("AF_BENCH_FUTILITY_ALPHA_PPM").unwrap_or(f.alpha_ppm),
            mean_margin_ppm: match std::env::var("AF_BENCH_MEAN_MARGIN_PPM").as_deref() {
                Ok("none") => None,
                _ => env_u32("AF_BENCH_MEAN_MARGIN_PPM").or(f.mean_margin_ppm),
            },
            rise: None,
        }),
        other => other,
    };
    // AF_BENCH_DOMINANCE=R:A:S:Q (ppm) tries other dominance numbers, `none` none.
    let rule = match std::env::var("AF_BENCH_DOMINANCE") {
        Ok(v) => {
            let numbers: Vec<u32> = v.split(':').filter_map(|x| x.parse().ok()).collect();
            DEFAULT_RULE.with_dominance((numbers.len() == 4).then(|| Dominance {
                rate_ppm: numbers[0],
                alpha_ppm: numbers[1],
                share_ppm: numbers[2],
                share_alpha_ppm: numbers[3],
                reach_over: None,
            }))
        }
        Err(_) => DEFAULT_RULE,
    };
    let after = Config { rule, futility: Some(futility), cap: DEFAULT_CAP, max_challenges: MAX_CHALLENGES };
    let started = Instant::now();
    // AF_BENCH_ONLY=simulated|exact|power|improvers|patches runs one part.
    let only = std::env::var("AF_BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "simulated" {
        simulated(n, seed, &before, &after);
    }
    let runs = if full { 10_000 } else { 4 };
    if only.is_empty() || only == "exact" {
        exact(exact_cap, &after);
    }
    if only.is_empty() || only == "power" {
        power(exact_cap, &after);
    }
    if only.is_empty() || only == "patches" {
        patches((runs / 5).max(1), &after);
    }
    if only.is_empty() || only == "improvers" {
        improvers(exact_cap, &after);
    }
    if only.is_empty() || only == "costs" {
        costs(exact_cap);
    }
    // Not in the default run: a grid of exact programs (minutes at the full cap).
    if only == "candidates" {
        candidates(exact_cap, &after);
    }
    println!("\nran in {:.1} s", started.elapsed().as_secs_f64());
}

fn all_scenarios() -> Vec<Scenario> {
    let mut all = scenarios(4);
    let four = |odds: EnvOdds| vec![odds; 4];
    all.push(Scenario { name: "8 copy-and-patch 5% (all changed won)", envs: four(patch(0.05, 1.0)) });
    all.push(Scenario { name: "9 copy-and-patch 10% (90% of changed won)", envs: four(patch(0.10, 0.9)) });
    all
}

fn simulated(n: u64, seed: u64, before: &Config, after: &Config) {
    println!(
        "## decisions: {n} seeded matches per cell (seed {seed}, common random numbers), 4 envs, {MAX_CHALLENGES} challenges per env\n"
    );
    println!("before: {}", af::evaluation::plan::describe_plan(&before.rule, before.futility.as_ref()));
    println!("after:  {}\n", af::evaluation::plan::describe_plan(&after.rule, after.futility.as_ref()));
    println!(
        "| ratio | scenario | plan | calls mean | p50 | p90 | env challenges p50 | P(crowned) | crowning right? |"
    );
    println!("|---:|---|---|---:|---:|---:|---:|---:|---|");
    let cells: Vec<(f64, Scenario, &str, Config)> = [0.51, 0.70]
        .into_iter()
        .flat_map(|p0| {
            all_scenarios().into_iter().flat_map(move |s| {
                [("before", *before), ("after", *after)].into_iter().map(move |(name, c)| (p0, s.clone(), name, c))
            })
        })
        .collect();
    let rows: Vec<String> = cells
        .par_iter()
        .map(|(p0, scenario, name, config)| {
            let s = summarize(scenario, config, *p0, n, seed);
            format!(
                "| {p0} | {} | {name} | {:.0} | {} | {} | {} | {:.4} | {} |",
                scenario.name,
                s.calls_mean,
                s.calls_p50,
                s.calls_p90,
                s.env_challenges_p50,
                s.p_crowned,
                if crown_is_right_for(scenario, &config.rule, *p0) { "yes" } else { "no" }
            )
        })
        .collect();
    for row in rows {
        println!("{row}");
    }
}

/// The at-bar contender with decisive share `d`: mean score exactly `p0`. None if no such
/// contender exists (`d < 2 p0 - 1`).
fn at_bar(p0: f64, d: f64) -> Option<EnvOdds> {
    let win = p0 - (1.0 - d) / 2.0;
    (win >= 0.0 && win <= d).then_some(EnvOdds { win, loss: d - win })
}

/// One env played `runs` times under `config` (seeded, its own stream per run): P(crowned)
/// and the median challenges played.
fn env_sim(config: &Config, odds: EnvOdds, p0: f64, runs: u64) -> (f64, u64) {
    let one = Scenario { name: "one env", envs: vec![odds] };
    let s = summarize(&one, config, p0, runs, 20261125);
    (s.p_crowned, s.env_challenges_p50)
}

fn exact(cap: u64, after: &Config) {
    let dominance = after.rule.dominance();
    println!("\n## per-env figures of the score plan, exact: the score rule's false crowns by dynamic programs over (challenges, half-points) (the rule alone: a futility stop only removes crowns), the dominance crown's over (decisive games, wins) at its rate R (draws leave it as it is), their sum bounding a contender not better (mean score at most the bar, at most R of the decisive games won); the rest over (challenges, wins, draws) with the whole plan; cap {cap}\n");
    println!("| p0 | score rule: worst adaptive false crown | dominance crown: worst | sum | no draws at p0 | at the bar: decisive share -> median challenges, P(not crowned) | 10 points above (no draws): P(crowned), median |");
    println!("|---:|---:|---:|---:|---:|---|---|");
    let worst_dominance = dominance.map_or(0.0, |d| dominance_crown_chance(&d, cap, f64::from(d.rate_ppm) / 1e6));
    let rows: Vec<String> = [0.51, 0.60, 0.70, 0.80, 0.85, 0.90, 0.95]
        .par_iter()
        .map(|&p0| {
            let bounds = Boundaries::new(&after.rule, cap, p0);
            let (worst, plain) = worst_false_crown(&bounds, cap, p0);
            let Some(Futility::Bar(futility)) = after.futility else { panic!("score plans have a bar futility") };
            let p0_ppm = (p0 * 1e6).round() as u32;
            let figures = |odds: EnvOdds| {
                plan_env_figures(&after.rule, Some(&futility), &bounds, p0_ppm, cap, odds.win, odds.loss).0
            };
            let mut at = Vec::new();
            for d in [0.1, 0.25, 0.5, 1.0] {
                if let Some(odds) = at_bar(p0, d) {
                    let f = figures(odds);
                    at.push(format!("{d}: {} / {:.6}", f.median_challenges, 1.0 - f.better));
                }
            }
            let above = if p0 + 0.1 < 1.0 {
                let f = figures(EnvOdds { win: p0 + 0.1, loss: 0.9 - p0 });
                format!("{:.6} / {}", f.better, f.median_challenges)
            } else {
                "-".into()
            };
            format!(
                "| {p0} | {worst:.6} | {worst_dominance:.6} | {:.6} | {plain:.6} | {} | {above} |",
                worst + worst_dominance,
                at.join("; ")
            )
        })
        .collect();
    for row in rows {
        println!("{row}");
    }
    println!("\nalpha/2 = 0.025: every sum must be at or below it.");
}

/// The plan's power curve, exact: P(crowned) per env and per match (the default six
/// envs, at least 4 crowned) for a contender k points above the bar in score, at several decisive shares
/// (the share of challenges that are not draws), for bars 0.51, 0.7 and 0.9.
fn power(cap: u64, after: &Config) {
    let Some(Futility::Bar(futility)) = after.futility else { panic!("score plans have a bar futility") };
    let v1 = af::evaluation::exact::score_rule_alone(&after.rule);
    println!("\n## power of the score plan, exact (dynamic programs with the whole plan, cap {cap}): P(crowned) per match of the default 6 envs (4 needed), version 1 (no dominance crown) -> the plan, by points above the bar in score and decisive share\n");
    let points = [0u32, 1, 2, 3, 4, 5, 7, 10];
    let shares = [0.25, 0.5, 1.0];
    print!("| bar | decisive share |");
    for k in points {
        print!(" +{k} |");
    }
    println!();
    println!("|---:|---:|{}", "---:|".repeat(points.len()));
    let rows: Vec<String> = [0.51, 0.7, 0.9]
        .par_iter()
        .flat_map_iter(|&p0| {
            let bounds = Boundaries::new(&after.rule, cap, p0);
            let p0_ppm = (p0 * 1e6).round() as u32;
            let v1 = &v1;
            let bounds = std::sync::Arc::new(bounds);
            shares
                .iter()
                .map(move |&share| {
                    let cells: Vec<String> = points
                        .iter()
                        .map(|&k| match at_bar(p0 + f64::from(k) / 100.0, share) {
                            Some(odds) if p0 + f64::from(k) / 100.0 < 1.0 => {
                                let f = |rule| {
                                    plan_env_figures(rule, Some(&futility), &bounds, p0_ppm, cap, odds.win, odds.loss)
                                        .0
                                        .better
                                };
                                format!("{:.3} -> {:.3}", four_of_six(f(v1)), four_of_six(f(&after.rule)))
                            }
                            _ => "-".into(),
                        })
                        .collect();
                    format!("| {p0} | {share} | {} |", cells.join(" | "))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for row in rows {
        println!("{row}");
    }
    println!("\n(`-`: no contender has that score at that decisive share.)");
}

/// Candidate futility stops, exact: the bar futility's capital against `bar + margin` as
/// now, but its mean condition against `bar + slack` (the plan's today is slack = margin).
/// Per candidate, the worst over bars 0.51, 0.7, 0.9 and decisive shares 0.25, 0.5, 1 of:
/// the median challenges to dismiss a contender exactly at the bar (target <= 600), and
/// P(crowned) per match of 6 envs (4 needed) 3 and 5 points above (targets 0.5 and 0.9);
/// and after a copy that patches 5% and wins (bar 0.525), P(crowned) per match of a
/// broader improver, never worse and better on 10% (target 0.9).
fn candidates(cap: u64, after: &Config) {
    use af::evaluation::futility::BarFutility as Bar;
    println!("\n## candidate futility stops, exact (cap {cap}): worst over bars 0.51/0.7/0.9 and decisive shares 0.25/0.5/1\n");
    println!("| margin | mean slack | at the bar: worst median challenges (<= 600) | +3: worst P(match) (>= 0.5) | +5: worst P(match) (>= 0.9) | improver after a 5% patch: P(match) (>= 0.9) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    // AF_BENCH_GRID=M:S,M:S (ppm) tries other candidates.
    let grid: Vec<(u32, u32)> = match std::env::var("AF_BENCH_GRID") {
        Ok(text) => text
            .split(',')
            .filter_map(|pair| pair.split_once(':'))
            .filter_map(|(m, s)| Some((m.trim().parse().ok()?, s.trim().parse().ok()?)))
            .collect(),
        Err(_) => [65_000u32, 50_000, 40_000]
            .iter()
            .flat_map(|&m| [m, 20_000, 10_000, 0].into_iter().filter(move |&f| f <= m).map(move |f| (m, f)))
            .collect(),
    };
    let rows: Vec<String> = grid
        .par_iter()
        .map(|&(margin_ppm, slack_ppm)| {
            let bar = Bar { margin_ppm, alpha_ppm: 50_000, mean_margin_ppm: Some(slack_ppm), rise: None };
            let figures = |p0: f64, odds: EnvOdds| {
                let p0_ppm = (p0 * 1e6).round() as u32;
                let bounds = Boundaries::new(&after.rule, cap, p0);
                env_figures_with_futility(&bounds, &bar, p0_ppm, cap, odds.win, odds.loss).0
            };
            let (mut median, mut plus3, mut plus5) = (0u64, 1.0f64, 1.0f64);
            for p0 in [0.51, 0.7, 0.9] {
                for share in [0.25, 0.5, 1.0] {
                    if let Some(odds) = at_bar(p0, share) {
                        median = median.max(figures(p0, odds).median_challenges);
                    }
                    for (k, worst) in [(0.03, &mut plus3), (0.05, &mut plus5)] {
                        if let Some(odds) = at_bar(p0 + k, share) {
                            *worst = worst.min(four_of_six(figures(p0, odds).better));
                        }
                    }
                }
            }
            let improver = four_of_six(figures(0.525, EnvOdds { win: 0.1, loss: 0.0 }).better);
            format!(
                "| {:.3} | {:.3} | {median} | {plus3:.3} | {plus5:.3} | {improver:.3} |",
                f64::from(margin_ppm) / 1e6,
                f64::from(slack_ppm) / 1e6
            )
        })
        .collect();
    for row in rows {
        println!("{row}");
    }
}

/// Never-worse improvers, exact: a contender that never loses to the champion and wins a
/// share of the challenges (draws the rest), at several bars, and a copy; with the plan
/// (the dominance crown) and with the plan less it (version 1). Issue 54's first target:
/// better on 5% is crowned per match with P >= 0.9 whatever the bar.
fn improvers(cap: u64, after: &Config) {
    let Some(Futility::Bar(futility)) = after.futility else { panic!("score plans have a bar futility") };
    let v1 = af::evaluation::exact::score_rule_alone(&after.rule);
    println!("\n## never-worse improvers and copies, exact (cap {cap}): P(crowned) per env / per match of 6 envs (4 needed), median challenges per env; with the dominance crown (the plan) and without it (version 1)\n");
    println!("| bar | better on | with: P env / match | median | without: P env / match | median |");
    println!("|---:|---:|---|---:|---|---:|");
    let cells: Vec<(f64, f64)> = [0.51, 0.525, 0.7, 0.9, 0.95]
        .into_iter()
        .flat_map(|p0| [0.0, 0.025, 0.05, 0.1, 0.2].into_iter().map(move |share| (p0, share)))
        .collect();
    let rows: Vec<String> = cells
        .par_iter()
        .map(|&(p0, share)| {
            let bounds = Boundaries::new(&after.rule, cap, p0);
            let p0_ppm = (p0 * 1e6).round() as u32;
            let with = plan_env_figures(&after.rule, Some(&futility), &bounds, p0_ppm, cap, share, 0.0).0;
            let without = plan_env_figures(&v1, Some(&futility), &bounds, p0_ppm, cap, share, 0.0).0;
            format!(
                "| {p0} | {} | {:.4} / {:.4} | {} | {:.4} / {:.4} | {} |",
                if share == 0.0 { "0 (a copy)".to_string() } else { format!("{share}") },
                with.better,
                four_of_six(with.better),
                with.median_challenges,
                without.better,
                four_of_six(without.better),
                without.median_challenges
            )
        })
        .collect();
    for row in rows {
        println!("{row}");
    }
}

/// P(at least 3 of 4 independent envs better), each with probability `q`.
/// P(a match is crowned) from its envs' P(crowned) `q`, independent and alike: a
/// majority (`matchplay::majority_of`, 4) of the default six envs (docs/operator.md's
/// `[evaluation] envs`).
fn four_of_six(q: f64) -> f64 {
    const ENVS: u32 = 6;
    let needed = af::evaluation::matchplay::majority_of(ENVS as usize) as u32;
    (needed..=ENVS).map(|k| binomial(ENVS, k) * q.powi(k as i32) * (1.0 - q).powi((ENVS - k) as i32)).sum()
}

fn binomial(n: u32, k: u32) -> f64 {
    (0..k).fold(1.0, |c, i| c * f64::from(n - i) / f64::from(i + 1))
}

fn patches(runs: u64, after: &Config) {
    println!("\n## copy-and-patch, then a broad improver, half-life 7200 blocks (before: exact, the mixture rule without its futility; after: simulated per env, {runs} runs, with the futility stop; a match is crowned when at least 4 of its 6 envs are)");
    let float = DEFAULT_RATIO_PARAMS.with_arithmetic(af::evaluation::ratio::Arithmetic::Float);
    for (label, improver) in
        [("p 0.6, all decisive", EnvOdds::new(1.0, 0.6)), ("p 0.6, half decisive", EnvOdds::new(0.5, 0.6))]
    {
        println!("\nimprover: {label}\n");
        println!(
            "| patch | plan | bar it sets | improver's rate | blocks until the improver is crowned with P >= 0.5 |"
        );
        println!("|---|---|---:|---:|---:|");
        for (name, odds) in [("5%, all won", patch(0.05, 1.0)), ("10%, 90% won", patch(0.10, 0.9))] {
            for (plan, rule, params) in [("before", MIXTURE_RULE, float), ("after", after.rule, DEFAULT_RATIO_PARAMS)] {
                let rate = libm::round(rate_of(&odds, &rule) * 1e6) as u32;
                let bar = params.after_win(&[rate; 4], 0);
                let improver_rate = rate_of(&improver, &rule);
                let wait = blocks_until_crowned(&params, &bar, |p0| {
                    let q = if rule.counts_draws() {
                        env_sim(after, improver, p0, runs).0
                    } else {
                        exact_rates(&rule, DEFAULT_CAP, improver.win_rate(), p0).better
                    };
                    four_of_six(q)
                });
                println!(
                    "| {name} | {plan} | {:.4} | {improver_rate:.4} | {} |",
                    f64::from(bar.set_ppm) / 1e6,
                    wait.map_or("never".into(), |b| format!("{b} ({:.2} days at 12 s)", b as f64 * 12.0 / 86_400.0))
                );
            }
        }
    }
}

/// The first block (to 60 blocks) at which `crown(p0)` reaches 1/2, the bar decaying from
/// `bar` (the chance only grows as the bar falls, so a bisection finds it); None within
/// 20 half-lives.
fn blocks_until_crowned(params: &RatioParams, bar: &RatioToBeat, crown: impl Fn(f64) -> f64) -> Option<u64> {
    let at = |block: u64| crown(f64::from(params.current_ppm(bar, block)) / 1e6) >= 0.5;
    let (mut low, mut high) = (0u64, 20 * params.half_life_blocks);
    if at(low) {
        return Some(0);
    }
    if !at(high) {
        return None;
    }
    while high - low > 60 {
        let mid = low + (high - low) / 2;
        if at(mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    Some(high)
}

/// What a contender can make validators pay, exact (issue 76): version 2's plan against
/// version 4's, per env and per match (4 envs, 2 model calls a challenge; the default six
/// envs cost 1.5 times as much).
fn costs(cap: u64) {
    use af::evaluation::exact::{not_better_vertices, worst_expected_challenges, PlanStops};
    use af::evaluation::plan::parse_plan;
    let plan = |text: &str| {
        let (rule, futility) = parse_plan(text).expect("a network plan");
        let Some(Futility::Bar(bar)) = futility else { panic!("a bar futility") };
        let rule = rule.with_max_challenges(cap);
        let bar = BarFutility { rise: bar.rise.map(|r| af::evaluation::futility::Rise { over: cap, ..r }), ..bar };
        (rule, bar)
    };
    let plans = [("v2", plan(af::protocol::PLAN_V2)), ("v4", plan(af::protocol::PLAN_V4))];
    let contenders: [(&str, f64, f64); 4] = [
        ("exact copy of the champion", 0.0, 0.0),
        ("equal model (half decisive, wins half)", 0.25, 0.25),
        ("stretcher (5% decisive, 95% of them won)", 0.0475, 0.0025),
        ("never worse, better on 5%", 0.05, 0.0),
    ];
    println!("\n## what a contender costs, exact (cap {cap}): expected challenges per env -> model calls per match of 4 envs (2 calls a challenge), P(crowned) per env; version 2 -> version 4\n");
    println!("| contender | bar | v2: challenges / calls / P(crowned) | v4: challenges / calls / P(crowned) |");
    println!("|---|---:|---|---|");
    let cells: Vec<(usize, f64)> =
        (0..contenders.len()).flat_map(|c| [0.51f64, 0.7, 0.95].map(move |p0| (c, p0))).collect();
    let rows: Vec<String> = cells
        .par_iter()
        .map(|&(c, p0)| {
            let (name, win, loss) = contenders[c];
            let p0_ppm = (p0 * 1e6).round() as u32;
            let cell = |(rule, bar): &(af::evaluation::stopping::StoppingRule, BarFutility)| {
                let bounds = Boundaries::new(rule, cap, p0);
                let f = plan_env_figures(rule, Some(bar), &bounds, p0_ppm, cap, win, loss).0;
                format!("{:.0} / {:.0} / {:.4}", f.expected_challenges, 8.0 * f.expected_challenges, f.better)
            };
            format!("| {name} | {p0} | {} | {} |", cell(&plans[0].1), cell(&plans[1].1))
        })
        .collect();
    for row in rows {
        println!("{row}");
    }
    println!("\n### at the bar (mean score exactly the bar): expected challenges per env and P(reaching the cap), by decisive share; v2 -> v4\n");
    println!("| bar | 0.1 | 0.25 | 0.5 | 1 |");
    println!("|---:|---|---|---|---|");
    let bars = [0.51f64, 0.6, 0.7, 0.8, 0.9, 0.95];
    let rows: Vec<String> = bars
        .par_iter()
        .map(|&p0| {
            let p0_ppm = (p0 * 1e6).round() as u32;
            let cells: Vec<String> = [0.1, 0.25, 0.5, 1.0]
                .iter()
                .map(|&d| match at_bar(p0, d) {
                    Some(odds) => {
                        let f = |(rule, bar): &(af::evaluation::stopping::StoppingRule, BarFutility)| {
                            let bounds = Boundaries::new(rule, cap, p0);
                            plan_env_figures(rule, Some(bar), &bounds, p0_ppm, cap, odds.win, odds.loss).0
                        };
                        let (a, b) = (f(&plans[0].1), f(&plans[1].1));
                        format!(
                            "{:.0} ({:.4}) -> {:.0} ({:.4})",
                            a.expected_challenges, a.inconclusive, b.expected_challenges, b.inconclusive
                        )
                    }
                    None => "-".into(),
                })
                .collect();
            format!("| {p0} | {} |", cells.join(" | "))
        })
        .collect();
    for row in rows {
        println!("{row}");
    }
    // The worst adaptive not-better contender: minutes per cell at the full cap, one
    // cell at a time (each runs its layers in parallel).
    println!("\n### the worst expected challenges per env over every adaptive strategy of a contender not better than the bar (mean score at most the bar, at most 95% of decisive games won), exact; v2 -> v4\n");
    println!("| bar | v2 | v4 | v4: the same contender always at the bar without draws |");
    println!("|---:|---:|---:|---:|");
    let worst_bars: Vec<f64> = match std::env::var("AF_BENCH_WORST_BARS") {
        Ok(v) => v.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => bars.to_vec(),
    };
    for p0 in worst_bars {
        let worst = |(rule, bar): &(af::evaluation::stopping::StoppingRule, BarFutility)| {
            let bounds = Boundaries::new(rule, cap, p0);
            let stops = PlanStops::new(rule, Some(bar), &bounds, (p0 * 1e6).round() as u32);
            let (crowns, dismisses) = (|w, l, d| stops.crowns(w, l, d), |w, l, d| stops.dismisses(w, l, d));
            let mut vertices = not_better_vertices(p0, 0.95);
            vertices.swap(0, 2); // the first is reported alone: win p0 or lose
            worst_expected_challenges(&crowns, &dismisses, cap, &vertices)
        };
        let (v2, _) = worst(&plans[0].1);
        let (v4, plain) = worst(&plans[1].1);
        println!("| {p0} | {v2:.0} | {v4:.0} | {plain:.0} |");
    }
    // The least any plan spends crowning the 5%-better model at a bar it cannot pass by
    // its score: a crown on the decisive games at level A needs at least
    // ln(1/A) / ln(1/0.95) straight wins (a contender winning 95% of them makes that run
    // with chance 0.95^W), one per 20 challenges.
    println!("\n### the least a 5%-better model can cost: per-env level A of any crown read on decisive games -> wins needed -> challenges per env -> calls per match of 4 envs\n");
    println!("| A | wins | challenges per env | calls per match |");
    println!("|---:|---:|---:|---:|");
    for a in [0.005, 0.006, 0.01, 0.025] {
        let wins = (libm::log(1.0 / a) / libm::log(1.0 / 0.95)).ceil();
        println!("| {a} | {wins} | {:.0} | {:.0} |", wins / 0.05, 8.0 * wins / 0.05);
    }
    println!("\n(12,000 calls is 75 wins: a level of 2.1%, leaving the score rule 0.4% of alpha/2 = 2.5% where its worst adaptive false crown is 1.87%.)");
}
