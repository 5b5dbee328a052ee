//! SAT (single turn, from the original Affine design): a random k-SAT formula with a
//! planted solution, so it is satisfiable by construction and checking an answer is
//! linear in its size. Reward 1 if the assignment satisfies every clause.
//!
//! Generation, all from the challenge id's stream: the planted assignment (one draw of
//! `below(2)` per variable, x1 first); then per clause `k` distinct variables (partial
//! Fisher-Yates over 1..=n) and a sign each (`below(2)`, 1 = negated); a clause the
//! planted assignment falsifies gets the sign of literal `below(k)` flipped.

use super::parse::extract_answer;
use super::rng::Prng;
use super::{
    done_observation, info, Action, EnvSpec, Environment, Episode, Info, Observation,
    ObservationData, Space, Step, Turns,
};
use crate::bytes::ChallengeId;
use std::fmt::Write;

pub const NAME: &str = "sat";
pub const VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SatSize {
    pub n_vars: u32,
    pub n_clauses: u32,
    pub k: u32,
}

/// Default size: 12 variables, 48 clauses of 3 literals (ratio 4, near the hard region).
pub const DEFAULT_SIZE: SatSize = SatSize {
    n_vars: 12,
    n_clauses: 48,
    k: 3,
};

pub struct Sat {
    spec: EnvSpec,
    size: SatSize,
}

impl Sat {
    pub fn default_difficulty() -> Sat {
        Sat::with_size(DEFAULT_SIZE)
    }

    pub fn with_size(size: SatSize) -> Sat {
        assert!(
            size.k >= 1
                && size.k <= size.n_vars
                && size.n_vars <= 1000
                && size.n_clauses <= 100_000
        );
        Sat {
            spec: EnvSpec {
                name: NAME,
                version: VERSION,
                description:
                    "find an assignment satisfying a k-SAT formula with a planted solution",
                turns: Turns::Single,
                action_kind: "assignment",
                observation_space: Space::Cnf {
                    n_vars: size.n_vars,
                    n_clauses: size.n_clauses,
                    k: size.k,
                },
                action_space: Space::Assignment {
                    n_vars: size.n_vars,
                },
                difficulty: format!(
                    "n_vars={} n_clauses={} k={}",
                    size.n_vars, size.n_clauses, size.k
                ),
                reward_min_milli: 0,
                reward_max_milli: 1000,
                system_prompt:
                    "You solve Boolean satisfiability problems. Answer in the exact format asked.",
            },
            size,
        }
    }
}

/// A formula: clauses of literals, `+i` for x_i and `-i` for NOT x_i (1-based).
pub fn generate(size: SatSize, challenge_id: &ChallengeId) -> (Vec<bool>, Vec<Vec<i32>>) {
    let mut prng = Prng::new(challenge_id);
    let planted: Vec<bool> = (0..size.n_vars).map(|_| prng.below(2) == 1).collect();
    let mut vars: Vec<u32> = (1..=size.n_vars).collect();
    let mut clauses = Vec::with_capacity(size.n_clauses as usize);
    for _ in 0..size.n_clauses {
        let mut clause = Vec::with_capacity(size.k as usize);
        for i in 0..size.k as usize {
            let j = i + prng.below(u64::from(size.n_vars) - i as u64) as usize;
            vars.swap(i, j);
            let negated = prng.below(2) == 1;
            let var = vars[i] as i32;
            clause.push(if negated { -var } else { var });
        }
        if !satisfies_clause(&planted, &clause) {
            let flip = prng.below(u64::from(size.k)) as usize;
            clause[flip] = -clause[flip];
        }
        clauses.push(clause);
    }
    (planted, clauses)
}

fn satisfies_clause(assignment: &[bool], clause: &[i32]) -> bool {
    clause
        .iter()
        .any(|&literal| assignment[literal.unsigned_abs() as usize - 1] == (literal > 0))
}

pub fn satisfies(assignment: &[bool], clauses: &[Vec<i32>]) -> bool {
    clauses
        .iter()
        .all(|clause| satisfies_clause(assignment, clause))
}

pub fn prompt(size: SatSize, clauses: &[Vec<i32>]) -> String {
    let mut text = String::with_capacity(64 + clauses.len() * 20);
    let _ = writeln!(
        text,
        "Find a truth assignment for the variables x1..x{} that satisfies every clause below.\nEach clause is an OR of literals; ~x means NOT x. All clauses must hold.\n",
        size.n_vars
    );
    for clause in clauses {
        text.push('(');
        for (i, literal) in clause.iter().enumerate() {
            if i > 0 {
                text.push_str(" | ");
            }
            if *literal < 0 {
                text.push('~');
            }
            let _ = write!(text, "x{}", literal.unsigned_abs());
        }
        text.push_str(")\n");
    }
    let _ = write!(text, "\nGive every variable a value (1 = true, 0 = false) on the last line, as `Answer: x1=1 x2=0 ... x{}=1`.", size.n_vars);
    text
}

struct SatEpisode<'a> {
    spec: &'a EnvSpec,
    size: SatSize,
    challenge_id: ChallengeId,
    planted: Vec<bool>,
    clauses: Vec<Vec<i32>>,
    done: bool,
}

impl Environment for Sat {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&self, challenge_id: &ChallengeId) -> (Box<dyn Episode + '_>, Observation, Info) {
        let (planted, clauses) = generate(self.size, challenge_id);
        let observation = Observation {
            data: ObservationData::Cnf {
                n_vars: self.size.n_vars,
                clauses: clauses.clone(),
            },
            text: prompt(self.size, &clauses),
        };
        let episode = SatEpisode {
            spec: &self.spec,
            size: self.size,
            challenge_id: *challenge_id,
            planted,
            clauses,
            done: false,
        };
        (
            Box::new(episode),
            observation,
            info(&self.spec, challenge_id, 0),
        )
    }
}

/// `x1=1 x2=0 ...` (separators: spaces, commas, semicolons, newlines; values 1/0,
/// true/false, t/f in any case). Every variable exactly once; anything else is invalid.
pub fn parse_assignment(text: &str, n_vars: u32) -> Action {
    let answer = match extract_answer(text) {
        Ok(answer) => answer,
        Err(e) => return Action::Invalid(e.to_string()),
    };
    let mut values: Vec<Option<bool>> = vec![None; n_vars as usize];
    for token in answer
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|t| !t.is_empty())
    {
        let Some((name, value)) = token.split_once('=') else {
            return Action::Invalid(format!(
                "expected x<i>=<0|1>, found {:?}",
                super::mult::truncate(token)
            ));
        };
        let index = name
            .strip_prefix(['x', 'X'])
            .filter(|digits| {
                !digits.is_empty()
                    && digits.len() <= 6
                    && digits.bytes().all(|b| b.is_ascii_digit())
            })
            .and_then(|digits| digits.parse::<u32>().ok())
            .filter(|i| (1..=n_vars).contains(i));
        let Some(index) = index else {
            return Action::Invalid(format!(
                "no variable {:?} (x1..x{n_vars})",
                super::mult::truncate(name)
            ));
        };
        let value = match value.to_ascii_lowercase().as_str() {
            "1" | "true" | "t" => true,
            "0" | "false" | "f" => false,
            other => {
                return Action::Invalid(format!(
                    "value of x{index} is {:?}, not 0 or 1",
                    super::mult::truncate(other)
                ))
            }
        };
        let slot = &mut values[index as usize - 1];
        if slot.is_some() {
            return Action::Invalid(format!("x{index} is assigned twice"));
        }
        *slot = Some(value);
    }
    match values.iter().position(Option::is_none) {
        Some(missing) => Action::Invalid(format!("x{} has no value", missing + 1)),
        None => Action::Assignment(values.into_iter().map(|v| v.expect("all set")).collect()),
    }
}

impl Episode for SatEpisode<'_> {
    fn parse_action(&self, text: &str) -> Action {
        parse_assignment(text, self.size.n_vars)
    }

    fn step(&mut self, action: &Action) -> Step {
        assert!(!self.done, "step after the episode ended");
        self.done = true;
        let correct = matches!(action, Action::Assignment(values) if values.len() == self.planted.len() && satisfies(values, &self.clauses));
        Step {
            observation: done_observation(),
            reward_milli: if correct { 1000 } else { 0 },
            terminated: true,
            truncated: false,
            info: info(self.spec, &self.challenge_id, 1),
        }
    }

    fn expert_action(&self) -> Action {
        Action::Assignment(self.planted.clone())
    }
}
