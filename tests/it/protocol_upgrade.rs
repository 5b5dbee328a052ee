//! ledger-spec/15 across an activation block: in one process, the same logs replayed by a
//! build that knows the new version and by one capped below it (an older build). Before
//! activation they agree; after it the older build waits at each log's first block of the
//! new version, blames no one and moves no vTrust; a kind used before its version is an
//! invalid block; a kind past every version the build decodes is waited on, not judged.
//! Then as processes: two validators on the stand-in chain, one capped, across the block.

use crate::validator_service::enter;
use af::envs;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::block::seal;
use af::ledger::event::{FoldCheckpoint, FoldPoint};
use af::ledger::{Event, Store};
use af::protocol::Protocol;
use af::replay::{self, Replay};
use af::synthetic_logs::{validator_key, write_network, NetworkSpec};

fn replay_by(dir: &std::path::Path, protocol: Protocol) -> Replay {
    let store = Store::open_read_only(dir).unwrap();
    let registry = envs::registry().with_protocol(protocol);
    replay::replay(&store, &registry, None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap()
}

/// The small network on envs of both versions of the upgrade-test table (its version 1
/// has no `coin`): match 1 starts at synthetic chain block 1,000, match 2 at 1,001.
fn network() -> (tempfile::TempDir, Vec<af::bytes::ValidatorKey>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    let spec = NetworkSpec { envs: vec!["mult".into(), "sat".into()], ..NetworkSpec::small(3) };
    let keys = write_network(&store, &spec).unwrap();
    (dir, keys)
}

#[test]
fn an_older_build_waits_at_the_new_version_and_blames_no_one() {
    let (dir, _) = network();
    // Before activation (it comes after every block here): one state for both builds.
    let later = Protocol::upgrade_test(5_000);
    let (new, old) = (replay_by(dir.path(), later.clone()), replay_by(dir.path(), later.capped(1)));
    assert_eq!(new.state_hash, old.state_hash);
    assert!(new.state.discrepancies.is_empty(), "{:?}", new.state.discrepancies);

    // Activation at match 2's start block. The older build's table ends at version 1;
    // it knows of version 2 only as the chain announces it.
    let table = Protocol::upgrade_test(1_001);
    let new = replay_by(dir.path(), table.clone());
    let unaware = replay_by(dir.path(), table.clone().capped(1));
    assert!(unaware.state.discrepancies.is_empty(), "match 2 plays by version 1's rules too here");
    assert!(unaware.folds.iter().all(|f| f.awaiting_upgrade.is_none()));
    let old = replay_by(dir.path(), table.capped(1).with_announced(2, 1_001));
    assert!(new.state.discrepancies.is_empty(), "{:?}", new.state.discrepancies);
    assert_eq!(new.state.matches.len(), 2);
    assert!(old.state.discrepancies.is_empty(), "the older build blames no one: {:?}", old.state.discrepancies);
    for (fold, summary) in old.folds.iter().zip(&old.state.validators) {
        let (height, version) = fold.awaiting_upgrade.expect("every log reached version 2");
        assert_eq!(version, 2);
        // The block where it waits holds match 2's start: every block before it folded.
        let m2 = new.folds.iter().find(|f| f.validator == fold.validator).unwrap();
        let started =
            m2.matches.iter().map(Result::unwrap).map(|(_, m)| (m.chain_block, m.started_height)).max().unwrap();
        assert_eq!((started.0, started.1), (1_001, height));
        assert_eq!(fold.tip.map(|t| t.height + 1), Some(height));
        assert!(fold.invalid_at.is_none());
        assert_eq!(summary.vtrust_ppm, 1_000_000);
    }
    assert!(new.state.validators.iter().all(|v| v.vtrust_ppm == 1_000_000));
    // The older build's state stops before match 2, in the block that also holds match
    // 1's decision: match 1 has no vote there, the incumbent stays, and the hash differs
    // (it names shorter logs). The newer build crowned match 1's contender.
    assert_eq!(old.state.matches.len(), 1);
    assert_eq!(old.state.matches.iter().map(Result::unwrap).next().unwrap().verdict, None);
    assert_eq!(old.state.champion.as_ref().map(|c| &*c.hotkey), Some("5SynthNoisy"));
    assert_eq!(new.state.champion.as_ref().map(|c| &*c.hotkey), Some("5SynthPerfect"));
    assert_ne!(old.state_hash, new.state_hash);
    // The audit of what the older build replayed is not clean (a block not judged is no
    // check passed), lists each waiting log, and holds no finding.
    let store = Store::open_read_only(dir.path()).unwrap();
    let report = af::audit::compose::audit_report(&store, &old, None, None, 0.0).unwrap();
    assert!(!report.clean && report.findings.is_empty(), "{:?}", report.findings);
    assert_eq!(report.awaiting_upgrade.len(), 3);
    assert!(af::audit::text::text(&report)
        .unwrap()
        .contains("of a later protocol version (2) than this build applies"));
    assert!(af::audit::compose::audit_report(&store, &new, None, None, 0.0).unwrap().clean);
}

#[test]
fn a_kind_before_its_version_is_an_invalid_block_and_after_it_a_valid_one() {
    let (dir, keys) = network();
    let store = Store::open(dir.path()).unwrap();
    let key = validator_key(0);
    let tip = store.tip(&keys[0]).unwrap().unwrap();
    let point = FoldPoint { validator: keys[1], height: 0, block_hash: tip.hash, fold_hash: tip.hash };
    let checkpoint = Event::FoldCheckpoint(FoldCheckpoint { fold_version: 1, points: vec![point] });
    let sealed = seal(key.signing_key(), Some(&tip), tip.time_ms + 1, vec![checkpoint]).unwrap();
    store.append(&sealed).unwrap();
    drop(store);
    // Version 2 (FoldCheckpoint's) activates after every chain block this log recorded.
    let before = replay_by(dir.path(), Protocol::upgrade_test(5_000));
    let fold = before.folds.iter().find(|f| f.validator == keys[0]).unwrap();
    assert_eq!(fold.invalid_at, Some(tip.height + 1));
    let finding = before.state.discrepancies.iter().find(|d| d.validator == keys[0]).unwrap();
    assert!(finding.detail.contains("event tag 10 is not a kind of protocol version 1"), "{}", finding.detail);
    assert_eq!(before.state.validators.iter().find(|v| v.validator == keys[0]).unwrap().vtrust_ppm, 0);
    // Active from the start: the same block is valid.
    let after = replay_by(dir.path(), Protocol::network());
    assert!(after.folds.iter().all(|f| f.invalid_at.is_none()));
    assert!(after.state.discrepancies.is_empty(), "{:?}", after.state.discrepancies);
    // A build whose versions all lack the kind (one released before it) cannot judge
    // the block: the log waits there, with no finding.
    let older = replay_by(dir.path(), Protocol::upgrade_test(5_000).capped(1));
    let fold = older.folds.iter().find(|f| f.validator == keys[0]).unwrap();
    assert_eq!((fold.awaiting_upgrade, fold.invalid_at), (Some((tip.height + 1, 0)), None));
    assert!(older.state.discrepancies.is_empty(), "{:?}", older.state.discrepancies);
}

#[test]
fn a_kind_no_version_of_this_build_has_is_waited_on_not_judged() {
    let (dir, keys) = network();
    let store = Store::open(dir.path()).unwrap();
    let tip = store.tip(&keys[2]).unwrap().unwrap();
    let block = store.block_bytes(&keys[2], tip.height).unwrap().unwrap();
    drop(store);
    // The tip block's first event with a tag past every kind this build decodes.
    let first_event = 118 + 64 + 8;
    let mut newer = block.clone();
    newer[first_event..first_event + 4].copy_from_slice(&(Event::<String>::N_KINDS + 3).to_le_bytes());
    let error = af::ledger::block::decode_block(&newer).unwrap_err();
    assert!(
        matches!(error, af::ledger::BlockError::NewerEventKind { event_idx: 0, tag } if tag == Event::<String>::N_KINDS + 3),
        "{error}"
    );
    assert!(error.to_string().contains("upgrade af"), "{error}");
    // Folded, it stops the log there with no finding (the replay's own check of a block
    // it holds; `af ledger verify` names it `newer_event_kind`).
    let mut fold = af::replay::fold::ChainFold::new(keys[2]);
    let registry = envs::registry();
    let store = Store::open_read_only(dir.path()).unwrap();
    let blocks: Vec<(u64, Vec<u8>)> = (0..tip.height)
        .map(|h| (h, store.block_bytes(&keys[2], h).unwrap().unwrap()))
        .chain(std::iter::once((tip.height, newer)))
        .collect();
    af::replay::fold_batch(&mut fold, &registry, &blocks, &mut |_| true);
    assert_eq!(fold.awaiting_upgrade, Some((tip.height, 0)));
    assert!(fold.invalid_at.is_none() && fold.discrepancies.is_empty(), "{:?}", fold.discrepancies);
}

pub(crate) type Lines = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// `af validate --serve` in `dir/NAME` as `hotkey` on the upgrade-test table, capped at
/// `known_max`; its HTTP port and its log lines as they come.
pub(crate) fn start_validator(
    dir: &std::path::Path,
    name: &str,
    (endpoint, hotkey, ip): (&str, &str, &str),
    table: &str,
    known_max: Option<u32>,
) -> (std::process::Child, u16, Lines) {
    use std::io::{BufRead, BufReader};
    let http = crate::free_port();
    let cap = known_max.map_or(String::new(), |max| format!("known_max = {max}\n"));
    // An older build names only environments it has.
    let envs = if known_max.is_some() { "[\"mult\"]" } else { "[\"mult\", \"coin\"]" };
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "[protocol]\ntable = \"{table}\"\n{cap}\
             [evaluation]\nwindow = 8\nenvs = {envs}\n\
             [ledger]\nblock_max_ms = 200\n[http]\nlisten = \"127.0.0.1:{http}\"\n\
             [client]\ntimeout_ms = 2000\nmax_attempts = 2\nbackoff_base_ms = 10\nbackoff_max_ms = 50\n\
             [chain]\nendpoint = \"{endpoint}\"\nhotkey = \"{hotkey}\"\ndiscover_every_ms = 200\n"
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(crate::af_bin())
        .args(["validate", "--data", dir.join(name).to_str().unwrap(), "--config", config.to_str().unwrap()])
        .args(["--serve", "--listen", &format!("/ip4/{ip}/tcp/{}", crate::free_port())])
        .env("RUST_LOG", "warn,af=info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines: Lines = Default::default();
    let (kept, stderr) = (lines.clone(), child.stderr.take().unwrap());
    std::thread::spawn(move || {
        BufReader::new(stderr).lines().map_while(Result::ok).for_each(|l| kept.lock().unwrap().push(l))
    });
    (child, http, lines)
}

pub(crate) fn wait_until(what: &str, seconds: u64, lines: &[&Lines], done: &mut dyn FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited {seconds} s for {what}; logs:\n{}",
            lines.iter().map(|l| l.lock().unwrap().join("\n")).collect::<Vec<_>>().join("\n-----\n")
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

pub(crate) fn count(lines: &Lines, event: &str) -> usize {
    lines.lock().unwrap().iter().filter(|l| l.contains(&format!("\"event\":\"{event}\""))).count()
}

/// (status, body) of GET `path` on 127.0.0.1:`port`.
fn get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return (0, String::new()) };
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let _ = write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map_or(String::new(), |(_, body)| body.to_string()))
}

/// The devnet across an activation, in CI (ledger-spec/15): two validators on the
/// upgrade-test table, one capped at version 1 as a build released before version 2
/// (it learns version 2's block only from the other's chain commitment). Before the
/// block both play by version 1; from it the older one signs nothing and says why (log
/// line, `/healthz` 503, the metric), the newer one plays on with version
/// 2's `coin`, and the logs still reach both. Nobody holds evidence or a finding, no
/// vTrust moves, an auditor with the new build replays every log clean, and the older
/// build's replay waits at the newer log's first block of version 2.
#[test]
fn a_mixed_devnet_crosses_an_activation_block_and_the_older_build_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let chain = crate::chain_local::serve_with(&dir.path().join("chain"), "127.0.0.1:0", &["--tempo", "20"]);
    let endpoint = format!("local:{}", chain.1);
    let (champion, contender, late) = (
        crate::validator_cli::miner("random"),
        crate::validator_cli::miner("perfect"),
        crate::validator_cli::miner("noisy:0.1"),
    );
    enter(&endpoint, "5Champion", "champion", &champion.1);
    std::thread::sleep(std::time::Duration::from_millis(150));
    enter(&endpoint, "5Contender", "contender", &contender.1);
    for hotkey in ["5ValidatorNew", "5ValidatorOld"] {
        assert!(crate::af(&["chain", "register", "--chain", &endpoint, "--hotkey", hotkey, "--validator"])
            .status
            .success());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = af::chain::local_client::LocalClient::new(&chain.1, 1, None).unwrap();
    let head = || runtime.block_on(af::chain::Chain::current_block(&client)).unwrap();
    // Version 2 activates 12 s (120 blocks of 100 ms) from now: room for the first match.
    let activation = head() + 120;
    let table = format!("upgrade-test@{activation}");
    let (mut new, new_http, new_lines) =
        start_validator(dir.path(), "new", (&endpoint, "5ValidatorNew", "127.0.0.2"), &table, None);
    let (mut old, old_http, old_lines) =
        start_validator(dir.path(), "old", (&endpoint, "5ValidatorOld", "127.0.0.3"), &table, Some(1));
    let all = [&new_lines, &old_lines];
    // Before the block: both decide the first match, by version 1 (no coin).
    wait_until("both validators' first match", 60, &all, &mut || {
        count(&new_lines, "match_decided") >= 1 && count(&old_lines, "match_decided") >= 1
    });
    assert!(head() < activation, "the first matches ended before the activation block");
    assert_eq!(get(old_http, "/healthz").0, 200);
    // The block passes; a new miner enters after it.
    wait_until("the activation block", 30, &all, &mut || head() >= activation + 5);
    enter(&endpoint, "5Late", "late", &late.1);
    wait_until("the older build's stop", 20, &all, &mut || count(&old_lines, "upgrade_required") == 1);
    let (status, body) = get(old_http, "/healthz");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains(&format!("protocol version 2 activates at block {activation}; upgrade af")), "{body}");
    assert!(get(old_http, "/metrics").1.contains("af_protocol_upgrade_required 1"));
    assert!(get(new_http, "/metrics").1.contains("af_protocol_upgrade_required 0"));
    assert_eq!(get(new_http, "/healthz").0, 200, "the newer build plays on");
    // The newer build plays the late miner under version 2; the older one does not.
    wait_until("the newer build's match of version 2", 90, &all, &mut || count(&new_lines, "match_decided") >= 2);
    std::thread::sleep(std::time::Duration::from_secs(3)); // gossip of its last blocks
    for child in [&mut new, &mut old] {
        let _ = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        child.wait().unwrap();
    }
    assert_eq!(count(&old_lines, "upgrade_required"), 1, "said once");
    // The older build's table ends at version 1: it learned the block from the newer
    // validator's chain commitment (ledger-spec/07), the only other permitted validator.
    assert_eq!(count(&old_lines, "upgrade_announced"), 1);
    assert_eq!(count(&new_lines, "upgrade_announced") + count(&new_lines, "upgrade_required"), 0);

    let new_key = af::ledger::LedgerKey::load(&dir.path().join("new/validator.key")).unwrap().validator();
    let old_key = af::ledger::LedgerKey::load(&dir.path().join("old/validator.key")).unwrap().validator();
    let full = Protocol::upgrade_test(activation);
    for holder in ["new", "old"] {
        let by_new_build = replay_by(&dir.path().join(holder), full.clone());
        let state = &by_new_build.state;
        assert_eq!(state.validators.len(), 2, "{holder} holds both logs");
        assert!(state.discrepancies.is_empty(), "{holder}: {:?}", state.discrepancies);
        assert!(state.validators.iter().all(|v| v.vtrust_ppm == 1_000_000 && !v.equivocated));
        // The older build's own log ends before version 2: it signed nothing from the block on.
        let old_fold = by_new_build.folds.iter().find(|f| f.validator == old_key).unwrap();
        assert!(old_fold.chain_block_seen < activation, "{holder}: {}", old_fold.chain_block_seen);
        // The newer one played version 2's coin after the block.
        let new_fold = by_new_build.folds.iter().find(|f| f.validator == new_key).unwrap();
        assert!(new_fold
            .matches
            .iter()
            .map(Result::unwrap)
            .any(|(_, m)| m.chain_block >= activation && m.envs.iter().any(|e| &*e.name == "coin")));
        assert!(new_fold.matches.iter().map(Result::unwrap).all(|(_, m)| m.network_rules));
        // The older build's replay, told of version 2 as the chain announced it: no
        // finding, no vTrust moved, the newer log waiting at its first block of it. Not
        // told, it still blames no one: version 2's kinds and `coin` are in no version
        // it has, so the newer log waits at its first block holding one.
        let unaware = replay_by(&dir.path().join(holder), full.clone().capped(1));
        assert!(unaware.state.discrepancies.is_empty(), "{:?}", unaware.state.discrepancies);
        assert!(unaware.state.validators.iter().all(|v| v.vtrust_ppm == 1_000_000));
        let by_old_build = replay_by(&dir.path().join(holder), full.clone().capped(1).with_announced(2, activation));
        assert!(by_old_build.state.discrepancies.is_empty(), "{:?}", by_old_build.state.discrepancies);
        assert!(by_old_build.state.validators.iter().all(|v| v.vtrust_ppm == 1_000_000));
        let waiting = by_old_build.folds.iter().find(|f| f.validator == new_key).unwrap();
        assert_eq!(waiting.awaiting_upgrade.map(|(_, v)| v), Some(2));
        assert!(by_old_build.folds.iter().find(|f| f.validator == old_key).unwrap().awaiting_upgrade.is_none());
    }
}
