//! How read commands reach a data directory's store: opened read-only, or, while a
//! running node holds it locked, through that node's HTTP API, mirrored (every block
//! verified, as `af mirror` does) into a temporary store removed when done.

use super::mirror::{self, ChainOutcome, MirrorError, MirrorOptions};
use super::ADDRESS_FILE;
use crate::bytes::ValidatorKey;
use crate::ledger::store::PageCheck;
use crate::ledger::{Store, StoreError};
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Mirror(#[from] MirrorError),
    #[error("{} is locked by a running process; start it with --http to read its logs while it runs, or stop it", .0.display())]
    LockedNoHttp(std::path::PathBuf),
    #[error("reading through {url} failed: {why}")]
    ThroughNode { url: String, why: String },
    #[error("{what}: {source}")]
    Io { what: &'static str, source: std::io::Error },
}

/// A store opened for reading: the data directory's own, or, while a running node holds
/// that one, a verified copy mirrored from the node (removed when dropped).
pub struct ReadStore {
    store: Store,
    /// Removed after the store is closed (fields drop in order).
    _temporary: Option<tempfile::TempDir>,
}

impl ReadStore {
    /// [`Store::abandon`]: a store whose page check failed is not closed (a temporary
    /// mirror is never in that state: its check ran at its open).
    pub fn abandon(self) {
        self.store.abandon();
    }
}

impl std::ops::Deref for ReadStore {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

/// Opens `data`'s store read-only; if a running node holds it and serves HTTP (it wrote
/// `DATA/http.addr`), mirrors every chain from that node into a temporary store, with
/// every check `af mirror` makes, and reads that instead. The answers are those of the
/// stopped store at the moment of the copy.
pub fn open_for_read(
    data: &Path,
    note: &mut dyn FnMut(&str),
    progress: &mut (dyn FnMut(&ValidatorKey, u64, u64) + Send),
) -> Result<ReadStore, ReadError> {
    let (store, check) = open_with(data, false, note, progress)?;
    check.finish()?;
    Ok(store)
}

/// Opens `data` as [`open_for_read`] does, but a local store without redb's page-checksum
/// pass first ([`Store::open_read_only_overlapped`]), and runs `read` on it while that
/// pass runs beside it (a full verification or audit reads every block anyway). `read`'s
/// result is handed back only if the pass passes: a page that fails it is the error
/// whatever `read` found, and that store is let go without its close
/// ([`Store::abandon`]). A panic inside `read` is caught: damage if the pass failed, else
/// a fault of af or redb on sound pages, named as such (not as damage).
pub fn read_beside_page_check<T>(
    data: &Path,
    note: &mut dyn FnMut(&str),
    progress: &mut (dyn FnMut(&ValidatorKey, u64, u64) + Send),
    read: impl FnOnce(&ReadStore) -> T,
) -> Result<(ReadStore, T), ReadError> {
    let (store, check) = open_with(data, true, note, progress)?;
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(&store)));
    if let Err(error) = check.finish() {
        store.abandon();
        return Err(error.into());
    }
    match out {
        Ok(out) => Ok((store, out)),
        Err(_) => Err(StoreError::Engine {
            doing: "reading a store whose pages passed their checksums",
            message: format!(
                "a panic while reading {} (a fault of af or redb, not of the file)",
                store.path().display()
            ),
        }
        .into()),
    }
}

fn open_with(
    data: &Path,
    overlapped: bool,
    note: &mut dyn FnMut(&str),
    progress: &mut (dyn FnMut(&ValidatorKey, u64, u64) + Send),
) -> Result<(ReadStore, PageCheck), ReadError> {
    let opened = match overlapped {
        true => Store::open_read_only_overlapped(data),
        false => Store::open_read_only(data).map(|store| (store, PageCheck::passed())),
    };
    match opened {
        Ok((mut store, check)) => {
            // Pruned bodies (ledger-spec/05) are fetched back from the archive the store
            // names, each taken only if it is the kept block.
            store.set_bodies(Arc::new(super::bodies::ArchiveBodies::default()));
            if let Some(why) = store.recovery_needed() {
                note(&format!(
                    "{} needs recovery: {why}; nothing was written (the next `af validate` or `af node` on it recovers it)",
                    store.path().display(),
                ));
            }
            Ok((ReadStore { store, _temporary: None }, check))
        }
        Err(StoreError::Locked(path)) => {
            let Some(url) = node_address(data) else { return Err(ReadError::LockedNoHttp(path)) };
            note(&format!("the store is held by a running node; reading it through {url} (every block verified)"));
            let temporary = tempfile::Builder::new()
                .prefix("af-read-")
                .tempdir()
                .map_err(|source| ReadError::Io { what: "creating a temporary store", source })?;
            let store = Arc::new(Store::create(temporary.path())?);
            let runtime = tokio::runtime::Runtime::new()
                .map_err(|source| ReadError::Io { what: "starting the async runtime", source })?;
            let report = runtime.block_on(mirror::mirror(store.clone(), &url, MirrorOptions::default(), progress))?;
            if report.found_fault() || report.failed() {
                let why: Vec<String> = report.chains.iter().filter_map(outcome_error).collect();
                return Err(ReadError::ThroughNode { url, why: why.join("; ") });
            }
            drop(runtime);
            let store = Arc::try_unwrap(store)
                .map_err(|_| ReadError::ThroughNode { url, why: "the mirror still holds the store".into() })?;
            Ok((ReadStore { store, _temporary: Some(temporary) }, PageCheck::passed()))
        }
        Err(error) => Err(error.into()),
    }
}

/// The URL a running node wrote into its data directory.
fn node_address(data: &Path) -> Option<String> {
    let text = std::fs::read_to_string(data.join(ADDRESS_FILE)).ok()?;
    let url = text.lines().next()?.trim().to_string();
    (url.starts_with("http://") && url.len() < 256).then_some(url)
}

fn outcome_error(chain: &mirror::ChainReport) -> Option<String> {
    match &chain.outcome {
        ChainOutcome::Failed { error, .. } | ChainOutcome::Refused { error, .. } => Some(error.clone()),
        ChainOutcome::Equivocation { evidence } => {
            Some(format!("validator {} equivocated at height {}", evidence.validator, evidence.height))
        }
        _ => None,
    }
}
