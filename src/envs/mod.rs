//! Deterministic, seed-reproducible environments, Gym-style: every task is a pure
//! function of its challenge id, so any validator, auditor or miner rebuilds exactly the
//! task that was asked and re-scores any recorded answer.
//!
//! An [`Environment`] resets to an [`Episode`] for a challenge id; the episode steps on
//! [`Action`]s. For language models, observations carry their prompt text, and each
//! episode parses free text into an action ([`parse`] does the shared, lenient part).
//! [`run_episode`] plays a policy; [`score_transcript`] re-scores a recorded
//! conversation, refusing any that the environment would not have produced.
//!
//! Adding an environment: write `src/envs/NAME.rs` implementing [`Environment`] and
//! [`Episode`], then add one line to [`registry`]. Nothing else changes.

pub mod challenge;
pub mod coin;
pub mod mult;
pub mod parse;
pub mod programs;
pub mod pyprog;
pub mod pyprog_gen;
pub mod rng;
pub mod sat;
pub mod tictactoe;

pub use challenge::{challenge_id_for_seed, derive_challenge_id, derive_match_id};

use crate::bytes::ChallengeId;
use serde::{Deserialize, Serialize};

/// Rewards are integers in thousandths (1000 = +1.0) so replays compare exactly.
pub type RewardMilli = i32;

/// Single-turn (one prompt, one answer) or multi-turn (a conversation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Turns {
    Single,
    Multi,
}

/// Gym-style space descriptions, for documentation and `af env list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Space {
    /// An integer in `0..n`.
    Discrete { n: u32 },
    /// A non-negative integer of at most `max_digits` decimal digits.
    Integer { max_digits: u32 },
    /// One of named options.
    Choice { options: Vec<&'static str> },
    /// One boolean per variable.
    Assignment { n_vars: u32 },
    /// A board of `cells` cells, each empty or one of two marks.
    Board { cells: u32 },
    /// Two integers.
    IntegerPair { digits: u32 },
    /// A CNF formula.
    Cnf { n_vars: u32, n_clauses: u32, k: u32 },
    /// Program text (ABD, DED): observations show source, actions are text.
    Program { max_source_bytes: u32 },
    /// Nothing to see (the coin).
    Empty,
}

#[derive(Clone, Debug, Serialize)]
pub struct EnvSpec {
    pub name: &'static str,
    pub version: u32,
    pub description: &'static str,
    pub turns: Turns,
    /// Short name of what an action is (`cell`, `integer`, `assignment`, `coin side`).
    pub action_kind: &'static str,
    pub observation_space: Space,
    pub action_space: Space,
    /// Parameters that set how hard tasks are, as text.
    pub difficulty: String,
    pub reward_min_milli: RewardMilli,
    pub reward_max_milli: RewardMilli,
    /// The system message every conversation starts with.
    pub system_prompt: &'static str,
}

/// Gym's `info`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Info {
    pub challenge_id: ChallengeId,
    pub env: &'static str,
    pub env_version: u32,
    pub difficulty: String,
    /// Agent moves made so far.
    pub turn: u32,
}

/// What the agent sees: structured data plus the text a model is shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Observation {
    pub data: ObservationData,
    /// The next user message; empty once the episode has ended.
    pub text: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ObservationData {
    Multiplication {
        a: u64,
        b: u64,
    },
    Coin,
    /// `k` literals per clause, end to end: `+i` is x_i, `-i` is NOT x_i.
    Cnf {
        n_vars: u32,
        k: u32,
        literals: Vec<i32>,
    },
    /// `board[i]`: 0 empty, 1 X, 2 O; `agent_mark` is 1 or 2.
    TicTacToe {
        board: [u8; 9],
        agent_mark: u8,
    },
    Program {
        source: String,
        input: Option<String>,
        output: Option<String>,
    },
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CoinSide {
    Heads,
    Tails,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Cell(u8),
    /// Decimal digits, no leading zeros (`"0"` for zero).
    Integer(String),
    Assignment(Vec<bool>),
    Coin(CoinSide),
    /// An input line for a program (ABD), as parsed: integers separated by single spaces.
    Input(String),
    /// A program's output (DED), normalised.
    Output(String),
    /// The answer did not parse: the reason. Scored as the env's invalid-action reward.
    Invalid(String),
}

impl Action {
    /// The answer text a model would write for this action (used by reference policies).
    pub fn to_answer_text(&self) -> String {
        match self {
            Action::Cell(cell) => format!("Answer: {cell}"),
            Action::Integer(digits) => format!("Answer: {digits}"),
            Action::Assignment(values) => {
                let parts: Vec<String> =
                    values.iter().enumerate().map(|(i, v)| format!("x{}={}", i + 1, u8::from(*v))).collect();
                format!("Answer: {}", parts.join(" "))
            }
            Action::Coin(CoinSide::Heads) => "Answer: HEADS".into(),
            Action::Coin(CoinSide::Tails) => "Answer: TAILS".into(),
            Action::Input(line) => format!("<INPUT>\n{line}\n</INPUT>"),
            Action::Output(text) => format!("<OUTPUT>\n{text}\n</OUTPUT>"),
            Action::Invalid(reason) => format!("(no valid answer: {reason})"),
        }
    }
}

/// Gym's step result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    pub observation: Observation,
    pub reward_milli: RewardMilli,
    pub terminated: bool,
    pub truncated: bool,
    pub info: Info,
}

pub trait Environment: Send + Sync {
    fn spec(&self) -> &EnvSpec;
    /// Gym's `reset`: a pure function of the challenge id.
    fn reset(&self, challenge_id: &ChallengeId) -> (Box<dyn Episode + '_>, Observation, Info);
}

pub trait Episode: Send {
    /// Free text from a model to an action; unparsable text is `Action::Invalid`.
    fn parse_action(&self, text: &str) -> Action;
    /// Gym's `step`. Stepping a finished episode is a caller bug and panics.
    fn step(&mut self, action: &Action) -> Step;
    /// The best action now, from the hidden state (for tests and benchmarks; a real
    /// model only sees the prompt).
    fn expert_action(&self) -> Action;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: impl Into<String>) -> Message {
        Message { role: role.into(), content: content.into() }
    }
}

/// A chat message seen through its text, whoever owns it: re-scoring a recorded
/// transcript reads the ledger's own (possibly borrowed) messages without copying them.
pub trait ChatTurn {
    fn role(&self) -> &str;
    fn content(&self) -> &str;
}

impl ChatTurn for Message {
    fn role(&self) -> &str {
        &self.role
    }

    fn content(&self) -> &str {
        &self.content
    }
}

/// A reward as every command prints it in text: thousandths shown as a decimal with
/// three places (`1000` -> `1.000`, `-250` -> `-0.250`). JSON always carries the exact
/// integer `reward_milli`.
pub fn reward_text(milli: RewardMilli) -> String {
    let sign = if milli < 0 { "-" } else { "" };
    let abs = milli.unsigned_abs();
    format!("{sign}{}.{:03}", abs / 1000, abs % 1000)
}

/// The messages a model sees first: the system prompt and the first observation.
pub fn opening_messages(spec: &EnvSpec, observation: &Observation) -> Vec<Message> {
    vec![Message::new("system", spec.system_prompt), Message::new("user", observation.text.clone())]
}

/// A finished episode: the whole conversation and its reward.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EpisodeRecord {
    pub messages: Vec<Message>,
    pub actions: Vec<Action>,
    pub reward_milli: RewardMilli,
    pub truncated: bool,
}

/// Most agent turns in any episode; a bound for hostile transcripts.
pub const MAX_TURNS: usize = 64;

/// Plays `policy` (messages so far -> answer text) through one episode.
pub fn run_episode(
    env: &dyn Environment,
    challenge_id: &ChallengeId,
    policy: &mut dyn FnMut(&[Message]) -> String,
) -> EpisodeRecord {
    let (mut episode, observation, _info) = env.reset(challenge_id);
    let mut messages = opening_messages(env.spec(), &observation);
    let mut actions = Vec::new();
    for _ in 0..MAX_TURNS {
        let answer = policy(&messages);
        let action = episode.parse_action(&answer);
        messages.push(Message::new("assistant", answer));
        let step = episode.step(&action);
        actions.push(action);
        if step.terminated || step.truncated {
            return EpisodeRecord { messages, actions, reward_milli: step.reward_milli, truncated: step.truncated };
        }
        messages.push(Message::new("user", step.observation.text));
    }
    panic!("{} did not end within {MAX_TURNS} turns", env.spec().name);
}

/// A name no environment of the registry has.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("no environment {name}; known: {known}")]
pub struct UnknownEnv {
    name: String,
    known: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TranscriptError {
    #[error("message {index} should be {expected_role} {what}, found role {found_role:?}")]
    WrongRole { index: usize, expected_role: &'static str, found_role: String, what: &'static str },
    #[error("message {index} is not what the environment shows at this point")]
    PromptMismatch { index: usize },
    #[error("{extra} messages follow the end of the episode")]
    TrailingMessages { extra: usize },
    #[error("transcript has more than {MAX_TURNS} turns")]
    TooManyTurns,
}

/// The result of re-scoring a transcript.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Scored {
    pub reward_milli: RewardMilli,
    pub n_turns: u32,
    /// The transcript stopped before the episode ended (a miner error mid-game);
    /// scored as the env's lowest reward.
    pub incomplete: bool,
    pub actions: Vec<Action>,
}

/// Re-scores a recorded conversation: every prompt must be exactly what the environment
/// shows for this challenge id and the answers before it; the reward is recomputed.
pub fn score_transcript<M: ChatTurn>(
    env: &dyn Environment,
    challenge_id: &ChallengeId,
    messages: &[M],
) -> Result<Scored, TranscriptError> {
    let spec = env.spec();
    let (mut episode, observation, _info) = env.reset(challenge_id);
    let expected = opening_messages(spec, &observation);
    for (index, want) in expected.iter().enumerate() {
        check_message(messages, index, want)?;
    }
    let mut index = expected.len();
    let mut actions = Vec::new();
    loop {
        let Some(answer) = messages.get(index) else {
            return Ok(Scored {
                reward_milli: spec.reward_min_milli,
                n_turns: actions.len() as u32,
                incomplete: true,
                actions,
            });
        };
        if answer.role() != "assistant" {
            return Err(TranscriptError::WrongRole {
                index,
                expected_role: "assistant",
                found_role: answer.role().to_string(),
                what: "answer",
            });
        }
        if actions.len() == MAX_TURNS {
            return Err(TranscriptError::TooManyTurns);
        }
        let action = episode.parse_action(answer.content());
        let step = episode.step(&action);
        actions.push(action);
        index += 1;
        if step.terminated || step.truncated {
            if index != messages.len() {
                return Err(TranscriptError::TrailingMessages { extra: messages.len() - index });
            }
            return Ok(Scored {
                reward_milli: step.reward_milli,
                n_turns: actions.len() as u32,
                incomplete: false,
                actions,
            });
        }
        check_message(messages, index, &Message::new("user", step.observation.text))?;
        index += 1;
    }
}

fn check_message<M: ChatTurn>(messages: &[M], index: usize, want: &Message) -> Result<(), TranscriptError> {
    let what = if want.role == "system" { "prompt" } else { "observation" };
    let role: &'static str = if want.role == "system" { "system" } else { "user" };
    let Some(found) = messages.get(index) else {
        return Err(TranscriptError::WrongRole { index, expected_role: role, found_role: "(missing)".into(), what });
    };
    if found.role() != want.role {
        return Err(TranscriptError::WrongRole {
            index,
            expected_role: role,
            found_role: found.role().to_string(),
            what,
        });
    }
    if found.content() != want.content {
        return Err(TranscriptError::PromptMismatch { index });
    }
    Ok(())
}

/// Scores one answer to a single-turn challenge.
pub fn score_answer(env: &dyn Environment, challenge_id: &ChallengeId, answer: &str) -> (Action, RewardMilli) {
    let (mut episode, _observation, _info) = env.reset(challenge_id);
    let action = episode.parse_action(answer);
    let step = episode.step(&action);
    (action, step.reward_milli)
}

/// Every environment this build knows, by name, and the protocol table it judges logs
/// by (which of them a match may play, from which chain block: ledger-spec/15).
pub struct Registry {
    envs: Vec<Box<dyn Environment>>,
    protocol: crate::protocol::Protocol,
}

/// The list of environments. Adding one is adding one line here.
pub fn registry() -> Registry {
    Registry {
        envs: vec![
            Box::new(tictactoe::TicTacToe::new()),
            Box::new(mult::Multiplication::new()),
            Box::new(sat::Sat::default_difficulty()),
            Box::new(coin::Coin::new()),
            Box::new(programs::Programs::new(programs::Kind::Abduction)),
            Box::new(programs::Programs::new(programs::Kind::Deduction)),
        ],
        protocol: crate::protocol::Protocol::network(),
    }
}

impl Registry {
    /// The same environments, judging by `protocol` (a devnet's table, or a capped one).
    pub fn with_protocol(self, protocol: crate::protocol::Protocol) -> Registry {
        Registry { protocol, ..self }
    }

    pub fn protocol(&self) -> &crate::protocol::Protocol {
        &self.protocol
    }

    pub fn get(&self, name: &str) -> Option<&dyn Environment> {
        self.envs.iter().find(|env| env.spec().name == name).map(|env| env.as_ref())
    }

    /// The environment called `name`, or an error that names the known ones.
    pub fn named(&self, name: &str) -> Result<&dyn Environment, UnknownEnv> {
        self.get(name)
            .ok_or_else(|| UnknownEnv { name: crate::bytes::quote_prefix(name), known: self.names().join(", ") })
    }

    pub fn all(&self) -> impl Iterator<Item = &dyn Environment> {
        self.envs.iter().map(|env| env.as_ref())
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.envs.iter().map(|env| env.spec().name).collect()
    }
}

pub(crate) fn info(spec: &EnvSpec, challenge_id: &ChallengeId, turn: u32) -> Info {
    Info {
        challenge_id: *challenge_id,
        env: spec.name,
        env_version: spec.version,
        difficulty: spec.difficulty.clone(),
        turn,
    }
}

/// The one step of a single-turn episode: reward 1 if `correct`, else 0.
pub(crate) fn single_turn_step(spec: &EnvSpec, challenge_id: &ChallengeId, done: &mut bool, correct: bool) -> Step {
    assert!(!*done, "step after the episode ended");
    *done = true;
    Step {
        observation: done_observation(),
        reward_milli: if correct { 1000 } else { 0 },
        terminated: true,
        truncated: false,
        info: info(spec, challenge_id, 1),
    }
}

pub(crate) fn done_observation() -> Observation {
    Observation { data: ObservationData::Done, text: String::new() }
}

#[cfg(test)]
mod tests {
    /// The network's newest protocol version names exactly the environments this build
    /// has, at their versions (ledger-spec/15): a new environment or version is a new
    /// protocol version, added there and here together.
    #[test]
    fn the_networks_protocol_names_exactly_these_environments() {
        let registry = super::registry();
        let protocol = registry.protocol();
        let (newest, _) = protocol.newest();
        let rules = protocol.versions().iter().find(|v| v.version == newest).unwrap();
        let mut ours: Vec<(&str, u32)> = registry.all().map(|env| (env.spec().name, env.spec().version)).collect();
        ours.sort_unstable();
        let mut named = rules.envs.to_vec();
        named.sort_unstable();
        assert_eq!(ours, named);
    }

    #[test]
    fn rewards_print_as_three_place_decimals_of_the_exact_integer() {
        for (milli, text) in
            [(1000, "1.000"), (0, "0.000"), (-250, "-0.250"), (5, "0.005"), (-1, "-0.001"), (i32::MIN, "-2147483.648")]
        {
            assert_eq!(super::reward_text(milli), text);
        }
    }
}
