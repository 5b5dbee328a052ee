//! A log's matches as its fold holds them, behind one interface so that where they are
//! kept is this module's business: in memory, or spilled to the replay's spill file
//! (`spill_file`) and read back one at a time. Readers get each match as an owned `Arc` and
//! walk them in id or log order without borrowing the table.

use super::records::MatchFold;
use super::spill_file::SpillFileError;
use super::spill_snapshot::{same_reads, until_failed, SpillSnapshot};
use crate::bytes::{MatchId, ValidatorKey};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use std::iter::Peekable;
use std::sync::Arc;

/// Match folds by id. Those in memory are shared with earlier replays' folds: a replay
/// that folds new blocks onto the last one copies only the matches it changes
/// (`Arc::make_mut`), not every match held. Encoded as the map of every match, in id
/// order, so snapshots keep their bytes wherever the matches are kept.
#[derive(Clone, Default)]
pub struct MatchTable {
    hot: BTreeMap<MatchId, Arc<MatchFold>>,
    cold: Option<Cold>,
}

/// A table as a kept file's fold heads hold it: the matches in memory, and how many of
/// the file's are the table's (those it shadows are in memory too).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct TableHead {
    hot: Vec<(MatchId, MatchFold)>,
    n: u64,
    shadowed: Vec<MatchId>,
}

/// The matches spilled to the spill file, as one snapshot of it holds them.
#[derive(Clone)]
struct Cold {
    snapshot: Arc<SpillSnapshot>,
    validator: ValidatorKey,
    /// How many matches of this log the snapshot holds.
    n: usize,
    /// Spilled matches read back into memory to be changed: the copy in memory is the one seen.
    shadowed: BTreeSet<MatchId>,
}

impl MatchTable {
    pub fn len(&self) -> usize {
        match &self.cold {
            None => self.hot.len(),
            Some(cold) => self.hot.len() + cold.n - cold.shadowed.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the table holds `id`. For the fold, which cannot stop on a failed read: one
    /// answers false and faults the snapshot, which the replay asks before it is handed out.
    pub(super) fn contains(&self, id: &MatchId) -> bool {
        match (self.hot.contains_key(id), &self.cold) {
            (true, _) => true,
            // The index answers without reading the fold back.
            (false, Some(cold)) => cold.snapshot.contains(&cold.validator, id).unwrap_or(false),
            (false, None) => false,
        }
    }

    /// The match `id`, if the table holds it. For the fold, like [`Self::contains`].
    pub(super) fn get_or_fault(&self, id: &MatchId) -> Option<Arc<MatchFold>> {
        self.get(id).ok().flatten()
    }

    pub fn get(&self, id: &MatchId) -> Result<Option<Arc<MatchFold>>, SpillFileError> {
        match (self.hot.get(id), &self.cold) {
            (Some(m), _) => Ok(Some(m.clone())),
            (None, Some(cold)) => Ok(cold.snapshot.get(&cold.validator, id)?.map(Arc::new)),
            (None, None) => Ok(None),
        }
    }

    /// The match to change, read back into memory if it was spilled, and copied first if
    /// an earlier replay still shares it. For the fold, like [`Self::contains`].
    pub fn update(&mut self, id: &MatchId) -> Option<&mut MatchFold> {
        if !self.hot.contains_key(id) {
            let cold = self.cold.as_mut()?;
            let m = cold.snapshot.get(&cold.validator, id).ok()??;
            cold.shadowed.insert(*id);
            self.hot.insert(*id, Arc::new(m));
        }
        self.hot.get_mut(id).map(Arc::make_mut)
    }

    /// Adds a match this table does not hold (callers ask [`Self::contains`] first).
    pub fn insert(&mut self, id: MatchId, fold: MatchFold) {
        if let Some(cold) = self.cold.as_mut().filter(|c| c.snapshot.contains(&c.validator, &id).unwrap_or(false)) {
            cold.shadowed.insert(id);
        }
        self.hot.insert(id, Arc::new(fold));
    }

    /// Every match, in id order; a failed read of the replay's file is the last item.
    pub fn iter(&self) -> impl Iterator<Item = Result<(MatchId, Arc<MatchFold>), SpillFileError>> + '_ {
        let hot = self.hot.iter().map(|(id, m)| Ok((*id, m.clone())));
        let cold = self.cold.iter().flat_map(|cold| {
            let unshadowed =
                cold.snapshot.ids(&cold.validator).filter(|id| !matches!(id, Ok(id) if cold.shadowed.contains(id)));
            unshadowed.map(|id| {
                let id = id?;
                match cold.snapshot.get(&cold.validator, &id)? {
                    Some(m) => Ok((id, Arc::new(m))),
                    None => Err(cold.snapshot.failed(format!("match {id} is listed but not stored"))),
                }
            })
        });
        let key = |item: &Read<(MatchId, _)>| item.as_ref().ok().map(|(id, _)| *id);
        until_failed(Merge { a: hot.peekable(), b: cold.peekable(), key })
    }

    pub fn values(&self) -> impl Iterator<Item = Result<Arc<MatchFold>, SpillFileError>> + '_ {
        self.iter().map(|item| item.map(|(_, m)| m))
    }

    /// Every match id, in id order.
    pub fn ids(&self) -> impl Iterator<Item = Result<MatchId, SpillFileError>> + '_ {
        let unshadowed = self.cold.iter().flat_map(|cold| {
            cold.snapshot.ids(&cold.validator).filter(|id| !matches!(id, Ok(id) if cold.shadowed.contains(id)))
        });
        let key = |id: &Read<MatchId>| id.as_ref().ok().copied();
        until_failed(Merge { a: self.hot.keys().map(|id| Ok(*id)).peekable(), b: unshadowed.peekable(), key })
    }

    /// Every match in the order its log started them (height, then event index).
    pub fn in_log_order(&self) -> impl Iterator<Item = Result<(MatchId, Arc<MatchFold>), SpillFileError>> + '_ {
        let mut hot: Vec<(MatchId, Arc<MatchFold>)> = self.hot.iter().map(|(id, m)| (*id, m.clone())).collect();
        hot.sort_unstable_by_key(|(_, m)| (m.started_height, m.started_event_idx));
        let cold = self.cold.iter().flat_map(|cold| {
            let stored = cold.snapshot.in_log_order(&cold.validator);
            let unshadowed = stored.filter(|item| !matches!(item, Ok((id, _)) if cold.shadowed.contains(id)));
            unshadowed.map(|item| item.map(|(id, m)| (id, Arc::new(m))))
        });
        let place = |item: &Read<(MatchId, Arc<MatchFold>)>| {
            item.as_ref().ok().map(|(_, m)| (m.started_height, m.started_event_idx))
        };
        until_failed(Merge { a: hot.into_iter().map(Ok).peekable(), b: cold.peekable(), key: place })
    }

    /// How many matches are held in memory.
    pub fn held_in_memory(&self) -> usize {
        self.hot.len()
    }

    /// The matches held in memory, in id order.
    pub(super) fn in_memory(&self) -> impl Iterator<Item = (MatchId, &Arc<MatchFold>)> + '_ {
        self.hot.iter().map(|(id, m)| (*id, m))
    }

    /// `ids` were written to the spill file, which `snapshot` now shows: they leave memory.
    pub(super) fn spilled(&mut self, ids: &[MatchId], validator: ValidatorKey, snapshot: Arc<SpillSnapshot>) {
        let (mut n, mut shadowed) = self.cold.take().map_or((0, BTreeSet::new()), |c| (c.n, c.shadowed));
        for id in ids {
            if self.hot.remove(id).is_some() && !shadowed.remove(id) {
                n += 1;
            }
        }
        self.cold = Some(Cold { snapshot, validator, n, shadowed });
    }

    /// Reads spilled matches from `snapshot`, which must show them as the one read now.
    pub(super) fn read_from(&mut self, snapshot: &Arc<SpillSnapshot>) {
        if let Some(cold) = self.cold.as_mut() {
            cold.snapshot = snapshot.clone();
        }
    }

    /// What of the table is not in the file, for a kept file's fold heads (`kept_file`).
    pub(super) fn head(&self) -> TableHead {
        let (n, shadowed) = self.cold.as_ref().map_or((0, Vec::new()), |c| (c.n, c.shadowed.iter().copied().collect()));
        TableHead { hot: self.hot.iter().map(|(id, m)| (*id, MatchFold::clone(m))).collect(), n: n as u64, shadowed }
    }

    /// The table `head` describes, its spilled matches those of `validator` in `snapshot`;
    /// `None` if the file does not hold exactly the matches the head counts, or the head
    /// shadows a match it does not hold.
    pub(super) fn from_head(
        head: TableHead,
        validator: ValidatorKey,
        snapshot: &Arc<SpillSnapshot>,
    ) -> Option<MatchTable> {
        let held: BTreeSet<MatchId> = head.hot.iter().map(|(id, _)| *id).collect();
        let consistent = head.shadowed.len() as u64 <= head.n
            && head.shadowed.iter().all(|id| held.contains(id))
            && snapshot.ids(&validator).try_fold(0u64, |n, id| id.map(|_| n + 1)).ok() == Some(head.n);
        if !consistent {
            return None;
        }
        let hot = head.hot.into_iter().map(|(id, m)| (id, Arc::new(m))).collect();
        let cold = (head.n > 0 || !head.shadowed.is_empty()).then(|| Cold {
            snapshot: snapshot.clone(),
            validator,
            n: head.n as usize,
            shadowed: head.shadowed.into_iter().collect(),
        });
        Some(MatchTable { hot, cold })
    }

    /// Whether a read of a spilled match failed: what the fold made from this table is incomplete.
    pub(super) fn faulted(&self) -> bool {
        self.cold.as_ref().is_some_and(|c| c.snapshot.faulted())
    }
}

/// A read of the replay's file.
type Read<T> = Result<T, SpillFileError>;

/// Two iterators, each in `key` order, merged; on equal keys `a`'s item is taken and
/// `b`'s dropped (`a` holds the copies in memory, which shadow spilled ones). A failed
/// read keys as `None`, first: it is handed on at once.
struct Merge<A: Iterator, B: Iterator<Item = A::Item>, F> {
    a: Peekable<A>,
    b: Peekable<B>,
    key: F,
}

impl<A, B, K, F> Iterator for Merge<A, B, F>
where
    A: Iterator,
    B: Iterator<Item = A::Item>,
    K: Ord,
    F: Fn(&A::Item) -> K,
{
    type Item = A::Item;

    fn next(&mut self) -> Option<A::Item> {
        let order = match (self.a.peek(), self.b.peek()) {
            (Some(a), Some(b)) => (self.key)(a).cmp(&(self.key)(b)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, _) => return self.b.next(),
        };
        match order {
            std::cmp::Ordering::Less => self.a.next(),
            std::cmp::Ordering::Greater => self.b.next(),
            std::cmp::Ordering::Equal => {
                self.b.next();
                self.a.next()
            }
        }
    }
}

impl PartialEq for MatchTable {
    /// Equal when both read back whole and hold the same matches.
    fn eq(&self, other: &MatchTable) -> bool {
        same_reads(self.iter(), other.iter())
    }
}

impl Eq for MatchTable {}

impl std::fmt::Debug for MatchTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut map = f.debug_map();
        for item in self.iter() {
            match item {
                Ok((id, m)) => map.entry(&id, &m),
                Err(e) => map.entry(&"unread", &e.to_string()),
            };
        }
        map.finish()
    }
}

impl Serialize for MatchTable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for item in self.iter() {
            let (id, m) = item.map_err(serde::ser::Error::custom)?;
            map.serialize_entry(&id, &*m)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for MatchTable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MatchTable, D::Error> {
        Ok(MatchTable { hot: BTreeMap::deserialize(deserializer)?, cold: None })
    }
}

impl FromIterator<(MatchId, MatchFold)> for MatchTable {
    fn from_iter<I: IntoIterator<Item = (MatchId, MatchFold)>>(items: I) -> MatchTable {
        MatchTable { hot: items.into_iter().map(|(id, m)| (id, Arc::new(m))).collect(), cold: None }
    }
}

impl FromIterator<(MatchId, Arc<MatchFold>)> for MatchTable {
    /// Shares the folds: a log cut back in time (`combine::vtrust_by_combines`) copies no match.
    fn from_iter<I: IntoIterator<Item = (MatchId, Arc<MatchFold>)>>(items: I) -> MatchTable {
        MatchTable { hot: items.into_iter().collect(), cold: None }
    }
}
