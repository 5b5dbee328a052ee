//! A log's part in fold checkpoints as its fold holds it (ledger-spec/02, "Fold
//! checkpoints"): its own newest points and what its `FoldCheckpoint` events claim of
//! each log. Plain data beside the fold; hashing, keeping and checking points is
//! `checkpoint`'s.

use crate::bytes::ValidatorKey;
use crate::ledger::event::{FoldCheckpoint, FoldPoint};
use crate::limits::MAX_LIST_ITEMS;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The fold format the points' hashes are of (ledger-spec/02, "The fold format";
/// `checkpoint_record` writes it): a `FoldCheckpoint`'s `fold_version`.
pub const FOLD_VERSION: u32 = 15;

/// A log's checkpoint heights are `360k - 1` (its 360th, 720th, ... block): about a
/// subnet tempo of a validator that seals a block every 12 s.
pub const CHECKPOINT_EVERY: u64 = 360;

/// Whether a fold ending at block `height` is hashed.
pub fn is_checkpoint_height(height: u64) -> bool {
    (height + 1).is_multiple_of(CHECKPOINT_EVERY)
}

/// What a log's claims of another log's fold were: the newest point claimed, and the
/// height of the block that recorded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub at: u64,
    pub point: FoldPoint,
}

/// One log's part in checkpoints, as its fold holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoints {
    /// This log's fold at its last checkpoint heights, newest last.
    pub points: Vec<FoldPoint>,
    /// What this log's `FoldCheckpoint` events claim, newest point per log claimed.
    pub claims: BTreeMap<ValidatorKey, Claim>,
    /// Points not kept: of another fold format, at a height that is no checkpoint height
    /// (no replay hashes a fold there), or of logs past the first `MAX_LIST_ITEMS` this
    /// log claimed (a log names what it likes; it costs a count).
    pub n_claims_ignored: u64,
}

impl Checkpoints {
    /// Folds a `FoldCheckpoint` recorded at block `at`.
    pub fn claim(&mut self, at: u64, checkpoint: &FoldCheckpoint) {
        if checkpoint.fold_version != FOLD_VERSION {
            self.n_claims_ignored += checkpoint.points.len() as u64;
            return;
        }
        for point in &checkpoint.points {
            if !is_checkpoint_height(point.height) {
                self.n_claims_ignored += 1;
                continue;
            }
            let full = self.claims.len() >= MAX_LIST_ITEMS;
            match self.claims.get_mut(&point.validator) {
                // An older point claimed later does not hide the newer one.
                Some(claim) if point.height >= claim.point.height => *claim = Claim { at, point: *point },
                Some(_) => {}
                None if full => self.n_claims_ignored += 1,
                None => {
                    self.claims.insert(point.validator, Claim { at, point: *point });
                }
            }
        }
    }

    /// This log's own point at `height`, if the fold still keeps it.
    pub fn point_at(&self, height: u64) -> Option<&FoldPoint> {
        self.points.iter().find(|p| p.height == height)
    }
}
