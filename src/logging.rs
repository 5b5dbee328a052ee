//! Operator log lines, rate-limited per call site: a flood of one kind of line (a peer
//! over a limit, a refused request) prints at most `LINES_PER_WINDOW` per
//! `WINDOW` and counts the rest in `af_log_lines_suppressed_total`, so nobody outside can
//! turn a node's log into a flood that buries the lines an operator needs, or fill its
//! disk. And one event is one line: a field from outside (a miner's error, a peer's
//! reason) cannot start a forged line of its own.

use prometheus_client::metrics::counter::Counter;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tracing::callsite::Identifier;
use tracing::Metadata;
use tracing_subscriber::layer::{Context, Filter};

/// Lines one call site may print per window.
pub const LINES_PER_WINDOW: u32 = 20;
pub const WINDOW: Duration = Duration::from_secs(10);

/// A per-layer filter that lets each call site print `LINES_PER_WINDOW` events per window.
/// The map is keyed by call site, which the binary has a fixed number of.
#[derive(Debug, Default)]
pub struct LineLimiter {
    windows: Mutex<HashMap<Identifier, (Instant, u32)>>,
    suppressed: Counter,
}

impl LineLimiter {
    /// Counts suppressed lines in `suppressed` (shared with the metrics registry).
    pub fn new(suppressed: Counter) -> LineLimiter {
        LineLimiter { windows: Mutex::new(HashMap::new()), suppressed }
    }

    /// Whether one more line from `site` may print now.
    pub fn admit(&self, site: Identifier, now: Instant) -> bool {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let (start, count) = windows.entry(site).or_insert((now, 0));
        if now.duration_since(*start) >= WINDOW {
            *start = now;
            *count = 0;
        }
        *count += 1;
        let admitted = *count <= LINES_PER_WINDOW;
        if !admitted {
            self.suppressed.inc();
        }
        admitted
    }
}

impl<S> Filter<S> for LineLimiter {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        // Spans are not lines; only events are limited.
        !meta.is_event() || self.admit(meta.callsite(), Instant::now())
    }
}

/// A log writer that keeps each event on one line: the text format writes an event with
/// one `write_all` ending in a newline, and every other line break or control character
/// in it is written escaped as `\u{..}`. Escape itself is kept: tracing already escapes
/// it inside fields, so what is left is its own colouring. Tab is kept too. The JSON
/// format needs none of this: JSON escapes them itself.
pub struct OneLine<W>(pub W);

impl<W: std::io::Write> std::io::Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (body, end) = match buf.strip_suffix(b"\n") {
            Some(body) => (body, &b"\n"[..]),
            None => (buf, &b""[..]),
        };
        let breaks = |c: char| c.is_ascii_control() && c != '\x1b' && c != '\t';
        if !body.iter().any(|&b| breaks(char::from(b))) {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let text = String::from_utf8_lossy(body);
        // One write, as the event came: another thread's line cannot land inside it.
        let mut line = crate::display::escape_where(&text, breaks).into_owned().into_bytes();
        line.extend_from_slice(end);
        self.0.write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_is_one_line_whatever_its_fields_hold() {
        use std::io::Write;
        let mut out = OneLine(Vec::new());
        out.write_all(b"WARN miner answered: bad\nINFO af: champion crowned\r\n").unwrap();
        out.write_all(b"\x1b[32mINFO\x1b[0m plain\tline\n").unwrap();
        let text = String::from_utf8(out.0).unwrap();
        assert_eq!(
            text,
            "WARN miner answered: bad\\u{a}INFO af: champion crowned\\u{d}\n\x1b[32mINFO\x1b[0m plain\tline\n"
        );
        assert_eq!(text.lines().count(), 2);
    }

    #[test]
    fn a_flood_from_one_site_is_cut_and_counted_and_other_sites_still_print() {
        struct A;
        impl tracing::Callsite for A {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unimplemented!("not called by the limiter")
            }
        }
        struct B;
        impl tracing::Callsite for B {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unimplemented!("not called by the limiter")
            }
        }
        static SITE_A: A = A;
        static SITE_B: B = B;
        let counter = Counter::default();
        let limiter = LineLimiter::new(counter.clone());
        let now = Instant::now();
        let printed = (0..1000).filter(|_| limiter.admit(Identifier(&SITE_A), now)).count();
        assert_eq!(printed, LINES_PER_WINDOW as usize);
        assert_eq!(counter.get(), 1000 - u64::from(LINES_PER_WINDOW));
        assert!(limiter.admit(Identifier(&SITE_B), now), "another call site is not affected");
        assert!(limiter.admit(Identifier(&SITE_A), now + WINDOW), "the next window prints again");
    }
}
