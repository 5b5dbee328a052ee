//! A plan's text, as `MatchStarted.rule` records it (ledger-spec/02, "The rule text"):
//! written from a rule and its futility stop, read back exactly (one spelling, numbers in
//! their ranges) for replay to re-derive every decision, and put in plain words for
//! people.

use super::dominance::Dominance;
use super::futility::{AdvantageFutility, BarFutility, Futility, Rise};
use super::stopping::{StoppingRule, MAX_SCORE_CHALLENGES};

/// The full description recorded in `MatchStarted.rule`: the rule, then the futility stop
/// if there is one (`mixture alpha=0.05 prior=4,4 futility advantage=0.1 alpha=0.05`).
pub fn describe_plan(rule: &StoppingRule, futility: Option<&Futility>) -> String {
    match futility {
        None => rule.describe(),
        Some(f) => format!("{} {}", rule.describe(), f.describe()),
    }
}

/// A recorded plan in plain words, for people (the recorded text stays as it is: replay
/// parses it). Text that is not a plan is returned as is.
pub fn plan_in_words(text: &str) -> String {
    let Some((rule, futility)) = parse_plan(text) else { return text.to_string() };
    let percent = |x: f64| format!("{}%", x * 100.0);
    let mut words = match rule {
        StoppingRule::Score {
            alpha_ppm,
            prior_a,
            prior_b,
            max_challenges,
            epsilon_ppm,
            half_life_blocks,
            dominance,
        } => {
            let mut words = format!(
                "scores each challenge 1 for a win, 1/2 for a draw, 0 for a loss, and stops as soon as the scores \
                 prove the contender's mean above or below the ratio to beat, valid at every challenge, with at \
                 most {} chance of a wrong crown (a Beta({prior_a},{prior_b}) mixture test); at most \
                 {max_challenges} challenges per env; a winner's bar decays to 1/2 + {} with a half-life of \
                 {half_life_blocks} blocks",
                percent(f64::from(alpha_ppm) / 1e6),
                percent(f64::from(epsilon_ppm) / 1e6)
            );
            if let Some(d) = dominance.filter(|d| d.reach_over.is_some()) {
                words.push_str(&format!(
                    "; also crowns, whatever the bar, a contender shown to win more than {} of the challenges \
                     where the two differ (at most {} chance of a wrong crown; a run of wins with no loss counts \
                     most), and gives up on no contender that could still be crowned so: one that has won at least \
                     {} of them, could still be crowned by winning {} of the challenges left, and is not shown to \
                     win fewer than {} of the challenges (at {} error)",
                    percent(f64::from(d.rate_ppm) / 1e6),
                    percent(f64::from(d.alpha_ppm) / 1e6),
                    percent(f64::from(d.rate_ppm) / 1e6),
                    percent(f64::from(d.share_ppm) / 1e6),
                    percent(f64::from(d.share_ppm) / 1e6),
                    percent(f64::from(d.share_alpha_ppm) / 1e6)
                ));
            } else if let Some(d) = dominance {
                words.push_str(&format!(
                    "; also crowns, whatever the bar, a contender shown to win more than {} of the challenges \
                     where the two differ (at most {} chance of a wrong crown), and gives up on no contender \
                     that could still be crowned so: one that has won at least {} of them and is not shown to \
                     win fewer than {} of the challenges (at {} error)",
                    percent(f64::from(d.rate_ppm) / 1e6),
                    percent(f64::from(d.alpha_ppm) / 1e6),
                    percent(f64::from(d.rate_ppm) / 1e6),
                    percent(f64::from(d.share_ppm) / 1e6),
                    percent(f64::from(d.share_alpha_ppm) / 1e6)
                ));
            }
            words
        }
        StoppingRule::Mixture { alpha, prior_a, prior_b } => format!(
            "stops as soon as the decisive games prove the contender's win rate above or below the ratio to \
             beat, valid at every game, with at most {} chance of a wrong crown (a Beta({prior_a},{prior_b}) \
             mixture test)",
            percent(alpha)
        ),
        StoppingRule::Wilson { z } => {
            format!(
                "stops when a Wilson interval (z={z}) clears the ratio to beat; not valid when checked at every game"
            )
        }
        StoppingRule::WilsonCalibrated { z, cap } => {
            format!("stops when a Wilson interval (z={z}, calibrated for {cap} games) clears the ratio to beat")
        }
        StoppingRule::Sprt { delta, alpha, beta } => format!(
            "a sequential probability ratio test: wrong crown at most {}, missed improvement of {delta} at most {}",
            percent(alpha),
            percent(beta)
        ),
    };
    match futility {
        Some(Futility::Bar(f)) => {
            words.push_str(&format!(
                "; gives up early when the contender's mean score is shown below the ratio to beat plus {} \
                 (at {} error)",
                percent(f64::from(f.margin_ppm) / 1e6),
                percent(f64::from(f.alpha_ppm) / 1e6)
            ));
            match f.mean_margin_ppm {
                _ if f.rise.is_some() => words.push_str(&format!(
                    ", only while its mean so far is below the ratio to beat plus a margin that rises from 0 to \
                     {} over the env's challenges",
                    percent(f64::from(f.rise.map_or(0, |r| r.ppm)) / 1e6)
                )),
                Some(0) => words.push_str(", only while its mean so far is below the ratio to beat"),
                Some(m) => words.push_str(&format!(
                    ", only while its mean so far is below the ratio to beat plus {}",
                    percent(f64::from(m) / 1e6)
                )),
                None => {}
            }
        }
        Some(Futility::Advantage(f)) => words.push_str(&format!(
            "; gives up early when the contender is shown not to be {} better per challenge (at {} error)",
            percent(f.advantage),
            percent(f.alpha)
        )),
        None => {}
    }
    sentences(&words)
}

/// Clauses joined by "; " as sentences of their own: a page shows the plan as a short
/// paragraph, not one sentence of 900 characters.
fn sentences(clauses: &str) -> String {
    let mut text: Vec<String> = clauses
        .split("; ")
        .map(|clause| {
            let mut chars = clause.chars();
            chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
        })
        .collect();
    if let Some(last) = text.last_mut() {
        last.push('.');
    }
    text.join(". ")
}

/// Reads a description written by [`describe_plan`] back (for replay, which re-derives
/// each decision from it). `None` if it is not one.
pub fn parse_plan(text: &str) -> Option<(StoppingRule, Option<Futility>)> {
    let (rule_text, futility) = match text.split_once(" futility ") {
        Some((rule, rest)) => {
            let mut fields = std::collections::BTreeMap::new();
            for part in rest.split(' ') {
                let (k, v) = part.split_once('=')?;
                fields.insert(k, v);
            }
            let futility = if rule.starts_with("score ") {
                // `rise_ppm` (version 4) stands where `mean_margin_ppm=0` stood: the rise
                // starts at the bar. Its `over` is the rule's cap, set below.
                let rise = match fields.get("rise_ppm") {
                    Some(v) => Some(Rise { ppm: v.parse().ok()?, over: 0 }),
                    None => None,
                };
                Futility::Bar(BarFutility {
                    margin_ppm: fields.get("margin_ppm")?.parse().ok()?,
                    alpha_ppm: fields.get("alpha_ppm")?.parse().ok()?,
                    mean_margin_ppm: match (fields.get("mean_margin_ppm"), rise) {
                        (Some(v), _) => Some(v.parse().ok()?),
                        (None, Some(_)) => Some(0),
                        (None, None) => None,
                    },
                    rise,
                })
            } else {
                Futility::Advantage(AdvantageFutility {
                    advantage: fields.get("advantage")?.parse().ok()?,
                    alpha: fields.get("alpha")?.parse().ok()?,
                })
            };
            (rule, Some(futility))
        }
        None => (text, None),
    };
    let rule_text = rule_text.strip_suffix(" (not anytime-valid)").unwrap_or(rule_text);
    // A score rule's dominance clause sits between its numbers and the futility stop; its
    // `alpha_ppm` is its own. `dominance-reach` (version 4) has the reach condition, whose
    // challenges are the rule's, set below.
    let clause = rule_text
        .split_once(" dominance-reach ")
        .map(|(rule, clause)| (rule, clause, true))
        .or_else(|| rule_text.split_once(" dominance ").map(|(rule, clause)| (rule, clause, false)));
    let (rule_text, dominance) = match clause {
        Some((rule, clause, reach)) => {
            let mut fields = std::collections::BTreeMap::new();
            for part in clause.split(' ') {
                let (k, v) = part.split_once('=')?;
                fields.insert(k, v.parse::<u32>().ok()?);
            }
            let field = |k: &str| fields.get(k).copied();
            let dominance = Dominance {
                rate_ppm: field("rate_ppm")?,
                alpha_ppm: field("alpha_ppm")?,
                share_ppm: field("share_ppm")?,
                share_alpha_ppm: field("share_alpha_ppm")?,
                reach_over: reach.then_some(0),
            };
            (rule, Some(dominance))
        }
        None => (rule_text, None),
    };
    let mut words = rule_text.split(' ');
    let name = words.next()?;
    let mut fields = std::collections::BTreeMap::new();
    for word in words {
        let (k, v) = word.split_once('=')?;
        fields.insert(k, v);
    }
    let num = |k: &str| fields.get(k).and_then(|v| v.parse::<f64>().ok());
    let int = |k: &str| fields.get(k).and_then(|v| v.parse::<u64>().ok());
    let rule = match name {
        "score" => {
            let (a, b) = fields.get("prior")?.split_once(',')?;
            let max_challenges = int("challenges")?;
            StoppingRule::Score {
                alpha_ppm: u32::try_from(int("alpha_ppm")?).ok()?,
                prior_a: a.parse().ok()?,
                prior_b: b.parse().ok()?,
                max_challenges,
                epsilon_ppm: u32::try_from(int("epsilon_ppm")?).ok()?,
                half_life_blocks: int("half_life_blocks")?,
                dominance: dominance.map(|d| Dominance { reach_over: d.reach_over.map(|_| max_challenges), ..d }),
            }
        }
        _ if dominance.is_some() => return None,
        "mixture" => {
            let (a, b) = fields.get("prior")?.split_once(',')?;
            StoppingRule::Mixture { alpha: num("alpha")?, prior_a: a.parse().ok()?, prior_b: b.parse().ok()? }
        }
        "wilson" => StoppingRule::Wilson { z: num("z")? },
        "wilson-calibrated" => StoppingRule::WilsonCalibrated { z: num("z")?, cap: fields.get("cap")?.parse().ok()? },
        "sprt" => StoppingRule::Sprt { delta: num("delta")?, alpha: num("alpha")?, beta: num("beta")? },
        _ => return None,
    };
    let futility = match (futility, rule.max_challenges()) {
        (Some(Futility::Bar(f)), Some(cap)) => {
            Some(Futility::Bar(BarFutility { rise: f.rise.map(|r| Rise { over: cap, ..r }), ..f }))
        }
        (other, _) => other,
    };
    // Only a description this build would write is accepted (one spelling per plan), with
    // parameters inside their ranges.
    let sane = match (rule, futility) {
        (
            StoppingRule::Score {
                alpha_ppm,
                prior_a,
                prior_b,
                max_challenges,
                epsilon_ppm,
                half_life_blocks,
                dominance,
            },
            f,
        ) => {
            dominance.is_none_or(|d| d.is_sane())
                && (1..1_000_000).contains(&alpha_ppm)
                && (1..=1_000_000_000).contains(&half_life_blocks)
                && (1..=1_000).contains(&prior_a)
                && (1..=1_000).contains(&prior_b)
                && (1..=MAX_SCORE_CHALLENGES).contains(&max_challenges)
                && epsilon_ppm < 500_000
                && match f {
                    Some(Futility::Bar(b)) => {
                        (1..1_000_000).contains(&b.margin_ppm)
                            && (1..1_000_000).contains(&b.alpha_ppm)
                            && b.mean_margin_ppm.is_none_or(|m| m <= b.margin_ppm)
                            && b.rise.is_none_or(|r| (1..=b.margin_ppm).contains(&r.ppm))
                    }
                    Some(Futility::Advantage(_)) => false,
                    None => true,
                }
        }
        (_, Some(Futility::Bar(_))) => false,
        // The older plans: each number inside the range it has a meaning in (a NaN or
        // infinity parses, and would make every comparison of a verdict false).
        (rule, futility) => {
            let unit = |x: f64| x > 0.0 && x < 1.0;
            let prior = |a: u32, b: u32| (1..=1_000).contains(&a) && (1..=1_000).contains(&b);
            let rule_ok = match rule {
                StoppingRule::Mixture { alpha, prior_a, prior_b } => unit(alpha) && prior(prior_a, prior_b),
                StoppingRule::Wilson { z } => z > 0.0 && z <= 100.0,
                StoppingRule::WilsonCalibrated { z, cap } => z > 0.0 && z <= 100.0 && cap >= 1,
                StoppingRule::Sprt { delta, alpha, beta } => unit(delta) && unit(alpha) && unit(beta),
                StoppingRule::Score { .. } => false,
            };
            rule_ok
                && futility.is_none_or(|f| matches!(f, Futility::Advantage(a) if unit(a.advantage) && unit(a.alpha)))
        }
    };
    (sane && describe_plan(&rule, futility.as_ref()) == text).then_some((rule, futility))
}

#[cfg(test)]
mod words_tests {
    #[test]
    fn a_recorded_plan_reads_in_plain_words_and_other_text_is_kept() {
        let words = super::plan_in_words("mixture alpha=0.05 prior=4,4 futility advantage=0.1 alpha=0.05");
        assert!(words.contains("at most 5% chance of a wrong crown"), "{words}");
        assert!(words.contains("not to be 10% better"), "{words}");
        assert_eq!(super::plan_in_words("something else"), "something else");
        let score = super::plan_in_words(&super::describe_plan(
            &super::super::stopping::DEFAULT_RULE,
            Some(&super::super::futility::DEFAULT_FUTILITY),
        ));
        assert!(score.contains("1/2 for a draw") && score.contains("at most 5% chance of a wrong crown"), "{score}");
        assert!(score.contains("below the ratio to beat plus 6%"), "{score}");
        assert!(score.contains("only while its mean so far is below the ratio to beat"), "{score}");
        assert!(score.contains(". At most 4000 challenges per env. "), "{score}");
        assert!(score.split(". ").all(|sentence| sentence.len() < 400), "short sentences: {score}");
        assert!(
            score.contains("whatever the bar, a contender shown to win more than 95% of the challenges"),
            "{score}"
        );
        assert!(score.contains("win fewer than 4% of the challenges (at 5% error)"), "{score}");
        let v4 = super::plan_in_words(crate::protocol::PLAN_V4);
        assert!(v4.contains("could still be crowned by winning 4% of the challenges left"), "{v4}");
        assert!(v4.contains("rises from 0 to 2% over the env's challenges"), "{v4}");
        assert!(v4.split(". ").all(|sentence| sentence.len() < 400), "short sentences: {v4}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An older plan's numbers must lie where they mean something: a NaN, an infinity or
    /// an alpha of 1.5 parses as a number, and would make every verdict's comparison
    /// false; such a plan is unknown, and each decision under it false.
    #[test]
    fn older_plans_outside_their_ranges_are_not_plans() {
        let w = " (not anytime-valid)";
        for known in [
            "mixture alpha=0.05 prior=4,4".to_string(),
            format!("wilson z=3{w}"),
            "sprt delta=0.05 alpha=0.05 beta=0.1".into(),
        ] {
            assert!(parse_plan(&known).is_some(), "{known}");
        }
        for unknown in [
            "mixture alpha=NaN prior=4,4".to_string(),
            "mixture alpha=1.5 prior=4,4".into(),
            "mixture alpha=0.05 prior=0,4".into(),
            format!("wilson z=inf{w}"),
            format!("wilson z=0{w}"),
            "sprt delta=0.05 alpha=0.05 beta=1".into(),
            format!("wilson z=3{w} futility advantage=NaN alpha=0.05"),
            format!("wilson z=3.0{w}"),
        ] {
            assert!(parse_plan(&unknown).is_none(), "{unknown}");
        }
    }
}
