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
pub mod conversation;
pub mod demo;
pub mod entry;
pub mod event;
mod event_bounds;
pub mod export;
pub mod hash_many;
pub mod header;
pub mod keys;
pub mod merkle;
pub mod proof;
pub mod pruned;
pub mod readonly;
pub mod rotation;
pub mod salvage;
pub mod signed;
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
    /// The signing record (`signed`) this log keeps current; `None` for a log made
    /// with [`OwnLog::new`] (tests, benchmarks and stores that are not a data directory).
    record: Option<Record>,
    /// Why this process signs nothing more, once it must not (a protocol version it does
    /// not apply has activated, ledger-spec/15): set once, never cleared.
    halted: std::sync::OnceLock<String>,
}

struct Record {
    path: std::path::PathBuf,
    validator: ValidatorKey,
    /// When the record was last written (`None` before the first write), and the newest
    /// stored block it does not name yet.
    state: std::sync::Mutex<RecordState>,
}

#[derive(Default)]
struct RecordState {
    written: Option<std::time::Instant>,
    unrecorded: Option<Tip>,
}

/// Why a data directory's own log cannot be opened for signing.
#[derive(Debug, thiserror::Error)]
pub enum OpenLogError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Key(#[from] keys::KeyError),
    #[error("{0}")]
    Signed(#[from] signed::SignedError),
}

#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("{0}")]
    Block(#[from] BlockError),
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Signing has stopped for good in this process; the reason says why.
    #[error("signing has stopped: {0}")]
    Halted(String),
}

impl OwnLog {
    /// A log with no signing record: for stores that are not a validator's data
    /// directory (tests, benchmarks). A validator's own log is [`OwnLog::open`]'s.
    pub fn new(store: Store, key: LedgerKey) -> OwnLog {
        OwnLog { store, key, record: None, halted: std::sync::OnceLock::new() }
    }

    /// The data directory `data`'s own log: its store (created if missing), its key (a
    /// new one on first use) and its signing record, checked first: a store that lost
    /// blocks this key stored is refused ([`signed::SignedError::Behind`]), never signed on.
    pub fn open(data: &std::path::Path) -> Result<OwnLog, OpenLogError> {
        let key_path = data.join(keys::KEY_FILE);
        let path = data.join(signed::SIGNED_FILE);
        // A record with no store, or a 0-byte one, is refused before anything is made.
        if key_path.exists() {
            let validator = LedgerKey::load(&key_path)?.validator();
            signed::check_store_file(&path, &data.join(store::STORE_FILE), &validator)?;
        }
        let store = Store::create(data)?;
        let key = if key_path.exists() {
            LedgerKey::load(&key_path)?
        } else {
            let key = LedgerKey::generate()?;
            key.write_new(&key_path)?;
            key
        };
        let validator = key.validator();
        let tip = signed::check_store(&path, &store, &validator)?;
        let state = RecordState { written: tip.map(|_| std::time::Instant::now()), unrecorded: None };
        let record = Some(Record { path, validator, state: std::sync::Mutex::new(state) });
        Ok(OwnLog { store, key, record, halted: std::sync::OnceLock::new() })
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

    /// Stops signing for good in this process: every seal after this fails with
    /// [`AppendError::Halted`] naming `why`. Whether this call stopped it (false: it
    /// had stopped already).
    pub fn halt_signing(&self, why: String) -> bool {
        self.halted.set(why).is_ok()
    }

    /// Why signing has stopped, if it has.
    pub fn signing_halted(&self) -> Option<&str> {
        self.halted.get().map(String::as_str)
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
        if let Some(why) = self.halted.get() {
            return Err(AppendError::Halted(why.clone()));
        }
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
        if let Some(last) = sealed.get(appended.len().wrapping_sub(1)) {
            self.note_stored(last.tip());
        }
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

    /// Brings the signing record up to `tip`, just stored durably: at once for the first
    /// block, then at most every [`signed::RECORD_EVERY`]. A record that cannot be written
    /// is said and tried again at the next commit: the blocks are stored, and the record
    /// only lags (it is checked, and must be whole, when the log is next opened).
    fn note_stored(&self, tip: Tip) {
        let Some(record) = &self.record else {
            return;
        };
        let mut state = record.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.unrecorded = Some(tip);
        if state.written.is_some_and(|at| at.elapsed() < signed::RECORD_EVERY) {
            return;
        }
        record.write(&mut state);
    }
}

impl Record {
    fn write(&self, state: &mut RecordState) {
        let Some(tip) = state.unrecorded else {
            return;
        };
        match signed::write(&self.path, &signed::SignedRecord::of(self.validator, &tip)) {
            Ok(()) => *state = RecordState { written: Some(std::time::Instant::now()), unrecorded: None },
            Err(error) => {
                tracing::error!(event = "signing_record_failed", %error, "could not update the signing record")
            }
        }
    }
}

/// A log closed cleanly leaves its record at its tip, not up to a second behind it.
impl Drop for Record {
    fn drop(&mut self) {
        let mut state = std::mem::take(self.state.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()));
        self.write(&mut state);
    }
}
