//! The network's plan: the one score plan every validator decides by and every auditor
//! checks against, fixed per protocol version in ledger-spec/02 ("The network's plan").
//! It is not a setting: a validator whose config names another refuses to start, and a
//! match a log decided under another is a finding against that log and casts no vote.
//!
//! Fixed in the spec rather than read from the chain: an auditor replays offline from
//! the logs and the spec alone, a plan in force at a past block needs no archive node,
//! and the error bounds the spec proves are bounds of these numbers (ledger-spec/02, "The network's plan").

use super::dominance::Dominance;
use super::futility::{Futility, DEFAULT_FUTILITY};
use super::plan::parse_plan;
use super::stopping::{StoppingRule, DEFAULT_RULE};

/// The protocol version whose plan this build plays and checks against.
pub const PLAN_VERSION: u32 = 2;
/// Version 2's rule: score plan, alpha 5%, prior Beta(4, 4), 4,000 challenges per env, a
/// winner's bar decaying to 1/2 + 1% with a half-life of 7,200 blocks, and the dominance
/// crown (more than 95% of the decisive games won, at 0.5%). Version 1 was the same
/// without the dominance crown: a never-worse successor of a strong champion could not
/// pass its bar (issue 54).
pub const NETWORK_RULE: StoppingRule = DEFAULT_RULE;
/// Version 2's futility stop (as version 1's): the bets against the bar plus 6 points at 5%, and only
/// while the contender's mean score is below the bar.
pub const NETWORK_FUTILITY: Futility = DEFAULT_FUTILITY;

/// The network plan's exact text, as `MatchStarted.rule` records it (a test checks it is
/// `describe_plan` of the rule and stop above).
pub const NETWORK_PLAN_TEXT: &str = crate::protocol::PLAN_V2;
/// Version 1's text: a known plan (its decisions are re-derived), not the network's.
pub const PLAN_V1_TEXT: &str = "score alpha_ppm=50000 prior=4,4 challenges=4000 epsilon_ppm=10000 \
                                half_life_blocks=7200 futility margin_ppm=60000 alpha_ppm=50000 mean_margin_ppm=0";

/// Each field where the recorded plan `text` differs from the network plan `network` (a
/// protocol version's, ledger-spec/15), as `name recorded (network's: value)`, in the
/// plan's field order; empty for the network plan. A text that is no plan at all is one
/// difference naming it.
pub fn plan_differences_from(network: &str, text: &str) -> Vec<String> {
    let Some((network_rule, network_futility)) = parse_plan(network) else {
        return vec![format!("the network's plan {network:?} is no plan af knows")];
    };
    let Some((rule, futility)) = parse_plan(text) else {
        return vec![format!("a plan af does not know ({})", crate::bytes::quote_prefix(text))];
    };
    let StoppingRule::Score { alpha_ppm, prior_a, prior_b, max_challenges, epsilon_ppm, half_life_blocks, dominance } =
        rule
    else {
        return vec![format!("rule {} (network's: score)", text.split(' ').next().unwrap_or(""))];
    };
    let StoppingRule::Score {
        alpha_ppm: n_alpha,
        prior_a: n_a,
        prior_b: n_b,
        max_challenges: n_challenges,
        epsilon_ppm: n_epsilon,
        half_life_blocks: n_half_life,
        dominance: n_dominance,
    } = network_rule
    else {
        return vec![format!("the network's plan {network:?} is not a score plan")];
    };
    let mut out = Vec::new();
    let mut differ = |name: &str, ours: String, network: String| {
        if ours != network {
            out.push(format!("{name} {ours} (network's: {network})"));
        }
    };
    differ("alpha_ppm", alpha_ppm.to_string(), n_alpha.to_string());
    differ("prior", format!("{prior_a},{prior_b}"), format!("{n_a},{n_b}"));
    differ("challenges", max_challenges.to_string(), n_challenges.to_string());
    differ("epsilon_ppm", epsilon_ppm.to_string(), n_epsilon.to_string());
    differ("half_life_blocks", half_life_blocks.to_string(), n_half_life.to_string());
    let dominance_text =
        |d: Option<Dominance>| d.map_or("none".to_string(), |d| d.describe().replacen("dominance ", "", 1));
    differ("dominance", dominance_text(dominance), dominance_text(n_dominance));
    let futility_text =
        |f: Option<&Futility>| f.map_or("none".to_string(), |f| f.describe().replacen("futility ", "", 1));
    differ("futility", futility_text(futility.as_ref()), futility_text(network_futility.as_ref()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::plan::describe_plan;

    #[test]
    fn the_network_plan_is_the_spec_text_and_differences_are_named() {
        assert_eq!(NETWORK_PLAN_TEXT, describe_plan(&NETWORK_RULE, Some(&NETWORK_FUTILITY)));
        assert_eq!(
            NETWORK_PLAN_TEXT,
            "score alpha_ppm=50000 prior=4,4 challenges=4000 epsilon_ppm=10000 half_life_blocks=7200 \
             dominance rate_ppm=950000 alpha_ppm=5000 share_ppm=40000 share_alpha_ppm=50000 \
             futility margin_ppm=60000 alpha_ppm=50000 mean_margin_ppm=0"
        );
        // With the longest stop suffix an env decision adds, the text fits an event's
        // name bound (ledger-spec/02, "Bounds"): 251 of 256 bytes.
        let longest = format!("{NETWORK_PLAN_TEXT} (stopped: match decided)");
        assert!(longest.len() <= crate::limits::MAX_NAME_BYTES, "{}", longest.len());
        // Version 1 reads back as a plan, and differs by its missing dominance crown only.
        assert!(parse_plan(PLAN_V1_TEXT).is_some());
        assert_eq!(
            plan_differences_from(NETWORK_PLAN_TEXT, PLAN_V1_TEXT),
            vec!["dominance none (network's: rate_ppm=950000 alpha_ppm=5000 share_ppm=40000 share_alpha_ppm=50000)"]
        );
        assert!(plan_differences_from(NETWORK_PLAN_TEXT, NETWORK_PLAN_TEXT).is_empty());
        let lenient = "score alpha_ppm=500000 prior=4,4 challenges=4000 epsilon_ppm=0 half_life_blocks=7200";
        assert_eq!(
            plan_differences_from(NETWORK_PLAN_TEXT, lenient),
            vec![
                "alpha_ppm 500000 (network's: 50000)",
                "epsilon_ppm 0 (network's: 10000)",
                "dominance none (network's: rate_ppm=950000 alpha_ppm=5000 share_ppm=40000 share_alpha_ppm=50000)",
                "futility none (network's: margin_ppm=60000 alpha_ppm=50000 mean_margin_ppm=0)",
            ]
        );
        assert_eq!(
            plan_differences_from(NETWORK_PLAN_TEXT, "mixture alpha=0.05 prior=4,4"),
            vec!["rule mixture (network's: score)"]
        );
        assert_eq!(plan_differences_from(NETWORK_PLAN_TEXT, "vibes").len(), 1);
        // Version 4's plan reads back, its dominance and futility carrying the cap, and is
        // named field by field against version 2's.
        let (rule, futility) = parse_plan(crate::protocol::PLAN_V4).expect("version 4's plan is a plan");
        assert_eq!(rule.dominance().and_then(|d| d.reach_over), Some(4_000));
        let Some(Futility::Bar(bar)) = futility else { panic!("a bar futility") };
        assert_eq!((bar.mean_margin_ppm, bar.rise.map(|r| (r.ppm, r.over))), (Some(0), Some((20_000, 4_000))));
        assert_eq!(describe_plan(&rule, futility.as_ref()), crate::protocol::PLAN_V4);
        let longest = format!("{} (stopped: match decided)", crate::protocol::PLAN_V4);
        assert!(longest.len() <= crate::limits::MAX_NAME_BYTES, "{}", longest.len());
        assert_eq!(
            plan_differences_from(crate::protocol::PLAN_V4, NETWORK_PLAN_TEXT),
            vec![
                "dominance rate_ppm=950000 alpha_ppm=5000 share_ppm=40000 share_alpha_ppm=50000 (network's: \
                 dominance-reach rate_ppm=950000 alpha_ppm=6000 share_ppm=40000 share_alpha_ppm=100000)",
                "futility margin_ppm=60000 alpha_ppm=50000 mean_margin_ppm=0 (network's: margin_ppm=60000 \
                 alpha_ppm=50000 rise_ppm=20000)",
            ]
        );
        // A validator plays each version's plan as it reads back (validator/run.rs).
        use crate::protocol::Protocol;
        for table in [Protocol::network(), Protocol::local(), Protocol::upgrade_test(40)] {
            for version in table.versions() {
                assert!(parse_plan(version.plan).is_some(), "version {}", version.version);
            }
        }
        // A rise above the margin, or a `mean_margin_ppm` beside a rise, is no plan.
        assert!(parse_plan(&crate::protocol::PLAN_V4.replace("rise_ppm=20000", "rise_ppm=70000")).is_none());
        assert!(parse_plan(&crate::protocol::PLAN_V4.replace("rise_ppm", "mean_margin_ppm=0 rise_ppm")).is_none());
        assert!(plan_differences_from(NETWORK_PLAN_TEXT, "vibes")[0].contains("does not know"));
    }
}
