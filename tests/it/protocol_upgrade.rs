//! ledger-spec/15 across an activation block, in one process: the same logs replayed by a
//! build that knows the new version and by one capped below it (an older build). Before
//! activation they agree; after it the older build waits at each log's first block of the
//! new version, blames no one and moves no vTrust; a kind used before its version is an
//! invalid block; a kind past every version the build decodes is waited on, not judged.

use af::envs;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::block::seal;
use af::ledger::event::{FoldCheckpoint, FoldPoint};
use af::ledger::{Event, Store};
use af::protocol::Protocol;
use af::replay::synth::{validator_key, write_network, NetworkSpec};
use af::replay::{self, Replay};

fn replay_by(dir: &std::path::Path, protocol: Protocol) -> Replay {
    let store = Store::open_read_only(dir).unwrap();
    let registry = envs::registry().with_protocol(protocol);
    replay::replay(&store, &registry, None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap()
}

/// The small network on envs of both versions of the upgrade-test table (its version 1
/// has no `coin`): match 1 starts at synthetic chain block 1,000, match 2 at 1,001.
fn network() -> (tempfile::TempDir, Vec<af::bytes::ValidatorKey>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    let spec = NetworkSpec { envs: vec!["mult".into(), "sat".into()], ..NetworkSpec::small(3) };
    let keys = write_network(&store, &spec).unwrap();
    (dir, keys)
}

#[test]
fn an_older_build_waits_at_the_new_version_and_blames_no_one() {
    let (dir, _) = network();
    // Before activation (it comes after every block here): one state for both builds.
    let later = Protocol::upgrade_test(5_000);
    let (new, old) = (replay_by(dir.path(), later.clone()), replay_by(dir.path(), later.capped(1)));
    assert_eq!(new.state_hash, old.state_hash);
    assert!(new.state.discrepancies.is_empty(), "{:?}", new.state.discrepancies);

    // Activation at match 2's start block.
    let table = Protocol::upgrade_test(1_001);
    let new = replay_by(dir.path(), table.clone());
    let old = replay_by(dir.path(), table.capped(1));
    assert!(new.state.discrepancies.is_empty(), "{:?}", new.state.discrepancies);
    assert_eq!(new.state.matches.len(), 2);
    assert!(old.state.discrepancies.is_empty(), "the older build blames no one: {:?}", old.state.discrepancies);
    for (fold, summary) in old.folds.iter().zip(&old.state.validators) {
        let (height, version) = fold.awaiting_upgrade.expect("every log reached version 2");
        assert_eq!(version, 2);
        // The block where it waits holds match 2's start: every block before it folded.
        let m2 = new.folds.iter().find(|f| f.validator == fold.validator).unwrap();
        let started = m2.matches.iter().map(|(_, m)| (m.chain_block, m.started_height)).max().unwrap();
        assert_eq!((started.0, started.1), (1_001, height));
        assert_eq!(fold.tip.map(|t| t.height + 1), Some(height));
        assert!(fold.invalid_at.is_none());
        assert_eq!(summary.vtrust_ppm, 1_000_000);
    }
    assert!(new.state.validators.iter().all(|v| v.vtrust_ppm == 1_000_000));
    // The older build's state stops before match 2, in the block that also holds match
    // 1's decision: match 1 has no vote there, the incumbent stays, and the hash differs
    // (it names shorter logs). The newer build crowned match 1's contender.
    assert_eq!(old.state.matches.len(), 1);
    assert_eq!(old.state.matches.iter().next().unwrap().verdict, None);
    assert_eq!(old.state.champion.as_ref().map(|c| &*c.hotkey), Some("5SynthNoisy"));
    assert_eq!(new.state.champion.as_ref().map(|c| &*c.hotkey), Some("5SynthPerfect"));
    assert_ne!(old.state_hash, new.state_hash);
}

#[test]
fn a_kind_before_its_version_is_an_invalid_block_and_after_it_a_valid_one() {
    let (dir, keys) = network();
    let store = Store::open(dir.path()).unwrap();
    let key = validator_key(0);
    let tip = store.tip(&keys[0]).unwrap().unwrap();
    let point = FoldPoint { validator: keys[1], height: 0, block_hash: tip.hash, fold_hash: tip.hash };
    let checkpoint = Event::FoldCheckpoint(FoldCheckpoint { fold_version: 1, points: vec![point] });
    let sealed = seal(key.signing_key(), Some(&tip), tip.time_ms + 1, vec![checkpoint]).unwrap();
    store.append(&sealed).unwrap();
    drop(store);
    // Version 2 (FoldCheckpoint's) activates after every chain block this log recorded.
    let before = replay_by(dir.path(), Protocol::upgrade_test(5_000));
    let fold = before.folds.iter().find(|f| f.validator == keys[0]).unwrap();
    assert_eq!(fold.invalid_at, Some(tip.height + 1));
    let finding = before.state.discrepancies.iter().find(|d| d.validator == keys[0]).unwrap();
    assert!(finding.detail.contains("event tag 10 is not a kind of protocol version 1"), "{}", finding.detail);
    assert_eq!(before.state.validators.iter().find(|v| v.validator == keys[0]).unwrap().vtrust_ppm, 0);
    // Active from the start: the same block is valid.
    let after = replay_by(dir.path(), Protocol::network());
    assert!(after.folds.iter().all(|f| f.invalid_at.is_none()));
    assert!(after.state.discrepancies.is_empty(), "{:?}", after.state.discrepancies);
}

#[test]
fn a_kind_no_version_of_this_build_has_is_waited_on_not_judged() {
    let (dir, keys) = network();
    let store = Store::open(dir.path()).unwrap();
    let tip = store.tip(&keys[2]).unwrap().unwrap();
    let block = store.block_bytes(&keys[2], tip.height).unwrap().unwrap();
    drop(store);
    // The tip block's first event with a tag past every kind this build decodes.
    let first_event = 118 + 64 + 8;
    let mut newer = block.clone();
    newer[first_event..first_event + 4].copy_from_slice(&(Event::<String>::N_KINDS + 3).to_le_bytes());
    let error = af::ledger::block::decode_block(&newer).unwrap_err();
    assert!(
        matches!(error, af::ledger::BlockError::NewerEventKind { event_idx: 0, tag } if tag == Event::<String>::N_KINDS + 3),
        "{error}"
    );
    assert!(error.to_string().contains("upgrade af"), "{error}");
    // Folded, it stops the log there with no finding (the replay's own check of a block
    // it holds; `af ledger verify` names it `newer_event_kind`).
    let mut fold = af::replay::fold::ChainFold::new(keys[2]);
    let registry = envs::registry();
    let store = Store::open_read_only(dir.path()).unwrap();
    let blocks: Vec<(u64, Vec<u8>)> = (0..tip.height)
        .map(|h| (h, store.block_bytes(&keys[2], h).unwrap().unwrap()))
        .chain(std::iter::once((tip.height, newer)))
        .collect();
    af::replay::fold_batch(&mut fold, &registry, &blocks, &mut |_| true);
    assert_eq!(fold.awaiting_upgrade, Some((tip.height, 0)));
    assert!(fold.invalid_at.is_none() && fold.discrepancies.is_empty(), "{:?}", fold.discrepancies);
}
