//! The chain's miners as the validator loop reads them: until the read succeeds (a chain
//! that is down is retried with backoff, never fatal) and until the queue holds a
//! contender; and the contestants a log's miners are on chain now. The deciding is
//! `discovery`'s (pure); this is its IO.

use super::config::Config;
use super::discovery::{self, Candidate, Discovery};
use super::matchrun::Contestant;
use crate::ledger::event::MinerRef;
use tokio::sync::watch;

/// A chain candidate as a contestant: the log records `MODEL@REVISION`.
pub(super) fn candidate_contestant(candidate: &Candidate) -> Contestant {
    Contestant {
        miner: MinerRef {
            hotkey: candidate.hotkey.clone(),
            uid: candidate.uid,
            model: discovery::recorded_model(&candidate.commitment),
        },
        endpoint: discovery::endpoint_of(&candidate.commitment),
    }
}

/// The miner a log names, found among the chain's valid commitments by hotkey (its
/// current commitment gives the endpoint; its recorded model stays as the log has it).
pub(super) fn from_chain(found: &Discovery, miner: &MinerRef) -> Option<Contestant> {
    let candidate = found.valid.iter().find(|c| c.hotkey == miner.hotkey)?;
    let mut contestant = candidate_contestant(candidate);
    contestant.miner.model = miner.model.clone();
    Some(contestant)
}

/// Reads the chain's miners until the read succeeds or a stop is asked for (then an
/// empty discovery). A chain that is down is retried with backoff, never fatal.
pub(super) async fn discover_until_found(
    chain: &dyn crate::chain::Chain,
    champion: Option<&MinerRef>,
    played: &(dyn discovery::PlayedModels + Sync),
    (stop, config, metrics): (&watch::Receiver<bool>, &Config, &crate::metrics::Metrics),
) -> Discovery {
    let mut wait_ms = 500u64;
    let mut outage = crate::chain::outage::Outage::default();
    loop {
        match discover_once(chain, champion, played).await {
            Ok(found) => {
                metrics.miners_read(true, crate::clock::unix_ms());
                if let crate::chain::outage::Said::Back { down_s } = outage.answered(crate::clock::unix_ms()) {
                    tracing::info!(
                        event = "discovery_read",
                        down_s,
                        "the chain's miners read again, after {down_s:.1} s"
                    );
                }
                return found;
            }
            Err(error) => {
                metrics.miners_read(false, crate::clock::unix_ms());
                if outage.failed(crate::clock::unix_ms()) == crate::chain::outage::Said::Down {
                    tracing::warn!(event = "discovery_failed", error = %error, retry_ms = wait_ms, "reading the chain's miners failed; retrying (said once per outage)");
                }
            }
        }
        if wait_or_stop(stop, wait_ms).await {
            return Discovery::default();
        }
        wait_ms = (wait_ms * 2).min(config.chain.discover_every_ms.max(500));
    }
}

/// Reads the chain's miners until the queue has a contender (`None` on a stop),
/// every `discover_every_ms` while there is none.
pub(super) async fn discover_until_contender(
    chain: &dyn crate::chain::Chain,
    champion: Option<&MinerRef>,
    played: &(dyn discovery::PlayedModels + Sync),
    (stop, config, metrics): (&watch::Receiver<bool>, &Config, &crate::metrics::Metrics),
) -> Option<Discovery> {
    let mut said_idle = false;
    loop {
        let found = discover_until_found(chain, champion, played, (stop, config, metrics)).await;
        if *stop.borrow() {
            return None;
        }
        if !found.queue.is_empty() {
            return Some(found);
        }
        if !said_idle {
            tracing::info!(
                event = "queue_empty",
                every_ms = config.chain.discover_every_ms,
                "no contender on chain; watching for new commitments"
            );
            said_idle = true;
        }
        if wait_or_stop(stop, config.chain.discover_every_ms).await {
            return None;
        }
    }
}

async fn discover_once(
    chain: &dyn crate::chain::Chain,
    champion: Option<&MinerRef>,
    played: &(dyn discovery::PlayedModels + Sync),
) -> Result<Discovery, crate::chain::ChainError> {
    let block = chain.current_block().await?;
    let neurons = chain.neurons().await?;
    let records = chain.commitments().await?;
    let mut found = discovery::queue_of(&neurons, &records, champion, played);
    found.read_at_block = block;
    for skipped in &found.skipped {
        tracing::debug!(event = "miner_skipped", skipped = ?skipped, "not a contender");
    }
    Ok(found)
}

/// Sleeps `ms`, or less if a stop is asked for; true when stopped.
pub(super) async fn wait_or_stop(stop: &watch::Receiver<bool>, ms: u64) -> bool {
    let mut stop = stop.clone();
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(std::time::Duration::from_millis(ms)) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}

/// The `ChampionLeft` tag: a protocol version records a champion's leaving from its
/// activation on (ledger-spec/13, 15).
const CHAMPION_LEFT_TAG: u32 = 13;

/// Whether the protocol version active at `block` records a champion's leaving.
pub(super) fn records_leaving(protocol: &crate::protocol::Protocol, block: u64) -> bool {
    protocol.version_at(block).refuses_kind(CHAMPION_LEFT_TAG).is_none()
}

/// Reads the chain's miners for a log whose champion is `champion`, until the champion
/// stands, or has left (ledger-spec/13, "The champion's life") at a block whose protocol
/// version records leaving: the read, `champion_left` set only then. While it has left
/// before that version, the network has no way to agree that it did: the validator
/// waits, says so once, and reads again every `discover_every_ms` (`None` on a stop).
pub(super) async fn discover_champion(
    chain: &dyn crate::chain::Chain,
    champion: &MinerRef,
    played: &(dyn discovery::PlayedModels + Sync),
    protocol: &crate::protocol::Protocol,
    (stop, config, metrics): (&watch::Receiver<bool>, &Config, &crate::metrics::Metrics),
) -> Option<Discovery> {
    let mut said = false;
    loop {
        let found = discover_until_found(chain, Some(champion), played, (stop, config, metrics)).await;
        if *stop.borrow() {
            return None;
        }
        let Some(reason) = found.champion_left else { return Some(found) };
        if records_leaving(protocol, found.read_at_block) {
            return Some(found);
        }
        if !said {
            tracing::warn!(
                event = "champion_absent",
                champion = %champion.hotkey,
                reason = ?reason,
                "the champion {} no longer holds the crown on chain ({reason:?}), but the protocol version at block {} cannot record it; waiting for it to come back or for the version that can",
                champion.hotkey,
                found.read_at_block
            );
            said = true;
        }
        if wait_or_stop(stop, config.chain.discover_every_ms).await {
            return None;
        }
    }
}

/// The event that records `champion`'s leaving as `found` showed it, if it left.
pub(super) fn leaving(champion: &MinerRef, found: &Discovery) -> Option<crate::ledger::event::ChampionLeft> {
    let reason = found.champion_left?;
    tracing::info!(
        event = "champion_left",
        champion = %champion.hotkey,
        reason = ?reason,
        chain_block = found.read_at_block,
        "the champion {} left the crown without a match ({reason:?} at chain block {}); the queue's first miner holds it until a match says otherwise",
        champion.hotkey,
        found.read_at_block
    );
    Some(crate::ledger::event::ChampionLeft { champion: champion.clone(), reason, chain_block: found.read_at_block })
}

/// Reads until the queue holds a miner other than `departed`, a champion that left the
/// crown (ledger-spec/13: it holds it again only by winning it): the read, and the first
/// such miner, who holds the crown until a match says otherwise (`None` on a stop).
pub(super) async fn discover_successor(
    chain: &dyn crate::chain::Chain,
    departed: &str,
    played: &(dyn discovery::PlayedModels + Sync),
    (stop, config, metrics): (&watch::Receiver<bool>, &Config, &crate::metrics::Metrics),
) -> Option<(Discovery, Contestant)> {
    loop {
        let found = discover_until_contender(chain, None, played, (stop, config, metrics)).await?;
        if let Some(next) = found.queue.iter().find(|c| c.hotkey != departed) {
            let next = candidate_contestant(next);
            return Some((found, next));
        }
        if wait_or_stop(stop, config.chain.discover_every_ms).await {
            return None;
        }
    }
}
