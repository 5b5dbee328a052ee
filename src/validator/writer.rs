//! The ledger writer task: receives groups of events in order and appends them to our
//! own log in blocks of about `block_max_events`, or whatever has arrived after
//! `block_max_ms`. A group (a challenge's two transcripts) is never split across blocks,
//! so a crash cannot leave half of a pair on disk.
//! Appends are fsync'd, so they run on the blocking pool, never on the async workers.
//! Closing the channel flushes what is buffered as a last block.

use crate::ledger::{Event, OwnLog, Tip, ValidatorKey};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

#[derive(Debug, thiserror::Error)]
pub enum WriterError {
    #[error("appending to the ledger failed: {0}")]
    Append(#[from] crate::ledger::AppendError),
    #[error("the ledger writer task panicked")]
    Panicked,
}

pub struct WriterHandle {
    pub sender: mpsc::Sender<Vec<Event>>,
    pub task: tokio::task::JoinHandle<Result<Option<Tip>, WriterError>>,
}

/// Starts the writer; `now_ms` is the clock used for block times (IO at the edge).
/// `appended` (if given) is told of each new block, so the network can announce it.
pub fn spawn_writer(
    log: Arc<OwnLog>,
    block_max_events: usize,
    block_max_ms: u64,
    now_ms: fn() -> u64,
    appended: Option<mpsc::UnboundedSender<(ValidatorKey, u64)>>,
) -> WriterHandle {
    let (sender, mut receiver) = mpsc::channel::<Vec<Event>>(block_max_events.max(1) * 4);
    let log_validator = log.validator();
    let task = tokio::spawn(async move {
        let mut buffer = Vec::new();
        let mut tip = None;
        loop {
            let deadline = tokio::time::sleep(Duration::from_millis(block_max_ms));
            tokio::pin!(deadline);
            let closed = loop {
                tokio::select! {
                    received = receiver.recv() => match received {
                        Some(group) => {
                            buffer.extend(group);
                            if buffer.len() >= block_max_events {
                                break false;
                            }
                        }
                        None => break true,
                    },
                    _ = &mut deadline => break false,
                }
            };
            if !buffer.is_empty() {
                let events = std::mem::take(&mut buffer);
                let log = log.clone();
                let receipt = tokio::task::spawn_blocking(move || log.append(events, now_ms()))
                    .await
                    .map_err(|_| WriterError::Panicked)??;
                tip = Some(receipt.tip);
                if let Some(appended) = &appended {
                    let _ = appended.send((log_validator, receipt.tip.height));
                }
            }
            if closed {
                return Ok(tip);
            }
        }
    });
    WriterHandle { sender, task }
}
