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
        let prev = self.tip()?;
        let sealed = block::seal(self.key.signing_key(), prev.as_ref(), time_ms, events)?;
        match self.store.append(&sealed)? {
            Appended::New(tip) => {
                assert_eq!(tip, sealed.tip(), "the stored tip is the block just sealed");
                Ok(Receipt { tip, n_bytes: sealed.bytes().len() })
            }
            Appended::AlreadyStored => {
                unreachable!("a freshly sealed block above the tip cannot be stored already")
            }
        }
    }
}
