//! A log's matches as its fold holds them, behind one interface so that where they are
//! kept is this module's business: readers get each match as an owned `Arc` and walk
//! them in id or log order without borrowing the table, which is what lets settled
//! matches live somewhere other than the heap (ARCHITECTURE's "Memory").

use super::fold::MatchFold;
use crate::bytes::MatchId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Match folds by id. Shared with earlier replays' folds: a replay that folds new blocks
/// onto the last one copies only the matches it changes (`Arc::make_mut`), not every
/// match held. Encoded as the map it is, so snapshots keep their bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MatchTable {
    held: BTreeMap<MatchId, Arc<MatchFold>>,
}

impl MatchTable {
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub fn contains(&self, id: &MatchId) -> bool {
        self.held.contains_key(id)
    }

    pub fn get(&self, id: &MatchId) -> Option<Arc<MatchFold>> {
        self.held.get(id).cloned()
    }

    /// The match to change, copied first if an earlier replay still shares it.
    pub fn update(&mut self, id: &MatchId) -> Option<&mut MatchFold> {
        self.held.get_mut(id).map(Arc::make_mut)
    }

    pub fn insert(&mut self, id: MatchId, fold: MatchFold) {
        self.held.insert(id, Arc::new(fold));
    }

    /// Every match, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (MatchId, Arc<MatchFold>)> + '_ {
        self.held.iter().map(|(id, m)| (*id, m.clone()))
    }

    pub fn values(&self) -> impl Iterator<Item = Arc<MatchFold>> + '_ {
        self.held.values().cloned()
    }

    pub fn ids(&self) -> impl Iterator<Item = MatchId> + '_ {
        self.held.keys().copied()
    }

    /// Every match in the order its log started them (height, then event index).
    pub fn in_log_order(&self) -> impl Iterator<Item = (MatchId, Arc<MatchFold>)> + '_ {
        let mut order: Vec<(u64, u32, MatchId)> =
            self.held.iter().map(|(id, m)| (m.started_height, m.started_event_idx, *id)).collect();
        order.sort_unstable();
        order.into_iter().filter_map(|(_, _, id)| self.held.get(&id).map(|m| (id, m.clone())))
    }

    /// The matches `keep` accepts, shared with this table.
    pub fn filtered(&self, keep: impl Fn(&MatchFold) -> bool) -> MatchTable {
        MatchTable { held: self.held.iter().filter(|(_, m)| keep(m)).map(|(id, m)| (*id, m.clone())).collect() }
    }
}

impl FromIterator<(MatchId, MatchFold)> for MatchTable {
    fn from_iter<I: IntoIterator<Item = (MatchId, MatchFold)>>(items: I) -> MatchTable {
        MatchTable { held: items.into_iter().map(|(id, m)| (id, Arc::new(m))).collect() }
    }
}
