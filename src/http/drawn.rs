//! Subnet pages drawn once per replay and shared by every reader. Drawing a page walks
//! every match held, and some pages (miners, history) grow with the logs: a crowd must
//! not draw one per connection, nor hold one copy per slow reader.

use super::pages::FromChain;
use crate::replay::Replay;
use axum::body::Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::{Semaphore, SemaphorePermit};

/// Pages drawn at once, whatever the number of readers.
pub const PAGE_DRAWS: usize = 2;
/// Drawn pages kept, each the newest of its key: a page of matches is one key per number.
pub const PAGES_KEPT: usize = 16;

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
    /// The page as it was drawn from `replay`, if it was: the same bytes for every reader.
    pub fn get(&self, key: &PageKey, replay: &Arc<Replay>) -> Option<Bytes> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        // A weak pointer keeps its allocation, so an equal address is the same replay.
        kept.iter()
            .find(|d| d.key == *key && std::ptr::eq(d.replay.as_ptr(), Arc::as_ptr(replay)))
            .map(|d| d.html.clone())
    }

    /// Keeps `html` as `key`'s page drawn from `replay`, in place of any older one.
    pub fn keep(&self, key: PageKey, replay: &Arc<Replay>, html: Bytes) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|d| d.key != key);
        kept.push_back(Drawn { key, replay: Arc::downgrade(replay), html });
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
        pages.keep(key(1), &first, Bytes::from_static(b"one"));
        let again = pages.get(&key(1), &first).unwrap();
        assert_eq!(again.as_ptr(), pages.get(&key(1), &first).unwrap().as_ptr(), "one copy for every reader");
        assert_eq!(pages.get(&key(1), &second), None, "drawn from another replay");
        assert_eq!(pages.get(&key(2), &first), None, "another page");
        let queued = PageKey { chain: FromChain { queue: Some(Vec::new()), ..FromChain::default() }, ..key(1) };
        assert_eq!(pages.get(&queued, &first), None, "drawn with another chain read");
        // A newer drawing replaces the older one of its page.
        pages.keep(key(1), &second, Bytes::from_static(b"two"));
        assert_eq!(pages.get(&key(1), &first), None);
        assert_eq!(pages.get(&key(1), &second).as_deref(), Some(&b"two"[..]));
        for n in 2..40 {
            pages.keep(key(n), &second, Bytes::from_static(b"n"));
        }
        assert_eq!(pages.kept.lock().unwrap().len(), PAGES_KEPT);
        assert_eq!(pages.get(&key(1), &second), None, "the oldest went first");
        assert!(pages.get(&key(39), &second).is_some());
        assert_eq!(Arc::strong_count(&first), 1, "a kept page does not keep its replay");
        let mut turns = Vec::new();
        for _ in 0..PAGE_DRAWS {
            turns.push(pages.turn().await);
        }
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), pages.turn()).await;
        assert!(waiting.is_err(), "a reader past {PAGE_DRAWS} waits for a turn");
        drop(turns);
        assert!(tokio::time::timeout(std::time::Duration::from_millis(50), pages.turn()).await.is_ok());
    }
}
