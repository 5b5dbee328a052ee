//! Pruned bodies (ledger-spec/05): old blocks of other validators' logs kept as header,
//! signature and leaf hashes once an archive holds them. The store still verifies end to
//! end, a replay from genesis fetches the bodies back from the archive and reaches the
//! same state, and a body the archive changed, a kept record changed, or a store with no
//! archive to read is refused by name.

use crate::af_bin;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::http::{archive::Site, bodies::ArchiveBodies, layout, prune, publish};
use af::ledger::block::SealedBlock;
use af::ledger::store::{Appended, StoreError, PRUNED};
use af::ledger::{verify, Store};
use af::synthetic_logs::{validator_key, write_network, NetworkSpec};
use redb::ReadableTable;
use std::process::Command;
use std::sync::Arc;

const START_MS: u64 = 1_790_000_000_000;
const DAY_MS: u64 = 86_400_000;

fn replay(store: &Store) -> Result<af::replay::Replay, af::replay::ReplayError> {
    af::replay::replay(store, &af::envs::registry(), None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {})
}

#[test]
fn pruned_logs_verify_replay_through_their_archive_and_refuse_what_is_not_the_kept_block() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut store = Store::create(dirs[0].path()).unwrap();
    write_network(&store, &NetworkSpec { start_ms: START_MS, events_per_block: 1, ..NetworkSpec::small(3) }).unwrap();
    let own = validator_key(0).validator();
    let tips = store.tips().unwrap();
    let whole_hash = replay(&store).unwrap().state_hash;
    let whole = verify::verify_store(&store, &|_, _| {}).unwrap();
    assert!(whole.ok);
    let originals: Vec<(af::bytes::ValidatorKey, Vec<u8>)> =
        tips.iter().map(|(v, _)| (*v, store.block_bytes(v, 0).unwrap().unwrap())).collect();
    let mut whole_export = Vec::new();
    af::ledger::export::write_blocks(&store, &tips.iter().map(|(v, _)| *v).collect::<Vec<_>>(), &mut whole_export)
        .unwrap();

    // Nothing is pruned that the archive does not hold.
    let archive = dirs[1].path().join("archive");
    let site = Site::open(archive.to_str().unwrap()).unwrap();
    let none = prune::prune_to_archive(&store, &site, Some(own), 2, START_MS + 30 * DAY_MS, &mut |_| {}).unwrap();
    assert_eq!(none.n_blocks, 0, "{none:?}");
    assert!(none.chains.iter().all(|c| c.held_back_by.contains("no tip")), "{none:?}");

    publish::publish(&store, None, &site, &mut |_| {}).unwrap();
    // Within the window: nothing goes either.
    let young = prune::prune_to_archive(&store, &site, Some(own), 2, START_MS + DAY_MS, &mut |_| {}).unwrap();
    assert_eq!(young.n_blocks, 0, "{young:?}");
    let report = prune::prune_to_archive(&store, &site, Some(own), 2, START_MS + 30 * DAY_MS, &mut |_| {}).unwrap();
    assert!(report.n_blocks > 0 && report.n_record_bytes < report.n_bytes, "{report:?}");
    // The report says what is pruned, not what was asked: whole groups only.
    for chain in &report.chains {
        assert_eq!(chain.below, store.pruned_below(&chain.validator).unwrap(), "{chain:?}");
    }
    for (validator, tip) in &tips {
        let below = store.pruned_below(validator).unwrap();
        if *validator == own {
            assert_eq!(below, 0, "our own log is never pruned");
        } else {
            // Full bundles of the archive only, never the last block, whole groups.
            let group = af::ledger::store::PRUNED_GROUP_BLOCKS;
            assert_eq!(below, ((tip.height + 1) / 16 * 16).min(tip.height) / group * group, "{validator}");
            assert!(below > 0);
            assert!(matches!(store.block_bytes(validator, 0), Err(StoreError::Pruned { .. })));
            // A header is still there for proofs and tips.
            assert_eq!(store.signed_headers(validator, 0, 0).unwrap().len(), 1);
        }
    }

    // Verification: every chain to its tip, the pruned part by leaf hashes.
    let checked = verify::verify_store(&store, &|_, _| {}).unwrap();
    assert!(checked.ok, "{:?}", checked.lines(1.0));
    assert_eq!(checked.n_blocks, whole.n_blocks);
    assert_eq!(checked.n_events, whole.n_events);
    assert_eq!(checked.n_blocks_pruned, report.n_blocks);
    assert_eq!(checked.n_events_pruned, report.n_events);
    assert!(checked.indexes.n_entries < whole.indexes.n_entries, "pruned events are not indexed");
    assert!(checked.lines(1.0).iter().any(|l| l.contains("pruned")));

    // A replay with nowhere to fetch the bodies from stops, naming the pruned block.
    match replay(&store) {
        Err(af::replay::ReplayError::Store(StoreError::Pruned { height: 0, .. })) => {}
        other => panic!("{:?}", other.map(|r| r.state_hash)),
    }
    // Through the archive: the same state as before pruning, and the same bodies, each
    // pruned bundle read once (issue 73: 16 times, once per block, before the cache).
    let bodies = Arc::new(ArchiveBodies::default());
    store.set_bodies(bodies.clone());
    assert_eq!(replay(&store).unwrap().state_hash, whole_hash);
    let pruned: Vec<u64> = tips.iter().map(|(v, _)| store.pruned_below(v).unwrap()).filter(|b| *b > 0).collect();
    let pruned_bundles: u64 = pruned.iter().map(|below| below / layout::TILE_WIDTH).sum();
    let (bundles, tip_reads) = bodies.requests();
    eprintln!("a replay over {pruned_bundles} pruned bundles read {bundles} bundles and {tip_reads} tips");
    assert_eq!((bundles, tip_reads), (pruned_bundles, pruned.len() as u64), "{report:?}");
    // A pruned store exports as blocks, byte for byte the export it gave whole, and
    // seeds a new archive with the same bundles (issue 73: both failed at once).
    let mut export = Vec::new();
    af::ledger::export::write_blocks(&store, &tips.iter().map(|(v, _)| *v).collect::<Vec<_>>(), &mut export).unwrap();
    assert_eq!(export, whole_export);
    let seeded = dirs[2].path().join("seeded");
    publish::publish(&store, None, &Site::open(seeded.to_str().unwrap()).unwrap(), &mut |_| {}).unwrap();
    for (validator, _) in &tips {
        let path = layout::bundle_path(validator, 0, layout::TILE_WIDTH);
        assert_eq!(std::fs::read(seeded.join(&path)).unwrap(), std::fs::read(archive.join(&path)).unwrap());
    }
    for (validator, bytes) in &originals {
        assert_eq!(store.block(validator, 0).unwrap().unwrap().n_bytes, bytes.len());
        // Offered again (a peer, a mirror): the same block, not a conflict.
        let again = store.append(&SealedBlock::from_bytes(bytes.clone()).unwrap()).unwrap();
        assert_eq!(again, Appended::AlreadyStored);
    }

    // A body the archive changed is refused, and so is a replay that needs it (each
    // command reads through its own bodies, so nothing read before stands in).
    let (peer, _) = tips.iter().find(|(v, _)| *v != own).unwrap();
    let bundle = archive.join(layout::bundle_path(peer, 0, layout::TILE_WIDTH));
    let good = std::fs::read(&bundle).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    std::fs::write(&bundle, &bad).unwrap();
    store.set_bodies(Arc::new(ArchiveBodies::default()));
    assert!(matches!(store.block(peer, 15), Err(StoreError::BodyFetch { height: 15, .. })));
    assert!(replay(&store).is_err());
    std::fs::write(&bundle, &good).unwrap();
    store.set_bodies(Arc::new(ArchiveBodies::default()));
    assert_eq!(replay(&store).unwrap().state_hash, whole_hash);
    // Read block by block, a bundle is fetched once: gone from the archive after its
    // first block was read, its other blocks still come (each checked against its kept
    // record), from a command's bounded cache of the bundles read last.
    store.set_bodies(Arc::new(ArchiveBodies::default()));
    assert!(store.block(peer, 0).unwrap().is_some());
    std::fs::remove_file(&bundle).unwrap();
    for height in 1..layout::TILE_WIDTH {
        assert!(store.block(peer, height).unwrap().is_some(), "height {height}");
    }
    std::fs::write(&bundle, &good).unwrap();

    // The CLI says what is pruned.
    drop(store);
    let out =
        Command::new(af_bin()).args(["ledger", "verify", "--json", "--data"]).arg(dirs[0].path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["n_blocks_pruned"], report.n_blocks);

    // One flipped byte of a kept record: a fault at that height, by name.
    {
        let db = redb::Database::open(dirs[0].path().join(af::ledger::store::STORE_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut pruned = txn.open_table(PRUNED).unwrap();
            // The first piece of the peer's first group: record 0 (height 0) leads it.
            let key = af::ledger::store::chunk_key(peer, 0, 0);
            let first = pruned.range::<&[u8]>(key.as_slice()..).unwrap().next().unwrap().unwrap().0.value().to_vec();
            assert_eq!(&first[..32], &peer.0[..]);
            let mut piece = pruned.get(first.as_slice()).unwrap().unwrap().value().to_vec();
            // A byte of its first leaf hash.
            piece[af::ledger::block::EVENTS_OFFSET + 5] ^= 0x40;
            pruned.insert(first.as_slice(), piece.as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let store = Store::open_read_only(dirs[0].path()).unwrap();
    let broken = verify::verify_store(&store, &|_, _| {}).unwrap();
    let fault = broken.chains.iter().find(|c| c.validator == *peer).unwrap().fault.clone().unwrap();
    assert_eq!((fault.height, fault.kind), (0, "events_root"), "{fault:?}");
    assert!(!broken.ok);
    drop((store, broken));

    // A group's piece cut short: not the store's layout, a fault by name, not an error.
    {
        let db = redb::Database::open(dirs[0].path().join(af::ledger::store::STORE_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut pruned = txn.open_table(PRUNED).unwrap();
            let key = af::ledger::store::chunk_key(peer, 0, 0);
            let first = pruned.range::<&[u8]>(key.as_slice()..).unwrap().next().unwrap().unwrap().0.value().to_vec();
            let piece = pruned.get(first.as_slice()).unwrap().unwrap().value().to_vec();
            pruned.insert(first.as_slice(), &piece[..piece.len() - 1]).unwrap();
        }
        txn.commit().unwrap();
    }
    let store = Store::open_read_only(dirs[0].path()).unwrap();
    let cut = verify::verify_store(&store, &|_, _| {}).unwrap();
    let fault = cut.chains.iter().find(|c| c.validator == *peer).unwrap().fault.clone().unwrap();
    assert_eq!((fault.height, fault.kind), (0, "bad_chunks"), "{fault:?}");
}

#[test]
fn af_ledger_prune_keeps_our_log_and_the_window_and_says_what_it_did() {
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let data = dirs[0].path();
    {
        let store = Store::create(data).unwrap();
        // Blocks dated 30 days ago: old enough for the default window of 2 days.
        let start = af::clock::unix_ms() - 30 * DAY_MS;
        write_network(&store, &NetworkSpec { start_ms: start, events_per_block: 1, ..NetworkSpec::small(2) }).unwrap();
    }
    let archive = dirs[1].path().join("archive");
    let run = |args: &[&str]| {
        let out = Command::new(af_bin()).args(args).arg("--data").arg(data).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    run(&["ledger", "publish", "--out", archive.to_str().unwrap()]);
    let json: serde_json::Value =
        serde_json::from_str(&run(&["ledger", "prune", "--json", "--archive", archive.to_str().unwrap()])).unwrap();
    let n_blocks = json["n_blocks"].as_u64().unwrap();
    assert!(n_blocks > 0, "{json}");
    assert_eq!(json["chains"].as_array().unwrap().len(), 2);
    // Again: nothing more to prune, each chain says why.
    let again = run(&["ledger", "prune", "--archive", archive.to_str().unwrap()]);
    assert!(again.contains("pruned 0 blocks") && again.contains("not further"), "{again}");
    let verified = run(&["ledger", "verify"]);
    assert!(verified.contains("pruned"), "{verified}");
    // Proving an event of a pruned block fetches its body back from the archive.
    let store = Store::open_read_only(data).unwrap();
    let (peer, _) =
        store.tips().unwrap().into_iter().find(|(v, _)| store.pruned_below(v).unwrap() > 0).expect("a pruned chain");
    drop(store);
    let proof = run(&["ledger", "prove", "--height", "0", "--event", "0", "--validator", &peer.to_hex()]);
    assert!(proof.contains("merkle_path"), "{proof}");
    // A read command that cannot show pruned transcripts says so, and where they are.
    let out = Command::new(af_bin())
        .args(["transcripts", "--miner", "5SynthPerfect", "--json", "--data"])
        .arg(data)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("pruned to their headers") && said.contains(archive.to_str().unwrap()), "{said}");
    assert!(serde_json::from_slice::<serde_json::Value>(&out.stdout).is_ok(), "--json stays one document");
    let out = Command::new(af_bin())
        .args(["ledger", "find", "--miner", "5SynthPerfect", "--json", "--data"])
        .arg(data)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.contains("af ledger find: ") && said.contains("pruned to their headers"),
        "{said}"
    );
    // With the archive gone, the same proof fails by name and nothing is said ok.
    std::fs::rename(&archive, dirs[1].path().join("gone")).unwrap();
    let out = Command::new(af_bin())
        .args(["ledger", "prove", "--height", "0", "--event", "0", "--validator", &peer.to_hex(), "--data"])
        .arg(data)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("pruned"), "{stderr}");
}

/// A validator's replay is kept as each replay ends (`LatestReplay::kept`): the next
/// start folds only the new blocks, so a restart, after a crash too, needs none of the
/// pruned bodies (here the archive is gone); a run stopped inside a replay (its heads
/// taken out as it starts, none put back) folds from genesis and says so.
#[test]
fn a_kept_replay_restarts_on_pruned_logs_without_their_archive() {
    use af::replay::latest_replay::LatestReplay;
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let data = dirs[0].path();
    let store = Store::create(data).unwrap();
    write_network(&store, &NetworkSpec { start_ms: START_MS, events_per_block: 1, ..NetworkSpec::small(3) }).unwrap();
    let genesis = replay(&store).unwrap();
    let own = validator_key(0).validator();
    let archive = dirs[1].path().join("archive");
    let site = Site::open(archive.to_str().unwrap()).unwrap();
    publish::publish(&store, None, &site, &mut |_| {}).unwrap();
    prune::prune_to_archive(&store, &site, Some(own), 2, START_MS + 30 * DAY_MS, &mut |_| {}).unwrap();

    let mut notes = Vec::new();
    let first = LatestReplay::kept(data, &mut |n| notes.push(n.to_string())).unwrap();
    assert!(notes.iter().any(|n| n.contains("from genesis")), "{notes:?}");
    // The first start folds from genesis: it needs the archive.
    assert!(first.get(&store, &DEFAULT_RATIO_PARAMS).is_err(), "no archive to read: refused");
    let mut store = store;
    store.set_bodies(Arc::new(ArchiveBodies::default()));
    let replayed = first.get(&store, &DEFAULT_RATIO_PARAMS).unwrap();
    assert_eq!(replayed.state_hash, genesis.state_hash);
    drop((first, replayed));

    // The archive is gone; the folds kept by the last replay carry the restart, with no
    // clean stop (no `keep`).
    std::fs::rename(&archive, dirs[1].path().join("gone")).unwrap();
    let mut notes = Vec::new();
    let second = LatestReplay::kept(data, &mut |n| notes.push(n.to_string())).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let again = second.get(&store, &DEFAULT_RATIO_PARAMS).unwrap();
    assert_eq!(again.state_hash, genesis.state_hash);
    assert_eq!(again.n_chains_from_snapshot, 3);
    assert_eq!(again.n_blocks_folded, 0);
    assert!(second.keep().unwrap(), "a clean stop keeps it too");
    drop((second, again));
    // Stopped before its first replay ended: the heads left the file at the start and
    // were not put back.
    let third = LatestReplay::kept(data, &mut |_| {}).unwrap();
    assert_eq!(third.cold().unwrap().take_heads().unwrap(), None, "taken at the start");
    drop(third);
    // (A start is a new process: its bodies have read nothing yet.)
    store.set_bodies(Arc::new(ArchiveBodies::default()));
    let mut notes = Vec::new();
    let fourth = LatestReplay::kept(data, &mut |n| notes.push(n.to_string())).unwrap();
    assert!(notes.iter().any(|n| n.contains("from genesis")), "{notes:?}");
    assert!(matches!(
        fourth.get(&store, &DEFAULT_RATIO_PARAMS),
        Err(af::replay::ReplayError::Store(StoreError::BodyFetch { .. }))
    ));
}

/// A validator with `[archive] keep_days` publishes, then prunes what its archive holds
/// past the window, and counts it on `/metrics`; its own log stays whole.
#[test]
fn the_archiver_publishes_then_prunes_and_counts_it() {
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let store = Store::create(dirs[0].path()).unwrap();
    let start = af::clock::unix_ms() - 30 * DAY_MS;
    write_network(&store, &NetworkSpec { start_ms: start, events_per_block: 1, ..NetworkSpec::small(3) }).unwrap();
    let log = Arc::new(af::ledger::OwnLog::new(store, validator_key(0)));
    let own = log.validator();
    let site = Site::open(dirs[1].path().join("archive").to_str().unwrap()).unwrap();
    let metrics = Arc::new(af::metrics::Metrics::new());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (stop_sender, stop) = tokio::sync::watch::channel(false);
    let every = std::time::Duration::from_millis(200);
    let task =
        runtime.spawn(af::validator::archiver::archive_loop(log.clone(), site, (every, 1), metrics.clone(), stop));
    let pruned_all = || {
        log.store.tips().unwrap().iter().filter(|(v, _)| *v != own).all(|(v, _)| log.store.pruned_below(v).unwrap() > 0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !pruned_all() {
        assert!(std::time::Instant::now() < deadline, "the archiver did not prune: {}", metrics.encode());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    stop_sender.send(true).unwrap();
    runtime.block_on(task).unwrap();
    assert_eq!(log.store.pruned_below(&own).unwrap(), 0, "our own log is never pruned");
    let text = metrics.encode();
    let line = text.lines().find(|l| l.starts_with("af_archive_pruned_blocks_total ")).expect(&text);
    assert!(line.rsplit(' ').next().unwrap().parse::<u64>().unwrap() > 0, "{line}");
    assert!(verify::verify_store(&log.store, &|_, _| {}).unwrap().ok);
}

/// A tip names the chain below it, not that every bundle of it is still there: a prune
/// reads each bundle it relies on and compares it with our blocks, so a bundle deleted
/// from the archive (or changed in it) keeps its blocks and everything after, and says
/// which bundle.
#[test]
fn a_bundle_missing_from_the_archive_keeps_its_blocks_and_is_named() {
    let dirs: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let store = Store::create(dirs[0].path()).unwrap();
    write_network(&store, &NetworkSpec { start_ms: START_MS, events_per_block: 1, ..NetworkSpec::small(3) }).unwrap();
    let own = validator_key(0).validator();
    let archive = dirs[1].path().join("archive");
    let site = Site::open(archive.to_str().unwrap()).unwrap();
    publish::publish(&store, None, &site, &mut |_| {}).unwrap();
    let others: Vec<af::bytes::ValidatorKey> =
        store.tips().unwrap().into_iter().map(|(v, _)| v).filter(|v| *v != own).collect();
    let (gone, changed) = (others[0], others[1]);
    // One chain loses bundle 5 (heights 80 to 95), the other has bundle 3's bytes swapped
    // for another chain's.
    std::fs::remove_file(archive.join(layout::bundle_path(&gone, 5, 16))).unwrap();
    std::fs::copy(archive.join(layout::bundle_path(&gone, 3, 16)), archive.join(layout::bundle_path(&changed, 3, 16)))
        .unwrap();
    let report = prune::prune_to_archive(&store, &site, Some(own), 2, START_MS + 30 * DAY_MS, &mut |_| {}).unwrap();
    for (validator, at) in [(gone, "5"), (changed, "3")] {
        let chain = report.chains.iter().find(|c| c.validator == validator).unwrap();
        assert_eq!(store.pruned_below(&validator).unwrap(), 0, "{chain:?}");
        assert!(chain.pruned.is_none(), "{chain:?}");
        let named = layout::bundle_path(&validator, at.parse().unwrap(), 16);
        assert!(chain.held_back_by.contains(&named) && chain.held_back_by.contains("stay"), "{}", chain.held_back_by);
        // Every block is still here, and the store verifies.
        assert!(store.block_bytes(&validator, 85).unwrap().is_some());
    }
    assert!(verify::verify_store(&store, &|_, _| {}).unwrap().ok);
}
