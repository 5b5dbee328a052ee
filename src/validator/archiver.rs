//! A validator publishing every log it holds to its archive as they grow (`[archive]`):
//! what `af ledger publish --out URL` does, run every `every_s` seconds in the
//! background. Each run writes only the bundles past the archive's tips, so a run costs
//! what was appended since the last; one that fails is tried again sooner, backing off,
//! and the metrics say how far behind the archive is. IO only: the publish is
//! `http::publish`'s.

use crate::http::archive::Site;
use crate::ledger::OwnLog;
use crate::metrics::Metrics;
use std::sync::atomic::{AtomicBool, Ordering};
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
    // Whether the last pruning failed: a failure is said once, and so is the recovery.
    let prune_failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|stopped| *stopped) => return,
        }
        let (log, target, counters, failing) = (log.clone(), site.clone(), metrics.clone(), prune_failing.clone());
        // Reads of the store and the archive's own runtime: off the async workers.
        let published = tokio::task::spawn_blocking(move || {
            let held: u64 = log.store.tips()?.iter().map(|(_, tip)| tip.height + 1).sum();
            let report = crate::http::publish::publish(&log.store, Some(log.key()), &target, &mut |_| {})?;
            if keep_days > 0 {
                prune_after_publish(&log, &target, keep_days, &counters, &failing);
            }
            Ok::<_, crate::http::publish::PublishError>((held, report))
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
            Ok(Err(error)) => (wait, retry) = failed(&metrics, &site, &error.to_string(), retry, every),
            Err(join) => (wait, retry) = failed(&metrics, &site, &join.to_string(), retry, every),
        }
    }
}

/// Prunes what the archive now holds past the window (`http::prune`), said in the log
/// and counted. A failure is said once (`failing`) and tried again after each publish:
/// it is not the publish's, which took.
fn prune_after_publish(log: &OwnLog, site: &Site, keep_days: u32, metrics: &Metrics, failing: &AtomicBool) {
    let own = Some(log.validator());
    let result =
        crate::http::prune::prune_to_archive(&log.store, site, own, keep_days, crate::clock::unix_ms(), &mut |_| {});
    if result.is_ok() && failing.swap(false, Ordering::Relaxed) {
        tracing::info!(event = "prune_recovered", archive = %site, "pruning past the window works again");
    }
    match result {
        Ok(pruned) if pruned.n_blocks > 0 => {
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
            metrics.archive_pruned_blocks.inc_by(pruned.n_blocks);
        }
        Ok(_) => {}
        Err(error) if !failing.swap(true, Ordering::Relaxed) => tracing::warn!(
            event = "prune_failed",
            archive = %site,
            error = %error,
            "pruning past the window failed; tried again after each publish (said once until it works)"
        ),
        Err(error) => tracing::debug!(event = "prune_failed", archive = %site, error = %error, "pruning failed again"),
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
