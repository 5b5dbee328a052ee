//! A champion leaving the crown without a match (ledger-spec/13, "The champion's life";
//! 14, "The champion walk"): each validator's `ChampionLeft` records are its word that
//! the champion of the moment left (deregistered, or committing another model); the
//! champion has left once validators holding more than half of the vTrust said so during
//! its tenure, dated by the first of their records. Pure: the combine hands in each log's records and each voter's vTrust.

use super::records::Name;
use crate::bytes::ValidatorKey;
use crate::ledger::event::LeaveReason;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One `ChampionLeft` of a log, as its fold keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftRecord {
    pub hotkey: Name,
    pub reason: LeaveReason,
    pub chain_block: u64,
    /// The time of the block that holds it: where it falls among the network's matches.
    pub time_ms: u64,
    pub height: u64,
}

/// Most `ChampionLeft` records one fold keeps (a log names what it likes; past this many
/// they are not counted: no honest log needs one per champion it never defended).
pub const MAX_LEFT_RECORDS: usize = 4_096;

/// Every validator's records, by the champion's hotkey: (time, voter) in time order.
#[derive(Debug, Default)]
pub struct Departures {
    by_hotkey: BTreeMap<Name, Vec<(u64, ValidatorKey)>>,
}

impl Departures {
    /// From each log's records and the validator (its first key: an identity, 16) it is.
    pub fn of<'a>(logs: impl IntoIterator<Item = (ValidatorKey, &'a [LeftRecord])>) -> Departures {
        let mut by_hotkey: BTreeMap<Name, Vec<(u64, ValidatorKey)>> = BTreeMap::new();
        for (voter, records) in logs {
            for record in records {
                by_hotkey.entry(record.hotkey.clone()).or_default().push((record.time_ms, voter));
            }
        }
        for records in by_hotkey.values_mut() {
            records.sort();
        }
        Departures { by_hotkey }
    }

    /// When the champion `hotkey`, champion since `since_ms`, left: if validators holding
    /// more than half of `total` vTrust recorded its leaving since then (each counted
    /// once), the time of the first such record by a trusted validator; else `None`. The
    /// first validator to see it leave records it and plays on with the successor at
    /// once, before the others have read the chain: the leaving dates from that record.
    pub fn left_at(
        &self,
        hotkey: &str,
        since_ms: u64,
        vtrust: &dyn Fn(&ValidatorKey) -> u32,
        total: u64,
    ) -> Option<u64> {
        let records = self.by_hotkey.get(hotkey)?;
        let mut counted: BTreeSet<ValidatorKey> = BTreeSet::new();
        let (mut said, mut first) = (0u64, None);
        for (time_ms, voter) in records.iter().filter(|(t, v)| *t >= since_ms && vtrust(v) > 0) {
            if !counted.insert(*voter) {
                continue;
            }
            first.get_or_insert(*time_ms);
            said += u64::from(vtrust(voter));
        }
        first.filter(|_| said * 2 > total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(hotkey: &str, time_ms: u64) -> LeftRecord {
        LeftRecord { hotkey: hotkey.into(), reason: LeaveReason::Deregistered, chain_block: 1, time_ms, height: 0 }
    }

    #[test]
    fn a_champion_leaves_when_more_than_half_the_trust_says_so_within_its_tenure() {
        let (a, b, c) = (ValidatorKey([1; 32]), ValidatorKey([2; 32]), ValidatorKey([3; 32]));
        let logs =
            [(a, vec![record("5C", 100), record("5C", 50)]), (b, vec![record("5C", 300)]), (c, vec![record("5D", 10)])];
        let departures = Departures::of(logs.iter().map(|(k, r)| (*k, r.as_slice())));
        let full = |_: &ValidatorKey| 1_000_000;
        // Three validators of full trust: a alone is a third, a and b two thirds.
        assert_eq!(departures.left_at("5C", 0, &full, 3_000_000), Some(50), "dated by the first record");
        assert_eq!(departures.left_at("5C", 0, &full, 4_000_000), None, "half is not more than half");
        assert_eq!(departures.left_at("5C", 200, &full, 3_000_000), None, "a's records predate the tenure");
        assert_eq!(departures.left_at("5C", 100, &full, 3_000_000), Some(100));
        let zero_b = |k: &ValidatorKey| if *k == b { 0 } else { 1_000_000 };
        assert_eq!(departures.left_at("5C", 0, &zero_b, 2_000_000), None, "an untrusted word counts nothing");
        assert_eq!(departures.left_at("5C", 0, &full, 1_000_000), Some(50), "a's first record, once");
        assert_eq!(departures.left_at("5X", 0, &full, 1), None);
    }
}
