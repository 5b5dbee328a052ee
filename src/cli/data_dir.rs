//! A data directory's own files as every command opens them: the ledger key and the
//! own log (created with a fresh key on first use), in one place so that the commands
//! that write (`validate`, `node`, `ledger`, `chain`) and those that read agree on them.

use af::bytes::ValidatorKey;
use af::ledger::keys::KEY_FILE;
use af::ledger::{LedgerKey, OwnLog};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Where `data`'s ledger key lives.
pub fn key_path(data: &Path) -> PathBuf {
    data.join(KEY_FILE)
}

/// `data`'s store opened for writing, with its key (a new one on first use), checked
/// against its signing record ([`OwnLog::open`]).
pub fn open_own_log(data: &Path) -> anyhow::Result<OwnLog> {
    let mut log = OwnLog::open(data)?;
    // A replay from genesis reads the pruned bodies back from the archive the store names.
    log.store.set_bodies(std::sync::Arc::new(af::http::bodies::ArchiveBodies::default()));
    if log.store.upgraded_blocks() > 0 {
        tracing::info!(
            event = "store_upgraded",
            blocks = log.store.upgraded_blocks(),
            "upgraded the store to schema 2: blocks moved into pieces"
        );
    }
    Ok(log)
}

/// `data`'s ledger key, where it has one (a mirror's or an auditor's directory has none).
pub fn own_key(data: &Path) -> anyhow::Result<Option<LedgerKey>> {
    let path = key_path(data);
    Ok(if path.exists() { Some(LedgerKey::load(&path)?) } else { None })
}

pub fn parse_validator(hex: &str) -> anyhow::Result<ValidatorKey> {
    ValidatorKey::from_hex(hex).context("--validator")
}

/// `--validator` if given, else our own key's public half.
pub fn validator_or_own(data: &Path, validator: Option<String>) -> anyhow::Result<ValidatorKey> {
    match validator {
        Some(hex) => parse_validator(&hex),
        None => Ok(LedgerKey::load(&key_path(data)).context("no --validator given, so using our own key")?.validator()),
    }
}
