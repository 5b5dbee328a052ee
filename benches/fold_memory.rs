//! What a replay holds per match, printed as a table (run: scripts/bench-fold-memory.sh
//! or `cargo bench --bench fold_memory`). Not a timed test: figures go in ARCHITECTURE.md
//! and the closing notes.
//!
//! The folds of every match are the one part of a validator's memory that grows with
//! history (ARCHITECTURE.md, invariants). This measures it: synthetic networks of 4
//! validators that play M matches (each a new random contender against the perfect
//! champion, dismissed after a few challenges: the common case), replayed from genesis;
//! the live heap the replay's folds and state hold, counted by a global allocator that
//! tracks live bytes, for two values of M, and the difference per match and per chain.

use af::envs;
use af::evaluation::ratio::DEFAULT_RATIO_PARAMS;
use af::ledger::Store;
use af::miner::policy::Policy;
use af::replay::{self, synth};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

/// The system allocator, counting live bytes.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const N_VALIDATORS: usize = 4;

/// Live bytes held by a replay of a network of `n_matches` matches, and its state's
/// encoded size: (folds + state, snapshot bytes, matches in the state).
fn held(n_matches: usize) -> (i64, u64, usize) {
    let mut spec = synth::NetworkSpec::small(N_VALIDATORS);
    let champion = 1; // 5SynthPerfect
    let first = spec.miners.len();
    for i in 0..n_matches {
        spec.miners.push(synth::SynthMiner {
            hotkey: format!("5SynthContender{i:06}"),
            uid: (first + i) as u16,
            policy: Policy::Random,
        });
        spec.matches.push((first + i, champion));
    }
    spec.matches.retain(|&(contender, _)| contender >= first);
    spec.events_per_block = 256;
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("bench-data");
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::Builder::new().prefix("fold-memory").tempdir_in(base).unwrap();
    let store = Store::create(dir.path()).unwrap();
    synth::write_network(&store, &spec).unwrap();
    drop(store);
    let registry = envs::registry();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let before = LIVE.load(Ordering::Relaxed);
    let store = Store::open_read_only(dir.path()).unwrap();
    let out = pool
        .install(|| replay::replay(&store, &registry, None, &DEFAULT_RATIO_PARAMS, &mut |_, _, _| {}))
        .unwrap();
    // The store's page cache is not the folds': it goes with the store.
    drop(store);
    let live = LIVE.load(Ordering::Relaxed) - before;
    let snapshot = replay::Snapshot { replay_version: replay::REPLAY_VERSION, folds: out.folds.clone() };
    let encoded = af::ledger::codec::encode(&snapshot, "snapshot", u64::MAX).unwrap().len() as u64;
    (live, encoded, out.state.matches.len())
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (small, large) = if full { (250, 1_250) } else { (4, 12) };
    let (live_a, enc_a, n_a) = held(small);
    let (live_b, enc_b, n_b) = held(large);
    assert_eq!((n_a, n_b), (small, large), "every match is in the state");
    println!("## memory a replay holds, by matches played ({N_VALIDATORS} validators, each holding its own fold of every match)\n");
    println!("| matches | live heap of folds + state, bytes | encoded folds (snapshot), bytes |");
    println!("|---:|---:|---:|");
    println!("| {small} | {live_a} | {enc_a} |");
    println!("| {large} | {live_b} | {enc_b} |");
    let per_match = (live_b - live_a) as f64 / (large - small) as f64;
    let per_chain = per_match / N_VALIDATORS as f64;
    let enc_per_chain = (enc_b - enc_a) as f64 / (large - small) as f64 / N_VALIDATORS as f64;
    println!(
        "\nper match: {per_match:.0} bytes of live heap; per match per validator's chain: {per_chain:.0} (encoded {enc_per_chain:.0})"
    );
}
