//! The ledger writer task: receives groups of events in order and appends them to our
//! own log in blocks of about `block_max_events`, or whatever has arrived after
//! `block_max_ms`. A group (a challenge's two transcripts) is never split across blocks,
//! so a crash cannot leave half of a pair on disk; a block is sealed before a group that
//! would take it over the size or event limits, so every block fits the format's bounds.
//! Appends are fsync'd, so they run on the blocking pool, never on the async workers.
//! A flush request seals what has arrived and answers once it is durable, so callers
//! say "decided" only of what is on disk. Closing the channel flushes a last block.

use crate::ledger::codec;
use crate::ledger::{Event, OwnLog, Tip, ValidatorKey};
use crate::limits::{MAX_BLOCK_BYTES, MAX_EVENTS_PER_BLOCK, MAX_EVENT_BYTES};
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Block bytes beyond the events: header, signature, event count (ledger-spec/03).
const BLOCK_OVERHEAD_BYTES: u64 = 118 + 64 + 8;
/// The events of one block are sealed before they would pass this many bytes.
const SEAL_AT_BYTES: u64 = MAX_BLOCK_BYTES - BLOCK_OVERHEAD_BYTES;

#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error("appending to the ledger failed: {0}")]
    Append(#[from] crate::ledger::AppendError),
    #[error("an event of {n_bytes} bytes is over the limit of {MAX_EVENT_BYTES}: {kind}")]
    EventTooLarge { kind: &'static str, n_bytes: u64 },
    #[error("a group of {n_events} events or {n_bytes} bytes cannot fit in one block")]
    GroupTooLarge { n_events: usize, n_bytes: u64 },
    #[error("the ledger writer task panicked")]
    Panicked,
}

/// A request to seal what has arrived; answered with our tip once it is durable, or with
/// the writer's error.
pub type FlushRequest = oneshot::Sender<Result<Option<Tip>, String>>;

pub struct WriterHandle {
    pub sender: mpsc::Sender<Vec<Event>>,
    pub flush: mpsc::Sender<FlushRequest>,
    pub task: tokio::task::JoinHandle<Result<Option<Tip>, WriterError>>,
}

/// The encoded size of a group, or why it can never be stored.
fn group_bytes(group: &[Event]) -> Result<u64, WriterError> {
    let mut total = 0u64;
    for event in group {
        let n_bytes = codec::encode(event, "event", u64::MAX).map(|b| b.len() as u64).unwrap_or(u64::MAX);
        if n_bytes > MAX_EVENT_BYTES {
            return Err(WriterError::EventTooLarge { kind: event.kind_name(), n_bytes });
        }
        total += n_bytes;
    }
    if total > SEAL_AT_BYTES || group.len() > MAX_EVENTS_PER_BLOCK as usize {
        return Err(WriterError::GroupTooLarge { n_events: group.len(), n_bytes: total });
    }
    Ok(total)
}

struct Buffer {
    events: Vec<Event>,
    n_bytes: u64,
}

impl Buffer {
    /// Whether a group of `n_events` events and `n_bytes` bytes must go in a new block.
    fn needs_new_block(&self, n_events: usize, n_bytes: u64) -> bool {
        self.n_bytes + n_bytes > SEAL_AT_BYTES || self.events.len() + n_events > MAX_EVENTS_PER_BLOCK as usize
    }

    fn push(&mut self, group: Vec<Event>, n_bytes: u64) {
        self.n_bytes += n_bytes;
        self.events.extend(group);
    }
}

/// Starts the writer; `now_ms` is the clock used for block times (IO at the edge).
/// `appended` (if given) is told of each new block, so the network can announce it.
/// `metrics` counts appends, and hears the writer's heartbeat once per `block_max_ms`
/// (the node's health check) and its failure.
pub fn spawn_writer(
    log: Arc<OwnLog>,
    block_max_events: usize,
    block_max_ms: u64,
    now_ms: fn() -> u64,
    appended: Option<mpsc::UnboundedSender<(ValidatorKey, u64)>>,
    metrics: Arc<Metrics>,
) -> WriterHandle {
    let block_max_events = block_max_events.clamp(1, MAX_EVENTS_PER_BLOCK as usize);
    let (sender, mut receiver) = mpsc::channel::<Vec<Event>>(block_max_events * 4);
    let (flush, mut flushes) = mpsc::channel::<FlushRequest>(16);
    let log_validator = log.validator();
    let health = metrics.clone();
    let work = async move {
        let mut buffer = Buffer { events: Vec::new(), n_bytes: 0 };
        let mut tip = log.tip().ok().flatten();
        // Once every flush sender is gone, flushes are no longer polled.
        let mut flushes_open = true;
        // Appends `buffer` as one block, if it holds anything.
        let seal = |buffer: &mut Buffer| {
            let events = std::mem::take(&mut buffer.events);
            buffer.n_bytes = 0;
            let log = log.clone();
            let appended = appended.clone();
            let metrics = metrics.clone();
            async move {
                if events.is_empty() {
                    return Ok(None);
                }
                let started = std::time::Instant::now();
                let receipt = tokio::task::spawn_blocking(move || log.append(events, now_ms()))
                    .await
                    .map_err(|_| WriterError::Panicked)??;
                metrics.block_appended(receipt.n_bytes as u64, started.elapsed().as_secs_f64());
                if let Some(appended) = &appended {
                    let _ = appended.send((log_validator, receipt.tip.height));
                }
                Ok::<_, WriterError>(Some(receipt.tip))
            }
        };
        loop {
            metrics.heartbeat(now_ms());
            let deadline = tokio::time::sleep(Duration::from_millis(block_max_ms));
            tokio::pin!(deadline);
            let mut flush_reply = None;
            let closed = loop {
                tokio::select! {
                    received = receiver.recv() => match received {
                        Some(group) => {
                            let n_bytes = group_bytes(&group)?;
                            if buffer.needs_new_block(group.len(), n_bytes) {
                                if let Some(new_tip) = seal(&mut buffer).await? {
                                    tip = Some(new_tip);
                                }
                            }
                            buffer.push(group, n_bytes);
                            if buffer.events.len() >= block_max_events {
                                break false;
                            }
                        }
                        None => break true,
                    },
                    request = flushes.recv(), if flushes_open => {
                        let Some(request) = request else {
                            flushes_open = false;
                            continue;
                        };
                        // Everything sent before the request is already queued: take it.
                        while let Ok(group) = receiver.try_recv() {
                            let n_bytes = group_bytes(&group)?;
                            if buffer.needs_new_block(group.len(), n_bytes) {
                                if let Some(new_tip) = seal(&mut buffer).await? {
                                    tip = Some(new_tip);
                                }
                            }
                            buffer.push(group, n_bytes);
                        }
                        flush_reply = Some(request);
                        break false;
                    }
                    _ = &mut deadline => break false,
                }
            };
            match seal(&mut buffer).await {
                Ok(Some(new_tip)) => tip = Some(new_tip),
                Ok(None) => {}
                Err(error) => {
                    if let Some(reply) = flush_reply {
                        let _ = reply.send(Err(error.to_string()));
                    }
                    return Err(error);
                }
            }
            if let Some(reply) = flush_reply {
                let _ = reply.send(Ok(tip));
            }
            if closed {
                return Ok(tip);
            }
        }
    };
    let task = tokio::spawn(async move {
        let result = work.await;
        if let Err(error) = &result {
            health.log_failed(error.to_string());
        }
        result
    });
    WriterHandle { sender, flush, task }
}

/// Asks the writer to seal what it has and waits until that is durable; the error is the
/// writer's own cause if it failed.
pub async fn flush(requests: &mpsc::Sender<FlushRequest>) -> Result<Option<Tip>, String> {
    let (reply, answer) = oneshot::channel();
    requests.send(reply).await.map_err(|_| "the ledger writer has stopped".to_string())?;
    answer.await.map_err(|_| "the ledger writer has stopped".to_string())?
}
