//! The reference policies, played through every environment from the prompts alone.

use af::bytes::Hash32;
use af::envs::{self, challenge_id_for_seed, run_episode, Message};
use af::miner::policy::{Policy, Solver};

fn mean_reward(solver: &Solver, policy: Policy, env_name: &str, n: u64) -> (f64, i32) {
    let registry = envs::registry();
    let env = registry.get(env_name).unwrap();
    let (mut total, mut worst) = (0i64, i32::MAX);
    for i in 0..n {
        let id = challenge_id_for_seed(env_name, env.spec().version, 5_000 + i);
        let mut turn = 0u64;
        let record = run_episode(env, &id, &mut |messages: &[Message]| {
            turn += 1;
            let seed = Hash32(blake3::hash(&[id.0.as_slice(), &turn.to_le_bytes()].concat()).into());
            solver.answer(policy, messages, &seed)
        });
        total += i64::from(record.reward_milli);
        worst = worst.min(record.reward_milli);
    }
    (total as f64 / 1000.0 / n as f64, worst)
}

#[test]
fn perfect_solves_from_the_prompt_alone() {
    let solver = Solver::new();
    for env in ["mult", "sat"] {
        let (mean, worst) = mean_reward(&solver, Policy::Perfect, env, 300);
        assert_eq!((mean, worst), (1.0, 1000), "{env}");
    }
    let (_, worst) = mean_reward(&solver, Policy::Perfect, "tictactoe", 500);
    assert!(worst >= 0, "perfect lost a tic-tac-toe game");
    let (coin, _) = mean_reward(&solver, Policy::Perfect, "coin", 2000);
    assert!((0.45..=0.55).contains(&coin), "the coin is not knowable: {coin}");
}

/// A reasoning model's long text and a hostile miner's markup come before a correct final
/// answer, which scores as the perfect one does (the text once doubled the `Answer:`
/// prefix, and every such answer scored 0).
#[test]
fn text_before_the_answer_leaves_it_correct() {
    let solver = Solver::new();
    for policy in [Policy::Verbose { bytes: 1_000 }, Policy::Hostile] {
        for env in ["mult", "sat"] {
            assert_eq!(mean_reward(&solver, policy, env, 50), (1.0, 1000), "{policy} in {env}");
        }
    }
    let seed = Hash32([7; 32]);
    let answer = solver.answer(Policy::Hostile, &[], &seed);
    assert!(answer.starts_with(af::miner::policy::HOSTILE_TEXT) && answer.contains('\u{202e}'), "{answer}");
}

#[test]
fn degraded_policies_score_as_expected() {
    let solver = Solver::new();
    let (garbage, _) = mean_reward(&solver, Policy::Garbage, "mult", 50);
    assert_eq!(garbage, 0.0);
    let (garbage_ttt, _) = mean_reward(&solver, Policy::Garbage, "tictactoe", 50);
    assert_eq!(garbage_ttt, -1.0, "an unparsable move loses");
    let (random, _) = mean_reward(&solver, Policy::Random, "mult", 300);
    assert_eq!(random, 0.0);
    let (noisy, _) = mean_reward(&solver, Policy::Noisy { p: 0.3 }, "mult", 2000);
    assert!((0.65..=0.75).contains(&noisy), "noisy:0.3 on mult: {noisy}");
}
