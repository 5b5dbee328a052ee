//! From a model's free text to the part that is its answer: lenient about noise
//! (whitespace, markdown, code fences, a final `Answer:` line), so format slips do not
//! decide matches, while each environment stays strict about what the answer says.
//!
//! Rule, in order: text over `MAX_ANSWER_BYTES` is refused; the last line that starts
//! with `answer:` or `final answer:` (any case, after markdown marks) gives the answer
//! (its rest, or the lines after it when the rest is empty); else the last fenced code
//! block; else the whole text. Surrounding quotes, backticks, asterisks, spaces and a
//! final period are then trimmed.

use crate::limits::MAX_ANSWER_BYTES;

#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum ParseError {
    #[error("answer is {0} bytes, over the limit of {MAX_ANSWER_BYTES}")]
    TooLong(usize),
    #[error("answer is empty")]
    Empty,
}

pub fn extract_answer(text: &str) -> Result<&str, ParseError> {
    if text.len() > MAX_ANSWER_BYTES {
        return Err(ParseError::TooLong(text.len()));
    }
    let raw = answer_line(text).or_else(|| last_fence(text)).unwrap_or(text);
    let cleaned = clean(raw);
    if cleaned.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(cleaned)
}

fn answer_line(text: &str) -> Option<&str> {
    for line in text.lines().rev() {
        // `lines()` yields subslices of `text`, so pointer arithmetic finds the offset.
        let line_start = line.as_ptr() as usize - text.as_ptr() as usize;
        let stripped = line.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '*' | '#' | '>' | '_' | '`'));
        let rest =
            strip_prefix_ignore_case(stripped, "final answer").or_else(|| strip_prefix_ignore_case(stripped, "answer"));
        let Some(rest) = rest else { continue };
        let rest = rest.trim_start_matches(|c: char| c == '*' || c == '_' || c.is_whitespace());
        let Some(rest) = rest.strip_prefix(':').or_else(|| rest.strip_prefix('\u{ff1a}')) else {
            continue;
        };
        if !clean(rest).is_empty() {
            return Some(rest);
        }
        let after = &text[line_start + line.len()..];
        return Some(last_fence(after).unwrap_or(after));
    }
    None
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// Content of the last complete ``` fenced block, without its info string.
fn last_fence(text: &str) -> Option<&str> {
    let close = text.rfind("```")?;
    let open = text[..close].rfind("```")?;
    let inner = &text[open + 3..close];
    // Drop an info string such as ```text on the opening line.
    Some(match inner.find('\n') {
        Some(newline) if !inner[..newline].trim().contains(' ') => &inner[newline + 1..],
        _ => inner,
    })
}

fn clean(text: &str) -> &str {
    let trimmed = text.trim_matches(|c: char| c.is_whitespace() || matches!(c, '`' | '*' | '"' | '\'' | '_'));
    let trimmed = trimmed.strip_suffix('.').unwrap_or(trimmed);
    trimmed.trim_matches(|c: char| c.is_whitespace() || matches!(c, '`' | '*' | '"' | '\''))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: Result<&str, ParseError>) {
        assert_eq!(extract_answer(input), expect, "input {input:?}");
    }

    #[test]
    fn extraction_cases() {
        check("42", Ok("42"));
        check("  42.  \n", Ok("42"));
        check("Let me think.\nAnswer: 42", Ok("42"));
        check("**Final Answer:** `42`", Ok("42"));
        check("answer: 1\nwait, no.\nANSWER: 2", Ok("2"));
        check("Answer:\n```\nx1=1 x2=0\n```", Ok("x1=1 x2=0"));
        check("work\n```text\n123\n```\n", Ok("123"));
        check("```\n```", Err(ParseError::Empty));
        check("", Err(ParseError::Empty));
        check("Answer:", Err(ParseError::Empty));
        check("The answer is 5", Ok("The answer is 5"));
        check(&"9".repeat(MAX_ANSWER_BYTES + 1), Err(ParseError::TooLong(MAX_ANSWER_BYTES + 1)));
    }

    #[test]
    fn hostile_input_never_panics() {
        let long_fences = "```".repeat(10_000);
        let samples = [
            "\u{0}\u{ffff}é漢字🙂Answer：🙂",
            "Answer",
            "ａｎｓｗｅｒ: 5",
            "```\n```\n```",
            "````````",
            "Answer: ```",
            long_fences.as_str(),
            "\r\n\r\nAnswer:\r\n\r\n",
            "é",
        ];
        for sample in samples {
            let _ = extract_answer(sample);
        }
    }
}
