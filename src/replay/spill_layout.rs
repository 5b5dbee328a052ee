//! The spill file's layout: its tables and how their keys are made, the bounds on what
//! they hold, and the file's error, shared by the writer (`spill_file`) and the reader
//! (`spill_snapshot`) so that neither imports the other's half.

use crate::bytes::{MatchId, ValidatorKey};
use redb::TableDefinition;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// (validator, match id) -> the match's place in its log: started height (big-endian),
/// then event index. Keys sort as the ids do, so a scan walks a log's matches in id order.
pub(super) const BY_ID: TableDefinition<&[u8], &[u8]> = TableDefinition::new("match_place_by_id");
/// (validator, started height, event index) -> match id, then the fold's encoding.
pub(super) const BY_PLACE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("match_by_place");
/// The network state's matches, in the state's order, as the last combine wrote them
/// (each combine replaces the list; replays still held read theirs through their snapshot).
pub(super) const STATE_LIST: TableDefinition<u64, &[u8]> = TableDefinition::new("network_matches");
/// The last combine's plays by pair (`combine::PlayKey` as `sorted_scratch::SortKey` bytes -> the
/// play): which logs played each of the state's matches, for the pages.
pub(super) const STATE_PLAYS: &str = "state_plays";
/// Largest entry a combine's bag writes or reads back (a match's votes, one per validator).
pub(super) const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;
/// Each kind of listed record (`record_lists::RECORD_TABLES`): (validator, place in the log's
/// list, big-endian) -> the record.
pub(super) fn list_table(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

/// A kind of record a log lists, kept in its own table of the file (`record_lists::RecordList`).
pub trait Record: Clone + PartialEq + std::fmt::Debug + Serialize + DeserializeOwned + 'static {
    /// Its place in [`RECORD_TABLES`].
    const SLOT: usize;
    /// The table's name in the file.
    const TABLE: &'static str = RECORD_TABLES[Self::SLOT];
}

/// Every kind of listed record's table, by slot: commitments, skips, equivocations.
pub const RECORD_TABLES: [&str; 3] = ["commitments", "skips", "equivocations"];

/// Largest encoded match fold read back (a fold's own writes, bounded the same way).
pub(super) const MAX_FOLD_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SpillFileError {
    #[error("the replay's file {path}: {message}")]
    Engine { path: String, message: String },
    /// A kept file that fails its checks on open (`SpillFile::open_kept`): one to make
    /// afresh, unlike one another process holds.
    #[error("the replay's file {path} is damaged: {message}")]
    Damaged { path: String, message: String },
}

pub(super) fn id_key(validator: &ValidatorKey, id: &MatchId) -> [u8; 64] {
    let mut key = [0; 64];
    key[..32].copy_from_slice(&validator.0);
    key[32..].copy_from_slice(&id.0);
    key
}

pub(super) fn place_key(validator: &ValidatorKey, height: u64, event_idx: u32) -> [u8; 44] {
    let mut key = [0; 44];
    key[..32].copy_from_slice(&validator.0);
    key[32..40].copy_from_slice(&height.to_be_bytes());
    key[40..].copy_from_slice(&event_idx.to_be_bytes());
    key
}

pub(super) fn index_key(validator: &ValidatorKey, index: u64) -> [u8; 40] {
    let mut key = [0; 40];
    key[..32].copy_from_slice(&validator.0);
    key[32..].copy_from_slice(&index.to_be_bytes());
    key
}

/// Every key of `validator` in a table keyed by validator first.
pub(super) fn of_validator(validator: &ValidatorKey) -> ([u8; 32], Option<[u8; 32]>) {
    let mut next = validator.0;
    // The next validator key up, if any: the end of this one's range.
    for byte in next.iter_mut().rev() {
        if *byte == u8::MAX {
            *byte = 0;
        } else {
            *byte += 1;
            return (validator.0, Some(next));
        }
    }
    (validator.0, None)
}
