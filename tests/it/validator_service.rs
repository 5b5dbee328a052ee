//! `af validate` as a service on a live (stand-in) subnet: no `[[miners]]`, contenders
//! from the chain; it outlives the chain going away and a miner that never answers, keeps
//! setting weights while idle, and stops on SIGTERM as on SIGINT.

use crate::chain_local::{serve_with, Server};
use crate::validator_cli::miner;
use crate::{af, af_bin, free_port, http_get};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The stand-in chain on a fixed port, so that a restart comes back where it was.
fn chain(dir: &std::path::Path, port: u16) -> Server {
    serve_with(dir, &format!("127.0.0.1:{port}"), &["--tempo", "20"])
}

/// A port for the stand-in chain, its endpoint, and a client to change its settings with.
struct Subnet {
    port: u16,
    endpoint: String,
    runtime: tokio::runtime::Runtime,
    client: af::chain::local_client::LocalClient,
}

impl Subnet {
    fn new() -> Subnet {
        let port = free_port();
        Subnet {
            port,
            endpoint: format!("local:127.0.0.1:{port}"),
            runtime: tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap(),
            client: af::chain::local_client::LocalClient::new(&format!("127.0.0.1:{port}"), 1, None).unwrap(),
        }
    }
}

/// Registers `hotkey` and commits model "m" (what `miner()` serves) at `revision` and
/// `url` through `af mine commit`.
pub fn enter(endpoint: &str, hotkey: &str, revision: &str, url: &str) {
    assert!(af(&["chain", "register", "--chain", endpoint, "--hotkey", hotkey]).status.success());
    let out = af(&[
        "mine",
        "commit",
        "--chain",
        endpoint,
        "--hotkey",
        hotkey,
        "--model",
        "m",
        "--revision",
        revision,
        "--endpoint",
        url,
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `af validate` on `config`, its log on a pipe.
fn start_validator(data: &std::path::Path, config: &std::path::Path) -> std::process::Child {
    Command::new(af_bin())
        .args(["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `af validate` on `config`, its log lines collected as they come.
fn spawn_validator(
    data: &std::path::Path,
    config: &std::path::Path,
) -> (std::process::Child, Arc<Mutex<Vec<String>>>, std::thread::JoinHandle<()>) {
    let mut validator = start_validator(data, config);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let lines = lines.clone();
        let stderr = validator.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(line);
            }
        })
    };
    (validator, lines, reader)
}

/// Commits the champion's model, then the contender's (the older commitment is the
/// champion), and registers the validator 5Validator.
fn enter_players(endpoint: &str, champion: &str, contender: &str) {
    enter(endpoint, "5Champion", "champion", champion);
    std::thread::sleep(Duration::from_millis(150));
    enter(endpoint, "5Contender", "contender", contender);
    assert!(af(&["chain", "register", "--chain", endpoint, "--hotkey", "5Validator", "--validator"]).status.success());
}

/// `validator.toml` in `dir`: the `sections` given, blocks sealed every 200 ms, and the
/// stand-in chain at `endpoint` as 5Validator, read every 200 ms.
fn validator_config(dir: &std::path::Path, endpoint: &str, sections: &str) -> std::path::PathBuf {
    let config = dir.join("validator.toml");
    let chain = format!(
        "[ledger]\nblock_max_ms = 200\n[chain]\nendpoint = \"{endpoint}\"\nhotkey = \"5Validator\"\ndiscover_every_ms = 200\n"
    );
    std::fs::write(&config, format!("{sections}{chain}")).unwrap();
    config
}

/// Waits until `lines` (the validator's log lines) satisfy `done`.
fn wait_for(lines: &Arc<Mutex<Vec<String>>>, what: &str, seconds: u64, done: impl Fn(&[String]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !done(&lines.lock().unwrap()) {
        assert!(Instant::now() < deadline, "waited {seconds} s for {what}; log:\n{}", lines.lock().unwrap().join("\n"));
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn count(lines: &[String], event: &str) -> usize {
    lines.iter().filter(|l| l.contains(&format!("\"event\":\"{event}\""))).count()
}

#[test]
fn a_validator_service_outlives_the_chain_and_a_dead_miner_and_sets_weights_while_idle() {
    let dir = tempfile::tempdir().unwrap();
    let Subnet { port, endpoint, runtime, client } = Subnet::new();
    let mut chain_process = Some(chain(&dir.path().join("chain"), port));
    // Weights may go in every 5 blocks (half a second here).
    runtime.block_on(client.settings(serde_json::json!({ "rate_limit_blocks": 5 }))).unwrap();
    let (champion, contender) = (miner("random"), miner("perfect"));
    enter_players(&endpoint, &champion.1, &contender.1);
    let config = validator_config(
        dir.path(),
        &endpoint,
        "[evaluation]\nwindow = 8\n\
         [client]\ntimeout_ms = 2000\nmax_attempts = 2\nbackoff_base_ms = 10\nbackoff_max_ms = 50\n",
    );
    let data = dir.path().join("v");
    // No --max-matches: a service, ended only by a signal.
    let (mut validator, lines, reader) = spawn_validator(&data, &config);
    let validator_guard_pid = validator.id();
    // The contender plays the champion (the oldest commitment), then the queue is empty
    // and the validator waits for commitments instead of ending.
    wait_for(&lines, "the first match and an idle queue", 60, |l| {
        count(l, "match_decided") == 1 && count(l, "queue_empty") >= 1
    });

    // The chain goes away: the validator keeps going, saying so.
    drop(chain_process.take());
    wait_for(&lines, "a failed chain read", 30, |l| count(l, "discovery_failed") >= 1);
    std::thread::sleep(Duration::from_millis(500));
    assert!(validator.try_wait().unwrap().is_none(), "the validator must not exit for the chain");

    // It comes back with its state; a new model enters whose server is down: the miner
    // never answers, every challenge fails, and the validator plays the match out.
    chain_process = Some(chain(&dir.path().join("chain"), port));
    let dead = format!("http://127.0.0.1:{}", free_port());
    enter(&endpoint, "5Dead", "dead", &dead);
    wait_for(&lines, "the dead miner's match", 90, |l| count(l, "match_decided") == 2);
    let decided_at = lines.lock().unwrap().len();

    // Idle again, it keeps sending weights whenever the rate limit allows.
    wait_for(&lines, "weights sent while idle", 30, |l| {
        l[decided_at..].iter().any(|line| line.contains("\"event\":\"weights_set\""))
    });
    // A fresh client: the first one's pooled connection died with the first chain process.
    let client = af::chain::local_client::LocalClient::new(&format!("127.0.0.1:{port}"), 1, None).unwrap();
    let neurons = runtime.block_on(af::chain::Chain::neurons(&client)).unwrap();
    let uid = |hotkey: &str| neurons.iter().find(|n| n.hotkey == hotkey).unwrap().uid;
    let weights = runtime.block_on(af::chain::Chain::weights(&client)).unwrap();
    let ours = weights.iter().find(|(setter, _)| *setter == uid("5Validator")).map(|(_, w)| w.clone());
    assert_eq!(
        ours,
        Some(vec![(uid("5Contender"), u16::MAX)]),
        "all weight to the perfect miner, the champion: {}",
        lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("match_decided") || l.contains("match_started"))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(validator.try_wait().unwrap().is_none());

    // SIGTERM stops it as SIGINT does: the log sealed, exit 130.
    assert!(Command::new("kill").args(["-TERM", &validator_guard_pid.to_string()]).status().unwrap().success());
    let status = validator.wait().unwrap();
    reader.join().unwrap();
    assert_eq!(status.code(), Some(130), "{}", lines.lock().unwrap().join("\n"));
    let verify = af(&["ledger", "verify", "--data", data.to_str().unwrap(), "--json"]);
    assert!(verify.status.success());

    // Chain time is the chain's: the ratio the winner set is dated by its match's start
    // block as the chain reported it, and "now" is a block the log or the chain names.
    let first_start: u64 = {
        let lines = lines.lock().unwrap();
        let line = lines.iter().find(|l| l.contains("\"event\":\"match_started\"")).unwrap();
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        value.pointer("/fields/chain_block").or(value.get("chain_block")).and_then(|v| v.as_u64()).unwrap()
    };
    assert!(first_start > 0, "the stand-in chain's head is past genesis");
    let ratio = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["ratio", "show", "--data", data.to_str().unwrap(), "--json"];
        args.extend_from_slice(extra);
        let out = af(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let from_log = ratio(&[]);
    assert_eq!(from_log["set_at_block"], first_start, "{from_log}");
    assert_eq!(from_log["now_block_from"], "log");
    let logged_now = from_log["now_block"].as_u64().unwrap();
    assert!(logged_now > first_start, "weights were sent after the first match: {from_log}");
    let from_chain = ratio(&["--chain", &endpoint]);
    assert_eq!(from_chain["now_block_from"], "chain");
    assert!(from_chain["now_block"].as_u64().unwrap() >= logged_now, "{from_chain}");
    drop(chain_process);
}

#[test]
fn a_chain_unreachable_at_start_is_waited_for_and_a_bad_chain_spec_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("validator.toml");
    let closed = free_port();
    std::fs::write(&config, format!("[chain]\nendpoint = \"subtensor:ws://127.0.0.1:{closed}\"\n")).unwrap();
    let data = dir.path().join("v");
    let mut validator = start_validator(&data, &config);
    let stderr = validator.stderr.take().unwrap();
    let mut retries = 0;
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        if line.contains("\"event\":\"chain_unreachable\"") {
            retries += 1;
            if retries == 2 {
                break;
            }
        }
    }
    assert_eq!(retries, 2, "it says it is retrying, and does");
    // Its log reader is gone from here on: a closed stderr must not crash it either.
    std::thread::sleep(Duration::from_millis(1_200));
    assert!(validator.try_wait().unwrap().is_none());
    assert!(Command::new("kill").args(["-TERM", &validator.id().to_string()]).status().unwrap().success());
    assert_eq!(validator.wait().unwrap().code(), Some(130));

    std::fs::write(&config, "[chain]\nendpoint = \"subtensor:mainnet\"\n").unwrap();
    let refused = af(&["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("expected finney, test, local"));
}

/// A stop on a chain whose sends are slow to answer: the commitment in flight is cut at
/// the signal, the last one at `STOP_CHAIN_MS`, and no weights send starts past it, so
/// the validator exits within that deadline, not after every send's answer (59 s here
/// before). A commitment cut after it landed names a block of ours: the audit against
/// the chain stays clean.
#[test]
fn a_stop_on_a_slow_chain_ends_within_its_chain_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let Subnet { port, endpoint, runtime, client } = Subnet::new();
    let chain_process = chain(&dir.path().join("chain"), port);
    // One weights send, then none for 100 s: what is in flight at the stop is a commitment.
    runtime.block_on(client.settings(serde_json::json!({ "rate_limit_blocks": 1000 }))).unwrap();
    // Two equal slow miners draw every challenge: the match is going on at the stop, and
    // each sealed block is news to commit.
    let (champion, contender) = (miner("slow:500"), miner("slow:500"));
    enter_players(&endpoint, &champion.1, &contender.1);
    let config = validator_config(dir.path(), &endpoint, "[evaluation]\nwindow = 8\n");
    let data = dir.path().join("v");
    let (mut validator, lines, reader) = spawn_validator(&data, &config);
    wait_for(&lines, "a match, a commitment and the weights", 60, |l| {
        count(l, "match_started") == 1 && count(l, "committed") >= 1 && count(l, "weights_set") == 1
    });
    // From now on every send lands, and is answered 30 s later.
    runtime.block_on(client.settings(serde_json::json!({ "send_delay_ms": 30_000 }))).unwrap();
    let committed = count(&lines.lock().unwrap(), "committed");
    // A commitment is due every 12 blocks (1.2 s) while blocks are sealed: one is in flight.
    std::thread::sleep(Duration::from_millis(2_500));
    let stopped = Instant::now();
    assert!(Command::new("kill").args(["-INT", &validator.id().to_string()]).status().unwrap().success());
    let status = validator.wait().unwrap();
    let took = stopped.elapsed();
    reader.join().unwrap();
    let log = lines.lock().unwrap().join("\n");
    assert_eq!(status.code(), Some(130), "{log}");
    assert_eq!(count(&lines.lock().unwrap(), "match_decided"), 0, "the match was going on at the stop: {log}");
    let deadline = Duration::from_millis(af::validator::anchor::STOP_CHAIN_MS);
    assert!(took >= deadline, "the last commitment was given its deadline: {took:?}\n{log}");
    assert!(took < deadline + Duration::from_secs(5), "the stop took {took:?}\n{log}");
    let log_lines = lines.lock().unwrap();
    assert_eq!(count(&log_lines, "committed"), committed, "no slow send was recorded: {log}");
    assert_eq!(count(&log_lines, "commit_cut"), 2, "the loop's send and the last one: {log}");
    assert_eq!(count(&log_lines, "weights_skipped"), 1, "{log}");
    drop(log_lines);

    // The cut commitments landed: the chain names a tip of ours the log was not told of,
    // and the audit against the chain finds nothing wrong with it.
    let verify = af(&["ledger", "verify", "--data", data.to_str().unwrap(), "--json"]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    runtime.block_on(client.settings(serde_json::json!({ "send_delay_ms": 0 }))).unwrap();
    let audit = af(&["audit", "--data", data.to_str().unwrap(), "--chain", &endpoint, "--json"]);
    assert!(
        audit.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&audit.stdout),
        String::from_utf8_lossy(&audit.stderr)
    );
    drop(chain_process);
}

#[test]
fn a_deregistered_validator_says_so_once_turns_unhealthy_and_sends_nothing_until_registered_again() {
    let dir = tempfile::tempdir().unwrap();
    let Subnet { port, endpoint, runtime, client } = Subnet::new();
    let _chain = chain(&dir.path().join("chain"), port);
    runtime.block_on(client.settings(serde_json::json!({ "rate_limit_blocks": 5 }))).unwrap();
    let (champion, contender) = (miner("random"), miner("perfect"));
    enter_players(&endpoint, &champion.1, &contender.1);
    let http_port = free_port();
    let config = validator_config(
        dir.path(),
        &endpoint,
        &format!(
            "[evaluation]\nwindow = 8\n[http]\nlisten = \"127.0.0.1:{http_port}\"\n\
             [client]\ntimeout_ms = 2000\nmax_attempts = 2\nbackoff_base_ms = 10\nbackoff_max_ms = 50\n"
        ),
    );
    let data = dir.path().join("v");
    let (mut validator, lines, reader) = spawn_validator(&data, &config);
    wait_for(&lines, "weights sent while idle", 90, |l| count(l, "match_decided") == 1 && count(l, "weights_set") >= 1);
    assert_eq!(http_get(http_port, "/healthz").0, 200);

    // Another hotkey takes the validator's uid, as subtensor does to a full subnet's
    // lowest-ranked neuron.
    let neurons = runtime.block_on(af::chain::Chain::neurons(&client)).unwrap();
    let uid = neurons.iter().find(|n| n.hotkey == "5Validator").unwrap().uid.to_string();
    let taken = af(&["chain", "register", "--chain", &endpoint, "--hotkey", "5Usurper", "--replace-uid", &uid]);
    assert!(taken.status.success(), "{}", String::from_utf8_lossy(&taken.stderr));
    wait_for(&lines, "the deregistration", 30, |l| count(l, "deregistered") == 1);
    let sent_before = count(&lines.lock().unwrap(), "weights_set");
    // Blocks go by (4 a second here): still said once, and nothing sent.
    std::thread::sleep(Duration::from_secs(3));
    let (status, body) = http_get(http_port, "/healthz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("holds no uid") && body.contains("5Validator"), "{body}");
    let (_, metrics) = http_get(http_port, "/metrics");
    assert!(metrics.lines().any(|l| l.starts_with("af_chain_registered ") && l.ends_with(" 0")), "{metrics}");
    {
        let lines = lines.lock().unwrap();
        assert_eq!(count(&lines, "deregistered"), 1, "said once");
        assert_eq!(count(&lines, "weights_set"), sent_before, "no weights sent while deregistered");
        assert_eq!(count(&lines, "set_weights_failed"), 0, "no send refused: none was made");
    }

    // Registered again (a new uid): said once, healthy, and weights go out again.
    assert!(af(&["chain", "register", "--chain", &endpoint, "--hotkey", "5Validator", "--validator"]).status.success());
    wait_for(&lines, "registered again and weights sent", 30, |l| {
        count(l, "registered") == 1 && count(l, "weights_set") > sent_before
    });
    let (_, metrics) = http_get(http_port, "/metrics");
    assert!(metrics.lines().any(|l| l.starts_with("af_chain_registered ") && l.ends_with(" 1")), "{metrics}");
    assert!(Command::new("kill").args(["-INT", &validator.id().to_string()]).status().unwrap().success());
    assert_eq!(validator.wait().unwrap().code(), Some(130));
    reader.join().unwrap();
}

/// A validator that restarts finds its axon on chain already and does not send it again
/// (subtensor refuses a second `serve_axon` within its serving rate limit).
#[test]
fn a_restarted_validator_sends_its_axon_only_if_it_changed() {
    let dir = tempfile::tempdir().unwrap();
    let Subnet { port, endpoint, runtime, client } = Subnet::new();
    let _chain = chain(&dir.path().join("chain"), port);
    assert!(af(&["chain", "register", "--chain", &endpoint, "--hotkey", "5Validator", "--validator"]).status.success());
    let p2p_port = free_port();
    let config =
        validator_config(dir.path(), &endpoint, &format!("[p2p]\nlisten = [\"/ip4/127.0.0.2/tcp/{p2p_port}\"]\n"));
    let data = dir.path().join("v");
    let axon_block = || {
        let axons = runtime.block_on(af::chain::Chain::axons(&client)).unwrap();
        axons.iter().find(|a| a.hotkey == "5Validator").map(|a| (a.block, a.port))
    };
    for run in 0..2 {
        let (mut validator, lines, reader) = spawn_validator(&data, &config);
        wait_for(&lines, "the axon on chain", 30, |l| count(l, "axon_published") == 1);
        let (block, published_port) = axon_block().expect("our axon is on chain");
        assert_eq!(published_port, p2p_port);
        if run == 0 {
            std::fs::write(dir.path().join("axon_block"), block.to_string()).unwrap();
        } else {
            let first: u64 = std::fs::read_to_string(dir.path().join("axon_block")).unwrap().parse().unwrap();
            assert_eq!(block, first, "not sent again: {}", lines.lock().unwrap().join("\n"));
            assert!(lines.lock().unwrap().iter().any(|l| l.contains("is our axon on chain already")));
        }
        assert!(Command::new("kill").args(["-INT", &validator.id().to_string()]).status().unwrap().success());
        validator.wait().unwrap();
        reader.join().unwrap();
    }
}
