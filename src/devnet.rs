//! The devnet (`af devnet`): the main job on embedded defaults, all on loopback. Starts reference
//! miners with mixed policies and N validator processes (`af validate --serve` with
//! networking), lets each play its rounds of matches, waits until every validator holds
//! and agrees on every other's log, then stops them, verifies every store and prints
//! a summary.
//!
//! A local stand-in chain (`af chain serve`, 250 ms blocks) registers the miners and the
//! validators; validators commit their tips and set weights on it. At the end every
//! validator's store is replayed (every validator must derive the same state hash) and
//! the on-chain commitments are checked against the logs.

use crate::chain::ChainError;
use crate::ledger::keys::KeyError;
use crate::ledger::{verify, LedgerKey, Store, StoreError};
use crate::replay::ReplayError;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum DevnetError {
    #[error("{0}")]
    Usage(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{0}")]
    Chain(#[from] ChainError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Key(#[from] KeyError),
    #[error("{0}")]
    Replay(#[from] ReplayError),
    /// A process failed, or the network did not get where it should in time.
    #[error("{0}")]
    Failed(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DevnetError {
    let what = what.into();
    move |source| DevnetError::Io { what, source }
}

/// What a devnet run found: `result` is its JSON report (`af devnet --json`), `ok`
/// whether every check held.
pub struct Devnet {
    pub result: serde_json::Value,
    pub ok: bool,
}

/// Policies handed to miners in turn: the first is the initial champion.
const POLICIES: [&str; 5] = ["noisy:0.3", "perfect", "random", "noisy:0.1", "flaky:0.2"];

struct Process {
    child: Child,
    name: String,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Registers `hotkey` on the devnet chain and commits its model with `af mine commit`;
/// the chain block of the commitment.
fn mine_commit(
    exe: &Path,
    runtime: &tokio::runtime::Runtime,
    chain: &crate::chain::local_client::LocalClient,
    endpoint: &str,
    hotkey: &str,
    model: &str,
    url: &str,
) -> Result<u64, DevnetError> {
    runtime.block_on(chain.register(hotkey, false))?;
    let output = Command::new(exe)
        .args(["mine", "commit", "--chain", endpoint, "--hotkey", hotkey, "--model", model, "--revision", "r1"])
        .args(["--endpoint", url, "--json"])
        .output()
        .map_err(io("running af mine commit"))?;
    if !output.status.success() {
        return Err(DevnetError::Failed(format!(
            "af mine commit for {hotkey} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let reply: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    reply["block"].as_u64().ok_or_else(|| DevnetError::Failed("af mine commit did not say its block".into()))
}

fn free_port() -> Result<u16, DevnetError> {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr());
    Ok(port.map_err(io("finding a free port"))?.port())
}

fn start_miner(
    exe: &Path,
    policy: &str,
    model: &str,
    seed: usize,
    log: &Path,
) -> Result<(Process, String), DevnetError> {
    let mut child = Command::new(exe)
        .args([
            "miner",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--policy",
            policy,
            "--model",
            model,
            "--seed",
            &seed.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).map_err(io(format!("creating {}", log.display())))?)
        .spawn()
        .map_err(io("starting a reference miner"))?;
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("piped"))
        .read_line(&mut line)
        .map_err(io("reading where a miner listens"))?;
    let url = line
        .split_whitespace()
        .nth(2)
        .ok_or_else(|| DevnetError::Failed("the miner did not say where it listens".into()))?
        .to_string();
    Ok((Process { child, name: format!("miner {policy}") }, url))
}

const DEVNET_NETUID: u16 = 1;
/// 20 blocks of 250 ms: an epoch every 5 s, so timelocked weights reveal within seconds.
const DEVNET_TEMPO: u64 = 20;

fn validator_hotkey(i: usize) -> String {
    format!("5DevnetValidator{i}")
}

fn start_chain(exe: &Path, dir: &Path) -> Result<(Process, String), DevnetError> {
    let mut child = Command::new(exe)
        .args([
            "chain",
            "serve",
            "--data",
            &dir.display().to_string(),
            "--listen",
            "127.0.0.1:0",
            "--block-ms",
            "250",
            "--tempo",
            &DEVNET_TEMPO.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(io("starting the local chain"))?;
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("piped"))
        .read_line(&mut line)
        .map_err(io("reading where the chain listens"))?;
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .ok_or_else(|| DevnetError::Failed("the chain did not say where it listens".into()))?
        .to_string();
    Ok((Process { child, name: "chain".into() }, addr))
}

fn status(data: &Path) -> Option<serde_json::Value> {
    crate::p2p::node::read_status(data).ok().flatten()
}

/// (height, hash) of `validator` in a status file's tips.
fn tip_in(status: &serde_json::Value, validator: &str) -> Option<(u64, String)> {
    status["tips"]
        .as_array()?
        .iter()
        .find(|t| t[0].as_str() == Some(validator))
        .map(|t| (t[1]["height"].as_u64().unwrap_or(0), t[1]["hash"].as_str().unwrap_or_default().to_string()))
}

/// What a devnet is asked to be.
pub struct DevnetSpec {
    /// The `af` binary each process runs.
    pub exe: PathBuf,
    pub data: PathBuf,
    pub n_validators: usize,
    pub n_miners: usize,
    pub rounds: u64,
    /// Replace `data` if it exists.
    pub fresh: bool,
}

/// Runs a devnet to its end and checks it; progress lines go to stderr.
pub fn run(spec: &DevnetSpec) -> Result<Devnet, DevnetError> {
    let DevnetSpec { exe, data, n_validators, n_miners, rounds, fresh } = spec;
    let (exe, data, n_validators, n_miners, rounds, fresh) = (exe, &**data, *n_validators, *n_miners, *rounds, *fresh);
    if n_validators == 0 || n_miners < 2 {
        return Err(DevnetError::Usage("a devnet needs at least 1 validator and 2 miners".into()));
    }
    if data.exists() {
        if !fresh {
            return Err(DevnetError::Usage(format!("{} exists; pass --fresh to replace it", data.display())));
        }
        std::fs::remove_dir_all(data).map_err(io(format!("removing {}", data.display())))?;
    }
    std::fs::create_dir_all(data).map_err(io(format!("creating {}", data.display())))?;
    let started = Instant::now();

    let mut processes = Vec::new();
    let (chain_process, chain_addr) = start_chain(exe, &data.join("chain"))?;
    processes.push(chain_process);
    let chain_endpoint = format!("local:{chain_addr}");
    eprintln!("local chain at {chain_addr}");
    let chain_client = crate::chain::local_client::LocalClient::new(&chain_addr, DEVNET_NETUID, None)?;
    let chain_runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(io("starting the async runtime"))?;
    // Commit-reveal on, as on most subnets: validators commit timelocked weights and the
    // chain reveals them with its beacon's round signatures. A short rate limit lets each
    // validator's last commit carry its final champion.
    chain_runtime.block_on(chain_client.settings(serde_json::json!({
        "commit_reveal_enabled": true, "rate_limit_blocks": 8, "reveal_period_epochs": 1,
    })))?;
    // No [[miners]]: validators discover every miner from the chain (ledger-spec/13).
    let config = format!(
        "# The devnet's shared validator config; each validator's hotkey comes from AF_CHAIN__HOTKEY.\n\
         # No [[miners]]: contenders come from the miners' commitments on the chain.\n\
         [evaluation]\nwindow = 8\n\
         [ledger]\nblock_max_events = 64\nblock_max_ms = 500\n\
         [client]\ntimeout_ms = 10000\nbackoff_base_ms = 20\nbackoff_max_ms = 200\n\
         [chain]\nendpoint = \"{chain_endpoint}\"\nnetuid = {DEVNET_NETUID}\ndiscover_every_ms = 500\n",
    );
    // Miners register, then commit what they serve with `af mine commit`. The last one
    // enters only after the validators have started; a sybil serving another endpoint
    // commits the second miner's model and revision, later.
    let mut miners = Vec::new(); // (hotkey, model, url)
    for i in 0..n_miners {
        let policy = POLICIES[i % POLICIES.len()];
        let (process, url) = start_miner(exe, policy, policy, i, &data.join(format!("miner{i}.log")))?;
        processes.push(process);
        let hotkey = format!("5DevnetMiner{i}{}", policy.replace([':', '.'], "_"));
        eprintln!("miner {i}: {policy} at {url}");
        miners.push((hotkey, policy.to_string(), url));
    }
    let (late, early) = miners.split_last().expect("at least 2 miners");
    for (hotkey, model, url) in early {
        mine_commit(exe, &chain_runtime, &chain_client, &chain_endpoint, hotkey, model, url)?;
    }
    let sybil: String = {
        let (_, model, _) = &early[1.min(early.len() - 1)];
        let (process, url) = start_miner(exe, "random", model, 99, &data.join("sybil.log"))?;
        processes.push(process);
        let hotkey = "5DevnetSybil".to_string();
        std::thread::sleep(Duration::from_millis(300)); // a later block than the original
        mine_commit(exe, &chain_runtime, &chain_client, &chain_endpoint, &hotkey, model, &url)?;
        eprintln!("sybil: commits {model} (already committed) at {url}");
        hotkey
    };
    // The table the validators play by (the config's, or `AF_PROTOCOL__TABLE` they
    // inherit): the devnet's own replay judges their logs by it.
    let registry = crate::validator::config::parse(&config, std::env::vars())
        .map_err(|e| DevnetError::Failed(format!("the devnet's validator config: {e}")))?
        .registry();
    let config_path = data.join("validator.toml");
    std::fs::write(&config_path, config).map_err(io(format!("writing {}", config_path.display())))?;
    // Each validator plays at most one match per miner other than the first champion.
    let rounds = rounds.min(n_miners as u64 - 1);

    let mut validators = Vec::new(); // (dir, key hex, port)
    for i in 0..n_validators {
        let dir = data.join(format!("v{i}"));
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;
        let key = LedgerKey::generate()?;
        key.write_new(&dir.join(crate::ledger::keys::KEY_FILE))?;
        validators.push((dir, key.validator().to_hex(), free_port()?));
        chain_runtime.block_on(chain_client.register(&validator_hotkey(i), true))?;
    }
    let mut validator_processes = Vec::new();
    for (i, (dir, _, port)) in validators.iter().enumerate() {
        let args: Vec<String> = vec![
            "validate".into(),
            "--data".into(),
            dir.display().to_string(),
            "--config".into(),
            config_path.display().to_string(),
            "--max-matches".into(),
            rounds.to_string(),
            "--serve".into(),
            "--json".into(),
            "--listen".into(),
            format!("/ip4/{}/tcp/{port}", validator_ip(i)),
        ];
        // No --peer, no --allow: each validator publishes its address on the chain and
        // finds the others, and which logs to keep, there (ledger-spec/13).
        let child = Command::new(exe)
            .args(&args)
            .env("AF_CHAIN__HOTKEY", validator_hotkey(i))
            .stdout(std::fs::File::create(dir.join("summary.json")).map_err(io("creating summary.json"))?)
            .stderr(std::fs::File::create(dir.join("validate.log")).map_err(io("creating validate.log"))?)
            .spawn()
            .map_err(io("starting a validator"))?;
        eprintln!("validator {i}: {} on {}:{port}", validators[i].1, validator_ip(i));
        validator_processes.push(Process { child, name: format!("validator {i}") });
    }

    // The late miner enters while the validators run.
    std::thread::sleep(Duration::from_millis(1_000));
    let late_block = {
        let (hotkey, model, url) = late;
        mine_commit(exe, &chain_runtime, &chain_client, &chain_endpoint, hotkey, model, url)?
    };
    eprintln!("late miner {} committed at block {late_block}, after the validators started", late.0);

    // 1. Every validator finishes its rounds (its summary is written).
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut summaries: Vec<Option<serde_json::Value>> = vec![None; n_validators];
    while summaries.iter().any(Option::is_none) {
        for (i, (dir, _, _)) in validators.iter().enumerate() {
            if summaries[i].is_none() {
                if let Ok(text) = std::fs::read_to_string(dir.join("summary.json")) {
                    summaries[i] = serde_json::from_str(&text).ok();
                }
            }
            if let Some(status) =
                validator_processes[i].child.try_wait().map_err(io(format!("waiting for validator {i}")))?
            {
                if summaries[i].is_none() {
                    return Err(DevnetError::Failed(format!(
                        "validator {i} exited with {status}; see {}",
                        dir.join("validate.log").display()
                    )));
                }
            }
        }
        if Instant::now() > deadline {
            return Err(DevnetError::Failed("validators did not finish their rounds in 10 minutes".into()));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!("all validators played {rounds} round(s); waiting for every log to reach every validator");

    // 2. Weights reach the chain through commit-reveal: each validator commits its
    // champion's weights timelocked and the chain reveals them an epoch later. Wait (while
    // the validators keep serving) until every validator's revealed weights give all to
    // the champion its summary names.
    let champion = summaries[0].as_ref().and_then(|s| s["champion"].as_str().map(String::from));
    let reveal_deadline = Instant::now() + Duration::from_secs(60);
    eprintln!("waiting for every validator's timelocked weights to be revealed on chain");
    loop {
        let neurons = chain_runtime.block_on(crate::chain::Chain::neurons(&chain_client))?;
        let weights = chain_runtime.block_on(crate::chain::Chain::weights(&chain_client))?;
        let uid_of = |hotkey: &str| neurons.iter().find(|n| n.hotkey == hotkey).map(|n| n.uid);
        let champion_uid = champion.as_deref().and_then(uid_of);
        let revealed = (0..n_validators).all(|i| {
            let setter = uid_of(&validator_hotkey(i));
            weights
                .iter()
                .any(|(uid, pairs)| Some(*uid) == setter && champion_uid.is_some_and(|c| pairs == &[(c, u16::MAX)]))
        });
        if revealed || Instant::now() > reveal_deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    // From here on the chain refuses further weights, so the logs stop growing and can
    // converge: what was revealed is what gets checked.
    chain_runtime.block_on(chain_client.settings(serde_json::json!({ "rate_limit_blocks": 1_000_000_000u64 })))?;
    // An anchoring tick already past the chain may still be recording (ticks are 1 s).
    std::thread::sleep(Duration::from_millis(2_500));

    // 3. Every validator holds every validator's final tip.
    let sync_started = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let statuses: Vec<Option<serde_json::Value>> = validators.iter().map(|(dir, _, _)| status(dir)).collect();
        let mut missing = Vec::new();
        for (owner, (_, key, _)) in validators.iter().enumerate() {
            let own = statuses[owner].as_ref().and_then(|s| tip_in(s, key));
            for (holder, status) in statuses.iter().enumerate() {
                if own.is_none() || status.as_ref().and_then(|s| tip_in(s, key)) != own {
                    missing.push((holder, owner));
                }
            }
        }
        // Converged, and still so a moment later (status files trail by up to 200 ms).
        if missing.is_empty() {
            let tips = |statuses: &[Option<serde_json::Value>]| -> Vec<Option<(u64, String)>> {
                statuses
                    .iter()
                    .flat_map(|s| validators.iter().map(move |(_, key, _)| s.as_ref().and_then(|s| tip_in(s, key))))
                    .collect()
            };
            let before = tips(&statuses);
            std::thread::sleep(Duration::from_millis(500));
            let again: Vec<Option<serde_json::Value>> = validators.iter().map(|(dir, _, _)| status(dir)).collect();
            if tips(&again) == before {
                break;
            }
            continue;
        }
        if Instant::now() > deadline {
            return Err(DevnetError::Failed(format!(
                "logs did not converge in 120 s; (holder, owner) pairs still behind: {missing:?}"
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let convergence_ms = sync_started.elapsed().as_millis();

    // 4. Stop the validators cleanly, then check every store from disk.
    for process in &validator_processes {
        let _ = Command::new("kill").args(["-INT", &process.child.id().to_string()]).status();
    }
    for process in &mut validator_processes {
        let status = process.child.wait().map_err(io(format!("waiting for {}", process.name)))?;
        // A validator stopped by a signal seals its log and exits 130, as documented.
        if status.code() != Some(i32::from(crate::validator::launch::EXIT_INTERRUPTED)) {
            return Err(DevnetError::Failed(format!(
                "{} exited with {status} (expected 130 after SIGINT)",
                process.name
            )));
        }
    }
    let mut rows = Vec::new();
    let mut state_hashes = std::collections::BTreeSet::new();
    let mut network: Option<crate::replay::Replay> = None;
    for (i, (dir, key, _)) in validators.iter().enumerate() {
        let store = Store::open_read_only(dir)?;
        let report = verify::verify_store(&store, &|_, _| {})?;
        let replayed = crate::replay::replay(
            &store,
            &registry,
            None,
            &crate::evaluation::ratio::DEFAULT_RATIO_PARAMS,
            &mut |_, _, _| {},
        )?;
        state_hashes.insert(replayed.state_hash);
        let summary = summaries[i].as_ref().expect("read above");
        rows.push(serde_json::json!({
            "validator": key,
            "chains_held": report.chains.len(),
            "all_verified": report.ok,
            "blocks": report.n_blocks,
            "own_tip": store.tip(&crate::bytes::ValidatorKey::from_hex(key).map_err(|e| DevnetError::Failed(e.to_string()))?)?,
            "champion": summary["champion"],
            "ratio_to_beat_ppm": summary["ratio_to_beat_ppm"],
            "matches": summary["n_matches"],
            "state_hash": replayed.state_hash,
        }));
        if i == 0 {
            network = Some(replayed);
        }
    }
    // The chain: every validator's commitment must be a block of its log.
    let network = network.expect("at least one validator");
    let store = Store::open_read_only(&validators[0].0)?;
    let records = chain_runtime.block_on(crate::chain::Chain::commitments(&chain_client))?;
    let on_chain = crate::audit::commitments::OnChain { endpoint: &chain_endpoint, records };
    let commitments = crate::audit::audit_commitments(&network.folds, &store, Some(on_chain))?;
    // Weights went in timelocked: wait until the chain has revealed every commit (one
    // epoch and the round's signature), then compare what it applied with replay.
    let reveal_deadline = Instant::now() + Duration::from_secs(60);
    let timelocked = loop {
        let timelocked = chain_runtime.block_on(crate::chain::Chain::timelocked(&chain_client))?;
        if timelocked.pending.is_empty() || Instant::now() > reveal_deadline {
            break timelocked;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let on_chain_weights = chain_runtime.block_on(crate::chain::Chain::weights(&chain_client))?;
    let neurons = chain_runtime.block_on(crate::chain::Chain::neurons(&chain_client))?;
    let final_records = chain_runtime.block_on(crate::chain::Chain::commitments(&chain_client))?;
    let axons = chain_runtime.block_on(crate::chain::Chain::axons(&chain_client))?;
    // Validators were given no peers: every one published its address and found the
    // others there.
    let validators_with_axons =
        (0..n_validators).filter(|i| axons.iter().any(|a| a.hotkey == validator_hotkey(*i))).count();
    drop(processes); // the miners and the chain
    let champion_uid =
        network.state.champion.as_ref().and_then(|c| neurons.iter().find(|n| *n.hotkey == *c.hotkey)).map(|n| n.uid);
    let validator_uids: Vec<u16> = (0..n_validators)
        .filter_map(|i| neurons.iter().find(|n| n.hotkey == validator_hotkey(i)).map(|n| n.uid))
        .collect();
    let weights_match = validator_uids.iter().all(|uid| {
        on_chain_weights
            .iter()
            .any(|(setter, pairs)| setter == uid && champion_uid.is_some_and(|c| pairs == &[(c, u16::MAX)]))
    });
    // Miners entered through the chain: the late one was played by every validator, the
    // sybil by none, and discovery names whose model it copied.
    let (mut late_played, mut sybil_played) = (0, false);
    for fold in &network.folds {
        let mut late_here = false;
        for m in fold.matches.values() {
            let m = m.map_err(ReplayError::from)?;
            late_here |= *m.contender.hotkey == *late.0;
            sybil_played |= *m.contender.hotkey == *sybil || *m.champion.hotkey == *sybil;
        }
        late_played += usize::from(late_here);
    }
    let found = crate::validator::discovery::discover(
        &neurons,
        &final_records,
        None,
        &crate::validator::state::Played::default(),
    );
    let sybil_kept_by = found.skipped.iter().find_map(|s| match s {
        crate::validator::discovery::Skipped::Duplicate { candidate, kept_by, kept_block, .. } if candidate.hotkey == sybil => {
            Some(serde_json::json!({ "kept_by": kept_by, "kept_block": kept_block, "sybil_block": candidate.commit_block }))
        }
        _ => None,
    });
    // Each validator's log records the sybil as a duplicate, so replay and audit show why.
    let mut sybil_recorded = 0;
    for fold in &network.folds {
        let skips = fold.skipped.iter().collect::<Result<Vec<_>, _>>().map_err(ReplayError::from)?;
        sybil_recorded += usize::from(
            skips.iter().any(|s| s.hotkey == sybil && s.reason == crate::ledger::event::SkipReason::Duplicate),
        );
    }
    // The late miner is queued last (its commitment is the newest), so it plays only when
    // the rounds reach it: one per early contender, then it.
    let late_expected = rounds >= n_miners as u64 - 1;
    let late_ok = if late_expected { late_played == n_validators } else { late_played == 0 };
    let discovery_ok = late_ok && !sybil_played && sybil_kept_by.is_some() && sybil_recorded == n_validators;
    let champions: std::collections::BTreeSet<String> = rows.iter().map(|r| r["champion"].to_string()).collect();
    let n_committed = commitments.rows.iter().filter(|r| r.status == "matches").count();
    let logs_ok = rows.iter().all(|r| r["all_verified"] == true && r["chains_held"] == n_validators);
    let ok = logs_ok
        && state_hashes.len() == 1
        && commitments.discrepancies.is_empty()
        && n_committed == n_validators
        && timelocked.pending.is_empty()
        && weights_match
        && discovery_ok
        && validators_with_axons == n_validators;
    let state = &network.state;
    let result = serde_json::json!({
        "validators": rows,
        "agreement": champions.len() == 1,
        "champion": if champions.len() == 1 { rows[0]["champion"].clone() } else { serde_json::Value::Null },
        "every_log_everywhere": logs_ok,
        "ok": ok,
        "convergence_ms": convergence_ms,
        "state_hash": network.state_hash,
        "state_hashes_agree": state_hashes.len() == 1,
        "network_champion": state.champion,
        "ratio_to_beat_ppm": state.ratio_set_ppm,
        "vtrust_ppm": state.validators.iter().map(|v| (v.validator.to_hex(), v.vtrust_ppm)).collect::<std::collections::BTreeMap<_, _>>(),
        "discrepancies": state.discrepancies,
        "peers_from_chain": { "validators_with_axons": validators_with_axons, "peer_flags_given": 0 },
        "miners": {
            "from_chain": true,
            "committed": found.valid.len(),
            "late": { "hotkey": late.0, "commit_block": late_block, "played_by_validators": late_played, "expected_to_play": late_expected },
            "sybil": { "hotkey": sybil, "collapsed": sybil_kept_by, "played": sybil_played, "recorded_by_validators": sybil_recorded },
            "ok": discovery_ok,
        },
        "chain": {
            "endpoint": chain_endpoint,
            // The chain process stops with the devnet; its state stays for a later audit.
            "data": data.join("chain"),
            "restart": format!("af chain serve --data {} --listen 127.0.0.1:9944", data.join("chain").display()),
            "commitments_matching_logs": n_committed,
            "note": commitments.note,
            "weights": on_chain_weights,
            "timelocked_revealed": timelocked.revealed,
            "timelocked_pending": timelocked.pending,
            "revealed_weights_match_champion": weights_match,
        },
        "elapsed_s": started.elapsed().as_secs_f64(),
        "data": data,
        "protocol_table": registry.protocol().network,
        "n_miners": n_miners,
        "rounds": rounds,
    });
    Ok(Devnet { result, ok })
}

/// Validator `i`'s loopback address: 127.0.0.2 and up, since subtensor (and so the
/// stand-in chain) refuses to publish 127.0.0.1 as an axon, while Linux routes all of
/// 127.0.0.0/8 to the loopback interface.
fn validator_ip(i: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(127, 0, 0, 2 + (i % 250) as u8)
}
