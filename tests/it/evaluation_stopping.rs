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
