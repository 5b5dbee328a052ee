//! The libp2p actor: TCP + noise + yamux, gossipsub for announcements (with
//! `validate_messages`, so nothing is forwarded before the protocol says Accept, and
//! peer scoring that punishes Reject), request-response for tips and block ranges,
//! identify, and a block list for peers that sent invalid data. It translates swarm
//! events into `protocol::Input`s and the protocol's outputs into swarm calls; all
//! decisions are the protocol's.
//!
//! A node's libp2p identity is its ledger ed25519 key, so a validator's peer id names its
//! log, and `af peers` can tell which peer is which validator.

use super::blocks::BlockStore;
use super::codec::BytesCodec;
use super::protocol::{Input, Sync, SyncConfig, SyncCounters};
use super::wire::MAX_GOSSIP_BYTES;
use crate::budget::MemoryBudget;
use crate::bytes::ValidatorKey;
use crate::ledger::event::Evidence;
use crate::ledger::{LedgerKey, OwnLog, Store, Tip};
use futures::StreamExt;
use libp2p::gossipsub::{self, IdentTopic, MessageAuthenticity};
use libp2p::request_response::{self, ProtocolSupport};
use libp2p::{connection_limits, identify, noise, ping, tcp, yamux, Multiaddr, PeerId, StreamProtocol, Swarm};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

mod swarm_events;
use super::behaviour::Behaviour;
use swarm_events::ActorState;
pub use swarm_events::{BLOCK_MS, MAX_BLOCKED_PEERS};

pub const GOSSIP_TOPIC: &str = "af/tips/v1";
/// Subscribed to (no message is ever sent on them) to tell peers how our stop goes: from
/// the stop signal on, before our last block is sealed, and once it is sealed and
/// announced. A stopping peer waits, within its grace, for the last block of every peer
/// that said it is stopping, even one whose seal takes longer than `STOP_MIN_MS`.
pub const STOPPING_TOPIC: &str = "af/stopping/v1";
pub const SEALED_TOPIC: &str = "af/sealed/v1";
pub const SYNC_PROTOCOL: &str = "/af/sync/1";

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("libp2p: {0}")]
    Transport(String),
    #[error("cannot listen on {address}: {message}")]
    Listen { address: Multiaddr, message: String },
    #[error("sync: {0}")]
    Sync(#[from] super::protocol::SyncError),
}

#[derive(Clone, Debug)]
pub struct NetConfig {
    pub listen: Vec<Multiaddr>,
    /// Bootstrap peers, dialled at start and again whenever they are not connected.
    pub peers: Vec<Multiaddr>,
    pub sync: SyncConfig,
    /// How often the protocol is given the time (timeouts, anti-entropy).
    pub tick_ms: u64,
    /// Peers and allow-list read from the chain, added to the configured ones whenever
    /// they change (none: the configuration alone).
    pub chain_peers: Option<watch::Receiver<super::chain_peers::ChainPeers>>,
    /// The process's stop signal, which comes before `NetChannels::stop` when a last
    /// block is still to be sealed (a validator); peers hear of it (`STOPPING_TOPIC`).
    pub stopping: Option<watch::Receiver<bool>>,
    /// What peers may make us hold: responses read and responses waiting to be sent.
    pub budget: Arc<MemoryBudget>,
    pub connections: ConnectionLimits,
    /// After `stop`: the most the node goes on serving and fetching for, waiting for every
    /// connected peer to hold our tip and to hold what peers are ahead on
    /// (`STOP_GRACE_MS` by default).
    pub stop_grace_ms: u64,
}

/// How long a stopping node waits for its peers to take its last block: a clean stop
/// leaves every connected peer whole, and a peer that never asks cannot hold it up.
pub const STOP_GRACE_MS: u64 = 5_000;
/// How long a stopping node goes on at least: a peer stopped at the same moment seals its
/// last block after its signal too, and announces it only then.
pub const STOP_MIN_MS: u64 = 1_000;

/// How often a connection is pinged, and how long a ping may take before the connection
/// is closed. A link that went dark (a partition, a peer's machine gone) leaves a TCP
/// connection open for many minutes, its retransmissions backing off to two minutes
/// apart; every request to the peer then waits on it. Closing it lets the redial make a
/// fresh connection as soon as the path is back (a 60 s partition healed in ~40 s more
/// without this, the time to TCP's next retransmission).
pub const PING_INTERVAL: Duration = Duration::from_secs(5);
pub const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// How many libp2p connections a node keeps (libp2p's own `connection_limits`): enough
/// for every other validator of a subnet (up to 64 with permits) in both directions.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    pub established_incoming: u32,
    pub established_total: u32,
    pub per_peer: u32,
    pub pending_incoming: u32,
    /// Streams one connection may hold open at once (requests in both directions).
    pub streams_per_connection: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            established_incoming: 96,
            established_total: 160,
            per_peer: 2,
            pending_incoming: 16,
            streams_per_connection: 16,
        }
    }
}

/// Most older keys followed back from one listed key (ledger-spec/16).
pub const MAX_ROTATIONS_FOLLOWED: usize = 16;

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            listen: Vec::new(),
            peers: Vec::new(),
            sync: SyncConfig::default(),
            tick_ms: 250,
            stop_grace_ms: STOP_GRACE_MS,
            chain_peers: None,
            stopping: None,
            budget: MemoryBudget::new(crate::budget::DEFAULT_BUDGET_BYTES),
            connections: ConnectionLimits::default(),
        }
    }
}

/// What a running node knows, for `af peers` and the devnet (which read it back from
/// the status file).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
pub struct NetStatus {
    pub peer_id: String,
    pub listen: Vec<String>,
    pub peers: Vec<PeerStatus>,
    /// Every chain in our store and its tip.
    pub tips: Vec<(ValidatorKey, Tip)>,
    /// Validators caught equivocating, with the fork height.
    pub forked: Vec<(ValidatorKey, u64)>,
    pub counters: SyncCounters,
    pub blocked_peers: Vec<String>,
}

impl NetStatus {
    /// `af peers` in words: each chain with its height, lag and any equivocation, then
    /// each peer.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!("{:<66} {:>8} {:>6}  {}", "validator", "height", "lag", "evidence")];
        for (validator, height, lag) in self.lags() {
            let forked = self.forked.iter().find(|(v, _)| *v == validator);
            let forked = forked.map_or(String::new(), |(_, at)| format!("EQUIVOCATED at height {at}"));
            out.push(format!("{validator:<66} {height:>8} {lag:>6}  {forked}"));
        }
        out.extend(self.peers.iter().map(|peer| {
            let validator = peer.validator.map_or("-".into(), |v| v.to_string());
            format!("peer {} validator {validator} gossip score {}", peer.peer_id, serde_json::json!(peer.gossip_score))
        }));
        out
    }

    /// Each chain we hold: (validator, our height, how many blocks the furthest peer
    /// says it holds beyond ours). Peers' claims are unverified until synced.
    pub fn lags(&self) -> Vec<(ValidatorKey, u64, u64)> {
        self.tips
            .iter()
            .map(|(validator, tip)| {
                let claimed = self.peers.iter().filter_map(|p| p.holds.get(validator)).max().copied();
                (*validator, tip.height, claimed.map_or(0, |c| c.saturating_sub(tip.height)))
            })
            .collect()
    }
}

#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct PeerStatus {
    pub peer_id: String,
    /// The validator whose ledger key is this peer's identity, if it is one.
    pub validator: Option<ValidatorKey>,
    /// Highest height of each validator's chain the peer is known to hold.
    pub holds: BTreeMap<ValidatorKey, u64>,
    pub gossip_score: Option<f64>,
}

/// The libp2p keypair of a ledger key (the same ed25519 secret).
pub fn keypair(key: &LedgerKey) -> libp2p::identity::Keypair {
    libp2p::identity::Keypair::ed25519_from_bytes(key.signing_key().to_bytes()).expect("32 bytes are an ed25519 secret")
}

/// The validator a peer id stands for, if the peer's identity is an ed25519 key.
/// The peer id a validator's node has (its libp2p identity is its ledger key).
pub fn validator_peer(validator: &ValidatorKey) -> Option<PeerId> {
    let public = libp2p::identity::ed25519::PublicKey::try_from_bytes(&validator.0).ok()?;
    Some(PeerId::from_public_key(&libp2p::identity::PublicKey::from(public)))
}

/// Reserved room: the validators we keep logs of (the allow-list: the chain's and the
/// configured) are let in past the connection limits strangers share, so no crowd of
/// throwaway identities can keep them out. The ones no longer listed lose it.
fn reserve_room(swarm: &mut Swarm<Behaviour>, reserved: &mut BTreeSet<PeerId>, allowed: &BTreeSet<ValidatorKey>) {
    let now: BTreeSet<PeerId> = allowed.iter().filter_map(validator_peer).collect();
    let limits = &mut swarm.behaviour_mut().limits;
    for gone in reserved.difference(&now) {
        limits.remove_peer_id(gone);
    }
    for peer in &now {
        limits.bypass_peer_id(peer);
    }
    *reserved = now;
}

pub fn peer_validator(peer: &PeerId) -> Option<ValidatorKey> {
    // An ed25519 peer id is the identity multihash of the protobuf-encoded public key.
    let public = libp2p::identity::PublicKey::try_decode_protobuf(peer.as_ref().digest()).ok()?;
    Some(ValidatorKey(public.try_into_ed25519().ok()?.to_bytes()))
}

/// How long an incoming or outgoing connection may take to finish its handshake (noise,
/// then yamux) before it is dropped and its pending slot freed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(3);

fn build_swarm(key: &LedgerKey, config: &NetConfig) -> Result<Swarm<Behaviour>, NetError> {
    let limits = config.connections;
    let codec = BytesCodec::new(config.budget.clone());
    let transport = |e: &dyn std::fmt::Display| NetError::Transport(e.to_string());
    let swarm = libp2p::SwarmBuilder::with_existing_identity(keypair(key))
        .with_tokio()
        // A connection that has not finished noise and yamux within `HANDSHAKE_TIMEOUT`
        // is dropped: a socket that never speaks must not hold a pending slot for long
        // (libp2p's own TCP builder sets no deadline).
        .with_other_transport(|key| -> Result<_, Box<dyn std::error::Error + Send + std::marker::Sync>> {
            use libp2p::Transport;
            Ok(tcp::tokio::Transport::new(tcp::Config::default().nodelay(true))
                .upgrade(libp2p::core::upgrade::Version::V1Lazy)
                .authenticate(noise::Config::new(key)?)
                .multiplex(yamux::Config::default())
                .timeout(HANDSHAKE_TIMEOUT))
        })
        .map_err(|e| transport(&e))?
        .with_behaviour(|key| {
            // Content-addressed ids: the same announcement from two sources is one message.
            let message_id = |message: &gossipsub::Message| {
                gossipsub::MessageId::from(blake3::hash(&message.data).to_hex().to_string())
            };
            // An announcement waits for its block up to the fetch timeout before we
            // report on it; gossipsub forgets a message after `history_length`
            // heartbeats, and a late report is a warning and no forward. So the cache
            // spans the timeout (only messages waiting or accepted stay in it; the
            // waiting ones are capped by MAX_PENDING_GOSSIP).
            let heartbeat_ms = 500;
            let history = config.sync.request_timeout_ms.div_ceil(heartbeat_ms) as usize + 2;
            let config = gossipsub::ConfigBuilder::default()
                .history_length(history.max(5))
                .validate_messages()
                .validation_mode(gossipsub::ValidationMode::Strict)
                .message_id_fn(message_id)
                .max_transmit_size(MAX_GOSSIP_BYTES as usize)
                .heartbeat_interval(Duration::from_millis(heartbeat_ms))
                .mesh_n_low(2)
                .mesh_n(4)
                .mesh_n_high(8)
                .mesh_outbound_min(1)
                .build()
                .map_err(|e| e.to_string())?;
            let mut gossipsub = gossipsub::Behaviour::new(MessageAuthenticity::Signed(key.clone()), config)?;
            let mut score = gossipsub::PeerScoreParams::default();
            score.topics.insert(IdentTopic::new(GOSSIP_TOPIC).hash(), gossipsub::TopicScoreParams::default());
            gossipsub.with_peer_score(score, gossipsub::PeerScoreThresholds::default())?;
            let sync = request_response::Behaviour::with_codec(
                codec,
                [(StreamProtocol::new(SYNC_PROTOCOL), ProtocolSupport::Full)],
                request_response::Config::default()
                    .with_request_timeout(Duration::from_secs(30))
                    .with_max_concurrent_streams(limits.streams_per_connection),
            );
            let identify = identify::Behaviour::new(identify::Config::new("/af/1".into(), key.public()));
            let (limits_per_peer, strangers_pending) = (limits.per_peer, limits.pending_incoming);
            let limits = connection_limits::Behaviour::new(
                connection_limits::ConnectionLimits::default()
                    .with_max_established_incoming(Some(limits.established_incoming))
                    .with_max_established(Some(limits.established_total))
                    .with_max_established_per_peer(Some(limits.per_peer))
                    // Admission splits these between strangers and listed addresses.
                    .with_max_pending_incoming(Some(limits.pending_incoming + super::admission::LISTED_PENDING)),
            );
            let ping =
                ping::Behaviour::new(ping::Config::new().with_interval(PING_INTERVAL).with_timeout(PING_TIMEOUT));
            let admission = super::admission::Admission::new(
                super::admission::PENDING_PER_ADDRESS,
                limits_per_peer,
                strangers_pending,
            );
            Ok(Behaviour { admission, limits, blocked: Default::default(), gossipsub, sync, identify, ping })
        })
        .map_err(|e| transport(&e))?
        .with_swarm_config(|c| c.with_idle_connection_timeout(Duration::from_secs(120)))
        .build();
    Ok(swarm)
}

/// What the node hands to the rest of the program.
pub struct NetChannels {
    /// Tell the node about a new block of ours (validator, height): it announces it.
    pub own_blocks: mpsc::UnboundedReceiver<(ValidatorKey, u64)>,
    /// Evidence of equivocation, to be recorded in our own log.
    pub evidence: mpsc::UnboundedSender<Evidence>,
    /// The node's status, refreshed every tick.
    pub status: watch::Sender<NetStatus>,
    pub stop: watch::Receiver<bool>,
}

/// Runs the node until `stop`. Listens, dials the bootstrap peers (again whenever they
/// are not connected), and syncs every log into `store`.
pub async fn run_node(log: Arc<OwnLog>, mut config: NetConfig, mut channels: NetChannels) -> Result<(), NetError> {
    let (configured_peers, configured_allowed) = (config.peers.clone(), config.sync.allowed.clone());
    let mut chain_peers = config.chain_peers.take();
    let mut stopping = config.stopping.take();
    let mut swarm = build_swarm(log.key(), &config)?;
    let store: &Store = &log.store;
    let topic = IdentTopic::new(GOSSIP_TOPIC);
    swarm.behaviour_mut().gossipsub.subscribe(&topic).map_err(|e| NetError::Transport(e.to_string()))?;
    for address in &config.listen {
        swarm
            .listen_on(address.clone())
            .map_err(|e| NetError::Listen { address: address.clone(), message: crate::display::with_causes(&e) })?;
    }
    swarm.behaviour_mut().admission.set_listed(config.peers.iter().filter_map(super::admission::ip_of));
    let mut reserved = BTreeSet::new();
    if let Some(allowed) = &configured_allowed {
        reserve_room(&mut swarm, &mut reserved, allowed);
    }
    let started = std::time::Instant::now();
    let mut sync: Sync<PeerId> = Sync::new(config.sync.clone()).with_wall_clock(crate::clock::unix_ms());
    let mut state = ActorState::default();
    let now_ms = || started.elapsed().as_millis() as u64;
    let mut tick = tokio::time::interval(Duration::from_millis(config.tick_ms.max(10)));
    let mut redial = tokio::time::interval(Duration::from_secs(2));
    let mut listen_addrs: Vec<String> = Vec::new();
    // Set by `stop`: until then the node goes on serving, so the block sealed at the stop
    // reaches the peers, and fetching, so a peer stopping at the same moment leaves us its
    // last block too; it asks them for their tips on every tick to know when both hold.
    let mut draining: Option<std::time::Instant> = None;
    // Whether we told peers we are stopping, and that our last block is sealed.
    let (mut said_stopping, mut said_sealed) = (false, false);
    // Since when everything the stop waits for has held (it must hold for a tick: a
    // peer's sealed subscription is handled before the announcement sent with it).
    let mut whole_since: Option<std::time::Instant> = None;
    let (stopping_topic, sealed_topic) = (IdentTopic::new(STOPPING_TOPIC), IdentTopic::new(SEALED_TOPIC));
    loop {
        if let Some(stopped) = draining {
            // Our last block's announcement is published once its notice is handled.
            if !said_sealed && channels.own_blocks.is_empty() {
                let _ = swarm.behaviour_mut().gossipsub.subscribe(&stopping_topic);
                let _ = swarm.behaviour_mut().gossipsub.subscribe(&sealed_topic);
                said_sealed = true;
            }
            let own = log.validator();
            let tip = store.tip(&own).map_err(super::protocol::SyncError::from)?.map(|t| t.height);
            let lacking = tip.map_or(0, |height| sync.peers_lacking(&own, height));
            let behind = sync.chains_behind();
            let unsealed = peers_still_sealing(&swarm, &stopping_topic, &sealed_topic);
            let waited = stopped.elapsed();
            let now_whole = lacking == 0 && behind == 0 && unsealed == 0;
            whole_since = if now_whole { whole_since.or(Some(std::time::Instant::now())) } else { None };
            let settled = whole_since.is_some_and(|at| at.elapsed() >= Duration::from_millis(config.tick_ms));
            let whole = settled && waited >= Duration::from_millis(STOP_MIN_MS);
            if whole || waited >= Duration::from_millis(config.stop_grace_ms) {
                tracing::info!(
                    event = "net_stopped",
                    peers_lacking_our_tip = lacking,
                    chains_behind_peers = behind,
                    peers_still_sealing = unsealed,
                    "networking stopped ({lacking} connected peer(s) still lacking our tip, {behind} chain(s) where a peer is ahead, {unsealed} stopping peer(s) not yet sealed)"
                );
                // Closed here, inside the runtime, not by a runtime shutting down.
                drop(swarm);
                return Ok(());
            }
        }
        let input = tokio::select! {
            changed = channels.stop.changed(), if draining.is_none() => {
                // A dropped stop sender is a stop too (its owner ended), never a busy loop.
                if changed.is_err() || *channels.stop.borrow() {
                    draining = Some(std::time::Instant::now());
                    sync.ask_tips_every(config.tick_ms.max(10));
                }
                continue;
            }
            changed = async { stopping.as_mut().expect("guarded").changed().await }, if stopping.is_some() && !said_stopping => {
                if changed.is_err() {
                    stopping = None;
                } else if *stopping.as_ref().expect("guarded").borrow() {
                    let _ = swarm.behaviour_mut().gossipsub.subscribe(&stopping_topic);
                    said_stopping = true;
                }
                continue;
            }
            _ = tick.tick() => Some((Input::Tick, None)),
            changed = async { chain_peers.as_mut().expect("guarded").changed().await }, if chain_peers.is_some() => {
                if changed.is_err() {
                    chain_peers = None;
                    continue;
                }
                let update = chain_peers.as_mut().expect("guarded").borrow_and_update().clone();
                config.peers = configured_peers.clone();
                for address in update.peers {
                    if !config.peers.contains(&address) {
                        let _ = swarm.dial(address.clone());
                        config.peers.push(address);
                    }
                }
                swarm.behaviour_mut().admission.set_listed(config.peers.iter().filter_map(super::admission::ip_of));
                // The chain's validators, plus any configured ones.
                let mut allowed = update.allowed;
                allowed.extend(configured_allowed.iter().flatten().copied());
                allowed.insert(log.validator());
                // A listed key's log may continue older ones (key rotation, ledger-spec/16):
                // they are the same validator's, and a replay needs them to link the two.
                let listed: Vec<ValidatorKey> = allowed.iter().copied().collect();
                for key in listed {
                    allowed.extend(log.store.predecessors(&key, MAX_ROTATIONS_FOLLOWED).unwrap_or_default());
                }
                reserve_room(&mut swarm, &mut reserved, &allowed);
                sync.set_allowed(Some(allowed));
                None
            }
            _ = redial.tick() => {
                for address in &config.peers {
                    let connected = state.dialled.get(address).is_some_and(|p| swarm.is_connected(p));
                    if !connected {
                        let _ = swarm.dial(address.clone());
                    }
                }
                publish_status(&swarm, &sync, store, &listen_addrs, &state, &channels.status);
                None
            }
            own = channels.own_blocks.recv() => match own {
                Some((validator, height)) => Some((Input::OwnBlock { validator, height }, None)),
                None => continue,
            },
            event = swarm.select_next_some() => state.translate(event, &mut swarm, &config.peers, &mut listen_addrs),
        };
        let Some((input, held)) = input else { continue };
        let request_channel = match &input {
            Input::Request { channel, .. } => Some(*channel),
            _ => None,
        };
        let store_ref = store;
        let now = now_ms();
        while let Some(peer) = state.blocked.next_expired(now) {
            swarm.behaviour_mut().blocked.unblock_peer(peer);
            state.status_dirty = true;
        }
        // Appends fsync; keep them off the async workers' backs.
        let outputs = tokio::task::block_in_place(|| sync.handle(input, now, store_ref))?;
        // The response's bytes stayed reserved until the protocol was done with them.
        drop(held);
        for output in outputs {
            state.apply(output, &mut swarm, &topic, &channels.evidence, &config.budget, now);
        }
        // A request the protocol chose not to answer: free its channel (the peer sees
        // the stream close).
        if let Some(channel) = request_channel {
            state.channels.remove(&channel);
        }
        if state.status_dirty {
            state.status_dirty = false;
            publish_status(&swarm, &sync, store, &listen_addrs, &state, &channels.status);
        }
    }
}

/// Connected peers that said they are stopping and not yet that their last block is
/// sealed: a stop waits for them (within its grace).
fn peers_still_sealing(swarm: &Swarm<Behaviour>, stopping: &IdentTopic, sealed: &IdentTopic) -> usize {
    let (stopping, sealed) = (stopping.hash(), sealed.hash());
    swarm
        .behaviour()
        .gossipsub
        .all_peers()
        .filter(|(_, topics)| topics.contains(&&stopping) && !topics.contains(&&sealed))
        .count()
}

fn publish_status(
    swarm: &Swarm<Behaviour>,
    sync: &Sync<PeerId>,
    store: &dyn BlockStore,
    listen_addrs: &[String],
    state: &ActorState,
    status: &watch::Sender<NetStatus>,
) {
    let peers = sync
        .peers()
        .map(|(peer, holds)| PeerStatus {
            peer_id: peer.to_string(),
            validator: peer_validator(peer),
            holds: holds.clone(),
            gossip_score: swarm.behaviour().gossipsub.peer_score(peer),
        })
        .collect();
    status.send_replace(NetStatus {
        peer_id: swarm.local_peer_id().to_string(),
        listen: listen_addrs.to_vec(),
        peers,
        tips: store.tips().unwrap_or_default(),
        forked: sync.forked().iter().map(|(v, h)| (*v, *h)).collect(),
        counters: sync.counters.clone(),
        blocked_peers: state.blocked.peers().map(|p| p.to_string()).collect(),
    });
}
