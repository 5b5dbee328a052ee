//! Exact error rates of the stopping rules, by dynamic programming over (games, wins):
//! no sampling noise, so the assertions are exact up to float rounding.

use af::evaluation::stopping::{calibrate_wilson_z, exact_rates, StoppingRule, CALIBRATED_WILSON_Z, DEFAULT_RULE};

const CAPS: [u32; 4] = [200, 500, 1000, 2000];

#[test]
fn mixture_keeps_false_better_below_alpha_over_two_at_every_cap() {
    for cap in CAPS {
        let rates = exact_rates(&DEFAULT_RULE, cap, 0.5, 0.5);
        assert!(rates.better <= 0.025, "cap {cap}: P(better | equal) = {}", rates.better);
        // Symmetric prior and p0 = 1/2: both errors are the same.
        assert!((rates.better - rates.not_better).abs() < 1e-9);
    }
}

#[test]
fn seed_wilson_rule_is_not_anytime_valid() {
    // The brief's figures: 20.8%, 24.0%, 26.2%, 28.2% false "better" for caps 200-2000.
    let expected = [0.208, 0.240, 0.262, 0.282];
    for (cap, want) in CAPS.into_iter().zip(expected) {
        let rates = exact_rates(&StoppingRule::Wilson { z: 1.96 }, cap, 0.5, 0.5);
        assert!((rates.better - want).abs() < 0.0015, "cap {cap}: {} vs {want}", rates.better);
    }
}

#[test]
fn calibrated_wilson_table_matches_calibration() {
    for (cap, z) in CALIBRATED_WILSON_Z {
        let computed = calibrate_wilson_z(cap, 0.025);
        assert!((computed - z).abs() <= 0.02, "cap {cap}: table {z}, calibration {computed}");
        let rates = exact_rates(&StoppingRule::WilsonCalibrated { z, cap }, cap, 0.5, 0.5);
        assert!(rates.better <= 0.0275, "cap {cap}: {}", rates.better);
    }
}

#[test]
fn sprt_error_is_near_its_target() {
    let rule = StoppingRule::Sprt { delta: 0.1, alpha: 0.025, beta: 0.1 };
    let rates = exact_rates(&rule, 1000, 0.5, 0.5);
    assert!(rates.better <= 0.025, "{}", rates.better);
    let power = exact_rates(&rule, 1000, 0.6, 0.5);
    assert!(power.better >= 0.85, "{}", power.better);
}

#[test]
fn strong_contenders_are_found_and_weak_ones_are_not() {
    let strong = exact_rates(&DEFAULT_RULE, 1000, 0.7, 0.5);
    assert!(strong.better > 0.99, "{strong:?}");
    // A weaker contender is falsely promoted less often than an equal one (<= 2.5%).
    let weak = exact_rates(&DEFAULT_RULE, 1000, 0.4, 0.5);
    let equal = exact_rates(&DEFAULT_RULE, 1000, 0.5, 0.5);
    assert!(weak.better < equal.better / 10.0 && weak.not_better > 0.99, "{weak:?}");
    // Beating a higher bar takes more games.
    let bar = exact_rates(&DEFAULT_RULE, 1000, 0.7, 0.6);
    assert!(bar.expected_games > strong.expected_games);
}

use af::evaluation::scenarios::{self, exact_env_rates, scenarios, summarize, Config, EnvOdds};
use af::evaluation::stopping::{describe_plan, parse_plan, Futility, DEFAULT_FUTILITY};

fn small(futility: Option<Futility>) -> Config {
    Config { rule: DEFAULT_RULE, futility, cap: 100, max_challenges: 160 }
}

/// The futility stop never raises the chance of a false crown: exactly, by the
/// (challenges, decisive, wins) dynamic program, at the default and at the edges of the
/// allowed ranges, for null contenders (p = p0) with several decisive rates.
#[test]
fn futility_keeps_the_exact_false_crown_bound() {
    let edges = [
        DEFAULT_FUTILITY,
        Futility { advantage: 0.001, alpha: 0.05 },
        Futility { advantage: 0.5, alpha: 0.05 },
        Futility { advantage: 0.1, alpha: 0.001 },
        Futility { advantage: 0.1, alpha: 0.5 },
    ];
    for p0 in [0.5, 0.51, 0.7] {
        for decisive in [0.3, 1.0] {
            let odds = EnvOdds::new(decisive, p0);
            let base = exact_env_rates(&small(None), odds, p0);
            assert!(base.better <= 0.025, "base {p0} {decisive}: {base:?}");
            for futility in edges {
                let with = exact_env_rates(&small(Some(futility)), odds, p0);
                assert!(
                    with.better <= base.better + 1e-12,
                    "{futility:?} p0 {p0} d {decisive}: {} > base {}",
                    with.better,
                    base.better
                );
                assert!((with.better + with.not_better + with.inconclusive - 1.0).abs() < 1e-9);
                assert!(with.expected_games <= base.expected_games + 1e-9, "futility never plays longer");
            }
        }
    }
    // And it does its job: within the same budget, an equal contender is dismissed far
    // more often (the simulated scenarios show the savings at full caps).
    let longer = |futility| Config { cap: 300, max_challenges: 300, ..small(futility) };
    let equal = exact_env_rates(&longer(Some(DEFAULT_FUTILITY)), EnvOdds::new(0.3, 0.5), 0.51);
    let without = exact_env_rates(&longer(None), EnvOdds::new(0.3, 0.5), 0.51);
    assert!(equal.not_better > 3.0 * without.not_better, "{equal:?} vs {without:?}");
}

/// An exact copy (every game a draw) is dismissed within 200 challenges per env; the
/// stop is deterministic, so this holds on every run.
#[test]
fn an_exact_copy_is_dismissed_within_200_challenges() {
    let config = Config {
        futility: Some(DEFAULT_FUTILITY),
        ..Config { rule: DEFAULT_RULE, futility: None, cap: 1000, max_challenges: 4000 }
    };
    for p0 in [0.51, 0.7] {
        let copy = &scenarios(4)[0];
        let played = scenarios::play(copy, &config, p0, 1);
        assert!(played.max_env_challenges <= 200, "{played:?}");
        assert!(!played.crowned);
    }
}

/// Seeded summaries of two scenarios, as the benchmark computes them, against a golden
/// file (a changed rule changes these numbers) and against the targets.
#[test]
fn decision_costs_match_the_golden_summary() {
    let base = Config { rule: DEFAULT_RULE, futility: None, cap: 1000, max_challenges: 4000 };
    let new = Config { futility: Some(DEFAULT_FUTILITY), ..base };
    let mut text = String::new();
    let all = scenarios(4);
    for (scenario, p0, n) in [(&all[1], 0.51, 60), (&all[3], 0.51, 30)] {
        for (name, config) in [("today", base), ("futility", new)] {
            let s = summarize(scenario, &config, p0, n, 7);
            text += &format!(
                "{} p0={p0} {name}: calls mean {:.1} p50 {} p90 {} env p50 {} crowned {:.3}\n",
                scenario.name, s.calls_mean, s.calls_p50, s.calls_p90, s.env_challenges_p50, s.p_crowned
            );
            if name == "futility" && scenario.name.starts_with('2') {
                assert!(s.env_challenges_p50 <= 600, "equal skill: {s:?}");
                assert!(s.p_crowned == 0.0);
            }
            if name == "futility" && scenario.name.starts_with('4') {
                assert!(s.p_crowned >= 0.9, "10 points better: {s:?}");
            }
        }
    }
    crate::check_fixture("fixtures/evaluation/decisions.txt", &text);
}

/// Replay re-derives each decision from the recorded plan: the plan's text reads back,
/// an honest decision passes and a changed outcome does not.
#[test]
fn recorded_plans_read_back_and_decisions_are_rederived() {
    use af::ledger::event::{EnvDecision, EnvOutcome, EnvRef};
    use af::replay::fold::rederive_decision;
    for futility in [None, Some(DEFAULT_FUTILITY)] {
        for rule in [
            DEFAULT_RULE,
            StoppingRule::Wilson { z: 1.96 },
            StoppingRule::wilson_calibrated(500),
            StoppingRule::Sprt { delta: 0.1, alpha: 0.025, beta: 0.1 },
        ] {
            let text = describe_plan(&rule, futility.as_ref());
            assert_eq!(parse_plan(&text), Some((rule, futility)), "{text}");
        }
    }
    assert_eq!(parse_plan("mixture alpha=0.05 prior=4,4 extra"), None);
    let plan = describe_plan(&DEFAULT_RULE, Some(&DEFAULT_FUTILITY));
    let decision = |outcome, wins, losses, draws| EnvDecision {
        match_id: af::bytes::Hash32([1; 32]),
        env: EnvRef { name: "mult".to_string(), version: 1 },
        outcome,
        wins,
        losses,
        draws,
        n_challenges: u64::from(wins) + u64::from(losses) + u64::from(draws),
        rule: plan.clone(),
    };
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::ContenderBetter, 90, 10, 0)).is_ok());
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::ContenderNotBetter, 90, 10, 0)).is_err());
    // All draws: not better by futility, not inconclusive.
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::ContenderNotBetter, 0, 0, 120)).is_ok());
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::Inconclusive, 0, 0, 120)).is_err());
    // Without futility in the plan, the same record cannot be "not better".
    let plain = DEFAULT_RULE.describe();
    assert!(rederive_decision(&plain, 510_000, &decision(EnvOutcome::ContenderNotBetter, 0, 0, 120)).is_err());
    // Hostile values are findings, never panics.
    assert!(rederive_decision(&plan, 0, &decision(EnvOutcome::ContenderBetter, 1, 0, 0)).is_err());
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::ContenderBetter, u32::MAX, 1, 0)).is_err());
    assert!(rederive_decision("nonsense", 510_000, &decision(EnvOutcome::ContenderBetter, 1, 0, 0)).is_err());
}
