//! How blocks enter the store: an append checks the link to the stored tip, refuses a
//! block past its log's rotation (ledger-spec/16), stores the block in pieces, moves the
//! tip, records a rotation or a succession, and indexes the transcripts, all in one
//! durable write transaction; and the rebuild of both indexes from the blocks.

use super::*;
use crate::ledger::rotation::{self, RotatedAt, RotationRole};

impl Store {
    /// Appends a sealed (decoded, signed) block to its validator's chain, durably.
    /// The link to the stored tip is checked inside the write transaction.
    pub fn append(&self, sealed: &SealedBlock) -> Result<Appended, StoreError> {
        self.writable()?;
        let txn = self.db.begin_write().map_err(eng("starting an append"))?;
        let appended = Self::append_in(&txn, sealed)?;
        txn.commit().map_err(eng("committing an append"))?;
        Ok(appended)
    }

    /// Appends consecutive blocks in one durable transaction (one fsync for all: what
    /// makes catching up on a long log fast). Stops at the first block refused as a
    /// `Conflict` or `Rejected`, keeping those before it; returns what was appended and
    /// the refused block's index and error. Any other error aborts the whole batch.
    pub fn append_batch(&self, sealed: &[SealedBlock]) -> Result<BatchAppended, StoreError> {
        self.writable()?;
        let txn = self.db.begin_write().map_err(eng("starting an append"))?;
        let mut appended = Vec::with_capacity(sealed.len());
        let mut refused = None;
        for (index, block) in sealed.iter().enumerate() {
            match Self::append_in(&txn, block) {
                Ok(done) => appended.push(done),
                // Both are refused before anything is written: what came before stands.
                Err(error @ (StoreError::Conflict { .. } | StoreError::Rejected { .. })) => {
                    refused = Some((index, error));
                    break;
                }
                Err(other) => return Err(other),
            }
        }
        txn.commit().map_err(eng("committing an append"))?;
        Ok((appended, refused))
    }

    fn append_in(txn: &redb::WriteTransaction, sealed: &SealedBlock) -> Result<Appended, StoreError> {
        let block = &sealed.decoded.block;
        let header = &block.header;
        let validator = header.validator;
        let appended = {
            let mut tips = txn.open_table(TIPS).map_err(eng("opening tips"))?;
            let mut blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
            let tip = match tips.get(validator.0.as_slice()).map_err(eng("reading a tip"))? {
                Some(bytes) => Some(decode_tip(bytes.value())?),
                None => None,
            };
            let already_covered = tip.is_some_and(|tip| header.height <= tip.height);
            if already_covered {
                // At or below our tip: the same block again, or a second block at a
                // stored height (equivocation, if it is validly signed).
                // The header is in the first chunk.
                // A pruned block keeps its header, so it is compared the same way.
                let pruned = txn.open_table(PRUNED).map_err(eng("opening pruned blocks"))?;
                let stored_hash = match header_in(&blocks, Some(&pruned), &validator, header.height)? {
                    Some((stored, _)) => stored.hash(),
                    None => {
                        return Err(StoreError::Corrupt(format!(
                            "tip is past height {} but no block is stored there",
                            header.height
                        )))
                    }
                };
                if stored_hash == sealed.decoded.hash {
                    Appended::AlreadyStored
                } else {
                    return Err(StoreError::Conflict {
                        validator,
                        height: header.height,
                        stored: stored_hash,
                        offered: sealed.decoded.hash,
                    });
                }
            } else {
                let mut rotations = txn.open_table(ROTATIONS).map_err(eng("opening rotations"))?;
                let rejected = |source| StoreError::Rejected { validator, height: header.height, source };
                if let Some(bytes) = rotations.get(validator.0.as_slice()).map_err(eng("reading a rotation"))? {
                    let at = RotatedAt::decode(bytes.value()).ok_or_else(|| {
                        StoreError::Corrupt(format!("the rotation record of {validator} is malformed"))
                    })?;
                    return Err(rejected(rotation::past(&at, header.height)));
                }
                check_link(&validator, tip.as_ref(), header).map_err(rejected)?;
                insert_chunks(&mut blocks, &validator, header.height, &sealed.bytes)?;
                match rotation::role(&validator, header.height, &block.events) {
                    Ok(RotationRole::Rotated(_)) => {
                        let at = rotation::rotated_by(&sealed.decoded).expect("a rotation block");
                        let at = at.encode();
                        rotations.insert(validator.0.as_slice(), at.as_slice()).map_err(eng("writing a rotation"))?;
                    }
                    Ok(RotationRole::Succeeded(s)) => {
                        let mut successions = txn.open_table(SUCCESSIONS).map_err(eng("opening successions"))?;
                        let old = s.old_key.0;
                        successions
                            .insert(validator.0.as_slice(), old.as_slice())
                            .map_err(eng("writing a succession"))?;
                    }
                    _ => {}
                }
                let new_tip = sealed.tip();
                tips.insert(validator.0.as_slice(), encode_tip(&new_tip).as_slice()).map_err(eng("writing a tip"))?;
                let mut by_challenge = txn.open_multimap_table(BY_CHALLENGE).map_err(eng("opening an index"))?;
                let mut by_miner = txn.open_multimap_table(BY_MINER).map_err(eng("opening an index"))?;
                // In key order: consecutive inserts then land in the same B-tree pages.
                let mut entries: Vec<(&[u8; 32], &str, [u8; 44])> = block
                    .events
                    .iter()
                    .enumerate()
                    .filter_map(|(event_idx, event)| {
                        let (challenge_id, hotkey) = event.index_keys()?;
                        let location = Location { validator, height: header.height, event_idx: event_idx as u32 };
                        Some((&challenge_id.0, hotkey, location.encode()))
                    })
                    .collect();
                entries.sort_unstable_by(|a, b| (a.0, &a.2).cmp(&(b.0, &b.2)));
                for (challenge_id, _, location) in &entries {
                    by_challenge.insert(challenge_id.as_slice(), location.as_slice()).map_err(eng("indexing"))?;
                }
                entries.sort_unstable_by(|a, b| (a.1, &a.2).cmp(&(b.1, &b.2)));
                for (_, hotkey, location) in &entries {
                    by_miner.insert(*hotkey, location.as_slice()).map_err(eng("indexing"))?;
                }
                Appended::New(new_tip)
            }
        };
        Ok(appended)
    }

    /// Drops both indexes and rebuilds them from the stored blocks, in one durable
    /// transaction; returns the number of transcripts indexed. Callers verify first.
    pub fn rebuild_indexes(&self) -> Result<u64, StoreError> {
        self.writable()?;
        let validators = {
            let txn = self.read()?;
            validators_with_blocks(&txn)?
        };
        let txn = self.db.begin_write().map_err(eng("starting a reindex"))?;
        txn.delete_multimap_table(BY_CHALLENGE).map_err(eng("dropping an index"))?;
        txn.delete_multimap_table(BY_MINER).map_err(eng("dropping an index"))?;
        let mut n_entries = 0u64;
        {
            let blocks = txn.open_table(BLOCKS).map_err(eng("opening blocks"))?;
            let mut by_challenge = txn.open_multimap_table(BY_CHALLENGE).map_err(eng("opening an index"))?;
            let mut by_miner = txn.open_multimap_table(BY_MINER).map_err(eng("opening an index"))?;
            for validator in validators {
                let mut failed = None;
                for_each_block(&blocks, &validator, 0, None, &mut |height, bytes| {
                    let indexed = (|| {
                        let (_, events) = crate::ledger::block::decode_block_borrowed(bytes)
                            .map_err(|source| StoreError::Rejected { validator, height, source })?;
                        for (event_idx, event) in events.iter().enumerate() {
                            if let Some((challenge_id, hotkey)) = event.index_keys() {
                                let location = Location { validator, height, event_idx: event_idx as u32 }.encode();
                                by_challenge
                                    .insert(challenge_id.0.as_slice(), location.as_slice())
                                    .map_err(eng("indexing"))?;
                                by_miner.insert(hotkey, location.as_slice()).map_err(eng("indexing"))?;
                                n_entries += 1;
                            }
                        }
                        Ok(())
                    })();
                    failed = indexed.err();
                    failed.is_none()
                })?;
                if let Some(error) = failed {
                    return Err(error);
                }
            }
        }
        txn.commit().map_err(eng("committing a reindex"))?;
        Ok(n_entries)
    }
}
