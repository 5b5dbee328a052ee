//! Disk of a validator that prunes old bodies (`scripts/bench-prune.sh`), over a
//! simulated month of a subnet: `AF_PRUNE_VALIDATORS` logs (default 64) each sealing a
//! block of two 5 to 60 kB transcripts per slot, `AF_PRUNE_BLOCKS_PER_DAY` slots a day
//! (default 24: the subnet's 7,200 a day scaled down 300x, every proportion kept), for
//! `AF_PRUNE_DAYS` days (30), into one real redb store (fsync'd appends, one batch per
//! log per day). At each day's end the validator prunes every other log below its window
//! of `AF_PRUNE_WINDOW_DAYS` (1), as `[archive] keep_days` does after a publish.
//! Prints the store's size against own log + window x traffic + headers and leaf hashes
//! (their payload bytes), the same scaled back to 7,200 blocks a day, and the bytes a
//! reader fetches back from the archive to show a page of 20 old transcripts.
//!
//! Without `--bench` (as `cargo test --all-targets` runs it) it is a tiny smoke run.

#[allow(dead_code)] // the benchmarks use part of the tests' support
#[path = "../tests/support/match_scenarios.rs"]
mod match_scenarios;
#[allow(dead_code)]
#[path = "../tests/support/network_sim.rs"]
mod network_sim;
use af::bytes::ValidatorKey;
use af::ledger::block::{seal, SealedBlock, Tip};
use af::ledger::demo::demo_events;
use af::ledger::{LedgerKey, Store};
use network_sim::SimRng;

const START_MS: u64 = 1_790_000_000_000;
const DAY_MS: u64 = 86_400_000;
/// Blocks a day on the subnet: one every 12 s.
const REAL_BLOCKS_PER_DAY: u64 = 7_200;

fn setting(name: &str, full: u64, smoke: u64, bench: bool) -> u64 {
    match std::env::var(name).ok().and_then(|v| v.parse().ok()) {
        Some(value) => value,
        None if bench => full,
        None => smoke,
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let n_validators = setting("AF_PRUNE_VALIDATORS", 64, 4, bench) as usize;
    let days = setting("AF_PRUNE_DAYS", 30, 3, bench);
    let per_day = setting("AF_PRUNE_BLOCKS_PER_DAY", 24, 4, bench);
    let window = setting("AF_PRUNE_WINDOW_DAYS", 1, 1, bench);
    // On the project's disk (AF_BENCH_DIR elsewhere), as the other benchmarks' stores.
    let dir = std::env::var_os("AF_BENCH_DIR")
        .map_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data"), Into::into)
        .join("prune");
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::create(&dir).expect("a store");
    let keys: Vec<LedgerKey> = (0..n_validators)
        .map(|i| {
            let mut seed = [0u8; 32];
            seed[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
            seed[8..16].copy_from_slice(b"af-prune");
            LedgerKey::from_seed(seed)
        })
        .collect();
    let validators: Vec<ValidatorKey> = keys.iter().map(LedgerKey::validator).collect();
    let mut tips: Vec<Option<Tip>> = vec![None; n_validators];
    // Every block's size, per log: what the archive's bundles hold.
    let mut sizes: Vec<Vec<u64>> = vec![Vec::new(); n_validators];
    let mut rng = SimRng::new(58);
    let (mut record_bytes, mut pruned_blocks) = (0u64, 0u64);
    // The store's groups (256 blocks, 51 minutes of the subnet's traffic); at 24 blocks a
    // day a group is 10 days, so pruning trails the window further than on the subnet:
    // the store is compared with what it holds (the others' blocks left whole, as
    // pruned), and the subnet's figure takes the window as it is there.
    let group_blocks = setting(
        "AF_PRUNE_GROUP_BLOCKS",
        af::ledger::store::PRUNED_GROUP_BLOCKS,
        af::ledger::store::PRUNED_GROUP_BLOCKS,
        bench,
    );
    let started = std::time::Instant::now();
    // The store file's size after each day's prune.
    let mut growth: Vec<(u64, u64)> = Vec::new();
    for day in 0..days {
        for (i, key) in keys.iter().enumerate() {
            let mut batch: Vec<SealedBlock> = Vec::with_capacity(per_day as usize);
            for slot in 0..per_day {
                let height = tips[i].map_or(0, |t| t.height + 1);
                let time_ms = START_MS + day * DAY_MS + slot * (DAY_MS / per_day);
                let bytes = 5_000 + rng.below(55_001) as usize;
                let sealed =
                    seal(key.signing_key(), tips[i].as_ref(), time_ms, demo_events(&validators[i], height, 2, bytes))
                        .expect("a block");
                tips[i] = Some(sealed.tip());
                sizes[i].push(sealed.bytes().len() as u64);
                batch.push(sealed);
            }
            let (_, refused) = store.append_batch(&batch).expect("appended");
            assert!(refused.is_none(), "{refused:?}");
        }
        // The day's end: every other log is pruned below the window (blocks are dated in
        // slot order, so the first `(day + 1 - window) * per_day` are older than it).
        let below = (day + 1).saturating_sub(window) * per_day;
        for validator in &validators[1..] {
            let pruned = store
                .prune_in_groups(validator, below, "s3://bench/archive", group_blocks, &mut |_| {})
                .expect("pruned");
            record_bytes += pruned.n_record_bytes;
            pruned_blocks += pruned.n_blocks;
        }
        let file = std::fs::metadata(dir.join(af::ledger::store::STORE_FILE)).map_or(0, |m| m.len());
        growth.push((day + 1, file));
    }
    let seconds = started.elapsed().as_secs_f64();
    let file = dir.join(af::ledger::store::STORE_FILE);
    let size = |path: &std::path::Path| std::fs::metadata(path).expect("the store file").len();
    let before_compact = size(&file);
    drop(store);
    let (_, compacted, _) = Store::compact(&dir).expect("compacted");
    let own: u64 = sizes[0].iter().sum();
    // What the store holds: our log, the others' blocks it keeps whole, their records.
    let store = Store::open_read_only(&dir).expect("the store");
    let kept_whole: u64 = validators[1..]
        .iter()
        .zip(&sizes[1..])
        .map(|(validator, log)| {
            let below = store.pruned_below(validator).expect("read") as usize;
            log[below..].iter().sum::<u64>()
        })
        .sum();
    drop(store);
    let held = own + kept_whole + record_bytes;
    let ratio = compacted as f64 / held as f64;
    // The subnet: 7,200 blocks a day, pruning trailing the window by a group (51 min);
    // the same bytes per block as here, so each term scales by the blocks a day.
    let scale = REAL_BLOCKS_PER_DAY as f64 / per_day as f64;
    let others = (n_validators - 1) as f64;
    let per_log_day = sizes[1..].iter().flatten().sum::<u64>() as f64 / (others * days as f64);
    let records_per_log_day = record_bytes as f64 / pruned_blocks.max(1) as f64 * per_day as f64;
    let subnet_own = own as f64 * scale;
    let subnet_window = others * window as f64 * per_log_day * scale;
    let subnet_records = others * days.saturating_sub(window) as f64 * records_per_log_day * scale;
    let subnet = subnet_own + subnet_window + subnet_records;
    let everything: u64 = sizes.iter().flatten().sum();
    let gb = |bytes: f64| bytes / 1e9;
    println!(
        "## a validator's store after {days} days of {n_validators} logs, window {window} day(s), {per_day} blocks a day, groups of {group_blocks} ({seconds:.0} s)"
    );
    println!("| the store holds | bytes | / held |");
    println!("|---|---:|---:|");
    let row = |what: &str, bytes: u64| println!("| {what} | {bytes} | {:.3} |", bytes as f64 / held as f64);
    row("own log + the others' blocks kept whole + the pruned blocks' records (payload)", held);
    row("  of which own log", own);
    row("  of which the others' blocks kept whole", kept_whole);
    row(&format!("  of which {pruned_blocks} pruned blocks' records"), record_bytes);
    row("store file", before_compact);
    row("store file, compacted", compacted);
    row("every log whole (no pruning), payload", everything);
    println!();
    println!("| on the subnet (7,200 blocks a day), per validator after {days} days | GB |");
    println!("|---|---:|");
    println!("| own log | {:.1} |", gb(subnet_own));
    println!("| the others' window of {window} day(s), whole | {:.1} |", gb(subnet_window));
    println!("| the others' older blocks as records | {:.1} |", gb(subnet_records));
    println!("| own log + window x traffic + headers and leaf hashes | {:.1} |", gb(subnet));
    println!("| the same x the store's measured overhead ({ratio:.3}) | {:.1} |", gb(subnet * ratio));
    println!("| every log whole, no pruning | {:.1} |", gb(everything as f64 * scale));
    println!();
    println!("| after day | store file, bytes |");
    println!("|---:|---:|");
    for (day, file) in growth.iter().filter(|(day, _)| day % 5 == 0 || *day <= 3) {
        println!("| {day} | {file} |");
    }

    // A page of 20 old transcripts (09's page): the reader fetches each pruned block's
    // whole bundle (16 blocks) back from the archive. One match's entries sit in
    // consecutive blocks of one log (two transcripts a block); scattered ones each in a
    // block of its own log and day.
    let bundle = |log: &[u64], height: u64| -> u64 {
        let n = height / 16;
        log[(n * 16) as usize..((n * 16 + 16) as usize).min(log.len())].iter().map(|s| s + 4).sum()
    };
    let one_match: u64 = {
        let log = &sizes[1];
        let mut bundles: Vec<u64> = (0..10u64).map(|h| h / 16).collect();
        bundles.dedup();
        bundles.iter().map(|n| bundle(log, n * 16)).sum()
    };
    let scattered: u64 = (0..20usize)
        .map(|i| {
            let log = &sizes[1 + i % (n_validators - 1)];
            let old = (days.saturating_sub(window) * per_day).max(1);
            bundle(log, rng.below(old))
        })
        .sum();
    println!();
    println!("| a page of 20 old transcripts fetched back from the archive | bytes | per transcript shown |");
    println!("|---|---:|---:|");
    println!("| one match's (10 consecutive blocks of one log) | {one_match} | {} |", one_match / 20);
    println!("| scattered (20 blocks of different logs and days) | {scattered} | {} |", scattered / 20);
    let _ = std::fs::remove_dir_all(&dir);
}
