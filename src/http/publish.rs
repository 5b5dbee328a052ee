//! `af ledger publish`: writes a store's chains as the static layout of
//! ledger-spec/11-http.md, so any static web server or object store serves a log that
//! `af mirror` reads exactly as it reads a running node.
//!
//! Files are written atomically (a temporary file, then a rename) and in an order that
//! keeps the site consistent for a reader at every moment: the bundles first, then each
//! chain's signed tip, then the log list. A full bundle already on disk with the same
//! bytes is left alone, so publishing again costs only the new blocks' bundles.

use super::layout::{self, LogList, LogSummary, LOG_LIST_FORMAT};
use crate::bytes::ValidatorKey;
use crate::ledger::checkpoint::Checkpoint;
use crate::ledger::proof::{signed_headers, InclusionError};
use crate::ledger::store::{Store, StoreError};
use crate::ledger::LedgerKey;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Headers(#[from] InclusionError),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("validator {validator} is missing block {height}")]
    Missing { validator: ValidatorKey, height: u64 },
    #[error("{0}: no page was written short")]
    Replay(#[from] crate::replay::ReplayError),
    #[error("{0}")]
    Entries(#[from] crate::replay::entries::EntriesError),
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PublishReport {
    pub chains: u64,
    pub blocks: u64,
    pub bundles_written: u64,
    pub bundles_unchanged: u64,
    pub bytes_written: u64,
}

/// Publishes every chain of `store` under `site`. `own` (the key of the validator whose
/// data directory this is) adds that chain's signed checkpoint.
pub fn publish(
    store: &Store,
    own: Option<&LedgerKey>,
    site: &Path,
    progress: &mut dyn FnMut(&PublishReport),
) -> Result<PublishReport, PublishError> {
    let mut report = PublishReport::default();
    let tips = store.tips()?;
    for (validator, tip) in &tips {
        let size = tip.height + 1;
        for (n, width) in layout::bundles_for(0, size) {
            let mut bytes = Vec::new();
            for height in n * layout::TILE_WIDTH..n * layout::TILE_WIDTH + width {
                let block = store
                    .block_bytes(validator, height)?
                    .ok_or(PublishError::Missing { validator: *validator, height })?;
                layout::push_record(&mut bytes, &block);
            }
            if write_if_changed(&site.join(layout::bundle_path(validator, n, width)), &bytes)? {
                report.bundles_written += 1;
                report.bytes_written += bytes.len() as u64;
            } else {
                report.bundles_unchanged += 1;
            }
            report.blocks += width;
            progress(&report);
        }
        let signed = signed_headers(store, validator, tip.height, tip.height)?.remove(0);
        write_if_changed(&site.join(layout::tip_path(validator)), &to_json(&signed))?;
        if let Some(key) = own.filter(|k| k.validator() == *validator) {
            let note = Checkpoint::of_tip(*validator, tip).sign(key);
            write_if_changed(&site.join(layout::checkpoint_path(validator)), note.as_bytes())?;
        }
        report.chains += 1;
    }
    let list = LogList {
        format: LOG_LIST_FORMAT.into(),
        own: own.map(|k| k.validator()),
        logs: tips.iter().map(|(v, t)| LogSummary { validator: *v, size: t.height + 1, tip_hash: t.hash }).collect(),
    };
    write_if_changed(&site.join(layout::log_list_path()), &to_json(&list))?;
    Ok(report)
}

/// Writes the subnet's pages (`super::pages`) of `replay` at the site's root, beside
/// `af/v1/`, so their links to `af/v1/...` resolve there as on a node. Returns how many
/// files changed.
pub fn publish_pages(
    replay: &crate::replay::Replay,
    chain: &super::pages::FromChain,
    site: &Path,
) -> Result<u64, PublishError> {
    let mut written = 0;
    for (name, _) in super::pages::PAGES {
        let html =
            super::pages::render(name, replay, chain, super::pages::Paging::Whole).expect("every listed page renders");
        // A page drawn while a read of the replay's file failed may be short a match.
        replay.check_whole()?;
        written += u64::from(write_if_changed(&site.join(name), html.as_bytes())?);
    }
    Ok(written)
}

/// Writes every miner's transcript entries (ledger-spec/09) in pages of
/// `layout::MINER_PAGE_ENTRIES` at `layout::miner_entries_path`, for the explorer: a miner
/// finds its matches there and its browser checks every proof. Each proof runs to the
/// tip, so a page changes when its chain grows. Then the explorer itself
/// (`explorer.html`, `explorer.js`) at the site's root. Returns how many files changed.
pub fn publish_miner_entries(replay: &crate::replay::Replay, store: &Store, site: &Path) -> Result<u64, PublishError> {
    use crate::replay::entries::{entries_page, Filter, Found};
    let mut written = 0;
    for hotkey in store.miner_hotkeys()? {
        let filter = Filter::default();
        let total = store.locate_miner_page(&hotkey, 0, 0)?.0 as usize;
        let mut matches: std::collections::HashMap<(String, String), (usize, usize)> = Default::default();
        let mut order: Vec<(String, String)> = Vec::new();
        let mut page = 0;
        loop {
            let offset = page * layout::MINER_PAGE_ENTRIES;
            let body = entries_page(
                store,
                &replay.folds,
                (Found::Miner(&hotkey), &filter),
                (offset, layout::MINER_PAGE_ENTRIES),
                usize::MAX,
                &mut |_| true,
            )?;
            // Which matches the page holds, for the miner's match index below.
            let parsed: serde_json::Value = serde_json::from_slice(&body).expect("a page af wrote is JSON");
            for entry in parsed["entries"].as_array().into_iter().flatten() {
                let key = (entry["validator"].to_string(), entry["transcript"]["match_id"].to_string());
                match matches.entry(key) {
                    std::collections::hash_map::Entry::Occupied(mut pages) => pages.get_mut().1 = page,
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        order.push(slot.key().clone());
                        slot.insert((page, page));
                    }
                }
            }
            written += u64::from(write_if_changed(&site.join(layout::miner_entries_path(&hotkey, page)), &body)?);
            page += 1;
            if page * layout::MINER_PAGE_ENTRIES >= total {
                break;
            }
        }
        // The miner's matches and the pages holding each: a hint for the explorer's
        // links to one match (every entry it shows is still checked on its own).
        let index: Vec<serde_json::Value> = order
            .iter()
            .map(|key| {
                let (first, last) = matches[key];
                let value = |text: &str| serde_json::from_str::<serde_json::Value>(text).expect("written above");
                serde_json::json!({ "validator": value(&key.0), "match_id": value(&key.1), "pages": [first, last] })
            })
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({ "matches": index })).expect("JSON");
        written += u64::from(write_if_changed(&site.join(layout::miner_matches_path(&hotkey)), &body)?);
    }
    replay.check_whole()?;
    for (name, bytes) in [("explorer.html", super::EXPLORER_HTML), ("explorer.js", super::EXPLORER_JS)] {
        written += u64::from(write_if_changed(&site.join(name), bytes.as_bytes())?);
    }
    Ok(written)
}

fn to_json(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("layout documents serialize")
}

/// Writes `bytes` at `path` unless it already holds exactly them; `true` if written.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool, PublishError> {
    let err = |source| PublishError::Write { path: path.to_path_buf(), source };
    if std::fs::read(path).is_ok_and(|held| held == bytes) {
        return Ok(false);
    }
    let parent = path.parent().expect("layout paths have a parent");
    std::fs::create_dir_all(parent).map_err(err)?;
    let temporary = path.with_extension("tmp-af");
    std::fs::write(&temporary, bytes).map_err(err)?;
    std::fs::rename(&temporary, path).map_err(err)?;
    Ok(true)
}
