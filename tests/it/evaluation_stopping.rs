//! Exact error rates of the stopping rules, by dynamic programming over (games, wins):
//! no sampling noise, so the assertions are exact up to float rounding.

use af::evaluation::futility::AdvantageFutility;
use af::evaluation::stopping::{
    calibrate_wilson_z, exact_rates, StoppingRule, CALIBRATED_WILSON_Z, DEFAULT_RULE, MIXTURE_RULE,
};

const CAPS: [u32; 4] = [200, 500, 1000, 2000];

#[test]
fn mixture_keeps_false_better_below_alpha_over_two_at_every_cap() {
    for cap in CAPS {
        let rates = exact_rates(&MIXTURE_RULE, cap, 0.5, 0.5);
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
    let strong = exact_rates(&MIXTURE_RULE, 1000, 0.7, 0.5);
    assert!(strong.better > 0.99, "{strong:?}");
    // A weaker contender is falsely promoted less often than an equal one (<= 2.5%).
    let weak = exact_rates(&MIXTURE_RULE, 1000, 0.4, 0.5);
    let equal = exact_rates(&MIXTURE_RULE, 1000, 0.5, 0.5);
    assert!(weak.better < equal.better / 10.0 && weak.not_better > 0.99, "{weak:?}");
    // Beating a higher bar takes more games.
    let bar = exact_rates(&MIXTURE_RULE, 1000, 0.7, 0.6);
    assert!(bar.expected_games > strong.expected_games);
}

use crate::match_scenarios::{self as played_matches, exact_env_rates, scenarios, summarize, Config, EnvOdds};
use af::evaluation::futility::{Futility, DEFAULT_ADVANTAGE_FUTILITY, DEFAULT_FUTILITY};
use af::evaluation::plan::{describe_plan, parse_plan};

fn small(futility: Option<Futility>) -> Config {
    Config { rule: MIXTURE_RULE, futility, cap: 100, max_challenges: 160 }
}
const ADVANTAGE: Futility = Futility::Advantage(DEFAULT_ADVANTAGE_FUTILITY);

/// The futility stop never raises the chance of a false crown: exactly, by the
/// (challenges, decisive, wins) dynamic program, at the default and at the edges of the
/// allowed ranges, for null contenders (p = p0) with several decisive rates.
#[test]
fn futility_keeps_the_exact_false_crown_bound() {
    let edges = [
        ADVANTAGE,
        Futility::Advantage(AdvantageFutility { advantage: 0.001, alpha: 0.05 }),
        Futility::Advantage(AdvantageFutility { advantage: 0.5, alpha: 0.05 }),
        Futility::Advantage(AdvantageFutility { advantage: 0.1, alpha: 0.001 }),
        Futility::Advantage(AdvantageFutility { advantage: 0.1, alpha: 0.5 }),
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
    let equal = exact_env_rates(&longer(Some(ADVANTAGE)), EnvOdds::new(0.3, 0.5), 0.51);
    let without = exact_env_rates(&longer(None), EnvOdds::new(0.3, 0.5), 0.51);
    assert!(equal.not_better > 3.0 * without.not_better, "{equal:?} vs {without:?}");
}

/// An exact copy (every game a draw) is dismissed within 200 challenges per env by the
/// mixture plan's advantage futility, and in 121 by the score plan: its bar futility
/// holds from 63 (the scores never vary, so the bets grow at every draw), and the
/// dominance crown is out of reach once the bets against a 4% share of wins reach 20; the
/// stop is deterministic, so this holds on every run.
#[test]
fn an_exact_copy_is_dismissed_quickly() {
    let mixture = Config { rule: MIXTURE_RULE, futility: Some(ADVANTAGE), cap: 1000, max_challenges: 4000 };
    let score = Config { rule: DEFAULT_RULE, futility: Some(DEFAULT_FUTILITY), ..mixture };
    for p0 in [0.51, 0.7] {
        let copy = &scenarios(4)[0];
        for (config, most) in [(mixture, 200), (score, 121)] {
            let played = played_matches::play(copy, &config, p0, 1);
            assert!(played.max_env_challenges <= most, "{config:?} at {p0}: {played:?}");
            assert!(!played.crowned);
        }
    }
}

/// Seeded summaries, as the benchmark computes them, against a golden file (a changed
/// rule changes these numbers) and against the score plan's figures (ledger-spec/02): an
/// equal contender dismissed within a median of 600 challenges per env, one 10 points
/// above the bar in score crowned.
#[test]
fn decision_costs_match_the_golden_summary() {
    let before = Config { rule: MIXTURE_RULE, futility: Some(ADVANTAGE), cap: 1000, max_challenges: 4000 };
    let after = Config { rule: DEFAULT_RULE, futility: Some(DEFAULT_FUTILITY), ..before };
    let mut text = String::new();
    let equal = scenarios(4)[1].clone();
    let better =
        played_matches::Scenario { name: "score 10 points above (no draws)", envs: vec![EnvOdds::new(1.0, 0.61); 4] };
    for (scenario, p0, n) in [(&equal, 0.51, 60), (&better, 0.51, 30)] {
        for (name, config) in [("before", before), ("after", after)] {
            let s = summarize(scenario, &config, p0, n, 7);
            text += &format!(
                "{} p0={p0} {name}: calls mean {:.1} p50 {} p90 {} env p50 {} crowned {:.3}\n",
                scenario.name, s.calls_mean, s.calls_p50, s.calls_p90, s.env_challenges_p50, s.p_crowned
            );
            if name == "after" && scenario.name.starts_with('2') {
                assert!(s.env_challenges_p50 <= 600, "equal skill: {s:?}");
                assert!(s.p_crowned == 0.0);
            }
            if name == "after" && scenario.name.starts_with("score") {
                assert!(s.p_crowned >= 0.9, "10 points above: {s:?}");
            }
        }
    }
    crate::check_fixture("fixtures/evaluation/decisions.txt", &text);
}

/// The score plan's per-env guarantees (ledger-spec/02): exactly, by the dynamic program
/// over (challenges, half-points) at the full cap, the best adaptive strategy of a
/// contender whose mean score never exceeds the bar is crowned at most alpha/2 of the
/// time (the rule alone; the futility stop only removes crowns). Seeded simulations with
/// the futility stop: one at the bar is dismissed within a median of 600 challenges at
/// every decisive share, one 10 points above it is crowned.
#[test]
fn score_plan_keeps_the_false_crown_bound_and_dismisses_at_the_bar() {
    use af::evaluation::exact::{worst_false_crown, Boundaries};
    let config = Config { rule: DEFAULT_RULE, futility: Some(DEFAULT_FUTILITY), cap: 1000, max_challenges: 4000 };
    let one_env = |odds: EnvOdds| played_matches::Scenario { name: "one env", envs: vec![odds] };
    for p0 in [0.51, 0.7, 0.9] {
        let bounds = Boundaries::new(&DEFAULT_RULE, 4000, p0);
        let (worst, no_draws) = worst_false_crown(&bounds, 4000, p0);
        assert!(worst <= 0.025, "p0 {p0}: {worst}");
        assert!(worst >= no_draws);
        for decisive in [0.1, 0.5, 1.0] {
            let win = p0 - (1.0 - decisive) / 2.0;
            if win < 0.0 || win > decisive {
                continue; // no contender with this share scores p0
            }
            let s = summarize(&one_env(EnvOdds { win, loss: decisive - win }), &config, p0, 200, 3);
            assert!(s.env_challenges_p50 <= 600 && s.p_crowned <= 0.05, "p0 {p0} d {decisive}: {s:?}");
        }
        if p0 < 0.85 {
            let s = summarize(&one_env(EnvOdds { win: p0 + 0.1, loss: 0.9 - p0 }), &config, p0, 200, 3);
            assert!(s.p_crowned >= 0.98, "p0 {p0}: {s:?}");
        }
    }
}

/// The worked values of ledger-spec/02's score plan section, decided by af.
#[test]
fn score_plan_worked_values_of_the_spec() {
    use af::evaluation::stopping::{log_mixture_score, Verdict};
    let rule = DEFAULT_RULE;
    // (n, h, P, L to 6 places, verdict)
    for (n, h, p, l, verdict) in [
        (40u64, 60u64, 500_000u32, 3.471438, Verdict::Better),
        (40, 58, 500_000, 2.613988, Verdict::Continue),
        (100, 133, 510_000, 3.202245, Verdict::Better),
        (100, 132, 510_000, 2.908623, Verdict::Continue),
        (100, 171, 700_000, 2.996562, Verdict::Better),
        (100, 170, 700_000, 2.629426, Verdict::Continue),
        (400, 472, 510_000, 3.045531, Verdict::Better),
        (400, 471, 510_000, 2.888017, Verdict::Continue),
    ] {
        let p0 = f64::from(p) / 1e6;
        assert!((log_mixture_score(n, h, p0, 4, 4) - l).abs() < 5e-7, "{n} {h} {p}");
        let (wins, draws) = ((h / 2) as u32, (h % 2) as u32);
        assert_eq!(rule.verdict_on(wins, n as u32 - wins - draws, draws, p0), verdict, "{n} {h} {p}");
    }
    // (wins, losses, draws, bar, ln of the bets' average capital): the network's plan,
    // P1 = bar + 60000, the mean condition at the bar.
    for (wins, losses, draws, p, capital, futile) in [
        (0u32, 0u32, 63u32, 510_000u32, 3.000920, true),
        (0, 0, 62, 510_000, 2.930080, false),
        (238, 238, 0, 510_000, 3.009144, true),
        (237, 237, 0, 510_000, 2.991695, false),
        (90, 90, 80, 510_000, 2.133497, false),
        (1440, 560, 0, 700_000, 6.426925, false),
    ] {
        let got =
            af::evaluation::futility::BarFutility::log_capital(wins.into(), losses.into(), draws.into(), p + 60_000);
        assert!((got - capital).abs() < 5e-7, "{wins} {losses} {draws}: {got}");
        let p0 = f64::from(p) / 1e6;
        assert_eq!(DEFAULT_FUTILITY.is_futile(wins, losses, draws, p0), futile, "{wins} {losses} {draws}");
    }
    // The older spelling (mean condition at P1 = bar + 65000): the last row is futile.
    let older = af::evaluation::plan::parse_plan(
        "score alpha_ppm=50000 prior=4,4 challenges=4000 epsilon_ppm=10000 half_life_blocks=7200 \
         futility margin_ppm=65000 alpha_ppm=50000",
    )
    .and_then(|(_, f)| f)
    .unwrap();
    assert!((af::evaluation::futility::BarFutility::log_capital(1440, 560, 0, 765_000) - 8.800900).abs() < 5e-7);
    assert!(older.is_futile(1440, 560, 0, 0.7));
}

/// Replay re-derives each decision from the recorded plan: the plan's text reads back,
/// an honest decision passes and a changed outcome does not.
#[test]
fn recorded_plans_read_back_and_decisions_are_rederived() {
    use af::ledger::event::{EnvDecision, EnvOutcome, EnvRef};
    use af::replay::decisions::rederive_decision;
    for futility in [None, Some(ADVANTAGE)] {
        for rule in [
            MIXTURE_RULE,
            StoppingRule::Wilson { z: 1.96 },
            StoppingRule::wilson_calibrated(500),
            StoppingRule::Sprt { delta: 0.1, alpha: 0.025, beta: 0.1 },
        ] {
            let text = describe_plan(&rule, futility.as_ref());
            assert_eq!(parse_plan(&text), Some((rule, futility)), "{text}");
            // Only a score plan takes the bar futility.
            assert_eq!(parse_plan(&describe_plan(&rule, Some(&DEFAULT_FUTILITY))), None);
        }
    }
    for futility in [None, Some(DEFAULT_FUTILITY)] {
        let text = describe_plan(&DEFAULT_RULE, futility.as_ref());
        assert_eq!(parse_plan(&text), Some((DEFAULT_RULE, futility)), "{text}");
    }
    assert_eq!(parse_plan(&describe_plan(&DEFAULT_RULE, Some(&ADVANTAGE))), None);
    assert_eq!(parse_plan("mixture alpha=0.05 prior=4,4 extra"), None);
    // Out-of-range numbers are not a plan: a log cannot ask replay for a billion challenges.
    let huge = DEFAULT_RULE.with_max_challenges(2_000_000).describe();
    assert_eq!(parse_plan(&huge), None, "{huge}");
    assert_eq!(parse_plan(&DEFAULT_RULE.describe().replace("alpha_ppm=50000", "alpha_ppm=0")), None);
    assert_eq!(parse_plan(&DEFAULT_RULE.describe().replace("prior=4,4", "prior=04,4")), None);
    assert_eq!(parse_plan(&DEFAULT_RULE.describe().replace("half_life_blocks=7200", "half_life_blocks=0")), None);
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
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::ContenderNotBetter, 0, 0, 1300)).is_ok());
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::Inconclusive, 0, 0, 1300)).is_err());
    // Without futility in the plan, the same record cannot be "not better".
    let plain = DEFAULT_RULE.describe();
    assert!(rederive_decision(&plain, 510_000, &decision(EnvOutcome::ContenderNotBetter, 0, 0, 1300)).is_err());
    // Past the plan's challenge cap is false whatever the outcome.
    assert!(rederive_decision(&plain, 510_000, &decision(EnvOutcome::Inconclusive, 2000, 2000, 1)).is_err());
    // A mixture plan of an older log still rederives by its own formulas (draws dropped).
    let old = describe_plan(&MIXTURE_RULE, Some(&ADVANTAGE));
    assert!(rederive_decision(&old, 510_000, &decision(EnvOutcome::ContenderNotBetter, 0, 0, 120)).is_ok());
    assert!(rederive_decision(&old, 510_000, &decision(EnvOutcome::ContenderBetter, 90, 10, 500)).is_ok());
    // The dominance crown: an unbeaten run of 144 wins is crowned far below a bar of 0.9,
    // 143 is not; a "not better" recorded while the crown is within reach is false (the
    // score rule and its futility stop both hold there), and is right once a loss too
    // many puts it out of reach; a copy is given up on at 121 draws, not at 120.
    let bar = 900_000;
    assert!(rederive_decision(&plan, bar, &decision(EnvOutcome::ContenderBetter, 144, 0, 2000)).is_ok());
    assert!(rederive_decision(&plan, bar, &decision(EnvOutcome::ContenderBetter, 143, 0, 2000)).is_err());
    let reach = rederive_decision(&plan, bar, &decision(EnvOutcome::ContenderNotBetter, 100, 0, 1000)).unwrap_err();
    assert!(reach.contains("dominance crown is still within reach"), "{reach}");
    // (an env abandoned there, the match decided elsewhere, is inconclusive)
    assert!(rederive_decision(&plan, bar, &decision(EnvOutcome::Inconclusive, 100, 0, 1000)).is_ok());
    assert!(rederive_decision(&plan, bar, &decision(EnvOutcome::ContenderNotBetter, 18, 1, 400)).is_ok());
    assert!(rederive_decision(&plan, bar, &decision(EnvOutcome::ContenderNotBetter, 19, 1, 400)).is_err());
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::ContenderNotBetter, 0, 0, 121)).is_ok());
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::ContenderNotBetter, 0, 0, 120)).is_err());
    // Under version 1's plan (no dominance crown) the same unbeaten run is dismissed.
    let v1 = af::evaluation::network_plan::PLAN_V1_TEXT;
    assert!(rederive_decision(v1, bar, &decision(EnvOutcome::ContenderNotBetter, 100, 0, 1000)).is_ok());
    assert!(rederive_decision(v1, bar, &decision(EnvOutcome::ContenderBetter, 144, 0, 2000)).is_err());
    // A dominance clause out of its ranges, or on another rule, is no plan.
    for bad in [plan.replace("rate_ppm=950000", "rate_ppm=400000"), plan.replace("share_ppm=40000", "share_ppm=0")] {
        assert_eq!(parse_plan(&bad), None, "{bad}");
    }
    assert_eq!(parse_plan("mixture alpha=0.05 prior=4,4 dominance rate_ppm=950000 alpha_ppm=5000 share_ppm=40000 share_alpha_ppm=50000"), None);
    // Hostile values are findings, never panics.
    assert!(rederive_decision(&plan, 0, &decision(EnvOutcome::ContenderBetter, 1, 0, 0)).is_err());
    assert!(rederive_decision(&plan, 510_000, &decision(EnvOutcome::ContenderBetter, u32::MAX, 1, 0)).is_err());
    assert!(rederive_decision("nonsense", 510_000, &decision(EnvOutcome::ContenderBetter, 1, 0, 0)).is_err());
}
