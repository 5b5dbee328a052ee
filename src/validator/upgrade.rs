//! A validator at the activation block of a protocol version its build does not apply
//! (ledger-spec/15): from that chain block on it signs nothing and starts no match, so it
//! never writes a block the upgraded network would judge by rules it does not know; it
//! goes on serving reads and syncing what it can verify. It says why once, in the log, on
//! `/healthz` (503) and in `af_protocol_upgrade_required`, which an alert watches.

use crate::ledger::OwnLog;
use crate::metrics::Metrics;
use crate::protocol::Protocol;
use std::sync::Arc;

/// Watches the chain heads a validator reads for the next version its build does not
/// apply, as its table or the chain's announcement names it.
pub struct UpgradeWatch {
    next: std::sync::Mutex<Option<(u32, u64)>>,
    known_max: u32,
    log: Arc<OwnLog>,
    metrics: Arc<Metrics>,
}

impl UpgradeWatch {
    pub fn new(protocol: &Protocol, log: Arc<OwnLog>, metrics: Arc<Metrics>) -> UpgradeWatch {
        let next = std::sync::Mutex::new(protocol.next_unknown());
        UpgradeWatch { next, known_max: protocol.known_max(), log, metrics }
    }

    /// Takes what the chain announces (ledger-spec/15): the version more than half of
    /// the other permitted validators commit, if this build does not apply it. Whether
    /// it is news (said once).
    pub fn learn(&self, announced: Option<(u32, u64)>) -> bool {
        let Some((version, block)) = announced.filter(|(version, _)| *version > self.known_max) else { return false };
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        if next.is_some_and(|(_, known)| known <= block) {
            return false;
        }
        *next = Some((version, block));
        tracing::warn!(
            event = "upgrade_announced",
            version,
            activation_block = block,
            "{}: more than half of the other permitted validators announce it; this build applies versions up to {}",
            crate::protocol::upgrade_message(version, block),
            self.known_max
        );
        true
    }

    /// Takes a chain head just read: at or past the activation block, signing stops for
    /// good (said the first time). Whether signing has stopped.
    pub fn observe(&self, head: u64) -> bool {
        let next = *self.next.lock().unwrap_or_else(|e| e.into_inner());
        let Some((version, block)) = next.filter(|(_, block)| head >= *block) else {
            return self.log.signing_halted().is_some();
        };
        let why = crate::protocol::upgrade_message(version, block);
        if self.log.halt_signing(why.clone()) {
            tracing::error!(
                event = "upgrade_required",
                version,
                activation_block = block,
                head,
                "{why}: this build applies protocol versions up to {}, so it signs nothing more and starts no match; it goes on serving reads and syncing",
                self.known_max
            );
            self.metrics.upgrade_needed(why);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{AppendError, LedgerKey, Store};

    #[test]
    fn signing_stops_at_the_activation_block_for_good_and_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(OwnLog::new(Store::create(dir.path()).unwrap(), LedgerKey::generate().unwrap()));
        let metrics = Arc::new(Metrics::new());
        let watch = UpgradeWatch::new(&Protocol::upgrade_test(50).capped(1), log.clone(), metrics.clone());
        assert!(!watch.observe(60), "an older build knows nothing of version 2 until the chain says it");
        assert!(!watch.learn(Some((1, 0))), "a version it applies is no news");
        assert!(watch.learn(Some((2, 50))));
        assert!(!watch.learn(Some((2, 50))), "said once");
        assert!(!watch.observe(49));
        log.append(vec![], 1).unwrap();
        assert!(watch.observe(50));
        assert_eq!(metrics.upgrade_required().as_deref(), Some("protocol version 2 activates at block 50; upgrade af"));
        assert_eq!(metrics.protocol_upgrade_required.get(), 1);
        assert!(matches!(log.append(vec![], 2), Err(AppendError::Halted(_))));
        // A head read back before the block (another RPC node) does not undo it.
        assert!(watch.observe(10));
        assert_eq!(log.tip().unwrap().map(|t| t.height), Some(0), "nothing signed after the stop");
        // A build that applies every version of its table never stops.
        let current = UpgradeWatch::new(&Protocol::upgrade_test(50), log, metrics);
        assert!(current.next.lock().unwrap().is_none());
        assert!(!current.learn(Some((2, 50))));
    }
}
