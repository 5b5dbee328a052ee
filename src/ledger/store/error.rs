//! The store's errors, and how redb's become them: a damaged page, a full disk and a
//! write refused after an earlier failure are each named, so an operator knows which.

use crate::bytes::{Hash32, ValidatorKey};
use crate::ledger::block::BlockError;
use std::path::PathBuf;

/// The store's layout version, in its `meta` table.
pub const SCHEMA_VERSION: u32 = 2;
/// Schema 2 with pruned blocks (ledger-spec/05): recorded when a store first prunes, so
/// a build that does not know pruned blocks refuses the store rather than reading its
/// pruned heights as missing. This build reads both.
pub const PRUNED_SCHEMA_VERSION: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no ledger store at {0} (run `af ledger init --data DIR` first)")]
    Missing(PathBuf),
    #[error("cannot open ledger store {path}: {message}")]
    Open { path: PathBuf, message: String },
    /// Another process (a running `af validate` or `af node`) holds the store for writing.
    #[error(
        "ledger store {0} is locked: a running validator or node holds it for writing (stop it, read a copy, or read it over HTTP)"
    )]
    Locked(PathBuf),
    #[error("no permission to read ledger store {path}: {message}")]
    Permission { path: PathBuf, message: String },
    #[error("ledger store {0} was opened read-only and cannot be written")]
    ReadOnly(PathBuf),
    #[error(
        "ledger store {path} has schema version {found}, this build reads {SCHEMA_VERSION}{}",
        if *found < SCHEMA_VERSION { " (a writer's open upgrades it: `af ledger compact --data DIR` with the validator stopped, or start the validator)" } else { "" }
    )]
    Schema { path: PathBuf, found: u32 },
    #[error("storage engine error while {doing}: {message}")]
    Engine { doing: &'static str, message: String },
    /// The file system holding the store has no room left (ENOSPC): redb's commit failed
    /// whole, so what was durable before stays so.
    #[error(
        "the disk holding the ledger store is full (while {doing}): nothing already recorded is lost; free space, then run the same command to go on"
    )]
    DiskFull { doing: &'static str },
    /// An earlier write to this open store failed (a full disk, say): redb refuses every
    /// write from then on, until the store is opened again.
    #[error(
        "the ledger store refuses writes (while {doing}) since an earlier write failed: nothing already recorded is lost; fix the cause, then run the same command to go on"
    )]
    EarlierWriteFailed { doing: &'static str },
    #[error("block {height} of validator {validator} rejected: {source}")]
    Rejected {
        validator: ValidatorKey,
        height: u64,
        #[source]
        source: BlockError,
    },
    /// A different block is already stored at this height: the validator equivocated.
    #[error(
        "validator {validator} signed two different blocks at height {height}: stored {stored}, offered {offered}"
    )]
    Conflict { validator: ValidatorKey, height: u64, stored: Hash32, offered: Hash32 },
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A block's chunks are not the one layout the store writes (ledger-spec/05).
    #[error("block {height} of validator {validator} is stored in bad chunks: {why}")]
    BadChunks { validator: ValidatorKey, height: u64, why: String },
    /// The block's body was pruned (ledger-spec/05): only its header, signature and leaf
    /// hashes are kept, and this reader has no archive to fetch the body from.
    #[error(
        "block {height} of validator {validator} is pruned: the store keeps its header and leaf hashes only, and no archive to fetch its body from was reachable (`af ledger verify` names the chain's archive)"
    )]
    Pruned { validator: ValidatorKey, height: u64 },
    /// A pruned body fetched back from an archive could not be had or was not the block.
    #[error("block {height} of validator {validator} is pruned, and fetching its body from {archive} failed: {why}")]
    BodyFetch { validator: ValidatorKey, height: u64, archive: String, why: String },
}

impl StoreError {
    /// Whether this error is a check that ran and found the store's bytes wrong (exit 3),
    /// as opposed to a store that could not be read at all (exit 1).
    pub fn is_integrity_fault(&self) -> bool {
        matches!(self, StoreError::Corrupt(_) | StoreError::Rejected { .. } | StoreError::BadChunks { .. })
    }
}

pub(super) fn engine(doing: &'static str) -> impl Fn(redb::Error) -> StoreError {
    move |e| match e {
        // A page that fails its checksum while read: damage, said plainly (as at open).
        redb::Error::Corrupted(_) => StoreError::Corrupt(format!(
            "the store file is damaged: a page read while {doing} fails its checksum; restore it from a backup, \
             or fetch the logs again (af mirror, af ledger import)"
        )),
        redb::Error::Io(io) if is_disk_full(&io) => StoreError::DiskFull { doing },
        // redb refuses every write after one failed until the store is opened again.
        redb::Error::PreviousIo => StoreError::EarlierWriteFailed { doing },
        other => StoreError::Engine { doing, message: other.to_string() },
    }
}

/// ENOSPC, and the quota form of it (EDQUOT), by kind or by number.
pub(super) fn is_disk_full(error: &std::io::Error) -> bool {
    matches!(error.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
        || matches!(error.raw_os_error(), Some(28 | 122))
}

/// `engine` for any of redb's error types.
pub(super) fn eng<E: Into<redb::Error>>(doing: &'static str) -> impl Fn(E) -> StoreError {
    move |e| engine(doing)(e.into())
}
