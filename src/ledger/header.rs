//! The block header: its fields, canonical bytes, hash and the message its signature
//! signs. Apart from blocks because events carry headers too (`Evidence`), so both
//! depend on it and not on each other.

use super::codec;
use crate::bytes::{Hash32, ValidatorKey};
use serde::{Deserialize, Serialize};

/// The header layout and rules of this document; a block with another version is refused.
pub const FORMAT_VERSION: u16 = 1;
/// `prev_hash` of the block at height 0.
pub const GENESIS_PREV_HASH: Hash32 = Hash32([0u8; 32]);
/// Canonical header size: 2 + 32 + 8 + 32 + 8 + 32 + 4.
pub const HEADER_BYTES: usize = 118;
/// Prefix of the signed message. Its NUL byte keeps it apart from the signed-note
/// checkpoints made with the same key, whose text may hold no control characters.
pub const BLOCK_SIGNING_CONTEXT: &[u8; 19] = b"af-ledger/v1/block\0";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockHeader {
    pub format_version: u16,
    pub validator: ValidatorKey,
    pub height: u64,
    pub prev_hash: Hash32,
    /// Unix time in milliseconds, as the validator's clock said when sealing.
    pub time_ms: u64,
    pub events_root: Hash32,
    pub n_events: u32,
}

impl BlockHeader {
    pub fn encode(&self) -> Vec<u8> {
        let bytes = codec::encode(self, "block header", HEADER_BYTES as u64).expect("a header is always 118 bytes");
        assert_eq!(bytes.len(), HEADER_BYTES);
        bytes
    }

    /// The block hash: blake3 over the canonical header bytes.
    pub fn hash(&self) -> Hash32 {
        Hash32(*blake3::hash(&self.encode()).as_bytes())
    }
}

/// The exact message an ed25519 block signature signs.
pub fn signing_message(block_hash: &Hash32) -> [u8; 51] {
    let mut message = [0u8; 51];
    message[..19].copy_from_slice(BLOCK_SIGNING_CONTEXT);
    message[19..].copy_from_slice(&block_hash.0);
    message
}
