//! `af weights show`, and the view of the chain that it and `af audit` compare the logs
//! with: block, neurons, weights, pending timelocked commits and commitments.

use super::chain::ChainArgs;
use super::{one_line, print_json};
use crate::outln;
use af::chain as chain_mod;
use af::replay::Replay;
use std::process::ExitCode;

/// What the audit and `af weights show` read from the chain `args` names.
pub struct ChainView {
    pub endpoint: String,
    pub block: u64,
    pub tempo: u64,
    pub neurons: Vec<af::chain::Neuron>,
    pub weights: Vec<(u16, Vec<(u16, u16)>)>,
    pub timelocked: af::chain::Timelocked,
    pub records: Vec<af::chain::CommitmentRecord>,
    /// The chain's hash of each block asked for (`None`: no such block).
    pub block_hashes: std::collections::BTreeMap<u64, Option<af::bytes::Hash32>>,
}

impl ChainView {
    pub fn weights_input(&self) -> af::audit::WeightsOnChain<'_> {
        af::audit::WeightsOnChain {
            endpoint: &self.endpoint,
            block: self.block,
            tempo: self.tempo,
            neurons: &self.neurons,
            weights: &self.weights,
            timelocked: &self.timelocked,
            records: &self.records,
        }
    }

    /// Replay's winner-takes-all weights with the champion's uid on this chain now.
    pub fn replay_weights(&self, state: &af::replay::network::NetworkState) -> Vec<(u16, u16)> {
        state
            .champion
            .as_ref()
            .and_then(|c| self.neurons.iter().find(|n| *n.hotkey == *c.hotkey))
            .map(|n| vec![(n.uid, u16::MAX)])
            .unwrap_or_default()
    }
}

/// Reads the chain `args` names (none without `--chain`): block, neurons, weights,
/// pending timelocked commits and every commitment. A chain without timelocked commits
/// in its metadata has none pending.
pub fn read_chain_view(args: &ChainArgs, blocks: &[u64]) -> anyhow::Result<Option<ChainView>> {
    let Some(spec) = args.spec() else { return Ok(None) };
    let view = super::chain::runtime()?.block_on(async {
        let chain = chain_mod::connect(&spec).await?;
        let block = chain.current_block().await?;
        let (tempo, timelocked) = match chain.timelock_info().await {
            Ok(info) => {
                let tempo = match info.schedule {
                    af::chain::tlock::EpochSchedule::Legacy { tempo, .. } => tempo,
                    af::chain::tlock::EpochSchedule::Stateful { tempo, .. } => tempo,
                };
                (tempo, chain.timelocked().await?)
            }
            Err(af::chain::ChainError::CommitRevealUnsupported { .. }) => (0, af::chain::Timelocked::default()),
            Err(error) => return Err(error.into()),
        };
        let mut block_hashes = std::collections::BTreeMap::new();
        for &number in blocks {
            block_hashes.insert(number, chain.block_hash(number).await?);
        }
        anyhow::Ok(ChainView {
            block_hashes,
            endpoint: spec.endpoint.clone(),
            block,
            tempo,
            neurons: chain.neurons().await?,
            weights: chain.weights().await?,
            timelocked,
            records: chain.commitments().await?,
        })
    })?;
    Ok(Some(view))
}

/// The weights audit over `replayed`, against the chain where one was read.
pub fn weights_audit(
    replayed: &Replay,
    commitments: &af::audit::CommitmentAudit,
    view: Option<&ChainView>,
) -> af::audit::WeightsAudit {
    // A validator whose on-chain tip is past our copy may have sent weights we cannot see.
    let behind: Vec<_> =
        commitments.rows.iter().filter(|r| r.status == "ahead_of_our_copy").map(|r| r.commitment.ledger_key).collect();
    let replay_weights = view.map_or_else(|| replayed.state.weights.clone(), |v| v.replay_weights(&replayed.state));
    af::audit::audit_weights(&replayed.folds, &replay_weights, &behind, view.map(|v| v.weights_input()))
}

/// `af weights show`: what replay says the weights should be, what each log we hold says
/// it last set or committed, and (with `--chain`) what the chain holds, pending commits
/// included. Exits 3 when weights on chain past their reveal differ from a log's.
pub fn weights_show(data: &std::path::Path, chain: &ChainArgs, json: bool) -> anyhow::Result<ExitCode> {
    let (store, replayed) = super::http::replay_dir(data)?;
    let state = &replayed.state;
    let view = read_chain_view(chain, &[])?;
    let commitments = af::audit::audit_commitments(
        &replayed.folds,
        &store,
        view.as_ref().map(|v| af::audit::commitments::OnChain { endpoint: &v.endpoint, records: v.records.clone() }),
    )?;
    let audit = weights_audit(&replayed, &commitments, view.as_ref());
    let replay_weights = view.as_ref().map_or_else(|| state.weights.clone(), |v| v.replay_weights(state));
    let code =
        if audit.discrepancies.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) };
    if json {
        print_json(&serde_json::json!({
            "champion": state.champion,
            "replay_weights": replay_weights,
            "state_hash": replayed.state_hash,
            "logs": audit,
            "on_chain": view.as_ref().map(|v| serde_json::json!({
                "endpoint": v.endpoint, "block": v.block, "weights": v.weights, "timelocked": v.timelocked,
            })),
        }))?;
        return Ok(code);
    }
    outln!(
        "replay: champion {} → weights {}",
        state.champion.as_ref().map_or("(none)", |c| &*c.hotkey),
        af::chain::weight_shares(replay_weights.iter().copied())
    );
    for row in &audit.rows {
        let logged = row.logged.as_ref().map_or("no weights logged".into(), |w| match &w.commit {
            Some(c) => format!(
                "committed {} at chain block {} (round {}, reveal block {})",
                af::chain::weight_shares(w.uids.iter().copied().zip(w.weights.iter().copied())),
                w.chain_block,
                c.reveal_round,
                c.reveal_block
            ),
            None => format!(
                "set {} at chain block {}",
                af::chain::weight_shares(w.uids.iter().copied().zip(w.weights.iter().copied())),
                w.chain_block
            ),
        });
        outln!("log {}: {logged}{}", row.validator, af::audit::text::replay_note(row.agrees_with_replay));
        if row.status != "not_checked" {
            outln!("  {}: {}", row.status, row.detail);
        }
    }
    match &view {
        None => outln!("on chain: not read (pass --chain to compare)"),
        Some(v) => {
            outln!("on chain at block {}: {}", v.block, audit.note);
            for (uid, pairs) in &v.weights {
                let setter = v.neurons.iter().find(|n| n.uid == *uid).map_or("?", |n| n.hotkey.as_str());
                outln!("  uid {uid} ({}) has {}", one_line(setter), af::chain::weight_shares(pairs.iter().copied()));
            }
            for p in &v.timelocked.pending {
                outln!(
                    "  pending: {} committed at block {}, opens with round {}",
                    p.hotkey,
                    p.commit_block,
                    p.reveal_round
                );
            }
            for r in &v.timelocked.revealed {
                match r.error.as_str() {
                    "" => {
                        let shares = af::chain::weight_shares(r.uids.iter().copied().zip(r.weights.iter().copied()));
                        outln!("  revealed: {} at block {}: {shares}", one_line(&r.hotkey), r.reveal_block)
                    }
                    why => outln!("  dropped: {} at block {}: {why}", r.hotkey, r.reveal_block),
                }
            }
        }
    }
    Ok(code)
}
