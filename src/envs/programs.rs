//! ABD and DED (single turn): a small Python 3 program generated from the challenge id
//! (`pyprog`), shown as source text. ABD (abduction, seed 003) shows what the program
//! printed and asks for an input line that makes it print exactly that; any input does
//! that counts, not only the hidden one. DED (deduction) shows the input and asks for
//! what it prints. Both are scored by our own exact, bounded evaluator: no model's input
//! ever reaches a Python interpreter.
//!
//! Answers go between `<INPUT></INPUT>` (ABD, the format Affine's ABD uses) or
//! `<OUTPUT></OUTPUT>` (DED); the last such pair in the text counts. Outputs compare
//! after normalisation (`pyprog::normalize_output`: CRLF as LF, trailing whitespace of
//! each line and the whole text ignored; DED also ignores leading blank lines).

use super::pyprog::{self, normalize_output, parse_input};
use super::pyprog_gen::{self, Difficulty, Task};
use super::rng::Prng;
use super::{
    info, single_turn_step, Action, EnvSpec, Environment, Episode, Info, Observation, ObservationData, Space, Turns,
};
use crate::bytes::ChallengeId;
use crate::limits::MAX_ANSWER_BYTES;

pub const ABD: &str = "abd";
pub const DED: &str = "ded";
pub const VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Abduction,
    Deduction,
}

pub struct Programs {
    kind: Kind,
    difficulty: Difficulty,
    spec: EnvSpec,
}

impl Programs {
    /// The registered env: the default difficulty.
    pub fn new(kind: Kind) -> Programs {
        Programs::with_difficulty(kind, Difficulty::DEFAULT)
    }

    /// Another task family of the same kind (not registered: a new difficulty is a new
    /// set of tasks, so it would need its own name or version).
    pub fn with_difficulty(kind: Kind, difficulty: Difficulty) -> Programs {
        let (name, description, action_kind, system_prompt) = match kind {
            Kind::Abduction => (
                ABD,
                "find an input that makes a small Python program print a given output",
                "input line",
                "You are an expert Python programmer. Reason about the program, then give the input line between <INPUT> and </INPUT>.",
            ),
            Kind::Deduction => (
                DED,
                "give exactly what a small Python program prints on a given input",
                "output text",
                "You are an expert Python programmer. Trace the program, then give its exact output between <OUTPUT> and </OUTPUT>.",
            ),
        };
        Programs {
            kind,
            difficulty,
            spec: EnvSpec {
                name,
                version: VERSION,
                description,
                turns: Turns::Single,
                action_kind,
                observation_space: Space::Program { max_source_bytes: pyprog::MAX_SOURCE_BYTES as u32 },
                action_space: Space::Program { max_source_bytes: MAX_ANSWER_BYTES as u32 },
                difficulty: format!("{} helper=1/2 input=2..4 digits", difficulty.describe()),
                reward_min_milli: 0,
                reward_max_milli: 1000,
                system_prompt,
            },
        }
    }
}

/// The task of a challenge at the default difficulty (the same generator for both envs;
/// their ids differ).
pub fn task(challenge_id: &ChallengeId) -> Task {
    pyprog_gen::generate(&mut Prng::new(challenge_id), &Difficulty::DEFAULT)
}

fn input_line(input: &[i128]) -> String {
    input.iter().map(i128::to_string).collect::<Vec<_>>().join(" ")
}

pub fn prompt(kind: Kind, task: &Task) -> String {
    let source = task.program.source();
    match kind {
        Kind::Abduction => format!(
            "The Python 3 program below reads one line from standard input and prints one line.\n\n```python\n{source}```\n\nIt printed exactly:\n```\n{}```\n\nFind an input line that makes it print exactly that. The input it was given was {} integers, each from 0 to 9, separated by single spaces; any line of 1 to 8 integers from -1000 to 1000, separated by single spaces, that produces this output counts.\nWrite the input line between <INPUT> and </INPUT>.",
            task.output,
            task.input.len()
        ),
        Kind::Deduction => format!(
            "The Python 3 program below reads one line from standard input and prints one line.\n\n```python\n{source}```\n\nIts input line is:\n```\n{}\n```\n\nWhat does it print? Write its exact output between <OUTPUT> and </OUTPUT>.",
            input_line(&task.input)
        ),
    }
}

/// The text between the last `<TAG>` and the `</TAG>` after it.
pub fn tagged<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = text.rfind(&open)? + open.len();
    let end = text[start..].find(&close)? + start;
    Some(&text[start..end])
}

struct ProgramEpisode<'a> {
    spec: &'a EnvSpec,
    kind: Kind,
    challenge_id: ChallengeId,
    task: Task,
    done: bool,
}

impl Environment for Programs {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&self, challenge_id: &ChallengeId) -> (Box<dyn Episode + '_>, Observation, Info) {
        let task = pyprog_gen::generate(&mut Prng::new(challenge_id), &self.difficulty);
        let observation = Observation {
            data: ObservationData::Program {
                source: task.program.source(),
                input: (self.kind == Kind::Deduction).then(|| input_line(&task.input)),
                output: (self.kind == Kind::Abduction).then(|| task.output.clone()),
            },
            text: prompt(self.kind, &task),
        };
        let episode =
            ProgramEpisode { spec: &self.spec, kind: self.kind, challenge_id: *challenge_id, task, done: false };
        (Box::new(episode), observation, info(&self.spec, challenge_id, 0))
    }
}

impl Episode for ProgramEpisode<'_> {
    fn parse_action(&self, text: &str) -> Action {
        if text.len() > MAX_ANSWER_BYTES {
            return Action::Invalid(format!("answer is {} bytes, over the limit of {MAX_ANSWER_BYTES}", text.len()));
        }
        match self.kind {
            Kind::Abduction => match tagged(text, "INPUT").map(|line| (line, parse_input(line))) {
                Some((_, Some(values))) => Action::Input(input_line(&values)),
                Some((line, None)) => Action::Invalid(format!(
                    "not 1 to 8 integers from -1000 to 1000 separated by single spaces: {}",
                    crate::bytes::quote_prefix(line.trim())
                )),
                None => Action::Invalid("no <INPUT>...</INPUT>".into()),
            },
            Kind::Deduction => match tagged(text, "OUTPUT") {
                Some(output) => Action::Output(normalize_output(output.trim_start_matches(['\r', '\n']))),
                None => Action::Invalid("no <OUTPUT>...</OUTPUT>".into()),
            },
        }
    }

    fn step(&mut self, action: &Action) -> super::Step {
        let correct = match (self.kind, action) {
            (Kind::Abduction, Action::Input(line)) => parse_input(line)
                .and_then(|values| self.task.program.run(&values).ok())
                .is_some_and(|printed| normalize_output(&printed) == normalize_output(&self.task.output)),
            (Kind::Deduction, Action::Output(text)) => *text == normalize_output(&self.task.output),
            _ => false,
        };
        single_turn_step(self.spec, &self.challenge_id, &mut self.done, correct)
    }

    fn expert_action(&self) -> Action {
        match self.kind {
            Kind::Abduction => Action::Input(input_line(&self.task.input)),
            Kind::Deduction => Action::Output(normalize_output(&self.task.output)),
        }
    }
}

/// The reference solution from the prompt text alone, as a model would have to: parse the
/// shown program with the subset's parser, then evaluate it (DED) or search the input
/// space the prompt states (ABD: every line of `n` digits, at most 10^4 runs).
pub fn solve_from_prompt(kind: Kind, prompt: &str) -> Option<Action> {
    let source = prompt.split("```python\n").nth(1)?.split("```\n\n").next()?;
    let program = pyprog::parse_program(source)?;
    match kind {
        Kind::Deduction => {
            let line = prompt.split("Its input line is:\n```\n").nth(1)?.split("\n```").next()?;
            let printed = program.run(&parse_input(line)?).ok()?;
            Some(Action::Output(normalize_output(&printed)))
        }
        Kind::Abduction => {
            let wanted = prompt.split("It printed exactly:\n```\n").nth(1)?.split("```").next()?;
            let n: u32 = prompt.split("The input it was given was ").nth(1)?.split(' ').next()?.parse().ok()?;
            if !(1..=4).contains(&n) {
                return None;
            }
            let wanted = normalize_output(wanted);
            let mut digits = vec![0i128; n as usize];
            for mut code in 0..10u32.pow(n) {
                for d in digits.iter_mut() {
                    *d = i128::from(code % 10);
                    code /= 10;
                }
                if program.run(&digits).is_ok_and(|printed| normalize_output(&printed) == wanted) {
                    return Some(Action::Input(input_line(&digits)));
                }
            }
            None
        }
    }
}
