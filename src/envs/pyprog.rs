//! Small Python 3 programs for the ABD and DED environments: their syntax tree, their
//! source text exactly as CPython runs it, a parser of that text (so a policy can solve a
//! task from the prompt alone), an exact evaluator with CPython's semantics for the
//! subset, and a generator driven only by the challenge's random stream.
//!
//! The subset (documented in docs/miner.md, checked against CPython by a test):
//! ```text
//! def g(n):                      # optional helper: digit sum, a bounded while loop
//!     n = abs(n)
//!     s = 0
//!     while n > 0:
//!         s = s + n % 10
//!         n = n // 10
//!     return s
//!
//! def f(xs):
//!     a = <int>                  # 2 to 4 assignments to a, b
//!     for x in xs:               # optional loop over the input
//!         if <cond>:
//!             a = <int>
//!         else:
//!             b = <int>
//!     return <result>
//!
//! xs = list(map(int, input().split()))
//! print(f(xs))
//! ```
//! Expressions also use `len(str(e))`, `str(e).count('d')`, `abs`, `len/sum/min/max(xs)`,
//! `xs[i]`; results may be `(str(e) + str(e))`, `str(e)[::-1]`, `[e, e]`, `sorted(xs)` or
//! `list(reversed(xs))`. Strings only ever hold digits and `-`, so no escaping arises.
//! Values are integers, strings and lists of integers. Every compound expression is
//! parenthesised, so precedence never matters. Integers stay below 2^96 by construction
//! (inputs of at most 8 integers of magnitude <= 1000, multiplication only by constants of
//! magnitude <= 9, at most 8 loop iterations); the evaluator checks anyway and ends with
//! an error beyond 2^100, and after 10,000 steps or 4 KiB of output.
//!
//! Draw order (one stream per challenge, `Prng::new(challenge_id)`): the hidden input's
//! length (2..=4) and values (0..=9 each); then per attempt (at most 64): whether there is
//! a helper, whether there is a loop, the number of assignments (2..=4), each
//! assignment's target and expression, the loop's condition and branches, the result
//! kind and expression; then the perturbation used by the rejection step and 16 random
//! inputs of the hidden input's length (a program any of them also satisfies is
//! rejected, so guessing rarely solves an ABD task).

/// Most integers in an input line, and their largest magnitude.
pub const MAX_INPUT_LEN: usize = 8;
pub const MAX_INPUT_ABS: i128 = 1000;
const MAX_STEPS: u32 = 10_000;
const MAX_OUTPUT_BYTES: usize = 4096;
const MAX_MAGNITUDE: i128 = 1 << 100;
/// Longest program text the parser reads.
pub const MAX_SOURCE_BYTES: usize = 16 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Int(i128),
    Str(String),
    List(Vec<i128>),
}

impl Value {
    /// What `print` writes for this value (without the newline).
    pub fn print_text(&self) -> String {
        match self {
            Value::Int(n) => n.to_string(),
            Value::Str(s) => s.clone(),
            Value::List(items) => {
                let parts: Vec<String> = items.iter().map(i128::to_string).collect();
                format!("[{}]", parts.join(", "))
            }
        }
    }
}

/// An integer expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IntExpr {
    Const(i64),
    Var(char),
    Add(Box<IntExpr>, Box<IntExpr>),
    Sub(Box<IntExpr>, Box<IntExpr>),
    /// Only by a constant: keeps magnitudes bounded.
    MulConst(Box<IntExpr>, i64),
    FloorDiv(Box<IntExpr>, i64),
    Mod(Box<IntExpr>, i64),
    Abs(Box<IntExpr>),
    Len,
    Sum,
    Min,
    Max,
    Index(i64),
    /// `len(str(e))`
    StrLen(Box<IntExpr>),
    /// `g(e)`: the helper's digit sum.
    Helper(Box<IntExpr>),
    /// `str(e).count('d')`: a string method.
    Count(Box<IntExpr>, u8),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    Gt(IntExpr, IntExpr),
    Lt(IntExpr, IntExpr),
    /// `(e % 2) == r`
    Parity(IntExpr, i64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Result {
    Int(IntExpr),
    /// `(str(e1) + str(e2))`
    Concat(IntExpr, IntExpr),
    /// `str(e)[::-1]`
    Reversed(IntExpr),
    Sorted,
    /// `[e1, e2]`
    Pair(IntExpr, IntExpr),
    /// `list(reversed(xs))`
    ReversedList,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    pub cond: Cond,
    pub then_a: IntExpr,
    pub else_b: IntExpr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub helper: bool,
    /// (target `a` or `b`, expression), in order.
    pub assigns: Vec<(char, IntExpr)>,
    pub looped: Option<Loop>,
    pub result: Result,
}

// ---------------------------------------------------------------- rendering

fn int_text(e: &IntExpr) -> String {
    match e {
        IntExpr::Const(k) if *k < 0 => format!("({k})"),
        IntExpr::Const(k) => k.to_string(),
        IntExpr::Var(v) => v.to_string(),
        IntExpr::Add(l, r) => format!("({} + {})", int_text(l), int_text(r)),
        IntExpr::Sub(l, r) => format!("({} - {})", int_text(l), int_text(r)),
        IntExpr::MulConst(l, k) => format!("({} * {})", int_text(l), int_text(&IntExpr::Const(*k))),
        IntExpr::FloorDiv(l, k) => format!("({} // {})", int_text(l), int_text(&IntExpr::Const(*k))),
        IntExpr::Mod(l, k) => format!("({} % {})", int_text(l), int_text(&IntExpr::Const(*k))),
        IntExpr::Abs(e) => format!("abs({})", int_text(e)),
        IntExpr::Len => "len(xs)".into(),
        IntExpr::Sum => "sum(xs)".into(),
        IntExpr::Min => "min(xs)".into(),
        IntExpr::Max => "max(xs)".into(),
        IntExpr::Index(i) => format!("xs[{i}]"),
        IntExpr::StrLen(e) => format!("len(str({}))", int_text(e)),
        IntExpr::Helper(e) => format!("g({})", int_text(e)),
        IntExpr::Count(e, d) => format!("str({}).count('{d}')", int_text(e)),
    }
}

fn cond_text(c: &Cond) -> String {
    match c {
        Cond::Gt(l, r) => format!("{} > {}", int_text(l), int_text(r)),
        Cond::Lt(l, r) => format!("{} < {}", int_text(l), int_text(r)),
        Cond::Parity(e, r) => format!("({} % 2) == {r}", int_text(e)),
    }
}

fn result_text(r: &Result) -> String {
    match r {
        Result::Int(e) => int_text(e),
        Result::Concat(l, r) => format!("(str({}) + str({}))", int_text(l), int_text(r)),
        Result::Reversed(e) => format!("str({})[::-1]", int_text(e)),
        Result::Sorted => "sorted(xs)".into(),
        Result::Pair(l, r) => format!("[{}, {}]", int_text(l), int_text(r)),
        Result::ReversedList => "list(reversed(xs))".into(),
    }
}

const HELPER_SOURCE: &str = "def g(n):\n    n = abs(n)\n    s = 0\n    while n > 0:\n        s = s + n % 10\n        n = n // 10\n    return s\n\n";
const MAIN_SOURCE: &str = "xs = list(map(int, input().split()))\nprint(f(xs))\n";

impl Program {
    /// The program as Python 3 source, exactly as CPython runs it.
    pub fn source(&self) -> String {
        let mut out = String::new();
        if self.helper {
            out.push_str(HELPER_SOURCE);
        }
        out.push_str("def f(xs):\n    a = 0\n    b = 0\n");
        for (target, e) in &self.assigns {
            out.push_str(&format!("    {target} = {}\n", int_text(e)));
        }
        if let Some(l) = &self.looped {
            out.push_str(&format!(
                "    for x in xs:\n        if {}:\n            a = {}\n        else:\n            b = {}\n",
                cond_text(&l.cond),
                int_text(&l.then_a),
                int_text(&l.else_b)
            ));
        }
        out.push_str(&format!("    return {}\n\n", result_text(&self.result)));
        out.push_str(MAIN_SOURCE);
        out
    }
}

// ---------------------------------------------------------------- evaluation

/// Why a run ended without output: the Python exception it would raise, or a bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// A Python exception by name (`ZeroDivisionError`, `IndexError`, `ValueError`).
    Exception(&'static str),
    /// A documented bound of the evaluator (steps, magnitude, output size).
    Bound(&'static str),
}

struct Machine<'a> {
    xs: &'a [i128],
    vars: [i128; 3], // a, b, x
    steps: u32,
}

fn check(n: i128) -> std::result::Result<i128, RunError> {
    if n.abs() > MAX_MAGNITUDE {
        return Err(RunError::Bound("integer magnitude over 2^100"));
    }
    Ok(n)
}

/// Python's floor division and modulo.
pub fn floor_div(a: i128, b: i128) -> std::result::Result<i128, RunError> {
    if b == 0 {
        return Err(RunError::Exception("ZeroDivisionError"));
    }
    let q = a / b;
    Ok(if a % b != 0 && ((a < 0) != (b < 0)) { q - 1 } else { q })
}

pub fn py_mod(a: i128, b: i128) -> std::result::Result<i128, RunError> {
    Ok(a - b * floor_div(a, b)?)
}

impl Machine<'_> {
    fn tick(&mut self) -> std::result::Result<(), RunError> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(RunError::Bound("more than 10,000 steps"));
        }
        Ok(())
    }

    fn var(&self, v: char) -> i128 {
        match v {
            'a' => self.vars[0],
            'b' => self.vars[1],
            _ => self.vars[2],
        }
    }

    fn int(&mut self, e: &IntExpr) -> std::result::Result<i128, RunError> {
        self.tick()?;
        let v = match e {
            IntExpr::Const(k) => i128::from(*k),
            IntExpr::Var(v) => self.var(*v),
            IntExpr::Add(l, r) => self.int(l)? + self.int(r)?,
            IntExpr::Sub(l, r) => self.int(l)? - self.int(r)?,
            IntExpr::MulConst(l, k) => self.int(l)? * i128::from(*k),
            IntExpr::FloorDiv(l, k) => floor_div(self.int(l)?, i128::from(*k))?,
            IntExpr::Mod(l, k) => py_mod(self.int(l)?, i128::from(*k))?,
            IntExpr::Abs(e) => self.int(e)?.abs(),
            IntExpr::Len => self.xs.len() as i128,
            IntExpr::Sum => self.xs.iter().sum(),
            IntExpr::Min => *self.xs.iter().min().ok_or(RunError::Exception("ValueError"))?,
            IntExpr::Max => *self.xs.iter().max().ok_or(RunError::Exception("ValueError"))?,
            IntExpr::Index(i) => {
                let len = self.xs.len() as i64;
                let at = if *i < 0 { i + len } else { *i };
                if at < 0 || at >= len {
                    return Err(RunError::Exception("IndexError"));
                }
                self.xs[at as usize]
            }
            IntExpr::StrLen(e) => self.int(e)?.to_string().len() as i128,
            IntExpr::Helper(e) => {
                let mut n = self.int(e)?.abs();
                let mut s = 0i128;
                while n > 0 {
                    self.tick()?;
                    s += n % 10;
                    n /= 10;
                }
                s
            }
            IntExpr::Count(e, d) => {
                let digit = char::from(b'0' + d % 10);
                self.int(e)?.to_string().chars().filter(|c| *c == digit).count() as i128
            }
        };
        check(v)
    }

    fn cond(&mut self, c: &Cond) -> std::result::Result<bool, RunError> {
        Ok(match c {
            Cond::Gt(l, r) => self.int(l)? > self.int(r)?,
            Cond::Lt(l, r) => self.int(l)? < self.int(r)?,
            Cond::Parity(e, r) => py_mod(self.int(e)?, 2)? == i128::from(*r),
        })
    }
}

impl Program {
    /// Runs the program on `xs` (the parsed input line): what it prints, newline included,
    /// or why it prints nothing.
    pub fn run(&self, xs: &[i128]) -> std::result::Result<String, RunError> {
        let mut m = Machine { xs, vars: [0; 3], steps: 0 };
        for (target, e) in &self.assigns {
            let v = m.int(e)?;
            m.vars[usize::from(*target == 'b')] = v;
        }
        if let Some(l) = &self.looped {
            for &x in xs {
                m.vars[2] = x;
                if m.cond(&l.cond)? {
                    m.vars[0] = m.int(&l.then_a)?;
                } else {
                    m.vars[1] = m.int(&l.else_b)?;
                }
            }
        }
        let value = match &self.result {
            Result::Int(e) => Value::Int(m.int(e)?),
            Result::Concat(l, r) => Value::Str(format!("{}{}", m.int(l)?, m.int(r)?)),
            Result::Reversed(e) => Value::Str(m.int(e)?.to_string().chars().rev().collect()),
            Result::Sorted => {
                let mut sorted = xs.to_vec();
                sorted.sort();
                Value::List(sorted)
            }
            Result::Pair(l, r) => Value::List(vec![m.int(l)?, m.int(r)?]),
            Result::ReversedList => Value::List(xs.iter().rev().copied().collect()),
        };
        let text = value.print_text();
        if text.len() > MAX_OUTPUT_BYTES {
            return Err(RunError::Bound("output over 4 KiB"));
        }
        Ok(format!("{text}\n"))
    }
}

/// Parses an input line the way the documented input shape allows: 1 to 8 integers
/// (an optional `-`, then 1 to 4 digits, magnitude at most 1000) separated by single
/// spaces. Stricter than CPython's `int()`, on purpose: every accepted line means the same
/// thing to both.
pub fn parse_input(line: &str) -> Option<Vec<i128>> {
    let line = line.trim();
    if line.is_empty() || line.len() > 64 {
        return None;
    }
    let mut out = Vec::new();
    for token in line.split(' ') {
        let digits = token.strip_prefix('-').unwrap_or(token);
        if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let value: i128 = token.parse().ok()?;
        if value.abs() > MAX_INPUT_ABS || out.len() == MAX_INPUT_LEN {
            return None;
        }
        out.push(value);
    }
    Some(out)
}

/// Output comparison: CRLF as LF, trailing whitespace of each line and trailing empty
/// lines ignored.
pub fn normalize_output(text: &str) -> String {
    let text = text.replace("\r\n", "\n");
    let lines: Vec<&str> = text.split('\n').map(str::trim_end).collect();
    lines.join("\n").trim_end_matches('\n').to_string()
}

// ---------------------------------------------------------------- parsing

/// Parses source text in the exact form [`Program::source`] writes (what a policy reads
/// back from a prompt). `None` for anything else.
pub fn parse_program(source: &str) -> Option<Program> {
    if source.len() > MAX_SOURCE_BYTES {
        return None;
    }
    let (helper, rest) = match source.strip_prefix(HELPER_SOURCE) {
        Some(rest) => (true, rest),
        None => (false, source),
    };
    let rest = rest.strip_prefix("def f(xs):\n    a = 0\n    b = 0\n")?;
    let body = rest.strip_suffix(MAIN_SOURCE)?.strip_suffix("\n\n")?;
    let mut lines = body.lines().peekable();
    let mut assigns = Vec::new();
    while let Some(line) = lines.peek() {
        let Some(assign) =
            line.strip_prefix("    a = ").map(|e| ('a', e)).or(line.strip_prefix("    b = ").map(|e| ('b', e)))
        else {
            break;
        };
        assigns.push((assign.0, Parser::new(assign.1).whole_int()?));
        lines.next();
    }
    let mut looped = None;
    if lines.peek() == Some(&"    for x in xs:") {
        lines.next();
        let cond = Parser::new(lines.next()?.strip_prefix("        if ")?.strip_suffix(':')?).whole_cond()?;
        let then_a = Parser::new(lines.next()?.strip_prefix("            a = ")?).whole_int()?;
        if lines.next()? != "        else:" {
            return None;
        }
        let else_b = Parser::new(lines.next()?.strip_prefix("            b = ")?).whole_int()?;
        looped = Some(Loop { cond, then_a, else_b });
    }
    let result = Parser::new(lines.next()?.strip_prefix("    return ")?).whole_result()?;
    if lines.next().is_some() {
        return None;
    }
    let program = Program { helper, assigns, looped, result };
    // One spelling per program: what was read must render back to exactly the text.
    (program.source() == source).then_some(program)
}

struct Parser<'a> {
    text: &'a str,
    depth: u32,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        Parser { text, depth: 0 }
    }

    fn eat(&mut self, prefix: &str) -> bool {
        match self.text.strip_prefix(prefix) {
            Some(rest) => {
                self.text = rest;
                true
            }
            None => false,
        }
    }

    fn number(&mut self) -> Option<i64> {
        let negative = self.eat("-");
        let len = self.text.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 || len > 6 {
            return None;
        }
        let value: i64 = self.text[..len].parse().ok()?;
        self.text = &self.text[len..];
        Some(if negative { -value } else { value })
    }

    fn constant(&mut self) -> Option<i64> {
        if self.eat("(") {
            let k = self.number()?;
            return self.eat(")").then_some(k);
        }
        self.number()
    }

    fn int(&mut self) -> Option<IntExpr> {
        self.depth += 1;
        if self.depth > 64 {
            return None;
        }
        let e = self.int_inner();
        self.depth -= 1;
        e
    }

    fn int_inner(&mut self) -> Option<IntExpr> {
        for (name, e) in
            [("len(xs)", IntExpr::Len), ("sum(xs)", IntExpr::Sum), ("min(xs)", IntExpr::Min), ("max(xs)", IntExpr::Max)]
        {
            if self.eat(name) {
                return Some(e);
            }
        }
        if self.eat("xs[") {
            let i = self.number()?;
            return self.eat("]").then_some(IntExpr::Index(i));
        }
        for (name, wrap) in [
            ("abs(", IntExpr::Abs as fn(Box<IntExpr>) -> IntExpr),
            ("g(", IntExpr::Helper as fn(Box<IntExpr>) -> IntExpr),
        ] {
            if self.eat(name) {
                let e = self.int()?;
                return self.eat(")").then(|| wrap(Box::new(e)));
            }
        }
        if self.eat("len(str(") {
            let e = self.int()?;
            return self.eat("))").then(|| IntExpr::StrLen(Box::new(e)));
        }
        if self.text.starts_with("str(") {
            // `str(e).count('d')`; a result's `str(e)[::-1]` never reaches here.
            self.eat("str(");
            let e = self.int()?;
            if !self.eat(").count('") {
                return None;
            }
            let d = self.text.bytes().next().filter(u8::is_ascii_digit)?;
            self.text = &self.text[1..];
            return self.eat("')").then(|| IntExpr::Count(Box::new(e), d - b'0'));
        }
        for var in ['a', 'b', 'x'] {
            if self.text.starts_with(var)
                && !self.text[1..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '(')
            {
                self.text = &self.text[1..];
                return Some(IntExpr::Var(var));
            }
        }
        if self.text.starts_with("(-") {
            return self.constant().map(IntExpr::Const);
        }
        if self.eat("(") {
            let left = self.int()?;
            let e = if self.eat(" + ") {
                IntExpr::Add(Box::new(left), Box::new(self.int()?))
            } else if self.eat(" - ") {
                IntExpr::Sub(Box::new(left), Box::new(self.int()?))
            } else if self.eat(" * ") {
                IntExpr::MulConst(Box::new(left), self.constant()?)
            } else if self.eat(" // ") {
                IntExpr::FloorDiv(Box::new(left), self.constant()?)
            } else if self.eat(" % ") {
                IntExpr::Mod(Box::new(left), self.constant()?)
            } else {
                return None;
            };
            return self.eat(")").then_some(e);
        }
        self.number().map(IntExpr::Const)
    }

    fn whole_int(mut self) -> Option<IntExpr> {
        let e = self.int()?;
        self.text.is_empty().then_some(e)
    }

    fn whole_cond(mut self) -> Option<Cond> {
        if self.eat("(") {
            let e = self.int()?;
            if !self.eat(" % 2) == ") {
                return None;
            }
            let r = self.number()?;
            return self.text.is_empty().then_some(Cond::Parity(e, r));
        }
        let left = self.int()?;
        let gt = if self.eat(" > ") {
            true
        } else if self.eat(" < ") {
            false
        } else {
            return None;
        };
        let right = self.int()?;
        let cond = if gt { Cond::Gt(left, right) } else { Cond::Lt(left, right) };
        self.text.is_empty().then_some(cond)
    }

    /// `(str(e) + str(e))` at the front, consumed only if it is exactly that (an integer
    /// result can also start with `(str(`).
    fn concat(&mut self) -> Option<(IntExpr, IntExpr)> {
        let mut trial = Parser { text: self.text.strip_prefix("(str(")?, depth: self.depth };
        let l = trial.int()?;
        trial.text = trial.text.strip_prefix(") + str(")?;
        let r = trial.int()?;
        trial.text = trial.text.strip_prefix("))")?;
        self.text = trial.text;
        Some((l, r))
    }

    /// `str(e)[::-1]` at the front, consumed only if it is exactly that.
    fn reversed(&mut self) -> Option<IntExpr> {
        let mut trial = Parser { text: self.text.strip_prefix("str(")?, depth: self.depth };
        let e = trial.int()?;
        trial.text = trial.text.strip_prefix(")[::-1]")?;
        self.text = trial.text;
        Some(e)
    }

    fn whole_result(mut self) -> Option<Result> {
        let result = if self.eat("sorted(xs)") {
            Result::Sorted
        } else if self.eat("list(reversed(xs))") {
            Result::ReversedList
        } else if let Some((l, r)) = self.concat() {
            Result::Concat(l, r)
        } else if let Some(e) = self.reversed() {
            Result::Reversed(e)
        } else if self.eat("[") {
            let l = self.int()?;
            if !self.eat(", ") {
                return None;
            }
            let r = self.int()?;
            if !self.eat("]") {
                return None;
            }
            Result::Pair(l, r)
        } else {
            Result::Int(self.int()?)
        };
        self.text.is_empty().then_some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_floor_division_and_modulo() {
        for (a, b, q, r) in [(7, 2, 3, 1), (-7, 2, -4, 1), (7, -2, -4, -1), (-7, -2, 3, -1), (6, -3, -2, 0)] {
            assert_eq!(floor_div(a, b), Ok(q), "{a} // {b}");
            assert_eq!(py_mod(a, b), Ok(r), "{a} % {b}");
        }
        assert_eq!(floor_div(1, 0), Err(RunError::Exception("ZeroDivisionError")));
    }
}
