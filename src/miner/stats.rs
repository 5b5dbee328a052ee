//! Request statistics of the miner client: counts and latency histograms (HDR, 3
//! significant digits), so operators and the overhead benchmark can see how long miners
//! take and how much of that is ours. "Overhead" is the client-side time of an attempt
//! minus the miner's own handling time, which miners may report in a `Server-Timing`
//! header (our reference miners do); it covers HTTP, sockets and queueing on both sides.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::Mutex;

/// Shared by every request of one client; cheap to update (one short lock per attempt).
pub struct RequestStats {
    inner: Mutex<Inner>,
}

struct Inner {
    attempts: u64,
    failed: u64,
    latency_us: Histogram<u64>,
    overhead_us: Histogram<u64>,
}

/// A copy of the statistics at one moment.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StatsSnapshot {
    pub attempts: u64,
    pub failed: u64,
    pub latency_p50_us: u64,
    pub latency_p99_us: u64,
    pub latency_max_us: u64,
    /// Attempts whose miner reported its handling time.
    pub timed_attempts: u64,
    pub overhead_p50_us: u64,
    pub overhead_p99_us: u64,
}

impl Default for RequestStats {
    fn default() -> Self {
        // 1 us to 1 hour; longer values are clamped (the client's timeout is far below).
        let histogram = || Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds and precision");
        RequestStats {
            inner: Mutex::new(Inner { attempts: 0, failed: 0, latency_us: histogram(), overhead_us: histogram() }),
        }
    }
}

impl RequestStats {
    /// Records one HTTP attempt: its client-side latency and, when the miner said, its
    /// own handling time.
    pub fn record(&self, latency_us: u64, server_us: Option<u64>, failed: bool) {
        let mut inner = self.inner.lock().expect("stats are never poisoned");
        inner.attempts += 1;
        inner.failed += u64::from(failed);
        inner.latency_us.saturating_record(latency_us);
        if let Some(server_us) = server_us {
            inner.overhead_us.saturating_record(latency_us.saturating_sub(server_us));
        }
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let inner = self.inner.lock().expect("stats are never poisoned");
        StatsSnapshot {
            attempts: inner.attempts,
            failed: inner.failed,
            latency_p50_us: inner.latency_us.value_at_quantile(0.5),
            latency_p99_us: inner.latency_us.value_at_quantile(0.99),
            latency_max_us: inner.latency_us.max(),
            timed_attempts: inner.overhead_us.len(),
            overhead_p50_us: inner.overhead_us.value_at_quantile(0.5),
            overhead_p99_us: inner.overhead_us.value_at_quantile(0.99),
        }
    }

    /// Forgets everything recorded so far (a benchmark's warm-up).
    pub fn reset(&self) {
        let mut inner = self.inner.lock().expect("stats are never poisoned");
        inner.attempts = 0;
        inner.failed = 0;
        inner.latency_us.reset();
        inner.overhead_us.reset();
    }
}

/// The name of the `Server-Timing` metric our reference miners send.
pub const SERVER_TIMING_METRIC: &str = "miner";

/// Reads the handling time in microseconds from a `Server-Timing` header value such as
/// `miner;dur=0.153` (W3C Server Timing: `dur` in milliseconds). Other metrics and
/// malformed entries are ignored.
pub fn parse_server_timing(value: &str) -> Option<u64> {
    value.split(',').find_map(|metric| {
        let mut parts = metric.split(';').map(str::trim);
        if parts.next()? != SERVER_TIMING_METRIC {
            return None;
        }
        let ms: f64 = parts.find_map(|p| p.strip_prefix("dur="))?.parse().ok()?;
        (ms.is_finite() && ms >= 0.0).then(|| (ms * 1000.0).round() as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_parses_only_our_metric() {
        assert_eq!(parse_server_timing("miner;dur=0.153"), Some(153));
        assert_eq!(parse_server_timing("db;dur=5, miner;desc=\"x\";dur=2"), Some(2000));
        assert_eq!(parse_server_timing("db;dur=5"), None);
        assert_eq!(parse_server_timing("miner;dur=-1"), None);
        assert_eq!(parse_server_timing("miner;dur=abc"), None);
        assert_eq!(parse_server_timing("miner"), None);
    }

    #[test]
    fn overhead_subtracts_server_time() {
        let stats = RequestStats::default();
        for i in 0..100 {
            stats.record(1_000 + i, Some(900), false);
        }
        stats.record(50_000, None, true);
        let s = stats.snapshot();
        assert_eq!((s.attempts, s.failed, s.timed_attempts), (101, 1, 100));
        assert!((140..=160).contains(&s.overhead_p50_us), "{s:?}");
        assert!(s.latency_max_us >= 49_900, "{s:?}");
        stats.reset();
        assert_eq!(stats.snapshot().attempts, 0);
    }
}
