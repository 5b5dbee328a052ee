//! Where the sync protocol keeps validators' chains: a trait with the redb store as the
//! real implementation and an in-memory one (same checks, no disk) for the seeded
//! simulator, so the protocol is tested against the same rules it runs with.

use crate::bytes::{Hash32, ValidatorKey};
use crate::ledger::block::{check_link, SealedBlock, Tip};
use crate::ledger::store::{stored_header, Appended, BatchAppended, Store, StoreError};
use crate::ledger::BlockHeader;
use crate::ledger::SignatureBytes;
use std::collections::BTreeMap;
use std::sync::Mutex;

pub trait BlockStore {
    fn tip(&self, validator: &ValidatorKey) -> Result<Option<Tip>, StoreError>;
    fn tips(&self) -> Result<Vec<(ValidatorKey, Tip)>, StoreError>;
    fn block_bytes(&self, validator: &ValidatorKey, height: u64) -> Result<Option<Vec<u8>>, StoreError>;
    /// Appends a checked block: the next of its chain, a duplicate, or a `Conflict`.
    fn append(&self, sealed: &SealedBlock) -> Result<Appended, StoreError>;

    /// Appends consecutive blocks, in one durable write where the store can, stopping at
    /// the first refused as a `Conflict` or `Rejected` (see [`Store::append_batch`]).
    fn append_batch(&self, sealed: &[SealedBlock]) -> Result<BatchAppended, StoreError> {
        let mut appended = Vec::with_capacity(sealed.len());
        for (index, block) in sealed.iter().enumerate() {
            match self.append(block) {
                Ok(done) => appended.push(done),
                Err(error @ (StoreError::Conflict { .. } | StoreError::Rejected { .. })) => {
                    return Ok((appended, Some((index, error))))
                }
                Err(other) => return Err(other),
            }
        }
        Ok((appended, None))
    }

    /// Header and signature of a stored block (for tips and for evidence).
    fn signed_header(
        &self,
        validator: &ValidatorKey,
        height: u64,
    ) -> Result<Option<(BlockHeader, SignatureBytes)>, StoreError> {
        self.block_bytes(validator, height)?.map(|bytes| stored_header(&bytes)).transpose()
    }

    fn hash_at(&self, validator: &ValidatorKey, height: u64) -> Result<Option<Hash32>, StoreError> {
        Ok(self.signed_header(validator, height)?.map(|(header, _)| header.hash()))
    }
}

impl BlockStore for Store {
    fn tip(&self, validator: &ValidatorKey) -> Result<Option<Tip>, StoreError> {
        Store::tip(self, validator)
    }
    fn tips(&self) -> Result<Vec<(ValidatorKey, Tip)>, StoreError> {
        Store::tips(self)
    }
    fn block_bytes(&self, validator: &ValidatorKey, height: u64) -> Result<Option<Vec<u8>>, StoreError> {
        Store::block_bytes(self, validator, height)
    }
    fn append(&self, sealed: &SealedBlock) -> Result<Appended, StoreError> {
        Store::append(self, sealed)
    }

    fn append_batch(&self, sealed: &[SealedBlock]) -> Result<BatchAppended, StoreError> {
        Store::append_batch(self, sealed)
    }

    /// Read from the block's first piece alone: a tips round asks for headers often, and a
    /// block can be 32 MiB.
    fn signed_header(
        &self,
        validator: &ValidatorKey,
        height: u64,
    ) -> Result<Option<(BlockHeader, SignatureBytes)>, StoreError> {
        Ok(Store::signed_headers(self, validator, height, height)?.pop())
    }
}

/// One chain in memory: each block's tip record and bytes, by height.
type MemoryChain = Vec<(Tip, Vec<u8>)>;

/// Chains in memory, with the store's append rules.
#[derive(Default)]
pub struct MemoryStore {
    chains: Mutex<BTreeMap<ValidatorKey, MemoryChain>>,
}

impl BlockStore for MemoryStore {
    fn tip(&self, validator: &ValidatorKey) -> Result<Option<Tip>, StoreError> {
        Ok(self.chains.lock().expect("never poisoned").get(validator).and_then(|c| c.last()).map(|(tip, _)| *tip))
    }

    fn tips(&self) -> Result<Vec<(ValidatorKey, Tip)>, StoreError> {
        let chains = self.chains.lock().expect("never poisoned");
        Ok(chains.iter().filter_map(|(v, c)| c.last().map(|(tip, _)| (*v, *tip))).collect())
    }

    fn block_bytes(&self, validator: &ValidatorKey, height: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let chains = self.chains.lock().expect("never poisoned");
        Ok(chains.get(validator).and_then(|c| c.get(height as usize)).map(|(_, bytes)| bytes.clone()))
    }

    fn append(&self, sealed: &SealedBlock) -> Result<Appended, StoreError> {
        let header = &sealed.decoded().block.header;
        let validator = header.validator;
        let mut chains = self.chains.lock().expect("never poisoned");
        let chain = chains.entry(validator).or_default();
        if let Some((stored, _)) = chain.get(header.height as usize) {
            return if stored.hash == sealed.decoded().hash {
                Ok(Appended::AlreadyStored)
            } else {
                Err(StoreError::Conflict {
                    validator,
                    height: header.height,
                    stored: stored.hash,
                    offered: sealed.decoded().hash,
                })
            };
        }
        let rejected = |source| StoreError::Rejected { validator, height: header.height, source };
        // The log's rotation block is its last (ledger-spec/16): the tip's bytes say.
        let rotated = chain.last().and_then(|(_, bytes)| crate::ledger::block::decode_block(bytes).ok());
        if let Some(at) = rotated.as_ref().and_then(crate::ledger::rotation::rotated_by) {
            return Err(rejected(crate::ledger::rotation::past(&at, header.height)));
        }
        check_link(&validator, chain.last().map(|(tip, _)| tip), header).map_err(rejected)?;
        chain.push((sealed.tip(), sealed.bytes().to_vec()));
        Ok(Appended::New(sealed.tip()))
    }
}
