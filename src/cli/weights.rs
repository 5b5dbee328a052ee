//! `af weights show`, and the view of the chain that it and `af audit` compare the logs
//! with: block, neurons, weights, pending timelocked commits and commitments.

use super::chain::ChainArgs;
use super::print_json;
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
    for line in af::audit::text::weights_lines(state, &replay_weights, &audit, view.as_ref()) {
        outln!("{line}");
    }
    Ok(code)
}
