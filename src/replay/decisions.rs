//! Re-deriving a log's recorded decisions from its own counts: each env decision from
//! the match's plan and ratio to beat (ledger-spec/02, "What is checked"), and each match
//! decision from the env decisions before it. Pure; the fold calls these and turns an
//! error into a `false_decision` finding.

use super::records::MatchFold;
use crate::ledger::event::MatchDecided;

/// What is wrong with a match's recorded decision given its own log, if anything: the
/// verdict must follow from the env decisions recorded before it (better in a majority
/// of the match's envs), the champion named must be the winner, and a champion that
/// stays keeps the ratio the match was played at. (The ratio a winner sets, and the
/// ratio at each start, need the ratio parameters: `combine::ratio_findings`.)
pub(super) fn match_decision_error<S: AsRef<str>>(m: &MatchFold, decided: &MatchDecided<S>) -> Option<String> {
    let (better, needed) = m.better_and_needed();
    if decided.contender_won != (better >= needed) {
        return Some(format!(
            "says the contender {} but it was better in {better} of {} envs ({needed} needed) by the env decisions recorded before it",
            if decided.contender_won { "won" } else { "lost" },
            m.envs.len()
        ));
    }
    let winner = if decided.contender_won { &m.contender.hotkey } else { &m.champion.hotkey };
    if decided.champion_hotkey.as_ref() != &**winner {
        return Some(format!("names {} the champion, but the winner is {winner}", decided.champion_hotkey.as_ref()));
    }
    if decided.win_rates.len() != m.envs.len() {
        return Some(format!("gives {} win rates for {} envs", decided.win_rates.len(), m.envs.len()));
    }
    // A plan af does not know leaves nothing to compare rates with (its decisions are
    // already reported as unknown rules).
    let rule = crate::evaluation::plan::parse_plan(&m.rule).map(|(rule, _)| rule);
    for (rate, env) in decided.win_rates.iter().zip(m.envs.iter()) {
        let name = rate.env.name.as_ref();
        if name != &*env.name {
            return Some(format!("gives a win rate for env {name} where the match's env is {}", env.name));
        }
        // The rate is of the tally the env's decision recorded (an env with no decision
        // recorded has nothing to compare with).
        if let (Some((wins, losses, draws)), Some(rule)) = (m.env_folds.get(name).and_then(|e| e.decided_tally), rule) {
            let expected = rule.env_rate_ppm(wins, losses, draws);
            if rate.win_rate_ppm != expected {
                return Some(format!(
                    "env {name}: win rate {} ppm, but its decision's {wins} wins, {losses} losses and {draws} draws give {expected} ppm",
                    rate.win_rate_ppm
                ));
            }
        }
    }
    if !decided.contender_won && decided.new_ratio_to_beat_ppm != m.ratio_to_beat_ppm {
        return Some(format!(
            "the champion stays but the ratio to beat moves from {} to {} ppm",
            m.ratio_to_beat_ppm, decided.new_ratio_to_beat_ppm
        ));
    }
    None
}

/// Re-derives an environment decision from the match's recorded plan (rule and futility
/// stop), its ratio to beat and the decision's own counts: `Better` must be what the rule
/// says there, `NotBetter` what the rule or the futility stop says, and an inconclusive
/// (capped or abandoned) env one that neither had decided. Pure; never panics on a log's
/// values.
pub fn rederive_decision<S: AsRef<str>>(
    plan: &str,
    ratio_to_beat_ppm: u32,
    decision: &crate::ledger::event::EnvDecision<S>,
) -> Result<(), String> {
    use crate::evaluation::plan::parse_plan;
    use crate::evaluation::stopping::SCORE_SLACK;
    use crate::ledger::event::EnvOutcome;
    let (rule, futility) = parse_plan(plan).ok_or_else(|| format!("the match's rule {plan:?} is not one af knows"))?;
    if ratio_to_beat_ppm == 0 || ratio_to_beat_ppm >= 1_000_000 {
        return Err(format!("ratio to beat {ratio_to_beat_ppm} ppm is outside (0, 1)"));
    }
    let p0 = f64::from(ratio_to_beat_ppm) / 1e6;
    let decisive = decision.wins.checked_add(decision.losses).ok_or("wins + losses overflow")?;
    let counted = u64::from(decisive) + u64::from(decision.draws);
    if counted != decision.n_challenges {
        return Err(format!("{counted} wins, losses and draws, but {} challenges", decision.n_challenges));
    }
    if let Some(cap) = rule.max_challenges().filter(|cap| decision.n_challenges > *cap) {
        return Err(format!("{} challenges, past the plan's cap of {cap}", decision.n_challenges));
    }
    // A stop is judged with the threshold lowered by SCORE_SLACK, a continuation with it
    // raised (score plans; the others have no slack): binary64 noise never convicts.
    // A crown is judged at both: a recorded stop by the crown at -slack, any other record
    // against a crown at +slack (the crown wins at the same counts).
    let (w, l, d) = (decision.wins, decision.losses, decision.draws);
    let stop = rule.conditions(w, l, d, p0, -SCORE_SLACK);
    let go_on = rule.conditions(w, l, d, p0, SCORE_SLACK);
    let futile = futility.is_some_and(|f| f.is_futile_with_slack(w, l, d, p0, -SCORE_SLACK));
    let still_futile = futility.is_some_and(|f| f.is_futile_with_slack(w, l, d, p0, SCORE_SLACK));
    let ok = match decision.outcome {
        EnvOutcome::ContenderBetter => stop.crown,
        EnvOutcome::ContenderNotBetter => !go_on.crown && stop.dismissable && (stop.not_better || futile),
        EnvOutcome::Inconclusive => !go_on.crown && !(go_on.dismissable && (go_on.not_better || still_futile)),
    };
    if ok {
        return Ok(());
    }
    // Only a finding's text needs the verdict as one word.
    let verdict = rule.verdict_with_slack(w, l, d, p0, SCORE_SLACK);
    Err(format!(
        "recorded {:?} at {} wins, {} losses, {} draws against {p0}, but the rule says {verdict:?}{}{}",
        decision.outcome,
        decision.wins,
        decision.losses,
        decision.draws,
        if futile { " and the futility stop applies" } else { "" },
        if go_on.dismissable { "" } else { " (a dominance crown is still within reach)" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;
    use crate::ledger::event::{EnvOutcome, EnvRef, EnvWinRate, MinerRef};
    use crate::replay::records::{EnvFold, HeldMiner, Name};
    use std::sync::Arc;

    fn miner(hotkey: &str) -> HeldMiner {
        MinerRef { hotkey: hotkey.into(), uid: 0, model: "m@1".into() }
    }

    /// A 3-env match whose env decisions say: better in a and b (so the contender won).
    fn played() -> MatchFold {
        let envs: Arc<[EnvRef<Name>]> =
            ["a", "b", "c"].iter().map(|n| EnvRef { name: Name::from(*n), version: 1 }).collect();
        let decided = |outcome, wins, losses| EnvFold {
            decision: Some(outcome),
            decided_tally: Some((wins, losses, 0)),
            wins,
            losses,
            ..EnvFold::default()
        };
        MatchFold {
            contender: miner("5New"),
            champion: miner("5Old"),
            envs,
            rule: crate::evaluation::stopping::MIXTURE_RULE.describe().into(),
            ratio_to_beat_ppm: 510_000,
            started_height: 0,
            started_event_idx: 0,
            started_time_ms: 0,
            chain_block: 10,
            chain_block_hash: Hash32([0; 32]),
            env_folds: [
                (Name::from("a"), decided(EnvOutcome::ContenderBetter, 30, 10)),
                (Name::from("b"), decided(EnvOutcome::ContenderBetter, 20, 5)),
                (Name::from("c"), decided(EnvOutcome::Inconclusive, 1, 1)),
            ]
            .into_iter()
            .collect(),
            decided: None,
            n_transcripts: 0,
            network_rules: false,
        }
    }

    fn decision(m: &MatchFold) -> MatchDecided {
        MatchDecided {
            match_id: Hash32([1; 32]),
            contender_won: true,
            champion_hotkey: "5New".into(),
            win_rates: m
                .envs
                .iter()
                .map(|env| {
                    let (w, l, _) = m.env_folds.get(&env.name).unwrap().decided_tally.unwrap();
                    EnvWinRate {
                        env: EnvRef { name: env.name.to_string(), version: env.version },
                        win_rate_ppm: crate::evaluation::ratio::win_rate_ppm(w, l),
                    }
                })
                .collect(),
            new_ratio_to_beat_ppm: 0,
        }
    }

    #[test]
    fn a_match_decision_must_follow_from_its_own_env_decisions() {
        let m = played();
        let honest = decision(&m);
        assert_eq!(match_decision_error(&m, &honest), None);
        let wrong = |change: &dyn Fn(&mut MatchDecided)| {
            let mut d = honest.clone();
            change(&mut d);
            match_decision_error(&m, &d).expect("a false decision is found")
        };
        assert!(wrong(&|d| d.contender_won = false).contains("better in 2 of 3 envs (2 needed)"));
        assert!(wrong(&|d| d.champion_hotkey = "5Old".into()).contains("the winner is 5New"));
        assert!(wrong(&|d| {
            d.win_rates.pop();
        })
        .contains("2 win rates for 3 envs"));
        assert!(wrong(&|d| d.win_rates.swap(0, 1)).contains("where the match's env is a"));
        // 30 wins and 10 losses are 750,000 ppm.
        assert!(wrong(&|d| d.win_rates[0].win_rate_ppm = 760_000).contains("give 750000 ppm"));

        // A champion that stays keeps the ratio it was played at.
        let mut lost = played();
        lost.env_folds.get_mut("b").unwrap().decision = Some(EnvOutcome::ContenderNotBetter);
        let mut stays = decision(&lost);
        (stays.contender_won, stays.champion_hotkey, stays.new_ratio_to_beat_ppm) = (false, "5Old".into(), 510_000);
        assert_eq!(match_decision_error(&lost, &stays), None);
        stays.new_ratio_to_beat_ppm = 600_000;
        assert!(match_decision_error(&lost, &stays).unwrap().contains("moves from 510000 to 600000"));
    }
}
