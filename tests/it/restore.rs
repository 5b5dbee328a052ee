//! A data directory restored whole from an older backup (store and signing record
//! together) passes the record's check, so before its first signature a validator asks
//! every source it reaches how far its log went (issue 72, item 3): its chain
//! commitment and its archive here, each ahead of the restored store, refuse the
//! signature by name and leave the store as it was; a source that names another block
//! at a height the store holds says the store's log is not the network's.

use af::chain::local::{router, LocalChain};
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
