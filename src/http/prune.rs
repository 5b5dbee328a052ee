//! What may be pruned (ledger-spec/05, "Pruned bodies"): the blocks of other validators'
//! logs older than a window, and only those an archive already holds, so each pruned
//! body can be fetched back (`http::bodies`). The archive's hold is proven by its signed
//! tip naming a block this store holds with the same hash: the chain below it is then
//! the archive's too, by the hash links; and each bundle a prune relies on is read and
//! compared with our blocks first, since a tip says nothing of a bundle deleted or
//! changed since. Our own log is never pruned.

use super::archive::Site;
use super::layout::{self, MAX_TIP_BYTES, TILE_WIDTH};
use crate::bytes::ValidatorKey;
use crate::ledger::block::{check_header_rules, check_signature};
use crate::ledger::proof::SignedHeader;
use crate::ledger::store::{Pruned, Store, StoreError, PRUNED_GROUP_BLOCKS};
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the window to keep must be at least one day (keep_days {0})")]
    Window(u32),
}

/// Why a chain was left whole, or how far it was pruned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainPrune {
    pub validator: ValidatorKey,
    /// Heights below this are pruned (before and by this run).
    pub below: u64,
    /// What this run pruned, if anything.
    pub pruned: Option<Pruned>,
    /// Why the chain was not pruned further, in words.
    pub held_back_by: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    pub archive: String,
    pub chains: Vec<ChainPrune>,
    pub n_blocks: u64,
    pub n_events: u64,
    /// Block bytes pruned, and what their kept records take instead.
    pub n_bytes: u64,
    pub n_record_bytes: u64,
}

impl PruneReport {
    /// `af ledger prune`'s report in words.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .chains
            .iter()
            .map(|c| {
                let now = c.pruned.as_ref().map_or(0, |p| p.n_blocks);
                format!(
                    "validator {}: pruned below height {} ({now} now); not further: {}",
                    c.validator, c.below, c.held_back_by
                )
            })
            .collect();
        out.push(format!(
            "pruned {} blocks ({} events): {:.1} MiB of blocks now kept as {:.1} MiB of headers and leaf hashes; bodies in {}",
            self.n_blocks,
            self.n_events,
            self.n_bytes as f64 / 1048576.0,
            self.n_record_bytes as f64 / 1048576.0,
            self.archive
        ));
        out
    }
}

/// Prunes every chain of `store` but `own` up to the earliest of: `keep_days` before
/// `now_ms` (by its blocks' times), the end of the last full bundle `site` holds of it,
/// its tip (never pruned), in whole groups. Progress after each durable step.
pub fn prune_to_archive(
    store: &Store,
    site: &Site,
    own: Option<ValidatorKey>,
    keep_days: u32,
    now_ms: u64,
    progress: &mut dyn FnMut(&Pruned),
) -> Result<PruneReport, PruneError> {
    if keep_days == 0 {
        return Err(PruneError::Window(keep_days));
    }
    let cutoff_ms = now_ms.saturating_sub(u64::from(keep_days) * 86_400_000);
    let mut report = PruneReport { archive: site.url_of("").trim_end_matches('/').to_string(), ..Default::default() };
    for (validator, tip) in store.tips()? {
        if Some(validator) == own {
            continue;
        }
        let from = store.pruned_below(&validator)?;
        // The window and the last block first: a chain with less than a whole group to
        // go past what is pruned costs no read of the archive.
        let window = first_at_or_after(store, &validator, from, tip.height, cutoff_ms)?;
        let local = window.min(tip.height);
        let (wanted, why) = if local < from.saturating_add(PRUNED_GROUP_BLOCKS) {
            (local, None)
        } else {
            let (archived, archive_why) = archived_below(store, site, &validator)?;
            // Each body goes only once the archive's bundle holding it was read and held
            // exactly our block: a tip names the chain below it, not that every bundle
            // of it is still there.
            let (checked, checked_why) = bundles_hold_ours(store, site, &validator, from, archived.min(local))?;
            match checked < archived {
                true => (checked.min(local), Some((checked, checked_why))),
                false => (archived.min(local), Some((archived, archive_why))),
            }
        };
        let mut held_back_by = match why {
            Some((archived, archive_why)) if archived < local => archive_why,
            _ if local == tip.height => "its last block is always kept".to_string(),
            _ => format!("blocks from height {window} are younger than {keep_days} days"),
        };
        let pruned = if wanted >= from.saturating_add(PRUNED_GROUP_BLOCKS) {
            Some(store.prune(&validator, wanted, &report.archive, progress)?)
        } else {
            None
        };
        if let Some(p) = &pruned {
            report.n_blocks += p.n_blocks;
            report.n_events += p.n_events;
            report.n_bytes += p.n_bytes;
            report.n_record_bytes += p.n_record_bytes;
        }
        // What is pruned now, which whole groups may leave short of what could go.
        let below = pruned.as_ref().map_or(from, |p| p.below);
        if below < wanted {
            held_back_by = format!(
                "{held_back_by}; up to height {wanted} could go, and only whole groups of {PRUNED_GROUP_BLOCKS} blocks are pruned"
            );
        }
        report.chains.push(ChainPrune { validator, below, pruned, held_back_by });
    }
    Ok(report)
}

/// The heights of `validator`'s chain the archive holds in full bundles (immutable, so
/// they stay), by its signed tip; with why it is not more.
fn archived_below(store: &Store, site: &Site, validator: &ValidatorKey) -> Result<(u64, String), StoreError> {
    let path = layout::tip_path(validator);
    let signed = match site.read(&path, MAX_TIP_BYTES) {
        Ok(Some(bytes)) => match serde_json::from_slice::<SignedHeader>(&bytes) {
            Ok(signed) => signed,
            Err(e) => return Ok((0, format!("the archive's tip does not read: {e}"))),
        },
        Ok(None) => return Ok((0, format!("the archive has no tip of it ({})", site.url_of(&path)))),
        Err(e) => return Ok((0, format!("the archive's tip could not be read: {e}"))),
    };
    let header = &signed.header;
    if header.validator != *validator
        || check_header_rules(header).is_err()
        || check_signature(header, &header.hash(), &signed.signature).is_err()
    {
        return Ok((0, "the archive's tip is not a block of this chain signed by its validator".into()));
    }
    match store.signed_headers(validator, header.height, header.height)?.first() {
        Some((ours, _)) if ours.hash() == header.hash() => {
            let full = (header.height + 1) / TILE_WIDTH * TILE_WIDTH;
            Ok((full, format!("the archive holds full bundles up to height {full}")))
        }
        Some(_) => Ok((0, format!("the archive's block at height {} is not ours", header.height))),
        None => Ok((0, format!("the archive's tip at height {} is past our copy", header.height))),
    }
}

/// How far, from `from` up to `below`, the archive's bundles hold exactly the blocks this
/// store holds: each bundle is read whole and compared block by block; the first one that
/// is missing, unreadable or different stops there, with why.
fn bundles_hold_ours(
    store: &Store,
    site: &Site,
    validator: &ValidatorKey,
    from: u64,
    below: u64,
) -> Result<(u64, String), StoreError> {
    let mut at = from / TILE_WIDTH * TILE_WIDTH;
    while at < below {
        let last = at + TILE_WIDTH - 1;
        let path = layout::bundle_path(validator, at / TILE_WIDTH, TILE_WIDTH);
        let stop = |why: String| Ok((at, format!("the archive's bundle {} {why}", site.url_of(&path))));
        let read = match super::bodies::read_bundles(site, validator, (at, last), last + 1, None) {
            Ok(read) => read,
            Err(e) => return stop(format!("could not be read ({e}): its blocks stay")),
        };
        if read.len() as u64 != TILE_WIDTH {
            return stop(format!("holds {} of its {TILE_WIDTH} blocks: they stay", read.len()));
        }
        for (height, bytes) in read {
            if store.block_bytes(validator, height)?.as_deref() != Some(bytes.as_slice()) {
                return stop(format!("holds another block at height {height} than ours: its blocks stay"));
            }
        }
        at += TILE_WIDTH;
    }
    Ok((below, format!("the archive's bundles below height {below} hold our blocks")))
}

/// The first height in `from..=last` whose block is dated at or after `cutoff_ms` (times
/// never go back along a chain), or `last + 1`; read from headers alone.
fn first_at_or_after(
    store: &Store,
    validator: &ValidatorKey,
    from: u64,
    last: u64,
    cutoff_ms: u64,
) -> Result<u64, StoreError> {
    let (mut lo, mut hi) = (from, last + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let time = store.signed_headers(validator, mid, mid)?.first().map_or(u64::MAX, |(h, _)| h.time_ms);
        if time >= cutoff_ms {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo)
}
