//! A log's records of the tip hashes it committed on chain, in log order, as its fold
//! holds them: in memory, or spilled to the replay's match file (`cold`) with its
//! matches. A busy validator commits up to 600 times a day, so a list held in memory
//! would grow with time while the log has news.

use super::cold::ColdSnapshot;
use crate::bytes::ValidatorKey;
use crate::ledger::event::ChainCommitment;
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

/// The records in log order. Encoded as the list of every record wherever it is kept.
#[derive(Clone, Default)]
pub struct CommitmentList {
    /// The records not spilled, which follow the spilled ones.
    hot: Vec<ChainCommitment>,
    cold: Option<Cold>,
}

#[derive(Clone)]
struct Cold {
    snapshot: Arc<ColdSnapshot>,
    validator: ValidatorKey,
    /// How many records the snapshot holds: the first `n` of the list.
    n: u64,
}

impl CommitmentList {
    fn n_cold(&self) -> u64 {
        self.cold.as_ref().map_or(0, |c| c.n)
    }

    pub fn len(&self) -> u64 {
        self.n_cold() + self.hot.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, record: ChainCommitment) {
        self.hot.push(record);
    }

    /// The last record.
    pub fn last(&self) -> Option<ChainCommitment> {
        match (self.hot.last(), &self.cold) {
            (Some(last), _) => Some(last.clone()),
            (None, Some(cold)) => cold.n.checked_sub(1).and_then(|i| cold.snapshot.commitment(&cold.validator, i)),
            (None, None) => None,
        }
    }

    /// Every record, in log order.
    pub fn iter(&self) -> impl Iterator<Item = ChainCommitment> + '_ {
        let cold = self.cold.iter().flat_map(|c| c.snapshot.commitments(&c.validator).take(c.n as usize));
        cold.chain(self.hot.iter().cloned())
    }

    /// How many records are held in memory.
    pub fn held_in_memory(&self) -> usize {
        self.hot.len()
    }

    /// The records held in memory but the last, with their places in the list: what a
    /// spill writes (the last stays, for the pages and the weights audit).
    pub(super) fn to_spill(&self) -> impl Iterator<Item = (u64, &ChainCommitment)> + '_ {
        let n = self.n_cold();
        self.hot.iter().enumerate().take(self.hot.len().saturating_sub(1)).map(move |(i, c)| (n + i as u64, c))
    }

    /// The first `count` records held in memory were written to the match file, which
    /// `snapshot` now shows: they leave memory.
    pub(super) fn spilled(&mut self, count: usize, validator: ValidatorKey, snapshot: Arc<ColdSnapshot>) {
        let n = self.n_cold() + count as u64;
        self.hot.drain(..count);
        self.cold = Some(Cold { snapshot, validator, n });
    }

    /// Reads spilled records from `snapshot`, which must show them as the one read now.
    pub(super) fn read_from(&mut self, snapshot: &Arc<ColdSnapshot>) {
        if let Some(cold) = self.cold.as_mut() {
            cold.snapshot = snapshot.clone();
        }
    }

    /// Whether a read of a spilled record failed.
    pub fn faulted(&self) -> bool {
        self.cold.as_ref().is_some_and(|c| c.snapshot.faulted())
    }
}

impl From<Vec<ChainCommitment>> for CommitmentList {
    fn from(hot: Vec<ChainCommitment>) -> CommitmentList {
        CommitmentList { hot, cold: None }
    }
}

impl PartialEq for CommitmentList {
    fn eq(&self, other: &CommitmentList) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for CommitmentList {}

impl std::fmt::Debug for CommitmentList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for CommitmentList {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len() as usize))?;
        for record in self.iter() {
            seq.serialize_element(&record)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for CommitmentList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<CommitmentList, D::Error> {
        Ok(Vec::deserialize(deserializer)?.into())
    }
}
