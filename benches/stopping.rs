//! Sample efficiency of the stopping rules (`cargo bench --bench stopping`): for true
//! win rates 0.5 to 0.9 against p0 = 1/2 and a cap of 1000 decisive games, the
//! probability of dethroning and the expected games to a decision, exactly (dynamic
//! program) and from a seeded simulation, side by side.

#[allow(dead_code)] // the benchmarks use part of the tests' support
#[path = "../tests/support/match_scenarios.rs"]
mod match_scenarios;
use af::evaluation::stopping::{exact_rates, StoppingRule, Verdict, DEFAULT_CAP, DEFAULT_RULE};
use match_scenarios::SplitMix64 as Rng;

fn simulate(rule: &StoppingRule, cap: u32, p: f64, runs: u32, rng: &mut Rng) -> (f64, f64) {
    let (mut better, mut games) = (0u32, 0u64);
    for _ in 0..runs {
        let mut wins = 0;
        for n in 1..=cap {
            if rng.unit() < p {
                wins += 1;
            }
            let verdict = rule.verdict(n, wins, 0.5);
            if verdict != Verdict::Continue || n == cap {
                better += u32::from(verdict == Verdict::Better);
                games += u64::from(n);
                break;
            }
        }
    }
    (f64::from(better) / f64::from(runs), games as f64 / f64::from(runs))
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (cap, runs) = if full { (DEFAULT_CAP, 4_000) } else { (200, 50) };
    let rules = [
        ("mixture (default)", DEFAULT_RULE),
        ("wilson z=1.96 (not anytime-valid)", StoppingRule::Wilson { z: 1.96 }),
        ("wilson-calibrated", StoppingRule::wilson_calibrated(cap)),
        ("sprt delta=0.1", StoppingRule::Sprt { delta: 0.1, alpha: 0.025, beta: 0.1 }),
    ];
    let mut rng = Rng(2026);
    println!("cap {cap} decisive games, p0 = 0.5; simulation: {runs} seeded runs per cell (seed 2026)\n");
    println!("| rule | true p | P(dethrone) exact | simulated | E[games] exact | simulated |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, rule) in rules {
        for p in [0.5, 0.55, 0.6, 0.7, 0.9] {
            let exact = exact_rates(&rule, cap, p, 0.5);
            let (sim_better, sim_games) = simulate(&rule, cap, p, runs, &mut rng);
            println!(
                "| {name} | {p} | {:.4} | {sim_better:.4} | {:.1} | {sim_games:.1} |",
                exact.better, exact.expected_games
            );
        }
    }
}
