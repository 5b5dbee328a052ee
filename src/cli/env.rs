//! `af env`: list environments, show a task as a model sees it, score answers.

use crate::outln;
use af::bytes::Hash32;
use af::envs::{self, Environment, Message};
use anyhow::{anyhow, bail, Context};
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// List environments: name, version, action kind, single or multi turn.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Print the task of a challenge as a model sees it, and its info.
    Test {
        #[arg(long)]
        env: String,
        /// 64 hex digits.
        #[arg(long, conflicts_with = "seed")]
        challenge_id: Option<String>,
        /// Index N of the all-zero validator and match (the same task everywhere).
        #[arg(long)]
        seed: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// Score an answer (single-turn) or a whole transcript (JSON list of messages).
    Score {
        #[arg(long)]
        env: String,
        #[arg(long)]
        challenge_id: String,
        #[arg(long, conflicts_with = "transcript", required_unless_present = "transcript")]
        answer: Option<String>,
        /// JSON file: `[{"role": "...", "content": "..."}, ...]`, or `-` for stdin.
        #[arg(long)]
        transcript: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
}

fn find<'r>(registry: &'r envs::Registry, name: &str) -> anyhow::Result<&'r dyn Environment> {
    registry.get(name).ok_or_else(|| anyhow!("no environment {name:?}; known: {}", registry.names().join(", ")))
}

fn parse_id(hex: &str) -> anyhow::Result<Hash32> {
    Hash32::from_hex(hex).context("--challenge-id")
}

pub fn run(command: EnvCommand) -> anyhow::Result<ExitCode> {
    let registry = envs::registry();
    match command {
        EnvCommand::List { json } => {
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
        EnvCommand::Test { env, challenge_id, seed, json } => {
            let env = find(&registry, &env)?;
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
                outln!(
                    "challenge_id {}\nenv {} v{}  difficulty {}\n",
                    info.challenge_id,
                    info.env,
                    info.env_version,
                    info.difficulty
                );
                for message in messages {
                    outln!("[{}]\n{}\n", message.role, message.content);
                }
            }
        }
        EnvCommand::Score { env, challenge_id, answer, transcript, json } => {
            let env = find(&registry, &env)?;
            let id = parse_id(&challenge_id)?;
            let (reward_milli, detail) = match (answer, transcript) {
                (Some(answer), _) => {
                    if env.spec().turns != envs::Turns::Single {
                        bail!("{} is multi-turn: score a whole conversation with --transcript FILE", env.spec().name);
                    }
                    let (action, reward) = envs::score_answer(env, &id, &answer);
                    (reward, serde_json::json!({ "action": action }))
                }
                (None, Some(path)) => {
                    let messages = read_messages(&path)?;
                    let scored = envs::score_transcript(env, &id, &messages)
                        .context("the transcript is not one this environment produces")?;
                    (scored.reward_milli, serde_json::to_value(&scored)?)
                }
                (None, None) => bail!("give --answer TEXT or --transcript FILE"),
            };
            let reward = f64::from(reward_milli) / 1000.0;
            if json {
                super::print_json(
                    &serde_json::json!({ "env": env.spec().name, "challenge_id": id, "reward": reward, "reward_milli": reward_milli, "detail": detail }),
                )?;
            } else {
                outln!("reward {reward}");
                outln!("{}", serde_json::to_string(&detail)?);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn read_messages(path: &std::path::Path) -> anyhow::Result<Vec<Message>> {
    let text = super::read_input(path, af::limits::MAX_JSON_INPUT_BYTES)?;
    serde_json::from_str(&text).context("transcript must be a JSON list of {\"role\", \"content\"} objects")
}
