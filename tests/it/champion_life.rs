//! The champion's life (ledger-spec/13): a champion that leaves the crown without a match
//! (deregistered, swapped away, or committing another model) leaves it once validators
//! holding more than half of the trust record it; the queue's first other miner holds it
//! until a match says otherwise, and a champion gone after the last match holds no weight.

use af::envs;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::block::seal;
use af::ledger::event::{ChampionLeft, LeaveReason, MinerRef};
use af::ledger::{Event, Store};
use af::protocol::Protocol;
use af::replay::{self, Replay};
use af::synthetic_logs::{validator_key, write_network, Faults, NetworkSpec};

/// Perfect beats Noisy, Random fails against Perfect, then Noisy plays Random as its
/// champion; `leaves`: the validators that record Perfect leaving before the third match.
fn network(leaves: Vec<usize>) -> (tempfile::TempDir, Replay) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    let faults = Faults { champion_leaves: Some((2, 1, leaves)), ..Faults::default() };
    let spec = NetworkSpec {
        matches: vec![(1, 0), (2, 1), (0, 2)],
        events_per_block: 16,
        faults,
        ..NetworkSpec::small(3).with_plan(af::protocol::PLAN_V4)
    };
    write_network(&store, &spec).unwrap();
    let replayed = replay_local(&store);
    (dir, replayed)
}

fn replay_local(store: &Store) -> Replay {
    let registry = envs::registry().with_protocol(Protocol::local());
    replay::replay(store, &registry, None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap()
}

fn history(replayed: &Replay) -> Vec<(String, bool)> {
    replayed.state.champion_history.iter().map(|c| (c.champion.hotkey.to_string(), c.by_match.is_some())).collect()
}

#[test]
fn a_champion_recorded_gone_by_more_than_half_of_the_trust_leaves_and_the_next_match_sets_its_successor() {
    let (_dir, replayed) = network(vec![0, 1]);
    assert!(replayed.state.discrepancies.is_empty(), "{:?}", replayed.state.discrepancies);
    let seen = history(&replayed);
    assert_eq!(seen[..2], [("5SynthNoisy".into(), false), ("5SynthPerfect".into(), true)]);
    assert_eq!(seen[2], ("5SynthRandom".to_string(), false), "the next match's champion holds the crown: {seen:?}");
    let champion = replayed.state.champion.clone().expect("a champion");
    assert_ne!(&*champion.hotkey, "5SynthPerfect");
    assert_eq!(replayed.state.weights, vec![(champion.uid, u16::MAX)]);
}

#[test]
fn a_third_of_the_trust_saying_the_champion_left_changes_nothing() {
    let (_dir, replayed) = network(vec![0]);
    assert_eq!(history(&replayed), [("5SynthNoisy".into(), false), ("5SynthPerfect".into(), true)]);
    assert_eq!(replayed.state.champion.as_ref().map(|c| c.hotkey.to_string()), Some("5SynthPerfect".into()));
    assert_eq!(replayed.state.weights, vec![(1, u16::MAX)]);
}

#[test]
fn a_champion_gone_after_the_last_match_holds_no_weight() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path()).unwrap();
    let keys = write_network(
        &store,
        &NetworkSpec { events_per_block: 16, ..NetworkSpec::small(3).with_plan(af::protocol::PLAN_V4) },
    )
    .unwrap();
    let before = replay_local(&store);
    let champion = before.state.champion.clone().unwrap();
    assert_eq!((&*champion.hotkey, before.state.weights.clone()), ("5SynthPerfect", vec![(1, u16::MAX)]));
    let gone = MinerRef { hotkey: champion.hotkey.to_string(), uid: champion.uid, model: champion.model.to_string() };
    for (i, key) in keys.iter().enumerate().take(2) {
        let tip = store.tip(key).unwrap().unwrap();
        let left = Event::ChampionLeft(ChampionLeft {
            champion: gone.clone(),
            reason: LeaveReason::Recommitted,
            chain_block: 2_000,
        });
        store.append(&seal(validator_key(i).signing_key(), Some(&tip), tip.time_ms + 1, vec![left]).unwrap()).unwrap();
    }
    let after = replay_local(&store);
    assert!(after.state.discrepancies.is_empty(), "{:?}", after.state.discrepancies);
    assert_eq!(after.state.champion, None);
    assert!(after.state.weights.is_empty(), "a champion that left holds no weight");
    // Under the network's table, version 3 is not active at chain block 2,000: the same
    // event is an invalid block there.
    let by_network = replay::replay(&store, &envs::registry(), None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap();
    assert!(by_network
        .state
        .discrepancies
        .iter()
        .any(|d| d.detail.contains("event tag 13 is not a kind of protocol version 2")));
}

/// A running validator whose champion is deregistered (its uid given to a new hotkey) on
/// a local chain: it records the leaving, the queue's first miner holds the crown and
/// defends it against the next contender, and the deregistered uid gets no weight.
#[test]
fn a_running_validator_whose_champion_is_deregistered_plays_on_with_the_queues_first_miner() {
    use crate::protocol_upgrade::{count, start_validator, wait_until};
    let dir = tempfile::tempdir().unwrap();
    let chain = crate::chain_local::serve_with(&dir.path().join("chain"), "127.0.0.1:0", &["--tempo", "20"]);
    let endpoint = format!("local:{}", chain.1);
    let (first, second, late, later) = (
        crate::validator_cli::miner("random"),
        crate::validator_cli::miner("perfect"),
        crate::validator_cli::miner("noisy:0.1"),
        crate::validator_cli::miner("random"),
    );
    crate::validator_service::enter(&endpoint, "5First", "first", &first.1);
    std::thread::sleep(std::time::Duration::from_millis(150));
    crate::validator_service::enter(&endpoint, "5Second", "second", &second.1);
    assert!(crate::af(&["chain", "register", "--chain", &endpoint, "--hotkey", "5ValidatorA", "--validator"])
        .status
        .success());
    let (mut a, _, lines) = start_validator(dir.path(), "a", (&endpoint, "5ValidatorA", "127.0.0.2"), "local", None);
    wait_until("the first match", 60, &[&lines], &mut || count(&lines, "match_decided") >= 1);
    // 5First stays champion (random is as good at coin as perfect is): its uid goes to a
    // newcomer.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let reader = af::chain::local_client::LocalClient::new(&chain.1, 1, None).unwrap();
    let neurons = runtime.block_on(af::chain::Chain::neurons(&reader)).unwrap();
    let uid = neurons.iter().find(|n| n.hotkey == "5First").unwrap().uid;
    let taken = crate::af(&[
        "chain",
        "register",
        "--chain",
        &endpoint,
        "--hotkey",
        "5Newcomer",
        "--replace-uid",
        &uid.to_string(),
    ]);
    assert!(taken.status.success(), "{}", String::from_utf8_lossy(&taken.stderr));
    crate::validator_service::enter(&endpoint, "5Late", "late", &late.1);
    std::thread::sleep(std::time::Duration::from_millis(150));
    crate::validator_service::enter(&endpoint, "5Later", "later", &later.1);
    wait_until("the champion's leaving and the next match", 90, &[&lines], &mut || {
        count(&lines, "champion_left") == 1 && count(&lines, "match_decided") >= 2
    });
    let _ = std::process::Command::new("kill").args(["-INT", &a.id().to_string()]).status();
    a.wait().unwrap();
    let store = Store::open_read_only(&dir.path().join("a")).unwrap();
    let replayed = replay_local(&store);
    assert!(replayed.state.discrepancies.is_empty(), "{:?}", replayed.state.discrepancies);
    let seen = history(&replayed);
    assert_eq!(seen[0], ("5First".to_string(), false));
    assert_eq!(seen[1], ("5Late".to_string(), false), "the queue's first miner took the crown: {seen:?}");
    let champion = replayed.state.champion.clone().unwrap();
    assert!(["5Late", "5Later"].contains(&&*champion.hotkey));
    assert_ne!(replayed.state.weights, vec![(uid, u16::MAX)], "the newcomer on the old uid gets nothing");
    let fold = &replayed.folds[0];
    assert!(fold.champion_left.iter().any(|l| &*l.hotkey == "5First" && l.reason == LeaveReason::Deregistered));
}

/// A champion that goes dark (ledger-spec/13): every call to it fails, each such
/// challenge is scored as its environment scores no answer, and the next contender that
/// answers right takes the crown; the champion does not keep it for want of a match.
#[test]
fn a_dark_champion_loses_the_crown_to_the_next_contender_that_answers() {
    let dir = tempfile::tempdir().unwrap();
    let contender = crate::validator_cli::miner("perfect");
    let dark = format!("http://127.0.0.1:{}", crate::free_port());
    let config = dir.path().join("validator.toml");
    std::fs::write(
        &config,
        format!(
            "[evaluation]\nwindow = 8\nenvs = [\"mult\"]\n\
             [client]\ntimeout_ms = 1000\nmax_attempts = 2\nbackoff_base_ms = 10\nbackoff_max_ms = 20\n\
             [[miners]]\nhotkey = \"5Dark\"\nuid = 0\nbase_url = \"{dark}\"\nmodel = \"m\"\n\
             [[miners]]\nhotkey = \"5Answers\"\nuid = 1\nbase_url = \"{}\"\nmodel = \"m\"\n",
            contender.1
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let out =
        crate::af(&["validate", "--data", data.to_str().unwrap(), "--config", config.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["champion"], "5Answers", "{summary}");
    assert!(summary["requests"]["failed"].as_u64().unwrap() > 0, "the dark champion's calls failed: {summary}");
}
