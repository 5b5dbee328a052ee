//! Replay, vTrust and the audit on synthetic networks of real logs: golden state hashes,
//! each kind of misbehaviour found and priced as docs/auditor.md says, the same state with
//! one thread or many and from a snapshot or from genesis, and the `af audit` and
//! `af transcripts` commands with proofs that fail when any byte changes.

use crate::{af, check_fixture, stdout};
use af::envs;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::block::SealedBlock;
use af::ledger::proof::{verify_inclusion_proof, InclusionProof};
use af::ledger::Store;
use af::miner::policy::Policy;
use af::replay::combine::NetworkState;
use af::replay::records::DiscrepancyKind;
use af::replay::vtrust_history::vtrust_history;
use af::replay::{self, Replay};
use af::synthetic_logs::{write_network, Faults, NetworkSpec, SynthMiner};

fn build(spec: &NetworkSpec) -> (tempfile::TempDir, Vec<af::bytes::ValidatorKey>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    let keys = write_network(&store, spec).unwrap();
    (dir, keys)
}

fn replay_with(dir: &std::path::Path, threads: usize, snapshot: Option<replay::Snapshot>) -> Replay {
    let store = Store::open_read_only(dir).unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    let snapshot = snapshot.map(|s| (s, replay::FoldSource::Untrusted));
    pool.install(|| replay::replay(&store, &envs::registry(), snapshot, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}))
        .unwrap()
}

fn kinds(state: &NetworkState) -> Vec<(usize, DiscrepancyKind)> {
    let index = |v| state.validators.iter().position(|s| s.validator == v).unwrap_or(usize::MAX);
    state.discrepancies.iter().map(|d| (index(d.validator), d.kind)).collect()
}

fn vtrust(state: &NetworkState, key: &af::bytes::ValidatorKey) -> u32 {
    state.validators.iter().find(|v| v.validator == *key).unwrap().vtrust_ppm
}

/// The scenarios whose state hashes are golden (and ledger-spec/14's vectors): the
/// small network on two envs, `mult` and `coin`, whose transcripts are short, so each
/// scenario's logs are a few hundred kB.
fn scenarios() -> Vec<(&'static str, NetworkSpec)> {
    let small = |n| NetworkSpec { envs: vec!["mult".into()], ..NetworkSpec::small(n) };
    let with = |faults: Faults, n: usize| NetworkSpec { faults, ..small(n) };
    vec![
        ("clean", small(3)),
        ("forged_score", with(Faults { forge_score: Some((1, 5)), ..Faults::default() }, 3)),
        ("skipped_index", with(Faults { skip_index: Some(0), ..Faults::default() }, 3)),
        ("equivocation", with(Faults { equivocate: Some((2, 0)), ..Faults::default() }, 3)),
        ("disagreeing_validator", with(Faults { flip_decisions: Some(3), ..Faults::default() }, 4)),
        ("picked_match_id", with(Faults { pick_match_id: Some(1), ..Faults::default() }, 3)),
        ("low_bar", with(Faults { low_bar: Some(2), ..Faults::default() }, 3)),
        ("sandbagged", with(Faults { sandbagged: Some(3), ..Faults::default() }, 4)),
    ]
}

/// Also ledger-spec/14's replay vectors (`replay_vectors`), from the same logs.
#[test]
fn fixed_logs_replay_to_golden_state_hashes() {
    let mut lines = String::new();
    let mut vectors = Vec::new();
    for (name, spec) in scenarios() {
        let (dir, _) = build(&spec);
        let first = replay_with(dir.path(), 2, None);
        let again = replay_with(dir.path(), 2, None);
        assert_eq!(first.state_hash, again.state_hash, "{name}: replaying twice gives the same state");
        lines += &format!("{name} {}\n", first.state_hash);
        let store = Store::open_read_only(dir.path()).unwrap();
        vectors.push(crate::replay_vectors::vector(name, &store, &first));
    }
    check_fixture("fixtures/replay/state-hashes.txt", &lines);
    crate::replay_vectors::check_vectors(vectors);
}

#[test]
fn a_clean_network_crowns_the_perfect_miner_with_full_trust() {
    let (dir, keys) = build(&NetworkSpec::small(3));
    let state = replay_with(dir.path(), 2, None).state;
    assert!(state.discrepancies.is_empty(), "{:?}", state.discrepancies);
    assert!(keys.iter().all(|k| vtrust(&state, k) == 1_000_000));
    assert_eq!(&*state.champion.as_ref().unwrap().hotkey, "5SynthPerfect");
    assert_eq!(state.weights, vec![(1, u16::MAX)], "winner takes all, to the champion's uid");
    assert_eq!(state.champion_history.len(), 2, "noisy first, then perfect");
    assert!(state.ratio_set_ppm > DEFAULT_RATIO_PARAMS.floor_ppm(), "a win raised the ratio to beat");
    // Chain time, not a clock: the winning match (the first) started at synthetic chain
    // block 1000 in every log.
    assert_eq!(state.ratio_set_at_block, 1_000);
    assert!(state.matches.iter().map(Result::unwrap).next().unwrap().votes.iter().all(|v| v.chain_block == 1_000));
    assert_eq!(state.matches.len(), 2);
    assert!(state.validators.iter().all(|v| v.n_compared == 2 && v.n_disagreements == 0));
}

#[test]
fn a_forged_score_is_found_and_costs_the_forger_trust() {
    let spec =
        NetworkSpec { faults: Faults { forge_score: Some((1, 5)), ..Faults::default() }, ..NetworkSpec::small(3) };
    let (dir, keys) = build(&spec);
    let state = replay_with(dir.path(), 2, None).state;
    let forger = state.validators.iter().position(|v| v.validator == keys[1]).unwrap();
    let found = kinds(&state);
    assert!(found.contains(&(forger, DiscrepancyKind::FalseScore)), "{found:?}");
    assert!(found.iter().all(|(v, _)| *v == forger), "only the forger is blamed: {found:?}");
    // One false score is 200,000 ppm; a forged reward may also flip a game, making its
    // env decision's tally disagree with the honest re-score only if the tally used it:
    // the tally is over the recorded rewards, so it stays consistent.
    assert_eq!(vtrust(&state, &keys[1]), 800_000);
    assert_eq!(vtrust(&state, &keys[0]), 1_000_000);
    let d = state.discrepancies.iter().find(|d| d.kind == DiscrepancyKind::FalseScore).unwrap();
    assert!(d.event_idx.is_some() && d.detail.contains("recorded reward"), "{d:?}");
}

#[test]
fn a_skipped_challenge_index_is_a_schedule_gap() {
    let spec = NetworkSpec { faults: Faults { skip_index: Some(0), ..Faults::default() }, ..NetworkSpec::small(3) };
    let (dir, keys) = build(&spec);
    let state = replay_with(dir.path(), 2, None).state;
    let gaps: Vec<_> = state.discrepancies.iter().filter(|d| d.kind == DiscrepancyKind::ScheduleGap).collect();
    // Both miners' transcripts skip index 3: two gaps, both against validator 0.
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    assert!(gaps.iter().all(|d| d.validator == keys[0] && d.detail.contains("index 3 was skipped")));
    // The tally of the env with the gap leaves the unplayed pair out, and its decision
    // (made by the same state machine) agrees: no false tally, only the gaps.
    assert!(state.discrepancies.iter().all(|d| d.kind == DiscrepancyKind::ScheduleGap), "{:#?}", state.discrepancies);
    assert_eq!(vtrust(&state, &keys[0]), 600_000);
}

#[test]
fn a_match_id_not_derived_from_its_chain_block_is_a_bad_match_id() {
    let spec = NetworkSpec { faults: Faults { pick_match_id: Some(1), ..Faults::default() }, ..NetworkSpec::small(3) };
    let (dir, keys) = build(&spec);
    let state = replay_with(dir.path(), 2, None).state;
    let bad: Vec<_> = state.discrepancies.iter().filter(|d| d.kind == DiscrepancyKind::BadMatchId).collect();
    assert_eq!(bad.len(), 1, "{:#?}", state.discrepancies);
    assert_eq!(bad[0].validator, keys[1]);
    assert!(bad[0].detail.contains("chain block 1000") && bad[0].event_idx.is_some(), "{:?}", bad[0]);
    assert!(vtrust(&state, &keys[1]) < 1_000_000);
    assert_eq!(vtrust(&state, &keys[0]), 1_000_000);
}

#[test]
fn equivocation_evidence_zeroes_the_equivocator() {
    let spec =
        NetworkSpec { faults: Faults { equivocate: Some((2, 0)), ..Faults::default() }, ..NetworkSpec::small(3) };
    let (dir, keys) = build(&spec);
    let state = replay_with(dir.path(), 2, None).state;
    let summary = state.validators.iter().find(|v| v.validator == keys[2]).unwrap();
    assert!(summary.equivocated);
    assert_eq!(summary.vtrust_ppm, 0);
    let found: Vec<_> = state.discrepancies.iter().filter(|d| d.kind == DiscrepancyKind::Equivocation).collect();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].validator, found[0].height), (keys[2], 1));
    // The reporter is not blamed, and the network still decides with the others.
    assert_eq!(vtrust(&state, &keys[0]), 1_000_000);
    assert_eq!(&*state.champion.as_ref().unwrap().hotkey, "5SynthPerfect");
    // The report draws vTrust 0 as a visible marker, not as nothing.
    let report = dir.path().join("report.html");
    af(&["audit", "--data", dir.path().to_str().unwrap(), "--report", report.to_str().unwrap()]);
    let html = std::fs::read_to_string(&report).unwrap();
    let row = html.find(&format!("data-validator=\"{}\" data-vtrust-ppm=\"0\"", keys[2])).expect("the row");
    let next_row = html[row..].find("</tr>").unwrap();
    assert!(html[row..row + next_row].contains("class=\"fill zero\""), "{}", &html[row..row + next_row]);
}

#[test]
fn a_verdict_its_own_env_decisions_contradict_is_proven_false_and_outvoted() {
    let spec = NetworkSpec { faults: Faults { flip_decisions: Some(3), ..Faults::default() }, ..NetworkSpec::small(4) };
    let (dir, keys) = build(&spec);
    let state = replay_with(dir.path(), 2, None).state;
    let liar = state.validators.iter().find(|v| v.validator == keys[3]).unwrap();
    assert_eq!((liar.n_compared, liar.n_disagreements), (2, 2));
    let false_decisions: Vec<_> =
        state.discrepancies.iter().filter(|d| d.kind == DiscrepancyKind::FalseDecision).collect();
    assert_eq!(false_decisions.len(), 2, "{false_decisions:?}");
    assert!(false_decisions.iter().all(|d| d.validator == keys[3] && d.detail.contains("env decisions")));
    // Two proofs (2 x 200,000) and disagreeing on every compared match (500,000).
    assert_eq!(liar.vtrust_ppm, 100_000);
    for key in &keys[..3] {
        assert_eq!(vtrust(&state, key), 1_000_000);
    }
    assert_eq!(&*state.champion.as_ref().unwrap().hotkey, "5SynthPerfect");
}

#[test]
fn a_match_played_below_the_ratio_its_log_set_is_a_false_decision() {
    let spec = NetworkSpec { faults: Faults { low_bar: Some(2), ..Faults::default() }, ..NetworkSpec::small(3) };
    let (dir, keys) = build(&spec);
    let replayed = replay_with(dir.path(), 2, None);
    let state = &replayed.state;
    // Its first match is played at the initial ratio, which is the floor: no finding.
    // The second follows a win and is played at the floor instead of the ratio it set.
    assert_eq!(state.discrepancies.len(), 1, "{:?}", state.discrepancies);
    let finding = &state.discrepancies[0];
    assert_eq!((finding.validator, finding.kind), (keys[2], DiscrepancyKind::FalseDecision));
    assert!(finding.detail.contains("played at ratio 510000 ppm"), "{}", finding.detail);
    assert_eq!(vtrust(state, &keys[2]), 800_000, "one proof costs 200,000");

    // The same check on a clean log whose win records a ratio other than the geometric
    // mean of its win rates: found once, at the decision, and not carried forward.
    let clean = replayed.folds.iter().find(|f| f.validator == keys[0]).unwrap();
    assert!(replay::combine::ratio_findings(clean, &DEFAULT_RATIO_PARAMS).unwrap().is_empty());
    let mut forged = clean.clone();
    let (winning, _) = forged
        .matches
        .iter()
        .map(Result::unwrap)
        .find(|(_, m)| m.decided.as_ref().is_some_and(|d| d.contender_won))
        .unwrap();
    forged.matches.update(&winning).unwrap().decided.as_mut().unwrap().new_ratio_to_beat_ppm -= 1;
    let found = replay::combine::ratio_findings(&forged, &DEFAULT_RATIO_PARAMS).unwrap();
    assert_eq!(found.len(), 2, "the decision, and the next match played at the true ratio: {found:?}");
    assert!(found[0].detail.contains("geometric mean"), "{}", found[0].detail);
    assert!(found[1].detail.contains("played at ratio"), "{}", found[1].detail);
}

/// Score plans carry the network's ratio parameters: two auditors with other local
/// settings (epsilon, half-life) find the same nothing on honest logs, and the same
/// false ratio on a forged one. A mixture plan still reads the auditor's settings.
#[test]
fn auditors_with_other_settings_reach_the_same_verdicts_on_score_plans() {
    use af::evaluation::ratio::RatioParams;
    let spec = NetworkSpec::small(3);
    let (dir, _) = build(&spec);
    let replayed = replay_with(dir.path(), 2, None);
    let other = RatioParams { epsilon_ppm: 50_000, half_life_blocks: 10, ..DEFAULT_RATIO_PARAMS };
    for fold in &replayed.folds {
        assert!(replay::combine::ratio_findings(fold, &DEFAULT_RATIO_PARAMS).unwrap().is_empty());
        assert!(
            replay::combine::ratio_findings(fold, &other).unwrap().is_empty(),
            "the auditor's own settings are not read"
        );
        let mut forged = fold.clone();
        let (winning, _) = forged
            .matches
            .iter()
            .map(Result::unwrap)
            .find(|(_, m)| m.decided.as_ref().is_some_and(|d| d.contender_won))
            .unwrap();
        forged.matches.update(&winning).unwrap().decided.as_mut().unwrap().new_ratio_to_beat_ppm += 1;
        let (a, b) = (
            replay::combine::ratio_findings(&forged, &DEFAULT_RATIO_PARAMS).unwrap(),
            replay::combine::ratio_findings(&forged, &other).unwrap(),
        );
        assert!(!a.is_empty());
        assert_eq!(a, b);
    }
    let plan = af::evaluation::stopping::MIXTURE_RULE.describe();
    assert_eq!(replay::combine::plan_ratio_params(&plan, &other).epsilon_ppm, 50_000);
    assert_eq!(replay::combine::plan_ratio_params(&spec.rule.describe(), &other).epsilon_ppm, 10_000);
}

/// Logs written with the mixture plan (decisive games only, the advantage futility,
/// binary64 ratio arithmetic) still replay, but that plan is not the network's: each
/// match they decided is one `false_decision` naming the rule, and casts no vote.
#[test]
fn logs_of_another_plan_replay_with_each_decision_named_and_no_vote() {
    let spec = NetworkSpec { rule: af::evaluation::stopping::MIXTURE_RULE, futility: None, ..NetworkSpec::small(3) };
    let (dir, keys) = build(&spec);
    let state = replay_with(dir.path(), 2, None).state;
    assert_eq!(state.discrepancies.len(), 2 * keys.len(), "{:?}", state.discrepancies);
    for d in &state.discrepancies {
        assert_eq!(d.kind, DiscrepancyKind::FalseDecision);
        assert!(d.detail.contains("not the network's") && d.detail.contains("rule mixture"), "{}", d.detail);
    }
    assert!(
        state.matches.iter().map(Result::unwrap).all(|m| m.votes.is_empty() && m.verdict.is_none()),
        "no vote counted"
    );
    assert_eq!(state.champion_history.len(), 1, "nobody crowned: the first champion stays");
}

/// Two validators, one honest and one lenient (alpha 0.5, epsilon 0, no futility stop):
/// the lenient one crowns a contender the network's plan does not; its crowns are findings
/// naming each field of its plan that differs, earn it no vote, and the network's
/// champion is the honest validators'.
#[test]
fn a_lenient_validators_crown_is_not_the_networks_and_the_audit_names_it() {
    let mut spec =
        NetworkSpec { faults: Faults { lenient_plan: Some(1), ..Faults::default() }, ..NetworkSpec::small(2) };
    // A contender a little better than the champion, on one env: under the network's plan
    // it is dismissed (or runs on); under the lenient plan it is crowned.
    spec.miners.push(SynthMiner { hotkey: "5SynthSlightly".into(), uid: 3, policy: Policy::Noisy { p: 0.25 } });
    spec.matches = vec![(3, 0)];
    spec.envs = vec!["mult".into()];
    let (dir, keys) = build(&spec);
    let replayed = replay_with(dir.path(), 2, None);
    let state = &replayed.state;
    let crowned = |key: &af::bytes::ValidatorKey| {
        let fold = replayed.folds.iter().find(|f| f.validator == *key).unwrap();
        fold.matches.iter().map(Result::unwrap).next().unwrap().1.decided.as_ref().map(|d| d.contender_won)
    };
    assert_eq!(crowned(&keys[1]), Some(true), "the lenient validator crowns the contender");
    assert_ne!(crowned(&keys[0]), Some(true), "the network's plan does not");
    assert_eq!(state.champion.as_ref().map(|c| &*c.hotkey), Some("5SynthNoisy"), "the network's champion stays");
    let against: Vec<_> = state.discrepancies.iter().filter(|d| d.validator == keys[1]).collect();
    assert!(!against.is_empty());
    assert!(
        against.iter().any(|d| d.kind == DiscrepancyKind::FalseDecision
            && d.detail.contains("alpha_ppm 500000 (network's: 50000)")
            && d.detail.contains("epsilon_ppm 0 (network's: 10000)")
            && d.detail.contains("futility none")),
        "{against:?}"
    );
    assert!(state.discrepancies.iter().all(|d| d.validator == keys[1]), "{:?}", state.discrepancies);
    assert!(vtrust(state, &keys[1]) < 1_000_000 && vtrust(state, &keys[0]) == 1_000_000);
    assert!(
        state.matches.iter().map(Result::unwrap).all(|m| m.votes.iter().all(|v| *v.validator != keys[1])),
        "its crown is no vote"
    );
    // `af audit` names it: exit 1, the finding against the lenient validator's log.
    let output = af(&["audit", "--data", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(output.status.code(), Some(1), "a finding: exit 1");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let text = report.to_string();
    assert!(text.contains("not the network's") && text.contains(&keys[1].to_string()), "{text}");
    assert_eq!(report["state"]["champion"]["hotkey"], "5SynthNoisy", "{text}");
}

/// vTrust over chain blocks replays the logs' prefixes: a validator that plays its second
/// match below the ratio its log set has full trust at the first match's block and loses
/// one proof's worth at the second's; the last point is the state's vTrust now.
#[test]
fn vtrust_history_replays_each_prefix() {
    let spec = NetworkSpec { faults: Faults { low_bar: Some(2), ..Faults::default() }, ..NetworkSpec::small(3) };
    let (dir, keys) = build(&spec);
    let replayed = replay_with(dir.path(), 2, None);
    let history = vtrust_history(&replayed.folds, &replayed.state.matches, &DEFAULT_RATIO_PARAMS, 48).unwrap();
    assert!(history.len() >= 2, "{history:?}");
    assert!(history.windows(2).all(|w| w[0].0 < w[1].0), "blocks ascend");
    let at = |i: usize, key| history[i].1.iter().find(|(k, _)| *k == key).map(|(_, ppm)| *ppm);
    assert_eq!(at(0, keys[2]), Some(1_000_000), "{history:?}");
    let last = history.len() - 1;
    for key in &keys {
        assert_eq!(at(last, *key), Some(vtrust(&replayed.state, key)), "the last point is now");
    }
    assert_eq!(at(last, keys[2]), Some(800_000));
    // Picking fewer points keeps the first and the last.
    let two = vtrust_history(&replayed.folds, &replayed.state.matches, &DEFAULT_RATIO_PARAMS, 2).unwrap();
    assert_eq!((two[0].0, two[1].0), (history[0].0, history[last].0));
}

/// The history's one pass gives what a combine over each cut gives, on logs with every
/// kind of finding: proofs, disagreements, equivocation, an invalid block.
#[test]
fn vtrust_history_in_one_pass_is_a_combine_at_each_point() {
    let specs = [
        Faults { low_bar: Some(2), ..Faults::default() },
        Faults { sandbagged: Some(3), ..Faults::default() },
        Faults { flip_decisions: Some(1), forge_score: Some((0, 5)), ..Faults::default() },
        Faults { equivocate: Some((1, 2)), low_bar: Some(0), ..Faults::default() },
        Faults { skip_index: Some(2), pick_match_id: Some(3), ..Faults::default() },
    ];
    for faults in specs {
        let spec = NetworkSpec { faults: faults.clone(), ..NetworkSpec::small(4) };
        let (dir, _) = build(&spec);
        let replayed = replay_with(dir.path(), 2, None);
        for points in [2, 3, 7, 48] {
            let history =
                vtrust_history(&replayed.folds, &replayed.state.matches, &DEFAULT_RATIO_PARAMS, points).unwrap();
            assert!(history.len() >= 2 && history.len() <= points, "{faults:?}: {history:?}");
            let blocks: Vec<u64> = history.iter().map(|(block, _)| *block).collect();
            assert!(blocks.windows(2).all(|w| w[0] < w[1]));
            let by_combines =
                replay::combine::vtrust_by_combines(&replayed.folds, &DEFAULT_RATIO_PARAMS, &blocks).unwrap();
            assert_eq!(history, by_combines, "{faults:?}, {points} points");
        }
    }
}

#[test]
fn a_validator_against_the_majority_loses_trust_but_not_the_verdict() {
    // An honest log that differs: the miners answered this validator at random.
    let spec = NetworkSpec { faults: Faults { sandbagged: Some(3), ..Faults::default() }, ..NetworkSpec::small(4) };
    let (dir, keys) = build(&spec);
    let state = replay_with(dir.path(), 2, None).state;
    let outvoted = state.validators.iter().find(|v| v.validator == keys[3]).unwrap();
    assert_eq!(outvoted.n_false_reports, 0, "its log proves nothing false: {:?}", state.discrepancies);
    assert_eq!((outvoted.n_compared, outvoted.n_disagreements), (2, 1), "{:?}", state.matches);
    assert_eq!(outvoted.vtrust_ppm, 750_000, "disagreeing on 1 of 2 compared matches costs 250,000");
    let disagreements: Vec<_> =
        state.discrepancies.iter().filter(|d| d.kind == DiscrepancyKind::Disagreement).collect();
    assert_eq!(disagreements.len(), 1);
    assert!(disagreements.iter().all(|d| d.validator == keys[3]));
    for key in &keys[..3] {
        assert_eq!(vtrust(&state, key), 1_000_000);
    }
    assert_eq!(&*state.champion.as_ref().unwrap().hotkey, "5SynthPerfect", "3 x 1.0 outweighs 1 x 0.75");
}

#[test]
fn state_is_the_same_with_one_thread_or_many() {
    let spec =
        NetworkSpec { faults: Faults { forge_score: Some((0, 9)), ..Faults::default() }, ..NetworkSpec::small(3) };
    let (dir, _) = build(&spec);
    let one = replay_with(dir.path(), 1, None);
    let many = replay_with(dir.path(), 4, None);
    assert_eq!(one.state, many.state);
    assert_eq!(one.state_hash, many.state_hash);
}

#[test]
fn folding_from_a_snapshot_gives_the_state_of_a_replay_from_genesis() {
    let spec = NetworkSpec {
        faults: Faults { skip_index: Some(1), ..Faults::default() },
        matches: vec![(1, 0), (2, 1), (0, 1)],
        ..NetworkSpec::small(3)
    };
    let (full_dir, keys) = build(&spec);
    let full = Store::open(full_dir.path()).unwrap();
    let partial_dir = tempfile::tempdir().unwrap();
    let copy = |from: u64, to: u64| {
        let partial = Store::open(partial_dir.path()).unwrap();
        for key in &keys {
            let tip = full.tip(key).unwrap().unwrap().height;
            for height in from..=to.min(tip) {
                let bytes = full.block_bytes(key, height).unwrap().unwrap();
                partial.append(&SealedBlock::from_bytes(bytes).unwrap()).unwrap();
            }
        }
    };
    drop(Store::create(partial_dir.path()).unwrap());
    copy(0, 3);
    let kept = |note: &mut dyn FnMut(&str)| {
        let store = Store::open(partial_dir.path()).unwrap();
        replay::kept_file::replay_kept(&store, partial_dir.path(), true, &af::envs::registry(), &mut |_, _, _| {}, note)
            .unwrap()
    };
    let early = kept(&mut |note| panic!("{note}"));
    assert_eq!(early.n_chains_from_snapshot, 0);
    // While a replay of it is held, the file is this process's: another open is refused
    // by name, and nothing is removed.
    let held = replay::kept_file::open(partial_dir.path(), &mut |note| panic!("{note}"));
    assert!(held.err().unwrap().to_string().contains("already open"));
    drop(early);
    copy(4, u64::MAX);
    drop(full);
    let incremental = kept(&mut |note| panic!("{note}"));
    assert_eq!(incremental.n_chains_from_snapshot, keys.len());
    assert!(incremental.n_blocks_folded > 0);
    let from_genesis = replay_with(full_dir.path(), 2, None);
    assert!(incremental.n_blocks_folded < from_genesis.n_blocks_folded);
    assert_eq!(incremental.state_hash, from_genesis.state_hash);
    assert_eq!(incremental.state, from_genesis.state);
    assert_eq!(incremental.folds, from_genesis.folds);
    drop(incremental);
    // A damaged kept file is refused with a reason, never half-used: made afresh, every
    // chain folds from genesis to the same state.
    let path = partial_dir.path().join(replay::kept_file::PROJECTION_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    for byte in &mut bytes[middle..middle + 4096] {
        *byte ^= 0x5a;
    }
    std::fs::write(&path, bytes).unwrap();
    let mut notes = Vec::new();
    let again = kept(&mut |note| notes.push(note.to_string()));
    assert_eq!(again.n_chains_from_snapshot, 0, "{notes:?}");
    assert_eq!(again.state_hash, from_genesis.state_hash);
    assert!(notes.iter().any(|n| n.contains("made afresh")), "{notes:?}");
    // And the run after it starts from what that one kept.
    drop(again);
    assert_eq!(kept(&mut |note| panic!("{note}")).n_chains_from_snapshot, keys.len());
    // Logs cut back to before their second match fold from genesis, and find none of the
    // kept folds' later matches (spilled to the file) there.
    std::fs::remove_file(partial_dir.path().join(af::ledger::store::STORE_FILE)).unwrap();
    drop(Store::create(partial_dir.path()).unwrap());
    let full = Store::open(full_dir.path()).unwrap();
    for (key, fold) in keys.iter().zip(&from_genesis.folds) {
        let second = fold.matches.in_log_order().map(Result::unwrap).nth(1).expect("three matches").1.started_height;
        for height in 0..second {
            let bytes = full.block_bytes(key, height).unwrap().unwrap();
            Store::open(partial_dir.path()).unwrap().append(&SealedBlock::from_bytes(bytes).unwrap()).unwrap();
        }
    }
    drop(full);
    let cut = kept(&mut |note| panic!("{note}"));
    assert_eq!(cut.n_chains_from_snapshot, 0);
    let plain = replay_with(partial_dir.path(), 2, None);
    assert_eq!(cut.folds, plain.folds);
    assert_eq!(cut.state_hash, plain.state_hash);
}

/// A kept file whose rows of one log were changed behind the heads' back (a match's index
/// entry removed through the engine, so every page checksum is right) does not stand for
/// that log: its chain folds from genesis, said, to the state of a plain replay.
#[test]
fn a_kept_file_short_of_a_match_is_not_used_for_that_log() {
    use redb::{ReadableTable, TableDefinition};
    let spec = NetworkSpec { matches: vec![(1, 0), (2, 1), (0, 1)], ..NetworkSpec::small(2) };
    let (dir, keys) = build(&spec);
    let kept = |note: &mut dyn FnMut(&str)| {
        let store = Store::open(dir.path()).unwrap();
        replay::kept_file::replay_kept(&store, dir.path(), true, &af::envs::registry(), &mut |_, _, _| {}, note)
            .unwrap()
    };
    let plain = kept(&mut |note| panic!("{note}"));
    let plain_hash = plain.state_hash;
    drop(plain);
    {
        let db = redb::Database::open(dir.path().join(replay::kept_file::PROJECTION_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut by_id = txn.open_table(TableDefinition::<&[u8], &[u8]>::new("match_place_by_id")).unwrap();
            let first: Vec<u8> = by_id
                .iter()
                .unwrap()
                .map(|entry| entry.unwrap().0.value().to_vec())
                .find(|key| key.starts_with(&keys[0].0))
                .expect("a spilled match of the first log");
            by_id.remove(&first[..]).unwrap();
        }
        txn.commit().unwrap();
    }
    let mut notes = Vec::new();
    let again = kept(&mut |note| notes.push(note.to_string()));
    assert_eq!(again.n_chains_from_snapshot, keys.len() - 1, "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("do not match")), "{notes:?}");
    assert_eq!(again.state_hash, plain_hash);
}

/// Names are held once: a match's hotkeys, envs and plan are the match before it's where
/// equal, and a fold read back from a snapshot shares them again (decoding makes a copy of
/// each).
#[test]
fn a_replay_holds_each_name_once_and_so_does_a_fold_read_from_a_snapshot() {
    use std::sync::Arc;
    let (dir, _) = build(&NetworkSpec::small(2));
    let replayed = replay_with(dir.path(), 1, None);
    let shared = |fold: &af::replay::fold::ChainFold| {
        let matches: Vec<_> = fold.matches.in_log_order().map(Result::unwrap).map(|(_, m)| m).collect();
        let [first, second] = &matches[..] else { panic!("two matches, not {}", matches.len()) };
        // The first match's contender is the second's champion.
        assert!(Arc::ptr_eq(&first.contender.hotkey, &second.champion.hotkey));
        assert!(Arc::ptr_eq(&first.contender.model, &second.champion.model));
        assert!(Arc::ptr_eq(&first.envs, &second.envs));
        assert!(Arc::ptr_eq(&first.rule, &second.rule));
        for (env, _) in &second.env_folds {
            assert!(second.envs.iter().any(|e| Arc::ptr_eq(&e.name, env)), "{env}");
        }
    };
    replayed.folds.iter().for_each(shared);
    // (The state's matches are not held: they are in the replay's file, read one at a time.)
    // Kept and read back, the folds are the same; what they hold in memory still shares.
    let store = Store::open(dir.path()).unwrap();
    let kept =
        replay::kept_file::replay_kept(&store, dir.path(), true, &af::envs::registry(), &mut |_, _, _| {}, &mut |n| {
            panic!("{n}")
        });
    assert_eq!(kept.unwrap().folds, replayed.folds);
    let reopened = replay::kept_file::open(dir.path(), &mut |n| panic!("{n}")).unwrap();
    assert_eq!(reopened.folds, replayed.folds);
}

/// A node's transcripts page (ledger-spec/11) ends early once its JSON passes the byte
/// cap, never inside an entry: a reader that goes on from `offset` plus the entries it got
/// reads every entry once, in log order, whatever the cap.
#[test]
fn a_transcripts_page_past_its_byte_cap_ends_after_an_entry_and_the_next_page_goes_on() {
    use af::replay::transcript_entries::{entries_page, for_each_entry, Filter, Found, Reach};
    let (dir, _) = build(&NetworkSpec::small(2));
    let replayed = replay_with(dir.path(), 1, None);
    let store = Store::open_read_only(dir.path()).unwrap();
    let miner = Found::Miner("5SynthRandom");
    let mut all = Vec::new();
    let (total, locations) = store.locate_miner_page("5SynthRandom", 0, usize::MAX).unwrap();
    for_each_entry(&store, &replayed.folds, &locations, (miner, &Filter::default(), Reach::Tip), &mut |e| {
        all.push(serde_json::to_value(e).unwrap());
        true
    })
    .unwrap();
    assert!(all.len() > 10 && all.len() as u64 == total, "{} of {total}", all.len());
    let page = |offset, limit, cap| -> serde_json::Value {
        let filter = Filter::default();
        let body =
            entries_page(&store, &replayed.folds, (miner, &filter, Reach::Tip), (offset, limit), cap, &mut |_| true);
        serde_json::from_slice(&body.unwrap()).unwrap()
    };
    for (limit, cap, per_page) in [(7, usize::MAX, 7), (7, 1, 1)] {
        let (mut offset, mut read) = (0, Vec::new());
        while offset < all.len() {
            let got = page(offset, limit, cap);
            assert_eq!((got["offset"].as_u64(), got["total"].as_u64()), (Some(offset as u64), Some(total)));
            let entries = got["entries"].as_array().unwrap();
            assert_eq!(entries.len(), per_page.min(all.len() - offset), "limit {limit}, cap {cap}, offset {offset}");
            offset += entries.len();
            read.extend(entries.iter().cloned());
        }
        assert_eq!(read, all, "every entry once, in order (limit {limit}, cap {cap})");
    }
    let past = page(all.len() + 5, 7, usize::MAX);
    assert_eq!((past["entries"].as_array().map(Vec::len), past["total"].as_u64()), (Some(0), Some(total)));
    // Each entry is asked room for before it is added: a page stops where the room ends,
    // and one with no room for its first entry is refused.
    let filter = Filter::default();
    let mut granted = 0;
    let mut room_for_two = |bytes: usize| {
        granted += 1;
        granted <= 2 && bytes > 0
    };
    let two =
        entries_page(&store, &replayed.folds, (miner, &filter, Reach::Tip), (0, 7), usize::MAX, &mut room_for_two);
    let two: serde_json::Value = serde_json::from_slice(&two.unwrap()).unwrap();
    assert_eq!(two["entries"].as_array().unwrap()[..], all[..2]);
    let none = entries_page(&store, &replayed.folds, (miner, &filter, Reach::Tip), (0, 7), usize::MAX, &mut |_| false);
    assert!(matches!(none, Err(af::replay::transcript_entries::EntriesError::NoRoom)), "{none:?}");
}

fn json(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(output)))
}

#[test]
fn af_audit_exits_by_what_it_found_and_writes_a_report() {
    let (clean, _) = build(&NetworkSpec::small(3));
    let clean_path = clean.path().to_str().unwrap();
    let report = clean.path().join("report.html");
    let output = af(&["audit", "--data", clean_path, "--json", "--report", report.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let value = json(&output);
    assert_eq!(value["clean"], true);
    assert!(
        value["chain"]["note"].as_str().unwrap().contains("skipped"),
        "no --chain: says the chain check was skipped"
    );
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("5SynthPerfect") && !html.contains("<script"));
    // Every match of every validator, with its id, and every validator's vTrust.
    let matches = value["matches"].as_array().unwrap();
    assert!(!matches.is_empty());
    for m in matches {
        assert!(html.contains(&format!("data-match-id=\"{}\"", m["match_id"].as_str().unwrap())), "{m}");
        assert!(m["envs"].as_array().unwrap().iter().all(|e| e["wins"].is_u64()));
    }
    for v in value["state"]["validators"].as_array().unwrap() {
        let row =
            format!("data-validator=\"{}\" data-vtrust-ppm=\"{}\"", v["validator"].as_str().unwrap(), v["vtrust_ppm"]);
        assert!(html.contains(&row), "{row}");
    }
    assert!(html.contains(&format!("af {}", value["af_version"].as_str().unwrap())));
    // With --snapshot: saved, then reused (nothing new to fold), the same state hash.
    let first = json(&af(&["audit", "--data", clean_path, "--json", "--snapshot"]));
    assert_eq!(first["state_hash"], value["state_hash"]);
    let again = json(&af(&["audit", "--data", clean_path, "--json", "--snapshot"]));
    assert_eq!(again["n_blocks_folded"], 0);
    assert_eq!(again["state_hash"], value["state_hash"]);
    let genesis = json(&af(&["audit", "--data", clean_path, "--json", "--from-genesis"]));
    assert_eq!(genesis["state_hash"], value["state_hash"]);
    assert!(genesis["n_blocks_folded"].as_u64().unwrap() > 0);

    let spec =
        NetworkSpec { faults: Faults { forge_score: Some((2, 3)), ..Faults::default() }, ..NetworkSpec::small(3) };
    let (forged, keys) = build(&spec);
    let output = af(&["audit", "--data", forged.path().to_str().unwrap(), "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let value = json(&output);
    let finding = &value["findings"][0];
    assert_eq!(finding["kind"], "false_score");
    assert_eq!(finding["validator"], keys[2].to_hex());
    // The finding carries a proof of the offending event that verifies on its own.
    let proof: InclusionProof = serde_json::from_value(finding["proof"].clone()).unwrap();
    assert_eq!(proof.height, finding["height"].as_u64().unwrap());
    verify_inclusion_proof(&proof).unwrap();
    let text = stdout(&af(&["audit", "--data", forged.path().to_str().unwrap()]));
    assert!(text.contains("false_score") && text.contains(&keys[2].to_hex()), "{text}");

    let missing = af(&["audit", "--data", "/nonexistent/af-audit"]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn miners_see_their_transcripts_with_proofs_that_break_on_any_changed_byte() {
    let (dir, _) = build(&NetworkSpec::small(2));
    let data = dir.path().to_str().unwrap();
    let output = af(&["transcripts", "--data", data, "--miner", "5SynthRandom", "--env", "mult", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let entries = json(&output);
    let entries = entries.as_array().unwrap();
    assert!(!entries.is_empty());
    // Written one entry at a time, the array is laid out as serde_json lays out the whole.
    let typed: Vec<af::ledger::entry::TranscriptEntry> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stdout), serde_json::to_string_pretty(&typed).unwrap() + "\n");
    // A 16-hex prefix of a match id picks that match; an unknown hotkey is an error.
    let match_id = entries[0]["transcript"]["match_id"].as_str().unwrap();
    let by_prefix =
        json(&af(&["transcripts", "--data", data, "--miner", "5SynthRandom", "--match", &match_id[..16], "--json"]));
    let by_prefix = by_prefix.as_array().unwrap();
    assert!(!by_prefix.is_empty() && by_prefix.iter().all(|e| e["transcript"]["match_id"] == match_id));
    let short = af(&["transcripts", "--data", data, "--miner", "5SynthRandom", "--match", &match_id[..8]]);
    assert_eq!(short.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&short.stderr).contains("shorter than 16"));
    // The same for challenge ids: a 16-hex prefix finds what the full id finds.
    let challenge = entries[0]["transcript"]["challenge_id"].as_str().unwrap();
    let full = json(&af(&["ledger", "find", "--data", data, "--challenge-id", challenge, "--json"]));
    let prefixed = json(&af(&["ledger", "find", "--data", data, "--challenge-id", &challenge[..16], "--json"]));
    assert_eq!(full, prefixed);
    assert_eq!(full.as_array().unwrap().len(), 2, "both miners answered it");
    let unknown_prefix = af(&["ledger", "find", "--data", data, "--challenge-id", "ffffffffffffffff0"]);
    assert_eq!(unknown_prefix.status.code(), Some(1));
    let unknown = af(&["transcripts", "--data", data, "--miner", "5NoSuchMiner"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no log held"));
    let no_env = af(&["transcripts", "--data", data, "--miner", "5SynthRandom", "--env", "nosuch"]);
    assert_eq!(no_env.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&no_env.stderr).contains("the envs are"), "{no_env:?}");
    // --result keeps exactly the challenges with that result.
    for result in ["win", "loss", "draw"] {
        let args = ["transcripts", "--data", data, "--miner", "5SynthRandom", "--env", "mult", "--result", result];
        let kept = json(&af(&[&args[..], &["--json"]].concat()));
        let expected: Vec<_> = entries.iter().filter(|e| e["outcome"] == result).collect();
        assert_eq!(kept.as_array().unwrap().iter().collect::<Vec<_>>(), expected, "{result}");
    }
    // The text view: a header, rule and env line once per match; every answer in full.
    let text = stdout(&af(&["transcripts", "--data", data, "--miner", "5SynthRandom", "--env", "mult"]));
    let matches: std::collections::BTreeSet<_> =
        entries.iter().map(|e| (e["validator"].as_str(), e["transcript"]["match_id"].as_str())).collect();
    assert_eq!(text.lines().filter(|l| l.starts_with("match ")).count(), matches.len(), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("  rule: ")).count(), matches.len(), "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("  env mult")).count(), matches.len(), "{text}");
    assert!(!text.contains("Some(") && !text.contains("alpha="), "no Rust debug form nor raw rule: {text}");
    for entry in entries {
        let ours = format!("ours: {}", entry["transcript"]["answer"].as_str().unwrap());
        let theirs = format!("theirs: {}", entry["opponent"]["answer"].as_str().unwrap());
        assert!(text.contains(&ours) && text.contains(&theirs), "{ours} / {theirs} in {text}");
    }
    for entry in entries {
        assert_eq!(entry["transcript"]["miner"]["hotkey"], "5SynthRandom");
        assert_eq!(entry["transcript"]["env"]["name"], "mult");
        assert_eq!(entry["unproven"]["role"], "contender");
        assert_eq!(entry["opponent"]["hotkey"], "5SynthPerfect");
        assert_eq!(entry["unproven"]["match_contender_won"], false);
        assert!(entry["unproven"]["match_reason"].as_str().unwrap().starts_with("contender lost: better in"));
        assert!(entry["unproven"]["rule"].as_str().unwrap().starts_with("score"));
        let tally = &entry["unproven"]["env_tally"];
        let n = ["wins", "losses", "draws"].iter().map(|k| tally[*k].as_u64().unwrap()).sum::<u64>();
        assert_eq!(tally["n_challenges"].as_u64(), Some(n));
        assert!(n > entry["transcript"]["challenge_index"].as_u64().unwrap());
    }
    // Each challenge line gives the result and both rewards in one unit.
    let first = &entries[0];
    assert!(!first["opponent"]["answer"].as_str().unwrap().is_empty());
    let index = first["transcript"]["challenge_index"].as_u64().unwrap();
    let line = format!("#{index:<4} {:<4}  ", first["outcome"].as_str().unwrap());
    assert!(text.lines().any(|l| l.trim_start().starts_with(&line) && l.contains(" vs ")), "{line} in {text}");
    let jsonl = stdout(&af(&["transcripts", "--data", data, "--miner", "5SynthRandom", "--env", "mult", "--jsonl"]));
    assert_eq!(jsonl.lines().count(), entries.len());

    let file = dir.path().join("proof.json");
    std::fs::write(&file, serde_json::to_string(&entries[0]).unwrap()).unwrap();
    let verified = af(&["transcripts", "verify", file.to_str().unwrap()]);
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));

    // `af env score` re-scores an entry as printed, from its challenge id alone.
    let f = file.to_str().unwrap();
    let scored = json(&af(&["env", "score", "--transcript", f, "--json"]));
    assert_eq!(scored["reward_milli"], entries[0]["transcript"]["reward_milli"]);
    assert_eq!(scored["agrees"], true);
    let mut forged = entries[0].clone();
    let recorded = forged["transcript"]["reward_milli"].as_i64().unwrap();
    forged["transcript"]["reward_milli"] = serde_json::json!(if recorded == 1000 { 0 } else { 1000 });
    let forged_file = dir.path().join("forged.json");
    std::fs::write(&forged_file, serde_json::to_string(&forged).unwrap()).unwrap();
    let differs = af(&["env", "score", "--transcript", forged_file.to_str().unwrap()]);
    assert_eq!(differs.status.code(), Some(3));
    assert!(stdout(&differs).contains("DIFFERS"), "{}", stdout(&differs));
    let wrong_env = af(&["env", "score", "--transcript", f, "--env", "sat"]);
    assert_eq!(wrong_env.status.code(), Some(1));
    std::fs::write(&forged_file, serde_json::to_string(&entries).unwrap()).unwrap();
    let many = af(&["env", "score", "--transcript", forged_file.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&many.stderr).contains("pick one"), "{many:?}");

    // Every byte of the event, and every byte of every hash in the path and headers.
    let proof: InclusionProof = serde_json::from_value(entries[0]["proof"]["inclusion"].clone()).unwrap();
    verify_inclusion_proof(&proof).unwrap();
    for i in 0..proof.event_bytes.len() {
        let mut bad = proof.clone();
        bad.event_bytes[i] ^= 0x01;
        assert!(verify_inclusion_proof(&bad).is_err(), "event byte {i} changed and the proof still verified");
    }
    for step in 0..proof.merkle_path.len() {
        for i in 0..32 {
            let mut bad = proof.clone();
            bad.merkle_path[step].0[i] ^= 0x80;
            assert!(verify_inclusion_proof(&bad).is_err());
        }
    }
    for h in 0..proof.headers.len() {
        for i in 0..32 {
            let mut bad = proof.clone();
            bad.headers[h].header.events_root.0[i] ^= 0x04;
            assert!(verify_inclusion_proof(&bad).is_err());
            let mut bad = proof.clone();
            bad.headers[h].signature.0[i * 2] ^= 0x04;
            assert!(verify_inclusion_proof(&bad).is_err());
        }
    }
    // Through the CLI: a changed byte of the event fails with exit 3.
    let mut entry = entries[0].clone();
    let hex = entry["proof"]["inclusion"]["event_bytes"].as_str().unwrap().to_string();
    let flipped = format!("{}{}", if hex.starts_with('0') { "1" } else { "0" }, &hex[1..]);
    entry["proof"]["inclusion"]["event_bytes"] = serde_json::json!(flipped);
    std::fs::write(&file, serde_json::to_string(&entry).unwrap()).unwrap();
    assert_eq!(af(&["transcripts", "verify", file.to_str().unwrap()]).status.code(), Some(3));
}

/// The audit verifies every block on every run: after one audit saved its snapshot, an
/// answer changed inside a stored block (through the engine, so every page checksum is
/// right) is found by the next audit without `--from-genesis`, and a byte changed in the
/// file itself is found too.
#[test]
fn a_snapshot_never_hides_a_changed_block() {
    use af::ledger::store::{get_block, put_block, BLOCKS, STORE_FILE};
    let (dir, keys) = build(&NetworkSpec::small(2));
    let data = dir.path().to_str().unwrap();
    assert_eq!(af(&["audit", "--data", data, "--snapshot"]).status.code(), Some(0));
    assert!(dir.path().join(replay::kept_file::PROJECTION_FILE).exists(), "the first audit kept its replay");
    {
        let db = redb::Database::open(dir.path().join(STORE_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut blocks = txn.open_table(BLOCKS).unwrap();
            let mut bytes = get_block(&blocks, &keys[0], 1).unwrap().unwrap();
            // A byte of an answer in the block's last event.
            let n = bytes.len();
            bytes[n - 40] ^= 0x01;
            put_block(&mut blocks, &keys[0], 1, &bytes).unwrap();
        }
        txn.commit().unwrap();
    }
    let output = af(&["audit", "--data", data, "--json", "--snapshot"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stdout(&output).contains("invalid_block"), "{}", stdout(&output));
    // The changed chain folded again from genesis, finding none of its old fold's matches
    // in the kept file: the state is a plain audit's.
    let kept = json(&output);
    assert_eq!(kept["n_chains_from_snapshot"], 1, "{kept}");
    let plain = json(&af(&["audit", "--data", data, "--json"]));
    assert_eq!(kept["state_hash"], plain["state_hash"]);
    assert_eq!(kept["matches"], plain["matches"]);
    // A flipped byte in the file: the engine's checksums catch it, and it is a finding.
    let path = dir.path().join(STORE_FILE);
    let mut file = std::fs::read(&path).unwrap();
    let block = {
        let store = Store::open_read_only(dir.path()).unwrap();
        store.block_bytes(&keys[1], 1).unwrap().unwrap()
    };
    let at = file.windows(64).position(|w| w == &block[..64]).unwrap();
    file[at + 200] ^= 0x02;
    std::fs::write(&path, &file).unwrap();
    let output = af(&["audit", "--data", data, "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stdout(&output).contains("store_corrupt"), "{}", stdout(&output));
}

/// By default the audit takes nothing from a kept replay: one edited to drop a finding
/// (through the engine, so every page checksum is right; tips untouched) does not hide it.
#[test]
fn an_edited_snapshot_does_not_hide_a_finding_by_default() {
    let spec =
        NetworkSpec { faults: Faults { forge_score: Some((2, 3)), ..Faults::default() }, ..NetworkSpec::small(3) };
    let (dir, _) = build(&spec);
    let data = dir.path().to_str().unwrap();
    assert_eq!(af(&["audit", "--data", data, "--snapshot"]).status.code(), Some(1));
    {
        let mut kept = replay::kept_file::open(dir.path(), &mut |n| panic!("{n}")).unwrap();
        assert!(kept.folds.iter().any(|f| !f.discrepancies.is_empty()));
        for fold in &mut kept.folds {
            fold.discrepancies.clear();
            fold.findings = Default::default();
        }
        replay::kept_file::save(&kept.cold, &mut kept.folds).unwrap();
    }
    // Taken from the edited file, the finding is gone: what `--snapshot` trusts.
    let output = af(&["audit", "--data", data, "--json", "--snapshot"]);
    assert!(!stdout(&output).contains("false_score"), "{}", stdout(&output));
    let output = af(&["audit", "--data", data, "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(stdout(&output).contains("false_score"));
}

/// A log of many bad events costs a replay a count, not a record each: its chain keeps
/// the first `MAX_CHAIN_DISCREPANCIES` findings and counts the rest as proofs against it;
/// the audit proves findings within its header budget, each proof checking out.
#[test]
fn a_log_of_many_bad_events_is_counted_not_held() {
    use af::ledger::{demo::demo_events, LedgerKey, OwnLog};
    use af::replay::fold::MAX_CHAIN_DISCREPANCIES;
    let dir = tempfile::tempdir().unwrap();
    let log = OwnLog::new(Store::create(dir.path()).unwrap(), LedgerKey::from_seed([9; 32]));
    // Transcripts of matches never started: every one is a schedule gap.
    for height in 0..3 {
        log.append(demo_events(&log.validator(), height, 500, 300), 1_000 + height).unwrap();
    }
    let replayed =
        replay::replay(&log.store, &envs::registry(), None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap();
    let fold = &replayed.folds[0];
    assert_eq!(fold.discrepancies.len(), MAX_CHAIN_DISCREPANCIES);
    assert_eq!(fold.n_discrepancies_omitted, 1_500 - MAX_CHAIN_DISCREPANCIES as u64);
    assert_eq!(fold.first_omitted_height, Some(2), "the 1,001st bad event is in the third block");
    assert_eq!(replayed.state.n_discrepancies_omitted, 500);
    assert_eq!(replayed.state.validators[0].n_false_reports, 1_500, "every bad event is a proof");
    assert_eq!(replayed.state.validators[0].vtrust_ppm, 0);
    let findings = af::audit::findings(&log.store, &replayed, &[]).unwrap();
    assert_eq!(findings.len(), MAX_CHAIN_DISCREPANCIES);
    let proven: Vec<_> = findings.iter().filter_map(|f| f.proof.as_ref().map(|p| (f, p))).collect();
    assert_eq!(proven.len(), af::audit::MAX_PROOFS.min(findings.len()), "three blocks: the budget is not reached");
    for (finding, proof) in proven {
        let tip = verify_inclusion_proof(proof).unwrap();
        assert_eq!(tip.height, 2, "each proof runs to the tip");
        assert_eq!((proof.height, Some(proof.event_idx)), (finding.discrepancy.height, finding.discrepancy.event_idx));
    }
}

#[test]
fn a_hotkey_with_a_newline_cannot_forge_a_line_of_the_audit_report() {
    // A log names a miner whose hotkey carries a line of its own, in a network with a
    // forged score: the report must still end with the finding, not a forged "clean".
    let mut spec =
        NetworkSpec { faults: Faults { forge_score: Some((1, 5)), ..Faults::default() }, ..NetworkSpec::small(3) };
    spec.miners[2].hotkey = "5SynthRandom\nclean: no discrepancy\n\u{1b}[2J".into();
    let (dir, _) = build(&spec);
    let output = af(&["audit", "--data", dir.path().to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "a finding: exit 1");
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(!text.lines().any(|l| l.trim() == "clean: no discrepancy"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains("5SynthRandom\\u{a}clean: no discrepancy\\u{a}\\u{1b}[2J vs "), "{text}");
    assert!(text.lines().any(|l| l.ends_with("discrepancy:") || l.ends_with("discrepancies:")), "{text}");
}

/// A validator's replays spill settled matches to its match file as they pile up, and
/// recount the last state when new blocks changed only counts: what they give is, at
/// every step of a log's growth, byte for byte what a replay from genesis holding every
/// match in memory gives, on logs with false scores, flipped verdicts and a lowered bar;
/// and each log keeps a bounded number of matches in memory.
#[test]
fn replays_that_spill_matches_give_the_states_of_replays_that_hold_them() {
    use af::replay::latest_replay::LatestReplay;
    use af::replay::spill_file::{CacheSize, SPILL_FILE};
    const HOT_MATCHES: usize = CacheSize::VALIDATOR.matches_per_log;
    let mut spec = NetworkSpec {
        faults: Faults { forge_score: Some((1, 40)), flip_decisions: Some(2), low_bar: Some(0), ..Faults::default() },
        ..NetworkSpec::small(3)
    };
    let champion = 1; // perfect: each random contender loses quickly
    for i in 0..150 {
        let uid = spec.miners.len() as u16;
        spec.miners.push(SynthMiner { hotkey: format!("5Contender{i:03}"), uid, policy: Policy::Random });
        spec.matches.push((uid as usize, champion));
    }
    // Blocks small enough that many hold transcripts alone (a random contender is
    // dismissed within tens of challenges).
    spec.events_per_block = 24;
    let (source, keys) = build(&spec);
    let whole = replay_with(source.path(), 2, None);
    assert!(whole.folds.iter().all(|f| f.matches.len() > 2 * HOT_MATCHES), "enough matches to spill twice");

    let source = Store::open_read_only(source.path()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(&dir.path().join("ledger")).unwrap();
    let latest =
        LatestReplay::create(&dir.path().join(SPILL_FILE), af::replay::spill_file::CacheSize::VALIDATOR).unwrap();
    let tips: Vec<u64> = keys.iter().map(|k| source.tip(k).unwrap().unwrap().height).collect();
    let mut next = vec![0u64; keys.len()];
    let (mut rounds, mut recounted) = (0, 0);
    while next.iter().zip(&tips).any(|(n, tip)| n <= tip) {
        rounds += 1;
        for (i, key) in keys.iter().enumerate() {
            // Each log grows at its own pace, as peers' logs arrive; every other round
            // one block of one log, which mostly holds transcripts alone.
            let blocks = if rounds % 2 == 0 { usize::from(i == 0) } else { 5 + 3 * i };
            for _ in 0..blocks {
                if next[i] > tips[i] {
                    break;
                }
                let bytes = source.block_bytes(key, next[i]).unwrap().unwrap();
                store.append(&SealedBlock::from_bytes(bytes).unwrap()).unwrap();
                next[i] += 1;
            }
        }
        let spilled = latest.get(&store, &DEFAULT_RATIO_PARAMS).unwrap();
        for fold in &spilled.folds {
            assert!(
                fold.matches.held_in_memory() <= HOT_MATCHES + 1,
                "round {rounds}: {}",
                fold.matches.held_in_memory()
            );
            assert!(fold.matches.iter().all(|read| read.is_ok()), "round {rounds}: every spilled match reads back");
        }
        // Against a replay from genesis now and then: each costs the whole log so far.
        recounted += usize::from(spilled.recounted);
        if rounds % 6 == 0 || (spilled.recounted && recounted % 3 == 1) {
            let held =
                replay::replay(&store, &envs::registry(), None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap();
            assert_eq!(spilled.state_hash, held.state_hash, "round {rounds}");
            assert_eq!(spilled.folds, held.folds, "round {rounds}");
            let history = |r: &Replay| vtrust_history(&r.folds, &r.state.matches, &DEFAULT_RATIO_PARAMS, 8).unwrap();
            assert_eq!(history(&spilled), history(&held), "round {rounds}");
        }
    }
    let last = latest.get(&store, &DEFAULT_RATIO_PARAMS).unwrap();
    assert_eq!(last.state_hash, whole.state_hash);
    assert_eq!(last.folds, whole.folds);
    assert!(rounds > 12, "{rounds} rounds");
    assert!(recounted >= 3, "{recounted} of {rounds} replays recounted the last state");
    let n_matches: usize = last.folds.iter().map(|f| f.matches.len()).sum();
    let n_held: usize = last.folds.iter().map(|f| f.matches.held_in_memory()).sum();
    assert!(n_held * 4 < n_matches, "{n_held} of {n_matches} held in memory");
    assert!(!kinds(&last.state).is_empty(), "the faults were found: {:?}", kinds(&last.state));
    // The state's matches read back from the validator's file as from the audit's.
    assert!(kinds(&last.state).iter().any(|(_, k)| *k == DiscrepancyKind::Disagreement));
    assert!(last.state.matches.len() > 150);
    assert_eq!(last.state, whole.state);
    let page: Vec<_> = last.state.matches.iter_from(100).take(7).map(Result::unwrap).collect();
    let held_page: Vec<_> = whole.state.matches.iter().map(Result::unwrap).skip(100).take(7).collect();
    assert_eq!(page, held_page);
    // The pages drawn from each are the same bytes: which logs played each pair comes
    // from each state's index in its own file.
    let chain = af::http::pages::FromChain::default();
    for name in ["subnet.html", "miners.html", "matches.html", "history.html"] {
        for paging in [af::http::pages::Paging::Page(Some(2)), af::http::pages::Paging::Whole] {
            let drawn = af::http::pages::render(name, &last, &chain, paging).unwrap();
            assert_eq!(drawn, af::http::pages::render(name, &whole, &chain, paging).unwrap(), "{name}");
        }
    }
    assert!(last.state.matches.to_vec().is_ok());
}

/// A replay whose new blocks hold transcripts alone recounts the last state instead of
/// combining every match again, and gives what a replay from genesis gives, block after
/// block of a long match.
#[test]
fn replays_of_transcript_blocks_recount_the_last_state_to_what_genesis_gives() {
    use af::replay::latest_replay::LatestReplay;
    let spec = NetworkSpec { events_per_block: 16, ..NetworkSpec::small(2) };
    let (source, keys) = build(&spec);
    let source = Store::open_read_only(source.path()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(&dir.path().join("ledger")).unwrap();
    let latest = LatestReplay::create(
        &dir.path().join(af::replay::spill_file::SPILL_FILE),
        af::replay::spill_file::CacheSize::VALIDATOR,
    )
    .unwrap();
    let (mut recounted, mut combined) = (0, 0);
    for key in &keys {
        let tip = source.tip(key).unwrap().unwrap().height;
        for height in 0..=tip {
            let bytes = source.block_bytes(key, height).unwrap().unwrap();
            store.append(&SealedBlock::from_bytes(bytes).unwrap()).unwrap();
            let replayed = latest.get(&store, &DEFAULT_RATIO_PARAMS).unwrap();
            let genesis =
                replay::replay(&store, &envs::registry(), None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap();
            assert_eq!(replayed.state, genesis.state, "{key} height {height}");
            assert_eq!(replayed.state_hash, genesis.state_hash);
            if replayed.recounted {
                recounted += 1;
            } else {
                combined += 1;
            }
        }
    }
    assert!(recounted > 4 * combined, "{recounted} recounted, {combined} combined");
}
