//! The network at a subnet's scale (`scripts/bench-scale.sh [MINUTES]`):
//! 1. the seeded simulator (`tests/support/network_sim.rs`) with 16 and 64 validators, each sealing one
//!    block every 12 s of one challenge (two transcripts of 5 to 60 kB, as reasoning
//!    models answer) over 8+ links of 5 to 60 ms: sync bytes per validator against the
//!    minimum (every other log once), time for a block to reach every validator, and the
//!    catch-up of a validator that was down the whole run;
//! 2. 16 real processes (this binary re-run as a node: its own fsync'd redb store and
//!    libp2p on loopback, each dialling 4 others), writing `MINUTES` of that traffic
//!    compressed 48x (a block every 250 ms each) while one validator is down, then
//!    starting it: bytes, propagation p50/p99, its catch-up time, and peak RSS of each.
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) both are tiny smoke runs.

#[allow(dead_code)] // the benchmarks use part of the tests' support
#[path = "../tests/support/match_scenarios.rs"]
mod match_scenarios;
#[allow(dead_code)]
#[path = "../tests/support/network_sim.rs"]
mod network_sim;
use af::bytes::ValidatorKey;
use af::ledger::demo::demo_events;
use af::ledger::{LedgerKey, OwnLog, Store};
use af::p2p::blocks::BlockStore;
use af::p2p::net::NetConfig;
use af::p2p::node::spawn_node;
use af::p2p::protocol::SyncConfig;
use network_sim::{Sim, SimRng};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One block's events: two transcripts of 5 to 60 kB (one challenge, both miners).
fn block_event_bytes(rng: &mut SimRng) -> usize {
    5_000 + rng.below(55_001) as usize
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

fn main() {
    if let Ok(role) = std::env::var("AF_SCALE_NODE") {
        return child(&role);
    }
    let full = std::env::args().any(|a| a == "--bench");
    let minutes: u64 = std::env::var("AF_SCALE_MINUTES").ok().and_then(|m| m.parse().ok()).unwrap_or(60);
    println!("## simulator (virtual time, payload bytes)");
    println!(
        "| validators | blocks | bytes in / minimum (median, max) | bytes out / minimum (median) | to every validator p50 / p99 | catch-up after the run |"
    );
    println!("|---|---|---|---|---|---|");
    let sim_seconds = if full { 120 } else { 24 };
    for n in [16usize, 64] {
        simulate(n, sim_seconds);
    }
    let (n, traffic_minutes) = if full { (16, minutes) } else { (4, 1) };
    processes(n, traffic_minutes);
}

fn simulate(n: usize, seconds: u64) {
    let config = SyncConfig { tips_interval_ms: 2_000, request_timeout_ms: 10_000, ..SyncConfig::default() };
    let mut sim = Sim::with_config(7, n, 8, 0.0, config, (5, 60));
    let keys: Vec<LedgerKey> = (0..n)
        .map(|i| {
            let mut seed = [3u8; 32];
            seed[..8].copy_from_slice(&(i as u64).to_le_bytes());
            LedgerKey::from_seed(seed)
        })
        .collect();
    // Validator 0 is down from the start and comes back at the end.
    sim.down(0);
    let mut writes: Vec<(u64, usize)> = Vec::new();
    for (node, _) in keys.iter().enumerate().skip(1) {
        let offset = sim.rng.below(12_000);
        writes.extend((0..).map(|k| (offset + k * 12_000, node)).take_while(|(t, _)| *t < seconds * 1000));
    }
    writes.sort();
    let mut block_bytes: BTreeMap<usize, u64> = BTreeMap::new();
    for (at, node) in writes {
        sim.run_until(at);
        let event_bytes = block_event_bytes(&mut sim.rng);
        sim.own_block(node, &keys[node], 2, event_bytes);
        *block_bytes.entry(node).or_default() += 2 * event_bytes as u64;
    }
    sim.run_until(seconds * 1000 + 10_000);
    let total: u64 = block_bytes.values().sum();
    // Propagation: until every up validator holds the block.
    let mut to_all: Vec<f64> = sim
        .sealed_at
        .iter()
        .filter_map(|(block, sealed)| {
            (1..n).map(|node| sim.held_at[node].get(block).map(|at| at - sealed)).max().flatten().map(|ms| ms as f64)
        })
        .collect();
    to_all.sort_by(f64::total_cmp);
    let ratios = |bytes: &[u64]| {
        let mut r: Vec<f64> = (1..n)
            .map(|node| bytes[node] as f64 / (total - block_bytes.get(&node).copied().unwrap_or(0)) as f64)
            .collect();
        r.sort_by(f64::total_cmp);
        r
    };
    let received = ratios(&sim.bytes_received);
    let sent = ratios(&sim.bytes_sent);
    let back = sim.now_ms;
    sim.up(0);
    let blocks = sim.sealed_at.len();
    let mut caught_up = None;
    for step in 1..=600 {
        sim.run_until(back + step * 250);
        if sim.held_at[0].len() >= blocks {
            caught_up = Some(sim.now_ms - back);
            break;
        }
    }
    println!(
        "| {n} | {blocks} ({:.0} MB) | {:.2}, {:.2} | {:.2} | {:.0} / {:.0} ms | {} ({:.0} MB) |",
        total as f64 / 1e6,
        percentile(&received, 0.5),
        percentile(&received, 1.0),
        percentile(&sent, 0.5),
        percentile(&to_all, 0.5),
        percentile(&to_all, 0.99),
        caught_up.map_or("not in 150 s".to_string(), |ms| format!("{:.1} s", ms as f64 / 1000.0)),
        total as f64 / 1e6
    );
}

/// What a node process reports when it ends.
#[derive(serde::Serialize, serde::Deserialize, Default)]
struct Report {
    validator: String,
    written: u64,
    /// Bytes of our own blocks.
    bytes_written: u64,
    /// Per block of another validator: ms from its seal to when we held it.
    delays: BTreeMap<String, u64>,
    bytes_served: u64,
    bytes_received: u64,
    bytes_stored: u64,
    peak_rss: u64,
    /// For the late node: ms from start until it held every expected block.
    caught_up_ms: Option<u64>,
}

fn processes(n: usize, traffic_minutes: u64) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let ports: Vec<u16> =
        (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()).collect();
    // A block every 12 s for `traffic_minutes`, compressed 48x.
    let blocks_each = traffic_minutes * 5;
    let exe = std::env::current_exe().expect("this binary");
    let spawn = |i: usize, expect: u64| {
        let peers: Vec<String> = (1..=4).map(|d| ports[(i + n - d) % n].to_string()).collect();
        std::process::Command::new(&exe)
            .env("AF_SCALE_NODE", format!("{i}"))
            .env("AF_SCALE_DIR", dir.path())
            .env("AF_SCALE_PORT", ports[i].to_string())
            .env("AF_SCALE_PEERS", peers.join(","))
            .env("AF_SCALE_BLOCKS", if i == 0 { "0".to_string() } else { blocks_each.to_string() })
            .env("AF_SCALE_EXPECT", expect.to_string())
            .spawn()
            .expect("a node process")
    };
    let started = Instant::now();
    let mut writers: Vec<std::process::Child> = (1..n).map(|i| spawn(i, 0)).collect();
    // Writers report when their writing is done; then the late validator starts.
    let written_file = |i: usize| dir.path().join(format!("written-{i}"));
    while (1..n).any(|i| !written_file(i).exists()) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let writing = started.elapsed();
    let expected = (n as u64 - 1) * blocks_each;
    let mut late = spawn(0, expected);
    let _ = late.wait();
    std::fs::write(dir.path().join("stop"), b"").expect("the stop file");
    for writer in &mut writers {
        let _ = writer.wait();
    }
    let reports: Vec<Report> = (0..n)
        .map(|i| {
            let text = std::fs::read_to_string(dir.path().join(format!("report-{i}.json"))).expect("a report");
            serde_json::from_str(&text).expect("a report")
        })
        .collect();
    let total_bytes: u64 = reports.iter().map(|r| r.bytes_written).sum();
    let mut to_all: BTreeMap<&String, u64> = BTreeMap::new();
    for report in &reports[1..] {
        for (block, ms) in &report.delays {
            let worst = to_all.entry(block).or_default();
            *worst = (*worst).max(*ms);
        }
    }
    let mut delays: Vec<f64> = to_all.values().map(|ms| *ms as f64).collect();
    delays.sort_by(f64::total_cmp);
    // The minimum a validator must receive (and, on average, send): every other log once.
    let minimum = |r: &Report| (total_bytes - r.bytes_written).max(1) as f64;
    let mut received: Vec<f64> = reports[1..].iter().map(|r| r.bytes_received as f64 / minimum(r)).collect();
    let mut served: Vec<f64> = reports[1..].iter().map(|r| r.bytes_served as f64 / minimum(r)).collect();
    received.sort_by(f64::total_cmp);
    served.sort_by(f64::total_cmp);
    let mut rss: Vec<f64> = reports.iter().map(|r| r.peak_rss as f64 / 1048576.0).collect();
    rss.sort_by(f64::total_cmp);
    println!();
    println!(
        "## {n} processes, {traffic_minutes} min of traffic in {:.0} s ({} blocks, {:.0} MB per log set)",
        writing.as_secs_f64(),
        expected,
        total_bytes as f64 / 1e6
    );
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| sync bytes in per validator / minimum (median, max) | {:.2}, {:.2} |",
        percentile(&received, 0.5),
        percentile(&received, 1.0)
    );
    println!(
        "| sync bytes out per validator / minimum (median, max) | {:.2}, {:.2} |",
        percentile(&served, 0.5),
        percentile(&served, 1.0)
    );
    println!(
        "| new block to every validator, p50 / p99 | {:.0} / {:.0} ms |",
        percentile(&delays, 0.5),
        percentile(&delays, 0.99)
    );
    println!(
        "| catch-up of a validator down for all of it | {} |",
        reports[0].caught_up_ms.map_or("did not finish".into(), |ms| format!("{:.2} s", ms as f64 / 1000.0))
    );
    println!(
        "| peak RSS per validator (median, max) | {:.0}, {:.0} MiB |",
        percentile(&rss, 0.5),
        percentile(&rss, 1.0)
    );
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set by the parent"))
}

fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A node process: write `AF_SCALE_BLOCKS` blocks (one every 250 ms), note when each of
/// the others' blocks arrives, and serve until the parent's stop file appears (or, for
/// the late node, until it holds `AF_SCALE_EXPECT` blocks of the others).
fn child(index: &str) {
    let dir = PathBuf::from(env("AF_SCALE_DIR"));
    let port: u16 = env("AF_SCALE_PORT").parse().expect("a port");
    let blocks: u64 = env("AF_SCALE_BLOCKS").parse().expect("a count");
    let expect: u64 = env("AF_SCALE_EXPECT").parse().expect("a count");
    let address = |port: &str| format!("/ip4/127.0.0.1/tcp/{port}").parse().expect("a multiaddr");
    let peers = env("AF_SCALE_PEERS").split(',').map(address).collect();
    let key = LedgerKey::generate().expect("a key");
    let validator = key.validator();
    let log = Arc::new(OwnLog::new(Store::create(&dir.join(format!("v{index}"))).expect("a store"), key));
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    let report = runtime.block_on(async {
        let (stop_sender, stop) = tokio::sync::watch::channel(false);
        let config = NetConfig { listen: vec![address(&port.to_string())], peers, ..NetConfig::default() };
        let started = Instant::now();
        let handle = spawn_node(log.clone(), config, None, now_ms, stop).expect("a node");
        if blocks > 0 {
            // Writers let the connections and the gossip mesh form first.
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let mut rng = SimRng::new(u64::from(port));
        let mut report = Report { validator: validator.to_hex(), ..Report::default() };
        let mut seen: BTreeMap<ValidatorKey, u64> = BTreeMap::new();
        let mut next_write = Instant::now();
        let stop_file = dir.join("stop");
        let written_file = dir.join(format!("written-{index}"));
        loop {
            if report.written < blocks && Instant::now() >= next_write {
                next_write += Duration::from_millis(250);
                let events = demo_events(&validator, report.written, 2, block_event_bytes(&mut rng));
                let receipt = log.append(events, now_ms()).expect("append");
                let _ = handle.own_blocks.send((validator, receipt.tip.height));
                let bytes = log.store.block_bytes(&validator, receipt.tip.height).ok().flatten();
                report.bytes_written += bytes.map_or(0, |b| b.len() as u64);
                report.written += 1;
                if report.written == blocks {
                    std::fs::write(&written_file, b"").expect("the written file");
                }
            }
            note_arrivals(&log.store, &validator, &mut seen, &mut report);
            let others: u64 = seen.values().sum();
            if blocks == 0 && expect > 0 && others >= expect && report.caught_up_ms.is_none() {
                report.caught_up_ms = Some(started.elapsed().as_millis() as u64);
                break;
            }
            if blocks > 0 && report.written == blocks && stop_file.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let counters = handle.status.borrow().counters.clone();
        report.bytes_served = counters.bytes_served;
        report.bytes_received = counters.bytes_received;
        report.bytes_stored = counters.bytes_stored;
        // The network ends inside the runtime, before the runtime does.
        let _ = stop_sender.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(10), handle.task).await;
        report
    });
    let report = Report { peak_rss: peak_rss(), ..report };
    std::fs::write(dir.join(format!("report-{index}.json")), serde_json::to_vec(&report).expect("json"))
        .expect("the report");
    drop(runtime);
}

/// Records, for each block of another validator that arrived since the last look, how
/// long after its seal it arrived.
fn note_arrivals(store: &Store, own: &ValidatorKey, seen: &mut BTreeMap<ValidatorKey, u64>, report: &mut Report) {
    let now = now_ms();
    for (validator, tip) in store.tips().unwrap_or_default() {
        if validator == *own {
            continue;
        }
        let held = seen.entry(validator).or_default();
        for height in *held..=tip.height {
            if let Ok(Some((header, _))) = store.signed_header(&validator, height) {
                report
                    .delays
                    .insert(format!("{}:{height}", &validator.to_hex()[..16]), now.saturating_sub(header.time_ms));
            }
        }
        *held = tip.height + 1;
    }
}
