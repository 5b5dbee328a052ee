//! Replay benchmark, printed as a table (run: scripts/bench-replay.sh or
//! `cargo bench --bench replay`). Not a timed test: figures go in the closing notes.
//!
//! A store holding the logs of 4 validators, AF_BENCH_EVENTS events in all (default
//! 1,000,000 transcripts of about 1 KiB, 1024 per block, each opened by a match start).
//! In one run: full replay from genesis with re-scoring (1 thread, then 2), plain blake3
//! over the same block bytes in memory on one thread, their ratio, and the incremental
//! fold of one new 1,024-event block on top of a snapshot of the folds.

use af::envs;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::event::{EnvRef, Event, MatchStarted, MinerRef};
use af::ledger::{demo, LedgerKey, OwnLog, Store};
use af::replay;
use common::median;
use std::time::Instant;

mod common;

const N_VALIDATORS: usize = 4;
const EVENTS_PER_BLOCK: u32 = 1024;

fn match_started(validator: &af::bytes::ValidatorKey) -> Event {
    let miner = |hotkey: &str, uid| MinerRef { hotkey: hotkey.into(), uid, model: "demo".into() };
    Event::MatchStarted(MatchStarted {
        match_id: demo::demo_match_id(validator),
        contender: miner(demo::DEMO_CONTENDER, 1),
        champion: miner(demo::DEMO_CHAMPION, 0),
        envs: vec![EnvRef { name: envs::mult::NAME.into(), version: envs::mult::VERSION }],
        rule: "mixture alpha=0.05 prior=4,4".into(),
        ratio_to_beat_ppm: 510_000,
        chain_block: 0,
        chain_block_hash: af::bytes::Hash32([0; 32]),
    })
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let default_events = if full { 1_000_000 } else { 16_384 };
    let n_events: u64 = std::env::var("AF_BENCH_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(default_events);
    let blocks_per_validator = (n_events / N_VALIDATORS as u64).div_ceil(u64::from(EVENTS_PER_BLOCK)).max(1);
    let base = common::bench_data_dir();
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::Builder::new().prefix("replay").tempdir_in(base).unwrap();
    let key = |i: usize| LedgerKey::from_seed([i as u8 + 10; 32]);
    let keys: Vec<LedgerKey> = (0..N_VALIDATORS).map(key).collect();
    let started = Instant::now();
    {
        let store = Store::create(dir.path()).unwrap();
        drop(store);
        for i in 0..N_VALIDATORS {
            let log = OwnLog::new(Store::open(dir.path()).unwrap(), key(i));
            let validator = log.validator();
            log.append(vec![match_started(&validator)], 1_000).unwrap();
            for h in 0..blocks_per_validator {
                log.append(demo::demo_events(&validator, h, EVENTS_PER_BLOCK, 1024), 2_000 + h).unwrap();
            }
        }
    }
    eprintln!(
        "wrote {} blocks in {:.1} s",
        blocks_per_validator * N_VALIDATORS as u64,
        started.elapsed().as_secs_f64()
    );
    let store = Store::open_read_only(dir.path()).unwrap();
    let registry = envs::registry();

    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let mut last = None;
        let seconds = median(
            (0..3)
                .map(|_| {
                    let started = Instant::now();
                    let out = pool
                        .install(|| replay::replay(&store, &registry, None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}))
                        .unwrap();
                    let s = started.elapsed().as_secs_f64();
                    last = Some(out);
                    s
                })
                .collect(),
        );
        (seconds, last.expect("three runs"))
    };
    // Verification alone (what `af ledger verify` does once the store is open), for the
    // breakdown, at the same thread counts.
    let verify = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        median(
            (0..3)
                .map(|_| {
                    let started = Instant::now();
                    let report = pool.install(|| af::ledger::verify::verify_store(&store, &|_, _| {})).unwrap();
                    assert!(report.ok);
                    started.elapsed().as_secs_f64()
                })
                .collect(),
        )
    };
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut thread_counts: Vec<usize> =
        std::iter::successors(Some(1usize), |t| Some(t * 2)).take_while(|t| *t < cores).collect();
    thread_counts.push(cores);
    let mut sweep = Vec::new();
    let mut states = Vec::new();
    for &threads in &thread_counts {
        let (replay_s, out) = run(threads);
        sweep.push((threads, replay_s, verify(threads)));
        states.push(out);
    }
    let one = &states[0];
    for other in &states[1..] {
        assert_eq!(one.state_hash, other.state_hash, "the thread count never changes the state");
    }
    assert!(one.state.discrepancies.is_empty(), "{:?}", &one.state.discrepancies[..1]);
    let (one_s, two_s) = (sweep[0].1, sweep.get(1).map_or(sweep[0].1, |s| s.1));
    let verify_s = sweep.get(1).map_or(sweep[0].2, |s| s.2);
    let n_events_total: u64 = one.folds.iter().map(|f| f.n_events).sum();
    let n_bytes = one.n_bytes_folded;

    // The same bytes read out of the store (timed alone, median of 3), then through plain
    // blake3 in memory on one thread and on every core: the baselines the targets are
    // ratios of.
    let validators: Vec<_> = keys.iter().map(|k| k.validator()).collect();
    let (read_s, all) = common::read_seconds(&store, &validators);
    assert_eq!(all.len() as u64, n_bytes);
    let blake3_s = common::blake3_seconds(&all);
    let blake3_all_s = common::blake3_all_cores_seconds(&all, cores);
    drop(all);
    let baseline_s = read_s + blake3_s;

    println!(
        "## replay and verify at 1 to {cores} threads ({N_VALIDATORS} validators, {} events; medians of 3)\n",
        n_events_total
    );
    println!("| threads | full replay s (`af audit`) | speed-up | serial fraction (Amdahl) | verify s | speed-up | serial fraction | replay x blake3 1 thread | replay x blake3 all cores |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let amdahl =
        |t: usize, up: f64| if t > 1 { format!("{:.3}", (t as f64 / up - 1.0) / (t as f64 - 1.0)) } else { "-".into() };
    for &(t, replay_s, verify_s) in &sweep {
        let (replay_up, verify_up) = (sweep[0].1 / replay_s, sweep[0].2 / verify_s);
        println!(
            "| {t} | {replay_s:.3} | {replay_up:.2}x | {} | {verify_s:.3} | {verify_up:.2}x | {} | {:.2} | {:.2} |",
            amdahl(t, replay_up),
            amdahl(t, verify_up),
            replay_s / blake3_s,
            replay_s / blake3_all_s
        );
    }
    println!("\nblake3 over the same bytes in memory: {blake3_s:.3} s on 1 thread, {blake3_all_s:.3} s on {cores}\n");
    let state_hash = one.state_hash;
    let two = states.swap_remove(thread_counts.len().min(2) - 1);

    // Incremental: one new 1,024-event block on validator 0, folded on top of the folds.
    let folds = two.folds.clone();
    drop(store);
    {
        let log = OwnLog::new(Store::open(dir.path()).unwrap(), key(0));
        let validator = keys[0].validator();
        log.append(demo::demo_events(&validator, blocks_per_validator, EVENTS_PER_BLOCK, 1024), 9_000_000).unwrap();
    }
    // What every reading command pays before it reads: redb's check of every page.
    let open_s = median(
        (0..3)
            .map(|_| {
                let started = Instant::now();
                drop(Store::open_read_only(dir.path()).unwrap());
                started.elapsed().as_secs_f64()
            })
            .collect(),
    );
    let store = Store::open_read_only(dir.path()).unwrap();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let incremental = |source: replay::FoldSource, runs: usize| {
        median(
            (0..runs)
                .map(|_| {
                    let snapshot = replay::Snapshot { replay_version: replay::REPLAY_VERSION, folds: folds.clone() };
                    let started = Instant::now();
                    let out = pool
                        .install(|| {
                            replay::replay(
                                &store,
                                &registry,
                                Some((snapshot, source)),
                                &DEFAULT_RATIO_PARAMS,
                                &mut |_, _, _| {},
                            )
                        })
                        .unwrap();
                    let s = started.elapsed().as_secs_f64();
                    assert_eq!(out.n_blocks_folded, 1);
                    s
                })
                .collect(),
        )
    };
    let incremental_s = incremental(replay::FoldSource::ThisProcess, 5);
    let audit_incremental_s = incremental(replay::FoldSource::Untrusted, 3);

    let mib = n_bytes as f64 / 1048576.0;
    println!("## replay and its baselines ({N_VALIDATORS} validators, {n_events_total} events, {mib:.0} MiB; medians of 3)\n");
    println!("| what | seconds | events/s | MiB/s | x raw blake3 | x (read + blake3) | target |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (what, s, target) in [
        ("full replay with re-scoring, 1 thread", one_s, ""),
        ("full replay with re-scoring, 2 threads (`af audit`)", two_s, "<= 4x"),
        (
            "verification alone (`verify_store`: decode, re-encode check, Merkle leaves, ed25519, links), 2 threads",
            verify_s,
            "<= 3x (2x stretch)",
        ),
        ("reading the block bytes out of redb", read_s, ""),
        ("blake3 over the same bytes, 1 thread, in memory", blake3_s, ""),
    ] {
        println!(
            "| {what} | {s:.3} | {:.0} | {:.0} | {:.2} | {:.2} | {target} |",
            n_events_total as f64 / s,
            mib / s,
            s / blake3_s,
            s / baseline_s
        );
    }
    println!(
        "\nincremental fold of one new {EVENTS_PER_BLOCK}-event block on a snapshot (2 threads, median of 5): {:.1} ms (target < 20 ms)",
        incremental_s * 1e3
    );
    println!(
        "incremental fold of that block on a snapshot file (`af audit`: every earlier block verified afresh first): {:.3} s, {:.2} x verification alone",
        audit_incremental_s,
        audit_incremental_s / verify_s
    );
    println!(
        "checked read-only open (redb's check of every page checksum): {:.3} s, {:.2} x raw blake3",
        open_s,
        open_s / blake3_s
    );
    println!("state hash {state_hash} (every thread count agrees)");
    drop(store);
    // AF_BENCH_KEEP=1 keeps the store (for timing `af audit` through the CLI on it).
    if std::env::var_os("AF_BENCH_KEEP").is_some() {
        eprintln!("store kept at {}", dir.keep().display());
    }
}
