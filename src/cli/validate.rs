//! `af validate` (the validator loop) and `af ratio show`.

use super::print_json;
use crate::outln;
use af::validator::config;
use af::validator::launch::{self, Launch, Validator};
use af::validator::matchrun::MatchProgress;
use af::validator::state;
use anyhow::Context;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

pub fn load_config(path: Option<&Path>) -> anyhow::Result<config::Config> {
    let text = match path {
        Some(path) => af::input::read_text(path, 1024 * 1024)?,
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
    for line in config.to_toml_commented()?.lines() {
        outln!("{line}");
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
    use af::validator::{hotkey_swap, key_rotation};
    // A run that `af key rotate` stopped rotates the key, answers, and runs again under
    // the new key; one that found our hotkey swapped on chain runs again under the new
    // hotkey; any other end is the command's.
    loop {
        let mut config = effective_config(config_path.as_deref(), &net, &chain_flags)?;
        hotkey_swap::follow(data, &mut config.chain)?;
        // Said before anything starts (no log line, no store opened): there is nothing to play.
        config.check_playable()?;
        let protocol = config.protocol();
        let swap_before = hotkey_swap::read(data);
        let code = validate_once(data, config, &chain_flags, &flags)?;
        if hotkey_swap::read(data) != swap_before {
            continue;
        }
        if !key_rotation::is_requested(data) {
            return Ok(code);
        }
        // Logged either way; a rotation that failed runs again under the same key.
        let _ = key_rotation::answer(data, &protocol, af::clock::unix_ms());
    }
}

/// One run of `af validate`, until its matches are done, a signal, or a rotation request.
fn validate_once(
    data: &Path,
    config: config::Config,
    chain_flags: &ChainFlags,
    flags: &RunFlags,
) -> anyhow::Result<ExitCode> {
    let RunFlags { max_matches, serve, json, ref log_suppressed } = *flags;
    let log_suppressed = log_suppressed.clone();
    let log = Arc::new(super::data_dir::open_own_log(data)?);
    let closing = log.clone();
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let outcome = runtime.block_on(async move {
        let (progress_sender, progress) = tokio::sync::watch::channel(MatchProgress::default());
        let launch = Launch {
            data: data.to_owned(),
            log,
            config,
            watch_only: chain_flags.watch_only,
            metrics: Arc::new(super::node_metrics(log_suppressed)),
        };
        let signal = af::validator::service::stop_signal();
        let rotation = af::validator::key_rotation::requested(data.to_owned());
        let swap = af::validator::hotkey_swap::recorded(data.to_owned(), af::validator::hotkey_swap::read(data));
        let stop = async move {
            tokio::select! {
                name = signal => name,
                name = rotation => name,
                name = swap => name,
            }
        };
        let Some(mut validator) = Validator::start(launch, stop).await? else {
            return Ok(ExitCode::from(super::EXIT_INTERRUPTED));
        };
        let terminal = std::io::stderr().is_terminal();
        let display = tokio::spawn(show_progress(progress, terminal));
        let on_match = Box::new(move |report: &_, contender: &_, champion: &_| {
            if terminal {
                eprint!("\r\x1b[2K");
            }
            launch::log_match(report, contender, champion);
        });
        let summary = validator.play(max_matches, Some(Arc::new(progress_sender)), on_match).await;
        display.abort();
        let mut summary = summary?;
        if json {
            print_json(&summary)?;
        } else {
            for line in summary.lines() {
                outln!("{line}");
            }
        }
        if serve && !summary.interrupted {
            validator.serve(&mut summary).await;
        }
        let stopped = validator.stop().await?;
        // Stopped by a signal, while playing or while serving: 130, as docs/operator.md says.
        Ok(if summary.interrupted || stopped { ExitCode::from(super::EXIT_INTERRUPTED) } else { ExitCode::SUCCESS })
    });
    af::validator::service::close(runtime, closing);
    outcome
}

/// One line per running match on a terminal: each env's tally or result.
async fn show_progress(mut progress: tokio::sync::watch::Receiver<MatchProgress>, terminal: bool) {
    if !terminal {
        return; // structured lines come from on_match
    }
    while progress.changed().await.is_ok() {
        let line = {
            let shown = progress.borrow_and_update();
            shown.state.as_ref().map(|state| state.progress_line(&shown.envs)).unwrap_or_default()
        };
        eprint!("\r\x1b[2K{line}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

pub fn ratio_show(data: &Path, chain: &super::chain::ChainArgs, json: bool) -> anyhow::Result<ExitCode> {
    // A read command: the store is opened read-only and checked like any other read.
    let store = super::http::open_for_read(data)?;
    let validator = af::ledger::LedgerKey::load(&super::data_dir::key_path(data))?.validator();
    let loaded = state::load(&store, &validator, &af::evaluation::ratio::DEFAULT_RATIO_PARAMS)?;
    let head = match chain.chain {
        Some(_) => Some(
            super::chain::runtime()?.block_on(async { anyhow::Ok(chain.connect().await?.current_block().await?) })?,
        ),
        None => None,
    };
    let shown = af::validator::ratio_show::RatioShow::of(loaded, head);
    if json {
        print_json(&shown)?;
    } else {
        for line in shown.lines() {
            outln!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
