//! Ledger benchmarks, printed as a table (run: `cargo bench --bench ledger`, or
//! scripts/bench-ledger.sh). Not a timed test: figures go in the closing notes.
//!
//! 1. Durable append: events/s for blocks of 1, 64 and 1024 events of about 1 KiB, each
//!    block one fsync'd redb transaction (seal + sign + write + fsync); and the same
//!    events sent one by one to the validator's writer task, which seals blocks of that
//!    size and writes the full blocks that queue up together (group commit), timed until
//!    a flush says the last of them is durable.
//! 2. Verify: `verify_store` over a log of AF_BENCH_LOG_MIB (default 1024 MiB), and the
//!    same block bytes through single-threaded blake3, in one run; ratio of the two.
//!    Each figure is the median of three runs.

use af::ledger::{demo, verify, LedgerKey, OwnLog, Store};
use std::time::Instant;

mod common;

fn bench_dir(name: &str) -> tempfile::TempDir {
    // On the project's disk (target/), not a tmpfs, so fsync costs what it costs.
    let base = common::bench_data_dir();
    std::fs::create_dir_all(&base).unwrap();
    tempfile::Builder::new().prefix(name).tempdir_in(base).unwrap()
}

fn append_throughput(events_per_block: u32, n_blocks: u64) -> (f64, f64) {
    let dir = bench_dir("append");
    let key = LedgerKey::from_seed([1; 32]);
    let validator = key.validator();
    let log = OwnLog::new(Store::create(dir.path()).unwrap(), key);
    let blocks: Vec<_> = (0..n_blocks).map(|h| demo::demo_events(&validator, h, events_per_block, 1024)).collect();
    let started = Instant::now();
    let mut bytes = 0u64;
    for (h, events) in blocks.into_iter().enumerate() {
        bytes += log.append(events, 1_000 + h as u64).unwrap().n_bytes as u64;
    }
    let seconds = started.elapsed().as_secs_f64();
    ((n_blocks * u64::from(events_per_block)) as f64 / seconds, bytes as f64 / 1048576.0 / seconds)
}

/// Events/s through the validator's writer: `n_blocks * events_per_block` single-event
/// groups sent as fast as the writer takes them, then a flush.
fn writer_throughput(events_per_block: u32, n_blocks: u64) -> f64 {
    let dir = bench_dir("writer");
    let key = LedgerKey::from_seed([3; 32]);
    let validator = key.validator();
    let log = std::sync::Arc::new(OwnLog::new(Store::create(dir.path()).unwrap(), key));
    let events: Vec<_> = (0..n_blocks).flat_map(|h| demo::demo_events(&validator, h, events_per_block, 1024)).collect();
    let n_events = events.len();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seconds = runtime.block_on(async move {
        let metrics = std::sync::Arc::new(af::metrics::Metrics::new());
        let handle =
            af::validator::writer::spawn_writer(log, events_per_block as usize, 1_000, || 1_000, None, metrics);
        let started = Instant::now();
        for event in events {
            handle.sender.send(vec![event]).await.unwrap();
        }
        let tip = af::validator::writer::flush(&handle.flush).await.unwrap().unwrap();
        let seconds = started.elapsed().as_secs_f64();
        assert_eq!(tip.height + 1, n_blocks, "every block written");
        seconds
    });
    n_events as f64 / seconds
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this binary without
    // it, and then a tiny smoke run checks the benchmark still works.
    let full = std::env::args().any(|a| a == "--bench");
    println!("## durable append (each block = one fsync'd write transaction)\n");
    println!("| events/block | blocks | one block per transaction, events/s | MiB/s | writer with group commit, events/s | target events/s |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let scale = if full { 1 } else { 20 };
    // 200 blocks of 1,024 (200k index entries), not fewer: each transcript's random
    // challenge id is a copy-on-write insert into a B-tree, and that cost grows with the
    // index (~4 us per event at an empty one, ~9 at 200k entries), so a short run flatters.
    for (per_block, n_blocks, target) in
        [(1u32, 3000u64 / scale, "20,000"), (64, 300 / scale, "100,000"), (1024, 200 / scale, "200,000")]
    {
        let (events_per_s, mib_per_s) = append_throughput(per_block, n_blocks);
        let grouped = writer_throughput(per_block, n_blocks);
        println!("| {per_block} | {n_blocks} | {events_per_s:.0} | {mib_per_s:.1} | {grouped:.0} | {target} |");
    }

    let default_mib = if full { 1024 } else { 4 };
    let log_mib: u64 = std::env::var("AF_BENCH_LOG_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(default_mib);
    let n_blocks = log_mib.max(1); // 1024 events of ~1 KiB = ~1 MiB per block
    let dir = bench_dir("verify");
    let key = LedgerKey::from_seed([2; 32]);
    let validator = key.validator();
    let log = OwnLog::new(Store::create(dir.path()).unwrap(), key);
    let started = Instant::now();
    for h in 0..n_blocks {
        log.append(demo::demo_events(&validator, h, 1024, 1024), 1_000 + h).unwrap();
    }
    eprintln!("wrote {n_blocks} blocks in {:.1} s", started.elapsed().as_secs_f64());
    drop(log);
    let store = Store::open(dir.path()).unwrap();

    // Median of three runs of each measurement: this machine is noisy.
    let median = common::median;
    let mut report = None;
    let verify_s = median(
        (0..3)
            .map(|_| {
                let started = Instant::now();
                let result = verify::verify_store(&store, &|_, _| {}).unwrap();
                let seconds = started.elapsed().as_secs_f64();
                assert!(result.ok);
                report = Some(result);
                seconds
            })
            .collect(),
    );
    let report = report.expect("three runs");

    // The same bytes, read with the streamer verify uses (timed alone), then through
    // plain blake3 in memory.
    let (read_s, all) = common::read_seconds(&store, &[validator]);
    let blake3_s = common::blake3_seconds(&all);
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let blake3_all_s = common::blake3_all_cores_seconds(&all, cores);
    let mib = report.n_bytes as f64 / 1048576.0;

    println!(
        "\n## verify vs raw blake3 ({} blocks, {} events, {mib:.0} MiB, {} threads)\n",
        report.n_blocks,
        report.n_events,
        rayon::current_num_threads()
    );
    println!("| what | seconds | MiB/s | events/s |");
    println!("|---|---:|---:|---:|");
    println!(
        "| `verify_store` (read, decode, canonical check, Merkle, ed25519, links) | {verify_s:.3} | {:.0} | {:.0} |",
        mib / verify_s,
        report.n_events as f64 / verify_s
    );
    println!("| reading the block bytes out of redb alone (the same streamer) | {read_s:.3} | {:.0} | |", mib / read_s);
    println!("| blake3 over the same bytes, one thread, in memory | {blake3_s:.3} | {:.0} | |", mib / blake3_s);
    println!(
        "| blake3 over the same bytes, {cores} threads, in memory | {blake3_all_s:.3} | {:.0} | |",
        mib / blake3_all_s
    );
    println!(
        "\nverify / raw blake3 in memory = {:.2}x (1 thread), {:.2}x ({cores} threads)",
        verify_s / blake3_s,
        verify_s / blake3_all_s
    );
    println!(
        "verify / (read out of the store + raw blake3) = {:.2}x (target <= 3x, stretch 2x)",
        verify_s / (read_s + blake3_s)
    );
}
