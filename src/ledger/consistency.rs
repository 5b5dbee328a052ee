//! Consistency proofs between two checkpoints of one chain: the proof that the newer
//! tip extends the older one, so a monitor that saw an old checkpoint can check a new
//! one without the blocks (ledger-spec/11-http.md, "Consistency proofs").
//!
//! The log is a hash chain, not a Merkle tree of blocks, so the proof is the chain of
//! signed headers from the old tip to the new one: each header's `prev_hash` is the hash
//! of the one before, the first hashes to the old checkpoint's root and the last to the
//! new one's. Headers carry no events (about 250 bytes each), and a proof is bounded
//! by [`MAX_CONSISTENCY_HEADERS`]; a monitor further behind asks for several proofs
//! through intermediate sizes.

use super::block::{check_header_rules, check_link, check_signature, BlockError, Tip};
use super::proof::{signed_headers, InclusionError, SignedHeader};
use super::store::{Store, StoreError};
use crate::bytes::{Hash32, ValidatorKey};
use serde::{Deserialize, Serialize};

/// The most headers one proof carries (about 16 MiB of JSON).
pub const MAX_CONSISTENCY_HEADERS: u64 = 65_536;

/// A checkpoint's claim: the number of blocks and the tip's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SizedHash {
    pub size: u64,
    pub hash: Hash32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsistencyProof {
    pub validator: ValidatorKey,
    pub old: SizedHash,
    pub new: SizedHash,
    /// Signed headers at heights `old.size - 1 ..= new.size - 1`, in height order.
    pub headers: Vec<SignedHeader>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConsistencyError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Headers(#[from] InclusionError),
    #[error("validator {validator} has no blocks")]
    Empty { validator: ValidatorKey },
    #[error("size must be at least 1 (a checkpoint has a tip)")]
    ZeroSize,
    #[error("the old size {old} is larger than the new size {new}")]
    Shrinks { old: u64, new: u64 },
    #[error("the new size {new} is past the chain's {held} blocks")]
    PastTip { new: u64, held: u64 },
    #[error("a proof spans at most {MAX_CONSISTENCY_HEADERS} headers; this one would span {span}: prove through an intermediate size")]
    TooLong { span: u64 },
    #[error("the proof carries {actual} headers; sizes {old} to {new} need {expected}")]
    HeaderCount { old: u64, new: u64, expected: u64, actual: u64 },
    #[error("header at height {height}: {source}")]
    Header {
        height: u64,
        #[source]
        source: BlockError,
    },
    #[error("the header at height {height} hashes to {actual}, not the {which} checkpoint's {expected}")]
    HashMismatch { which: &'static str, height: u64, expected: Hash32, actual: Hash32 },
}

/// Builds the proof that size `new` (default: the tip) extends size `old` in the store.
pub fn prove(
    store: &Store,
    validator: &ValidatorKey,
    old: u64,
    new: Option<u64>,
) -> Result<ConsistencyProof, ConsistencyError> {
    let tip = store.tip(validator)?.ok_or(ConsistencyError::Empty { validator: *validator })?;
    let held = tip.height + 1;
    let new = new.unwrap_or(held);
    check_sizes(old, new)?;
    if new > held {
        return Err(ConsistencyError::PastTip { new, held });
    }
    let headers = signed_headers(store, validator, old - 1, new - 1)?;
    let hash_at = |size: u64| headers[(size - old) as usize].header.hash();
    Ok(ConsistencyProof {
        validator: *validator,
        old: SizedHash { size: old, hash: hash_at(old) },
        new: SizedHash { size: new, hash: hash_at(new) },
        headers,
    })
}

fn check_sizes(old: u64, new: u64) -> Result<(), ConsistencyError> {
    if old == 0 || new == 0 {
        return Err(ConsistencyError::ZeroSize);
    }
    if old > new {
        return Err(ConsistencyError::Shrinks { old, new });
    }
    if new - old + 1 > MAX_CONSISTENCY_HEADERS {
        return Err(ConsistencyError::TooLong { span: new - old + 1 });
    }
    Ok(())
}

/// Verifies a proof on its own: every header meets the header rules, is signed by the
/// proof's validator and links to the one before; the first hashes to `old.hash` at
/// height `old.size - 1` and the last to `new.hash` at `new.size - 1`. The caller then
/// compares `old` and `new` with the checkpoints it holds (both signed notes).
pub fn verify(proof: &ConsistencyProof) -> Result<(), ConsistencyError> {
    let (old, new) = (proof.old.size, proof.new.size);
    check_sizes(old, new)?;
    let expected = new - old + 1;
    if proof.headers.len() as u64 != expected {
        return Err(ConsistencyError::HeaderCount { old, new, expected, actual: proof.headers.len() as u64 });
    }
    let mut prev: Option<Tip> = None;
    for (offset, signed) in proof.headers.iter().enumerate() {
        let header = &signed.header;
        let height = old - 1 + offset as u64;
        let err = |source| ConsistencyError::Header { height, source };
        if header.height != height {
            return Err(err(BlockError::WrongHeight { expected: height, actual: header.height }));
        }
        if header.validator != proof.validator {
            return Err(err(BlockError::WrongValidator { expected: proof.validator, actual: header.validator }));
        }
        check_header_rules(header).map_err(err)?;
        let hash = header.hash();
        check_signature(header, &hash, &signed.signature).map_err(err)?;
        if let Some(tip) = &prev {
            check_link(&proof.validator, Some(tip), header).map_err(err)?;
        }
        prev = Some(Tip { height, hash, time_ms: header.time_ms });
    }
    let first = proof.headers[0].header.hash();
    if first != proof.old.hash {
        return Err(ConsistencyError::HashMismatch {
            which: "old",
            height: old - 1,
            expected: proof.old.hash,
            actual: first,
        });
    }
    let last = prev.expect("at least one header").hash;
    if last != proof.new.hash {
        return Err(ConsistencyError::HashMismatch {
            which: "new",
            height: new - 1,
            expected: proof.new.hash,
            actual: last,
        });
    }
    Ok(())
}
