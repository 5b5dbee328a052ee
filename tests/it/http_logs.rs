//! Logs over plain HTTP (ledger-spec/11): mirroring from a node's API and from a
//! published site served by Python's `http.server`, servers that lie, consistency proofs
//! under every byte flip, and read commands against a running validator.

use crate::{af, af_bin, stdout};
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::http::mirror::{self, ChainOutcome, MirrorOptions, MirrorReport};
use af::http::{layout, publish, server};
use af::ledger::{consistency, verify, OwnLog, Store};
use af::synthetic_logs::{validator_key, write_network, NetworkSpec};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A store holding a small synthetic network (three validators' real logs).
fn network(dir: &Path, start_ms: u64) -> Store {
    let store = Store::create(dir).unwrap();
    write_network(&store, &NetworkSpec { start_ms, events_per_block: 16, ..NetworkSpec::small(3) }).unwrap();
    store
}

fn state_hash(store: &Store) -> af::bytes::Hash32 {
    af::replay::replay(store, &af::envs::registry(), None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}).unwrap().state_hash
}

fn verifies(store: &Store) -> bool {
    verify::verify_store(store, &|_, _| {}).unwrap().ok
}

/// The node's API over `store` on a loopback port; its base URL.
pub(crate) fn serve_node(runtime: &tokio::runtime::Runtime, store: Store) -> String {
    let budget = af::budget::MemoryBudget::new(af::budget::DEFAULT_BUDGET_BYTES);
    serve_node_with(runtime, store, budget, server::HttpLimits::default())
}

/// [`serve_node`] with its readers' memory budget and limits given.
fn serve_node_with(
    runtime: &tokio::runtime::Runtime,
    store: Store,
    budget: Arc<af::budget::MemoryBudget>,
    limits: server::HttpLimits,
) -> String {
    let log = Arc::new(OwnLog::new(store, validator_key(0)));
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let router = server::router(
            log,
            Default::default(),
            DEFAULT_RATIO_PARAMS,
            Arc::default(),
            budget,
            now_ms,
            limits.clone(),
        );
        let (_stop_sender, stop) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let _keep = _stop_sender;
            server::serve(listener, router, &limits, stop).await.unwrap();
        });
        url
    })
}

pub(crate) fn mirror_into(runtime: &tokio::runtime::Runtime, store: &Arc<Store>, url: &str) -> MirrorReport {
    let options = MirrorOptions { stall_timeout: std::time::Duration::from_secs(5), ..MirrorOptions::default() };
    runtime.block_on(mirror::mirror(store.clone(), url, options, &mut |_, _, _| {})).unwrap()
}

struct Python(Child);

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Python's `http.server` serving `site` on a free loopback port; its base URL.
fn python_server(site: &Path) -> (Python, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1", "-d", site.to_str().unwrap(), &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 is installed");
    let guard = Python(child);
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (guard, format!("http://127.0.0.1:{port}/"))
}

#[test]
fn mirrors_of_a_node_and_of_a_published_site_verify_and_replay_to_the_same_state() {
    let runtime = runtime();
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let source = network(dirs[0].path(), 1_790_000_000_000);
    let expected = state_hash(&source);
    let n_blocks: u64 = source.tips().unwrap().iter().map(|(_, t)| t.height + 1).sum();
    let site = dirs[1].path().join("site");
    let published = publish::publish(&source, Some(&validator_key(0)), &site_at(&site), &mut |_| {}).unwrap();
    assert_eq!(published.blocks, n_blocks);
    // Publishing again rewrites nothing.
    let again = publish::publish(&source, Some(&validator_key(0)), &site_at(&site), &mut |_| {}).unwrap();
    assert_eq!((again.bundles_written, again.bundles_unchanged), (0, published.bundles_written));
    let node = serve_node(&runtime, source);

    let (_python, site_url) = python_server(&site);
    for (url, dir) in [(&node, dirs[2].path()), (&site_url, dirs[3].path())] {
        let copy = Arc::new(Store::create(dir).unwrap());
        let report = mirror_into(&runtime, &copy, url);
        assert_eq!(report.chains.len(), 3, "{url}");
        assert_eq!(report.blocks_new(), n_blocks, "{url}: {report:?}");
        assert!(!report.found_fault() && !report.failed(), "{url}: {report:?}");
        assert!(verifies(&copy), "{url}");
        assert_eq!(state_hash(&copy), expected, "{url}");
        // Resumable: a second run finds nothing new and fetches no bundle.
        let second = mirror_into(&runtime, &copy, url);
        assert_eq!(second.blocks_new(), 0);
        assert!(second.chains.iter().all(|c| matches!(c.outcome, ChainOutcome::UpToDate)), "{second:?}");
    }
    // The node and the site serve byte-identical documents at the same paths.
    let own = validator_key(0).validator();
    let get = |url: String| runtime.block_on(async { reqwest::get(url).await.unwrap().bytes().await.unwrap() });
    for path in
        [layout::log_list_path(), layout::tip_path(&own), layout::bundle_path(&own, 0, published_width(&site, &own))]
    {
        assert_eq!(get(format!("{node}{path}")), get(format!("{site_url}{path}")), "{path}");
    }
}

/// The width of the first bundle of `validator` in a published site (full, or the
/// partial one of a log under 256 blocks).
fn published_width(site: &Path, validator: &af::bytes::ValidatorKey) -> u64 {
    let entries = site.join(layout::log_dir(validator)).join("tile/entries");
    if entries.join("000").is_file() {
        return layout::TILE_WIDTH;
    }
    let name = std::fs::read_dir(entries.join("000.p")).unwrap().next().unwrap().unwrap().file_name();
    name.to_str().unwrap().parse().unwrap()
}

#[derive(Clone, Copy)]
enum Lie {
    /// Serve the file with the given path's bytes changed at one offset.
    FlipByte(usize),
    /// Cut the body to this many bytes (declaring that length).
    Truncate(usize),
    /// Declare the whole length, send this many bytes, close.
    DropMidway(usize),
    /// The file, then zeros forever.
    Endless,
    /// Declares 10 GB.
    HugeLength,
}

/// A server that serves a published site from memory, lying on chosen paths. Raw HTTP/1.1
/// over TCP, one request per connection, so it can say what no honest server would.
fn liar(runtime: &tokio::runtime::Runtime, site: &Path, lies: HashMap<String, Lie>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut files = HashMap::new();
    for entry in walk(site) {
        let path = entry.strip_prefix(site).unwrap().to_str().unwrap().to_string();
        files.insert(path, std::fs::read(&entry).unwrap());
    }
    let state = Arc::new(Mutex::new((files, lies)));
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                        if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push(byte[0]);
                    }
                    let line = String::from_utf8_lossy(&head).lines().next().unwrap_or("").to_string();
                    let path = line.split(' ').nth(1).unwrap_or("/").trim_start_matches('/').to_string();
                    let (file, lie) = {
                        let (files, lies) = &*state.lock().unwrap();
                        (files.get(&path).cloned(), lies.get(&path).copied())
                    };
                    let Some(mut body) = file else {
                        let _ = socket
                            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                            .await;
                        return;
                    };
                    let ok = |length: &str| format!("HTTP/1.1 200 OK\r\n{length}connection: close\r\n\r\n");
                    match lie {
                        None => {}
                        Some(Lie::FlipByte(at)) => body[at] ^= 0x01,
                        Some(Lie::Truncate(n)) => body.truncate(n),
                        Some(Lie::DropMidway(n)) => {
                            let _ =
                                socket.write_all(ok(&format!("content-length: {}\r\n", body.len())).as_bytes()).await;
                            let _ = socket.write_all(&body[..n]).await;
                            return;
                        }
                        Some(Lie::Endless) | Some(Lie::HugeLength) => {
                            let length = if matches!(lie, Some(Lie::HugeLength)) {
                                "content-length: 10000000000\r\n"
                            } else {
                                ""
                            };
                            let _ = socket.write_all(ok(length).as_bytes()).await;
                            let _ = socket.write_all(&body).await;
                            let zeros = vec![0u8; 65536];
                            while socket.write_all(&zeros).await.is_ok() {}
                            return;
                        }
                    }
                    let _ = socket.write_all(ok(&format!("content-length: {}\r\n", body.len())).as_bytes()).await;
                    let _ = socket.write_all(&body).await;
                });
            }
        });
        url
    })
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// `n` temporary directories, the test network's store in the first and its published
/// site in the second.
fn published_network(n: usize) -> (Vec<tempfile::TempDir>, Store, std::path::PathBuf) {
    let dirs: Vec<tempfile::TempDir> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
    let source = network(dirs[0].path(), 1_790_000_000_000);
    let site = dirs[1].path().join("site");
    publish::publish(&source, None, &site_at(&site), &mut |_| {}).unwrap();
    (dirs, source, site)
}

#[test]
fn a_lying_server_is_refused_with_evidence_or_a_clear_error_and_nothing_unverified_is_stored() {
    let runtime = runtime();
    let (dirs, source, site) = published_network(3);
    let own = validator_key(0).validator();
    let width = published_width(&site, &own);
    let bundle = layout::bundle_path(&own, 0, width);
    let bundle_len = std::fs::read(site.join(&bundle)).unwrap().len();
    let honest_size = width;

    let cases: Vec<(&str, String, Lie, &str)> = vec![
        ("a changed byte in a block", bundle.clone(), Lie::FlipByte(bundle_len / 2), "refused"),
        ("a changed byte in the signed tip", layout::tip_path(&own), Lie::FlipByte(40), "refused"),
        ("a truncated range", bundle.clone(), Lie::Truncate(bundle_len - 10), "refused"),
        ("a connection dropped mid-range", bundle.clone(), Lie::DropMidway(bundle_len - 10), "failed"),
        ("an endless body", bundle.clone(), Lie::Endless, "refused"),
        ("a 10 GB Content-Length on a bundle", bundle.clone(), Lie::HugeLength, "refused"),
        ("a 10 GB Content-Length on the tip", layout::tip_path(&own), Lie::HugeLength, "refused"),
        ("a 10 GB Content-Length on the log list", layout::log_list_path(), Lie::HugeLength, "error"),
    ];
    for (what, path, lie, expect) in cases {
        let url = liar(&runtime, &site, HashMap::from([(path, lie)]));
        let copy_dir = tempfile::tempdir().unwrap();
        let copy = Arc::new(Store::create(copy_dir.path()).unwrap());
        let options = MirrorOptions {
            // The log list is read only when no chain is named.
            validator: (expect != "error").then_some(own),
            stall_timeout: std::time::Duration::from_secs(5),
            ..MirrorOptions::default()
        };
        let started = std::time::Instant::now();
        let result = runtime.block_on(mirror::mirror(copy.clone(), &url, options, &mut |_, _, _| {}));
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "{what}: took {:?}", started.elapsed());
        match (expect, result) {
            ("refused", Ok(report)) => {
                let chain = &report.chains[0];
                assert!(matches!(chain.outcome, ChainOutcome::Refused { .. }), "{what}: {:?}", chain.outcome);
            }
            ("failed", Ok(report)) => {
                let chain = &report.chains[0];
                assert!(matches!(chain.outcome, ChainOutcome::Failed { .. }), "{what}: {:?}", chain.outcome);
            }
            ("error", Err(error)) => assert!(error.is_refusal(), "{what}: {error}"),
            (_, other) => panic!("{what}: {other:?}"),
        }
        // Whatever was stored verifies, and never goes past the honest chain.
        assert!(verifies(&copy), "{what}");
        assert!(copy.tip(&own).unwrap().is_none_or(|t| t.height < honest_size), "{what}");
    }

    // A fork: the same validators sign a different history. A mirror holding the honest
    // chain gets evidence, and the evidence proves the equivocation on its own.
    let honest = Arc::new(Store::create(dirs[2].path()).unwrap());
    let expected = state_hash(&source);
    let node = serve_node(&runtime, source);
    assert!(!mirror_into(&runtime, &honest, &node).found_fault());
    let fork_dir = tempfile::tempdir().unwrap();
    let fork = network(fork_dir.path(), 1_790_000_500_000);
    let fork_site = fork_dir.path().join("site");
    publish::publish(&fork, None, &site_at(&fork_site), &mut |_| {}).unwrap();
    let url = liar(&runtime, &fork_site, HashMap::new());
    let report = mirror_into(&runtime, &honest, &url);
    assert_eq!(report.chains.len(), 3);
    for chain in &report.chains {
        let ChainOutcome::Equivocation { evidence } = &chain.outcome else { panic!("{:?}", chain.outcome) };
        af::replay::fold::check_evidence(evidence).unwrap();
    }
    assert!(verifies(&honest));
    // Nothing of the fork was stored.
    assert_eq!(state_hash(&honest), expected);
}

/// A consistency proof is counted against the readers' budget before it is built (1 KiB
/// a header: the headers and their JSON), so a crowd asking for the longest ones cannot
/// make the node build more than the budget holds: past it, a reader is told the node
/// is busy and nothing is built; a proof that fits is served, and the budget returns.
#[test]
fn consistency_proofs_are_counted_before_they_are_built() {
    let dir = tempfile::tempdir().unwrap();
    let store = network(dir.path(), 1_790_000_000_000);
    let own = validator_key(0).validator();
    let size = store.tip(&own).unwrap().unwrap().height + 1;
    let runtime = runtime();
    let budget = af::budget::MemoryBudget::new(1024 * (size - 1));
    let limits = server::HttpLimits { request_timeout: std::time::Duration::from_millis(500), ..Default::default() };
    let url = serve_node_with(&runtime, store, budget.clone(), limits);
    let get = |old: u64| {
        runtime.block_on(async {
            let response = reqwest::get(format!("{url}af/v1/log/{own}/consistency?old={old}")).await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        })
    };
    // The whole chain: over the budget by its estimate, refused without a build.
    let (status, body) = get(1);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("memory budget"), "{body}");
    let (status, body) = get(size - 2);
    assert_eq!(status, 200, "{body}");
    consistency::verify(&serde_json::from_str(&body).unwrap()).unwrap();
    // The body's reservation goes when the server drops the body, just after the client
    // has read it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while budget.used() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(budget.used(), 0, "every reservation returned once answered");
}

#[test]
fn consistency_proofs_hold_and_every_flipped_byte_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = network(dir.path(), 1_790_000_000_000);
    let own = validator_key(0).validator();
    let size = store.tip(&own).unwrap().unwrap().height + 1;
    assert!(size >= 4, "a chain long enough to prove something");
    for old in 1..=size {
        let proof = consistency::prove(&store, &own, old, None).unwrap();
        consistency::verify(&proof).unwrap();
        assert_eq!(proof.headers.len() as u64, size - old + 1);
    }
    assert!(consistency::prove(&store, &own, 0, None).is_err());
    assert!(consistency::prove(&store, &own, 3, Some(2)).is_err());
    assert!(consistency::prove(&store, &own, 1, Some(size + 1)).is_err());

    let proof = consistency::prove(&store, &own, size - 2, None).unwrap();
    let text = serde_json::to_vec(&proof).unwrap();
    let mut refused = 0;
    for at in 0..text.len() {
        let mut mutated = text.clone();
        mutated[at] ^= 0x01;
        let accepted = serde_json::from_slice::<consistency::ConsistencyProof>(&mutated)
            .is_ok_and(|p| consistency::verify(&p).is_ok());
        assert!(!accepted, "a flip at byte {at} ({:?}) was accepted", text[at] as char);
        refused += 1;
    }
    assert_eq!(refused, text.len());
    // A proof from another chain's old tip does not extend this one.
    let other = validator_key(1).validator();
    let mut spliced = proof.clone();
    spliced.old.hash = consistency::prove(&store, &other, 1, Some(1)).unwrap().old.hash;
    assert!(consistency::verify(&spliced).is_err());
}

#[test]
fn consistency_between_two_checkpoints_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let d = data.to_str().unwrap();
    let grow = |blocks: &str| {
        assert!(af(&[
            "ledger",
            "demo",
            "--data",
            d,
            "--blocks",
            blocks,
            "--events-per-block",
            "2",
            "--event-bytes",
            "64"
        ])
        .status
        .success())
    };
    assert!(af(&["ledger", "init", "--data", d]).status.success());
    grow("3");
    let old = dir.path().join("old.note");
    std::fs::write(&old, stdout(&af(&["ledger", "checkpoint", "--data", d]))).unwrap();
    grow("4");
    let new = dir.path().join("new.note");
    std::fs::write(&new, stdout(&af(&["ledger", "checkpoint", "--data", d]))).unwrap();
    let proof = dir.path().join("proof.json");
    let output = af(&["ledger", "prove-consistency", "--data", d, "--old", "3"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    std::fs::write(&proof, &output.stdout).unwrap();
    let check = |old: &Path, new: &Path| {
        af(&[
            "ledger",
            "verify-consistency",
            "--proof",
            proof.to_str().unwrap(),
            "--old",
            old.to_str().unwrap(),
            "--new",
            new.to_str().unwrap(),
        ])
    };
    let ok = check(&old, &new);
    assert!(ok.status.success(), "{}{}", stdout(&ok), String::from_utf8_lossy(&ok.stderr));
    assert!(stdout(&ok).starts_with("ok: "));
    // Swapped checkpoints name other sizes: the check fails (exit 3).
    assert_eq!(check(&new, &old).status.code(), Some(3));
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_running_validator_answers_every_read_command_as_its_stopped_store_does() {
    let dir = tempfile::tempdir().unwrap();
    let miners: Vec<Running> = ["noisy:0.3", "perfect"]
        .iter()
        .map(|policy| {
            Running(
                Command::new(af_bin())
                    .args(["miner", "serve", "--listen", "127.0.0.1:0", "--policy", policy, "--model", "m"])
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let mut urls = Vec::new();
    let mut miners = miners;
    for miner in &mut miners {
        let mut line = String::new();
        BufReader::new(miner.0.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        urls.push(line.split_whitespace().nth(2).unwrap().to_string());
    }
    let mut config = "[evaluation]\n[ledger]\nblock_max_events = 16\nblock_max_ms = 50\n".to_string();
    for (i, (hotkey, url)) in ["5Noisy", "5Perfect"].iter().zip(&urls).enumerate() {
        config += &format!("\n[[miners]]\nhotkey = \"{hotkey}\"\nuid = {i}\nbase_url = \"{url}\"\nmodel = \"m\"\n");
    }
    let config_path = dir.path().join("v.toml");
    std::fs::write(&config_path, config).unwrap();
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let mut validator = Running(
        Command::new(af_bin())
            .args(["validate", "--data", d, "--config", config_path.to_str().unwrap(), "--serve"])
            .args(["--listen", "/ip4/127.0.0.1/tcp/0", "--http", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = BufReader::new(validator.0.stderr.take().unwrap());
    loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "the validator ended before serving");
        if line.contains("\"serving\"") {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    assert!(data.join(af::http::ADDRESS_FILE).exists());
    let reads: Vec<Vec<&str>> = vec![
        vec!["ledger", "show", "--data", d, "--json"],
        vec!["ledger", "verify", "--data", d, "--json"],
        vec!["ledger", "export", "--data", d, "--format", "blocks"],
        vec!["ledger", "export", "--data", d],
        vec!["ledger", "find", "--data", d, "--miner", "5Perfect", "--json"],
        vec!["ratio", "show", "--data", d, "--json"],
        vec!["weights", "show", "--data", d, "--json"],
        vec!["transcripts", "--data", d, "--miner", "5Noisy", "--json"],
        vec!["audit", "--data", d, "--json"],
    ];
    let run_all = || -> Vec<serde_json::Value> {
        reads
            .iter()
            .map(|args| {
                let output = af(args);
                assert!(
                    output.status.success(),
                    "{args:?}: {}\n{}",
                    String::from_utf8_lossy(&output.stderr),
                    String::from_utf8_lossy(&output.stdout)
                );
                comparable(&output.stdout)
            })
            .collect()
    };
    operator_endpoints_agree_with_the_log(&data);
    let live = run_all();
    // SIGTERM (systemd, pm2) stops it as Ctrl-C does: sealed, exit 130.
    assert!(Command::new("kill").args(["-TERM", &validator.0.id().to_string()]).status().unwrap().success());
    assert_eq!(validator.0.wait().unwrap().code(), Some(130));
    assert!(!data.join(af::http::ADDRESS_FILE).exists(), "the address file is removed at exit");
    let stopped = run_all();
    for ((args, live), stopped) in reads.iter().zip(&live).zip(&stopped) {
        assert_eq!(live, stopped, "{args:?}");
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// `GET url`: the status and the body.
pub(crate) fn fetch(url: &str) -> (u16, String) {
    runtime().block_on(async {
        let response = reqwest::get(url).await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    })
}

/// The operator's endpoints of a validator whose queue is done: health, metrics, the
/// live view, and the page, against what its own log says.
fn operator_endpoints_agree_with_the_log(data: &Path) {
    let base = std::fs::read_to_string(data.join(af::http::ADDRESS_FILE)).unwrap().trim().to_string();
    assert_eq!(fetch(&format!("{base}healthz")), (200, "ok\n".to_string()));
    let (status, metrics) = fetch(&format!("{base}metrics"));
    assert_eq!(status, 200);
    for family in [
        "af_matches_decided_total{verdict=",
        "af_games_total{env=",
        "af_miner_requests_total{miner=\"5Perfect\",outcome=\"ok\"}",
        "af_blocks_appended_total ",
        "af_append_seconds_bucket",
        "af_miner_latency_seconds_bucket{le=\"0.001\",miner=\"5Perfect\"}",
        // A scraper that does not ask for OpenMetrics gets 0.0.4, where a counter's
        // family is named by its samples.
        "# TYPE af_games_total counter",
        "# HELP af_games_total ",
    ] {
        assert!(metrics.contains(family), "{family} missing from\n{metrics}");
    }
    assert!(!metrics.contains("# EOF") && !metrics.contains("# TYPE af_games counter"), "{metrics}");
    let open = runtime().block_on(async {
        let response = reqwest::Client::new()
            .get(format!("{base}metrics"))
            .header("accept", "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4")
            .send()
            .await
            .unwrap();
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("application/openmetrics-text"));
        response.text().await.unwrap()
    });
    assert!(open.ends_with("# EOF\n") && open.contains("# TYPE af_games counter"), "{open}");
    let (status, live) = fetch(&format!("{base}af/v1/live"));
    assert_eq!(status, 200, "{live}");
    let live: serde_json::Value = serde_json::from_str(&live).unwrap();
    let gauge = |name: &str| {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name} in {metrics}"));
        line.rsplit(' ').next().unwrap().parse::<f64>().unwrap()
    };
    assert_eq!(gauge("af_champion_uid "), live["champion"]["uid"].as_f64().unwrap());
    assert_eq!(gauge("af_tip_height "), live["size"].as_f64().unwrap() - 1.0);
    assert_eq!(gauge("af_ratio_to_beat "), live["ratio_to_beat_ppm"].as_f64().unwrap() / 1e6);
    // The disk: the store file as it was at the scrape (it only grows while running, so
    // at most its size now), and room left on its file system.
    let file = gauge("af_store_file_bytes ");
    let store_len = std::fs::metadata(data.join("ledger.redb")).unwrap().len() as f64;
    assert!(file > 0.0 && file <= store_len, "{file} against {store_len}");
    assert!(gauge("af_store_disk_free_bytes ") > 0.0, "{metrics}");
    // The subnet's pages, folded from the same log: our validator, both miners, the match.
    let own = live["validator"].as_str().unwrap();
    let champion = live["champion"]["hotkey"].as_str().unwrap();
    for (page, must) in [
        ("subnet.html", format!("data-validator=\"{own}\"")),
        ("miners.html", format!("data-miner=\"{champion}\"")),
        ("matches.html", "id=\"m-0\"".to_string()),
        ("history.html", "id=\"champions\"".to_string()),
    ] {
        let (status, html) = fetch(&format!("{base}{page}"));
        assert_eq!(status, 200, "{page}: {html}");
        assert!(html.contains(&must) && html.contains("<nav>"), "{page} lacks {must}: {html}");
        // Each page names the replay it was drawn from: the state the API serves.
        let (_, state) = fetch(&format!("{base}af/v1/state"));
        let state: serde_json::Value = serde_json::from_str(&state).unwrap();
        let hash = format!("<code class=\"state-hash\">{}</code>", state["state_hash"].as_str().unwrap());
        assert!(html.contains(&hash), "{page} lacks {hash}");
        assert!(!html.contains("undefined") && !html.contains("NaN"), "{page}: {html}");
    }
    // The miners page is served a page at a time too: one page for these few miners, and
    // a page past it is refused with how many there are.
    let (status, first) = fetch(&format!("{base}miners.html?page=1"));
    assert!(status == 200 && first.contains(&format!("data-miner=\"{champion}\"")), "{first}");
    let (status, past) = fetch(&format!("{base}miners.html?page=2"));
    assert!(status == 404 && past.contains("no page 2 of miners.html: there are 1"), "{status}: {past}");
    // The replay the pages were drawn from, in the metrics: the matches played; each
    // replay is kept in the file as it ends, so only each log's last started match stays
    // in memory.
    let (_, metrics) = fetch(&format!("{base}metrics"));
    let gauge = |name: &str| {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name} in {metrics}"));
        line.rsplit(' ').next().unwrap().parse::<f64>().unwrap()
    };
    let (held, in_memory) = (gauge("af_replay_matches "), gauge("af_replay_matches_in_memory "));
    assert!(held >= 1.0 && (1.0..=held).contains(&in_memory), "{held} matches, {in_memory} in memory");
    // The state's one match per pair, in the replay's file where the combine wrote it.
    let pairs = gauge("af_state_matches ");
    assert!(pairs >= 1.0 && pairs <= held, "{pairs} state matches of {held}");
    assert!(!metrics.contains("af_state_matches_in_memory"), "the state's matches are always in the file");
    // A match's answers side by side, reached from the matches page, a page at a time.
    let (_, listing) = fetch(&format!("{base}matches.html"));
    let link = listing.split("href=\"").find(|s| s.starts_with("match.html?id=")).expect("a link to the match");
    let link = link.split('"').next().unwrap().to_string();
    let (status, side) = fetch(&format!("{base}{link}"));
    assert_eq!(status, 200, "{side}");
    let counted = side.split("id=\"pair-pages\">Challenges ").nth(1).and_then(|t| t.split(" of ").nth(1)).unwrap();
    let total: usize = counted.split(' ').next().unwrap().parse().unwrap();
    let rows = side.matches("data-challenge=").count();
    assert!(total > 0 && rows == total.min(af::http::pages::PAIRS_PER_PAGE), "{rows} rows of {total}: {side}");
    assert!(side.contains("af/v1/transcripts?challenge=") && !side.contains("no champion answer"), "{side}");
    let pages = total.div_ceil(af::http::pages::PAIRS_PER_PAGE);
    assert_eq!(fetch(&format!("{base}{link}&page={pages}")).0, 200);
    assert_eq!(fetch(&format!("{base}{link}&page={}", pages + 1)).0, 404);
    assert_eq!(fetch(&format!("{base}match.html?id=00000000000000000000")).0, 404);
    let ratio: serde_json::Value =
        serde_json::from_slice(&af(&["ratio", "show", "--data", data.to_str().unwrap(), "--json"]).stdout).unwrap();
    assert_eq!(live["champion"]["hotkey"], ratio["champion"]);
    assert_eq!(live["matches_decided"], ratio["matches_decided"]);
    assert!(live["match"].is_null(), "the queue is done: {live}");
    let show: serde_json::Value =
        serde_json::from_slice(&af(&["ledger", "show", "--data", data.to_str().unwrap(), "--json"]).stdout).unwrap();
    let own = show.as_array().unwrap().iter().find(|c| c["validator"] == live["validator"]).unwrap();
    assert_eq!(live["size"], own["n_blocks"], "{live} {show}");
    let (status, page) = fetch(&base);
    assert_eq!(status, 200);
    assert!(page.contains("af/v1/live") && page.contains("id=\"champion\""));
}

/// A command's output without what depends on the moment it ran (timings), as JSON;
/// non-JSON output as its bytes' hash. The ratio's "now" is a chain block the log names,
/// so it is compared too.
fn comparable(bytes: &[u8]) -> serde_json::Value {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for key in ["seconds", "events_per_second", "mib_per_second", "generated_at_ms"] {
                    map.remove(key);
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(mut value) => {
            strip(&mut value);
            value
        }
        Err(_) => serde_json::Value::String(blake3::hash(bytes).to_hex().to_string()),
    }
}

#[test]
fn the_node_api_caches_what_never_changes_and_answers_errors_as_json() {
    let runtime = runtime();
    let dir = tempfile::tempdir().unwrap();
    let source = network(dir.path(), 1_790_000_000_000);
    let own = validator_key(0).validator();
    let size = (source.tip(&own).unwrap().unwrap().height + 1).min(layout::TILE_WIDTH);
    let node = serve_node(&runtime, source);
    let client = reqwest::Client::new();
    let get = |path: String, etag: Option<String>| {
        let mut request = client.get(format!("{node}{path}"));
        if let Some(etag) = etag {
            request = request.header("if-none-match", etag);
        }
        runtime.block_on(async {
            let response = request.send().await.unwrap();
            let (status, headers) = (response.status().as_u16(), response.headers().clone());
            (status, headers, response.bytes().await.unwrap())
        })
    };
    let bundle = layout::bundle_path(&own, 0, size);
    let (status, headers, body) = get(bundle.clone(), None);
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "public, max-age=31536000, immutable");
    let etag = headers["etag"].to_str().unwrap().to_string();
    let (status, _, empty) = get(bundle.clone(), Some(etag));
    assert_eq!((status, empty.len()), (304, 0));
    let (status, _, again) = get(bundle.clone(), Some("\"other\"".into()));
    assert_eq!((status, again), (200, body));
    let (_, headers, _) = get(layout::tip_path(&own), None);
    assert_eq!(headers["cache-control"], "no-cache");
    // Errors are JSON and name what was wrong.
    for (path, status) in [
        ("af/v1/nothing".to_string(), 404),
        // One spelling per URL: every other spelling is not found.
        ("af/v1/log/XYZ/tip".to_string(), 404),
        (format!("af/v1/log/{}/tip", own.to_hex().to_uppercase()), 404),
        (format!("{}/block/+1", layout::log_dir(&own)), 404),
        (format!("{}/block/01", layout::log_dir(&own)), 404),
        (layout::bundle_path(&own, 0, size + 1), 404),
        (format!("{}/tile/entries/0.p/1", layout::log_dir(&own)), 404),
        (format!("{}/tile/entries/000.p/01", layout::log_dir(&own)), 404),
        (format!("{}/consistency?old=0", layout::log_dir(&own)), 400),
        (format!("{}/checkpoint", layout::log_dir(&validator_key(1).validator())), 404),
        ("af/v1/transcripts".to_string(), 400),
        ("af/v1/transcripts?challenge=0123".to_string(), 400),
        (format!("af/v1/transcripts?challenge={}", "f".repeat(65)), 400),
    ] {
        let (got, _, body) = get(path.clone(), None);
        assert_eq!(got, status, "{path}");
        let error: serde_json::Value = serde_json::from_slice(&body).unwrap_or_else(|_| panic!("{path}: not JSON"));
        assert!(error["error"].as_str().is_some_and(|e| !e.is_empty()), "{path}");
    }
    // A challenge is found by a 16-hex prefix as by its full id.
    let (_, _, page) = get("af/v1/transcripts?miner=5SynthRandom&limit=1".into(), None);
    let page: serde_json::Value = serde_json::from_slice(&page).unwrap();
    let challenge = page["entries"][0]["transcript"]["challenge_id"].as_str().unwrap().to_string();
    let (_, _, full) = get(format!("af/v1/transcripts?challenge={challenge}"), None);
    let (status, _, short) = get(format!("af/v1/transcripts?challenge={}", &challenge[..16]), None);
    assert_eq!(status, 200);
    assert_eq!(full, short);
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&full).unwrap()["total"], 2);
    // The page limit holds whatever the client asks.
    let (_, _, state) = get("af/v1/state?limit=1000000".into(), None);
    let state: serde_json::Value = serde_json::from_slice(&state).unwrap();
    assert!(state["matches"].as_array().unwrap().len() <= server::MAX_MATCHES_PAGE);
    assert!(state["champion"].is_object());
}

/// ledger-spec/11: the log list only names what to fetch. A validator named twice is
/// mirrored once, `own` absent from the list decides nothing, and sizes that disagree
/// with the signed tip are hints the reader does not follow.
#[test]
fn a_log_list_naming_a_validator_twice_with_wrong_sizes_is_followed_by_the_signed_tips() {
    let runtime = runtime();
    let (_dirs, source, site) = published_network(2);
    let list_path = site.join(layout::log_list_path());
    let mut list: serde_json::Value = serde_json::from_slice(&std::fs::read(&list_path).unwrap()).unwrap();
    let first = list["logs"][0].clone();
    let n_logs = list["logs"].as_array().unwrap().len();
    list["logs"].as_array_mut().unwrap().push(first.clone());
    list["logs"][0]["size"] = 1_000_000.into();
    list["own"] = serde_json::Value::Null;
    std::fs::write(&list_path, list.to_string()).unwrap();
    let url = liar(&runtime, &site, HashMap::new());
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = Arc::new(Store::create(copy_dir.path()).unwrap());
    let report = mirror_into(&runtime, &copy, &url);
    assert_eq!(report.chains.len(), n_logs, "each validator once: {report:?}");
    assert!(!report.found_fault() && !report.failed(), "{report:?}");
    assert_eq!(state_hash(&copy), state_hash(&source));
}

/// A block dated more than `FUTURE_TOLERANCE_MS` after the mirror's clock is not taken
/// (ledger-spec/03, "Reception"): the mirror says why and keeps the blocks before it.
#[test]
fn a_mirror_does_not_take_a_block_dated_far_in_the_future() {
    let runtime = runtime();
    let (source, target) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = OwnLog::new(Store::create(source.path()).unwrap(), validator_key(0));
    let validator = log.validator();
    let now = now_ms();
    for (height, time_ms) in [(0, now), (1, now + 1_000), (2, now + af::limits::FUTURE_TOLERANCE_MS + 3_600_000)] {
        log.append(af::ledger::demo::demo_events(&validator, height, 2, 300), time_ms).unwrap();
    }
    let OwnLog { store, .. } = log;
    let url = serve_node(&runtime, store);
    let mirror = Arc::new(Store::create(target.path()).unwrap());
    let options = MirrorOptions { stall_timeout: std::time::Duration::from_secs(5), ..MirrorOptions::default() };
    let report = runtime.block_on(mirror::mirror(mirror.clone(), &url, options, &mut |_, _, _| {})).unwrap();
    let message = format!("{:?}", report.chains[0].outcome);
    assert!(message.contains("Refused") && message.contains("block 2 is dated"), "{message}");
    assert_eq!(report.chains[0].size_after, 2);
    assert_eq!(mirror.tip(&validator).unwrap().map(|t| t.height), Some(1), "the blocks before it are kept");
}

/// The published site in folder `path`.
fn site_at(path: &std::path::Path) -> af::http::archive::Site {
    af::http::archive::Site::open(path.to_str().unwrap()).unwrap()
}

/// A site published to an object store (here `file://`, the same code path as `s3://`
/// and the others: `object_store`) mirrors back to the same state; publishing a longer
/// log again writes only the bundles past the site's tip, and gives the objects a
/// whole publish gives; a changed object is refused with nothing unverified stored.
#[test]
fn a_site_on_an_object_store_mirrors_back_and_grows_by_its_new_bundles_only() {
    use af::ledger::block::SealedBlock;
    let runtime = runtime();
    let dirs: Vec<tempfile::TempDir> = (0..6).map(|_| tempfile::tempdir().unwrap()).collect();
    let full = network(dirs[0].path(), 1_790_000_000_000);
    let tips = full.tips().unwrap();
    // The same logs cut to their first 20 blocks, published first.
    let early = Store::create(dirs[1].path()).unwrap();
    for (validator, tip) in &tips {
        for height in 0..=tip.height.min(19) {
            let bytes = full.block_bytes(validator, height).unwrap().unwrap();
            early.append(&SealedBlock::from_bytes(bytes).unwrap()).unwrap();
        }
    }
    let url = format!("file://{}/bucket/site", dirs[2].path().display());
    let site = af::http::archive::Site::open(&url).unwrap();
    let first = publish::publish(&early, None, &site, &mut |_| {}).unwrap();
    assert_eq!(first.blocks_already_published, 0);
    let grown = publish::publish(&full, None, &site, &mut |_| {}).unwrap();
    // Each chain's 16-block tile below 20 is not read again; its partial one is.
    assert_eq!(grown.blocks_already_published, 16 * tips.len() as u64, "{grown:?}");
    assert_eq!(grown.blocks, tips.iter().map(|(_, t)| t.height + 1).sum::<u64>());
    // Byte for byte what one publish of the whole logs writes, but for the superseded
    // partial tiles of the first, which stay (bundles are immutable).
    let whole = dirs[3].path().join("site");
    publish::publish(&full, None, &site_at(&whole), &mut |_| {}).unwrap();
    let published = dirs[2].path().join("bucket/site");
    for file in walk(&whole) {
        let relative = file.strip_prefix(&whole).unwrap();
        assert_eq!(std::fs::read(published.join(relative)).unwrap(), std::fs::read(&file).unwrap(), "{relative:?}");
    }
    let copy = Arc::new(Store::create(dirs[4].path()).unwrap());
    let report = mirror_into(&runtime, &copy, &url);
    assert!(!report.found_fault() && !report.failed(), "{report:?}");
    assert_eq!(state_hash(&copy), state_hash(&full));
    // One byte of one full bundle changed in the store: refused; the verified blocks
    // before the changed one are kept, none from it on.
    let (validator, _) = tips[0];
    let bundle = published.join(af::http::layout::bundle_path(&validator, 0, af::http::layout::TILE_WIDTH));
    let mut bytes = std::fs::read(&bundle).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&bundle, bytes).unwrap();
    let fresh = Arc::new(Store::create(dirs[5].path()).unwrap());
    let report = mirror_into(&runtime, &fresh, &url);
    assert!(report.found_fault(), "{report:?}");
    let kept = fresh.tip(&validator).unwrap().map_or(0, |t| t.height + 1);
    assert!(kept < af::http::layout::TILE_WIDTH, "{kept} blocks kept");
    assert!(verifies(&fresh));
    // Another chain's signed tip in place of one's: refused, nothing of that chain taken.
    let (other, _) = tips[1];
    let tip_of = |v| published.join(af::http::layout::tip_path(v));
    std::fs::copy(tip_of(&other), tip_of(&validator)).unwrap();
    let fresh = Arc::new(Store::create(&dirs[5].path().join("again")).unwrap());
    let report = mirror_into(&runtime, &fresh, &url);
    let chain = report.chains.iter().find(|c| c.validator == validator).unwrap();
    assert!(format!("{:?}", chain.outcome).contains("signed for validator"), "{chain:?}");
    assert!(fresh.tip(&validator).unwrap().is_none());
    // A log list past its bound is refused by its declared size, before it is read.
    let list = published.join(af::http::layout::log_list_path());
    std::fs::write(&list, vec![b' '; af::http::layout::MAX_LOG_LIST_BYTES as usize + 1]).unwrap();
    let options = MirrorOptions::default();
    let store = Arc::new(Store::create(&dirs[5].path().join("list")).unwrap());
    let refused = runtime.block_on(mirror::mirror(store, &url, options, &mut |_, _, _| {})).unwrap_err();
    assert!(refused.to_string().contains("declares"), "{refused}");
}

/// A node that pruned old bodies (ledger-spec/05) serves their chain's tip and the
/// heights it holds whole, and answers 404 naming the archive for a pruned bundle or
/// block (it never fetches for a reader); the archive itself mirrors back whole.
#[test]
fn a_pruned_node_sends_readers_of_old_blocks_to_the_archive() {
    let runtime = runtime();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let start_ms = 1_790_000_000_000;
    // One event a block: logs long enough for whole groups of pruned blocks.
    let store = Store::create(dirs[0].path()).unwrap();
    write_network(&store, &NetworkSpec { start_ms, events_per_block: 1, ..NetworkSpec::small(3) }).unwrap();
    let whole_hash = state_hash(&store);
    let archive = dirs[1].path().join("archive");
    publish::publish(&store, None, &site_at(&archive), &mut |_| {}).unwrap();
    let own = validator_key(0).validator();
    let now = start_ms + 30 * 86_400_000;
    let pruned = af::http::prune::prune_to_archive(&store, &site_at(&archive), Some(own), 1, now, &mut |_| {}).unwrap();
    assert!(pruned.n_blocks > 0);
    let (peer, tip) = store.tips().unwrap().into_iter().find(|(v, _)| *v != own).unwrap();
    let below = store.pruned_below(&peer).unwrap();
    assert!(below >= af::ledger::store::PRUNED_GROUP_BLOCKS && below <= tip.height);
    let url = serve_node(&runtime, store);
    let (status, body) = fetch(&format!("{url}{}", layout::bundle_path(&peer, 0, layout::TILE_WIDTH)));
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("pruned") && body.contains(archive.to_str().unwrap()), "{body}");
    let (status, body) = fetch(&format!("{url}af/v1/log/{}/block/0", peer.to_hex()));
    assert_eq!(status, 404, "{body}");
    let (status, _) = fetch(&format!("{url}af/v1/log/{}/block/{}", peer.to_hex(), tip.height));
    assert_eq!(status, 200, "the heights held whole are served");
    let (status, _) = fetch(&format!("{url}{}", layout::tip_path(&peer)));
    assert_eq!(status, 200);
    // The archive holds every body: a mirror of it is the whole network again.
    let copy = Arc::new(Store::create(dirs[2].path()).unwrap());
    let report = mirror_into(&runtime, &copy, &format!("file://{}", archive.display()));
    assert!(!report.found_fault() && !report.failed(), "{report:?}");
    assert_eq!(state_hash(&copy), whole_hash);
}
