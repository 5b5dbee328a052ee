//! Decisions benchmark: for each scenario of `evaluation::scenarios`, at ratio to beat
//! 0.51 and 0.70, each rule configuration's model calls per match (mean, p50, p90, from
//! seeded simulations of the real `MatchState` over 4 envs), the chance the contender is
//! crowned, and the chance of a wrong crown; next to each env's exact false-"better" rate
//! at `p = p0` from the dynamic program. All configurations run in one process, one run.

use af::evaluation::scenarios::{crown_is_right, scenarios, summarize, Config};
use af::evaluation::stopping::{exact_rates, Futility, DEFAULT_CAP, DEFAULT_FUTILITY, DEFAULT_RULE};
use std::time::Instant;

fn main() {
    // `cargo bench` passes --bench; under `cargo test --all-targets` this is a smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let default_n = if full { 400 } else { 2 };
    let n: u64 = std::env::var("AF_BENCH_MATCHES").ok().and_then(|v| v.parse().ok()).unwrap_or(default_n);
    let seed: u64 = std::env::var("AF_BENCH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(20261122);
    let base =
        Config { rule: DEFAULT_RULE, futility: None, cap: DEFAULT_CAP, max_challenges: 4 * u64::from(DEFAULT_CAP) };
    let configs = [
        ("today: mixture, draws dropped, no futility", base),
        ("mixture + futility A=0.1 alpha=0.05 (new default)", Config { futility: Some(DEFAULT_FUTILITY), ..base }),
        (
            "mixture + futility A=0.05 alpha=0.05",
            Config { futility: Some(Futility { advantage: 0.05, alpha: 0.05 }), ..base },
        ),
    ];
    let started = Instant::now();
    println!(
        "## decisions ({n} seeded matches per cell, seed {seed}, 4 envs, cap {DEFAULT_CAP}, max_challenges {})\n",
        base.max_challenges
    );
    println!("| ratio | scenario | configuration | calls mean | p50 | p90 | env challenges p50 | P(crowned) | P(wrong crown) |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|");
    let mut today_p50 = std::collections::BTreeMap::new();
    for p0 in [0.51, 0.70] {
        for scenario in scenarios(4) {
            let right = crown_is_right(&scenario, p0);
            for (i, (name, config)) in configs.iter().enumerate() {
                let summary = summarize(&scenario, config, p0, n, seed);
                if i == 0 {
                    today_p50.insert((scenario.name, (p0 * 100.0) as u32), summary.calls_p50);
                }
                let ratio = today_p50[&(scenario.name, (p0 * 100.0) as u32)] as f64 / summary.calls_p50.max(1) as f64;
                println!(
                    "| {p0} | {} | {name} | {:.0} | {} ({ratio:.1}x fewer) | {} | {} | {:.3} | {} |",
                    scenario.name,
                    summary.calls_mean,
                    summary.calls_p50,
                    summary.calls_p90,
                    summary.env_challenges_p50,
                    summary.p_crowned,
                    if right { "- (crowning is right)".to_string() } else { format!("{:.3}", summary.p_crowned) }
                );
            }
        }
    }
    println!("\nexact per-env false \"better\" at p = p0 (the worst case of the null), base rule; a futility stop only ends paths as \"not better\", so it can only lower this:");
    for p0 in [0.51, 0.70] {
        let rates = exact_rates(&DEFAULT_RULE, DEFAULT_CAP, p0, p0);
        println!("  p0 = {p0}: {:.5} (alpha/2 = 0.025)", rates.better);
    }
    println!("\nran in {:.1} s", started.elapsed().as_secs_f64());
}
