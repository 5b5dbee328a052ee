//! Blocks: a signed header that commits to its events through a Merkle root and to
//! the previous block through its hash. Sealing and checking are pure functions of
//! their inputs, so the writer, the store, gossip and the auditor share one rule.

use super::codec::{self, CodecError};
use super::event::Event;
use super::merkle;
use crate::bytes::{Hash32, SignatureBytes, ValidatorKey};
use crate::limits::{MAX_BLOCK_BYTES, MAX_EVENTS_PER_BLOCK, MAX_EVENT_BYTES};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

pub use super::header::{
    signing_message, BlockHeader, BLOCK_SIGNING_CONTEXT, FORMAT_VERSION, GENESIS_PREV_HASH, HEADER_BYTES,
};

/// Offset of the event count (u64) after header and signature.
pub const EVENTS_OFFSET: usize = HEADER_BYTES + 64;

/// A block as it travels and is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    pub header: BlockHeader,
    pub signature: SignatureBytes,
    pub events: Vec<Event>,
}

/// A block with everything derived from its bytes, so nothing is computed twice.
#[derive(Clone, Debug)]
pub struct DecodedBlock {
    pub block: Block,
    pub hash: Hash32,
    pub leaf_hashes: Vec<Hash32>,
    pub n_bytes: usize,
}

/// The last block of a chain, as the next block must link to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tip {
    pub height: u64,
    pub hash: Hash32,
    pub time_ms: u64,
}

/// What is wrong with a block. The caller adds which validator and height.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BlockError {
    #[error("cannot decode: {0}")]
    Decode(#[from] CodecError),
    #[error("format version {0} is not supported (this build reads version {FORMAT_VERSION})")]
    FormatVersion(u16),
    #[error("{0}")]
    Bound(#[from] super::event::BoundError),
    #[error("header says {header} events, block holds {actual}")]
    EventCount { header: u32, actual: u64 },
    #[error("block holds {0} events, more than the limit of {MAX_EVENTS_PER_BLOCK}")]
    TooManyEvents(u64),
    /// An event whose tag is past every kind this build decodes: a kind of a later
    /// protocol version (ledger-spec/15). Not proof that the block is bad.
    #[error("event {event_idx} has tag {tag}, a kind this build does not know (tags 0 to {}): a later protocol version; upgrade af", Event::<String>::N_KINDS - 1)]
    NewerEventKind { event_idx: u64, tag: u32 },
    #[error("events root mismatch: header has {header}, events hash to {computed}")]
    EventsRoot { header: Hash32, computed: Hash32 },
    #[error("validator key is not a valid ed25519 point or is of small order")]
    WeakKey,
    #[error("validator key is not the canonical encoding of its point")]
    NonCanonicalKey,
    #[error("bad signature")]
    BadSignature,
    #[error("block is signed by validator {actual}, expected {expected}")]
    WrongValidator { expected: ValidatorKey, actual: ValidatorKey },
    #[error("block has height {actual}, expected {expected}")]
    WrongHeight { expected: u64, actual: u64 },
    #[error("prev hash {actual} does not link to the previous block {expected}")]
    BrokenLink { expected: Hash32, actual: Hash32 },
    #[error("time {time_ms} ms is before the previous block's {prev_time_ms} ms")]
    TimeWentBack { prev_time_ms: u64, time_ms: u64 },
    /// The log ended at its rotation: the key signs nothing more that counts.
    #[error(
        "block {height} comes after this key's rotation at block {rotated_at} to {new_key}: a key signs nothing after its rotation, so this is a forgery with the retired key (ledger-spec/16)"
    )]
    PastRotation { height: u64, rotated_at: u64, new_key: ValidatorKey },
}

/// Decodes a block, insisting on canonical bytes, and derives its hash and leaf hashes.
/// Checks structure only; [`check_signature`] and [`check_link`] do the rest.
pub fn decode_block(bytes: &[u8]) -> Result<DecodedBlock, BlockError> {
    let mut events = Vec::new();
    let checked = walk_block::<String>(bytes, &mut |event| events.push(event))?;
    let CheckedBlock { header, signature, hash, leaf_hashes } = checked;
    Ok(DecodedBlock { block: Block { header, signature, events }, hash, leaf_hashes, n_bytes: bytes.len() })
}

/// What [`check_block`] derives from a block's bytes, without keeping its events.
#[derive(Clone, Debug)]
pub struct CheckedBlock {
    pub header: BlockHeader,
    pub signature: SignatureBytes,
    pub hash: Hash32,
    pub leaf_hashes: Vec<Hash32>,
}

/// The same checks as [`decode_block`], decoding every event as `Event<&str>` borrowed
/// from `bytes`: no text is copied. For full verification, where events are not kept.
pub fn check_block(bytes: &[u8]) -> Result<CheckedBlock, BlockError> {
    walk_block::<&str>(bytes, &mut |_| {})
}

/// [`check_block`], showing each event, borrowed from `bytes`, to `on_event` in order
/// (store verification derives the index entries each block must have).
pub fn check_block_with<'a>(
    bytes: &'a [u8],
    on_event: &mut dyn FnMut(Event<&'a str>),
) -> Result<CheckedBlock, BlockError> {
    walk_block::<&str>(bytes, on_event)
}

/// The same checks as [`check_block`], keeping the events decoded as `Event<&str>`
/// borrowed from `bytes`: replay folds them without copying any text.
pub fn decode_block_borrowed(bytes: &[u8]) -> Result<(CheckedBlock, Vec<Event<&str>>), BlockError> {
    let mut events = Vec::new();
    let checked = walk_block::<&str>(bytes, &mut |event| events.push(event))?;
    Ok((checked, events))
}

/// Decodes the fixed part, then every event canonically (re-encoding it and comparing),
/// checks bounds, hashes each event's bytes as a Merkle leaf and checks the root.
/// Generic over the events' string type so owned and borrowed decoding share one path.
fn walk_block<'a, S>(bytes: &'a [u8], on_event: &mut dyn FnMut(Event<S>)) -> Result<CheckedBlock, BlockError>
where
    S: Deserialize<'a> + Serialize + AsRef<str>,
{
    if bytes.len() as u64 > MAX_BLOCK_BYTES {
        return Err(CodecError::TooLarge { what: "block", len: bytes.len() as u64, limit: MAX_BLOCK_BYTES }.into());
    }
    if bytes.len() < EVENTS_OFFSET + 8 {
        return Err(CodecError::Malformed {
            what: "block",
            message: format!("{} bytes is shorter than the fixed part of {}", bytes.len(), EVENTS_OFFSET + 8),
        }
        .into());
    }
    let header: BlockHeader = codec::decode_canonical(&bytes[..HEADER_BYTES], "block header", HEADER_BYTES as u64)?;
    check_header_rules(&header)?;
    let signature = SignatureBytes(bytes[HEADER_BYTES..EVENTS_OFFSET].try_into().expect("64 bytes"));
    let n_events = u64::from_le_bytes(bytes[EVENTS_OFFSET..EVENTS_OFFSET + 8].try_into().expect("8 bytes"));
    if n_events > u64::from(MAX_EVENTS_PER_BLOCK) {
        return Err(BlockError::TooManyEvents(n_events));
    }
    if n_events != u64::from(header.n_events) {
        return Err(BlockError::EventCount { header: header.n_events, actual: n_events });
    }
    let mut event_bytes: Vec<&[u8]> = Vec::with_capacity(n_events as usize);
    let mut scratch = Vec::new();
    let mut offset = EVENTS_OFFSET + 8;
    for event_idx in 0..n_events {
        let rest = &bytes[offset..];
        if let Some(tag) = rest.get(..4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))) {
            if tag >= Event::<String>::N_KINDS {
                return Err(BlockError::NewerEventKind { event_idx, tag });
            }
        }
        let (event, used): (Event<S>, usize) =
            codec::decode_canonical_prefix(rest, "event", MAX_EVENT_BYTES.min(rest.len() as u64), &mut scratch)
                .map_err(|e| shift_offset(e, offset as u64))?;
        event.check_bounds()?;
        event_bytes.push(&rest[..used]);
        on_event(event);
        offset += used;
    }
    if offset != bytes.len() {
        return Err(CodecError::Malformed {
            what: "block",
            message: format!("{} trailing bytes after the last event", bytes.len() - offset),
        }
        .into());
    }
    // All leaves at once: short events are hashed eight side by side (`merkle::leaf_hashes`).
    let leaf_hashes = merkle::leaf_hashes(&event_bytes);
    let computed = merkle::root(&leaf_hashes);
    if computed != header.events_root {
        return Err(BlockError::EventsRoot { header: header.events_root, computed });
    }
    let hash = header.hash();
    Ok(CheckedBlock { header, signature, hash, leaf_hashes })
}

fn shift_offset(error: CodecError, base: u64) -> CodecError {
    match error {
        CodecError::NotCanonical { what, offset } => CodecError::NotCanonical { what, offset: base + offset },
        other => other,
    }
}

/// The rules a header must meet on its own, wherever it comes from (a block, a proof,
/// evidence): format version, event count bound, and the genesis link at height 0.
pub fn check_header_rules(header: &BlockHeader) -> Result<(), BlockError> {
    if header.format_version != FORMAT_VERSION {
        return Err(BlockError::FormatVersion(header.format_version));
    }
    if header.n_events > MAX_EVENTS_PER_BLOCK {
        return Err(BlockError::TooManyEvents(u64::from(header.n_events)));
    }
    if header.height == 0 && header.prev_hash != GENESIS_PREV_HASH {
        return Err(BlockError::BrokenLink { expected: GENESIS_PREV_HASH, actual: header.prev_hash });
    }
    Ok(())
}

/// The validator key as a verifying key, refusing an encoding that is not the point's
/// canonical one (a y coordinate at or above p, or x = 0 with the sign bit set: each names
/// a point another 32-byte string also names) and a point of small order.
pub fn verifying_key(validator: &ValidatorKey) -> Result<VerifyingKey, BlockError> {
    let point = curve25519_dalek::edwards::CompressedEdwardsY(validator.0).decompress().ok_or(BlockError::WeakKey)?;
    if point.compress().to_bytes() != validator.0 {
        return Err(BlockError::NonCanonicalKey);
    }
    let key = VerifyingKey::from_bytes(&validator.0).map_err(|_| BlockError::WeakKey)?;
    if key.is_weak() {
        return Err(BlockError::WeakKey);
    }
    Ok(key)
}

/// Checks the header signature under the header's own validator key, strictly
/// (RFC 8032 with small-order keys and non-canonical encodings refused).
pub fn check_signature(header: &BlockHeader, hash: &Hash32, signature: &SignatureBytes) -> Result<(), BlockError> {
    let key = verifying_key(&header.validator)?;
    let signature = Signature::from_bytes(&signature.0);
    key.verify_strict(&signing_message(hash), &signature).map_err(|_| BlockError::BadSignature)
}

/// Checks that `header` is the next block of `validator`'s chain after `prev`.
pub fn check_link(validator: &ValidatorKey, prev: Option<&Tip>, header: &BlockHeader) -> Result<(), BlockError> {
    if header.validator != *validator {
        return Err(BlockError::WrongValidator { expected: *validator, actual: header.validator });
    }
    let (expected_height, expected_prev) = match prev {
        None => (0, GENESIS_PREV_HASH),
        Some(tip) => (tip.height + 1, tip.hash),
    };
    if header.height != expected_height {
        return Err(BlockError::WrongHeight { expected: expected_height, actual: header.height });
    }
    if header.prev_hash != expected_prev {
        return Err(BlockError::BrokenLink { expected: expected_prev, actual: header.prev_hash });
    }
    if let Some(tip) = prev {
        if header.time_ms < tip.time_ms {
            return Err(BlockError::TimeWentBack { prev_time_ms: tip.time_ms, time_ms: header.time_ms });
        }
    }
    Ok(())
}

/// A block whose bytes are canonical, whose events match its root and whose signature
/// is valid: only [`seal`] and [`SealedBlock::from_bytes`] make one, so holding one is
/// proof of those checks. Whether it links to a chain is the store's check.
#[derive(Clone, Debug)]
pub struct SealedBlock {
    pub(in crate::ledger) bytes: Vec<u8>,
    pub(in crate::ledger) decoded: DecodedBlock,
}

impl SealedBlock {
    /// Decodes and checks bytes from anywhere (disk, a peer, a file).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<SealedBlock, BlockError> {
        let decoded = decode_block(&bytes)?;
        check_signature(&decoded.block.header, &decoded.hash, &decoded.block.signature)?;
        Ok(SealedBlock { bytes, decoded })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn decoded(&self) -> &DecodedBlock {
        &self.decoded
    }

    pub fn tip(&self) -> Tip {
        let header = &self.decoded.block.header;
        Tip { height: header.height, hash: self.decoded.hash, time_ms: header.time_ms }
    }
}

/// Builds and signs the block that follows `prev` in `key`'s chain.
/// `time_ms` is passed in: the ledger never reads a clock.
pub fn seal(key: &SigningKey, prev: Option<&Tip>, time_ms: u64, events: Vec<Event>) -> Result<SealedBlock, BlockError> {
    if events.len() as u64 > u64::from(MAX_EVENTS_PER_BLOCK) {
        return Err(BlockError::TooManyEvents(events.len() as u64));
    }
    let mut events_bytes = Vec::new();
    let mut ends = Vec::with_capacity(events.len());
    for event in &events {
        event.check_bounds()?;
        codec::encode_into(event, &mut events_bytes, "event", MAX_EVENT_BYTES)?;
        ends.push(events_bytes.len());
    }
    let starts = std::iter::once(0).chain(ends.iter().copied());
    let each: Vec<&[u8]> = starts.zip(&ends).map(|(start, &end)| &events_bytes[start..end]).collect();
    let leaf_hashes = merkle::leaf_hashes(&each);
    let (height, prev_hash, time_ms) = match prev {
        None => (0, GENESIS_PREV_HASH, time_ms),
        // A clock that stepped back must not make our own chain invalid.
        Some(tip) => (tip.height + 1, tip.hash, time_ms.max(tip.time_ms)),
    };
    let header = BlockHeader {
        format_version: FORMAT_VERSION,
        validator: ValidatorKey(key.verifying_key().to_bytes()),
        height,
        prev_hash,
        time_ms,
        events_root: merkle::root(&leaf_hashes),
        n_events: events.len() as u32,
    };
    let hash = header.hash();
    let signature = SignatureBytes(key.sign(&signing_message(&hash)).to_bytes());
    let mut bytes = header.encode();
    bytes.extend_from_slice(&signature.0);
    bytes.extend_from_slice(&(events.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&events_bytes);
    if bytes.len() as u64 > MAX_BLOCK_BYTES {
        return Err(CodecError::TooLarge { what: "block", len: bytes.len() as u64, limit: MAX_BLOCK_BYTES }.into());
    }
    let n_bytes = bytes.len();
    let block = Block { header, signature, events };
    debug_assert_eq!(codec::encode(&block, "block", MAX_BLOCK_BYTES).unwrap(), bytes);
    Ok(SealedBlock { bytes, decoded: DecodedBlock { block, hash, leaf_hashes, n_bytes } })
}
