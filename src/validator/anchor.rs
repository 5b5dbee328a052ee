//! Anchoring our log on chain: commit our tip (hash, ledger key, height) on a cadence
//! that stays inside the commitments pallet's space limit, and set winner-takes-all
//! weights from a replay of every log we hold, when the rate limit allows. Each
//! success is recorded as an event in our own log, through its single writer.

use crate::chain::{send_weights, Chain, ChainError, LedgerCommitment, SentWeights, WeightsSent, COMMIT_EVERY_BLOCKS};
use crate::envs;
use crate::evaluation::ratio::RatioParams;
use crate::ledger::event::{ChainCommitment, WeightsCommitted, WeightsSet};
use crate::ledger::{Event, OwnLog, StoreError};
use crate::metrics::Metrics;
use crate::replay::{self, fold::ChainFold};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    #[error("{0}")]
    Chain(#[from] ChainError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("replay: {0}")]
    Replay(#[from] replay::ReplayError),
}

impl AnchorError {
    /// Counts this failure of sending a `kind` ("commitment", "weights") in `metrics`.
    pub fn count(&self, metrics: &Metrics, kind: &str) {
        match self {
            AnchorError::Chain(error) => {
                let result = if error.is_refusal() { "refused" } else { "failed" };
                metrics.chain_send(kind, result, error.reason());
                if matches!(error, ChainError::Transport { .. }) {
                    metrics.chain_rpc_error(kind);
                }
            }
            AnchorError::Store(_) => metrics.chain_send(kind, "failed", "store"),
            AnchorError::Replay(_) => metrics.chain_send(kind, "failed", "replay"),
        }
    }
}

/// Whether our tip block holds anything but our own anchoring records: committing a tip
/// that only records the previous commitment would commit forever while idle.
fn tip_has_news(log: &OwnLog) -> Result<bool, StoreError> {
    let Some(tip) = log.tip()? else { return Ok(false) };
    let Some(block) = log.store.block(&log.validator(), tip.height)? else { return Ok(false) };
    Ok(block
        .block
        .events
        .iter()
        .any(|e| !matches!(e, Event::ChainCommitment(_) | Event::WeightsSet(_) | Event::WeightsCommitted(_))))
}

/// Commits our current tip; returns the event to record, or `None` with nothing to commit.
pub async fn commit_tip(log: &OwnLog, chain: &dyn Chain) -> Result<Option<ChainCommitment>, AnchorError> {
    let Some(tip) = log.tip()? else { return Ok(None) };
    let commitment = LedgerCommitment { tip_hash: tip.hash, ledger_key: log.validator(), tip_height: tip.height };
    let chain_block = chain.commit(&commitment).await?;
    Ok(Some(ChainCommitment {
        netuid: chain.netuid(),
        chain_block,
        committed_height: tip.height,
        committed_hash: tip.hash,
    }))
}

/// The weights replay gives (winner takes all, to the champion's uid on chain now),
/// sent the way the subnet requires (`set_weights`, or a timelocked commit under
/// commit-reveal: [`send_weights`], through the validator's one `sent` memory); returns
/// the event to record. `None` when the chain says wait: the rate limit (checked first,
/// counting our own sends still in the pool, so no replay is wasted), or our commit for
/// this epoch not yet revealed; and when there is no champion yet, or the champion is not
/// registered.
pub async fn set_weights(
    log: &Arc<OwnLog>,
    chain: &dyn Chain,
    sent: &SentWeights,
    ratio_params: RatioParams,
    folds: &mut Option<Vec<ChainFold>>,
    now_ms: u64,
) -> Result<Option<Event>, AnchorError> {
    let limits = chain.weight_limits().await?;
    let now = chain.current_block().await?;
    match sent.check_rate(&limits, chain.netuid(), now).await {
        Err(ChainError::RateLimited { .. }) => return Ok(None),
        Err(other) => return Err(other.into()),
        Ok(()) => {}
    }
    let snapshot = folds.take().map(|folds| {
        (replay::Snapshot { replay_version: replay::REPLAY_VERSION, folds }, replay::FoldSource::ThisProcess)
    });
    let replayed = {
        let log = log.clone();
        tokio::task::spawn_blocking(move || {
            replay::replay(&log.store, &envs::registry(), snapshot, &ratio_params, &mut |_, _, _| {})
        })
        .await
        .expect("replay does not panic")?
    };
    *folds = Some(replayed.folds);
    let Some(champion) = replayed.state.champion else { return Ok(None) };
    let neurons = chain.neurons().await?;
    let Some(uid) = neurons.iter().find(|n| n.hotkey == champion.hotkey).map(|n| n.uid) else { return Ok(None) };
    let (uids, weights) = (vec![uid], vec![u16::MAX]);
    let netuid = chain.netuid();
    let sent = match send_weights(chain, sent, &uids, &weights, now_ms).await {
        Ok(sent) => sent,
        Err(error) if error.is_wait() => {
            tracing::debug!(event = "weights_wait", reason = %error, "weights wait for the chain");
            return Ok(None);
        }
        Err(error) => return Err(error.into()),
    };
    Ok(Some(match sent {
        WeightsSent::Set { chain_block, version_key } => {
            Event::WeightsSet(WeightsSet { netuid, uids, weights, version_key, chain_block })
        }
        WeightsSent::Committed { chain_block, version_key, plan, ciphertext_hash } => {
            Event::WeightsCommitted(WeightsCommitted {
                netuid,
                uids,
                weights,
                version_key,
                chain_block,
                reveal_round: plan.reveal_round,
                reveal_block: plan.reveal_block,
                ciphertext_hash,
            })
        }
    }))
}

/// The chain block and a one-line description of a weights event, for logs.
pub fn describe_weights(event: &Event) -> (u64, String) {
    match event {
        Event::WeightsSet(w) => (
            w.chain_block,
            format!(
                "set weights {}",
                crate::chain::weight_shares(w.uids.iter().copied().zip(w.weights.iter().copied()))
            ),
        ),
        Event::WeightsCommitted(w) => (
            w.chain_block,
            format!(
                "committed weights {} timelocked to round {} (reveal at block {})",
                crate::chain::weight_shares(w.uids.iter().copied().zip(w.weights.iter().copied())),
                w.reveal_round,
                w.reveal_block
            ),
        ),
        _ => (0, String::new()),
    }
}

/// The chain our log is anchored on, and the validator's one memory of its weights sends.
pub struct ChainSender {
    pub chain: Arc<dyn Chain>,
    pub sent: Arc<SentWeights>,
}

/// How often the anchoring loop looks at the chain, and the wall clock it plans reveal
/// rounds with.
#[derive(Clone, Copy, Debug)]
pub struct AnchorClock {
    pub check_ms: u64,
    pub now_ms: fn() -> u64,
}

/// Runs until `stop`: every `check_ms`, commits the tip when `COMMIT_EVERY_BLOCKS` chain
/// blocks have passed since the last commitment and the log has news, and sets weights
/// when the rate limit allows. Failures are logged and retried on the next tick: the
/// validator never stops for the chain.
pub async fn anchor_loop(
    log: Arc<OwnLog>,
    to: ChainSender,
    events: mpsc::Sender<Vec<Event>>,
    ratio_params: RatioParams,
    clock: AnchorClock,
    mut stop: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
) {
    let AnchorClock { check_ms, now_ms } = clock;
    let ChainSender { chain, sent } = to;
    let mut last_commit_block: Option<u64> = None;
    let mut folds: Option<Vec<ChainFold>> = None;
    metrics.chain_expected(now_ms());
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(check_ms)) => {}
            _ = stop.changed() => return,
        }
        let block = match chain.current_block().await {
            Ok(block) => {
                metrics.chain_read(block, now_ms());
                block
            }
            Err(error) => {
                metrics.chain_rpc_error("current_block");
                tracing::warn!(event = "chain_unreachable", error = %error, "chain unreachable; retrying");
                continue;
            }
        };
        let due = last_commit_block.is_none_or(|last| block >= last + COMMIT_EVERY_BLOCKS);
        if due && tip_has_news(&log).unwrap_or(false) {
            match commit_tip(&log, chain.as_ref()).await {
                Ok(Some(commitment)) => {
                    metrics.chain_send("commitment", "sent", "");
                    tracing::info!(
                        event = "committed",
                        height = commitment.committed_height,
                        chain_block = commitment.chain_block,
                        "committed our tip on chain"
                    );
                    last_commit_block = Some(commitment.chain_block);
                    metrics.chain_anchored(false, commitment.chain_block);
                    if events.send(vec![Event::ChainCommitment(commitment)]).await.is_err() {
                        return;
                    }
                }
                Ok(None) => {}
                Err(error) => {
                    error.count(&metrics, "commitment");
                    metrics.chain_send_failed(false, block);
                    tracing::warn!(event = "commit_failed", error = %error, "committing our tip failed; retrying");
                }
            }
        }
        // The chain's own rate limit decides, with our sends still in the pool counted
        // (set_weights reads both and waits when they say so).
        match set_weights(&log, chain.as_ref(), &sent, ratio_params, &mut folds, now_ms()).await {
            Ok(Some(event)) => {
                metrics.chain_send("weights", "sent", "");
                let (chain_block, what) = describe_weights(&event);
                metrics.chain_anchored(true, chain_block);
                tracing::info!(event = event.kind_name(), chain_block, "{what}");
                if events.send(vec![event]).await.is_err() {
                    return;
                }
            }
            Ok(None) => {}
            Err(error) => {
                error.count(&metrics, "weights");
                metrics.chain_send_failed(true, block);
                tracing::warn!(event = "set_weights_failed", error = %error, "setting weights failed; retrying");
            }
        }
    }
}
