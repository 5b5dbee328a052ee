//! Network benchmarks (`cargo bench --bench p2p`), real libp2p sockets on loopback, all
//! nodes in this process with their own fsync'd stores:
//! 1. propagation: 8 validators in a sparse topology (each dials the two before it);
//!    one appends a block every 100 ms; time until each other validator has stored it
//!    (p50, p99 per node, and until all have it). Target p99 < 250 ms.
//! 2. catch-up: a validator joins 100,000 events (~100 MiB) late; blocks/s and MiB/s
//!    until it holds the whole log. Target >= 50 MiB/s.
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) both are tiny smoke runs.

use af::ledger::demo::demo_events;
use af::ledger::{LedgerKey, OwnLog, Store};
use af::p2p::net::NetConfig;
use af::p2p::node::spawn_node;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a port").local_addr().expect("an address").port()
}

fn new_log(dir: &std::path::Path) -> Arc<OwnLog> {
    Arc::new(OwnLog::new(Store::create(dir).expect("a store"), LedgerKey::generate().expect("a key")))
}

fn address(port: u16) -> libp2p::Multiaddr {
    format!("/ip4/127.0.0.1/tcp/{port}").parse().expect("a multiaddr")
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let (n_blocks, catch_up_blocks) = if full { (200u64, 100u64) } else { (5, 2) };
    runtime.block_on(propagation(8, n_blocks));
    runtime.block_on(catch_up(catch_up_blocks, 1000, 1024));
}

/// Stops the nodes and waits for them, so none is still running when the runtime is
/// dropped (a node's timer polled during the runtime's shutdown panics).
async fn stop_nodes(stop: tokio::sync::watch::Sender<bool>, tasks: Vec<af::p2p::node::NodeHandle>) {
    let _ = stop.send(true);
    for handle in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(10), handle.task).await;
    }
}

async fn propagation(n: usize, n_blocks: u64) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (stop_sender, stop) = tokio::sync::watch::channel(false);
    let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
    let mut logs = Vec::new();
    let mut handles = Vec::new();
    for i in 0..n {
        let log = new_log(&dir.path().join(format!("v{i}")));
        let peers = (1..=2).filter(|d| i >= *d).map(|d| address(ports[i - d])).collect();
        let config = NetConfig { listen: vec![address(ports[i])], peers, ..NetConfig::default() };
        handles.push(spawn_node(log.clone(), config, None, now_ms, stop.clone()).expect("a node"));
        logs.push(log);
    }
    // Let the connections and the gossip mesh form.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let publisher = logs[0].validator();
    let mut per_node = Vec::new();
    let mut all = Vec::new();
    for _ in 0..n_blocks {
        let events = demo_events(&publisher, logs[0].tip().expect("a tip").map_or(0, |t| t.height + 1), 64, 1024);
        let receipt = {
            let log = logs[0].clone();
            tokio::task::spawn_blocking(move || log.append(events, now_ms()))
                .await
                .expect("no panic")
                .expect("appended")
        };
        let sent = Instant::now();
        handles[0].own_blocks.send((publisher, receipt.tip.height)).expect("the node runs");
        let mut arrived = vec![None; n];
        while arrived.iter().skip(1).any(Option::is_none) {
            for (i, log) in logs.iter().enumerate().skip(1) {
                if arrived[i].is_none()
                    && log.store.tip(&publisher).expect("readable").is_some_and(|t| t.height >= receipt.tip.height)
                {
                    arrived[i] = Some(sent.elapsed().as_secs_f64() * 1e3);
                }
            }
            if sent.elapsed() > Duration::from_secs(30) {
                panic!("block {} did not reach every node in 30 s: {arrived:?}", receipt.tip.height);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let times: Vec<f64> = arrived.into_iter().flatten().collect();
        all.push(times.iter().cloned().fold(0.0, f64::max));
        per_node.extend(times);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    per_node.sort_by(f64::total_cmp);
    all.sort_by(f64::total_cmp);
    println!("propagation: {n} validators (each dials the two before it), {n_blocks} blocks of 64 x 1 KiB events, one every ~100 ms\n");
    println!("| measure | p50 ms | p99 ms | max ms |");
    println!("|---|---:|---:|---:|");
    println!(
        "| block stored at one node | {:.1} | {:.1} | {:.1} |",
        percentile(&per_node, 0.5),
        percentile(&per_node, 0.99),
        per_node.last().expect("samples")
    );
    println!(
        "| block stored at all {} others | {:.1} | {:.1} | {:.1} |",
        n - 1,
        percentile(&all, 0.5),
        percentile(&all, 0.99),
        all.last().expect("samples")
    );
    println!("(target: p99 < 250 ms)\n");
    stop_nodes(stop_sender, handles).await;
}

async fn catch_up(n_blocks: u64, events_per_block: u32, event_bytes: usize) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (stop_sender, stop) = tokio::sync::watch::channel(false);
    let source = new_log(&dir.path().join("source"));
    let validator = source.validator();
    let mut n_bytes = 0u64;
    for height in 0..n_blocks {
        let receipt =
            source.append(demo_events(&validator, height, events_per_block, event_bytes), now_ms()).expect("appended");
        n_bytes += receipt.n_bytes as u64;
    }
    let (source_port, joiner_port) = (free_port(), free_port());
    let config = NetConfig { listen: vec![address(source_port)], ..NetConfig::default() };
    let source_node = spawn_node(source.clone(), config, None, now_ms, stop.clone()).expect("a node");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let joiner = new_log(&dir.path().join("joiner"));
    let started = Instant::now();
    let config =
        NetConfig { listen: vec![address(joiner_port)], peers: vec![address(source_port)], ..NetConfig::default() };
    let joiner_node = spawn_node(joiner.clone(), config, None, now_ms, stop.clone()).expect("a node");
    while joiner.store.tip(&validator).expect("readable").is_none_or(|t| t.height + 1 < n_blocks) {
        assert!(started.elapsed() < Duration::from_secs(600), "catch-up stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let mib = n_bytes as f64 / (1024.0 * 1024.0);
    println!(
        "catch-up: a validator joins {} events ({mib:.1} MiB, {n_blocks} blocks) late; time includes connecting\n",
        n_blocks * u64::from(events_per_block)
    );
    println!("| measure | value |");
    println!("|---|---:|");
    println!("| time to hold the whole log | {seconds:.2} s |");
    println!("| blocks/s | {:.0} |", n_blocks as f64 / seconds);
    println!("| **MiB/s** | **{:.1}** (target >= 50) |", mib / seconds);
    stop_nodes(stop_sender, vec![source_node, joiner_node]).await;
}
