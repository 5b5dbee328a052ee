//! Environment benchmarks on one core, printed as a table (`cargo bench --bench envs`):
//! challenge generation + scoring per second, as replay runs them millions of times.
//! Single-turn: reset from the id, parse the recorded answer, step. Tic-tac-toe: a whole
//! recorded game re-scored with `score_transcript` (reset, every move, every prompt).

use af::envs::{self, challenge_id_for_seed, run_episode, Environment, Message};
use std::time::Instant;

fn expert_reply(env: &dyn Environment, id: &af::bytes::ChallengeId, messages: &[Message]) -> String {
    let (mut episode, _, _) = env.reset(id);
    for message in messages.iter().filter(|m| m.role == "assistant") {
        let action = episode.parse_action(&message.content);
        episode.step(&action);
    }
    episode.expert_action().to_answer_text()
}

fn main() {
    // Without --bench (under `cargo test --all-targets`) a small smoke run.
    let full = std::env::args().any(|a| a == "--bench");
    let registry = envs::registry();
    println!("| env | work per item | items | per second (one core) | target |");
    println!("|---|---|---:|---:|---:|");
    for env in registry.all() {
        let spec = env.spec();
        let n: u64 = match (full, spec.turns) {
            (true, envs::Turns::Multi) => 50_000,
            (true, envs::Turns::Single) => 300_000,
            (false, _) => 500,
        };
        let ids: Vec<_> = (0..n).map(|i| challenge_id_for_seed(spec.name, spec.version, i)).collect();
        let (per_second, work, target) = if spec.turns == envs::Turns::Single {
            let answers: Vec<String> = ids.iter().map(|id| env.reset(id).0.expert_action().to_answer_text()).collect();
            let started = Instant::now();
            let mut total = 0i64;
            for (id, answer) in ids.iter().zip(&answers) {
                total += i64::from(envs::score_answer(env, id, answer).1);
            }
            let seconds = started.elapsed().as_secs_f64();
            assert_eq!(total, 1000 * n as i64);
            // Program tasks generate and run a program (with rejection) per item.
            let target = if matches!(spec.name, "abd" | "ded") { 20_000 } else { 100_000 };
            (n as f64 / seconds, "generate + parse + score", target)
        } else {
            let games: Vec<_> = ids
                .iter()
                .map(|id| run_episode(env, id, &mut |m: &[Message]| expert_reply(env, id, m)).messages)
                .collect();
            let started = Instant::now();
            for (id, messages) in ids.iter().zip(&games) {
                std::hint::black_box(envs::score_transcript(env, id, messages).unwrap());
            }
            let seconds = started.elapsed().as_secs_f64();
            (n as f64 / seconds, "re-score a whole recorded game", 20_000)
        };
        println!("| {} | {work} | {n} | {per_second:.0} | {target} |", spec.name);
    }
    // The reference policy solving program tasks from the prompt text alone (parse the
    // program; evaluate it, or search the stated input space).
    let solver = af::miner::policy::Solver::new();
    for name in ["abd", "ded"] {
        let env = registry.get(name).expect("registered");
        let n: u64 = if full { 2_000 } else { 20 };
        let prompts: Vec<Vec<Message>> = (0..n)
            .map(|i| {
                let (_, observation, _) = env.reset(&challenge_id_for_seed(name, 1, i));
                envs::opening_messages(env.spec(), &observation)
            })
            .collect();
        let started = Instant::now();
        for messages in &prompts {
            std::hint::black_box(solver.answer(
                af::miner::policy::Policy::Perfect,
                messages,
                &af::bytes::Hash32([0; 32]),
            ));
        }
        let micros = started.elapsed().as_secs_f64() * 1e6 / n as f64;
        println!("perfect policy on {name}: {micros:.0} us per task from the prompt ({n} tasks)");
    }
}
