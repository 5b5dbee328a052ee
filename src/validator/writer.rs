//! The ledger writer task: receives groups of events in order and appends them to our
//! own log in blocks of about `block_max_events`, or whatever has arrived after
//! `block_max_ms`. A group (a challenge's two transcripts) is never split across blocks,
//! so a crash cannot leave half of a pair on disk; a block is sealed before a group that
//! would take it over the size or event limits, so every block fits the format's bounds.
//! Appends are fsync'd, so they run on the blocking pool, never on the async workers;
//! full blocks that queue meanwhile go to disk together in the next transaction (group
//! commit: one fsync for up to `MAX_BLOCKS_PER_COMMIT` blocks).
//! A flush request seals what has arrived and answers once it is durable, so callers
//! say "decided" only of what is on disk. Closing the channel flushes a last block.

use crate::ledger::codec;
use crate::ledger::{AppendError, Event, OwnLog, Receipt, SealedBlock, Tip, ValidatorKey};
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
        let n_bytes = codec::encoded_len(event);
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

/// Blocks written in one durable transaction at most (group commit): the full blocks
/// that queued while the previous transaction was on its way to disk.
pub const MAX_BLOCKS_PER_COMMIT: usize = 256;

/// Events waiting for the disk: full blocks, and the block being filled.
struct Pending {
    full: Vec<Vec<Event>>,
    events: Vec<Event>,
    n_bytes: u64,
    /// When the first event of the block being filled arrived: it is sealed
    /// `block_max_ms` after that, however few events it holds.
    since: Option<tokio::time::Instant>,
    block_max_events: usize,
}

impl Pending {
    /// Adds a group, closing the block being filled first if the group would take it over
    /// the size or event limits, and after if it reaches `block_max_events`.
    fn add(&mut self, group: Vec<Event>, n_bytes: u64) {
        if self.n_bytes + n_bytes > SEAL_AT_BYTES || self.events.len() + group.len() > MAX_EVENTS_PER_BLOCK as usize {
            self.close();
        }
        self.since.get_or_insert_with(tokio::time::Instant::now);
        self.n_bytes += n_bytes;
        self.events.extend(group);
        if self.events.len() >= self.block_max_events {
            self.close();
        }
    }

    fn close(&mut self) {
        if !self.events.is_empty() {
            self.full.push(std::mem::take(&mut self.events));
            self.n_bytes = 0;
            self.since = None;
        }
    }

    /// Moves whatever is queued already into blocks, up to [`MAX_BLOCKS_PER_COMMIT`].
    fn take_queued(&mut self, receiver: &mut mpsc::Receiver<Vec<Event>>) -> Result<(), WriterError> {
        while self.full.len() < MAX_BLOCKS_PER_COMMIT {
            let Ok(group) = receiver.try_recv() else { break };
            let n_bytes = group_bytes(&group)?;
            self.add(group, n_bytes);
        }
        Ok(())
    }
}

/// The disk side of the writer: blocks are sealed on the last block sealed, while the
/// commit before them is still on its way to disk, so signing and hashing overlap the
/// fsync. A block counts (flush replies, announcements, the tip) only once its commit is
/// durable.
struct Disk {
    log: Arc<OwnLog>,
    now_ms: fn() -> u64,
    appended: Option<mpsc::UnboundedSender<(ValidatorKey, u64)>>,
    metrics: Arc<Metrics>,
    /// The last block sealed, durable or on its way.
    sealed_tip: Option<Tip>,
    /// The last block known durable.
    durable_tip: Option<Tip>,
}

/// A commit on its way to disk, and when it started.
type InFlight = (tokio::task::JoinHandle<Result<Vec<Receipt>, AppendError>>, std::time::Instant);

impl Disk {
    /// Seals `blocks` (in the blocking pool) and returns them ready to store.
    async fn seal(&mut self, blocks: Vec<Vec<Event>>) -> Result<Vec<SealedBlock>, WriterError> {
        let (log, prev, now_ms) = (self.log.clone(), self.sealed_tip, self.now_ms);
        let n_events: usize = blocks.iter().map(Vec::len).sum();
        let sealed = tokio::task::spawn_blocking(move || {
            let time_ms = now_ms();
            log.seal_many(prev.as_ref(), blocks.into_iter().map(|events| (events, time_ms)).collect())
        })
        .await
        .map_err(|_| WriterError::Panicked)?;
        let sealed = match sealed {
            // Signing stopped for good (ledger-spec/15): what arrives is dropped, said,
            // and the writer goes on (reads and sync do not need it).
            Err(AppendError::Halted(why)) => {
                tracing::debug!(event = "events_dropped", n_events, "{n_events} events not signed: {why}");
                return Ok(Vec::new());
            }
            other => other?,
        };
        self.sealed_tip = sealed.last().map(SealedBlock::tip).or(self.sealed_tip);
        Ok(sealed)
    }

    fn start(&self, sealed: Vec<SealedBlock>) -> InFlight {
        let log = self.log.clone();
        (tokio::task::spawn_blocking(move || log.store_sealed(&sealed)), std::time::Instant::now())
    }

    /// Counts and announces a finished commit's blocks.
    fn finished(
        &mut self,
        outcome: Result<Result<Vec<Receipt>, AppendError>, tokio::task::JoinError>,
        started: std::time::Instant,
    ) -> Result<(), WriterError> {
        let receipts = outcome.map_err(|_| WriterError::Panicked)??;
        let seconds = started.elapsed().as_secs_f64();
        for receipt in &receipts {
            self.metrics.block_appended(receipt.n_bytes as u64, seconds);
            if let Some(appended) = &self.appended {
                let _ = appended.send((self.log.validator(), receipt.tip.height));
            }
        }
        self.durable_tip = receipts.last().map(|r| r.tip).or(self.durable_tip);
        Ok(())
    }

    /// Waits for the commit on its way, if any.
    async fn settle(&mut self, in_flight: &mut Option<InFlight>) -> Result<(), WriterError> {
        if let Some((job, started)) = in_flight.take() {
            self.finished(job.await, started)?;
        }
        Ok(())
    }
}

/// Starts the writer; `now_ms` is the clock used for block times (IO at the edge).
/// `appended` (if given) is told of each new block once it is durable, so the network can
/// announce it. `metrics` counts appends, and hears the writer's heartbeat once per
/// `block_max_ms` (the node's health check) and its failure. Full blocks that queue while
/// a commit is on its way to disk go to disk together in the next one (group commit), and
/// are sealed while that commit is still being written.
pub fn spawn_writer(
    log: Arc<OwnLog>,
    block_max_events: usize,
    block_max_ms: u64,
    now_ms: fn() -> u64,
    appended: Option<mpsc::UnboundedSender<(ValidatorKey, u64)>>,
    metrics: Arc<Metrics>,
) -> WriterHandle {
    let block_max_events = block_max_events.clamp(1, MAX_EVENTS_PER_BLOCK as usize);
    // Room for the groups of a few blocks, and at least for a full group commit of
    // one-event blocks.
    let (sender, mut receiver) = mpsc::channel::<Vec<Event>>((block_max_events * 4).max(MAX_BLOCKS_PER_COMMIT));
    let (flush, mut flushes) = mpsc::channel::<FlushRequest>(16);
    let health = metrics.clone();
    let max_wait = Duration::from_millis(block_max_ms);
    let work = async move {
        let mut pending = Pending { full: Vec::new(), events: Vec::new(), n_bytes: 0, since: None, block_max_events };
        let tip = log.tip().ok().flatten();
        let mut disk = Disk { log, now_ms, appended, metrics, sealed_tip: tip, durable_tip: tip };
        let mut in_flight: Option<InFlight> = None;
        // Once every flush sender is gone, flushes are no longer polled.
        let mut flushes_open = true;
        loop {
            disk.metrics.heartbeat(now_ms());
            let deadline = tokio::time::sleep_until(pending.since.unwrap_or_else(tokio::time::Instant::now) + max_wait);
            tokio::pin!(deadline);
            let mut flush_reply = None;
            let step = async {
                let (closed, all) = loop {
                    tokio::select! {
                        received = receiver.recv() => match received {
                            Some(group) => {
                                let n_bytes = group_bytes(&group)?;
                                pending.add(group, n_bytes);
                                if !pending.full.is_empty() {
                                    pending.take_queued(&mut receiver)?;
                                    break (false, false);
                                }
                            }
                            None => break (true, true),
                        },
                        request = flushes.recv(), if flushes_open => {
                            let Some(request) = request else {
                                flushes_open = false;
                                continue;
                            };
                            // Everything sent before the request is already queued: take it.
                            while let Ok(group) = receiver.try_recv() {
                                let n_bytes = group_bytes(&group)?;
                                pending.add(group, n_bytes);
                            }
                            flush_reply = Some(request);
                            break (false, true);
                        }
                        // A commit that finishes while nothing else happens is announced now.
                        outcome = async { (&mut in_flight.as_mut().expect("guarded").0).await }, if in_flight.is_some() => {
                            let (_, started) = in_flight.take().expect("guarded");
                            disk.finished(outcome, started)?;
                        }
                        _ = &mut deadline => break (false, true),
                    }
                };
                if all {
                    pending.close();
                }
                let blocks = std::mem::take(&mut pending.full);
                if !blocks.is_empty() {
                    let sealed = disk.seal(blocks).await?;
                    disk.settle(&mut in_flight).await?;
                    if !sealed.is_empty() {
                        in_flight = Some(disk.start(sealed));
                    }
                }
                if closed || flush_reply.is_some() {
                    disk.settle(&mut in_flight).await?;
                }
                Ok::<bool, WriterError>(closed)
            };
            match step.await {
                Ok(closed) => {
                    if let Some(reply) = flush_reply {
                        let _ = reply.send(Ok(disk.durable_tip));
                    }
                    if closed {
                        return Ok(disk.durable_tip);
                    }
                }
                Err(error) => {
                    if let Some(reply) = flush_reply {
                        let _ = reply.send(Err(error.to_string()));
                    }
                    return Err(error);
                }
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
