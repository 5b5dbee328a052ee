//! The network state's matches, in the state's order, in the replay's file (`spill_file`)
//! where its combine wrote them, read back one at a time through the snapshot the
//! combine committed. They encode as the list they are, so the state's bytes and hash do
//! not depend on how much of the file is cached.

use super::records::{Name, NetworkMatch};
use super::sorted_scratch::SortKey;
use super::spill_file::{SpillFile, SpillFileError};
use super::spill_snapshot::{debug_reads, same_reads, SpillSnapshot};
use crate::bytes::{MatchId, ValidatorKey};
use serde::ser::{Error as _, SerializeSeq};
use serde::{Serialize, Serializer};
use std::sync::Arc;

/// The list combine number `combine` wrote, as `snapshot` holds it; every read hands back
/// its error. Cloned, it shares the snapshot: the replays that recount this one
/// (`combine::recount`) read the same list.
#[derive(Clone)]
pub struct NetworkMatches {
    snapshot: Arc<SpillSnapshot>,
    len: usize,
    combine: u64,
}

impl NetworkMatches {
    /// The list combine number `combine` wrote, as `snapshot` holds it.
    pub(super) fn stored(snapshot: Arc<SpillSnapshot>, len: usize, combine: u64) -> NetworkMatches {
        NetworkMatches { snapshot, len, combine }
    }

    /// `matches`, written to `spill_file`'s file as a combine writes its list (with no plays):
    /// a state made by hand, as a test or a page's preview makes one.
    pub fn written(cold: &SpillFile, matches: &[NetworkMatch]) -> Result<NetworkMatches, SpillFileError> {
        let txn = cold.begin_combine()?;
        cold.append_state_matches(&txn, 0, matches)?;
        let (snapshot, combine) = cold.commit_combine(txn, &[])?;
        Ok(NetworkMatches::stored(snapshot, matches.len(), combine))
    }

    /// Reads the list from `spill_file`'s newest snapshot from here on, if that still holds it:
    /// a state recounted across spills would otherwise keep an old snapshot, and with it
    /// every page the spills since freed.
    pub(super) fn read_newest(&mut self, cold: &SpillFile) {
        if let Some(newest) = cold.newest_for(self.combine) {
            self.snapshot = newest;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every match, in order, read one at a time; a failed read is the last item.
    pub fn iter(&self) -> impl Iterator<Item = Result<NetworkMatch, SpillFileError>> + '_ {
        self.iter_from(0)
    }

    /// The matches from place `offset` on (a page reads no match before its own).
    pub fn iter_from(&self, offset: usize) -> impl Iterator<Item = Result<NetworkMatch, SpillFileError>> + '_ {
        let expected = self.len.saturating_sub(offset);
        let mut read = self.snapshot.state_matches(offset as u64).take(expected);
        let (mut n, mut ended) = (0, false);
        // A file that holds fewer matches than the list is a failed read too.
        std::iter::from_fn(move || match read.next() {
            Some(item) => {
                n += 1;
                ended |= item.is_err();
                Some(item)
            }
            None if !ended && n < expected => {
                ended = true;
                Some(Err(self.snapshot.failed(format!("the file holds {n} of the list's {expected} matches"))))
            }
            None => None,
        })
    }

    /// Every match, read whole into memory (tests and small lists).
    pub fn to_vec(&self) -> Result<Vec<NetworkMatch>, SpillFileError> {
        self.iter().collect()
    }

    /// The logs that played the pair (contender, champion), each with its first match of
    /// it (in id order): the combine's plays by pair, the one index of who played what.
    pub fn plays(&self, contender: &Name, champion: &Name) -> Result<Vec<(ValidatorKey, MatchId)>, SpillFileError> {
        let mut pair = Vec::new();
        (contender.clone(), champion.clone()).write_sorted(&mut pair);
        let mut plays = self.snapshot.state_plays(&pair)?;
        plays.dedup_by_key(|(validator, _)| *validator);
        Ok(plays)
    }

    /// Whether a read of the list failed (for the replay's own check, like `MatchTable::faulted`).
    pub(super) fn faulted(&self) -> bool {
        self.snapshot.faulted()
    }

    /// The snapshot the list is read through (its combine's plays are there too).
    pub(super) fn snapshot(&self) -> &Arc<SpillSnapshot> {
        &self.snapshot
    }
}

impl Serialize for NetworkMatches {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for m in self.iter() {
            seq.serialize_element(&m.map_err(S::Error::custom)?)?;
        }
        seq.end()
    }
}

impl PartialEq for NetworkMatches {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && same_reads(self.iter(), other.iter())
    }
}

impl Eq for NetworkMatches {}

impl std::fmt::Debug for NetworkMatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_reads(f, self.iter())
    }
}
