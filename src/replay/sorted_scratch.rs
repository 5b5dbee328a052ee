//! A bag that hands back what was put in it in key order, in a scratch table of the
//! replay's file (`spill_file`). The combine groups
//! every log's matches by pair and orders the pairs through two of these, so a
//! validator's combine holds one pair at a time, not every pair of the network.

use super::records::Name;
use super::spill_file::{SpillFile, SpillFileError};
use super::spill_layout::MAX_ENTRY_BYTES;
use crate::bytes::Hash32;
use crate::ledger::codec;
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;

/// A key whose bytes sort as the key does (`Ord`): the same order in memory and on disk.
pub trait SortKey: Ord {
    fn write_sorted(&self, out: &mut Vec<u8>);
}

impl SortKey for u64 {
    fn write_sorted(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_be_bytes());
    }
}

impl SortKey for Hash32 {
    fn write_sorted(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
}

impl SortKey for crate::bytes::ValidatorKey {
    fn write_sorted(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
}

impl SortKey for Name {
    /// Each 0 byte doubled as 0 255, then 0 0: a prefix sorts first and no name's bytes
    /// run into the next field's, whatever bytes a log's names hold.
    fn write_sorted(&self, out: &mut Vec<u8>) {
        for &byte in self.as_bytes() {
            out.push(byte);
            if byte == 0 {
                out.push(u8::MAX);
            }
        }
        out.extend_from_slice(&[0, 0]);
    }
}

impl<A: SortKey, B: SortKey> SortKey for (A, B) {
    fn write_sorted(&self, out: &mut Vec<u8>) {
        self.0.write_sorted(out);
        self.1.write_sorted(out);
    }
}

impl<A: SortKey, B: SortKey, C: SortKey> SortKey for (A, B, C) {
    fn write_sorted(&self, out: &mut Vec<u8>) {
        self.0.write_sorted(out);
        self.1.write_sorted(out);
        self.2.write_sorted(out);
    }
}

impl<A: SortKey, B: SortKey, C: SortKey, D: SortKey> SortKey for (A, B, C, D) {
    fn write_sorted(&self, out: &mut Vec<u8>) {
        self.0.write_sorted(out);
        self.1.write_sorted(out);
        self.2.write_sorted(out);
        self.3.write_sorted(out);
    }
}

/// Entries by key, in memory up to a count, then in a table of the replay's file, in a
/// transaction the combine commits; a key put twice keeps its last value. A scratch bag
/// (`Bag::scratch`) is dropped with its table at the commit (`spill_file::SpillFile::commit_combine`)
/// and, while it fits in memory, never touches the file; a kept one (`Bag::kept`) is in
/// its table once drained, for the readers of the snapshot. The count is the file's
/// `CacheSize::combine_entries`: an audit's bags stay in memory, a validator's do not.
pub struct Bag<'t, K, V> {
    txn: &'t WriteTransaction,
    path: &'t std::path::Path,
    table: &'static str,
    kept: bool,
    hold: usize,
    held: BTreeMap<K, V>,
    /// Whether any entry went to the table: then the table is what is drained.
    spilled: bool,
}

fn table(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

impl<'t, K: SortKey + Serialize + DeserializeOwned, V: Serialize + DeserializeOwned> Bag<'t, K, V> {
    /// An empty bag in the scratch table `name` of `txn`, on `spill_file`'s file.
    pub fn scratch(txn: &'t WriteTransaction, cold: &'t SpillFile, name: &'static str) -> Bag<'t, K, V> {
        Bag::new(txn, cold.path(), name, cold.cache().combine_entries, false)
    }

    /// An empty bag whose entries are in table `name` of `txn` once drained.
    pub fn kept(txn: &'t WriteTransaction, cold: &'t SpillFile, name: &'static str) -> Bag<'t, K, V> {
        Bag::new(txn, cold.path(), name, cold.cache().combine_entries, true)
    }

    fn new(txn: &'t WriteTransaction, path: &'t std::path::Path, table: &'static str, hold: usize, kept: bool) -> Self {
        Bag { txn, path, table, kept, hold: hold.max(1), held: BTreeMap::new(), spilled: false }
    }

    pub fn put(&mut self, key: K, value: V) -> Result<(), SpillFileError> {
        self.held.insert(key, value);
        if self.held.len() >= self.hold {
            self.spilled = true;
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SpillFileError> {
        let mut table = self.txn.open_table(table(self.table)).map_err(|e| fail(self.path, e))?;
        let mut sorted = Vec::new();
        for (key, value) in std::mem::take(&mut self.held) {
            sorted.clear();
            key.write_sorted(&mut sorted);
            let entry =
                codec::encode(&(key, value), "combine entry", MAX_ENTRY_BYTES).map_err(|e| fail(self.path, e))?;
            table.insert(&sorted[..], &entry[..]).map_err(|e| fail(self.path, e))?;
        }
        Ok(())
    }

    /// Hands every entry to `each` in key order; stops at the first error.
    pub fn drain(mut self, each: &mut dyn FnMut(K, V) -> Result<(), SpillFileError>) -> Result<(), SpillFileError> {
        if !self.spilled {
            if self.kept {
                // Written in key order, the B-tree's cheapest; then handed on from memory.
                let mut table = self.txn.open_table(table(self.table)).map_err(|e| fail(self.path, e))?;
                let mut sorted = Vec::new();
                for (key, value) in &self.held {
                    sorted.clear();
                    key.write_sorted(&mut sorted);
                    let entry = codec::encode(&(key, value), "combine entry", MAX_ENTRY_BYTES)
                        .map_err(|e| fail(self.path, e))?;
                    table.insert(&sorted[..], &entry[..]).map_err(|e| fail(self.path, e))?;
                }
            }
            for (key, value) in std::mem::take(&mut self.held) {
                each(key, value)?;
            }
            return Ok(());
        }
        self.flush()?;
        let table = self.txn.open_table(table(self.table)).map_err(|e| fail(self.path, e))?;
        for entry in table.iter().map_err(|e| fail(self.path, e))? {
            let (_, entry) = entry.map_err(|e| fail(self.path, e))?;
            let (k, v) = codec::decode_canonical(entry.value(), "combine entry", MAX_ENTRY_BYTES)
                .map_err(|e| fail(self.path, e))?;
            each(k, v)?;
        }
        Ok(())
    }
}

fn fail(path: &std::path::Path, e: impl std::fmt::Display) -> SpillFileError {
    SpillFileError::Engine { path: path.display().to_string(), message: format!("combining: {e}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted<K: SortKey>(key: &K) -> Vec<u8> {
        let mut out = Vec::new();
        key.write_sorted(&mut out);
        out
    }

    #[test]
    fn name_bytes_sort_as_the_names_do_whatever_bytes_they_hold() {
        let names = ["", "\0", "\0\0", "\0a", "a", "a\0", "a\0b", "ab", "b", "\u{ff}", "é"];
        for a in names {
            for b in names {
                for c in names {
                    let (x, y): ((Name, Name, u64), (Name, Name, u64)) =
                        ((a.into(), b.into(), 1), (b.into(), c.into(), 0));
                    assert_eq!(sorted(&x).cmp(&sorted(&y)), x.cmp(&y), "{x:?} {y:?}");
                }
            }
        }
    }

    #[test]
    fn a_bag_hands_back_what_a_btree_map_holds_in_the_same_order_held_or_spilled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bag.redb");
        let db = redb::Database::create(&path).unwrap();
        // Spilled at once, spilled part way, never spilled; scratch and kept.
        for (hold, kept) in [(1, false), (700, true), (700, false), (10_000, true), (10_000, false)] {
            let txn = db.begin_write().unwrap();
            let mut stored: Bag<(Name, u64, Hash32), String> = Bag::new(&txn, &path, "t", hold, kept);
            let mut model = std::collections::BTreeMap::new();
            // More than a batch, with keys put twice, some across a spill.
            for i in 0..3_000u64 {
                let j = i % 1_500;
                let key = (Name::from(format!("n{}\0{}", j % 7, j % 3)), j % 500, Hash32([(j % 11) as u8; 32]));
                stored.put(key.clone(), format!("v{i}")).unwrap();
                model.insert(key, format!("v{i}"));
            }
            let mut from_stored = Vec::new();
            stored
                .drain(&mut |k, v| {
                    from_stored.push((k, v));
                    Ok(())
                })
                .unwrap();
            assert_eq!(model.len(), 1_500);
            let expected: Vec<_> = model.into_iter().collect();
            assert_eq!(from_stored, expected, "hold {hold}");
            // A kept bag's table holds every entry once drained; a scratch one's holds
            // what it spilled, or nothing if it never did.
            let table = txn.open_table(table("t")).unwrap();
            let in_table = redb::ReadableTableMetadata::len(&table).unwrap();
            match (kept, hold > 3_000) {
                (true, _) | (false, false) => assert_eq!(in_table, 1_500, "hold {hold} kept {kept}"),
                (false, true) => assert_eq!(in_table, 0, "hold {hold}"),
            }
            drop(table);
            txn.abort().unwrap();
        }
    }
}
