//! Validator overhead (`cargo bench --bench validator -- [--seconds N] [--in-flight N]`):
//! the real validator loop (matches, scoring, fsync'd ledger blocks) against two `perfect`
//! reference miner processes on loopback, with N requests in flight. Prints requests per
//! second, latency and overhead percentiles (overhead = client-side time minus the
//! miner's reported handling time), CPU per request for the validator and the miners,
//! and resident memory sampled through the run, so a flat memory line can be checked.
//!
//! Perfect against perfect is all draws, so every match runs to `max_challenges` and a
//! new contender starts: the run also exercises match start and end. Without `--bench`
//! (as `cargo test --all-targets` runs it) it is a 3-second smoke run.

use af::ledger::{LedgerKey, OwnLog, Store};
use af::miner::stats::RequestStats;
use af::validator::config::{self, Config};
use af::validator::run::{self, RunOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts live heap bytes, so the table can tell allocator retention (resident memory)
/// from memory the program actually holds.
struct Counting;

static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new_size.wrapping_sub(layout.size()), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live_mib() -> f64 {
    LIVE_BYTES.load(Ordering::Relaxed) as f64 / (1024.0 * 1024.0)
}

struct Miner {
    child: Child,
    url: String,
}

impl Drop for Miner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_miner() -> Miner {
    let mut child = Command::new(env!("CARGO_BIN_EXE_af"))
        .args(["miner", "serve", "--listen", "127.0.0.1:0", "--policy", "perfect", "--model", "m"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start a reference miner");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("piped")).read_line(&mut line).expect("its address");
    let url = line.split_whitespace().nth(2).expect("listening on URL").to_string();
    Miner { child, url }
}

/// User + system CPU seconds of a process, from /proc (USER_HZ is 100 on Linux).
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat (utime, stime) are 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn arg(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)?.parse().ok())
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let seconds = arg("--seconds").unwrap_or(if full { 60 } else { 3 });
    let in_flight = arg("--in-flight").unwrap_or(256) as usize;
    let envs = ["tictactoe", "mult", "sat", "coin"];
    // Two miners answer each challenge: in_flight / 2 challenges at once, spread over envs.
    let window = (in_flight / 2 / envs.len()).max(1);

    let (champion, contender) = (spawn_miner(), spawn_miner());
    let dir = tempfile::tempdir().expect("temp dir");
    let mut text = format!(
        "[evaluation]\nwindow = {window}\n\
         [client]\ntimeout_ms = 30000\nmax_concurrent_per_miner = {in_flight}\nmax_concurrent_total = {in_flight}\n\
         [ledger]\nblock_max_events = 256\nblock_max_ms = 500\n\
         [[miners]]\nhotkey = \"5Champion\"\nuid = 0\nbase_url = \"{}\"\nmodel = \"m\"\n",
        champion.url
    );
    for i in 1..=4_000 {
        text += &format!(
            "[[miners]]\nhotkey = \"5Contender{i}\"\nuid = {i}\nbase_url = \"{}\"\nmodel = \"m\"\n",
            contender.url
        );
    }
    let config: Config = config::parse(&text, std::iter::empty()).expect("a valid config");
    let store = Store::create(dir.path()).expect("a store");
    let log = Arc::new(OwnLog::new(store, LedgerKey::generate().expect("a key")));
    let stats = Arc::new(RequestStats::default());

    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let (stop_sender, stop) = tokio::sync::watch::channel(false);
    let options = RunOptions {
        max_matches: None,
        now_ms: af::clock::unix_ms,
        progress: None,
        on_match: Box::new(|_, _, _| {}),
        request_stats: stats.clone(),
        own_blocks: None,
        evidence: None,
        chain: None,
        anchor_check_ms: 1_000,
        anchor: true,
        sent_weights: Arc::default(),
        metrics: Arc::default(),
        replays: Arc::default(),
    };
    let task = {
        let log = log.clone();
        runtime.spawn(async move { run::run(log, &config, stop, options).await })
    };

    let warm_up = Duration::from_secs((seconds / 10).clamp(1, 30));
    std::thread::sleep(warm_up);
    stats.reset();
    let pids = [std::process::id().to_string(), champion.child.id().to_string(), contender.child.id().to_string()];
    let cpu_start: Vec<f64> = pids.iter().map(|p| cpu_seconds(p)).collect();
    let started = Instant::now();
    let samples = 12u64.min(seconds.max(1));
    println!("validator overhead: {in_flight} requests in flight ({window} challenges per env x {} envs x 2 miners), {seconds} s after {} s warm-up\n", envs.len(), warm_up.as_secs());
    println!("| t (s) | requests/s in interval | resident MiB | live heap MiB |");
    println!("|---:|---:|---:|---:|");
    let mut last = (0u64, Instant::now());
    let mut rss = Vec::new();
    for i in 1..=samples {
        std::thread::sleep(Duration::from_secs_f64(seconds as f64 / samples as f64));
        let attempts = stats.snapshot().attempts;
        let rate = (attempts - last.0) as f64 / last.1.elapsed().as_secs_f64();
        last = (attempts, Instant::now());
        rss.push(rss_mib());
        println!(
            "| {:.0} | {rate:.0} | {:.1} | {:.1} |",
            seconds as f64 * i as f64 / samples as f64,
            rss_mib(),
            live_mib()
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    let snapshot = stats.snapshot();
    let cpu: Vec<f64> = pids.iter().zip(&cpu_start).map(|(p, start)| cpu_seconds(p) - start).collect();
    let _ = stop_sender.send(true);
    let summary = runtime.block_on(task).expect("no panic").expect("the validator ran");
    let tip = summary.tip.expect("blocks were written");

    let per_request_us = |seconds: f64| seconds * 1e6 / snapshot.attempts.max(1) as f64;
    println!();
    println!("| measure | value |");
    println!("|---|---:|");
    println!("| requests (HTTP attempts) | {} ({} failed) |", snapshot.attempts, snapshot.failed);
    println!("| **requests/s** | **{:.0}** (target >= 2000) |", snapshot.attempts as f64 / elapsed);
    println!("| latency p50 / p99 | {} / {} us |", snapshot.latency_p50_us, snapshot.latency_p99_us);
    println!(
        "| overhead p50 / p99 (latency - miner time) | {} / {} us |",
        snapshot.overhead_p50_us, snapshot.overhead_p99_us
    );
    println!("| validator CPU per request | {:.0} us |", per_request_us(cpu[0]));
    println!("| both miners' CPU per request | {:.0} us |", per_request_us(cpu[1] + cpu[2]));
    println!("| matches decided | {} |", summary.matches.len());
    println!("| ledger tip height | {} |", tip.height);
    let (first, last) = (rss[rss.len() / 4], *rss.last().expect("samples"));
    println!(
        "| resident MiB at 1/4 of the run, at the end | {first:.1}, {last:.1} ({:+.1}%) |",
        (last / first - 1.0) * 100.0
    );
    assert!(snapshot.attempts > 0 && snapshot.failed == 0, "perfect miners on loopback never fail: {snapshot:?}");
}
