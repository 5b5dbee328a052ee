//! Properties of the environments over many challenge ids: reset is a pure function of
//! the id; the expert gets the best reward; random play lands in a sane band; parsers
//! survive hostile text; re-scoring refuses transcripts the env would not produce.

use super::envs_golden::expert_reply;
use crate::{test_seed, TestRng};
use af::bytes::Hash32;
use af::envs::{
    self, challenge_id_for_seed, run_episode, Action, Environment, Message, ObservationData, TranscriptError,
};

fn ids(env: &dyn Environment, n: u64) -> impl Iterator<Item = Hash32> + '_ {
    (0..n).map(move |i| challenge_id_for_seed(env.spec().name, env.spec().version, 1_000 + i))
}

#[test]
fn reset_is_a_pure_function_of_the_id() {
    let registry = envs::registry();
    for env in registry.all() {
        for id in ids(env, 50) {
            let (mut first, observation_a, info_a) = env.reset(&id);
            let expert = first.expert_action();
            first.step(&expert); // stepping one episode must not affect another
            let (second, observation_b, info_b) = env.reset(&id);
            assert_eq!(observation_a, observation_b, "{}", env.spec().name);
            assert_eq!(info_a, info_b);
            assert_eq!(second.expert_action(), expert);
            assert_eq!(info_a.challenge_id, id);
            assert_eq!(info_a.env, env.spec().name);
        }
    }
}

#[test]
fn different_ids_give_different_tasks() {
    let registry = envs::registry();
    for name in ["mult", "sat"] {
        let env = registry.get(name).unwrap();
        let prompts: std::collections::BTreeSet<String> = ids(env, 200).map(|id| env.reset(&id).1.text).collect();
        assert_eq!(prompts.len(), 200, "{name}");
    }
}

#[test]
fn expert_always_gets_the_best_reward() {
    let registry = envs::registry();
    for name in ["mult", "sat", "coin"] {
        let env = registry.get(name).unwrap();
        for id in ids(env, 1000) {
            let (episode, _, _) = env.reset(&id);
            let answer = episode.expert_action().to_answer_text();
            assert_eq!(envs::score_answer(env, &id, &answer).1, 1000, "{name} {id}");
        }
    }
}

#[test]
fn sat_formulas_are_satisfiable_by_their_planted_solution_and_sized_by_difficulty() {
    let env = envs::sat::Sat::default_difficulty();
    for id in ids(&env, 300) {
        let (episode, observation, _) = env.reset(&id);
        let ObservationData::Cnf { n_vars, k, literals } = observation.data else { panic!() };
        assert_eq!(n_vars, envs::sat::DEFAULT_SIZE.n_vars);
        assert_eq!(literals.len() as u32, envs::sat::DEFAULT_SIZE.n_clauses * k);
        for clause in literals.chunks(k as usize) {
            let mut vars: Vec<u32> = clause.iter().map(|l| l.unsigned_abs()).collect();
            vars.sort();
            vars.dedup();
            assert_eq!(vars.len(), 3, "distinct variables per clause");
        }
        let Action::Assignment(planted) = episode.expert_action() else { panic!() };
        assert!(envs::sat::satisfies(&planted, &literals, k as usize));
    }
}

#[test]
fn minimax_never_loses_at_tictactoe() {
    let registry = envs::registry();
    let env = registry.get("tictactoe").unwrap();
    let (mut wins, mut draws) = (0, 0);
    for id in ids(env, 2000) {
        let mut expert = |messages: &[Message]| expert_reply(env, &id, messages);
        let record = run_episode(env, &id, &mut expert);
        assert!(record.reward_milli >= 0, "minimax lost challenge {id}");
        if record.reward_milli == 1000 {
            wins += 1;
        } else {
            draws += 1;
        }
    }
    // The opponent plays randomly 30% of the time, so minimax wins a good share.
    assert!(wins > 400 && draws > 200, "wins {wins} draws {draws}");
}

fn random_answer(rng: &mut TestRng, data: &ObservationData) -> String {
    match data {
        ObservationData::Multiplication { .. } => {
            format!("Answer: {}", 100_000_000_000_000 + rng.below(900_000_000_000_000))
        }
        ObservationData::Coin => if rng.below(2) == 0 { "HEADS" } else { "TAILS" }.into(),
        ObservationData::Cnf { n_vars, .. } => {
            Action::Assignment((0..*n_vars).map(|_| rng.below(2) == 1).collect()).to_answer_text()
        }
        ObservationData::TicTacToe { board, .. } => {
            let empty: Vec<usize> = (0..9).filter(|&c| board[c] == 0).collect();
            format!("Answer: {}", empty[rng.below(empty.len() as u64) as usize])
        }
        ObservationData::Program { input: None, .. } => {
            Action::Input((0..3).map(|_| rng.below(10).to_string()).collect::<Vec<_>>().join(" ")).to_answer_text()
        }
        ObservationData::Program { .. } => Action::Output((rng.below(200) as i64 - 100).to_string()).to_answer_text(),
        ObservationData::Done => unreachable!(),
    }
}

#[test]
fn random_policy_rewards_are_in_sane_bands() {
    let seed = test_seed("random_policy_rewards_are_in_sane_bands");
    let mut rng = TestRng::new(seed);
    let registry = envs::registry();
    // (env, low, high) bounds on the mean reward of uniformly random answers.
    for (name, low, high) in [
        ("mult", 0.0, 0.0),
        ("coin", 0.45, 0.55),
        ("sat", 0.0, 0.15),
        ("tictactoe", -0.9, -0.2),
        ("abd", 0.0, 0.15),
        ("ded", 0.0, 0.15),
    ] {
        let env = registry.get(name).unwrap();
        let n = 4000;
        let mut total = 0i64;
        for id in ids(env, n) {
            let (mut episode, mut observation, _) = env.reset(&id);
            loop {
                let answer = random_answer(&mut rng, &observation.data);
                let step = episode.step(&episode.parse_action(&answer));
                if step.terminated {
                    total += i64::from(step.reward_milli);
                    break;
                }
                observation = step.observation;
            }
        }
        let mean = total as f64 / 1000.0 / n as f64;
        assert!((low..=high).contains(&mean), "seed {seed}: {name} random mean {mean} outside [{low}, {high}]");
    }
}

#[test]
fn parsers_survive_hostile_text() {
    let seed = test_seed("parsers_survive_hostile_text");
    let mut rng = TestRng::new(seed);
    let registry = envs::registry();
    let pieces = [
        "Answer:",
        "```",
        "x1=1",
        "=",
        " ",
        "\n",
        "é",
        "🙂",
        "\u{0}",
        "９",
        "HEADS",
        "4",
        ",",
        "x",
        "-1",
        "Final Answer：",
        "**",
    ];
    let mut samples: Vec<String> = vec![
        "9".repeat(af::limits::MAX_ANSWER_BYTES * 2),
        "```\n".repeat(50_000),
        "Answer: ".repeat(20_000),
        format!("Answer: {}", "1,".repeat(10_000)),
        "x1=1 ".repeat(50_000),
        format!("Answer: x{}=1", u64::MAX),
        "\u{feff}Answer: 4".into(),
    ];
    for _ in 0..3000 {
        let n = rng.below(12);
        samples.push((0..n).map(|_| pieces[rng.below(pieces.len() as u64) as usize]).collect());
    }
    for env in registry.all() {
        let id = challenge_id_for_seed(env.spec().name, env.spec().version, 0);
        for sample in &samples {
            let (mut episode, _, _) = env.reset(&id);
            let action = episode.parse_action(sample);
            let step = episode.step(&action);
            assert!(
                step.reward_milli >= env.spec().reward_min_milli && step.reward_milli <= env.spec().reward_max_milli
            );
        }
    }
}

#[test]
fn parsers_are_strict_about_what_counts() {
    let check = |action: Action, ok: bool, what: &str| {
        assert_eq!(!matches!(action, Action::Invalid(_)), ok, "{what}: {action:?}")
    };
    use envs::{coin::parse_side, mult::parse_integer, sat::parse_assignment, tictactoe::parse_cell};
    check(parse_integer("1,234,567"), true, "grouped");
    assert_eq!(parse_integer("Answer: 0001,234"), Action::Invalid("not an integer: \"0001,234\"".into()));
    check(parse_integer("12 34"), false, "space inside");
    check(parse_integer("-5"), false, "sign");
    check(parse_integer("1.5"), false, "decimal");
    assert_eq!(parse_integer("007"), Action::Integer("7".into()));
    check(parse_cell("Answer: 9"), false, "cell 9");
    check(parse_cell("4 or 5"), false, "two cells");
    assert_eq!(parse_cell("**Answer:** `4`."), Action::Cell(4));
    check(parse_side("heads or tails"), false, "both");
    assert_eq!(parse_side("answer: Tails"), Action::Coin(envs::CoinSide::Tails));
    check(parse_assignment("x1=1 x2=0", 3), false, "missing x3");
    check(parse_assignment("x1=1 x2=0 x3=1 x1=0", 3), false, "twice");
    check(parse_assignment("x1=1 x2=0 x4=1", 3), false, "out of range");
    check(parse_assignment("x1=yes x2=0 x3=1", 3), false, "bad value");
    assert_eq!(parse_assignment("Answer: x1=T, x2=false; x3=1", 3), Action::Assignment(vec![true, false, true]));
}

#[test]
fn rescoring_refuses_transcripts_the_env_would_not_produce() {
    let registry = envs::registry();
    let env = registry.get("tictactoe").unwrap();
    let id = challenge_id_for_seed("tictactoe", 1, 77);
    let mut expert = |messages: &[Message]| expert_reply(env, &id, messages);
    let record = run_episode(env, &id, &mut expert);
    assert_eq!(envs::score_transcript(env, &id, &record.messages).unwrap().reward_milli, record.reward_milli);

    let mut altered = record.messages.clone();
    altered[1].content.push(' ');
    assert_eq!(envs::score_transcript(env, &id, &altered), Err(TranscriptError::PromptMismatch { index: 1 }));

    if record.messages.len() > 4 {
        let mut forged_reply = record.messages.clone();
        forged_reply[3].content = forged_reply[3].content.replace("The opponent played", "The opponent  played");
        assert_eq!(envs::score_transcript(env, &id, &forged_reply), Err(TranscriptError::PromptMismatch { index: 3 }));
    }

    let mut trailing = record.messages.clone();
    trailing.push(Message::new("assistant", "Answer: 4"));
    assert!(matches!(envs::score_transcript(env, &id, &trailing), Err(TranscriptError::TrailingMessages { extra: 1 })));

    let mut wrong_role = record.messages.clone();
    wrong_role[2].role = "user".into();
    assert!(matches!(envs::score_transcript(env, &id, &wrong_role), Err(TranscriptError::WrongRole { index: 2, .. })));

    // A transcript cut short (the miner failed mid-game) scores the env's lowest reward.
    let cut = &record.messages[..2];
    let scored = envs::score_transcript(env, &id, cut).unwrap();
    assert!(scored.incomplete);
    assert_eq!(scored.reward_milli, -1000);

    // Another challenge's transcript does not score under this id.
    let other = challenge_id_for_seed("tictactoe", 1, 78);
    let other_record = run_episode(env, &other, &mut |m: &[Message]| expert_reply(env, &other, m));
    if other_record.messages[1] != record.messages[1] {
        assert!(envs::score_transcript(env, &id, &other_record.messages).is_err());
    }
}

#[test]
fn challenge_ids_depend_on_every_input() {
    use af::bytes::ValidatorKey;
    let base = envs::derive_challenge_id("mult", 1, &ValidatorKey([1; 32]), &Hash32([2; 32]), 3);
    let variants = [
        envs::derive_challenge_id("sat", 1, &ValidatorKey([1; 32]), &Hash32([2; 32]), 3),
        envs::derive_challenge_id("mult", 2, &ValidatorKey([1; 32]), &Hash32([2; 32]), 3),
        envs::derive_challenge_id("mult", 1, &ValidatorKey([9; 32]), &Hash32([2; 32]), 3),
        envs::derive_challenge_id("mult", 1, &ValidatorKey([1; 32]), &Hash32([9; 32]), 3),
        envs::derive_challenge_id("mult", 1, &ValidatorKey([1; 32]), &Hash32([2; 32]), 4),
    ];
    for variant in variants {
        assert_ne!(variant, base);
    }
    // The same inputs always give the same id.
    assert_eq!(base, envs::derive_challenge_id("mult", 1, &ValidatorKey([1; 32]), &Hash32([2; 32]), 3));
}
