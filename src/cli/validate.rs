//! `af validate` (the validator loop) and `af ratio show`.

use super::print_json;
use crate::outln;
use af::evaluation::matchplay::{MatchState, MatchVerdict};
use af::validator::config;
use af::validator::run::{self, RunOptions};
use af::validator::state;
use anyhow::Context;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

pub fn load_config(path: Option<&Path>) -> anyhow::Result<config::Config> {
    let text = match path {
        Some(path) => super::read_input(path, 1024 * 1024)?,
        None => String::new(),
    };
    Ok(config::parse(&text, std::env::vars())?)
}

/// Chain and wallet settings of `af validate`; each one given replaces `[chain]`'s field.
#[derive(clap::Args, Debug, Default)]
pub struct ChainFlags {
    /// The chain to commit to and set weights on: `local:ADDR` or `subtensor:finney|test|local|URL` ([chain] endpoint).
    #[arg(long = "chain")]
    pub chain: Option<String>,
    /// The subnet ([chain] netuid).
    #[arg(long)]
    pub netuid: Option<u16>,
    /// Subtensor: the wallet name under the wallets directory ([chain] wallet).
    #[arg(long)]
    pub wallet: Option<String>,
    /// Subtensor: the wallet's hotkey name; local chain: the hotkey itself ([chain] hotkey).
    #[arg(long)]
    pub hotkey: Option<String>,
    /// Subtensor: the wallets directory ([chain] wallets_dir; default ~/.bittensor/wallets).
    #[arg(long)]
    pub wallets_dir: Option<PathBuf>,
    /// The address published on chain (serve_axon) for other validators to dial, IP or
    /// IP:PORT, when the listen address is not it ([p2p] external).
    #[arg(long = "external-addr", value_name = "IP[:PORT]")]
    pub external_addr: Option<String>,
    /// Run with a chain but without a chain identity, on purpose: read miners from it,
    /// play and record, but commit nothing and set no weights. Without it, a validator
    /// with a chain refuses to start unless its hotkey is given and registered.
    #[arg(long)]
    pub watch_only: bool,
}

/// The config `af validate` runs with: embedded defaults, then the file, then `AF_*`
/// variables, then the command line's flags.
pub fn effective_config(
    config_path: Option<&Path>,
    net: &super::node::NetArgs,
    chain: &ChainFlags,
) -> anyhow::Result<config::Config> {
    let mut config = load_config(config_path)?;
    net.apply(&mut config.p2p, &mut config.http);
    let spec = &mut config.chain;
    if let Some(endpoint) = &chain.chain {
        spec.endpoint = endpoint.clone();
    }
    if let Some(netuid) = chain.netuid {
        spec.netuid = netuid;
    }
    if let Some(wallet) = &chain.wallet {
        spec.wallet = Some(wallet.clone());
    }
    if let Some(hotkey) = &chain.hotkey {
        spec.hotkey = Some(hotkey.clone());
    }
    if let Some(dir) = &chain.wallets_dir {
        spec.wallets_dir = Some(dir.clone());
    }
    if let Some(external) = &chain.external_addr {
        config.p2p.external = Some(external.clone());
    }
    config.check().context("the command line's values")?;
    Ok(config)
}

pub fn print_config(
    config_path: Option<PathBuf>,
    net: &super::node::NetArgs,
    chain: &ChainFlags,
) -> anyhow::Result<ExitCode> {
    let config = effective_config(config_path.as_deref(), net, chain)?;
    let text = toml::to_string(&config).context("writing the config as TOML")?;
    // TOML has no null: an unset optional field is shown as a comment in its section, so
    // every setting appears.
    let spec = &config.chain;
    let unset: Vec<String> = [
        ("hotkey", spec.hotkey.is_none(), "no signing: read-only chain access"),
        ("wallet", spec.wallet.is_none(), "needed with hotkey on subtensor"),
        ("wallets_dir", spec.wallets_dir.is_none(), "~/.bittensor/wallets"),
    ]
    .iter()
    .filter(|(_, is_unset, _)| *is_unset)
    .map(|(name, _, meaning)| format!("# {name}: unset ({meaning})"))
    .collect();
    for line in text.lines() {
        crate::outln!("{line}");
        if line.starts_with("netuid = ") {
            for comment in &unset {
                crate::outln!("{comment}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How `af validate` was asked to run (besides its config and flags for sections).
pub struct RunFlags {
    pub max_matches: Option<u64>,
    pub serve: bool,
    pub json: bool,
    /// The log filter's count of lines it held back, exported as a metric.
    pub log_suppressed: prometheus_client::metrics::counter::Counter,
}

pub fn validate(
    data: &Path,
    config_path: Option<PathBuf>,
    net: super::node::NetArgs,
    chain_flags: ChainFlags,
    flags: RunFlags,
) -> anyhow::Result<ExitCode> {
    let RunFlags { max_matches, serve, json, log_suppressed } = flags;
    let watch_only = chain_flags.watch_only;
    let config = effective_config(config_path.as_deref(), &net, &chain_flags)?;
    let log = Arc::new(super::data_dir::open_own_log(data)?);
    let closing = log.clone();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let outcome = runtime.block_on(async move {
        let (stop_sender, stop) = tokio::sync::watch::channel(false);
        let stop_sender = Arc::new(stop_sender);
        // Networking stops last, on its own signal: after our last block is sealed, so
        // it can announce and serve that block to its peers before it closes.
        let (net_stop_sender, net_stop) = tokio::sync::watch::channel(false);
        let signal = super::stop_signal();
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
        let metrics = Arc::new(super::node_metrics(log_suppressed));
        let budget = config.p2p.budget()?;
        // A chain that cannot be reached at start is retried with backoff (a service
        // waits for it); a bad key or spec is an error at once.
        let chain: Option<Arc<dyn af::chain::Chain>> = if config.chain.is_set() {
            let mut wait_ms = 500u64;
            loop {
                match af::chain::connect(&config.chain).await {
                    Ok(chain) => break Some(Arc::from(chain)),
                    Err(error @ af::chain::ChainError::Transport { .. }) => {
                        tracing::warn!(event = "chain_unreachable", error = %error, retry_ms = wait_ms, "cannot reach the chain; retrying");
                        let mut stop = stop.clone();
                        tokio::select! {
                            _ = tokio::time::sleep(std::time::Duration::from_millis(wait_ms)) => {}
                            _ = stop.changed() => {}
                        }
                        if *stop.borrow() {
                            return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
                        }
                        wait_ms = (wait_ms * 2).min(30_000);
                    }
                    Err(error) => return Err(anyhow::Error::from(error).context("connecting to the chain")),
                }
            }
        } else {
            None
        };
        if let (Some(chain), false) = (&chain, watch_only) {
            check_chain_identity(chain.as_ref(), &config.chain).await?;
        }
        // With a chain, peers and the allow-list also come from it: validators holding a
        // permit, their axons and their committed ledger keys (ledger-spec/13).
        let (peers_sender, peers_receiver) = tokio::sync::watch::channel(Default::default());
        let with_chain_peers = chain.is_some() && config.p2p.enabled();
        let network = if config.p2p.enabled() {
            let chain_peers = with_chain_peers.then(|| peers_receiver.clone());
            // Peers hear of the stop signal at once, and wait for our last block.
            Some(super::node::start(&log, &config.p2p, data, net_stop, chain_peers, budget.clone(), Some(stop.clone()))?)
        } else {
            None
        };
        let net_status = network.as_ref().map(|handle| handle.status.clone());
        if let (true, Some(chain), Some(status)) = (with_chain_peers, &chain, &net_status) {
            tokio::spawn(af::p2p::node::chain_peers_loop(
                chain.clone(),
                status.clone(),
                config.p2p.parsed()?.external,
                peers_sender,
                config.chain.discover_every_ms,
                stop.clone(),
            ));
        }
        let net_failure: Arc<std::sync::OnceLock<String>> = Arc::default();
        let (own_blocks, evidence, net_task) = match network {
            Some(handle) => {
                let watched = af::p2p::node::watch(handle.task, stop_sender.clone(), net_failure.clone());
                (Some(handle.own_blocks), Some(handle.evidence), Some(watched))
            }
            None => (None, None, None),
        };
        // One replay of our store for the anchoring and the HTTP API: one set of folds.
        let replays = Arc::new(af::replay::latest::LatestReplay::create(
            &data.join(af::replay::cold::COLD_FILE),
            af::replay::cold::CacheSize::VALIDATOR,
        )?);
        let _http = match config.http.address()? {
            Some(address) => Some(
                super::http::start(
                    address,
                    data,
                    log.clone(),
                    af::http::server::Feeds { status: net_status, chain: chain.clone(), replays: Some(replays.clone()) },
                    metrics.clone(),
                    budget.clone(),
                    stop.clone(),
                )
                .await?,
            ),
            None => None,
        };
        let (progress_sender, progress) =
            tokio::sync::watch::channel(MatchState::new(1, config.evaluation.stopping_rule()?, 1, 1, 0.5));
        let envs = config.evaluation.envs.clone();
        let envs_for_log = envs.clone();
        let terminal = std::io::stderr().is_terminal();
        let display = tokio::spawn(show_progress(progress, envs, terminal));
        // One memory of our weights sends for the run and the serving loop after it.
        let sent_weights = Arc::new(af::chain::SentWeights::default());
        let options = RunOptions {
            max_matches,
            now_ms: af::clock::unix_ms,
            progress: Some(Arc::new(progress_sender)),
            on_match: Box::new(move |report, contender, champion| {
                if terminal {
                    eprint!("\r\x1b[2K");
                }
                let tallies = report.state.tallies(&envs_for_log);
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
            }),
            request_stats: Arc::default(),
            own_blocks: own_blocks.clone(),
            evidence,
            chain: chain.clone(),
            anchor_check_ms: 1_000,
            anchor: !watch_only,
            sent_weights: sent_weights.clone(),
            metrics: metrics.clone(),
            replays: replays.clone(),
        };
        let summary = run::run(log.clone(), &config, stop.clone(), options).await;
        display.abort();
        let mut net_task = net_task;
        let mut summary = match summary {
            Ok(summary) => summary,
            Err(error) => {
                // Networking ends first, in bounds. A run that failed because networking
                // did (a store refusing writes once a peer's block found the disk full,
                // say) names that failure first.
                af::p2p::node::stop_and_wait(net_task.take(), &net_stop_sender).await;
                match net_failure.get() {
                    Some(failure) => anyhow::bail!("networking stopped: {failure}; then the run: {error}"),
                    None => return Err(error.into()),
                }
            }
        };
        if json {
            print_json(&summary)?;
        } else {
            outln!(
                "{} matches; champion {}; ratio to beat {:.4}; tip {}",
                summary.n_matches,
                summary.champion,
                f64::from(summary.ratio_to_beat_ppm) / 1e6,
                summary.tip.map_or("(empty)".into(), |t| format!("height {} hash {}", t.height, t.hash))
            );
            let r = &summary.requests;
            outln!(
                "{} requests to miners ({} failed); latency p50 {:.1} ms, p99 {:.1} ms",
                r.attempts,
                r.failed,
                r.latency_p50_us as f64 / 1e3,
                r.latency_p99_us as f64 / 1e3
            );
        }
        let serving = if serve && !summary.interrupted { net_task.take() } else { None };
        if let (Some(task), Some(own_blocks)) = (serving, own_blocks) {
            // The queue is done: one appender is now our log's single writer, for evidence
            // against peers and for anchoring, which goes on while serving.
            let serving = af::validator::service::Serving {
                log: log.clone(),
                own_blocks,
                evidence: summary.evidence.take(),
                anchor: chain.clone().filter(|_| !watch_only).map(|chain| af::validator::anchor::ChainSender {
                    replays: replays.clone(),
                    chain,
                    sent: sent_weights.clone(),
                }),
                ratio_params: config.evaluation.ratio_params(),
                now_ms: af::clock::unix_ms,
                metrics: metrics.clone(),
            };
            af::validator::service::serve_until_stopped(serving, stop.clone()).await;
            net_task = Some(task);
        }
        // The network ends inside the runtime, before the runtime does (dropping a running
        // swarm with the runtime panicked in its timers). Our last block is sealed by now:
        // the node announces it and serves it for up to its grace period.
        af::p2p::node::stop_and_wait(net_task, &net_stop_sender).await;
        if let Some(failure) = net_failure.get() {
            anyhow::bail!("networking stopped: {failure} (the validator stopped with it; run the same command to go on)");
        }
        // Stopped by a signal, while playing or while serving: 130, as the README says.
        Ok(if summary.interrupted || *stop.borrow() { ExitCode::from(super::EXIT_INTERRUPTED) } else { ExitCode::SUCCESS })
    });
    af::validator::service::close(runtime, closing);
    outcome
}

/// A validator with a chain must be able to sign on it: its hotkey given and registered
/// on the subnet. Refused otherwise, saying which flags to pass and how to register
/// (`--watch-only` runs without an identity on purpose).
async fn check_chain_identity(chain: &dyn af::chain::Chain, spec: &af::chain::ChainSpec) -> anyhow::Result<()> {
    let local = spec.endpoint.starts_with("local:");
    let Some(hotkey) = chain.hotkey() else {
        let flags = if local {
            "--hotkey HOTKEY (the local chain names hotkeys directly)"
        } else {
            "--wallet NAME --hotkey NAME (btcli's wallet files; --wallets-dir if not ~/.bittensor/wallets), or AF_HOTKEY_PHRASE"
        };
        anyhow::bail!(
            "a chain is set ({}) but no hotkey to sign with: pass {flags}; or pass --watch-only to play and record without committing or setting weights",
            spec.endpoint
        );
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
            anyhow::bail!(
                "hotkey {hotkey} is not registered on subnet {}: register it first ({register}), or pass --watch-only",
                spec.netuid
            )
        }
        Ok(_) => Ok(()),
        // Reachable but the read failed: the loops retry it; the identity was given.
        Err(error) => {
            tracing::warn!(event = "chain_read_failed", error = %error, "could not check that {hotkey} is registered; going on");
            Ok(())
        }
    }
}

/// One line per running match on a terminal: each env's tally or result.
async fn show_progress(mut progress: tokio::sync::watch::Receiver<MatchState>, envs: Vec<String>, terminal: bool) {
    if !terminal {
        return; // structured lines come from on_match
    }
    while progress.changed().await.is_ok() {
        let line = progress.borrow_and_update().progress_line(&envs);
        eprint!("\r\x1b[2K{line}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

pub fn ratio_show(
    data: &Path,
    config_path: Option<PathBuf>,
    chain: &super::chain::ChainArgs,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let config = load_config(config_path.as_deref())?;
    let params = config.evaluation.ratio_params();
    // A read command: the store is opened read-only and checked like any other read.
    let store = super::http::open_for_read(data)?;
    let validator = af::ledger::LedgerKey::load(&super::data_dir::key_path(data))?.validator();
    let loaded = state::load(&store, &validator, &params)?;
    // Chain time only: the chain's head if one is named, else the newest block the log
    // names (what the validator itself last saw).
    let (now_block, now_from) = match chain.chain {
        Some(_) => {
            let head = super::chain::runtime()?
                .block_on(async { anyhow::Ok(chain.connect().await?.current_block().await?) })?;
            (head, "chain")
        }
        None => (loaded.latest_chain_block, "log"),
    };
    let current = params.current_ppm(&loaded.ratio, now_block);
    if json {
        print_json(&serde_json::json!({
            "current_ppm": current,
            "current": f64::from(current) / 1e6,
            "set_ppm": loaded.ratio.set_ppm,
            "set_at_block": loaded.ratio.set_at_block,
            "set_by_match": loaded.ratio_set_by,
            "floor_ppm": params.floor_ppm(),
            "half_life_blocks": params.half_life_blocks,
            "now_block": now_block,
            "now_block_from": now_from,
            "champion": loaded.champion.map(|c| c.hotkey),
            "matches_decided": loaded.n_decided,
        }))?;
    } else {
        outln!("ratio to beat  {:.4}", f64::from(current) / 1e6);
        match loaded.ratio_set_by {
            Some(match_id) => outln!(
                "set to        {:.4} at chain block {} by match {}",
                f64::from(loaded.ratio.set_ppm) / 1e6,
                loaded.ratio.set_at_block,
                match_id
            ),
            None => {
                outln!("set to        {:.4} (initial: no contender has won yet)", f64::from(loaded.ratio.set_ppm) / 1e6)
            }
        }
        let now_text = match now_from {
            "chain" => format!("now chain block {now_block}, the chain's head"),
            _ if now_block == 0 => "no chain block in the log: a validator without a chain never decays".into(),
            _ => format!("now chain block {now_block}, the newest the log names; --chain reads the head"),
        };
        outln!(
            "decay          toward {:.4}, half-life {} chain blocks ({now_text})",
            f64::from(params.floor_ppm()) / 1e6,
            params.half_life_blocks,
        );
        outln!("champion       {}", loaded.champion.map_or("(none yet)".into(), |c| c.hotkey));
    }
    Ok(ExitCode::SUCCESS)
}
