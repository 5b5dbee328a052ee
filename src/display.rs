//! Text from outside (miners' answers, peers' and servers' errors, the chain's hotkeys,
//! a log's strings) made safe to show a person: a terminal escape in one could recolour,
//! hide or rewrite what is shown, and a newline in one field could forge a line of its
//! own (a fake "clean" verdict in a report, say). Reports in words are built from lines
//! passed through [`one_line`], so only the report's own newlines end a line.

use std::borrow::Cow;

/// For a block of text meant to span lines (a model's answer): every control character
/// but newline and tab, and every bidirectional override, is shown escaped as `\u{..}`.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c))
}

/// Whether a format string holds a line break: `outln!` refuses one at compile time,
/// since it escapes its whole output as one line.
pub const fn has_line_break(format: &str) -> bool {
    let bytes = format.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\n' || bytes[i] == b'\r' {
            return true;
        }
        i += 1;
    }
    false
}

/// As [`terminal_safe`], and newlines and tabs too: for one line, or one field of a row
/// (a hotkey, a model name, a committed string), which must not start a line of its own.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| c.is_control() || is_bidi_control(c))
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character `escape` picks shown as `\u{..}`; the one escaping every
/// function here (and the log writer's) shares.
pub fn escape_where(text: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escape(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_keeps_a_field_on_its_line_and_terminal_safe_keeps_only_newlines_and_tabs() {
        assert!(matches!(one_line("5Grw plain"), Cow::Borrowed(_)));
        assert_eq!(one_line("a\nclean: no discrepancy"), "a\\u{a}clean: no discrepancy");
        assert_eq!(one_line("x\r\t\u{1b}[2J\u{202E}"), "x\\u{d}\\u{9}\\u{1b}[2J\\u{202e}");
        assert_eq!(terminal_safe("a\n\tb\u{1b}[31m\u{2066}"), "a\n\tb\\u{1b}[31m\\u{2066}");
    }
}

/// An error and every cause under it, `: `-joined, empty ones left out: some errors
/// (libp2p's transport errors) say nothing themselves and keep the reason in a source,
/// so their `Display` alone reads "cannot listen on ...: " with no reason.
pub fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && parts.last() != Some(&text) {
            parts.push(text);
        }
        next = cause.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod causes_tests {
    /// An error whose own text is empty: its cause is what is shown.
    #[derive(Debug)]
    struct Silent(std::io::Error);
    impl std::fmt::Display for Silent {
        fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            Ok(())
        }
    }
    impl std::error::Error for Silent {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_that_says_nothing_shows_its_cause() {
        let error = Silent(std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use"));
        assert_eq!(super::with_causes(&error), "Address already in use");
    }
}
