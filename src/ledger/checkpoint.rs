//! Signed checkpoints of a chain's tip as C2SP signed notes, so a tip can be pasted,
//! read by a person, and verified by standard transparency-log tooling.
//!
//! ```text
//! af.ledger/v1/<validator hex>          origin
//! <number of blocks>                    size (tip height + 1)
//! <base64 tip block hash>               root
//!                                       (blank line ends the signed text)
//! — <key name> <base64(key id || ed25519 signature over the text)>
//! ```
//! Key id = first 4 bytes of SHA-256(key name || 0x0A || 0x01 || public key), as the
//! signed-note spec defines for Ed25519. See ledger-spec/04-checkpoint.md.

use super::block::Tip;
use super::keys::LedgerKey;
use crate::bytes::{Hash32, ValidatorKey};
use crate::limits::MAX_CHECKPOINT_BYTES;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ed25519_dalek::{Signature, Signer, VerifyingKey};
use sha2::{Digest, Sha256};

pub const ORIGIN_PREFIX: &str = "af.ledger/v1/";
/// The signature line starts with an em dash (U+2014) and a space.
pub const SIGNATURE_LINE_PREFIX: &str = "\u{2014} ";
const ED25519_ALGORITHM: u8 = 0x01;

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Checkpoint {
    pub validator: ValidatorKey,
    /// Number of blocks: the tip's height + 1.
    pub size: u64,
    pub tip_hash: Hash32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CheckpointError {
    #[error("checkpoint is larger than {MAX_CHECKPOINT_BYTES} bytes")]
    TooLarge,
    #[error("checkpoint is malformed: {0}")]
    Malformed(String),
    #[error("no signature line by key {name} with key id {key_id}")]
    NoSignature { name: String, key_id: String },
    #[error("signature by {name} does not verify")]
    BadSignature { name: String },
}

/// The key name used in signature lines: `af-<first 16 hex digits of the key>`.
pub fn key_name(validator: &ValidatorKey) -> String {
    format!("af-{}", &validator.to_hex()[..16])
}

pub fn key_id(name: &str, validator: &ValidatorKey) -> [u8; 4] {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update([0x0a, ED25519_ALGORITHM]);
    hasher.update(validator.0);
    hasher.finalize()[..4].try_into().expect("4 bytes")
}

impl Checkpoint {
    pub fn of_tip(validator: ValidatorKey, tip: &Tip) -> Checkpoint {
        Checkpoint { validator, size: tip.height + 1, tip_hash: tip.hash }
    }

    /// The signed text: three lines, each ending in a newline.
    pub fn body(&self) -> String {
        format!("{ORIGIN_PREFIX}{}\n{}\n{}\n", self.validator.to_hex(), self.size, B64.encode(self.tip_hash.0))
    }

    /// The whole note, signed with `key` (which must be the checkpoint's validator).
    pub fn sign(&self, key: &LedgerKey) -> String {
        assert_eq!(key.validator(), self.validator, "a checkpoint is signed by its own validator");
        let body = self.body();
        let name = key_name(&self.validator);
        let mut blob = key_id(&name, &self.validator).to_vec();
        blob.extend_from_slice(&key.signing_key().sign(body.as_bytes()).to_bytes());
        format!("{body}\n{SIGNATURE_LINE_PREFIX}{name} {}\n", B64.encode(blob))
    }

    /// Parses a note and checks the signature of the validator named in its origin.
    pub fn verify(note: &str) -> Result<Checkpoint, CheckpointError> {
        if note.len() > MAX_CHECKPOINT_BYTES {
            return Err(CheckpointError::TooLarge);
        }
        let malformed = |why: &str| CheckpointError::Malformed(why.to_string());
        // C2SP signed-note: UTF-8 text whose only control character is the newline, and
        // which ends in one (every signature line ends with a newline).
        if note.chars().any(|c| c.is_control() && c != '\n') {
            return Err(malformed("the note holds a control character other than newline (such as CR)"));
        }
        if !note.ends_with('\n') {
            return Err(malformed("the note does not end with a newline"));
        }
        let (body, signatures) =
            note.split_once("\n\n").ok_or_else(|| malformed("no blank line before the signatures"))?;
        let body = format!("{body}\n");
        let mut lines = body.lines();
        let origin = lines.next().ok_or_else(|| malformed("no origin line"))?;
        let validator_hex =
            origin.strip_prefix(ORIGIN_PREFIX).ok_or_else(|| malformed("origin is not af.ledger/v1/<key>"))?;
        let validator = ValidatorKey::from_hex(validator_hex).map_err(|e| malformed(&e.to_string()))?;
        let size_line = lines.next().ok_or_else(|| malformed("no size line"))?;
        if size_line.is_empty()
            || !size_line.bytes().all(|b| b.is_ascii_digit())
            || (size_line.len() > 1 && size_line.starts_with('0'))
        {
            return Err(malformed("size is not a decimal number without leading zeros"));
        }
        let size: u64 = size_line.parse().map_err(|_| malformed("size does not fit in 64 bits"))?;
        if size == 0 {
            return Err(malformed("size 0: a chain with no blocks has no tip to checkpoint"));
        }
        let root = B64
            .decode(lines.next().ok_or_else(|| malformed("no root hash line"))?)
            .map_err(|_| malformed("root hash is not base64"))?;
        let tip_hash = Hash32(root.try_into().map_err(|_| malformed("root hash is not 32 bytes"))?);
        let checkpoint = Checkpoint { validator, size, tip_hash };
        // Extension lines may follow; they are signed but carry nothing we read.
        let name = key_name(&validator);
        let id = key_id(&name, &validator);
        let key = VerifyingKey::from_bytes(&validator.0)
            .map_err(|_| malformed("validator key is not a valid ed25519 key"))?;
        // Every line by our key name and id must verify, as Go's note.Open requires of
        // every known key's lines: one bad line refuses the note, whatever its place.
        let mut signed = false;
        for line in signatures.lines() {
            let Some(rest) = line.strip_prefix(SIGNATURE_LINE_PREFIX) else {
                return Err(malformed("a signature line does not start with an em dash and a space"));
            };
            let Some((line_name, blob)) = rest.split_once(' ') else {
                return Err(malformed("a signature line has no key name"));
            };
            // As Go's note.Open: a line whose base64 does not decode makes the note malformed
            // (and only the canonical spelling, zero padding bits, decodes here).
            let Ok(blob) = B64.decode(blob) else {
                return Err(malformed("a signature line's signature is not canonical base64"));
            };
            if line_name != name || blob.len() != 68 || blob[..4] != id {
                continue; // Someone else's signature: a note may carry several.
            }
            let signature = Signature::from_bytes(blob[4..].try_into().expect("64 bytes"));
            key.verify_strict(body.as_bytes(), &signature)
                .map_err(|_| CheckpointError::BadSignature { name: name.clone() })?;
            signed = true;
        }
        if signed {
            return Ok(checkpoint);
        }
        Err(CheckpointError::NoSignature { name, key_id: hex::encode(id) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_bad_line_by_our_key_refuses_the_note_in_either_place() {
        let key = LedgerKey::from_seed([7; 32]);
        let tip = Tip { height: 4, hash: Hash32([9; 32]), time_ms: 0 };
        let note = Checkpoint::of_tip(key.validator(), &tip).sign(&key);
        assert!(Checkpoint::verify(&note).is_ok());
        let good = note.lines().last().unwrap().to_string();
        // The same line with one signature byte changed (the key id stays ours).
        let mut blob = B64.decode(good.rsplit_once(' ').unwrap().1).unwrap();
        blob[10] ^= 1;
        let bad = format!("{} {}", good.rsplit_once(' ').unwrap().0, B64.encode(&blob));
        let body = note.strip_suffix(&format!("{good}\n")).unwrap();
        for lines in [[&good, &bad], [&bad, &good]] {
            let doubled = format!("{body}{}\n{}\n", lines[0], lines[1]);
            assert!(matches!(Checkpoint::verify(&doubled), Err(CheckpointError::BadSignature { .. })), "{doubled}");
        }
    }
}
