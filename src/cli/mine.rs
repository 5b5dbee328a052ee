//! `af mine`: a miner's side of the subnet. `commit` puts what it serves on chain
//! (ledger-spec/13); `status` shows what validators will see of it.

use super::chain::{runtime, ChainArgs};
use super::print_json;
use crate::outln;
use af::chain::miner::MinerCommitment;
use af::validator::discovery;
use anyhow::Context;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum MineCommand {
    /// Commit the model this miner serves (Commitments.set_commitment; ledger-spec/13).
    Commit {
        /// The model's name (a Hugging Face repository), 1..=128 bytes.
        #[arg(long)]
        model: String,
        /// The model's revision (commit hash), 1..=64 bytes.
        #[arg(long)]
        revision: String,
        /// The OpenAI-compatible base URL (http:// or https://), or chutes:SLUG.
        #[arg(long)]
        endpoint: String,
        #[command(flatten)]
        chain: ChainArgs,
    },
    /// What validators will see: registration, uid, the commitment as decoded, the
    /// queue's verdict on it, whether the endpoint answers /v1/models, and (with --data)
    /// this miner's matches in every log held there.
    Status {
        #[command(flatten)]
        chain: ChainArgs,
        /// A data directory whose logs to search for this miner's matches.
        #[arg(long)]
        data: Option<PathBuf>,
        /// Milliseconds to wait for the endpoint's /v1/models.
        #[arg(long, default_value_t = 5_000)]
        timeout_ms: u64,
    },
}

pub fn run(command: MineCommand, json: bool) -> anyhow::Result<ExitCode> {
    match command {
        MineCommand::Commit { model, revision, endpoint, chain } => commit(&model, &revision, &endpoint, &chain, json),
        MineCommand::Status { chain, data, timeout_ms } => status(&chain, data.as_deref(), timeout_ms, json),
    }
}

fn commit(model: &str, revision: &str, endpoint: &str, args: &ChainArgs, json: bool) -> anyhow::Result<ExitCode> {
    let commitment = MinerCommitment::new(model, revision, endpoint)?;
    let fields = commitment.to_fields()?;
    let spec = args.required()?;
    runtime()?.block_on(async {
        let chain = af::chain::connect(&spec).await?;
        let hotkey = chain.hotkey().context("committing needs a hotkey: --wallet/--hotkey (or AF_HOTKEY_PHRASE)")?;
        let neurons = chain.neurons().await?;
        let Some(neuron) = neurons.iter().find(|n| n.hotkey == hotkey) else {
            anyhow::bail!(
                "hotkey {hotkey} is not registered on subnet {}: register it first (btcli subnet register; on the local chain, af chain register)",
                chain.netuid()
            );
        };
        let block = chain.commit_fields(&fields).await.map_err(|error| {
            let text = error.to_string();
            if text.contains("SpaceLimitExceeded") && !text.contains("resets") {
                anyhow::anyhow!("{text}: each hotkey may commit 3100 bytes per epoch; retry after the next epoch")
            } else {
                anyhow::Error::from(error)
            }
        })?;
        if json {
            print_json(&serde_json::json!({
                "hotkey": hotkey, "uid": neuron.uid, "block": block, "commitment": commitment,
                "bytes": commitment.to_json().len(), "fields": fields.len(),
            }))?;
        } else {
            outln!(
                "committed {}@{} at {} for {hotkey} (uid {}) at chain block {block} ({} bytes in {} field(s))",
                commitment.model,
                commitment.revision,
                commitment.endpoint,
                neuron.uid,
                commitment.to_json().len(),
                fields.len()
            );
        }
        Ok(ExitCode::SUCCESS)
    })
}

fn status(args: &ChainArgs, data: Option<&std::path::Path>, timeout_ms: u64, json: bool) -> anyhow::Result<ExitCode> {
    let spec = args.required()?;
    let (hotkey, neurons, records) = runtime()?.block_on(async {
        let chain = af::chain::connect(&spec).await?;
        let hotkey = chain.hotkey().context("name the miner's hotkey: --wallet/--hotkey (or AF_HOTKEY_PHRASE)")?;
        anyhow::Ok((hotkey, chain.neurons().await?, chain.commitments().await?))
    })?;
    // The queue the validator whose data directory this is will play (its champion and
    // what already played, folded from its own log), by the function `af validate` calls;
    // without one, the queue of a validator that has played nothing yet. The data
    // directory's store is opened (through a running node, mirrored) once.
    let opened = data.map(|dir| super::http::replay_dir(dir).map(|opened| (dir, opened))).transpose()?;
    let own = match &opened {
        Some((dir, (store, _))) => af::validator::state::own_state(dir, store)?,
        None => None,
    };
    let replayed = opened.as_ref().map(|(_, (_, replayed))| replayed);
    let status = af::audit::miner_status::miner_status(&hotkey, &neurons, &records, own.as_ref(), replayed)?;
    let models = match &status.commitment {
        Some(Ok(c)) if !c.endpoint.starts_with("chutes:") => {
            let endpoint = discovery::endpoint_of(c);
            Some(runtime()?.block_on(af::miner::client::list_models(&endpoint, timeout_ms)))
        }
        _ => None,
    };
    if json {
        print_json(&status.json(&hotkey, models.as_ref()))?;
        return Ok(ExitCode::SUCCESS);
    }
    for line in status.lines(&hotkey, spec.netuid, models.as_ref()) {
        outln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
