//! One memory budget for everything outside parties can make a node hold: sync
//! responses read from peers, responses we send them, blocks buffered for HTTP readers.
//! Each holder reserves the bytes before it allocates them and the reservation is
//! returned when the bytes are dropped, so the sum of what strangers pin is bounded by
//! one documented figure (`[p2p] memory_budget_mb`) however many of them arrive. Peers'
//! sync and HTTP readers each have their own part of it (`Budgets`), so neither crowd
//! can take the other's room.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The default budget counted byte for byte: half of the default `[p2p]
/// memory_budget_mb` (256), the other half being what connection limits bound.
pub const DEFAULT_BUDGET_BYTES: u64 = 128 * 1024 * 1024;

/// The node's two budgets: what peers' sync can make it hold, and what HTTP readers can.
/// Apart, so a crowd of readers cannot starve sync of room (nor peers the readers).
#[derive(Clone, Debug)]
pub struct Budgets {
    pub network: Arc<MemoryBudget>,
    pub http: Arc<MemoryBudget>,
}

impl Budgets {
    /// `bytes` split evenly between the two.
    pub fn split(bytes: u64) -> Budgets {
        Budgets { network: MemoryBudget::new(bytes - bytes / 2), http: MemoryBudget::new(bytes / 2) }
    }
}

/// A shared count of reserved bytes against a fixed limit.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
    /// Reservations refused since start (a metric: how often the budget was the limit).
    refused: AtomicU64,
}

impl MemoryBudget {
    pub fn new(limit: u64) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget { limit, used: AtomicU64::new(0), refused: AtomicU64::new(0) })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Reserves `bytes` if they fit under the limit; the reservation lasts until dropped.
    pub fn try_reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let Some(after) = used.checked_add(bytes).filter(|after| *after <= self.limit) else {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            };
            match self.used.compare_exchange_weak(used, after, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Some(Reservation { budget: self.clone(), bytes }),
                Err(now) => used = now,
            }
        }
    }

    /// Waits (polling every few milliseconds, up to `patience`) for `bytes` to fit.
    pub async fn reserve_within(self: &Arc<Self>, bytes: u64, patience: std::time::Duration) -> Option<Reservation> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            if let Some(reservation) = self.try_reserve(bytes) {
                return Some(reservation);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// Bytes held against a budget; released when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Gives back what is held past `bytes` (an answer that came out smaller than the
    /// room reserved for it before it was built).
    pub fn shrink_to(&mut self, bytes: u64) {
        if bytes < self.bytes {
            self.budget.used.fetch_sub(self.bytes - bytes, Ordering::AcqRel);
            self.bytes = bytes;
        }
    }

    /// Takes `other`'s bytes into this reservation (both from the same budget).
    pub fn absorb(&mut self, other: Reservation) {
        debug_assert!(Arc::ptr_eq(&self.budget, &other.budget), "one budget");
        self.bytes += other.bytes;
        std::mem::forget(other);
    }

    /// Grows the reservation by `more` bytes, if they fit.
    pub fn grow(&mut self, more: u64) -> bool {
        match self.budget.try_reserve(more) {
            Some(extra) => {
                self.bytes += extra.bytes;
                std::mem::forget(extra);
                true
            }
            None => false,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// Bytes that carry their reservation: dropping them returns it.
#[derive(Debug)]
pub struct Held {
    pub bytes: Vec<u8>,
    _reservation: Option<Reservation>,
}

impl Held {
    pub fn new(bytes: Vec<u8>, reservation: Reservation) -> Held {
        Held { bytes, _reservation: Some(reservation) }
    }
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_spending_their_whole_budget_leave_syncs_untouched() {
        let budgets = Budgets::split(128 << 20);
        assert_eq!(budgets.network.limit() + budgets.http.limit(), 128 << 20);
        let readers = budgets.http.try_reserve(budgets.http.limit()).expect("the readers' whole budget");
        assert!(budgets.http.try_reserve(1).is_none(), "readers wait for readers");
        let sync = budgets.network.try_reserve(33 << 20).expect("a 33 MiB sync answer still fits");
        assert_eq!(budgets.network.used(), 33 << 20);
        drop((readers, sync));
        assert_eq!((budgets.network.used(), budgets.http.used()), (0, 0));
    }

    #[test]
    fn reservations_add_up_to_the_limit_and_return_when_dropped() {
        let budget = MemoryBudget::new(100);
        let a = budget.try_reserve(60).expect("fits");
        assert!(budget.try_reserve(41).is_none(), "60 + 41 is over 100");
        let mut b = budget.try_reserve(40).expect("fits exactly");
        assert_eq!(budget.used(), 100);
        assert!(!b.grow(1));
        drop(a);
        assert!(b.grow(10));
        assert_eq!(b.bytes(), 50);
        assert_eq!(budget.used(), 50);
        drop(b);
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.refused(), 2);
        assert!(budget.try_reserve(u64::MAX).is_none(), "no overflow");
    }
}
