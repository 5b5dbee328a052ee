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
