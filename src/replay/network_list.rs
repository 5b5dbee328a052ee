//! The network state's matches, in the state's order: held in memory for a one-shot
//! audit, or in the replay's match file for a validator, where its combine wrote them one
//! at a time. Either way they encode as the list they are, so the state's bytes and hash
//! do not depend on where they are kept.

use super::bag::SortKey;
use super::cold::ColdSnapshot;
use super::model::{Name, NetworkMatch};
use crate::bytes::{MatchId, ValidatorKey};
use serde::ser::{Error as _, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::sync::Arc;

#[derive(Clone)]
pub struct NetworkMatches(Kept);

#[derive(Clone)]
enum Kept {
    /// Shared by the replays that recount this one (`network::recount`).
    Held(Arc<[NetworkMatch]>),
    /// Read through the snapshot the combine committed; a failed read faults it.
    Stored { snapshot: Arc<ColdSnapshot>, len: usize, combine: u64 },
}

impl Default for NetworkMatches {
    fn default() -> Self {
        NetworkMatches(Kept::Held(Arc::new([])))
    }
}

impl From<Vec<NetworkMatch>> for NetworkMatches {
    fn from(matches: Vec<NetworkMatch>) -> Self {
        NetworkMatches(Kept::Held(matches.into()))
    }
}

impl FromIterator<NetworkMatch> for NetworkMatches {
    fn from_iter<I: IntoIterator<Item = NetworkMatch>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

impl NetworkMatches {
    /// The list combine number `combine` wrote, as `snapshot` holds it.
    pub(super) fn stored(snapshot: Arc<ColdSnapshot>, len: usize, combine: u64) -> NetworkMatches {
        NetworkMatches(Kept::Stored { snapshot, len, combine })
    }

    /// Reads the list from `cold`'s newest snapshot from here on, if that still holds it:
    /// a state recounted across spills would otherwise keep an old snapshot, and with it
    /// every page the spills since freed.
    pub(super) fn read_newest(&mut self, cold: &super::cold::ColdStore) {
        if let Kept::Stored { snapshot, combine, .. } = &mut self.0 {
            if let Some(newest) = cold.newest_for(*combine) {
                *snapshot = newest;
            }
        }
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Kept::Held(held) => held.len(),
            Kept::Stored { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many are in memory (all or none).
    pub fn held_in_memory(&self) -> usize {
        match &self.0 {
            Kept::Held(held) => held.len(),
            Kept::Stored { .. } => 0,
        }
    }

    /// Every match, in order. Stored ones are read one at a time; a failed read ends the
    /// walk short and faults the list (see [`Self::faulted`]).
    pub fn iter(&self) -> Box<dyn Iterator<Item = Cow<'_, NetworkMatch>> + '_> {
        self.iter_from(0)
    }

    /// The matches from place `offset` on (a page reads no match before its own).
    pub fn iter_from(&self, offset: usize) -> Box<dyn Iterator<Item = Cow<'_, NetworkMatch>> + '_> {
        match &self.0 {
            Kept::Held(held) => Box::new(held.iter().skip(offset).map(Cow::Borrowed)),
            Kept::Stored { snapshot, len, .. } => {
                Box::new(snapshot.state_matches(offset as u64).take(len.saturating_sub(offset)).map(Cow::Owned))
            }
        }
    }

    /// The logs that played the pair (contender, champion), each with its first match of
    /// it (in id order), for a stored list (`None` for a held one: its reader indexes the
    /// folds it holds).
    pub fn plays(&self, contender: &Name, champion: &Name) -> Option<Vec<(ValidatorKey, MatchId)>> {
        let Kept::Stored { snapshot, .. } = &self.0 else { return None };
        let mut pair = Vec::new();
        (contender.clone(), champion.clone()).write_sorted(&mut pair);
        let mut plays = snapshot.state_plays(&pair);
        plays.dedup_by_key(|(validator, _)| *validator);
        Some(plays)
    }

    /// The snapshot a stored list is read through (its combine's plays are there too).
    pub(super) fn snapshot(&self) -> Option<&Arc<ColdSnapshot>> {
        match &self.0 {
            Kept::Held(_) => None,
            Kept::Stored { snapshot, .. } => Some(snapshot),
        }
    }

    /// Whether a stored match failed to read back: anything drawn from this list since may
    /// be short of a match, and must not be published.
    pub fn faulted(&self) -> bool {
        match &self.0 {
            Kept::Held(_) => false,
            Kept::Stored { snapshot, .. } => snapshot.faulted(),
        }
    }
}

impl Serialize for NetworkMatches {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        let mut n = 0;
        for m in self.iter() {
            seq.serialize_element(&*m)?;
            n += 1;
        }
        if n != self.len() {
            return Err(S::Error::custom(format!("the match file gave {n} of the state's {} matches", self.len())));
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for NetworkMatches {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<NetworkMatch>::deserialize(deserializer).map(NetworkMatches::from)
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
