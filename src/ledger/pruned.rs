//! A block kept without its events: its header, signature and the Merkle leaf hash of
//! each event (ledger-spec/05, "Pruned bodies"). Links, roots, signatures and inclusion
//! paths all verify from these alone, so a store can drop old bodies of other
//! validators' logs and still check every chain end to end; a body fetched back (from
//! the log's archive) is taken only if it is that very block.

use super::block::{check_block, check_header_rules, check_signature, BlockError, CheckedBlock, Tip, EVENTS_OFFSET};
use super::codec::{self, CodecError};
use super::header::{BlockHeader, HEADER_BYTES};
use super::merkle;
use crate::bytes::{Hash32, SignatureBytes};
use crate::limits::MAX_EVENTS_PER_BLOCK;

/// Header, signature and leaf hashes: `header (118) || signature (64) || leaf_hash x n`,
/// `n` the header's `n_events`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrunedBlock {
    pub header: BlockHeader,
    pub signature: SignatureBytes,
    pub leaf_hashes: Vec<Hash32>,
}

impl PrunedBlock {
    /// What a block that passed [`check_block`] keeps once pruned.
    pub fn of(checked: &CheckedBlock) -> PrunedBlock {
        PrunedBlock {
            header: checked.header.clone(),
            signature: checked.signature,
            leaf_hashes: checked.leaf_hashes.clone(),
        }
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(EVENTS_OFFSET + 32 * self.leaf_hashes.len());
        out.extend_from_slice(&self.header.encode());
        out.extend_from_slice(&self.signature.0);
        for leaf in &self.leaf_hashes {
            out.extend_from_slice(&leaf.0);
        }
        out
    }

    /// A record read back: a canonical header that meets the header rules, and exactly
    /// as many leaf hashes as it says it has events. Nothing else (the signature, the
    /// root) is checked here: [`PrunedBlock::check`] does that.
    pub fn decode(bytes: &[u8]) -> Result<PrunedBlock, BlockError> {
        if bytes.len() < EVENTS_OFFSET {
            return Err(malformed(format!("{} bytes is shorter than header and signature", bytes.len())));
        }
        let header: BlockHeader = codec::decode_canonical(&bytes[..HEADER_BYTES], "block header", HEADER_BYTES as u64)?;
        check_header_rules(&header)?;
        let signature = SignatureBytes(bytes[HEADER_BYTES..EVENTS_OFFSET].try_into().expect("64 bytes"));
        let leaves = &bytes[EVENTS_OFFSET..];
        if header.n_events > MAX_EVENTS_PER_BLOCK {
            return Err(BlockError::TooManyEvents(u64::from(header.n_events)));
        }
        if leaves.len() != 32 * header.n_events as usize {
            return Err(BlockError::EventCount { header: header.n_events, actual: (leaves.len() / 32) as u64 });
        }
        let leaf_hashes = leaves.chunks_exact(32).map(|leaf| Hash32(leaf.try_into().expect("32 bytes"))).collect();
        Ok(PrunedBlock { header, signature, leaf_hashes })
    }

    /// Records laid end to end (a group of the store, ledger-spec/05) split back into
    /// each record's bytes, each as long as its header's `n_events` says, with the height
    /// its header names; nothing else is decoded or checked ([`PrunedBlock::decode`] and
    /// [`PrunedBlock::check`] are the readers'). Why not, if the bytes do not split.
    pub fn split_records(bytes: &[u8]) -> Result<Vec<(u64, &[u8])>, String> {
        // Where the header's height and event count sit (ledger-spec/03's header table).
        const HEIGHT_AT: usize = 34;
        const N_EVENTS_AT: usize = 114;
        let mut out = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            if rest.len() < EVENTS_OFFSET {
                return Err(format!("{} bytes at the end, short of a header and signature", rest.len()));
            }
            let height = u64::from_le_bytes(rest[HEIGHT_AT..HEIGHT_AT + 8].try_into().expect("8 bytes"));
            let n_events = u32::from_le_bytes(rest[N_EVENTS_AT..N_EVENTS_AT + 4].try_into().expect("4 bytes"));
            if n_events > MAX_EVENTS_PER_BLOCK {
                return Err(format!("a record says {n_events} events"));
            }
            let len = EVENTS_OFFSET + 32 * n_events as usize;
            if rest.len() < len {
                return Err(format!("a record of {len} bytes is cut at {}", rest.len()));
            }
            out.push((height, &rest[..len]));
            rest = &rest[len..];
        }
        Ok(out)
    }

    pub fn hash(&self) -> Hash32 {
        self.header.hash()
    }

    pub fn tip(&self) -> Tip {
        Tip { height: self.header.height, hash: self.hash(), time_ms: self.header.time_ms }
    }

    /// Every rule of ledger-spec/03 that does not need the events: the header rules,
    /// the strict signature, and the Merkle root over the kept leaf hashes. Links are
    /// the caller's (`check_link`), as for a whole block.
    pub fn check(&self) -> Result<Tip, BlockError> {
        check_header_rules(&self.header)?;
        let computed = merkle::root(&self.leaf_hashes);
        if computed != self.header.events_root {
            return Err(BlockError::EventsRoot { header: self.header.events_root, computed });
        }
        let tip = self.tip();
        check_signature(&self.header, &tip.hash, &self.signature)?;
        Ok(tip)
    }

    /// Whether `bytes`, a body fetched back, is this block: it passes every check of a
    /// block on its own, and its header, signature and leaf hashes are the kept ones.
    pub fn check_body(&self, bytes: &[u8]) -> Result<(), BodyMismatch> {
        let checked = check_block(bytes).map_err(BodyMismatch::Invalid)?;
        if checked.header != self.header || checked.signature != self.signature {
            return Err(BodyMismatch::OtherBlock { kept: self.hash(), fetched: checked.hash });
        }
        if checked.leaf_hashes != self.leaf_hashes {
            return Err(BodyMismatch::OtherLeaves);
        }
        check_signature(&checked.header, &checked.hash, &checked.signature).map_err(BodyMismatch::Invalid)
    }
}

/// Why a fetched body is not the pruned block it should restore.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BodyMismatch {
    #[error("the fetched block is invalid: {0}")]
    Invalid(BlockError),
    #[error("the fetched block is another block (hash {fetched}) than the one kept (hash {kept})")]
    OtherBlock { kept: Hash32, fetched: Hash32 },
    #[error("the fetched block's events hash to other leaves than the kept ones")]
    OtherLeaves,
}

fn malformed(message: String) -> BlockError {
    BlockError::Decode(CodecError::Malformed { what: "pruned block", message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::demo;

    fn a_block() -> Vec<u8> {
        let key = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
        let validator = crate::bytes::ValidatorKey(key.verifying_key().to_bytes());
        let events = demo::demo_events(&validator, 0, 5, 300);
        crate::ledger::block::seal(&key, None, 1_000, events).expect("seals").bytes().to_vec()
    }

    #[test]
    fn a_pruned_block_round_trips_checks_and_takes_back_only_its_own_body() {
        let bytes = a_block();
        let pruned = PrunedBlock::of(&check_block(&bytes).unwrap());
        let record = pruned.encode();
        assert_eq!(record.len(), EVENTS_OFFSET + 32 * pruned.header.n_events as usize);
        let back = PrunedBlock::decode(&record).unwrap();
        assert_eq!(back, pruned);
        assert_eq!(back.check().unwrap().hash, check_block(&bytes).unwrap().hash);
        back.check_body(&bytes).unwrap();

        // A leaf changed: the root no longer holds.
        let mut leaf_flipped = record.clone();
        *leaf_flipped.last_mut().unwrap() ^= 1;
        assert!(matches!(PrunedBlock::decode(&leaf_flipped).unwrap().check(), Err(BlockError::EventsRoot { .. })));
        // A signature changed.
        let mut signature_flipped = record.clone();
        signature_flipped[HEADER_BYTES] ^= 1;
        assert_eq!(PrunedBlock::decode(&signature_flipped).unwrap().check(), Err(BlockError::BadSignature));
        // A leaf missing or extra.
        assert!(matches!(PrunedBlock::decode(&record[..record.len() - 32]), Err(BlockError::EventCount { .. })));
        assert!(matches!(PrunedBlock::decode(&record[..100]), Err(BlockError::Decode(_))));

        // Records laid end to end split back at their lengths, and nothing else does.
        let mut two = record.clone();
        two.extend_from_slice(&record);
        let split = PrunedBlock::split_records(&two).unwrap();
        assert_eq!(split, vec![(0, &record[..]), (0, &record[..])]);
        assert!(PrunedBlock::split_records(&two[..two.len() - 1]).is_err());
        assert!(PrunedBlock::split_records(&two[..record.len() + 100]).is_err());

        // Another block is not this one's body.
        let key = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32]);
        let validator = crate::bytes::ValidatorKey(key.verifying_key().to_bytes());
        let other = crate::ledger::block::seal(&key, None, 1_001, demo::demo_events(&validator, 0, 5, 300)).unwrap();
        assert!(matches!(back.check_body(other.bytes()), Err(BodyMismatch::OtherBlock { .. })));
        let mut broken = bytes.clone();
        *broken.last_mut().unwrap() ^= 1;
        assert!(matches!(back.check_body(&broken), Err(BodyMismatch::Invalid(_))));
    }
}
