//! The `af` command line: parses arguments, runs one command, maps the outcome to an
//! exit code. All logic lives in the library; this binary only does IO and printing.
//!
//! Exit codes: 0 success (also when stdout is closed early, as by `| head`), 1 the
//! command could not run (bad input, missing store, IO), 2 usage error, 3 a check ran
//! and failed (`ledger verify` found a fault, a proof or checkpoint did not verify).

mod cli;

use std::process::ExitCode;

/// A validator runs for weeks: its resident memory must follow its live heap, which
/// glibc's per-thread arenas do not (docs/performance.md, "Known gaps as measured").
/// `--features system-allocator` keeps glibc's malloc, for heap profilers that trace it
/// (heaptrack): the heap figures there came from such a build.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at its start (jemalloc's `malloc_conf` symbol, prefixed
/// `_rjem_` by tikv-jemallocator). Resident memory must follow the live heap:
/// - `background_thread`: freed pages are returned on time even in arenas that see no
///   more allocations (decay otherwise advances only when an arena allocates);
/// - `muzzy_decay_ms:0`: freed pages are given back with MADV_DONTNEED, not MADV_FREE,
///   whose pages Linux keeps counting as resident until it runs short of memory;
/// - `narenas:1`: one arena, not four per core, so partly used pages are not kept in
///   every arena a thread was handed (a validator's resident memory kept rising with
///   eight while its live heap fell; docs/performance.md). Threads still
///   allocate from their own caches, and `af audit` took the same time either way
///   (one run on two cores; not measured on many).
#[cfg(not(feature = "system-allocator"))]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: JemallocConf =
    JemallocConf(c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:1".as_ptr());

/// A C string pointer that may be a `static`: it points at a literal, never written.
#[cfg(not(feature = "system-allocator"))]
#[repr(transparent)]
struct JemallocConf(*const std::ffi::c_char);
// SAFETY: the pointer is to a 'static literal that nothing writes.
#[cfg(not(feature = "system-allocator"))]
unsafe impl Sync for JemallocConf {}

/// Without jemalloc there is no heap probe.
#[cfg(feature = "system-allocator")]
fn heap_probe() -> Option<af::metrics::HeapSample> {
    None
}

/// What the allocator holds, as of now: jemalloc caches its statistics until its epoch
/// is advanced.
#[cfg(not(feature = "system-allocator"))]
fn heap_probe() -> Option<af::metrics::HeapSample> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    Some(af::metrics::HeapSample {
        allocated: stats::allocated::read().ok()? as u64,
        active: stats::active::read().ok()? as u64,
        metadata: stats::metadata::read().ok()? as u64,
        resident: stats::resident::read().ok()? as u64,
    })
}

fn main() -> ExitCode {
    let args = <cli::Cli as clap::Parser>::parse();
    let suppressed = init_logging();
    match cli::run(args, suppressed) {
        Ok(code) => code,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        // A store whose bytes failed a check is a check that ran and failed, whichever
        // command found it; a store that could not be opened at all is not.
        Err(error) if is_integrity_fault(&error) => {
            eprintln!("FAIL: {}", cli::terminal_safe(&error_text(&error)));
            ExitCode::from(cli::EXIT_CHECK_FAILED)
        }
        Err(error) => {
            eprintln!("error: {}", cli::terminal_safe(&error_text(&error)));
            ExitCode::from(1)
        }
    }
}

/// The error and each cause it does not already say: our error types put their cause in
/// their own message, so `{:#}` would say each cause again after it.
fn error_text(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Operator logs on stderr: `RUST_LOG` filters (default: our info, others' warnings);
/// human text on a terminal, JSON lines (timestamp, level, fields) otherwise. Each call
/// site prints at most a few lines per window; the rest are counted in the returned
/// counter (the metric `af_log_lines_suppressed_total`).
fn init_logging() -> prometheus_client::metrics::counter::Counter {
    use std::io::IsTerminal;
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::{Layer, SubscriberExt};
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,af=info"));
    let suppressed = prometheus_client::metrics::counter::Counter::default();
    let limiter = af::logging::LineLimiter::new(suppressed.clone());
    // A closed stderr (a log reader gone) must not take the process down: tracing's own
    // report of the failed write would go to that same stderr and panic.
    let layer = tracing_subscriber::fmt::layer().log_internal_errors(false);
    let layer = if std::io::stderr().is_terminal() {
        layer.with_writer(|| af::logging::OneLine(std::io::stderr())).with_target(false).boxed()
    } else {
        let layer = layer.with_writer(std::io::stderr);
        layer.json().flatten_event(true).with_current_span(false).with_span_list(false).boxed()
    };
    tracing_subscriber::registry().with(layer.with_filter(filter.and(limiter))).init();
    suppressed
}

fn is_integrity_fault(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| cause.downcast_ref::<af::ledger::StoreError>().is_some_and(|e| e.is_integrity_fault()))
}

/// A closed stdout, whether the write failed directly or inside serde_json (whose error
/// hides the io::Error from the source chain).
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    error.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == BrokenPipe)
            || cause.downcast_ref::<serde_json::Error>().is_some_and(|e| e.io_error_kind() == Some(BrokenPipe))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("appending failed: {0}")]
    struct Outer(#[from] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("disk full")]
    struct Inner;

    #[test]
    fn each_cause_is_said_once() {
        let error = anyhow::Error::from(Outer(Inner));
        assert_eq!(format!("{error:#}"), "appending failed: disk full: disk full");
        assert_eq!(error_text(&error), "appending failed: disk full");
        let context = anyhow::Error::from(Inner).context("opening the store");
        assert_eq!(error_text(&context), "opening the store: disk full");
    }
}
