//! Fold checkpoints (ledger-spec/02): a validator's replay keeps each log's fold at its
//! checkpoint heights and its log records the points; equal points in several logs are
//! countersignatures. An audit from genesis checks every claim; an audit from a
//! checkpoint a quorum agreed on reaches the same state hash folding only the blocks
//! after it, and refuses fold bytes that are not the agreed ones.

use crate::af_bin;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::block::seal;
use af::ledger::event::{Event, FoldCheckpoint};
use af::ledger::{Store, Tip};
use af::replay::checkpoint_quorum::Countersigners;
use af::replay::fold_checkpoints::{check_claims, to_claim, CHECKPOINT_EVERY, FOLDS_DIR};
use af::replay::{FoldSource, Snapshot, REPLAY_VERSION};
use af::synthetic_logs::{validator_key, write_network, NetworkSpec};
use std::process::Command;

const START_MS: u64 = 1_790_000_000_000;

/// Appends a block of `events` (or an empty one) to validator `i`'s chain.
fn append(store: &Store, i: usize, events: Vec<Event>) {
    let key = validator_key(i);
    let tip: Tip = store.tip(&key.validator()).unwrap().unwrap();
    let sealed = seal(key.signing_key(), Some(&tip), tip.time_ms + 2_000, events).unwrap();
    store.append(&sealed).unwrap();
}

/// The three honest validators of `network_with_claims`, who may countersign.
fn honest(quorum: Option<usize>) -> Countersigners {
    Countersigners::new((0..3).map(|i| validator_key(i).validator()).collect(), quorum, "the test's list")
}

fn no_start() -> std::collections::BTreeMap<af::bytes::ValidatorKey, u64> {
    Default::default()
}

fn replay_from(store: &Store, folds: Option<Vec<af::replay::fold::ChainFold>>) -> af::replay::Replay {
    let snapshot = folds.map(|folds| (Snapshot { replay_version: REPLAY_VERSION, folds }, FoldSource::Checkpoint));
    af::replay::replay(store, &af::envs::registry(), snapshot, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap()
}

/// Three logs past two checkpoint heights, a validator's replay keeping the folds in
/// `data`'s `folds/`, and each validator's claims recorded (validator 2 lying about log 0).
fn network_with_claims(data: &std::path::Path) -> Store {
    let store = Store::create(data).unwrap();
    write_network(&store, &NetworkSpec { start_ms: START_MS, events_per_block: 1, ..NetworkSpec::small(3) }).unwrap();
    // Every chain past two checkpoint heights, with a few blocks after the second.
    for i in 0..3 {
        while store.tip(&validator_key(i).validator()).unwrap().unwrap().height < 2 * CHECKPOINT_EVERY + 3 {
            append(&store, i, vec![]);
        }
    }
    // A validator's replay: folds kept at each checkpoint height in DIR/folds.
    let latest = af::replay::latest_replay::LatestReplay::kept(data, &mut |_| {}).unwrap();
    let replayed = latest.get(&store, &DEFAULT_RATIO_PARAMS).unwrap();
    for fold in &replayed.folds {
        let heights: Vec<u64> = fold.checkpoints.points.iter().map(|p| p.height).collect();
        assert_eq!(heights, [CHECKPOINT_EVERY - 1, 2 * CHECKPOINT_EVERY - 1], "{}", fold.validator);
        let last = fold.checkpoints.points.last().unwrap();
        let file = af::replay::fold_checkpoints::fold_file(&data.join(FOLDS_DIR), &fold.validator, last.height);
        assert_eq!(blake3::hash(&std::fs::read(&file).unwrap()).as_bytes(), &last.fold_hash.0, "kept as hashed");
    }
    // Each validator records the points; validator 2 lies about chain 0's fold.
    let v0 = validator_key(0).validator();
    for i in 0..3 {
        let mut claim: FoldCheckpoint = to_claim(&replayed.folds, &validator_key(i).validator()).unwrap();
        assert_eq!(claim.points.len(), 3, "one point per log, the newest");
        if i == 2 {
            claim.points.iter_mut().find(|p| p.validator == v0).unwrap().fold_hash.0[0] ^= 1;
        }
        append(&store, i, vec![Event::FoldCheckpoint(claim)]);
    }
    drop(latest);
    store
}

#[test]
fn an_audit_from_a_countersigned_checkpoint_reaches_the_genesis_state_and_a_false_claim_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let store = network_with_claims(data);
    let v0 = validator_key(0).validator();
    let genesis = replay_from(&store, None);
    let claims = check_claims(&genesis.folds, &no_start());
    assert_eq!((claims.n_agree, claims.false_claims.len()), (8, 1), "{claims:?}");
    // The logs and what these claims come to, for the spec's second implementation
    // (`scripts/spec-check.py` recomputes every fold hash from the logs and checks each claim).
    let mut validators: Vec<_> = genesis.folds.iter().map(|f| f.validator).collect();
    validators.sort();
    let mut export = Vec::new();
    af::ledger::export::write_blocks(&store, &validators, &mut export).unwrap();
    crate::replay_vectors::check_binary_fixture("fixtures/replay/claims.afblocks", &export);
    let expected = serde_json::json!({
        "about": "fold checkpoint claims in claims.afblocks (ledger-spec/02, \"Fold checkpoints\"): each log's newest claim of each log compared with the fold in fold format 15 at that height",
        "blocks": "claims.afblocks",
        "n_agree": claims.n_agree,
        "false_claims": claims.false_claims.iter().map(|(claimer, at, point, ours)| serde_json::json!({
            "claimer": claimer, "at": at, "validator": point.validator, "height": point.height,
            "claimed": point.fold_hash, "fold_hash": ours,
        })).collect::<Vec<_>>(),
    });
    crate::check_fixture(
        "fixtures/replay/claims.json",
        &format!("{}\n", serde_json::to_string_pretty(&expected).unwrap()),
    );
    let (claimer, _, point, ours) = claims.false_claims[0];
    assert_eq!((claimer, point.validator), (validator_key(2).validator(), v0));
    assert_ne!(point.fold_hash, ours);

    // From the checkpoint: a majority (2 of 3) agrees on every chain's point at 719
    // (chain 0's by validators 0 and 1 only); the blocks after it are all that is folded.
    let site = af::http::folds::FoldSite::open(data.join(FOLDS_DIR).to_str().unwrap()).unwrap();
    let (folds, start) =
        af::audit::checkpoint_start::start_folds(&store, &honest(None), "folds", &|p| site.read(p)).unwrap();
    assert_eq!((start.quorum, start.n_logs, folds.len()), (2, 3, 3), "{start:?}");
    for chain in &start.chains {
        let from = chain.from.as_ref().unwrap();
        assert_eq!(from.point.height, 2 * CHECKPOINT_EVERY - 1);
        let expected = if chain.validator == v0 { 2 } else { 3 };
        assert_eq!(from.countersigners.len(), expected, "{chain:?}");
    }
    assert_eq!(start.n_blocks_trusted, 3 * 2 * CHECKPOINT_EVERY);
    let from_checkpoint = replay_from(&store, Some(folds));
    assert_eq!(from_checkpoint.state_hash, genesis.state_hash);
    assert_eq!(from_checkpoint.n_chains_from_snapshot, 3);
    assert_eq!(from_checkpoint.n_blocks_folded, genesis.n_blocks_folded - 3 * 2 * CHECKPOINT_EVERY);
    assert_eq!(check_claims(&from_checkpoint.folds, &no_start()), claims, "the claims compare the same way");
    // But a claim against a log started from a checkpoint names no one false: only a
    // replay from genesis tells whether the claimer or the countersigners lied.
    let disputed = check_claims(&from_checkpoint.folds, &start.started());
    assert_eq!((disputed.n_agree, disputed.false_claims.len(), disputed.disputed.len()), (8, 0, 1), "{disputed:?}");
    assert_eq!(disputed.disputed[0], claims.false_claims[0]);

    // A quorum of three leaves chain 0 (two countersigners) to fold from genesis.
    let (folds, start) =
        af::audit::checkpoint_start::start_folds(&store, &honest(Some(3)), "folds", &|p| site.read(p)).unwrap();
    assert_eq!(folds.len(), 2);
    assert!(start.chains.iter().any(|c| c.validator == v0 && c.from.is_none()));
    assert_eq!(replay_from(&store, Some(folds)).state_hash, genesis.state_hash);
    let v0_start = start.chains.iter().find(|c| c.validator == v0).unwrap();
    assert!(v0_start.passed_over.iter().any(|why| why.contains("has 3 countersigners")), "{v0_start:?}");
    // A quorum past the logs read: every log from genesis, and said why.
    let (folds, start) =
        af::audit::checkpoint_start::start_folds(&store, &honest(Some(4)), "folds", &|p| site.read(p)).unwrap();
    assert!(folds.is_empty());
    assert!(start.chains.iter().all(|c| c.passed_over.iter().any(|why| why.contains("only 3 of the 3 validator(s)"))));

    // Bytes that are not the agreed fold are passed over, by name, and that log folds
    // from genesis: the state is the same.
    let tampered = tempfile::tempdir().unwrap();
    copy_dir(&data.join(FOLDS_DIR), tampered.path());
    let file = af::replay::fold_checkpoints::fold_file(tampered.path(), &v0, 2 * CHECKPOINT_EVERY - 1);
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&file, bytes).unwrap();
    let site = af::http::folds::FoldSite::open(tampered.path().to_str().unwrap()).unwrap();
    let (folds, start) =
        af::audit::checkpoint_start::start_folds(&store, &honest(None), "tampered", &|p| site.read(p)).unwrap();
    let chain0 = start.chains.iter().find(|c| c.validator == v0).unwrap();
    assert!(chain0.from.is_none(), "{chain0:?}");
    assert!(chain0.passed_over[0].contains("hash"), "{chain0:?}");
    assert_eq!(replay_from(&store, Some(folds)).state_hash, genesis.state_hash);

    // The CLI says the same: the false claim is a finding from genesis and a dispute from
    // the checkpoint; the state hash is genesis'.
    drop(store);
    let keys: Vec<String> = (0..3).map(|i| validator_key(i).validator().to_hex()).collect();
    let keys = keys.join(",");
    let audit = |extra: &[&str]| {
        let out =
            Command::new(af_bin()).args(["audit", "--data"]).arg(data).arg("--json").args(extra).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let whole = audit(&[]);
    let folds_dir = data.join(FOLDS_DIR);
    let started = audit(&["--from-checkpoint", folds_dir.to_str().unwrap(), "--countersigners", &keys]);
    assert_eq!(whole["state_hash"], started["state_hash"]);
    assert_eq!(whole["state_hash"].as_str().unwrap(), genesis.state_hash.to_hex());
    assert_eq!(whole["checkpoint_claims"]["false_claims"].as_array().unwrap().len(), 1);
    assert_eq!(started["checkpoint_claims"]["false_claims"].as_array().unwrap().len(), 0);
    assert_eq!(started["checkpoint_claims"]["disputed"].as_array().unwrap().len(), 1);
    assert!(whole["from_checkpoint"].is_null());
    let chains = started["from_checkpoint"]["chains"].as_array().unwrap();
    assert!(chains.iter().all(|c| c["from"]["point"]["height"] == 2 * CHECKPOINT_EVERY - 1), "{chains:?}");
    assert!(started["from_checkpoint"]["trusts"].as_str().unwrap().contains("countersigners"));
    let text = Command::new(af_bin())
        .args(["audit", "--data"])
        .arg(data)
        .args(["--from-checkpoint", folds_dir.to_str().unwrap(), "--countersigners", &keys])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("started from fold checkpoints") && text.contains("DISPUTED: "), "{text}");
    assert!(!text.contains("FOUND: "), "{text}");
    // Without a list or a chain there is no one to count: refused, by name.
    let out = Command::new(af_bin())
        .args(["audit", "--data"])
        .arg(data)
        .args(["--from-checkpoint", folds_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("who may countersign") && said.contains("--countersigners"), "{said}");
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn an_auditor_starts_from_folds_a_node_serves_or_an_archive_holds() {
    use crate::http_logs::{mirror_into, runtime, serve_node};
    let runtime = runtime();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let store = network_with_claims(dirs[0].path());
    let genesis = replay_from(&store, None).state_hash;
    // `af ledger publish` copies the kept folds beside the logs.
    let archive = dirs[1].path().join("archive");
    let site = af::http::archive::Site::open(archive.to_str().unwrap()).unwrap();
    let report = af::http::publish::publish(&store, None, &site, &mut |_| {}).unwrap();
    assert_eq!(report.folds_written, 6, "two per log");
    let url = serve_node(&runtime, store);

    // An auditor mirrors the node and starts from the folds it serves.
    let copy = std::sync::Arc::new(Store::create(dirs[2].path()).unwrap());
    let mirrored = mirror_into(&runtime, &copy, &url);
    assert!(!mirrored.found_fault() && !mirrored.failed(), "{mirrored:?}");
    for source in [url.as_str(), archive.to_str().unwrap()] {
        let folds = af::http::folds::FoldSite::open(source).unwrap();
        let (started, start) =
            af::audit::checkpoint_start::start_folds(&copy, &honest(None), source, &|p| folds.read(p)).unwrap();
        assert_eq!(started.len(), 3, "{source}: {start:?}");
        assert_eq!(replay_from(&copy, Some(started)).state_hash, genesis, "{source}");
    }
    // A fold the node does not keep is 404, said as absent; a height not spelled as one
    // is refused.
    let v0 = validator_key(0).validator();
    let (status, body) = crate::http_logs::fetch(&format!("{url}af/v1/log/{}/fold/5", v0.to_hex()));
    assert_eq!(status, 404, "{body}");
    let (status, _) = crate::http_logs::fetch(&format!("{url}af/v1/log/{}/fold/0719", v0.to_hex()));
    assert_eq!(status, 404);
    // A server that answers with other bytes is passed over by name; the log folds from
    // genesis and the state is the same.
    let liar = dirs[1].path().join("liar");
    copy_dir(&archive, &liar);
    let fold = liar.join(af::replay::fold_checkpoints::fold_path(&v0, 2 * CHECKPOINT_EVERY - 1));
    std::fs::write(&fold, b"not a fold").unwrap();
    let folds = af::http::folds::FoldSite::open(liar.to_str().unwrap()).unwrap();
    let (started, start) =
        af::audit::checkpoint_start::start_folds(&copy, &honest(None), "liar", &|p| folds.read(p)).unwrap();
    assert_eq!(started.len(), 2);
    let chain0 = start.chains.iter().find(|c| c.validator == v0).unwrap();
    assert!(chain0.from.is_none() && chain0.passed_over[0].contains("hash"), "{chain0:?}");
    assert_eq!(replay_from(&copy, Some(started)).state_hash, genesis);
}

fn unix_ms() -> u64 {
    af::clock::unix_ms()
}

/// Issue 73's forgery: keys with no chain presence each sign, in a log of their own, a
/// claim to a fold of validator 0's log with one value changed, and serve those bytes.
/// Counting the logs held, they and the one lying validator make a majority of six and
/// the audit reaches a false state; counting the validators the chain lists, the start
/// is the honest point, the state is genesis', and no one is named false for it.
#[test]
fn keys_the_chain_does_not_list_cannot_countersign_a_checkpoint() {
    use af::chain::local::LocalChain;
    use af::chain::local_api::router;
    use af::chain::local_client::LocalClient;
    use af::chain::{Chain, LedgerCommitment};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let store = network_with_claims(data);
    let v0 = validator_key(0).validator();
    let height = 2 * CHECKPOINT_EVERY - 1;
    // The forged fold: the honest one with a count changed, hashed, served beside it.
    let folds = tempfile::tempdir().unwrap();
    copy_dir(&data.join(FOLDS_DIR), folds.path());
    let honest_file = af::replay::fold_checkpoints::fold_file(folds.path(), &v0, height);
    let honest_bytes = std::fs::read(&honest_file).unwrap();
    let honest_point = af::ledger::event::FoldPoint {
        validator: v0,
        height,
        block_hash: store.signed_headers(&v0, height, height).unwrap()[0].0.hash(),
        fold_hash: af::bytes::Hash32(*blake3::hash(&honest_bytes).as_bytes()),
    };
    let mut forged = af::replay::fold_checkpoints::decode_fold(&honest_bytes, &honest_point).unwrap();
    forged.checkpoints.points.clear();
    forged.n_events += 1;
    let forged_bytes = af::ledger::codec::encode(
        &af::replay::checkpoint_record::FoldBytes(&forged),
        "fold",
        af::replay::fold_checkpoints::MAX_FOLD_BYTES,
    )
    .unwrap();
    let forged_point = af::ledger::event::FoldPoint {
        fold_hash: af::bytes::Hash32(*blake3::hash(&forged_bytes).as_bytes()),
        ..honest_point
    };
    // Served where the forgers serve folds: the same place, the honest one is gone.
    std::fs::write(&honest_file, &forged_bytes).unwrap();
    let forgers: Vec<usize> = (10..13).collect();
    for &i in &forgers {
        let claim =
            FoldCheckpoint { fold_version: af::replay::fold_checkpoints::FOLD_VERSION, points: vec![forged_point] };
        let sealed = seal(validator_key(i).signing_key(), None, START_MS, vec![Event::FoldCheckpoint(claim)]).unwrap();
        store.append(&sealed).unwrap();
    }
    let site = af::http::folds::FoldSite::open(folds.path().to_str().unwrap()).unwrap();
    let genesis = replay_from(&store, None).state_hash;
    let forged_store_hash = {
        let everyone: std::collections::BTreeSet<_> = store.tips().unwrap().into_iter().map(|(v, _)| v).collect();
        let all = Countersigners::new(everyone, None, "every log held");
        let (started, start) =
            af::audit::checkpoint_start::start_folds(&store, &all, "forged", &|p| site.read(p)).unwrap();
        let chain0 = start.chains.iter().find(|c| c.validator == v0).unwrap();
        // 3 forgers of 6 logs do not reach the majority of 4 alone: the honest point has
        // 2; neither is taken, and log 0 folds from genesis.
        assert!(chain0.from.is_none(), "{chain0:?}");
        replay_from(&store, Some(started)).state_hash
    };
    assert_eq!(forged_store_hash, genesis);
    // A fourth forger makes them a majority of the seven logs held: that list takes the
    // forged point and reaches a state that is not genesis'. This is what counting logs
    // held allowed.
    let claim = FoldCheckpoint { fold_version: af::replay::fold_checkpoints::FOLD_VERSION, points: vec![forged_point] };
    let sealed = seal(validator_key(13).signing_key(), None, START_MS, vec![Event::FoldCheckpoint(claim)]).unwrap();
    store.append(&sealed).unwrap();
    let genesis = replay_from(&store, None).state_hash;
    let everyone: std::collections::BTreeSet<_> = store.tips().unwrap().into_iter().map(|(v, _)| v).collect();
    let all = Countersigners::new(everyone, None, "every log held");
    let (started, start) = af::audit::checkpoint_start::start_folds(&store, &all, "forged", &|p| site.read(p)).unwrap();
    let chain0 = start.chains.iter().find(|c| c.validator == v0).unwrap();
    assert_eq!(chain0.from.as_ref().map(|a| a.point), Some(forged_point), "{chain0:?}");
    assert_ne!(replay_from(&store, Some(started)).state_hash, genesis, "the forgery works when logs held vote");

    // The chain lists the three honest validators (permits, and commitments naming their
    // ledger keys); a forger registered as a miner commits its key too, and is no
    // validator.
    let chain_dir = tempfile::tempdir().unwrap();
    let chain = std::sync::Arc::new(LocalChain::open(chain_dir.path(), 1_000, 360, unix_ms).unwrap());
    let runtime = crate::http_logs::runtime();
    let addr = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, router(chain)).await.unwrap() });
        let admin = LocalClient::new(&addr, 1, None).unwrap();
        for (i, permit) in [(0, true), (1, true), (2, true), (10, false)] {
            let hotkey = format!("hotkey{i}");
            admin.register(&hotkey, permit).await.unwrap();
            let key = validator_key(i).validator();
            let tip = store.tip(&key).unwrap().unwrap();
            let commitment =
                LedgerCommitment { tip_hash: tip.hash, ledger_key: key, tip_height: tip.height, protocol: None };
            LocalClient::new(&addr, 1, Some(hotkey)).unwrap().commit(&commitment).await.unwrap();
        }
        addr
    });
    drop(store);
    let out = Command::new(af_bin())
        .args(["audit", "--json", "--data"])
        .arg(data)
        .args(["--from-checkpoint", folds.path().to_str().unwrap(), "--chain", &format!("local:{addr}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let start = &report["from_checkpoint"];
    assert_eq!((start["n_countersigners"].as_u64(), start["quorum"].as_u64()), (Some(3), Some(2)), "{start}");
    assert_eq!(start["n_not_listed"].as_u64(), Some(4), "{start}");
    assert!(start["named_by"].as_str().unwrap().contains(&addr), "{start}");
    // Log 0's honest point has two listed countersigners, but its fold here is the
    // forged one, which does not hash to it: passed over by name, folded from genesis.
    let chain0 = start["chains"].as_array().unwrap().iter().find(|c| c["validator"] == v0.to_hex()).unwrap();
    assert!(chain0["from"].is_null(), "{chain0}");
    assert!(chain0["passed_over"][0].as_str().unwrap().contains("hash"), "{chain0}");
    assert_eq!(report["state_hash"].as_str().unwrap(), genesis.to_hex());
    // No listed validator is named false on the checkpoint's strength: log 0 folded from
    // genesis, so the lying claims about it are findings against the liars alone.
    let false_claimers: std::collections::BTreeSet<String> = report["checkpoint_claims"]["false_claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[0].as_str().unwrap().to_string())
        .collect();
    assert!(!false_claimers.contains(&v0.to_hex()) && !false_claimers.contains(&validator_key(1).validator().to_hex()));
    assert!(false_claimers.contains(&validator_key(10).validator().to_hex()), "{false_claimers:?}");
}
