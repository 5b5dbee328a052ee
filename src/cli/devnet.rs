//! `af devnet`: runs the devnet (`af::devnet`: the main job on embedded defaults, all on
//! loopback) and prints its report, read from the report's JSON so the text and
//! `--json` say the same.

use super::print_json;
use crate::outln;
use af::devnet::{Devnet, DevnetSpec};
use anyhow::Context;
use serde_json::Value;
use std::path::Path;
use std::process::ExitCode;

pub fn run(
    data: &Path,
    n_validators: usize,
    n_miners: usize,
    rounds: u64,
    fresh: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("finding the af binary")?;
    let spec = DevnetSpec { exe, data: data.to_owned(), n_validators, n_miners, rounds, fresh };
    let Devnet { result, ok } = af::devnet::run(&spec)?;
    if json {
        print_json(&result)?;
    } else {
        print_text(&result)?;
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_CHECK_FAILED) })
}

fn yes(value: &Value, yes: &'static str, no: &'static str) -> &'static str {
    if value == true {
        yes
    } else {
        no
    }
}

fn print_text(r: &Value) -> anyhow::Result<()> {
    let rows = r["validators"].as_array().cloned().unwrap_or_default();
    let n_validators = rows.len();
    let text = |v: &Value| v.as_str().unwrap_or("?").to_string();
    outln!(
        "devnet: {n_validators} validators, {} miners, {} round(s) in {:.1} s",
        r["n_miners"],
        r["rounds"],
        r["elapsed_s"].as_f64().unwrap_or(0.0)
    );
    outln!("{:<18} {:>6} {:>7} {:>8}  {:<24} {:>7}", "validator", "chains", "blocks", "verified", "champion", "ratio");
    for row in &rows {
        outln!(
            "{:<18} {:>6} {:>7} {:>8}  {:<24} {:>7.4}",
            text(&row["validator"]).get(..16).unwrap_or("?"),
            row["chains_held"].as_u64().unwrap_or(0),
            row["blocks"].as_u64().unwrap_or(0),
            yes(&row["all_verified"], "ok", "FAIL"),
            text(&row["champion"]),
            row["ratio_to_beat_ppm"].as_f64().unwrap_or(0.0) / 1e6
        );
    }
    outln!(
        "every validator holds and verified every log: {}; champions agree: {}; logs converged {} ms after the last match",
        yes(&r["every_log_everywhere"], "yes", "NO"),
        yes(&r["agreement"], "yes", "no"),
        r["convergence_ms"]
    );
    outln!(
        "replay: every validator derives state {} ({}); network champion {}, ratio to beat {:.4}, {} discrepancies",
        text(&r["state_hash"]),
        yes(&r["state_hashes_agree"], "all agree", "they DIFFER"),
        r["network_champion"]["hotkey"].as_str().unwrap_or("(none)"),
        r["ratio_to_beat_ppm"].as_f64().unwrap_or(0.0) / 1e6,
        r["discrepancies"].as_array().map_or(0, Vec::len)
    );
    for (validator, ppm) in r["vtrust_ppm"].as_object().into_iter().flatten() {
        outln!("  vtrust {} {:.4}", validator.get(..16).unwrap_or("?"), ppm.as_f64().unwrap_or(0.0) / 1e6);
    }
    let chain = &r["chain"];
    let revealed = chain["timelocked_revealed"].as_array().cloned().unwrap_or_default();
    let weights: Vec<(u16, Vec<(u16, u16)>)> = serde_json::from_value(chain["weights"].clone()).unwrap_or_default();
    outln!(
        "chain {}: {}/{n_validators} validators' commitments match their logs; weights went in timelocked: {} commits revealed ({} dropped), {} pending; on chain {}: {}",
        text(&chain["endpoint"]),
        chain["commitments_matching_logs"],
        revealed.len(),
        revealed.iter().filter(|r| r["error"].as_str().is_some_and(|e| !e.is_empty())).count(),
        chain["timelocked_pending"].as_array().map_or(0, Vec::len),
        weights
            .iter()
            .map(|(uid, pairs)| format!("uid {uid} gives {}", af::chain::weights::weight_shares(pairs.iter().copied())))
            .collect::<Vec<_>>()
            .join("; "),
        yes(
            &chain["revealed_weights_match_champion"],
            "every validator's revealed weights give all to the replayed champion",
            "NOT every validator's revealed weights match the replayed champion"
        )
    );
    let (miners, late, sybil) = (&r["miners"], &r["miners"]["late"], &r["miners"]["sybil"]);
    let collapsed = &sybil["collapsed"];
    outln!(
        "miners from the chain: {} valid commitments; late miner {} (block {}) played by {}/{n_validators} validators{}; sybil {} {}",
        miners["committed"],
        text(&late["hotkey"]),
        late["commit_block"],
        late["played_by_validators"],
        yes(&late["expected_to_play"], "", " (its turn comes after these rounds)"),
        text(&sybil["hotkey"]),
        if collapsed.is_object() && sybil["played"] == false {
            format!(
                "collapsed into {} (its block {} vs {}), never played; recorded as a duplicate in {}/{n_validators} logs",
                text(&collapsed["kept_by"]),
                collapsed["sybil_block"],
                collapsed["kept_block"],
                sybil["recorded_by_validators"]
            )
        } else {
            "NOT collapsed as it should be".into()
        }
    );
    outln!(
        "peers from the chain: {}/{n_validators} validators published their address (serve_axon) and found each other there, with no --peer or --allow",
        r["peers_from_chain"]["validators_with_axons"]
    );
    let dir = text(&r["data"]);
    // Logs played by a test table are judged by it (ledger-spec/15).
    let table = match text(&r["protocol_table"]) {
        table if table == "af" => String::new(),
        table => format!(" --protocol {table}"),
    };
    outln!("data in {dir}. The chain stopped with the devnet and kept its state: to re-check against it, run");
    outln!("  af chain serve --data {dir}/chain --listen 127.0.0.1:9944 &");
    outln!("  af audit --data {dir}/v0{table} --chain local:127.0.0.1:9944");
    outln!("or `af audit --data {dir}/v0{table}` offline; `af transcripts --data {dir}/v0 --miner HOTKEY` for a miner's view");
    Ok(())
}
