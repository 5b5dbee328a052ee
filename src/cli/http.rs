//! `af mirror`, `af ledger publish`, the `--http` listener of `af validate` and
//! `af node`, and how read commands reach a store that a running node holds locked:
//! through that node's HTTP API, mirrored (every block verified) into a temporary store.

use super::{print_json, ProgressLine, EXIT_CHECK_FAILED};
use crate::outln;
use af::bytes::ValidatorKey;
use af::http::mirror::{self, ChainOutcome, MirrorOptions, MirrorReport};
use af::http::server::{self, HttpLimits};
use af::http::ADDRESS_FILE;
use af::ledger::{OwnLog, Store, StoreError};
use anyhow::Context;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// A store opened for reading: the data directory's own, or, while a running node holds
/// that one, a verified copy mirrored from the node (removed when dropped).
pub struct ReadStore {
    store: Store,
    /// Removed after the store is closed (fields drop in order).
    _temporary: Option<tempfile::TempDir>,
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
pub fn open_for_read(data: &Path) -> anyhow::Result<ReadStore> {
    match Store::open_read_only(data) {
        Ok(store) => {
            if let Some(why) = store.recovery_needed() {
                eprintln!(
                    "af: {} needs recovery: {}; nothing was written (the next `af validate` or `af node` on it recovers it)",
                    store.path().display(),
                    crate::cli::terminal_safe(why)
                );
            }
            Ok(ReadStore { store, _temporary: None })
        }
        Err(StoreError::Locked(path)) => {
            let Some(url) = node_address(data) else {
                anyhow::bail!(
                    "{} is locked by a running process; start it with --http to read its logs while it runs, or stop it",
                    path.display()
                );
            };
            eprintln!("af: the store is held by a running node; reading it through {url} (every block verified)");
            let temporary =
                tempfile::Builder::new().prefix("af-read-").tempdir().context("creating a temporary store")?;
            let store = Arc::new(Store::create(temporary.path())?);
            let report = run_mirror(store.clone(), &url, MirrorOptions::default())?;
            if report.found_fault() || report.failed() {
                let why: Vec<String> = report.chains.iter().filter_map(outcome_error).collect();
                anyhow::bail!("reading through {url} failed: {}", why.join("; "));
            }
            let store = Arc::try_unwrap(store).map_err(|_| anyhow::anyhow!("the mirror still holds the store"))?;
            Ok(ReadStore { store, _temporary: Some(temporary) })
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

fn run_mirror(store: Arc<Store>, url: &str, options: MirrorOptions) -> anyhow::Result<MirrorReport> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let mut line = ProgressLine::new();
    let mut progress = move |validator: &ValidatorKey, held: u64, size: u64| {
        line.update(|| format!("mirroring {}…: {held}/{size} blocks", &validator.to_hex()[..16]));
    };
    let report = runtime.block_on(mirror::mirror(store, url, options, &mut progress))?;
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprint!("\r\x1b[2K");
    }
    Ok(report)
}

/// `af mirror`.
pub fn mirror_command(
    from: &str,
    data: &Path,
    validator: Option<String>,
    total_timeout: std::time::Duration,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let validator =
        validator.map(|v| ValidatorKey::from_hex(&v).with_context(|| format!("--validator {v}"))).transpose()?;
    let store = Arc::new(Store::create(data)?);
    let report = run_mirror(store, from, MirrorOptions { validator, total_timeout, ..MirrorOptions::default() })?;
    let evidence_dir = data.join("evidence");
    for chain in &report.chains {
        if let ChainOutcome::Equivocation { evidence } = &chain.outcome {
            std::fs::create_dir_all(&evidence_dir)?;
            let path = evidence_dir.join(format!("{}-{}.json", evidence.validator, evidence.height));
            std::fs::write(&path, serde_json::to_vec_pretty(evidence)?)?;
        }
    }
    if json {
        print_json(&report)?;
    } else {
        for chain in &report.chains {
            let server = chain.server_size.map_or("?".into(), |s| s.to_string());
            let what = match &chain.outcome {
                ChainOutcome::UpToDate => "up to date".to_string(),
                ChainOutcome::Updated { blocks_new } => format!("{blocks_new} new blocks verified and stored"),
                ChainOutcome::Failed { error, blocks_new } => format!("FAILED after {blocks_new} new blocks: {error}"),
                ChainOutcome::Refused { error, blocks_new } => {
                    format!("REFUSED after {blocks_new} new blocks (nothing unverified stored): {error}")
                }
                ChainOutcome::Equivocation { evidence } => format!(
                    "EQUIVOCATION at height {}: evidence written to {}",
                    evidence.height,
                    evidence_dir.join(format!("{}-{}.json", evidence.validator, evidence.height)).display()
                ),
            };
            outln!(
                "{}  {} -> {} blocks (server {server}): {what}",
                chain.validator,
                chain.size_before,
                chain.size_after
            );
        }
        outln!("{} chain(s) from {}; {} new blocks", report.chains.len(), report.source, report.blocks_new());
    }
    Ok(if report.found_fault() {
        ExitCode::from(EXIT_CHECK_FAILED)
    } else if report.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `af ledger publish`.
pub fn publish_command(
    data: &Path,
    out: &Path,
    chain: &super::chain::ChainArgs,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let store = open_for_read(data)?;
    let key_path = super::data_dir::key_path(data);
    let own = if key_path.exists() { Some(af::ledger::LedgerKey::load(&key_path)?) } else { None };
    let mut line = ProgressLine::new();
    let report = af::http::publish::publish(&store, own.as_ref(), out, &mut |r| {
        line.update(|| format!("publishing: {} blocks, {} bundles written", r.blocks, r.bundles_written));
    })?;
    line.finish();
    // The pages are folded from the logs just published: replayed from the same store.
    let replayed = replay_store(&store, data, false, &mut |_, _, _| {})?;
    let own = super::data_dir::own_state(data, &store)?;
    let from_chain = super::chain::read_for_pages(chain, own.as_ref().map(|(_, state)| state))?.unwrap_or_default();
    let pages_written = af::http::publish::publish_pages(&replayed, &from_chain, out)?;
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["pages"] = serde_json::json!(af::http::pages::PAGES.map(|(name, _)| name));
        value["pages_written"] = serde_json::json!(pages_written);
        print_json(&value)?;
    } else {
        outln!(
            "published {} chain(s), {} blocks to {}: {} bundles written ({:.1} MiB), {} unchanged; pages {}",
            report.chains,
            report.blocks,
            out.display(),
            report.bundles_written,
            report.bytes_written as f64 / 1048576.0,
            report.bundles_unchanged,
            af::http::pages::PAGES.map(|(name, _)| name).join(", ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Binds the node's HTTP API, writes `DATA/http.addr`, and serves until `stop`.
pub async fn start(
    address: SocketAddr,
    data: &Path,
    log: Arc<OwnLog>,
    feeds: server::Feeds,
    metrics: Arc<af::metrics::Metrics>,
    budget: Arc<af::budget::MemoryBudget>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<AddressFile> {
    let listener =
        tokio::net::TcpListener::bind(address).await.with_context(|| format!("binding the HTTP API to {address}"))?;
    let bound = listener.local_addr()?;
    let url = format!("http://{bound}/");
    let file = AddressFile(data.join(ADDRESS_FILE));
    std::fs::write(&file.0, format!("{url}\n")).context("writing the HTTP address file")?;
    tracing::info!(event = "http", url = %url, "HTTP API, metrics and live page at {url}");
    let limits = HttpLimits::default();
    let ratio_params = af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    let router = server::router(log, feeds, ratio_params, metrics, budget, af::clock::unix_ms, limits.clone());
    tokio::spawn(async move {
        if let Err(error) = server::serve(listener, router, &limits, stop).await {
            tracing::error!(event = "http_stopped", error = %error, "the HTTP API stopped");
        }
    });
    Ok(file)
}

/// Removes the address file when the node stops, so no reader is sent to a dead port.
pub struct AddressFile(PathBuf);

impl Drop for AddressFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Replays the store in `data` from genesis, re-verifying, re-scoring and re-deriving
/// everything. With `use_snapshot`, a chain's fold from `DIR/replay-snapshot.bin` is reused
/// when the freshly verified chain reaches exactly its recorded tip (a snapshot that
/// cannot be used is reported, then ignored), and the new folds are saved. The one replay
/// behind `af audit`, `af transcripts` and `af weights show` (the last two never use a
/// snapshot: a cache never stands in for a check).
pub fn replay_store(
    store: &Store,
    data: &Path,
    use_snapshot: bool,
    progress: af::replay::Progress<'_>,
) -> anyhow::Result<af::replay::Replay> {
    let snapshot = if use_snapshot {
        af::replay::load_snapshot(data).unwrap_or_else(|error| {
            eprintln!("af: {error}; replaying from genesis");
            None
        })
    } else {
        None
    };
    let snapshot = snapshot.map(|s| (s, af::replay::FoldSource::Untrusted));
    let replayed = af::replay::replay(
        store,
        &af::envs::registry(),
        snapshot,
        &af::evaluation::ratio::DEFAULT_RATIO_PARAMS,
        progress,
    )?;
    if use_snapshot {
        // A read-only copy has nowhere to keep a snapshot: the next run replays from genesis.
        if let Err(error) = af::replay::save_snapshot(data, &replayed.folds) {
            eprintln!("af: could not save the replay snapshot (the next run replays from genesis): {error}");
        }
    }
    Ok(replayed)
}

/// Opens the store in `data` and replays it (see [`replay_store`]).
pub fn replay_dir(data: &Path) -> anyhow::Result<(ReadStore, af::replay::Replay)> {
    let store = open_for_read(data)?;
    let replayed = replay_store(&store, data, false, &mut |_, _, _| {})?;
    Ok((store, replayed))
}
