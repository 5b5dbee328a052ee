//! One warning per outage of a chain read, and its true length when it ends: a read
//! retried every few seconds against a node that is down said the same warning every
//! time (five times in 90 s), and an outage was timed from its first failed read, some
//! seconds after the node went down. Timed here from the last read that answered.

/// What a repeated chain read has seen. Pure: the caller gives the clock and logs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outage {
    /// When the read last answered (ms); `None`: not yet.
    last_ok_ms: Option<u64>,
    /// When the failing began to be seen, while it lasts.
    failing_since_ms: Option<u64>,
}

/// What to say about a read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Said {
    /// Nothing: it answers as before, or it still fails and that was said.
    Nothing,
    /// It stopped answering: warn, once.
    Down,
    /// It answers again after an outage of this many seconds (from its last answer).
    Back { down_s: f64 },
}

impl Outage {
    pub fn failed(&mut self, now_ms: u64) -> Said {
        match self.failing_since_ms {
            Some(_) => Said::Nothing,
            None => {
                self.failing_since_ms = Some(now_ms);
                Said::Down
            }
        }
    }

    pub fn answered(&mut self, now_ms: u64) -> Said {
        let since = self.last_ok_ms.or(self.failing_since_ms);
        self.last_ok_ms = Some(now_ms);
        match self.failing_since_ms.take() {
            Some(first_failure) => {
                Said::Back { down_s: now_ms.saturating_sub(since.unwrap_or(first_failure)) as f64 / 1e3 }
            }
            None => Said::Nothing,
        }
    }

    /// Whether the read is failing now.
    pub fn is_down(&self) -> bool {
        self.failing_since_ms.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_said_once_and_timed_from_the_last_answer() {
        let mut outage = Outage::default();
        assert_eq!(outage.answered(1_000), Said::Nothing);
        // The node goes down at 2 s; the next read, at 11 s, fails; so do the retries.
        assert_eq!(outage.failed(11_000), Said::Down);
        for at in [13_000, 33_000, 55_000, 77_000] {
            assert_eq!(outage.failed(at), Said::Nothing, "said once per outage");
        }
        assert!(outage.is_down());
        // Back at 63.6 s: down since the last answer at 1 s, not the first failure at 11.
        assert_eq!(outage.answered(63_600), Said::Back { down_s: 62.6 });
        assert_eq!(outage.failed(70_000), Said::Down, "a new outage is said again");
    }
}
