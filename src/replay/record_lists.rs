//! A log's lists of records that only grow, in log order, as its fold holds them: in
//! memory, or spilled to the replay's spill file (`spill_file`) with its matches. A busy
//! validator commits its tip up to 600 times a day, and records each duplicate
//! commitment it does not play, and a log may hold any number of proven equivocations:
//! lists held in memory would grow with time.

use super::records::{EquivocationFound, SkipFold};
use super::spill_file::{Record, SpillFileError};
use super::spill_snapshot::{debug_reads, same_reads, until_failed, SpillSnapshot};
use crate::bytes::ValidatorKey;
use crate::ledger::event::ChainCommitment;
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

impl Record for ChainCommitment {
    const SLOT: usize = 0;
}

impl Record for SkipFold {
    const SLOT: usize = 1;
}

impl Record for EquivocationFound {
    const SLOT: usize = 2;
}

/// A log's commitment records.
pub type CommitmentList = RecordList<ChainCommitment>;
/// A log's records of miners it did not play (ledger-spec/13).
pub type SkipList = RecordList<SkipFold>;
/// The equivocations a log's evidence proves (each evidence event costs a log about 370
/// bytes; a log may hold millions).
pub type EquivocationList = RecordList<EquivocationFound>;

/// The records in log order. Encoded as the list of every record wherever it is kept.
#[derive(Clone)]
pub struct RecordList<T> {
    /// The records not spilled, which follow the spilled ones.
    hot: Vec<T>,
    cold: Option<Cold>,
}

impl<T> Default for RecordList<T> {
    fn default() -> RecordList<T> {
        RecordList { hot: Vec::new(), cold: None }
    }
}

/// A list as a kept file's fold heads hold it: the records in memory, after the file's
/// first `n`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct ListHead<T> {
    hot: Vec<T>,
    n: u64,
}

#[derive(Clone)]
struct Cold {
    snapshot: Arc<SpillSnapshot>,
    validator: ValidatorKey,
    /// How many records the snapshot holds: the first `n` of the list.
    n: u64,
}

impl<T: Record> RecordList<T> {
    fn n_cold(&self) -> u64 {
        self.cold.as_ref().map_or(0, |c| c.n)
    }

    pub fn len(&self) -> u64 {
        self.n_cold() + self.hot.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, record: T) {
        self.hot.push(record);
    }

    /// The last record.
    pub fn last(&self) -> Result<Option<T>, SpillFileError> {
        match (self.hot.last(), &self.cold) {
            (Some(last), _) => Ok(Some(last.clone())),
            (None, Some(cold)) => cold.n.checked_sub(1).map(|i| cold.snapshot.record(&cold.validator, i)).transpose(),
            (None, None) => Ok(None),
        }
    }

    /// Every record, in log order; a failed read of the replay's file is the last item.
    pub fn iter(&self) -> impl Iterator<Item = Result<T, SpillFileError>> + '_ {
        let cold = self.cold.iter().flat_map(|c| c.snapshot.records(&c.validator).take(c.n as usize));
        until_failed(cold.chain(self.hot.iter().cloned().map(Ok)))
    }

    /// How many records are held in memory.
    pub fn held_in_memory(&self) -> usize {
        self.hot.len()
    }

    /// The records held in memory but the last, with their places in the list: what a
    /// spill writes (the last stays: the pages show a log's last commitment).
    pub(super) fn to_spill(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        let n = self.n_cold();
        self.hot.iter().enumerate().take(self.hot.len().saturating_sub(1)).map(move |(i, c)| (n + i as u64, c))
    }

    /// The first `count` records held in memory were written to the spill file, which
    /// `snapshot` now shows: they leave memory.
    pub(super) fn spilled(&mut self, count: usize, validator: ValidatorKey, snapshot: Arc<SpillSnapshot>) {
        let n = self.n_cold() + count as u64;
        self.hot.drain(..count);
        self.cold = Some(Cold { snapshot, validator, n });
    }

    /// Reads spilled records from `snapshot`, which must show them as the one read now.
    pub(super) fn read_from(&mut self, snapshot: &Arc<SpillSnapshot>) {
        if let Some(cold) = self.cold.as_mut() {
            cold.snapshot = snapshot.clone();
        }
    }

    /// What of the list is not in the file, for a kept file's fold heads (`kept_file`).
    pub(super) fn head(&self) -> ListHead<T> {
        ListHead { hot: self.hot.clone(), n: self.n_cold() }
    }

    /// The list `head` describes, its first records those of `validator` in `snapshot`;
    /// `None` if the file does not hold exactly the records the head counts.
    pub(super) fn from_head(
        head: ListHead<T>,
        validator: ValidatorKey,
        snapshot: &Arc<SpillSnapshot>,
    ) -> Option<RecordList<T>> {
        if snapshot.n_records::<T>(&validator).ok() != Some(head.n as usize) {
            return None;
        }
        let cold = (head.n > 0).then(|| Cold { snapshot: snapshot.clone(), validator, n: head.n });
        Some(RecordList { hot: head.hot, cold })
    }

    /// Whether a read of a spilled record failed (for the fold, like `MatchTable::faulted`).
    pub(super) fn faulted(&self) -> bool {
        self.cold.as_ref().is_some_and(|c| c.snapshot.faulted())
    }
}

impl<T> FromIterator<T> for RecordList<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> RecordList<T> {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

impl<T> From<Vec<T>> for RecordList<T> {
    fn from(hot: Vec<T>) -> RecordList<T> {
        RecordList { hot, cold: None }
    }
}

impl<T: Record> PartialEq for RecordList<T> {
    fn eq(&self, other: &RecordList<T>) -> bool {
        self.len() == other.len() && same_reads(self.iter(), other.iter())
    }
}

impl<T: Record + Eq> Eq for RecordList<T> {}

impl<T: Record> std::fmt::Debug for RecordList<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_reads(f, self.iter())
    }
}

impl<T: Record> Serialize for RecordList<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len() as usize))?;
        for record in self.iter() {
            seq.serialize_element(&record.map_err(serde::ser::Error::custom)?)?;
        }
        seq.end()
    }
}

impl<'de, T: Record> Deserialize<'de> for RecordList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RecordList<T>, D::Error> {
        Ok(Vec::deserialize(deserializer)?.into())
    }
}
