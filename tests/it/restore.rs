//! A data directory restored whole from an older backup (store and signing record
//! together) passes the record's check, so before its first signature a validator asks
//! every source it reaches how far its log went (issue 72, item 3): its chain
//! commitment and its archive here, each ahead of the restored store, refuse the
//! signature by name and leave the store as it was; a source that names another block
//! at a height the store holds says the store's log is not the network's.

use af::chain::local::LocalChain;
use af::chain::local_api::router;
use af::chain::local_client::LocalClient;
use af::chain::{Chain, LedgerCommitment};
use af::ledger::{OwnLog, Store};
use af::validator::signed_elsewhere::{gather, judge, wait_until_caught_up, SignedElsewhereError, Verdict};
use std::time::Duration;

fn unix_ms() -> u64 {
    af::clock::unix_ms()
}

fn append(log: &OwnLog, n: u64) {
    let tip = log.tip().unwrap().map_or(1_790_000_000_000, |t| t.time_ms);
    for i in 1..=n {
        log.append(vec![], tip + i * 1_000).unwrap();
    }
}

fn copy_data(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for name in [af::ledger::store::STORE_FILE, af::ledger::signed::SIGNED_FILE, af::ledger::keys::KEY_FILE] {
        std::fs::copy(from.join(name), to.join(name)).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_data_directory_is_not_signed_on_while_its_chain_or_archive_is_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let (data, backup) = (dir.path().join("data"), dir.path().join("backup"));
    let log = OwnLog::open(&data).unwrap();
    append(&log, 10);
    drop(log);
    copy_data(&data, &backup);
    let log = OwnLog::open(&data).unwrap();
    append(&log, 10);
    let validator = log.validator();
    let newer = log.tip().unwrap().unwrap();
    assert_eq!(newer.height, 19);
    // The archive holds the newer log; the chain holds its commitment.
    let archive = dir.path().join("archive");
    let site = af::http::archive::Site::open(archive.to_str().unwrap()).unwrap();
    let written =
        tokio::task::block_in_place(|| af::http::publish::publish(&log.store, Some(log.key()), &site, &mut |_| {}));
    written.unwrap();
    let original_10 = log.store.signed_headers(&validator, 10, 10).unwrap()[0].0.hash();
    drop(log);
    let chain_dir = tempfile::tempdir().unwrap();
    let chain = std::sync::Arc::new(LocalChain::open(chain_dir.path(), 1_000, 360, unix_ms).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router(chain)).await.unwrap() });
    LocalClient::new(&addr, 1, None).unwrap().register("hot", true).await.unwrap();
    let ours = LocalClient::new(&addr, 1, Some("hot".into())).unwrap();
    let commitment =
        LedgerCommitment { tip_hash: newer.hash, ledger_key: validator, tip_height: newer.height, protocol: None };
    ours.commit(&commitment).await.unwrap();

    // The restore: store and record from the backup. The record's check passes.
    std::fs::remove_dir_all(&data).unwrap();
    copy_data(&backup, &data);
    let log = OwnLog::open(&data).expect("a consistent older copy passes the local check");
    assert_eq!(log.tip().unwrap().unwrap().height, 9);

    // Each source alone is ahead, by name.
    let from_chain = gather(&validator, Some(&ours as &dyn Chain), None, None).await;
    assert_eq!(from_chain.len(), 1, "{from_chain:?}");
    assert!(from_chain[0].source.contains("commitment of hotkey hot"), "{from_chain:?}");
    let from_archive = gather(&validator, None, Some(&site), None).await;
    assert!(from_archive[0].source.contains("archive"), "{from_archive:?}");
    for seen in [&from_chain, &from_archive] {
        match judge(&log.store, &validator, seen).unwrap() {
            Verdict::Behind(s) => assert_eq!((s.height, s.hash), (19, Some(newer.hash))),
            other => panic!("{other:?}"),
        }
    }
    // The wait refuses after its patience, naming the source and the recovery; the
    // store is untouched.
    let (_stop_tx, mut stop) = tokio::sync::watch::channel(false);
    let sources = (Some(&ours as &dyn Chain), Some(&site), None);
    let refused = wait_until_caught_up(&log.store, &validator, sources, (&data, Duration::ZERO), &mut stop).await;
    let said = match refused {
        Err(e @ SignedElsewhereError::Behind { .. }) => e.to_string(),
        other => panic!("{other:?}"),
    };
    assert!(
        said.contains("up to height 19") && said.contains("only up to height 9") && said.contains("af mirror"),
        "{said}"
    );
    assert_eq!(log.tip().unwrap().unwrap().height, 9, "nothing signed");
    drop(log);

    // A second history signed on the restored store (before this check existed): its
    // block 10 is not the one the chain names at height 10.
    let log = OwnLog::open(&data).unwrap();
    let tip = log.tip().unwrap().unwrap();
    log.append(vec![], tip.time_ms + 5_000).unwrap(); // not the block first signed at 10
    let at_10 = LedgerCommitment { tip_hash: original_10, ledger_key: validator, tip_height: 10, protocol: None };
    let other = LocalClient::new(&addr, 1, Some("hot".into())).unwrap();
    other.commit(&at_10).await.unwrap();
    let seen = gather(&validator, Some(&other as &dyn Chain), None, None).await;
    match judge(&log.store, &validator, &seen).unwrap() {
        Verdict::OtherHistory { seen, ours } => {
            assert_eq!((seen.height, seen.hash), (10, Some(original_10)));
            assert_ne!(ours, Some(original_10));
        }
        other => panic!("{other:?}"),
    }
    // A store that holds everything the sources know is clear.
    drop(log);
    let whole = Store::open_read_only(&backup).unwrap();
    assert_eq!(judge(&whole, &validator, &[]).unwrap(), Verdict::Clear);
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn own_tip(data: &std::path::Path) -> u64 {
    let key = af::ledger::LedgerKey::load(&data.join(af::ledger::keys::KEY_FILE)).unwrap().validator();
    Store::open_read_only(data).unwrap().tip(&key).unwrap().map_or(0, |t| t.height)
}

/// Issue 72, item 3, in a devnet: validator A's whole data directory is put back from a
/// copy taken a run earlier while B runs on. A's next start finds B (and the chain's
/// commitment) ahead of its store, waits while sync brings its own blocks back from B,
/// and only then signs, on its true tip: no second history, no evidence, both keep their
/// vTrust.
#[test]
fn a_validator_restored_from_an_old_copy_catches_up_from_its_peer_before_signing() {
    use crate::protocol_upgrade::{count, start_validator, wait_until};
    let dir = tempfile::tempdir().unwrap();
    let chain = crate::chain_local::serve_with(&dir.path().join("chain"), "127.0.0.1:0", &["--tempo", "20"]);
    let endpoint = format!("local:{}", chain.1);
    let (champion, contender) = (crate::validator_cli::miner("random"), crate::validator_cli::miner("perfect"));
    crate::validator_service::enter(&endpoint, "5Champion", "champion", &champion.1);
    std::thread::sleep(Duration::from_millis(150));
    crate::validator_service::enter(&endpoint, "5Contender", "contender", &contender.1);
    for hotkey in ["5ValidatorA", "5ValidatorB"] {
        let out = crate::af(&["chain", "register", "--chain", &endpoint, "--hotkey", hotkey, "--validator"]);
        assert!(out.status.success());
    }
    let (a_dir, b_dir, backup) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("backup"));
    let stop = |child: &mut std::process::Child| {
        let _ = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        child.wait().unwrap();
    };
    let a_at = (&*endpoint, "5ValidatorA", "127.0.0.2");
    let (mut b, _, b_lines) = start_validator(dir.path(), "b", (&endpoint, "5ValidatorB", "127.0.0.3"), "af", None);
    let (mut a, _, a_lines) = start_validator(dir.path(), "a", a_at, "af", None);
    wait_until("A's first match", 90, &[&a_lines, &b_lines], &mut || count(&a_lines, "match_decided") >= 1);
    stop(&mut a);
    copy_tree(&a_dir, &backup);
    let copied_at = own_tip(&backup);
    // A runs on, plays a new miner; B holds what A signs.
    let late = crate::validator_cli::miner("noisy:0.1");
    crate::validator_service::enter(&endpoint, "5Late", "late", &late.1);
    let (mut a, _, a_lines) = start_validator(dir.path(), "a", a_at, "af", None);
    wait_until("A's match of the new miner", 90, &[&a_lines, &b_lines], &mut || count(&a_lines, "match_decided") >= 1);
    std::thread::sleep(Duration::from_secs(3)); // its last blocks reach B
    stop(&mut a);
    let signed = own_tip(&a_dir);
    assert!(signed > copied_at, "A signed on after the copy: {copied_at} -> {signed}");
    std::thread::sleep(Duration::from_secs(1));
    // The restore: A's directory, store and signing record, as the copy had them.
    std::fs::remove_dir_all(&a_dir).unwrap();
    copy_tree(&backup, &a_dir);
    let later = crate::validator_cli::miner("noisy:0.2");
    crate::validator_service::enter(&endpoint, "5Later", "later", &later.1);
    let (mut a, _, a_lines) = start_validator(dir.path(), "a", a_at, "af", None);
    wait_until("A's check before signing", 90, &[&a_lines, &b_lines], &mut || {
        count(&a_lines, "signed_elsewhere_checked") >= 1
    });
    wait_until("A's match after the restore", 90, &[&a_lines, &b_lines], &mut || count(&a_lines, "match_decided") >= 1);
    std::thread::sleep(Duration::from_secs(3));
    stop(&mut a);
    stop(&mut b);
    assert!(own_tip(&a_dir) > signed, "A signed on from its true tip {signed}");
    // Sync may bring A's blocks back before the sources are first asked (then nothing is
    // waited for); either way the check passed once and nothing was signed before it.
    assert!(count(&a_lines, "catching_up_own_log") <= 1, "said once at most");
    let lines = a_lines.lock().unwrap().clone();
    let checked = lines.iter().position(|l| l.contains("\"event\":\"signed_elsewhere_checked\"")).unwrap();
    assert!(lines[checked].contains("sources"), "{}", lines[checked]);
    for holder in [&a_dir, &b_dir] {
        let replayed = af::replay::replay(
            &Store::open_read_only(holder).unwrap(),
            &af::envs::registry(),
            None,
            &af::evaluation::ratio::DEFAULT_RATIO_PARAMS,
            &mut |_, _, _| {},
        )
        .unwrap();
        let state = &replayed.state;
        assert_eq!(state.validators.len(), 2);
        assert!(state.validators.iter().all(|v| v.vtrust_ppm == 1_000_000 && !v.equivocated), "{:?}", state.validators);
        assert!(state.discrepancies.is_empty(), "{:?}", state.discrepancies);
    }
    let verify = crate::af(&["ledger", "verify", "--data", a_dir.to_str().unwrap()]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
}
