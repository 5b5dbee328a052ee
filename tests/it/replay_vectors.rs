//! The replay vectors of ledger-spec/14: each golden scenario's logs as a block export
//! (08) in `fixtures/replay/`, and in `fixtures/replay/vectors.json` what a replay makes
//! of them on the way to its state hash (each log's fold, each validator's vTrust, the
//! matches and their verdicts, the champion walk, the weights, the state's bytes), so an
//! implementation written from the spec can find where it parts from af.
//! `scripts/spec-check.py` recomputes every state hash from the exports and the spec.

use crate::{check_fixture, repo_path};
use af::envs;
use af::ledger::export::{write_blocks, BlockReader};
use af::ledger::{Event, Store};
use af::replay::records::DiscrepancyKind;
use af::replay::state_hash::state_bytes;
use af::replay::Replay;
use serde_json::{json, Value};

/// What a replay of a scenario's logs makes: its vector, checked against
/// `fixtures/replay/NAME.afblocks` (the export must be byte for byte the same).
pub fn vector(name: &str, store: &Store, replayed: &Replay) -> Value {
    let mut validators: Vec<_> = replayed.folds.iter().map(|f| f.validator).collect();
    validators.sort();
    let mut export = Vec::new();
    write_blocks(store, &validators, &mut export).unwrap();
    check_binary_fixture(&format!("fixtures/replay/{name}.afblocks"), &export);

    // Transcripts whose recorded reward the environment does not give: the one input
    // of the fold that the ledger spec leaves to each environment's scorer.
    let registry = envs::registry();
    let mut rescored = Vec::new();
    let mut reader = BlockReader::new(&export[..]).unwrap();
    while let Some(block) = reader.next_block().unwrap() {
        let block = &block.decoded().block;
        for (event_idx, event) in block.events.iter().enumerate() {
            let t = match event {
                Event::Transcript(t) => t,
                Event::TranscriptCut(c) => &c.transcript,
                _ => continue,
            };
            let again = af::replay::fold::rescore(&registry, t);
            if again.as_ref().ok() != Some(&t.reward_milli) {
                rescored.push(json!({
                    "validator": block.header.validator, "height": block.header.height, "event_idx": event_idx,
                    "reward_milli": again.ok(),
                }));
            }
        }
    }
    let folds: Vec<Value> = replayed
        .folds
        .iter()
        .map(|f| {
            json!({
                "validator": f.validator,
                "tip_height": f.tip.map(|t| t.height),
                "n_matches": f.matches.len(),
                "findings": f.findings.nonzero().map(|(k, n)| (k.name().to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
                "n_equivocations_recorded": f.equivocations.iter().map(Result::unwrap).count(),
                // Its bytes in the fold format (ledger-spec/02), at its tip, and their hash.
                "fold_bytes": hex(&af::ledger::codec::encode(&af::replay::checkpoint_record::FoldBytes(f), "fold", u64::MAX).unwrap()),
                "fold_hash": af::replay::fold_checkpoints::fold_hash(f).unwrap(),
            })
        })
        .collect();
    let state = &replayed.state;
    let validators: Vec<Value> = state
        .validators
        .iter()
        .map(|v| {
            json!({
                "validator": v.validator, "tip_height": v.tip_height, "tip_hash": v.tip_hash,
                "n_events": v.n_events, "n_transcripts": v.n_transcripts, "n_matches": v.n_matches,
                "invalid_at": v.invalid_at, "equivocated": v.equivocated,
                "proofs_by_kind": v.proofs_by_kind.iter().map(|(k, n)| (k.name().to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
                "n_compared": v.n_compared, "n_disagreements": v.n_disagreements, "vtrust_ppm": v.vtrust_ppm,
            })
        })
        .collect();
    let bytes = state_bytes(state).unwrap();
    assert_eq!(
        *blake3::hash(&bytes).as_bytes(),
        replayed.state_hash.0,
        "the state hash is the hash of the state's bytes"
    );
    json!({
        "name": name,
        "blocks": format!("{name}.afblocks"),
        "rescored": rescored,
        "folds": folds,
        "validators": validators,
        "matches": state.matches.iter().map(Result::unwrap).collect::<Vec<_>>(),
        "champion": state.champion,
        "champion_history": state.champion_history,
        "ratio_set_ppm": state.ratio_set_ppm,
        "ratio_set_at_block": state.ratio_set_at_block,
        "weights": state.weights,
        "state_bytes": hex(&bytes),
        "state_hash": replayed.state_hash,
    })
}

/// Writes `fixtures/replay/vectors.json` (checked like every golden file).
pub fn check_vectors(scenarios: Vec<Value>) {
    let kinds: Vec<Value> = DiscrepancyKind::ALL
        .iter()
        .map(|k| json!({"tag": *k as u32, "name": k.name(), "proof": k.is_proof()}))
        .collect();
    let all = json!({
        "about": "ledger-spec/14: replay vectors. Each scenario's logs are the block export named by `blocks`; the rest is what af's replay makes of them: `rescored` lists the transcripts whose recorded reward their environment does not give (the scorer's answer, null when it cannot score), `folds` each log's fold, then the state's fields, its canonical bytes and its hash.",
        "finding_kinds": kinds,
        "scenarios": scenarios,
    });
    check_fixture("fixtures/replay/vectors.json", &(serde_json::to_string_pretty(&all).unwrap() + "\n"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A golden file of bytes: refreshed by `UPDATE_EXPECT=1`, else compared exactly.
pub fn check_binary_fixture(relative: &str, actual: &[u8]) {
    let path = repo_path(relative);
    if std::env::var("UPDATE_EXPECT").is_ok_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected =
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_EXPECT=1 to create)", path.display()));
    assert!(
        expected == actual,
        "{} differs from the logs the scenario writes, first at byte {} (UPDATE_EXPECT=1 refreshes it if the change is intended)",
        path.display(),
        expected.iter().zip(actual).position(|(a, b)| a != b).unwrap_or(expected.len().min(actual.len()))
    );
}
