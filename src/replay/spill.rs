//! Moving a fold's matches and records into the replay's spill file (`spill_file`): what a
//! running validator does after each block, so that its memory stops growing with its
//! logs. The file's format is `spill_file`'s business; which of a fold's entries leave memory,
//! and when, is this module's.

use super::fold::ChainFold;
use super::record_lists::RecordList;
use super::spill_file::{Record, SpillFile, SpillFileError, SpillWriter};
use crate::bytes::{MatchId, ValidatorKey};

/// Moves every match `fold` holds in memory into the file, but the one its log started
/// last (the next match shares its names), and every listed record but the last of each
/// kind, when it holds more matches or records of a kind than the file's cache keeps
/// (`CacheSize`). Returns whether it spilled.
pub fn spill_if_due(cold: &SpillFile, fold: &mut ChainFold) -> Result<bool, SpillFileError> {
    let records =
        fold.commitments.held_in_memory().max(fold.skipped.held_in_memory()).max(fold.equivocations.held_in_memory());
    let cache = cold.cache();
    if fold.matches.held_in_memory() <= cache.matches_per_log && records <= cache.records_per_log {
        return Ok(false);
    }
    spill(cold, std::slice::from_mut(fold))?;
    Ok(true)
}

/// Moves the matches the folds hold in memory (but each log's last started) and their
/// listed records (but each log's last of each kind) into the file, in one transaction;
/// each fold then reads them from the new snapshot.
pub fn spill(cold: &SpillFile, folds: &mut [ChainFold]) -> Result<(), SpillFileError> {
    let (written, snapshot) = cold.write_spill(|writer| {
        let mut written: Vec<(Vec<MatchId>, [usize; 3])> = Vec::with_capacity(folds.len());
        for fold in folds.iter() {
            let records = [
                write_records(writer, &fold.validator, &fold.commitments)?,
                write_records(writer, &fold.validator, &fold.skipped)?,
                write_records(writer, &fold.validator, &fold.equivocations)?,
            ];
            let mut ids = Vec::new();
            for (id, m) in fold.matches.in_memory() {
                if Some(id) != fold.last_started {
                    writer.put_match(&fold.validator, &id, m)?;
                    ids.push(id);
                }
            }
            written.push((ids, records));
        }
        Ok(written)
    })?;
    for (fold, (ids, [commitments, skips, equivocations])) in folds.iter_mut().zip(written) {
        fold.matches.spilled(&ids, fold.validator, snapshot.clone());
        fold.commitments.spilled(commitments, fold.validator, snapshot.clone());
        fold.skipped.spilled(skips, fold.validator, snapshot.clone());
        fold.equivocations.spilled(equivocations, fold.validator, snapshot.clone());
    }
    Ok(())
}

/// Points every fold that has spilled matches at the newest snapshot. Only this file's
/// spills write a log's matches, each spill writing those of the folds it is given: a
/// fold's matches in the newest snapshot are those its own shows.
pub fn read_newest(cold: &SpillFile, folds: &mut [ChainFold]) {
    let Some(newest) = cold.newest() else { return };
    for fold in folds {
        fold.matches.read_from(&newest);
        fold.commitments.read_from(&newest);
        fold.skipped.read_from(&newest);
        fold.equivocations.read_from(&newest);
    }
}

/// Writes `list`'s records held in memory but its last; returns how many.
fn write_records<T: Record>(
    writer: &mut SpillWriter<'_>,
    validator: &ValidatorKey,
    list: &RecordList<T>,
) -> Result<usize, SpillFileError> {
    let mut count = 0;
    for (place, record) in list.to_spill() {
        writer.put_record(validator, place, record)?;
        count += 1;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Hash32;
    use crate::ledger::codec;
    use crate::replay::records::tests_support::played;
    use crate::replay::spill_file::*;
    use crate::replay::spill_layout::{place_key, BY_PLACE, STATE_LIST};
    use redb::ReadableDatabase;

    /// A fold of `n` matches whose ids do not follow their log order.
    fn fold_of(n: u64) -> ChainFold {
        let mut fold = ChainFold::new(ValidatorKey([7; 32]));
        for i in 0..n {
            let id = Hash32(*blake3::hash(&i.to_le_bytes()).as_bytes());
            fold.matches.insert(id, played(i));
            fold.last_started = Some(id);
        }
        fold
    }

    fn listed(fold: &ChainFold) -> (Vec<MatchId>, Vec<MatchId>) {
        let ids = fold.matches.ids().collect::<Result<_, _>>().unwrap();
        (ids, fold.matches.in_log_order().map(|read| read.unwrap().0).collect())
    }

    #[test]
    fn spilled_matches_read_back_as_the_same_table_in_both_orders_and_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SPILL_FILE), b"a file the last run left").unwrap();
        let cold = SpillFile::create(&dir.path().join(SPILL_FILE), CacheSize::VALIDATOR).unwrap();
        let plain = fold_of(100);
        let mut fold = plain.clone();
        assert!(spill_if_due(&cold, &mut fold).unwrap());
        assert_eq!(fold.matches.held_in_memory(), 1, "only the match started last stays");
        assert_eq!(fold.matches.len(), 100);
        assert_eq!(fold, plain);
        assert_eq!(listed(&fold), listed(&plain));
        let (ids, _) = listed(&plain);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for id in &ids {
            assert_eq!(fold.matches.get(id).unwrap(), plain.matches.get(id).unwrap());
        }
        assert!(!fold.matches.contains(&Hash32([9; 32])));
        let encoded = |f: &ChainFold| codec::encode(f, "fold", u64::MAX).unwrap();
        assert_eq!(encoded(&fold), encoded(&plain), "a snapshot of spilled folds has the same bytes");
        assert!(!fold.matches.faulted());
        drop(cold);
        assert!(!dir.path().join(SPILL_FILE).exists(), "the file goes with its process");
        assert_eq!(fold, plain, "tables made from it still read it");
    }

    #[test]
    fn a_spilled_match_that_changes_is_read_back_shadows_its_copy_and_is_spilled_again() {
        let dir = tempfile::tempdir().unwrap();
        let cold = SpillFile::create(&dir.path().join(SPILL_FILE), CacheSize::VALIDATOR).unwrap();
        let mut plain = fold_of(80);
        let mut fold = plain.clone();
        spill(&cold, std::slice::from_mut(&mut fold)).unwrap();
        let (ids, _) = listed(&plain);
        let before = fold.clone();
        let original = plain.matches.get(&ids[3]).unwrap().unwrap().n_transcripts;
        for table in [&mut fold, &mut plain] {
            table.matches.update(&ids[3]).unwrap().n_transcripts = 1_000;
        }
        assert_eq!(fold.matches.held_in_memory(), 2);
        assert_eq!(fold.matches.len(), 80, "the copy read back is not counted twice");
        assert_eq!(fold, plain);
        assert_eq!(fold.matches.get(&ids[3]).unwrap().unwrap().n_transcripts, 1_000);
        assert_ne!(before, fold, "the earlier table still sees the match as it was spilled");
        assert_eq!(before.matches.get(&ids[3]).unwrap().unwrap().n_transcripts, original);
        // A new match, then everything spilled again: counted once each.
        let new_id = Hash32([3; 32]);
        for table in [&mut fold, &mut plain] {
            table.matches.insert(new_id, played(500));
        }
        spill(&cold, std::slice::from_mut(&mut fold)).unwrap();
        assert_eq!(fold.matches.len(), 81);
        assert_eq!(fold.matches.held_in_memory(), 1);
        assert_eq!(fold, plain);
        assert_eq!(listed(&fold), listed(&plain));
        assert_ne!(before, fold);
    }

    #[test]
    fn a_stored_match_that_does_not_decode_is_an_error_to_its_reader_and_faults_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let cold = SpillFile::create(&dir.path().join(SPILL_FILE), CacheSize::VALIDATOR).unwrap();
        let mut fold = fold_of(70);
        spill(&cold, std::slice::from_mut(&mut fold)).unwrap();
        let (_, in_order) = listed(&fold);
        let m = fold.matches.get(&in_order[10]).unwrap().unwrap();
        let txn = cold.db.begin_write().unwrap();
        {
            let mut by_place = txn.open_table(BY_PLACE).unwrap();
            let mut damaged = in_order[10].0.to_vec();
            damaged.extend_from_slice(b"not a fold");
            let key = place_key(&fold.validator, m.started_height, m.started_event_idx);
            by_place.insert(&key[..], &damaged[..]).unwrap();
        }
        txn.commit().unwrap();
        assert!(!fold.matches.faulted(), "the fold's snapshot predates the damage");
        spill(&cold, std::slice::from_mut(&mut fold)).unwrap();
        let error = fold.matches.get(&in_order[10]).unwrap_err().to_string();
        assert!(error.contains(SPILL_FILE) && error.contains("a read failed"), "{error}");
        assert!(fold.matches.faulted(), "the fold's own check sees it too");
        // A walk hands over the matches before it, then the error, then ends.
        let walk: Vec<_> = fold.matches.in_log_order().collect();
        assert_eq!(walk.len(), 11);
        assert!(walk[..10].iter().all(Result::is_ok) && walk[10].is_err());
        assert!(fold.matches.iter().any(|read| read.is_err()));
        assert!(fold.matches.values().collect::<Result<Vec<_>, _>>().is_err());
        // The fold's own lookup answers "no such match" and leaves the fault to the replay.
        assert!(fold.matches.get_or_fault(&in_order[10]).is_none());
    }

    /// A combine over spilled matches gives the state a combine over matches in memory
    /// gives (an audit's cache holds them all); a damaged entry of its list faults the
    /// list, and a state holding it has no hash.
    #[test]
    fn a_combine_over_spilled_matches_is_the_combine_over_held_ones_and_a_damaged_entry_faults_it() {
        use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
        use crate::replay::combine::combine;
        use crate::replay::state_matches::NetworkMatches;
        let dir = tempfile::tempdir().unwrap();
        let cold = SpillFile::create(&dir.path().join(SPILL_FILE), CacheSize::VALIDATOR).unwrap();
        let audit = SpillFile::temporary(CacheSize::AUDIT).unwrap();
        let mut held_fold = fold_of(700);
        assert!(!spill_if_due(&audit, &mut held_fold).unwrap(), "an audit's cache holds them");
        let held = combine(&[held_fold], &DEFAULT_RATIO_PARAMS, &audit).unwrap();
        let mut fold = fold_of(700);
        assert!(spill_if_due(&cold, &mut fold).unwrap());
        assert_eq!(fold.matches.held_in_memory(), 1);
        let stored = combine(std::slice::from_ref(&fold), &DEFAULT_RATIO_PARAMS, &cold).unwrap();
        assert_eq!(stored.matches.len(), 700);
        assert_eq!(stored, held);
        assert_eq!(crate::replay::state_hash(&stored).unwrap(), crate::replay::state_hash(&held).unwrap());
        // The combine's scratch tables are not left in the file.
        let txn = cold.db.begin_read().unwrap();
        assert!(txn.list_tables().unwrap().all(|t| !redb::TableHandle::name(&t).starts_with("combine_")));

        let txn = cold.db.begin_write().unwrap();
        txn.open_table(STATE_LIST).unwrap().insert(300, &b"not a match"[..]).unwrap();
        txn.commit().unwrap();
        assert!(stored.matches.to_vec().is_ok(), "the state's snapshot predates the damage");
        let mut damaged = stored.clone();
        damaged.matches = NetworkMatches::stored(std::sync::Arc::new(cold.snapshot().unwrap()), 700, 1);
        assert!(held.matches.to_vec().is_ok(), "another file's list is whole");
        let walk: Vec<_> = damaged.matches.iter().collect();
        assert_eq!(walk.len(), 301, "300 matches, then the error");
        assert!(walk[300].is_err());
        assert!(damaged.matches.iter_from(301).next().is_some_and(|m| m.is_ok()), "a page past it reads");
        assert!(damaged.matches.faulted());
        assert!(crate::replay::state_hash(&damaged).is_err());
        assert_ne!(damaged, held);
    }
}

#[cfg(test)]
mod records {
    use super::*;
    use crate::bytes::Hash32;
    use crate::ledger::codec;
    use crate::ledger::event::{ChainCommitment, SkipReason};
    use crate::replay::records::SkipFold;
    use crate::replay::spill_file::*;

    fn skip(i: u64) -> SkipFold {
        SkipFold {
            height: i,
            hotkey: format!("5Sybil{i}"),
            uid: i as u16,
            model: "perfect".into(),
            revision: "r1".into(),
            commit_block: 10 * i,
            reason: SkipReason::Duplicate,
            kept_by: "5Kept".into(),
            kept_block: 1,
        }
    }

    fn record(i: u64) -> ChainCommitment {
        ChainCommitment {
            netuid: 7,
            chain_block: 100 + 12 * i,
            committed_height: 3 * i,
            committed_hash: Hash32([i as u8; 32]),
        }
    }

    fn equivocation(i: u64) -> crate::replay::records::EquivocationFound {
        crate::replay::records::EquivocationFound {
            accused: ValidatorKey([i as u8; 32]),
            height: i,
            hash_a: Hash32([1; 32]),
            hash_b: Hash32([2; 32]),
            recorded_at: (i, 0),
        }
    }

    #[test]
    fn listed_records_spill_alone_and_read_back_in_order_with_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let cold = SpillFile::create(&dir.path().join(SPILL_FILE), CacheSize::VALIDATOR).unwrap();
        let mut fold = ChainFold::new(ValidatorKey([9; 32]));
        // Another log's records in the same file, keyed apart.
        let mut other = ChainFold::new(ValidatorKey([8; 32]));
        let mut plain = fold.clone();
        for i in 0..600 {
            for f in [&mut fold, &mut plain, &mut other] {
                f.commitments.push(record(i));
                if i % 2 == 0 {
                    f.skipped.push(skip(i));
                }
                f.equivocations.push(equivocation(i));
            }
            // An idle validator's log: records and no matches, spilled all the same.
            spill_if_due(&cold, &mut fold).unwrap();
        }
        spill(&cold, std::slice::from_mut(&mut other)).unwrap();
        assert!(
            fold.commitments.held_in_memory() <= CacheSize::VALIDATOR.records_per_log,
            "{}",
            fold.commitments.held_in_memory()
        );
        assert!(fold.commitments.held_in_memory() < 600);
        spill(&cold, std::slice::from_mut(&mut fold)).unwrap();
        assert_eq!(fold.commitments.held_in_memory(), 1, "the last stays");
        assert_eq!((fold.skipped.held_in_memory(), fold.skipped.len()), (1, 300));
        assert!(fold.skipped.iter().map(Result::unwrap).eq((0..600).step_by(2).map(skip)));
        assert_eq!(fold.skipped.last().unwrap(), Some(skip(598)));
        assert_eq!((fold.equivocations.held_in_memory(), fold.equivocations.len()), (1, 600));
        assert!(fold.equivocations.iter().map(Result::unwrap).eq((0..600).map(equivocation)));
        assert_eq!(fold.commitments.len(), 600);
        assert_eq!(fold, plain);
        assert_eq!(fold.commitments.last().unwrap(), Some(record(599)));
        assert!(fold.commitments.iter().map(Result::unwrap).eq((0..600).map(record)));
        let found = fold.commitments.iter().map(Result::unwrap).find(|c| c.committed_height >= 1_000);
        assert_eq!(found, Some(record(334)));
        let encoded = |f: &ChainFold| codec::encode(f, "fold", u64::MAX).unwrap();
        assert_eq!(encoded(&fold), encoded(&plain), "a snapshot of spilled records has the same bytes");
        // More records after a spill follow the spilled ones.
        for f in [&mut fold, &mut plain] {
            f.commitments.push(record(600));
        }
        assert_eq!(fold, plain);
        assert!(!fold.commitments.faulted() && !fold.skipped.faulted() && !fold.equivocations.faulted());
    }
}

#[cfg(test)]
mod growth {
    use super::*;
    use crate::ledger::codec;
    use crate::replay::records::tests_support::played;
    use crate::replay::spill_file::*;

    /// A validator spills every few matches for weeks, each spill a commit with no
    /// fsync: the pages each commit frees must be reused, or the file would grow with
    /// the commits rather than with the matches.
    #[test]
    fn a_match_file_written_by_thousands_of_spills_stays_near_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SPILL_FILE);
        let cold = SpillFile::create(&path, CacheSize::VALIDATOR).unwrap();
        let mut fold = ChainFold::new(ValidatorKey([7; 32]));
        let mut held_back = None;
        for i in 0..3_000u64 {
            let id = crate::bytes::Hash32(*blake3::hash(&i.to_le_bytes()).as_bytes());
            fold.matches.insert(id, played(i));
            spill(&cold, std::slice::from_mut(&mut fold)).unwrap();
            // LatestReplay holds the last replay (and its snapshot) while the next spills.
            held_back = Some(fold.clone());
        }
        assert_eq!(fold.matches.len(), 3_000);
        assert_eq!(held_back.map(|f| f.matches.len()), Some(3_000));
        // Each match's encoding, its two keys and its place.
        let data: u64 = fold.matches.values().map(|m| codec::encoded_len(&*m.unwrap()) + 32 + 44 + 64 + 12).sum();
        let file = std::fs::metadata(&path).unwrap().len();
        assert!(file <= 3 * data + (1 << 20), "{file} bytes of file for {data} bytes of data");
    }
}

#[cfg(test)]
mod whole {
    use crate::evaluation::ratio::DEFAULT_RATIO_PARAMS;
    use crate::ledger::Store;
    use crate::replay::spill_file::{CacheSize, SpillFile, SPILL_FILE};
    use crate::replay::spill_layout::STATE_LIST;
    use crate::replay::state_matches::NetworkMatches;
    use crate::synthetic_logs::{write_network, NetworkSpec};

    /// A read of the replay's file that fails after the replay was made is an error to the
    /// reader that drew it: nothing drawn from it is published as whole.
    #[test]
    fn a_replay_whose_file_fails_a_read_publishes_no_page() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(&dir.path().join("ledger")).unwrap();
        write_network(&store, &NetworkSpec::small(2)).unwrap();
        let cold = SpillFile::create(&dir.path().join(SPILL_FILE), CacheSize::VALIDATOR).unwrap();
        let registry = crate::envs::registry();
        let mut replayed =
            crate::replay::replay_in(&cold, &store, &registry, None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}, None)
                .unwrap();
        let n = replayed.state.matches.len();
        assert!(n >= 1);
        let site = dir.path().join("site");
        let chain = crate::http::pages::FromChain::default();
        assert!(
            crate::http::publish::publish_pages(
                &replayed,
                &chain,
                &crate::http::archive::Site::open(site.to_str().unwrap()).unwrap()
            )
            .unwrap()
                > 0
        );

        // The state's first match damaged in the file, read through a fresh snapshot.
        let txn = cold.db.begin_write().unwrap();
        txn.open_table(STATE_LIST).unwrap().insert(0, &b"not a match"[..]).unwrap();
        txn.commit().unwrap();
        let combine = 1;
        replayed.state.matches = NetworkMatches::stored(std::sync::Arc::new(cold.snapshot().unwrap()), n, combine);
        let other_site = dir.path().join("other");
        let refused = crate::http::publish::publish_pages(
            &replayed,
            &chain,
            &crate::http::archive::Site::open(other_site.to_str().unwrap()).unwrap(),
        );
        let refused = refused.unwrap_err().to_string();
        assert!(refused.contains(SPILL_FILE) && refused.contains("no page was written short"), "{refused}");
        // The matches page reads every match: it is not written. (A page drawn before the
        // failed read, without the damaged match, is whole and may be.)
        assert!(!other_site.join("matches.html").exists());
        assert!(site.join("matches.html").exists());
    }
}
