//! The local stand-in chain: subtensor's rules that `af` relies on (registration, the
//! commitment space limit, the weights rate limit, commit-reveal, version keys), several
//! processes committing and reading at once, and a restart after SIGKILL that keeps
//! everything.

use crate::{af, af_bin, stdout};
use af::bytes::{Hash32, ValidatorKey};
use af::chain::local::LocalChain;
use af::chain::local_api::router;
use af::chain::local_client::LocalClient;
use af::chain::{Chain, LedgerCommitment};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static CLOCK_MS: AtomicU64 = AtomicU64::new(1_000_000);

fn test_clock() -> u64 {
    CLOCK_MS.load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_chain_applies_subtensors_rules() {
    let dir = tempfile::tempdir().unwrap();
    // 1 s blocks on a clock the test moves.
    let chain = Arc::new(LocalChain::open(dir.path(), 1_000, 360, test_clock).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router(chain)).await.unwrap() });
    let admin = LocalClient::new(&addr, 3, None).unwrap();
    let alice = LocalClient::new(&addr, 3, Some("alice".into())).unwrap();
    let bob = LocalClient::new(&addr, 3, Some("bob".into())).unwrap();
    let commitment = LedgerCommitment {
        tip_hash: Hash32([1; 32]),
        ledger_key: ValidatorKey([2; 32]),
        tip_height: 9,
        protocol: None,
    };

    // Unregistered hotkeys can neither commit nor set weights.
    let refused = alice.commit(&commitment).await.unwrap_err().to_string();
    assert!(refused.contains("not registered"), "{refused}");
    assert_eq!(admin.register("alice", true).await.unwrap().uid, 0);
    assert_eq!(admin.register("bob", false).await.unwrap().uid, 1);
    assert_eq!(admin.register("alice", true).await.unwrap().uid, 0, "registering again is idempotent");

    // 3100 bytes of space per tempo at 100 per commitment: 31 fit, the 32nd waits.
    for _ in 0..31 {
        alice.commit(&commitment).await.unwrap();
    }
    let full = alice.commit(&commitment).await.unwrap_err().to_string();
    assert!(full.contains("SpaceLimitExceeded"), "{full}");
    bob.commit(&commitment).await.expect("space is per hotkey");
    CLOCK_MS.fetch_add(360 * 1_000, Ordering::SeqCst); // next tempo
    alice.commit(&commitment).await.expect("a new tempo frees the space");
    let records = admin.commitments().await.unwrap();
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r.ledger() == Some(commitment)));

    // Weights: rate limit, version key, commit-reveal, uids that exist.
    let block = alice.set_weights(&[1], &[65535], 0).await.unwrap();
    let fast = alice.set_weights(&[1], &[65535], 0).await.unwrap_err().to_string();
    assert!(fast.contains("SettingWeightsTooFast"), "{fast}");
    let limits = alice.weight_limits().await.unwrap();
    assert_eq!((limits.last_update, limits.rate_limit_blocks), (Some(block), 100));
    CLOCK_MS.fetch_add(100 * 1_000, Ordering::SeqCst);
    assert!(alice.set_weights(&[7], &[1], 0).await.unwrap_err().to_string().contains("UidVecContainInvalidOne"));
    admin.settings(serde_json::json!({ "version_key": 5 })).await.unwrap();
    assert!(alice.set_weights(&[1], &[1], 4).await.unwrap_err().to_string().contains("IncorrectWeightVersionKey"));
    alice.set_weights(&[1], &[1], 5).await.unwrap();
    admin.settings(serde_json::json!({ "commit_reveal_enabled": true })).await.unwrap();
    CLOCK_MS.fetch_add(100 * 1_000, Ordering::SeqCst);
    assert!(bob.set_weights(&[0], &[1], 5).await.unwrap_err().to_string().contains("CommitReveal"));
    assert_eq!(admin.weights().await.unwrap(), vec![(0, vec![(1, 1)])]);
}

pub struct Server(Child, pub String);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn serve(dir: &std::path::Path, listen: &str) -> Server {
    serve_with(dir, listen, &[])
}

/// `af chain serve` with 100 ms blocks and `extra` flags; killed when dropped.
pub fn serve_with(dir: &std::path::Path, listen: &str, extra: &[&str]) -> Server {
    let mut child = Command::new(af_bin())
        .args(["chain", "serve", "--data", dir.to_str().unwrap(), "--listen", listen, "--block-ms", "100"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("{line:?}")).to_string();
    Server(child, addr)
}

#[test]
fn processes_commit_concurrently_and_a_restart_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let chain_dir = dir.path().join("chain");
    let server = serve(&chain_dir, "127.0.0.1:0");
    let chain = format!("local:{}", server.1);
    let n = 4;
    let mut expected = Vec::new();
    for i in 0..n {
        let data = dir.path().join(format!("v{i}"));
        assert!(af(&["ledger", "demo", "--data", data.to_str().unwrap(), "--blocks", "3", "--events-per-block", "4"])
            .status
            .success());
        assert!(af(&["chain", "register", "--chain", &chain, "--hotkey", &format!("hk{i}"), "--validator"])
            .status
            .success());
        let shown: serde_json::Value =
            serde_json::from_slice(&af(&["ledger", "show", "--data", data.to_str().unwrap(), "--json"]).stdout)
                .unwrap();
        expected.push((format!("hk{i}"), shown));
    }
    // Every validator commits at once, from its own process.
    let children: Vec<Child> = (0..n)
        .map(|i| {
            let data = dir.path().join(format!("v{i}"));
            Command::new(af_bin())
                .args([
                    "chain",
                    "commit",
                    "--data",
                    data.to_str().unwrap(),
                    "--chain",
                    &chain,
                    "--hotkey",
                    &format!("hk{i}"),
                    "--json",
                ])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut commits = Vec::new();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{}", stdout(&output));
        commits.push(serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap());
    }
    // Each commit named the tip before it and was recorded in its log one block later.
    for commit in &commits {
        assert_eq!(commit["commitment"]["committed_height"], 2);
        assert_eq!(commit["recorded_at_height"], 3);
    }
    let read = |chain: &str| -> Vec<serde_json::Value> {
        serde_json::from_slice(&af(&["chain", "commitments", "--chain", chain, "--json"]).stdout).unwrap()
    };
    let before = read(&chain);
    assert_eq!(before.len(), n);
    for (hotkey, shown) in &expected {
        let record = before.iter().find(|r| r["hotkey"] == hotkey.as_str()).unwrap();
        let ledger = &record["ledger"];
        assert_eq!(ledger["tip_height"], 2);
        assert_eq!(ledger["ledger_key"], shown[0]["validator"], "{hotkey} committed its own ledger key");
        assert_eq!(ledger["tip_hash"], shown[0]["tip"]["hash"], "{hotkey} committed its tip");
    }
    let neurons_before = stdout(&af(&["chain", "neurons", "--chain", &chain, "--json"]));
    let status_before: serde_json::Value =
        serde_json::from_slice(&af(&["chain", "status", "--chain", &chain, "--json"]).stdout).unwrap();

    // SIGKILL the chain, start it again on the same directory and address.
    let addr = server.1.clone();
    drop(server);
    let again = serve(&chain_dir, &addr);
    assert_eq!(read(&chain), before, "every commitment survived");
    assert_eq!(stdout(&af(&["chain", "neurons", "--chain", &chain, "--json"])), neurons_before);
    let status_after: serde_json::Value =
        serde_json::from_slice(&af(&["chain", "status", "--chain", &chain, "--json"]).stdout).unwrap();
    assert!(status_after["block"].as_u64() >= status_before["block"].as_u64(), "the block clock never goes back");
    drop(again);
}

#[test]
fn a_block_hash_exists_only_once_its_block_does_and_survives_a_restart() {
    use af::chain::Chain;
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (head, future, hash) = {
        let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
        let client = af::chain::local_client::LocalClient::new(&server.1, 1, None).unwrap();
        let head = runtime.block_on(client.current_block()).unwrap();
        let hash = runtime.block_on(client.block_hash(head)).unwrap().expect("the head has a hash");
        // Five blocks ahead (100 ms each) nobody can know the hash: a match id derived
        // from it cannot be computed in advance.
        let future = head + 5;
        assert_eq!(runtime.block_on(client.block_hash(future)).unwrap(), None);
        std::thread::sleep(std::time::Duration::from_millis(800));
        let later = runtime.block_on(client.block_hash(future)).unwrap().expect("the block exists now");
        assert_ne!(later, hash);
        assert_eq!(runtime.block_on(client.block_hash(head)).unwrap(), Some(hash), "a block's hash never changes");
        (head, future, later)
    };
    // The chain keeps its seed across a restart: the same blocks, the same hashes.
    let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
    let client = af::chain::local_client::LocalClient::new(&server.1, 1, None).unwrap();
    assert_eq!(runtime.block_on(client.block_hash(future)).unwrap(), Some(hash));
    assert!(runtime.block_on(client.block_hash(head)).unwrap().is_some());
}

/// A hotkey label is outside text: in the human listing its escapes and newlines are
/// shown escaped, so it can neither recolour the terminal nor forge a row of its own.
#[test]
fn terminal_output_escapes_the_chains_strings() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
    let chain = format!("local:{}", server.1);
    let hostile = "hk\u{1b}[31m\n    7  forged\r\u{202e}";
    let registered = af(&["chain", "register", "--chain", &chain, "--hotkey", hostile]);
    assert!(registered.status.success(), "{}", String::from_utf8_lossy(&registered.stderr));
    for listing in
        [&["chain", "neurons", "--chain", &chain][..], &["chain", "register", "--chain", &chain, "--hotkey", hostile]]
    {
        let output = af(listing);
        let text = crate::stdout(&output);
        assert!(!text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{202e}'), "{text:?}");
        assert!(text.contains("hk\\u{1b}[31m\\u{a}    7  forged\\u{d}\\u{202e}"), "{text:?}");
        assert!(!text.lines().any(|l| l.trim_start().starts_with("7  forged")), "{text:?}");
    }
}

/// The node's subnet page, and a site published with `--chain`, name each validator by
/// the uid and hotkey whose commitment on the chain names its ledger key, and the miners
/// page gives a waiting contender its place in this validator's queue (issue 27: the
/// node's pages said "not read" for every validator and knew no queue).
#[test]
fn the_pages_name_validators_and_the_queue_from_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir.path().join("chain"), "127.0.0.1:0");
    let chain = format!("local:{}", server.1);
    let data = dir.path().join("v");
    let data_text = data.to_str().unwrap();
    assert!(af(&["ledger", "demo", "--data", data_text, "--blocks", "2", "--events-per-block", "2"]).status.success());
    for hotkey in ["5Other", "5Validator"] {
        let registered = af(&["chain", "register", "--chain", &chain, "--hotkey", hotkey, "--validator"]);
        assert!(registered.status.success(), "{}", String::from_utf8_lossy(&registered.stderr));
    }
    let committed = af(&["chain", "commit", "--data", data_text, "--chain", &chain, "--hotkey", "5Validator"]);
    assert!(committed.status.success(), "{}", String::from_utf8_lossy(&committed.stderr));
    // A miner waiting to play: the miners page places it in this validator's queue.
    assert!(af(&["chain", "register", "--chain", &chain, "--hotkey", "5Waiting"]).status.success());
    let miner = [
        "mine",
        "commit",
        "--chain",
        &chain,
        "--hotkey",
        "5Waiting",
        "--model",
        "org/m",
        "--revision",
        "r1",
        "--endpoint",
        "http://127.0.0.1:9",
    ];
    let mined = af(&miner);
    assert!(mined.status.success(), "{}", String::from_utf8_lossy(&mined.stderr));
    // A published site's page, with --chain, says the same.
    let site = dir.path().join("site");
    let published = af(&["ledger", "publish", "--data", data_text, "--out", site.to_str().unwrap(), "--chain", &chain]);
    assert!(published.status.success(), "{}", String::from_utf8_lossy(&published.stderr));
    let subnet = std::fs::read_to_string(site.join("subnet.html")).unwrap();
    assert!(subnet.contains("uid 1") && subnet.contains("hotkey 5Validator"), "{subnet}");
    let queued = |page: &str| {
        let row = page.split("<tr").find(|r| r.contains("data-miner=\"5Waiting\"")).unwrap_or_default().to_string();
        assert!(row.contains("queued #1 of 1") && row.contains("org/m@r1"), "{page}");
    };
    queued(&std::fs::read_to_string(site.join("miners.html")).unwrap());

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = af::ledger::Store::create(&data).unwrap();
    let key = af::ledger::LedgerKey::load(&data.join(af::ledger::keys::KEY_FILE)).unwrap();
    let validator = key.validator();
    let log = Arc::new(af::ledger::OwnLog::new(store, key));
    let client: Arc<dyn Chain> = Arc::new(LocalClient::new(&server.1, 1, None).unwrap());
    let url = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let limits = af::http::server::HttpLimits::default();
        let feeds = af::http::server::Feeds { chain: Some(client), ..Default::default() };
        let router = af::http::server::router(
            log,
            feeds,
            af::evaluation::ratio::DEFAULT_RATIO_PARAMS,
            Arc::default(),
            af::budget::MemoryBudget::new(af::budget::DEFAULT_BUDGET_BYTES),
            af::clock::unix_ms,
            limits.clone(),
        );
        let (stop_sender, stop) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let _keep = stop_sender;
            af::http::server::serve(listener, router, &limits, stop).await.unwrap();
        });
        url
    });
    let page = runtime.block_on(async {
        // The first replay of the store may not be ready at once: 503 until it is.
        for _ in 0..100 {
            let response = reqwest::get(format!("{url}subnet.html")).await.unwrap();
            if response.status() == 200 {
                return response.text().await.unwrap();
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("subnet.html never answered 200");
    });
    let miners =
        runtime.block_on(async { reqwest::get(format!("{url}miners.html")).await.unwrap().text().await.unwrap() });
    queued(&miners);
    let row = page.split("<tr").find(|r| r.contains(&format!("data-validator=\"{validator}\""))).unwrap();
    assert!(row.contains("5Validator") && row.contains("uid 1"), "{row}");
    assert!(!row.contains("not read"), "{row}");
}

/// The stand-in's `swap_hotkey`, as subtensor's moves a registration on one subnet
/// (pallets/subtensor/src/swap/swap_hotkey.rs): the uid with its registration block,
/// permit and weights, and the axon, go to the new hotkey; the commitments pallet is not
/// touched, so the old hotkey's commitment stays where it was; the same hotkey, a new
/// one registered already, or an old one that is not are refused by subtensor's names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hotkey_swap_moves_the_uid_and_its_axon_but_not_its_commitment() {
    let dir = tempfile::tempdir().unwrap();
    let chain = Arc::new(LocalChain::open(dir.path(), 1_000, 360, af::clock::unix_ms).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, router(chain)).await.unwrap() });
    let admin = LocalClient::new(&addr, 1, None).unwrap();
    let old = LocalClient::new(&addr, 1, Some("5Old".into())).unwrap();
    let new = LocalClient::new(&addr, 1, Some("5New".into())).unwrap();
    let before = admin.register("5Old", true).await.unwrap();
    admin.register("5Other", false).await.unwrap();
    let commitment = LedgerCommitment {
        tip_hash: Hash32([1; 32]),
        ledger_key: ValidatorKey([2; 32]),
        tip_height: 3,
        protocol: None,
    };
    old.commit(&commitment).await.unwrap();
    old.serve_axon("10.0.0.1".parse().unwrap(), 4000).await.unwrap();
    old.set_weights(&[1], &[65535], 0).await.unwrap();

    assert!(admin.swap_hotkey("5Old", "5Old").await.unwrap_err().to_string().contains("NewHotKeyIsSameWithOld"));
    let taken = admin.swap_hotkey("5Old", "5Other").await.unwrap_err().to_string();
    assert!(taken.contains("HotKeyAlreadyRegisteredInSubNet"), "{taken}");
    assert!(admin.swap_hotkey("5Nobody", "5New").await.unwrap_err().to_string().contains("not registered"));
    let after = admin.swap_hotkey("5Old", "5New").await.unwrap();
    assert_eq!(
        (after.uid, after.registration_block, after.validator_permit),
        (before.uid, before.registration_block, true)
    );
    let neurons = admin.neurons().await.unwrap();
    assert!(neurons.iter().any(|n| n.hotkey == "5New" && n.uid == before.uid));
    assert!(!neurons.iter().any(|n| n.hotkey == "5Old"), "the old hotkey holds no uid");
    // The axon moved; the weights stay with the uid; the commitment stays under 5Old.
    let axons = admin.axons().await.unwrap();
    assert_eq!(axons.iter().map(|a| a.hotkey.as_str()).collect::<Vec<_>>(), ["5New"]);
    assert_eq!(admin.weights().await.unwrap(), vec![(before.uid, vec![(1, 65535)])]);
    let records = admin.commitments().await.unwrap();
    assert_eq!(records.iter().map(|r| r.hotkey.as_str()).collect::<Vec<_>>(), ["5Old"]);
    // Only the new hotkey may act for the uid now.
    assert!(old.commit(&commitment).await.unwrap_err().to_string().contains("not registered"));
    new.commit(&commitment).await.unwrap();
}
