//! Read-only opens of the store file, and redb's page-checksum pass in its three uses:
//! run by the open (the store is then safe to read), skipped (salvage, or a full read
//! whose pass runs beside it), or run alone on its own thread beside a full read
//! ([`PageCheck`]), stopped as soon as every checksum has verified.

use super::error::StoreError;
use super::layout::{existing_store_file, io_open_error, open_database, read_header};
use redb::Database;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a read-only open does with redb's page-checksum pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pass {
    /// No pass: pages are met unchecked when read.
    Skip,
    /// redb's whole checked open: the pass, then the rebuild of its allocator state (a
    /// second walk of every page), so the store it returns can be read.
    Full,
    /// The pass alone, for a check beside a store opened with [`Pass::Skip`]: redb's
    /// repair reports progress 0.6 once every committed tree's checksums have verified
    /// (its comments: "the repair takes 3 full scans and the second is done now"), and
    /// only rebuilds its allocator state after that, which a check that opens no store
    /// does not need. The open is stopped there, so every page is read once, not twice.
    ChecksumsOnly,
}

/// A read-only open of `dir`'s store file: the database (none after
/// [`Pass::ChecksumsOnly`], which keeps none), the file's path, and why the file needs a
/// writer's recovery, if its writer left it open.
pub(super) fn open_read_only(
    dir: &Path,
    pass: Pass,
    cache_bytes: usize,
) -> Result<(Option<Database>, PathBuf, Option<String>), StoreError> {
    let path = existing_store_file(dir)?;
    let file = std::fs::File::open(&path).map_err(|e| io_open_error(&path, e))?;
    // The magic never changes, so it is checked before the open (redb would call a
    // file without it "not a redb database", which is a damaged store here); the commit
    // slots are checked after, under the open's lock.
    crate::ledger::readonly::check_magic(&read_header(&path)?)
        .map_err(|why| StoreError::Corrupt(format!("{}: {why}", path.display())))?;
    let backend = crate::ledger::readonly::ReadOnlyFile::new(file).map_err(|e| io_open_error(&path, e))?;
    let torn = Arc::new(AtomicBool::new(false));
    let verified = Arc::new(AtomicBool::new(false));
    let (seen_torn, seen_verified) = (torn.clone(), verified.clone());
    let opened = open_database(&path, cache_bytes, move |builder| {
        builder
            .set_check_integrity_on_open(pass != Pass::Skip)
            .set_repair_callback(move |session| {
                let progress = session.progress();
                // redb reports progress 0.3 only when the newest commit fails its
                // checksums and it falls back to the previous one, as its recovery after
                // a crash does; the writes of that recovery stay in the overlay.
                if progress > 0.0 && progress < 0.5 {
                    seen_torn.store(true, Ordering::SeqCst);
                }
                // 0.6: every checksum verified, the allocator's rebuild comes next.
                if pass == Pass::ChecksumsOnly && (0.5..0.9).contains(&progress) {
                    seen_verified.store(true, Ordering::SeqCst);
                    session.abort();
                }
            })
            .create_with_backend(backend)
    });
    let db = match opened {
        Ok(db) => Some(db),
        // Stopped by the callback above once the pass was done: only that stop is taken
        // as a passed check (any failure of the pass is an error before it).
        Err(StoreError::Open { .. }) if verified.load(Ordering::SeqCst) => None,
        Err(error) => return Err(error),
    };
    // Read once the open holds its shared lock, so no writer can be mid-commit (for a
    // stopped pass, the lock of the store it checks beside still holds).
    let header = read_header(&path)?;
    let left_open = crate::ledger::readonly::check_header(&header)
        .map_err(|why| StoreError::Corrupt(format!("{}: {why}", path.display())))?;
    let recovery = match (left_open, torn.load(Ordering::SeqCst)) {
        (Some(why), true) => Some(format!(
            "{why}; its newest commit fails its page checksums (a write cut short), so the commit before it is read"
        )),
        (Some(why), false) => Some(why),
        // A file closed cleanly keeps no torn commit: a failing one there is a change.
        (None, true) => {
            return Err(StoreError::Corrupt(format!(
                "{}: the newest commit fails its page checksums, in a file its writer closed",
                path.display()
            )))
        }
        (None, false) => None,
    };
    Ok((db, path, recovery))
}

/// The page-checksum pass of an overlapped open (`Store::open_read_only_overlapped`),
/// running on its own thread until finished.
#[must_use = "nothing read from an overlapped open is verified until its page check passes"]
pub struct PageCheck {
    handle: Option<std::thread::JoinHandle<Result<(), StoreError>>>,
}

impl PageCheck {
    /// A check already done (the store was opened with it).
    pub fn passed() -> PageCheck {
        PageCheck { handle: None }
    }

    /// Starts the pass over `dir`'s store file on its own thread ([`Pass::ChecksumsOnly`]).
    pub(super) fn start(dir: &Path) -> std::io::Result<PageCheck> {
        let dir = dir.to_path_buf();
        let handle = std::thread::Builder::new().name("page-check".into()).spawn(move || {
            open_read_only(&dir, Pass::ChecksumsOnly, crate::limits::PAGE_CHECK_CACHE_BYTES).map(drop)
        })?;
        Ok(PageCheck { handle: Some(handle) })
    }

    /// Waits for the pass: `Ok` only if every page of the commit read passed its checksum.
    pub fn finish(mut self) -> Result<(), StoreError> {
        match self.handle.take() {
            None => Ok(()),
            Some(handle) => handle.join().unwrap_or_else(|_| {
                Err(StoreError::Corrupt(
                    "the store engine failed during the page-checksum pass: the file is damaged".into(),
                ))
            }),
        }
    }
}
