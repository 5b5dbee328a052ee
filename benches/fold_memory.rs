//! What a replay holds per match, printed as a table (run: scripts/bench-fold-memory.sh
//! or `cargo bench --bench fold_memory`). Not a timed test: figures go in ARCHITECTURE.md
//! and the closing notes.
//!
//! The folds of every match, and the network state's list of matches, are what grows
//! with history (ARCHITECTURE.md, invariants). This measures them: synthetic networks of
//! 4 validators that play M matches (each a new random contender against the perfect
//! champion, dismissed after a few challenges: the common case), replayed from genesis;
//! the live heap the replay's folds and state hold, counted by a global allocator that
//! tracks live bytes, for two values of M, and the difference per match and per chain;
//! and the time of a replay onto the last folds with no new block that combines them
//! again, which is what a moved tip costs beyond its new blocks when they start or
//! decide a match. Then the same with matches spilled to a match file, as a validator
//! replays (`replay::spill_file`).

use af::envs;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::Store;
use af::miner::policy::Policy;
use af::replay;
use af::replay::spill_file::CacheSize;
use af::replay::vtrust_history::vtrust_history;
use af::synthetic_logs;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

/// The system allocator, counting live bytes.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);
/// The most `LIVE` has been since it was last reset.
static PEAK: AtomicI64 = AtomicI64::new(0);

fn grew(by: i64) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is passed to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size() as i64);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size as i64 - layout.size() as i64);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const N_VALIDATORS: usize = 4;
/// The replay's file's page cache in the spilled runs (a validator's is
/// `CacheSize::VALIDATOR.page_bytes`).
const COLD_CACHE_BYTES: usize = 128 * 1024;

// Only the median is used here.
#[allow(dead_code)]
mod common;
use common::median;

/// What a network of `n_matches` matches costs a replay.
struct Held {
    /// Live bytes of the folds and the state.
    live: i64,
    /// Live bytes of the state alone (the network's list of matches and the rest).
    state_live: i64,
    /// The folds' encoded size (every match and record, as the snapshots of earlier builds held them).
    encoded: u64,
    n_matches: usize,
    /// Seconds of a replay onto the last folds when no block is new, combining again
    /// (median of 5): what a tip move that starts or decides a match costs beyond
    /// folding its new blocks.
    again_s: f64,
    /// Live bytes of the match file's handle alone (its cache and redb's own state).
    cold_live: i64,
    /// The most live heap those replays added, above what the last replay held.
    again_peak: i64,
    /// The bytes of every chain's blocks.
    log_bytes: u64,
    /// Seconds of the replay from genesis.
    genesis_s: f64,
    /// The history page's 48 vTrust points: (seconds, peak heap above the replay's) in
    /// one pass (`vtrust_history`), and as a combine per point (`vtrust_by_combines`).
    history: (f64, i64),
    by_combines: (f64, i64),
}

/// `spill`: replay as a validator does, its matches spilled to its file (`replay::spill_file`);
/// otherwise as an audit does, with an audit's cache.
fn held(n_matches: usize, abandon: bool, spill: bool) -> Held {
    let mut spec = synthetic_logs::NetworkSpec::small(N_VALIDATORS);
    let champion = 1; // 5SynthPerfect
    let first = spec.miners.len();
    for i in 0..n_matches {
        spec.miners.push(synthetic_logs::SynthMiner {
            hotkey: format!("5SynthContender{i:06}"),
            uid: (first + i) as u16,
            policy: Policy::Random,
        });
        spec.matches.push((first + i, champion));
    }
    spec.matches.retain(|&(contender, _)| contender >= first);
    spec.events_per_block = 256;
    spec.faults.abandon_matches = abandon;
    let base = common::bench_data_dir();
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::Builder::new().prefix("fold-memory").tempdir_in(base).unwrap();
    let store = Store::create(dir.path()).unwrap();
    synthetic_logs::write_network(&store, &spec).unwrap();
    drop(store);
    let registry = envs::registry();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let before = LIVE.load(Ordering::Relaxed);
    let store = Store::open_read_only(dir.path()).unwrap();
    // A cache both sizes fill: what differs between them is what grows with the matches.
    let cold_file = dir.path().join(replay::spill_file::SPILL_FILE);
    let cache = match spill {
        true => CacheSize { page_bytes: COLD_CACHE_BYTES, ..CacheSize::VALIDATOR },
        // AF_BENCH_AUDIT_PAGE_MIB tries another page cache for the audit's file (MiB).
        false => match std::env::var("AF_BENCH_AUDIT_PAGE_MIB").ok().and_then(|v| v.parse::<usize>().ok()) {
            Some(mib) => CacheSize { page_bytes: mib << 20, ..CacheSize::AUDIT },
            None => CacheSize::AUDIT,
        },
    };
    let cold = replay::spill_file::SpillFile::create(&cold_file, cache).unwrap();
    let run = |from| {
        let progress = &mut |_: &_, _, _| {};
        replay::replay_in(&cold, &store, &registry, from, &DEFAULT_RATIO_PARAMS, progress, None)
    };
    let started = Instant::now();
    let out = pool.install(|| run(None)).unwrap();
    let genesis_s = started.elapsed().as_secs_f64();
    let resting = LIVE.load(Ordering::Relaxed);
    PEAK.store(resting, Ordering::Relaxed);
    let again_s = median(
        (0..5)
            .map(|_| {
                let last = replay::Snapshot { replay_version: replay::REPLAY_VERSION, folds: out.folds.clone() };
                let started = Instant::now();
                let again = pool.install(|| run(Some((last, replay::FoldSource::ThisProcess)))).unwrap();
                let seconds = started.elapsed().as_secs_f64();
                assert_eq!(again.state_hash, out.state_hash);
                seconds
            })
            .collect(),
    );
    let again_peak = PEAK.load(Ordering::Relaxed) - resting;
    let measured = |f: &mut dyn FnMut() -> Vec<u64>| {
        let resting = LIVE.load(Ordering::Relaxed);
        PEAK.store(resting, Ordering::Relaxed);
        let started = Instant::now();
        let blocks = f();
        ((started.elapsed().as_secs_f64(), PEAK.load(Ordering::Relaxed) - resting), blocks)
    };
    let (history, blocks) = measured(&mut || {
        let points = vtrust_history(&out.folds, &out.state.matches, &DEFAULT_RATIO_PARAMS, 48).unwrap();
        points.into_iter().map(|(block, _)| block).collect()
    });
    let (by_combines, _) = measured(&mut || {
        replay::combine::vtrust_by_combines(&out.folds, &DEFAULT_RATIO_PARAMS, &blocks).unwrap();
        Vec::new()
    });
    // The store's page cache is not the folds': it goes with the store. (The match
    // file's cache, at most `COLD_CACHE_BYTES`, stays: the folds read through it.)
    drop(store);
    let live = LIVE.load(Ordering::Relaxed) - before;
    let encoded = af::ledger::codec::encode(&out.folds, "folds", u64::MAX).unwrap().len() as u64;
    let log_bytes = out.folds.iter().map(|f| f.n_bytes).sum();
    let n_matches = out.state.matches.len();
    let state = out.state;
    drop(out.folds);
    let state_live = LIVE.load(Ordering::Relaxed) - before;
    drop(state);
    let cold_live = LIVE.load(Ordering::Relaxed) - before;
    drop(cold);
    Held {
        live,
        state_live,
        cold_live,
        encoded,
        n_matches,
        again_s,
        again_peak,
        log_bytes,
        genesis_s,
        history,
        by_combines,
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (small, large) = if full { (250, 1_250) } else { (4, 12) };
    let (a, b) = (held(small, false, false), held(large, false, false));
    assert_eq!((a.n_matches, b.n_matches), (small, large), "every match is in the state");
    println!("## what a replay holds, by matches played ({N_VALIDATORS} validators, each holding its own fold of every match)\n");
    println!("| matches | live heap of folds + state, bytes | encoded folds, bytes | combine again (no new block), ms | its peak heap, bytes |");
    println!("|---:|---:|---:|---:|---:|");
    for h in [&a, &b] {
        println!("| {} | {} | {} | {:.2} | {} |", h.n_matches, h.live, h.encoded, h.again_s * 1e3, h.again_peak);
    }
    let per_match = (b.live - a.live) as f64 / (large - small) as f64;
    let per_chain = per_match / N_VALIDATORS as f64;
    let enc_per_chain = (b.encoded - a.encoded) as f64 / (large - small) as f64 / N_VALIDATORS as f64;
    let ms_per_1000 = (b.again_s - a.again_s) * 1e3 / (large - small) as f64 * 1000.0;
    println!(
        "\nper match: {per_match:.0} bytes of live heap; per match per validator's chain: {per_chain:.0} (encoded {enc_per_chain:.0})"
    );
    println!(
        "of which the network state's: {:.0} bytes per match",
        (b.state_live - a.state_live) as f64 / (large - small) as f64
    );
    println!(
        "each replay that combines again (a match started or decided, a finding: other blocks recount) costs \
         {ms_per_1000:.1} ms more per 1,000 matches held ({N_VALIDATORS} chains)"
    );
    // The same networks replayed as a validator replays them: matches spilled.
    let (g, h) = (held(small, false, true), held(large, false, true));
    assert_eq!((g.n_matches, h.n_matches), (small, large));
    // A third size: what still grows per match from the second to it is what does not
    // level off at a cache's size.
    let larger = 2 * large;
    let k = held(larger, false, true);
    println!(
        "\n## the same, replayed as a validator does: each log's matches spilled to its match file past {} in memory\n",
        CacheSize::VALIDATOR.matches_per_log
    );
    println!(
        "| matches | live heap of folds + state, bytes | of which the state's | combine again (no new block), ms | its peak heap, bytes |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for x in [&g, &h, &k] {
        println!("| {} | {} | {} | {:.2} | {} |", x.n_matches, x.live, x.state_live, x.again_s * 1e3, x.again_peak);
    }
    println!(
        "\nfrom {large} to {larger} matches: {:.0} bytes of live heap per match, of which the match file's handle's {:.0}",
        (k.live - h.live) as f64 / (larger - large) as f64,
        (k.cold_live - h.cold_live) as f64 / (larger - large) as f64,
    );
    let spilled_per_match = (h.live - g.live) as f64 / (large - small) as f64;
    println!(
        "\nper match: {spilled_per_match:.0} bytes of live heap against {per_match:.0} held ({:.1}x less), of which the state's {:.0} \
         (the match file's handle's {:.0}); \
         each combine costs {:.1} ms more per 1,000 matches ({:.1}x the held folds'); \
         a combine's peak heap grows by {:.0} bytes per match ({:.0} with folds held)",
        per_match / spilled_per_match,
        (h.state_live - g.state_live) as f64 / (large - small) as f64,
        (h.cold_live - g.cold_live) as f64 / (large - small) as f64,
        (h.again_s - g.again_s) * 1e6 / (large - small) as f64,
        (h.again_s - g.again_s) / (b.again_s - a.again_s),
        (h.again_peak - g.again_peak) as f64 / (large - small) as f64,
        (b.again_peak - a.again_peak) as f64 / (large - small) as f64,
    );
    println!("\n## the history page's 48 vTrust points\n");
    println!(
        "| replay | matches | one pass, ms | its peak heap, bytes | a combine per point, ms | its peak heap, bytes |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (what, x) in [("folds held", &a), ("folds held", &b), ("spilled", &g), ("spilled", &h), ("spilled", &k)] {
        println!(
            "| {what} | {} | {:.1} | {} | {:.1} | {} |",
            x.n_matches,
            x.history.0 * 1e3,
            x.history.1,
            x.by_combines.0 * 1e3,
            x.by_combines.1
        );
    }
    println!(
        "spilled, from {large} to {larger} matches: one pass {:.0} bytes of peak heap per match, a combine per point {:.0}",
        (k.history.1 - h.history.1) as f64 / (larger - large) as f64,
        (k.by_combines.1 - h.by_combines.1) as f64 / (larger - large) as f64,
    );
    // What a log can make its peers hold per byte of it: played matches, and matches
    // started and never played (a permitted validator's cheapest log per match).
    let (c, d) = (held(small, true, false), held(large, true, false));
    assert_eq!((c.n_matches, d.n_matches), (small, large), "every started match is in the state");
    println!("\n| matches | log bytes per match per chain | live heap per log byte |");
    println!("|---|---:|---:|");
    for (what, x, y) in [("played", &a, &b), ("started, never played", &c, &d)] {
        let log = (y.log_bytes - x.log_bytes) as f64 / (large - small) as f64 / N_VALIDATORS as f64;
        let heap = (y.live - x.live) as f64 / (y.log_bytes - x.log_bytes) as f64;
        println!("| {what} | {log:.0} | {heap:.2} |");
    }
    // A replay from genesis must be linear in the matches a log holds: a log of matches
    // started and never played is the cheapest per match to write.
    let (many, four_times) = if full { (5_000, 20_000) } else { (20, 80) };
    let (e, f) = (held(many, true, false), held(four_times, true, false));
    println!("\n| matches started, never played | replay from genesis, s | per 1,000 matches, ms |");
    println!("|---:|---:|---:|");
    for h in [&e, &f] {
        println!("| {} | {:.2} | {:.1} |", h.n_matches, h.genesis_s, h.genesis_s / h.n_matches as f64 * 1e6);
    }
    println!("4x the matches took {:.2}x the time (linear: 4)", f.genesis_s / e.genesis_s);
}
