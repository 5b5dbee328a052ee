//! `af node` (gossip and sync alone: an auditor's or mirror's copy of every log) and
//! `af peers` (what a node knows of the other validators), plus the network flags
//! `af validate` shares.

use super::print_json;
use crate::outln;
use af::budget::MemoryBudget;
use af::bytes::ValidatorKey;
use af::ledger::{Event, OwnLog};
use af::p2p::net::NetConfig;
use af::p2p::node::{self, NodeHandle, STATUS_FILE};
use af::validator::config::{HttpConfig, P2pConfig};
use anyhow::Context;
use clap::Args;
use prometheus_client::metrics::counter::Counter;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug, Clone, Default)]
pub struct NetArgs {
    /// Multiaddr to listen on, e.g. /ip4/127.0.0.1/tcp/4001 (repeatable).
    #[arg(long = "listen")]
    pub listen: Vec<libp2p::Multiaddr>,
    /// Bootstrap peer multiaddr, dialled at start and whenever not connected (repeatable).
    #[arg(long = "peer")]
    pub peers: Vec<libp2p::Multiaddr>,
    /// Validator key (hex) whose log we keep; repeatable. Without any, every validly
    /// signed log is kept.
    #[arg(long = "allow")]
    pub allow: Vec<String>,
    /// Serve the read-only HTTP API (ledger-spec/11-http.md) on this address; without a
    /// value, on 127.0.0.1:7080. Read commands on this data directory then work while
    /// the node runs.
    #[arg(long = "http", value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:7080")]
    pub http: Option<std::net::SocketAddr>,
    /// The most memory (MiB above the node's own) that peers and HTTP readers together
    /// may make it hold; default 256 (`[p2p] memory_budget_mb`).
    #[arg(long = "memory-budget-mb", value_name = "MIB")]
    pub memory_budget_mb: Option<u64>,
}

impl NetArgs {
    /// Lays the flags over the config: a flag given replaces that field.
    pub fn apply(&self, p2p: &mut P2pConfig, http: &mut HttpConfig) {
        if !self.listen.is_empty() {
            p2p.listen = self.listen.iter().map(|a| a.to_string()).collect();
        }
        if !self.peers.is_empty() {
            p2p.peers = self.peers.iter().map(|a| a.to_string()).collect();
        }
        if !self.allow.is_empty() {
            p2p.allow = self.allow.clone();
        }
        if let Some(address) = self.http {
            http.listen = address.to_string();
        }
        if let Some(mb) = self.memory_budget_mb {
            p2p.memory_budget_mb = mb;
        }
    }
}

/// The network settings of `p2p` for validator `own` (always allowed when a list is given).
pub fn net_config(p2p: &P2pConfig, own: ValidatorKey, budget: Arc<MemoryBudget>) -> anyhow::Result<NetConfig> {
    let parsed = p2p.parsed()?;
    let mut config = NetConfig { listen: parsed.listen, peers: parsed.peers, budget, ..NetConfig::default() };
    if !parsed.allow.is_empty() {
        let mut allowed = BTreeSet::from([own]);
        allowed.extend(parsed.allow);
        config.sync.allowed = Some(allowed);
    }
    if config.listen.is_empty() {
        config.listen.push("/ip4/127.0.0.1/tcp/0".parse().expect("a valid multiaddr"));
    }
    Ok(config)
}

/// Starts the network for `log`, printing where it listens once known.
pub fn start(
    log: &Arc<OwnLog>,
    p2p: &P2pConfig,
    data: &Path,
    stop: tokio::sync::watch::Receiver<bool>,
    chain_peers: Option<tokio::sync::watch::Receiver<af::p2p::chain_peers::ChainPeers>>,
    budget: Arc<MemoryBudget>,
    stopping: Option<tokio::sync::watch::Receiver<bool>>,
) -> anyhow::Result<NodeHandle> {
    let mut config = net_config(p2p, log.validator(), budget)?;
    config.chain_peers = chain_peers;
    config.stopping = stopping;
    let handle = node::spawn_node(log.clone(), config, Some(data.join(STATUS_FILE)), af::clock::unix_ms, stop)?;
    let mut status = handle.status.clone();
    tokio::spawn(async move {
        while status.changed().await.is_ok() {
            let listen = status.borrow_and_update().listen.clone();
            if !listen.is_empty() {
                for address in listen {
                    tracing::info!(event = "listening", address = %address, "libp2p listening on {address}");
                }
                break;
            }
        }
    });
    Ok(handle)
}

/// Appends evidence to our own log (when nothing else writes it) and announces the block.
pub async fn record_evidence_directly(
    log: Arc<OwnLog>,
    mut evidence: tokio::sync::mpsc::UnboundedReceiver<af::ledger::event::Evidence>,
    own_blocks: tokio::sync::mpsc::UnboundedSender<(ValidatorKey, u64)>,
) {
    let validator = log.validator();
    while let Some(evidence) = evidence.recv().await {
        af::validator::service::warn_equivocation(&evidence);
        let log = log.clone();
        let appended = tokio::task::spawn_blocking(move || {
            log.append(vec![Event::Evidence(Box::new(evidence))], af::clock::unix_ms())
        })
        .await;
        match appended {
            Ok(Ok(receipt)) => {
                let _ = own_blocks.send((validator, receipt.tip.height));
            }
            Ok(Err(e)) => tracing::error!(event = "evidence_failed", error = %e, "recording evidence failed"),
            Err(_) => tracing::error!(event = "evidence_failed", "recording evidence panicked"),
        }
    }
}

pub fn node(data: &Path, args: NetArgs, json: bool, log_suppressed: Counter) -> anyhow::Result<ExitCode> {
    let log = Arc::new(super::data_dir::open_own_log(data)?);
    let closing = log.clone();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let outcome = runtime.block_on(async move {
        let signal = super::stop_signal();
        let (stop_sender, stop) = tokio::sync::watch::channel(false);
        let (mut p2p, mut http) = (P2pConfig::default(), HttpConfig::default());
        args.apply(&mut p2p, &mut http);
        let budget = p2p.budget()?;
        let metrics = Arc::new(super::node_metrics(log_suppressed));
        let handle = start(&log, &p2p, data, stop.clone(), None, budget.clone(), None)?;
        let NodeHandle { own_blocks, evidence, status, task } = handle;
        let _http = match http.address()? {
            Some(address) => Some(
                super::http::start(
                    address,
                    data,
                    log.clone(),
                    af::http::server::Feeds { status: Some(status.clone()), ..Default::default() },
                    metrics,
                    budget,
                    stop,
                )
                .await?,
            ),
            None => None,
        };
        tokio::spawn(record_evidence_directly(log.clone(), evidence, own_blocks));
        let mut task = task;
        let interrupted = tokio::select! {
            signal = signal => {
                tracing::info!(event = "stopping", signal, "stopping on {signal}");
                let _ = stop_sender.send(true);
                // The network closes its connections inside the runtime before it ends.
                match tokio::time::timeout(std::time::Duration::from_secs(10), &mut task).await {
                    Ok(result) => result.context("the network task panicked")??,
                    Err(_) => tracing::warn!(event = "stop_slow", "the network did not stop within 10 s"),
                }
                true
            }
            result = &mut task => {
                result.context("the network task panicked")??;
                false
            }
        };
        let status = status.borrow().clone();
        if json {
            print_json(&status)?;
        } else {
            outln!(
                "stopped; {} chains held, {} blocks fetched this run",
                status.tips.len(),
                status.counters.blocks_stored
            );
        }
        // Stopped by a signal: 130, as `af validate` (README).
        Ok(if interrupted { ExitCode::from(super::EXIT_INTERRUPTED) } else { ExitCode::SUCCESS })
    });
    af::validator::service::close(runtime, closing);
    outcome
}

pub fn peers(data: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let path = data.join(STATUS_FILE);
    // The store's lock says whether a node runs; opening it would check every page.
    let running = || af::ledger::store::Store::held_by_writer(data).unwrap_or(false);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => {
            // A status left by a node that has stopped is history, and said to be.
            if !running() {
                eprintln!(
                    "af: no node is running on {}: this is the last status its node wrote before it stopped",
                    data.display()
                );
            }
            text
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Whether something holds the store tells which of two things is missing.
            anyhow::bail!(if running() {
                format!(
                    "the node running on {} has no networking (it was started without --listen), so it has no \
                     peers; restart it with --listen MULTIADDR to gossip and sync",
                    data.display()
                )
            } else {
                format!(
                    "no node is running on {}: peers are shown while `af node --data {0} --listen MULTIADDR` \
                     or `af validate --data {0} ... --listen MULTIADDR` runs",
                    data.display()
                )
            })
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let status: serde_json::Value = serde_json::from_str(&text).context("the status file is not JSON")?;
    if json {
        print_json(&status)?;
        return Ok(ExitCode::SUCCESS);
    }
    let age_s = (af::clock::unix_ms().saturating_sub(status["written_ms"].as_u64().unwrap_or(0))) as f64 / 1000.0;
    outln!("node {} (status written {age_s:.1} s ago)", status["peer_id"].as_str().unwrap_or("?"));
    let net: af::p2p::net::NetStatus =
        serde_json::from_value(status.clone()).context("the status file is not a node's status")?;
    outln!("{:<66} {:>8} {:>6}  {}", "validator", "height", "lag", "evidence");
    // Lag: how far our copy of a chain is behind what a peer says it holds.
    for (validator, height, lag) in net.lags() {
        let forked = net
            .forked
            .iter()
            .find(|(v, _)| *v == validator)
            .map_or(String::new(), |(_, at)| format!("EQUIVOCATED at height {at}"));
        outln!("{validator:<66} {height:>8} {lag:>6}  {forked}");
    }
    for peer in &net.peers {
        outln!(
            "peer {} validator {} gossip score {}",
            peer.peer_id,
            peer.validator.map_or("-".into(), |v| v.to_string()),
            serde_json::json!(peer.gossip_score)
        );
    }
    Ok(ExitCode::SUCCESS)
}
