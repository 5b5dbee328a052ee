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
//!
//! Bounded against hostile peers: each peer's requests and announcements are
//! rate-limited (a peer over the request rate is dropped; announcements over the rate
//! are ignored, and only a peer that stays over it past an allowance is dropped,
//! because an honest peer bursts when a partition heals); fetches are capped in total and per
//! peer and handed out round-robin over peers, so no peer's announcements can take the
//! slots honest chains need; at most `max_chains` logs are held; announcements waiting
//! for their blocks are capped; and evidence is recorded at most once per peer per
//! `evidence_interval_ms` (and, against validators not on an allow-list, at most
//! `EVIDENCE_BURST` per hour in total), so nobody can make us grow our own log at will.
//! Scheduling reads no store per chain: the heights we hold are cached in memory.

mod claims;
mod fetch;
mod trust;

pub use trust::Trust;

use super::blocks::BlockStore;
use super::wire::{self, Gossip, Request, SignedHeader, MAX_TIPS};
use crate::bytes::ValidatorKey;
use crate::ledger::event::Evidence;
use crate::ledger::store::StoreError;
use crate::limits::FUTURE_TOLERANCE_MS;
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
    /// Block requests in flight, in total and to one peer.
    pub max_fetches: usize,
    pub max_fetches_per_peer: usize,
    /// Most validators' logs held; announcements of further chains are ignored.
    pub max_chains: usize,
    /// A peer's requests and announcements: sustained rate per second, and burst.
    pub peer_requests_per_s: u32,
    pub peer_gossip_per_s: u32,
    /// Evidence from one peer is recorded at most once per this period.
    pub evidence_interval_ms: u64,
}

/// Announcements waiting for their blocks, at most.
pub const MAX_PENDING_GOSSIP: usize = 1024;
/// Evidence against validators not on an allow-list: at most this many per hour in total.
pub const EVIDENCE_BURST: u32 = 12;
/// A peer may send this many seconds' worth of its announcement rate beyond the rate
/// (a heal's burst), ignored, before it is blocked. The allowance refills at a tenth of
/// the rate, so a peer that goes on sending over 1.1 times the rate is blocked in the end,
/// and a flood within seconds.
pub const GOSSIP_EXCESS_SECS: u32 = 60;

impl Default for SyncConfig {
    fn default() -> Self {
        SyncConfig {
            tips_interval_ms: 2_000,
            request_timeout_ms: 10_000,
            blocks_per_request: 256,
            response_bytes: 16 * 1024 * 1024,
            allowed: None,
            forked: BTreeMap::new(),
            max_fetches: 8,
            max_fetches_per_peer: 2,
            max_chains: 1024,
            peer_requests_per_s: 100,
            peer_gossip_per_s: 100,
            evidence_interval_ms: 10 * 60 * 1000,
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
    /// A peer dialed us.
    PeerConnected(P),
    /// We dialed a peer (a configured address, or one the chain lists): the chains it
    /// claims are vouched for (`trust.rs`).
    DialedPeerConnected(P),
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
    /// The answer to our request broke a wire rule while it streamed in (over its size
    /// limit, too many tips): it was not read further, and its sender is blamed.
    BadResponse {
        from: P,
        request: RequestId,
        reason: String,
    },
    /// A request that broke a wire rule (over its size limit).
    BadRequest {
        from: P,
        reason: String,
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
    /// A one-block request for our own tip's height, sent after the peer's next block
    /// did not link to our tip: it finds which of the two the validator forked.
    probe: bool,
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
    /// Evidence not recorded yet because its sender, or everyone, is over the rate.
    pub evidence_deferred: u64,
    /// Announcements of chains beyond `max_chains`, or beyond the pending cap, ignored.
    pub announcements_ignored: u64,
    /// Announcements over their sender's rate, ignored unchecked (tips rounds repair).
    #[serde(default)]
    pub announcements_over_rate: u64,
    /// Peers whose next block did not link to our tip, asked for their block at our
    /// tip's height to prove the fork.
    #[serde(default)]
    pub forks_probed: u64,
    /// Blocks of a later protocol version than this build applies (an event kind it
    /// does not decode, ledger-spec/15): not stored, no blame on the sender, fetched again
    /// from a later tips round (after an upgrade, they store).
    #[serde(default)]
    pub blocks_of_later_versions: u64,
    /// Payload bytes of the responses we answered with, and of those we were answered
    /// with (duplicates and refused ones included): the sync traffic of this node.
    pub bytes_served: u64,
    pub bytes_received: u64,
}

/// A token bucket in thousandths of a token, refilled by the protocol's clock.
#[derive(Clone, Debug)]
struct Bucket {
    milli: u64,
    at_ms: u64,
}

impl Bucket {
    fn full(burst: u32, now_ms: u64) -> Bucket {
        Bucket { milli: u64::from(burst) * 1000, at_ms: now_ms }
    }

    /// Takes one token if there is one: `rate` tokens per `per_ms`, at most `burst` saved.
    fn take(&mut self, now_ms: u64, rate: u32, per_ms: u64, burst: u32) -> bool {
        let elapsed = now_ms.saturating_sub(self.at_ms);
        self.at_ms = self.at_ms.max(now_ms);
        let refill = elapsed.saturating_mul(u64::from(rate)).saturating_mul(1000) / per_ms.max(1);
        self.milli = self.milli.saturating_add(refill).min(u64::from(burst) * 1000);
        if self.milli >= 1000 {
            self.milli -= 1000;
            true
        } else {
            false
        }
    }
}

/// What we know of one connected peer.
#[derive(Clone, Debug)]
struct PeerState {
    /// The highest height of each validator's chain it is known to hold.
    holds: BTreeMap<ValidatorKey, u64>,
    requests: Bucket,
    gossip: Bucket,
    /// Announcements over `gossip`: `GOSSIP_EXCESS_SECS` of the rate, refilled at a
    /// tenth of it.
    gossip_excess: Bucket,
    /// Our block requests to it in flight.
    fetching: usize,
    /// Our own requests to it, paced at half the rate we allow a peer, so an honest node
    /// syncing many small chains from us (or we from it) is never taken for a flood.
    sent: Bucket,
    /// The hash of the last tip it told us of, per chain: a tips round that repeats it
    /// exactly costs a lookup; a different header at the same height is looked at again.
    seen: BTreeMap<ValidatorKey, crate::bytes::Hash32>,
    last_evidence_ms: Option<u64>,
    /// We dialed it: what it claims is vouched for.
    dialed: bool,
    /// The chains it claims, in the order it told us (its tips answer's order): within a
    /// tier, fetches follow it. May hold chains no longer in `holds` (skipped), at most
    /// twice `MAX_TIPS` before it is compacted.
    order: Vec<ValidatorKey>,
}

pub struct Sync<P> {
    config: SyncConfig,
    /// Connected peers: what each holds, its rates, our fetches from it.
    peers: BTreeMap<P, PeerState>,
    /// Outbound block requests, by id; at most one per validator.
    fetches: BTreeMap<RequestId, Fetch<P>>,
    /// Blocks held per validator (its tip height + 1), read from the store once.
    held: Option<BTreeMap<ValidatorKey, u64>>,
    /// Something changed that may let a fetch start.
    schedule: bool,
    /// Round-robin position: the peer after which the next scheduling turn starts.
    turn: Option<P>,
    /// Evidence against validators not on an allow-list, in total.
    evidence_unlisted: Bucket,
    tips_requests: BTreeMap<RequestId, (P, u64)>,
    pending: BTreeMap<MessageToken, PendingGossip<P>>,
    forked: BTreeMap<ValidatorKey, u64>,
    evidence_given: BTreeSet<(ValidatorKey, u64)>,
    next_request: RequestId,
    next_tips_ms: u64,
    /// Unix time in ms at the protocol clock's zero, when the caller knows it: what a
    /// block's `time_ms` is compared with on arrival ([`FUTURE_TOLERANCE_MS`]).
    wall_at_zero_ms: Option<u64>,
    /// Chains a peer we dialed claimed, and which peer (at most `trust::MAX_VOUCHED`).
    vouched: trust::Vouchers<P>,
    /// Our own chain, once our writer announced a block of it.
    own: Option<ValidatorKey>,
    pub counters: SyncCounters,
}

impl<P: Ord + Clone + std::fmt::Debug> Sync<P> {
    /// From now on, refuses to take blocks dated more than [`FUTURE_TOLERANCE_MS`] after
    /// the wall clock, which read `unix_ms` at the protocol clock's zero.
    pub fn with_wall_clock(mut self, unix_ms: u64) -> Sync<P> {
        self.wall_at_zero_ms = Some(unix_ms);
        self
    }

    /// Whether a block dated `time_ms` arrives too early to take at protocol time `now_ms`.
    fn too_early(&self, time_ms: u64, now_ms: u64) -> bool {
        self.wall_at_zero_ms
            .is_some_and(|zero| time_ms > zero.saturating_add(now_ms).saturating_add(FUTURE_TOLERANCE_MS))
    }

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
            held: None,
            schedule: true,
            turn: None,
            evidence_unlisted: Bucket::full(EVIDENCE_BURST, 0),
            next_request: 0,
            next_tips_ms: 0,
            wall_at_zero_ms: None,
            vouched: trust::Vouchers::new(),
            own: None,
            counters: SyncCounters::default(),
        }
    }

    /// Validators caught equivocating, with the fork height.
    pub fn forked(&self) -> &BTreeMap<ValidatorKey, u64> {
        &self.forked
    }

    /// Connected peers that have not said they hold `validator`'s chain up to `height`:
    /// what a stopping node waits for (a peer that keeps no copy of it costs the wait its
    /// grace period, no more).
    pub fn peers_lacking(&self, validator: &ValidatorKey, height: u64) -> usize {
        self.peers.values().filter(|state| state.holds.get(validator).is_none_or(|held| *held < height)).count()
    }

    /// Chains a connected peer says it holds more of than we do, and that we would take:
    /// what a stopping node still fetches before it closes, so two validators stopped at
    /// once still leave each other whole.
    pub fn chains_behind(&self) -> usize {
        let Some(held) = self.held.as_ref() else { return 0 };
        let mut behind = BTreeSet::new();
        for state in self.peers.values() {
            for (validator, claimed) in &state.holds {
                let next = held.get(validator).copied().unwrap_or(0);
                let room = next > 0 || self.trust(validator).room(held.len(), self.config.max_chains);
                if *claimed >= next && room && self.accepts_height(validator, next) {
                    behind.insert(*validator);
                }
            }
        }
        behind.len()
    }

    /// From now on, asks every peer for its tips every `interval_ms` (a tick), not every
    /// `tips_interval_ms`: a stopping node learns within a tick that its last block is
    /// held. Not on every input: a round would then follow each answer at once, one per
    /// round trip, and a peer would block us past its request rate.
    pub fn ask_tips_every(&mut self, interval_ms: u64) {
        self.config.tips_interval_ms = interval_ms.max(1);
        self.next_tips_ms = 0;
    }

    /// Connected peers and what each is known to hold.
    pub fn peers(&self) -> impl Iterator<Item = (&P, &BTreeMap<ValidatorKey, u64>)> {
        self.peers.iter().map(|(peer, state)| (peer, &state.holds))
    }

    fn peer(&mut self, peer: &P, now_ms: u64) -> &mut PeerState {
        let config = &self.config;
        self.peers.entry(peer.clone()).or_insert_with(|| PeerState {
            holds: BTreeMap::new(),
            requests: Bucket::full(config.peer_requests_per_s.saturating_mul(2), now_ms),
            gossip: Bucket::full(config.peer_gossip_per_s.saturating_mul(2), now_ms),
            gossip_excess: Bucket::full(config.peer_gossip_per_s.saturating_mul(GOSSIP_EXCESS_SECS), now_ms),
            fetching: 0,
            sent: Bucket::full(config.peer_requests_per_s, now_ms),
            seen: BTreeMap::new(),
            last_evidence_ms: None,
            dialed: false,
            order: Vec::new(),
        })
    }

    /// How far a chain is trusted (`trust.rs`).
    pub fn trust(&self, validator: &ValidatorKey) -> Trust {
        trust::TrustInputs { own: self.own.as_ref(), allowed: self.config.allowed.as_ref(), vouched: &self.vouched }
            .of(validator)
    }

    /// How far a chain is trusted once `peer` has claimed it.
    fn trust_claimed_by(&self, validator: &ValidatorKey, peer: &P) -> Trust {
        self.trust(validator).min(if self.vouches(peer) { Trust::Vouched } else { Trust::Stranger })
    }

    /// Whether what `peer` claims is vouched for: we dialed it.
    fn vouches(&self, peer: &P) -> bool {
        self.peers.get(peer).is_some_and(|s| s.dialed)
    }

    /// Blocks held of each validator, from the store the first time.
    fn held(&mut self, store: &dyn BlockStore) -> Result<&mut BTreeMap<ValidatorKey, u64>, SyncError> {
        if self.held.is_none() {
            let tips = store.tips()?;
            self.held = Some(tips.into_iter().map(|(v, tip)| (v, tip.height + 1)).collect());
        }
        Ok(self.held.as_mut().expect("filled above"))
    }

    /// Re-reads one validator's tip after we stored blocks of it.
    fn refresh_held(&mut self, validator: ValidatorKey, store: &dyn BlockStore) -> Result<(), SyncError> {
        let tip = store.tip(&validator)?;
        let held = self.held(store)?;
        match tip {
            Some(tip) => held.insert(validator, tip.height + 1),
            None => held.remove(&validator),
        };
        self.schedule = true;
        Ok(())
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
                self.peer(&peer, now_ms);
                self.request_tips(peer, now_ms, &mut out);
            }
            Input::DialedPeerConnected(peer) => {
                // A second connection to a peer (ours beside its own) only marks it.
                let new = !self.peers.contains_key(&peer);
                self.peer(&peer, now_ms).dialed = true;
                if new {
                    self.request_tips(peer, now_ms, &mut out);
                }
            }
            Input::PeerDisconnected(peer) => {
                self.forget_peer(&peer);
            }
            Input::BadResponse { from, request, reason } => {
                self.end_request(request);
                self.misbehaved(from, reason, &mut out);
            }
            Input::BadRequest { from, reason } => {
                self.misbehaved(from, reason, &mut out);
            }
            Input::Gossip { from, token, data } => self.on_gossip(from, token, &data, now_ms, store, &mut out)?,
            Input::Request { from, channel, data } => self.on_request(from, channel, &data, now_ms, store, &mut out)?,
            Input::Response { from, request, data } => {
                self.on_response(from, request, &data, now_ms, store, &mut out)?
            }
            Input::RequestFailed { request } => {
                self.end_request(request);
            }
            Input::OwnBlock { validator, height } => {
                self.own = Some(validator);
                self.refresh_held(validator, store)?;
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

    /// A request ended (answered, failed or timed out): its peer's fetch slot is free.
    fn end_request(&mut self, request: RequestId) -> Option<Fetch<P>> {
        self.tips_requests.remove(&request);
        let fetch = self.fetches.remove(&request)?;
        if let Some(state) = self.peers.get_mut(&fetch.peer) {
            state.fetching = state.fetching.saturating_sub(1);
        }
        self.schedule = true;
        Some(fetch)
    }

    fn forget_peer(&mut self, peer: &P) {
        self.peers.remove(peer);
        self.fetches.retain(|_, f| f.peer != *peer);
        self.tips_requests.retain(|_, (p, _)| p != peer);
        self.schedule = true;
    }

    /// Timeouts, anti-entropy and starting the fetches that are due.
    fn on_time(&mut self, now_ms: u64, store: &dyn BlockStore, out: &mut Vec<Output<P>>) -> Result<(), SyncError> {
        let expired: Vec<RequestId> =
            self.fetches.iter().filter(|(_, f)| f.deadline_ms <= now_ms).map(|(id, _)| *id).collect();
        for request in expired {
            self.end_request(request);
        }
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
        let rate = (self.config.peer_requests_per_s / 2).max(1);
        if let Some(state) = self.peers.get_mut(&peer) {
            // Counted against our pace to this peer; a tips round is never skipped.
            let _ = state.sent.take(now_ms, rate, 1000, rate);
        }
        let request = self.next_request();
        self.tips_requests.insert(request, (peer.clone(), now_ms + self.config.request_timeout_ms));
        out.push(Output::SendRequest { to: peer, request, data: wire::encode_request(&Request::Tips) });
    }

    fn next_request(&mut self) -> RequestId {
        self.next_request += 1;
        self.next_request
    }

    fn misbehaved(&mut self, peer: P, reason: String, out: &mut Vec<Output<P>>) {
        self.counters.peers_misbehaved += 1;
        self.forget_peer(&peer);
        out.push(Output::Misbehaved { peer, reason });
    }
}
