//! The `pyprog` tasks' generator: a program drawn from a challenge's seed under a
//! `Difficulty` (assignments, nesting, a loop), with a hidden input it is shown with;
//! a program that other inputs of the same length also satisfy is rejected. The
//! language, its interpreter and its parser are `pyprog`'s.

use super::pyprog::{Cond, IntExpr, Loop, Program, Result};
use super::rng::Prng;

fn int_expr(prng: &mut Prng, depth: u32, helper: bool, in_loop: bool) -> IntExpr {
    let leaf = |prng: &mut Prng| -> IntExpr {
        let vars: &[char] = if in_loop { &['a', 'b', 'x'] } else { &['a', 'b'] };
        match prng.below(9) {
            0 | 1 => IntExpr::Const(prng.range_inclusive(0, 18) as i64 - 9),
            2 | 3 => IntExpr::Var(vars[prng.below(vars.len() as u64) as usize]),
            4 => IntExpr::Len,
            5 => IntExpr::Sum,
            6 => IntExpr::Min,
            7 => IntExpr::Max,
            _ => IntExpr::Index(prng.range_inclusive(0, 3) as i64 - 1),
        }
    };
    if depth == 0 || prng.below(3) == 0 {
        return leaf(prng);
    }
    let sub = |prng: &mut Prng| Box::new(int_expr(prng, depth - 1, helper, in_loop));
    let constant = |prng: &mut Prng| {
        let k = prng.range_inclusive(2, 9) as i64;
        if prng.below(4) == 0 {
            -k
        } else {
            k
        }
    };
    match prng.below(8) {
        0 => IntExpr::Add(sub(prng), sub(prng)),
        1 => IntExpr::Sub(sub(prng), sub(prng)),
        2 => {
            let e = sub(prng);
            IntExpr::MulConst(e, constant(prng))
        }
        3 => {
            let e = sub(prng);
            IntExpr::FloorDiv(e, constant(prng))
        }
        4 => {
            let e = sub(prng);
            IntExpr::Mod(e, constant(prng))
        }
        5 => IntExpr::Abs(sub(prng)),
        6 if prng.below(2) == 0 => IntExpr::StrLen(sub(prng)),
        6 => {
            let e = sub(prng);
            IntExpr::Count(e, prng.below(10) as u8)
        }
        _ if helper => IntExpr::Helper(sub(prng)),
        _ => IntExpr::Add(sub(prng), Box::new(leaf(prng))),
    }
}

/// The generator's knob: program size, expression nesting and whether loops appear.
/// Each setting is its own task family; the registered envs use [`Difficulty::DEFAULT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Difficulty {
    /// Most assignments before the loop (at least 2).
    pub max_assigns: u32,
    /// Nesting depth of expressions in assignments and the loop's branches.
    pub expr_depth: u32,
    /// Whether a loop over the input may appear (in 2 of 3 programs when it may).
    pub loops: bool,
}

impl Difficulty {
    pub const DEFAULT: Difficulty = Difficulty { max_assigns: 4, expr_depth: 2, loops: true };

    pub fn describe(&self) -> String {
        format!(
            "assignments=2..{} depth={} loop={}",
            self.max_assigns.max(2),
            self.expr_depth,
            if self.loops { "2/3" } else { "no" }
        )
    }
}

fn candidate(prng: &mut Prng, difficulty: &Difficulty) -> Program {
    let helper = prng.below(2) == 0;
    let looped = prng.below(3) != 0 && difficulty.loops;
    let n_assigns = prng.range_inclusive(2, u64::from(difficulty.max_assigns.max(2))) as usize;
    let depth = difficulty.expr_depth;
    let mut assigns = Vec::with_capacity(n_assigns);
    for _ in 0..n_assigns {
        let target = if prng.below(2) == 0 { 'a' } else { 'b' };
        assigns.push((target, int_expr(prng, depth, helper, false)));
    }
    let looped = looped.then(|| {
        let cond = match prng.below(3) {
            0 => Cond::Gt(IntExpr::Var('x'), int_expr(prng, 1, helper, true)),
            1 => Cond::Lt(IntExpr::Var('x'), int_expr(prng, 1, helper, true)),
            _ => Cond::Parity(int_expr(prng, 1, helper, true), prng.below(2) as i64),
        };
        Loop { cond, then_a: int_expr(prng, depth, helper, true), else_b: int_expr(prng, depth, helper, true) }
    });
    let result = match prng.below(6) {
        0 => Result::Concat(int_expr(prng, 1, helper, false), int_expr(prng, 1, helper, false)),
        1 => Result::Reversed(int_expr(prng, 1, helper, false)),
        2 => Result::Pair(int_expr(prng, 1, helper, false), int_expr(prng, 1, helper, false)),
        3 if prng.below(4) == 0 => {
            if prng.below(2) == 0 {
                Result::Sorted
            } else {
                Result::ReversedList
            }
        }
        _ => Result::Int(int_expr(prng, depth, helper, false)),
    };
    Program { helper, assigns, looped, result }
}

/// A generated task: the program and the hidden input it is shown with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub program: Program,
    pub input: Vec<i128>,
    /// What the program prints on `input`.
    pub output: String,
}

/// The task of one challenge: a hidden input of 2 to 4 digits (0..=9), then candidate
/// programs until one runs on it, prints something that changes when the input does
/// (checked on a perturbed and a shortened input), and prints something none of 16 random
/// inputs of the same length also prints; after 64 candidates, a fixed fallback.
pub fn generate(prng: &mut Prng, difficulty: &Difficulty) -> Task {
    let n = prng.range_inclusive(2, 4) as usize;
    let input: Vec<i128> = (0..n).map(|_| prng.below(10) as i128).collect();
    for _ in 0..64 {
        let program = candidate(prng, difficulty);
        let Ok(output) = program.run(&input) else { continue };
        let mut perturbed = input.clone();
        let i = prng.below(n as u64) as usize;
        perturbed[i] = (perturbed[i] + 1 + prng.below(8) as i128) % 10;
        let mut shorter = input.clone();
        shorter.pop();
        let depends = [perturbed, shorter].iter().any(|other| program.run(other).map_or(true, |o| o != output));
        // Abduction must take reasoning: no other of 16 random inputs of the same shape may
        // print the same output (else guessing would often be right).
        let guessable = (0..16).any(|_| {
            let guess: Vec<i128> = (0..n).map(|_| prng.below(10) as i128).collect();
            guess != input && program.run(&guess).is_ok_and(|o| o == output)
        });
        if depends && !guessable {
            return Task { program, input, output };
        }
    }
    let program = Program {
        helper: false,
        assigns: vec![('a', IntExpr::MulConst(Box::new(IntExpr::Sum), 3))],
        looped: None,
        result: Result::Int(IntExpr::Add(Box::new(IntExpr::Var('a')), Box::new(IntExpr::Len))),
    };
    let output = program.run(&input).expect("the fallback runs on every input");
    Task { program, input, output }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envs::pyprog::{normalize_output, parse_input, parse_program};

    #[test]
    fn generated_programs_parse_back_and_inputs_are_strict() {
        for seed in 0..300u64 {
            let id = crate::bytes::Hash32(*blake3::hash(&seed.to_le_bytes()).as_bytes());
            let task = generate(&mut Prng::new(&id), &Difficulty::DEFAULT);
            let source = task.program.source();
            assert_eq!(parse_program(&source).as_ref(), Some(&task.program), "{source}");
            assert_eq!(task.program.run(&task.input).as_ref(), Ok(&task.output));
        }
        // The knob: other settings give other valid families.
        let harder = Difficulty { max_assigns: 6, expr_depth: 4, loops: true };
        let easier = Difficulty { max_assigns: 2, expr_depth: 1, loops: false };
        for (seed, difficulty) in (0..100u64).flat_map(|s| [(s, harder), (s, easier)]) {
            let id = crate::bytes::Hash32(*blake3::hash(&seed.to_le_bytes()).as_bytes());
            let task = generate(&mut Prng::new(&id), &difficulty);
            assert_eq!(parse_program(&task.program.source()).as_ref(), Some(&task.program));
            assert!(difficulty.loops || task.program.looped.is_none());
        }
        // The same challenge id always gives the same task.
        let id = crate::bytes::Hash32([9; 32]);
        assert_eq!(
            generate(&mut Prng::new(&id), &Difficulty::DEFAULT),
            generate(&mut Prng::new(&id), &Difficulty::DEFAULT)
        );
        assert_eq!(parse_input(" 1 -2 30 "), Some(vec![1, -2, 30]));
        for bad in ["", "1  2", "+1", "1_000", "1001", "1 2 3 4 5 6 7 8 9", "0x1", "١"] {
            assert_eq!(parse_input(bad), None, "{bad:?}");
        }
        assert_eq!(normalize_output("1 \r\n2\n\n"), "1\n2");
    }
}
