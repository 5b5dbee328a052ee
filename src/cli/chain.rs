//! `af chain ...` and `af weights show`: the chain from the command line (either
//! backend), the local stand-in chain's server, and the audit's check of on-chain
//! commitments against the logs we hold.

use super::print_json;
use crate::outln;
use af::chain::local::{self, LocalChain, LocalClient};
use af::chain::{self as chain_mod, Chain, ChainSpec};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug, Clone, Default)]
pub struct ChainArgs {
    /// `local:ADDR` (the local stand-in chain) or `subtensor:URL` (ws:// or wss://).
    #[arg(long = "chain")]
    pub chain: Option<String>,
    /// The subnet.
    #[arg(long, default_value_t = 1)]
    pub netuid: u16,
    /// Subtensor: the wallet name under --wallets-dir.
    #[arg(long)]
    pub wallet: Option<String>,
    /// Subtensor: the wallet's hotkey name. Local chain: the hotkey itself.
    #[arg(long)]
    pub hotkey: Option<String>,
    /// Subtensor: the wallets directory (default: ~/.bittensor/wallets).
    #[arg(long)]
    pub wallets_dir: Option<PathBuf>,
}

impl ChainArgs {
    pub fn spec(&self) -> Option<ChainSpec> {
        self.chain.as_ref().map(|endpoint| ChainSpec {
            endpoint: endpoint.clone(),
            netuid: self.netuid,
            hotkey: self.hotkey.clone(),
            wallet: self.wallet.clone(),
            wallets_dir: self.wallets_dir.clone(),
        })
    }

    async fn connect(&self) -> anyhow::Result<Box<dyn Chain>> {
        let spec = self.spec().context("name a chain: --chain local:ADDR or --chain subtensor:URL")?;
        Ok(chain_mod::connect(&spec).await?)
    }
}

#[derive(Subcommand, Debug)]
pub enum ChainCommand {
    /// Serve the local stand-in chain (our small HTTP API, not Substrate) from DIR.
    Serve {
        /// The stand-in chain's state directory (created; kept across restarts).
        #[arg(long)]
        data: PathBuf,
        /// Address to listen on (port 0: any free port, printed at start).
        #[arg(long, default_value = "127.0.0.1:9944")]
        listen: String,
        /// Milliseconds per block (subtensor: 12000).
        #[arg(long, default_value_t = 12_000)]
        block_ms: u64,
        /// Blocks per epoch (subtensor's default tempo: 360); fixed when the chain is created.
        #[arg(long, default_value_t = 360)]
        tempo: u64,
        /// Announce the address as one JSON line (`{"listening": ADDR, ...}`).
        #[arg(long)]
        json: bool,
    },
    /// Current block (and, on the local chain, its clock).
    Status {
        #[command(flatten)]
        chain: ChainArgs,
        /// Print JSON for scripts (ledger-spec/10 for events).
        #[arg(long)]
        json: bool,
    },
    /// Register a hotkey on the local chain (the devnet's stand-in for registration).
    Register {
        #[command(flatten)]
        chain: ChainArgs,
        /// Give the neuron a validator permit.
        #[arg(long)]
        validator: bool,
        /// Print JSON for scripts (ledger-spec/10 for events).
        #[arg(long)]
        json: bool,
    },
    /// Registered neurons: uid, hotkey, registration block, validator permit.
    Neurons {
        #[command(flatten)]
        chain: ChainArgs,
        /// Print JSON for scripts (ledger-spec/10 for events).
        #[arg(long)]
        json: bool,
    },
    /// Every hotkey's latest commitment, read as an af ledger commitment where it is one.
    Commitments {
        #[command(flatten)]
        chain: ChainArgs,
        /// Print JSON for scripts (ledger-spec/10 for events).
        #[arg(long)]
        json: bool,
    },
    /// Commit our log's tip now, and record the commitment in our log.
    Commit {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        #[command(flatten)]
        chain: ChainArgs,
        /// Print JSON for scripts (ledger-spec/10 for events).
        #[arg(long)]
        json: bool,
    },
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

pub fn run(command: ChainCommand) -> anyhow::Result<ExitCode> {
    match command {
        ChainCommand::Serve { data, listen, block_ms, tempo, json } => serve(data, &listen, block_ms, tempo, json),
        ChainCommand::Status { chain, json } => runtime()?.block_on(async {
            let client = chain.connect().await?;
            let block = client.current_block().await?;
            if json {
                print_json(&serde_json::json!({ "block": block, "netuid": client.netuid() }))?;
            } else {
                outln!("block {block} (netuid {})", client.netuid());
            }
            Ok(ExitCode::SUCCESS)
        }),
        ChainCommand::Register { chain, validator, json } => runtime()?.block_on(async {
            let endpoint = chain.chain.clone().unwrap_or_default();
            let addr = endpoint.strip_prefix("local:").context("registration here is for the local chain only (--chain local:ADDR); on subtensor use btcli")?;
            let hotkey = chain.hotkey.clone().context("--hotkey is required")?;
            let client = LocalClient::new(addr, chain.netuid, Some(hotkey.clone()))?;
            let neuron = client.register(&hotkey, validator).await?;
            if json {
                print_json(&neuron)?;
            } else {
                outln!("registered {} as uid {} at block {}", neuron.hotkey, neuron.uid, neuron.registration_block);
            }
            Ok(ExitCode::SUCCESS)
        }),
        ChainCommand::Neurons { chain, json } => runtime()?.block_on(async {
            let neurons = chain.connect().await?.neurons().await?;
            if json {
                print_json(&neurons)?;
            } else {
                outln!("{:>5}  {:<50} {:>12} {:>9}", "uid", "hotkey", "registered", "validator");
                for n in &neurons {
                    outln!("{:>5}  {:<50} {:>12} {:>9}", n.uid, n.hotkey, n.registration_block, if n.validator_permit { "yes" } else { "" });
                }
            }
            Ok(ExitCode::SUCCESS)
        }),
        ChainCommand::Commitments { chain, json } => runtime()?.block_on(async {
            let records = chain.connect().await?.commitments().await?;
            if json {
                let rows: Vec<serde_json::Value> = records
                    .iter()
                    .map(|r| serde_json::json!({ "hotkey": r.hotkey, "block": r.block, "fields": r.fields.iter().map(hex::encode).collect::<Vec<_>>(), "ledger": r.ledger() }))
                    .collect();
                print_json(&rows)?;
            } else {
                for r in &records {
                    match r.ledger() {
                        Some(c) => outln!(
                            "{}  block {}: ledger {} tip height {} hash {}",
                            r.hotkey, r.block, c.ledger_key, c.tip_height, c.tip_hash
                        ),
                        None => outln!("{}  block {}: {} field(s), not an af ledger commitment", r.hotkey, r.block, r.fields.len()),
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }),
        ChainCommand::Commit { data, chain, json } => {
            let log = Arc::new(super::ledger::open_own_log(&data)?);
            runtime()?.block_on(async {
                let client = chain.connect().await?;
                let Some(commitment) = af::validator::anchor::commit_tip(&log, client.as_ref()).await? else {
                    anyhow::bail!("our log is empty: nothing to commit");
                };
                let receipt = log.append(vec![af::ledger::Event::ChainCommitment(commitment.clone())], super::now_ms())?;
                if json {
                    print_json(&serde_json::json!({ "commitment": commitment, "recorded_at_height": receipt.tip.height }))?;
                } else {
                    outln!(
                        "committed height {} hash {} at chain block {}; recorded in our log at height {}",
                        commitment.committed_height, commitment.committed_hash, commitment.chain_block, receipt.tip.height
                    );
                }
                Ok(ExitCode::SUCCESS)
            })
        }
    }
}

fn serve(data: PathBuf, listen: &str, block_ms: u64, tempo: u64, json: bool) -> anyhow::Result<ExitCode> {
    anyhow::ensure!((1..=3_600_000).contains(&block_ms), "--block-ms must be in 1..=3600000");
    anyhow::ensure!((1..=65_535).contains(&tempo), "--tempo must be in 1..=65535");
    let chain = Arc::new(LocalChain::open(&data, block_ms, tempo, super::now_ms)?);
    runtime()?.block_on(async move {
        // Each block, open the timelocked weight commits that are due, as subtensor does.
        let ticking = chain.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(block_ms)).await;
                if let Err(error) = ticking.tick() {
                    tracing::error!(event = "chain_tick_failed", error = %error, "revealing commits failed");
                }
            }
        });
        let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("listening on {listen}"))?;
        let address = listener.local_addr()?;
        // One line on stdout so scripts (and af devnet) learn the address.
        if json {
            outln!("{}", serde_json::json!({ "listening": address, "data": data, "block_ms": block_ms }));
        } else {
            outln!("listening on {address}");
        }
        std::io::stdout().flush()?;
        axum::serve(listener, local::router(chain))
            .with_graceful_shutdown(async {
                super::stop_signal().await;
            })
            .await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The subnet's commitments, read from the chain `args` names (none without `--chain`).
pub fn commitment_records(args: &ChainArgs) -> anyhow::Result<Option<(String, Vec<af::chain::CommitmentRecord>)>> {
    let Some(spec) = args.spec() else { return Ok(None) };
    let records = runtime()?.block_on(async {
        let chain = chain_mod::connect(&spec).await?;
        anyhow::Ok(chain.commitments().await?)
    })?;
    Ok(Some((spec.endpoint.clone(), records)))
}

/// Reads the subnet's commitments and compares the proven tip of `validator` with them.
pub fn check_commitment_on_chain(
    chain: &ChainArgs,
    validator: &af::bytes::ValidatorKey,
    tip: &af::ledger::Tip,
) -> anyhow::Result<chain_mod::OnChainCheck> {
    let records = runtime()?.block_on(async { anyhow::Ok(chain.connect().await?.commitments().await?) })?;
    Ok(chain_mod::check_tip_on_chain(&records, validator, tip))
}

/// `af weights show`: what replay says the weights should be, next to what is on chain.
pub fn weights_show(data: &std::path::Path, chain: &ChainArgs, json: bool) -> anyhow::Result<ExitCode> {
    let (_store, replayed) = super::http::replay_dir(data)?;
    let state = &replayed.state;
    let on_chain = match chain.spec() {
        Some(_) => Some(runtime()?.block_on(async {
            let client = chain.connect().await?;
            let neurons = client.neurons().await?;
            let weights = client.weights().await?;
            anyhow::Ok((neurons, weights))
        })?),
        None => None,
    };
    // The champion's uid on chain now, where the chain is known.
    let expected_uid = match (&state.champion, &on_chain) {
        (Some(c), Some((neurons, _))) => neurons.iter().find(|n| n.hotkey == c.hotkey).map(|n| n.uid),
        (Some(c), None) => Some(c.uid),
        (None, _) => None,
    };
    if json {
        print_json(&serde_json::json!({
            "champion": state.champion,
            "replay_weights": expected_uid.map(|uid| vec![(uid, u16::MAX)]).unwrap_or_default(),
            "state_hash": replayed.state_hash,
            "on_chain": on_chain.as_ref().map(|(_, w)| w),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "replay: champion {} → weights {}",
        state.champion.as_ref().map_or("(none)", |c| c.hotkey.as_str()),
        expected_uid.map_or("(none)".into(), |uid| format!("uid {uid} = 65535 (all)"))
    );
    match &on_chain {
        None => outln!("on chain: not read (pass --chain to compare)"),
        Some((_, weights)) if weights.is_empty() => outln!("on chain: no weights set"),
        Some((neurons, weights)) => {
            for (uid, pairs) in weights {
                let setter = neurons.iter().find(|n| n.uid == *uid).map_or("?", |n| n.hotkey.as_str());
                let agrees = expected_uid.is_some_and(|e| pairs.iter().all(|&(d, w)| (d == e) == (w > 0)));
                outln!(
                    "on chain: uid {uid} ({setter}) sets {pairs:?}{}",
                    if agrees { "  (agrees with replay)" } else { "  (DIFFERS from replay)" }
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
