//! SAT (single turn, from the original Affine design): a random k-SAT formula with a
//! planted solution, so it is satisfiable by construction and checking an answer is
//! linear in its size. Reward 1 if the assignment satisfies every clause.
//!
//! Generation, all from the challenge id's stream: the planted assignment (bit i of
//! one `next_u64` per 64 variables, x1 first); then per clause `k` distinct variables
//! (partial Fisher-Yates over 1..=n with `below`) and one `next_u64` whose bit i negates
//! literal i; a clause the planted assignment falsifies gets literal `below(k)` flipped.

use super::parse::extract_answer;
use super::rng::Prng;
use super::{
    info, single_turn_step, Action, EnvSpec, Environment, Episode, Info, Observation, ObservationData, Space, Step,
    Turns,
};
use crate::bytes::ChallengeId;

pub const NAME: &str = "sat";
pub const VERSION: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SatSize {
    pub n_vars: u32,
    pub n_clauses: u32,
    pub k: u32,
}

/// Default size: 12 variables, 48 clauses of 3 literals (ratio 4, near the hard region).
pub const DEFAULT_SIZE: SatSize = SatSize { n_vars: 12, n_clauses: 48, k: 3 };

pub struct Sat {
    spec: EnvSpec,
    size: SatSize,
}

impl Sat {
    pub fn default_difficulty() -> Sat {
        Sat::with_size(DEFAULT_SIZE)
    }

    pub fn with_size(size: SatSize) -> Sat {
        assert!(size.k >= 1 && size.k <= size.n_vars && size.n_vars <= 1000 && size.n_clauses <= 100_000);
        Sat {
            spec: EnvSpec {
                name: NAME,
                version: VERSION,
                description: "find an assignment satisfying a k-SAT formula with a planted solution",
                turns: Turns::Single,
                action_kind: "assignment",
                observation_space: Space::Cnf { n_vars: size.n_vars, n_clauses: size.n_clauses, k: size.k },
                action_space: Space::Assignment { n_vars: size.n_vars },
                difficulty: format!("n_vars={} n_clauses={} k={}", size.n_vars, size.n_clauses, size.k),
                reward_min_milli: 0,
                reward_max_milli: 1000,
                system_prompt: "You solve Boolean satisfiability problems. Answer in the exact format asked.",
            },
            size,
        }
    }
}

/// A formula: `k` literals per clause, laid end to end; `+i` is x_i, `-i` is NOT x_i.
pub fn generate(size: SatSize, challenge_id: &ChallengeId) -> (Vec<bool>, Vec<i32>) {
    assert!(size.k <= 64, "one word of sign bits per clause");
    let mut prng = Prng::new(challenge_id);
    let mut planted = Vec::with_capacity(size.n_vars as usize);
    let mut word = 0u64;
    for i in 0..size.n_vars {
        if i % 64 == 0 {
            word = prng.next_u64();
        }
        planted.push((word >> (i % 64)) & 1 == 1);
    }
    let k = size.k as usize;
    let mut vars: Vec<u32> = (1..=size.n_vars).collect();
    let mut literals = Vec::with_capacity(size.n_clauses as usize * k);
    for _ in 0..size.n_clauses {
        for i in 0..k {
            let j = i + prng.below(u64::from(size.n_vars) - i as u64) as usize;
            vars.swap(i, j);
        }
        let signs = prng.next_u64();
        let start = literals.len();
        for (i, &var) in vars[..k].iter().enumerate() {
            let var = var as i32;
            literals.push(if (signs >> i) & 1 == 1 { -var } else { var });
        }
        if !satisfies_clause(&planted, &literals[start..]) {
            let flip = start + prng.below(size.k as u64) as usize;
            literals[flip] = -literals[flip];
        }
    }
    (planted, literals)
}

fn satisfies_clause(assignment: &[bool], clause: &[i32]) -> bool {
    clause.iter().any(|&literal| assignment[literal.unsigned_abs() as usize - 1] == (literal > 0))
}

/// True if `assignment` makes every clause (`k` literals each) true.
pub fn satisfies(assignment: &[bool], literals: &[i32], k: usize) -> bool {
    literals.chunks(k).all(|clause| satisfies_clause(assignment, clause))
}

fn push_number(text: &mut String, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &digit in digits[..len].iter().rev() {
        text.push(digit as char);
    }
}

pub fn prompt(size: SatSize, literals: &[i32]) -> String {
    let mut text = String::with_capacity(256 + literals.len() * 6);
    text.push_str("Find a truth assignment for the variables x1..x");
    push_number(&mut text, size.n_vars);
    text.push_str(" that satisfies every clause below.\nEach clause is an OR of literals; ~x means NOT x. All clauses must hold.\n\n");
    for clause in literals.chunks(size.k as usize) {
        text.push('(');
        for (i, literal) in clause.iter().enumerate() {
            if i > 0 {
                text.push_str(" | ");
            }
            text.push_str(if *literal < 0 { "~x" } else { "x" });
            push_number(&mut text, literal.unsigned_abs());
        }
        text.push_str(")\n");
    }
    text.push_str("\nGive every variable a value (1 = true, 0 = false) on the last line, as `Answer: x1=1 x2=0 ... x");
    push_number(&mut text, size.n_vars);
    text.push_str("=1`.");
    text
}

struct SatEpisode<'a> {
    spec: &'a EnvSpec,
    size: SatSize,
    challenge_id: ChallengeId,
    planted: Vec<bool>,
    literals: Vec<i32>,
    done: bool,
}

impl Environment for Sat {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&self, challenge_id: &ChallengeId) -> (Box<dyn Episode + '_>, Observation, Info) {
        let (planted, literals) = generate(self.size, challenge_id);
        let observation = Observation {
            text: prompt(self.size, &literals),
            data: ObservationData::Cnf { n_vars: self.size.n_vars, k: self.size.k, literals: literals.clone() },
        };
        let episode = SatEpisode {
            spec: &self.spec,
            size: self.size,
            challenge_id: *challenge_id,
            planted,
            literals,
            done: false,
        };
        (Box::new(episode), observation, info(&self.spec, challenge_id, 0))
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
    for token in answer.split(|c: char| c.is_whitespace() || c == ',' || c == ';').filter(|t| !t.is_empty()) {
        let Some((name, value)) = token.split_once('=') else {
            return Action::Invalid(format!("expected x<i>=<0|1>, found {:?}", super::mult::truncate(token)));
        };
        let index = name
            .strip_prefix(['x', 'X'])
            .filter(|digits| !digits.is_empty() && digits.len() <= 6 && digits.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|digits| digits.parse::<u32>().ok())
            .filter(|i| (1..=n_vars).contains(i));
        let Some(index) = index else {
            return Action::Invalid(format!("no variable {:?} (x1..x{n_vars})", super::mult::truncate(name)));
        };
        let is_any = |options: [&str; 3]| options.iter().any(|o| value.eq_ignore_ascii_case(o));
        let value = if is_any(["1", "true", "t"]) {
            true
        } else if is_any(["0", "false", "f"]) {
            false
        } else {
            return Action::Invalid(format!("value of x{index} is {:?}, not 0 or 1", super::mult::truncate(value)));
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
        let correct = matches!(action, Action::Assignment(values) if values.len() == self.planted.len() && satisfies(values, &self.literals, self.size.k as usize));
        single_turn_step(self.spec, &self.challenge_id, &mut self.done, correct)
    }

    fn expert_action(&self) -> Action {
        Action::Assignment(self.planted.clone())
    }
}
