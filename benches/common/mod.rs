//! Helpers the benchmarks share: the median of repeated runs, and the raw blake3
//! baseline every throughput figure is compared with.

use std::time::Instant;

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
