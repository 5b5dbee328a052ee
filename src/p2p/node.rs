//! A running node: the libp2p actor plus what surrounds it in a process: the
//! equivocation validators already proven in our own log (so a restart keeps refusing
//! their forks), a status file other processes can read while the store is locked
//! (`af peers`, the devnet), the channel through which evidence reaches whoever writes
//! our log, and, for a validator, a watch on the network task: a validator never plays
//! on with its networking dead.

use super::net::{self, NetChannels, NetConfig, NetError, NetStatus};
use crate::bytes::ValidatorKey;
use crate::chain::outage::Said;
use crate::ledger::event::Evidence;
use crate::ledger::{Event, OwnLog, StoreError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

pub const STATUS_FILE: &str = "status.json";

/// Most bytes of a status file a reader takes: thousands of validators' tips fit.
const MAX_STATUS_BYTES: u64 = 16 << 20;

/// Why the status of the node on a data directory could not be read (`af peers`).
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("the node running on {0} has no networking (it was started without --listen), so it has no peers; restart it with --listen MULTIADDR to gossip and sync")]
    NoNetworking(String),
    #[error("no node is running on {0}: peers are shown while `af node --data {0} --listen MULTIADDR` or `af validate --data {0} ... --listen MULTIADDR` runs")]
    NoNode(String),
    #[error("{0}")]
    Read(std::io::Error),
    #[error("{0} is not a node's status: {1}")]
    NotStatus(String, serde_json::Error),
}

/// The status the node on `data` last wrote, if there is one.
pub fn read_status(data: &Path) -> Result<Option<serde_json::Value>, StatusError> {
    let path = data.join(STATUS_FILE);
    let text = match crate::input::read_text(&path, MAX_STATUS_BYTES) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        read => read.map_err(StatusError::Read)?,
    };
    serde_json::from_str(&text).map(Some).map_err(|e| StatusError::NotStatus(path.display().to_string(), e))
}

impl StatusError {
    /// Why `data` has no status file: its node runs without networking, or none runs
    /// (the store's lock says which; opening the store would check every page).
    pub fn missing(data: &Path) -> StatusError {
        let named = data.display().to_string();
        if node_running(data) {
            StatusError::NoNetworking(named)
        } else {
            StatusError::NoNode(named)
        }
    }
}

/// Whether a node holds the store in `data` now (a status file outlives its node).
pub fn node_running(data: &Path) -> bool {
    crate::ledger::store::Store::held_by_writer(data).unwrap_or(false)
}

pub struct NodeHandle {
    /// Tell the node about each new block of our own chain.
    pub own_blocks: mpsc::UnboundedSender<(ValidatorKey, u64)>,
    /// Evidence found by the protocol: the caller records it in our log.
    pub evidence: mpsc::UnboundedReceiver<Evidence>,
    pub status: watch::Receiver<NetStatus>,
    pub task: tokio::task::JoinHandle<Result<(), NetError>>,
}

/// The status file's contents: the node's status and when it was written.
#[derive(Serialize)]
struct StatusFile<'a> {
    written_ms: u64,
    #[serde(flatten)]
    status: &'a NetStatus,
}

/// Validators our own log holds evidence against, with the lowest fork height.
pub fn forked_from_log(log: &OwnLog) -> Result<BTreeMap<ValidatorKey, u64>, StoreError> {
    let mut forked = BTreeMap::new();
    let validator = log.validator();
    let Some(tip) = log.tip()? else { return Ok(forked) };
    for height in 0..=tip.height {
        let Some(block) = log.store.block(&validator, height)? else { break };
        for event in block.block.events {
            if let Event::Evidence(evidence) = event {
                let fork = forked.entry(evidence.validator).or_insert(evidence.height);
                *fork = (*fork).min(evidence.height);
            }
        }
    }
    Ok(forked)
}

/// Starts the node on the current tokio runtime.
pub fn spawn_node(
    log: Arc<OwnLog>,
    mut config: NetConfig,
    status_file: Option<PathBuf>,
    now_ms: fn() -> u64,
    stop: watch::Receiver<bool>,
) -> Result<NodeHandle, StoreError> {
    config.sync.forked.extend(forked_from_log(&log)?);
    let (own_sender, own_blocks) = mpsc::unbounded_channel();
    let (evidence_sender, evidence) = mpsc::unbounded_channel();
    let (status_sender, status) = watch::channel(NetStatus::default());
    if let Some(path) = status_file {
        tokio::spawn(write_status(path, status.clone(), now_ms));
    }
    let channels = NetChannels { own_blocks, evidence: evidence_sender, status: status_sender, stop };
    let task = tokio::spawn(net::run_node(log, config, channels));
    Ok(NodeHandle { own_blocks: own_sender, evidence, status, task })
}

/// Tells networking to stop and waits for it: its grace to leave our last block with
/// peers, and 10 s more at most.
pub async fn stop_and_wait(task: Option<tokio::task::JoinHandle<()>>, stop: &watch::Sender<bool>) {
    if let Some(task) = task {
        let _ = stop.send(true);
        let grace = std::time::Duration::from_millis(net::STOP_GRACE_MS);
        let _ = tokio::time::timeout(grace + std::time::Duration::from_secs(10), task).await;
    }
}

/// A validator's network task, watched: a validator must not go on for weeks with its networking
/// dead and nobody told. If it fails (a store error while keeping a peer's block, a full
/// disk say), the failure is set in `failed` and the validator stops as on a signal,
/// sealing its last block if the store still takes it.
pub fn watch(
    task: tokio::task::JoinHandle<Result<(), NetError>>,
    stop: Arc<watch::Sender<bool>>,
    failed: Arc<std::sync::OnceLock<String>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let failure = match task.await {
            Ok(Ok(())) => return,
            Ok(Err(error)) => error.to_string(),
            Err(join) => format!("the network task failed: {join}"),
        };
        tracing::error!(event = "net_failed", error = %failure, "networking stopped: {failure}; stopping the validator");
        let _ = failed.set(failure);
        let _ = stop.send(true);
    })
}

/// Rewrites the status file (atomically) whenever the status changes, at most every
/// 200 ms.
async fn write_status(path: PathBuf, mut status: watch::Receiver<NetStatus>, now_ms: fn() -> u64) {
    while status.changed().await.is_ok() {
        let json = {
            let current = status.borrow_and_update();
            serde_json::to_vec_pretty(&StatusFile { written_ms: now_ms(), status: &current })
        };
        if let Ok(json) = json {
            let _ = write_atomically(&path, &json);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

/// What the chain's axon for our hotkey says of sending `ip:port` now.
enum AxonOnChain {
    /// It is `ip:port` already.
    Served,
    /// Another address, served so recently that subtensor refuses a new one before `next`.
    Wait { next: u64 },
    /// Send it (also when a read fails: the send then says what is wrong).
    Send,
}

async fn axon_on_chain(chain: &dyn crate::chain::Chain, ip: std::net::IpAddr, port: u16) -> AxonOnChain {
    let Some(own) = chain.hotkey() else { return AxonOnChain::Send };
    let Ok(axons) = chain.axons().await else { return AxonOnChain::Send };
    let Some(ours) = axons.iter().find(|a| a.hotkey == own) else { return AxonOnChain::Send };
    if ours.ip == ip && ours.port == port {
        return AxonOnChain::Served;
    }
    let next = ours.block.saturating_add(crate::chain::SERVING_RATE_LIMIT_BLOCKS);
    match chain.current_block().await {
        Ok(now) if ours.block > 0 && now < next => AxonOnChain::Wait { next },
        _ => AxonOnChain::Send,
    }
}

/// Sends `serve_axon` for `ip:port` unless the chain holds it already or its serving rate
/// limit would refuse it (said once per block it waits for); whether it is published.
async fn publish_axon(
    chain: &dyn crate::chain::Chain,
    (ip, port): (std::net::IpAddr, u16),
    waits: &mut Option<u64>,
    outage: &mut crate::chain::outage::Outage,
) -> bool {
    match axon_on_chain(chain, ip, port).await {
        AxonOnChain::Served => {
            tracing::info!(event = "axon_published", %ip, port, "{ip}:{port} is our axon on chain already");
            true
        }
        AxonOnChain::Wait { next } => {
            if *waits != Some(next) {
                *waits = Some(next);
                tracing::info!(event = "axon_waits", %ip, port, next, "our axon on chain is another address, served less than {} blocks ago: {ip}:{port} is sent at block {next}, when subtensor's serving rate limit allows", crate::chain::SERVING_RATE_LIMIT_BLOCKS);
            }
            false
        }
        AxonOnChain::Send => match chain.serve_axon(ip, port).await {
            Ok(block) => {
                tracing::info!(event = "axon_published", %ip, port, block, "published {ip}:{port} on chain (serve_axon)");
                outage.answered(crate::clock::unix_ms());
                true
            }
            Err(error) => {
                if outage.failed(crate::clock::unix_ms()) == Said::Down {
                    tracing::warn!(event = "axon_failed", error = %error, "publishing {ip}:{port} failed; retrying until it is published (said once)")
                }
                false
            }
        },
    }
}

/// Publishes our address on the chain once the node listens (`serve_axon`), then keeps
/// the node's chain peers and allow-list current: every `every_ms` it reads the
/// metagraph, the commitments and the axons (ledger-spec/13). A chain read that fails is
/// logged and retried at the next turn; it never stops the node.
pub async fn chain_peers_loop(
    chain: Arc<dyn crate::chain::Chain>,
    mut status: watch::Receiver<NetStatus>,
    external: Option<(std::net::IpAddr, Option<u16>)>,
    peers: watch::Sender<super::chain_peers::ChainPeers>,
    every_ms: u64,
    mut stop: watch::Receiver<bool>,
) {
    let mut published: Option<(std::net::IpAddr, u16)> = None;
    let mut axon_waits = None;
    // Each failing read is said once per outage, and again when it answers.
    let (mut axon_outage, mut peers_outage) =
        (crate::chain::outage::Outage::default(), crate::chain::outage::Outage::default());
    loop {
        let mut not_listening = false;
        if published.is_none() {
            let listening = status.borrow_and_update().listen.iter().find_map(|a| tcp_address(a));
            // The external address, where one is named (its port, else the listen port).
            let address = listening.map(|(ip, port)| match external {
                Some((external_ip, external_port)) => (external_ip, external_port.unwrap_or(port)),
                None => (ip, port),
            });
            match address {
                Some((ip, port)) => match crate::chain::check_published_axon(ip, port) {
                    Err(why) => {
                        tracing::warn!(event = "axon_not_published", %ip, port, "not publishing {ip}:{port} on chain: {why}; set --external-addr ([p2p] external) for other validators to find this one");
                        published = Some((ip, port));
                    }
                    // Sent only as a change, and not inside subtensor's serving rate limit.
                    Ok(()) => {
                        if publish_axon(chain.as_ref(), (ip, port), &mut axon_waits, &mut axon_outage).await {
                            published = Some((ip, port));
                        }
                    }
                },
                None => not_listening = true,
            }
        }
        let read = async {
            let neurons = chain.neurons().await?;
            let records = chain.commitments().await?;
            let axons = chain.axons().await?;
            Ok::<_, crate::chain::ChainError>(super::chain_peers::chain_peers(
                &neurons,
                &records,
                &axons,
                chain.hotkey().as_deref(),
            ))
        };
        match read.await {
            Ok(found) => {
                if let Said::Back { down_s } = peers_outage.answered(crate::clock::unix_ms()) {
                    tracing::info!(
                        event = "chain_peers_read",
                        down_s,
                        "validators read from the chain again, after {down_s:.1} s"
                    );
                }
                peers.send_if_modified(|current| {
                    let changed = *current != found;
                    *current = found;
                    changed
                });
            }
            Err(error) => {
                if peers_outage.failed(crate::clock::unix_ms()) == Said::Down {
                    tracing::warn!(event = "chain_peers_failed", error = %error, "reading validators from the chain failed; retrying (said once per outage)")
                }
            }
        }
        // Not yet listening: publish as soon as the node says where, not a period later.
        let listening = async {
            if !not_listening || status.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(every_ms)) => {}
            _ = listening => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// The IP and TCP port of a listen address (`/ip4/1.2.3.4/tcp/5/p2p/...`).
fn tcp_address(address: &str) -> Option<(std::net::IpAddr, u16)> {
    use libp2p::multiaddr::Protocol;
    let address: libp2p::Multiaddr = address.parse().ok()?;
    let mut ip = None;
    for part in address.iter() {
        match part {
            Protocol::Ip4(v4) => ip = Some(std::net::IpAddr::V4(v4)),
            Protocol::Ip6(v6) => ip = Some(std::net::IpAddr::V6(v6)),
            Protocol::Tcp(port) => return ip.map(|ip| (ip, port)),
            _ => {}
        }
    }
    None
}
