//! `af node` (gossip and sync alone: an auditor's or mirror's copy of every log) and
//! `af peers` (what a node knows of the other validators), plus the network flags
//! `af validate` shares.

use super::print_json;
use crate::outln;
use af::validator::config::{HttpConfig, P2pConfig};
use af::validator::launch::{self, NodeEnd};
use anyhow::Context;
use clap::Args;
use prometheus_client::metrics::counter::Counter;
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
    /// Serve `/healthz` and `/metrics` alone on this address too, with connections of
    /// their own (`[http] probes`): bind it where only your orchestrator reaches.
    #[arg(long = "probes", value_name = "ADDR")]
    pub probes: Option<std::net::SocketAddr>,
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
        if let Some(address) = self.probes {
            http.probes = address.to_string();
        }
        if let Some(address) = self.http {
            http.listen = address.to_string();
        }
        if let Some(mb) = self.memory_budget_mb {
            p2p.memory_budget_mb = mb;
        }
    }
}

pub fn node(
    data: &Path,
    args: NetArgs,
    chain: &super::chain::ChainArgs,
    json: bool,
    log_suppressed: Counter,
) -> anyhow::Result<ExitCode> {
    let log = Arc::new(super::data_dir::open_own_log(data)?);
    let closing = log.clone();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let outcome = runtime.block_on(async move {
        let signal = af::validator::service::stop_signal();
        let (mut p2p, mut http) = (P2pConfig::default(), HttpConfig::default());
        args.apply(&mut p2p, &mut http);
        let metrics = Arc::new(super::node_metrics(log_suppressed));
        let chain = match chain.spec() {
            Some(spec) => Some(Arc::from(af::chain::connect(&spec).await.context("reading the chain for the pages")?)),
            None => None,
        };
        let NodeEnd { status, interrupted } = launch::run_node(log, data, &p2p, &http, chain, metrics, signal).await?;
        if json {
            print_json(&status)?;
        } else {
            outln!(
                "stopped; {} chains held, {} blocks fetched this run",
                status.tips.len(),
                status.counters.blocks_stored
            );
        }
        // Stopped by a signal: 130, as `af validate` (docs/operator.md).
        anyhow::Ok(if interrupted { ExitCode::from(super::EXIT_INTERRUPTED) } else { ExitCode::SUCCESS })
    });
    af::validator::service::close(runtime, closing);
    outcome
}

pub fn peers(data: &Path, json: bool) -> anyhow::Result<ExitCode> {
    use af::p2p::node::{read_status, StatusError};
    let status = read_status(data)?.ok_or_else(|| StatusError::missing(data))?;
    // A status left by a node that has stopped is history, and said to be.
    if !af::p2p::node::node_running(data) {
        eprintln!(
            "af: no node is running on {}: this is the last status its node wrote before it stopped",
            data.display()
        );
    }
    if json {
        print_json(&status)?;
        return Ok(ExitCode::SUCCESS);
    }
    let age_s = (af::clock::unix_ms().saturating_sub(status["written_ms"].as_u64().unwrap_or(0))) as f64 / 1000.0;
    outln!("node {} (status written {age_s:.1} s ago)", status["peer_id"].as_str().unwrap_or("?"));
    let net: af::p2p::net::NetStatus =
        serde_json::from_value(status.clone()).context("the status file is not a node's status")?;
    for line in net.lines() {
        outln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
