//! Reference miner policies: how our own loopback miners answer. `perfect` sees only
//! the conversation, as a real model would, and solves each environment from the prompt
//! text (the exact product; minimax from the drawn board; a satisfying assignment by
//! DPLL; for the coin, which no prompt reveals, a fixed guess). The others degrade it.
//!
//! Pure: randomness comes from a caller-supplied seed, so a miner's answers are
//! reproducible in tests.

use crate::bytes::Hash32;
use crate::envs::rng::Prng;
use crate::envs::tictactoe::TicTacToe;
use crate::envs::{self, Action, Message};
use std::fmt;
use std::str::FromStr;

/// How a reference miner behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    Perfect,
    /// A uniformly random well-formed answer.
    Random,
    /// Perfect, except a random answer with probability `p`.
    Noisy {
        p: f64,
    },
    /// Over HTTP, a body that is not a chat completion; as an answer, text that never parses.
    Garbage,
    /// Perfect, after a delay.
    Slow {
        delay_ms: u64,
    },
    /// Perfect, but the HTTP server answers 500 with probability `p`.
    Flaky {
        p: f64,
    },
    /// Perfect, with `bytes` of reasoning text before the final `Answer:` line, as a
    /// reasoning model writes (a large `bytes` tests the recording cap).
    Verbose {
        bytes: usize,
    },
    /// Perfect, after text meant to fool whoever reads the transcript: a right-to-left
    /// override, a zero-width space, markup and a script (the pages, the explorer and the
    /// CLI must show it as text, escaped).
    Hostile,
}

/// The text a [`Policy::Hostile`] miner puts before its answer.
pub const HOSTILE_TEXT: &str = "<script>window.__hostile = 1</script><b>\u{202e}gnp.exe\u{200b}</b>";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "unknown policy {0}: expected perfect, random, noisy:P, garbage, slow:MS, flaky:P (0 <= P <= 1), verbose:BYTES \
     or hostile"
)]
pub struct PolicyParseError(String);

impl FromStr for Policy {
    type Err = PolicyParseError;

    fn from_str(text: &str) -> Result<Policy, PolicyParseError> {
        let err = || PolicyParseError(crate::bytes::quote_prefix(text));
        let probability = |v: &str| v.parse::<f64>().ok().filter(|p| (0.0..=1.0).contains(p)).ok_or_else(err);
        match text.split_once(':') {
            None if text == "perfect" => Ok(Policy::Perfect),
            None if text == "random" => Ok(Policy::Random),
            None if text == "garbage" => Ok(Policy::Garbage),
            None if text == "hostile" => Ok(Policy::Hostile),
            Some(("noisy", p)) => Ok(Policy::Noisy { p: probability(p)? }),
            Some(("flaky", p)) => Ok(Policy::Flaky { p: probability(p)? }),
            Some(("slow", ms)) => Ok(Policy::Slow { delay_ms: ms.parse().map_err(|_| err())? }),
            // Bounded so a typo cannot make a reference miner build gigabytes per answer.
            Some(("verbose", n)) => {
                Ok(Policy::Verbose { bytes: n.parse().ok().filter(|n| *n <= 64 * 1024 * 1024).ok_or_else(err)? })
            }
            _ => Err(err()),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Perfect => write!(f, "perfect"),
            Policy::Random => write!(f, "random"),
            Policy::Noisy { p } => write!(f, "noisy:{p}"),
            Policy::Garbage => write!(f, "garbage"),
            Policy::Slow { delay_ms } => write!(f, "slow:{delay_ms}"),
            Policy::Flaky { p } => write!(f, "flaky:{p}"),
            Policy::Verbose { bytes } => write!(f, "verbose:{bytes}"),
            Policy::Hostile => write!(f, "hostile"),
        }
    }
}

/// Which environment a conversation is from, told by its system prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Task {
    TicTacToe,
    Mult,
    Sat,
    Coin,
    Abd,
    Ded,
    Unknown,
}

/// The answering part of a reference miner. Holds the minimax table.
pub struct Solver {
    tictactoe: TicTacToe,
    system_prompts: Vec<(&'static str, Task)>,
}

impl Default for Solver {
    fn default() -> Self {
        Self::new()
    }
}

impl Solver {
    pub fn new() -> Solver {
        let registry = envs::registry();
        let task_of = |name: &str| match name {
            "tictactoe" => Task::TicTacToe,
            "mult" => Task::Mult,
            "sat" => Task::Sat,
            "coin" => Task::Coin,
            "abd" => Task::Abd,
            "ded" => Task::Ded,
            _ => Task::Unknown,
        };
        let system_prompts = registry.all().map(|env| (env.spec().system_prompt, task_of(env.spec().name))).collect();
        Solver { tictactoe: TicTacToe::new(), system_prompts }
    }

    fn task(&self, messages: &[Message]) -> Task {
        let system = messages.iter().find(|m| m.role == "system").map(|m| m.content.as_str()).unwrap_or("");
        self.system_prompts.iter().find(|(prompt, _)| *prompt == system).map_or(Task::Unknown, |(_, task)| *task)
    }

    /// The answer of `policy` to a conversation; `seed` drives any randomness.
    /// `Slow` and `Flaky` answer perfectly here; their delay and failures are the
    /// server's business.
    pub fn answer(&self, policy: Policy, messages: &[Message], seed: &Hash32) -> String {
        let mut prng = Prng::new(seed);
        match policy {
            Policy::Perfect | Policy::Slow { .. } | Policy::Flaky { .. } => self.perfect(messages),
            Policy::Random => self.random(messages, &mut prng),
            Policy::Noisy { p } => {
                if (prng.below(1_000_000) as f64) < p * 1_000_000.0 {
                    self.random(messages, &mut prng)
                } else {
                    self.perfect(messages)
                }
            }
            Policy::Garbage => "I cannot help with that. \u{1F937}".into(),
            Policy::Verbose { bytes } => {
                let thought = "Let me think about this step by step, checking each part twice. ";
                let mut text = thought.repeat(bytes / thought.len() + 1);
                text.truncate(bytes);
                format!("{text}\n{}", self.perfect(messages))
            }
            Policy::Hostile => format!("{HOSTILE_TEXT}\n{}", self.perfect(messages)),
        }
    }

    fn last_user<'m>(&self, messages: &'m [Message]) -> &'m str {
        messages.iter().rev().find(|m| m.role == "user").map_or("", |m| m.content.as_str())
    }

    fn perfect(&self, messages: &[Message]) -> String {
        let prompt = self.last_user(messages);
        let action = match self.task(messages) {
            Task::Mult => {
                parse_factors(prompt).map(|(a, b)| Action::Integer((u128::from(a) * u128::from(b)).to_string()))
            }
            Task::TicTacToe => parse_board(prompt)
                .and_then(|board| self.tictactoe.optimal_moves(&board).first().map(|&cell| Action::Cell(cell as u8))),
            Task::Sat => {
                parse_cnf(prompt).and_then(|(n_vars, clauses)| solve_sat(n_vars, &clauses).map(Action::Assignment))
            }
            Task::Coin => Some(Action::Coin(envs::CoinSide::Heads)),
            Task::Abd => envs::programs::solve_from_prompt(envs::programs::Kind::Abduction, prompt),
            Task::Ded => envs::programs::solve_from_prompt(envs::programs::Kind::Deduction, prompt),
            Task::Unknown => None,
        };
        action.map_or_else(|| "I do not recognise this task.".into(), |a| a.to_answer_text())
    }

    fn random(&self, messages: &[Message], prng: &mut Prng) -> String {
        let prompt = self.last_user(messages);
        let action = match self.task(messages) {
            Task::Mult => Action::Integer(prng.range_inclusive(100_000_000_000_000, 9_999_999_999_999_999).to_string()),
            Task::TicTacToe => {
                let empty: Vec<usize> =
                    parse_board(prompt).map(|b| (0..9).filter(|&c| b[c] == 0).collect()).unwrap_or_default();
                if empty.is_empty() {
                    Action::Cell(prng.below(9) as u8)
                } else {
                    Action::Cell(empty[prng.below(empty.len() as u64) as usize] as u8)
                }
            }
            Task::Sat => {
                let n_vars = parse_cnf(prompt).map_or(1, |(n, _)| n);
                Action::Assignment((0..n_vars).map(|_| prng.below(2) == 1).collect())
            }
            Task::Coin => Action::Coin(if prng.below(2) == 0 { envs::CoinSide::Heads } else { envs::CoinSide::Tails }),
            // A random line of the stated shape, and a random small integer as output.
            Task::Abd => Action::Input(
                (0..prng.range_inclusive(2, 4)).map(|_| prng.below(10).to_string()).collect::<Vec<_>>().join(" "),
            ),
            Task::Ded => Action::Output((prng.below(200) as i64 - 100).to_string()),
            Task::Unknown => return "42".into(),
        };
        action.to_answer_text()
    }
}

/// `What is A × B?`
fn parse_factors(prompt: &str) -> Option<(u64, u64)> {
    let rest = prompt.split("What is ").nth(1)?;
    let (a, rest) = rest.split_once(" × ")?;
    let b = rest.split('?').next()?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// The last `Board:` block: three rows of ` X | . | O`.
fn parse_board(prompt: &str) -> Option<[u8; 9]> {
    let after = prompt.rsplit("Board:\n").next()?;
    let mut board = [0u8; 9];
    let mut cell = 0;
    for line in after.lines().take(3) {
        for mark in line.split('|') {
            if cell == 9 {
                return None;
            }
            board[cell] = match mark.trim() {
                "X" => 1,
                "O" => 2,
                "." => 0,
                _ => return None,
            };
            cell += 1;
        }
    }
    (cell == 9).then_some(board)
}

/// `variables x1..xN` and lines `(x1 | ~x3 | x7)`.
fn parse_cnf(prompt: &str) -> Option<(u32, Vec<Vec<i32>>)> {
    let n_vars: u32 =
        prompt.split("variables x1..x").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()?;
    let mut clauses = Vec::new();
    for line in prompt.lines().filter(|l| l.starts_with('(') && l.ends_with(')')) {
        let mut clause = Vec::new();
        for literal in line[1..line.len() - 1].split('|') {
            let literal = literal.trim();
            let (negated, name) = match literal.strip_prefix('~') {
                Some(name) => (true, name),
                None => (false, literal),
            };
            let var: i32 = name.strip_prefix('x')?.parse().ok()?;
            clause.push(if negated { -var } else { var });
        }
        clauses.push(clause);
    }
    Some((n_vars, clauses))
}

/// DPLL with unit propagation; `None` if unsatisfiable (never, for planted formulas).
pub fn solve_sat(n_vars: u32, clauses: &[Vec<i32>]) -> Option<Vec<bool>> {
    fn search(clauses: &[Vec<i32>], assignment: &mut Vec<Option<bool>>) -> bool {
        // Unit propagation to a fixed point, remembering what to undo.
        let mut forced = Vec::new();
        loop {
            let mut changed = false;
            for clause in clauses {
                let mut unassigned = None;
                let mut n_unassigned = 0;
                let mut satisfied = false;
                for &literal in clause {
                    match assignment[literal.unsigned_abs() as usize - 1] {
                        Some(value) if value == (literal > 0) => satisfied = true,
                        Some(_) => {}
                        None => {
                            n_unassigned += 1;
                            unassigned = Some(literal);
                        }
                    }
                }
                if satisfied {
                    continue;
                }
                match (n_unassigned, unassigned) {
                    (0, _) => {
                        for var in forced {
                            assignment[var] = None;
                        }
                        return false;
                    }
                    (1, Some(literal)) => {
                        let var = literal.unsigned_abs() as usize - 1;
                        assignment[var] = Some(literal > 0);
                        forced.push(var);
                        changed = true;
                    }
                    _ => {}
                }
            }
            if !changed {
                break;
            }
        }
        let Some(var) = assignment.iter().position(Option::is_none) else { return true };
        for value in [true, false] {
            assignment[var] = Some(value);
            if search(clauses, assignment) {
                return true;
            }
        }
        assignment[var] = None;
        for var in forced {
            assignment[var] = None;
        }
        false
    }
    let mut assignment = vec![None; n_vars as usize];
    if clauses.iter().flatten().any(|l| l.unsigned_abs() == 0 || l.unsigned_abs() > n_vars) {
        return None;
    }
    search(clauses, &mut assignment).then(|| assignment.into_iter().map(|v| v.unwrap_or(false)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print() {
        for text in ["perfect", "random", "noisy:0.3", "garbage", "slow:250", "flaky:0.5"] {
            assert_eq!(text.parse::<Policy>().unwrap().to_string(), text);
        }
        for bad in ["", "noisy", "noisy:1.5", "slow:-1", "flaky:x", "perfectly"] {
            assert!(bad.parse::<Policy>().is_err(), "{bad}");
        }
    }

    #[test]
    fn dpll_solves_and_refuses() {
        let clauses = vec![vec![1, 2], vec![-1, 2], vec![-2, 3], vec![-3, -1]];
        let solution = solve_sat(3, &clauses).unwrap();
        assert!(envs::sat::satisfies(&solution, &clauses.concat(), 2));
        assert_eq!(solve_sat(1, &[vec![1], vec![-1]]), None);
    }
}
