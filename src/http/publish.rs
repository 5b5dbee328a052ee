//! `af ledger publish`: writes a store's chains as the static layout of
//! ledger-spec/11-http.md, so any static web server or object store serves a log that
//! `af mirror` reads exactly as it reads a running node.
//!
//! Files are written atomically (a temporary file, then a rename) and in an order that
//! keeps the site consistent for a reader at every moment: the bundles first, then each
//! chain's signed tip, then the log list. A full bundle already on disk with the same
//! bytes is left alone, so publishing again costs only the new blocks' bundles.

use super::archive::Site;
use super::layout::{self, LogList, LogSummary, LOG_LIST_FORMAT};
use crate::bytes::ValidatorKey;
use crate::ledger::block::Tip;
use crate::ledger::checkpoint::Checkpoint;
use crate::ledger::proof::{signed_headers, InclusionError};
use crate::ledger::store::{Store, StoreError};
use crate::ledger::LedgerKey;
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Headers(#[from] InclusionError),
    #[error("{0}")]
    Archive(#[from] super::archive::ArchiveError),
    #[error("validator {validator} is missing block {height}")]
    Missing { validator: ValidatorKey, height: u64 },
    #[error("{0}: no page was written short")]
    Replay(#[from] crate::replay::ReplayError),
    #[error("{0}")]
    Entries(#[from] crate::replay::transcript_entries::EntriesError),
    #[error("{0}: no page was written short")]
    Page(#[from] super::pages::PageError),
    #[error("reading the kept folds: {0}")]
    Folds(String),
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PublishReport {
    pub chains: u64,
    pub blocks: u64,
    pub bundles_written: u64,
    pub bundles_unchanged: u64,
    pub bytes_written: u64,
    /// Blocks the site already held (its tips named them), not read again.
    pub blocks_already_published: u64,
    /// Folds at checkpoint heights (the data directory's `folds/`) written.
    pub folds_written: u64,
    /// Chains the site holds further than this store, the same history as far as ours
    /// goes: left as they are, never moved back. (validator, our size, the site's size).
    pub chains_behind: Vec<(ValidatorKey, u64, u64)>,
    /// With `repair`: bundles below the published tips that did not hold our blocks
    /// (damaged, deleted), written again from the store's verified blocks.
    pub bundles_repaired: u64,
}

impl PublishReport {
    /// The report in one line, for a publish to `site`.
    pub fn summary(&self, site: &Site) -> String {
        let behind: Vec<String> = self
            .chains_behind
            .iter()
            .map(|(v, ours, theirs)| format!("{v}: {ours} blocks here, {theirs} there"))
            .collect();
        format!(
            "published {} chain(s), {} blocks to {site}: {} bundles written ({:.1} MiB, {} of them repaired), {} unchanged ({} blocks already published); pages {}{}",
            self.chains,
            self.blocks,
            self.bundles_written,
            self.bytes_written as f64 / 1048576.0,
            self.bundles_repaired,
            self.bundles_unchanged,
            self.blocks_already_published,
            super::pages::PAGES.map(|(name, _)| name).join(", "),
            if behind.is_empty() {
                String::new()
            } else {
                format!("; left as they are, the site holding more of the same history: {}", behind.join("; "))
            }
        )
    }
}

/// Publishes every chain of `store` under `site`. `own` (the key of the validator whose
/// data directory this is) adds that chain's signed checkpoint. Incremental: a chain's
/// bundles that the site's tip already covers (the tip names a block this store holds
/// with the same hash) are neither read nor written again, as bundles are immutable
/// (ledger-spec/11), so a log published every few minutes costs only its new blocks.
pub fn publish(
    store: &Store,
    own: Option<&LedgerKey>,
    site: &Site,
    progress: &mut dyn FnMut(&PublishReport),
) -> Result<PublishReport, PublishError> {
    publish_with(store, own, site, false, progress)
}

/// [`publish`]; with `repair`, every bundle is read back and compared, those the site's
/// tips already covered too, and each that does not hold exactly our blocks is written
/// again (`af ledger publish --repair`): a site whose bundle was damaged or deleted below
/// its tip is whole again, where a plain publish would skip it as published.
pub fn publish_with(
    store: &Store,
    own: Option<&LedgerKey>,
    site: &Site,
    repair: bool,
    progress: &mut dyn FnMut(&PublishReport),
) -> Result<PublishReport, PublishError> {
    let mut report = PublishReport::default();
    let mut tips = store.tips()?;
    for (validator, tip) in tips.iter_mut() {
        let size = tip.height + 1;
        // An older copy never moves the site's tip back: a site that holds our tip block
        // and more of the same chain keeps its own (the log list names it).
        if let Some(theirs) = site_ahead(store, site, validator, tip)? {
            tracing::warn!(
                event = "publish_behind",
                validator = %validator,
                "the site holds {} blocks of {validator}, this store {size}: left as it is",
                theirs.height + 1
            );
            report.chains_behind.push((*validator, size, theirs.height + 1));
            *tip = theirs;
            continue;
        }
        let published = if repair { 0 } else { published_size(store, site, validator, tip)? };
        let covered = if repair { published_size(store, site, validator, tip)? } else { 0 };
        let already: std::collections::BTreeSet<(u64, u64)> = layout::bundles_for(0, published).into_iter().collect();
        let pruned_below = store.pruned_below(validator)?;
        for (n, width) in layout::bundles_for(0, size) {
            if already.contains(&(n, width)) {
                report.bundles_unchanged += 1;
                report.blocks += width;
                report.blocks_already_published += width;
                continue;
            }
            let mut bytes = Vec::new();
            let (start, end) = (n * layout::TILE_WIDTH, n * layout::TILE_WIDTH + width - 1);
            if end < pruned_below {
                // Pruned bodies (ledger-spec/05) come back from the store's archive, the
                // bundle at once, each checked against its kept record: a pruned store
                // seeds a new archive too.
                for (_, block) in store.fetch_pruned_range(validator, start, end)? {
                    layout::push_record(&mut bytes, &block);
                }
            } else {
                for height in start..=end {
                    let block = store
                        .block_bytes(validator, height)?
                        .ok_or(PublishError::Missing { validator: *validator, height })?;
                    layout::push_record(&mut bytes, &block);
                }
            }
            if site.write_if_changed(&layout::bundle_path(validator, n, width), &bytes)? {
                report.bundles_written += 1;
                report.bytes_written += bytes.len() as u64;
                if (n + 1) * layout::TILE_WIDTH <= covered {
                    report.bundles_repaired += 1;
                }
            } else {
                report.bundles_unchanged += 1;
            }
            report.blocks += width;
            progress(&report);
        }
        let signed = signed_headers(store, validator, tip.height, tip.height)?.remove(0);
        site.write_if_changed(&layout::tip_path(validator), &to_json(&signed))?;
        if let Some(key) = own.filter(|k| k.validator() == *validator) {
            let note = Checkpoint::of_tip(*validator, tip).sign(key);
            site.write_if_changed(&layout::checkpoint_path(validator), note.as_bytes())?;
        }
        report.folds_written += publish_folds(store, site, validator)?;
        report.chains += 1;
    }
    let list = LogList {
        format: LOG_LIST_FORMAT.into(),
        own: own.map(|k| k.validator()),
        logs: tips.iter().map(|(v, t)| LogSummary { validator: *v, size: t.height + 1, tip_hash: t.hash }).collect(),
    };
    site.write_if_changed(&layout::log_list_path(), &to_json(&list))?;
    Ok(report)
}

/// Copies the folds a validator's replay kept of `validator`'s log (beside `store`, in
/// `folds/`, already in the site's layout) to the site, so an auditor can start from a
/// checkpoint with the archive alone. Returns how many were written.
fn publish_folds(store: &Store, site: &Site, validator: &ValidatorKey) -> Result<u64, PublishError> {
    use crate::replay::fold_checkpoints::{fold_file, fold_path, FOLDS_DIR, MAX_FOLD_BYTES};
    let Some(folds) = store.path().parent().map(|data| data.join(FOLDS_DIR)) else { return Ok(0) };
    let dir = fold_file(&folds, validator, 0);
    let Some(dir) = dir.parent().filter(|dir| dir.is_dir()) else { return Ok(0) };
    let mut written = 0;
    let read = |e: std::io::Error| PublishError::Folds(format!("{}: {e}", dir.display()));
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let entry = entry.map_err(read)?;
        // Files being written are `<height>.partial`: only whole ones have a number's name.
        let Some(height) = entry.file_name().to_str().and_then(|name| name.parse::<u64>().ok()) else { continue };
        let bytes = match std::fs::read(entry.path()) {
            Ok(bytes) if bytes.len() as u64 <= MAX_FOLD_BYTES => bytes,
            Ok(_) => continue,
            // Dropped since it was listed: a newer one replaced it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(read(e)),
        };
        if site.write_if_changed(&fold_path(validator, height), &bytes)? {
            written += 1;
        }
    }
    Ok(written)
}

/// The site's tip of `validator`'s chain when it is past `ours` and the site's bundle
/// holding our tip block holds that very block: the site has more of the same history.
fn site_ahead(store: &Store, site: &Site, validator: &ValidatorKey, ours: &Tip) -> Result<Option<Tip>, PublishError> {
    let Ok(Some(bytes)) = site.read(&layout::tip_path(validator), layout::MAX_TIP_BYTES) else { return Ok(None) };
    let Ok(signed) = serde_json::from_slice::<crate::ledger::proof::SignedHeader>(&bytes) else { return Ok(None) };
    let header = &signed.header;
    if header.validator != *validator
        || header.height <= ours.height
        || crate::ledger::block::check_header_rules(header).is_err()
        || crate::ledger::block::check_signature(header, &header.hash(), &signed.signature).is_err()
    {
        return Ok(None);
    }
    let at = ours.height / layout::TILE_WIDTH * layout::TILE_WIDTH;
    let theirs = super::bodies::read_bundles(site, validator, (at, ours.height), header.height + 1, None);
    let Some(block) = store.block_bytes(validator, ours.height)? else { return Ok(None) };
    let same = theirs.is_ok_and(|blocks| blocks.last().is_some_and(|(h, b)| *h == ours.height && *b == block));
    Ok(same.then(|| Tip { height: header.height, hash: header.hash(), time_ms: header.time_ms }))
}

/// How many blocks of `validator`'s chain the site holds, by its tip, written last: 0
/// unless that tip reads, is the validator's, and names a block `store` holds with the
/// same hash (a site of another history, or a damaged tip, is published whole again);
/// `tip` is the store's, read once by the caller.
fn published_size(store: &Store, site: &Site, validator: &ValidatorKey, tip: &Tip) -> Result<u64, PublishError> {
    let Ok(Some(bytes)) = site.read(&layout::tip_path(validator), layout::MAX_TIP_BYTES) else { return Ok(0) };
    let Ok(signed) = serde_json::from_slice::<crate::ledger::proof::SignedHeader>(&bytes) else { return Ok(0) };
    let height = signed.header.height;
    if signed.header.validator != *validator || tip.height < height {
        return Ok(0);
    }
    let held = signed_headers(store, validator, height, height)?;
    Ok(match held.first() {
        Some(ours) if ours.header.hash() == signed.header.hash() => height + 1,
        _ => 0,
    })
}

/// Writes the subnet's pages (`super::pages`) of `replay` at the site's root, beside
/// `af/v1/`, so their links to `af/v1/...` resolve there as on a node. Returns how many
/// files changed.
pub fn publish_pages(
    replay: &crate::replay::Replay,
    chain: &super::pages::FromChain,
    site: &Site,
) -> Result<u64, PublishError> {
    let mut written = 0;
    for (name, _) in super::pages::PAGES {
        let html = super::pages::render(name, replay, chain, super::pages::Paging::Whole)?;
        written += u64::from(site.write_if_changed(name, html.as_bytes())?);
    }
    Ok(written)
}

/// Writes every miner's transcript entries (ledger-spec/09) in pages of
/// `layout::MINER_PAGE_ENTRIES` at `layout::miner_entries_path`, for the explorer: a miner
/// finds its matches there and its browser checks every proof. Each entry's proof runs
/// to its own block, or to the committed tip where a commitment covers it, and a page
/// counts the entries through itself, so a page's bytes stop changing once its matches
/// are decided and its blocks committed: the pages of a log cost about what its
/// transcripts do, not its square. The miner's index (`layout::miner_matches_path`)
/// holds the whole count and each page's blake3; a page whose bytes hash as the index
/// read back says is neither read nor written again (`repair`: each page is read back
/// and compared instead, so a damaged one is rewritten). Then the explorer itself
/// (`explorer.html`, `explorer.js`) at the site's root. Returns how many files changed.
pub fn publish_miner_entries(
    replay: &crate::replay::Replay,
    store: &Store,
    site: &Site,
    repair: bool,
) -> Result<u64, PublishError> {
    use crate::replay::transcript_entries::{entries_page, Filter, Found, Reach};
    let mut written = 0;
    for hotkey in store.miner_hotkeys()? {
        let index_path = layout::miner_matches_path(&hotkey);
        let held_index = site.read(&index_path, MAX_MINER_INDEX_BYTES)?;
        let published = match repair {
            true => Vec::new(),
            false => held_index.as_deref().map(page_hashes).unwrap_or_default(),
        };
        let filter = Filter::default();
        let total = store.locate_miner_page(&hotkey, 0, 0)?.0 as usize;
        let mut matches: std::collections::HashMap<(String, String), (usize, usize)> = Default::default();
        let mut order: Vec<(String, String)> = Vec::new();
        let mut hashes = Vec::new();
        let mut page = 0;
        loop {
            let offset = page * layout::MINER_PAGE_ENTRIES;
            let body = entries_page(
                store,
                &replay.folds,
                (Found::Miner(&hotkey), &filter, Reach::OwnBlock),
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
            let hash = blake3::hash(&body).to_hex().to_string();
            let path = layout::miner_entries_path(&hotkey, page);
            match (repair, published.get(page) == Some(&hash)) {
                (false, true) => {}
                (false, false) => {
                    site.write(&path, &body)?;
                    written += 1;
                }
                (true, _) => written += u64::from(site.write_if_changed(&path, &body)?),
            }
            hashes.push(hash);
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
        let body = serde_json::to_vec(&serde_json::json!({ "matches": index, "total": total, "pages": hashes }))
            .expect("JSON");
        if held_index.as_deref() != Some(&body[..]) {
            site.write(&index_path, &body)?;
            written += 1;
        }
    }
    for (name, bytes) in [("explorer.html", super::EXPLORER_HTML), ("explorer.js", super::EXPLORER_JS)] {
        written += u64::from(site.write_if_changed(name, bytes.as_bytes())?);
    }
    Ok(written)
}

/// Most bytes of a miner's index read back: its pages' hashes (about 70 bytes a page of
/// 20 entries) and its matches.
const MAX_MINER_INDEX_BYTES: u64 = 64 << 20;

/// The page hashes a miner's index read back names (none: an index of another shape,
/// or none, and every page is written).
fn page_hashes(index: &[u8]) -> Vec<String> {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(index).ok();
    let pages = parsed.as_ref().and_then(|v| v["pages"].as_array());
    pages.into_iter().flatten().map(|h| h.as_str().unwrap_or_default().to_string()).collect()
}

fn to_json(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("layout documents serialize")
}
