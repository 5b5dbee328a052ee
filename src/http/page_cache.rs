//! Subnet pages drawn once per replay and shared by every reader. Drawing a page walks
//! every match held, and some pages (miners, history) grow with the logs: a crowd must
//! not draw one per connection, nor hold one copy per slow reader; and as the logs grow,
//! redrawing a page at every replay must not take a core (the history page replays the
//! logs' prefixes, up to 48 combines of every match).

use super::pages::FromChain;
use crate::replay::Replay;
use axum::body::Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, SemaphorePermit};

/// Pages drawn at once, whatever the number of readers.
pub const PAGE_DRAWS: usize = 2;
/// Drawn pages kept, each the newest of its key: a page of matches is one key per number.
pub const PAGES_KEPT: usize = 16;
/// A page drawn from an older replay is served until this many times its drawing's
/// duration has passed: redrawing one page then takes at most a tenth of a core, however
/// long the logs make it. (Cheap pages are redrawn at every replay.)
pub const REDRAW_AFTER_DRAW_TIMES: u32 = 10;

/// Which page, and what it is drawn from besides the replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageKey {
    pub name: &'static str,
    pub number: Option<usize>,
    pub chain: FromChain,
}

struct Drawn {
    key: PageKey,
    /// Weak: a kept page must not keep an old replay's folds alive.
    replay: Weak<Replay>,
    html: Bytes,
    drawn_at: Instant,
    took: Duration,
}

pub struct DrawnPages {
    draws: Semaphore,
    kept: Mutex<VecDeque<Drawn>>,
}

impl Default for DrawnPages {
    fn default() -> DrawnPages {
        DrawnPages { draws: Semaphore::new(PAGE_DRAWS), kept: Mutex::new(VecDeque::new()) }
    }
}

impl DrawnPages {
    /// The page as it was drawn from `replay`, or from an older replay while it is too
    /// soon to redraw it (see [`REDRAW_AFTER_DRAW_TIMES`]): the same bytes for every reader.
    pub fn get(&self, key: &PageKey, replay: &Arc<Replay>, now: Instant) -> Option<Bytes> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let drawn = kept.iter().find(|d| d.key == *key)?;
        // A weak pointer keeps its allocation, so an equal address is the same replay.
        let same = std::ptr::eq(drawn.replay.as_ptr(), Arc::as_ptr(replay));
        let too_soon = now.saturating_duration_since(drawn.drawn_at) < drawn.took * REDRAW_AFTER_DRAW_TIMES;
        (same || too_soon).then(|| drawn.html.clone())
    }

    /// Keeps `html` as `key`'s page drawn from `replay` at `drawn_at` in `took`, in place
    /// of any older one.
    pub fn keep(&self, key: PageKey, replay: &Arc<Replay>, html: Bytes, drawn_at: Instant, took: Duration) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|d| d.key != key);
        kept.push_back(Drawn { key, replay: Arc::downgrade(replay), html, drawn_at, took });
        while kept.len() > PAGES_KEPT {
            kept.pop_front();
        }
    }

    /// A turn to draw, waiting while [`PAGE_DRAWS`] others draw.
    pub async fn turn(&self) -> SemaphorePermit<'_> {
        self.draws.acquire().await.expect("the semaphore is never closed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay() -> Arc<Replay> {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::ledger::Store::create(dir.path()).unwrap();
        let params = crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
        Arc::new(crate::replay::replay(&store, &crate::envs::registry(), None, &params, &mut |_, _, _| {}).unwrap())
    }

    fn key(number: usize) -> PageKey {
        PageKey { name: "matches.html", number: Some(number), chain: FromChain::default() }
    }

    #[tokio::test]
    async fn a_page_is_drawn_once_per_replay_kept_boundedly_and_drawn_by_few_at_once() {
        let pages = DrawnPages::default();
        let (first, second) = (replay(), replay());
        let (t0, quick) = (Instant::now(), Duration::ZERO);
        pages.keep(key(1), &first, Bytes::from_static(b"one"), t0, quick);
        let again = pages.get(&key(1), &first, t0).unwrap();
        assert_eq!(again.as_ptr(), pages.get(&key(1), &first, t0).unwrap().as_ptr(), "one copy for every reader");
        assert_eq!(pages.get(&key(1), &second, t0), None, "drawn from another replay");
        assert_eq!(pages.get(&key(2), &first, t0), None, "another page");
        let queued = PageKey { chain: FromChain { queue: Some(Vec::new()), ..FromChain::default() }, ..key(1) };
        assert_eq!(pages.get(&queued, &first, t0), None, "drawn with another chain read");
        // A newer drawing replaces the older one of its page.
        pages.keep(key(1), &second, Bytes::from_static(b"two"), t0, quick);
        assert_eq!(pages.get(&key(1), &first, t0), None);
        assert_eq!(pages.get(&key(1), &second, t0).as_deref(), Some(&b"two"[..]));
        for n in 2..40 {
            pages.keep(key(n), &second, Bytes::from_static(b"n"), t0, quick);
        }
        assert_eq!(pages.kept.lock().unwrap().len(), PAGES_KEPT);
        assert_eq!(pages.get(&key(1), &second, t0), None, "the oldest went first");
        assert!(pages.get(&key(39), &second, t0).is_some());
        assert_eq!(Arc::strong_count(&first), 1, "a kept page does not keep its replay");
        let mut turns = Vec::new();
        for _ in 0..PAGE_DRAWS {
            turns.push(pages.turn().await);
        }
        let waiting = tokio::time::timeout(Duration::from_millis(50), pages.turn()).await;
        assert!(waiting.is_err(), "a reader past {PAGE_DRAWS} waits for a turn");
        drop(turns);
        assert!(tokio::time::timeout(Duration::from_millis(50), pages.turn()).await.is_ok());
    }

    #[test]
    fn a_page_slow_to_draw_is_served_from_an_older_replay_until_ten_times_its_drawing_has_passed() {
        let pages = DrawnPages::default();
        let (first, second) = (replay(), replay());
        let (t0, took) = (Instant::now(), Duration::from_secs(3));
        pages.keep(key(1), &first, Bytes::from_static(b"slow"), t0, took);
        let soon = t0 + took * REDRAW_AFTER_DRAW_TIMES - Duration::from_millis(1);
        assert_eq!(pages.get(&key(1), &second, soon).as_deref(), Some(&b"slow"[..]), "too soon to redraw");
        assert_eq!(pages.get(&key(1), &second, t0 + took * REDRAW_AFTER_DRAW_TIMES), None, "time to redraw");
        assert_eq!(pages.get(&key(2), &second, soon), None, "only the page that was drawn");
    }
}
