//! Whole matches over real loopback HTTP against reference miners, recorded in a real
//! ledger; then the ledger is verified and replayed to the same decision.

use af::bytes::Hash32;
use af::envs::{self, Message};
use af::evaluation::matchplay::{GameOutcome, MatchState, MatchVerdict};
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::evaluation::stopping::DEFAULT_RULE;
use af::ledger::event::{Event, MinerRef};
use af::ledger::{verify, LedgerKey, OwnLog, Store};
use af::miner::client::{ClientConfig, Endpoint, MinerClient};
use af::miner::policy::Policy;
use af::validator::matchrun::{self, Contestant, MatchPlan, MatchReport};
use af::validator::{state, writer};
use std::sync::Arc;

async fn miner(policy: Policy, name: &str, uid: u16) -> Contestant {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    let router = af::miner::server::router(policy, name.into(), Hash32([uid as u8; 32]));
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Contestant {
        miner: MinerRef { hotkey: format!("5{name}"), uid, model: name.into() },
        endpoint: Endpoint { base_url, model: name.into(), api_key_env: None },
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// Plays one match into a fresh ledger; returns the report and the store's directory.
async fn run(contender: Contestant, champion: Contestant) -> (MatchReport, tempfile::TempDir, LedgerKey) {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(OwnLog::new(Store::create(dir.path()).unwrap(), LedgerKey::from_seed([8; 32])));
    let validator = log.validator();
    let metrics = Arc::new(af::metrics::Metrics::new());
    let handle = writer::spawn_writer(log.clone(), 128, 100, now_ms, None, metrics.clone());
    let registry = Arc::new(envs::registry());
    let client = Arc::new(
        MinerClient::new(ClientConfig {
            timeout_ms: 5_000,
            backoff_base_ms: 5,
            backoff_max_ms: 20,
            ..ClientConfig::default()
        })
        .unwrap()
        .with_metrics(metrics.clone()),
    );
    let plan = MatchPlan {
        match_id: af::envs::derive_match_id(
            &validator,
            &contender.miner.hotkey,
            &champion.miner.hotkey,
            0,
            0,
            &af::bytes::Hash32([0; 32]),
        ),
        chain_block: 0,
        chain_block_hash: af::bytes::Hash32([0; 32]),
        contender,
        champion,
        envs: matchrun::env_names(&registry),
        rule: DEFAULT_RULE,
        futility: None,
        cap: 200,
        max_challenges: 300,
        ratio_to_beat_ppm: DEFAULT_RATIO_PARAMS.floor_ppm(),
        window: 8,
    };
    let (_stop_sender, stop) = tokio::sync::watch::channel(false);
    let context = matchrun::MatchContext {
        validator,
        registry,
        client,
        events: handle.sender.clone(),
        ratio_params: DEFAULT_RATIO_PARAMS,
        chain_block: 0,
        stop,
        progress: None,
        flush: handle.flush.clone(),
        metrics: metrics.clone(),
    };
    let report = matchrun::play_match(plan, context, None).await.unwrap();
    drop(handle.sender);
    drop(handle.flush);
    let tip = handle.task.await.unwrap().unwrap().unwrap();
    check_metrics(&metrics.encode(), &report, tip.height + 1);
    drop(log);
    (report, dir, LedgerKey::from_seed([8; 32]))
}

/// Sums the samples of one metric family in a text exposition.
fn sum_of(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(family) && l[family.len()..].starts_with(['{', ' ']))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// The operator's metrics agree with the match: one start and one decision, a game per
/// recorded pair, a request per played episode, every block appended counted.
fn check_metrics(text: &str, report: &MatchReport, blocks: u64) {
    let pairs: u64 = report.state.envs.iter().map(|t| u64::from(t.wins + t.losses + t.draws)).sum();
    assert_eq!(sum_of(text, "af_matches_started_total"), 1.0, "{text}");
    assert_eq!(sum_of(text, "af_matches_decided_total"), 1.0, "{text}");
    assert_eq!(sum_of(text, "af_games_total"), pairs as f64, "{text}");
    assert!(sum_of(text, "af_miner_requests_total") >= 2.0 * pairs as f64, "{text}");
    assert_eq!(sum_of(text, "af_blocks_appended_total"), blocks as f64, "{text}");
    assert!(sum_of(text, "af_block_bytes_appended_total") > 0.0);
}

/// Verifies the stored chain, re-scores every transcript from its messages, and replays
/// the recorded pairs through a fresh match state: it must reach the recorded verdict.
fn check_ledger(dir: &std::path::Path, key: &LedgerKey, report: &MatchReport) -> Vec<af::ledger::event::Transcript> {
    let store = Store::open(dir).unwrap();
    assert!(verify::verify_store(&store, &|_, _| {}).unwrap().ok);
    let loaded = state::load(&store, &key.validator(), &DEFAULT_RATIO_PARAMS).unwrap();
    assert_eq!(loaded.last_decided.as_ref(), Some(&report.decided));
    assert!(loaded.open.is_none());

    let registry = envs::registry();
    let tip = store.tip(&key.validator()).unwrap().unwrap();
    let mut transcripts = Vec::new();
    for height in 0..=tip.height {
        for event in store.block(&key.validator(), height).unwrap().unwrap().block.events {
            if let Event::Transcript(t) = event {
                let env = registry.get(&t.env.name).unwrap();
                let messages: Vec<Message> =
                    t.messages.iter().map(|m| Message::new(&m.role, m.content.clone())).collect();
                let rescored = envs::score_transcript(env, &t.challenge_id, &messages).unwrap();
                assert_eq!(rescored.reward_milli, t.reward_milli, "recorded reward re-derives");
                transcripts.push(t);
            }
        }
    }
    let names = matchrun::env_names(&registry);
    let mut replayed =
        MatchState::new(names.len(), report.state.rule, report.state.cap, report.state.max_challenges, report.state.p0);
    for (env_index, name) in names.iter().enumerate() {
        let mut index = 0;
        while replayed.wants_more(env_index) {
            let reward = |hotkey_is_contender: bool| {
                transcripts
                    .iter()
                    .find(|t| {
                        t.env.name == *name && t.challenge_index == index && (t.miner.uid == 1) == hotkey_is_contender
                    })
                    .map(|t| t.reward_milli)
            };
            let (Some(c), Some(h)) = (reward(true), reward(false)) else { break };
            replayed.record(env_index, GameOutcome::of_rewards(c, h));
            index += 1;
        }
    }
    assert_eq!(replayed.verdict(), report.verdict, "replay reaches the recorded verdict");
    transcripts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perfect_contender_dethrones_a_noisy_champion() {
    let (report, dir, key) =
        run(miner(Policy::Perfect, "perfect", 1).await, miner(Policy::Noisy { p: 0.3 }, "noisy", 2).await).await;
    assert_eq!(report.verdict, MatchVerdict::ContenderWins, "{:?}", report.state);
    assert!(report.decided.new_ratio_to_beat_ppm > DEFAULT_RATIO_PARAMS.floor_ppm());
    check_ledger(dir.path(), &key, &report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_never_dethrones_perfect() {
    let (report, dir, key) =
        run(miner(Policy::Random, "random", 1).await, miner(Policy::Perfect, "perfect", 2).await).await;
    assert_eq!(report.verdict, MatchVerdict::ChampionStays);
    check_ledger(dir.path(), &key, &report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_perfect_miners_end_inconclusive() {
    let (report, dir, key) = run(miner(Policy::Perfect, "a", 1).await, miner(Policy::Perfect, "b", 2).await).await;
    assert_eq!(report.verdict, MatchVerdict::ChampionStays);
    assert!(report.state.envs.iter().all(|e| e.wins == 0 && e.losses == 0), "{:?}", report.state);
    check_ledger(dir.path(), &key, &report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_miners_are_recorded_with_errors_and_lose() {
    for policy in [Policy::Garbage, Policy::Flaky { p: 0.7 }] {
        let (report, dir, key) = run(miner(policy, "bad", 1).await, miner(Policy::Perfect, "perfect", 2).await).await;
        assert_eq!(report.verdict, MatchVerdict::ChampionStays, "{policy}");
        let transcripts = check_ledger(dir.path(), &key, &report);
        let errors = transcripts.iter().filter(|t| t.miner.uid == 1 && t.error.is_some()).count();
        assert!(errors > 0, "{policy}: failures are recorded as errors");
        assert!(transcripts.iter().filter(|t| t.miner.uid == 2).all(|t| t.error.is_none()));
    }
}

/// The writer under a burst: blocks queued during a commit go to disk together and are
/// sealed while it is written; every block is still announced once, in order, only once
/// durable, and the log verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_one_event_blocks_is_written_in_order_and_announced_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(OwnLog::new(Store::create(dir.path()).unwrap(), LedgerKey::from_seed([9; 32])));
    let validator = log.validator();
    let (announce, mut announced) = tokio::sync::mpsc::unbounded_channel();
    let metrics = Arc::new(af::metrics::Metrics::new());
    let handle = writer::spawn_writer(log.clone(), 1, 1_000, now_ms, Some(announce), metrics);
    let events = af::ledger::demo::demo_events(&validator, 0, 600, 300);
    for event in events {
        handle.sender.send(vec![event]).await.unwrap();
    }
    let tip = writer::flush(&handle.flush).await.unwrap().expect("a tip");
    assert_eq!(tip.height, 599);
    assert_eq!(log.tip().unwrap(), Some(tip), "the flush answers with the durable tip");
    drop(handle.sender);
    drop(handle.flush);
    assert_eq!(handle.task.await.unwrap().unwrap(), Some(tip));
    let mut heights = Vec::new();
    while let Ok((who, height)) = announced.try_recv() {
        assert_eq!(who, validator);
        heights.push(height);
    }
    assert_eq!(heights, (0..600).collect::<Vec<_>>());
    let report = af::ledger::verify::verify_store(&log.store, &|_, _| {}).unwrap();
    assert!(report.ok && report.n_blocks == 600 && report.n_events == 600, "{report:?}");
}
