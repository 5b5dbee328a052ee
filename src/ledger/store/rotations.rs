//! A store's records of key rotations (ledger-spec/16): the rotation block each rotated
//! log ended with, and the predecessor each succeeding log's block 0 names. Stores made
//! before rotations existed have neither table, and read as holding none.

use super::*;
use crate::ledger::rotation::RotatedAt;

impl Store {
    /// The rotation block `validator`'s log ended with, if it rotated (ledger-spec/16).
    pub fn rotation(&self, validator: &ValidatorKey) -> Result<Option<RotatedAt>, StoreError> {
        let Some(bytes) = self.small_record(ROTATIONS, validator)? else { return Ok(None) };
        RotatedAt::decode(&bytes)
            .map(Some)
            .ok_or_else(|| StoreError::Corrupt(format!("the rotation record of {validator} is malformed")))
    }

    /// The key `validator`'s log continues, if its block 0 names one (ledger-spec/16).
    pub fn predecessor(&self, validator: &ValidatorKey) -> Result<Option<ValidatorKey>, StoreError> {
        let Some(bytes) = self.small_record(SUCCESSIONS, validator)? else { return Ok(None) };
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| StoreError::Corrupt(format!("the succession record of {validator} is malformed")))?;
        Ok(Some(ValidatorKey(key)))
    }

    /// The keys `validator`'s log continues, newest first, as far as this store holds
    /// their successors' first blocks (at most `max`).
    pub fn predecessors(&self, validator: &ValidatorKey, max: usize) -> Result<Vec<ValidatorKey>, StoreError> {
        let mut found = Vec::new();
        let mut at = *validator;
        while found.len() < max {
            match self.predecessor(&at)? {
                Some(previous) if previous != *validator && !found.contains(&previous) => {
                    found.push(previous);
                    at = previous;
                }
                _ => break,
            }
        }
        Ok(found)
    }

    /// `validator`'s value in a table keyed by validator that a store may not have yet.
    fn small_record(
        &self,
        table: redb::TableDefinition<&[u8], &[u8]>,
        validator: &ValidatorKey,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let txn = self.read()?;
        let table = match txn.open_table(table) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(engine("opening a table")(e.into())),
        };
        let value = table.get(validator.0.as_slice()).map_err(eng("reading a record"))?;
        Ok(value.map(|v| v.value().to_vec()))
    }
}
