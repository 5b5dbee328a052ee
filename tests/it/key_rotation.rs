//! Key rotation (ledger-spec/16): one validator across two keys, the retired key's
//! forgeries, and `af key rotate` on a stopped validator's data directory.

use af::bytes::ValidatorKey;
use af::envs;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::block::seal;
use af::ledger::event::{Evidence, MatchStarted};
use af::ledger::{BlockError, Event, LedgerKey, OwnLog, Store, StoreError};
use af::protocol::Protocol;
use af::replay::{self, Replay};
use af::synthetic_logs::{successor_key, validator_key, write_network, Faults, NetworkSpec};

fn replay_local(store: &Store) -> Replay {
    let registry = envs::registry().with_protocol(Protocol::local());
    replay::replay(store, &registry, None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap()
}

/// The small network (3 validators, 2 matches), validator 1 rotating after `rotate_after`
/// matches when given.
fn network(rotate_after: Option<usize>) -> (tempfile::TempDir, Vec<ValidatorKey>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    let faults = Faults { rotate: rotate_after.map(|n| (1, n)), ..Faults::default() };
    let keys = write_network(
        &store,
        &NetworkSpec { events_per_block: 16, faults, ..NetworkSpec::small(3).with_plan(af::protocol::PLAN_V4) },
    )
    .unwrap();
    (dir, keys)
}

fn vtrust_of(replayed: &Replay, key: &ValidatorKey) -> u32 {
    replayed.state.validators.iter().find(|v| v.validator == *key).unwrap().vtrust_ppm
}

#[test]
fn a_rotated_validator_is_one_validator_whose_trust_votes_and_ratio_continue() {
    let (plain_dir, keys) = network(None);
    let (rotated_dir, rotated_keys) = network(Some(1));
    assert_eq!(keys, rotated_keys);
    let plain = replay_local(&Store::open_read_only(plain_dir.path()).unwrap());
    let rotated = replay_local(&Store::open_read_only(rotated_dir.path()).unwrap());
    let new_key = successor_key(1).validator();

    // The second match was played and decided under the new key, at the ratio the first
    // match (in the old log) set: no finding anywhere.
    assert!(rotated.state.discrepancies.is_empty(), "{:#?}", rotated.state.discrepancies);
    let old_fold = rotated.folds.iter().find(|f| f.validator == keys[1]).unwrap();
    let new_fold = rotated.folds.iter().find(|f| f.validator == new_key).unwrap();
    assert_eq!((old_fold.matches.len(), new_fold.matches.len()), (1, 1));
    assert!(old_fold.rotated.is_some_and(|r| r.new_key == new_key));
    assert!(new_fold.succeeds.is_some_and(|s| s.old_key == keys[1]));

    // One validator: both records carry its full vTrust and its comparisons, and every
    // match counts one vote from it, under its first key.
    assert_eq!(rotated.state.validators.len(), 4);
    assert_eq!(vtrust_of(&rotated, &keys[1]), 1_000_000);
    assert_eq!(vtrust_of(&rotated, &new_key), 1_000_000);
    let summary = |key| rotated.state.validators.iter().find(|v| v.validator == key).unwrap().clone();
    assert_eq!(summary(keys[1]).n_compared, 2, "compared on both matches, across the two logs");
    assert_eq!((summary(new_key).n_compared, summary(new_key).n_disagreements), (2, 0));
    let mut in_order = keys.clone();
    in_order.sort();
    assert_eq!(rotated.state.matches.len(), 2);
    for (with, without) in
        rotated.state.matches.iter().map(Result::unwrap).zip(plain.state.matches.iter().map(Result::unwrap))
    {
        let voters: Vec<ValidatorKey> = with.votes.iter().map(|v| *v.validator).collect();
        assert_eq!(voters, in_order, "one vote per validator, the rotated one under its first key");
        assert_eq!(
            (with.for_ppm, with.against_ppm, with.verdict),
            (without.for_ppm, without.against_ppm, without.verdict)
        );
    }
    // Verdicts, the champion, its history, the ratio and the weights are the network's
    // without the rotation.
    assert_eq!(rotated.state.champion, plain.state.champion);
    assert_eq!(rotated.state.champion_history, plain.state.champion_history);
    assert_eq!(
        (rotated.state.ratio_set_ppm, rotated.state.ratio_set_at_block, &rotated.state.weights),
        (plain.state.ratio_set_ppm, plain.state.ratio_set_at_block, &plain.state.weights)
    );

    // The validator's own state, as it starts under the new key: the old log's champion,
    // ratio and plays, and match ids counted in the new log.
    let store = Store::open_read_only(rotated_dir.path()).unwrap();
    let own = af::validator::state::load(&store, &new_key, &DEFAULT_RATIO_PARAMS).unwrap();
    let plain_store = Store::open_read_only(plain_dir.path()).unwrap();
    let before = af::validator::state::load(&plain_store, &keys[1], &DEFAULT_RATIO_PARAMS).unwrap();
    assert_eq!((own.champion.clone(), own.ratio, own.n_decided), (before.champion.clone(), before.ratio, 2));
    assert_eq!(own.log_decided, 1);
    assert!(own.played.contender("5SynthPerfect") && own.played.contender("5SynthRandom"));
}

#[test]
fn a_thief_with_the_retired_key_is_refused_past_the_rotation_and_its_fork_zeroes_no_one() {
    let (dir, keys) = network(Some(1));
    let store = Store::open(dir.path()).unwrap();
    let thief = validator_key(1);
    let at = store.rotation(&keys[1]).unwrap().unwrap();

    // A block past the rotation: every store refuses it, naming the rotation.
    let tip = store.tip(&keys[1]).unwrap().unwrap();
    assert_eq!((tip.height, tip.hash), (at.height, at.hash));
    let past = seal(thief.signing_key(), Some(&tip), tip.time_ms + 1, vec![]).unwrap();
    match store.append(&past) {
        Err(StoreError::Rejected { source: BlockError::PastRotation { height, rotated_at, new_key }, .. }) => {
            assert_eq!((height, rotated_at, new_key), (at.height + 1, at.height, successor_key(1).validator()));
        }
        other => panic!("expected a refusal past the rotation, got {other:?}"),
    }
    let refused = StoreError::Rejected {
        validator: keys[1],
        height: at.height + 1,
        source: BlockError::PastRotation { height: at.height + 1, rotated_at: at.height, new_key: at.new_key },
    };
    assert!(refused.to_string().contains("a forgery with the retired key"), "{refused}");

    // A fork at height 1, with evidence of it recorded by validator 0; and the same
    // against validator 2, whose key is its own still.
    let fork_of = |key: &LedgerKey, validator: &ValidatorKey| {
        let genesis = store.signed_headers(validator, 0, 1).unwrap();
        let prev = af::ledger::Tip { height: 0, hash: genesis[0].0.hash(), time_ms: genesis[0].0.time_ms };
        let fork = seal(key.signing_key(), Some(&prev), prev.time_ms + 7, vec![]).unwrap();
        assert!(matches!(store.append(&fork), Err(StoreError::Conflict { height: 1, .. })));
        let forked = &fork.decoded().block;
        Event::Evidence(Box::new(Evidence {
            validator: *validator,
            height: 1,
            header_a: genesis[1].0.clone(),
            signature_a: genesis[1].1,
            header_b: forked.header.clone(),
            signature_b: forked.signature,
        }))
    };
    let evidence = vec![fork_of(&thief, &keys[1]), fork_of(&validator_key(2), &keys[2])];
    let reporter = validator_key(0);
    let reporter_tip = store.tip(&keys[0]).unwrap().unwrap();
    store
        .append(&seal(reporter.signing_key(), Some(&reporter_tip), reporter_tip.time_ms + 1, evidence).unwrap())
        .unwrap();
    drop(store);

    let replayed = replay_local(&Store::open_read_only(dir.path()).unwrap());
    assert_eq!(vtrust_of(&replayed, &keys[1]), 1_000_000, "the retired key's fork zeroes no one");
    assert_eq!(vtrust_of(&replayed, &successor_key(1).validator()), 1_000_000);
    assert_eq!(vtrust_of(&replayed, &keys[2]), 0, "the same fork with a key in use is equivocation");
    let named =
        |key: &ValidatorKey| replayed.state.discrepancies.iter().find(|d| d.validator == *key).unwrap().detail.clone();
    assert!(named(&keys[1]).contains("a forgery with it, which zeroes no one"), "{}", named(&keys[1]));
    assert!(!named(&keys[2]).contains("forgery"));
    let record =
        |key: &ValidatorKey| replayed.state.validators.iter().find(|v| v.validator == *key).unwrap().equivocated;
    assert!(!record(&keys[1]) && record(&keys[2]));
}

#[test]
fn a_log_that_names_a_predecessor_which_did_not_rotate_to_it_is_a_validator_of_its_own() {
    let (dir, keys) = network(Some(1));
    let store = Store::open(dir.path()).unwrap();
    let stranger = LedgerKey::from_seed([77; 32]);
    let at = store.rotation(&keys[1]).unwrap().unwrap();
    let claim = Event::KeySucceeded(af::ledger::rotation::KeySucceeded {
        old_key: keys[1],
        old_height: at.height,
        old_hash: at.hash,
        chain_block: at.chain_block,
    });
    store.append(&seal(stranger.signing_key(), None, 1, vec![claim]).unwrap()).unwrap();
    drop(store);
    let replayed = replay_local(&Store::open_read_only(dir.path()).unwrap());
    let identities = af::replay::identities::Identities::of(&replayed.folds);
    assert_eq!(identities.root(&stranger.validator()), stranger.validator());
    assert_eq!(identities.root(&successor_key(1).validator()), keys[1]);
}

/// A data directory with a log of one block of this key's, and a config on a local chain
/// with the local table (version 3 from block 0).
fn data_dir() -> (tempfile::TempDir, ValidatorKey) {
    let dir = tempfile::tempdir().unwrap();
    let log = OwnLog::open(&dir.path().join("d")).unwrap();
    let started = MatchStarted {
        match_id: af::bytes::Hash32([1; 32]),
        contender: af::ledger::event::MinerRef { hotkey: "5C".into(), uid: 1, model: "m@1".into() },
        champion: af::ledger::event::MinerRef { hotkey: "5H".into(), uid: 0, model: "m@2".into() },
        envs: vec![],
        rule: "r".into(),
        ratio_to_beat_ppm: 510_000,
        chain_block: 40,
        chain_block_hash: af::bytes::Hash32([2; 32]),
    };
    log.append(vec![Event::MatchStarted(started)], 1_000).unwrap();
    let key = log.validator();
    std::fs::write(
        dir.path().join("local.toml"),
        "[protocol]\ntable = \"local\"\n[chain]\nendpoint = \"local:127.0.0.1:9\"\n",
    )
    .unwrap();
    (dir, key)
}

#[test]
fn af_key_rotate_moves_a_stopped_validator_to_a_new_key_and_the_old_one_signs_nothing_more() {
    let (dir, old) = data_dir();
    let data = dir.path().join("d");
    let d = data.to_str().unwrap();
    let config = dir.path().join("local.toml");
    let old_key_file = std::fs::read(data.join("validator.key")).unwrap();

    // The network's table has no rotation before its version 3: refused, nothing signed.
    let early = crate::af(&["key", "rotate", "--data", d]);
    assert_eq!(early.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&early.stderr).contains("protocol version 3"));
    assert!(!data.join("validator.key.next").exists(), "nothing is left half done");
    assert_eq!(Store::open_read_only(&data).unwrap().tip(&old).unwrap().unwrap().height, 0);

    let out = crate::af(&["key", "rotate", "--data", d, "--config", config.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["old_key"], old.to_hex());
    assert_eq!((done["rotated_at"].as_u64(), done["chain_block"].as_u64()), (Some(1), Some(40)));
    let new = LedgerKey::load(&data.join("validator.key")).unwrap().validator();
    assert_eq!(done["new_key"], new.to_hex());
    assert!(!data.join("validator.key.next").exists());

    // The directory signs on with the new key, in the new log.
    let log = OwnLog::open(&data).unwrap();
    assert_eq!(log.validator(), new);
    let block = log.append(vec![], 2_000).unwrap();
    assert_eq!(block.tip.height, 1);
    drop(log);
    // The old key, from a copy of its file, signs nothing the store takes.
    let thief_dir = tempfile::tempdir().unwrap();
    let thief_file = thief_dir.path().join("old.key");
    std::fs::write(&thief_file, &old_key_file).unwrap();
    std::fs::set_permissions(&thief_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let thief = LedgerKey::load(&thief_file).unwrap();
    let store = Store::open(&data).unwrap();
    let tip = store.tip(&old).unwrap().unwrap();
    let forged = seal(thief.signing_key(), Some(&tip), tip.time_ms + 1, vec![]).unwrap();
    assert!(matches!(store.append(&forged), Err(StoreError::Rejected { source: BlockError::PastRotation { .. }, .. })));
    drop(store);

    // An audit by the local table: both logs verify, one validator, nothing found.
    let audit = crate::af(&["audit", "--data", d, "--protocol", "local", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(report["rotations"][0]["linked"], true, "{}", report["rotations"]);
    assert_eq!(report["rotations"][0]["first_key"], old.to_hex());
    let text = crate::af(&["audit", "--data", d, "--protocol", "local"]);
    assert!(crate::stdout(&text).contains("key rotation: "), "{}", crate::stdout(&text));
    let findings = report["findings"].as_array().map_or(0, Vec::len);
    let detail = String::from_utf8_lossy(&audit.stdout);
    assert!(
        !detail.contains("invalid_block") && !detail.contains("past its rotation"),
        "{findings} findings: {detail}"
    );
}

#[test]
fn a_rotation_cut_short_is_finished_by_running_it_again_with_the_staged_key() {
    let (dir, old) = data_dir();
    let data = dir.path().join("d");
    let config = dir.path().join("local.toml");
    // As if a run stopped right after staging its new key.
    let staged = LedgerKey::generate().unwrap();
    staged.write_new(&data.join("validator.key.next")).unwrap();
    let done =
        af::validator::key_rotation::rotate(&data, &Protocol::local(), 0, 5_000).expect("finishes the staged rotation");
    assert!(done.resumed);
    assert_eq!((done.old_key, done.new_key), (old, staged.validator()));
    // Run again: a fresh rotation from the new key (two rotations, one identity).
    let again = crate::af(&["key", "rotate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap()]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let third = LedgerKey::load(&data.join("validator.key")).unwrap().validator();
    let store = Store::open_read_only(&data).unwrap();
    assert_eq!(store.predecessors(&third, 8).unwrap(), vec![staged.validator(), old]);
}

/// The devnet of issue 72, on a local chain with the local table: validator A rotates its
/// ledger key mid-run (`af key rotate` asks the running validator), validator B's hotkey is
/// swapped on the chain (B notices, starts again under the new hotkey with the same log
/// and ledger key, and commits it there), and the champion's hotkey is swapped (both
/// record its leaving; the queue's first miner holds the crown and defends it). Then both
/// stores, given each other's logs, and an offline auditor agree on one state hash, in
/// which A is one validator under its first key and both keep full vTrust.
#[test]
fn a_devnet_through_a_key_rotation_a_validator_swap_and_a_champion_swap_agrees_on_one_state() {
    use crate::protocol_upgrade::{count, start_validator, wait_until};
    use af::chain::local_client::LocalClient;
    let dir = tempfile::tempdir().unwrap();
    let chain = crate::chain_local::serve_with(&dir.path().join("chain"), "127.0.0.1:0", &["--tempo", "20"]);
    let endpoint = format!("local:{}", chain.1);
    let (champion, contender, late, later) = (
        crate::validator_cli::miner("random"),
        crate::validator_cli::miner("perfect"),
        crate::validator_cli::miner("noisy:0.1"),
        crate::validator_cli::miner("random"),
    );
    crate::validator_service::enter(&endpoint, "5Champion", "champion", &champion.1);
    std::thread::sleep(std::time::Duration::from_millis(150));
    crate::validator_service::enter(&endpoint, "5Contender", "contender", &contender.1);
    for hotkey in ["5ValidatorA", "5ValidatorB"] {
        assert!(crate::af(&["chain", "register", "--chain", &endpoint, "--hotkey", hotkey, "--validator"])
            .status
            .success());
    }
    let (mut a, _, a_lines) = start_validator(dir.path(), "a", (&endpoint, "5ValidatorA", "127.0.0.2"), "local", None);
    let (mut b, _, b_lines) = start_validator(dir.path(), "b", (&endpoint, "5ValidatorB", "127.0.0.3"), "local", None);
    let all = [&a_lines, &b_lines];
    wait_until("both validators' first match", 60, &all, &mut || {
        count(&a_lines, "match_decided") >= 1 && count(&b_lines, "match_decided") >= 1
    });
    let old = LedgerKey::load(&dir.path().join("a/validator.key")).unwrap().validator();
    let b_key = LedgerKey::load(&dir.path().join("b/validator.key")).unwrap().validator();

    // A's ledger key, rotated while it runs.
    let rotate =
        crate::af(&["key", "rotate", "--data", dir.path().join("a").to_str().unwrap(), "--json", "--wait-s", "60"]);
    assert!(rotate.status.success(), "{}", String::from_utf8_lossy(&rotate.stderr));
    let done: serde_json::Value = serde_json::from_slice(&rotate.stdout).unwrap();
    assert_eq!(done["old_key"], old.to_hex());
    let new = LedgerKey::load(&dir.path().join("a/validator.key")).unwrap().validator();
    assert_eq!(done["new_key"], new.to_hex());
    assert_eq!(count(&a_lines, "key_rotated"), 1);

    // B's hotkey and the champion's, swapped on chain.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = LocalClient::new(&chain.1, 1, None).unwrap();
    runtime.block_on(client.swap_hotkey("5ValidatorB", "5ValidatorB2")).unwrap();
    runtime.block_on(client.swap_hotkey("5Champion", "5Champion2")).unwrap();
    crate::validator_service::enter(&endpoint, "5Late", "late", &late.1);
    std::thread::sleep(std::time::Duration::from_millis(150));
    crate::validator_service::enter(&endpoint, "5Later", "later", &later.1);

    let committed = |hotkey: &str, key: af::bytes::ValidatorKey| {
        let records = runtime.block_on(af::chain::Chain::commitments(&client)).unwrap();
        records.iter().any(|r| r.hotkey == hotkey && r.ledger().is_some_and(|c| c.ledger_key == key))
    };
    wait_until("A's new key and B's new hotkey committed", 60, &all, &mut || {
        committed("5ValidatorA", new) && committed("5ValidatorB2", b_key)
    });
    assert_eq!(count(&b_lines, "hotkey_swapped"), 1);
    wait_until("both validators' match of the champion's successor", 90, &all, &mut || {
        count(&a_lines, "champion_left") >= 1
            && count(&b_lines, "champion_left") >= 1
            && count(&a_lines, "match_decided") >= 2
            && count(&b_lines, "match_decided") >= 2
    });
    std::thread::sleep(std::time::Duration::from_secs(2)); // gossip of the last blocks
    for child in [&mut a, &mut b] {
        let _ = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        child.wait().unwrap();
    }
    // Each store takes the other's logs (what a mirror does), so both hold the same.
    let exports: Vec<std::path::PathBuf> = ["a", "b"]
        .iter()
        .map(|holder| {
            let out = crate::af(&[
                "ledger",
                "export",
                "--data",
                dir.path().join(holder).to_str().unwrap(),
                "--format",
                "blocks",
            ]);
            assert!(out.status.success());
            let file = dir.path().join(format!("{holder}.afblocks"));
            std::fs::write(&file, out.stdout).unwrap();
            file
        })
        .collect();
    for (holder, other) in [("a", &exports[1]), ("b", &exports[0])] {
        let out = crate::af(&[
            "ledger",
            "import",
            "--data",
            dir.path().join(holder).to_str().unwrap(),
            "--file",
            other.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{holder}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let mut hashes = std::collections::BTreeSet::new();
    for holder in ["a", "b"] {
        let replayed = replay_local(&Store::open_read_only(&dir.path().join(holder)).unwrap());
        let state = &replayed.state;
        assert!(state.discrepancies.is_empty(), "{holder}: {:?}", state.discrepancies);
        assert_eq!(state.validators.len(), 3, "{holder} holds A's two logs and B's");
        assert!(state.validators.iter().all(|v| v.vtrust_ppm == 1_000_000 && !v.equivocated), "{holder}");
        // A devnet on a local chain plays the newest version's plan from block 0 (15).
        let matches: Vec<_> = replayed.folds.iter().flat_map(|f| f.matches.values().map(Result::unwrap)).collect();
        assert!(!matches.is_empty(), "{holder}: matches were played");
        assert!(matches.iter().all(|m| &*m.rule == af::protocol::PLAN_V4 && m.network_rules), "{holder}");
        let new_fold = replayed.folds.iter().find(|f| f.validator == new).unwrap();
        assert!(new_fold.succeeds.is_some_and(|s| s.old_key == old), "{holder}: A's new log names its old one");
        for m in state.matches.iter().map(Result::unwrap) {
            assert!(
                m.votes.iter().all(|v| *v.validator == old || *v.validator == b_key),
                "{holder}: A votes under {old}"
            );
        }
        let champion = state.champion.as_ref().map(|c| c.hotkey.to_string());
        assert!(champion.as_deref().is_some_and(|c| c == "5Late" || c == "5Later"), "{holder}: {champion:?}");
        let uid = state.champion.as_ref().unwrap().uid;
        assert_eq!(state.weights, vec![(uid, u16::MAX)]);
        hashes.insert(replayed.state_hash.to_hex());
    }
    let audit =
        crate::af(&["audit", "--data", dir.path().join("a").to_str().unwrap(), "--protocol", "local", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&audit.stdout).unwrap();
    hashes.insert(report["state_hash"].as_str().unwrap_or("no state hash in the report").to_string());
    assert_eq!(hashes.len(), 1, "both stores and the auditor: {hashes:#?}");
}
