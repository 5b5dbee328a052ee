//! The network state's matches, in the state's order, in the replay's file (`cold`)
//! where its combine wrote them, read back one at a time through the snapshot the
//! combine committed. They encode as the list they are, so the state's bytes and hash do
//! not depend on how much of the file is cached.

use super::bag::SortKey;
use super::cold::{ColdError, ColdSnapshot, ColdStore};
use super::model::{Name, NetworkMatch};
use crate::bytes::{MatchId, ValidatorKey};
use serde::ser::{Error as _, SerializeSeq};
use serde::{Serialize, Serializer};
use std::sync::Arc;

/// The list combine number `combine` wrote, as `snapshot` holds it; a failed read faults
/// the snapshot ([`Self::faulted`]). Cloned, it shares the snapshot: the replays that
/// recount this one (`network::recount`) read the same list.
#[derive(Clone)]
pub struct NetworkMatches {
    snapshot: Arc<ColdSnapshot>,
    len: usize,
    combine: u64,
}

impl NetworkMatches {
    /// The list combine number `combine` wrote, as `snapshot` holds it.
    pub(super) fn stored(snapshot: Arc<ColdSnapshot>, len: usize, combine: u64) -> NetworkMatches {
        NetworkMatches { snapshot, len, combine }
    }

    /// `matches`, written to `cold`'s file as a combine writes its list (with no plays):
    /// a state made by hand, as a test or a page's preview makes one.
    pub fn written(cold: &ColdStore, matches: &[NetworkMatch]) -> Result<NetworkMatches, ColdError> {
        let txn = cold.begin_combine()?;
        cold.append_state_matches(&txn, 0, matches)?;
        let (snapshot, combine) = cold.commit_combine(txn, &[])?;
        Ok(NetworkMatches::stored(snapshot, matches.len(), combine))
    }

    /// Reads the list from `cold`'s newest snapshot from here on, if that still holds it:
    /// a state recounted across spills would otherwise keep an old snapshot, and with it
    /// every page the spills since freed.
    pub(super) fn read_newest(&mut self, cold: &ColdStore) {
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

    /// Every match, in order, read one at a time; a failed read ends the walk short and
    /// faults the list (see [`Self::faulted`]).
    pub fn iter(&self) -> impl Iterator<Item = NetworkMatch> + '_ {
        self.iter_from(0)
    }

    /// The matches from place `offset` on (a page reads no match before its own).
    pub fn iter_from(&self, offset: usize) -> impl Iterator<Item = NetworkMatch> + '_ {
        self.snapshot.state_matches(offset as u64).take(self.len.saturating_sub(offset))
    }

    /// The logs that played the pair (contender, champion), each with its first match of
    /// it (in id order): the combine's plays by pair, the one index of who played what.
    pub fn plays(&self, contender: &Name, champion: &Name) -> Vec<(ValidatorKey, MatchId)> {
        let mut pair = Vec::new();
        (contender.clone(), champion.clone()).write_sorted(&mut pair);
        let mut plays = self.snapshot.state_plays(&pair);
        plays.dedup_by_key(|(validator, _)| *validator);
        plays
    }

    /// The snapshot the list is read through (its combine's plays are there too).
    pub(super) fn snapshot(&self) -> &Arc<ColdSnapshot> {
        &self.snapshot
    }

    /// Whether a match failed to read back: anything drawn from this list since may be
    /// short of a match, and must not be published.
    pub fn faulted(&self) -> bool {
        self.snapshot.faulted()
    }
}

impl Serialize for NetworkMatches {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        let mut n = 0;
        for m in self.iter() {
            seq.serialize_element(&m)?;
            n += 1;
        }
        if n != self.len() {
            return Err(S::Error::custom(format!("the match file gave {n} of the state's {} matches", self.len())));
        }
        seq.end()
    }
}

impl PartialEq for NetworkMatches {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter()) && !self.faulted() && !other.faulted()
    }
}

impl Eq for NetworkMatches {}

impl std::fmt::Debug for NetworkMatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
