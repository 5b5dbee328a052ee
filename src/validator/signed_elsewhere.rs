//! Before a validator's first signature after a start: how far its own log went, by
//! every source it can reach (its commitment on chain, its archive, its peers), against
//! what its store holds. A data directory restored whole from an older backup passes
//! the signing record's check (`ledger::signed`: the record came back with the store),
//! and signing on it would put a second block at a height the network already holds
//! from this key: proof of equivocation, vTrust 0. Ethereum validators meet the same
//! problem with slashing protection and answer it with doppelganger detection; this is
//! the same idea on what af has: a source ahead of the store holds blocks this key
//! signed, so the writer waits (its peers' blocks of its own log come back by sync) and
//! refuses to sign, naming the source, if they do not.

use crate::bytes::{Hash32, ValidatorKey};
use crate::chain::Chain;
use crate::http::archive::Site;
use crate::ledger::proof::SignedHeader;
use crate::ledger::{Store, StoreError};
use crate::p2p::net::NetStatus;
use std::time::Duration;
use tokio::sync::watch;

/// How long a start waits for its peers to say how far they hold its log, and for sync
/// to bring back what they hold beyond its store.
pub const CATCH_UP_WAIT: Duration = Duration::from_secs(60);

/// How long a start waits for a first peer before it judges without peers.
const FIRST_PEER_WAIT: Duration = Duration::from_secs(5);

/// Once a peer is connected, how long its answer to our first request for tips may take.
const TIPS_ANSWER_WAIT: Duration = Duration::from_millis(1_500);

/// One source's word on how far our log went: a block our key signed there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// The source, in words an operator can act on.
    pub source: String,
    pub height: u64,
    /// The block's hash, where the source names it (a peer's claim names its height).
    pub hash: Option<Hash32>,
}

/// What the sources say of the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No source knows a block of ours the store does not hold.
    Clear,
    /// A source holds our log beyond the store (the furthest one).
    Behind(Seen),
    /// A source names another block than the store's at a height the store holds: the
    /// store's log is not the one the network holds.
    OtherHistory { seen: Seen, ours: Option<Hash32> },
}

#[derive(Debug, thiserror::Error)]
pub enum SignedElsewhereError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error(
        "{} holds this key's log ({validator}) up to height {}, but the store holds it only up to {held}: the data directory was restored from an older copy, or lost blocks. Nothing was signed. \
Bring the log back, then start again: `af mirror --from URL --data {data} --validator {validator}` (a peer's or the archive's URL), or `af ledger import --data {data} --file EXPORT`",
        seen.source, seen.height
    )]
    Behind { seen: Seen, held: String, validator: ValidatorKey, data: String },
    #[error(
        "{} names block {} at height {} of this key's log ({validator}), but the store holds {} there: this store's log is not the one the network holds. Nothing was signed. \
Do not sign on this store: move it aside and mirror the log the network holds (`af mirror --from URL --data NEW_DIR --validator {validator}`)",
        seen.source, seen.hash.map_or("?".into(), |h| h.to_hex()), seen.height, ours.map_or("no block".into(), |h| h.to_hex())
    )]
    OtherHistory { seen: Seen, ours: Option<Hash32>, validator: ValidatorKey },
}

/// Judges `seen` against `validator`'s log in `store`.
pub fn judge(store: &Store, validator: &ValidatorKey, seen: &[Seen]) -> Result<Verdict, StoreError> {
    let tip = store.tip(validator)?;
    let mut behind: Option<&Seen> = None;
    for s in seen {
        match tip {
            Some(tip) if s.height <= tip.height => {
                let Some(hash) = s.hash else { continue };
                let ours = match s.height == tip.height {
                    true => Some(tip.hash),
                    false => store.signed_headers(validator, s.height, s.height)?.first().map(|(h, _)| h.hash()),
                };
                if ours != Some(hash) {
                    return Ok(Verdict::OtherHistory { seen: s.clone(), ours });
                }
            }
            _ => {
                if behind.is_none_or(|b| s.height > b.height) {
                    behind = Some(s);
                }
            }
        }
    }
    Ok(behind.map_or(Verdict::Clear, |s| Verdict::Behind(s.clone())))
}

/// What the chain, the archive and the peers say now. A source that does not answer is
/// skipped, and said: the check is of every source reachable.
pub async fn gather(
    validator: &ValidatorKey,
    chain: Option<&dyn Chain>,
    archive: Option<&Site>,
    status: Option<&watch::Receiver<NetStatus>>,
) -> Vec<Seen> {
    let mut seen = Vec::new();
    if let Some(chain) = chain {
        let hotkey = chain.hotkey();
        match chain.commitments().await {
            Ok(records) => seen.extend(
                records
                    .iter()
                    .filter(|r| Some(r.hotkey.as_str()) == hotkey.as_deref())
                    .filter_map(|r| r.ledger().filter(|c| c.ledger_key == *validator).map(|c| (r, c)))
                    .map(|(r, c)| Seen {
                        source: format!("the chain's commitment of hotkey {} (chain block {})", r.hotkey, r.block),
                        height: c.tip_height,
                        hash: Some(c.tip_hash),
                    }),
            ),
            Err(error) => tracing::warn!(event = "signed_elsewhere_unread", source = "chain", %error,
                "could not read our commitment before signing; going on without it"),
        }
    }
    if let Some(site) = archive {
        let path = crate::http::layout::tip_path(validator);
        let read = site.get(&path, crate::http::layout::MAX_TIP_BYTES).await;
        match read.map(|bytes| bytes.map(|b| serde_json::from_slice::<SignedHeader>(&b))) {
            Ok(None) => {}
            Ok(Some(Ok(tip))) => {
                let hash = tip.header.hash();
                // Only our key's signature makes it ours: an archive cannot stop us with a tip it made.
                match tip.header.validator == *validator
                    && crate::ledger::block::check_signature(&tip.header, &hash, &tip.signature).is_ok()
                {
                    true => seen.push(Seen {
                        source: format!("the archive {site}"),
                        height: tip.header.height,
                        hash: Some(hash),
                    }),
                    false => tracing::warn!(
                        event = "signed_elsewhere_unread",
                        source = "archive",
                        "the archive's tip of our log is not signed by our key; not counted"
                    ),
                }
            }
            Ok(Some(Err(error))) => tracing::warn!(event = "signed_elsewhere_unread", source = "archive", %error,
                "the archive's tip of our log does not read; not counted"),
            Err(error) => tracing::warn!(event = "signed_elsewhere_unread", source = "archive", %error,
                "could not read the archive's tip of our log before signing; going on without it"),
        }
    }
    if let Some(status) = status {
        // A peer's claim is a header of our log it sent with our key's signature, checked.
        let status = status.borrow();
        seen.extend(status.peers.iter().filter_map(|peer| {
            peer.holds.get(validator).map(|height| Seen {
                source: format!("peer {}", peer.peer_id),
                height: *height,
                hash: None,
            })
        }));
    }
    seen
}

/// Waits until no source knows a block of our log the store does not hold (sync brings
/// our own blocks back from peers that hold them), for at most `patience` (a validator:
/// [`CATCH_UP_WAIT`]); then refuses, naming the source. `stop` ends the wait (returns
/// `Ok(false)`).
pub async fn wait_until_caught_up(
    store: &Store,
    validator: &ValidatorKey,
    (chain, archive, status): (Option<&dyn Chain>, Option<&Site>, Option<&watch::Receiver<NetStatus>>),
    (data, patience): (&std::path::Path, Duration),
    stop: &mut watch::Receiver<bool>,
) -> Result<bool, SignedElsewhereError> {
    let started = tokio::time::Instant::now();
    let mut said = false;
    // Peers say how far they hold our log in their first answer to our tips request. A
    // store with none of our log waits for no one: a key that never stored a block here
    // is new, or lost its directory whole, which its chain commitment tells.
    if let Some(status) = status.filter(|_| matches!(store.tip(validator), Ok(Some(_)))) {
        let mut first_peer: Option<tokio::time::Instant> = None;
        loop {
            let now = tokio::time::Instant::now();
            if first_peer.is_none() && !status.borrow().peers.is_empty() {
                first_peer = Some(now);
            }
            let waited_for_peers = match first_peer {
                Some(at) => now - at >= TIPS_ANSWER_WAIT,
                None => now - started >= FIRST_PEER_WAIT,
            };
            if waited_for_peers || *stop.borrow() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    loop {
        if *stop.borrow() {
            return Ok(false);
        }
        let seen = gather(validator, chain, archive, status).await;
        match judge(store, validator, &seen)? {
            Verdict::Clear => {
                if !seen.is_empty() {
                    tracing::info!(
                        event = "signed_elsewhere_checked",
                        sources = seen.len(),
                        "no source holds a block of our log the store does not: signing"
                    );
                }
                return Ok(true);
            }
            Verdict::OtherHistory { seen, ours } => {
                return Err(SignedElsewhereError::OtherHistory { seen, ours, validator: *validator })
            }
            Verdict::Behind(seen) if started.elapsed() >= patience => {
                let held = store.tip(validator)?.map_or("no block".into(), |t| format!("height {}", t.height));
                let data = data.display().to_string();
                return Err(SignedElsewhereError::Behind { seen, held, validator: *validator, data });
            }
            Verdict::Behind(seen) => {
                if !std::mem::replace(&mut said, true) {
                    tracing::warn!(event = "catching_up_own_log", source = %seen.source, height = seen.height,
                        "{} holds our log up to height {}, past our store: waiting for it before signing", seen.source, seen.height);
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    changed = stop.changed() => {
                        // No one can stop us any more: the process is ending.
                        if changed.is_err() {
                            return Ok(false);
                        }
                    }
                }
            }
        }
    }
}
