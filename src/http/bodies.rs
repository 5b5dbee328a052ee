//! Pruned bodies fetched back from a log's archive (ledger-spec/05, "Pruned bodies"):
//! the [`BodySource`] a store reads through, so a replay from genesis, a proof or a
//! transcript of an old block works on a store that keeps only its headers and leaf
//! hashes. It reads ledger-spec/11's bundles from the folder or object store the store
//! recorded when it pruned; the store takes a body only if it is the kept block, so the
//! archive is trusted for nothing but availability.

use super::archive::Site;
use super::layout::{self, BundleReader, MAX_TIP_BYTES, TILE_WIDTH};
use crate::bytes::ValidatorKey;
use crate::ledger::proof::SignedHeader;
use crate::ledger::store::BodySource;
use std::collections::BTreeMap;
use std::sync::Mutex;

// A replay's fetch of pruned bodies is one bundle of the archive.
const _: () = assert!(crate::ledger::store::PRUNED_FETCH_BLOCKS == TILE_WIDTH);

/// Opens each archive once, at its first need, and reads bundles from it.
#[derive(Default)]
pub struct ArchiveBodies {
    sites: Mutex<BTreeMap<String, Site>>,
    /// The bundles read last, so a command that reads a pruned chain block by block
    /// fetches each bundle once, not once per block; bounded by bytes. Only saves
    /// transfers: the store checks every body it takes against its kept record.
    recent: Mutex<RecentBundles>,
    /// Each chain's size in each archive, by its tip as last read: bundles below it stay
    /// as they are (immutable), so the tip is read again only for a height past it, not
    /// once per bundle of a replay. A hint only: every body is checked by the store.
    sizes: Mutex<BTreeMap<(String, ValidatorKey), u64>>,
    /// Tips read, for the counts a command reports.
    n_tip_reads: std::sync::atomic::AtomicU64,
}

impl ArchiveBodies {
    /// Requests made so far: (bundles read, tips read).
    pub fn requests(&self) -> (u64, u64) {
        let bundles = self.recent.lock().unwrap_or_else(|e| e.into_inner()).n_fetched;
        (bundles, self.n_tip_reads.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn site(&self, archive: &str) -> Result<Site, String> {
        let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(site) = sites.get(archive) {
            return Ok(site.clone());
        }
        // A read makes nothing: a folder that is gone is an absent archive, not a new one.
        if !archive.contains("://") && !std::path::Path::new(archive).is_dir() {
            return Err(format!("the archive folder {archive} is not there"));
        }
        let site = Site::open(archive).map_err(|e| e.to_string())?;
        sites.insert(archive.to_string(), site.clone());
        Ok(site)
    }
}

impl BodySource for ArchiveBodies {
    fn fetch(
        &self,
        archive: &str,
        validator: &ValidatorKey,
        from: u64,
        to: u64,
    ) -> Result<Vec<(u64, Vec<u8>)>, String> {
        let site = self.site(archive)?;
        // The tip says which bundles exist (the last may be partial); the blocks
        // themselves are checked by the store against what it kept.
        let key = (archive.to_string(), *validator);
        let known = self.sizes.lock().unwrap_or_else(|e| e.into_inner()).get(&key).copied();
        let size = match known.filter(|size| to < *size) {
            Some(size) => size,
            None => {
                self.n_tip_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let size = read_size(&site, validator)?;
                self.sizes.lock().unwrap_or_else(|e| e.into_inner()).insert(key, size);
                size
            }
        };
        let read = read_bundles(&site, validator, (from, to), size, Some((archive, &self.recent)));
        if read.is_err() {
            // The next fetch reads the tip again (the archive may have been rewritten).
            self.sizes.lock().unwrap_or_else(|e| e.into_inner()).remove(&(archive.to_string(), *validator));
        }
        read
    }
}

/// Blocks `from..=to` of `validator` from the bundles of a chain of `size` blocks, each
/// bundle taken from `recent` (the archive's name, and the cache) where it is there.
pub(super) fn read_bundles(
    site: &Site,
    validator: &ValidatorKey,
    (from, to): (u64, u64),
    size: u64,
    recent: Option<(&str, &Mutex<RecentBundles>)>,
) -> Result<Vec<(u64, Vec<u8>)>, String> {
    let mut out = Vec::new();
    for (n, width) in layout::bundles_for(from, size).into_iter().take_while(|(n, _)| n * TILE_WIDTH <= to) {
        let key = recent.map(|(archive, _)| (archive.to_string(), *validator, n, width));
        let cached = recent
            .zip(key.as_ref())
            .and_then(|((_, cache), key)| cache.lock().unwrap_or_else(|e| e.into_inner()).get(key));
        let blocks = match cached {
            Some(blocks) => blocks,
            None => {
                let blocks = std::sync::Arc::new(read_bundle(site, validator, n, width)?);
                if let (Some((_, cache)), Some(key)) = (recent, key) {
                    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
                    cache.n_fetched += 1;
                    cache.put(key, blocks.clone());
                }
                blocks
            }
        };
        for (height, block) in (n * TILE_WIDTH..).zip(blocks.iter()) {
            if (from..=to).contains(&height) {
                out.push((height, block.clone()));
            }
        }
    }
    Ok(out)
}

/// The blocks of bundle `n` (of `width` blocks) of `validator`'s chain, read whole.
fn read_bundle(site: &Site, validator: &ValidatorKey, n: u64, width: u64) -> Result<Vec<Vec<u8>>, String> {
    let path = layout::bundle_path(validator, n, width);
    let mut reader = BundleReader::new(width).map_err(|e| e.to_string())?;
    let bytes = site
        .read(&path, reader.max_bytes())
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} is not there", site.url_of(&path)))?;
    let blocks = reader.push(&bytes).map_err(|e| format!("{}: {e}", site.url_of(&path)))?;
    reader.finish().map_err(|e| format!("{}: {e}", site.url_of(&path)))?;
    Ok(blocks)
}

/// Most bytes of bundles [`RecentBundles`] holds: a few full bundles of ordinary blocks.
const RECENT_BUNDLE_BYTES: usize = 32 * 1024 * 1024;

/// (archive, validator, bundle number, width): one bundle of one archive.
type BundleKey = (String, ValidatorKey, u64, u64);

/// A bundle's blocks, shared with the readers it was handed to.
type BundleBlocks = std::sync::Arc<Vec<Vec<u8>>>;

/// The bundles read last, least recently used first, within [`RECENT_BUNDLE_BYTES`] (a
/// bundle bigger than that is not kept).
#[derive(Default)]
pub(super) struct RecentBundles {
    entries: std::collections::VecDeque<(BundleKey, BundleBlocks, usize)>,
    n_bytes: usize,
    /// Bundles read from their archives through this cache (misses).
    n_fetched: u64,
}

impl RecentBundles {
    fn get(&mut self, key: &BundleKey) -> Option<BundleBlocks> {
        let at = self.entries.iter().position(|(k, _, _)| k == key)?;
        let entry = self.entries.remove(at).expect("found above");
        let blocks = entry.1.clone();
        self.entries.push_back(entry);
        Some(blocks)
    }

    fn put(&mut self, key: BundleKey, blocks: BundleBlocks) {
        let n_bytes: usize = blocks.iter().map(Vec::len).sum();
        if n_bytes > RECENT_BUNDLE_BYTES {
            return;
        }
        while self.n_bytes + n_bytes > RECENT_BUNDLE_BYTES {
            let Some((_, _, gone)) = self.entries.pop_front() else { break };
            self.n_bytes -= gone;
        }
        self.n_bytes += n_bytes;
        self.entries.push_back((key, blocks, n_bytes));
    }
}

/// A chain's size in the archive `site`, by its tip.
fn read_size(site: &Site, validator: &ValidatorKey) -> Result<u64, String> {
    let tip_path = layout::tip_path(validator);
    let tip = site
        .read(&tip_path, MAX_TIP_BYTES)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} is not there", site.url_of(&tip_path)))?;
    let tip: SignedHeader = serde_json::from_slice(&tip).map_err(|e| format!("the archive's tip: {e}"))?;
    Ok(tip.header.height.saturating_add(1))
}
