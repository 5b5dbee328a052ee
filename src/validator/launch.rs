//! A validator (`af validate`) or a sync-only node (`af node`) as a running service: the
//! chain reached with backoff and our identity on it checked, the network and the HTTP
//! API started, the queue played, then serving, and everything stopped in an order that
//! seals our last block before networking closes. The CLI parses flags and prints; this
//! wires the rooms together.

use super::config::{Config, ConfigError, HttpConfig, P2pConfig};
use super::matchrun::{Contestant, MatchReport};
use super::run::{self, MatchCallback, RunError, RunOptions, RunSummary};
use crate::budget::MemoryBudget;
use crate::bytes::ValidatorKey;
use crate::chain::{Chain, ChainError, ChainSpec};
use crate::evaluation::matchplay::MatchVerdict;
use crate::http::server::{self, Feeds, HttpLimits};
use crate::http::ADDRESS_FILE;
use crate::ledger::event::Evidence;
use crate::ledger::{Event, OwnLog, StoreError};
use crate::metrics::Metrics;
use crate::p2p::chain_peers::ChainPeers;
use crate::p2p::net::{NetConfig, NetError, NetStatus};
use crate::p2p::node::{self, NodeHandle, STATUS_FILE};
use crate::replay::latest_replay::LatestReplay;
use crate::replay::spill_file::{SpillFileError, SPILL_FILE};
use std::collections::BTreeSet;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// The exit status of a service stopped by a signal (SIGINT, SIGTERM), its last block
/// sealed (docs/operator.md): `af validate`, `af node`, and what the devnet expects of them.
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}")]
    Config(#[from] ConfigError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("connecting to the chain: {0}")]
    Chain(#[from] ChainError),
    /// A chain is set but we cannot sign on it; the message says which flags to pass.
    #[error("{0}")]
    Identity(String),
    #[error("binding the HTTP API to {address}: {source}")]
    Bind { address: SocketAddr, source: std::io::Error },
    #[error("writing the HTTP address file {path}: {source}")]
    AddressFile { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Replay(#[from] SpillFileError),
    #[error("the archive ([archive] url): {0}")]
    Archive(#[from] crate::http::archive::ArchiveError),
    #[error("{0}")]
    SignedElsewhere(Box<super::signed_elsewhere::SignedElsewhereError>),
    #[error("{0}")]
    Run(#[source] Box<RunError>),
    #[error("{0}")]
    Net(#[from] NetError),
    #[error("the network task failed: {0}")]
    NetPanicked(String),
    #[error("networking stopped: {failure}; then the run: {run}")]
    NetThenRun { failure: String, run: Box<RunError> },
    #[error("networking stopped: {0} (the validator stopped with it; run the same command to go on)")]
    NetStopped(String),
}

/// The network settings of `p2p` for validator `own` (always allowed when a list is given).
pub fn net_config(p2p: &P2pConfig, own: ValidatorKey, budget: Arc<MemoryBudget>) -> Result<NetConfig, ConfigError> {
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

/// What starting the network needs besides the log and its settings.
pub struct NetStart {
    /// Tells networking to close (after our last block is served, for a validator).
    pub stop: watch::Receiver<bool>,
    /// Peers and the allow-list from the chain, when there is one.
    pub chain_peers: Option<watch::Receiver<ChainPeers>>,
    pub budget: Arc<MemoryBudget>,
    /// The process's stop signal, which peers hear of at once.
    pub stopping: Option<watch::Receiver<bool>>,
}

/// Starts the network for `log`, logging where it listens once known; its status goes
/// to `DATA/STATUS_FILE` for `af peers`.
pub fn start_network(
    log: &Arc<OwnLog>,
    p2p: &P2pConfig,
    data: &Path,
    start: NetStart,
) -> Result<NodeHandle, LaunchError> {
    let mut config = net_config(p2p, log.validator(), start.budget)?;
    config.chain_peers = start.chain_peers;
    config.stopping = start.stopping;
    let handle =
        node::spawn_node(log.clone(), config, Some(data.join(STATUS_FILE)), crate::clock::unix_ms, start.stop)?;
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

/// Binds the node's HTTP API, writes `DATA/http.addr`, and serves until `stop`.
pub async fn start_http(
    (address, probes): (SocketAddr, Option<SocketAddr>),
    data: &Path,
    log: Arc<OwnLog>,
    feeds: Feeds,
    metrics: Arc<Metrics>,
    budget: Arc<MemoryBudget>,
    stop: watch::Receiver<bool>,
) -> Result<AddressFile, LaunchError> {
    let bind = |source| LaunchError::Bind { address, source };
    let listener = tokio::net::TcpListener::bind(address).await.map_err(bind)?;
    let bound = listener.local_addr().map_err(bind)?;
    let url = format!("http://{bound}/");
    let file = AddressFile(data.join(ADDRESS_FILE));
    std::fs::write(&file.0, format!("{url}\n"))
        .map_err(|source| LaunchError::AddressFile { path: file.0.clone(), source })?;
    tracing::info!(event = "http", url = %url, "HTTP API, metrics and live page at {url}");
    let limits = HttpLimits::default();
    let ratio_params = crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    let router = server::router(log, feeds, ratio_params, metrics, budget, crate::clock::unix_ms, limits.clone());
    if let Some(probes) = probes {
        let bind = |source| LaunchError::Bind { address: probes, source };
        let listener = tokio::net::TcpListener::bind(probes).await.map_err(bind)?;
        let bound = listener.local_addr().map_err(bind)?;
        tracing::info!(event = "http_probes", address = %bound, "/healthz and /metrics also at http://{bound}/");
        let (router, stop) = (router.clone(), stop.clone());
        tokio::spawn(async move {
            if let Err(error) = server::serve_probes(listener, router, stop).await {
                tracing::error!(event = "http_stopped", error = %error, "the probes' listener stopped");
            }
        });
    }
    tokio::spawn(async move {
        if let Err(error) = server::serve(listener, router, &limits, stop).await {
            tracing::error!(event = "http_stopped", error = %error, "the HTTP API stopped");
        }
    });
    Ok(file)
}

/// The HTTP API's address file, removed when the node stops, so no reader is sent to a
/// dead port.
pub struct AddressFile(PathBuf);

impl Drop for AddressFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Appends evidence to our own log (when nothing else writes it) and announces the block.
pub async fn record_evidence_directly(
    log: Arc<OwnLog>,
    mut evidence: mpsc::UnboundedReceiver<Evidence>,
    own_blocks: mpsc::UnboundedSender<(ValidatorKey, u64)>,
) {
    let validator = log.validator();
    while let Some(evidence) = evidence.recv().await {
        super::service::warn_equivocation(&evidence);
        let log = log.clone();
        let appended = tokio::task::spawn_blocking(move || {
            log.append(vec![Event::Evidence(Box::new(evidence))], crate::clock::unix_ms())
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

/// How `af node` ended: the network's last status, and whether a signal stopped it.
pub struct NodeEnd {
    pub status: NetStatus,
    pub interrupted: bool,
}

/// Runs gossip and sync alone for `log` (an auditor's or a mirror's copy of every log),
/// with the HTTP API if `http` names an address, until `signal` or the network ends.
pub async fn run_node(
    log: Arc<OwnLog>,
    data: &Path,
    p2p: &P2pConfig,
    http: &HttpConfig,
    chain: Option<Arc<dyn Chain>>,
    metrics: Arc<Metrics>,
    signal: impl Future<Output = &'static str>,
) -> Result<NodeEnd, LaunchError> {
    let (stop_sender, stop) = watch::channel(false);
    let budgets = p2p.budgets()?;
    let start = NetStart { stop: stop.clone(), chain_peers: None, budget: budgets.network.clone(), stopping: None };
    let NodeHandle { own_blocks, evidence, status, mut task } = start_network(&log, p2p, data, start)?;
    let gate = (log.clone(), chain.clone(), status.clone(), stop.clone(), data.to_owned());
    let _http = match http.address()? {
        Some(address) => {
            let feeds = Feeds {
                status: Some(status.clone()),
                chain,
                network_budget: Some(budgets.network),
                ..Default::default()
            };
            Some(
                start_http((address, http.probes_address()?), data, log.clone(), feeds, metrics, budgets.http, stop)
                    .await?,
            )
        }
        None => None,
    };
    // Evidence is the one thing a node signs: not before every source it reaches agrees
    // that the store holds all of its log they know (a directory restored from a copy).
    tokio::spawn(async move {
        let (log, chain, status, mut stop, data) = gate;
        let sources = (chain.as_deref(), None, Some(&status));
        let patience = (data.as_path(), super::signed_elsewhere::CATCH_UP_WAIT);
        let validator = log.validator();
        match super::signed_elsewhere::wait_until_caught_up(&log.store, &validator, sources, patience, &mut stop).await
        {
            Ok(true) => record_evidence_directly(log, evidence, own_blocks).await,
            Ok(false) => {}
            Err(error) => {
                tracing::error!(event = "signing_refused", %error, "this node signs nothing: {error}");
                log.halt_signing(error.to_string());
            }
        }
    });
    let ended = |result: Result<Result<(), NetError>, tokio::task::JoinError>| match result {
        Ok(result) => result.map_err(LaunchError::from),
        Err(join) => Err(LaunchError::NetPanicked(join.to_string())),
    };
    let interrupted = tokio::select! {
        signal = signal => {
            tracing::info!(event = "stopping", signal, "stopping on {signal}");
            let _ = stop_sender.send(true);
            // The network closes its connections inside the runtime before it ends.
            match tokio::time::timeout(std::time::Duration::from_secs(10), &mut task).await {
                Ok(result) => ended(result)?,
                Err(_) => tracing::warn!(event = "stop_slow", "the network did not stop within 10 s"),
            }
            true
        }
        result = &mut task => {
            ended(result)?;
            false
        }
    };
    let status = status.borrow().clone();
    Ok(NodeEnd { status, interrupted })
}

/// Reaches the chain `spec` names: one that cannot be reached is retried with backoff (a
/// service waits for it); a bad key or spec is an error at once. `None` if `stop` came
/// first.
pub async fn connect_chain(
    spec: &ChainSpec,
    stop: &watch::Receiver<bool>,
) -> Result<Option<Arc<dyn Chain>>, LaunchError> {
    let mut wait_ms = 500u64;
    loop {
        match crate::chain::connect(spec).await {
            Ok(chain) => return Ok(Some(Arc::from(chain))),
            Err(error @ ChainError::Transport { .. }) => {
                tracing::warn!(event = "chain_unreachable", error = %error, retry_ms = wait_ms, "cannot reach the chain; retrying");
                let mut stop = stop.clone();
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_millis(wait_ms)) => {}
                    _ = stop.changed() => {}
                }
                if *stop.borrow() {
                    return Ok(None);
                }
                wait_ms = (wait_ms * 2).min(30_000);
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// A validator with a chain must be able to sign on it: its hotkey given and registered
/// on the subnet. Refused otherwise, saying which flags to pass and how to register
/// (`--watch-only` runs without an identity on purpose).
pub async fn check_chain_identity(chain: &dyn Chain, spec: &ChainSpec) -> Result<(), LaunchError> {
    let local = spec.endpoint.starts_with("local:");
    let Some(hotkey) = chain.hotkey() else {
        let flags = if local {
            "--hotkey HOTKEY (the local chain names hotkeys directly)"
        } else {
            "--wallet NAME --hotkey NAME (btcli's wallet files; --wallets-dir if not ~/.bittensor/wallets), or AF_HOTKEY_PHRASE"
        };
        return Err(LaunchError::Identity(format!(
            "a chain is set ({}) but no hotkey to sign with: pass {flags}; or pass --watch-only to play and record without committing or setting weights",
            spec.endpoint
        )));
    };
    match chain.neurons().await {
        Ok(neurons) if !neurons.iter().any(|n| n.hotkey == hotkey) => {
            let register = if local {
                format!(
                    "af chain register --chain {} --netuid {} --hotkey {hotkey} --validator",
                    spec.endpoint, spec.netuid
                )
            } else {
                format!("btcli subnets register --netuid {} (then stake for a validator permit)", spec.netuid)
            };
            Err(LaunchError::Identity(format!(
                "hotkey {hotkey} is not registered on subnet {}: register it first ({register}), or pass --watch-only",
                spec.netuid
            )))
        }
        Ok(_) => Ok(()),
        // Reachable but the read failed: the loops retry it; the identity was given.
        Err(error) => {
            tracing::warn!(event = "chain_read_failed", error = %error, "could not check that {hotkey} is registered; going on");
            Ok(())
        }
    }
}

/// What starting a validator needs.
pub struct Launch {
    pub data: PathBuf,
    pub log: Arc<OwnLog>,
    pub config: Config,
    /// With a chain but no identity on it, on purpose: nothing committed or set.
    pub watch_only: bool,
    pub metrics: Arc<Metrics>,
}

/// A started validator: chain, network and HTTP API up, its queue not yet played.
/// `play`, then `serve` if asked, then `stop`.
pub struct Validator {
    launch: Launch,
    stop_sender: Arc<watch::Sender<bool>>,
    stop: watch::Receiver<bool>,
    /// Networking stops last, on its own signal: after our last block is sealed, so it
    /// can announce and serve that block to its peers before it closes.
    net_stop_sender: watch::Sender<bool>,
    net_task: Option<JoinHandle<()>>,
    net_failure: Arc<OnceLock<String>>,
    own_blocks: Option<mpsc::UnboundedSender<(ValidatorKey, u64)>>,
    evidence: Option<mpsc::UnboundedReceiver<Evidence>>,
    chain: Option<Arc<dyn Chain>>,
    replays: Arc<LatestReplay>,
    sent_weights: Arc<crate::chain::weights::SentWeights>,
    _http: Option<AddressFile>,
}

impl Validator {
    /// Starts everything but the queue; `signal` (SIGINT, SIGTERM) stops the validator
    /// from then on. `None` if it came while the chain was still out of reach.
    pub async fn start(
        launch: Launch,
        signal: impl Future<Output = &'static str> + Send + 'static,
    ) -> Result<Option<Validator>, LaunchError> {
        let (stop_sender, stop) = watch::channel(false);
        let stop_sender = Arc::new(stop_sender);
        let (net_stop_sender, net_stop) = watch::channel(false);
        let stop_on_signal = stop_sender.clone();
        tokio::spawn(async move {
            let signal = signal.await;
            tracing::info!(
                event = "stopping",
                signal,
                "stopping on {signal}: sealing the events recorded so far (run the same command to resume)"
            );
            let _ = stop_on_signal.send(true);
        });
        let config = &launch.config;
        let budgets = config.p2p.budgets()?;
        let chain = match config.chain.is_set() {
            true => match connect_chain(&config.chain, &stop).await? {
                Some(chain) => Some(chain),
                None => return Ok(None),
            },
            false => None,
        };
        if let (Some(chain), false) = (&chain, launch.watch_only) {
            check_chain_identity(chain.as_ref(), &config.chain).await?;
        }
        // With a chain, peers and the allow-list also come from it: validators holding a
        // permit, their axons and their committed ledger keys (ledger-spec/13).
        let (peers_sender, peers_receiver) = watch::channel(Default::default());
        let with_chain_peers = chain.is_some() && config.p2p.enabled();
        let network = match config.p2p.enabled() {
            true => {
                // Peers hear of the stop signal at once, and wait for our last block.
                let start = NetStart {
                    stop: net_stop,
                    chain_peers: with_chain_peers.then(|| peers_receiver.clone()),
                    budget: budgets.network.clone(),
                    stopping: Some(stop.clone()),
                };
                Some(start_network(&launch.log, &config.p2p, &launch.data, start)?)
            }
            false => None,
        };
        let net_status = network.as_ref().map(|handle| handle.status.clone());
        let net_status_for_check = net_status.clone();
        if let (true, Some(chain), Some(status)) = (with_chain_peers, &chain, &net_status) {
            tokio::spawn(node::chain_peers_loop(
                chain.clone(),
                status.clone(),
                config.p2p.parsed()?.external,
                peers_sender,
                config.chain.discover_every_ms,
                stop.clone(),
            ));
        }
        let net_failure: Arc<OnceLock<String>> = Arc::default();
        let (own_blocks, evidence, net_task) = match network {
            Some(handle) => {
                let watched = node::watch(handle.task, stop_sender.clone(), net_failure.clone());
                (Some(handle.own_blocks), Some(handle.evidence), Some(watched))
            }
            None => (None, None, None),
        };
        // One replay of our store for the anchoring and the HTTP API: one set of folds.
        // Kept across restarts (`replay::kept_file`); the per-run file of earlier builds goes.
        let _ = std::fs::remove_file(launch.data.join(SPILL_FILE));
        let replays = Arc::new(
            LatestReplay::kept(&launch.data, &mut |note| {
                tracing::info!(event = "replay_kept", "{note}");
            })?
            .with_protocol(config.protocol()),
        );
        let http = match config.http.address()? {
            Some(address) => {
                let feeds = Feeds {
                    status: net_status,
                    chain: chain.clone(),
                    replays: Some(replays.clone()),
                    network_budget: Some(budgets.network.clone()),
                };
                let (log, metrics) = (launch.log.clone(), launch.metrics.clone());
                let probes = config.http.probes_address()?;
                Some(
                    start_http((address, probes), &launch.data, log, feeds, metrics, budgets.http, stop.clone())
                        .await?,
                )
            }
            None => None,
        };
        // Nothing is signed before every source we reach agrees the store holds all of our
        // log they know (a data directory restored from an older backup, say).
        let archive = match config.archive.url.is_empty() {
            true => None,
            false => Some(crate::http::archive::Site::open(&config.archive.url)?),
        };
        let sources = (chain.as_deref(), archive.as_ref(), net_status_for_check.as_ref());
        let validator = launch.log.validator();
        let mut waiting = stop.clone();
        let caught_up = super::signed_elsewhere::wait_until_caught_up(
            &launch.log.store,
            &validator,
            sources,
            (&launch.data, super::signed_elsewhere::CATCH_UP_WAIT),
            &mut waiting,
        )
        .await;
        if !matches!(caught_up, Ok(true)) {
            // Networking stops inside the runtime, as at any stop.
            node::stop_and_wait(net_task, &net_stop_sender).await;
            return caught_up.map(|_| None).map_err(|e| LaunchError::SignedElsewhere(Box::new(e)));
        }
        if !config.archive.url.is_empty() {
            let site = crate::http::archive::Site::open(&config.archive.url)?;
            let every = std::time::Duration::from_secs(config.archive.every_s);
            let keep_days = u32::try_from(config.archive.keep_days).unwrap_or(u32::MAX);
            let (log, metrics) = (launch.log.clone(), launch.metrics.clone());
            tokio::spawn(super::archiver::archive_loop(log, site, (every, keep_days), metrics, stop.clone()));
        }
        Ok(Some(Validator {
            launch,
            stop_sender,
            stop,
            net_stop_sender,
            net_task,
            net_failure,
            own_blocks,
            evidence,
            chain,
            replays,
            sent_weights: Arc::default(),
            _http: http,
        }))
    }

    /// Plays the queue until `max_matches` decided matches are in our log (or a stop).
    /// A run that fails stops networking, and names networking's failure first if that
    /// is why (a store refusing writes once a peer's block found the disk full, say).
    pub async fn play(
        &mut self,
        max_matches: Option<u64>,
        progress: Option<Arc<watch::Sender<super::matchrun::MatchProgress>>>,
        on_match: MatchCallback,
    ) -> Result<RunSummary, LaunchError> {
        let options = RunOptions {
            max_matches,
            now_ms: crate::clock::unix_ms,
            progress,
            on_match,
            request_stats: Arc::default(),
            own_blocks: self.own_blocks.clone(),
            evidence: self.evidence.take(),
            chain: self.chain.clone(),
            anchor_check_ms: 1_000,
            anchor: !self.launch.watch_only,
            sent_weights: self.sent_weights.clone(),
            metrics: self.launch.metrics.clone(),
            replays: self.replays.clone(),
        };
        let (log, config) = (self.launch.log.clone(), &self.launch.config);
        match run::run(log, config, self.stop.clone(), options).await {
            Ok(summary) => Ok(summary),
            Err(run) => {
                node::stop_and_wait(self.net_task.take(), &self.net_stop_sender).await;
                Err(match self.net_failure.get() {
                    Some(failure) => LaunchError::NetThenRun { failure: failure.clone(), run: Box::new(run) },
                    None => LaunchError::Run(Box::new(run)),
                })
            }
        }
    }

    /// After the queue, with networking: one appender becomes our log's single writer,
    /// for evidence against peers and for anchoring, until the stop signal.
    pub async fn serve(&mut self, summary: &mut RunSummary) {
        let (Some(_), Some(own_blocks)) = (&self.net_task, self.own_blocks.clone()) else { return };
        let anchor = self.chain.clone().filter(|_| !self.launch.watch_only).map(|chain| super::anchor::ChainSender {
            replays: self.replays.clone(),
            chain,
            sent: self.sent_weights.clone(),
        });
        let serving = super::service::Serving {
            log: self.launch.log.clone(),
            own_blocks,
            evidence: summary.evidence.take(),
            anchor,
            ratio_params: self.launch.config.evaluation.ratio_params(),
            now_ms: crate::clock::unix_ms,
            metrics: self.launch.metrics.clone(),
        };
        super::service::serve_until_stopped(serving, self.stop.clone()).await;
    }

    /// Stops networking (our last block is sealed by now: the node announces it and
    /// serves it for up to its grace period) inside the runtime, before the runtime
    /// ends (dropping a running swarm with the runtime panicked in its timers). True if
    /// a signal stopped the validator.
    pub async fn stop(mut self) -> Result<bool, LaunchError> {
        node::stop_and_wait(self.net_task.take(), &self.net_stop_sender).await;
        // The replay's folds, kept for the next start: it then folds only what is new
        // (and fetches no pruned body back). Not kept: the next start folds from genesis.
        let replays = self.replays.clone();
        match tokio::task::spawn_blocking(move || replays.keep()).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!(event = "replay_not_kept", error = %error, "the replay was not kept: the next start folds every log from genesis")
            }
            Err(error) => {
                tracing::warn!(event = "replay_not_kept", error = %error, "the replay was not kept: the next start folds every log from genesis")
            }
        }
        if let Some(failure) = self.net_failure.get() {
            return Err(LaunchError::NetStopped(failure.clone()));
        }
        let stopped = *self.stop.borrow();
        drop(self.stop_sender);
        Ok(stopped)
    }
}

/// Logs a decided match: its verdict and each environment's tally, then each miner's
/// failed challenges by class.
pub fn log_match(report: &MatchReport, contender: &Contestant, champion: &Contestant) {
    let tallies = report.state.tallies(&report.envs);
    tracing::info!(
        event = "match_decided",
        match_id = %report.match_id,
        contender = %contender.miner.hotkey,
        champion = %champion.miner.hotkey,
        contender_won = report.decided.contender_won,
        new_ratio_to_beat_ppm = report.decided.new_ratio_to_beat_ppm,
        envs = %tallies,
        "match {}: {} vs champion {}: {} ({})",
        &report.match_id.to_hex()[..16],
        contender.miner.hotkey,
        champion.miner.hotkey,
        if report.verdict == MatchVerdict::ContenderWins { "contender wins" } else { "champion stays" },
        tallies
    );
    for (miner, why) in &report.failures {
        let summary: Vec<String> = why.iter().map(|(class, n)| format!("{n} {class}")).collect();
        tracing::warn!(
            event = "miner_failures",
            match_id = %report.match_id,
            miner = %miner,
            failures = %summary.join(", "),
            "miner {miner} gave no answer to some challenges: {}",
            summary.join(", ")
        );
    }
}
