//! Helpers the benchmarks share: the median of repeated runs, and the baseline every
//! throughput figure is compared with (reading the blocks out of the store, and raw
//! blake3 over the same bytes).

use std::time::Instant;

/// Where a benchmark writes its stores: AF_BENCH_DIR, else target/bench-data (on the
/// project's disk, not a tmpfs, so fsync costs what it costs). A benchmark binary copied
/// to another machine is pointed at a directory there with AF_BENCH_DIR.
pub fn bench_data_dir() -> std::path::PathBuf {
    std::env::var_os("AF_BENCH_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("bench-data"),
        std::path::PathBuf::from,
    )
}

/// The median of `runs` (this machine is noisy: each figure is the middle of several).
pub fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// Seconds for single-threaded blake3 over `bytes` in memory, median of three runs.
pub fn blake3_seconds(bytes: &[u8]) -> f64 {
    median(
        (0..3)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(blake3::Hasher::new().update(bytes).finalize());
                started.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

/// Seconds for blake3 over `bytes` in memory on `threads` threads (the `blake3` crate's
/// own multi-threaded hashing, as `b3sum` uses), median of three runs.
pub fn blake3_all_cores_seconds(bytes: &[u8], threads: usize) -> f64 {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    median(
        (0..3)
            .map(|_| {
                let started = Instant::now();
                pool.install(|| std::hint::black_box(blake3::Hasher::new().update_rayon(bytes).finalize()));
                started.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

/// Seconds to read every block of `validators` out of `store` with the streamer verify
/// uses (median of three), and the bytes read.
pub fn read_seconds(store: &af::ledger::Store, validators: &[af::bytes::ValidatorKey]) -> (f64, Vec<u8>) {
    let mut all = Vec::new();
    let seconds = median(
        (0..3)
            .map(|_| {
                all.clear();
                let started = Instant::now();
                let txn = store.read().unwrap();
                for validator in validators {
                    af::ledger::store::stream_blocks(&txn, validator, 32 << 20, &mut |batch| {
                        for (_, bytes) in batch {
                            all.extend_from_slice(&bytes);
                        }
                        true
                    })
                    .unwrap();
                }
                started.elapsed().as_secs_f64()
            })
            .collect(),
    );
    (seconds, all)
}
