//! `af weights show`, and the view of the chain that it and `af audit` compare the logs
//! with: block, neurons, weights, pending timelocked commits and commitments.

use super::chain::ChainArgs;
use super::{one_line, print_json};
use crate::outln;
use af::audit::chain_view::{self, ChainView};

use std::process::ExitCode;

/// Reads the chain `args` names, if any (`af::audit::chain_view::read`).
pub fn read_chain_view(args: &ChainArgs, blocks: &[u64]) -> anyhow::Result<Option<ChainView>> {
    let Some(spec) = args.spec() else { return Ok(None) };
    Ok(Some(super::chain::runtime()?.block_on(chain_view::read(&spec, blocks))?))
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
    let audit = chain_view::weights_audit(&replayed, &commitments, view.as_ref());
    let replay_weights = view.as_ref().map_or_else(|| state.weights.clone(), |v| v.replay_weights(state));
    replayed.check_whole()?;
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
