//! The chain's facts the pages show (validators' identities, the queue, the head), read at most
//! once a minute whatever the number of page requests.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the pages' chain facts (validators' identities, the queue) are read from
/// the chain again, and how long one read may take: page requests never cost more than
/// one chain read a minute.
pub(super) const CHAIN_REFRESH: Duration = Duration::from_secs(60);
pub(super) const CHAIN_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The chain's neurons and commitments, read at most once per [`CHAIN_REFRESH`]; a
/// failed read keeps the last one (or none) and waits as long before trying again.
pub(super) struct ChainReads {
    pub(super) chain: Arc<dyn crate::chain::Chain>,
    pub(super) last: tokio::sync::Mutex<Option<(Instant, ChainRead)>>,
}

/// Neurons, commitments and the head block they were read at (or just before).
pub(super) type ChainRead = Arc<(Vec<crate::chain::Neuron>, Vec<crate::chain::CommitmentRecord>, u64)>;

impl ChainReads {
    pub(super) async fn get(&self) -> Option<ChainRead> {
        let mut last = self.last.lock().await;
        if let Some((_, read)) = last.as_ref().filter(|(at, _)| at.elapsed() < CHAIN_REFRESH) {
            return Some(read.clone());
        }
        let read = tokio::time::timeout(CHAIN_READ_TIMEOUT, async {
            let head = self.chain.current_block().await?;
            Ok::<_, crate::chain::ChainError>((self.chain.neurons().await?, self.chain.commitments().await?, head))
        })
        .await;
        let read = match read {
            Ok(Ok(read)) => Arc::new(read),
            Ok(Err(error)) => {
                tracing::warn!(event = "chain_unread", error = %error, "could not read the chain for the pages");
                return last.as_ref().map(|(_, read)| read.clone());
            }
            Err(_) => {
                tracing::warn!(event = "chain_unread", "reading the chain for the pages timed out");
                return last.as_ref().map(|(_, read)| read.clone());
            }
        };
        *last = Some((Instant::now(), read.clone()));
        Some(read)
    }
}
