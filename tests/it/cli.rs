//! The `af` binary as users run it: exit codes, JSON output, key handling, proofs.

use crate::{af, stdout};
use std::os::unix::fs::PermissionsExt;

fn json(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(output)))
}

#[test]
fn key_generate_is_private_and_never_prints_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.key");
    let output = af(&["key", "generate", "--out", path.to_str().unwrap(), "--json"]);
    assert!(output.status.success());
    let public = json(&output)["public_key"].as_str().unwrap().to_string();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let secret = file["secret_seed"].as_str().unwrap();
    assert!(!stdout(&output).contains(secret) && !String::from_utf8_lossy(&output.stderr).contains(secret));
    // Never overwritten.
    let again = af(&["key", "generate", "--out", path.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));
    assert_eq!(stdout(&af(&["key", "show", "--key", path.to_str().unwrap()])).trim(), public);
    // A key readable by others is refused.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let loose = af(&["key", "show", "--key", path.to_str().unwrap()]);
    assert_eq!(loose.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&loose.stderr).contains("chmod 600"));
}

#[test]
fn ledger_commands_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let init = json(&af(&["ledger", "init", "--data", data, "--json"]));
    assert_eq!(init["created_key"], true);
    assert_eq!(json(&af(&["ledger", "init", "--data", data, "--json"]))["created_key"], false);
    let demo = af(&["ledger", "demo", "--data", data, "--blocks", "5", "--events-per-block", "8", "--json"]);
    assert!(demo.status.success());
    assert_eq!(json(&demo)["tip_height"], 4);

    let chains = json(&af(&["ledger", "show", "--data", data, "--json"]));
    assert_eq!(chains[0]["n_blocks"], 5);
    assert_eq!(chains[0]["validator"], init["validator"]);
    let blocks =
        json(&af(&["ledger", "show", "--data", data, "--validator", init["validator"].as_str().unwrap(), "--json"]));
    assert_eq!(blocks.as_array().unwrap().len(), 5);
    assert_eq!(blocks[1]["header"]["prev_hash"], blocks[0]["hash"]);
    let block = json(&af(&["ledger", "show", "--data", data, "--height", "2", "--json"]));
    assert_eq!(block["block"]["events"].as_array().unwrap().len(), 8);

    let export = af(&["ledger", "export", "--data", data, "--format", "jsonl"]);
    let lines: Vec<serde_json::Value> = stdout(&export).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 40);
    assert_eq!(lines[17]["height"], 2);
    assert_eq!(lines[17]["event_idx"], 1);

    // Find through the index, then prove and verify that transcript.
    let challenge = lines[17]["event"]["transcript"]["challenge_id"].as_str().unwrap();
    let found = json(&af(&["ledger", "find", "--data", data, "--challenge-id", challenge, "--json"]));
    assert!(found.as_array().unwrap().iter().any(|l| l["height"] == 2 && l["event_idx"] == 1), "{found}");
    let by_miner = json(&af(&["ledger", "find", "--data", data, "--miner", af::ledger::demo::DEMO_CHAMPION, "--json"]));
    assert_eq!(by_miner.as_array().unwrap().len(), 20);

    let proof = af(&["ledger", "prove", "--data", data, "--height", "2", "--event", "1"]);
    assert!(proof.status.success());
    let proof_path = dir.path().join("proof.json");
    std::fs::write(&proof_path, &proof.stdout).unwrap();
    let checkpoint = af(&["ledger", "checkpoint", "--data", data]);
    let checkpoint_path = dir.path().join("checkpoint.txt");
    std::fs::write(&checkpoint_path, &checkpoint.stdout).unwrap();
    let verified = af(&[
        "ledger",
        "verify-proof",
        "--file",
        proof_path.to_str().unwrap(),
        "--checkpoint",
        checkpoint_path.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(verified.status.code(), Some(0), "{}", stdout(&verified));
    assert_eq!(json(&verified)["tip"]["height"], 4);
    let verified_cp = af(&["ledger", "verify-checkpoint", "--file", checkpoint_path.to_str().unwrap(), "--data", data]);
    assert_eq!(verified_cp.status.code(), Some(0), "{}", stdout(&verified_cp));

    // A doctored proof (the reward changed) fails with exit 3.
    let mut doctored: serde_json::Value = serde_json::from_slice(&proof.stdout).unwrap();
    doctored["event"]["transcript"]["reward_milli"] = serde_json::json!(0);
    std::fs::write(&proof_path, serde_json::to_vec(&doctored).unwrap()).unwrap();
    assert_eq!(af(&["ledger", "verify-proof", "--file", proof_path.to_str().unwrap()]).status.code(), Some(3));
    // Bytes changed consistently too: the Merkle path no longer leads to the root.
    let mut rebuilt: serde_json::Value = serde_json::from_slice(&proof.stdout).unwrap();
    let mut bytes = hex::decode(rebuilt["event_bytes"].as_str().unwrap()).unwrap();
    let n = bytes.len();
    bytes[n - 30] ^= 1;
    rebuilt["event_bytes"] = serde_json::json!(hex::encode(&bytes));
    std::fs::write(&proof_path, serde_json::to_vec(&rebuilt).unwrap()).unwrap();
    assert_eq!(af(&["ledger", "verify-proof", "--file", proof_path.to_str().unwrap()]).status.code(), Some(3));

    // A checkpoint that does not match the store fails.
    let forged = String::from_utf8(checkpoint.stdout).unwrap().replacen("\n5\n", "\n4\n", 1);
    std::fs::write(&checkpoint_path, forged).unwrap();
    assert_eq!(
        af(&["ledger", "verify-checkpoint", "--file", checkpoint_path.to_str().unwrap()]).status.code(),
        Some(3)
    );
}

/// `af ledger verify --threads N` checks the same blocks with the same verdict on any
/// number of threads, as `af audit --threads` does.
#[test]
fn verify_gives_one_verdict_on_any_number_of_threads() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    crate::demo_log(&data, 40, 8, 512);
    let d = data.to_str().unwrap();
    let report = |threads: &str| {
        let output = af(&["ledger", "verify", "--data", d, "--threads", threads, "--json"]);
        (output.status.code(), json(&output))
    };
    let (code, all) = report("0");
    assert_eq!(code, Some(0), "{all}");
    assert_eq!((all["n_blocks"].as_u64(), all["n_events"].as_u64()), (Some(40), Some(320)), "{all}");
    // A thread count past any machine is refused by name, before anything is opened.
    let output = af(&["ledger", "verify", "--data", d, "--threads", "100000"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--threads"), "{output:?}");
    for threads in ["1", "2"] {
        let (code, some) = report(threads);
        assert_eq!(code, Some(0));
        assert_eq!(
            (&some["n_blocks"], &some["n_events"], &some["ok"]),
            (&all["n_blocks"], &all["n_events"], &all["ok"])
        );
    }
}

#[test]
fn missing_store_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = af(&["ledger", "verify", "--data", dir.path().join("nope").to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("af ledger init"));
}

#[test]
fn env_commands() {
    let list = json(&af(&["env", "list", "--json"]));
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tictactoe", "mult", "sat", "coin", "abd", "ded"]);
    let test = json(&af(&["env", "test", "--env", "mult", "--seed", "3", "--json"]));
    let (a, b) = (test["observation"]["a"].as_u64().unwrap(), test["observation"]["b"].as_u64().unwrap());
    let id = test["info"]["challenge_id"].as_str().unwrap();
    let right = json(&af(&[
        "env",
        "score",
        "--env",
        "mult",
        "--challenge-id",
        id,
        "--answer",
        &format!("Answer: {}", a * b),
        "--json",
    ]));
    assert_eq!(right["reward_milli"], 1000);
    let wrong = json(&af(&["env", "score", "--env", "mult", "--challenge-id", id, "--answer", "12", "--json"]));
    assert_eq!(wrong["reward_milli"], 0);
    let same = json(&af(&["env", "test", "--env", "mult", "--challenge-id", id, "--json"]));
    assert_eq!(same["messages"], test["messages"]);

    // Multi-turn: a transcript file; an illegal first move loses.
    let ttt = json(&af(&["env", "test", "--env", "tictactoe", "--seed", "1", "--json"]));
    let board = ttt["observation"]["board"].as_array().unwrap();
    let occupied = board.iter().position(|c| c != 0);
    let move_text = match occupied {
        Some(cell) => format!("Answer: {cell}"),
        None => "Answer: nine".to_string(),
    };
    let mut messages = ttt["messages"].as_array().unwrap().clone();
    messages.push(serde_json::json!({ "role": "assistant", "content": move_text }));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    std::fs::write(&path, serde_json::to_vec(&messages).unwrap()).unwrap();
    let id = ttt["info"]["challenge_id"].as_str().unwrap();
    let scored = json(&af(&[
        "env",
        "score",
        "--env",
        "tictactoe",
        "--challenge-id",
        id,
        "--transcript",
        path.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(scored["reward_milli"], -1000);

    let unknown = af(&["env", "test", "--env", "chess"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("known: tictactoe, mult, sat, coin, abd, ded"));
}

#[test]
fn demo_tour_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let output = af(&["demo", "--data", data.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = stdout(&output);
    assert!(text.lines().any(|l| l.starts_with("all checks passed")), "{text}");
    // Its blank lines are lines, not escaped line breaks inside one.
    assert!(!text.contains("\\u{a}"), "{text}");
    // What the demo says, the audit confirms: the log it leaves is clean.
    let audit = af(&["audit", "--data", data.to_str().unwrap(), "--json"]);
    assert_eq!(audit.status.code(), Some(0), "{}", stdout(&audit));
    // A second run refuses to write over it without --fresh.
    assert_eq!(af(&["demo", "--data", data.to_str().unwrap()]).status.code(), Some(1));
}

/// Inputs that are not what they claim come back as short errors, never echoed whole, and
/// a key "file" that is a pipe (or a device) is refused without reading it.
#[test]
fn bad_inputs_are_quoted_short_and_key_files_must_be_regular() {
    let long = "x".repeat(100_000); // one argument can be at most 128 KiB
    for args in [
        vec!["env", "test", "--env", long.as_str()],
        vec!["miner", "serve", "--listen", "127.0.0.1:0", "--policy", long.as_str()],
        vec!["ledger", "find", "--data", "/nonexistent", "--challenge-id", long.as_str()],
    ] {
        let output = af(&args);
        assert_ne!(output.status.code(), Some(0), "{:?}", &args[..2]);
        assert!(output.stderr.len() < 2_000, "{:?}: {} bytes of error", &args[..2], output.stderr.len());
    }
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("key");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o600)).unwrap();
    let output = af(&["key", "show", "--key", fifo.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a regular file"));
}

/// A wallet's key file given to `af key show` is named as such, with the command that
/// reads it; `af wallet show` shows the hotkey AF_HOTKEY_PHRASE gives, as chain commands
/// sign with it first.
#[test]
fn wallet_files_and_the_phrase_are_pointed_to_the_right_command() {
    let dir = tempfile::tempdir().unwrap();
    let wallets = dir.path().join("wallets");
    std::fs::create_dir_all(wallets.join("alice/hotkeys")).unwrap();
    for file in ["coldkeypub.txt", "hotkeys/plain", "hotkeys/plainpub.txt"] {
        let to = wallets.join("alice").join(file);
        std::fs::copy(crate::repo_path("fixtures/wallet/alice").join(file), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let hotkey_file = wallets.join("alice/hotkeys/plain");
    let shown = af(&["key", "show", "--key", hotkey_file.to_str().unwrap()]);
    let error = String::from_utf8_lossy(&shown.stderr);
    assert_eq!(shown.status.code(), Some(1), "{error}");
    assert!(error.contains("Bittensor wallet key file") && error.contains("af wallet show"), "{error}");
    let secret = std::fs::read_to_string(&hotkey_file).unwrap();
    let secret: serde_json::Value = serde_json::from_str(&secret).unwrap();
    assert!(!error.contains(secret["secretPhrase"].as_str().unwrap_or("never")), "{error}");

    let wallet = |phrase: Option<&str>| {
        let mut command = std::process::Command::new(crate::af_bin());
        command.args(["wallet", "show", "--wallets-dir", wallets.to_str().unwrap(), "--wallet", "alice"]);
        command.args(["--hotkey", "plain", "--json"]).env_remove("AF_HOTKEY_PHRASE");
        if let Some(phrase) = phrase {
            command.env("AF_HOTKEY_PHRASE", phrase);
        }
        json(&command.output().unwrap())
    };
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(crate::repo_path("fixtures/wallet/expected.json")).unwrap())
            .unwrap();
    let from_files = wallet(None);
    assert_eq!((&from_files["hotkey"], &from_files["hotkey_source"]), (&expected["plain"], &"secret".into()));
    let from_phrase = wallet(Some("//Alice"));
    assert_eq!(from_phrase["hotkey"], "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY");
    assert_eq!(from_phrase["hotkey_source"], "phrase_env");
    assert_eq!(from_phrase["coldkey"], expected["coldkey"]);
}

/// `af peers` without a status file says which is missing: a node at all, or its
/// networking (something holds the store but never wrote a status).
#[test]
fn peers_without_a_status_says_whether_a_node_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    assert!(af(&["ledger", "init", "--data", data]).status.success());
    let idle = af(&["peers", "--data", data]);
    let error = String::from_utf8_lossy(&idle.stderr);
    assert_eq!(idle.status.code(), Some(1), "{error}");
    assert!(error.contains("no node is running") && error.contains("--listen"), "{error}");
    let _held = af::ledger::store::Store::open(dir.path()).unwrap();
    let running = af(&["peers", "--data", data]);
    let error = String::from_utf8_lossy(&running.stderr);
    assert!(error.contains("has no networking") && error.contains("--listen"), "{error}");
}

/// `af ledger publish` writes the subnet's pages beside `af/v1/`, folded from the logs it
/// published, and writes them again only when they change.
#[test]
fn publish_writes_the_subnet_pages_beside_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let site = dir.path().join("site");
    let (data, site_text) = (data.to_str().unwrap(), site.to_str().unwrap());
    assert!(af(&["ledger", "demo", "--data", data, "--blocks", "3", "--events-per-block", "4"]).status.success());
    let key = json(&af(&["ledger", "show", "--data", data, "--json"]))[0]["validator"].as_str().unwrap().to_string();
    let first = json(&af(&["ledger", "publish", "--data", data, "--out", site_text, "--json"]));
    assert_eq!(first["pages_written"], 4, "{first}");
    let subnet = std::fs::read_to_string(site.join("subnet.html")).unwrap();
    assert!(subnet.contains(&format!("data-validator=\"{key}\"")), "{subnet}");
    assert!(subnet.contains("href=\"miners.html\"") && site.join("af/v1/logs").exists());
    let again = json(&af(&["ledger", "publish", "--data", data, "--out", site_text, "--json"]));
    assert_eq!(again["pages_written"], 0, "unchanged logs, unchanged pages: {again}");
}

/// Issue 75, items 10 and 11: usage errors exit 2 and say what to give. `af transcripts`
/// without `--data` (not with `verify`, which reads a file); a bare port for `af miner
/// serve --listen` is refused with the IP:PORT form and an example.
#[test]
fn usage_errors_exit_2_and_show_the_form_wanted() {
    let output = af(&["transcripts", "--miner", "X"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--data <DATA>"), "{stderr}");
    let output = af(&["miner", "serve", "--listen", "8001"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("give IP:PORT, e.g. 127.0.0.1:8001"), "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.json");
    let output = af(&["transcripts", "verify", missing.to_str().unwrap()]);
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("required arguments"),
        "verify needs no --data: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Errors that name their cause and the next step (issue 75, item 10): nothing listening
/// behind a mirror, a URL that is no af site, a local chain not started, a refused RPC
/// port said at once, and a validator with nothing to play refused before it starts.
#[test]
fn errors_name_their_cause_and_what_to_do_next() {
    let dir = tempfile::tempdir().unwrap();
    let nobody = format!("127.0.0.1:{}", crate::free_port());
    let stderr = |output: &std::process::Output| String::from_utf8_lossy(&output.stderr).into_owned();
    let data = dir.path().join("m");
    let refused = af(&["mirror", "--from", &format!("http://{nobody}/"), "--data", data.to_str().unwrap()]);
    assert!(stderr(&refused).contains("is the node running with --http"), "{}", stderr(&refused));
    // A plain web server, not an af site: every path is 404.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let site = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let not_af = af(&["mirror", "--from", &format!("http://{site}/"), "--data", data.to_str().unwrap()]);
    assert!(
        stderr(&not_af).contains("is not an af site; give the URL of the folder that holds af/v1/"),
        "{}",
        stderr(&not_af)
    );
    let no_chain = af(&["chain", "status", "--chain", &format!("local:{nobody}")]);
    assert!(stderr(&no_chain).contains("start the local chain with `af chain serve"), "{}", stderr(&no_chain));
    let started = std::time::Instant::now();
    let no_node = af(&["chain", "status", "--chain", &format!("subtensor:ws://{nobody}")]);
    assert!(stderr(&no_node).contains("connection refused: nothing listens at"), "{}", stderr(&no_node));
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "said at once, not after the connection deadline");
    let idle = dir.path().join("v");
    let nothing = af(&["validate", "--data", idle.to_str().unwrap()]);
    assert!(stderr(&nothing).starts_with("error: no miners to play"), "the error first: {}", stderr(&nothing));
    assert!(!idle.exists(), "nothing made for a validator with nothing to play");
}
