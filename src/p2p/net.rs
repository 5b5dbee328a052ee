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
use super::protocol::{
    ChannelToken, Input, MessageToken, Output, RequestId, Sync, SyncConfig, SyncCounters, Validation,
};
use super::wire::{MAX_GOSSIP_BYTES, MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES};
use crate::bytes::ValidatorKey;
use crate::ledger::event::Evidence;
use crate::ledger::{LedgerKey, OwnLog, Store, Tip};
use futures::{AsyncReadExt, AsyncWriteExt, StreamExt};
use libp2p::gossipsub::{self, IdentTopic, MessageAcceptance, MessageAuthenticity};
use libp2p::request_response::{self, OutboundRequestId, ProtocolSupport, ResponseChannel};
use libp2p::swarm::{NetworkBehaviour, SwarmEvent};
use libp2p::{allow_block_list, identify, noise, tcp, yamux, Multiaddr, PeerId, StreamProtocol, Swarm};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

pub const GOSSIP_TOPIC: &str = "af/tips/v1";
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
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            listen: Vec::new(),
            peers: Vec::new(),
            sync: SyncConfig::default(),
            tick_ms: 250,
            chain_peers: None,
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

/// The wire codec of the sync protocol: a request or response is its bytes, up to the
/// protocol's limit, closed by the end of the stream.
#[derive(Clone, Default)]
pub struct BytesCodec;

async fn read_limited<T: futures::AsyncRead + Unpin + Send>(io: &mut T, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io.take(limit + 1).read_to_end(&mut bytes).await?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, format!("message over {limit} bytes")));
    }
    Ok(bytes)
}

#[async_trait::async_trait]
impl request_response::Codec for BytesCodec {
    type Protocol = StreamProtocol;
    type Request = Vec<u8>;
    type Response = Vec<u8>;

    async fn read_request<T: futures::AsyncRead + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> std::io::Result<Vec<u8>> {
        read_limited(io, MAX_REQUEST_BYTES).await
    }

    async fn read_response<T: futures::AsyncRead + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
    ) -> std::io::Result<Vec<u8>> {
        read_limited(io, MAX_RESPONSE_BYTES).await
    }

    async fn write_request<T: futures::AsyncWrite + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        request: Vec<u8>,
    ) -> std::io::Result<()> {
        io.write_all(&request).await?;
        io.close().await
    }

    async fn write_response<T: futures::AsyncWrite + Unpin + Send>(
        &mut self,
        _: &StreamProtocol,
        io: &mut T,
        response: Vec<u8>,
    ) -> std::io::Result<()> {
        io.write_all(&response).await?;
        io.close().await
    }
}

#[derive(NetworkBehaviour)]
struct Behaviour {
    blocked: allow_block_list::Behaviour<allow_block_list::BlockedPeers>,
    gossipsub: gossipsub::Behaviour,
    sync: request_response::Behaviour<BytesCodec>,
    identify: identify::Behaviour,
}

/// The libp2p keypair of a ledger key (the same ed25519 secret).
pub fn keypair(key: &LedgerKey) -> libp2p::identity::Keypair {
    libp2p::identity::Keypair::ed25519_from_bytes(key.signing_key().to_bytes()).expect("32 bytes are an ed25519 secret")
}

/// The validator a peer id stands for, if the peer's identity is an ed25519 key.
pub fn peer_validator(peer: &PeerId) -> Option<ValidatorKey> {
    // An ed25519 peer id is the identity multihash of the protobuf-encoded public key.
    let public = libp2p::identity::PublicKey::try_decode_protobuf(peer.as_ref().digest()).ok()?;
    Some(ValidatorKey(public.try_into_ed25519().ok()?.to_bytes()))
}

fn build_swarm(key: &LedgerKey) -> Result<Swarm<Behaviour>, NetError> {
    let transport = |e: &dyn std::fmt::Display| NetError::Transport(e.to_string());
    let swarm = libp2p::SwarmBuilder::with_existing_identity(keypair(key))
        .with_tokio()
        .with_tcp(tcp::Config::default().nodelay(true), noise::Config::new, yamux::Config::default)
        .map_err(|e| transport(&e))?
        .with_behaviour(|key| {
            // Content-addressed ids: the same announcement from two sources is one message.
            let message_id = |message: &gossipsub::Message| {
                gossipsub::MessageId::from(blake3::hash(&message.data).to_hex().to_string())
            };
            let config = gossipsub::ConfigBuilder::default()
                .validate_messages()
                .validation_mode(gossipsub::ValidationMode::Strict)
                .message_id_fn(message_id)
                .max_transmit_size(MAX_GOSSIP_BYTES as usize)
                .heartbeat_interval(Duration::from_millis(500))
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
            let sync = request_response::Behaviour::new(
                [(StreamProtocol::new(SYNC_PROTOCOL), ProtocolSupport::Full)],
                request_response::Config::default().with_request_timeout(Duration::from_secs(30)),
            );
            let identify = identify::Behaviour::new(identify::Config::new("/af/1".into(), key.public()));
            Ok(Behaviour { blocked: Default::default(), gossipsub, sync, identify })
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
    let mut swarm = build_swarm(log.key())?;
    let store: &Store = &log.store;
    let topic = IdentTopic::new(GOSSIP_TOPIC);
    swarm.behaviour_mut().gossipsub.subscribe(&topic).map_err(|e| NetError::Transport(e.to_string()))?;
    for address in &config.listen {
        swarm
            .listen_on(address.clone())
            .map_err(|e| NetError::Listen { address: address.clone(), message: e.to_string() })?;
    }
    let mut sync: Sync<PeerId> = Sync::new(config.sync.clone());
    let mut state = ActorState::default();
    let started = std::time::Instant::now();
    let now_ms = || started.elapsed().as_millis() as u64;
    let mut tick = tokio::time::interval(Duration::from_millis(config.tick_ms.max(10)));
    let mut redial = tokio::time::interval(Duration::from_secs(2));
    let mut listen_addrs: Vec<String> = Vec::new();
    loop {
        let input = tokio::select! {
            _ = channels.stop.changed() => {
                if *channels.stop.borrow() { return Ok(()) }
                continue;
            }
            _ = tick.tick() => Some(Input::Tick),
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
                // The chain's validators, plus any configured ones.
                let mut allowed = update.allowed;
                allowed.extend(configured_allowed.iter().flatten().copied());
                allowed.insert(log.validator());
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
                Some((validator, height)) => Some(Input::OwnBlock { validator, height }),
                None => continue,
            },
            event = swarm.select_next_some() => state.translate(event, &mut swarm, &config, &mut listen_addrs),
        };
        let Some(input) = input else { continue };
        let store_ref = store;
        // Appends fsync; keep them off the async workers' backs.
        let outputs = tokio::task::block_in_place(|| sync.handle(input, now_ms(), store_ref))?;
        for output in outputs {
            state.apply(output, &mut swarm, &topic, &channels.evidence);
        }
        if state.status_dirty {
            state.status_dirty = false;
            publish_status(&swarm, &sync, store, &listen_addrs, &state, &channels.status);
        }
    }
}

#[derive(Default)]
struct ActorState {
    next_token: u64,
    gossip: HashMap<MessageToken, gossipsub::MessageId>,
    channels: HashMap<ChannelToken, ResponseChannel<Vec<u8>>>,
    requests: HashMap<OutboundRequestId, RequestId>,
    dialled: HashMap<Multiaddr, PeerId>,
    blocked: Vec<PeerId>,
    status_dirty: bool,
}

impl ActorState {
    fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    fn translate(
        &mut self,
        event: SwarmEvent<BehaviourEvent>,
        swarm: &mut Swarm<Behaviour>,
        config: &NetConfig,
        listen_addrs: &mut Vec<String>,
    ) -> Option<Input<PeerId>> {
        match event {
            SwarmEvent::NewListenAddr { address, .. } => {
                listen_addrs.push(format!("{address}/p2p/{}", swarm.local_peer_id()));
                self.status_dirty = true;
                None
            }
            SwarmEvent::ConnectionEstablished { peer_id, endpoint, num_established, .. } => {
                if let libp2p::core::ConnectedPoint::Dialer { address, .. } = &endpoint {
                    let bare: Multiaddr =
                        address.iter().filter(|p| !matches!(p, libp2p::multiaddr::Protocol::P2p(_))).collect();
                    for configured in &config.peers {
                        let configured_bare: Multiaddr =
                            configured.iter().filter(|p| !matches!(p, libp2p::multiaddr::Protocol::P2p(_))).collect();
                        if configured_bare == bare {
                            self.dialled.insert(configured.clone(), peer_id);
                        }
                    }
                }
                self.status_dirty = true;
                (num_established.get() == 1).then_some(Input::PeerConnected(peer_id))
            }
            SwarmEvent::ConnectionClosed { peer_id, num_established: 0, .. } => {
                self.status_dirty = true;
                Some(Input::PeerDisconnected(peer_id))
            }
            SwarmEvent::Behaviour(BehaviourEvent::Gossipsub(gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            })) => {
                let token = self.token();
                self.gossip.insert(token, message_id);
                Some(Input::Gossip { from: propagation_source, token, data: message.data })
            }
            SwarmEvent::Behaviour(BehaviourEvent::Sync(request_response::Event::Message { peer, message, .. })) => {
                match message {
                    request_response::Message::Request { request, channel, .. } => {
                        let token = self.token();
                        self.channels.insert(token, channel);
                        Some(Input::Request { from: peer, channel: token, data: request })
                    }
                    request_response::Message::Response { request_id, response } => {
                        let request = self.requests.remove(&request_id)?;
                        Some(Input::Response { from: peer, request, data: response })
                    }
                }
            }
            SwarmEvent::Behaviour(BehaviourEvent::Sync(request_response::Event::OutboundFailure {
                request_id,
                ..
            })) => {
                let request = self.requests.remove(&request_id)?;
                Some(Input::RequestFailed { request })
            }
            _ => None,
        }
    }

    fn apply(
        &mut self,
        output: Output<PeerId>,
        swarm: &mut Swarm<Behaviour>,
        topic: &IdentTopic,
        evidence: &mpsc::UnboundedSender<Evidence>,
    ) {
        let behaviour = swarm.behaviour_mut();
        match output {
            Output::Publish(data) => {
                // No peers yet, or the same announcement again: both harmless, the tips
                // rounds carry the news to peers that join later.
                let _ = behaviour.gossipsub.publish(topic.clone(), data);
            }
            Output::Validate { token, from, result } => {
                if let Some(message_id) = self.gossip.remove(&token) {
                    let acceptance = match result {
                        Validation::Accept => MessageAcceptance::Accept,
                        Validation::Reject => MessageAcceptance::Reject,
                        Validation::Ignore => MessageAcceptance::Ignore,
                    };
                    behaviour.gossipsub.report_message_validation_result(&message_id, &from, acceptance);
                }
            }
            Output::SendRequest { to, request, data } => {
                let id = behaviour.sync.send_request(&to, data);
                self.requests.insert(id, request);
            }
            Output::Respond { channel, data } => {
                if let Some(channel) = self.channels.remove(&channel) {
                    let _ = behaviour.sync.send_response(channel, data);
                }
            }
            Output::Evidence(found) => {
                let _ = evidence.send(*found);
                self.status_dirty = true;
            }
            Output::Misbehaved { peer, reason } => {
                eprintln!(
                    "{}",
                    serde_json::json!({ "event": "peer_blocked", "peer": peer.to_string(), "reason": reason })
                );
                behaviour.blocked.block_peer(peer);
                self.blocked.push(peer);
                self.status_dirty = true;
            }
        }
    }
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
        .iter()
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
        blocked_peers: state.blocked.iter().map(|p| p.to_string()).collect(),
    });
}
