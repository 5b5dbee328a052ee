//! Validators as identities (ledger-spec/16): one validator is the chain of ledger keys its
//! rotations link, named by its first key, so vTrust, votes and the ratio walk continue
//! across a rotation. Pure: read from the folds, whose rotation facts each log signed.

use super::fold::ChainFold;
use crate::bytes::ValidatorKey;
use crate::ledger::rotation::{link, LinkError};
use std::collections::BTreeMap;

/// Which keys are one validator.
#[derive(Debug, Default)]
pub struct Identities {
    /// Each linked successor's predecessor.
    before: BTreeMap<ValidatorKey, ValidatorKey>,
    /// Each linked predecessor's successor.
    after: BTreeMap<ValidatorKey, ValidatorKey>,
    /// Logs whose block 0 names a predecessor they are not linked to, and why: each is a
    /// validator of its own until the link holds (the old log may still be on its way).
    pub unlinked: Vec<(ValidatorKey, LinkError)>,
}

impl Identities {
    /// The identities of `folds` (in any order).
    pub fn of<'f>(folds: impl IntoIterator<Item = &'f ChainFold> + Clone) -> Identities {
        let by_key: BTreeMap<ValidatorKey, &ChainFold> = folds.clone().into_iter().map(|f| (f.validator, f)).collect();
        let mut identities = Identities::default();
        for fold in folds {
            let Some(succeeded) = &fold.succeeds else { continue };
            let rotated = by_key.get(&succeeded.old_key).map(|old| old.rotated.as_ref());
            match link(fold.validator, succeeded, rotated) {
                Ok(()) => {
                    identities.before.insert(fold.validator, succeeded.old_key);
                    identities.after.insert(succeeded.old_key, fold.validator);
                }
                Err(why) => identities.unlinked.push((fold.validator, why)),
            }
        }
        identities
    }

    /// The identity's name: the first key of its chain.
    pub fn root(&self, key: &ValidatorKey) -> ValidatorKey {
        let mut at = *key;
        // A link needs the old log's rotation block to name the new key and the new log
        // to name that block's hash, so the links cannot loop; the bound is for safety.
        for _ in 0..=self.before.len() {
            match self.before.get(&at) {
                Some(previous) => at = *previous,
                None => break,
            }
        }
        at
    }

    /// The keys of `root`'s identity, oldest first.
    pub fn chain(&self, root: &ValidatorKey) -> Vec<ValidatorKey> {
        let mut keys = vec![*root];
        while let Some(next) = self.after.get(keys.last().expect("one at least")) {
            if keys.len() > self.after.len() {
                break;
            }
            keys.push(*next);
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;
    use crate::ledger::rotation::{KeySucceeded, RotatedAt};

    fn rotated(key: u8, to: u8, height: u64) -> ChainFold {
        let mut fold = ChainFold::new(ValidatorKey([key; 32]));
        fold.rotated =
            Some(RotatedAt { height, hash: Hash32([key; 32]), new_key: ValidatorKey([to; 32]), chain_block: 9 });
        fold
    }

    fn succeeding(fold: &mut ChainFold, from: u8, height: u64) {
        fold.succeeds = Some(KeySucceeded {
            old_key: ValidatorKey([from; 32]),
            old_height: height,
            old_hash: Hash32([from; 32]),
            chain_block: 9,
        });
    }

    #[test]
    fn linked_keys_are_one_identity_named_by_the_first_and_a_false_link_is_its_own() {
        let a = rotated(1, 2, 10);
        let mut b = rotated(2, 3, 4);
        succeeding(&mut b, 1, 10);
        let mut c = ChainFold::new(ValidatorKey([3; 32]));
        succeeding(&mut c, 2, 4);
        let mut stranger = ChainFold::new(ValidatorKey([7; 32]));
        succeeding(&mut stranger, 1, 10);
        let folds = [c, stranger, b, a];
        let ids = Identities::of(&folds);
        let key = |k: u8| ValidatorKey([k; 32]);
        assert_eq!((ids.root(&key(3)), ids.root(&key(2)), ids.root(&key(1))), (key(1), key(1), key(1)));
        assert_eq!(ids.chain(&key(1)), vec![key(1), key(2), key(3)]);
        assert_eq!(ids.root(&key(7)), key(7), "a 1 that rotated to 2 does not continue in 7");
        assert!(matches!(ids.unlinked.as_slice(), [(k, LinkError::OtherSuccessor { .. })] if *k == key(7)));
    }
}
