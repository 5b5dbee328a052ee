//! `af ledger` on checkpoints and proofs: a signed checkpoint of our log, inclusion and
//! consistency proofs, and the checks of each against what a reader holds.

use super::data_dir::{key_path, validator_or_own};
use super::{print_json, report_check, EXIT_CHECK_FAILED};
use crate::outln;
use af::bytes::Hash32;
use af::ledger::checkpoint::Checkpoint;
use af::ledger::proof::{self, InclusionProof};
use af::ledger::LedgerKey;
use anyhow::anyhow;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

pub fn checkpoint(data: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let store = super::http::open_for_read(data)?;
    let key = LedgerKey::load(&key_path(data))?;
    let tip = store.tip(&key.validator())?.ok_or_else(|| anyhow!("our chain is empty: nothing to checkpoint"))?;
    let note = Checkpoint::of_tip(key.validator(), &tip).sign(&key);
    if json {
        print_json(&serde_json::json!({
            "validator": key.validator(), "height": tip.height, "hash": tip.hash, "note": note,
        }))?;
    } else {
        std::io::stdout().lock().write_all(note.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn verify_checkpoint(file: &Path, data: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let bytes = af::input::read_bounded(file, af::limits::MAX_CHECKPOINT_BYTES as u64)?;
    // A note that is not UTF-8 fails the check like any other malformed note.
    let Ok(note) = String::from_utf8(bytes) else {
        let why = "checkpoint is malformed: the note is not UTF-8";
        return report_check(json, false, serde_json::json!({ "error": why }), why);
    };
    let checkpoint = match Checkpoint::verify(&note) {
        Ok(checkpoint) => checkpoint,
        Err(error) => {
            return report_check(json, false, serde_json::json!({ "error": error.to_string() }), &error.to_string())
        }
    };
    if let Some(data) = data {
        let store = super::http::open_for_read(data)?;
        let height = checkpoint.size.checked_sub(1).ok_or_else(|| anyhow!("checkpoint of an empty chain"))?;
        let stored = store
            .block_bytes(&checkpoint.validator, height)?
            .map(|bytes| Hash32(*blake3::hash(&bytes[..af::ledger::block::HEADER_BYTES.min(bytes.len())]).as_bytes()));
        if stored != Some(checkpoint.tip_hash) {
            let why = format!(
                "the store does not hold block {} with hash {} for validator {}",
                height, checkpoint.tip_hash, checkpoint.validator
            );
            return report_check(json, false, serde_json::json!({ "checkpoint": checkpoint, "error": why }), &why);
        }
    }
    let text = format!(
        "checkpoint of validator {} at {} blocks, tip {}, signature valid",
        checkpoint.validator, checkpoint.size, checkpoint.tip_hash
    );
    report_check(json, true, serde_json::json!({ "checkpoint": checkpoint }), &text)
}

pub fn prove(data: &Path, height: u64, event: u32, validator: Option<String>) -> anyhow::Result<ExitCode> {
    let store = super::http::open_for_read(data)?;
    let validator = validator_or_own(data, validator)?;
    let proof = proof::prove(&store, &validator, height, event)?;
    print_json(&proof)?;
    Ok(ExitCode::SUCCESS)
}

pub fn verify_proof(file: &Path, checkpoint: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let text = af::input::read_text(file, af::limits::MAX_JSON_INPUT_BYTES)?;
    let proof: InclusionProof = match serde_json::from_str(&text) {
        Ok(proof) => proof,
        Err(error) => return super::report_parse_failure(json, "inclusion proof", &error),
    };
    let tip = match proof::verify_inclusion_proof(&proof) {
        Ok(tip) => tip,
        Err(error) => {
            return report_check(json, false, serde_json::json!({ "error": error.to_string() }), &error.to_string())
        }
    };
    if let Some(path) = checkpoint {
        let note = af::input::read_text(path, af::limits::MAX_CHECKPOINT_BYTES as u64)?;
        let verdict = Checkpoint::verify(&note).map_err(|e| e.to_string()).and_then(|c| {
            if c.validator == proof.validator && c.size == tip.height + 1 && c.tip_hash == tip.hash {
                Ok(())
            } else {
                Err(format!(
                    "proof reaches height {} hash {}, the checkpoint says {} blocks, tip {}",
                    tip.height, tip.hash, c.size, c.tip_hash
                ))
            }
        });
        if let Err(why) = verdict {
            return report_check(json, false, serde_json::json!({ "error": why }), &why);
        }
    }
    let text = format!(
        "event {} of block {} (validator {}) is included, and the block chains to tip {} at height {}",
        proof.event_idx, proof.height, proof.validator, tip.hash, tip.height
    );
    report_check(
        json,
        true,
        serde_json::json!({ "validator": proof.validator, "height": proof.height, "event_idx": proof.event_idx, "tip": tip }),
        &text,
    )
}

pub fn prove_consistency(
    data: &Path,
    validator: Option<String>,
    old: u64,
    new: Option<u64>,
) -> anyhow::Result<ExitCode> {
    let store = super::http::open_for_read(data)?;
    let validator = validator_or_own(data, validator)?;
    let proof = af::ledger::consistency::prove(&store, &validator, old, new)?;
    print_json(&proof)?;
    Ok(ExitCode::SUCCESS)
}

pub fn verify_consistency(
    proof: &Path,
    old: Option<&Path>,
    new: Option<&Path>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    use af::ledger::consistency::{self, ConsistencyProof, MAX_CONSISTENCY_HEADERS};
    // A proof of the most headers is about 700 bytes of JSON per header.
    let text = af::input::read_text(proof, MAX_CONSISTENCY_HEADERS * 1024)?;
    let parsed: ConsistencyProof = match serde_json::from_str(&text) {
        Ok(parsed) => parsed,
        Err(error) => return super::report_parse_failure(json, "consistency proof", &error),
    };
    let mut verdict = consistency::verify(&parsed).map_err(|e| e.to_string());
    if let (Ok(()), Some(old), Some(new)) = (&verdict, old, new) {
        for (which, path, claimed) in [("old", old, parsed.old), ("new", new, parsed.new)] {
            let note = af::input::read_text(path, af::limits::MAX_CHECKPOINT_BYTES as u64)?;
            let checked = Checkpoint::verify(&note).map_err(|e| format!("the {which} checkpoint: {e}")).and_then(|c| {
                if c.validator != parsed.validator || c.size != claimed.size || c.tip_hash != claimed.hash {
                    Err(format!(
                        "the {which} checkpoint names validator {} size {} hash {}, not the proof's size {} hash {}",
                        c.validator, c.size, c.tip_hash, claimed.size, claimed.hash
                    ))
                } else {
                    Ok(())
                }
            });
            if let Err(why) = checked {
                verdict = Err(why);
                break;
            }
        }
    }
    let checked_notes = old.is_some();
    if json {
        print_json(&serde_json::json!({
            "ok": verdict.is_ok(),
            "validator": parsed.validator,
            "old": parsed.old,
            "new": parsed.new,
            "checkpoints_checked": checked_notes,
            "error": verdict.as_ref().err(),
        }))?;
    } else {
        match &verdict {
            Ok(()) => {
                outln!(
                    "ok: validator {}: size {} (hash {}) extends size {} (hash {})",
                    parsed.validator,
                    parsed.new.size,
                    parsed.new.hash,
                    parsed.old.size,
                    parsed.old.hash
                );
                if !checked_notes {
                    outln!("the sizes and hashes are the proof's own: give --old and --new checkpoints to check them");
                }
            }
            Err(why) => outln!("FAIL: {why}"),
        }
    }
    Ok(if verdict.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_CHECK_FAILED) })
}
