//! Golden fixtures per environment: for fixed challenge ids, the exact prompt a model
//! sees and the reward of given answers (correct, wrong, malformed), compared byte for
//! byte with fixtures/envs/NAME.json. A change here is a change of tasks: bump the env.

use af::envs::{self, challenge_id_for_seed, run_episode, Action, Environment, Message};
use serde_json::json;

fn answers_for(env: &dyn Environment, expert: &Action) -> Vec<(&'static str, String)> {
    let wrong = match (env.spec().name, expert) {
        ("mult", Action::Integer(digits)) => {
            format!("Answer: {}", digits.parse::<u64>().unwrap() + 1)
        }
        ("sat", Action::Assignment(values)) => Action::Assignment(values.iter().map(|v| !v).collect()).to_answer_text(),
        ("coin", Action::Coin(side)) => {
            Action::Coin(if *side == envs::CoinSide::Heads { envs::CoinSide::Tails } else { envs::CoinSide::Heads })
                .to_answer_text()
        }
        _ => "Answer: 0".into(),
    };
    vec![
        ("correct", expert.to_answer_text()),
        (
            "correct_with_noise",
            format!("Let me think.\n\n```\n{}\n```\n", expert.to_answer_text().trim_start_matches("Answer: ")),
        ),
        ("wrong", wrong),
        ("malformed", "I am not sure, maybe something like forty-two?".into()),
        ("empty", String::new()),
    ]
}

fn fixture(env: &dyn Environment) -> serde_json::Value {
    let spec = env.spec();
    let cases: Vec<_> = (0..5u64)
        .map(|seed| {
            let id = challenge_id_for_seed(spec.name, spec.version, seed);
            let (episode, observation, info) = env.reset(&id);
            let opening = envs::opening_messages(spec, &observation);
            if spec.turns == envs::Turns::Single {
                let scored: Vec<_> = answers_for(env, &episode.expert_action())
                    .into_iter()
                    .map(|(label, answer)| {
                        let (action, reward) = envs::score_answer(env, &id, &answer);
                        json!({ "label": label, "answer": answer, "action": action, "reward_milli": reward })
                    })
                    .collect();
                json!({ "seed": seed, "info": info, "messages": opening, "answers": scored })
            } else {
                // Multi-turn: the whole game of the minimax player, and a malformed opening.
                drop(episode);
                let mut expert = |messages: &[Message]| expert_reply(env, &id, messages);
                let game = run_episode(env, &id, &mut expert);
                let mut bad = |_: &[Message]| "I'd rather not play.".to_string();
                let forfeit = run_episode(env, &id, &mut bad);
                json!({ "seed": seed, "info": info, "expert_game": game, "malformed_game": forfeit })
            }
        })
        .collect();
    json!({ "env": spec.name, "version": spec.version, "difficulty": spec.difficulty, "cases": cases })
}

/// Replays the conversation so far to reach the live episode, then asks for the expert move.
pub fn expert_reply(env: &dyn Environment, id: &af::bytes::ChallengeId, messages: &[Message]) -> String {
    let (mut episode, _, _) = env.reset(id);
    for message in messages.iter().filter(|m| m.role == "assistant") {
        let action = episode.parse_action(&message.content);
        episode.step(&action);
    }
    episode.expert_action().to_answer_text()
}

#[test]
fn environment_fixtures_match() {
    let registry = envs::registry();
    for env in registry.all() {
        let text = serde_json::to_string_pretty(&fixture(env)).unwrap() + "\n";
        crate::check_fixture(&format!("fixtures/envs/{}.json", env.spec().name), &text);
    }
}

#[test]
fn recorded_fixture_rewards_rescore_identically() {
    // The fixture files are data another implementation can check against: re-score
    // every recorded answer and transcript from the files alone.
    let registry = envs::registry();
    for env in registry.all() {
        let path = crate::repo_path(&format!("fixtures/envs/{}.json", env.spec().name));
        let fixture: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for case in fixture["cases"].as_array().unwrap() {
            let id = af::bytes::Hash32::from_hex(case["info"]["challenge_id"].as_str().unwrap()).unwrap();
            if let Some(answers) = case["answers"].as_array() {
                for answer in answers {
                    let (_, reward) = envs::score_answer(env, &id, answer["answer"].as_str().unwrap());
                    assert_eq!(i64::from(reward), answer["reward_milli"].as_i64().unwrap(), "{}", answer["label"]);
                }
            }
            for game in ["expert_game", "malformed_game"] {
                if case[game].is_object() {
                    let messages: Vec<Message> = serde_json::from_value(case[game]["messages"].clone()).unwrap();
                    let scored = envs::score_transcript(env, &id, &messages).unwrap();
                    assert_eq!(i64::from(scored.reward_milli), case[game]["reward_milli"].as_i64().unwrap());
                }
            }
        }
    }
}
