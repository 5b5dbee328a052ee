//! A validator publishing every log it holds to its archive as they grow (`[archive]`):
//! what `af ledger publish --out URL` does, run every `every_s` seconds in the
//! background. Each run writes only the bundles past the archive's tips, so a run costs
//! what was appended since the last; one that fails is tried again sooner, backing off,
//! and the metrics say how far behind the archive is. IO only: the publish is
//! `http::publish`'s.

use crate::http::archive::Site;
use crate::ledger::OwnLog;
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The first retry after a failed publish; doubled after each failure, up to `every`.
const FIRST_RETRY: Duration = Duration::from_secs(5);

/// Publishes `log`'s store to `site` every `every`, until `stop`; with `keep_days`,
/// prunes after each publish the bodies of other validators' blocks older than that
/// which the archive holds (`http::prune`).
pub async fn archive_loop(
    log: Arc<OwnLog>,
    site: Site,
    (every, keep_days): (Duration, u32),
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let mut wait = every;
    let mut retry = FIRST_RETRY.min(every);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
        let (log, target, counters) = (log.clone(), site.clone(), metrics.clone());
        // Reads of the store and the archive's own runtime: off the async workers.
        let published = tokio::task::spawn_blocking(move || {
            let held: u64 = log.store.tips().map_err(|e| e.to_string())?.iter().map(|(_, tip)| tip.height + 1).sum();
            let report = crate::http::publish::publish(&log.store, Some(log.key()), &target, &mut |_| {})
                .map_err(|e| e.to_string())?;
            if keep_days > 0 {
                let now = crate::clock::unix_ms();
                let own = Some(log.validator());
                let pruned =
                    crate::http::prune::prune_to_archive(&log.store, &target, own, keep_days, now, &mut |_| {})
                        .map_err(|e| format!("pruning: {e}"))?;
                if pruned.n_blocks > 0 {
                    tracing::info!(
                        event = "pruned",
                        blocks = pruned.n_blocks,
                        events = pruned.n_events,
                        bytes = pruned.n_bytes,
                        kept_bytes = pruned.n_record_bytes,
                        "pruned {} old blocks of other logs the archive holds ({} MiB of bodies)",
                        pruned.n_blocks,
                        pruned.n_bytes / 1_048_576
                    );
                    counters.archive_pruned_blocks.inc_by(pruned.n_blocks);
                }
            }
            Ok::<_, String>((held, report))
        })
        .await;
        match published {
            Ok(Ok((held, report))) => {
                metrics.archive_behind_blocks.set(held.saturating_sub(report.blocks) as i64);
                metrics.archive_published_time_seconds.set((crate::clock::unix_ms() / 1000) as i64);
                tracing::debug!(
                    event = "archive_published",
                    archive = %site,
                    blocks = report.blocks,
                    bundles_written = report.bundles_written,
                    "published to the archive"
                );
                (wait, retry) = (every, FIRST_RETRY.min(every));
            }
            Ok(Err(error)) => (wait, retry) = failed(&metrics, &site, &error, retry, every),
            Err(join) => (wait, retry) = failed(&metrics, &site, &join.to_string(), retry, every),
        }
    }
}

/// A failed publish, counted and said: the wait before the next try (`retry`) and the
/// one after that (doubled, up to `every`).
fn failed(metrics: &Metrics, site: &Site, error: &str, retry: Duration, every: Duration) -> (Duration, Duration) {
    metrics.archive_failures.inc();
    tracing::warn!(
        event = "archive_failed",
        archive = %site,
        error = %error,
        retry_s = retry.as_secs(),
        "publishing to the archive failed; trying again"
    );
    (retry, (retry * 2).min(every))
}
