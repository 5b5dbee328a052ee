//! `af env`: list environments, show a task as a model sees it, score answers, and play
//! tasks against a miner's endpoint exactly as a validator would (nothing is recorded).

use crate::outln;
use af::bytes::Hash32;
use af::envs::{self, Environment};
use af::miner::client::{ClientConfig, Endpoint, MinerClient};
use af::validator::episode::play_episode;
use anyhow::Context;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// List environments: name, version, action kind, single or multi turn.
    List {},
    /// Print the task of a challenge as a model sees it, and its info.
    Test {
        /// Environment name (`af env list`).
        #[arg(long)]
        env: String,
        /// 64 hex digits.
        #[arg(long, conflicts_with = "seed")]
        challenge_id: Option<String>,
        /// Index N of the all-zero validator and match (the same task everywhere).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Play tasks against an OpenAI-compatible endpoint as a validator would; print each
    /// conversation and reward. Nothing is recorded.
    Play {
        /// Environment name (`af env list`).
        #[arg(long)]
        env: String,
        /// The endpoint, e.g. http://127.0.0.1:8001 (`/v1/chat/completions` is appended).
        #[arg(long)]
        miner: String,
        /// The model name sent in each request.
        #[arg(long, default_value = "af-reference")]
        model: String,
        /// Name of an environment variable holding the endpoint's bearer token.
        #[arg(long)]
        api_key_env: Option<String>,
        /// First task: index N of the all-zero validator and match.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// How many consecutive tasks to play.
        #[arg(long, default_value_t = 1)]
        count: u64,
        /// Per-request timeout.
        #[arg(long, default_value_t = 60_000)]
        timeout_ms: u64,
    },
    /// Score an answer (single-turn) or a whole conversation, from the challenge id alone.
    /// Given a recorded transcript, also compares with the reward the log recorded (exit 3
    /// if they differ).
    Score {
        /// Environment name; taken from the file when --transcript holds a recorded one.
        #[arg(long, required_unless_present = "transcript")]
        env: Option<String>,
        /// 64 hex digits; taken from the file when --transcript holds a recorded one.
        #[arg(long, required_unless_present = "transcript")]
        challenge_id: Option<String>,
        /// The final answer text (single-turn environments).
        #[arg(long, conflicts_with = "transcript", required_unless_present = "transcript")]
        answer: Option<String>,
        /// JSON file, or `-` for stdin: an entry of `af transcripts --json`/`--jsonl` (a
        /// one-element list is accepted), a transcript as `af ledger export` prints it, or
        /// a bare list of `{"role", "content"}` messages.
        #[arg(long)]
        transcript: Option<PathBuf>,
        /// Of several transcripts in the file, the one this miner (hotkey) answered.
        #[arg(long, requires = "transcript")]
        miner: Option<String>,
    },
}

fn parse_id(hex: &str) -> anyhow::Result<Hash32> {
    Hash32::from_hex(hex).context("--challenge-id")
}

pub fn run(command: EnvCommand, json: bool) -> anyhow::Result<ExitCode> {
    let registry = envs::registry();
    match command {
        EnvCommand::List {} => {
            let specs: Vec<_> = registry.all().map(|env| env.spec().clone()).collect();
            if json {
                super::print_json(&specs)?;
            } else {
                outln!("{:<10} {:>7}  {:<11} {:<6}  difficulty", "name", "version", "action", "turns");
                for spec in specs {
                    let turns = if spec.turns == envs::Turns::Single { "single" } else { "multi" };
                    outln!(
                        "{:<10} {:>7}  {:<11} {:<6}  {}",
                        spec.name,
                        spec.version,
                        spec.action_kind,
                        turns,
                        spec.difficulty
                    );
                }
            }
        }
        EnvCommand::Test { env, challenge_id, seed } => {
            let env = registry.named(&env)?;
            let spec = env.spec();
            let id = match (challenge_id, seed) {
                (Some(hex), _) => parse_id(&hex)?,
                (None, seed) => envs::challenge_id_for_seed(spec.name, spec.version, seed.unwrap_or(0)),
            };
            let (_episode, observation, info) = env.reset(&id);
            let messages = envs::opening_messages(spec, &observation);
            if json {
                super::print_json(
                    &serde_json::json!({ "info": info, "observation": observation.data, "messages": messages }),
                )?;
            } else {
                outln!("challenge_id {}", info.challenge_id);
                outln!("env {} v{}  difficulty {}", info.env, info.env_version, info.difficulty);
                outln!("");
                for message in messages {
                    crate::cli::print_text(&format!("[{}]\n{}\n", message.role, message.content))?;
                }
            }
        }
        EnvCommand::Play { env, miner, model, api_key_env, seed, count, timeout_ms } => {
            let env = registry.named(&env)?;
            let endpoint = Endpoint { base_url: miner, model, api_key_env };
            return play(env, &endpoint, seed, count, timeout_ms, json);
        }
        EnvCommand::Score { env, challenge_id, answer, transcript, miner } => {
            return score(&registry, env, challenge_id, answer, (transcript, miner), json);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn play(
    env: &dyn Environment,
    endpoint: &Endpoint,
    seed: u64,
    count: u64,
    timeout_ms: u64,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let client = MinerClient::new(ClientConfig { timeout_ms, ..ClientConfig::default() })?;
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let spec = env.spec();
    let (mut total, mut failures) = (0i64, 0u64);
    for n in seed..seed.saturating_add(count) {
        let id = envs::challenge_id_for_seed(spec.name, spec.version, n);
        let played = runtime.block_on(play_episode(&client, &endpoint.model, endpoint, env, &id));
        total += i64::from(played.reward_milli);
        failures += u64::from(played.error.is_some());
        if json {
            super::print_json(&serde_json::json!({
                "env": spec.name, "seed": n, "challenge_id": id,
                "reward_milli": played.reward_milli, "error": played.error,
                "requests": played.n_requests, "latency_ms": played.latency_ms,
                "messages": played.messages,
            }))?;
        } else {
            outln!("== {} seed {n} (challenge_id {id})", spec.name);
            for message in &played.messages {
                crate::cli::print_text(&format!("[{}]\n{}\n", message.role, message.content))?;
            }
            if let Some(error) = &played.error {
                outln!("error: {error}");
            }
            outln!(
                "reward {} ({} requests, {} ms)",
                envs::reward_text(played.reward_milli),
                played.n_requests,
                played.latency_ms
            );
            outln!("");
        }
    }
    if !json && count > 1 {
        outln!("mean reward {:.3} over {count} tasks; {failures} failed", total as f64 / 1000.0 / count as f64);
    }
    // A miner that could not answer is a failed check for whoever is testing it.
    Ok(if failures > 0 { ExitCode::from(super::EXIT_CHECK_FAILED) } else { ExitCode::SUCCESS })
}

fn score(
    registry: &envs::Registry,
    env: Option<String>,
    challenge_id: Option<String>,
    answer: Option<String>,
    (transcript, miner): (Option<PathBuf>, Option<String>),
    json: bool,
) -> anyhow::Result<ExitCode> {
    let wanted = challenge_id.as_deref().map(parse_id).transpose()?;
    let recorded = match &transcript {
        Some(path) => {
            let text = af::input::read_text(path, af::limits::MAX_JSON_INPUT_BYTES)?;
            let read = af::ledger::conversation::read_conversation(&text, wanted.as_ref(), miner.as_deref());
            Some(read.with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    let flags = af::ledger::conversation::ScoreFlags {
        env: env.as_deref(),
        challenge_id: wanted,
        miner: miner.as_deref(),
        answer: answer.as_deref(),
    };
    let scored = af::ledger::conversation::rescore(registry, &flags, recorded.as_ref())?;
    let (reward_milli, recorded_reward, agrees) = (scored.reward_milli, scored.recorded_reward_milli, scored.agrees());
    if json {
        super::print_json(&serde_json::json!({
            "env": scored.env, "challenge_id": scored.challenge_id, "reward_milli": reward_milli,
            "recorded_reward_milli": recorded_reward, "agrees": agrees, "detail": scored.detail,
        }))?;
    } else {
        outln!("reward {}", envs::reward_text(reward_milli));
        match recorded_reward {
            Some(r) if r == reward_milli => outln!("equals the reward the log recorded"),
            Some(r) => outln!("DIFFERS from the reward the log recorded: {}", envs::reward_text(r)),
            None => {}
        }
        outln!("{}", serde_json::to_string(&scored.detail)?);
    }
    Ok(if agrees { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) })
}
