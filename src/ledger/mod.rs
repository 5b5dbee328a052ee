//! The ledger: each validator's append-only, hash-chained, ed25519-signed block log,
//! its canonical bytes, its Merkle proofs, its checkpoints and its durable store.
//!
//! Pure parts (`codec`, `event`, `merkle`, `block`, `proof`, `checkpoint`) compute; the
//! `store` applies. Nothing here reads a clock, draws randomness for content, or
//! touches the network: time comes in as an argument.

pub mod block;
pub mod checkpoint;
pub mod codec;
pub mod consistency;
pub mod demo;
pub mod entry;
pub mod event;
pub mod export;
pub mod hash_many;
pub mod header;
pub mod keys;
pub mod merkle;
pub mod proof;
pub mod readonly;
pub mod store;
pub mod verify;

pub use crate::bytes::{ChallengeId, Hash32, MatchId, SignatureBytes, ValidatorKey};
pub use block::{Block, BlockError, BlockHeader, SealedBlock, Tip};
pub use event::Event;
pub use keys::LedgerKey;
pub use store::{Appended, Location, Store, StoreError};

/// What a durable append produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Receipt {
    pub tip: Tip,
    pub n_bytes: usize,
}

/// A validator's own log: the store plus the key that signs new blocks.
/// The single writer of its chain; events are grouped into one block per append.
pub struct OwnLog {
    pub store: Store,
    key: LedgerKey,
}

#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("{0}")]
    Block(#[from] BlockError),
    #[error("{0}")]
    Store(#[from] StoreError),
}

impl OwnLog {
    pub fn new(store: Store, key: LedgerKey) -> OwnLog {
        OwnLog { store, key }
    }

    pub fn validator(&self) -> ValidatorKey {
        self.key.validator()
    }

    pub fn key(&self) -> &LedgerKey {
        &self.key
    }

    pub fn tip(&self) -> Result<Option<Tip>, StoreError> {
        self.store.tip(&self.validator())
    }

    /// Seals `events` into the next block and stores it durably; returns once the block
    /// is on disk.
    pub fn append(&self, events: Vec<Event>, time_ms: u64) -> Result<Receipt, AppendError> {
        let mut receipts = self.append_many(vec![(events, time_ms)])?;
        Ok(receipts.pop().expect("one block sealed, one receipt"))
    }

    /// Seals each `(events, time_ms)` into the next block, each linked to the one before,
    /// and stores them all in one durable transaction: one fsync for many blocks (group
    /// commit). Returns once every block is on disk.
    pub fn append_many(&self, blocks: Vec<(Vec<Event>, u64)>) -> Result<Vec<Receipt>, AppendError> {
        let sealed = self.seal_many(self.tip()?.as_ref(), blocks)?;
        self.store_sealed(&sealed)
    }

    /// Seals each `(events, time_ms)` into a block, the first on `prev` and each next on
    /// the one before, without storing anything: the writer seals the next blocks while
    /// the previous ones are on their way to disk.
    pub fn seal_many(
        &self,
        prev: Option<&Tip>,
        blocks: Vec<(Vec<Event>, u64)>,
    ) -> Result<Vec<SealedBlock>, AppendError> {
        let mut prev = prev.copied();
        let mut sealed = Vec::with_capacity(blocks.len());
        for (events, time_ms) in blocks {
            let block = block::seal(self.key.signing_key(), prev.as_ref(), time_ms, events)?;
            prev = Some(block.tip());
            sealed.push(block);
        }
        Ok(sealed)
    }

    /// Stores blocks sealed by [`OwnLog::seal_many`] in one durable transaction. On an IO
    /// error none of them is stored; a block the store refuses (one not on our stored
    /// tip: only another writer of our chain could cause that) is an error with the
    /// blocks before it stored.
    pub fn store_sealed(&self, sealed: &[SealedBlock]) -> Result<Vec<Receipt>, AppendError> {
        let (appended, refused) = self.store.append_batch(sealed)?;
        if let Some((_, error)) = refused {
            return Err(error.into());
        }
        Ok(appended
            .into_iter()
            .zip(sealed)
            .map(|(done, block)| {
                assert_eq!(done, Appended::New(block.tip()), "the stored tip is the block just sealed");
                Receipt { tip: block.tip(), n_bytes: block.bytes().len() }
            })
            .collect())
    }
}
