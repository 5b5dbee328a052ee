//! Eight-digit multiplication (single turn): two 8-digit numbers from the challenge id;
//! reward 1 only for the exact product. Exact arithmetic is hard for language models and
//! trivial to check, which makes it a clean signal.

use super::parse::extract_answer;
use super::rng::Prng;
use super::{
    info, single_turn_step, Action, EnvSpec, Environment, Episode, Info, Observation, ObservationData, Space, Step,
    Turns,
};
use crate::bytes::ChallengeId;

pub const NAME: &str = "mult";
pub const VERSION: u32 = 1;
const LOW: u64 = 10_000_000;
const HIGH: u64 = 99_999_999;
/// Longest digit string we compare; anything longer is wrong, not a crash.
const MAX_DIGITS: usize = 40;

pub struct Multiplication {
    spec: EnvSpec,
}

impl Default for Multiplication {
    fn default() -> Self {
        Self::new()
    }
}

impl Multiplication {
    pub fn new() -> Multiplication {
        Multiplication {
            spec: EnvSpec {
                name: NAME,
                version: VERSION,
                description: "multiply two 8-digit integers exactly",
                turns: Turns::Single,
                action_kind: "integer",
                observation_space: Space::IntegerPair { digits: 8 },
                action_space: Space::Integer { max_digits: MAX_DIGITS as u32 },
                difficulty: "digits=8".into(),
                reward_min_milli: 0,
                reward_max_milli: 1000,
                system_prompt: "You are a careful calculator. Answer with the exact integer only.",
            },
        }
    }
}

/// Generates the task: both factors uniform in 10^7..=10^8-1.
pub fn factors(challenge_id: &ChallengeId) -> (u64, u64) {
    let mut prng = Prng::new(challenge_id);
    (prng.range_inclusive(LOW, HIGH), prng.range_inclusive(LOW, HIGH))
}

pub fn prompt(a: u64, b: u64) -> String {
    format!("What is {a} × {b}?\nGive the exact product as a plain integer on the last line, as `Answer: <number>`.")
}

struct MultEpisode<'a> {
    spec: &'a EnvSpec,
    challenge_id: ChallengeId,
    product: u64,
    done: bool,
}

impl Environment for Multiplication {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&self, challenge_id: &ChallengeId) -> (Box<dyn Episode + '_>, Observation, Info) {
        let (a, b) = factors(challenge_id);
        let observation = Observation { data: ObservationData::Multiplication { a, b }, text: prompt(a, b) };
        let episode = MultEpisode { spec: &self.spec, challenge_id: *challenge_id, product: a * b, done: false };
        (Box::new(episode), observation, info(&self.spec, challenge_id, 0))
    }
}

/// Strict integer: digits only, optionally grouped by commas in threes (`1,234,567`).
pub fn parse_integer(text: &str) -> Action {
    let answer = match extract_answer(text) {
        Ok(answer) => answer,
        Err(e) => return Action::Invalid(e.to_string()),
    };
    let digits: String = if answer.contains(',') {
        let groups: Vec<&str> = answer.split(',').collect();
        let well_grouped = groups.iter().enumerate().all(|(i, g)| {
            g.bytes().all(|b| b.is_ascii_digit()) && if i == 0 { (1..=3).contains(&g.len()) } else { g.len() == 3 }
        });
        if !well_grouped {
            return Action::Invalid(format!("not an integer: {:?}", truncate(answer)));
        }
        groups.concat()
    } else {
        answer.to_string()
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Action::Invalid(format!("not an integer: {:?}", truncate(answer)));
    }
    if digits.len() > MAX_DIGITS {
        return Action::Invalid(format!("integer of {} digits, over {MAX_DIGITS}", digits.len()));
    }
    let trimmed = digits.trim_start_matches('0');
    Action::Integer(if trimmed.is_empty() { "0".into() } else { trimmed.into() })
}

pub(crate) fn truncate(text: &str) -> String {
    text.chars().take(40).collect()
}

impl Episode for MultEpisode<'_> {
    fn parse_action(&self, text: &str) -> Action {
        parse_integer(text)
    }

    fn step(&mut self, action: &Action) -> Step {
        let correct = matches!(action, Action::Integer(digits) if *digits == self.product.to_string());
        single_turn_step(self.spec, &self.challenge_id, &mut self.done, correct)
    }

    fn expert_action(&self) -> Action {
        Action::Integer(self.product.to_string())
    }
}
