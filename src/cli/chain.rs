//! `af chain ...`: the chain from the command line (either
//! backend), the local stand-in chain's server, and the audit's check of on-chain
//! commitments against the logs we hold.

use super::{one_line, print_json};
use crate::outln;
use af::chain::local::LocalChain;
use af::chain::local_client::LocalClient;
use af::chain::{self as chain_mod, Chain, ChainSpec};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug, Clone, Default)]
pub struct ChainArgs {
    /// `local:ADDR` (the local stand-in chain) or `subtensor:finney`, `subtensor:test`, `subtensor:local`, `subtensor:URL` (ws:// or wss://).
    #[arg(long = "chain")]
    pub chain: Option<String>,
    /// The subnet.
    #[arg(long, default_value_t = 1)]
    pub netuid: u16,
    /// Subtensor: the wallet name under --wallets-dir (default "default" when --hotkey is given, as in btcli).
    #[arg(long)]
    pub wallet: Option<String>,
    /// Subtensor: the wallet's hotkey name (default "default" when --wallet is given). Local chain: the hotkey itself.
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
            ..ChainSpec::default()
        })
    }

    /// The chain named, which the command needs.
    pub(super) fn required(&self) -> anyhow::Result<ChainSpec> {
        self.spec().context("name a chain: --chain local:ADDR or --chain subtensor:finney|test|local|URL")
    }

    pub(super) async fn connect(&self) -> anyhow::Result<Box<dyn Chain>> {
        Ok(chain_mod::connect(&self.required()?).await?)
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
        /// Milliseconds per block (subtensor: 12000), 1 to 3600000.
        #[arg(long, default_value_t = 12_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
        block_ms: u64,
        /// Blocks per epoch (subtensor's default tempo: 360), 1 to 65535; fixed when the chain is created.
        #[arg(long, default_value_t = 360, value_parser = clap::value_parser!(u64).range(1..=65_535))]
        tempo: u64,
    },
    /// Current block (and, on the local chain, its clock).
    Status {
        #[command(flatten)]
        chain: ChainArgs,
    },
    /// Register a hotkey on the local chain (the devnet's stand-in for registration).
    Register {
        #[command(flatten)]
        chain: ChainArgs,
        /// Give the neuron a validator permit.
        #[arg(long)]
        validator: bool,
        /// Take this uid, deregistering the hotkey that holds it (what subtensor does to a full subnet's lowest-ranked neuron).
        #[arg(long)]
        replace_uid: Option<u16>,
    },
    /// Registered neurons: uid, hotkey, registration block, validator permit.
    Neurons {
        #[command(flatten)]
        chain: ChainArgs,
    },
    /// Every hotkey's latest commitment, read as an af ledger commitment where it is one.
    Commitments {
        #[command(flatten)]
        chain: ChainArgs,
    },
    /// Timelock encryption as commit-reveal v4 uses it (drand quicknet by default), offline.
    #[command(subcommand)]
    Tlock(TlockCommand),
    /// Commit our log's tip now, and record the commitment in our log.
    Commit {
        /// The data directory: the ledger store and key (read commands open it read-only, or read a running node through its HTTP API).
        #[arg(long)]
        data: PathBuf,
        #[command(flatten)]
        chain: ChainArgs,
    },
}

/// Offline timelock tools: what a validator's commit holds and when it opens, for
/// auditors and for checking `af` against other implementations (ledger-spec/12).
#[derive(Subcommand, Debug)]
pub enum TlockCommand {
    /// Encrypt bytes to a round (prints the ciphertext as the chain stores it, hex).
    Encrypt {
        /// The round whose signature will open it.
        #[arg(long)]
        round: u64,
        /// The plaintext, hex (at most 4096 bytes).
        #[arg(long)]
        plaintext: String,
        #[command(flatten)]
        beacon: BeaconArgs,
    },
    /// Open a ciphertext with its round's signature; decodes a weights payload if it is one.
    Decrypt {
        /// The ciphertext, hex (a commit's bytes as the chain stores them).
        #[arg(long)]
        ciphertext: String,
        /// The round's signature, hex (48 bytes).
        #[arg(long)]
        signature: String,
        /// Check first that the signature is the beacon's signature of this round.
        #[arg(long)]
        round: Option<u64>,
        #[command(flatten)]
        beacon: BeaconArgs,
    },
    /// The reveal block and drand round a commit made now is aimed at (ledger-spec/12).
    Plan {
        /// The chain's head block when the commit is made.
        #[arg(long)]
        block: u64,
        /// The subnet's tempo (blocks per epoch).
        #[arg(long, default_value_t = 360)]
        tempo: u64,
        /// RevealPeriodEpochs.
        #[arg(long, default_value_t = 1)]
        reveal_period: u64,
        /// Stateful schedule: LastEpochBlock (without it, the legacy schedule is used).
        #[arg(long)]
        last_epoch_block: Option<u64>,
        /// Stateful schedule: PendingEpochAt (0: none).
        #[arg(long, default_value_t = 0)]
        pending_epoch_at: u64,
        /// Legacy schedule: the subnet.
        #[arg(long, default_value_t = 1)]
        netuid: u16,
        /// Milliseconds per block, 1 to 3600000.
        #[arg(long, default_value_t = 12_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
        block_ms: u64,
        /// The time of `--block`, unix milliseconds (default: now).
        #[arg(long)]
        now_ms: Option<u64>,
        #[command(flatten)]
        beacon: BeaconArgs,
    },
}

/// The beacon: drand quicknet unless a stand-in chain's beacon is named.
#[derive(Args, Debug, Clone)]
pub struct BeaconArgs {
    /// The beacon's public key, hex (96 bytes; default: drand quicknet's).
    #[arg(long, default_value = af::chain::tlock::QUICKNET_PUBLIC_KEY_HEX, hide_default_value = true)]
    beacon_public_key: String,
    /// The beacon's genesis, unix seconds.
    #[arg(long, default_value_t = af::chain::tlock::QUICKNET_GENESIS_S)]
    beacon_genesis: u64,
    /// The beacon's period, seconds.
    #[arg(long, default_value_t = af::chain::tlock::QUICKNET_PERIOD_S)]
    beacon_period: u64,
}

impl BeaconArgs {
    fn beacon(&self) -> anyhow::Result<af::chain::tlock::Beacon> {
        anyhow::ensure!(self.beacon_period >= 1, "--beacon-period must be at least 1");
        Ok(af::chain::tlock::Beacon {
            public_key: self.beacon_public_key.clone(),
            genesis_s: self.beacon_genesis,
            period_s: self.beacon_period,
        })
    }
}

fn tlock(command: TlockCommand, json: bool) -> anyhow::Result<ExitCode> {
    use af::chain::tlock::{self, EpochSchedule, TlockError};
    match command {
        TlockCommand::Encrypt { round, plaintext, beacon } => {
            anyhow::ensure!(round >= 1, "--round must be at least 1");
            let plaintext = af::input::hex("--plaintext", &plaintext, 4096)?;
            let ciphertext = tlock::encrypt(&beacon.beacon()?, round, &plaintext, &mut rand_core::OsRng)?;
            if json {
                print_json(
                    &serde_json::json!({ "round": round, "ciphertext": hex::encode(&ciphertext), "ciphertext_hash": af::bytes::Hash32(*blake3::hash(&ciphertext).as_bytes()) }),
                )?;
            } else {
                outln!("{}", hex::encode(&ciphertext));
            }
        }
        TlockCommand::Decrypt { ciphertext, signature, round, beacon } => {
            let ciphertext = af::input::hex("--ciphertext", &ciphertext, tlock::MAX_COMMIT_BYTES)?;
            let signature = af::input::hex("--signature", &signature, 48)?;
            let beacon = beacon.beacon()?;
            // A signature that is not the round's, or a ciphertext it does not open, is
            // the check failing (exit 3); unreadable input is a usage error (exit 1).
            let (plaintext, weights) = match tlock::open(&beacon, round, &ciphertext, &signature) {
                Ok(opened) => opened,
                Err(error @ (TlockError::WrongSignature { .. } | TlockError::Decrypt(_))) => {
                    let message = error.to_string();
                    return super::report_check(json, false, serde_json::json!({ "error": message }), &message);
                }
                Err(error) => return Err(error.into()),
            };
            if json {
                print_json(&serde_json::json!({
                    "ok": true,
                    "plaintext": hex::encode(&plaintext),
                    "signature_checked_for_round": round,
                    "weights": weights.as_ref().map(tlock::WeightsTlockPayload::json),
                }))?;
            } else {
                outln!("plaintext {}", hex::encode(&plaintext));
                if let Some(weights) = weights {
                    outln!("weights payload: {weights}");
                }
            }
        }
        TlockCommand::Plan {
            block,
            tempo,
            reveal_period,
            last_epoch_block,
            pending_epoch_at,
            netuid,
            block_ms,
            now_ms,
            beacon,
        } => {
            let schedule = match last_epoch_block {
                Some(last_epoch_block) => EpochSchedule::Stateful { tempo, last_epoch_block, pending_epoch_at },
                None => EpochSchedule::Legacy { tempo, netuid },
            };
            let now_ms = now_ms.unwrap_or_else(af::clock::unix_ms);
            let plan = tlock::reveal_plan(&beacon.beacon()?, schedule, reveal_period, block, now_ms, block_ms)?;
            if json {
                print_json(
                    &serde_json::json!({ "schedule": schedule, "block": block, "now_ms": now_ms, "plan": plan }),
                )?;
            } else {
                outln!(
                    "a commit made at head {block} is revealed at block {}; encrypt to round {} (block {}, unix ms {})",
                    plan.reveal_block,
                    plan.reveal_round,
                    plan.target_block,
                    plan.target_unix_ms
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

pub fn run(command: ChainCommand, json: bool) -> anyhow::Result<ExitCode> {
    match command {
        ChainCommand::Serve { data, listen, block_ms, tempo } => serve(data, &listen, block_ms, tempo, json),
        ChainCommand::Tlock(command) => tlock(command, json),
        ChainCommand::Status { chain } => runtime()?.block_on(async {
            let client = chain.connect().await?;
            let block = client.current_block().await?;
            if json {
                print_json(&serde_json::json!({ "block": block, "netuid": client.netuid() }))?;
            } else {
                outln!("block {block} (netuid {})", client.netuid());
            }
            Ok(ExitCode::SUCCESS)
        }),
        ChainCommand::Register { chain, validator, replace_uid } => runtime()?.block_on(async {
            let spec = chain.spec().context("name the local chain: --chain local:ADDR")?;
            let neuron = LocalClient::register_named(&spec, validator, replace_uid).await?;
            if json {
                print_json(&neuron)?;
            } else {
                outln!(
                    "registered {} as uid {} at block {}",
                    one_line(&neuron.hotkey),
                    neuron.uid,
                    neuron.registration_block
                );
            }
            Ok(ExitCode::SUCCESS)
        }),
        ChainCommand::Neurons { chain } => runtime()?.block_on(async {
            let neurons = chain.connect().await?.neurons().await?;
            if json {
                print_json(&neurons)?;
            } else {
                for line in af::audit::text::neuron_lines(&neurons) {
                    outln!("{line}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }),
        ChainCommand::Commitments { chain } => runtime()?.block_on(async {
            let records = chain.connect().await?.commitments().await?;
            if json {
                print_json(&records.iter().map(af::audit::text::commitment_json).collect::<Vec<_>>())?;
            } else {
                for r in &records {
                    outln!("{}", af::audit::text::commitment_line(r));
                }
            }
            Ok(ExitCode::SUCCESS)
        }),
        ChainCommand::Commit { data, chain } => {
            let log = Arc::new(super::data_dir::open_own_log(&data)?);
            runtime()?.block_on(async {
                let client = chain.connect().await?;
                let announce = af::protocol::Protocol::network().newest();
                let Some(commitment) = af::validator::anchor::commit_tip(&log, client.as_ref(), announce).await? else {
                    anyhow::bail!("our log is empty: nothing to commit");
                };
                let receipt =
                    log.append(vec![af::ledger::Event::ChainCommitment(commitment.clone())], af::clock::unix_ms())?;
                if json {
                    print_json(
                        &serde_json::json!({ "commitment": commitment, "recorded_at_height": receipt.tip.height }),
                    )?;
                } else {
                    outln!(
                        "committed height {} hash {} at chain block {}; recorded in our log at height {}",
                        commitment.committed_height,
                        commitment.committed_hash,
                        commitment.chain_block,
                        receipt.tip.height
                    );
                }
                Ok(ExitCode::SUCCESS)
            })
        }
    }
}

fn serve(data: PathBuf, listen: &str, block_ms: u64, tempo: u64, json: bool) -> anyhow::Result<ExitCode> {
    let chain = Arc::new(LocalChain::open(&data, block_ms, tempo, af::clock::unix_ms)?);
    runtime()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("listening on {listen}"))?;
        let address = listener.local_addr()?;
        // One line on stdout so scripts (and af devnet) learn the address.
        if json {
            outln!("{}", serde_json::json!({ "listening": address, "data": data, "block_ms": block_ms }));
        } else {
            outln!("listening on {address}");
        }
        std::io::stdout().flush()?;
        let stop = async {
            af::validator::service::stop_signal().await;
        };
        af::chain::local_api::serve(chain, listener, block_ms, stop).await?;
        Ok(ExitCode::SUCCESS)
    })
}

/// What the pages show from the chain `args` names, read now (none without `--chain`):
/// the validators' identities, and the queue of the validator whose own log folds to
/// `own`.
pub fn read_for_pages(
    args: &ChainArgs,
    own: Option<&af::validator::state::ValidatorState>,
) -> anyhow::Result<Option<af::http::pages::FromChain>> {
    let Some(spec) = args.spec() else { return Ok(None) };
    let (neurons, records, head) = runtime()?.block_on(async {
        let chain = chain_mod::connect(&spec).await?;
        let head = chain.current_block().await?;
        anyhow::Ok((chain.neurons().await?, chain.commitments().await?, head))
    })?;
    Ok(Some(af::http::pages::FromChain::read(&neurons, &records, head, own)))
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
