//! A bag that hands back what was put in it in key order, in a scratch table of the
//! replay's file (`cold`). The combine groups
//! every log's matches by pair and orders the pairs through two of these, so a
//! validator's combine holds one pair at a time, not every pair of the network.

use super::cold::{ColdError, MAX_ENTRY_BYTES};
use super::model::Name;
use crate::bytes::Hash32;
use crate::ledger::codec;
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Entries a stored bag buffers before it writes them (one table opening per batch).
const BATCH: usize = 1024;

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

/// Entries by key in a scratch table of the replay's file, in a transaction that is
/// never committed with them (`cold::ColdStore::commit_combine` drops them); a key put
/// twice keeps its last value. Batches wait in memory; the table's pages are the file's
/// cache, so a one-shot audit's bag stays in memory and a validator's does not.
pub struct Bag<'t, K, V> {
    txn: &'t WriteTransaction,
    path: &'t std::path::Path,
    table: &'static str,
    batch: Vec<(Vec<u8>, Vec<u8>)>,
    _entries: std::marker::PhantomData<(K, V)>,
}

fn table(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

impl<'t, K: SortKey + Serialize + DeserializeOwned, V: Serialize + DeserializeOwned> Bag<'t, K, V> {
    /// An empty bag in the scratch table `name` of `txn`, on the file at `path`.
    pub fn new(txn: &'t WriteTransaction, path: &'t std::path::Path, name: &'static str) -> Bag<'t, K, V> {
        Bag { txn, path, table: name, batch: Vec::new(), _entries: std::marker::PhantomData }
    }

    pub fn put(&mut self, key: K, value: V) -> Result<(), ColdError> {
        let mut sorted = Vec::new();
        key.write_sorted(&mut sorted);
        let entry = codec::encode(&(key, value), "combine entry", MAX_ENTRY_BYTES).map_err(|e| fail(self.path, e))?;
        self.batch.push((sorted, entry));
        if self.batch.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ColdError> {
        let mut table = self.txn.open_table(table(self.table)).map_err(|e| fail(self.path, e))?;
        for (key, entry) in self.batch.drain(..) {
            table.insert(&key[..], &entry[..]).map_err(|e| fail(self.path, e))?;
        }
        Ok(())
    }

    /// Hands every entry to `each` in key order; stops at the first error.
    pub fn drain(mut self, each: &mut dyn FnMut(K, V) -> Result<(), ColdError>) -> Result<(), ColdError> {
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

fn fail(path: &std::path::Path, e: impl std::fmt::Display) -> ColdError {
    ColdError::Engine { path: path.display().to_string(), message: format!("combining: {e}") }
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
    fn a_bag_hands_back_what_a_btree_map_holds_in_the_same_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bag.redb");
        let db = redb::Database::create(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let mut stored: Bag<(Name, u64, Hash32), String> = Bag::new(&txn, &path, "t");
        let mut model = std::collections::BTreeMap::new();
        // More than a batch, with keys put twice.
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
        assert_eq!(from_stored, model.into_iter().collect::<Vec<_>>());
    }
}
