//! Coin (single turn, from the original Affine design): the environment flips a coin
//! from the challenge id and the model names a side. Nothing in the prompt reveals the
//! side, so any model scores 1/2 on average: the env checks instruction following and
//! answer format, and is a calibration point (a model far from 1/2 is suspicious).

use super::parse::extract_answer;
use super::rng::Prng;
use super::{
    info, single_turn_step, Action, CoinSide, EnvSpec, Environment, Episode, Info, Observation, ObservationData, Space,
    Step, Turns,
};
use crate::bytes::ChallengeId;

pub const NAME: &str = "coin";
pub const VERSION: u32 = 1;
pub const PROMPT: &str = "I flipped a fair coin. Guess how it landed.\nReply with exactly one word on the last line, as `Answer: HEADS` or `Answer: TAILS`.";

pub struct Coin {
    spec: EnvSpec,
}

impl Default for Coin {
    fn default() -> Self {
        Self::new()
    }
}

impl Coin {
    pub fn new() -> Coin {
        Coin {
            spec: EnvSpec {
                name: NAME,
                version: VERSION,
                description: "guess a fair coin flip; tests instruction following and format",
                turns: Turns::Single,
                action_kind: "coin side",
                observation_space: Space::Empty,
                action_space: Space::Choice { options: vec!["HEADS", "TAILS"] },
                difficulty: "fair".into(),
                reward_min_milli: 0,
                reward_max_milli: 1000,
                system_prompt: "You follow answer-format instructions exactly.",
            },
        }
    }
}

pub fn side(challenge_id: &ChallengeId) -> CoinSide {
    if Prng::new(challenge_id).below(2) == 0 {
        CoinSide::Heads
    } else {
        CoinSide::Tails
    }
}

struct CoinEpisode<'a> {
    spec: &'a EnvSpec,
    challenge_id: ChallengeId,
    side: CoinSide,
    done: bool,
}

impl Environment for Coin {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&self, challenge_id: &ChallengeId) -> (Box<dyn Episode + '_>, Observation, Info) {
        let episode =
            CoinEpisode { spec: &self.spec, challenge_id: *challenge_id, side: side(challenge_id), done: false };
        let observation = Observation { data: ObservationData::Coin, text: PROMPT.into() };
        (Box::new(episode), observation, info(&self.spec, challenge_id, 0))
    }
}

/// Exactly `heads` or `tails`, any case.
pub fn parse_side(text: &str) -> Action {
    match extract_answer(text) {
        Ok(answer) if answer.eq_ignore_ascii_case("heads") => Action::Coin(CoinSide::Heads),
        Ok(answer) if answer.eq_ignore_ascii_case("tails") => Action::Coin(CoinSide::Tails),
        Ok(answer) => Action::Invalid(format!("not HEADS or TAILS: {:?}", super::mult::truncate(answer))),
        Err(e) => Action::Invalid(e.to_string()),
    }
}

impl Episode for CoinEpisode<'_> {
    fn parse_action(&self, text: &str) -> Action {
        parse_side(text)
    }

    fn step(&mut self, action: &Action) -> Step {
        let correct = *action == Action::Coin(self.side);
        single_turn_step(self.spec, &self.challenge_id, &mut self.done, correct)
    }

    fn expert_action(&self) -> Action {
        Action::Coin(self.side)
    }
}
