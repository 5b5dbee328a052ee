//! A validator as a long-running service: after its queue it goes on serving (anchoring
//! on the chain and recording evidence through one appender, the log's single writer),
//! and at a stop it appends what is queued before networking is told to stop, then closes
//! its store cleanly. IO only; what is recorded is decided elsewhere.

use super::anchor::{anchor_loop, AnchorClock, ChainSender};
use crate::bytes::ValidatorKey;
use crate::evaluation::ratio::RatioParams;
use crate::ledger::event::Evidence;
use crate::ledger::{Event, OwnLog};
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// What serving after the queue needs.
pub struct Serving {
    pub log: Arc<OwnLog>,
    /// Told of each block we append, so networking announces it.
    pub own_blocks: mpsc::UnboundedSender<(ValidatorKey, u64)>,
    /// Equivocation found by networking, to record in our log.
    pub evidence: Option<mpsc::UnboundedReceiver<Evidence>>,
    /// The chain to anchor on; none for a validator without a chain identity.
    pub anchor: Option<ChainSender>,
    pub ratio_params: RatioParams,
    pub now_ms: fn() -> u64,
    pub metrics: Arc<Metrics>,
}

/// Serves until `stop`: anchoring and evidence go through one appender. At the stop the
/// anchoring loop ends after its send in flight, and what it queued is appended before
/// this returns, so the caller stops networking only once our last block is sealed.
pub async fn serve_until_stopped(serving: Serving, mut stop: watch::Receiver<bool>) {
    let Serving { log, own_blocks, evidence, anchor, ratio_params, now_ms, metrics } = serving;
    let (events, mut received) = mpsc::channel::<Vec<Event>>(16);
    if let Some(mut evidence) = evidence {
        let events = events.clone();
        tokio::spawn(async move {
            while let Some(found) = evidence.recv().await {
                warn_equivocation(&found);
                if events.send(vec![Event::Evidence(Box::new(found))]).await.is_err() {
                    return;
                }
            }
        });
    }
    let anchoring = anchor.map(|to| {
        let clock = AnchorClock { check_ms: 1_000, now_ms };
        tokio::spawn(anchor_loop(log.clone(), to, events.clone(), ratio_params, clock, stop.clone(), metrics.clone()))
    });
    drop(events);
    let validator = log.validator();
    let (finish, mut finishing) = watch::channel(false);
    let writer_log = log.clone();
    let appender = tokio::spawn(async move {
        loop {
            let batch = tokio::select! {
                batch = received.recv() => batch,
                // No more sends: what is queued is appended, then the loop ends.
                _ = finishing.changed() => {
                    received.close();
                    continue;
                }
            };
            let Some(batch) = batch else { break };
            let log = writer_log.clone();
            match tokio::task::spawn_blocking(move || log.append(batch, now_ms())).await {
                Ok(Ok(receipt)) => {
                    let _ = own_blocks.send((validator, receipt.tip.height));
                }
                // Signing stopped for good (ledger-spec/15): said once where it stopped.
                Ok(Err(crate::ledger::AppendError::Halted(why))) => {
                    tracing::debug!(event = "events_dropped", "not signed: {why}")
                }
                Ok(Err(error)) => tracing::error!(event = "append_failed", error = %error, "recording failed"),
                Err(_) => tracing::error!(event = "append_failed", "recording panicked"),
            }
        }
    });
    tracing::info!(event = "serving", "queue done; syncing until stopped");
    // The loop is now this wait: it keeps the health check's heartbeat.
    while !*stop.borrow_and_update() {
        metrics.heartbeat(now_ms());
        tokio::select! {
            changed = stop.changed() => if changed.is_err() { break },
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    if let Some(anchoring) = anchoring {
        let _ = anchoring.await;
    }
    let _ = finish.send(true);
    let _ = appender.await;
}

/// The operator's line for equivocation networking found, before it is recorded.
pub fn warn_equivocation(found: &Evidence) {
    tracing::warn!(
        event = "equivocation",
        validator = %found.validator,
        height = found.height,
        "validator {} equivocated at height {}: recording the evidence",
        found.validator,
        found.height
    );
}

/// Ends a long-running command's runtime and closes its store cleanly, so the next open
/// needs no recovery: the runtime's tasks are dropped, and the threads that still hold
/// the log (the HTTP API's replay thread sees its channel close within a quarter second)
/// are waited for, up to `CLOSE_WAIT`. Past that the store is left to the next writer's
/// recovery, which loses nothing.
pub fn close(runtime: tokio::runtime::Runtime, log: Arc<OwnLog>) {
    const CLOSE_WAIT: Duration = Duration::from_secs(3);
    runtime.shutdown_timeout(CLOSE_WAIT);
    let deadline = std::time::Instant::now() + CLOSE_WAIT;
    let mut log = log;
    loop {
        match Arc::try_unwrap(log) {
            Ok(log) => return drop(log),
            Err(shared) if std::time::Instant::now() < deadline => {
                log = shared;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => {
                tracing::warn!(
                    event = "store_left_open",
                    "the store is still in use at exit; the next start recovers it"
                );
                return;
            }
        }
    }
}

/// Waits for SIGINT (Ctrl-C) or SIGTERM (systemd, pm2, docker stop), and says which.
/// The handlers are installed when this is called, not when it is first awaited, so a
/// signal that arrives while the caller is still starting up is not lost (nor does it
/// kill the process the default way). Call it inside the runtime, before other work.
pub fn stop_signal() -> impl std::future::Future<Output = &'static str> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => tokio::select! {
                    _ = interrupt.recv() => "SIGINT",
                    _ = terminate.recv() => "SIGTERM",
                },
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                    "SIGINT"
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
        "SIGINT"
    }
}
