//! Key rotation (ledger-spec/16): the two events that move a validator's identity from one
//! ledger key to the next, each signed by one of the two keys, and the rule that links
//! the two logs. A link needs both signatures: the old key names its successor in the last
//! block it ever signs, and the new key names that block (height and hash) in its first.
//! Pure: a reader hands in what its logs hold, and gets the link or why there is none.

pub use super::event::{KeyRotated, KeySucceeded};
use crate::bytes::{Hash32, ValidatorKey};
use serde::{Deserialize, Serialize};

/// Where a log's rotation stands, as a fold of it records it: the rotation block's height
/// and hash, and the key it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotatedAt {
    pub height: u64,
    pub hash: Hash32,
    pub new_key: ValidatorKey,
    pub chain_block: u64,
}

/// What a block is to the key rotation, by the rules of ledger-spec/16 ("The two events").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RotationRole {
    /// Neither event: an ordinary block.
    None,
    /// The old log's last block, naming the key the identity continues under.
    Rotated(KeyRotated),
    /// The new log's block 0, naming its predecessor's rotation block.
    Succeeded(KeySucceeded),
}

/// What `events`, the events of `validator`'s block at `height`, are to a rotation, or
/// which rule of ledger-spec/16 they break: each event stands alone in its block, a
/// `KeySucceeded` only at height 0, and neither names the block's own key or a key no
/// block could be signed by.
pub fn role<S: AsRef<str>>(
    validator: &ValidatorKey,
    height: u64,
    events: &[super::event::Event<S>],
) -> Result<RotationRole, String> {
    use super::event::Event;
    let mut found = events.iter().filter(|e| matches!(e, Event::KeyRotated(_) | Event::KeySucceeded(_)));
    let Some(first) = found.next() else { return Ok(RotationRole::None) };
    if events.len() != 1 {
        return Err(format!(
            "a {} shares its block with {} other events; it stands alone",
            first.kind_name(),
            events.len() - 1
        ));
    }
    let (named, role) = match first {
        Event::KeyRotated(rotated) => (rotated.new_key, RotationRole::Rotated(*rotated)),
        Event::KeySucceeded(succeeded) if height == 0 => (succeeded.old_key, RotationRole::Succeeded(*succeeded)),
        Event::KeySucceeded(_) => return Err(format!("a key_succeeded at height {height}; it is block 0 of its log")),
        _ => unreachable!("filtered above"),
    };
    if named == *validator {
        return Err(format!("a {} names the block's own key", first.kind_name()));
    }
    super::block::verifying_key(&named).map_err(|e| format!("a {} names key {named}: {e}", first.kind_name()))?;
    Ok(role)
}

/// The rotation `block` (verified, of its own key) makes, if it is a well-formed one: what
/// a store records, so that it refuses every later block of the log.
pub fn rotated_by(block: &super::block::DecodedBlock) -> Option<RotatedAt> {
    let decoded = &block.block;
    match role(&decoded.header.validator, decoded.header.height, &decoded.events) {
        Ok(RotationRole::Rotated(r)) => Some(RotatedAt {
            height: decoded.header.height,
            hash: block.hash,
            new_key: r.new_key,
            chain_block: r.chain_block,
        }),
        _ => None,
    }
}

/// The refusal of a block at `height` of a log that rotated `at`.
pub fn past(at: &RotatedAt, height: u64) -> super::block::BlockError {
    super::block::BlockError::PastRotation { height, rotated_at: at.height, new_key: at.new_key }
}

impl RotatedAt {
    /// `height (u64 LE) || hash (32) || new key (32) || chain block (u64 LE)`, as the
    /// store's rotations table holds it (ledger-spec/05).
    pub fn encode(&self) -> [u8; 80] {
        let mut bytes = [0u8; 80];
        bytes[..8].copy_from_slice(&self.height.to_le_bytes());
        bytes[8..40].copy_from_slice(&self.hash.0);
        bytes[40..72].copy_from_slice(&self.new_key.0);
        bytes[72..].copy_from_slice(&self.chain_block.to_le_bytes());
        bytes
    }

    pub fn decode(bytes: &[u8]) -> Option<RotatedAt> {
        let bytes: &[u8; 80] = bytes.try_into().ok()?;
        Some(RotatedAt {
            height: u64::from_le_bytes(bytes[..8].try_into().expect("8")),
            hash: Hash32(bytes[8..40].try_into().expect("32")),
            new_key: ValidatorKey(bytes[40..72].try_into().expect("32")),
            chain_block: u64::from_le_bytes(bytes[72..].try_into().expect("8")),
        })
    }
}

/// Why a log that names a predecessor is not linked to it (ledger-spec/16, "The link").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("the old log {old} is not here")]
    OldLogMissing { old: ValidatorKey },
    #[error("the old log {old} has no rotation")]
    NotRotated { old: ValidatorKey },
    #[error("the old log {old} rotated to {named}, not to this key")]
    OtherSuccessor { old: ValidatorKey, named: ValidatorKey },
    #[error("names block {height} {hash} of {old}, but its rotation is block {at_height} {at_hash}")]
    OtherBlock { old: ValidatorKey, height: u64, hash: Hash32, at_height: u64, at_hash: Hash32 },
}

/// The link from `new` (whose block 0 holds `succeeded`) to its predecessor, given how
/// the predecessor's log ended (`rotated`, `None` for a log that did not rotate, or
/// `Err` for one not here). Both signatures are already checked: the events are in
/// verified blocks of their own keys.
pub fn link(new: ValidatorKey, succeeded: &KeySucceeded, rotated: Option<Option<&RotatedAt>>) -> Result<(), LinkError> {
    let old = succeeded.old_key;
    let rotated = rotated.ok_or(LinkError::OldLogMissing { old })?.ok_or(LinkError::NotRotated { old })?;
    if rotated.new_key != new {
        return Err(LinkError::OtherSuccessor { old, named: rotated.new_key });
    }
    if (rotated.height, rotated.hash) != (succeeded.old_height, succeeded.old_hash) {
        return Err(LinkError::OtherBlock {
            old,
            height: succeeded.old_height,
            hash: succeeded.old_hash,
            at_height: rotated.height,
            at_hash: rotated.hash,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{Event, LedgerKey};

    #[test]
    fn each_event_stands_alone_names_another_valid_key_and_succession_is_block_0() {
        let (own, other) = (LedgerKey::generate().unwrap().validator(), LedgerKey::generate().unwrap().validator());
        let rotated = |new_key| Event::<String>::KeyRotated(KeyRotated { new_key, chain_block: 5 });
        let succeeded = |old_key| {
            Event::<String>::KeySucceeded(KeySucceeded {
                old_key,
                old_height: 3,
                old_hash: Hash32([1; 32]),
                chain_block: 5,
            })
        };
        assert_eq!(role::<String>(&own, 4, &[]), Ok(RotationRole::None));
        assert!(matches!(role(&own, 4, &[rotated(other)]), Ok(RotationRole::Rotated(_))));
        assert!(matches!(role(&own, 0, &[succeeded(other)]), Ok(RotationRole::Succeeded(_))));
        assert!(role(&own, 1, &[succeeded(other)]).unwrap_err().contains("block 0"));
        assert!(role(&own, 4, &[rotated(own)]).unwrap_err().contains("own key"));
        assert!(role(&own, 4, &[rotated(ValidatorKey([0; 32]))]).unwrap_err().contains("names key"));
        assert!(role(&own, 4, &[rotated(other), rotated(other)]).unwrap_err().contains("stands alone"));
        let fold = Event::FoldCheckpoint(crate::ledger::event::FoldCheckpoint { fold_version: 15, points: vec![] });
        assert!(role(&own, 0, &[succeeded(other), fold]).unwrap_err().contains("stands alone"));
    }

    #[test]
    fn a_link_needs_the_old_logs_rotation_to_name_the_new_key_at_the_named_block() {
        let (old, new, other) = (ValidatorKey([1; 32]), ValidatorKey([2; 32]), ValidatorKey([3; 32]));
        let succeeded = KeySucceeded { old_key: old, old_height: 7, old_hash: Hash32([9; 32]), chain_block: 40 };
        let at = RotatedAt { height: 7, hash: Hash32([9; 32]), new_key: new, chain_block: 40 };
        assert_eq!(link(new, &succeeded, Some(Some(&at))), Ok(()));
        assert_eq!(link(new, &succeeded, None), Err(LinkError::OldLogMissing { old }));
        assert_eq!(link(new, &succeeded, Some(None)), Err(LinkError::NotRotated { old }));
        assert!(matches!(link(other, &succeeded, Some(Some(&at))), Err(LinkError::OtherSuccessor { .. })));
        let elsewhere = RotatedAt { height: 8, ..at };
        assert!(matches!(link(new, &succeeded, Some(Some(&elsewhere))), Err(LinkError::OtherBlock { .. })));
        let other_hash = RotatedAt { hash: Hash32([8; 32]), ..at };
        assert!(matches!(link(new, &succeeded, Some(Some(&other_hash))), Err(LinkError::OtherBlock { .. })));
    }
}
