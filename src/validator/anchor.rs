//! Anchoring our log on chain: commit our tip (hash, ledger key, height) on a cadence
//! that stays inside the commitments pallet's space limit, and set winner-takes-all
//! weights from a replay of every log we hold, when the rate limit allows. Each
//! success is recorded as an event in our own log, through its single writer.

use crate::chain::weights::{send_weights, SentWeights, WeightsSent};
use crate::chain::{Chain, ChainError, LedgerCommitment, Neuron, COMMIT_EVERY_BLOCKS};
use crate::evaluation::ratio::RatioParams;
use crate::ledger::event::{ChainCommitment, WeightsCommitted, WeightsSet};
use crate::ledger::{Event, OwnLog, StoreError};
use crate::metrics::Metrics;
use crate::replay::latest_replay::LatestReplay;
use crate::replay::{self, Replay};
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

/// How often (in chain blocks) the anchoring loop reads what the other permitted
/// validators announce: about once a tempo on a live subnet.
const ANNOUNCEMENTS_EVERY_BLOCKS: u64 = 20;

/// The later protocol version more than half of the other permitted validators announce
/// in their ledger commitments (ledger-spec/15), if any; none when the chain cannot be
/// read (tried again later).
async fn read_announcements(chain: &dyn Chain, known_max: u32) -> Option<(u32, u64)> {
    let (neurons, records) = (chain.neurons().await.ok()?, chain.commitments().await.ok()?);
    let ours = chain.hotkey();
    let announcements: Vec<(u32, u64)> = neurons
        .iter()
        .filter(|n| n.validator_permit && Some(&n.hotkey) != ours.as_ref())
        .map(|n| {
            let commitment = records.iter().find(|r| r.hotkey == n.hotkey).and_then(|r| r.ledger());
            // A permitted validator that announces nothing counts against any news.
            commitment.and_then(|c| c.protocol).unwrap_or((0, 0))
        })
        .collect();
    crate::protocol::announced_by_majority(known_max, &announcements)
}

/// Longest a stop waits for its last commitment of our tip (`run`'s final anchoring).
/// Past it the send is cut, which loses nothing: a commitment that lands unrecorded names
/// a block of ours, and the next start commits the tip again. A weights send is never
/// cut (one that lands unrecorded is a `mismatch` in the weights audit), but none is
/// started past this deadline either.
pub const STOP_CHAIN_MS: u64 = 5_000;

/// Commits our current tip, announcing `protocol` (the newest version this build applies
/// and its activation block, ledger-spec/07 and 15); returns the event to record, or
/// `None` with nothing to commit.
pub async fn commit_tip(
    log: &OwnLog,
    chain: &dyn Chain,
    protocol: (u32, u64),
) -> Result<Option<ChainCommitment>, AnchorError> {
    let Some(tip) = log.tip()? else { return Ok(None) };
    let commitment = LedgerCommitment {
        tip_hash: tip.hash,
        ledger_key: log.validator(),
        tip_height: tip.height,
        protocol: Some(protocol),
    };
    let chain_block = chain.commit(&commitment).await?;
    Ok(Some(ChainCommitment {
        netuid: chain.netuid(),
        chain_block,
        committed_height: tip.height,
        committed_hash: tip.hash,
    }))
}

/// What the anchoring loop keeps between its ticks so that an idle tick costs two chain
/// reads and no replay: the process's one [`LatestReplay`] (replayed only when a tip
/// moved, folding only new blocks; shared with the HTTP API when it runs), and the
/// neurons read at a chain block (the hotkey to uid map changes only from one chain block
/// to the next).
#[derive(Default)]
pub struct WeightsCache {
    replays: Arc<LatestReplay>,
    /// The replay the champion was read from (weak: the folds are the shared replay's to
    /// keep or drop), and that champion.
    read_from: std::sync::Weak<Replay>,
    champion: Option<String>,
    neurons: Option<(u64, Vec<Neuron>)>,
    /// The champion whose weights this process last sent, and the one whose weights it
    /// last said wait for the rate limit: that wait is said once per champion, not once a
    /// block (and counted once, [`WeightsCache::take_new_hold`]).
    sent_to: Option<String>,
    held_for: Option<String>,
    new_hold: bool,
}

impl WeightsCache {
    /// A cache whose replays are `replays`, shared with other readers of the same store.
    pub fn sharing(replays: Arc<LatestReplay>) -> WeightsCache {
        WeightsCache { replays, ..WeightsCache::default() }
    }

    /// The champion's hotkey by a replay of every log, replayed only when a tip moved.
    async fn champion(&mut self, log: &Arc<OwnLog>, ratio_params: RatioParams) -> Result<Option<String>, AnchorError> {
        let (log, replays) = (log.clone(), self.replays.clone());
        let replayed = tokio::task::spawn_blocking(move || replays.get(&log.store, &ratio_params))
            .await
            .expect("replay does not panic")?;
        // A weak pointer keeps its allocation, so an equal address is the same replay.
        if std::sync::Weak::as_ptr(&self.read_from) != Arc::as_ptr(&replayed) {
            self.read_from = Arc::downgrade(&replayed);
            self.champion = replayed.state.champion.as_ref().map(|c| c.hotkey.to_string());
        }
        Ok(self.champion.clone())
    }

    /// Whether weights were held back by the rate limit for a new champion since the last
    /// call: the anchoring loop counts each such hold once.
    pub fn take_new_hold(&mut self) -> bool {
        std::mem::take(&mut self.new_hold)
    }

    /// `hotkey`'s uid on chain at block `now`, read once per chain block.
    async fn uid_of(&mut self, chain: &dyn Chain, hotkey: &str, now: u64) -> Result<Option<u16>, AnchorError> {
        if self.neurons.as_ref().is_none_or(|(block, _)| *block != now) {
            self.neurons = Some((now, chain.neurons().await?));
        }
        let neurons = self.neurons.as_ref().map(|(_, n)| n.as_slice()).unwrap_or_default();
        Ok(neurons.iter().find(|n| n.hotkey == hotkey).map(|n| n.uid))
    }
}

/// The weights replay gives (winner takes all, to the champion's uid on chain now),
/// sent the way the subnet requires (`set_weights`, or a timelocked commit under
/// commit-reveal: [`send_weights`], through the validator's one `sent` memory); returns
/// the event to record. `None` when the chain says wait: the rate limit (checked first,
/// counting our own sends still in the pool, so no replay is wasted), the same weights
/// sent less than a tempo ago (checked before anything else is read), or our commit for
/// this epoch not yet revealed; and when there is no champion yet, or the champion is not
/// registered.
pub async fn set_weights(
    log: &Arc<OwnLog>,
    chain: &dyn Chain,
    sent: &SentWeights,
    ratio_params: RatioParams,
    cache: &mut WeightsCache,
    now_ms: u64,
) -> Result<Option<Event>, AnchorError> {
    let limits = chain.weight_limits().await?;
    let now = chain.current_block().await?;
    set_weights_at(log, chain, sent, ratio_params, cache, (&limits, now), now_ms).await
}

/// [`set_weights`] with the weight limits and head block already read (the anchoring
/// loop reads them once a block, for the registration and the pool too).
async fn set_weights_at(
    log: &Arc<OwnLog>,
    chain: &dyn Chain,
    sent: &SentWeights,
    ratio_params: RatioParams,
    cache: &mut WeightsCache,
    (limits, now): (&crate::chain::WeightLimits, u64),
    now_ms: u64,
) -> Result<Option<Event>, AnchorError> {
    match sent.check_rate(limits, chain.netuid(), now).await {
        Err(ChainError::RateLimited { last, limit, next }) => {
            // Said when a champion's weights start to wait, never silent for a whole
            // limit (a subnet's can be days): the replay is the shared one, read anyway.
            let champion = cache.champion(log, ratio_params).await?;
            if let Some(champion) = champion.filter(|c| cache.sent_to.as_ref() != Some(c)) {
                if cache.held_for.as_ref() != Some(&champion) {
                    tracing::info!(
                        event = "weights_held",
                        champion = %champion,
                        next,
                        "weights for the champion {champion} wait for the chain's rate limit: last set at block {last}, one set per {limit} blocks, next at block {next}"
                    );
                    cache.held_for = Some(champion);
                    cache.new_hold = true;
                }
            }
            return Ok(None);
        }
        Err(ChainError::InPool { .. }) => return Ok(None),
        Err(other) => return Err(other.into()),
        Ok(()) => {}
    }
    let Some(champion) = cache.champion(log, ratio_params).await? else { return Ok(None) };
    let Some(uid) = cache.uid_of(chain, &champion, now).await? else { return Ok(None) };
    if let Err(error) = sent.check_repeat(&[uid], &[u16::MAX], limits.tempo, now).await {
        tracing::debug!(event = "weights_wait", reason = %error, "weights wait for the chain");
        return Ok(None);
    }
    let (uids, weights) = (vec![uid], vec![u16::MAX]);
    let netuid = chain.netuid();
    let sent = match send_weights(chain, sent, &uids, &weights, now_ms).await {
        Ok(sent) => {
            cache.sent_to = Some(champion);
            cache.held_for = None;
            sent
        }
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
                crate::chain::weights::weight_shares(w.uids.iter().copied().zip(w.weights.iter().copied()))
            ),
        ),
        Event::WeightsCommitted(w) => (
            w.chain_block,
            format!(
                "committed weights {} timelocked to round {} (reveal at block {})",
                crate::chain::weights::weight_shares(w.uids.iter().copied().zip(w.weights.iter().copied())),
                w.reveal_round,
                w.reveal_block
            ),
        ),
        _ => (0, String::new()),
    }
}

/// The chain our log is anchored on, the validator's one memory of its weights sends, and
/// the process's one replay of its store.
pub struct ChainSender {
    pub chain: Arc<dyn Chain>,
    pub sent: Arc<SentWeights>,
    pub replays: Arc<LatestReplay>,
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
    let ChainSender { chain, sent, replays } = to;
    let mut last_commit_block: Option<u64> = None;
    let mut cache = WeightsCache::sharing(replays);
    metrics.chain_expected(now_ms());
    // An outage is said twice, when it starts and when it ends, not at every tick.
    // Said once per outage; its length counted from the last answer, not the first failure.
    let mut outage = crate::chain::outage::Outage::default();
    let mut last_block_seen: Option<u64> = None;
    let mut deregistered = false;
    // Our neuron as last seen registered: a swap of our hotkey keeps its uid and
    // registration block (ledger-spec/13, "Hotkey swaps").
    let mut ours: Option<crate::chain::Neuron> = None;
    let data = log.store.path().parent().map(std::path::Path::to_path_buf);
    let mut checkpoints = super::checkpoints::CheckpointRecorder::default();
    let protocol = cache.replays.protocol();
    let announce = protocol.newest();
    let upgrade = super::upgrade::UpgradeWatch::new(&protocol, log.clone(), metrics.clone());
    let mut announcements_read_at: Option<u64> = None;
    loop {
        // The round that began before the last head read ends here, however it ended.
        metrics.anchor_round(false, now_ms());
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(check_ms)) => {}
            _ = stop.changed() => return,
        }
        // Needs no chain: a replay of the logs we hold (recorded only where our log's
        // protocol version has the kind, ledger-spec/15).
        if log.signing_halted().is_none() {
            checkpoints.tick(&log, &cache.replays, &events, ratio_params, now_ms()).await;
        }
        // The chain's part of the round begins: a long replay above is not the chain's.
        metrics.anchor_round(true, now_ms());
        // A read, and a commitment, give way to a stop: cutting either loses nothing (a
        // commitment that lands unrecorded names a block of ours). A weights send does
        // not: one that lands unrecorded is a mismatch the weights audit reports.
        let read = tokio::select! {
            read = chain.current_block() => read,
            _ = stop.changed() => return,
        };
        let block = match read {
            Ok(block) => {
                metrics.chain_read(block, now_ms());
                if let crate::chain::outage::Said::Back { down_s } = outage.answered(now_ms()) {
                    tracing::info!(
                        event = "chain_reachable",
                        down_s,
                        block,
                        "the chain answers again after {down_s:.1} s (block {block})"
                    );
                }
                block
            }
            Err(error) => {
                metrics.chain_rpc_error("current_block");
                if outage.failed(now_ms()) == crate::chain::outage::Said::Down {
                    tracing::warn!(
                        event = "chain_unreachable",
                        error = %error,
                        "the chain does not answer: commitments and weights wait; retrying every {check_ms} ms"
                    );
                }
                continue;
            }
        };
        // What the other permitted validators announce (ledger-spec/15), read every
        // `ANNOUNCEMENTS_EVERY_BLOCKS`: a later version this build does not apply, once
        // more than half of them commit it, stops our signing at its block.
        if announcements_read_at.is_none_or(|at| block >= at.saturating_add(ANNOUNCEMENTS_EVERY_BLOCKS)) {
            announcements_read_at = Some(block);
            if let Some(announced) = read_announcements(chain.as_ref(), protocol.known_max()).await {
                if upgrade.learn(Some(announced)) {
                    cache.replays.announce(announced);
                }
            }
        }
        // At a protocol version this build does not apply: nothing more is sent, neither
        // a commitment nor weights (ledger-spec/15); the head is still watched.
        if upgrade.observe(block) {
            continue;
        }
        // Nothing on chain changes between blocks: a tick on the same block reads nothing
        // more (an idle validator asks the chain one thing a tick).
        if last_block_seen == Some(block) {
            continue;
        }
        last_block_seen = Some(block);
        // A hotkey whose uid went to another (or that was never registered) sends nothing:
        // each send would be refused (HotKeyNotRegisteredInNetwork). Said once, and once
        // again when it holds a uid anew.
        let limits = match chain.weight_limits().await {
            Ok(limits) => limits,
            Err(error) => {
                metrics.chain_rpc_error("weight_limits");
                tracing::warn!(event = "chain_read_failed", error = %error, "reading the subnet's weight limits failed; retrying");
                last_block_seen = None;
                continue;
            }
        };
        // A send of ours still in the pool (one made before a restart, say) goes first:
        // nothing more is sent until a block takes it.
        if limits.in_pool > 0 {
            continue;
        }
        // What follows is judged at the block the limits were read at, not the older head.
        let block = limits.at_block.map_or(block, |at| at.max(block));
        match limits.registered {
            Some(false) => {
                if !deregistered {
                    deregistered = true;
                    if let (Some(before), Some(data)) = (&ours, &data) {
                        if let Some(swap) = super::hotkey_swap::seen(chain.as_ref(), before).await {
                            tracing::warn!(
                                event = "hotkey_swapped",
                                old = %swap.old,
                                new = %swap.new,
                                uid = swap.uid,
                                block,
                                "our hotkey {} was swapped to {} (uid {} moved with its registration): starting again under the new hotkey, with the same log and ledger key",
                                swap.old,
                                swap.new,
                                swap.uid
                            );
                            if let Err(error) = super::hotkey_swap::record(data, &swap) {
                                tracing::error!(event = "hotkey_swap_unrecorded", error = %error, "could not record the swap");
                            }
                            continue;
                        }
                    }
                    let why = format!(
                        "our hotkey {} holds no uid on subnet {} (deregistered, or its uid went to another hotkey): nothing is committed or set until it is registered again",
                        chain.hotkey().unwrap_or_default(),
                        chain.netuid()
                    );
                    tracing::error!(event = "deregistered", block, "{why}");
                    metrics.chain_registration(Some(why));
                }
                continue;
            }
            _ if deregistered => {
                deregistered = false;
                tracing::info!(
                    event = "registered",
                    block,
                    "our hotkey holds a uid on subnet {} again",
                    chain.netuid()
                );
                metrics.chain_registration(None);
            }
            Some(true) => {
                metrics.chain_registered.set(1);
                if ours.is_none() {
                    let hotkey = chain.hotkey().unwrap_or_default();
                    ours = chain.neurons().await.ok().and_then(|n| n.into_iter().find(|n| n.hotkey == hotkey));
                }
            }
            None => {}
        }
        let due = last_commit_block.is_none_or(|last| block >= last + COMMIT_EVERY_BLOCKS);
        if due && tip_has_news(&log).unwrap_or(false) {
            let sent = tokio::select! {
                sent = commit_tip(&log, chain.as_ref(), announce) => sent,
                _ = stop.changed() => {
                    tracing::warn!(event = "commit_cut", "stopping: the commitment in flight is cut; the next start commits our tip");
                    return;
                }
            };
            match sent {
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
        let at = (&limits, block);
        match set_weights_at(&log, chain.as_ref(), &sent, ratio_params, &mut cache, at, now_ms()).await {
            Ok(Some(event)) => {
                metrics.chain_send("weights", "sent", "");
                let (chain_block, what) = describe_weights(&event);
                metrics.chain_anchored(true, chain_block);
                tracing::info!(event = event.kind_name(), chain_block, "{what}");
                if events.send(vec![event]).await.is_err() {
                    return;
                }
            }
            Ok(None) => {
                if cache.take_new_hold() {
                    metrics.chain_send("weights", "refused", "rate_limited");
                }
            }
            Err(error) => {
                error.count(&metrics, "weights");
                metrics.chain_send_failed(true, block);
                tracing::warn!(event = "set_weights_failed", error = %error, "setting weights failed; retrying");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{Axon, CommitmentRecord, TimelockInfo, Timelocked, WeightLimits};
    use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A chain at a settable block whose only neuron is `CHAMPION` at uid 3, counting the
    /// reads and sends an idle anchoring tick must not repeat.
    #[derive(Default)]
    struct Counting {
        block: AtomicU64,
        limits_reads: AtomicU64,
        neurons_reads: AtomicU64,
        sets: AtomicU64,
    }

    const CHAMPION: &str = "5AnchorTestChampion";

    fn absent<T>() -> Result<T, ChainError> {
        Err(ChainError::Refused("not used by this test".into()))
    }

    #[async_trait::async_trait]
    impl Chain for Counting {
        fn netuid(&self) -> u16 {
            1
        }
        fn hotkey(&self) -> Option<String> {
            Some("5AnchorTestValidator".into())
        }
        async fn current_block(&self) -> Result<u64, ChainError> {
            Ok(self.block.load(Ordering::SeqCst))
        }
        async fn block_hash(&self, _: u64) -> Result<Option<crate::bytes::Hash32>, ChainError> {
            absent()
        }
        async fn neurons(&self) -> Result<Vec<Neuron>, ChainError> {
            self.neurons_reads.fetch_add(1, Ordering::SeqCst);
            Ok(vec![Neuron { uid: 3, hotkey: CHAMPION.into(), registration_block: 0, validator_permit: false }])
        }
        async fn commit_fields(&self, _: &[Vec<u8>]) -> Result<u64, ChainError> {
            absent()
        }
        async fn commitments(&self) -> Result<Vec<CommitmentRecord>, ChainError> {
            absent()
        }
        async fn serve_axon(&self, _: std::net::IpAddr, _: u16) -> Result<u64, ChainError> {
            absent()
        }
        async fn axons(&self) -> Result<Vec<Axon>, ChainError> {
            absent()
        }
        async fn set_weights(&self, _: &[u16], _: &[u16], _: u64) -> Result<u64, ChainError> {
            self.sets.fetch_add(1, Ordering::SeqCst);
            Ok(self.block.load(Ordering::SeqCst))
        }
        async fn weights(&self) -> Result<Vec<(u16, Vec<(u16, u16)>)>, ChainError> {
            absent()
        }
        async fn weight_limits(&self) -> Result<WeightLimits, ChainError> {
            self.limits_reads.fetch_add(1, Ordering::SeqCst);
            Ok(WeightLimits {
                rate_limit_blocks: 10,
                last_update: None,
                commit_reveal_enabled: false,
                version_key: 0,
                tempo: 50,
                registered: Some(true),
                in_pool: 0,
                at_block: None,
            })
        }
        fn payload_hotkey(&self) -> Option<Vec<u8>> {
            None
        }
        async fn timelock_info(&self) -> Result<TimelockInfo, ChainError> {
            absent()
        }
        async fn commit_timelocked_weights(&self, _: &[u8], _: u64, _: u16) -> Result<u64, ChainError> {
            absent()
        }
        async fn timelocked(&self) -> Result<Timelocked, ChainError> {
            absent()
        }
    }

    fn log_with_a_block(dir: &std::path::Path) -> Arc<OwnLog> {
        let store = crate::ledger::Store::create(dir).unwrap();
        let log = Arc::new(OwnLog::new(store, crate::ledger::LedgerKey::from_seed([5; 32])));
        append_demo_block(&log);
        log
    }

    fn append_demo_block(log: &OwnLog) {
        let height = log.tip().unwrap().map_or(0, |t| t.height + 1);
        log.append(crate::ledger::demo::demo_events(&log.validator(), height, 2, 600), 1_000 + height).unwrap();
    }

    #[tokio::test]
    async fn the_champion_is_replayed_only_when_a_tip_moves() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_with_a_block(dir.path());
        let mut cache = WeightsCache::default();
        assert_eq!(cache.champion(&log, DEFAULT_RATIO_PARAMS).await.unwrap(), None, "a log with no match");
        // A replay would set it back to None; with no new block none runs.
        cache.champion = Some(CHAMPION.into());
        assert_eq!(cache.champion(&log, DEFAULT_RATIO_PARAMS).await.unwrap().as_deref(), Some(CHAMPION));
        append_demo_block(&log);
        assert_eq!(cache.champion(&log, DEFAULT_RATIO_PARAMS).await.unwrap(), None, "a new block is folded");
    }

    /// A log with a block, a chain at block 100 whose uid 3 is `CHAMPION`, no weights
    /// sent yet, and a cache whose replay names `CHAMPION` the champion.
    async fn champion_at_block_100(dir: &std::path::Path) -> (Arc<OwnLog>, Counting, SentWeights, WeightsCache) {
        let log = log_with_a_block(dir);
        let chain = Counting::default();
        let mut cache = WeightsCache::default();
        cache.champion(&log, DEFAULT_RATIO_PARAMS).await.unwrap();
        cache.champion = Some(CHAMPION.into());
        chain.block.store(100, Ordering::SeqCst);
        (log, chain, SentWeights::default(), cache)
    }

    #[tokio::test]
    async fn an_idle_tick_within_a_tempo_of_the_same_weights_reads_and_sends_nothing_more() {
        let dir = tempfile::tempdir().unwrap();
        let (log, chain, sent, mut cache) = champion_at_block_100(dir.path()).await;
        let first = set_weights(&log, &chain, &sent, DEFAULT_RATIO_PARAMS, &mut cache, 0).await.unwrap();
        assert!(matches!(&first, Some(Event::WeightsSet(w)) if w.uids == [3]), "{first:?}");
        assert_eq!(chain.sets.load(Ordering::SeqCst), 1);

        // Past the rate limit, inside the tempo: one limits read, no send.
        for block in [111, 111, 149] {
            chain.block.store(block, Ordering::SeqCst);
            let before = chain.limits_reads.load(Ordering::SeqCst);
            assert!(set_weights(&log, &chain, &sent, DEFAULT_RATIO_PARAMS, &mut cache, 0).await.unwrap().is_none());
            assert_eq!(chain.limits_reads.load(Ordering::SeqCst), before + 1, "at block {block}");
        }
        assert_eq!(chain.sets.load(Ordering::SeqCst), 1);
        // The neurons once per chain block: 100, 111 and 149.
        assert_eq!(chain.neurons_reads.load(Ordering::SeqCst), 3);

        chain.block.store(150, Ordering::SeqCst);
        assert!(
            set_weights(&log, &chain, &sent, DEFAULT_RATIO_PARAMS, &mut cache, 0).await.unwrap().is_some(),
            "the same weights go again a tempo later"
        );
        assert_eq!(chain.sets.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn weights_held_back_by_the_rate_limit_are_said_once_per_new_champion() {
        let dir = tempfile::tempdir().unwrap();
        let (log, chain, sent, mut cache) = champion_at_block_100(dir.path()).await;
        assert!(set_weights(&log, &chain, &sent, DEFAULT_RATIO_PARAMS, &mut cache, 0).await.unwrap().is_some());
        // Inside the limit with the weights just sent: nothing waits.
        chain.block.store(104, Ordering::SeqCst);
        assert!(set_weights(&log, &chain, &sent, DEFAULT_RATIO_PARAMS, &mut cache, 0).await.unwrap().is_none());
        assert!(!cache.take_new_hold());
        // A new champion inside the limit: held, and said once however many blocks pass.
        cache.champion = Some("5NewChampion".into());
        for block in [105, 106, 107] {
            chain.block.store(block, Ordering::SeqCst);
            assert!(set_weights(&log, &chain, &sent, DEFAULT_RATIO_PARAMS, &mut cache, 0).await.unwrap().is_none());
            assert_eq!(cache.take_new_hold(), block == 105, "at block {block}");
        }
        assert_eq!(chain.sets.load(Ordering::SeqCst), 1);
    }
}
