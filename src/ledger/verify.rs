//! Full verification of a store: every chain from genesis to tip, every byte, every
//! signature, every link, with nothing taken from the store on trust (not even its tip
//! records). Blocks are checked in parallel batches; links are checked in order.

use super::block::{check_block, check_link, check_signature, BlockError, Tip};
use super::store::{self, Store, StoreError};
use crate::bytes::ValidatorKey;
use crate::limits::VERIFY_BATCH_BYTES;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeSet;

/// The first thing wrong with one validator's chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainFault {
    /// First height at which the chain is wrong.
    pub height: u64,
    /// Short machine-readable name of the fault.
    pub kind: &'static str,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChainReport {
    pub validator: ValidatorKey,
    /// Blocks that verified, from genesis on.
    pub n_blocks_ok: u64,
    pub n_events: u64,
    pub n_bytes: u64,
    /// The last verified block.
    pub verified_tip: Option<Tip>,
    pub fault: Option<ChainFault>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoreReport {
    pub ok: bool,
    pub chains: Vec<ChainReport>,
    pub n_blocks: u64,
    pub n_events: u64,
    pub n_bytes: u64,
}

/// Progress after each batch: (validator, blocks verified so far, bytes so far).
pub type Progress<'a> = &'a mut dyn FnMut(&ValidatorKey, u64, u64);

fn fault_kind(error: &BlockError) -> &'static str {
    match error {
        BlockError::Decode(_) => "decode",
        BlockError::FormatVersion(_) => "format_version",
        BlockError::Bound(_) => "bound",
        BlockError::EventCount { .. } => "event_count",
        BlockError::TooManyEvents(_) => "too_many_events",
        BlockError::EventsRoot { .. } => "events_root",
        BlockError::WeakKey => "weak_key",
        BlockError::BadSignature => "bad_signature",
        BlockError::WrongValidator { .. } => "wrong_validator",
        BlockError::WrongHeight { .. } => "wrong_height",
        BlockError::BrokenLink { .. } => "broken_link",
        BlockError::TimeWentBack { .. } => "time_went_back",
    }
}

/// Verifies every chain in the store. Errors only if the store cannot be read at all;
/// a bad chain is a [`ChainFault`] in the report.
pub fn verify_store(store: &Store, progress: Progress<'_>) -> Result<StoreReport, StoreError> {
    let txn = store.read()?;
    let tips = store::tips_in(&txn)?;
    let mut validators: BTreeSet<ValidatorKey> = tips.iter().map(|(v, _)| *v).collect();
    validators.extend(store::validators_with_blocks(&txn)?);
    let mut chains = Vec::new();
    for validator in validators {
        let recorded_tip = tips.iter().find(|(v, _)| *v == validator).map(|(_, t)| *t);
        chains.push(verify_chain(&txn, &validator, recorded_tip, progress)?);
    }
    Ok(StoreReport {
        ok: chains.iter().all(|c| c.fault.is_none()),
        n_blocks: chains.iter().map(|c| c.n_blocks_ok).sum(),
        n_events: chains.iter().map(|c| c.n_events).sum(),
        n_bytes: chains.iter().map(|c| c.n_bytes).sum(),
        chains,
    })
}

struct Checked {
    height: u64,
    result: Result<(Tip, crate::ledger::block::BlockHeader, u64), BlockError>,
    n_bytes: u64,
}

/// Checks one batch of consecutive stored blocks: the expensive part (decode, hashes,
/// signature) in parallel, then links in height order. Records the first fault.
fn check_batch(validator: &ValidatorKey, batch: &[(u64, Vec<u8>)], report: &mut ChainReport, next_height: &mut u64) {
    let checked: Vec<Checked> = batch
        .par_iter()
        .map(|(height, bytes)| Checked {
            height: *height,
            n_bytes: bytes.len() as u64,
            result: check_block(bytes).and_then(|checked| {
                let header = checked.header;
                check_signature(&header, &checked.hash, &checked.signature)?;
                let tip = Tip { height: header.height, hash: checked.hash, time_ms: header.time_ms };
                Ok((tip, header, checked.leaf_hashes.len() as u64))
            }),
        })
        .collect();
    for item in checked {
        let fault = |kind: &'static str, message: String| ChainFault { height: *next_height, kind, message };
        if item.height != *next_height {
            report.fault = Some(fault(
                "missing_block",
                format!("no block stored at height {next_height} (next stored is {})", item.height),
            ));
            return;
        }
        let linked = item.result.and_then(|(tip, header, n_events)| {
            check_link(validator, report.verified_tip.as_ref(), &header)?;
            Ok((tip, n_events))
        });
        match linked {
            Ok((tip, n_events)) => {
                report.verified_tip = Some(tip);
                report.n_blocks_ok += 1;
                report.n_events += n_events;
                report.n_bytes += item.n_bytes;
                *next_height += 1;
            }
            Err(error) => {
                report.fault = Some(fault(fault_kind(&error), error.to_string()));
                return;
            }
        }
    }
}

fn verify_chain(
    txn: &redb::ReadTransaction,
    validator: &ValidatorKey,
    recorded_tip: Option<Tip>,
    progress: Progress<'_>,
) -> Result<ChainReport, StoreError> {
    let mut report =
        ChainReport { validator: *validator, n_blocks_ok: 0, n_events: 0, n_bytes: 0, verified_tip: None, fault: None };
    let mut next_height = 0u64;
    // A reader thread copies blocks out of the store while the rayon pool checks the
    // previous batch: reading and checking overlap instead of taking turns.
    let (sender, receiver) = std::sync::mpsc::sync_channel::<Vec<(u64, Vec<u8>)>>(2);
    std::thread::scope(|scope| -> Result<(), StoreError> {
        let reader = scope.spawn(move || {
            store::stream_blocks(txn, validator, VERIFY_BATCH_BYTES, &mut |batch| sender.send(batch).is_ok())
        });
        for batch in receiver.iter() {
            if report.fault.is_some() {
                break; // Dropping the receiver stops the reader.
            }
            check_batch(validator, &batch, &mut report, &mut next_height);
            progress(validator, report.n_blocks_ok, report.n_bytes);
        }
        drop(receiver);
        reader.join().expect("the block reader does not panic")
    })?;
    if report.fault.is_some() {
        return Ok(report);
    }
    // The tip record must name exactly the last verified block.
    let fault = match (recorded_tip, report.verified_tip) {
        (Some(recorded), Some(verified)) if recorded == verified => None,
        (None, None) => None,
        (Some(recorded), Some(verified)) if recorded.height > verified.height => Some(ChainFault {
            height: verified.height + 1,
            kind: "missing_block",
            message: format!("tip record says height {} but the chain ends at {}", recorded.height, verified.height),
        }),
        (Some(recorded), verified) => Some(ChainFault {
            height: recorded.height,
            kind: "tip_mismatch",
            message: format!(
                "tip record (height {}, hash {}) does not match the verified chain end {}",
                recorded.height,
                recorded.hash,
                verified.map_or("(none)".into(), |t| format!("(height {}, hash {})", t.height, t.hash))
            ),
        }),
        (None, Some(verified)) => Some(ChainFault {
            height: verified.height,
            kind: "tip_mismatch",
            message: "blocks are stored but no tip is recorded".into(),
        }),
    };
    report.fault = fault;
    Ok(report)
}
