//! The log-sync protocol as an IO-less state machine: fed inputs (a peer came or went, a
//! gossip message, a request, a response, a tick of the clock) with the time, it returns
//! what to do (publish, report a gossip validation result, send a request or response,
//! record evidence, punish a peer). The libp2p actor in `net.rs` does the IO; the
//! seeded simulator in the tests drives the same machine with loss, delay, duplication
//! and reordering.
//!
//! How logs converge: a new block is announced by gossip as its signed header; a
//! receiver checks the signature, fetches the missing range from the peer that sent it,
//! stores only blocks that decode canonically, verify and link, and only then tells
//! gossip to forward the announcement (so nothing is forwarded before it is verified,
//! and whoever receives it can fetch the blocks from whoever forwarded it). Gossip is
//! the fast path; every `tips_interval_ms` each peer is also asked for all its tips, so
//! lost announcements and late joiners are repaired by plain anti-entropy.
//!
//! Two validly signed, different headers at one height are equivocation: the evidence
//! is handed out once (the caller records it in our own log) and nothing of that
//! validator past the fork is accepted any more.

use super::blocks::BlockStore;
use super::wire::{self, Gossip, Request, Response, SignedHeader, MAX_BLOCKS_PER_REQUEST, MAX_TIPS};
use crate::bytes::ValidatorKey;
use crate::ledger::block::SealedBlock;
use crate::ledger::event::Evidence;
use crate::ledger::store::{Appended, StoreError};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// A token the IO layer gives a gossip message so its validation can be reported later.
pub type MessageToken = u64;
/// A token the IO layer gives an inbound request so it can be answered.
pub type ChannelToken = u64;
/// Our id for an outbound request.
pub type RequestId = u64;

#[derive(Clone, Debug)]
pub struct SyncConfig {
    /// Ask every peer for its tips this often (anti-entropy).
    pub tips_interval_ms: u64,
    /// Give up on a request (and a pending gossip validation) after this long.
    pub request_timeout_ms: u64,
    /// Blocks asked for per request.
    pub blocks_per_request: u32,
    /// Bytes of blocks put in one response (at least one block is always sent).
    pub response_bytes: u64,
    /// Validators whose logs we keep; `None` keeps every validly signed log.
    pub allowed: Option<BTreeSet<ValidatorKey>>,
    /// Validators already caught equivocating, and the height of the fork (from our log).
    pub forked: BTreeMap<ValidatorKey, u64>,
}

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig {
            tips_interval_ms: 2_000,
            request_timeout_ms: 10_000,
            blocks_per_request: 256,
            response_bytes: 16 * 1024 * 1024,
            allowed: None,
            forked: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validation {
    /// Verified: forward it.
    Accept,
    /// Invalid: drop it and count it against the sender.
    Reject,
    /// Valid but useless (old, a duplicate, unverifiable in time): drop it.
    Ignore,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input<P> {
    Tick,
    PeerConnected(P),
    PeerDisconnected(P),
    Gossip {
        from: P,
        token: MessageToken,
        data: Vec<u8>,
    },
    Request {
        from: P,
        channel: ChannelToken,
        data: Vec<u8>,
    },
    Response {
        from: P,
        request: RequestId,
        data: Vec<u8>,
    },
    RequestFailed {
        request: RequestId,
    },
    /// Our own writer stored a new block of ours: announce it.
    OwnBlock {
        validator: ValidatorKey,
        height: u64,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output<P> {
    Publish(Vec<u8>),
    Validate {
        token: MessageToken,
        from: P,
        result: Validation,
    },
    SendRequest {
        to: P,
        request: RequestId,
        data: Vec<u8>,
    },
    Respond {
        channel: ChannelToken,
        data: Vec<u8>,
    },
    /// Record this in our own log (once per validator and height).
    Evidence(Box<Evidence>),
    /// The peer sent something invalid outside gossip; the IO layer should drop it.
    Misbehaved {
        peer: P,
        reason: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{0}")]
    Store(#[from] StoreError),
}

#[derive(Clone, Debug)]
struct Fetch<P> {
    peer: P,
    validator: ValidatorKey,
    from_height: u64,
    deadline_ms: u64,
}

#[derive(Clone, Debug)]
struct PendingGossip<P> {
    from: P,
    signed: SignedHeader,
    deadline_ms: u64,
}

/// Counters for status displays and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SyncCounters {
    pub blocks_stored: u64,
    pub bytes_stored: u64,
    pub gossip_rejected: u64,
    pub peers_misbehaved: u64,
    pub evidence: u64,
}

pub struct Sync<P> {
    config: SyncConfig,
    /// Connected peers and the highest height each is known to hold per validator.
    peers: BTreeMap<P, BTreeMap<ValidatorKey, u64>>,
    /// Outbound block requests, by id; at most one per validator.
    fetches: BTreeMap<RequestId, Fetch<P>>,
    tips_requests: BTreeMap<RequestId, (P, u64)>,
    pending: BTreeMap<MessageToken, PendingGossip<P>>,
    forked: BTreeMap<ValidatorKey, u64>,
    evidence_given: BTreeSet<(ValidatorKey, u64)>,
    next_request: RequestId,
    next_tips_ms: u64,
    pub counters: SyncCounters,
}

impl<P: Ord + Clone + std::fmt::Debug> Sync<P> {
    pub fn new(config: SyncConfig) -> Sync<P> {
        let forked = config.forked.clone();
        let evidence_given = forked.iter().map(|(v, h)| (*v, *h)).collect();
        Sync {
            config,
            peers: BTreeMap::new(),
            fetches: BTreeMap::new(),
            tips_requests: BTreeMap::new(),
            pending: BTreeMap::new(),
            forked,
            evidence_given,
            next_request: 0,
            next_tips_ms: 0,
            counters: SyncCounters::default(),
        }
    }

    /// Validators caught equivocating, with the fork height.
    pub fn forked(&self) -> &BTreeMap<ValidatorKey, u64> {
        &self.forked
    }

    /// Connected peers and what each is known to hold.
    pub fn peers(&self) -> &BTreeMap<P, BTreeMap<ValidatorKey, u64>> {
        &self.peers
    }

    /// Replaces the allow-list (the chain's validators changed): logs already kept stay,
    /// new blocks are accepted only from validators now allowed.
    pub fn set_allowed(&mut self, allowed: Option<BTreeSet<ValidatorKey>>) {
        self.config.allowed = allowed;
    }

    fn allowed(&self, validator: &ValidatorKey) -> bool {
        self.config.allowed.as_ref().is_none_or(|set| set.contains(validator))
    }

    /// Heights at or above the fork of an equivocating validator are not accepted.
    fn accepts_height(&self, validator: &ValidatorKey, height: u64) -> bool {
        self.forked.get(validator).is_none_or(|fork| height < *fork)
    }

    pub fn handle(
        &mut self,
        input: Input<P>,
        now_ms: u64,
        store: &dyn BlockStore,
    ) -> Result<Vec<Output<P>>, SyncError> {
        let mut out = Vec::new();
        match input {
            Input::Tick => {}
            Input::PeerConnected(peer) => {
                self.peers.entry(peer.clone()).or_default();
                self.request_tips(peer, now_ms, &mut out);
            }
            Input::PeerDisconnected(peer) => {
                self.peers.remove(&peer);
                self.fetches.retain(|_, f| f.peer != peer);
                self.tips_requests.retain(|_, (p, _)| *p != peer);
            }
            Input::Gossip { from, token, data } => self.on_gossip(from, token, &data, now_ms, store, &mut out)?,
            Input::Request { from, channel, data } => self.on_request(from, channel, &data, store, &mut out)?,
            Input::Response { from, request, data } => self.on_response(from, request, &data, store, &mut out)?,
            Input::RequestFailed { request } => {
                self.fetches.remove(&request);
                self.tips_requests.remove(&request);
            }
            Input::OwnBlock { validator, height } => {
                if let Some((header, signature)) = store.signed_header(&validator, height)? {
                    out.push(Output::Publish(wire::encode_gossip(&Gossip::Announce(SignedHeader {
                        header,
                        signature,
                    }))));
                }
            }
        }
        self.on_time(now_ms, store, &mut out)?;
        Ok(out)
    }

    /// Timeouts, anti-entropy and starting the fetches that are due.
    fn on_time(&mut self, now_ms: u64, store: &dyn BlockStore, out: &mut Vec<Output<P>>) -> Result<(), SyncError> {
        self.fetches.retain(|_, f| f.deadline_ms > now_ms);
        self.tips_requests.retain(|_, (_, deadline)| *deadline > now_ms);
        let expired: Vec<MessageToken> =
            self.pending.iter().filter(|(_, p)| p.deadline_ms <= now_ms).map(|(t, _)| *t).collect();
        for token in expired {
            let pending = self.pending.remove(&token).expect("listed above");
            out.push(Output::Validate { token, from: pending.from, result: Validation::Ignore });
        }
        if now_ms >= self.next_tips_ms {
            self.next_tips_ms = now_ms + self.config.tips_interval_ms;
            let peers: Vec<P> = self.peers.keys().cloned().collect();
            for peer in peers {
                if !self.tips_requests.values().any(|(p, _)| *p == peer) {
                    self.request_tips(peer, now_ms, out);
                }
            }
        }
        self.start_fetches(now_ms, store, out)
    }

    fn request_tips(&mut self, peer: P, now_ms: u64, out: &mut Vec<Output<P>>) {
        let request = self.next_request();
        self.tips_requests.insert(request, (peer.clone(), now_ms + self.config.request_timeout_ms));
        out.push(Output::SendRequest { to: peer, request, data: wire::encode_request(&Request::Tips) });
    }

    fn next_request(&mut self) -> RequestId {
        self.next_request += 1;
        self.next_request
    }

    /// For every validator some peer holds more of than we do, and no fetch is running,
    /// ask the peer that holds the most (ties: the first in order, for determinism).
    fn start_fetches(
        &mut self,
        now_ms: u64,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        let mut best: BTreeMap<ValidatorKey, (u64, P)> = BTreeMap::new();
        for (peer, tips) in &self.peers {
            for (validator, height) in tips {
                if best.get(validator).is_none_or(|(h, _)| height > h) {
                    best.insert(*validator, (*height, peer.clone()));
                }
            }
        }
        for (validator, (height, peer)) in best {
            if self.fetches.values().any(|f| f.validator == validator) {
                continue;
            }
            let next = store.tip(&validator)?.map_or(0, |t| t.height + 1);
            if next > height || !self.accepts_height(&validator, next) {
                continue;
            }
            let request = self.next_request();
            let max_blocks = self.config.blocks_per_request.clamp(1, MAX_BLOCKS_PER_REQUEST);
            self.fetches.insert(
                request,
                Fetch {
                    peer: peer.clone(),
                    validator,
                    from_height: next,
                    deadline_ms: now_ms + self.config.request_timeout_ms,
                },
            );
            let data = wire::encode_request(&Request::Blocks { validator, from_height: next, max_blocks });
            out.push(Output::SendRequest { to: peer, request, data });
        }
        Ok(())
    }

    /// Checks a signed header against what we store; records equivocation. Returns
    /// whether the header is news (above our tip) and acceptable.
    fn consider_header(
        &mut self,
        signed: &SignedHeader,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<HeaderVerdict, SyncError> {
        let validator = signed.validator();
        if !self.allowed(&validator) {
            return Ok(HeaderVerdict::NotAllowed);
        }
        let height = signed.header.height;
        let tip = store.tip(&validator)?;
        // The same header as a stored block needs no second signature check: tips
        // rounds repeat what we hold, and verifying each again would dominate.
        let claimed = signed.hash();
        if tip.is_some_and(|t| height <= t.height) && store.hash_at(&validator, height)? == Some(claimed) {
            return Ok(HeaderVerdict::Known);
        }
        let hash = match signed.check() {
            Ok(hash) => hash,
            Err(e) => return Ok(HeaderVerdict::Invalid(e.to_string())),
        };
        if tip.is_some_and(|t| height <= t.height) {
            let (stored_header, stored_signature) =
                store.signed_header(&validator, height)?.expect("a height at or below the tip is stored");
            if stored_header.hash() == hash {
                return Ok(HeaderVerdict::Known);
            }
            self.equivocation(
                Evidence {
                    validator,
                    height,
                    header_a: stored_header,
                    signature_a: stored_signature,
                    header_b: signed.header.clone(),
                    signature_b: signed.signature,
                },
                out,
            );
            return Ok(HeaderVerdict::Equivocation);
        }
        if !self.accepts_height(&validator, height) {
            return Ok(HeaderVerdict::Known);
        }
        Ok(HeaderVerdict::News)
    }

    fn equivocation(&mut self, evidence: Evidence, out: &mut Vec<Output<P>>) {
        let fork = self.forked.entry(evidence.validator).or_insert(evidence.height);
        *fork = (*fork).min(evidence.height);
        if self.evidence_given.insert((evidence.validator, evidence.height)) {
            self.counters.evidence += 1;
            out.push(Output::Evidence(Box::new(evidence)));
        }
    }

    fn on_gossip(
        &mut self,
        from: P,
        token: MessageToken,
        data: &[u8],
        now_ms: u64,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        let reject = |out: &mut Vec<Output<P>>, counters: &mut SyncCounters| {
            counters.gossip_rejected += 1;
            out.push(Output::Validate { token, from: from.clone(), result: Validation::Reject });
        };
        let Ok(Gossip::Announce(signed)) = wire::decode_gossip(data) else {
            reject(out, &mut self.counters);
            return Ok(());
        };
        match self.consider_header(&signed, store, out)? {
            HeaderVerdict::Invalid(_) => reject(out, &mut self.counters),
            HeaderVerdict::Known | HeaderVerdict::NotAllowed => {
                out.push(Output::Validate { token, from, result: Validation::Ignore })
            }
            // Forward proof of equivocation so every validator learns of it.
            HeaderVerdict::Equivocation => out.push(Output::Validate { token, from, result: Validation::Accept }),
            HeaderVerdict::News => {
                let validator = signed.validator();
                let height = signed.header.height;
                let known = self.peers.entry(from.clone()).or_default().entry(validator).or_insert(0);
                *known = (*known).max(height);
                self.pending.insert(
                    token,
                    PendingGossip { from, signed, deadline_ms: now_ms + self.config.request_timeout_ms },
                );
            }
        }
        Ok(())
    }

    fn on_request(
        &mut self,
        from: P,
        channel: ChannelToken,
        data: &[u8],
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        let response = match wire::decode_request(data) {
            // A request cut off by a dropped connection proves nothing: drop it unanswered.
            Err(e) if e.is_truncated() => return Ok(()),
            Err(e) => {
                self.counters.peers_misbehaved += 1;
                out.push(Output::Misbehaved { peer: from, reason: format!("bad request: {e}") });
                return Ok(());
            }
            Ok(Request::Tips) => {
                let mut tips = Vec::new();
                for (validator, tip) in store.tips()?.into_iter().take(MAX_TIPS) {
                    if let Some((header, signature)) = store.signed_header(&validator, tip.height)? {
                        tips.push(SignedHeader { header, signature });
                    }
                }
                Response::Tips(tips)
            }
            Ok(Request::Blocks { validator, from_height, max_blocks }) => {
                let mut blocks = Vec::new();
                let mut bytes = 0u64;
                let max_blocks = max_blocks.min(MAX_BLOCKS_PER_REQUEST);
                for height in from_height..from_height.saturating_add(u64::from(max_blocks)) {
                    let Some(block) = store.block_bytes(&validator, height)? else { break };
                    if !blocks.is_empty() && bytes + block.len() as u64 > self.config.response_bytes {
                        break;
                    }
                    bytes += block.len() as u64;
                    blocks.push(block);
                }
                Response::Blocks(blocks)
            }
        };
        let data = wire::encode_response(&response).expect("responses are built within the limits");
        out.push(Output::Respond { channel, data });
        Ok(())
    }

    fn on_response(
        &mut self,
        from: P,
        request: RequestId,
        data: &[u8],
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        let fetch = self.fetches.remove(&request);
        let tips_request = self.tips_requests.remove(&request);
        if fetch.is_none() && tips_request.is_none() {
            return Ok(()); // timed out already, or not ours
        }
        let response = match wire::decode_response(data) {
            Ok(response) => response,
            // Cut off in transit (a dropped connection): the fetch is retried, nobody blamed.
            Err(e) if e.is_truncated() => return Ok(()),
            Err(e) => {
                self.misbehaved(from, format!("bad response: {e}"), out);
                return Ok(());
            }
        };
        match (response, fetch) {
            (Response::Tips(tips), None) => {
                for signed in tips {
                    match self.consider_header(&signed, store, out)? {
                        HeaderVerdict::Invalid(reason) => {
                            self.misbehaved(from, format!("bad tip: {reason}"), out);
                            return Ok(());
                        }
                        HeaderVerdict::NotAllowed => continue,
                        HeaderVerdict::News | HeaderVerdict::Known | HeaderVerdict::Equivocation => {
                            if let Some(tips) = self.peers.get_mut(&from) {
                                let known = tips.entry(signed.validator()).or_insert(0);
                                *known = (*known).max(signed.header.height);
                            }
                        }
                    }
                }
            }
            (Response::Blocks(blocks), Some(fetch)) => {
                self.store_blocks(from, &fetch, blocks, store, out)?;
            }
            _ => self.misbehaved(from, "response of the wrong kind".into(), out),
        }
        self.resolve_pending(store, out)?;
        Ok(())
    }

    fn store_blocks(
        &mut self,
        from: P,
        fetch: &Fetch<P>,
        blocks: Vec<Vec<u8>>,
        store: &dyn BlockStore,
        out: &mut Vec<Output<P>>,
    ) -> Result<(), SyncError> {
        if blocks.is_empty() {
            // The peer does not hold what it was thought to: forget the claim, so the
            // next fetch goes to someone else (or waits for the next tips round).
            if let Some(tips) = self.peers.get_mut(&from) {
                tips.insert(fetch.validator, fetch.from_height.saturating_sub(1));
                if fetch.from_height == 0 {
                    tips.remove(&fetch.validator);
                }
            }
        }
        // Decoding and checking signatures is the expensive part: all blocks at once.
        let decoded: Vec<(u64, Result<SealedBlock, crate::ledger::BlockError>)> =
            blocks.into_par_iter().map(|bytes| (bytes.len() as u64, SealedBlock::from_bytes(bytes))).collect();
        let mut checked: Vec<SealedBlock> = Vec::with_capacity(decoded.len());
        let mut sizes: Vec<u64> = Vec::with_capacity(decoded.len());
        // Why the blocks after the checked ones are not stored, if they are not.
        let mut stop: Option<Option<String>> = None;
        for (expected_height, (n_bytes, result)) in (fetch.from_height..).zip(decoded) {
            let sealed = match result {
                Ok(sealed) => sealed,
                Err(e) => {
                    stop = Some(Some(format!("bad block: {e}")));
                    break;
                }
            };
            let header = &sealed.decoded().block.header;
            if header.validator != fetch.validator || header.height != expected_height {
                stop = Some(Some("a block other than the one asked for".into()));
                break;
            }
            if !self.allowed(&header.validator) || !self.accepts_height(&header.validator, header.height) {
                stop = Some(None);
                break;
            }
            checked.push(sealed);
            sizes.push(n_bytes);
        }
        // The good prefix goes to the store in one durable write.
        let (appended, refused) = store.append_batch(&checked)?;
        for (done, n_bytes) in appended.iter().zip(&sizes) {
            if matches!(done, Appended::New(_)) {
                self.counters.blocks_stored += 1;
                self.counters.bytes_stored += n_bytes;
            }
        }
        if let Some((index, error)) = refused {
            let sealed = &checked[index];
            let header = sealed.decoded().block.header.clone();
            match error {
                StoreError::Conflict { .. } => {
                    let (stored_header, stored_signature) =
                        store.signed_header(&header.validator, header.height)?.expect("a conflicting block is stored");
                    self.equivocation(
                        Evidence {
                            validator: header.validator,
                            height: header.height,
                            header_a: stored_header,
                            signature_a: stored_signature,
                            header_b: header,
                            signature_b: sealed.decoded().block.signature,
                        },
                        out,
                    );
                }
                StoreError::Rejected { source, .. } => {
                    // Validly signed but not linking to what we hold: the validator forked
                    // below this height (evidence comes when the conflicting header does),
                    // or the peer holds a fork. Either way, not from this peer now.
                    self.misbehaved(from, format!("block does not link: {source}"), out);
                }
                other => return Err(other.into()),
            }
            return Ok(());
        }
        if let Some(Some(reason)) = stop {
            self.misbehaved(from, reason, out);
        }
        Ok(())
    }

    /// Gossip messages waiting for their blocks: accept those whose block is now stored.
    /// If a different block was stored at that height, the announcement is evidence.
    fn resolve_pending(&mut self, store: &dyn BlockStore, out: &mut Vec<Output<P>>) -> Result<(), SyncError> {
        let mut done = Vec::new();
        for (token, pending) in &self.pending {
            let (validator, height) = (pending.signed.validator(), pending.signed.header.height);
            if store.tip(&validator)?.is_some_and(|t| t.height >= height) {
                done.push(*token);
            }
        }
        for token in done {
            let pending = self.pending.remove(&token).expect("listed above");
            // Known (stored as announced) or equivocation (evidence recorded): both forwarded.
            let _ = self.consider_header(&pending.signed, store, out)?;
            out.push(Output::Validate { token, from: pending.from, result: Validation::Accept });
        }
        Ok(())
    }

    fn misbehaved(&mut self, peer: P, reason: String, out: &mut Vec<Output<P>>) {
        self.counters.peers_misbehaved += 1;
        self.peers.remove(&peer);
        self.fetches.retain(|_, f| f.peer != peer);
        out.push(Output::Misbehaved { peer, reason });
    }
}

enum HeaderVerdict {
    Invalid(String),
    /// A log we do not keep (not on the allow-list, which may change with the chain):
    /// ignored, its sender not blamed.
    NotAllowed,
    Known,
    News,
    Equivocation,
}
