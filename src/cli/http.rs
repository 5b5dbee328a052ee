//! `af mirror`, `af ledger publish`, the `--http` listener of `af validate` and
//! `af node`, and how read commands reach a store that a running node holds locked:
//! through that node's HTTP API, mirrored (every block verified) into a temporary store.

use super::{print_json, ProgressLine, EXIT_CHECK_FAILED};
use crate::outln;
use af::bytes::ValidatorKey;
use af::http::mirror::{self, MirrorOptions, MirrorReport};
use af::http::read_store::{self, ReadError, ReadStore};
use af::ledger::Store;
use anyhow::Context;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// Opens `data`'s store for reading (`af::http::read_store::open_for_read`), saying on
/// stderr what a reader should know and showing the mirror's progress.
pub fn open_for_read(data: &Path) -> Result<ReadStore, ReadError> {
    let mut line = ProgressLine::new();
    let store = read_store::open_for_read(
        data,
        &mut |note| eprintln!("af: {}", super::terminal_safe(note)),
        &mut |validator, held, size| line.mirroring(validator, held, size),
    );
    line.finish();
    store
}

/// Runs `read` on `data`'s store beside its page-checksum pass
/// (`af::http::read_store::read_beside_page_check`), showing the mirror's progress. Until
/// the pass ends a damaged page can make the store engine panic: that is caught and
/// named, so its message is kept off the terminal meanwhile.
pub fn read_beside_page_check<T>(data: &Path, read: impl FnOnce(&ReadStore) -> T) -> Result<(ReadStore, T), ReadError> {
    let mut line = ProgressLine::new();
    let out = super::with_quiet_panics(|| {
        read_store::read_beside_page_check(
            data,
            &mut |note| eprintln!("af: {}", super::terminal_safe(note)),
            &mut |validator, held, size| line.mirroring(validator, held, size),
            read,
        )
    });
    line.finish();
    out
}

fn run_mirror(store: Arc<Store>, url: &str, options: MirrorOptions) -> anyhow::Result<MirrorReport> {
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let mut line = ProgressLine::new();
    let mut progress = move |validator: &ValidatorKey, held: u64, size: u64| line.mirroring(validator, held, size);
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
    let report = match run_mirror(store, from, MirrorOptions { validator, total_timeout, ..MirrorOptions::default() }) {
        Ok(report) => report,
        // The server's own answer refused (its log list, say): a check that failed, exit 3
        // as for a refused tip or bundle, not a server that could not be reached.
        Err(error) if error.downcast_ref::<mirror::MirrorError>().is_some_and(mirror::MirrorError::is_refusal) => {
            eprintln!("af mirror: {}", super::terminal_safe(&format!("{error:#}")));
            return Ok(ExitCode::from(EXIT_CHECK_FAILED));
        }
        Err(error) => return Err(error),
    };
    report.write_evidence(data).with_context(|| format!("writing evidence under {}", data.display()))?;
    if json {
        print_json(&report)?;
    } else {
        for line in report.lines(data) {
            outln!("{line}");
        }
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
    out: &str,
    chain: &super::chain::ChainArgs,
    repair: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let site = af::http::archive::Site::open(out)?;
    let store = open_for_read(data)?;
    let own = super::data_dir::own_key(data)?;
    let mut line = ProgressLine::new();
    let report = af::http::publish::publish_with(&store, own.as_ref(), &site, repair, &mut |r| {
        line.update(|| format!("publishing: {} blocks, {} bundles written", r.blocks, r.bundles_written));
    })?;
    line.finish();
    // The pages are folded from the logs just published: replayed from the same store.
    let replayed = replay_store(&store, data, false, &af::envs::registry(), &mut |_, _, _| {})?;
    let own = af::validator::state::own_state(data, &store)?;
    let from_chain = super::chain::read_for_pages(chain, own.as_ref().map(|(_, state)| state))?.unwrap_or_default();
    let pages_written = af::http::publish::publish_pages(&replayed, &from_chain, &site)?;
    let miner_pages_written = af::http::publish::publish_miner_entries(&replayed, &store, &site, repair)?;
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["pages"] = serde_json::json!(af::http::pages::PAGES.map(|(name, _)| name));
        value["pages_written"] = serde_json::json!(pages_written);
        value["miner_pages_written"] = serde_json::json!(miner_pages_written);
        print_json(&value)?;
    } else {
        outln!("{}", report.summary(&site));
    }
    Ok(ExitCode::SUCCESS)
}

/// Replays the store in `data` (`af::replay::kept_file::replay_kept`), saying on stderr
/// why a kept replay was not used or kept.
pub fn replay_store(
    store: &Store,
    data: &Path,
    use_snapshot: bool,
    registry: &af::envs::Registry,
    progress: af::replay::Progress<'_>,
) -> anyhow::Result<af::replay::Replay> {
    let note = &mut |note: &str| eprintln!("af: {}", super::terminal_safe(note));
    Ok(af::replay::kept_file::replay_kept(store, data, use_snapshot, registry, progress, note)?)
}

/// Opens the store in `data` and replays it (see [`replay_store`]).
pub fn replay_dir(data: &Path) -> anyhow::Result<(ReadStore, af::replay::Replay)> {
    let store = open_for_read(data)?;
    let replayed = replay_store(&store, data, false, &af::envs::registry(), &mut |_, _, _| {})?;
    Ok((store, replayed))
}
