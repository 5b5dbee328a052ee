//! One integration-test binary (faster to build than many), one module per area.

mod archive_site;
mod chain_local;
mod chain_node;
mod chain_subtensor;
mod champion_life;
mod checkpoint;
mod cli;
mod docs_true;
mod envs_golden;
mod envs_programs;
mod envs_props;
mod evaluation_stopping;
mod house_rules;
mod http_hostile;
mod http_logs;
mod key_rotation;
mod ledger_crash;
mod ledger_faults;
mod ledger_fuzz;
mod ledger_model;
mod ledger_prune;
mod ledger_tamper;
mod ledger_vectors;
#[allow(dead_code)] // tests/support serves the benchmarks too, which use the rest
#[path = "../support/match_scenarios.rs"]
mod match_scenarios;
mod mine;
mod miner_http;
mod miner_policy;
#[allow(dead_code)]
#[path = "../support/network_sim.rs"]
mod network_sim;
mod p2p_hostile;
mod p2p_net;
mod p2p_partition;
mod p2p_sim;
mod p2p_trust;
mod proof_mutations;
mod protocol_upgrade;
mod replay_audit;
mod replay_vectors;
mod restore;
mod subtensor_node;
mod validator_cli;
mod validator_match;
mod validator_service;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn af_bin() -> &'static str {
    env!("CARGO_BIN_EXE_af")
}

pub fn af(args: &[&str]) -> Output {
    Command::new(af_bin()).args(args).output().expect("run af")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A process's resident and peak resident bytes (VmRSS, VmHWM from /proc).
pub fn memory_of(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).unwrap().split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A new store at `data` holding one demo chain of `blocks` blocks of `events` events of
/// about `event_bytes` each (`af ledger demo`); its validator.
pub fn demo_log(data: &Path, blocks: u64, events: u64, event_bytes: u64) -> af::bytes::ValidatorKey {
    let (blocks, events, event_bytes) = (blocks.to_string(), events.to_string(), event_bytes.to_string());
    let data_text = data.to_str().unwrap();
    let output = af(&[
        "ledger",
        "demo",
        "--data",
        data_text,
        "--blocks",
        &blocks,
        "--events-per-block",
        &events,
        "--event-bytes",
        &event_bytes,
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    af::ledger::LedgerKey::load(&data.join("validator.key")).unwrap().validator()
}

/// The arguments of `af node` on `data`, listening on loopback `port`, dialling `peers`.
pub fn node_args(data: &Path, port: u16, peers: &[u16]) -> Vec<String> {
    let mut args = vec![
        "node".to_string(),
        "--data".into(),
        data.display().to_string(),
        "--listen".into(),
        format!("/ip4/127.0.0.1/tcp/{port}"),
    ];
    for peer in peers {
        args.extend(["--peer".into(), format!("/ip4/127.0.0.1/tcp/{peer}")]);
    }
    args
}

/// A loopback port free a moment ago (for a process that must come back on the same one).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Compares `actual` with the fixture file, or rewrites it when UPDATE_EXPECT=1.
pub fn check_fixture(relative: &str, actual: &str) {
    let path = repo_path(relative);
    if std::env::var("UPDATE_EXPECT").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_EXPECT=1 to create)", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the output at line {} (UPDATE_EXPECT=1 refreshes it if the change is intended)\nexpected: {:?}\nactual:   {:?}",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

/// A small deterministic generator for randomized tests (splitmix64, the simulator's);
/// failing tests print the seed.
pub use network_sim::SimRng as TestRng;

/// The seed for a randomized test: `AF_TEST_SEED` if set, else from the clock. Printed.
pub fn test_seed(name: &str) -> u64 {
    let seed = std::env::var("AF_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    eprintln!("{name}: seed {seed} (rerun with AF_TEST_SEED={seed})");
    seed
}

/// One plain HTTP/1.1 GET on loopback: the status and the body.
pub fn http_get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map_or(String::new(), |(_, body)| body.to_string()))
}
