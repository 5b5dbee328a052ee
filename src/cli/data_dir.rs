//! A data directory's own files as every command opens them: the ledger key and the
//! own log (created with a fresh key on first use), in one place so that the commands
//! that write (`validate`, `node`, `ledger`, `chain`) and those that read agree on them.

use af::ledger::keys::KEY_FILE;
use af::ledger::{LedgerKey, OwnLog, Store};
use std::path::{Path, PathBuf};

/// Where `data`'s ledger key lives.
pub fn key_path(data: &Path) -> PathBuf {
    data.join(KEY_FILE)
}

/// `data`'s store opened for writing, with its key (a new one on first use).
pub fn open_own_log(data: &Path) -> anyhow::Result<OwnLog> {
    let store = Store::create(data)?;
    let path = key_path(data);
    let key = if path.exists() {
        LedgerKey::load(&path)?
    } else {
        let key = LedgerKey::generate()?;
        key.write_new(&path)?;
        key
    };
    Ok(OwnLog::new(store, key))
}
