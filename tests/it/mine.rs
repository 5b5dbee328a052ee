//! `af mine` against the local stand-in chain: commitments in ledger-spec/13's format,
//! refusals by name, and `af mine status` showing what validators will see, sybil
//! collapse included.

use crate::chain_local::serve;
use crate::validator_cli::miner;
use crate::{af, stdout};

fn json(args: &[&str]) -> serde_json::Value {
    let output = af(args);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_str(&stdout(&output)).unwrap()
}

#[test]
fn miners_commit_and_see_the_queue_validators_will_build() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
    let chain = format!("local:{}", server.1);
    let served = miner("perfect");
    for hotkey in ["5First", "5Copy", "5Other"] {
        assert!(af(&["chain", "register", "--chain", &chain, "--hotkey", hotkey]).status.success());
    }
    let commit = |hotkey: &str, model: &str, revision: &str, endpoint: &str| {
        af(&[
            "mine",
            "commit",
            "--chain",
            &chain,
            "--hotkey",
            hotkey,
            "--model",
            model,
            "--revision",
            revision,
            "--endpoint",
            endpoint,
            "--json",
        ])
    };
    let first = commit("5First", "m", "r1", &served.1);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let first: serde_json::Value = serde_json::from_str(&stdout(&first)).unwrap();
    assert_eq!(first["commitment"]["model"], "m");
    std::thread::sleep(std::time::Duration::from_millis(250)); // a later block
    assert!(commit("5Copy", "m", "r1", "http://127.0.0.1:9").status.success());
    assert!(commit("5Other", "m2", "r1", "chutes:org-m2").status.success());

    // The chain holds the spec's bytes: compact JSON in Raw fields.
    let records = json(&["chain", "commitments", "--chain", &chain, "--json"]);
    let mine = records.as_array().unwrap().iter().find(|r| r["hotkey"] == "5First").unwrap();
    let bytes: Vec<u8> =
        mine["fields"].as_array().unwrap().iter().flat_map(|f| hex::decode(f.as_str().unwrap()).unwrap()).collect();
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        format!(r#"{{"model":"m","revision":"r1","endpoint":"{}"}}"#, served.1)
    );
    // ... and reads them back as the miner wrote them, in JSON and in words.
    assert_eq!(mine["miner"], serde_json::json!({"model": "m", "revision": "r1", "endpoint": served.1}));
    let text = stdout(&crate::af(&["chain", "commitments", "--chain", &chain]));
    assert!(text.contains(&format!("5First  block {}: miner m@r1 at {}", mine["block"], served.1)), "{text}");

    let status = json(&["mine", "status", "--chain", &chain, "--hotkey", "5First", "--json"]);
    assert_eq!(status["registered"], true);
    assert_eq!(status["queue_position"], 0);
    assert_eq!(status["models"]["ok"], true, "{status}");
    assert_eq!(status["models"]["ids"], serde_json::json!(["m"]));
    // The later commitment of the same model and revision is a duplicate of the first.
    let copy = json(&["mine", "status", "--chain", &chain, "--hotkey", "5Copy", "--json"]);
    assert_eq!(copy["queue_position"], serde_json::Value::Null);
    assert_eq!(copy["skipped"]["reason"], "duplicate");
    assert_eq!(copy["skipped"]["kept_by"], "5First");
    assert_eq!(copy["models"]["ok"], false);
    let other = json(&["mine", "status", "--chain", &chain, "--hotkey", "5Other", "--json"]);
    assert_eq!((other["queue_position"].as_u64(), &other["models"]), (Some(1), &serde_json::Value::Null));

    // Refused by name, nothing committed.
    let unregistered = commit("5Nobody", "m", "r", "http://h");
    assert_eq!(unregistered.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unregistered.stderr).contains("not registered"));
    let bad = commit("5First", "m", "r", "ftp://h");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("endpoint: must be an http(s)://"));
    let long = "x".repeat(129);
    assert!(String::from_utf8_lossy(&commit("5First", &long, "r", "http://h").stderr).contains("model: 129 bytes"));
    assert_eq!(
        json(&["mine", "status", "--chain", &chain, "--hotkey", "5First", "--json"])["commitment"]["revision"],
        "r1"
    );
}

#[test]
fn a_deregistered_keeper_hands_its_model_on_and_a_reregistered_miner_must_commit_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
    let chain = format!("local:{}", server.1);
    let register = |hotkey: &str, extra: &[&str]| {
        let mut args = vec!["chain", "register", "--chain", &chain, "--hotkey", hotkey, "--json"];
        args.extend_from_slice(extra);
        af(&args)
    };
    let status = |hotkey: &str| json(&["mine", "status", "--chain", &chain, "--hotkey", hotkey, "--json"]);
    for hotkey in ["5Keeper", "5Copy"] {
        assert!(register(hotkey, &[]).status.success());
    }
    for hotkey in ["5Keeper", "5Copy"] {
        let args =
            ["mine", "commit", "--chain", &chain, "--hotkey", hotkey, "--model", "m", "--revision", "r1", "--endpoint"];
        assert!(af(&[&args[..], &["http://127.0.0.1:9", "--json"]].concat()).status.success());
        std::thread::sleep(std::time::Duration::from_millis(250)); // a later block
    }
    assert_eq!(status("5Copy")["skipped"]["kept_by"], "5Keeper");

    // A new hotkey takes the keeper's uid: the keeper is deregistered, and the copy,
    // now the oldest commitment of that model, is the one queued.
    let taker = register("5Taker", &["--replace-uid", "0"]);
    assert!(taker.status.success(), "{}", String::from_utf8_lossy(&taker.stderr));
    let taker: serde_json::Value = serde_json::from_str(&stdout(&taker)).unwrap();
    assert_eq!(taker["uid"], 0);
    let keeper = status("5Keeper");
    assert_eq!((keeper["registered"].as_bool(), keeper["queue_position"].as_u64()), (Some(false), None), "{keeper}");
    let copy = status("5Copy");
    assert_eq!(copy["queue_position"], 0, "{copy}");
    let taker = status("5Taker");
    assert_eq!((taker["uid"].as_u64(), &taker["commitment"]), (Some(0), &serde_json::Value::Null), "{taker}");

    // The keeper registers again (a new uid): its commitment is from before, so stale.
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&stdout(&register("5Keeper", &[]))).unwrap()["uid"], 2);
    let keeper = status("5Keeper");
    assert_eq!(keeper["skipped"]["reason"], "stale", "{keeper}");
    assert_eq!(status("5Copy")["queue_position"], 0);

    // Refused by name: a uid nobody holds, and a hotkey already holding another uid.
    let out = register("5Late", &["--replace-uid", "9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("replace_uid 9 is not a registered uid"));
    let out = register("5Copy", &["--replace-uid", "0"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("5Copy is already registered as uid 1"));
}

/// `af mine status --data` shows the queue the validator of that directory will play,
/// by the function the validator calls: after a match the champion is defending, the
/// loser is not queued again, a new revision is first; a revision with `@` is refused.
#[test]
fn status_shows_the_queue_the_validator_will_play_after_its_matches() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
    let chain = format!("local:{}", server.1);
    let (perfect, random) = (miner("perfect"), miner("random"));
    assert!(af(&["chain", "register", "--chain", &chain, "--hotkey", "5Val", "--validator"]).status.success());
    let commit = |hotkey: &str, revision: &str, endpoint: &str| {
        assert!(af(&["chain", "register", "--chain", &chain, "--hotkey", hotkey]).status.success());
        let args = ["mine", "commit", "--chain", &chain, "--hotkey", hotkey, "--model", "m", "--revision", revision];
        af(&[&args[..], &["--endpoint", endpoint]].concat())
    };
    assert!(commit("5Champ", "r1", &perfect.1).status.success());
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert!(commit("5Loser", "r2", &random.1).status.success());
    let at = commit("5At", "r@1", &perfect.1);
    assert_eq!(at.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&at.stderr).contains("revision: must not contain '@'"), "refused by name");

    let data = dir.path().join("validator");
    let config = dir.path().join("validator.toml");
    std::fs::write(
        &config,
        format!("[evaluation]\nwindow = 8\n\n[chain]\nendpoint = \"{chain}\"\nnetuid = 1\ndiscover_every_ms = 200\n"),
    )
    .unwrap();
    let output = std::process::Command::new(crate::af_bin())
        .args([
            "validate",
            "--data",
            data.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--max-matches",
            "1",
        ])
        .env("AF_CHAIN__HOTKEY", "5Val")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let status = |hotkey: &str| {
        json(&["mine", "status", "--chain", &chain, "--hotkey", hotkey, "--data", data.to_str().unwrap(), "--json"])
    };
    let champion = status("5Champ");
    assert_eq!((champion["champion"].as_bool(), &champion["queue_position"]), (Some(true), &serde_json::Value::Null));
    let loser = status("5Loser");
    assert_eq!(loser["queue_position"], serde_json::Value::Null, "{loser}");
    assert_eq!(loser["skipped"]["reason"], "already_played", "{loser}");
    assert_eq!(loser["matches"].as_array().unwrap().len(), 1);
    // Said as what happened: it lost, to whom, in which match.
    let played_in = &loser["already_played_in"];
    assert_eq!(played_in["match_id"], loser["matches"][0]["match_id"], "{loser}");
    assert_eq!(
        (played_in["opponent"].as_str(), played_in["verdict"].as_str()),
        (Some("5Champ"), Some("champion stayed"))
    );
    assert_eq!(played_in["model"], "m@r2");
    let text = af(&["mine", "status", "--chain", &chain, "--hotkey", "5Loser", "--data", data.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    let match_id = played_in["match_id"].as_str().unwrap();
    assert!(text.contains(&format!("in match {match_id} against 5Champ: it lost")), "{text}");
    assert!(commit("5Late", "r3", &perfect.1).status.success());
    let late = status("5Late");
    assert_eq!(late["queue_position"], 0, "the only one queued is first: {late}");
    assert_eq!(late["queue_of"].as_str().map(str::len), Some(64));
}

/// A validator with a chain but no identity on it refuses to start, naming what to pass
/// and how to register; `--watch-only` runs without one on purpose.
#[test]
fn a_validator_without_a_registered_hotkey_refuses_to_start_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
    let chain = format!("local:{}", server.1);
    let data = dir.path().join("validator");
    let validate = |extra: &[&str]| {
        let mut args = vec!["validate", "--data", data.to_str().unwrap(), "--chain", &chain, "--max-matches", "0"];
        args.extend_from_slice(extra);
        af(&args)
    };
    let none = validate(&[]);
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert_eq!(none.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no hotkey to sign with") && stderr.contains("--hotkey") && stderr.contains("--watch-only")
    );
    let unregistered = validate(&["--hotkey", "5Nobody"]);
    let stderr = String::from_utf8_lossy(&unregistered.stderr);
    assert_eq!(unregistered.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("5Nobody is not registered") && stderr.contains("af chain register"), "{stderr}");
    // On purpose without an identity: it starts and watches the chain for contenders.
    let mut watching = std::process::Command::new(crate::af_bin())
        .args(["validate", "--data", data.to_str().unwrap(), "--chain", &chain, "--watch-only"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(watching.try_wait().unwrap().is_none(), "--watch-only starts and keeps watching");
    let _ = watching.kill();
    let _ = watching.wait();
}

/// On the local chain, wallet flags name the wallet's hotkey as on subtensor: its ss58
/// address is what registers, not the literal hotkey name.
#[test]
fn wallet_flags_on_the_local_chain_mean_the_wallets_hotkey() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
    let chain = format!("local:{}", server.1);
    let wallets = crate::repo_path("fixtures/wallet");
    let (chain, wallets) = (chain.as_str(), wallets.to_str().unwrap());
    let register = move |hotkey: &'static str, extra: &[&'static str]| {
        let flags = ["chain", "register", "--chain", chain, "--wallet", "alice", "--hotkey", hotkey];
        [&flags[..], &["--wallets-dir", wallets], extra].concat()
    };
    let registered = json(&register("plain", &["--json"]));
    assert_eq!(registered["hotkey"], "5DoKc2g83hZXkT1FA1YbjG3YuK8eXzkYkS1z5PGVg6sSP9yA");
    // A path as a hotkey name (the coldkey beside the hotkeys) is refused by name.
    let coldkey = af(&register("../coldkey", &[]));
    assert_eq!(coldkey.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&coldkey.stderr).contains("must be a plain name"));
    let none = af(&["chain", "register", "--chain", chain]);
    assert!(String::from_utf8_lossy(&none.stderr).contains("--wallet NAME"), "the error names the wallet flags");
}

/// A plain `af node` that reads a chain lists the queue on its miners page: the one a
/// validator following the network would play, said so, with each miner's commitment
/// block; its subnet page counts blocks since to the chain's head.
#[test]
fn a_node_reading_a_chain_lists_the_queue_a_follower_would_play() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
    let chain = format!("local:{}", server.1);
    assert!(af(&["chain", "register", "--chain", &chain, "--hotkey", "5Queued"]).status.success());
    let commit = ["mine", "commit", "--chain", &chain, "--hotkey", "5Queued", "--model", "m", "--revision", "r1"];
    assert!(af(&[&commit[..], &["--endpoint", "http://127.0.0.1:9"]].concat()).status.success());
    let data = dir.path().join("node");
    let mut node = std::process::Command::new(crate::af_bin())
        .args(["node", "--data", data.to_str().unwrap(), "--http", "127.0.0.1:0", "--chain", &chain])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let address = data.join(af::http::ADDRESS_FILE);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !address.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let base = std::fs::read_to_string(&address).unwrap().trim().to_string();
    let get = |page: &str| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async { reqwest::get(format!("{base}{page}")).await.unwrap().text().await.unwrap() })
    };
    let miners = get("miners.html");
    let subnet = get("subnet.html");
    let _ = node.kill();
    let _ = node.wait();
    assert!(miners.contains("queued #1 of 1"), "{miners}");
    assert!(miners.contains("a validator following the network"), "{miners}");
    assert!(miners.contains("committed at block"), "{miners}");
    assert!(subnet.contains("the chain's head when this page was made"), "{subnet}");
}
