//! Inclusion proofs: one event, its Merkle path to its block's root, and the headers
//! that chain that block to a signed tip. Verifying needs only the proof itself.

use super::block::{check_link, check_signature, BlockHeader, DecodedBlock, Tip};
use super::codec;
use super::event::Event;
use super::merkle::{self, ProofError};
use super::store::{Store, StoreError};
use crate::bytes::{Hash32, SignatureBytes, ValidatorKey};
use crate::limits::{MAX_EVENT_BYTES, MAX_PROOF_HEADERS};
use serde::{Deserialize, Serialize};

/// A header with its signature, as carried in a proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedHeader {
    pub header: BlockHeader,
    pub signature: SignatureBytes,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InclusionProof {
    pub validator: ValidatorKey,
    pub height: u64,
    pub event_idx: u32,
    /// Canonical bytes of the event, hex in JSON.
    #[serde(with = "hex_bytes")]
    pub event_bytes: Vec<u8>,
    /// The event decoded, for people; verification uses `event_bytes` only.
    pub event: Event,
    pub merkle_path: Vec<Hash32>,
    /// Headers from the event's block up to the tip, in height order; at most
    /// `MAX_PROOF_HEADERS`, refused on the count before any is read.
    #[serde(deserialize_with = "super::event::at_most::<_, _, MAX_PROOF_HEADERS>")]
    pub headers: Vec<SignedHeader>,
}

#[derive(Debug, thiserror::Error)]
pub enum InclusionError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("validator {validator} has no block at height {height}")]
    NoBlock { validator: ValidatorKey, height: u64 },
    #[error("block {height} holds {n_events} events; there is no event {event_idx}")]
    NoEvent { height: u64, n_events: u32, event_idx: u32 },
    #[error("proof has no headers")]
    NoHeaders,
    #[error("proof has {0} headers, more than the limit of {MAX_PROOF_HEADERS}")]
    TooManyHeaders(usize),
    #[error("event bytes do not decode to the event shown: {0}")]
    EventMismatch(String),
    #[error("merkle path: {0}")]
    Merkle(#[from] ProofError),
    #[error("header at height {height}: {source}")]
    Header {
        height: u64,
        #[source]
        source: super::block::BlockError,
    },
}

/// Builds the proof for event `event_idx` of block `height`, with headers up to the tip.
pub fn prove(
    store: &Store,
    validator: &ValidatorKey,
    height: u64,
    event_idx: u32,
) -> Result<InclusionProof, InclusionError> {
    prove_up_to(store, validator, height, event_idx, None)
}

/// [`prove`] with headers up to `up_to` (a committed or checkpointed height at or above
/// `height`) instead of the tip; never past `MAX_PROOF_HEADERS` headers, so a proof of an
/// old event reaches an earlier tip (ledger-spec/03) rather than one no verifier accepts.
pub fn prove_up_to(
    store: &Store,
    validator: &ValidatorKey,
    height: u64,
    event_idx: u32,
    up_to: Option<u64>,
) -> Result<InclusionProof, InclusionError> {
    let decoded = store.block(validator, height)?.ok_or(InclusionError::NoBlock { validator: *validator, height })?;
    let tip = store.tip(validator)?.ok_or(InclusionError::NoBlock { validator: *validator, height })?;
    let last = up_to.map_or(tip.height, |h| h.clamp(height, tip.height)).min(height + MAX_PROOF_HEADERS as u64 - 1);
    let headers = signed_headers(store, validator, height, last)?;
    prove_in_block(&decoded, event_idx, headers)
}

/// The stored signed headers of `validator` at heights `from..=to`.
pub fn signed_headers(
    store: &Store,
    validator: &ValidatorKey,
    from: u64,
    to: u64,
) -> Result<Vec<SignedHeader>, InclusionError> {
    let stored = store.signed_headers(validator, from, to)?;
    if stored.len() as u64 != to.saturating_sub(from) + 1 {
        return Err(InclusionError::NoBlock { validator: *validator, height: from + stored.len() as u64 });
    }
    let headers: Vec<SignedHeader> =
        stored.into_iter().map(|(header, signature)| SignedHeader { header, signature }).collect();
    Ok(headers)
}

/// The proof of event `event_idx` of a block already decoded from the store, with the
/// signed headers from that block's height on (callers proving many events of one chain
/// read each header once).
pub fn prove_in_block(
    decoded: &DecodedBlock,
    event_idx: u32,
    headers: Vec<SignedHeader>,
) -> Result<InclusionProof, InclusionError> {
    let header = &decoded.block.header;
    let (validator, height, n_events) = (header.validator, header.height, header.n_events);
    if event_idx >= n_events {
        return Err(InclusionError::NoEvent { height, n_events, event_idx });
    }
    assert_eq!(headers.first().map(|h| h.header.height), Some(height), "headers start at the event's block");
    let event = decoded.block.events[event_idx as usize].clone();
    let event_bytes = codec::encode(&event, "event", MAX_EVENT_BYTES).expect("stored events re-encode");
    let merkle_path = merkle::inclusion_path(&decoded.leaf_hashes, event_idx as usize);
    Ok(InclusionProof { validator, height, event_idx, event_bytes, event, merkle_path, headers })
}

/// Verifies a proof on its own: the event hashes into the first header's root, every
/// header is signed by the validator, and each links to the one before. Returns the
/// tip the proof reaches, to compare with a checkpoint or an on-chain commitment.
///
/// Every rule a store verifier applies to a header or an event applies here too: the
/// event decodes canonically and within its bounds, and each header meets the header
/// rules (format version, event count bound, genesis link), carries a strict signature by
/// a canonical key, and links to the one before.
pub fn verify_inclusion_proof(proof: &InclusionProof) -> Result<Tip, InclusionError> {
    let decoded: Event = codec::decode_canonical(&proof.event_bytes, "event", MAX_EVENT_BYTES)
        .map_err(|e| InclusionError::EventMismatch(e.to_string()))?;
    decoded.check_bounds().map_err(|e| InclusionError::EventMismatch(e.to_string()))?;
    if decoded != proof.event {
        return Err(InclusionError::EventMismatch("the decoded event differs from the one shown".into()));
    }
    if proof.headers.len() > MAX_PROOF_HEADERS {
        return Err(InclusionError::TooManyHeaders(proof.headers.len()));
    }
    let first = proof.headers.first().ok_or(InclusionError::NoHeaders)?;
    if first.header.height != proof.height {
        return Err(InclusionError::Header {
            height: first.header.height,
            source: super::block::BlockError::WrongHeight { expected: proof.height, actual: first.header.height },
        });
    }
    merkle::verify_inclusion(
        &merkle::leaf_hash(&proof.event_bytes),
        u64::from(proof.event_idx),
        u64::from(first.header.n_events),
        &proof.merkle_path,
        &first.header.events_root,
    )?;
    let mut prev: Option<Tip> = None;
    for signed in &proof.headers {
        let header = &signed.header;
        let hash = header.hash();
        let err = |source| InclusionError::Header { height: header.height, source };
        super::block::check_header_rules(header).map_err(err)?;
        check_signature(header, &hash, &signed.signature).map_err(err)?;
        match &prev {
            // The first header's predecessor is not in the proof; it only has to be ours.
            None if header.validator != proof.validator => {
                return Err(err(super::block::BlockError::WrongValidator {
                    expected: proof.validator,
                    actual: header.validator,
                }))
            }
            None => {}
            Some(tip) => check_link(&proof.validator, Some(tip), header).map_err(err)?,
        }
        prev = Some(Tip { height: header.height, hash, time_ms: header.time_ms });
    }
    Ok(prev.expect("at least one header"))
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&hex::encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        crate::bytes::decode_lower_hex(&text)
            .ok_or_else(|| serde::de::Error::custom("expected lowercase hex with an even number of digits"))
    }
}
